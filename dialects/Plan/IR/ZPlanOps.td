//===- ZPlanOps.td - zplan operations ----------------------*- tablegen -*-===//

#ifndef ZCC_DIALECT_PLAN_ZPLANOPS_TD
#define ZCC_DIALECT_PLAN_ZPLANOPS_TD

include "dialects/Plan/IR/ZPlanAttrs.td"
include "dialects/Plan/IR/ZPlanDialect.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"

def ZPlan_Stream : ConfinedAttr<I64Attr, [IntNonNegative]>;

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

def ZPlan_ArenaOp : ZPlan_Op<"arena", [Symbol, SymbolTable, IsolatedFromAbove,
    SingleBlock, NoTerminator]> {
  let summary = "One allocation that holds buffers at fixed offsets";
  let description = [{
    The runtime allocates each arena once, before the first step, with
    `size` bytes aligned to `alignment`, in device memory, (`in host`) in
    pinned host memory, or (`in nvme`) as the rank's swap file under the
    config's `nvme_path`, whose buffers only `swap_in` and `swap_out` read
    and write. The arena's body declares its buffers; their offsets
    are the static memory plan. Buffers may overlap: two buffers that are
    never live at the same time share bytes, which is the point of planning.

    ```mlir
    zplan.arena @device size 4096 alignment 256 {
      zplan.buffer @b0 offset 0 size 1024
      zplan.buffer @b1 offset 1024 size 3072
    }
    zplan.arena @pinned in host size 1024 alignment 64 {
      zplan.buffer @adam_m offset 0 size 1024
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       DefaultValuedAttr<ZPlan_MemorySpace,
                           "::zcc::zplan::MemorySpace::Device">:$memory_space,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$size,
                       ConfinedAttr<I64Attr, [IntPositive]>:$alignment);
  let regions = (region SizedRegion<1>:$bodyRegion);
  let assemblyFormat = [{
    $sym_name (`in` $memory_space^)? `size` $size `alignment` $alignment
    attr-dict-with-keyword $bodyRegion
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def ZPlan_BufferOp : ZPlan_Op<"buffer", [Symbol, HasParent<"ArenaOp">]> {
  let summary = "A byte range of an arena";
  let description = [{
    `size` bytes at `offset` from the start of the enclosing arena.
    Instructions refer to it as `@arena::@buffer`.

    ```mlir
    zplan.buffer @b0 offset 0 size 1024
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$offset,
                       ConfinedAttr<I64Attr, [IntPositive]>:$size);
  let assemblyFormat = "$sym_name `offset` $offset `size` $size attr-dict";
}

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

def ZPlan_ProgramOp : ZPlan_Op<"program", [Symbol, SymbolTable,
    IsolatedFromAbove, SingleBlock, NoTerminator]> {
  let summary = "A list of instructions the runtime runs as one unit";
  let description = [{
    The runtime runs a plan's programs by name (`init`, `micro_step`,
    `optimizer_step`, `pipeline_step`, `infer`), each instruction in order
    on its stream. A program may declare its own events; names declared in a
    program shadow the module's.

    ```mlir
    zplan.program @micro_step {
      zplan.kernel "matmul_f32" ins(@device::@b0, @device::@b1)
          outs(@device::@b2) stream 0
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$bodyRegion);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $bodyRegion";
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

def ZPlan_KernelOp : ZPlan_Op<"kernel", [HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Launches a kernel on a stream";
  let description = [{
    Launches the kernel `name` from the runtime's kernel table on `stream`,
    reading the buffers `ins` and writing the buffers `outs`. `params`
    carries the kernel's own parameters (transposes, epsilon, ...), which the
    plan serialises with it.

    ```mlir
    zplan.kernel "matmul_f32" ins(@device::@x, @device::@w)
        outs(@device::@y) stream 0 params {transpose_rhs = true}
    ```
  }];
  let arguments = (ins StrAttr:$name, SymbolRefArrayAttr:$ins,
                       SymbolRefArrayAttr:$outs, ZPlan_Stream:$stream,
                       OptionalAttr<DictionaryAttr>:$params);
  let assemblyFormat = [{
    $name `ins` `` custom<SymbolRefList>($ins)
    `outs` `` custom<SymbolRefList>($outs)
    `stream` $stream (`params` $params^)? attr-dict
  }];
}

def ZPlan_EventOp : ZPlan_Op<"event", [Symbol,
    ParentOneOf<["::mlir::ModuleOp", "ProgramOp"]>]> {
  let summary = "Declares an event that orders work across streams";
  let description = [{
    An event the runtime creates once, before the first step. Declared at
    module level it is visible to every program; declared in a program, only
    to that program.

    ```mlir
    zplan.event @grads_ready
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
  let assemblyFormat = "$sym_name attr-dict";
}

def ZPlan_RecordOp : ZPlan_Op<"record", [HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Records an event on a stream";
  let description = [{
    Marks the point in `stream` that a later `zplan.wait` on the same event
    waits for: the wait's stream runs on only once all work enqueued on
    `stream` before the record has finished.

    ```mlir
    zplan.record @grads_ready stream 0
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$event, ZPlan_Stream:$stream);
  let assemblyFormat = "$event `stream` $stream attr-dict";
}

def ZPlan_WaitOp : ZPlan_Op<"wait", [HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Makes a stream wait for an event";
  let description = [{
    Work enqueued on `stream` after the wait starts only once the work before
    the latest `zplan.record` of `event` has finished. The plan verifier
    requires such a record earlier in the program, on another stream.

    ```mlir
    zplan.wait @grads_ready stream 1
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$event, ZPlan_Stream:$stream);
  let assemblyFormat = "$event `stream` $stream attr-dict";
}

#endif // ZCC_DIALECT_PLAN_ZPLANOPS_TD
