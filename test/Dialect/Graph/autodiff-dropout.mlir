// RUN: zcc-opt %s --split-input-file --zcc-graph-autodiff -verify-diagnostics | FileCheck %s

// Each dropout of the step reads the step's zcc.dropout_state argument and
// counts its input's elements per sample (over the 4 rows of the first
// data input); its gradient is the same dropout, same key and state, over
// the result's gradient: the forward mask again.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x6xf32> {zgraph.name = "x"}
// CHECK-SAME: %[[STATE:[a-z0-9]+]]: tensor<2xi64> {zgraph.name = "zcc.dropout_state"}
// CHECK: %[[W:.*]] = zgraph.param "w"
// CHECK: %[[H:.*]] = zgraph.mul %[[X]], %[[W]]
// CHECK: zgraph.dropout %[[H]] state %[[STATE]] : tensor<2xi64> {key = 7 : i64, ratio = 1.000000e-01 : f64, sample_elements = 6 : i64} : tensor<4x6xf32>
// CHECK: %[[DH:.*]] = zgraph.dropout %{{.*}} state %[[STATE]] : tensor<2xi64> {key = 7 : i64, ratio = 1.000000e-01 : f64, sample_elements = 6 : i64} : tensor<4x6xf32>
// CHECK: zgraph.mul %[[DH]], %[[X]]
func.func @main(%x: tensor<4x6xf32> {zgraph.name = "x"}) -> (tensor<f32> {zgraph.name = "loss"}) {
  %w = zgraph.param "w" trainable : tensor<4x6xf32>
  %h = zgraph.mul %x, %w : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %d = zgraph.dropout %h {key = 7 : i64, ratio = 0.1 : f64} : tensor<4x6xf32>
  %l = zgraph.reduce_sum %d axes = [0, 1] keepdims = false : tensor<4x6xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A dropout whose elements are not the micro-batch's rows' is refused.
func.func @main(%x: tensor<4x6xf32> {zgraph.name = "x"}) -> (tensor<f32> {zgraph.name = "loss"}) {
  %w = zgraph.param "w" trainable : tensor<3x2xf32>
  // expected-error @+1 {{dropout over 'tensor<3x2xf32>' is not made of the micro-batch's 4 samples}}
  %d = zgraph.dropout %w {key = 7 : i64, ratio = 0.1 : f64} : tensor<3x2xf32>
  %l = zgraph.reduce_sum %d axes = [0, 1] keepdims = false : tensor<3x2xf32> -> tensor<f32>
  %s = zgraph.reduce_sum %x axes = [0, 1] keepdims = false : tensor<4x6xf32> -> tensor<f32>
  %t = zgraph.add %l, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %t : tensor<f32>
}
