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

def ZGraph_DropoutOp : ZGraph_Op<"dropout", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Inverted dropout in training mode (ONNX Dropout, training_mode true)";
  let description = [{
    Zeroes each element with probability `ratio` and scales the others by
    1 / (1 - ratio). Whether element i of the micro-batch is kept is a pure
    function of the run's seed, `key` (one per dropout of the model) and
    the element's place in the run's data: with `state` = [seed, global
    index of the micro-batch's first sample] and `sample_elements` the
    elements of one sample, element i is counter first * sample_elements +
    i of the stream of (seed, key). A sample gets the same mask at any world
    size, ZeRO stage or accumulation, and the backward pass (the same op
    applied to the result's gradient) and a recomputation get the forward
    pass's mask without storing it.

    Imported without `state`; the training step (zcc-graph-autodiff) gives
    every dropout the step's `zcc.dropout_state` argument and its
    `sample_elements`. An inference plan drops it (zcc-graph-strip-dropout).
  }];
  let arguments = (ins ZGraph_FloatTensor:$input,
                       Optional<RankedTensorOf<[I64]>>:$state,
                       F64Attr:$ratio, I64Attr:$key,
                       OptionalAttr<I64Attr>:$sample_elements);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`state` $state^ `:` type($state))? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra and normalisation
//===----------------------------------------------------------------------===//

def ZGraph_MatMulOp : ZGraph_Op<"matmul", [Pure, AttrSizedOperandSegments,
    OptionalTypesMatchWith<"addend has the result's type", "result", "addend", "$_self">,
    OptionalTypesMatchWith<"gelu_input has the result's type", "result", "gelu_input", "$_self">]> {
  let summary = "Matrix product with batch broadcasting (ONNX MatMul)";
  let description = [{
    The product of the last two dimensions, broadcasting the leading (batch)
    dimensions; a rank-1 operand is promoted to a matrix and the added
    dimension removed from the result, as in numpy.matmul.

    ```mlir
    %y = zgraph.matmul %x, %w : (tensor<4x100xf32>, tensor<100x10xf32>) -> tensor<4x10xf32>
    ```

    Only `zcc-graph-fuse-kernels` sets the rest, after autodiff (they are
    cuBLASLt's epilogue): with `transpose_lhs` (`transpose_rhs`) the
    operand's last two dimensions are swapped before the product (the
    operand then has rank at least 2); a rank-1 `bias` of the result's last
    dimension is added to every row, and an `addend` of the result's type
    (a residual) to the whole product; `activation` "gelu_tanh" applies
    GELU's tanh form to that sum. All of it happens before the one rounding
    to the result's element type:
    result = activation(op(lhs) op(rhs) + bias + addend).
    `activation` "gelu_tanh_grad" (cuBLASLt's DGELU) instead multiplies the
    product, without a bias or addend, by the tanh form's derivative at
    `gelu_input` (of the result's type): the gelu_grad of a GELU whose
    output's gradient is the product.

    An optional second result `aux` gives what the backward reads beside
    the result: with "gelu_tanh", the sum before the GELU
    (GELU_AUX: the value gelu_grad reads, of the result's type, rounded
    once); with "gelu_tanh_grad", the bias gradient (the result's sums
    over every row, a vector of its last dimension and element type, as
    reduce_sum gives them from the rounded result).

    The result has the operands' element type, except that 16-bit operands
    may give an f32 result without any of the above (a product whose only
    reader was a cast to f32): the f32 sum, never rounded to 16 bits.

    ```mlir
    %dw = zgraph.matmul %x, %dy {transpose_lhs} : (tensor<64x100xbf16>, tensor<64x10xbf16>) -> tensor<100x10xbf16>
    %y = zgraph.matmul %x, %w, %b : (tensor<4x100xbf16>, tensor<100x10xbf16>, tensor<10xbf16>) -> tensor<4x10xbf16>
    %r = zgraph.matmul %x, %w, %b addend %res : (tensor<4x100xbf16>, tensor<100x10xbf16>, tensor<10xbf16>) -> tensor<4x10xbf16>
    %h = zgraph.matmul %x, %w, %b {activation = "gelu_tanh"} : (tensor<4x100xbf16>, tensor<100x10xbf16>, tensor<10xbf16>) -> tensor<4x10xbf16>
    %du = zgraph.matmul %dy, %w gelu_input %u {activation = "gelu_tanh_grad", transpose_rhs} : (tensor<4x10xbf16>, tensor<100x10xbf16>) -> tensor<4x100xbf16>
    %h2, %u2 = zgraph.matmul %x, %w, %b {activation = "gelu_tanh"} : (tensor<4x100xbf16>, tensor<100x10xbf16>, tensor<10xbf16>) -> tensor<4x10xbf16>, tensor<4x10xbf16>
    %du2, %db = zgraph.matmul %dy, %w gelu_input %u {activation = "gelu_tanh_grad", transpose_rhs} : (tensor<4x10xbf16>, tensor<100x10xbf16>) -> tensor<4x100xbf16>, tensor<100xbf16>
    ```
  }];
  let arguments = (ins ZGraph_Tensor:$lhs, ZGraph_Tensor:$rhs,
                       Optional<ZGraph_Tensor>:$bias,
                       Optional<ZGraph_Tensor>:$addend,
                       Optional<ZGraph_Tensor>:$gelu_input,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       OptionalAttr<StrAttr>:$activation);
  let results = (outs ZGraph_Tensor:$result, Optional<ZGraph_Tensor>:$aux);
  let assemblyFormat = [{
    $lhs `,` $rhs (`,` $bias^)? (`addend` $addend^)? (`gelu_input` $gelu_input^)? attr-dict `:` `(` type($lhs) `,` type($rhs) (`,` type($bias)^)? `)`
    `->` type($result) (`,` type($aux)^)?
  }];
  let builders = [
    OpBuilder<(ins "mlir::Type":$result, "mlir::Value":$lhs, "mlir::Value":$rhs), [{
      build($_builder, $_state, result, mlir::Type(), lhs, rhs, mlir::Value(), mlir::Value(),
            mlir::Value(), false, false, mlir::StringAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// The result's type (the op's first result; `aux` is optional).
    mlir::RankedTensorType getType() { return getResult().getType(); }
    /// Whether anything but the transposes joins the product (a bias, an
    /// addend or an activation): rewrites that move or split the product
    /// leave such a one alone.
    bool hasEpilogue() { return getBias() || getAddend() || getGeluInput() || getActivation(); }
    /// Whether the result's element type is not the operands' (in a
    /// verified op: f32 of 16-bit operands, which no epilogue joins).
    bool isWidened() {
      return getResult().getType().getElementType() != getLhs().getType().getElementType();
    }
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

    The optional second result `lse` ([..., queries], f32) is each query
    row's log-sum-exp of its scaled, masked scores (FlashAttention's saved
    statistics): `zcc-graph-fuse-kernels` asks for it where the attention's
    backward is in the same step, which then reads it (and the result)
    instead of recomputing the softmax statistics.

    ```mlir
    %o = zgraph.attention %q, %k, %v scale = 0.125 causal
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
    %o2, %lse = zgraph.attention %q, %k, %v scale = 0.125
        : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
        -> tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>
    ```
  }];
  let arguments = (ins ZGraph_FloatTensor:$query, ZGraph_FloatTensor:$key,
                       ZGraph_FloatTensor:$value, F64Attr:$scale, UnitAttr:$causal);
  let results = (outs ZGraph_FloatTensor:$result, Optional<RankedTensorOf<[F32]>>:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value `scale` `=` $scale (`causal` $causal^)? attr-dict `:`
    `(` type($query) `,` type($key) `,` type($value) `)` `->` type($result) (`,` type($lse)^)?
  }];
  let builders = [
    OpBuilder<(ins "mlir::Type":$result, "mlir::Value":$query, "mlir::Value":$key,
                   "mlir::Value":$value, "mlir::FloatAttr":$scale, "mlir::UnitAttr":$causal), [{
      build($_builder, $_state, result, mlir::Type(), query, key, value, scale, causal);
    }]>
  ];
  let hasVerifier = 1;
}

def ZGraph_QkvAttentionOp : ZGraph_Op<"qkv_attention", [Pure]> {
  let summary = "Attention over the heads of one packed query/key/value projection";
  let description = [{
    `zgraph.attention` of the query, key and value heads that `qkv`,
    [B, T, 3, H, d], holds along its third dimension (a fused projection's
    [B, T, 3 H d] output viewed with its heads split), read in place; the
    result is [B, T, H, d], each position's heads side by side, which is the
    [B, T, H d] input of the output projection. The optional `lse` is
    [B, H, T], as `zgraph.attention`'s. Only `zcc-graph-fuse-kernels`
    creates it, after autodiff (which does not differentiate it): it takes
    the place of the head transposes in and out of an attention.

    ```mlir
    %o, %lse = zgraph.qkv_attention %qkv scale = 0.125 causal
        : tensor<2x8x3x4x16xbf16> -> tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>
    ```
  }];
  let arguments = (ins ZGraph_FloatTensor:$qkv, F64Attr:$scale, UnitAttr:$causal);
  let results = (outs ZGraph_FloatTensor:$result, Optional<RankedTensorOf<[F32]>>:$lse);
  let assemblyFormat = [{
    $qkv `scale` `=` $scale (`causal` $causal^)? attr-dict `:`
    type($qkv) `->` type($result) (`,` type($lse)^)?
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

//===----------------------------------------------------------------------===//
// Gradients (added by autodiff)
//===----------------------------------------------------------------------===//

class ZGraph_ActivationGradOp<string mnemonic, string what>
    : ZGraph_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of " # what # " from its output";
  let arguments = (ins ZGraph_FloatTensor:$output, ZGraph_FloatTensor:$grad, I64Attr:$axis);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = [{
    $output `,` $grad `axis` `=` $axis attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def ZGraph_SoftmaxGradOp : ZGraph_ActivationGradOp<"softmax_grad", "softmax"> {
  let description = [{
    With `output` = softmax(x) along `axis` and `grad` = dL/d(output), the
    result is dL/dx = output * (grad - sum_axis(grad * output)).
  }];
}

def ZGraph_LogSoftmaxGradOp : ZGraph_ActivationGradOp<"log_softmax_grad", "log-softmax"> {
  let description = [{
    With `output` = log_softmax(x) along `axis`, the result is
    dL/dx = grad - exp(output) * sum_axis(grad).
  }];
}

def ZGraph_GeluGradOp : ZGraph_Op<"gelu_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of gelu";
  let description = [{
    dL/dx for `result = gelu(input)` given `grad` = dL/d(result), for the erf
    form (`approximate` = "none") or the tanh form.
  }];
  let arguments = (ins ZGraph_FloatTensor:$input, ZGraph_FloatTensor:$grad,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def ZGraph_LayerNormGradOp : ZGraph_Op<"layer_norm_grad", [Pure,
    OptionalTypesMatchWith<"addend has the input's type", "input", "addend", "$_self">]> {
  let summary = "Gradients of layer_norm for its input, scale and bias";
  let description = [{
    Recomputes the mean and variance of `input` over the dimensions from
    `axis`, then returns dL/d(input), dL/d(scale) and dL/d(bias) given
    `grad` = dL/d(result). With an `addend` (of the input's type) the input
    gradient is that plus the addend, summed before its one rounding: the
    gradient of a residual stream that reaches the normalised value both
    through the layer norm and around it. Only `zcc-graph-fuse-kernels`
    sets it.

    ```mlir
    %dx, %dg, %db = zgraph.layer_norm_grad %x, %g, %dy addend %r axis = 2 epsilon = 1.0e-05 : (tensor<2x8x16xbf16>, tensor<16xbf16>, tensor<2x8x16xbf16>) -> (tensor<2x8x16xbf16>, tensor<16xbf16>, tensor<16xbf16>)
    ```
  }];
  let arguments = (ins ZGraph_FloatTensor:$input, ZGraph_FloatTensor:$scale,
                       ZGraph_FloatTensor:$grad, Optional<ZGraph_FloatTensor>:$addend,
                       I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs ZGraph_FloatTensor:$input_grad, ZGraph_FloatTensor:$scale_grad,
                      ZGraph_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad (`addend` $addend^)? `axis` `=` $axis `epsilon` `=` $epsilon attr-dict
    `:` `(` type($input) `,` type($scale) `,` type($grad) `)` `->`
    `(` type($input_grad) `,` type($scale_grad) `,` type($bias_grad) `)`
  }];
  let hasVerifier = 1;
}

def ZGraph_AttentionGradOp : ZGraph_Op<"attention_grad", [Pure, AttrSizedOperandSegments]> {
  let summary = "Gradients of attention for query, key and value";
  let description = [{
    Recomputes the attention probabilities row by row (never the whole score
    matrix) and returns dL/dq, dL/dk and dL/dv given `grad` = dL/d(result).
    With `saved(%output, %lse)`, the forward attention's result and its
    per-row log-sum-exp (`zgraph.attention`'s second result), a backend may
    read the softmax statistics from them instead of recomputing them; the
    gradients are the same either way.

    ```mlir
    %dq, %dk, %dv = zgraph.attention_grad %q, %k, %v, %dy saved(%o, %lse : tensor<2x8x16xbf16>, tensor<2x8xf32>)
        scale = 0.25 causal : (...) -> (...)
    ```
  }];
  let arguments = (ins ZGraph_FloatTensor:$query, ZGraph_FloatTensor:$key,
                       ZGraph_FloatTensor:$value, ZGraph_FloatTensor:$grad,
                       Optional<ZGraph_FloatTensor>:$output,
                       Optional<RankedTensorOf<[F32]>>:$lse,
                       F64Attr:$scale, UnitAttr:$causal);
  let results = (outs ZGraph_FloatTensor:$query_grad, ZGraph_FloatTensor:$key_grad,
                      ZGraph_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $grad
    (`saved` `(` $output^ `,` $lse `:` type($output) `,` type($lse) `)`)?
    `scale` `=` $scale (`causal` $causal^)? attr-dict `:`
    `(` type($query) `,` type($key) `,` type($value) `,` type($grad) `)` `->`
    `(` type($query_grad) `,` type($key_grad) `,` type($value_grad) `)`
  }];
  let builders = [
    OpBuilder<(ins "mlir::Type":$query_grad, "mlir::Type":$key_grad, "mlir::Type":$value_grad,
                   "mlir::Value":$query, "mlir::Value":$key, "mlir::Value":$value,
                   "mlir::Value":$grad, "mlir::FloatAttr":$scale, "mlir::UnitAttr":$causal), [{
      build($_builder, $_state, query_grad, key_grad, value_grad, query, key, value, grad,
            mlir::Value(), mlir::Value(), scale, causal);
    }]>
  ];
  let hasVerifier = 1;
}

def ZGraph_QkvAttentionGradOp : ZGraph_Op<"qkv_attention_grad",
                                          [Pure, AttrSizedOperandSegments]> {
  let summary = "Gradient of qkv_attention for its packed projection";
  let description = [{
    dL/d(qkv), [B, T, 3, H, d] like `qkv`, given `grad` = dL/d(result)
    ([B, T, H, d]): the query, key and value gradients of every head, written
    where `zgraph.qkv_attention` read the heads, so the projection's
    backward reads them as one [B, T, 3 H d] gradient. `saved(%output,
    %lse)` are as `zgraph.attention_grad`'s, in qkv_attention's layouts.

    ```mlir
    %dqkv = zgraph.qkv_attention_grad %qkv, %dy saved(%o, %lse : tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>)
        scale = 0.25 causal : (tensor<2x8x3x4x16xbf16>, tensor<2x8x4x16xbf16>) -> tensor<2x8x3x4x16xbf16>
    ```
  }];
  let arguments = (ins ZGraph_FloatTensor:$qkv, ZGraph_FloatTensor:$grad,
                       Optional<ZGraph_FloatTensor>:$output,
                       Optional<RankedTensorOf<[F32]>>:$lse,
                       F64Attr:$scale, UnitAttr:$causal);
  let results = (outs ZGraph_FloatTensor:$qkv_grad);
  let assemblyFormat = [{
    $qkv `,` $grad
    (`saved` `(` $output^ `,` $lse `:` type($output) `,` type($lse) `)`)?
    `scale` `=` $scale (`causal` $causal^)? attr-dict `:`
    `(` type($qkv) `,` type($grad) `)` `->` type($qkv_grad)
  }];
  let hasVerifier = 1;
}

class ZGraph_ClassLossGradOp<string mnemonic, string what> : ZGraph_Op<mnemonic, [Pure]> {
  let summary = "Gradient of " # what # " for its input";
  let description = [{
    dL/d(input) given `grad` = dL/d(loss) (a scalar, or the labels' shape for
    reduction "none"); positions whose label is `ignore_index` get zero. The
    result has the input's type, or for an f32 input its shape in f16 or
    bf16: each element rounded as a cast of the f32 gradient would round it
    (the narrowing cast of the loss's gradient in mixed precision, folded
    in).
  }];
  let arguments = (ins ZGraph_FloatTensor:$input, TensorOf<[I32, I64]>:$labels,
                       ZGraph_FloatTensor:$grad, OptionalAttr<I64Attr>:$ignore_index,
                       DefaultValuedStrAttr<StrAttr, "mean">:$reduction);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $labels `,` $grad attr-dict `:` `(` type($input) `,` type($labels) `,` type($grad) `)`
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def ZGraph_CrossEntropyGradOp : ZGraph_ClassLossGradOp<"cross_entropy_grad", "cross_entropy">;
def ZGraph_NllLossGradOp : ZGraph_ClassLossGradOp<"nll_loss_grad", "nll_loss">;

def ZGraph_MseLossGradOp : ZGraph_Op<"mse_loss_grad", [Pure]> {
  let summary = "Gradient of mse_loss for its prediction";
  let description = [{
    2 * (prediction - target) * grad / N, with N the prediction's element count.
  }];
  let arguments = (ins ZGraph_FloatTensor:$prediction, ZGraph_FloatTensor:$target,
                       0DTensorOf<[AnyFloat]>:$grad);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = [{
    $prediction `,` $target `,` $grad attr-dict `:` `(` type($prediction) `,` type($target) `,`
    type($grad) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def ZGraph_GatherGradOp : ZGraph_Op<"gather_grad", [Pure]> {
  let summary = "Gradient of gather for its data (an embedding's backward)";
  let description = [{
    A zero tensor of the result type (the gathered data's shape) into which
    the slices of `grad` are added back at `indices` along `axis`, in index
    order, so repeated indices sum deterministically.
  }];
  let arguments = (ins TensorOf<[I32, I64]>:$indices, ZGraph_FloatTensor:$grad, I64Attr:$axis);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad `axis` `=` $axis attr-dict `:` `(` type($indices) `,` type($grad) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def ZGraph_SliceGradOp : ZGraph_Op<"slice_grad", [Pure, SameOperandsAndResultElementType]> {
  let summary = "Gradient of slice: the window placed in zeros";
  let arguments = (ins ZGraph_Tensor:$grad, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs ZGraph_Tensor:$result);
  let assemblyFormat = [{
    $grad `starts` `=` $starts `limits` `=` $limits `strides` `=` $strides attr-dict
    `:` type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Training state and optimizer updates
//===----------------------------------------------------------------------===//

def ZGraph_StateOp : ZGraph_Op<"state", [MemoryEffects<[MemRead]>]> {
  let summary = "A persistent training state tensor of a parameter";
  let description = [{
    The current value of state `kind` of parameter `name`: "grad" (the
    gradient accumulator), "exp_avg" / "exp_avg_sq" (Adam's moments) or
    "momentum" (SGD's buffer), "sum" (Adagrad's sum of squares), "master" (an fp32 master copy of the rows of a
    parameter a ZeRO rank updates), "copy" (an offloaded parameter's 16-bit
    host copy), "host_grad" (a one-step gradient streamed to host memory
    for a host update) or "norm_sq" (the sum of the squares of streamed
    gradients, added up as they stream). Like parameters, states are identified by
    name across the functions of a training step, so each is one buffer of
    the plan; `accumulate`, `fill` and the optimizer ops update them in place.

    ```mlir
    %g = zgraph.state "fc.weight" kind = "grad" : tensor<10x100xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, StrAttr:$kind);
  let results = (outs ZGraph_FloatTensor:$result);
  let assemblyFormat = "$name `kind` `=` $kind attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def ZGraph_AccumulateOp : ZGraph_Op<"accumulate", [MemoryEffects<[MemWrite]>]> {
  let summary = "Adds a tensor into a state in place";
  let description = [{
    `target += value`, where `target` is a `zgraph.state` (the gradient
    accumulator); `value` may have a narrower float type than `target`.
  }];
  let arguments = (ins ZGraph_FloatTensor:$target, ZGraph_FloatTensor:$value);
  let assemblyFormat = "$value `into` $target attr-dict `:` type($value) `into` type($target)";
  let hasVerifier = 1;
}

def ZGraph_AccumulateMatMulOp : ZGraph_Op<"accumulate_matmul", [MemoryEffects<[MemWrite]>]> {
  let summary = "Adds a matrix product into a state in place";
  let description = [{
    `target += op(lhs) @ op(rhs)` for matrices, where `op` swaps the two
    dimensions of a `transpose_lhs` (`transpose_rhs`) operand and `target`
    is a `zgraph.state` (a weight's gradient accumulator) of a float type at
    least as wide as the operands'. The product is summed in the target's
    type (f32 for 16-bit operands) and added to the target without being
    rounded to the operands' type first. Only `zcc-dist-fuse-accumulate`
    makes it, from an accumulation of a product that nothing else reads.
    With `overwrite` the product replaces the target instead (`target =
    op(lhs) @ op(rhs)`): the first write of a gradient that lives for one
    step (zcc-dist-step-gradients).

    ```mlir
    zgraph.accumulate_matmul %x, %dy into %acc {transpose_lhs} : (tensor<64x100xbf16>, tensor<64x10xbf16>) into tensor<100x10xf32>
    ```
  }];
  let arguments = (ins ZGraph_FloatTensor:$target, ZGraph_FloatTensor:$lhs,
                       ZGraph_FloatTensor:$rhs, UnitAttr:$transpose_lhs,
                       UnitAttr:$transpose_rhs, UnitAttr:$overwrite);
  let assemblyFormat = [{
    $lhs `,` $rhs `into` $target attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `into` type($target)
  }];
  let hasVerifier = 1;
}

def ZGraph_FillOp : ZGraph_Op<"fill", [MemoryEffects<[MemWrite]>]> {
  let summary = "Sets every element of a state or parameter in place";
  let arguments = (ins ZGraph_FloatTensor:$target, F64Attr:$value);
  let assemblyFormat = "$target `value` `=` $value attr-dict `:` type($target)";
  let hasVerifier = 1;
}

def ZGraph_AssignOp : ZGraph_Op<"assign", [MemoryEffects<[MemWrite]>]> {
  let summary = "Overwrites a parameter or state with a value of the same shape";
  let description = [{
    `target = cast(value)`: refreshes a low-precision parameter copy from the
    updated fp32 master weights.
  }];
  let arguments = (ins ZGraph_FloatTensor:$target, ZGraph_FloatTensor:$value);
  let assemblyFormat = "$value `into` $target attr-dict `:` type($value) `into` type($target)";
  let hasVerifier = 1;
}

def ZGraph_SumSquaresOp : ZGraph_Op<"sum_squares", [Pure]> {
  let summary = "Sum of the squares of every element of every operand, in f64";
  let description = [{
    The square of the global gradient norm. Infinities and NaNs propagate, so
    the result also tells the loss scaler whether the gradients overflowed.
  }];
  let arguments = (ins Variadic<ZGraph_FloatTensor>:$inputs);
  let results = (outs 0DTensorOf<[F64]>:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result)";
  let hasVerifier = 1;
}

def ZGraph_AdamWOp : ZGraph_Op<"adamw", [MemoryEffects<[MemWrite]>,
    AllTypesMatch<["param", "exp_avg", "exp_avg_sq"]>]> {
  let summary = "One Adam step of a parameter, in place";
  let description = [{
    Updates `param`, `exp_avg` and `exp_avg_sq` in place from `grad` as
    torch.optim.AdamW does (`adam_w_mode`: decoupled weight decay) or as
    torch.optim.Adam does (L2 weight decay added to the gradient). `grad`
    has the parameter's type, or for an f32 parameter its shape in f16 or
    bf16 (printed after `grad`), which the step widens to f32 as it reads
    it: a mixed-precision gradient that crossed to the host in 16 bits.
    `scalars` is f64[8]: lr, beta1, beta2, eps, weight_decay, step (1-based),
    grad_scale (multiplies the gradient first: unscaling, averaging over
    micro-steps and clipping in one factor), momentum (unused).
    `bias_correction` false (DeepSpeed's FusedAdam option) steps by lr and
    divides by sqrt(exp_avg_sq) + eps, without the 1 - beta^step factors.
  }];
  let arguments = (ins ZGraph_FloatTensor:$param, ZGraph_FloatTensor:$grad,
                       ZGraph_FloatTensor:$exp_avg, ZGraph_FloatTensor:$exp_avg_sq,
                       1DTensorOf<[F64]>:$scalars, DefaultValuedAttr<BoolAttr, "true">:$adam_w_mode,
                       DefaultValuedAttr<BoolAttr, "true">:$bias_correction);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $scalars attr-dict `:` type($param) ``
    custom<GradientType>(type($grad), ref(type($param))) `,` type($scalars)
  }];
  let hasVerifier = 1;
}

def ZGraph_AdagradOp : ZGraph_Op<"adagrad", [MemoryEffects<[MemWrite]>,
    AllTypesMatch<["param", "grad", "sum"]>]> {
  let summary = "One Adagrad step of a parameter, in place";
  let description = [{
    torch.optim.Adagrad (DeepSpeed's Adagrad, and DeepSpeedCPUAdagrad with
    offload): with g the gradient times grad_scale plus weight_decay *
    param, sum += g * g, then param -= lr / (1 + (step - 1) * lr_decay) *
    g / (sqrt(sum) + eps). `scalars` as for `adamw` (betas and momentum
    unused).
  }];
  let arguments = (ins ZGraph_FloatTensor:$param, ZGraph_FloatTensor:$grad,
                       ZGraph_FloatTensor:$sum, 1DTensorOf<[F64]>:$scalars,
                       DefaultValuedAttr<F64Attr, "0.0">:$lr_decay);
  let assemblyFormat = [{
    $param `,` $grad `,` $sum `,` $scalars attr-dict `:` type($param) `,` type($scalars)
  }];
  let hasVerifier = 1;
}

def ZGraph_LionOp : ZGraph_Op<"lion", [MemoryEffects<[MemWrite]>,
    AllTypesMatch<["param", "grad", "exp_avg"]>]> {
  let summary = "One Lion step of a parameter, in place";
  let description = [{
    DeepSpeed's FusedLion and DeepSpeedCPULion (Chen et al., "Symbolic
    Discovery of Optimization Algorithms"): with g the gradient times
    grad_scale, param *= 1 - lr * weight_decay, then param -= lr *
    sign(beta1 * exp_avg + (1 - beta1) * g), then exp_avg = beta2 * exp_avg
    + (1 - beta2) * g. `scalars` as for `adamw` (eps, step and momentum
    unused).
  }];
  let arguments = (ins ZGraph_FloatTensor:$param, ZGraph_FloatTensor:$grad,
                       ZGraph_FloatTensor:$exp_avg, 1DTensorOf<[F64]>:$scalars);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $scalars attr-dict `:` type($param) `,` type($scalars)
  }];
  let hasVerifier = 1;
}

def ZGraph_LambMomentsOp : ZGraph_Op<"lamb_moments", [MemoryEffects<[MemWrite]>,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq"]>]> {
  let summary = "The first half of a LAMB step: moments in place, and two norms' squares";
  let description = [{
    DeepSpeed's FusedLamb (You et al., "Large Batch Optimization for Deep
    Learning"), whose step scales each parameter's update by a trust ratio
    ||param|| / ||update||. With g the gradient times grad_scale, updates
    exp_avg = beta1 * exp_avg + (1 - beta1) * g and exp_avg_sq = beta2 *
    exp_avg_sq + (1 - beta2) * g * g in place, and returns [sum of param^2,
    sum of update^2] (f64) over its elements, update = exp_avg /
    (sqrt(exp_avg_sq) + eps) + weight_decay * param (`eps_inside_sqrt`:
    sqrt(exp_avg_sq + eps)). Over a ZeRO partition the sums are a shard's,
    all-reduced before `lamb_step` reads them. `scalars` as for `adamw`.
  }];
  let arguments = (ins ZGraph_FloatTensor:$param, ZGraph_FloatTensor:$grad,
                       ZGraph_FloatTensor:$exp_avg, ZGraph_FloatTensor:$exp_avg_sq,
                       1DTensorOf<[F64]>:$scalars,
                       DefaultValuedAttr<BoolAttr, "false">:$eps_inside_sqrt);
  let results = (outs 1DTensorOf<[F64]>:$squares);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $scalars attr-dict `:` type($param) `,`
    type($scalars) `->` type($squares)
  }];
  let hasVerifier = 1;
}

def ZGraph_LambStepOp : ZGraph_Op<"lamb_step", [MemoryEffects<[MemWrite]>,
    AllTypesMatch<["param", "exp_avg", "exp_avg_sq"]>]> {
  let summary = "The second half of a LAMB step: the parameter, in place";
  let description = [{
    From the moments `lamb_moments` wrote and `squares`, the whole
    parameter's [||param||^2, ||update||^2]: param -= step_size * ratio *
    update, with update recomputed as there, ratio = ||param|| / ||update||
    clamped to [min_coeff, max_coeff] (1 when either norm is 0), step_size =
    lr * sqrt(1 - beta2^step) / (1 - beta1^step), or lr without
    `bias_correction`.
  }];
  let arguments = (ins ZGraph_FloatTensor:$param, ZGraph_FloatTensor:$exp_avg,
                       ZGraph_FloatTensor:$exp_avg_sq, 1DTensorOf<[F64]>:$scalars,
                       1DTensorOf<[F64]>:$squares,
                       DefaultValuedAttr<F64Attr, "10.0">:$max_coeff,
                       DefaultValuedAttr<F64Attr, "0.01">:$min_coeff,
                       DefaultValuedAttr<BoolAttr, "true">:$bias_correction,
                       DefaultValuedAttr<BoolAttr, "false">:$eps_inside_sqrt);
  let assemblyFormat = [{
    $param `,` $exp_avg `,` $exp_avg_sq `,` $scalars `,` $squares attr-dict `:` type($param) `,`
    type($scalars) `,` type($squares)
  }];
  let hasVerifier = 1;
}

def ZGraph_SgdOp : ZGraph_Op<"sgd", [MemoryEffects<[MemWrite]>,
    AllTypesMatch<["param", "grad", "momentum_buffer"]>]> {
  let summary = "One SGD step (with momentum) of a parameter, in place";
  let description = [{
    torch.optim.SGD: weight decay added to the gradient, momentum buffer
    (`scalars[7]`, the first step copies the gradient), `dampening` and
    `nesterov`; `scalars` as for `adamw`.
  }];
  let arguments = (ins ZGraph_FloatTensor:$param, ZGraph_FloatTensor:$grad,
                       ZGraph_FloatTensor:$momentum_buffer, 1DTensorOf<[F64]>:$scalars,
                       DefaultValuedAttr<F64Attr, "0.0">:$dampening,
                       UnitAttr:$nesterov);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $scalars attr-dict `:` type($param) `,` type($scalars)
  }];
  let hasVerifier = 1;
}

#endif // ZCC_DIALECT_GRAPH_ZGRAPHOPS_TD
