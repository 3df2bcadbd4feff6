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

// Pipeline stages: a value crossing stages, a send, a receive into a named
// buffer and one without, a store.
// CHECK-LABEL: func.func @pipeline_ops
// CHECK: %[[T:.*]] = zdist.transfer %{{.*}} from 0 to 1 : tensor<4x8xf32>
// CHECK: zdist.send %[[T]] to 1 : tensor<4x8xf32>
// CHECK: zdist.recv from 0 into "input:zcc.pp.t0.k1" : tensor<4x8xf32>
// CHECK: zdist.recv from 2 : tensor<2xf32>
// CHECK: zdist.store %[[T]] into "input:zcc.pp.a0.k0" : tensor<4x8xf32>
func.func @pipeline_ops(%x: tensor<4x8xf32>) {
  %t = zdist.transfer %x from 0 to 1 : tensor<4x8xf32>
  zdist.send %t to 1 : tensor<4x8xf32>
  %r = zdist.recv from 0 into "input:zcc.pp.t0.k1" : tensor<4x8xf32>
  %s = zdist.recv from 2 : tensor<2xf32>
  zdist.store %t into "input:zcc.pp.a0.k0" : tensor<4x8xf32>
  return
}

// A schedule: one instruction list and one buffer count per stage.
// CHECK: zdist.pipeline "gpipe" micro_batches = 2 buffers = [2, 2] bubble_fraction = 2.500000e-01 stages = ["F0 sa0 F1 sa1 rg0 B0 rg1 B1", "ra0 F0 ra1 F1 B0 sg0 B1 sg1"]
zdist.pipeline "gpipe" micro_batches = 2 buffers = [2, 2] bubble_fraction = 0.25 stages = ["F0 sa0 F1 sa1 rg0 B0 rg1 B1", "ra0 F0 ra1 F1 B0 sg0 B1 sg1"]
