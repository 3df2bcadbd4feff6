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

def StripDropoutPass : Pass<"zcc-graph-strip-dropout", "mlir::ModuleOp"> {
  let summary = "An inference plan's dropouts become the identity";
  let description = [{
    A model exported in training mode keeps its Dropout nodes
    (`zgraph.dropout`); an inference plan evaluates the model, as
    `model.eval()` and DeepSpeed's inference do, so each dropout is replaced
    by its input, with one warning that says how many were dropped. Runs
    before the graph's fusions, so that attention with dropout on its
    probabilities still fuses.
  }];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect"];
}

def FuseGeluPass : Pass<"zcc-graph-fuse-gelu", "mlir::ModuleOp"> {
  let summary = "Fuses exported GELU subgraphs into zgraph.gelu";
  let description = [{
    Exporters write GELU as element-wise chains: the erf form
    `0.5 * x * (1 + erf(x / sqrt(2)))` (torch.nn.GELU, ONNX opsets before
    Gelu-20) and the tanh form
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))` (HF
    `gelu_new`). Each chain becomes one `zgraph.gelu` with `approximate`
    "none" or "tanh", whose gradient is one `zgraph.gelu_grad`: the five
    forward and nine backward element-wise kernels over the MLP's widest
    activation become one each.
    - The factors 0.5, x and (1 + erf(...)) (or 1 + tanh) may come in any
      order and grouping; x / sqrt(2) may be written x * (1 / sqrt(2)), x^3
      as Pow(x, 3) or x * x * x; constants must match to 1e-6 relative.
    - Every intermediate value must have no other use; otherwise the chain
      is left as it is.
  }];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect"];
}

def FuseLayerNormPass : Pass<"zcc-graph-fuse-layer-norm", "mlir::ModuleOp"> {
  let summary = "Fuses exported layer-norm subgraphs into zgraph.layer_norm";
  let description = [{
    Exports before ONNX's LayerNormalization (opset 17; torch's exporter at
    opsets 13 to 16) write LayerNorm over the last dimension as
    `d = x - ReduceMean(x)`, `y = d / Sqrt(ReduceMean(d^2) + eps) * weight
    + bias`. The chain becomes one `zgraph.layer_norm`, whose gradient is
    one `zgraph.layer_norm_grad`: eight forward element-wise and reduction
    kernels (and their gradients) become one each.
    - d^2 may be Pow(d, 2) or d * d; the additions and the product with the
      weight may come in either operand order; weight and bias are vectors
      of the last dimension's size.
    - `d` must have no use but the square and the division, every other
      intermediate value none outside the chain; otherwise it is left as
      it is.
  }];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect"];
}

def FuseKernelsPass : Pass<"zcc-graph-fuse-kernels", "mlir::ModuleOp"> {
  let summary = "Folds transposes and bias adds into matrix products, and slice gradients into concatenations";
  let description = [{
    Runs after autodiff (whose rules see only plain products), before the
    graph is placed on the mesh:
    - a `zgraph.transpose` that swaps the last two dimensions of a matmul
      operand becomes the product's `transpose_lhs` / `transpose_rhs` (cuBLAS
      reads the operand transposed; no copy). Autodiff's `A^T dY` and
      `dY B^T` are the products this removes a copy from.
    - `transpose(matmul(a, b))` over the last two dimensions becomes
      `matmul(b, a)` with both flags flipped (the gradient of an [out, in]
      weight).
    - `add(matmul(a, b), bias)`, with the product used only there and
      `bias` a vector of its last dimension, becomes the product with a
      `bias` operand (cuBLASLt's bias epilogue).
    - `add(matmul(a, b), r)` with `r` of the product's type (a residual
      connection) and the product used only there becomes the product with
      an `addend` (cuBLASLt's C, beta = 1).
    - `gelu(matmul(a, b))` of the tanh form, over f16 or bf16 and with the
      product used only there (inference; in training gelu_grad reads the
      product too), becomes the product with `activation = "gelu_tanh"`
      (cuBLASLt's GELU epilogue).
    - `gelu_grad(u, matmul(a, b))` of the tanh form, over f16 or bf16 and
      with the product used only there (training: the gradient of the MLP's
      activation), becomes the product with `activation =
      "gelu_tanh_grad"` and `gelu_input` u (cuBLASLt's DGELU epilogue).
    - `add(layer_norm_grad(x, g, dy)#0, r)`, with the input gradient used
      only there and `r` of its type computed before the layer norm's
      gradient, becomes the layer norm's gradient with `addend` r (the
      residual stream's gradient joins the input gradient as the row
      kernel writes it).
    - `cast(matmul(a, b))` from f16 or bf16 to f32, the product without an
      epilogue and used only there (through a reshape used only there too:
      a language model's logits flattened for its loss), becomes the
      product with an f32 result (cuBLASLt writes its f32 sum as D); a
      gradient the step accumulates is left to zcc-dist-fuse-accumulate.
    - `cast(cross_entropy_grad(x, ...))` (or nll_loss_grad) from f32 to
      f16 or bf16, the gradient used only there, becomes the gradient with
      the 16-bit result type: the kernel rounds each value as the cast did.
    - a sum of `zgraph.slice_grad`s of one tensor whose windows cut it into
      consecutive pieces along one axis (the gradient of a Split) becomes one
      `zgraph.concat` of their gradients: no zero-filled full-size tensors
      and no adds.
    - with `recompute` on: a GELU's or a layer norm's output read again in
      the backward pass (by the next product's weight gradient) is
      recomputed there from its inputs, which gelu_grad and layer_norm_grad
      keep live anyway: one element-wise or row kernel instead of an
      activation held from the forward to the backward pass (on gpt2-xl at
      micro-batch 8, 7.6 GB less for ~3% of the step's time). With
      `recompute-bytes` N only the first outputs in forward order are, until
      N bytes are. The module's `zgraph.recomputed` says how many outputs
      and bytes were recomputed, of how many that could be. zcc recomputes
      just enough of them where the plan that keeps them would not fit the
      device (`zcc --recompute`).
    - a `zgraph.attention_grad` in the function of its forward attention
      (the nearest one before it with the same operands and attributes)
      reads `saved(result, lse)`: the forward returns each row's
      log-sum-exp too, and the backward needs no pass of its own to find
      the softmax statistics (FlashAttention-2). The forward's result then
      stays live until the backward.
    - the attentions and attention gradients over the three heads of one
      fused query/key/value projection (each a slice of its [B, T, 3 C]
      output, viewed [B, T, H, d] and transposed to [B, H, T, d]) become
      `zgraph.qkv_attention` and `zgraph.qkv_attention_grad` of the
      projection viewed [B, T, 3, H, d]: the kernels read the heads in
      place and write [B, T, H, d] results and the projection's whole
      gradient, so the transposes of the heads, of the result and of the
      gradients, and the gradients' concatenation, are gone. Where a head
      has another reader, the three heads instead come out of one
      transpose into [3, B, H, T, d], whose thirds are views.
    The values change at most by rounding: in f16 and bf16 a bias, an
    addend and the GELU apply before the product is rounded, not after, and
    a layer norm gradient's addend before its input gradient is.
  }];
  let options = [
    Option<"recompute", "recompute", "bool", /*default=*/"true",
           "Recompute GELU and layer norm outputs in the backward pass instead of "
           "keeping them from the forward pass">,
    Option<"recomputeBytes", "recompute-bytes", "int64_t", /*default=*/"0",
           "With recompute: take the outputs in forward order until this many bytes "
           "are recomputed (0: every one)">,
  ];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect"];
}

def AutodiffPass : Pass<"zcc-graph-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode autodiff: @main becomes the training @micro_step";
  let description = [{
    Replaces `@main` with `@micro_step`, which computes the loss, then the
    gradient of the loss (seeded with the new scalar argument
    `zcc.loss_scale`) with respect to every trainable `zgraph.param`, and adds
    each gradient into the parameter's `zgraph.state "grad"` with
    `zgraph.accumulate` as soon as it is complete. Gradients of values used
    several times are summed; values that do not depend on a trainable
    parameter are not differentiated. `@micro_step` returns only the loss.

    The loss is the output named by `loss` (default: the output named "loss",
    or else the only scalar float output). With `add-loss`, a loss is added
    on the first output first: "cross-entropy" against a new i64 input
    "labels" (classes on the last axis) or "mse" against a new input of the
    output's shape.
  }];
  let options = [
    Option<"lossName", "loss", "std::string", /*default=*/"\"\"",
           "Name of the model output that is the loss">,
    Option<"addLossKind", "add-loss", "std::string", /*default=*/"\"\"",
           "Add a loss on the first output: cross-entropy or mse">,
  ];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect", "::mlir::func::FuncDialect"];
}

