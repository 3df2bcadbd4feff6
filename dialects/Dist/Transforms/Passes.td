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
    mesh. On one data-parallel rank, or for a pipeline's inference plan
    (whose stages split the batch), it changes nothing. A parameter is partitioned by blocks of rows when the
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
      elements (one reduce-scatter per bucket, at its last gradient). A
      gradient of 2^22 elements or more has a collective of its own, read
      where the backward pass wrote it (no copy into a bucket and back); the
      same holds for the all-reduces of stages 0 and 1 during the backward.
    - Stage 3: the parameter itself is a shard. From the whole `@micro_step`
      the pass decides where each whole copy is gathered and released:
      a parameter used again within `stage3_max_reuse_distance` elements of
      other parameters stays resident, otherwise it is released after its
      use and gathered again; at the first use of a copy not yet gathered
      one coalesced all-gather (concat, gather, slice) fetches it with the
      next copies in use order, up to min(`stage3_max_live_parameters` -
      resident elements, `stage3_prefetch_bucket_size`) elements. With
      `overlap_comm` each bucket's gather is issued right before the first
      use of the bucket before it (when both fit the live budget), so it
      runs on the communication stream while that bucket computes.

    - An inference plan (`@main`) on dp ranks: each rank runs `@main` on
      its own rows of the batch, so every input and output must have the
      micro-batch (`train_micro_batch_size_per_gpu`) as its first dimension;
      each output is all-gathered along it (rank-major) into the whole
      batch's rows. Stage 3 partitions the parameters as above and gathers
      them by the same schedule over `@main` (ZeRO-Inference); stages 0 to 2
      keep them whole on every rank.

    Offload is the next pass's (`zcc-dist-offload`); `overlap_comm` (the
    streams and events) is decided when the plan is built
    (`zcc-dist-to-plan`).
  }];
  let dependentDialects = ["::zcc::zdist::ZDistDialect", "::zcc::zgraph::ZGraphDialect",
                           "::mlir::func::FuncDialect"];
}

def AutoTunePass : Pass<"zcc-dist-auto-tune", "mlir::ModuleOp"> {
  let summary = "Picks the 'auto' ZeRO sizes from a cost model of the target";
  let description = [{
    Replaces each "auto" among `zero_optimization`'s reduce_bucket_size,
    allgather_bucket_size, stage3_prefetch_bucket_size,
    stage3_param_persistence_threshold, stage3_max_live_parameters,
    stage3_max_reuse_distance and sub_group_size in `zcc.config` with a
    value from a cost model of the module's `zcc.target` ("h200" when
    unset, "h100", "cpu"): collectives cost latency plus bytes over the
    target's bus bandwidth, a parameter costs 2 FLOPs per token of the
    micro-batch at the target's peak. Records each choice and its reason in
    the module attribute `zcc.auto_tuned`, which the report prints. Without
    "auto" it changes nothing.
  }];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect", "::mlir::func::FuncDialect"];
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
      offload_optimizer. A host parameter that the micro-steps read only
      through casts to one 16-bit type keeps that 16-bit copy in host memory
      (`zgraph.state kind = "copy"`, a `parameter_copies` buffer): `@init`
      sets it and `@optimizer_step` refreshes it right after the update, and
      the micro-steps read it in place of their casts, so they fetch half
      the bytes and run no host kernel (as DeepSpeed's CPU Adam writes the
      fp16 parameters). Checkpoints leave the copies out; `@init` rebuilds
      them.

    Then each op runs where its in-place targets live, otherwise on the host
    (`zdist.memory = "host"`) only when every tensor operand is there; an
    operand in the other memory is copied right before its op with
    `zdist.offload` (device to host) or `zdist.fetch` (host to device),
    once per op for a state or parameter (they are mutable), once per
    function for any other value (the optimizer's scalars: one offload for
    all the host updates of a step). Fetches of host values a function only reads (the
    parameters and their 16-bit copies in a micro-step) that feed device ops
    directly (on one rank; on more, ZeRO-3 schedules the all-gathers they
    feed) are then scheduled by ZeRO-3's knobs: a value read again within
    `stage3_max_reuse_distance` fetched elements of other values keeps its
    first fetch, and with `overlap_comm` each fetch is issued before the
    previous one's first use when both fit `stage3_max_live_parameters`.
  }];
  let dependentDialects = ["::zcc::zdist::ZDistDialect", "::zcc::zgraph::ZGraphDialect",
                           "::mlir::func::FuncDialect"];
}

