//===- NvmeSwap.cpp - ZeRO-Infinity's NVMe tier for the optimizer state ---===//
//
// With `offload_optimizer.device = "nvme"` the offload pass has placed the
// optimizer on the host as for "cpu"; this pass moves the state the host
// updates (fp32 master copies, Adam's and Lion's moments, SGD's momentum,
// Adagrad's sums) out of host memory into the rank's swap file
// (`zdist.memory = "nvme"`). Host memory then holds a staging copy of a
// state only while the ops that use it run: in each function, the first
// use of a state is preceded by a `zdist.swap_in` into a host value, every
// use in the function reads and updates that value, and after the last one
// a `zdist.swap_out` writes it back if an op wrote it. An assign that
// overwrites a whole state with a host value (@init setting a master from
// the parameter) becomes the swap_out of that value. So the host arena
// holds the state of the updates in flight, about one parameter's worth,
// instead of the whole model's.
//
//===----------------------------------------------------------------------===//

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

std::string stateKey(zgraph::StateOp state) {
  return (state.getName() + "." + state.getKind()).str();
}

/// The values an optimizer op updates in place: its parameter (or master
/// state) and its moments; empty for another op.
SmallVector<Value> optimizerTargets(Operation *op) {
  if (auto adamw = dyn_cast<zgraph::AdamWOp>(op))
    return {adamw.getParam(), adamw.getExpAvg(), adamw.getExpAvgSq()};
  if (auto sgd = dyn_cast<zgraph::SgdOp>(op))
    return {sgd.getParam(), sgd.getMomentumBuffer()};
  if (auto lion = dyn_cast<zgraph::LionOp>(op))
    return {lion.getParam(), lion.getExpAvg()};
  if (auto adagrad = dyn_cast<zgraph::AdagradOp>(op))
    return {adagrad.getParam(), adagrad.getSum()};
  return {};
}

/// The states an optimizer op updates in place: its master (when the
/// update's target is a state) and its moments.
SmallVector<zgraph::StateOp> updatedStates(Operation *op) {
  SmallVector<zgraph::StateOp> states;
  for (Value target : optimizerTargets(op))
    if (auto state = target.getDefiningOp<zgraph::StateOp>())
      states.push_back(state);
  return states;
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
  explicit Swapper(ModuleOp module) : module(module), builder(module.getContext()) {}

  LogicalResult run();

private:
  LogicalResult swap(func::FuncOp func);

  ModuleOp module;
  OpBuilder builder;
  /// The host states that move to NVMe, by "name.kind".
  llvm::StringSet<> swapped;
};

LogicalResult Swapper::run() {
  WalkResult walk = module.walk([&](Operation *op) {
    for (zgraph::StateOp state : updatedStates(op)) {
      if (!placedIn(state, "host")) {
        op->emitError("offload_optimizer.device \"nvme\" keeps the optimizer's state on NVMe, "
                      "but this update's state is not in host memory (run zcc-dist-offload "
                      "first)");
        return WalkResult::interrupt();
      }
      swapped.insert(stateKey(state));
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  module.walk([&](zgraph::StateOp state) {
    if (swapped.contains(stateKey(state)))
      state->setAttr(kMemory, builder.getStringAttr("nvme"));
  });
  for (auto func : llvm::to_vector(module.getOps<func::FuncOp>()))
    if (failed(swap(func)))
      return failure();
  return success();
}

LogicalResult Swapper::swap(func::FuncOp func) {
  Block &body = func.getBody().front();
  // Each swapped state's uses in this function, in order: the ops that read
  // or write it (through any of its zgraph.state ops).
  struct Window {
    Operation *first = nullptr, *last = nullptr;
    /// Its state op for swap_in and swap_out (the first one used here).
    zgraph::StateOp state;
    bool read = false, written = false;
    /// Set when the first use overwrites the whole state with a host value.
    bool overwrittenFirst = false;
  };
  llvm::MapVector<StringRef, Window> windows;
  llvm::StringMap<std::string> keys;
  for (Operation &op : body) {
    if (isa<zgraph::StateOp>(op))
      continue;
    for (Value operand : op.getOperands()) {
      auto state = operand.getDefiningOp<zgraph::StateOp>();
      if (!state || !placedIn(state, "nvme"))
        continue;
      std::string key = stateKey(state);
      StringRef stable = keys.try_emplace(key, key).first->first();
      Window &window = windows[stable];
      bool first = !window.first;
      if (first) {
        window.first = &op;
        window.state = state;
      }
      window.last = &op;
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
        op.emitError() << "reads the NVMe-resident state '" << key
                       << "' on the device; only host ops and fetches may use it";
        return failure();
      }
    }
  }
  // The swap_outs after an op, in the order of the states' first uses.
  llvm::DenseMap<Operation *, Operation *> lastSwapOutAfter;
  for (auto &[key, window] : windows) {
    Location loc = window.first->getLoc();
    Value staged;
    if (window.overwrittenFirst && window.first == window.last) {
      // The whole state is written from a host value: write that value.
      auto assign = cast<zgraph::AssignOp>(window.first);
      builder.setInsertionPoint(assign);
      builder.create<SwapOutOp>(loc, assign.getValue(), window.state.getResult());
      assign->erase();
      continue;
    }
    builder.setInsertionPoint(window.first);
    auto in = builder.create<SwapInOp>(loc, window.state.getResult());
    in->setAttr(kMemory, builder.getStringAttr("host"));
    staged = in.getResult();
    // Every use in the window reads and writes the staged value.
    for (Operation *op = window.first;; op = op->getNextNode()) {
      for (OpOperand &operand : op->getOpOperands()) {
        auto state = operand.get().getDefiningOp<zgraph::StateOp>();
        if (state && placedIn(state, "nvme") && stateKey(state) == key)
          operand.set(staged);
      }
      if (op == window.last)
        break;
    }
    if (window.written) {
      Operation *&after = lastSwapOutAfter[window.last];
      builder.setInsertionPointAfter(after ? after : window.last);
      after = builder.create<SwapOutOp>(window.last->getLoc(), staged, window.state.getResult());
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
    auto offload = zero ? zero.getAs<DictionaryAttr>("offload_optimizer") : DictionaryAttr();
    auto device = offload ? offload.getAs<StringAttr>("device") : StringAttr();
    if (!device || device.getValue() != "nvme")
      return;
    if (failed(Swapper(module).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace zcc::zdist
