//===- zcc.cpp - The zcc compiler driver ----------------------------------===//
//
//   zcc MODEL.onnx -c CONFIG.json -o PLAN.bin [--world-size N] [--mode train|infer]
//       [--emit config|graph|train|dist|plan|plan-text] [--report[=text|json]]
//       [--input-shape NAME=D0xD1...] [--device-memory-limit 16GiB]
//
// Every failure exits non-zero with one message on standard error.
//
//===----------------------------------------------------------------------===//

#include "compiler/Import/Config/ConfigAttr.h"
#include "compiler/Import/Config/DeepSpeedConfig.h"
#include "compiler/Import/Onnx/OnnxImporter.h"
#include "compiler/Conversion/Passes.h"
#include "compiler/Pipelines/Registration.h"
#include "compiler/Target/PlanWriter.h"
#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Plan/Transforms/Passes.h"
#include "plan.pb.h"
#include "runtime/Plan/PlanLoader.h"
#include "runtime/Plan/PlanPrinter.h"
#include "runtime/Support/File.h"
#include "runtime/Support/OutOfMemory.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

using namespace llvm;

namespace {

constexpr const char *kProducer = "zcc 0.1.0";

enum class EmitKind { None, Config, Graph, Train, Dist, Plan, PlanText };
enum class Mode { Auto, Train, Infer };

cl::OptionCategory zccCategory("zcc options");

cl::opt<std::string> modelPath(cl::Positional, cl::desc("<MODEL.onnx>"), cl::init(""),
                               cl::cat(zccCategory));
cl::opt<std::string> configPath("c", cl::desc("DeepSpeed JSON config"),
                                cl::value_desc("CONFIG.json"), cl::init(""),
                                cl::cat(zccCategory));
cl::alias configPathLong("config", cl::desc("Alias for -c"), cl::aliasopt(configPath),
                         cl::cat(zccCategory));
cl::opt<std::string> outputPath("o", cl::desc("Output plan"), cl::value_desc("PLAN.bin"),
                                cl::init(""), cl::cat(zccCategory));
cl::opt<int64_t> worldSize("world-size",
                           cl::desc("Number of ranks (default: nodes * gpus-per-node, or 1)"),
                           cl::init(0), cl::cat(zccCategory));
cl::opt<int64_t> nodes("nodes", cl::desc("Number of nodes"), cl::init(0),
                       cl::cat(zccCategory));
cl::opt<int64_t> gpusPerNode("gpus-per-node", cl::desc("GPUs per node"), cl::init(0),
                             cl::cat(zccCategory));
cl::opt<Mode> mode("mode", cl::desc("Plan kind (default: train if the model has a loss and "
                                    "the config an optimizer)"),
                   cl::values(clEnumValN(Mode::Train, "train", "a training plan"),
                              clEnumValN(Mode::Infer, "infer", "an inference plan")),
                   cl::init(Mode::Auto), cl::cat(zccCategory));
cl::opt<EmitKind> emit(
    "emit", cl::desc("Print a stage to standard output instead of writing a plan"),
    cl::values(clEnumValN(EmitKind::Config, "config", "the resolved config (JSON)"),
               clEnumValN(EmitKind::Graph, "graph", "the imported zgraph module"),
               clEnumValN(EmitKind::Train, "train", "the training step in zgraph"),
               clEnumValN(EmitKind::Dist, "dist", "the distributed zdist module"),
               clEnumValN(EmitKind::Plan, "plan", "the zplan module"),
               clEnumValN(EmitKind::PlanText, "plan-text", "the plan as zplan dump prints it")),
    cl::init(EmitKind::None), cl::cat(zccCategory));
cl::opt<std::string> report("report", cl::desc("Print the memory and communication report "
                                               "(text or json)"),
                            cl::ValueOptional, cl::value_desc("text|json"), cl::init(""),
                            cl::cat(zccCategory));
cl::list<std::string> inputShapes("input-shape",
                                  cl::desc("Bind an input's dynamic dimensions"),
                                  cl::value_desc("NAME=D0xD1..."), cl::cat(zccCategory));
cl::opt<std::string> lossKind("loss",
                              cl::desc("Add a loss on the model's first output for training "
                                       "(for a model exported without one): cross-entropy "
                                       "against an i64 input 'labels', or mse"),
                              cl::value_desc("cross-entropy|mse"), cl::init(""),
                              cl::cat(zccCategory));
cl::opt<std::string> target("target",
                            cl::desc("The machine the cost model picks \"auto\" settings for"),
                            cl::value_desc("h200|h100|cpu"), cl::init("h200"),
                            cl::cat(zccCategory));
cl::opt<std::string> inferPrecision(
    "infer-precision",
    cl::desc("The compute type of an inference plan (the fp32 weights are cast where they "
             "are used); the config's fp16 and bf16 sections set a training plan's"),
    cl::value_desc("fp32|bf16|fp16"), cl::init("fp32"), cl::cat(zccCategory));
cl::opt<bool> accumulatingGradients(
    "accumulating-gradients",
    cl::desc("Keep gradient accumulators between steps even with gradient_accumulation_steps "
             "1, so that zrun --grad-accum can raise the count at run time (by default such "
             "a plan's gradients share the activations' memory)"),
    cl::init(false), cl::cat(zccCategory));
cl::opt<std::string> deviceMemoryLimit("device-memory-limit",
                                       cl::desc("Per-GPU memory the plan must fit"),
                                       cl::value_desc("16GiB"), cl::init(""),
                                       cl::cat(zccCategory));
enum class Recompute { Auto, Always, Never };
cl::opt<Recompute> recomputeOutputs(
    "recompute",
    cl::desc("Training: whether GELU and layer norm outputs the backward pass reads are "
             "recomputed there from their inputs, instead of kept from the forward pass "
             "(about 7.6 GB less on gpt2-xl at micro-batch 8, about 3% more time a step)"),
    cl::values(clEnumValN(Recompute::Auto, "auto",
                          "only where the plan that keeps them would not fit the device: "
                          "--device-memory-limit, else the memory of --target's GPU "
                          "(default)"),
               clEnumValN(Recompute::Always, "always", "always recompute them"),
               clEnumValN(Recompute::Never, "never", "always keep them")),
    cl::init(Recompute::Auto), cl::cat(zccCategory));
cl::opt<std::string> deviceMemoryReserve(
    "device-memory-reserve",
    cl::desc("Device memory each rank needs beyond the plan's arena (the CUDA context, "
             "cuBLASLt, cuDNN, the kernels' workspace, NCCL's buffers), which "
             "--device-memory-limit and --report count; default: what the runtime was "
             "measured to take on --target"),
    cl::value_desc("1GiB"), cl::init(""), cl::cat(zccCategory));

[[noreturn]] void fail(const Twine &message) {
  errs() << "zcc: error: " << message << "\n";
  std::exit(1);
}

/// `world`, where zrun can run that many ranks (its plans are refused past
/// kMaxWorldSize, as `zrun --nproc` is).
int64_t checkedWorldSize(int64_t world) {
  if (world > zcc::kMaxWorldSize)
    fail("the world size " + Twine(world) + " is more than the " +
         Twine(zcc::kMaxWorldSize) + " ranks a job can have; lower --world-size, or " +
         "--nodes * --gpus-per-node");
  return world;
}

int64_t resolveWorldSize() {
  bool haveNodes = nodes.getNumOccurrences() || gpusPerNode.getNumOccurrences();
  if (haveNodes && (nodes < 1 || gpusPerNode < 1))
    fail("--nodes and --gpus-per-node go together and must both be at least 1");
  if (worldSize.getNumOccurrences() && worldSize < 1)
    fail("--world-size must be at least 1, got " + Twine(worldSize));
  if (haveNodes) {
    int64_t product = 0;
    if (__builtin_mul_overflow(int64_t(nodes), int64_t(gpusPerNode), &product))
      fail("--nodes " + Twine(nodes) + " * --gpus-per-node " + Twine(gpusPerNode) +
           " overflows a 64-bit rank count");
    if (worldSize.getNumOccurrences() && worldSize != product)
      fail("--world-size " + Twine(worldSize) + " disagrees with --nodes " + Twine(nodes) +
           " * --gpus-per-node " + Twine(gpusPerNode) + " = " + Twine(product) +
           "; give one or the other");
    return checkedWorldSize(product);
  }
  return checkedWorldSize(worldSize.getNumOccurrences() ? static_cast<int64_t>(worldSize) : 1);
}

/// Each micro-step of a training plan feeds train_micro_batch_size_per_gpu
/// rows of every data input the model reads: a model exported with another
/// (static) batch is an error naming both files and the config's key.
void checkMicroBatch(mlir::ModuleOp module, const zcc::config::Json &config,
                     const std::string &configText) {
  int64_t micro = config["train_micro_batch_size_per_gpu"].get<int64_t>();
  zcc::config::JsonParseError parseError;
  std::optional<zcc::config::JsonDocument> document =
      zcc::config::JsonDocument::parse(configText, parseError);
  bool given = document && document->root().is_object() &&
               document->root().contains("train_micro_batch_size_per_gpu");
  std::string key = given ? "train_micro_batch_size_per_gpu" : "train_batch_size";
  zcc::config::SourcePos pos = document ? document->positionOf(key) : zcc::config::SourcePos();
  module.walk([&](mlir::func::FuncOp func) {
    if (func.isExternal())
      return;
    for (mlir::BlockArgument arg : func.getArguments()) {
      auto type = dyn_cast<mlir::RankedTensorType>(arg.getType());
      auto name = func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), "zgraph.name");
      if (!type || !name || arg.use_empty())
        continue;
      if (type.getRank() > 0 && type.getDimSize(0) == micro)
        continue;
      std::string batch = type.getRank() == 0 ? std::string("no batch dimension")
                                              : "batch " + std::to_string(type.getDimSize(0));
      fail(modelPath + ": input '" + name.getValue() + "' has " + batch + ", but " + configPath +
           ":" + Twine(pos.line) + ":" + Twine(pos.column) + ": " +
           (given ? "train_micro_batch_size_per_gpu is " + Twine(micro)
                  : "train_batch_size gives a micro-batch of " + Twine(micro) + " per GPU") +
           "; export the model with that batch (or a dynamic one), or set "
           "train_micro_batch_size_per_gpu (and the batch triple) to " +
           (type.getRank() == 0 ? std::string("match") : std::to_string(type.getDimSize(0))));
    }
  });
}

