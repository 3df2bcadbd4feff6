// RUN: zcc-opt %s -split-input-file -verify-diagnostics
// The gradient ops refuse what their forward ops refuse, with the forward
// ops' messages: softmax_grad and log_softmax_grad check the axis, gelu_grad
// the approximation, layer_norm_grad static shapes and epsilon, mse_loss_grad
// the shapes of prediction and target.

// The axis must exist, as for softmax.
func.func @softmax_grad_axis(%y: tensor<4x8xf32>, %dy: tensor<4x8xf32>) {
  // expected-error @+1 {{'zgraph.softmax_grad' op axis 5 is out of range for rank 2}}
  %0 = zgraph.softmax_grad %y, %dy axis = 5 : tensor<4x8xf32>
  return
}

// -----

func.func @log_softmax_grad_axis(%y: tensor<4x8xf32>, %dy: tensor<4x8xf32>) {
  // expected-error @+1 {{'zgraph.log_softmax_grad' op axis -3 is out of range for rank 2}}
  %0 = zgraph.log_softmax_grad %y, %dy axis = -3 : tensor<4x8xf32>
  return
}

// -----

// Only the two ONNX approximations have a gradient kernel.
func.func @gelu_grad_approximation(%x: tensor<4xf32>) {
  // expected-error @+1 {{'zgraph.gelu_grad' op approximate must be "none" or "tanh", got "erf"}}
  %0 = zgraph.gelu_grad %x, %x {approximate = "erf"} : tensor<4xf32>
  return
}

// -----

// The plan sizes the recomputed statistics at compile time.
func.func @layer_norm_grad_dynamic(%x: tensor<?x8xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'zgraph.layer_norm_grad' op requires static shapes, but got 'tensor<?x8xf32>'}}
  %0:3 = zgraph.layer_norm_grad %x, %s, %x axis = 1 epsilon = 1.0e-5 : (tensor<?x8xf32>, tensor<8xf32>, tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// The recomputed variance of a constant row divides by epsilon.
func.func @layer_norm_grad_epsilon(%x: tensor<2x8xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'zgraph.layer_norm_grad' op epsilon must be positive}}
  %0:3 = zgraph.layer_norm_grad %x, %s, %x axis = 1 epsilon = 0.0 : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// The loss compares element by element, so does its gradient.
func.func @mse_loss_grad_shapes(%p: tensor<4x8xf32>, %t: tensor<8xf32>, %dl: tensor<f32>) {
  // expected-error @+1 {{'zgraph.mse_loss_grad' op prediction 'tensor<4x8xf32>' and target 'tensor<8xf32>' must have the same shape}}
  %0 = zgraph.mse_loss_grad %p, %t, %dl : (tensor<4x8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return
}
