//===- AutoTune.cpp - "auto" ZeRO settings from a cost model --------------===//
//
// DeepSpeed leaves "auto" to the Hugging Face Trainer, which fills in sizes
// from the hidden width. zcc picks them from a cost model of the target: a
// collective of S bytes takes latency + S / bandwidth, a parameter of a
// micro-batch of T tokens costs 2 T flops forward at the target's peak.
//   reduce_bucket_size, allgather_bucket_size: the smallest bucket whose
//       latency is at most 5% of its time (S >= 19 latency bandwidth),
//       no larger than the model;
//   stage3_prefetch_bucket_size: the smallest bucket whose gather hides
//       behind the compute of as many parameters (latency + P b / bandwidth
//       <= 2 T P / peak), and at least the largest parameter;
//   stage3_param_persistence_threshold: parameters whose gather would be
//       mostly latency (P b / bandwidth < latency) stay whole, as long as
//       all of them together take at most 1% of the device's memory;
//   stage3_max_live_parameters, stage3_max_reuse_distance: what 10% of the
//       device's memory holds in the compute type.
// The chosen values replace "auto" in `zcc.config`; `zcc.auto_tuned` records
// each with the reason, for the report.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/Transforms/ConfigValues.h"
#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

namespace zcc::zdist {
#define GEN_PASS_DEF_AUTOTUNEPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {
namespace {

/// What the cost model knows of a machine.
struct Target {
  StringRef name;
  /// Dense bf16 matrix-multiply peak, FLOP/s.
  double peakFlops;
  /// Bus bandwidth of each collective over the data-parallel group, bytes/s.
  double allReduce, allGather, reduceScatter;
  /// Start-up cost of one collective, seconds.
  double latency;
  /// Device memory, bytes.
  double memory;
};

// H200 figures are the ones measured on the 2xH200 machines (TOOLCHAIN.md:
// bf16 GEMM 796 TFLOP/s; NCCL bus bandwidth at 256 MiB: all-reduce 299,
// all-gather 243, reduce-scatter 229 GB/s); the H100 has the same NVLink 4
// and 80 GB; "cpu" is the cpu backend's ranks as threads. The latency is
// the effective start-up cost of a collective issued from a plan (launch on
// the communication stream, events, NCCL's ramp-up below full bandwidth):
// on the 2xH200 machine an 87 MB all-reduce in the step took 825 us where
// 263 GB/s would give 330 us.
const Target kTargets[] = {
    {"h200", 796e12, 299e9, 243e9, 229e9, 100e-6, 141e9},
    {"h100", 796e12, 299e9, 243e9, 229e9, 100e-6, 80e9},
    {"cpu", 1e11, 10e9, 10e9, 10e9, 5e-6, 16e9},
};

const Target *findTarget(StringRef name) {
  for (const Target &target : kTargets)
    if (target.name == name)
      return &target;
  return nullptr;
}

bool isAuto(DictionaryAttr dict, StringRef key) {
  auto value = dict ? dict.getAs<StringAttr>(key) : StringAttr();
  return value && value.getValue() == "auto";
}

struct AutoTunePass : impl::AutoTunePassBase<AutoTunePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
    auto zero = config ? config.getAs<DictionaryAttr>("zero_optimization") : DictionaryAttr();
    static const char *const kKeys[] = {"reduce_bucket_size",
                                        "allgather_bucket_size",
                                        "stage3_prefetch_bucket_size",
                                        "stage3_param_persistence_threshold",
                                        "stage3_max_live_parameters",
                                        "stage3_max_reuse_distance",
                                        "sub_group_size"};
    if (llvm::none_of(kKeys, [&](const char *key) { return isAuto(zero, key); }))
      return;
    auto targetName = module->getAttrOfType<StringAttr>("zcc.target");
    const Target *target = findTarget(targetName ? targetName.getValue() : "h200");
    if (!target) {
      module.emitError() << "unknown target '" << targetName.getValue()
                         << "' for the cost model (targets: h200, h100, cpu)";
      return signalPassFailure();
    }

    // The model: its parameters and the tokens of a micro-batch.
    SmallVector<int64_t> sizes;
    llvm::StringSet<> seen;
    int64_t tokens = 1;
    bool lowPrecision = false;
    module.walk([&](zgraph::ParamOp param) {
      if (seen.insert(param.getName()).second)
        sizes.push_back(param.getType().getNumElements());
    });
    module.walk([&](func::FuncOp func) {
      if (func.getSymName() != "micro_step" && func.getSymName() != "main")
        return;
      for (BlockArgument argument : func.getArguments())
        if (auto type = dyn_cast<RankedTensorType>(argument.getType());
            type && isa<IntegerType>(type.getElementType()))
          tokens = std::max(tokens, type.getNumElements());
    });
    module.walk([&](Operation *op) {
      for (Type type : op->getResultTypes())
        if (auto tensor = dyn_cast<RankedTensorType>(type))
          lowPrecision |= tensor.getElementType().isBF16() || tensor.getElementType().isF16();
    });
    int64_t total = 0, largest = 1;
    for (int64_t size : sizes) {
      total += size;
      largest = std::max(largest, size);
    }
    double computeBytes = lowPrecision ? 2 : 4; // gathered parameters
    double gradBytes = 4;                       // gradient accumulators