/// The ranks of `plan`'s mesh.
int64_t worldSizeOf(const zcc::plan::Plan &plan) {
  int64_t world = 1;
  for (int64_t size : plan.mesh().axis_sizes())
    world *= size;
  return world;
}

/// Device memory a rank of the cuda backend takes outside the plan's arena:
/// the driver's context with the kernels loaded, cuBLASLt's and cuDNN's
/// handles and engines, the CUDA graphs, and the backend's 128 MiB
/// workspace. Measured on an H200 (CUDA 13, cuDNN 9.14; zrun
/// --memory-report's "in use" less its "allocated", one rank): 680 to 711
/// MiB over gpt2-xl's ZeRO-3 and offload training plans and its inference
/// plan; rounded up.
constexpr int64_t kCudaRuntimeBytes = int64_t{768} << 20;
/// What an NCCL communicator over NVLink takes for its channels' buffers
/// (NCCL's maintainers report about 1 GB a communicator on 8 H100s with ring
/// and tree over 32 channels); only a rank with peers makes one.
constexpr int64_t kNcclCommunicatorBytes = int64_t{1} << 30;

/// The most a byte size may be: 1 EiB is more than any device holds, and
/// sums of such sizes with a plan's arena stay within int64.
constexpr int64_t kMaxByteSize = int64_t(1) << 60;
/// What parseByteSize returns for a size above kMaxByteSize.
constexpr int64_t kByteSizeTooLarge = -2;
int64_t parseByteSize(StringRef text);

/// The bytes --`flag` gives; fails with what is wrong with `text`.
int64_t byteSizeOption(StringRef flag, StringRef text, StringRef examples, bool allowZero) {
  int64_t bytes = parseByteSize(text);
  if (bytes == kByteSizeTooLarge)
    fail("--" + flag + " " + text + ": more than 1 EiB (2^60 bytes); expected a size such as " +
         examples);
  if (bytes < 0 || (bytes == 0 && !allowZero))
    fail("--" + flag + " " + text + ": expected a size such as " + examples);
  return bytes;
}

