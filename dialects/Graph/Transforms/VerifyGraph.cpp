//===- VerifyGraph.cpp - Close the import phase ---------------------------===//

#include "dialects/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

namespace zcc::zgraph {
#define GEN_PASS_DEF_VERIFYGRAPHPASS
#include "dialects/Graph/Transforms/Passes.h.inc"
} // namespace zcc::zgraph

using namespace mlir;

namespace zcc::zgraph {
namespace {

bool isStaticTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape();
}

struct VerifyGraphPass : impl::VerifyGraphPassBase<VerifyGraphPass> {
  void runOnOperation() override {
    bool failed = false;
    llvm::StringMap<ParamOp> paramsByName;
    getOperation().walk([&](func::FuncOp func) {
      FunctionType type = func.getFunctionType();
      for (auto [index, input] : llvm::enumerate(type.getInputs()))
        if (!isStaticTensor(input)) {
          func.emitError() << "argument " << index << " of @" << func.getSymName()
                           << " has type " << input
                           << "; zcc needs statically shaped tensors (bind dynamic "
                              "dimensions with --input-shape)";
          failed = true;
        }
      for (auto [index, result] : llvm::enumerate(type.getResults()))
        if (!isStaticTensor(result)) {
          func.emitError() << "result " << index << " of @" << func.getSymName()
                           << " has type " << result
                           << "; zcc needs statically shaped tensors";
          failed = true;
        }
      func.walk([&](Operation *op) {
        if (op == func.getOperation() || isa<func::ReturnOp>(op))
          return;
        if (!isa_and_nonnull<ZGraphDialect>(op->getDialect())) {
          op->emitError() << "'" << op->getName()
                          << "' is not a zgraph op; the graph phase accepts only "
                             "zgraph ops and func.return";
          failed = true;
          return;
        }
        auto param = dyn_cast<ParamOp>(op);
        if (!param)
          return;
        auto [it, inserted] = paramsByName.try_emplace(param.getName(), param);
        if (!inserted && it->second.getType() != param.getType()) {
          InFlightDiagnostic diag = param.emitError()
                                    << "parameter \"" << param.getName()
                                    << "\" has type " << param.getType()
                                    << " here but " << it->second.getType()
                                    << " elsewhere";
          diag.attachNote(it->second.getLoc()) << "first declared here";
          failed = true;
        }
      });
    });
    if (failed)
      signalPassFailure();
  }
};

} // namespace
} // namespace zcc::zgraph
