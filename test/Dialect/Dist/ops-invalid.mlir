// RUN: zcc-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// zdist.mesh
//===----------------------------------------------------------------------===//

// Only the generic form can give a name without a size.
// expected-error @+1 {{'zdist.mesh' op axis_names and shape differ in length (1 vs 2)}}
"zdist.mesh"() {sym_name = "m", axis_names = ["dp"], shape = array<i64: 2, 4>} : () -> ()

// -----

// A mesh without axes would have no device to run on.
// expected-error @+1 {{requires at least one axis}}
zdist.mesh @m []

// -----

// Axes are referred to by name, so a name cannot be empty.
// expected-error @+1 {{requires non-empty axis names}}
zdist.mesh @m ["" = 2]

// -----

// Axes are referred to by name, so names are unique.
// expected-error @+1 {{declares axis "dp" twice}}
zdist.mesh @m ["dp" = 2, "dp" = 4]

// -----

// An empty axis would make the mesh hold no device.
// expected-error @+1 {{axis "dp" has size 0; an axis has at least one device}}
zdist.mesh @m ["pp" = 2, "dp" = 0]

// -----

//===----------------------------------------------------------------------===//
// #zdist.sharding
//===----------------------------------------------------------------------===//

// The attribute is checked where it is parsed, before any mesh is known.
zdist.mesh @m ["dp" = 2]
// expected-error @+1 {{dimension 1 names mesh axis ""; axis names are non-empty strings}}
func.func @f(%x: tensor<4x4xf32> {zdist.sharding = #zdist.sharding<@m, [{}, {""}]>})

// -----

// A device holds one shard: an axis cannot split two dimensions...
zdist.mesh @m ["dp" = 2]
// expected-error @+1 {{mesh axis "dp" is used more than once; an axis splits at most one dimension, once}}
func.func @f(%x: tensor<4x4xf32> {zdist.sharding = #zdist.sharding<@m, [{"dp"}, {"dp"}]>})

// -----

// ...nor one dimension twice.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{mesh axis "dp" is used more than once; an axis splits at most one dimension, once}}
  %0 = zdist.shard %x to <@m, [{"dp", "dp"}, {}]> : tensor<4x4xf32> -> tensor<1x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// zdist.shard and zdist.unshard
//===----------------------------------------------------------------------===//

// The sharding's mesh must exist...
func.func @f(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'zdist.shard' op refers to @missing, which is not a zdist.mesh}}
  %0 = zdist.shard %x to <@missing, [{}, {}]> : tensor<4x4xf32> -> tensor<4x4xf32>
  return
}

// -----

// ...and be a mesh, not any symbol.
func.func @f(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'zdist.shard' op refers to @f, which is not a zdist.mesh}}
  %0 = zdist.shard %x to <@f, [{}, {}]> : tensor<4x4xf32> -> tensor<4x4xf32>
  return
}

// -----

// One entry per dimension of the global tensor.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{sharding is for rank 1 but the global type 'tensor<4x4xf32>' has rank 2}}
  %0 = zdist.shard %x to <@m, [{"dp"}]> : tensor<4x4xf32> -> tensor<2x4xf32>
  return
}

// -----

// Axes are names of the sharding's mesh.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{mesh @m has no axis "tp"}}
  %0 = zdist.shard %x to <@m, [{"tp"}, {}]> : tensor<4x4xf32> -> tensor<2x4xf32>
  return
}

// -----

// Shards are equal: 6 rows do not split over 4 devices.
zdist.mesh @m ["dp" = 4]
func.func @f(%x: tensor<6x4xf32>) {
  // expected-error @+1 {{global dimension 0 of size 6 does not split evenly into 4 shards}}
  %0 = zdist.shard %x to <@m, [{"dp"}, {}]> : tensor<6x4xf32> -> tensor<1x4xf32>
  return
}

// -----

// The result is the shard: 8 / 4 rows, not 8 / 2.
zdist.mesh @m ["dp" = 4]
func.func @f(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{local type 'tensor<4x4xf32>' is not the shard of 'tensor<8x4xf32>' under the sharding, which is 'tensor<2x4xf32>'}}
  %0 = zdist.shard %x to <@m, [{"dp"}, {}]> : tensor<8x4xf32> -> tensor<4x4xf32>
  return
}

// -----

// Unshard checks the same rule with operand and result swapped.
zdist.mesh @m ["dp" = 4]
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{local type 'tensor<2x4xf32>' is not the shard of 'tensor<4x4xf32>' under the sharding, which is 'tensor<1x4xf32>'}}
  %0 = zdist.unshard %x from <@m, [{"dp"}, {}]> : tensor<2x4xf32> -> tensor<4x4xf32>
  return
}

// -----

// Sharding moves no data, so it cannot convert elements.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %0 = zdist.shard %x to <@m, [{"dp"}, {}]> : tensor<4x4xf32> -> tensor<2x4xf16>
  return
}

// -----

// Shard shapes are computed at compile time.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of any type values, but got 'tensor<?x4xf32>'}}
  %0 = zdist.shard %x to <@m, [{"dp"}, {}]> : tensor<?x4xf32> -> tensor<?x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// A collective over no axis would be a copy; it must name its group.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'zdist.all_reduce' op requires at least one mesh axis}}
  %0 = zdist.all_reduce %x on @m axes = [] reduction = sum : tensor<4xf32>
  return
}

// -----