/// The device memory each rank needs beyond its arena: --device-memory-reserve,
/// or what the runtime takes on --target (nothing on the cpu backend, whose
/// ranks' memory is the arena).
int64_t runtimeReserveBytes(const zcc::plan::Plan &plan) {
  if (!deviceMemoryReserve.empty())
    return byteSizeOption("device-memory-reserve", deviceMemoryReserve, "1GiB, 512MiB or 0",
                          /*allowZero=*/true);
  if (target == "cpu")
    return 0;
  return kCudaRuntimeBytes + (worldSizeOf(plan) > 1 ? kNcclCommunicatorBytes : 0);
}

/// What --recompute chose for a training plan, for the report.
std::string recomputeChoice;

/// `bytes` as "12.34 GiB".
std::string formatGiB(int64_t bytes) {
  return llvm::formatv("{0:F2} GiB", bytes / 1073741824.0).str();
}

/// `bytes` in the largest of GiB, MiB and KiB that is at least 1.
std::string formatSize(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30))
    return formatGiB(bytes);
  if (bytes >= (int64_t{1} << 20))
    return llvm::formatv("{0:F1} MiB", bytes / 1048576.0).str();
  return llvm::formatv("{0:F1} KiB", bytes / 1024.0).str();
}

/// The device bytes a rank may use: --device-memory-limit, else the memory
/// of --target's GPU as CUDA reports it; -1 for the cpu target (no limit).
int64_t deviceMemoryBudget() {
  if (!deviceMemoryLimit.empty())
    return byteSizeOption("device-memory-limit", deviceMemoryLimit, "16GiB, 80GB or 17179869184",
                          /*allowZero=*/false);
  if (target == "h200")
    return int64_t{143771} << 20;
  if (target == "h100")
    return int64_t{81559} << 20;
  return -1;
}

/// Bytes each collective kind moves per optimizer step on every rank of
/// `plan`: the size of the whole tensor it reduces or gathers (what DeepSpeed
/// counts as the communication volume), times how often its program runs in
/// a step (micro_step once per micro-batch of the accumulation count).
std::map<std::string, int64_t> commBytesPerStep(const zcc::plan::Plan &plan) {
  std::map<std::string, int64_t> bytes;
  int64_t microSteps = plan.has_training()
                           ? std::max<int64_t>(1, plan.training().gradient_accumulation_steps())
                           : 1;
  for (const zcc::plan::Program &program : plan.programs()) {
    int64_t times = program.name() == "micro_step"                            ? microSteps
                    : program.name() == "init" || program.name() == "zero_grads" ? 0
                                                                              : 1;
    for (const zcc::plan::Instruction &instruction : program.instructions()) {
      const std::string &kernel = instruction.kernel();
      if (kernel != "all_reduce" && kernel != "reduce_scatter" && kernel != "all_gather")
        continue;
      uint32_t whole = kernel == "all_gather" ? instruction.outputs(0) : instruction.inputs(0);
      bytes[kernel] += times * static_cast<int64_t>(plan.buffers(whole).bytes());
    }
  }
  return bytes;
}

/// The memory plan per category and the communication per step, for every
/// rank, as text or JSON (DESIGN.md, --report). Every rank runs the same
/// plan on its shard, so the figures are the same for each.
void printReport(const zcc::plan::Plan &plan, bool json) {
  int64_t world = worldSizeOf(plan);
  std::map<std::string, int64_t> comm = commBytesPerStep(plan);
  int64_t reserve = runtimeReserveBytes(plan);
  if (json) {
    zcc::config::Json ranks = zcc::config::Json::array();
    // Every rank runs the same plan on its shard, so the entries differ only
    // in "rank": each is listed up to 4096 ranks, rank 0 alone above
    // ("world_size" says how many there are; --world-size 2^30 allocated
    // entries until it aborted, after 85 s).
    constexpr int64_t kMaxListedRanks = 4096;
    int64_t listed = world > kMaxListedRanks ? 1 : world;
    if (listed < world)
      errs() << "zcc: note: --report=json lists rank 0 alone: the " << world
             << " ranks' figures are the same\n";
    for (int64_t r = 0; r < listed; ++r) {
      zcc::config::Json rank = {{"rank", r},
                                {"peak_device_bytes", {{"total", plan.arena_bytes()}}},
                                {"runtime_reserve_bytes", reserve},
                                {"device_total_bytes", plan.arena_bytes() + reserve},
                                {"host_bytes", {{"total", plan.host_arena_bytes()}}},
                                {"comm_bytes", zcc::config::Json::object()}};
      if (plan.nvme_bytes() > 0)
        rank["nvme_bytes"] = {{"total", plan.nvme_bytes()}};
      for (const zcc::plan::MemoryCategory &category : plan.memory())
        rank[category.space() == zcc::plan::HOST   ? "host_bytes"
             : category.space() == zcc::plan::NVME ? "nvme_bytes"
                                                   : "peak_device_bytes"][category.category()] =
            category.bytes();
      for (const auto &[kind, bytes] : comm)
        rank["comm_bytes"][kind] = bytes;
      ranks.push_back(rank);
    }
    zcc::config::Json document = {{"ranks", ranks}, {"world_size", world}};
    for (const auto &[key, why] : plan.auto_tuned())
      document["auto_tuned"][key] = why;
    if (!recomputeChoice.empty())
      document["recompute"] = recomputeChoice;
    outs() << document.dump(2) << "\n";
    return;
  }
  outs() << "memory plan, per rank (bytes; each of the " << world << " rank"
         << (world == 1 ? "" : "s") << ")\n";
  outs() << llvm::format("  %-24s %14lld\n", static_cast<const char *>("arena (total)"),
                         (long long)plan.arena_bytes());
  for (const zcc::plan::MemoryCategory &category : plan.memory())
    if (category.space() == zcc::plan::DEVICE)
      outs() << llvm::format("  %-24s %14lld\n", category.category().c_str(),
                             (long long)category.bytes());
  if (reserve > 0) {
    outs() << "device memory beyond the arena, per rank (bytes; --device-memory-reserve)\n";
    outs() << llvm::format("  %-24s %14lld\n", static_cast<const char *>("runtime reserve"),
                           (long long)reserve);
    outs() << llvm::format("  %-24s %14lld\n", static_cast<const char *>("device (total)"),
                           (long long)(plan.arena_bytes() + reserve));
  }
  if (plan.host_arena_bytes() > 0) {
    outs() << "host memory (pinned, offloaded state), per rank (bytes)\n";
    outs() << llvm::format("  %-24s %14lld\n", static_cast<const char *>("arena (total)"),
                           (long long)plan.host_arena_bytes());
    for (const zcc::plan::MemoryCategory &category : plan.memory())
      if (category.space() == zcc::plan::HOST)
        outs() << llvm::format("  %-24s %14lld\n", category.category().c_str(),
                               (long long)category.bytes());
  }
  if (plan.nvme_bytes() > 0) {
    outs() << "NVMe swap file (nvme_path), per rank (bytes)\n";
    outs() << llvm::format("  %-24s %14lld\n", static_cast<const char *>("file (total)"),
                           (long long)plan.nvme_bytes());
    for (const zcc::plan::MemoryCategory &category : plan.memory())
      if (category.space() == zcc::plan::NVME)
        outs() << llvm::format("  %-24s %14lld\n", category.category().c_str(),
                               (long long)category.bytes());
  }
  if (!comm.empty()) {
    outs() << "communication per " << (plan.mode() == "train" ? "optimizer step" : "batch")
           << ", per rank (bytes)\n";
    for (const auto &[kind, bytes] : comm)
      outs() << llvm::format("  %-24s %14lld\n", kind.c_str(), (long long)bytes);
  }
  if (!plan.auto_tuned().empty()) {
    outs() << "\"auto\" settings picked by the cost model\n";
    std::map<std::string, std::string> sorted(plan.auto_tuned().begin(),
                                              plan.auto_tuned().end());
    for (const auto &[key, why] : sorted)
      outs() << "  zero_optimization." << key << " = " << why << "\n";
  }
  if (!recomputeChoice.empty())
    outs() << "GELU and layer norm outputs (--recompute): " << recomputeChoice << "\n";
}

