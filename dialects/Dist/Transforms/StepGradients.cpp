//===- StepGradients.cpp - Gradients that live for one step ---------------===//
//
// A gradient accumulator that only ever holds one micro-step's gradient
// (one micro-step per optimizer step) needs bytes only from the backward
// pass that writes it to the optimizer step that reads it. Its first write
// overwrites it, its resets go, and the plan gives it a live range like an
// activation's: the forward pass's activations, freed as the backward pass
// runs, make room for the gradients it writes.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/Transforms/ConfigValues.h"
#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

namespace zcc::zdist {
#define GEN_PASS_DEF_STEPGRADIENTSPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {
namespace {

/// The name of the gradient accumulator `value` is, or "".
StringRef gradientName(Value value) {
  auto state = value.getDefiningOp<zgraph::StateOp>();
  return state && state.getKind() == "grad" ? state.getName() : StringRef();
}

/// Whether `op` adds into `target` (the only way the backward pass writes a
/// gradient accumulator).
bool addsInto(Operation *op, Value target) {
  if (auto accumulate = dyn_cast<zgraph::AccumulateOp>(op))
    return accumulate.getTarget() == target;
  if (auto fused = dyn_cast<zgraph::AccumulateMatMulOp>(op))
    return fused.getTarget() == target;
  return false;
}

struct StepGradientsPass : impl::StepGradientsPassBase<StepGradientsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
    // zcc --accumulating-gradients keeps them, for zrun --grad-accum.
    if (!config || configInt(config, "gradient_accumulation_steps", 0) != 1 ||
        !module.getOps<PipelineOp>().empty() || module->hasAttr("zcc.accumulating_gradients"))
      return;
    auto microStep = module.lookupSymbol<func::FuncOp>("micro_step");
    auto optimizerStep = module.lookupSymbol<func::FuncOp>("optimizer_step");
    auto zeroGrads = module.lookupSymbol<func::FuncOp>("zero_grads");
    if (!microStep || !optimizerStep || !zeroGrads)
      return;

    // Accumulators some other function (an @init, say) uses keep their
    // bytes.
    llvm::StringSet<> excluded;
    for (auto func : module.getOps<func::FuncOp>()) {
      StringRef name = func.getSymName();
      if (name == "micro_step" || name == "grad_norm" || name == "optimizer_step" ||
          name == "zero_grads")
        continue;
      func.walk([&](zgraph::StateOp state) {
        if (state.getKind() == "grad")
          excluded.insert(state.getName());
      });
    }

    // Each accumulator's first use in @micro_step, in program order: an
    // addition into it, or it keeps its bytes.
    llvm::StringMap<Operation *> firstWrite;
    for (Operation &op : microStep.getBody().front())
      for (Value operand : op.getOperands()) {
        StringRef name = gradientName(operand);
        if (name.empty() || excluded.contains(name) || firstWrite.count(name))
          continue;
        if (addsInto(&op, operand))
          firstWrite[name] = &op;
        else
          excluded.insert(name);
      }
    if (firstWrite.empty())
      return;

    for (auto &entry : firstWrite) {
      Operation *op = entry.getValue();
      OpBuilder builder(op);
      if (auto accumulate = dyn_cast<zgraph::AccumulateOp>(op)) {
        auto assign = builder.create<zgraph::AssignOp>(op->getLoc(), accumulate.getTarget(),
                                                       accumulate.getValue());
        for (NamedAttribute attr : op->getAttrs())
          assign->setAttr(attr.getName(), attr.getValue());
        op->erase();
      } else {
        cast<zgraph::AccumulateMatMulOp>(op).setOverwrite(true);
      }
    }
    // The resets: the next micro-step overwrites the gradient.
    for (func::FuncOp func : {optimizerStep, zeroGrads})
      func.walk([&](zgraph::FillOp fill) {
        if (firstWrite.count(gradientName(fill.getTarget())))
          fill.erase();
      });
    module.walk([&](zgraph::StateOp state) {
      if (state.getKind() == "grad" && firstWrite.count(state.getName()))
        state->setAttr("zdist.step_local", UnitAttr::get(state.getContext()));
    });
    // States the erased fills read alone go too.
    for (func::FuncOp func : {optimizerStep, zeroGrads})
      func.walk([&](zgraph::StateOp state) {
        if (state->use_empty())
          state.erase();
      });
  }
};

} // namespace
} // namespace zcc::zdist
