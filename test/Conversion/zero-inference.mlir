// RUN: zcc-opt %s --split-input-file --zcc-dist-zero --verify-diagnostics | FileCheck %s

// Data-parallel inference on two ranks, stage 3: each rank runs @main on its
// 4 rows of the batch; the parameter w is stored as its 2x2 shard and
// all-gathered before its use; the output y is all-gathered along the batch
// into the whole batch's 8 rows, and the scalar loss is averaged.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: tensor<4x2xf32> {zgraph.name = "x"}, %[[T:.*]]: tensor<4x2xf32> {zgraph.name = "t"})
// CHECK-SAME: -> (tensor<8x2xf32> {zgraph.name = "y"}, tensor<f32> {zgraph.name = "loss"})
// CHECK: %[[W:.*]] = zgraph.param "w" {{.*}}zdist.shards = 2 : i64} : tensor<2x2xf32>
// CHECK: %[[WHOLE:.*]] = zdist.all_gather %[[W]] on @mesh axes = ["dp"] gather_axis = 0 : tensor<2x2xf32> -> tensor<4x2xf32>
// CHECK: %[[Y:.*]] = zgraph.mul %[[X]], %[[WHOLE]]
// CHECK: %[[LOSS:.*]] = zgraph.mse_loss %[[Y]]
// CHECK: %[[ALLY:.*]] = zdist.all_gather %[[Y]] on @mesh axes = ["dp"] gather_axis = 0 : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK: %[[AVG:.*]] = zdist.all_reduce %[[LOSS]] on @mesh axes = ["dp"] reduction = avg : tensor<f32>
// CHECK: return %[[ALLY]], %[[AVG]]
module attributes {zcc.config = {train_micro_batch_size_per_gpu = 4 : i64, zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 0 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @main(%x: tensor<4x2xf32> {zgraph.name = "x"}, %t: tensor<4x2xf32> {zgraph.name = "t"}) -> (tensor<4x2xf32> {zgraph.name = "y"}, tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" : tensor<4x2xf32>
    %y = zgraph.mul %x, %w : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %loss = zgraph.mse_loss %y, %t : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
    return %y, %loss : tensor<4x2xf32>, tensor<f32>
  }
}

// -----

// Stage 0 keeps the whole parameter on every rank: only the output is
// gathered.
// CHECK-LABEL: func.func @main
// CHECK: %[[W:.*]] = zgraph.param "w" : tensor<4x2xf32>
// CHECK-NOT: zdist.all_gather %[[W]]
// CHECK: %[[Y:.*]] = zgraph.mul %{{.*}}, %[[W]]
// CHECK: %[[ALLY:.*]] = zdist.all_gather %[[Y]] {{.*}} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK: return %[[ALLY]]
module attributes {zcc.config = {train_micro_batch_size_per_gpu = 4 : i64, zero_optimization = {stage = 0 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @main(%x: tensor<4x2xf32> {zgraph.name = "x"}) -> (tensor<4x2xf32> {zgraph.name = "y"}) {
    %w = zgraph.param "w" : tensor<4x2xf32>
    %y = zgraph.mul %x, %w : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// An input whose first dimension is not the micro-batch cannot be split.
module attributes {zcc.config = {train_micro_batch_size_per_gpu = 4 : i64, zero_optimization = {stage = 0 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  // expected-error @+1 {{data-parallel inference splits the batch over the 2 ranks by the first dimension, but input 'x' is 'tensor<2x4xf32>', whose first dimension is not the micro-batch (4 rows}}
  func.func @main(%x: tensor<2x4xf32> {zgraph.name = "x"}) -> (tensor<2x4xf32> {zgraph.name = "y"}) {
    return %x : tensor<2x4xf32>
  }
}

// -----

// Nor can a non-scalar output that is not per sample.
module attributes {zcc.config = {train_micro_batch_size_per_gpu = 4 : i64, zero_optimization = {stage = 0 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  // expected-error @+1 {{but output 'w' is 'tensor<3x2xf32>', whose first dimension is not the micro-batch}}
  func.func @main(%x: tensor<4x2xf32> {zgraph.name = "x"}) -> (tensor<3x2xf32> {zgraph.name = "w"}) {
    %w = zgraph.param "w" : tensor<3x2xf32>
    return %w : tensor<3x2xf32>
  }
}
