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
def ZGraph_PowOp : ZGraph_BinaryOp<"pow", "power">;
def ZGraph_MaxOp : ZGraph_BinaryOp<"max", "maximum">;
def ZGraph_MinOp : ZGraph_BinaryOp<"min", "minimum">;

class ZGraph_CompareOp<string mnemonic, string what>
    : ZGraph_Op<mnemonic, [Pure]> {
  let summary = "Element-wise " # what # " comparison with NumPy broadcasting";
  let description = [{
    Compares operands of one element type and yields an i1 tensor of the
    broadcast shape.
  }];
  let arguments = (ins ZGraph_Tensor:$lhs, ZGraph_Tensor:$rhs);
  let results = (outs TensorOf<[I1]>:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def ZGraph_EqualOp : ZGraph_CompareOp<"equal", "equality">;
def ZGraph_LessOp : ZGraph_CompareOp<"less", "less-than">;
def ZGraph_GreaterOp : ZGraph_CompareOp<"greater", "greater-than">;

def ZGraph_IsNanOp : ZGraph_Op<"is_nan", [Pure]> {
  let summary = "Element-wise test for NaN";
  let arguments = (ins ZGraph_FloatTensor:$input);
  let results = (outs TensorOf<[I1]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def ZGraph_WhereOp : ZGraph_Op<"where", [Pure]> {
  let summary = "Element-wise select with NumPy broadcasting";
  let description = [{
    `condition ? on_true : on_false`, all three broadcast to the result shape.

    ```mlir
    %y = zgraph.where %mask, %scores, %neg_inf
        : (tensor<1x1x8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins TensorOf<[I1]>:$condition, ZGraph_Tensor:$on_true,
                       ZGraph_Tensor:$on_false);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:`
    `(` type($condition) `,` type($on_true) `,` type($on_false) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def ZGraph_CastOp : ZGraph_Op<"cast", [Pure]> {
  let summary = "Converts the element type";
  let description = [{
    Float to float rounds to nearest even; float to integer truncates toward
    zero; integer to i1 is `!= 0` (ONNX Cast).
  }];
  let arguments = (ins ZGraph_Tensor:$input);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

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
def ZGraph_LogOp : ZGraph_UnaryOp<"log", "natural logarithm">;
def ZGraph_ErfOp : ZGraph_UnaryOp<"erf", "error function">;
def ZGraph_ReciprocalOp : ZGraph_UnaryOp<"reciprocal", "reciprocal">;

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

def ZGraph_LogSoftmaxOp : ZGraph_Op<"log_softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "Log of the softmax along one axis";
  let arguments = (ins ZGraph_FloatTensor:$input, I64Attr:$axis);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

class ZGraph_ReduceOp<string mnemonic, string what> : ZGraph_Op<mnemonic, [Pure]> {
  let summary = "Reduces by " # what # " over the given axes";
  let description = [{
    `axes` are distinct, non-negative and ascending; with `keepdims` the
    reduced dimensions stay as size 1, otherwise they are removed.
  }];
  let arguments = (ins ZGraph_Tensor:$input, DenseI64ArrayAttr:$axes, BoolAttr:$keepdims);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = [{
    $input `axes` `=` $axes `keepdims` `=` $keepdims attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def ZGraph_ReduceSumOp : ZGraph_ReduceOp<"reduce_sum", "sum">;
def ZGraph_ReduceMeanOp : ZGraph_ReduceOp<"reduce_mean", "mean">;
def ZGraph_ReduceMaxOp : ZGraph_ReduceOp<"reduce_max", "maximum">;

def ZGraph_AttentionOp : ZGraph_Op<"attention", [Pure]> {
  let summary = "Scaled dot-product attention";
  let description = [{
    `softmax(q k^T * scale [+ causal mask]) v` over the last two dimensions,
    with the leading (batch, head) dimensions matching. `causal` masks key
    positions after the query position (aligned at the end when the key
    sequence is longer). The importer fuses the MatMul, scale, mask, Softmax,
    MatMul chain of an exported model into this op, so the GPU backend can run
    one flash-attention kernel instead of materialising the score matrix.

    ```mlir
    %o = zgraph.attention %q, %k, %v scale = 0.125 causal
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins ZGraph_FloatTensor:$query, ZGraph_FloatTensor:$key,
                       ZGraph_FloatTensor:$value, F64Attr:$scale, UnitAttr:$causal);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `scale` `=` $scale (`causal` $causal^)? attr-dict `:`
    `(` type($query) `,` type($key) `,` type($value) `)` `->` type($result)
  }];
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

def ZGraph_ConcatOp : ZGraph_Op<"concat", [Pure, SameOperandsAndResultElementType]> {
  let summary = "Concatenates tensors along one axis";
  let arguments = (ins Variadic<ZGraph_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = "$inputs `axis` `=` $axis attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
}

def ZGraph_SliceOp : ZGraph_Op<"slice", [Pure, SameOperandsAndResultElementType]> {
  let summary = "A strided window of a tensor";
  let description = [{
    Dimension i takes elements `starts[i], starts[i] + strides[i], ...` below
    `limits[i]`. One entry per dimension, already clamped and non-negative,
    strides positive (the importer normalises ONNX Slice and Split to this).

    ```mlir
    %q = zgraph.slice %qkv starts = [0, 0, 0] limits = [2, 8, 64] strides = [1, 1, 1]
        : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins ZGraph_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = [{
    $input `starts` `=` $starts `limits` `=` $limits `strides` `=` $strides attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def ZGraph_GatherOp : ZGraph_Op<"gather", [Pure]> {
  let summary = "Takes slices of `data` at `indices` along one axis (ONNX Gather)";
  let description = [{
    The result shape is `data.shape[:axis] + indices.shape + data.shape[axis+1:]`;
    an embedding lookup is a gather along axis 0. Negative indices count from
    the end, as in ONNX.
  }];
  let arguments = (ins ZGraph_Tensor:$data, TensorOf<[I32, I64]>:$indices, I64Attr:$axis);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = [{
    $data `[` $indices `]` `axis` `=` $axis attr-dict `:` `(` type($data) `,` type($indices) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def ZGraph_BroadcastOp : ZGraph_Op<"broadcast", [Pure, SameOperandsAndResultElementType]> {
  let summary = "Broadcasts a tensor to a larger shape (ONNX Expand)";
  let arguments = (ins ZGraph_Tensor:$input);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def ZGraph_TriluOp : ZGraph_Op<"trilu", [Pure, SameOperandsAndResultType]> {
  let summary = "Keeps the upper or lower triangle of the last two dimensions";
  let description = [{
    Elements outside the triangle (offset by diagonal `k`) become zero.
  }];
  let arguments = (ins ZGraph_Tensor:$input, BoolAttr:$upper, I64Attr:$k);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = "$input `upper` `=` $upper `k` `=` $k attr-dict `:` type($result)";
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

class ZGraph_ClassLossOp<string mnemonic, string what> : ZGraph_Op<mnemonic, [Pure]> {
  let summary = what;
  let description = [{
    `input` is `[N, C]` or `[N, C, d1, ...]` (classes on axis 1, as in ONNX),
    `labels` is `[N]` or `[N, d1, ...]`. Labels equal to `ignore_index` add
    nothing and do not count towards the mean. `reduction` is "mean", "sum"
    or "none" (then the result has the labels' shape).
  }];
  let arguments = (ins ZGraph_FloatTensor:$input, TensorOf<[I32, I64]>:$labels,
                       OptionalAttr<I64Attr>:$ignore_index,
                       DefaultValuedStrAttr<StrAttr, "mean">:$reduction);
  let results = (outs ZGraph_FloatTensor:$loss);
  let assemblyFormat = [{
    $input `,` $labels attr-dict `:` `(` type($input) `,` type($labels) `)` `->` type($loss)
  }];
  let hasVerifier = 1;
}

def ZGraph_CrossEntropyOp : ZGraph_ClassLossOp<"cross_entropy",
    "Softmax cross-entropy of scores against class labels (ONNX SoftmaxCrossEntropyLoss)">;
def ZGraph_NllLossOp : ZGraph_ClassLossOp<"nll_loss",
    "Negative log-likelihood of log-probabilities (ONNX NegativeLogLikelihoodLoss)">;

#endif // ZCC_DIALECT_GRAPH_ZGRAPHOPS_TD