    OpBuilder builder(module.getContext());
    SmallVector<NamedAttribute> fields(zero.getValue());
    SmallVector<NamedAttribute> notes;
    auto choose = [&](StringRef key, int64_t value, std::string why) {
      if (!isAuto(zero, key))
        return;
      for (NamedAttribute &field : fields)
        if (field.getName() == key)
          field = builder.getNamedAttr(key, builder.getI64IntegerAttr(value));
      notes.push_back(builder.getNamedAttr(
          key, builder.getStringAttr(llvm::formatv("{0} ({1})", value, why).str())));
    };
    auto bucketFor = [&](double bandwidth, double bytes) {
      double elements = 19 * target->latency * bandwidth / bytes;
      return std::max<int64_t>(1, std::min<int64_t>(total, static_cast<int64_t>(elements)));
    };
    choose("reduce_bucket_size", bucketFor(target->reduceScatter, gradBytes),
           llvm::formatv("{0}: the latency of {1:F0} us is at most 5% of a reduce-scatter of "
                         "that many fp32 elements at {2:F0} GB/s; capped at the model's {3} "
                         "elements",
                         target->name, target->latency * 1e6, target->reduceScatter / 1e9, total)
               .str());
    choose("allgather_bucket_size", bucketFor(target->allGather, computeBytes),
           llvm::formatv("{0}: the latency of {1:F0} us is at most 5% of an all-gather of "
                         "that many {2}-byte elements at {3:F0} GB/s",
                         target->name, target->latency * 1e6, static_cast<int>(computeBytes),
                         target->allGather / 1e9)
               .str());
    // Gather time a P b / B + latency against compute 2 T P / F.
    double computePerElement = 2.0 * static_cast<double>(tokens) / target->peakFlops;
    double gatherPerElement = computeBytes / target->allGather;
    int64_t hidden = computePerElement > gatherPerElement
                         ? static_cast<int64_t>(std::ceil(
                               target->latency / (computePerElement - gatherPerElement)))
                         : largest;
    choose("stage3_prefetch_bucket_size", std::max(hidden, largest),
           llvm::formatv("{0}: a gather of at least {1} elements hides behind the {2:e} s of "
                         "compute per element of a {3}-token micro-batch "
                         "{4}and a bucket holds the largest parameter ({5})",
                         target->name, hidden, computePerElement, tokens,
                         computePerElement > gatherPerElement ? ""
                                                              : "(it cannot: the link is slower "
                                                                "than the compute) ",
                         largest)
               .str());
    int64_t latencyBound = static_cast<int64_t>(target->latency * target->allGather / computeBytes);
    std::vector<int64_t> sorted(sizes.begin(), sizes.end());
    llvm::sort(sorted);
    int64_t threshold = 0;
    double kept = 0;
    for (int64_t size : sorted) {
      if (size > latencyBound || (kept + size) * computeBytes > 0.01 * target->memory)
        break;
      kept += size;
      threshold = size;
    }
    choose("stage3_param_persistence_threshold", threshold,
           llvm::formatv("{0}: gathering a parameter of up to {1} elements is mostly latency; "
                         "the ones kept whole take {2} bytes, within 1% of device memory",
                         target->name, latencyBound, static_cast<int64_t>(kept * computeBytes))
               .str());
    int64_t live = static_cast<int64_t>(0.1 * target->memory / computeBytes);
    choose("stage3_max_live_parameters", live,
           llvm::formatv("{0}: 10% of the {1:F0} GB of device memory in {2}-byte elements",
                         target->name, target->memory / 1e9, static_cast<int>(computeBytes))
               .str());
    choose("stage3_max_reuse_distance", live,
           llvm::formatv("{0}: as stage3_max_live_parameters, so a parameter stays resident "
                         "whenever the live budget allows",
                         target->name)
               .str());
    choose("sub_group_size", std::max<int64_t>(1, total),
           "the host optimizer updates each parameter whole; one group holds the model");

    SmallVector<NamedAttribute> configFields(config.getValue());
    for (NamedAttribute &field : configFields)
      if (field.getName() == "zero_optimization")
        field = builder.getNamedAttr("zero_optimization", builder.getDictionaryAttr(fields));
    module->setAttr("zcc.config", builder.getDictionaryAttr(configFields));
    module->setAttr("zcc.auto_tuned", builder.getDictionaryAttr(notes));
  }
};

} // namespace
} // namespace zcc::zdist
