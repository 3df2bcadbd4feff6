//===- FuseLayerNorm.cpp - Recognise exported layer-norm chains -----------===//
//
// Exports before ONNX's LayerNormalization (opset 17) write torch's
// LayerNorm as element-wise ops over the last dimension:
//
//   mean = ReduceMean(x); d = x - mean; var = ReduceMean(d^2)
//   y = d / sqrt(var + eps) * weight + bias
//
// The pattern starts at the final add and walks the chain back; every value
// inside it but `d` (read by the square and the division) must have no other
// use, so the rewrite never duplicates work.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/Transforms/ConstantScalar.h"
#include "dialects/Graph/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace zcc::zgraph {
#define GEN_PASS_DEF_FUSELAYERNORMPASS
#include "dialects/Graph/Transforms/Passes.h.inc"
} // namespace zcc::zgraph

using namespace mlir;

namespace zcc::zgraph {
namespace {

/// `value` defined by an op of type Op whose result has exactly one use.
template <typename Op> Op singleUse(Value value) {
  auto op = value.getDefiningOp<Op>();
  return op && value.hasOneUse() ? op : Op();
}

/// A mean over the last dimension of `input`, keeping it as size 1.
bool isLastDimMean(ReduceMeanOp mean) {
  auto type = dyn_cast<RankedTensorType>(mean.getInput().getType());
  return type && type.getRank() >= 1 && mean.getKeepdims() &&
         mean.getAxes() == ArrayRef<int64_t>{type.getRank() - 1};
}

/// Whether `value` is d squared: Pow(d, 2) or d * d.
bool isSquareOf(Value value, Value d) {
  if (auto pow = singleUse<PowOp>(value))
    return pow.getLhs() == d && isConstantNear(pow.getRhs(), 2.0);
  if (auto mul = singleUse<MulOp>(value))
    return mul.getLhs() == d && mul.getRhs() == d;
  return false;
}

/// Whether `value` is a vector of the last dimension's size and `element`.
bool isTrailingVector(Value value, int64_t size, Type element) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.getRank() == 1 && type.getDimSize(0) == size &&
         type.getElementType() == element;
}

struct FuseLayerNormPattern : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp root, PatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(root.getType());
    if (!type || type.getRank() < 1 || !isa<FloatType>(type.getElementType()))
      return failure();
    const int64_t size = type.getDimSize(type.getRank() - 1);
    for (auto [scaled, bias] : {std::pair{root.getLhs(), root.getRhs()},
                                std::pair{root.getRhs(), root.getLhs()}}) {
      auto mul = singleUse<MulOp>(scaled);
      if (!mul || !isTrailingVector(bias, size, type.getElementType()))
        continue;
      for (auto [normalised, weight] : {std::pair{mul.getLhs(), mul.getRhs()},
                                        std::pair{mul.getRhs(), mul.getLhs()}}) {
        if (!isTrailingVector(weight, size, type.getElementType()))
          continue;
        auto div = singleUse<DivOp>(normalised);
        if (!div)
          continue;
        // d = x - mean(x), read by the square and by this division only.
        Value d = div.getLhs();
        auto sub = d.getDefiningOp<SubOp>();
        if (!sub || sub.getType() != type)
          continue;
        Value x = sub.getLhs();
        auto mean = singleUse<ReduceMeanOp>(sub.getRhs());
        if (!mean || mean.getInput() != x || !isLastDimMean(mean))
          continue;
        // sqrt(mean(d^2) + eps)
        auto sqrt = singleUse<SqrtOp>(div.getRhs());
        auto shifted = sqrt ? singleUse<AddOp>(sqrt.getInput()) : AddOp();
        if (!shifted)
          continue;
        for (auto [variance, epsilon] : {std::pair{shifted.getLhs(), shifted.getRhs()},
                                         std::pair{shifted.getRhs(), shifted.getLhs()}}) {
          std::optional<double> eps = constantScalar(epsilon);
          auto varianceMean = singleUse<ReduceMeanOp>(variance);
          if (!eps || *eps < 0 || !varianceMean || !isLastDimMean(varianceMean) ||
              !isSquareOf(varianceMean.getInput(), d))
            continue;
          Operation *square = varianceMean.getInput().getDefiningOp();
          if (llvm::any_of(d.getUsers(),
                           [&](Operation *user) { return user != square && user != div; }))
            continue;
          rewriter.replaceOpWithNewOp<LayerNormOp>(
              root, type, x, weight, bias, rewriter.getI64IntegerAttr(type.getRank() - 1),
              rewriter.getF64FloatAttr(*eps));
          return success();
        }
      }
    }
    return failure();
  }
};

struct FuseLayerNormPass : impl::FuseLayerNormPassBase<FuseLayerNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseLayerNormPattern>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace zcc::zgraph
