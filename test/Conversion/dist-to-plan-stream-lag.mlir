// RUN: zcc-opt %s --zcc-dist-zero --zcc-dist-to-plan | FileCheck %s

// ZeRO 0 with overlap_comm and no accumulation: each gradient's all-reduce
// (its own bucket here) runs on stream 1 as soon as the backward pass has
// it. At most one earlier run stays in flight: when the third run starts,
// compute waits for the first (@e1), so the first bucket's buffers are free
// again from there on instead of live to the end of the program.
// CHECK-LABEL: zplan.program @micro_step {
// CHECK: zplan.kernel "matmul" {{.*}} stream 0
// CHECK-NEXT: zplan.record @e0 stream 0
// CHECK-NEXT: zplan.wait @e0 stream 1
// CHECK-NEXT: zplan.kernel "all_reduce" {{.*}} stream 1
// CHECK-NEXT: zplan.kernel "accumulate" {{.*}} stream 1
// CHECK-NEXT: zplan.record @e1 stream 1
// CHECK-NEXT: zplan.kernel "matmul" {{.*}} stream 0
// CHECK-NEXT: zplan.record @e2 stream 0
// CHECK-NEXT: zplan.wait @e2 stream 1
// CHECK-NEXT: zplan.kernel "all_reduce" {{.*}} stream 1
// CHECK-NEXT: zplan.kernel "accumulate" {{.*}} stream 1
// CHECK-NEXT: zplan.record @e3 stream 1
// CHECK-NEXT: zplan.kernel "matmul" {{.*}} stream 0
// CHECK-NEXT: zplan.wait @e1 stream 0
// CHECK-NEXT: zplan.record @e4 stream 0
// CHECK-NEXT: zplan.wait @e4 stream 1
// CHECK-NEXT: zplan.kernel "all_reduce" {{.*}} stream 1
// CHECK-NEXT: zplan.kernel "accumulate" {{.*}} stream 1
// CHECK-NEXT: zplan.record @e5 stream 1
// CHECK-NEXT: }
// CHECK-LABEL: zplan.program @grad_norm {
// CHECK-NEXT: zplan.kernel "sum_squares"
// CHECK-NEXT: }
module attributes {zcc.config = {gradient_accumulation_steps = 1 : i64, zero_optimization = {stage = 0 : i64, reduce_bucket_size = 12 : i64, overlap_comm = true}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%x: tensor<2x4xf32> {zgraph.name = "x"}, %dy: tensor<2x4xf32> {zgraph.name = "dy"}) {
    %ga = zgraph.state "a" kind = "grad" : tensor<4x4xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<4x4xf32>
    %gc = zgraph.state "c" kind = "grad" : tensor<4x4xf32>
    %da = zgraph.matmul %x, %dy {transpose_lhs} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    zgraph.accumulate %da into %ga : tensor<4x4xf32> into tensor<4x4xf32>
    %db = zgraph.matmul %dy, %x {transpose_lhs} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    zgraph.accumulate %db into %gb : tensor<4x4xf32> into tensor<4x4xf32>
    %dc = zgraph.matmul %x, %x {transpose_lhs} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    zgraph.accumulate %dc into %gc : tensor<4x4xf32> into tensor<4x4xf32>
    return
  }
  func.func @grad_norm() -> tensor<f64> {
    %ga = zgraph.state "a" kind = "grad" : tensor<4x4xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<4x4xf32>
    %gc = zgraph.state "c" kind = "grad" : tensor<4x4xf32>
    %s = zgraph.sum_squares %ga, %gb, %gc : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @optimizer_step() {
    return
  }
}
