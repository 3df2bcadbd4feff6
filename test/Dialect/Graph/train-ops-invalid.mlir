// RUN: zcc-opt %s -split-input-file -verify-diagnostics

// The input's gradient has the input's type.
func.func @layer_norm_grad_input(%x: tensor<2x4xf32>, %s: tensor<4xf32>, %dy: tensor<2x4xf16>) {
  // expected-error @+1 {{'zgraph.layer_norm_grad' op input, grad and input_grad must have one type}}
  %0:3 = zgraph.layer_norm_grad %x, %s, %dy axis = 1 epsilon = 1.0e-5 : (tensor<2x4xf32>, tensor<4xf32>, tensor<2x4xf16>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// The bias's gradient is summed to the scale's (normalised) shape.
func.func @layer_norm_grad_bias(%x: tensor<2x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{scale_grad and bias_grad must have the scale's type}}
  %0:3 = zgraph.layer_norm_grad %x, %s, %x axis = 1 epsilon = 1.0e-5 : (tensor<2x4xf32>, tensor<4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<2x4xf32>)
  return
}

// -----

// The normalised axes start inside the input.
func.func @layer_norm_grad_axis(%x: tensor<2x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0:3 = zgraph.layer_norm_grad %x, %s, %x axis = 2 epsilon = 1.0e-5 : (tensor<2x4xf32>, tensor<4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// The key's gradient has the key's sequence length, not the query's.
func.func @attention_grad_types(%q: tensor<2x4x8xf32>, %kv: tensor<2x6x8xf32>) {
  // expected-error @+1 {{'zgraph.attention_grad' op each gradient must have its operand's type}}
  %0:3 = zgraph.attention_grad %q, %kv, %kv, %q scale = 0.125 : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x6x8xf32>)
  return
}

// -----

// The output's gradient has the output's rank, which is the query's.
func.func @attention_grad_rank(%q: tensor<2x4x8xf32>, %dy: tensor<8x8xf32>) {
  // expected-error @+1 {{grad must have the query's rank}}
  %0:3 = zgraph.attention_grad %q, %q, %q, %dy scale = 0.125 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  return
}

// -----

// The plan sizes the recomputation's buffers at compile time.
func.func @attention_grad_dynamic(%q: tensor<2x?x8xf32>) {
  // expected-error @+1 {{'zgraph.attention_grad' op requires static shapes, but got 'tensor<2x?x8xf32>'}}
  %0:3 = zgraph.attention_grad %q, %q, %q, %q scale = 0.125 : (tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>) -> (tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>)
  return
}

// -----

// The logits' gradient has the logits' type, or for f32 logits their
// shape in 16 bits (f16 is accepted here), not another shape or type.
func.func @cross_entropy_grad_result(%x: tensor<4x8xf32>, %l: tensor<4xi64>, %dl: tensor<f32>) {
  %0 = zgraph.cross_entropy_grad %x, %l, %dl : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf16>
  // expected-error @+1 {{'zgraph.cross_entropy_grad' op result must have the input's type (or its shape in f16 or bf16 for an f32 input)}}
  %1 = zgraph.cross_entropy_grad %x, %l, %dl : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<8x4xf16>
  return
}

// -----

func.func @cross_entropy_grad_result_f64(%x: tensor<4x8xf64>, %l: tensor<4xi64>, %dl: tensor<f64>) {
  // expected-error @+1 {{'zgraph.cross_entropy_grad' op result must have the input's type (or its shape in f16 or bf16 for an f32 input)}}
  %0 = zgraph.cross_entropy_grad %x, %l, %dl : (tensor<4x8xf64>, tensor<4xi64>, tensor<f64>) -> tensor<4x8xbf16>
  return
}

// -----

// Only PyTorch's three reductions exist.
func.func @nll_loss_grad_reduction(%x: tensor<4x8xf32>, %l: tensor<4xi64>, %dl: tensor<f32>) {
  // expected-error @+1 {{'zgraph.nll_loss_grad' op reduction must be "mean", "sum" or "none", got "avg"}}
  %0 = zgraph.nll_loss_grad %x, %l, %dl {reduction = "avg"} : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  return
}

// -----

// A reduced loss is a scalar, so is its gradient.
func.func @cross_entropy_grad_mean_shape(%x: tensor<4x8xf32>, %l: tensor<4xi64>, %dl: tensor<4xf32>) {
  // expected-error @+1 {{grad must have shape [] for reduction "mean"}}
  %0 = zgraph.cross_entropy_grad %x, %l, %dl : (tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x8xf32>
  return
}

// -----

// An unreduced loss has one element per label.
func.func @nll_loss_grad_none_shape(%x: tensor<4x8xf32>, %l: tensor<4xi64>, %dl: tensor<f32>) {
  // expected-error @+1 {{grad must have shape [4] for reduction "none"}}
  %0 = zgraph.nll_loss_grad %x, %l, %dl {reduction = "none"} : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  return
}

// -----

// Static shapes for the loss gradients too.
func.func @cross_entropy_grad_dynamic(%x: tensor<?x8xf32>, %l: tensor<4xi64>, %dl: tensor<f32>) {
  // expected-error @+1 {{'zgraph.cross_entropy_grad' op requires static shapes, but got 'tensor<?x8xf32>'}}
  %0 = zgraph.cross_entropy_grad %x, %l, %dl : (tensor<?x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<?x8xf32>
  return
}

// -----

// The mean squared error is a scalar; its gradient input is 0-d.
func.func @mse_loss_grad_scalar(%p: tensor<4xf32>, %dl: tensor<1xf32>) {
  // expected-error @+1 {{'zgraph.mse_loss_grad' op operand #2 must be 0D tensor of floating-point values}}
  %0 = zgraph.mse_loss_grad %p, %p, %dl : (tensor<4xf32>, tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>
  return
}

// -----

// The gathered axis must exist in the table.
func.func @gather_grad_axis(%ids: tensor<3xi64>, %dy: tensor<3x8xf32>) {
  // expected-error @+1 {{'zgraph.gather_grad' op axis 2 is out of range for rank 2}}
  %0 = zgraph.gather_grad %ids, %dy axis = 2 : (tensor<3xi64>, tensor<3x8xf32>) -> tensor<10x8xf32>
  return
}

// -----

// The grad has the gathered shape: the table's dims with the axis replaced by
// the indices' (a negative axis counts from the end).
func.func @gather_grad_shape(%ids: tensor<2x3xi64>, %dy: tensor<4x3x2x8xf32>) {
  // expected-error @+1 {{'zgraph.gather_grad' op grad must have the gathered shape [4, 2, 3, 8]}}
  %0 = zgraph.gather_grad %ids, %dy axis = -2 : (tensor<2x3xi64>, tensor<4x3x2x8xf32>) -> tensor<4x50x8xf32>
  return
}

// -----

// An embedding table of unknown width cannot be sized.
func.func @gather_grad_dynamic(%ids: tensor<3xi64>, %dy: tensor<3x?xf32>) {
  // expected-error @+1 {{'zgraph.gather_grad' op requires static shapes, but got 'tensor<3x?xf32>'}}
  %0 = zgraph.gather_grad %ids, %dy axis = 0 : (tensor<3xi64>, tensor<3x?xf32>) -> tensor<10x?xf32>
  return
}

// -----

// One start, limit and stride per dimension of the result.
func.func @slice_grad_attrs(%dy: tensor<2x4xf32>) {
  // expected-error @+1 {{'zgraph.slice_grad' op needs one start, limit and stride per dimension}}
  %0 = zgraph.slice_grad %dy starts = [0] limits = [4, 10] strides = [2, 2] : tensor<2x4xf32> -> tensor<4x10xf32>
  return
}

// -----

// The window and the result have one rank.
func.func @slice_grad_rank(%dy: tensor<8xf32>) {
  // expected-error @+1 {{grad must have the result's rank}}
  %0 = zgraph.slice_grad %dy starts = [0, 0] limits = [4, 10] strides = [2, 2] : tensor<8xf32> -> tensor<4x10xf32>
  return
}

// -----

// Columns 2..10 by 2 are 4 columns, not 3.
func.func @slice_grad_window(%dy: tensor<2x3xf32>) {
  // expected-error @+1 {{window of dimension 1 does not match grad 'tensor<2x3xf32>'}}
  %0 = zgraph.slice_grad %dy starts = [0, 2] limits = [4, 10] strides = [2, 2] : tensor<2x3xf32> -> tensor<4x10xf32>
  return
}

// -----

// A limit past the end of the result is not a window of it.
func.func @slice_grad_limit(%dy: tensor<2x5xf32>) {
  // expected-error @+1 {{window of dimension 1 does not match grad 'tensor<2x5xf32>'}}
  %0 = zgraph.slice_grad %dy starts = [0, 2] limits = [4, 12] strides = [2, 2] : tensor<2x5xf32> -> tensor<4x10xf32>
  return
}

// -----

// States are shared between the training functions by parameter name.
func.func @state_name() {
  // expected-error @+1 {{'zgraph.state' op requires a non-empty parameter name}}
  %0 = zgraph.state "" kind = "grad" : tensor<4xf32>
  return
}

// -----

// The runtime knows a fixed list of state kinds; the message lists them (the
// list grows with ZeRO's states, so only its start is checked).
func.func @state_kind() {
  // expected-error-re @+1 {{'zgraph.state' op kind must be "grad", "exp_avg", "exp_avg_sq", "momentum"{{.*}} or "norm_sq", got "velocity"}}
  %0 = zgraph.state "w" kind = "velocity" : tensor<4xf32>
  return
}

// -----

// A state is a buffer of the plan, sized at compile time.
func.func @state_dynamic() {
  // expected-error @+1 {{'zgraph.state' op requires static shapes, but got 'tensor<?xf32>'}}
  %0 = zgraph.state "w" kind = "grad" : tensor<?xf32>
  return
}

// -----

// The accumulated value may be narrower, but not of another shape.
func.func @accumulate_shape(%v: tensor<8xf16>) {
  %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
  // expected-error @+1 {{'zgraph.accumulate' op value 'tensor<8xf16>' and target 'tensor<4xf32>' differ in shape}}
  zgraph.accumulate %v into %g : tensor<8xf16> into tensor<4xf32>
  return
}

// -----

// Writing in place into a computed value would be lost: only persistent
// buffers (states, parameters) are targets.
func.func @accumulate_target(%v: tensor<4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'zgraph.accumulate' op target must be a zgraph.state or zgraph.param}}
  zgraph.accumulate %v into %g : tensor<4xf32> into tensor<4xf32>
  return
}

// -----

// Likewise for fill: a computed value is not a target.
func.func @fill_target(%x: tensor<4xf32>) {
  %y = zgraph.neg %x : tensor<4xf32>
  // expected-error @+1 {{'zgraph.fill' op target must be a zgraph.state or zgraph.param}}
  zgraph.fill %y value = 0.0 : tensor<4xf32>
  return
}

// -----

// Assign casts, it does not reshape.
func.func @assign_shape() {
  %w = zgraph.param "w" trainable : tensor<4x2xf32>
  %c = zgraph.state "w" kind = "copy" : tensor<8xf16>
  // expected-error @+1 {{'zgraph.assign' op value 'tensor<4x2xf32>' and target 'tensor<8xf16>' differ in shape}}
  zgraph.assign %w into %c : tensor<4x2xf32> into tensor<8xf16>
  return
}

// -----

// Assign refreshes a persistent copy, never an argument.
func.func @assign_target(%x: tensor<4xf16>) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  // expected-error @+1 {{'zgraph.assign' op target must be a zgraph.state or zgraph.param}}
  zgraph.assign %w into %x : tensor<4xf32> into tensor<4xf16>
  return
}

// -----

// The norm of nothing is not a gradient norm.
func.func @sum_squares_empty() {
  // expected-error @+1 {{'zgraph.sum_squares' op needs at least one operand}}
  %0 = "zgraph.sum_squares"() : () -> tensor<f64>
  return
}

// -----

// The optimizer scalars are the eight f64 values listed in the op's doc.
func.func @adamw_scalars(%s: tensor<7xf64>) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
  %m = zgraph.state "w" kind = "exp_avg" : tensor<4xf32>
  %v = zgraph.state "w" kind = "exp_avg_sq" : tensor<4xf32>
  // expected-error @+1 {{'zgraph.adamw' op scalars must be tensor<8xf64>}}
  zgraph.adamw %w, %g, %m, %v, %s : tensor<4xf32>, tensor<7xf64>
  return
}

// -----

// The moments are updated in place, so they must be states.
func.func @adamw_in_place(%s: tensor<8xf64>, %v: tensor<4xf32>) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
  %m = zgraph.state "w" kind = "exp_avg" : tensor<4xf32>
  // expected-error @+1 {{'zgraph.adamw' op updated operand must be a zgraph.state or zgraph.param}}
  zgraph.adamw %w, %g, %m, %v, %s : tensor<4xf32>, tensor<8xf64>
  return
}

// -----

// The parameter and its states have one type.
func.func @adamw_types(%s: tensor<8xf64>, %g: tensor<4xf32>, %h: tensor<4xf16>) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %m = zgraph.state "w" kind = "exp_avg" : tensor<4xf32>
  // expected-error @+1 {{'zgraph.adamw' op failed to verify that all of {param, exp_avg, exp_avg_sq} have same type}}
  "zgraph.adamw"(%w, %g, %m, %h, %s) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<8xf64>) -> ()
  return
}

