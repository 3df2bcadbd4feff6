//===- PipelineCost.h - Cost estimates for pipeline stages ------*- C++ -*-===//
//
// The cost model the pipeline passes balance stages by and predict the
// schedule's idle time from: floating-point operations per op. Matrix
// products and attention count 2 flops per multiply-add; every other op one
// flop per result element (elementwise work, reductions, copies).
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_DIALECTS_DIST_TRANSFORMS_PIPELINECOST_H
#define ZCC_DIALECTS_DIST_TRANSFORMS_PIPELINECOST_H

#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

namespace zcc::zdist {

/// Floating-point operations of one execution of `op`.
inline int64_t estimateFlops(mlir::Operation *op) {
  using namespace mlir;
  auto numel = [](Value value) -> int64_t {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    return type && type.hasStaticShape() ? std::max<int64_t>(1, type.getNumElements()) : 1;
  };
  if (auto matmul = dyn_cast<zgraph::MatMulOp>(op)) {
    auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
    int64_t rank = lhs.getRank();
    int64_t inner = rank == 0                               ? 1
                    : matmul.getTransposeLhs() && rank >= 2 ? lhs.getDimSize(rank - 2)
                                                            : lhs.getShape().back();
    return 2 * numel(matmul.getResult()) * inner;
  }
  if (isa<zgraph::AttentionOp, zgraph::AttentionGradOp>(op)) {
    // q k^T and the product with v: 2 * 2 * (batch, heads) * Sq * Sk * D;
    // the backward pass does about twice the forward's work.
    auto query = cast<RankedTensorType>(op->getOperand(0).getType());
    auto key = cast<RankedTensorType>(op->getOperand(1).getType());
    int64_t rank = query.getRank();
    if (rank < 2 || key.getRank() < 2)
      return numel(op->getResult(0));
    int64_t flops = 4 * (query.getNumElements() / query.getDimSize(rank - 1)) *
                    key.getDimSize(key.getRank() - 2) * query.getDimSize(rank - 1);
    return isa<zgraph::AttentionGradOp>(op) ? 2 * flops : flops;
  }
  if (isa<zgraph::QkvAttentionOp, zgraph::QkvAttentionGradOp>(op)) {
    // The same over [B, T, 3, H, d]: B H heads of T queries and T keys.
    ArrayRef<int64_t> qkv = cast<RankedTensorType>(op->getOperand(0).getType()).getShape();
    int64_t flops = 4 * qkv[0] * qkv[3] * qkv[1] * qkv[1] * qkv[4];
    return isa<zgraph::QkvAttentionGradOp>(op) ? 2 * flops : flops;
  }
  int64_t flops = 0;
  for (Value result : op->getResults())
    flops += numel(result);
  // In-place training ops write their first operand.
  if (op->getNumResults() == 0 && op->getNumOperands() > 0)
    flops = numel(op->getOperand(op->getNumOperands() > 1 ? 1 : 0));
  return flops;
}

} // namespace zcc::zdist

#endif // ZCC_DIALECTS_DIST_TRANSFORMS_PIPELINECOST_H
