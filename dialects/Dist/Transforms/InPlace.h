//===- InPlace.h - What the in-place ops of a step write --------*- C++ -*-===//
//
// The training state ops (accumulate, assign, fill, the optimizer updates)
// write their targets in place: a `zgraph.param` or `zgraph.state` value
// stands for its buffer, and the op changes what later reads of it see.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_DIALECTS_DIST_TRANSFORMS_INPLACE_H
#define ZCC_DIALECTS_DIST_TRANSFORMS_INPLACE_H

#include "dialects/Graph/IR/ZGraph.h"

#include "llvm/ADT/SmallVector.h"

namespace zcc::zdist {

/// The values an optimizer op updates in place: its parameter (or master
/// state) and its moments (Lamb's halves: each what it writes); empty for
/// another op.
inline llvm::SmallVector<mlir::Value> optimizerTargets(mlir::Operation *op) {
  if (auto adamw = mlir::dyn_cast<zgraph::AdamWOp>(op))
    return {adamw.getParam(), adamw.getExpAvg(), adamw.getExpAvgSq()};
  if (auto sgd = mlir::dyn_cast<zgraph::SgdOp>(op))
    return {sgd.getParam(), sgd.getMomentumBuffer()};
  // Lamb's halves: the moments, then the parameter (which reads them).
  if (auto moments = mlir::dyn_cast<zgraph::LambMomentsOp>(op))
    return {moments.getExpAvg(), moments.getExpAvgSq()};
  if (auto lamb = mlir::dyn_cast<zgraph::LambStepOp>(op))
    return {lamb.getParam()};
  if (auto lion = mlir::dyn_cast<zgraph::LionOp>(op))
    return {lion.getParam(), lion.getExpAvg()};
  if (auto adagrad = mlir::dyn_cast<zgraph::AdagradOp>(op))
    return {adagrad.getParam(), adagrad.getSum()};
  return {};
}

/// The values an in-place op writes; empty for a pure op.
inline llvm::SmallVector<mlir::Value> inPlaceTargets(mlir::Operation *op) {
  if (auto accumulate = mlir::dyn_cast<zgraph::AccumulateOp>(op))
    return {accumulate.getTarget()};
  if (auto fused = mlir::dyn_cast<zgraph::AccumulateMatMulOp>(op))
    return {fused.getTarget()};
  if (auto assign = mlir::dyn_cast<zgraph::AssignOp>(op))
    return {assign.getTarget()};
  if (auto fill = mlir::dyn_cast<zgraph::FillOp>(op))
    return {fill.getTarget()};
  return optimizerTargets(op);
}

} // namespace zcc::zdist

#endif // ZCC_DIALECTS_DIST_TRANSFORMS_INPLACE_H
