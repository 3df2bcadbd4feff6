//===- PipelineSupport.h - Pipeline stage marks -----------------*- C++ -*-===//
//
// Partitioning marks the ops of a pipelined step with the stage they run on
// (`zdist.stage`) and those of the backward pass (`zdist.backward`); a
// zb-h1 schedule marks the backward ops that only make weight gradients
// (`zdist.weights`), which run later than the rest. The scheduling and
// splitting passes read the marks and extend them to the ops made since.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_DIALECTS_DIST_TRANSFORMS_PIPELINESUPPORT_H
#define ZCC_DIALECTS_DIST_TRANSFORMS_PIPELINESUPPORT_H

#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

#include <algorithm>
#include <optional>

namespace zcc::zdist {

/// The stage an op runs on. Parameters, training state and constants have
/// none: each stage that uses one holds its own.
inline std::optional<int64_t> stageOf(mlir::Operation *op) {
  if (!op || mlir::isa<zgraph::ParamOp, zgraph::StateOp, zgraph::ConstantOp>(op))
    return std::nullopt;
  if (auto stage = op->getAttrOfType<mlir::IntegerAttr>("zdist.stage"))
    return stage.getInt();
  return std::nullopt;
}

inline bool isBackward(mlir::Operation *op) { return op && op->hasAttr("zdist.backward"); }

/// Whether `op` belongs to its stage's weight-gradient pass (zb-h1): a
/// backward op the gradients sent to earlier stages do not depend on.
inline bool isWeightPass(mlir::Operation *op) { return op && op->hasAttr("zdist.weights"); }

/// Marks `op` with the latest stage among its operands', as backward when
/// one of those operands is, and as of the weight pass when one is (it
/// runs after them); leaves it unmarked when none has a stage.
inline void inheritOperandStage(mlir::Operation &op) {
  std::optional<int64_t> latest;
  bool backward = false, weights = false;
  for (mlir::Value operand : op.getOperands())
    if (std::optional<int64_t> stage = stageOf(operand.getDefiningOp())) {
      latest = std::max(latest.value_or(0), *stage);
      backward |= isBackward(operand.getDefiningOp());
      weights |= isWeightPass(operand.getDefiningOp());
    }
  if (!latest)
    return;
  mlir::Builder builder(op.getContext());
  op.setAttr("zdist.stage", builder.getI64IntegerAttr(*latest));
  if (backward)
    op.setAttr("zdist.backward", builder.getUnitAttr());
  if (weights)
    op.setAttr("zdist.weights", builder.getUnitAttr());
}

} // namespace zcc::zdist

#endif // ZCC_DIALECTS_DIST_TRANSFORMS_PIPELINESUPPORT_H
