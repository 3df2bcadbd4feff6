//===- NvmeSwap.cpp - ZeRO-Infinity's NVMe tier ---------------------------===//
//
// With `offload_optimizer.device = "nvme"` the offload pass has placed the
// optimizer on the host as for "cpu"; this pass moves the state the host
// updates (fp32 master copies, Adam's and Lion's moments, SGD's momentum,
// Adagrad's sums) out of host memory into the rank's swap file
// (`zdist.memory = "nvme"`). With `offload_param.device = "nvme"` the
// offload pass has placed the parameters on the host as for "cpu"; this
// pass moves what the micro-steps fetch of them (each parameter's 16-bit
// copy, or the host parameter itself where it has none) into the swap file
// too, except partitions under DeepSpeed's smallest swap (1 MiB, or
// aio.block_size if larger) and the first offload_param.max_in_cpu elements
// of the rest, in the order the step first reads them, which stay in host
// memory.
//
// Host memory then holds a staging copy of a swapped value only while the
// ops that use it run: in each function, the first use of a state is
// preceded by a `zdist.swap_in` into a host value, every use in the
// function reads and updates that value, and after the last one a
// `zdist.swap_out` writes it back if an op wrote it. A value the function
// only fetches (a parameter in a micro-step, read again in the backward)
// is swapped in right before each fetch instead, so that the staging
// buffer lives from its read to its copy to the device, not across the
// step. An assign that overwrites a whole state with a host value (@init
// setting a master from the parameter, a refresh of a 16-bit copy) becomes
// the swap_out of that value. So the host arena holds the values in
// flight instead of the whole model's.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/Transforms/ConfigValues.h"
#include "dialects/Dist/Transforms/InPlace.h"
#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

namespace zcc::zdist {
#define GEN_PASS_DEF_NVMESWAPPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {
namespace {

constexpr StringLiteral kMemory = "zdist.memory";

bool placedIn(Operation *op, StringRef memory) {
  auto attr = op ? op->getAttrOfType<StringAttr>(kMemory) : StringAttr();
  return attr && attr.getValue() == memory;
}

/// The key of a value the swap file can hold: "name.kind" of a
/// `zgraph.state`, "name.param" of a `zgraph.param`; empty for another op.
std::string storageKey(Operation *op) {
  if (auto state = dyn_cast_or_null<zgraph::StateOp>(op))
    return (state.getName() + "." + state.getKind()).str();
  if (auto param = dyn_cast_or_null<zgraph::ParamOp>(op))
    return (param.getName() + ".param").str();
  return "";
}

/// DeepSpeed's smallest swap: a partition of fewer bytes stays in host
/// memory (its swapper's MIN_AIO_BYTES, or aio.block_size if larger).
constexpr int64_t kMinSwapBytes = int64_t(1) << 20;

/// The states an optimizer op updates in place: its master (when the
/// update's target is a state) and its moments.
SmallVector<zgraph::StateOp> updatedStates(Operation *op) {
  SmallVector<zgraph::StateOp> states;
  for (Value target : optimizerTargets(op))
    if (auto state = target.getDefiningOp<zgraph::StateOp>())
      states.push_back(state);
  return states;
}

/// Whether `op` is a fetch, or host data movement (the reshapes and the
/// concatenation of a ZeRO-3 bucket's shards) whose results only reach
/// fetches.
bool feedsFetch(Operation *op) {
  if (isa<FetchOp>(op))
    return true;
  if (!isa<zgraph::ReshapeOp, zgraph::ConcatOp>(op) || !placedIn(op, "host"))
    return false;
  return llvm::all_of(op->getUsers(), feedsFetch) && !op->use_empty();
}

/// A swap's location: its parameter's name (a state's is its parameter's).
Location storageLoc(Value storage) {
  Operation *op = storage.getDefiningOp();
  StringAttr name;
  if (auto state = dyn_cast<zgraph::StateOp>(op))
    name = state.getNameAttr();
  else if (auto param = dyn_cast<zgraph::ParamOp>(op))
    name = param.getNameAttr();
  return name ? Location(NameLoc::get(name, op->getLoc())) : op->getLoc();
}

/// The element count and bytes of a ranked tensor value.
std::pair<int64_t, int64_t> sizeOf(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t elements = type.getNumElements();
  return {elements, elements * int64_t(type.getElementTypeBitWidth() / 8)};
}

/// Whether `op` writes `operand` in place.
bool writesInPlace(Operation *op, Value operand) {
  SmallVector<Value> targets = optimizerTargets(op);
  if (auto assign = dyn_cast<zgraph::AssignOp>(op))
    targets = {assign.getTarget()};
  else if (auto accumulate = dyn_cast<zgraph::AccumulateOp>(op))
    targets = {accumulate.getTarget()};
  else if (auto fill = dyn_cast<zgraph::FillOp>(op))
    targets = {fill.getTarget()};
  return llvm::is_contained(targets, operand);
}

class Swapper {
public:
  Swapper(ModuleOp module, bool optimizer, bool params)
      : module(module), builder(module.getContext()), optimizer(optimizer), params(params) {}

