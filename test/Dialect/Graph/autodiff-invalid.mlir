// RUN: zcc-opt %s --split-input-file --zcc-graph-autodiff -verify-diagnostics

// No output named "loss" and no single scalar: the message lists the outputs
// (unnamed ones by index) and says how to add a loss.
// expected-error @+1 {{the model has no loss output (its outputs: 'logits', 'output1'); export the model with its loss, or pass --loss cross-entropy|mse to add one on the first output}}
func.func @main(%x: tensor<4xf32> {zgraph.name = "x"}) -> (tensor<4xf32> {zgraph.name = "logits"}, tensor<4xf32>) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %0 = zgraph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %0 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Two scalar outputs, neither named "loss": which one is the loss is
// ambiguous.
// expected-error @+1 {{the model has no loss output (its outputs: 'a', 'b')}}
func.func @main(%x: tensor<4xf32>) -> (tensor<f32> {zgraph.name = "a"}, tensor<f32> {zgraph.name = "b"}) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %0 = zgraph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = zgraph.reduce_sum %0 axes = [0] keepdims = false : tensor<4xf32> -> tensor<f32>
  %2 = zgraph.reduce_mean %0 axes = [0] keepdims = false : tensor<4xf32> -> tensor<f32>
  return %1, %2 : tensor<f32>, tensor<f32>
}

// -----

// Only frozen parameters: there is nothing to train.
// expected-error @+1 {{the loss does not depend on any trainable parameter}}
func.func @main(%x: tensor<4xf32> {zgraph.name = "x"}) -> (tensor<f32> {zgraph.name = "loss"}) {
  %w = zgraph.param "w" : tensor<4xf32>
  %0 = zgraph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = zgraph.reduce_sum %0 axes = [0] keepdims = false : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The backward is seeded with a scalar loss scale: a vector "loss" is refused.
// expected-error @+1 {{the loss must be a float scalar, got 'tensor<4xf32>'}}
func.func @main(%x: tensor<4xf32> {zgraph.name = "x"}) -> (tensor<4xf32> {zgraph.name = "loss"}) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %0 = zgraph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// An op on the path from a parameter to the loss without a gradient rule
// (here a gradient op in a forward graph) is named.
func.func @main(%x: tensor<4xf32> {zgraph.name = "x"}) -> (tensor<f32> {zgraph.name = "loss"}) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %0 = zgraph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{'zgraph.gelu_grad' op has no gradient rule; it cannot be trained through}}
  %1 = zgraph.gelu_grad %0, %0 : tensor<4xf32>
  %l = zgraph.reduce_sum %1 axes = [0] keepdims = false : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The same op off the path to the loss (it feeds only a dropped output) is
// never differentiated, so it is no error.
func.func @main(%x: tensor<4xf32> {zgraph.name = "x"}) -> (tensor<f32> {zgraph.name = "loss"}, tensor<4xf32> {zgraph.name = "aux"}) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %0 = zgraph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = zgraph.gelu_grad %0, %0 : tensor<4xf32>
  %l = zgraph.reduce_sum %0 axes = [0] keepdims = false : tensor<4xf32> -> tensor<f32>
  return %l, %1 : tensor<f32>, tensor<4xf32>
}

// -----

// Fused products come after autodiff; one in a forward graph is refused
// rather than differentiated as if it were plain.
func.func @main(%x: tensor<2x4xf32> {zgraph.name = "x"}) -> (tensor<f32> {zgraph.name = "loss"}) {
  %w = zgraph.param "w" trainable : tensor<3x4xf32>
  // expected-error @+1 {{autodiff: a fused product (bias, addend, activation, f32 result of 16-bit operands or transposed operand) has no gradient rule}}
  %0 = zgraph.matmul %x, %w {transpose_rhs} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %l = zgraph.reduce_sum %0 axes = [0, 1] keepdims = false : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// So is a widened product (f32 of bf16 operands), which
// zcc-graph-fuse-kernels makes of a cast after autodiff.
func.func @main(%x: tensor<2x4xbf16> {zgraph.name = "x"}) -> (tensor<f32> {zgraph.name = "loss"}) {
  %w = zgraph.param "w" trainable : tensor<4x3xbf16>
  // expected-error @+1 {{autodiff: a fused product (bias, addend, activation, f32 result of 16-bit operands or transposed operand) has no gradient rule}}
  %0 = zgraph.matmul %x, %w : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xf32>
  %l = zgraph.reduce_sum %0 axes = [0, 1] keepdims = false : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Autodiff replaces @main; without one there is nothing to differentiate.
// expected-error @+1 {{autodiff expects a single-block func.func @main}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
