// RUN: zcc-opt %s --zcc-graph-autodiff -verify-diagnostics
// With several scalar float outputs and none named "loss", autodiff cannot
// tell which is the loss and refuses (two or three alike).

// Three scalar outputs, none named "loss": ambiguous.
// expected-error @+1 {{the model has no loss output (its outputs: 'sum', 'mean', 'max')}}
func.func @main(%x: tensor<4xf32>) -> (tensor<f32> {zgraph.name = "sum"}, tensor<f32> {zgraph.name = "mean"}, tensor<f32> {zgraph.name = "max"}) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %0 = zgraph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a = zgraph.reduce_sum %0 axes = [0] keepdims = false : tensor<4xf32> -> tensor<f32>
  %b = zgraph.reduce_mean %0 axes = [0] keepdims = false : tensor<4xf32> -> tensor<f32>
  %c = zgraph.reduce_max %0 axes = [0] keepdims = false : tensor<4xf32> -> tensor<f32>
  return %a, %b, %c : tensor<f32>, tensor<f32>, tensor<f32>
}
