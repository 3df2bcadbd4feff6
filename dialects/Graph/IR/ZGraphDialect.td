//===- ZGraphDialect.td - zgraph dialect definition --------*- tablegen -*-===//

#ifndef ZCC_DIALECT_GRAPH_ZGRAPHDIALECT_TD
#define ZCC_DIALECT_GRAPH_ZGRAPHDIALECT_TD

include "mlir/IR/OpBase.td"

def ZGraph_Dialect : Dialect {
  let name = "zgraph";
  let summary = "Value-semantic tensor ops imported from ONNX";
  let description = [{
    zgraph holds the model as a static-shape dataflow graph of tensor ops, one
    op per ONNX concept zcc supports, plus the ops autodiff and optimizers add
    (gradients, optimizer updates, loss scaling). Every value is a ranked
    tensor with a static shape; parameters are named so the plan's weight
    manifest can refer to them.
  }];
  let cppNamespace = "::zcc::zgraph";
}

class ZGraph_Op<string mnemonic, list<Trait> traits = []>
    : Op<ZGraph_Dialect, mnemonic, traits>;

#endif // ZCC_DIALECT_GRAPH_ZGRAPHDIALECT_TD