/// The pipeline's schedule and each stage's memory (DESIGN.md, --report):
/// the bubble fraction is the idle share of the step when the schedule runs
/// on the stages' estimated costs (`flops`: forward and backward flops per
/// stage, from the dist phase); the memory is each stage's arena.
void printPipelineReport(const zcc::plan::Plan &plan,
                         const std::vector<std::pair<int64_t, int64_t>> &flops, bool json) {
  const zcc::plan::Pipeline &pipeline = plan.pipeline();
  int64_t stages = pipeline.stages_size();
  int64_t world = worldSizeOf(plan);
  int64_t dataParallel = world / std::max<int64_t>(1, stages);
  // A stage's bytes of one category, in device (or host) memory.
  auto category = [](const zcc::plan::PipelineStage &stage, llvm::StringRef name,
                     bool host = false) -> int64_t {
    zcc::plan::MemorySpace space = host ? zcc::plan::HOST : zcc::plan::DEVICE;
    for (const zcc::plan::MemoryCategory &entry : stage.memory())
      if (entry.category() == name && entry.space() == space)
        return static_cast<int64_t>(entry.bytes());
    return 0;
  };
  auto cost = [&](int64_t s, bool backward) -> int64_t {
    if (s >= static_cast<int64_t>(flops.size()))
      return 0;
    return backward ? flops[s].second : flops[s].first;
  };
  auto instructions = [](const zcc::plan::PipelineStage &stage) {
    std::string text;
    for (const zcc::plan::PipelineStep &step : stage.steps())
      text += (text.empty() ? "" : " ") + step.program();
    return text;
  };
  if (json) {
    zcc::config::Json list = zcc::config::Json::array();
    for (int64_t s = 0; s < stages; ++s) {
      const zcc::plan::PipelineStage &stage = pipeline.stages(s);
      zcc::config::Json ranks = zcc::config::Json::array();
      for (int64_t d = 0; d < dataParallel; ++d)
        ranks.push_back(s * dataParallel + d);
      zcc::config::Json bytes = {{"total", stage.arena_bytes()}};
      zcc::config::Json host = {{"total", stage.host_arena_bytes()}};
      zcc::config::Json nvme = {{"total", stage.nvme_bytes()}};
      for (const zcc::plan::MemoryCategory &entry : stage.memory())
        (entry.space() == zcc::plan::HOST   ? host
         : entry.space() == zcc::plan::NVME ? nvme
                                            : bytes)[entry.category()] = entry.bytes();
      zcc::config::Json item = {{"stage", s},
                                {"ranks", ranks},
                                {"activation_buffers", stage.activation_buffers()},
                                {"forward_flops", cost(s, false)},
                                {"backward_flops", cost(s, true)},
                                {"peak_device_bytes", bytes},
                                {"steps", stage.steps_size()},
                                {"programs", instructions(stage)}};
      if (stage.host_arena_bytes() > 0)
        item["host_bytes"] = host;
      if (stage.nvme_bytes() > 0)
        item["nvme_bytes"] = nvme;
      list.push_back(item);
    }
    zcc::config::Json document = {{"pipeline",
                                   {{"schedule", pipeline.schedule()},
                                  {"num_stages", stages},
                                  {"micro_batches", pipeline.micro_batches()},
                                  {"bubble_fraction", pipeline.bubble_fraction()},
                                  {"stages", list}}}};
    if (!recomputeChoice.empty())
      document["recompute"] = recomputeChoice;
    outs() << document.dump(2) << "\n";
    return;
  }
  outs() << "pipeline: " << stages << " stages x " << dataParallel << " data-parallel, "
         << pipeline.schedule() << " schedule, " << pipeline.micro_batches()
         << " micro-batches\n";
  outs() << llvm::format("  bubble fraction %.4f (predicted idle share of the step)\n",
                         pipeline.bubble_fraction());
  if (!recomputeChoice.empty())
    outs() << "GELU and layer norm outputs (--recompute): " << recomputeChoice << "\n";
  outs() << "memory per stage, per rank (bytes; the stage's arena)\n";
  outs() << "  stage           arena     parameters      gradients    optim state    activations"
            "  pipeline bufs  buffers    fwd+bwd flops\n";
  for (int64_t s = 0; s < stages; ++s) {
    const zcc::plan::PipelineStage &stage = pipeline.stages(s);
    outs() << llvm::format(
        "  %-6lld %14lld %14lld %14lld %14lld %14lld %14lld %8lld %16lld\n", (long long)s,
        (long long)stage.arena_bytes(),
        (long long)(category(stage, "parameters") + category(stage, "parameter_copies")),
        (long long)category(stage, "gradients"), (long long)category(stage, "optimizer_state"),
        (long long)category(stage, "activations"), (long long)category(stage, "pipeline_buffers"),
        (long long)stage.activation_buffers(), (long long)(cost(s, false) + cost(s, true)));
  }
  if (plan.host_arena_bytes() == 0)
    return;
  // Offloaded state: each stage's ranks hold their own stage's.
  outs() << "host memory per stage, per rank (bytes; pinned, offloaded state)\n";
  outs() << "  stage           arena     parameters    optim state      gradients    activations\n";
  for (int64_t s = 0; s < stages; ++s) {
    const zcc::plan::PipelineStage &stage = pipeline.stages(s);
    outs() << llvm::format("  %-6lld %14lld %14lld %14lld %14lld %14lld\n", (long long)s,
                           (long long)stage.host_arena_bytes(),
                           (long long)(category(stage, "parameters", true) +
                                       category(stage, "parameter_copies", true)),
                           (long long)category(stage, "optimizer_state", true),
                           (long long)category(stage, "gradients", true),
                           (long long)category(stage, "activations", true));
  }
  if (plan.nvme_bytes() == 0)
    return;
  outs() << "NVMe swap file per stage, per rank (bytes; parameters and optimizer state)\n";
  for (int64_t s = 0; s < stages; ++s)
    outs() << llvm::format("  %-6lld %14lld\n", (long long)s,
                           (long long)pipeline.stages(s).nvme_bytes());
}

