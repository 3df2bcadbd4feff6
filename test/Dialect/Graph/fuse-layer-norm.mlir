// RUN: zcc-opt %s --split-input-file --zcc-graph-fuse-layer-norm | FileCheck %s

// torch.nn.LayerNorm as torch exports it before opset 17: the mean, the
// centred input, Pow(d, 2), its mean, + eps, Sqrt, Div, * weight, + bias.
// CHECK-LABEL: func.func @exported
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[Y:.*]] = zgraph.layer_norm %[[X]], %[[W]], %[[B]] axis = 2 epsilon = 9.99999974{{[0-9]*}}E-6
// CHECK-NEXT: return %[[Y]]
func.func @exported(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = zgraph.constant dense<2.0> : tensor<f32>
  %eps = zgraph.constant dense<1.0e-5> : tensor<f32>
  %0 = zgraph.reduce_mean %x axes = [2] keepdims = true : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %1 = zgraph.sub %x, %0 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %2 = zgraph.pow %1, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %3 = zgraph.reduce_mean %2 axes = [2] keepdims = true : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %4 = zgraph.add %3, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %5 = zgraph.sqrt %4 : tensor<2x4x1xf32>
  %6 = zgraph.div %1, %5 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %7 = zgraph.mul %6, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %8 = zgraph.add %7, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %8 : tensor<2x4x8xf32>
}

// -----

// d * d for the square, and the operands of the adds and the product the
// other way round.
// CHECK-LABEL: func.func @commuted
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[Y:.*]] = zgraph.layer_norm %[[X]], %[[W]], %[[B]] axis = 1 epsilon = 0.00100000004{{[0-9]*}} :
// CHECK-NEXT: return %[[Y]]
func.func @commuted(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %eps = zgraph.constant dense<1.0e-3> : tensor<f32>
  %0 = zgraph.reduce_mean %x axes = [1] keepdims = true : tensor<4x8xf32> -> tensor<4x1xf32>
  %1 = zgraph.sub %x, %0 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %2 = zgraph.mul %1, %1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = zgraph.reduce_mean %2 axes = [1] keepdims = true : tensor<4x8xf32> -> tensor<4x1xf32>
  %4 = zgraph.add %eps, %3 : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %5 = zgraph.sqrt %4 : tensor<4x1xf32>
  %6 = zgraph.div %1, %5 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %7 = zgraph.mul %w, %6 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %8 = zgraph.add %b, %7 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %8 : tensor<4x8xf32>
}

// -----

// The centred input is also an output: fusing would compute it twice, so the
// chain stays.
// CHECK-LABEL: func.func @centred_used_elsewhere
// CHECK-NOT: zgraph.layer_norm
// CHECK: zgraph.sqrt
func.func @centred_used_elsewhere(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %two = zgraph.constant dense<2.0> : tensor<f32>
  %eps = zgraph.constant dense<1.0e-5> : tensor<f32>
  %0 = zgraph.reduce_mean %x axes = [1] keepdims = true : tensor<4x8xf32> -> tensor<4x1xf32>
  %1 = zgraph.sub %x, %0 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %2 = zgraph.pow %1, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = zgraph.reduce_mean %2 axes = [1] keepdims = true : tensor<4x8xf32> -> tensor<4x1xf32>
  %4 = zgraph.add %3, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %5 = zgraph.sqrt %4 : tensor<4x1xf32>
  %6 = zgraph.div %1, %5 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %7 = zgraph.mul %6, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %8 = zgraph.add %7, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %8, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A mean over another axis than the last is no layer norm of zgraph's.
// CHECK-LABEL: func.func @other_axis
// CHECK-NOT: zgraph.layer_norm
func.func @other_axis(%x: tensor<8x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8x8xf32> {
  %two = zgraph.constant dense<2.0> : tensor<f32>
  %eps = zgraph.constant dense<1.0e-5> : tensor<f32>
  %0 = zgraph.reduce_mean %x axes = [0] keepdims = true : tensor<8x8xf32> -> tensor<1x8xf32>
  %1 = zgraph.sub %x, %0 : (tensor<8x8xf32>, tensor<1x8xf32>) -> tensor<8x8xf32>
  %2 = zgraph.pow %1, %two : (tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xf32>
  %3 = zgraph.reduce_mean %2 axes = [0] keepdims = true : tensor<8x8xf32> -> tensor<1x8xf32>
  %4 = zgraph.add %3, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %5 = zgraph.sqrt %4 : tensor<1x8xf32>
  %6 = zgraph.div %1, %5 : (tensor<8x8xf32>, tensor<1x8xf32>) -> tensor<8x8xf32>
  %7 = zgraph.mul %6, %w : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  %8 = zgraph.add %7, %b : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  return %8 : tensor<8x8xf32>
}
