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

def FuseAttentionPass : Pass<"zcc-graph-fuse-attention", "mlir::ModuleOp"> {
  let summary = "Fuses exported attention subgraphs into zgraph.attention";
  let description = [{
    Exporters write scaled dot-product attention as
    `MatMul(Softmax(mask(scale(MatMul(q, Transpose(k))))), v)`. This pass
    recognises that chain and replaces it with one `zgraph.attention`, so the
    GPU backend can run a fused kernel that never materialises the T x T
    score matrix.
    - scale: a Div or Mul of the scores by a constant scalar (or none);
    - mask: a `Where(constant mask, scores, fill)` with a very negative fill
      (at most -1e4, as HF GPT-2 uses -3.4e38) or an `Add` of a constant that
      is 0 where attention is allowed and at most -1e4 elsewhere. A mask that
      allows exactly the keys at or before each query is `causal`; any other
      mask leaves the chain unfused;
    - Softmax over the last axis; q, k, v with equal leading dimensions.
    The intermediate ops are left for dead-code elimination.
  }];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect"];
}

#endif // ZCC_DIALECT_GRAPH_PASSES_TD
