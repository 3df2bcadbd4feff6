// RUN: zcc-opt %s --zcc-graph-autodiff | FileCheck %s
// A negative concat axis (I64Attr, read as unsigned) is normalised before
// the gradient slices are built. The importer normalises ONNX axes, so only
// hand-written or rewritten IR has one.

// A concat along the last axis written as -1: w's gradient is the window of
// columns 3..5 of the output's gradient.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[GW:.*]] = zgraph.slice %{{.*}} starts = [0, 3] limits = [2, 5] strides = [1, 1] : tensor<2x5xf32> -> tensor<2x2xf32>
// CHECK-NEXT: %[[ACC:.*]] = zgraph.state "w" kind = "grad" : tensor<2x2xf32>
// CHECK-NEXT: zgraph.accumulate %[[GW]] into %[[ACC]]
func.func @main(%x: tensor<2x3xf32> {zgraph.name = "x"}) -> (tensor<f32> {zgraph.name = "loss"}) {
  %w = zgraph.param "w" trainable : tensor<2x2xf32>
  %0 = zgraph.concat %x, %w axis = -1 : (tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<2x5xf32>
  %l = zgraph.reduce_sum %0 axes = [0, 1] keepdims = false : tensor<2x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}
