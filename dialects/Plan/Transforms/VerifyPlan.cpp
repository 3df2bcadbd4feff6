//===- VerifyPlan.cpp - Close the plan phase ------------------------------===//

#include "dialects/Plan/Transforms/Passes.h"

#include "dialects/Dist/IR/ZDist.h"
#include "dialects/Graph/IR/ZGraph.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <vector>

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
      if (!verifyWaits(program, symbolTable) || !verifyStreamOrder(program, symbolTable))
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

  /// Checks that two kernels of `program` on different streams that touch
  /// the same bytes of an arena, one of them writing, are ordered by the
  /// program's events (a vector clock per stream: a record takes its
  /// stream's clock, a wait merges the event's into its stream's). Bytes,
  /// not buffers: two buffers the memory plan gives the same bytes at
  /// different times conflict as much as one buffer does.
  bool verifyStreamOrder(ProgramOp program, SymbolTableCollection &symbolTable) {
    int64_t streams = 0;
    llvm::DenseSet<int64_t> kernelStreams;
    for (Operation &op : *program.getBody()) {
      int64_t stream = -1;
      if (auto kernel = dyn_cast<KernelOp>(op))
        stream = kernel.getStream();
      else if (auto record = dyn_cast<RecordOp>(op))
        stream = record.getStream();
      else if (auto wait = dyn_cast<WaitOp>(op))
        stream = wait.getStream();
      else
        continue;
      if (isa<KernelOp>(op))
        kernelStreams.insert(stream);
      streams = std::max(streams, stream + 1);
    }
    // Kernels on one stream cannot race.
    if (kernelStreams.size() < 2)
      return true;
    using Clock = SmallVector<int64_t, 4>;
    SmallVector<Clock> clocks(streams, Clock(streams, 0));
    DenseMap<Operation *, Clock> events;
    struct Access {
      Operation *arena;
      uint64_t begin, end;
      int64_t stream, sequence;
      bool write;
      KernelOp kernel;
      BufferOp buffer;
    };
    std::vector<Access> accesses;
    int64_t sincePrune = 0;
    for (Operation &op : *program.getBody()) {
      if (auto record = dyn_cast<RecordOp>(op)) {
        Operation *event = lookupVisibleSymbol(record, record.getEventAttr(), symbolTable);
        events[event] = clocks[record.getStream()];
        continue;
      }
      if (auto wait = dyn_cast<WaitOp>(op)) {
        Operation *event = lookupVisibleSymbol(wait, wait.getEventAttr(), symbolTable);
        auto it = events.find(event);
        if (it != events.end())
          for (int64_t t = 0; t < streams; ++t)
            clocks[wait.getStream()][t] = std::max(clocks[wait.getStream()][t], it->second[t]);
        continue;
      }
      auto kernel = dyn_cast<KernelOp>(op);
      if (!kernel)
        continue;
      int64_t stream = kernel.getStream();
      Clock &clock = clocks[stream];
      int64_t sequence = ++clock[stream];
      auto touch = [&](Attribute ref, bool write) -> bool {
        auto buffer = dyn_cast_or_null<BufferOp>(
            lookupVisibleSymbol(kernel, cast<SymbolRefAttr>(ref), symbolTable));
        if (!buffer)
          return true;
        Access access{buffer->getParentOp(), buffer.getOffset(),
                      buffer.getOffset() + std::max<uint64_t>(1, buffer.getSize()),
                      stream, sequence, write, kernel, buffer};
        for (Access &other : accesses) {
          if (other.stream == stream || other.arena != access.arena ||
              other.end <= access.begin || access.end <= other.begin ||
              (!other.write && !write) || clock[other.stream] >= other.sequence)
            continue;
          kernel.emitError() << "'" << kernel.getName() << "' on stream " << stream
                             << (write ? " writes " : " reads ") << "@" << buffer.getSymName()
                             << " while '" << other.kernel.getName() << "' on stream "
                             << other.stream << (other.write ? " writes " : " reads ") << "@"
                             << other.buffer.getSymName()
                             << ", which shares its bytes, and no event orders the two (program '"
                             << program.getSymName() << "')";
          return false;
        }
        accesses.push_back(access);
        return true;
      };
      for (Attribute ref : kernel.getIns())
        if (!touch(ref, /*write=*/false))
          return false;
      for (Attribute ref : kernel.getOuts())
        if (!touch(ref, /*write=*/true))
          return false;
      // An access every stream has seen orders everything after it.
      if (++sincePrune >= 32) {
        sincePrune = 0;
        llvm::erase_if(accesses, [&](const Access &access) {
          return llvm::all_of(clocks, [&](const Clock &c) {
            return c[access.stream] >= access.sequence;
          });
        });
      }
    }
    return true;
  }
};

} // namespace
} // namespace zcc::zplan