// -----

// The gradient has the parameter's type, or an f32 parameter's shape in 16
// bits; an f64 gradient of an f32 parameter is neither.
func.func @adamw_gradient_type(%s: tensor<8xf64>, %g: tensor<4xf64>) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %m = zgraph.state "w" kind = "exp_avg" : tensor<4xf32>
  %v = zgraph.state "w" kind = "exp_avg_sq" : tensor<4xf32>
  // expected-error @+1 {{'zgraph.adamw' op param, grad and state must have one type (or an f32 param a 16-bit grad), got 'tensor<4xf64>' and 'tensor<4xf32>'}}
  zgraph.adamw %w, %g, %m, %v, %s : tensor<4xf32> grad tensor<4xf64>, tensor<8xf64>
  return
}

// -----

// A 16-bit gradient has the parameter's shape.
func.func @adamw_gradient_shape(%s: tensor<8xf64>, %g: tensor<2xbf16>) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %m = zgraph.state "w" kind = "exp_avg" : tensor<4xf32>
  %v = zgraph.state "w" kind = "exp_avg_sq" : tensor<4xf32>
  // expected-error @+1 {{'zgraph.adamw' op param, grad and state must have one type (or an f32 param a 16-bit grad), got 'tensor<2xbf16>' and 'tensor<4xf32>'}}
  zgraph.adamw %w, %g, %m, %v, %s : tensor<4xf32> grad tensor<2xbf16>, tensor<8xf64>
  return
}

