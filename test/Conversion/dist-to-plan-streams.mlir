// RUN: zcc-opt %s --zcc-dist-zero --zcc-dist-offload --zcc-dist-to-plan | FileCheck %s

// overlap_comm: communication runs on stream 1, compute on stream 0, and
// events order them. Stream 1 waits for the compute before it (record on 0,
// wait on 1); the fetch of the offloaded shard and its all-gather run there;
// the matmul that reads the gathered weight waits for them. The gradient's
// reduce-scatter and the accumulation of its result run on stream 1 after
// the backward matmul, and nothing on stream 0 waits for them: the program
// ends (the executor waits for every stream). In @grad_norm the average of
// the whole gradient "b" and its write-back (an assign, a cast) run on
// stream 1; the sum of squares of "b" waits for them and overlaps the
// all-reduce of the shard sums, and the add waits for that.
// CHECK-LABEL: zplan.program @micro_step {
// CHECK-NEXT: zplan.event @e0
// CHECK-NEXT: zplan.event @e1
// CHECK-NEXT: zplan.event @e2
// CHECK-NEXT: zplan.event @e3
// CHECK-NEXT: zplan.record @e0 stream 0
// CHECK-NEXT: zplan.wait @e0 stream 1
// CHECK-NEXT: zplan.kernel "fetch" ins(@host::@{{b[0-9]+}}) outs(@device::@[[SHARD:b[0-9]+]]) stream 1
// CHECK-NEXT: zplan.kernel "all_gather" ins(@device::@[[SHARD]]) outs(@device::@[[W:b[0-9]+]]) stream 1
// CHECK-NEXT: zplan.record @e1 stream 1
// CHECK-NEXT: zplan.wait @e1 stream 0
// CHECK-NEXT: zplan.kernel "matmul" ins(@device::@{{b[0-9]+}}, @device::@[[W]]) outs({{.*}}) stream 0
// CHECK-NEXT: zplan.kernel "add" {{.*}} stream 0
// CHECK-NEXT: zplan.kernel "transpose" {{.*}} stream 0
// CHECK-NEXT: zplan.kernel "matmul" {{.*}} outs(@device::@[[DW:b[0-9]+]]) stream 0
// CHECK-NEXT: zplan.record @e2 stream 0
// CHECK-NEXT: zplan.wait @e2 stream 1
// CHECK-NEXT: zplan.kernel "reduce_scatter" ins(@device::@[[DW]]) outs(@device::@[[DWS:b[0-9]+]]) stream 1
// CHECK-NEXT: zplan.kernel "accumulate" ins(@device::@[[DWS]]) outs({{.*}}) stream 1
// CHECK-NEXT: zplan.record @e3 stream 1
// CHECK-NEXT: }
// CHECK-LABEL: zplan.program @grad_norm {
// CHECK: zplan.kernel "all_reduce" ins(@device::@[[B:b[0-9]+]]) outs(@device::@[[BAVG:b[0-9]+]]) stream 1 params {axes = "dp", reduction = "avg"}
// CHECK-NEXT: zplan.kernel "cast" ins(@device::@[[BAVG]]) outs(@device::@[[B]]) stream 1
// CHECK-NEXT: zplan.record @e1 stream 1
// CHECK: zplan.kernel "all_reduce" ins(@device::@[[SQ:b[0-9]+]]) outs(@device::@[[SUM:b[0-9]+]]) stream 1 params {axes = "dp", reduction = "sum"}
// CHECK-NEXT: zplan.record @e3 stream 1
// CHECK-NEXT: zplan.wait @e1 stream 0
// CHECK-NEXT: zplan.kernel "sum_squares" {{.*}} stream 0
// CHECK-NEXT: zplan.wait @e3 stream 0
// CHECK-NEXT: zplan.kernel "add" ins(@device::@[[SUM]], {{.*}} stream 0
module attributes {zcc.config = {zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 4 : i64, offload_optimizer = {device = "cpu"}, offload_param = {device = "cpu"}, overlap_comm = true}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%x: tensor<2x4xf32> {zgraph.name = "x"}) -> (tensor<2x3xf32> {zgraph.name = "y"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %b = zgraph.param "b" trainable : tensor<3xf32>
    %y = zgraph.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %z = zgraph.add %y, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %t = zgraph.transpose %x perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %d = zgraph.matmul %t, %z : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    zgraph.accumulate %d into %gw : tensor<4x3xf32> into tensor<4x3xf32>
    return %z : tensor<2x3xf32>
  }
  func.func @grad_norm() -> tensor<f64> {
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<3xf32>
    %s = zgraph.sum_squares %gw, %gb : tensor<4x3xf32>, tensor<3xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %mw = zgraph.state "w" kind = "exp_avg" : tensor<4x3xf32>
    %vw = zgraph.state "w" kind = "exp_avg_sq" : tensor<4x3xf32>
    zgraph.adamw %w, %gw, %mw, %vw, %scalars {adam_w_mode = true} : tensor<4x3xf32>, tensor<8xf64>
    zgraph.fill %gw value = 0.0 : tensor<4x3xf32>
    %b = zgraph.param "b" trainable : tensor<3xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<3xf32>
    %mb = zgraph.state "b" kind = "exp_avg" : tensor<3xf32>
    %vb = zgraph.state "b" kind = "exp_avg_sq" : tensor<3xf32>
    zgraph.adamw %b, %gb, %mb, %vb, %scalars {adam_w_mode = true} : tensor<3xf32>, tensor<8xf64>
    zgraph.fill %gb value = 0.0 : tensor<3xf32>
    return
  }
}
