//===- Registration.cpp - zcc's dialects, passes and pipelines ------------===//

#include "compiler/Pipelines/Registration.h"

#include "compiler/Conversion/Passes.h"
#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Graph/Transforms/Passes.h"
#include "dialects/Plan/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void zcc::registerZccDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::func::FuncDialect, zgraph::ZGraphDialect,
                  zdist::ZDistDialect, zplan::ZPlanDialect>();
}

void zcc::buildGraphPipeline(mlir::OpPassManager &pm, bool inference) {
  if (inference)
    pm.addPass(zgraph::createStripDropoutPass());
  pm.addPass(zgraph::createFuseAttentionPass());
  pm.addPass(zgraph::createFuseGeluPass());
  pm.addPass(zgraph::createFuseLayerNormPass());
  pm.addPass(mlir::createCSEPass());
  pm.addPass(mlir::createCanonicalizerPass());
  // Stages are assigned on the forward graph, so that autodiff gives every
  // backward op its forward op's stage.
  pm.addPass(zdist::createPipelinePartitionPass());
  pm.addPass(zgraph::createVerifyGraphPass());
}

void zcc::buildTrainPipeline(mlir::OpPassManager &pm, llvm::StringRef lossName,
                             llvm::StringRef addLoss) {
  zgraph::AutodiffPassOptions options;
  options.lossName = lossName.str();
  options.addLossKind = addLoss.str();
  pm.addPass(zgraph::createMixedPrecisionPass());
  pm.addPass(zgraph::createAutodiffPass(options));
  pm.addPass(zgraph::createOptimizerPass());
  // CSE first: recomputed ops must not be merged back into the forward ones.
  pm.addPass(mlir::createCSEPass());
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(zgraph::createRecomputePass());
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(zgraph::createVerifyGraphPass());
}

void zcc::buildInferPipeline(mlir::OpPassManager &pm, llvm::StringRef precision) {
  zgraph::MixedPrecisionPassOptions options;
  options.precision = precision.str();
  // An inference step keeps no fp32 master weights: the weights themselves
  // are 16-bit, cast once as they load instead of at every run.
  options.lowPrecisionWeights = true;
  pm.addPass(zgraph::createMixedPrecisionPass(options));
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(zgraph::createVerifyGraphPass());
}

void zcc::buildDistPipeline(mlir::OpPassManager &pm, bool recompute, int64_t recomputeBytes) {
  // The graph's last rewrite: after autodiff and recomputation, before
  // placement.
  zgraph::FuseKernelsPassOptions fuseOptions;
  fuseOptions.recompute = recompute;
  fuseOptions.recomputeBytes = recomputeBytes;
  pm.addPass(zgraph::createFuseKernelsPass(fuseOptions));
  pm.addPass(zdist::createAutoTunePass());
  pm.addPass(createGraphToDistPass());
  pm.addPass(zdist::createPipelineSchedulePass());
  pm.addPass(zdist::createZeroPass());
  pm.addPass(zdist::createOffloadPass());
  pm.addPass(zdist::createComputeCopiesPass());
  pm.addPass(zdist::createPipelineSplitPass());
  pm.addPass(zdist::createFuseAccumulatePass());
  pm.addPass(zdist::createStepGradientsPass());
  pm.addPass(zdist::createOffloadGradientsPass());
  pm.addPass(zdist::createOffloadCheckpointsPass());
  pm.addPass(zdist::createNvmeSwapPass());
}

void zcc::buildLowerToPlanPipeline(mlir::OpPassManager &pm) {
  pm.addPass(createDistToPlanPass());
  pm.addPass(zplan::createVerifyPlanPass());
}

void zcc::buildPlanPipeline(mlir::OpPassManager &pm) {
  buildDistPipeline(pm, /*recompute=*/false);
  buildLowerToPlanPipeline(pm);
}

void zcc::registerZccPasses() {
  mlir::PassPipelineRegistration<>(
      "zcc-plan-pipeline",
      "From the graph to the plan: place on the mesh, plan buffers and kernels, verify",
      buildPlanPipeline);
  registerZccConversionPasses();
  mlir::PassPipelineRegistration<>(
      "zcc-graph-pipeline",
      "The graph phase after import: fuse attention and GELU, CSE, canonicalize, verify",
      [](mlir::OpPassManager &pm) { buildGraphPipeline(pm); });
  mlir::PassPipelineRegistration<>(
      "zcc-train-pipeline",
      "The training step: autodiff, optimizer step, CSE, canonicalize, verify",
      [](mlir::OpPassManager &pm) { buildTrainPipeline(pm, "", ""); });
  zgraph::registerZGraphPasses();
  zdist::registerZDistPasses();
  zplan::registerZPlanPasses();
}
