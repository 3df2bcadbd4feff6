//===- VerifyDist.cpp - Close the dist phase ------------------------------===//

#include "dialects/Dist/Transforms/Passes.h"

namespace zcc::zdist {
#define GEN_PASS_DEF_VERIFYDISTPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {
namespace {

constexpr llvm::StringLiteral kWorldSizeAttr = "zcc.world_size";

struct VerifyDistPass : impl::VerifyDistPassBase<VerifyDistPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<MeshOp> meshes;
    module.walk([&](MeshOp mesh) { meshes.push_back(mesh); });
    if (meshes.empty()) {
      module.emitError() << "the dist phase must define a zdist.mesh, but the "
                            "module has none";
      return signalPassFailure();
    }
    if (meshes.size() > 1) {
      InFlightDiagnostic diag =
          meshes[1].emitError()
          << "the dist phase defines one device mesh, but the module has "
          << meshes.size();
      diag.attachNote(meshes[0].getLoc()) << "first mesh here";
      return signalPassFailure();
    }

    MeshOp mesh = meshes.front();
    Attribute worldSize = module->getAttr(kWorldSizeAttr);
    if (!worldSize)
      return;
    auto worldSizeInt = dyn_cast<IntegerAttr>(worldSize);
    if (!worldSizeInt) {
      module.emitError() << kWorldSizeAttr << " must be an integer, got "
                         << worldSize;
      return signalPassFailure();
    }
    if (worldSizeInt.getInt() != mesh.getNumDevices()) {
      mesh.emitError() << "mesh @" << mesh.getSymName() << " has "
                       << mesh.getNumDevices() << " devices but "
                       << kWorldSizeAttr << " is " << worldSizeInt.getInt();
      return signalPassFailure();
    }
  }
};

} // namespace
} // namespace zcc::zdist
