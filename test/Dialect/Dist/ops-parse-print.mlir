// RUN: zcc-opt %s | zcc-opt | FileCheck %s
// RUN: zcc-opt %s --mlir-print-op-generic | zcc-opt | FileCheck %s

// Axis names and sizes print side by side, in declaration order.
// CHECK: zdist.mesh @m ["pp" = 2, "dp" = 4]
zdist.mesh @m ["pp" = 2, "dp" = 4]
// A single-device mesh is legal: a job on one GPU still has a mesh.
// CHECK: zdist.mesh @single ["dp" = 1]
zdist.mesh @single ["dp" = 1]

// A sharding is an ordinary attribute in full form, so any op (here a
// function argument) can carry one.
// CHECK-LABEL: func.func @sharding_on_argument
// CHECK-SAME: zdist.sharding = #zdist.sharding<@m, [{"dp"}, {}]>
func.func @sharding_on_argument(%w: tensor<8x4xf32> {zdist.sharding = #zdist.sharding<@m, [{"dp"}, {}]>}) {
  return
}

// Rows split over "dp": 8 / 4 = 2; columns whole.
// CHECK-LABEL: func.func @shard_one_axis
// CHECK: zdist.shard %{{.*}} to <@m, [{"dp"}, {}]> : tensor<8x4xf32> -> tensor<2x4xf32>
// CHECK: zdist.unshard %{{.*}} from <@m, [{"dp"}, {}]> : tensor<2x4xf32> -> tensor<8x4xf32>
func.func @shard_one_axis(%w: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %l = zdist.shard %w to <@m, [{"dp"}, {}]> : tensor<8x4xf32> -> tensor<2x4xf32>
  %g = zdist.unshard %l from <@m, [{"dp"}, {}]> : tensor<2x4xf32> -> tensor<8x4xf32>
  return %g : tensor<8x4xf32>
}

// One dimension split over two axes divides by their product (16 / 8), and
// each axis may split a different dimension.
// CHECK-LABEL: func.func @shard_two_axes
// CHECK: zdist.shard %{{.*}} to <@m, [{"pp", "dp"}, {}]> : tensor<16x4xf32> -> tensor<2x4xf32>
// CHECK: zdist.shard %{{.*}} to <@m, [{"dp"}, {"pp"}]> : tensor<16x4xf32> -> tensor<4x2xf32>
func.func @shard_two_axes(%w: tensor<16x4xf32>) {
  %0 = zdist.shard %w to <@m, [{"pp", "dp"}, {}]> : tensor<16x4xf32> -> tensor<2x4xf32>
  %1 = zdist.shard %w to <@m, [{"dp"}, {"pp"}]> : tensor<16x4xf32> -> tensor<4x2xf32>
  return
}

// Replicated tensors, including a 0-d one, keep their shape.
// CHECK-LABEL: func.func @shard_replicated
// CHECK: zdist.shard %{{.*}} to <@m, [{}, {}]> : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK: zdist.shard %{{.*}} to <@m, []> : tensor<f32> -> tensor<f32>
func.func @shard_replicated(%w: tensor<8x4xf32>, %s: tensor<f32>) {
  %0 = zdist.shard %w to <@m, [{}, {}]> : tensor<8x4xf32> -> tensor<8x4xf32>
  %1 = zdist.shard %s to <@m, []> : tensor<f32> -> tensor<f32>
  return
}

// ZeRO-3's parameter life: gather before use, release after, on any
// dimension and over a group spanning two axes.
// CHECK-LABEL: func.func @all_gather
// CHECK: zdist.all_gather %{{.*}} on @m axes = ["dp"] gather_axis = 0 : tensor<2x4xf32> -> tensor<8x4xf32>
// CHECK: zdist.all_gather %{{.*}} on @m axes = ["pp", "dp"] gather_axis = 1 : tensor<2x4xf32> -> tensor<2x32xf32>
// CHECK: zdist.release %{{.*}} : tensor<8x4xf32>
// CHECK: zdist.release %{{.*}} : tensor<2x32xf32>
func.func @all_gather(%shard: tensor<2x4xf32>) {
  %0 = zdist.all_gather %shard on @m axes = ["dp"] gather_axis = 0 : tensor<2x4xf32> -> tensor<8x4xf32>
  %1 = zdist.all_gather %shard on @m axes = ["pp", "dp"] gather_axis = 1 : tensor<2x4xf32> -> tensor<2x32xf32>
  zdist.release %0 : tensor<8x4xf32>
  zdist.release %1 : tensor<2x32xf32>
  return
}

// Every reduction kind prints as its keyword.
// CHECK-LABEL: func.func @reduce_scatter
// CHECK: zdist.reduce_scatter %{{.*}} on @m axes = ["dp"] scatter_axis = 0 reduction = sum : tensor<8x4xf32> -> tensor<2x4xf32>
// CHECK: zdist.reduce_scatter %{{.*}} on @m axes = ["dp"] scatter_axis = 1 reduction = avg : tensor<8x4xf32> -> tensor<8x1xf32>
// CHECK: zdist.reduce_scatter %{{.*}} on @m axes = ["pp"] scatter_axis = 0 reduction = max : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK: zdist.reduce_scatter %{{.*}} on @m axes = ["pp", "dp"] scatter_axis = 0 reduction = min : tensor<8x4xf32> -> tensor<1x4xf32>
func.func @reduce_scatter(%grad: tensor<8x4xf32>) {
  %0 = zdist.reduce_scatter %grad on @m axes = ["dp"] scatter_axis = 0 reduction = sum : tensor<8x4xf32> -> tensor<2x4xf32>
  %1 = zdist.reduce_scatter %grad on @m axes = ["dp"] scatter_axis = 1 reduction = avg : tensor<8x4xf32> -> tensor<8x1xf32>
  %2 = zdist.reduce_scatter %grad on @m axes = ["pp"] scatter_axis = 0 reduction = max : tensor<8x4xf32> -> tensor<4x4xf32>
  %3 = zdist.reduce_scatter %grad on @m axes = ["pp", "dp"] scatter_axis = 0 reduction = min : tensor<8x4xf32> -> tensor<1x4xf32>
  return
}

// All-reduce keeps the type; integer tensors are allowed (token counts).
// CHECK-LABEL: func.func @all_reduce
// CHECK: zdist.all_reduce %{{.*}} on @m axes = ["dp"] reduction = avg : tensor<8x4xf32>
// CHECK: zdist.all_reduce %{{.*}} on @single axes = ["dp"] reduction = sum : tensor<i64>
func.func @all_reduce(%grad: tensor<8x4xf32>, %tokens: tensor<i64>) {
  %0 = zdist.all_reduce %grad on @m axes = ["dp"] reduction = avg : tensor<8x4xf32>
  %1 = zdist.all_reduce %tokens on @single axes = ["dp"] reduction = sum : tensor<i64>
  return
}