/// Stages of the compiler that this version does not have yet fail loudly.
void rejectUnbuiltFlags() {
  if (report.getNumOccurrences() && report != "" && report != "text" && report != "json")
    fail("--report takes text or json, got '" + report + "'");
}

/// "16GiB", "16 GB", "1.5TiB", "17179869184": bytes, or -1 when unreadable.
int64_t parseByteSize(StringRef text) {
  text = text.trim();
  size_t digits = 0;
  while (digits < text.size() && (isDigit(text[digits]) || text[digits] == '.'))
    ++digits;
  double value = 0;
  if (digits == 0 || text.take_front(digits).getAsDouble(value))
    return -1;
  std::string lower = text.drop_front(digits).trim().lower();
  double scale = 0;
  if (lower.empty() || lower == "b")
    scale = 1;
  else if (lower == "kib" || lower == "k")
    scale = 1024.0;
  else if (lower == "mib" || lower == "m")
    scale = 1024.0 * 1024;
  else if (lower == "gib" || lower == "g")
    scale = 1024.0 * 1024 * 1024;
  else if (lower == "tib" || lower == "t")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (lower == "kb")
    scale = 1e3;
  else if (lower == "mb")
    scale = 1e6;
  else if (lower == "gb")
    scale = 1e9;
  else if (lower == "tb")
    scale = 1e12;
  else
    return -1;
  // Above 1 EiB is a typo, and sums with the arena would overflow int64 (a
  // reserve of 2^63 - 1024 made "-8589934592.00 GiB per rank" fit
  // --device-memory-limit 1GiB); a size that rounds down to a fraction of a
  // byte does not read as a size.
  double bytes = value * scale;
  if (!(bytes <= double(kMaxByteSize)))
    return kByteSizeTooLarge;
  if (bytes < 1 && value != 0)
    return -1;
  return static_cast<int64_t>(bytes);
}

/// --device-memory-limit: the plan's per-rank peak (its arena) and what the
/// runtime takes beside it must fit.
/// When it does not, says by how much, what takes the memory and which
/// settings would shrink it.
void checkDeviceMemoryLimit(const zcc::plan::Plan &plan) {
  if (deviceMemoryLimit.empty())
    return;
  int64_t limit = deviceMemoryBudget();
  int64_t reserve = runtimeReserveBytes(plan);
  int64_t peak = static_cast<int64_t>(plan.arena_bytes()) + reserve;
  if (peak <= limit)
    return;
  std::map<std::string, int64_t> bytes;
  for (const zcc::plan::MemoryCategory &category : plan.memory())
    if (category.space() != zcc::plan::HOST)
      bytes[category.category()] = category.bytes();
  int64_t world = worldSizeOf(plan);
  std::string message = "the plan needs " + formatGiB(peak) + " per rank, " + formatGiB(peak - limit) +
                        " over --device-memory-limit " + deviceMemoryLimit + " (runtime " +
                        formatGiB(reserve) + ", parameters " +
                        formatGiB(bytes["parameters"]) + ", gradients " + formatGiB(bytes["gradients"]) +
                        ", optimizer state " + formatGiB(bytes["optimizer_state"]) + ", activations " +
                        formatGiB(bytes["activations"]) + ")";
  std::vector<std::string> fixes;
  int64_t modelStates = bytes["parameters"] + bytes["gradients"] + bytes["optimizer_state"];
  int64_t stage = 0;
  if (auto config = zcc::config::Json::parse(plan.config_json(), nullptr, false);
      config.is_object() && config.contains("zero_optimization") &&
      config["zero_optimization"].is_object())
    stage = config["zero_optimization"].value("stage", 0);
  if (plan.mode() == "train" && world > 1 && stage < 3)
    fixes.push_back(llvm::formatv("zero_optimization.stage 3 (this plan has stage {0}) "
                                  "partitions parameters, gradients and optimizer state ({1} "
                                  "now) over the {2} ranks",
                                  stage, formatGiB(modelStates), world)
                        .str());
  if (plan.mode() == "train" && world == 1)
    fixes.push_back("more ranks (--world-size) with ZeRO stage 3 divide the " +
                    formatGiB(modelStates) + " of model state among them");
  if (bytes["activations"] > limit / 4)
    fixes.push_back("activation_checkpointing.number_checkpoints or a smaller "
                    "train_micro_batch_size_per_gpu (activations take " +
                    formatGiB(bytes["activations"]) + ")");
  if (plan.mode() == "train" && recomputeOutputs == Recompute::Never && !plan.has_pipeline())
    fixes.push_back("--recompute auto (or always) recomputes the GELU and layer norm "
                    "outputs in the backward pass instead of keeping them");
  if (plan.mode() == "train" && world > 1 && stage == 3)
    fixes.push_back("lower stage3_max_live_parameters, stage3_prefetch_bucket_size or "
                    "stage3_max_reuse_distance (fewer gathered parameters at once)");
  auto offloaded = [&](const char *section) {
    auto config = zcc::config::Json::parse(plan.config_json(), nullptr, false);
    return config.is_object() && config.contains("zero_optimization") &&
           config["zero_optimization"].is_object() &&
           config["zero_optimization"].contains(section) &&
           config["zero_optimization"][section].is_object() &&
           config["zero_optimization"][section].value("device", "none") == "cpu";
  };
  if (plan.mode() == "train" && stage >= 1 && !offloaded("offload_optimizer") &&
      bytes["optimizer_state"] > 0)
    fixes.push_back("zero_optimization.offload_optimizer.device \"cpu\" moves the optimizer "
                    "state (" + formatGiB(bytes["optimizer_state"]) + ") to host memory");
  if (stage == 3 && !offloaded("offload_param") && bytes["parameters"] > 0)
    fixes.push_back("zero_optimization.offload_param.device \"cpu\" keeps the parameter "
                    "shards (" + formatGiB(bytes["parameters"]) + ") in host memory");
  message += "; to fit: ";
  for (size_t i = 0; i < fixes.size(); ++i)
    message += (i ? "; or " : "") + fixes[i];
  fail(message);
}