def ComputeCopiesPass : Pass<"zcc-dist-compute-copies", "mlir::ModuleOp"> {
  let summary = "Keeps the 16-bit copies of the device's whole parameters as state";
  let description = [{
    A training module with fp16 or bf16 compute casts each f32 parameter to
    16 bits wherever a step function reads it, every micro-step. An f32
    device parameter kept whole (ZeRO stages 0 to 2, stage 3's persistent
    ones: no `zdist.shards`, no `zdist.memory = "host"`) that the step
    functions (all but `@optimizer_step` and `@init`) read only through
    casts to one 16-bit type, and that only `@optimizer_step` writes, gets
    that copy as state (`zgraph.state kind = "copy"`, a `parameter_copies`
    buffer), as DeepSpeed keeps 16-bit parameters beside its fp32 masters:
    the casts become reads of the copy, `@init` (created when missing) sets
    it from the parameter, and `@optimizer_step` refreshes it right after
    the parameter's last write there (its update, or the assign of its
    gathered rows). zcc-dist-to-plan then fuses a refresh into the adamw
    before it. The copies are derived state: checkpoints leave them out and
    `@init` rebuilds them after a resume. ZeRO-3's partitions keep their
    casts (each gather casts its own shard), so no rank holds a 16-bit copy
    of its shards. In a pipelined step a parameter whose casts are gone
    stays, unused, until zcc-dist-pipeline-split: its `zdist.stage` names
    the stage that owns its gradient and optimizer state. Runs after
    zcc-dist-offload, which keeps the copies of the parameters it moves to
    host memory the same way.
  }];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect", "::mlir::func::FuncDialect"];
}

def OffloadCheckpointsPass : Pass<"zcc-dist-offload-checkpoints", "mlir::ModuleOp"> {
  let summary = "Keeps activation checkpoints in host memory between forward and recomputation";
  let description = [{
    With `activation_checkpointing.cpu_checkpointing` and
    `partition_activations` (DeepSpeed offloads only partitioned
    checkpoints) in `zcc.config`: every checkpoint, a forward value that an
    op cloned by zcc-graph-recompute (`zgraph.recompute`) reads, is copied
    to host memory (`zdist.offload`) right after the forward computes it,
    and back (`zdist.fetch`) right before the recomputation first reads it;
    the recomputation and the backward after it read the copy. The device then holds a checkpoint
    only until its last forward use and again from its fetch, so between
    the forward and the backward it keeps none of them. Pipeline stages are
    an error for now.
  }];
  let dependentDialects = ["::zcc::zdist::ZDistDialect", "::zcc::zgraph::ZGraphDialect",
                           "::mlir::func::FuncDialect"];
}

def NvmeSwapPass : Pass<"zcc-dist-nvme-swap", "mlir::ModuleOp"> {
  let summary = "Keeps offloaded optimizer state and parameters on NVMe, swapped in where used";
  let description = [{
    With `zero_optimization.offload_optimizer.device` "nvme" in `zcc.config`
    (ZeRO-Infinity), the state that the host optimizer updates in place
    (its master copies, moments, momentum and sums: every `zgraph.state`
    an optimizer op updates, all in host memory after zcc-dist-offload,
    and a host `zgraph.param` it updates that no function fetches, the
    fp32 master of a parameter whose micro-steps read its 16-bit copy)
    lives in the rank's swap file instead (`zdist.memory = "nvme"`). With
    `offload_param.device` "nvme", so does what the functions read of a
    host parameter on its way to the device (its 16-bit copy, or the host
    shard itself): every partition of at least 1 MiB (or aio.block_size)
    beyond the first `offload_param.max_in_cpu` elements, in the order the
    functions first read them.

    In each function, the first op that uses such a value is preceded by
    a `zdist.swap_in` of it into host memory, every use up to the last one
    reads and updates that host value, and a `zdist.swap_out` after the
    last use writes it back when some op wrote it. A value the function
    only reads for the device (a fetch, or the host reshapes and
    concatenation of a ZeRO-3 gather bucket) gets a `zdist.swap_in` of its
    own right before each reader instead. An assign that sets a whole
    state from a host value before anything else uses it becomes a
    `zdist.swap_out` of that value. Runs last among the dist passes, after
    the pipeline split.
  }];
  let dependentDialects = ["::zcc::zdist::ZDistDialect", "::zcc::zgraph::ZGraphDialect",
                           "::mlir::func::FuncDialect"];
}

