// RUN: zcc-opt %s --split-input-file --zcc-dist-zero --zcc-dist-offload --zcc-dist-nvme-swap --verify-diagnostics | FileCheck %s

// ZeRO-3 on two ranks with offload_optimizer on NVMe and offload_param in
// host memory. The state the host updates moves to the swap file: "w"'s
// moments (its host shard is its own master and stays in host memory),
// and "b"'s master and moments. In @init the master is written straight
// from the offloaded parameter. In @optimizer_step each state is swapped
// in before its first use and, being written, swapped out after its last:
// the moments right after the adamw, the master after the fetch that
// copies it back into the device parameter.
// CHECK-LABEL: func.func @init
// CHECK-NEXT: %[[P:.*]] = zgraph.param "b" trainable : tensor<3xf32>
// CHECK-NEXT: %[[M:.*]] = zgraph.state "b" kind = "master" {zdist.memory = "nvme"} : tensor<3xf32>
// CHECK-NEXT: %[[PH:.*]] = zdist.offload %[[P]] : tensor<3xf32>
// CHECK-NEXT: zdist.swap_out %[[PH]] into %[[M]] : tensor<3xf32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: %[[W:.*]] = zgraph.param "w" trainable {zdist.memory = "host", zdist.shards = 2 : i64} : tensor<2x3xf32>
// CHECK-NEXT: %[[GW:.*]] = zgraph.state "w" kind = "grad" : tensor<2x3xf32>
// CHECK-NEXT: %[[MW:.*]] = zgraph.state "w" kind = "exp_avg" {zdist.memory = "nvme"}
// CHECK-NEXT: %[[VW:.*]] = zgraph.state "w" kind = "exp_avg_sq" {zdist.memory = "nvme"}
// CHECK-NEXT: %[[GWH:.*]] = zdist.offload %[[GW]] : tensor<2x3xf32>
// CHECK-NEXT: %[[S1:.*]] = zdist.offload %arg0 : tensor<8xf64>
// CHECK-NEXT: %[[MWH:.*]] = zdist.swap_in %[[MW]] {zdist.memory = "host"} : tensor<2x3xf32>
// CHECK-NEXT: %[[VWH:.*]] = zdist.swap_in %[[VW]] {zdist.memory = "host"} : tensor<2x3xf32>
// CHECK-NEXT: zgraph.adamw %[[W]], %[[GWH]], %[[MWH]], %[[VWH]], %[[S1]] {zdist.memory = "host"}
// CHECK-NEXT: zdist.swap_out %[[MWH]] into %[[MW]] : tensor<2x3xf32>
// CHECK-NEXT: zdist.swap_out %[[VWH]] into %[[VW]] : tensor<2x3xf32>
// CHECK-NEXT: zgraph.fill %[[GW]] value = 0.000000e+00 : tensor<2x3xf32>
// CHECK-NEXT: %[[B:.*]] = zgraph.param "b" trainable : tensor<3xf32>
// CHECK-NEXT: %[[GB:.*]] = zgraph.state "b" kind = "grad" : tensor<3xf32>
// CHECK-NEXT: %[[MB:.*]] = zgraph.state "b" kind = "exp_avg" {zdist.memory = "nvme"}
// CHECK-NEXT: %[[VB:.*]] = zgraph.state "b" kind = "exp_avg_sq" {zdist.memory = "nvme"}
// CHECK-NEXT: %[[MASTER:.*]] = zgraph.state "b" kind = "master" {zdist.memory = "nvme"}
// CHECK-NEXT: %[[GBH:.*]] = zdist.offload %[[GB]] : tensor<3xf32>
// CHECK-NEXT: %[[MASTERH:.*]] = zdist.swap_in %[[MASTER]]
// CHECK-NEXT: %[[MBH:.*]] = zdist.swap_in %[[MB]]
// CHECK-NEXT: %[[VBH:.*]] = zdist.swap_in %[[VB]]
// CHECK-NEXT: zgraph.adamw %[[MASTERH]], %[[GBH]], %[[MBH]], %[[VBH]], %[[S1]] {zdist.memory = "host"}
// CHECK-NEXT: zdist.swap_out %[[MBH]] into %[[MB]]
// CHECK-NEXT: zdist.swap_out %[[VBH]] into %[[VB]]
// CHECK-NEXT: %[[BD:.*]] = zdist.fetch %[[MASTERH]] : tensor<3xf32>
// CHECK-NEXT: zdist.swap_out %[[MASTERH]] into %[[MASTER]]
// CHECK-NEXT: zgraph.assign %[[BD]] into %[[B]] : tensor<3xf32> into tensor<3xf32>
// CHECK-NEXT: zgraph.fill %[[GB]] value = 0.000000e+00 : tensor<3xf32>
module attributes {zcc.config = {zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 4 : i64, offload_optimizer = {device = "nvme", nvme_path = "/tmp"}, offload_param = {device = "cpu"}}}} {
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

// -----

// Without "nvme" the pass changes nothing.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NOT: zdist.swap
// CHECK: zgraph.adamw
// CHECK-NOT: zdist.swap
// CHECK: return
module attributes {zcc.config = {zero_optimization = {stage = 1 : i64, offload_optimizer = {device = "cpu"}}}} {
  zdist.mesh @mesh ["dp" = 1]
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %mw = zgraph.state "w" kind = "exp_avg" : tensor<4x3xf32>
    %vw = zgraph.state "w" kind = "exp_avg_sq" : tensor<4x3xf32>
    zgraph.adamw %w, %gw, %mw, %vw, %scalars {adam_w_mode = true} : tensor<4x3xf32>, tensor<8xf64>
    return
  }
}
