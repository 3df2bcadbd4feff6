//===- Zero.cpp - ZeRO partitioning of a training step --------------------===//
//
// Places the training step on the data-parallel axis of the mesh according
// to the config's ZeRO stage. Stage 0 (plain data parallelism): every rank
// holds every parameter, gradient and optimizer state; at the accumulation
// boundary (the start of @grad_norm) each gradient accumulator is replaced by
// the average over the data-parallel group (`zdist.all_reduce`), so every
// rank computes the same norm and takes the same optimizer step.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace zcc::zdist {
#define GEN_PASS_DEF_ZEROPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {
namespace {

int64_t configInt(DictionaryAttr dict, StringRef name, int64_t defaultValue) {
  auto value = dict ? dict.getAs<IntegerAttr>(name) : IntegerAttr();
  return value ? value.getInt() : defaultValue;
}

struct ZeroPass : impl::ZeroPassBase<ZeroPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto gradNorm = module.lookupSymbol<func::FuncOp>("grad_norm");
    if (!gradNorm)
      return; // an inference plan: every rank runs its own batches
    auto meshes = llvm::to_vector(module.getOps<MeshOp>());
    if (meshes.size() != 1) {
      module.emitError("ZeRO partitioning needs exactly one zdist.mesh (run zcc-graph-to-dist)");
      return signalPassFailure();
    }
    MeshOp mesh = meshes.front();
    int64_t dataParallel = 1;
    for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getShape()))
      if (cast<StringAttr>(name).getValue() == "dp")
        dataParallel = size;
    if (dataParallel == 1)
      return;
    auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
    auto zero = config ? config.getAs<DictionaryAttr>("zero_optimization") : DictionaryAttr();
    int64_t stage = configInt(zero, "stage", 0);
    if (stage != 0) {
      module.emitError() << "ZeRO stage " << stage << " on " << dataParallel
                         << " data-parallel ranks is not supported yet (partitioned "
                            "parameters, gradients and optimizer state come later); set "
                            "zero_optimization.stage to 0, or compile with --world-size 1";
      return signalPassFailure();
    }

    // Stage 0: average every gradient over the group before it is read.
    OpBuilder builder(module.getContext());
    Block &body = gradNorm.getBody().front();
    builder.setInsertionPointToStart(&body);
    auto axes = builder.getStrArrayAttr({"dp"});
    auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
    for (auto state : llvm::to_vector(body.getOps<zgraph::StateOp>())) {
      if (state.getKind() != "grad")
        continue;
      builder.setInsertionPointAfter(state);
      auto reduced = builder.create<AllReduceOp>(
          state.getLoc(), state.getType(), state, meshRef, axes,
          ReductionKindAttr::get(builder.getContext(), ReductionKind::Avg));
      state.getResult().replaceAllUsesExcept(reduced, reduced);
      builder.create<zgraph::AssignOp>(state.getLoc(), state, reduced);
    }
  }
};

} // namespace
} // namespace zcc::zdist
