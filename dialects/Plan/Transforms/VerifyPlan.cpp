//===- VerifyPlan.cpp - Close the plan phase ------------------------------===//

#include "dialects/Plan/Transforms/Passes.h"

#include "dialects/Dist/IR/ZDist.h"
#include "dialects/Graph/IR/ZGraph.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace zcc::zplan {
#define GEN_PASS_DEF_VERIFYPLANPASS
#include "dialects/Plan/Transforms/Passes.h.inc"
} // namespace zcc::zplan

using namespace mlir;

namespace zcc::zplan {
namespace {

struct VerifyPlanPass : impl::VerifyPlanPassBase<VerifyPlanPass> {
  void runOnOperation() override {
    bool failed = false;
    getOperation().walk([&](Operation *op) {
      if (isa_and_nonnull<zgraph::ZGraphDialect, zdist::ZDistDialect>(
              op->getDialect())) {
        op->emitError() << "'" << op->getName()
                        << "' is left in the plan; every zgraph and zdist op "
                           "must be lowered to zplan";
        failed = true;
      }
    });
    SymbolTableCollection symbolTable;
    getOperation().walk([&](ProgramOp program) {
      if (!verifyWaits(program, symbolTable))
        failed = true;
    });
    if (failed)
      signalPassFailure();
  }

  /// Checks that each wait of `program` follows a record of its event on
  /// another stream, in program order.
  bool verifyWaits(ProgramOp program, SymbolTableCollection &symbolTable) {
    bool ok = true;
    // Keyed by the event op, not its name: a program's event may shadow the
    // module's.
    DenseMap<Operation *, llvm::SmallDenseSet<int64_t>> recordedOnStreams;
    program.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (auto record = dyn_cast<RecordOp>(op)) {
        Operation *event =
            lookupVisibleSymbol(record, record.getEventAttr(), symbolTable);
        recordedOnStreams[event].insert(record.getStream());
        return;
      }
      auto wait = dyn_cast<WaitOp>(op);
      if (!wait)
        return;
      Operation *event =
          lookupVisibleSymbol(wait, wait.getEventAttr(), symbolTable);
      auto streams = recordedOnStreams.find(event);
      bool recordedElsewhere =
          streams != recordedOnStreams.end() &&
          llvm::any_of(streams->second, [&](int64_t stream) {
            return stream != static_cast<int64_t>(wait.getStream());
          });
      if (!recordedElsewhere) {
        wait.emitError() << "wait on " << wait.getEventAttr()
                         << " has no earlier record on another stream";
        ok = false;
      }
    });
    return ok;
  }
};

} // namespace
} // namespace zcc::zplan