def OffloadGradientsPass : Pass<"zcc-dist-offload-gradients", "mlir::ModuleOp"> {
  let summary = "Streams one-step gradients to host memory during the backward";
  let description = [{
    With `zero_optimization.offload_optimizer.device` "cpu" in `zcc.config`,
    each gradient that lives for one step (`zdist.step_local`, from
    zcc-dist-step-gradients) and that only host updates and the norm read is
    copied to host memory as soon as `@micro_step` has written it, as
    ZeRO-Offload moves each reduced gradient partition to the CPU during the
    backward: right after its last write, a `zdist.offload` of it is
    assigned into `zgraph.state kind = "host_grad"` (host, one step). The
    copy runs on the communication stream while the backward goes on, the
    device gradient is live only from its write to that copy, and
    `@optimizer_step` reads the host gradient instead of offloading it
    after the backward. With `fp16` or `bf16` enabled, a gradient every
    host reader of which is an adamw crosses in those 16 bits, as
    DeepSpeed's offload moves its 16-bit gradients: its f32 value is cast
    on the device (a gradient assigned from a value already in 16 bits
    crosses as that value, and its f32 buffer goes), the norm sums the
    squares of the 16-bit copy, and the host adamw widens it as it reads. In `@grad_norm`, the sums of squares over such
    gradients run on the host over the host copies (a sum over both kinds
    splits in two) and their result is fetched.

    A gradient qualifies when `@micro_step` only writes it in place,
    `@optimizer_step` only copies it to host updates and `@grad_norm` only
    sums its squares (a ZeRO-3 persistent parameter's gradient, all-reduced
    in `@grad_norm`, or stage 1's rows the update slices, do not).
    Accumulating gradients (`gradient_accumulation_steps` above 1) stay on
    the device. Runs after zcc-dist-step-gradients.
  }];
  let dependentDialects = ["::zcc::zdist::ZDistDialect", "::zcc::zgraph::ZGraphDialect",
                           "::mlir::func::FuncDialect"];
}

def PipelinePartitionPass : Pass<"zcc-dist-pipeline-partition", "mlir::ModuleOp"> {
  let summary = "Assigns the forward graph's ops to pipeline stages";
  let description = [{
    Reads `pipeline.num_stages` and `pipeline.partition_method` from
    `zcc.config`; with one stage (or the pipeline disabled) it changes
    nothing. Runs on the forward graph (`@main`), before autodiff, which
    gives each backward op the stage of the forward op it differentiates.

    The units of partitioning are the ops that depend on the data, in
    program order; an op computed from parameters and constants alone goes
    with its first user. Each unit weighs, by `partition_method`:
    - `parameters`: the elements of the float parameters (weights) it
      uses; a parameter used by several units counts at each, as
      DeepSpeed counts a tied layer at each of its layer specs (GPT-2's
      embedding at the input and again at the output layer);
    - `flops`: its estimated floating-point operations;
    - `uniform`: 1 if it uses a parameter (a layer), else 0;
    - `type:REGEX`: 1 if its ONNX node name or its op name matches REGEX
      (case-insensitive), else 0.
    The stages are contiguous runs of units, each with at least one unit
    of positive weight, whose heaviest stage is within 5% of the lightest
    possible heaviest stage (DeepSpeed's partition_balanced); among those,
    the cuts that move the fewest bytes between stages win, then the ones
    with the lightest heaviest stage, so cuts fall between layers (where
    only the residual stream crosses). Each unit gets `zdist.stage`, a
    parameter (and a value made from parameters) the stage of its first
    user; the module gets `zdist.partition` with each stage's weight,
    parameter elements and flops.

    Fails when fewer units than stages have positive weight (more stages
    than layers) or when the method is unknown.
  }];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect", "::mlir::func::FuncDialect"];
}

def PipelineSchedulePass : Pass<"zcc-dist-pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Inserts stage transfers and builds each stage's schedule";
  let description = [{
    Runs on a module whose step function (`@micro_step` for training,
    `@main` for inference) has ops assigned to stages (`zdist.stage`,
    backward ops marked `zdist.backward`), and a mesh with a "pp" axis; with
    one stage it changes nothing.

    Every operand computed on another stage than its user's is replaced by
    a `zdist.transfer` from the producer's stage to the user's (one per
    value and target stage). Values made of constants alone have no stage
    and need none. A forward value may only go to a later stage and a
    gradient to an earlier one.

    It then writes each stage's instruction list for `pipeline.schedule`
    over `pipeline.micro_batches` micro-batches as a `zdist.pipeline` op:
    - `gpipe`: all forward passes, then all backward passes;
    - `1f1b`: stage s runs min(p - s - 1, m) forward passes, then
      alternates one forward and one backward pass, then drains the
      backward passes, so it holds at most p - s micro-batches;
    - `zb-h1`: 1F1B's passes and messages, with each stage's backward pass
      split in B (what the gradient it sends back needs) and W (the rest,
      marked `zdist.weights`), W placed on the model where the stage would
      wait, each stage holding at most min(p, m) micro-batches; a stage
      that sends no gradient back keeps one backward pass;
    - `interleaved` (m a multiple of p): the ops were partitioned into
      p x `pipeline.chunks` (v) chunks, chunk c on stage c mod p; stage s
      runs Megatron's interleaved 1F1B order of its chunks' passes
      ((p - s - 1) x 2 + (v - 1) x p forward passes of warm-up, all when
      m = p), its sends and receives placed by running the passes on the
      model of the stages (a stage sends a value its receiver needs next
      when it would wait no longer for the receiver than the receiver for
      it), each instruction naming its chunk (`F<k>@<c>`); `buffers` gets
      one count per chunk, and `memory` and `flops` each stage's sums;
    an inference step runs the forward passes only. Sends and receives
    are placed so that no two stages wait on each other (a stage that both
    sends to and receives from a neighbour sends first on even stages).
    The schedule is simulated with each stage's estimated forward and
    backward flops (communication free) to give `bubble_fraction`, the
    idle share of p x the step time, and each stage's `buffers`, the most
    micro-batches whose activations it holds at once. `memory` gives each
    stage's bytes of parameters, gradients, optimizer state and activation
    buffers (the values its backward pass keeps, and a split one's W pass
    from its B pass, times `buffers`).

  }];
  let dependentDialects = ["::zcc::zdist::ZDistDialect", "::zcc::zgraph::ZGraphDialect",
                           "::mlir::func::FuncDialect"];
}

def PipelineSplitPass : Pass<"zcc-dist-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Splits the scheduled step into each pipeline stage's programs";
  let description = [{
    Runs after zcc-dist-pipeline-schedule and ZeRO, on a module with a
    `zdist.pipeline`; without one it changes nothing. For each stage s and
    each of its activation buffers k (the slot of micro-batches k, k +
    buffers, ...) it writes the functions the plan runs as programs, each
    marked `zdist.stage = s`:
    - `s<s>.forward.<k>`: the stage's forward ops; it stores the values its
      backward pass reads and the values it sends (`zdist.store`) and
      returns the step's results computed on the stage (the loss);
    - `s<s>.backward.<k>` (training): the stage's backward ops, reading the
      kept values and received gradients as arguments (its B ops where a
      zb-h1 schedule split it, storing what its W ops read);
    - `s<s>.weights.<k>` (a split stage): its W ops (`zdist.weights`);
    - `s<s>.recv_activations.<k>`, `send_activations`, `recv_gradients`,
      `send_gradients`: one `zdist.recv`/`zdist.send` per transfer whose
      path crosses the stage's boundary; a transfer over several stages is
      relayed by the stages between;
    - `s<s>.grad_norm`, `optimizer_step`, `zero_grads`, `init`: the step
      functions restricted to the parameters the stage owns (a sum of
      squares keeps the stage's gradients);
    - `s<s>.sync`: a parameter read on a stage other than its owner's (tied
      weights) is sent by the owner, with its low-precision copy, after
      init and each optimizer step.
    Under the interleaved schedule each chunk c of stage s has its own
    programs, `s<s>.c<c>.forward.<k>` and so on (k a slot of the chunk's
    `buffers`), and its own named buffers (`zcc.pp.c<c>.*`); sends and
    receives name the stage of the neighbouring chunk; the step functions
    and `sync` are one per stage, over all its chunks' parameters.
    Values that cross programs are named buffers (`zcc.pp.*` arguments).
    Ops that ZeRO added after scheduling take their operands' stage;
    values of parameters and constants alone are made again in each
    function that reads them. The step functions are erased.
  }];
  let dependentDialects = ["::zcc::zdist::ZDistDialect", "::zcc::zgraph::ZGraphDialect",
                           "::mlir::func::FuncDialect"];
}

