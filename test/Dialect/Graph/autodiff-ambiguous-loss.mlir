// RUN: zcc-opt %s --zcc-graph-autodiff -verify-diagnostics
// XFAIL: *
// Known bug (Autodiff.cpp, findLoss): the "only scalar float output" search
// resets its candidate on the second scalar but sets it again on the third,
// so with three unnamed scalar outputs the third (here the max) silently
// becomes the loss. It must be refused as with two. Remove the XFAIL once
// fixed.

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
