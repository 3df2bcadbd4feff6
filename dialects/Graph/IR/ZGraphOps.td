//===- ZGraphOps.td - zgraph operations --------------------*- tablegen -*-===//

#ifndef ZCC_DIALECT_GRAPH_ZGRAPHOPS_TD
#define ZCC_DIALECT_GRAPH_ZGRAPHOPS_TD

include "dialects/Graph/IR/ZGraphDialect.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def ZGraph_Tensor : RankedTensorOf<[AnyFloat, AnySignlessInteger]>;
def ZGraph_FloatTensor : RankedTensorOf<[AnyFloat]>;

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

def ZGraph_ParamOp : ZGraph_Op<"param", [Pure]> {
  let summary = "A named model parameter";
  let description = [{
    The value of the model parameter `name` (an ONNX initializer). Trainable
    parameters get gradients and optimizer state; the others are constants
    the plan still loads from the weight manifest.

    ```mlir
    %w = zgraph.param "fc.weight" trainable : tensor<10x100xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$trainable);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = "$name (`trainable` $trainable^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def ZGraph_ConstantOp : ZGraph_Op<"constant",
    [Pure, ConstantLike, AllTypesMatch<["value", "result"]>]> {
  let summary = "A small constant tensor";
  let description = [{
    A constant folded into the graph (shape computations, scales, masks).

    ```mlir
    %c = zgraph.constant dense<0.5> : tensor<4xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

class ZGraph_BinaryOp<string mnemonic, string what>
    : ZGraph_Op<mnemonic, [Pure, SameOperandsAndResultElementType]> {
  let summary = "Element-wise " # what # " with NumPy broadcasting";
  let description = [{
    Broadcasts both operands to the result shape as ONNX (and NumPy) do:
    trailing dimensions are matched and a dimension of 1 stretches.
  }];
  let arguments = (ins ZGraph_Tensor:$lhs, ZGraph_Tensor:$rhs);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def ZGraph_AddOp : ZGraph_BinaryOp<"add", "addition">;
def ZGraph_SubOp : ZGraph_BinaryOp<"sub", "subtraction">;
def ZGraph_MulOp : ZGraph_BinaryOp<"mul", "multiplication">;
def ZGraph_DivOp : ZGraph_BinaryOp<"div", "division">;

class ZGraph_UnaryOp<string mnemonic, string what>
    : ZGraph_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "Element-wise " # what;
  let arguments = (ins ZGraph_FloatTensor:$input);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def ZGraph_NegOp : ZGraph_UnaryOp<"neg", "negation">;
def ZGraph_ExpOp : ZGraph_UnaryOp<"exp", "exponential">;
def ZGraph_SqrtOp : ZGraph_UnaryOp<"sqrt", "square root">;
def ZGraph_TanhOp : ZGraph_UnaryOp<"tanh", "hyperbolic tangent">;
def ZGraph_ReluOp : ZGraph_UnaryOp<"relu", "rectified linear unit">;
def ZGraph_SigmoidOp : ZGraph_UnaryOp<"sigmoid", "logistic sigmoid">;

def ZGraph_GeluOp : ZGraph_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `approximate` is "none" (the erf form) or "tanh", as in ONNX Gelu-20 and
    torch.nn.GELU.
  }];
  let arguments = (ins ZGraph_FloatTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra and normalisation
//===----------------------------------------------------------------------===//

def ZGraph_MatMulOp : ZGraph_Op<"matmul", [Pure, SameOperandsAndResultElementType]> {
  let summary = "Matrix product with batch broadcasting (ONNX MatMul)";
  let description = [{
    The product of the last two dimensions, broadcasting the leading (batch)
    dimensions; a rank-1 operand is promoted to a matrix and the added
    dimension removed from the result, as in numpy.matmul.

    ```mlir
    %y = zgraph.matmul %x, %w : (tensor<4x100xf32>, tensor<100x10xf32>) -> tensor<4x10xf32>
    ```
  }];
  let arguments = (ins ZGraph_Tensor:$lhs, ZGraph_Tensor:$rhs);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def ZGraph_SoftmaxOp : ZGraph_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "Softmax along one axis";
  let arguments = (ins ZGraph_FloatTensor:$input, I64Attr:$axis);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def ZGraph_LayerNormOp : ZGraph_Op<"layer_norm", [Pure]> {
  let summary = "Layer normalisation over the trailing dimensions";
  let description = [{
    Normalises over the dimensions from `axis` to the last (ONNX
    LayerNormalization), then scales by `scale` and adds `bias`, whose shape is
    those trailing dimensions.
  }];
  let arguments = (ins ZGraph_FloatTensor:$input, ZGraph_FloatTensor:$scale,
                       ZGraph_FloatTensor:$bias, I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `axis` `=` $axis `epsilon` `=` $epsilon attr-dict
    `:` `(` type($input) `,` type($scale) `,` type($bias) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

def ZGraph_ReshapeOp : ZGraph_Op<"reshape", [Pure, SameOperandsAndResultElementType]> {
  let summary = "Reinterprets a tensor with a new static shape";
  let arguments = (ins ZGraph_Tensor:$input);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def ZGraph_TransposeOp : ZGraph_Op<"transpose", [Pure, SameOperandsAndResultElementType]> {
  let summary = "Permutes dimensions";
  let description = [{
    Result dimension i is input dimension `perm[i]`.
  }];
  let arguments = (ins ZGraph_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = "$input `perm` `=` $perm attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def ZGraph_MseLossOp : ZGraph_Op<"mse_loss", [Pure]> {
  let summary = "Mean squared error (torch.nn.MSELoss, reduction mean)";
  let arguments = (ins ZGraph_FloatTensor:$prediction, ZGraph_FloatTensor:$target);
  let results = (outs 0DTensorOf<[AnyFloat]>:$loss);
  let assemblyFormat = [{
    $prediction `,` $target attr-dict `:` `(` type($prediction) `,` type($target) `)` `->` type($loss)
  }];
  let hasVerifier = 1;
}

#endif // ZCC_DIALECT_GRAPH_ZGRAPHOPS_TD
