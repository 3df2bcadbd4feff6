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

struct FuseAccumulatePass : impl::FuseAccumulatePassBase<FuseAccumulatePass> {
  void runOnOperation() override {
    getOperation().walk([](zgraph::AccumulateOp accumulate) {
      auto cast = accumulate.getValue().getDefiningOp<zgraph::CastOp>();
      if (!cast || !cast->hasOneUse())
        return;
      Value narrow = widenedFrom(cast);
      if (!narrow)
        return;
      accumulate.getValueMutable().assign(narrow);
      cast.erase();
    });
  }
};

} // namespace
} // namespace zcc::zdist