def FuseAccumulatePass : Pass<"zcc-dist-fuse-accumulate", "mlir::ModuleOp"> {
  let summary = "Adds 16-bit gradients into their accumulators without widening them first";
  let description = [{
    The dist phase's last rewrite, after ZeRO, offload and the pipeline
    split. A `zgraph.accumulate` whose value is a `zgraph.cast` that widens
    a float exactly (bf16 or f16 to f32 or f64, f32 to f64) and that
    nothing else reads accumulates the cast's input instead, and the cast
    is erased: the accumulation widens as it reads, so every sum is the
    same and the step has one kernel and one wide buffer fewer per such
    gradient. Casts that also feed a collective, an offload or any other op
    stay.

    Then an accumulation whose value is a `zgraph.matmul` of two matrices
    without a bias, read by nothing else, into an accumulator in device
    memory, becomes one `zgraph.accumulate_matmul` in its place: the product
    is summed in the accumulator's type and added to it directly.

    Last, a cast to f32 of a 16-bit `zgraph.matmul` without an epilogue
    that nothing else reads (a weight gradient widened for ZeRO's buckets
    and reduce-scatters, which reduce in f32) becomes the product with an
    f32 result: the f32 sum is written once, never rounded to 16 bits. A
    product that something else reads too (the 16-bit gradient offloaded to
    the host) keeps its cast.
  }];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect"];
}

