//===- FuseGelu.cpp - Recognise exported GELU chains ----------------------===//
//
// A GELU chain is a product whose factors are 0.5 (possibly split over
// several constants), x and (1 + erf(x / sqrt 2)) or (1 + tanh(sqrt(2 / pi)
// * (x + 0.044715 x^3))). The pattern flattens the product tree rooted at a
// mul, then checks each factor; every value inside the chain must have no
// use outside it, so the rewrite never duplicates work.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/Transforms/ConstantScalar.h"
#include "dialects/Graph/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace zcc::zgraph {
#define GEN_PASS_DEF_FUSEGELUPASS
#include "dialects/Graph/Transforms/Passes.h.inc"
} // namespace zcc::zgraph

using namespace mlir;

namespace zcc::zgraph {
namespace {

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kPi = 3.14159265358979323846;

/// The operand of a binary op `op` that is not the constant `expected`, or
/// null if neither operand is that constant.
template <typename Op> Value otherThanConstant(Op op, double expected) {
  if (isConstantNear(op.getRhs(), expected))
    return op.getLhs();
  if (isConstantNear(op.getLhs(), expected))
    return op.getRhs();
  return Value();
}

/// `value` defined by an op of type Op whose result has exactly one use.
template <typename Op> Op singleUse(Value value) {
  auto op = value.getDefiningOp<Op>();
  return op && value.hasOneUse() ? op : Op();
}

/// The factors of the product tree rooted at `root`: operands of nested
/// single-use muls are flattened, anything else is a factor.
void collectFactors(Value value, SmallVectorImpl<Value> &factors) {
  if (auto mul = singleUse<MulOp>(value)) {
    collectFactors(mul.getLhs(), factors);
    collectFactors(mul.getRhs(), factors);
    return;
  }
  factors.push_back(value);
}

/// Whether `value` is x * x * x (Pow(x, 3) or two single-use muls).
bool isCube(Value value, Value x) {
  if (auto pow = singleUse<PowOp>(value))
    return pow.getLhs() == x && isConstantNear(pow.getRhs(), 3.0);
  SmallVector<Value, 3> factors;
  if (auto mul = singleUse<MulOp>(value)) {
    collectFactors(mul.getLhs(), factors);
    collectFactors(mul.getRhs(), factors);
  }
  return factors.size() == 3 && llvm::all_of(factors, [&](Value f) { return f == x; });
}

/// The x of erf's argument x / sqrt 2 (or x * (1 / sqrt 2)), else null.
Value erfInput(Value argument) {
  if (auto div = singleUse<DivOp>(argument))
    return isConstantNear(div.getRhs(), kSqrt2) ? div.getLhs() : Value();
  if (auto mul = singleUse<MulOp>(argument))
    return otherThanConstant(mul, 1.0 / kSqrt2);
  return Value();
}

/// The x of tanh's argument sqrt(2 / pi) * (x + 0.044715 x^3), else null.
Value tanhInput(Value argument) {
  auto scale = singleUse<MulOp>(argument);
  if (!scale)
    return Value();
  auto inner = singleUse<AddOp>(otherThanConstant(scale, std::sqrt(2.0 / kPi)));
  if (!inner)
    return Value();
  for (auto [x, cubic] : {std::pair<Value, Value>{inner.getLhs(), inner.getRhs()},
                          std::pair<Value, Value>{inner.getRhs(), inner.getLhs()}}) {
    auto term = singleUse<MulOp>(cubic);
    if (term && isCube(otherThanConstant(term, 0.044715), x))
      return x;
  }
  return Value();
}

/// For (1 + erf(...)) or (1 + tanh(...)): its x and the form, else null.
std::pair<Value, StringRef> onePlusInput(Value factor) {
  auto add = singleUse<AddOp>(factor);
  if (!add)
    return {};
  Value term = otherThanConstant(add, 1.0);
  if (auto erf = singleUse<ErfOp>(term))
    return {erfInput(erf.getInput()), "none"};
  if (auto tanh = singleUse<TanhOp>(term))
    return {tanhInput(tanh.getInput()), "tanh"};
  return {};
}

struct FuseGeluPattern : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp root, PatternRewriter &rewriter) const override {
    SmallVector<Value, 4> factors;
    collectFactors(root.getLhs(), factors);
    collectFactors(root.getRhs(), factors);
    // The constants multiply to 0.5; two factors remain: x and 1 + f(x).
    double constant = 1.0;
    SmallVector<Value, 2> terms;
    for (Value factor : factors) {
      if (std::optional<double> value = constantScalar(factor))
        constant *= *value;
      else
        terms.push_back(factor);
    }
    if (terms.size() != 2 || std::abs(constant - 0.5) > 1e-6)
      return failure();
    for (auto [x, onePlus] : {std::pair{terms[0], terms[1]}, std::pair{terms[1], terms[0]}}) {
      auto [input, approximate] = onePlusInput(onePlus);
      if (!input || input != x || x.getType() != root.getType())
        continue;
      rewriter.replaceOpWithNewOp<GeluOp>(root, root.getType(), x,
                                          rewriter.getStringAttr(approximate));
      return success();
    }
    return failure();
  }
};

struct FuseGeluPass : impl::FuseGeluPassBase<FuseGeluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseGeluPattern>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace zcc::zgraph
