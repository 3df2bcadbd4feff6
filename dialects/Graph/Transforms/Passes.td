//===- Passes.td - zgraph passes ---------------------------*- tablegen -*-===//

#ifndef ZCC_DIALECT_GRAPH_PASSES_TD
#define ZCC_DIALECT_GRAPH_PASSES_TD

include "mlir/Pass/PassBase.td"

def VerifyGraphPass : Pass<"zcc-graph-verify", "mlir::ModuleOp"> {
  let summary = "Closes the import phase: checks the graph is one zcc can lower";
  let description = [{
    Runs after import (and after autodiff). It fails on:
    - an op inside a function that is neither a zgraph op nor `func.return`
      (an importer that let a foreign op through);
    - two `zgraph.param` ops with the same name but different types, because
      the weight manifest keys parameters by name;
    - a function argument or result that is not a statically shaped ranked
      tensor, because the plan sizes every buffer at compile time.
    It changes nothing.
  }];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect"];
}

#endif // ZCC_DIALECT_GRAPH_PASSES_TD
