//===- Passes.td - Conversions between zcc's dialects ------*- tablegen -*-===//

#ifndef ZCC_COMPILER_CONVERSION_PASSES_TD
#define ZCC_COMPILER_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def GraphToDistPass : Pass<"zcc-graph-to-dist", "mlir::ModuleOp"> {
  let summary = "Places the graph on the device mesh of the config";
  let description = [{
    Reads the world, data-parallel and pipeline sizes from `zcc.config` and
    declares the mesh `zdist.mesh @mesh ["pp" = P, "dp" = D]` (a one-rank
    mesh `["dp" = 1]` without a config; the "pp" axis only with more than
    one stage). Sharding, collectives and stage transfers are inserted by
    the passes that follow it. Fails when stages x data-parallel ranks is
    not the world size.
  }];
  let dependentDialects = ["::zcc::zdist::ZDistDialect"];
}

def DistToPlanPass : Pass<"zcc-dist-to-plan", "mlir::ModuleOp"> {
  let summary = "Lowers the graph to buffers, a static memory plan and kernels";
  let description = [{
    Turns `func.func @main` into what the runtime executes:
    - one `zplan.buffer` per value in the arena `@device`, with its kind
      (parameter, constant, input, output, activation), tensor type and
      name; parameters carry where their initial value is (`weight`) and
      constants their value;
    - offsets from the memory planner: parameters, constants, inputs and
      outputs each have their own bytes; activations share bytes with
      activations whose live ranges (first write to last read, in program
      order) do not overlap; every offset is a multiple of `alignment`;
    - one `zplan.kernel` per zgraph op, named after the op and carrying its
      attributes, in `zplan.program @infer`;
    - module attributes `zplan.inputs`, `zplan.outputs` (name and buffer, in
      the graph's order), `zplan.mesh`, `zplan.mode` and `zplan.memory`
      (bytes per category).
    A returned value that is not an activation (an input, a parameter) is
    copied into its own output buffer. The function and the mesh are erased.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "Alignment in bytes of every buffer offset (a power of two)">,
  ];
  let dependentDialects = ["::zcc::zplan::ZPlanDialect"];
}

#endif // ZCC_COMPILER_CONVERSION_PASSES_TD
