//===- FuseAttention.cpp - Recognise exported attention -------------------===//

#include "dialects/Graph/Transforms/ConstantScalar.h"
#include "dialects/Graph/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace zcc::zgraph {
#define GEN_PASS_DEF_FUSEATTENTIONPASS
#include "dialects/Graph/Transforms/Passes.h.inc"
} // namespace zcc::zgraph

using namespace mlir;

namespace zcc::zgraph {
namespace {

/// Scores at or below this are "masked out" (HF uses -3.4e38 or -1e4).
constexpr double kMaskedScore = -1e4;

/// Whether `allowed(i, j)` over the constant's last two dimensions is the
/// causal pattern for `queries` x `keys` (key j visible to query i when
/// j <= i + keys - queries), the same for every leading index.
bool isCausal(DenseElementsAttr mask, int64_t queries, int64_t keys,
              llvm::function_ref<bool(int64_t)> allowedAt) {
  ArrayRef<int64_t> shape = mask.getType().getShape();
  if (shape.size() < 2 || shape[shape.size() - 2] != queries || shape.back() != keys)
    return false;
  int64_t total = mask.getNumElements();
  for (int64_t e = 0; e < total; ++e) {
    int64_t i = (e / keys) % queries, j = e % keys;
    if (allowedAt(e) != (j <= i + keys - queries))
      return false;
  }
  return true;
}

struct FuseAttentionPattern : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatMulOp output, PatternRewriter &rewriter) const override {
    // torch's SDPA export guards fully masked rows: Where(IsNaN(p), 0, p).
    // A causal row always has a visible key, so the fused op needs no guard.
    Value probabilities = output.getLhs();
    if (auto guard = probabilities.getDefiningOp<WhereOp>()) {
      auto isNan = guard.getCondition().getDefiningOp<IsNanOp>();
      std::optional<double> zero = constantScalar(guard.getOnTrue());
      if (!isNan || isNan.getInput() != guard.getOnFalse() || !zero || *zero != 0.0)
        return failure();
      probabilities = guard.getOnFalse();
    }
    auto softmax = probabilities.getDefiningOp<SoftmaxOp>();
    if (!softmax)
      return failure();
    int64_t rank = softmax.getType().getRank();
    int64_t axis = static_cast<int64_t>(softmax.getAxis());
    if (rank < 2 || (axis != -1 && axis != rank - 1))
      return failure();
    Value scores = softmax.getInput();
    auto scoresType = cast<RankedTensorType>(scores.getType());
    int64_t queries = scoresType.getDimSize(rank - 2), keys = scoresType.getDimSize(rank - 1);

    // Mask.
    bool causal = false;
    if (auto where = scores.getDefiningOp<WhereOp>()) {
      auto condition = where.getCondition().getDefiningOp<ConstantOp>();
      std::optional<double> fill = constantScalar(where.getOnFalse());
      if (!condition || !fill || *fill > kMaskedScore)
        return failure();
      auto mask = cast<DenseElementsAttr>(condition.getValue());
      SmallVector<bool> allowed(mask.getValues<bool>());
      if (!isCausal(mask, queries, keys, [&](int64_t e) { return allowed[e]; }))
        return failure();
      causal = true;
      scores = where.getOnTrue();
    } else if (auto add = scores.getDefiningOp<AddOp>()) {
      Value maskValue = add.getRhs(), other = add.getLhs();
      if (!maskValue.getDefiningOp<ConstantOp>())
        std::swap(maskValue, other);
      auto constant = maskValue.getDefiningOp<ConstantOp>();
      if (constant) {
        auto mask = dyn_cast<DenseElementsAttr>(constant.getValue());
        if (!mask || !isa<FloatType>(mask.getElementType()))
          return failure();
        SmallVector<APFloat> values(mask.getValues<APFloat>());
        bool valid = true;
        auto allowedAt = [&](int64_t e) {
          double value = values[e].convertToDouble();
          if (value != 0.0 && value > kMaskedScore)
            valid = false;
          return value == 0.0;
        };
        if (!isCausal(mask, queries, keys, allowedAt) || !valid)
          return failure();
        causal = true;
        scores = other;
      }
    }
    if (scores.getType() != scoresType)
      return failure();

    // Scale.
    double scale = 1.0;
    if (auto div = scores.getDefiningOp<DivOp>()) {
      std::optional<double> divisor = constantScalar(div.getRhs());
      if (!divisor || *divisor == 0.0)
        return failure();
      scale = 1.0 / *divisor;
      scores = div.getLhs();
    } else if (auto mul = scores.getDefiningOp<MulOp>()) {
      std::optional<double> factor = constantScalar(mul.getRhs());
      Value other = mul.getLhs();
      if (!factor) {
        factor = constantScalar(mul.getLhs());
        other = mul.getRhs();
      }
      if (!factor)
        return failure();
      scale = *factor;
      scores = other;
    }
    if (scores.getType() != scoresType)
      return failure();

    auto product = scores.getDefiningOp<MatMulOp>();
    if (!product)
      return failure();
    Value query = product.getLhs(), keyT = product.getRhs(), value = output.getRhs();
    // SDPA exports scale q and k by sqrt(scale) each.
    auto peelScale = [&](Value &operand) {
      auto mul = operand.getDefiningOp<MulOp>();
      if (!mul || mul.getType() != operand.getType())
        return;
      if (std::optional<double> factor = constantScalar(mul.getRhs())) {
        scale *= *factor;
        operand = mul.getLhs();
      } else if (std::optional<double> factor = constantScalar(mul.getLhs())) {
        scale *= *factor;
        operand = mul.getRhs();
      }
    };
    peelScale(query);
    peelScale(keyT);
    auto queryType = cast<RankedTensorType>(query.getType());
    auto keyTType = cast<RankedTensorType>(keyT.getType());
    auto valueType = cast<RankedTensorType>(value.getType());
    if (queryType.getRank() != rank || keyTType.getRank() != rank ||
        valueType.getRank() != rank)
      return failure();
    if (queryType.getShape().drop_back(2) != valueType.getShape().drop_back(2) ||
        keyTType.getShape().drop_back(2) != valueType.getShape().drop_back(2))
      return failure();

    // The key in [..., T, D] layout: undo the transpose the export applied,
    // folding it into the one that produced k^T where there is one.
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    std::swap(perm[rank - 1], perm[rank - 2]);
    Value source = keyT;
    if (auto transpose = keyT.getDefiningOp<TransposeOp>()) {
      source = transpose.getInput();
      perm.assign(transpose.getPerm().begin(), transpose.getPerm().end());
      std::swap(perm[rank - 1], perm[rank - 2]);
    }
    SmallVector<int64_t> keyShape(keyTType.getShape());
    std::swap(keyShape[rank - 1], keyShape[rank - 2]);
    auto keyType = RankedTensorType::get(keyShape, keyTType.getElementType());
    Value key = source;
    if (!llvm::equal(perm, llvm::seq<int64_t>(0, rank)))
      key = rewriter.create<TransposeOp>(product.getLoc(), keyType, source,
                                         rewriter.getDenseI64ArrayAttr(perm));
    rewriter.replaceOpWithNewOp<AttentionOp>(output, output.getType(), query, key, value,
                                             rewriter.getF64FloatAttr(scale),
                                             causal ? rewriter.getUnitAttr() : UnitAttr());
    return success();
  }
};

struct FuseAttentionPass : impl::FuseAttentionPassBase<FuseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttentionPattern>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace zcc::zgraph
