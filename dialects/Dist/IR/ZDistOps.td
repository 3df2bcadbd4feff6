//===- ZDistOps.td - zdist operations ----------------------*- tablegen -*-===//

#ifndef ZCC_DIALECT_DIST_ZDISTOPS_TD
#define ZCC_DIALECT_DIST_ZDISTOPS_TD

include "dialects/Dist/IR/ZDistAttrs.td"
include "dialects/Dist/IR/ZDistDialect.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Shard shapes are computed at compile time, so every zdist tensor is static.
def ZDist_Tensor : StaticShapeTensorOf<[AnyType]>;

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

def ZDist_MeshOp : ZDist_Op<"mesh", [Symbol]> {
  let summary = "The device mesh";
  let description = [{
    Arranges the job's devices in a named n-dimensional grid. Axis `i` is
    named `axis_names[i]` and has `shape[i]` devices; the product of the
    shape is the number of devices. Shardings and collectives refer to the
    mesh by symbol and to its axes by name.

    ```mlir
    // 2 pipeline stages, each 4-way data parallel: 8 devices.
    zdist.mesh @m ["pp" = 2, "dp" = 4]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$shape);
  let assemblyFormat = [{
    $sym_name custom<MeshAxes>($axis_names, $shape) attr-dict
  }];
  let extraClassDeclaration = [{
    /// The number of devices along `axis`, or nothing if the mesh has no
    /// axis of that name.
    std::optional<int64_t> getAxisSize(::llvm::StringRef axis);
    /// The number of devices in the mesh.
    int64_t getNumDevices();
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Global and local values
//===----------------------------------------------------------------------===//

def ZDist_ShardOp : ZDist_Op<"shard", [Pure, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "This device's shard of a global tensor";
  let description = [{
    Takes the global (logical) value and gives the part of it this device
    holds under `sharding`: each dimension divided by the product of the sizes
    of the mesh axes that split it. No data moves; the op records where a
    global value becomes a per-device one. In the op the sharding is written
    without its `#zdist.sharding` prefix.

    ```mlir
    zdist.mesh @m ["dp" = 2]
    %local = zdist.shard %w to <@m, [{"dp"}, {} ]>
        : tensor<8x4xf32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins ZDist_Tensor:$input, ZDist_ShardingAttr:$sharding);
  let results = (outs ZDist_Tensor:$result);
  // Not qualified: MLIR's parser reads a `: type` after a full
  // `#dialect.attr<...>` as the attribute's type, and would take the op's.
  let assemblyFormat = [{
    $input `to` $sharding attr-dict `:` type($input) `->` type($result)
  }];
}

def ZDist_UnshardOp : ZDist_Op<"unshard", [Pure, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "The global tensor whose shard this device holds";
  let description = [{
    The inverse of `zdist.shard`: names the global value of which the operand
    is this device's shard under `sharding`. No data moves; use a collective
    to actually assemble the global value on a device.

    ```mlir
    zdist.mesh @m ["dp" = 2]
    %global = zdist.unshard %local from <@m, [{"dp"}, {} ]>
        : tensor<4x4xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins ZDist_Tensor:$input, ZDist_ShardingAttr:$sharding);
  let results = (outs ZDist_Tensor:$result);
  let assemblyFormat = [{
    $input `from` $sharding attr-dict `:` type($input) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// A collective runs in each group of devices that differ only in their
// coordinates along `mesh_axes`; the group size is the product of those axes'
// sizes. Operands and results are local tensors.
class ZDist_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : ZDist_Op<mnemonic, !listconcat(traits, [Pure,
        SameOperandsAndResultElementType,
        DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  let hasVerifier = 1;
}

def ZDist_AllGatherOp : ZDist_CollectiveOp<"all_gather"> {
  let summary = "Concatenates the group's tensors along one dimension";
  let description = [{
    Every device of the group receives the concatenation, in group order, of
    the group's operands along `gather_axis`: that dimension of the result is
    the operand's times the group size. ZeRO-3 uses it to assemble a
    parameter before its use.

    ```mlir
    zdist.mesh @m ["dp" = 4]
    %full = zdist.all_gather %shard on @m axes = ["dp"] gather_axis = 0
        : tensor<2x4xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins ZDist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$gather_axis);
  let results = (outs ZDist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes `gather_axis` `=` $gather_axis
    attr-dict `:` type($input) `->` type($result)
  }];
}

def ZDist_ReduceScatterOp : ZDist_CollectiveOp<"reduce_scatter"> {
  let summary = "Reduces the group's tensors and splits the result";
  let description = [{
    Combines the group's operands element-wise with `reduction`, splits the
    combined tensor along `scatter_axis` into as many equal parts as the group
    has devices, and gives each device its part: that dimension of the result
    is the operand's divided by the group size. ZeRO-2 and ZeRO-3 use it to
    reduce gradients into their owners' shards.

    ```mlir
    zdist.mesh @m ["dp" = 4]
    %grad_shard = zdist.reduce_scatter %grad on @m axes = ["dp"]
        scatter_axis = 0 reduction = avg : tensor<8x4xf32> -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins ZDist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$scatter_axis,
                       ZDist_ReductionKind:$reduction);
  let results = (outs ZDist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes `scatter_axis` `=` $scatter_axis
    `reduction` `=` $reduction attr-dict `:` type($input) `->` type($result)
  }];
}

def ZDist_AllReduceOp : ZDist_CollectiveOp<"all_reduce",
    [SameOperandsAndResultType]> {
  let summary = "Reduces the group's tensors onto every device of the group";
  let description = [{
    Every device of the group receives the element-wise `reduction` of the
    group's operands. Data parallelism without ZeRO uses it for gradients.

    ```mlir
    zdist.mesh @m ["dp" = 4]
    %grad_mean = zdist.all_reduce %grad on @m axes = ["dp"] reduction = avg
        : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins ZDist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes, ZDist_ReductionKind:$reduction);
  let results = (outs ZDist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes `reduction` `=` $reduction
    attr-dict `:` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Host memory
//===----------------------------------------------------------------------===//

def ZDist_OffloadOp : ZDist_Op<"offload", [Pure, SameOperandsAndResultType]> {
  let summary = "Copies a device value into host memory";
  let description = [{
    The result is the operand's value in the rank's (pinned) host memory.
    CPU offload (`offload_optimizer`, `offload_param`) moves gradients to
    the host this way before the host runs the optimizer. Ops marked
    `zdist.memory = "host"` (and `zgraph.param` / `zgraph.state` ops so
    marked) run on, or live in, host memory; every other value is on the
    device, and a value only crosses between the two through `offload` and
    `fetch`.

    ```mlir
    %g_host = zdist.offload %g : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins ZDist_Tensor:$input);
  let results = (outs ZDist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def ZDist_FetchOp : ZDist_Op<"fetch", [Pure, SameOperandsAndResultType]> {
  let summary = "Copies a host value into device memory";
  let description = [{
    The inverse of `zdist.offload`: the result is the host operand's value
    in device memory, e.g. an offloaded parameter shard before its
    all-gather, or a master shard the host optimizer updated.

    ```mlir
    %w_dev = zdist.fetch %w_host : tensor<2x4xf32>
    ```
  }];
  let arguments = (ins ZDist_Tensor:$input);
  let results = (outs ZDist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// NVMe
//===----------------------------------------------------------------------===//

// Its result is a staged copy of a zgraph.state (dialects/Graph/IR/StagedState.h).
def ZGraph_StagedState : NativeOpTrait<"StagedState"> {
  let cppNamespace = "::zcc::zgraph";
}

def ZDist_SwapInOp : ZDist_Op<"swap_in", [SameOperandsAndResultType, ZGraph_StagedState]> {
  let summary = "Reads NVMe-resident state into host memory";
  let description = [{
    ZeRO-Infinity's NVMe tier (`offload_optimizer.device` or
    `offload_param.device` "nvme"): a state or parameter marked
    `zdist.memory = "nvme"` lives in the rank's swap file under
    `nvme_path`, and only `swap_in` reads it. The result is its value in
    host memory, a staging buffer the host ops read and update in place
    until a `zdist.swap_out` writes it back (or a fetch copies to the
    device). Not pure: it reads the file as it is at this point of the
    program.

    ```mlir
    %m = zgraph.state "w" kind = "exp_avg" {zdist.memory = "nvme"} : tensor<8x4xf32>
    %m_host = zdist.swap_in %m : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins ZDist_Tensor:$input);
  let results = (outs ZDist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def ZDist_SwapOutOp : ZDist_Op<"swap_out", [AllTypesMatch<["value", "target"]>]> {
  let summary = "Writes a host value into NVMe-resident state";
  let description = [{
    The inverse of `zdist.swap_in`: writes the host operand `value` over
    the NVMe-resident `target` (a `zgraph.state` or `zgraph.param` marked
    `zdist.memory = "nvme"`).

    ```mlir
    zdist.swap_out %m_host into %m : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins ZDist_Tensor:$value, ZDist_Tensor:$target);
  let assemblyFormat = "$value `into` $target attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Lifetimes
//===----------------------------------------------------------------------===//

def ZDist_ReleaseOp : ZDist_Op<"release"> {
  let summary = "Ends the life of a gathered parameter";
  let description = [{
    After this op the operand is no longer used, so its memory can be reused.
    The prefetch and release schedule places it right after the last use of
    a parameter that an `all_gather` assembled (ZeRO-3), so that the plan can
    free the full parameter and keep only its shard. It has no result and is
    not pure, so it stays where the schedule put it.

    ```mlir
    zdist.release %full : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins ZDist_Tensor:$input);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Pipeline stages
//===----------------------------------------------------------------------===//

def ZDist_TransferOp : ZDist_Op<"transfer", [Pure, SameOperandsAndResultType]> {
  let summary = "A value that crosses from one pipeline stage to another";
  let description = [{
    The op that uses the result runs on stage `target`; the operand is
    computed on stage `source`. In the forward pass an activation goes to a
    later stage, in the backward pass a gradient to an earlier one; a
    transfer over several stages is relayed by the stages between them. It
    lowers to a `send` on the source stage and a `recv` on the target stage
    (on the ranks of the same data-parallel index).

    ```mlir
    %x1 = zdist.transfer %x from 0 to 1 : tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$source,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$target);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `from` $source `to` $target attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def ZDist_PipelineOp : ZDist_Op<"pipeline"> {
  let summary = "The pipeline schedule: each stage's instruction list";
  let description = [{
    One entry of `stages` per pipeline stage: the instructions that stage
    runs in one step, in order, separated by spaces. `F<k>` and `B<k>` are
    the forward and backward pass of micro-batch k; `sa<k>`/`ra<k>` send
    and receive micro-batch k's activations (to the next stage, from the
    previous one), `sg<k>`/`rg<k>` its gradients (to the previous stage,
    from the next one). Under "zb-h1" a stage whose backward pass splits
    runs `B<k>` for what its gradient send needs and `W<k>`, later, for the
    rest (its weight gradients). Under "interleaved" each stage s holds
    chunks s, s + p, s + 2p, ... of the model cut into `buffers`' count of
    chunks (p the stages), and its instructions name the chunk: `F<k>@<c>`
    runs chunk c's forward pass of micro-batch k, `sa<k>@<c>` sends chunk
    c's activations to chunk c + 1 (on the next stage, stage 0 after the
    last). `buffers` is the number of micro-batches whose activations a
    stage (under "interleaved", a chunk) holds at once (its activation
    buffers);
    `bubble_fraction` the idle share of the step predicted from the
    stages' costs; `memory` each stage's bytes by category.

    ```mlir
    zdist.pipeline "gpipe" micro_batches = 2 buffers = [2, 2]
        bubble_fraction = 0.333 stages = ["F0 sa0 F1 sa1 rg0 B0 rg1 B1",
                                          "ra0 F0 ra1 F1 B0 sg0 B1 sg1"]
    ```
  }];
  let arguments = (ins StrAttr:$schedule,
                       ConfinedAttr<I64Attr, [IntPositive]>:$micro_batches,
                       DenseI64ArrayAttr:$buffers, F64Attr:$bubble_fraction,
                       StrArrayAttr:$stages);
  let assemblyFormat = [{
    $schedule `micro_batches` `=` $micro_batches `buffers` `=` $buffers
    `bubble_fraction` `=` $bubble_fraction `stages` `=` $stages attr-dict
  }];
  let hasVerifier = 1;
}

def ZDist_SendOp : ZDist_Op<"send"> {
  let summary = "Sends a value to another pipeline stage";
  let description = [{
    Sends the operand to the rank of pipeline stage `peer` with this rank's
    data-parallel index, whose matching `zdist.recv` receives it: the k-th
    send from stage a to stage b pairs with b's k-th receive from a.

    ```mlir
    zdist.send %x to 1 : tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$peer);
  let assemblyFormat = "$input `to` $peer attr-dict `:` type($input)";
}

def ZDist_RecvOp : ZDist_Op<"recv"> {
  let summary = "Receives a value from another pipeline stage";
  let description = [{
    The value the rank of pipeline stage `peer` (with this rank's
    data-parallel index) sends with its matching `zdist.send`. With
    `into`, the received value is written into the buffer that outlives
    the program under that key (a named value another program of the stage
    reads, or a parameter's or state's buffer).

    ```mlir
    %x = zdist.recv from 0 into "input:zcc.pp.t0.k1" : tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$peer,
                       OptionalAttr<StrAttr>:$into);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "`from` $peer (`into` $into^)? attr-dict `:` type($result)";
}

def ZDist_StoreOp : ZDist_Op<"store"> {
  let summary = "Keeps a value in a buffer that outlives the program";
  let description = [{
    Copies the operand into the buffer named `into`, which another program
    of the same stage reads as its argument of that name: how a pipeline
    stage's forward pass hands its activations to the backward pass and to
    the sends of a later program, and how a stage keeps its copy of another
    stage's offloaded parameter (`zdist.memory = "host"`: the buffer is in
    host memory).

    ```mlir
    zdist.store %h into "input:zcc.pp.stash0.k1" : tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrAttr:$into);
  let assemblyFormat = "$input `into` $into attr-dict `:` type($input)";
}

#endif // ZCC_DIALECT_DIST_ZDISTOPS_TD
