// RUN: zcc-opt %s --zcc-dist-zero --zcc-dist-offload --zcc-dist-to-plan | FileCheck %s

// The plan of an offloaded ZeRO-3 step has two arenas: host buffers (the
// offloaded shard of "w", the optimizer state, the host master of "b", the
// offloaded gradients and scalars) are planned in the pinned host arena and
// the report's host categories; only "offload" and "fetch" read one arena
// and write the other, and the optimizer's kernels read and write host
// buffers only.
// CHECK: zplan.host_memory = {activations = {{[0-9]+}} : i64, optimizer_state = 84 : i64, parameters = 24 : i64}
// CHECK-SAME: zplan.memory = {activations = {{[0-9]+}} : i64, gradients = 36 : i64, inputs = 32 : i64, outputs = 32 : i64, parameters = 12 : i64
// CHECK: zplan.arena @device size {{[0-9]+}} alignment 256 {
// CHECK: zplan.arena @host in host size {{[0-9]+}} alignment 256 {
// CHECK-NEXT: zplan.buffer @[[W:b[0-9]+]] offset {{[0-9]+}} size 24 {kind = "parameter", {{.*}}name = "w"
// CHECK-LABEL: zplan.program @micro_step {
// CHECK-NEXT: zplan.kernel "fetch" ins(@host::@[[W]]) outs(@device::@[[WD:b[0-9]+]]) stream 0
// CHECK-NEXT: zplan.kernel "all_gather" ins(@device::@[[WD]])
// CHECK-LABEL: zplan.program @init {
// CHECK-NEXT: zplan.kernel "offload" ins(@device::@[[B:b[0-9]+]]) outs(@host::@[[BH:b[0-9]+]]) stream 0
// CHECK-NEXT: zplan.kernel "cast" ins(@host::@[[BH]]) outs(@host::@[[MASTER:b[0-9]+]]) stream 0
// CHECK-LABEL: zplan.program @optimizer_step {
// CHECK-NEXT: zplan.kernel "offload" ins(@device::@[[GW:b[0-9]+]]) outs(@host::@[[GWH:b[0-9]+]]) stream 0
// CHECK-NEXT: zplan.kernel "offload" ins(@device::@[[S:b[0-9]+]]) outs(@host::@[[SH:b[0-9]+]]) stream 0
// CHECK-NEXT: zplan.kernel "adamw" ins(@host::@[[W]], @host::@[[GWH]], @host::@{{b[0-9]+}}, @host::@{{b[0-9]+}}, @host::@[[SH]]) outs(@host::@[[W]], @host::@{{b[0-9]+}}, @host::@{{b[0-9]+}}) stream 0 params {adam_w_mode = true, bias_correction = true}
// CHECK-NEXT: zplan.kernel "fill" ins() outs(@device::@[[GW]])
// CHECK: zplan.kernel "adamw" ins(@host::@[[MASTER]],
// CHECK-NEXT: zplan.kernel "fetch" ins(@host::@[[MASTER]]) outs(@device::@[[BD:b[0-9]+]]) stream 0
// CHECK-NEXT: zplan.kernel "cast" ins(@device::@[[BD]]) outs(@device::@[[B]]) stream 0
module attributes {zcc.config = {zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 4 : i64, offload_optimizer = {device = "cpu"}, offload_param = {device = "cpu"}}}} {
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
