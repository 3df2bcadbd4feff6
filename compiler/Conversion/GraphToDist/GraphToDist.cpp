//===- GraphToDist.cpp - Place the graph on the device mesh ---------------===//

#include "compiler/Conversion/Passes.h"
#include "dialects/Dist/Transforms/ConfigValues.h"

#include "mlir/IR/Builders.h"

namespace zcc {
#define GEN_PASS_DEF_GRAPHTODISTPASS
#include "compiler/Conversion/Passes.h.inc"
} // namespace zcc

using namespace mlir;

namespace zcc {
namespace {

using zdist::configInt;

struct GraphToDistPass : impl::GraphToDistPassBase<GraphToDistPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
    int64_t world = configInt(config, "world_size", 1);
    int64_t stages = configInt(config, "pipeline_parallel_size", 1);
    int64_t dataParallel = configInt(config, "data_parallel_size", world);
    if (stages < 1 || dataParallel < 1 || stages * dataParallel != world) {
      module.emitError() << "the mesh of " << stages << " pipeline stages x " << dataParallel
                         << " data-parallel ranks does not fill the world size " << world
                         << "; pipeline.num_stages must divide it";
      return signalPassFailure();
    }
    OpBuilder builder(module.getBodyRegion());
    SmallVector<StringRef> names;
    SmallVector<int64_t> sizes;
    if (stages > 1) {
      names.push_back("pp");
      sizes.push_back(stages);
    }
    names.push_back("dp");
    sizes.push_back(dataParallel);
    builder.create<zdist::MeshOp>(module.getLoc(), "mesh", builder.getStrArrayAttr(names),
                                  builder.getDenseI64ArrayAttr(sizes));
  }
};

} // namespace
} // namespace zcc
