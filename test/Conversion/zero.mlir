// RUN: zcc-opt %s --split-input-file --zcc-dist-zero --verify-diagnostics | FileCheck %s

// ZeRO stage 0 on two data-parallel ranks: every gradient accumulator is
// averaged over the group at the start of @grad_norm and written back, and
// the norm reads the averaged values. A bucket of 4 elements holds "a" alone,
// so each gradient has its own all-reduce.
// CHECK-LABEL: func.func @grad_norm
// CHECK-NEXT: %[[A:.*]] = zgraph.state "a" kind = "grad" : tensor<4xf32>
// CHECK-NEXT: %[[B:.*]] = zgraph.state "b" kind = "grad" : tensor<2x3xf32>
// CHECK-NEXT: %[[RA:.*]] = zdist.all_reduce %[[A]] on @mesh axes = ["dp"] reduction = avg : tensor<4xf32>
// CHECK-NEXT: zgraph.assign %[[RA]] into %[[A]]
// CHECK-NEXT: %[[RB:.*]] = zdist.all_reduce %[[B]] on @mesh axes = ["dp"] reduction = avg : tensor<2x3xf32>
// CHECK-NEXT: zgraph.assign %[[RB]] into %[[B]]
// CHECK-NEXT: zgraph.sum_squares %[[RA]], %[[RB]]
// The other functions are untouched.
// CHECK-LABEL: func.func @zero_grads
// CHECK-NOT: zdist.all_reduce
module attributes {zcc.config = {zero_optimization = {stage = 0 : i64, reduce_bucket_size = 4 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @grad_norm() -> tensor<f64> {
    %a = zgraph.state "a" kind = "grad" : tensor<4xf32>
    %b = zgraph.state "b" kind = "grad" : tensor<2x3xf32>
    %s = zgraph.sum_squares %a, %b : tensor<4xf32>, tensor<2x3xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @zero_grads() {
    %a = zgraph.state "a" kind = "grad" : tensor<4xf32>
    zgraph.fill %a value = 0.0 : tensor<4xf32>
    return
  }
}

// -----

// With the default bucket (5e8 elements) both gradients share one: flattened,
// concatenated, all-reduced once, split back and written back.
// CHECK-LABEL: func.func @grad_norm
// CHECK-NEXT: %[[A:.*]] = zgraph.state "a" kind = "grad" : tensor<4xf32>
// CHECK-NEXT: %[[B:.*]] = zgraph.state "b" kind = "grad" : tensor<2x3xf32>
// CHECK-NEXT: %[[FB:.*]] = zgraph.reshape %[[B]] : tensor<2x3xf32> -> tensor<6xf32>
// CHECK-NEXT: %[[CAT:.*]] = zgraph.concat %[[A]], %[[FB]] axis = 0 : (tensor<4xf32>, tensor<6xf32>) -> tensor<10xf32>
// CHECK-NEXT: %[[R:.*]] = zdist.all_reduce %[[CAT]] on @mesh axes = ["dp"] reduction = avg : tensor<10xf32>
// CHECK-NEXT: %[[RA:.*]] = zgraph.slice %[[R]] starts = [0] limits = [4] strides = [1] : tensor<10xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[SB:.*]] = zgraph.slice %[[R]] starts = [4] limits = [10] strides = [1] : tensor<10xf32> -> tensor<6xf32>
// CHECK-NEXT: %[[RB:.*]] = zgraph.reshape %[[SB]] : tensor<6xf32> -> tensor<2x3xf32>
// CHECK-NEXT: zgraph.assign %[[RA]] into %[[A]]
// CHECK-NEXT: zgraph.assign %[[RB]] into %[[B]]
// CHECK-NEXT: zgraph.sum_squares %[[RA]], %[[RB]]
module attributes {zcc.config = {zero_optimization = {stage = 0 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @grad_norm() -> tensor<f64> {
    %a = zgraph.state "a" kind = "grad" : tensor<4xf32>
    %b = zgraph.state "b" kind = "grad" : tensor<2x3xf32>
    %s = zgraph.sum_squares %a, %b : tensor<4xf32>, tensor<2x3xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
}

// -----

// One data-parallel rank: nothing to reduce (offload is the offload pass's).
// CHECK-LABEL: func.func @grad_norm
// CHECK-NOT: zdist.all_reduce
module attributes {zcc.config = {zero_optimization = {stage = 3 : i64, offload_optimizer = {device = "cpu"}}}} {
  zdist.mesh @mesh ["dp" = 1]
  func.func @grad_norm() -> tensor<f64> {
    %a = zgraph.state "a" kind = "grad" : tensor<4xf32>
    %s = zgraph.sum_squares %a : tensor<4xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
}

// -----

// An inference plan (no @grad_norm) runs every rank on its own batches.
// CHECK-LABEL: func.func @main
// CHECK-NOT: zdist.all_reduce
module attributes {zcc.config = {zero_optimization = {stage = 3 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
