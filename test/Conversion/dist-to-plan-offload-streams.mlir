// RUN: zcc-opt %s --zcc-dist-to-plan | FileCheck %s
//
// overlap_comm with CPU offload: the device-to-host copy of a gradient runs
// on stream 2, the host-to-device fetch and the collectives on stream 1, so
// the two copy directions overlap. The offload reads the gradient the
// reduce-scatter on stream 1 wrote: stream 2 waits for the compute before
// it (e4, recorded on stream 0) and for the end of that stream-1 run (e3,
// recorded on stream 1 right then); compute after it (the reduce_sum) waits
// for neither.
// CHECK-LABEL: zplan.program @micro_step {
// CHECK: zplan.kernel "fetch" ins(@host::@{{b[0-9]+}}) outs(@device::@{{b[0-9]+}}) stream 1
// CHECK-NEXT: zplan.kernel "all_gather" {{.*}} stream 1
// CHECK: zplan.record @[[TOCOMM:e[0-9]+]] stream 0
// CHECK-NEXT: zplan.wait @[[TOCOMM]] stream 1
// CHECK-NEXT: zplan.kernel "reduce_scatter" ins(@device::@{{b[0-9]+}}) outs(@device::@[[G:b[0-9]+]]) stream 1
// CHECK-NEXT: zplan.record @[[TOCOPY:e[0-9]+]] stream 0
// CHECK-NEXT: zplan.wait @[[TOCOPY]] stream 2
// CHECK-NEXT: zplan.record @[[SCATTERED:e[0-9]+]] stream 1
// CHECK-NEXT: zplan.wait @[[SCATTERED]] stream 2
// CHECK-NEXT: zplan.kernel "offload" ins(@device::@[[G]]) outs(@host::@{{b[0-9]+}}) stream 2
// CHECK-NEXT: zplan.record @{{e[0-9]+}} stream 2
// CHECK-NEXT: zplan.kernel "reduce_sum" {{.*}} stream 0 params {{.*}}
// CHECK-NEXT: }
module attributes {zcc.config = {gradient_accumulation_steps = 1 : i64, zero_optimization = {stage = 3 : i64, overlap_comm = true}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%x: tensor<2x4xf32> {zgraph.name = "x"}) -> (tensor<2x3xf32> {zgraph.name = "y"}) {
    %w = zgraph.param "w" trainable {zdist.memory = "host", zdist.shards = 2 : i64} : tensor<2x3xf32>
    %wd = zdist.fetch %w : tensor<2x3xf32>
    %wg = zdist.all_gather %wd on @mesh axes = ["dp"] gather_axis = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
    %y = zgraph.matmul %x, %wg : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %t = zgraph.transpose %x perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %d = zgraph.matmul %t, %y : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %g = zgraph.state "w" kind = "grad" {zdist.step_local} : tensor<2x3xf32>
    %r = zdist.reduce_scatter %d on @mesh axes = ["dp"] scatter_axis = 0 reduction = avg : tensor<4x3xf32> -> tensor<2x3xf32>
    zgraph.assign %r into %g : tensor<2x3xf32> into tensor<2x3xf32>
    %h = zgraph.state "w" kind = "host_grad" {zdist.memory = "host", zdist.step_local} : tensor<2x3xf32>
    %o = zdist.offload %g : tensor<2x3xf32>
    zgraph.assign %o into %h {zdist.memory = "host"} : tensor<2x3xf32> into tensor<2x3xf32>
    %s = zgraph.reduce_sum %y axes = [0] keepdims = false : tensor<2x3xf32> -> tensor<3xf32>
    return %y : tensor<2x3xf32>
  }
}