/// A step lowered to its plan.
struct Lowered {
  zcc::plan::Plan plan;
  /// Each pipeline stage's estimated forward and backward flops, for the
  /// report (the plan keeps the schedule but not the cost model's figures).
  std::vector<std::pair<int64_t, int64_t>> stageFlops;
  /// GELU and layer norm outputs recomputed and their bytes, of how many
  /// could be (zgraph.recomputed); zero without recomputation.
  int64_t recomputed = 0, recomputedBytes = 0, recomputable = 0, recomputableBytes = 0;
};

/// Lowers the training or inference step in `module` through the dist and
/// plan phases to a plan the runtime accepts. With `printing`, --emit dist
/// and --emit plan print the module where they ask and exit. A failing pass
/// has printed its diagnostics: exits 1.
Lowered lowerToPlan(mlir::ModuleOp module, bool recompute, int64_t recomputeBytes,
                    bool printing) {
  // Runs one phase's passes; prints the module and exits where --emit asks
  // for what the phase gives (`stop`).
  auto phase = [&](llvm::function_ref<void(mlir::OpPassManager &)> build, EmitKind stop) {
    mlir::PassManager pipeline(module.getContext());
    build(pipeline);
    if (failed(pipeline.run(module)))
      std::exit(1);
    if (printing && emit == stop) {
      module.print(outs());
      outs().flush();
      std::exit(0);
    }
  };
  Lowered lowered;
  phase([&](mlir::OpPassManager &pm) { zcc::buildDistPipeline(pm, recompute, recomputeBytes); },
        EmitKind::Dist);
  if (auto done = module->getAttrOfType<mlir::DenseI64ArrayAttr>("zgraph.recomputed");
      done && done.size() == 4) {
    lowered.recomputed = done[0];
    lowered.recomputedBytes = done[1];
    lowered.recomputable = done[2];
    lowered.recomputableBytes = done[3];
  }
  for (auto pipeline : module.getOps<zcc::zdist::PipelineOp>())
    if (auto flops = pipeline->getAttrOfType<mlir::ArrayAttr>("flops"))
      for (mlir::Attribute entry : flops) {
        // Forward, backward and (split off by zb-h1) weight-gradient flops.
        auto passes = cast<mlir::ArrayAttr>(entry);
        int64_t backward = 0;
        for (mlir::Attribute pass : passes.getValue().drop_front())
          backward += cast<mlir::IntegerAttr>(pass).getInt();
        lowered.stageFlops.push_back({cast<mlir::IntegerAttr>(passes[0]).getInt(), backward});
      }
  phase(zcc::buildLowerToPlanPipeline, EmitKind::Plan);
  mlir::FailureOr<zcc::plan::Plan> plan = zcc::buildPlan(module);
  if (failed(plan))
    std::exit(1);
  // The runtime's own validation: a plan zcc writes is one zrun accepts.
  zcc::Status valid =
      zcc::validatePlan(*plan, outputPath.empty() ? std::string("<plan>") : outputPath.getValue());
  if (!valid.isOk())
    fail("internal error: the plan fails the runtime's validation: " + valid.message());
  lowered.plan = std::move(*plan);
  return lowered;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM initLLVM(argc, argv);
  // Out of host memory: one message and status 1, not LLVM's crash report.
  zcc::installOutOfMemoryHandler("zcc", "raise the limit or free host memory");
  llvm::install_bad_alloc_error_handler(
      [](void *, const char *, bool) { zcc::reportOutOfMemory(); });
  // A thread the pass manager's pool could not start is the process's
  // limit, not a bug: a message and status 1. Other fatal errors keep
  // LLVM's report (it aborts with a stack dump after this returns).
  llvm::install_fatal_error_handler([](void *, const char *reason, bool) {
    if (std::strstr(reason, "pthread_create failed")) {
      std::fprintf(stderr,
                   "zcc: error: %s; raise the process's limits (ulimit -u / -v) or free host "
                   "memory\n",
                   reason);
      std::fflush(nullptr);
      std::_Exit(1);
    }
    std::fprintf(stderr, "LLVM ERROR: %s\n", reason);
  });
  cl::HideUnrelatedOptions(zccCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "zcc: compile an ONNX model and a DeepSpeed config into a static plan\n\n"
      "  zcc MODEL.onnx -c CONFIG.json -o PLAN.bin [--world-size N]\n"
      "  zcc MODEL.onnx [-c CONFIG.json] --emit graph [--input-shape NAME=D0xD1...]\n"
      "  zcc --emit config -c CONFIG.json [--world-size N]\n");

  int64_t ranks = resolveWorldSize();
  rejectUnbuiltFlags();
  // Both sizes are read before anything is compiled: they were read only
  // by a report or the fit check, so "--device-memory-reserve lots" alone
  // compiled without a word.
  if (!deviceMemoryLimit.empty())
    (void)deviceMemoryBudget();
  if (!deviceMemoryReserve.empty())
    (void)byteSizeOption("device-memory-reserve", deviceMemoryReserve, "1GiB, 512MiB or 0",
                         /*allowZero=*/true);
  // The plan is written over -o: never over the model or the config.
  auto sameFile = [](StringRef a, StringRef b) {
    bool same = false;
    return !b.empty() && (a == b || (!llvm::sys::fs::equivalent(a, b, same) && same));
  };
  if (!outputPath.empty() && (sameFile(outputPath, modelPath) || sameFile(outputPath, configPath)))
    fail("-o " + outputPath + " is the " +
         Twine(sameFile(outputPath, modelPath) ? "model" : "config") +
         "; writing the plan would replace it: give another output path");
  if (emit != EmitKind::Config && modelPath.empty())
    fail("no model: pass MODEL.onnx (or use --emit config to check a config alone)");

  // Importing a graph needs no config (its batch dimension can come from
  // --input-shape); everything after import does.
  std::optional<zcc::config::Json> config;
  std::string configText;
  if (!configPath.empty()) {
    ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
        MemoryBuffer::getFile(configPath, /*IsText=*/true);
    if (std::error_code error = buffer.getError())
      fail("cannot read config '" + configPath + "': " + error.message());
    zcc::config::ConfigImportOptions options;
    options.worldSize = ranks;
    configText = (*buffer)->getBuffer().str();
    zcc::config::ConfigImportResult imported =
        zcc::config::importDeepSpeedConfig(configText, options);
    for (const zcc::config::ConfigDiagnostic &diagnostic : imported.diagnostics)
      errs() << zcc::config::formatDiagnostic(configPath, diagnostic) << "\n";
    if (!imported.succeeded())
      return 1;
    config = std::move(imported.config);
  } else if (emit != EmitKind::Graph) {
    fail("no config: pass the DeepSpeed config with -c CONFIG.json");
  }

  mlir::DialectRegistry registry;
  zcc::registerZccDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // A pass's error names what is wrong and how to fix it; the IR of the op
  // it is attached to (a whole module, often) would bury it.
  context.printOpOnDiagnostic(false);
  // Every diagnostic already says where (file, node, JSON path): print it as
  // one line, without MLIR's location prefix.
  mlir::ScopedDiagnosticHandler diagnostics(&context, [](mlir::Diagnostic &diagnostic) {
    const char *severity = diagnostic.getSeverity() == mlir::DiagnosticSeverity::Error
                               ? "error"
                               : diagnostic.getSeverity() == mlir::DiagnosticSeverity::Warning
                                     ? "warning"
                                     : "note";
    errs() << "zcc: " << severity << ": " << diagnostic.str() << "\n";
    for (const mlir::Diagnostic &note : diagnostic.getNotes())
      errs() << "zcc: note: " << note.str() << "\n";
    return mlir::success();
  });

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(&context));
  if (config)
    zcc::config::attachConfig(*module, *config);
  if (inferPrecision != "fp32" && inferPrecision != "bf16" && inferPrecision != "fp16")
    fail("--infer-precision " + inferPrecision + ": expected fp32, bf16 or fp16");
  if (target != "h200" && target != "h100" && target != "cpu")
    fail("--target " + target + ": the cost model knows h200, h100 and cpu");
  (*module)->setAttr("zcc.target", mlir::StringAttr::get(&context, target));
  if (accumulatingGradients)
    (*module)->setAttr("zcc.accumulating_gradients", mlir::UnitAttr::get(&context));

  if (emit == EmitKind::Config) {
    if (report.getNumOccurrences())
      fail("--report describes a compiled plan; --emit config stops before one (drop one "
           "of the two)");
    if (deviceMemoryLimit.getNumOccurrences())
      fail("--device-memory-limit checks a compiled plan; --emit config stops before one "
           "(drop one of the two)");
    // Printed from the module attribute, so what is shown is what passes read.
    std::optional<zcc::config::Json> resolved =
        zcc::config::attributeToJson(zcc::config::getConfig(*module));
    if (!resolved)
      fail("internal error: zcc.config holds an attribute that is not JSON");
    outs() << resolved->dump(2) << "\n";
    return 0;
  }

  zcc::onnx_import::OnnxImportOptions importOptions;
  for (const std::string &shape : inputShapes) {
    std::string error;
    if (!zcc::onnx_import::parseInputShape(shape, importOptions, error))
      fail(error);
  }
  if (config)
    importOptions.microBatchSize =
        (*config)["train_micro_batch_size_per_gpu"].get<int64_t>();
  if (failed(zcc::onnx_import::importOnnxModel(*module, modelPath, importOptions)))
    return 1;
  // Training or inference, from the imported graph: an inference plan
  // evaluates the model (its training-mode dropouts are the identity).
  bool hasLossOutput = false;
  module->walk([&](mlir::func::FuncOp func) {
    for (mlir::Type type : func.getFunctionType().getResults())
      if (auto tensor = dyn_cast<mlir::RankedTensorType>(type))
        hasLossOutput |= tensor.getRank() == 0 && isa<mlir::FloatType>(tensor.getElementType());
  });
  bool haveOptimizer = config && !(*config)["optimizer"].is_null();
  bool training = mode == Mode::Train ||
                  (mode == Mode::Auto && haveOptimizer && (hasLossOutput || !lossKind.empty()));
  mlir::PassManager graphPipeline(&context);
  zcc::buildGraphPipeline(graphPipeline, /*inference=*/!training);
  if (failed(graphPipeline.run(*module)))
    return 1;
  if (emit == EmitKind::Graph) {
    module->print(outs());
    return 0;
  }
  // Only a plan binds the inputs to micro-batches: the stages before it
  // (--emit train, dist, plan) may be inspected with any batch.
  if (training && config && (emit == EmitKind::None || emit == EmitKind::PlanText))
    checkMicroBatch(*module, *config, configText);

  if (!lossKind.empty() && lossKind != "cross-entropy" && lossKind != "mse")
    fail("--loss takes cross-entropy or mse, got '" + lossKind + "'");
  if (!training && !lossKind.empty())
    fail("--loss adds a loss for training, but this is an inference plan" +
         Twine(haveOptimizer ? "" : " (the config has no optimizer)"));
  if (training) {
    if (!haveOptimizer)
      fail("a training plan needs an optimizer: add an \"optimizer\" section to '" + configPath +
           "' (for example {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4}}), or compile "
           "an inference plan with --mode infer");
    mlir::PassManager trainPipeline(&context);
    zcc::buildTrainPipeline(trainPipeline, /*lossName=*/"", lossKind);
    if (failed(trainPipeline.run(*module)))
      return 1;
    if (emit == EmitKind::Train) {
      module->print(outs());
      return 0;
    }
  } else if (emit == EmitKind::Train) {
    fail("--emit train prints a training step, but this is an inference plan (the model needs "
         "a loss output, or --loss, and the config an optimizer)");
  } else if (inferPrecision != "fp32") {
    mlir::PassManager inferPipeline(&context);
    zcc::buildInferPipeline(inferPipeline, inferPrecision);
    if (failed(inferPipeline.run(*module)))
      return 1;
  }

  if (!training && recomputeOutputs != Recompute::Auto)
    fail(Twine("--recompute ") + (recomputeOutputs == Recompute::Always ? "always" : "never") +
         " chooses what a training step's backward pass keeps, but this is an inference plan");
  // GELU and layer norm outputs are recomputed in the backward pass only
  // where keeping them does not fit (--recompute auto), and then just
  // enough of them: the plan that keeps them is lowered first; where its
  // peak is over the budget, the step is lowered again from a copy,
  // recomputing the first outputs in forward order until the excess is,
  // and more while the plan still does not fit (the memory planner's
  // placement does not shrink byte for byte). --emit dist and plan print
  // the lowering that was picked.
  bool recompute = training && recomputeOutputs == Recompute::Always;
  int64_t recomputeBytes = 0;
  int64_t budget = deviceMemoryBudget();
  std::optional<Lowered> lowered;
  auto peakOf = [](const Lowered &l) {
    return static_cast<int64_t>(l.plan.arena_bytes()) + runtimeReserveBytes(l.plan);
  };
  auto recomputedText = [](const Lowered &l) {
    return llvm::formatv("{0} of {1} recomputed in the backward pass ({2} of {3})", l.recomputed,
                         l.recomputable, formatSize(l.recomputedBytes),
                         formatSize(l.recomputableBytes))
        .str();
  };
  if (training && recomputeOutputs == Recompute::Never)
    recomputeChoice = "kept from the forward pass (--recompute never)";
  if (training && recomputeOutputs == Recompute::Auto && budget < 0)
    recomputeChoice = "kept from the forward pass (--target " + target + " has no memory limit)";
  if (training && recomputeOutputs == Recompute::Auto && budget >= 0) {
    bool printsModule = emit == EmitKind::Dist || emit == EmitKind::Plan;
    mlir::OwningOpRef<mlir::ModuleOp> pristine(module->clone());
    auto lowerCopy = [&](bool on, int64_t bytes) {
      mlir::OwningOpRef<mlir::ModuleOp> copy(pristine->clone());
      return lowerToPlan(*copy, on, bytes, /*printing=*/false);
    };
    Lowered kept = printsModule ? lowerCopy(false, 0)
                                : lowerToPlan(*module, false, 0, /*printing=*/false);
    int64_t keptPeak = peakOf(kept);
    std::string budgetText = deviceMemoryLimit.empty()
                                 ? "the " + formatGiB(budget) + " of --target " + target
                                 : "--device-memory-limit " + deviceMemoryLimit;
    if (keptPeak <= budget) {
      recomputeChoice = "kept from the forward pass (" + formatGiB(keptPeak) + " per rank fits " +
                        budgetText + ")";
      if (!printsModule)
        lowered = std::move(kept);
    } else {
      // Recomputing stops where it no longer lowers the peak (a pipeline
      // stage keeps the recomputed outputs in its forward program, so they
      // still cross to the backward one).
      int64_t cap = keptPeak - budget;
      Lowered partial = lowerCopy(true, cap);
      while (peakOf(partial) > budget && peakOf(partial) < keptPeak &&
             partial.recomputed < partial.recomputable) {
        cap += std::max({peakOf(partial) - budget, cap / 4, partial.recomputableBytes / 16});
        partial = lowerCopy(true, cap);
      }
      std::string over =
          "keeping them needs " + formatSize(keptPeak) + " per rank, over " + budgetText;
      int64_t peak = keptPeak;
      if (partial.recomputed == 0 || peakOf(partial) >= keptPeak) {
        recomputeChoice = "kept from the forward pass (" + over +
                          ", and recomputing them does not lower this plan's peak)";
        if (!printsModule)
          lowered = std::move(kept);
      } else {
        recompute = true;
        recomputeBytes = partial.recomputed < partial.recomputable ? cap : 0;
        peak = peakOf(partial);
        recomputeChoice = recomputedText(partial) + ": " + over;
        if (peak > budget)
          recomputeChoice += "; with all of them recomputed it needs " + formatSize(peak);
        if (!printsModule)
          lowered = std::move(partial);
      }
      // Over --device-memory-limit the plan fails below, listing what would
      // fit; over the target's memory it would fail at run time.
      if (deviceMemoryLimit.empty() && peak > budget)
        errs() << "zcc: warning: the plan needs " << formatSize(peak) << " per rank, more than "
               << budgetText << "; pass --device-memory-limit to have zcc list the settings "
               << "that would fit\n";
    }
  }
  if (!lowered)
    lowered = lowerToPlan(*module, recompute, recomputeBytes, /*printing=*/true);
  if (training && recomputeOutputs == Recompute::Always)
    recomputeChoice = recomputedText(*lowered) + " (--recompute always)";
  zcc::plan::Plan *plan = &lowered->plan;
  const std::vector<std::pair<int64_t, int64_t>> &stageFlops = lowered->stageFlops;
  std::string bytes = zcc::encodePlanFile(*plan, kProducer);
  if (report.getNumOccurrences() && plan->has_pipeline())
    printPipelineReport(*plan, stageFlops, report == "json");
  else if (report.getNumOccurrences())
    printReport(*plan, report == "json");
  checkDeviceMemoryLimit(*plan);
  if (emit == EmitKind::PlanText) {
    zcc::StatusOr<zcc::LoadedPlan> loaded = zcc::parsePlanFile(bytes, "<plan>");
    if (!loaded.isOk())
      fail("internal error: " + loaded.status().message());
    outs() << zcc::printPlan(loaded->header, loaded->plan);
    return 0;
  }
  if (outputPath.empty()) {
    if (report.getNumOccurrences())
      return 0;
    fail("no output: pass -o PLAN.bin (or --emit, or --report)");
  }
  zcc::Status written = zcc::writeFile(outputPath, bytes);
  if (!written.isOk())
    fail(written.message());
  return 0;
}
