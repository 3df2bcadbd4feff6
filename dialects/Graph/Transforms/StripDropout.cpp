//===- StripDropout.cpp - Dropout is the identity in inference ------------===//
//
// An inference plan evaluates the model: every zgraph.dropout (ONNX Dropout
// in training mode) becomes its input, with one warning for the module.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/IR/ZGraph.h"
#include "dialects/Graph/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace zcc::zgraph {
#define GEN_PASS_DEF_STRIPDROPOUTPASS
#include "dialects/Graph/Transforms/Passes.h.inc"
} // namespace zcc::zgraph

using namespace mlir;

namespace zcc::zgraph {
namespace {

struct StripDropoutPass : impl::StripDropoutPassBase<StripDropoutPass> {
  void runOnOperation() override {
    SmallVector<DropoutOp> dropouts;
    getOperation().walk([&](DropoutOp dropout) { dropouts.push_back(dropout); });
    if (dropouts.empty())
      return;
    dropouts.front().emitWarning()
        << dropouts.size() << " Dropout node" << (dropouts.size() == 1 ? "" : "s")
        << " in training mode " << (dropouts.size() == 1 ? "is" : "are")
        << " the identity in an inference plan (as under model.eval())";
    for (DropoutOp dropout : dropouts) {
      dropout.getResult().replaceAllUsesWith(dropout.getInput());
      dropout.erase();
    }
  }
};

} // namespace
} // namespace zcc::zgraph
