//===- FuseAccumulate.cpp - Accumulate gradients in their own type -------===//
//
// Mixed precision differentiates through the casts of the fp32 master
// weights, so each 16-bit weight gradient comes back to fp32 through a cast
// before it is added into its fp32 accumulator. Where that cast feeds the
// accumulation alone (no collective, offload or other op reads the fp32
// copy), the accumulation reads the 16-bit gradient itself: widening a
// float is exact, so the sums are the same bit for bit, and the step loses
// one kernel and one fp32 copy of every such gradient.
//
// An accumulation of a matrix product that nothing else reads (a weight's
// gradient, on one rank or wherever no collective comes between) then
// becomes one zgraph.accumulate_matmul: the product adds into the fp32
// accumulator as it is computed (cuBLASLt's beta = 1), so the 16-bit
// gradient is never written, read back or rounded. A product that is
// widened for a collective instead (ZeRO's buckets and reduce-scatters
// reduce in f32) writes its f32 sum itself.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace zcc::zdist {
#define GEN_PASS_DEF_FUSEACCUMULATEPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {
namespace {

/// The narrower value `cast` widens exactly (a float to a wider float), or
/// null.
Value widenedFrom(zgraph::CastOp cast) {
  auto from = dyn_cast<FloatType>(getElementTypeOrSelf(cast.getInput().getType()));
  auto to = dyn_cast<FloatType>(getElementTypeOrSelf(cast.getType()));
  if (!from || !to || from.getWidth() >= to.getWidth())
    return {};
  // Every value of the narrower format is one of the wider's: f16 and bf16
  // into f32 or f64, f32 into f64.
  const llvm::fltSemantics &narrow = from.getFloatSemantics(), &wide = to.getFloatSemantics();
  if (llvm::APFloat::semanticsPrecision(narrow) > llvm::APFloat::semanticsPrecision(wide) ||
      llvm::APFloat::semanticsMaxExponent(narrow) > llvm::APFloat::semanticsMaxExponent(wide) ||
      llvm::APFloat::semanticsMinExponent(narrow) < llvm::APFloat::semanticsMinExponent(wide))
    return {};
  return cast.getInput();
}

/// Whether the offload pass put `value` (or the op defining it) in host
/// memory.
bool onHost(Value value) {
  Operation *op = value.getDefiningOp();
  auto memory = op ? op->getAttrOfType<StringAttr>("zdist.memory") : StringAttr();
  return memory && memory.getValue() == "host";
}

/// `target += lhs @ rhs` as one product that adds into the target, where
/// `accumulate` adds a matrix product that nothing else reads, without a
/// bias, addend or activation, into a device accumulator. The fused op
/// takes the accumulation's place (and marks); the product's operands
/// already dominate it.
void fuseProduct(zgraph::AccumulateOp accumulate) {
  auto product = accumulate.getValue().getDefiningOp<zgraph::MatMulOp>();
  if (!product || !product->hasOneUse() || product.hasEpilogue() ||
      product.getLhs().getType().getRank() != 2 || product.getRhs().getType().getRank() != 2 ||
      onHost(accumulate.getTarget()) || accumulate->hasAttr("zdist.memory"))
    return;
  OpBuilder builder(accumulate);
  auto fused = builder.create<zgraph::AccumulateMatMulOp>(
      accumulate.getLoc(), accumulate.getTarget(), product.getLhs(), product.getRhs(),
      product.getTransposeLhs(), product.getTransposeRhs(), /*overwrite=*/false);
  for (NamedAttribute attr : accumulate->getAttrs())
    fused->setAttr(attr.getName(), attr.getValue());
  accumulate.erase();
  product.erase();
}

/// cast(matmul(a, b)) from 16 bits to f32, the product read by nothing
/// else: the product writes its f32 sum itself (cuBLASLt's D in f32), so
/// the 16-bit gradient, its rounding and the cast's pass are gone. What
/// is left of such casts after the accumulations above feeds the ZeRO
/// collectives (a bucket, a reduce-scatter) in f32. A product that another
/// op reads too (an offload of the 16-bit gradient) stays as it is.
void widenProduct(zgraph::CastOp cast) {
  auto product = cast.getInput().getDefiningOp<zgraph::MatMulOp>();
  if (!product || !product->hasOneUse() || product.hasEpilogue() || product.isWidened() ||
      !isa<Float16Type, BFloat16Type>(product.getType().getElementType()) ||
      !cast.getType().getElementType().isF32() || onHost(product.getResult()) ||
      onHost(cast.getResult()) ||
      product->getDiscardableAttrDictionary() != cast->getDiscardableAttrDictionary())
    return;
  product.getResult().setType(cast.getType());
  cast.replaceAllUsesWith(product.getResult());
  cast.erase();
}

struct FuseAccumulatePass : impl::FuseAccumulatePassBase<FuseAccumulatePass> {
  void runOnOperation() override {
    getOperation().walk([](zgraph::AccumulateOp accumulate) {
      if (auto cast = accumulate.getValue().getDefiningOp<zgraph::CastOp>();
          cast && cast->hasOneUse())
        if (Value narrow = widenedFrom(cast)) {
          accumulate.getValueMutable().assign(narrow);
          cast.erase();
        }
      fuseProduct(accumulate);
    });
    getOperation().walk([](zgraph::CastOp cast) { widenProduct(cast); });
  }
};

} // namespace
} // namespace zcc::zdist