def MixedPrecisionPass : Pass<"zcc-graph-mixed-precision", "mlir::ModuleOp"> {
  let summary = "fp16/bf16 compute with fp32 master weights";
  let description = [{
    Rewrites `@main` to compute in fp16 or bf16 (`precision`, or else the
    config's `fp16.enabled` / `bf16.enabled`): fp32 parameters stay fp32 and
    are cast where they are used, fp32 inputs are cast at the entry and fp32
    constants are converted; every op then computes in the 16-bit type,
    except the losses (cross_entropy, nll_loss, mse_loss), whose float
    operands are cast to fp32 so that the loss is fp32. Outputs are cast back
    to their declared types. Run before autodiff, which then carries the
    gradients back through the casts to fp32 accumulators.

    With `low-precision-weights` (inference, which keeps no master copy)
    the fp32 parameters become 16-bit parameters instead of being cast
    where they are used; their `source` records `dtype = f32`, the type
    the weight file holds, which the runtime narrows as it loads.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"\"",
           "fp32, fp16 or bf16 (default: from the config)">,
    Option<"lowPrecisionWeights", "low-precision-weights", "bool", /*default=*/"false",
           "store the parameters in the 16-bit type (inference)">,
  ];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect", "::mlir::func::FuncDialect"];
}

def RecomputePass : Pass<"zcc-graph-recompute", "mlir::ModuleOp"> {
  let summary = "Activation checkpointing: recompute segments in the backward pass";
  let description = [{
    Groups the forward ops of `@micro_step` into segments of `interval`
    consecutive blocks, a block being the repeated layer an op's ONNX node
    name places it in ("/h.3/attn/..." is block 3 of "h"). A value computed
    inside a segment that the backward pass reads (and no later forward op
    outside the segment) is recomputed: the ops that produce it are cloned
    right before the segment's first backward use, from the segment's inputs
    (the checkpoints) and the parameters, so only the checkpoints live from
    the forward pass to the backward pass. In a pipeline a segment holds the
    blocks of one stage (`zdist.stage`) only: a segment across a stage
    boundary would recompute on one stage what the next stage's backward
    reads.

    `interval` 0 takes it from the config: the pipeline section's
    `activation_checkpoint_interval`, or else one segment per
    `activation_checkpointing.number_checkpoints` of the blocks; neither set
    turns checkpointing off.
  }];
  let options = [
    Option<"interval", "interval", "int64_t", /*default=*/"0",
           "Blocks per recomputed segment (0: from the config)">,
  ];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect", "::mlir::func::FuncDialect"];
}

def OptimizerPass : Pass<"zcc-graph-optimizer", "mlir::ModuleOp"> {
  let summary = "Builds the optimizer step, the gradient norm and the gradient reset";
  let description = [{
    From the `zgraph.state "grad"` accumulators of `@micro_step` and the
    module's `zcc.config` optimizer, adds:
    - `@grad_norm() -> zcc.grad_norm_sq`: the sum of squares of all
      accumulated gradients (`zgraph.sum_squares`, f64);
    - `@optimizer_step(zcc.optimizer_scalars)`: one `zgraph.adamw` (Adam,
      AdamW) or `zgraph.sgd` per parameter with its state, then the gradient
      reset (`zgraph.fill` 0);
    - `@zero_grads()`: the gradient reset alone (a skipped step).
    An optimizer zcc does not implement is an error naming the supported ones.
  }];
  let dependentDialects = ["::zcc::zgraph::ZGraphDialect", "::mlir::func::FuncDialect"];
}

#endif // ZCC_DIALECT_GRAPH_PASSES_TD
