// RUN: zcc-opt %s --split-input-file --zcc-graph-fuse-gelu | FileCheck %s

// torch.nn.GELU as exported: x * (1 + erf(x / sqrt 2)) * 0.5.
// CHECK-LABEL: func.func @erf_form
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[G:.*]] = zgraph.gelu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @erf_form(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sqrt2 = zgraph.constant dense<1.41421354> : tensor<f32>
  %one = zgraph.constant dense<1.0> : tensor<f32>
  %half = zgraph.constant dense<0.5> : tensor<f32>
  %0 = zgraph.div %x, %sqrt2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = zgraph.erf %0 : tensor<4x8xf32>
  %2 = zgraph.add %1, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = zgraph.mul %x, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = zgraph.mul %3, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// The same with the factors regrouped: 0.5 * x first, x * (1/sqrt 2), 1 + erf.
// CHECK-LABEL: func.func @erf_regrouped
// CHECK-NEXT: zgraph.gelu %{{.*}} : tensor<8xf32>
// CHECK-NEXT: return
func.func @erf_regrouped(%x: tensor<8xf32>) -> tensor<8xf32> {
  %rsqrt2 = zgraph.constant dense<0.707106769> : tensor<f32>
  %one = zgraph.constant dense<1.0> : tensor<f32>
  %half = zgraph.constant dense<0.5> : tensor<f32>
  %0 = zgraph.mul %rsqrt2, %x : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = zgraph.erf %0 : tensor<8xf32>
  %2 = zgraph.add %one, %1 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = zgraph.mul %half, %x : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = zgraph.mul %3, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %4 : tensor<8xf32>
}

// -----

// HF gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))),
// with x^3 as Pow and as two products.
// CHECK-LABEL: func.func @tanh_form
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[G:.*]] = zgraph.gelu %[[X]] {approximate = "tanh"} : tensor<2x3xf32>
// CHECK-NEXT: return %[[G]]
func.func @tanh_form(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %half = zgraph.constant dense<0.5> : tensor<f32>
  %one = zgraph.constant dense<1.0> : tensor<f32>
  %three = zgraph.constant dense<3.0> : tensor<f32>
  %c = zgraph.constant dense<0.044715> : tensor<f32>
  %s = zgraph.constant dense<0.797884583> : tensor<f32>
  %0 = zgraph.mul %half, %x : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = zgraph.pow %x, %three : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %2 = zgraph.mul %c, %1 : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = zgraph.add %x, %2 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = zgraph.mul %s, %3 : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = zgraph.tanh %4 : tensor<2x3xf32>
  %6 = zgraph.add %one, %5 : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = zgraph.mul %0, %6 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %7 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @tanh_cube_as_products
// CHECK-NEXT: zgraph.gelu %{{.*}} {approximate = "tanh"}
// CHECK-NEXT: return
func.func @tanh_cube_as_products(%x: tensor<5xf32>) -> tensor<5xf32> {
  %half = zgraph.constant dense<0.5> : tensor<f32>
  %one = zgraph.constant dense<1.0> : tensor<f32>
  %c = zgraph.constant dense<0.044715> : tensor<f32>
  %s = zgraph.constant dense<0.797884583> : tensor<f32>
  %sq = zgraph.mul %x, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %cube = zgraph.mul %sq, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %2 = zgraph.mul %cube, %c : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  %3 = zgraph.add %2, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %4 = zgraph.mul %3, %s : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  %5 = zgraph.tanh %4 : tensor<5xf32>
  %6 = zgraph.add %5, %one : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  %7 = zgraph.mul %x, %6 : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %8 = zgraph.mul %7, %half : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  return %8 : tensor<5xf32>
}

// -----

// Chains that are not GELU stay: a wrong constant (0.6 instead of 0.5), an
// erf of another value than x, and an intermediate with a second use.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: zgraph.gelu
// CHECK: return
func.func @not_gelu(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %sqrt2 = zgraph.constant dense<1.41421354> : tensor<f32>
  %one = zgraph.constant dense<1.0> : tensor<f32>
  %half = zgraph.constant dense<0.5> : tensor<f32>
  %wrong = zgraph.constant dense<0.6> : tensor<f32>
  %a0 = zgraph.div %x, %sqrt2 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %a1 = zgraph.erf %a0 : tensor<4xf32>
  %a2 = zgraph.add %a1, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %a3 = zgraph.mul %x, %a2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a4 = zgraph.mul %a3, %wrong : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b0 = zgraph.div %y, %sqrt2 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b1 = zgraph.erf %b0 : tensor<4xf32>
  %b2 = zgraph.add %b1, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b3 = zgraph.mul %x, %b2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b4 = zgraph.mul %b3, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %c0 = zgraph.div %x, %sqrt2 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %c1 = zgraph.erf %c0 : tensor<4xf32>
  %c2 = zgraph.add %c1, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %c3 = zgraph.mul %x, %c2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c4 = zgraph.mul %c3, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %a4, %b4, %c4, %c1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