// -----

// SGD's parameter is updated in place, so it must be a parameter or state.
func.func @sgd_in_place(%s: tensor<8xf64>, %x: tensor<4xf32>) {
  %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
  %mo = zgraph.state "w" kind = "momentum" : tensor<4xf32>
  // expected-error @+1 {{'zgraph.sgd' op updated operand must be a zgraph.state or zgraph.param}}
  zgraph.sgd %x, %g, %mo, %s : tensor<4xf32>, tensor<8xf64>
  return
}

// -----

// SGD reads the same eight scalars as Adam.
func.func @sgd_scalars(%s: tensor<4xf64>) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
  %mo = zgraph.state "w" kind = "momentum" : tensor<4xf32>
  // expected-error @+1 {{'zgraph.sgd' op scalars must be tensor<8xf64>}}
  zgraph.sgd %w, %g, %mo, %s : tensor<4xf32>, tensor<4xf64>
  return
}

// -----

func.func @attention_grad_saved_lse_shape(%q: tensor<2x4x8xf32>, %kv: tensor<2x6x8xf32>, %o: tensor<2x4x8xf32>, %lse: tensor<2x6xf32>) {
  // expected-error @+1 {{'zgraph.attention_grad' op saved lse 'tensor<2x6xf32>' must have the query's shape without its last dimension, [2, 4]}}
  %0:3 = zgraph.attention_grad %q, %kv, %kv, %q saved(%o, %lse : tensor<2x4x8xf32>, tensor<2x6xf32>) scale = 0.125 : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
  return
}