// An axis named twice would count its devices twice in the group size.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'zdist.all_gather' op names mesh axis "dp" twice}}
  %0 = zdist.all_gather %x on @m axes = ["dp", "dp"] gather_axis = 0 : tensor<4xf32> -> tensor<16xf32>
  return
}

// -----

// Collectives name their mesh like shardings do.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'zdist.all_reduce' op refers to @missing, which is not a zdist.mesh}}
  %0 = zdist.all_reduce %x on @missing axes = ["dp"] reduction = sum : tensor<4xf32>
  return
}

// -----

// The group's axes belong to the mesh.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'zdist.reduce_scatter' op mesh @m has no axis "tp"}}
  %0 = zdist.reduce_scatter %x on @m axes = ["tp"] scatter_axis = 0 reduction = sum : tensor<4xf32> -> tensor<2xf32>
  return
}

// -----

// The gathered dimension exists in the operand.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{gather_axis 2 is out of range for rank 2}}
  %0 = zdist.all_gather %x on @m axes = ["dp"] gather_axis = 2 : tensor<4x4xf32> -> tensor<4x4xf32>
  return
}

// -----

// Axes count from the front; a negative one is rejected by its type.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{attribute 'gather_axis' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = zdist.all_gather %x on @m axes = ["dp"] gather_axis = -1 : tensor<4x4xf32> -> tensor<4x8xf32>
  return
}

// -----

// Gathering multiplies the gathered dimension by the group size (2 * 4).
zdist.mesh @m ["dp" = 4]
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{result type 'tensor<4x4xf32>' does not match 'tensor<8x4xf32>', the operand gathered from 4 devices along dimension 0}}
  %0 = zdist.all_gather %x on @m axes = ["dp"] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  return
}

// -----

// The scattered dimension exists in the operand.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{scatter_axis 3 is out of range for rank 2}}
  %0 = zdist.reduce_scatter %x on @m axes = ["dp"] scatter_axis = 3 reduction = sum : tensor<4x4xf32> -> tensor<4x4xf32>
  return
}

// -----

// Every device gets an equal part: 6 rows do not split over 4 devices.
zdist.mesh @m ["dp" = 4]
func.func @f(%x: tensor<6x4xf32>) {
  // expected-error @+1 {{scatter dimension 0 of size 6 does not split evenly over 4 devices}}
  %0 = zdist.reduce_scatter %x on @m axes = ["dp"] scatter_axis = 0 reduction = avg : tensor<6x4xf32> -> tensor<1x4xf32>
  return
}

// -----

// Scattering divides the scattered dimension by the group size (8 / 2 / 2).
zdist.mesh @m ["pp" = 2, "dp" = 2]
func.func @f(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{result type 'tensor<4x4xf32>' does not match 'tensor<2x4xf32>', the operand scattered over 4 devices along dimension 0}}
  %0 = zdist.reduce_scatter %x on @m axes = ["pp", "dp"] scatter_axis = 0 reduction = sum : tensor<8x4xf32> -> tensor<4x4xf32>
  return
}

// -----

// Collectives move values; they do not convert them.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %0 = zdist.all_gather %x on @m axes = ["dp"] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xbf16>
  return
}

// -----

// An all-reduce keeps its operand's type.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "zdist.all_reduce"(%x) {mesh = @m, mesh_axes = ["dp"], reduction = 0 : i32} : (tensor<2x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// Unknown reduction kinds are rejected by the parser.
zdist.mesh @m ["dp" = 2]
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'reduction' [sum, avg, max, min]}}
  %0 = zdist.all_reduce %x on @m axes = ["dp"] reduction = prod : tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// zdist.release
//===----------------------------------------------------------------------===//

// Only tensors have a life to end; the custom form cannot even spell this.
func.func @f(%x: f32) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of any type values, but got 'f32'}}
  "zdist.release"(%x) : (f32) -> ()
  return
}

// -----

//===----------------------------------------------------------------------===//
// Pipeline ops
//===----------------------------------------------------------------------===//

// A transfer crosses stages.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'zdist.transfer' op moves a value from stage 1 to itself; a transfer crosses stages}}
  %0 = zdist.transfer %x from 1 to 1 : tensor<4xf32>
  return
}

// -----

// Only the known schedules.
// expected-error @+1 {{'zdist.pipeline' op schedule must be "gpipe", "1f1b", "interleaved" or "zb-h1", got "pipedream"}}
zdist.pipeline "pipedream" micro_batches = 2 buffers = [1] bubble_fraction = 0.0 stages = ["F0 F1"]

// -----

// Interleaved: a buffer count per chunk, at least 2 chunks a stage.
// expected-error @+1 {{'zdist.pipeline' op has 2 stages but buffer counts for 3 chunks (interleaved: a multiple of the stages, at least 2 each)}}
zdist.pipeline "interleaved" micro_batches = 2 buffers = [1, 1, 1] bubble_fraction = 0.0 stages = ["F0@0 F0@2", "F0@1"]

// -----

// One buffer count per stage.
// expected-error @+1 {{'zdist.pipeline' op has 2 stages but buffer counts for 1}}
zdist.pipeline "gpipe" micro_batches = 1 buffers = [1] bubble_fraction = 0.0 stages = ["F0 sa0", "ra0 F0"]

// -----

// An idle share is a fraction below 1.
// expected-error @+1 {{'zdist.pipeline' op bubble_fraction must be in [0, 1), got 1.5}}
zdist.pipeline "gpipe" micro_batches = 1 buffers = [1] bubble_fraction = 1.5 stages = ["F0"]
