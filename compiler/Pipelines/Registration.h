//===- Registration.h - zcc's dialects, passes and pipelines ----*- C++ -*-===//
//
// The one place that knows every dialect, pass and pass pipeline of zcc; the
// tools (zcc, zcc-opt) register through it and nothing else.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_COMPILER_PIPELINES_REGISTRATION_H
#define ZCC_COMPILER_PIPELINES_REGISTRATION_H

#include "llvm/ADT/StringRef.h"

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace zcc {

/// zgraph, zdist, zplan and the upstream dialects they are used with.
void registerZccDialects(mlir::DialectRegistry &registry);

/// Every zcc pass and pass pipeline, for command-line parsing.
void registerZccPasses();

/// After import: for an inference plan (`inference`) drop the dropouts,
/// then fuse attention, clean up, and close the graph phase
/// (`zcc-graph-pipeline` in zcc-opt, for training).
void buildGraphPipeline(mlir::OpPassManager &pm, bool inference = false);

/// The dist phase: place the graph on the mesh, ZeRO partitioning, CPU
/// offload (what `zcc --emit dist` prints). `recompute`: GELU and layer
/// norm outputs are recomputed in the backward pass rather than kept from
/// the forward pass, the first ones in forward order until
/// `recomputeBytes` bytes are (0: all; zcc-graph-fuse-kernels' options).
void buildDistPipeline(mlir::OpPassManager &pm, bool recompute, int64_t recomputeBytes = 0);

/// From the dist phase's output to the verified plan module.
void buildLowerToPlanPipeline(mlir::OpPassManager &pm);

/// From the graph to the plan: both of the above (`zcc-plan-pipeline` in
/// zcc-opt), nothing recomputed.
void buildPlanPipeline(mlir::OpPassManager &pm);

/// The training step from the verified forward graph: autodiff (`lossName`
/// picks the loss output; `addLoss` adds one: "cross-entropy" or "mse"),
/// the optimizer step, CSE, canonicalization and verification.
void buildTrainPipeline(mlir::OpPassManager &pm, llvm::StringRef lossName,
                        llvm::StringRef addLoss);

/// An inference plan from the verified forward graph in `precision` ("bf16"
/// or "fp16"): the fp32 weights cast where they are used, verified.
void buildInferPipeline(mlir::OpPassManager &pm, llvm::StringRef precision);

} // namespace zcc

#endif // ZCC_COMPILER_PIPELINES_REGISTRATION_H
