// RUN: zcc-opt %s --zcc-graph-fuse-kernels | FileCheck %s --check-prefix=ALL
// RUN: zcc-opt %s --zcc-graph-fuse-kernels="recompute-bytes=1" | FileCheck %s --check-prefix=FIRST
// RUN: zcc-opt %s --zcc-graph-fuse-kernels="recompute=false" | FileCheck %s --check-prefix=NONE

// Two GELU outputs read again by the backward pass's weight gradients. By
// default both are recomputed there; with recompute-bytes only the first
// in forward order, until that many bytes are (4x8 f32: 128 bytes each);
// with recompute off neither. The module says how many outputs and bytes
// were recomputed, of how many could be.
// ALL: module attributes {zgraph.recomputed = array<i64: 2, 256, 2, 256>}
// ALL-COUNT-4: zgraph.gelu %
// ALL-NOT: zgraph.gelu %
// FIRST: module attributes {zgraph.recomputed = array<i64: 1, 128, 2, 256>}
// FIRST: %[[H1:.*]] = zgraph.gelu %[[X1:[^ ]*]]
// FIRST: %[[H2:.*]] = zgraph.gelu %[[X2:[^ ]*]]
// FIRST: mse_loss_grad
// FIRST: zgraph.gelu %[[X1]]
// FIRST-NOT: zgraph.gelu %
// FIRST: zgraph.matmul %[[H2]], %{{.*}} {transpose_lhs}
// NONE-NOT: zgraph.recomputed
// NONE-COUNT-2: zgraph.gelu %
// NONE-NOT: zgraph.gelu %
module {
  func.func @two(%x1: tensor<4x8xf32>, %x2: tensor<4x8xf32>, %w: tensor<8x2xf32>, %t: tensor<4x2xf32>,
                 %seed: tensor<f32>, %dh: tensor<4x8xf32>)
      -> (tensor<8x2xf32>, tensor<8x2xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
    %h1 = zgraph.gelu %x1 : tensor<4x8xf32>
    %h2 = zgraph.gelu %x2 : tensor<4x8xf32>
    %y1 = zgraph.matmul %h1, %w : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
    %y2 = zgraph.matmul %h2, %w : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
    %y = zgraph.add %y1, %y2 : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %dy = zgraph.mse_loss_grad %y, %t, %seed : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
    %h1t = zgraph.transpose %h1 perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
    %dw1 = zgraph.matmul %h1t, %dy : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
    %h2t = zgraph.transpose %h2 perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
    %dw2 = zgraph.matmul %h2t, %dy : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
    %dx1 = zgraph.gelu_grad %x1, %dh : tensor<4x8xf32>
    %dx2 = zgraph.gelu_grad %x2, %dh : tensor<4x8xf32>
    return %dw1, %dw2, %dx1, %dx2 : tensor<8x2xf32>, tensor<8x2xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
}
