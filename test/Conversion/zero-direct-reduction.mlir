// RUN: zcc-opt %s --zcc-dist-zero | FileCheck %s

// Stage 2 on two ranks: a gradient of 2^22 elements or more is
// reduce-scattered on its own, straight from where the backward pass wrote
// it (no copy into a bucket and back); the small gradients around it share
// one bucket after it (concatenated, scattered, cut back out).
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[GW:.*]] = zgraph.state "w" kind = "grad" : tensor<1024x4096xf32>
// CHECK-NEXT: %[[SW:.*]] = zdist.reduce_scatter %{{.*}} on @mesh axes = ["dp"] scatter_axis = 0 reduction = avg : tensor<2048x4096xf32> -> tensor<1024x4096xf32>
// CHECK-NEXT: zgraph.accumulate %[[SW]] into %[[GW]]
// CHECK-NOT: zdist.reduce_scatter
// CHECK: zgraph.concat
// CHECK-NEXT: zgraph.reshape
// CHECK-NEXT: zdist.reduce_scatter %{{.*}} : tensor<16xf32> -> tensor<8xf32>
// CHECK-NOT: zdist.reduce_scatter
// CHECK: return
module attributes {zcc.config = {zero_optimization = {stage = 2 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%dw: tensor<2048x4096xf32>, %da: tensor<4x2xf32>, %db: tensor<4x2xf32>) {
    %w = zgraph.param "w" trainable : tensor<2048x4096xf32>
    %a = zgraph.param "a" trainable : tensor<4x2xf32>
    %b = zgraph.param "b" trainable : tensor<4x2xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<2048x4096xf32>
    zgraph.accumulate %dw into %gw : tensor<2048x4096xf32> into tensor<2048x4096xf32>
    %ga = zgraph.state "a" kind = "grad" : tensor<4x2xf32>
    zgraph.accumulate %da into %ga : tensor<4x2xf32> into tensor<4x2xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<4x2xf32>
    zgraph.accumulate %db into %gb : tensor<4x2xf32> into tensor<4x2xf32>
    return
  }
  func.func @grad_norm() -> tensor<f64> {
    %w = zgraph.state "w" kind = "grad" : tensor<2048x4096xf32>
    %a = zgraph.state "a" kind = "grad" : tensor<4x2xf32>
    %b = zgraph.state "b" kind = "grad" : tensor<4x2xf32>
    %s = zgraph.sum_squares %w, %a, %b : tensor<2048x4096xf32>, tensor<4x2xf32>, tensor<4x2xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @optimizer_step() {
    return
  }
}
