//===- Passes.td - zdist passes ----------------------------*- tablegen -*-===//

#ifndef ZCC_DIALECT_DIST_PASSES_TD
#define ZCC_DIALECT_DIST_PASSES_TD

include "mlir/Pass/PassBase.td"

def VerifyDistPass : Pass<"zcc-dist-verify", "mlir::ModuleOp"> {
  let summary = "Closes the dist phase: checks the module has one mesh that fits the job";
  let description = [{
    Runs after the graph has been distributed (shardings chosen, collectives
    and releases inserted), before the plan is built. It fails on:
    - a module without a `zdist.mesh`, or with more than one: the plan holds
      one mesh and gives every rank its coordinates in it;
    - a module attribute `zcc.world_size` that is not an integer, or that
      differs from the number of devices in the mesh (the product of its
      shape): the mesh must use exactly the devices the job is started on.
      Without `zcc.world_size` the mesh alone sets the number of ranks.
    It assumes the ops themselves verify (each sharding and collective agrees
    with the mesh) and changes nothing.
  }];
  let dependentDialects = ["::zcc::zdist::ZDistDialect"];
}

def ZeroPass : Pass<"zcc-dist-zero", "mlir::ModuleOp"> {
  let summary = "ZeRO partitioning of the training step over the data-parallel axis";
  let description = [{
    Reads `zero_optimization.stage` from `zcc.config` and the "dp" axis of
    the mesh. On one data-parallel rank, or for an inference plan, it changes
    nothing. Stage 0 (plain data parallelism): at the start of `@grad_norm`
    each gradient accumulator is averaged over the group (`zdist.all_reduce
    ... reduction = avg`) and written back (`zgraph.assign`), so every rank
    computes the same norm and takes the same optimizer step. Stages 1 to 3
    on more than one rank are not built yet and are an error that says so.
  }];
  let dependentDialects = ["::zcc::zdist::ZDistDialect", "::zcc::zgraph::ZGraphDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // ZCC_DIALECT_DIST_PASSES_TD
