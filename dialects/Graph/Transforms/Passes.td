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
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"\"",
           "fp32, fp16 or bf16 (default: from the config)">,
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
    the forward pass to the backward pass.

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
