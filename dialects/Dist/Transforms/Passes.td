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
    Reads `zero_optimization` from `zcc.config` and the "dp" axis of the
    mesh. On one data-parallel rank, or for an inference plan, it changes
    nothing. A parameter is partitioned by blocks of rows when the
    data-parallel size divides its first dimension (and, in stage 3, when it
    has more than `stage3_param_persistence_threshold` elements).

    - Stage 0: at the start of `@grad_norm` whole gradients are averaged over
      the group (`zdist.all_reduce ... reduction = avg`) in buckets of at most
      `reduce_bucket_size` elements and written back (`zgraph.assign`).
    - Stage 1: each rank keeps its rows of the optimizer state and an fp32
      master copy of its rows (initialised by `@init`); `@optimizer_step`
      updates them and all-gathers the updated rows into the parameters, in
      buckets of at most `allgather_bucket_size` elements.
    - Stage 2: each micro-step reduce-scatters its gradients into the rank's
      shard accumulators, coalesced in buckets of at most `reduce_bucket_size`
      elements (one reduce-scatter per bucket, at its last gradient).
    - Stage 3: the parameter itself is a shard. From the whole `@micro_step`
      the pass decides where each whole copy is gathered and released:
      a parameter used again within `stage3_max_reuse_distance` elements of
      other parameters stays resident, otherwise it is released after its
      use and gathered again; at the first use of a copy not yet gathered
      one coalesced all-gather (concat, gather, slice) fetches it with the
      next copies in use order, up to min(`stage3_max_live_parameters` -
      resident elements, `stage3_prefetch_bucket_size`) elements.

    Offload is the next pass's (`zcc-dist-offload`); `overlap_comm` (the
    streams and events) is decided when the plan is built
    (`zcc-dist-to-plan`).
  }];
  let dependentDialects = ["::zcc::zdist::ZDistDialect", "::zcc::zgraph::ZGraphDialect",
                           "::mlir::func::FuncDialect"];
}

def OffloadPass : Pass<"zcc-dist-offload", "mlir::ModuleOp"> {
  let summary = "CPU offload of optimizer state and parameter shards";
  let description = [{
    Reads `zero_optimization.offload_optimizer` and `offload_param` from
    `zcc.config`; with neither set to "cpu" it changes nothing. Runs after
    the ZeRO pass.

    - offload_optimizer: Adam's moments (SGD's momentum) and the master copy
      the rank updates live in host memory (`zdist.memory = "host"` on their
      `zgraph.state` ops); every optimizer update runs on the host. An update
      of a device parameter gets a host master state, set from the
      parameter by `@init` and assigned back into it after the update.
    - offload_param: the parameters ZeRO-3 partitioned (on one rank, those
      above `stage3_param_persistence_threshold` elements) live in host
      memory, and the host optimizer updates them in place; it needs
      offload_optimizer.

    Then each op runs where its in-place targets live, otherwise on the host
    (`zdist.memory = "host"`) only when every tensor operand is there; an
    operand in the other memory is copied right before its op with
    `zdist.offload` (device to host) or `zdist.fetch` (host to device),
    once per op.
  }];
  let dependentDialects = ["::zcc::zdist::ZDistDialect", "::zcc::zgraph::ZGraphDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // ZCC_DIALECT_DIST_PASSES_TD