// -----

func.func @attention_grad_saved_output_type(%q: tensor<2x4x8xf32>, %kv: tensor<2x6x8xf32>, %o: tensor<2x4x8xbf16>, %lse: tensor<2x4xf32>) {
  // expected-error @+1 {{'zgraph.attention_grad' op saved output 'tensor<2x4x8xbf16>' must have the gradient's type 'tensor<2x4x8xf32>'}}
  %0:3 = zgraph.attention_grad %q, %kv, %kv, %q saved(%o, %lse : tensor<2x4x8xbf16>, tensor<2x4xf32>) scale = 0.125 : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
  return
}

// -----

func.func @attention_lse_shape(%q: tensor<2x4x8xbf16>, %kv: tensor<2x6x8xbf16>) {
  // expected-error @+1 {{'zgraph.attention' op lse 'tensor<2x6xf32>' must have the query's shape without its last dimension, [2, 4]}}
  %o, %lse = zgraph.attention %q, %kv, %kv scale = 0.125 : (tensor<2x4x8xbf16>, tensor<2x6x8xbf16>, tensor<2x6x8xbf16>) -> tensor<2x4x8xbf16>, tensor<2x6xf32>
  return
}

// -----

// accumulate_matmul adds a matrix product of the target's shape into a
// target at least as wide as the operands.
func.func @accumulate_matmul_shape(%x: tensor<16x4xbf16>, %dy: tensor<16x8xbf16>) {
  %g = zgraph.state "w" kind = "grad" : tensor<8x4xf32>
  // expected-error @+1 {{'zgraph.accumulate_matmul' op the product is 4x8 but the target is 'tensor<8x4xf32>'}}
  zgraph.accumulate_matmul %x, %dy into %g {transpose_lhs} : (tensor<16x4xbf16>, tensor<16x8xbf16>) into tensor<8x4xf32>
  return
}

// -----

func.func @accumulate_matmul_contraction(%x: tensor<16x4xbf16>, %dy: tensor<16x8xbf16>) {
  %g = zgraph.state "w" kind = "grad" : tensor<16x8xf32>
  // expected-error @+1 {{'zgraph.accumulate_matmul' op contracting dimensions differ: 4 vs 16}}
  zgraph.accumulate_matmul %x, %dy into %g : (tensor<16x4xbf16>, tensor<16x8xbf16>) into tensor<16x8xf32>
  return
}

// -----

func.func @accumulate_matmul_narrow(%x: tensor<16x4xf32>, %dy: tensor<16x8xf32>) {
  %g = zgraph.state "w" kind = "grad" : tensor<4x8xbf16>
  // expected-error @+1 {{'zgraph.accumulate_matmul' op target 'bf16' is narrower than the operands' 'f32'}}
  zgraph.accumulate_matmul %x, %dy into %g {transpose_lhs} : (tensor<16x4xf32>, tensor<16x8xf32>) into tensor<4x8xbf16>
  return
}