  LogicalResult run();

private:
  /// offload_param: the host values the micro-steps fetch that move to
  /// the swap file.
  void chooseParams();
  LogicalResult swap(func::FuncOp func);

  ModuleOp module;
  OpBuilder builder;
  bool optimizer, params;
  /// The host states and parameters that move to NVMe, by storageKey.
  llvm::StringSet<> swapped;
};

LogicalResult Swapper::run() {
  // What the functions fetch from host memory: offload_param's storage.
  llvm::StringSet<> fetched;
  module.walk([&](Operation *op) {
    if (feedsFetch(op))
      for (Value operand : op->getOperands())
        fetched.insert(storageKey(operand.getDefiningOp()));
  });
  WalkResult walk = module.walk([&](Operation *op) {
    if (!optimizer)
      return WalkResult::advance();
    // A host parameter the optimizer updates that nothing fetches (the
    // fp32 master of a parameter whose micro-steps read its 16-bit copy)
    // is optimizer state too.
    for (Value target : optimizerTargets(op))
      if (auto param = target.getDefiningOp<zgraph::ParamOp>();
          param && placedIn(param, "host") && placedIn(op, "host") &&
          !fetched.contains(storageKey(param)))
        swapped.insert(storageKey(param));
    for (zgraph::StateOp state : updatedStates(op)) {
      if (!placedIn(state, "host")) {
        op->emitError("offload_optimizer.device \"nvme\" keeps the optimizer's state on NVMe, "
                      "but this update's state is not in host memory (run zcc-dist-offload "
                      "first)");
        return WalkResult::interrupt();
      }
      swapped.insert(storageKey(state));
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (params)
    chooseParams();
  module.walk([&](Operation *op) {
    if (isa<zgraph::StateOp, zgraph::ParamOp>(op) && placedIn(op, "host") &&
        swapped.contains(storageKey(op)))
      op->setAttr(kMemory, builder.getStringAttr("nvme"));
  });
  for (auto func : llvm::to_vector(module.getOps<func::FuncOp>()))
    if (failed(swap(func)))
      return failure();
  return success();
}

void Swapper::chooseParams() {
  auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
  auto zero = config ? config.getAs<DictionaryAttr>("zero_optimization") : DictionaryAttr();
  auto offload = zero ? zero.getAs<DictionaryAttr>("offload_param") : DictionaryAttr();
  auto aio = config ? config.getAs<DictionaryAttr>("aio") : DictionaryAttr();
  int64_t minBytes = std::max(kMinSwapBytes, configInt(aio, "block_size", kMinSwapBytes));
  int64_t inCpu = configInt(offload, "max_in_cpu", 1000000000);
  auto consider = [&](StringRef key, Value value) {
    auto [elements, bytes] = sizeOf(value);
    if (bytes < minBytes)
      return;
    if (elements <= inCpu) {
      inCpu -= elements;
      return;
    }
    inCpu = 0;
    swapped.insert(key);
  };
  // In the order the functions first read them for a fetch (the
  // forward's order).
  llvm::StringSet<> seen;
  module.walk([&](Operation *op) {
    for (Value operand : op->getOperands()) {
      Operation *source = operand.getDefiningOp();
      std::string key = storageKey(source);
      if (key.empty() || !placedIn(source, "host") || !feedsFetch(op) || !seen.insert(key).second)
        continue;
      consider(key, operand);
    }
  });
}

LogicalResult Swapper::swap(func::FuncOp func) {
  Block &body = func.getBody().front();
  // Each swapped value's uses in this function, in order: the ops that read
  // or write it (through any of its zgraph.state or zgraph.param ops).
  struct Window {
    Operation *first = nullptr, *last = nullptr;
    /// Its state or parameter for swap_in and swap_out (the first one used
    /// here).
    Value storage;
    bool read = false, written = false;
    /// Set when the first use overwrites the whole state with a host value.
    bool overwrittenFirst = false;
    /// Set while every use feeds a fetch.
    bool onlyFetched = true;
  };
  llvm::MapVector<StringRef, Window> windows;
  llvm::StringMap<std::string> keys;
  auto swappedKey = [&](Value value) -> std::string {
    Operation *def = value.getDefiningOp();
    if (!isa_and_nonnull<zgraph::StateOp, zgraph::ParamOp>(def) || !placedIn(def, "nvme"))
      return "";
    return storageKey(def);
  };
  for (Operation &op : body) {
    if (isa<zgraph::StateOp, zgraph::ParamOp>(op))
      continue;
    for (Value operand : op.getOperands()) {
      std::string key = swappedKey(operand);
      if (key.empty())
        continue;
      StringRef stable = keys.try_emplace(key, key).first->first();
      Window &window = windows[stable];
      bool first = !window.first;
      if (first) {
        window.first = &op;
        window.storage = operand;
      }
      window.last = &op;
      window.onlyFetched &= feedsFetch(&op);
      auto assign = dyn_cast<zgraph::AssignOp>(op);
      bool overwrite = assign && assign.getTarget() == operand && assign.getValue() != operand &&
                       placedIn(&op, "host");
      if (first && overwrite)
        window.overwrittenFirst = true;
      if (writesInPlace(&op, operand))
        window.written = true;
      else
        window.read = true;
      if (!placedIn(&op, "host") && !isa<FetchOp>(op)) {
        op.emitError() << "reads the NVMe-resident value '" << key
                       << "' on the device; only host ops and fetches may use it";
        return failure();
      }
    }
  }
  auto swapIn = [&](Operation *before, Value storage) {
    builder.setInsertionPoint(before);
    auto in = builder.create<SwapInOp>(storageLoc(storage), storage);
    in->setAttr(kMemory, builder.getStringAttr("host"));
    return in.getResult();
  };
  // The swap_outs after an op, in the order of the states' first uses.
  llvm::DenseMap<Operation *, Operation *> lastSwapOutAfter;
  for (auto &[key, window] : windows) {
    if (window.overwrittenFirst && window.first == window.last) {
      // The whole state is written from a host value: write that value.
      auto assign = cast<zgraph::AssignOp>(window.first);
      builder.setInsertionPoint(assign);
      builder.create<SwapOutOp>(storageLoc(window.storage), assign.getValue(), window.storage);
      assign->erase();
      continue;
    }
    if (window.onlyFetched) {
      // Read only on its way to the device (a parameter in a micro-step):
      // each reader reads a swap_in of its own, right before it.
      for (Operation *op = window.first;; op = op->getNextNode()) {
        Value staged;
        for (OpOperand &operand : op->getOpOperands())
          if (swappedKey(operand.get()) == key) {
            if (!staged)
              staged = swapIn(op, operand.get());
            operand.set(staged);
          }
        if (op == window.last)
          break;
      }
      continue;
    }
    Value staged = swapIn(window.first, window.storage);
    // Every use in the window reads and writes the staged value.
    for (Operation *op = window.first;; op = op->getNextNode()) {
      for (OpOperand &operand : op->getOpOperands())
        if (swappedKey(operand.get()) == key)
          operand.set(staged);
      if (op == window.last)
        break;
    }
    if (window.written) {
      Operation *&after = lastSwapOutAfter[window.last];
      builder.setInsertionPointAfter(after ? after : window.last);
      after = builder.create<SwapOutOp>(storageLoc(window.storage), staged, window.storage);
    }
  }
  // State ops nothing reads any more (their uses now read the staged
  // values).
  for (auto state : llvm::to_vector(body.getOps<zgraph::StateOp>()))
    if (placedIn(state, "nvme") && state->use_empty())
      state->erase();
  return success();
}

struct NvmeSwapPass : impl::NvmeSwapPassBase<NvmeSwapPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
    auto zero = config ? config.getAs<DictionaryAttr>("zero_optimization") : DictionaryAttr();
    auto onNvme = [&](StringRef section) {
      auto offload = zero ? zero.getAs<DictionaryAttr>(section) : DictionaryAttr();
      auto device = offload ? offload.getAs<StringAttr>("device") : StringAttr();
      return device && device.getValue() == "nvme";
    };
    bool optimizer = onNvme("offload_optimizer"), params = onNvme("offload_param");
    if (!optimizer && !params)
      return;
    if (failed(Swapper(module, optimizer, params).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace zcc::zdist