def StepGradientsPass : Pass<"zcc-dist-step-gradients", "mlir::ModuleOp"> {
  let summary = "Gradients that live for one step share the activations' bytes";
  let description = [{
    With one micro-step per optimizer step (`gradient_accumulation_steps`
    1 in `zcc.config`, no `zdist.pipeline`), a gradient accumulator holds a
    value only from the backward pass that writes it to the optimizer step
    that reads it, as PyTorch's gradients do between `backward()` and
    `zero_grad(set_to_none=True)`. For each accumulator whose first use in
    `@micro_step` adds into it:
    - that addition overwrites it instead (a `zgraph.accumulate` becomes a
      `zgraph.assign`, a `zgraph.accumulate_matmul` takes `overwrite`);
    - its fills in `@optimizer_step` and `@zero_grads` are erased (the
      next micro-step overwrites it);
    - its `zgraph.state` ops are marked `zdist.step_local`, and the plan
      gives it a live range instead of bytes of its own: it shares bytes
      with the forward pass's activations, which the backward frees as it
      writes the gradients.
    An accumulator that `@micro_step` reads before it writes, or that a
    function other than the four step functions uses, keeps its bytes. The
    dist phase's last rewrite, after zcc-dist-fuse-accumulate; without
    `zcc.config`, with accumulation, or with the module attribute
    `zcc.accumulating_gradients` (zcc --accumulating-gradients, for plans
    whose accumulation count zrun --grad-accum raises), it changes nothing.
  }];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect"];
}

#endif // ZCC_DIALECT_DIST_PASSES_TD
