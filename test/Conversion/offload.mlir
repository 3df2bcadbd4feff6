// RUN: zcc-opt %s --split-input-file --zcc-dist-zero --zcc-dist-offload --verify-diagnostics | FileCheck %s

// ZeRO-3 on two ranks with offload_optimizer and offload_param: the
// partitioned shard of "w" lives in host memory and is fetched right before
// its all-gather; "b" (at the persistence threshold) stays whole on the
// device. In @optimizer_step the host runs every update: the gradient shard
// and the scalars are offloaded first (the scalars, which nothing writes,
// once for both updates); "w"'s shard is updated in place, "b"
// through a host master copy (set by a new @init) that is fetched back into
// the device parameter after the update.
// CHECK-LABEL: func.func @micro_step
// CHECK-NEXT: %[[W:.*]] = zgraph.param "w" trainable {zdist.memory = "host", zdist.shards = 2 : i64} : tensor<2x3xf32>
// CHECK-NEXT: %[[B:.*]] = zgraph.param "b" trainable : tensor<3xf32>
// CHECK-NEXT: %[[WD:.*]] = zdist.fetch %[[W]] : tensor<2x3xf32>
// CHECK-NEXT: %[[WG:.*]] = zdist.all_gather %[[WD]] on @mesh axes = ["dp"] gather_axis = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
// CHECK-NEXT: zgraph.matmul %{{.*}}, %[[WG]]
// CHECK-NOT: zdist.memory
// CHECK-LABEL: func.func @grad_norm
// CHECK-NOT: zdist.offload
// CHECK-NOT: zdist.fetch
// CHECK-LABEL: func.func @init
// CHECK-NEXT: %[[P:.*]] = zgraph.param "b" trainable : tensor<3xf32>
// CHECK-NEXT: %[[M:.*]] = zgraph.state "b" kind = "master" {zdist.memory = "host"} : tensor<3xf32>
// CHECK-NEXT: %[[PH:.*]] = zdist.offload %[[P]] : tensor<3xf32>
// CHECK-NEXT: zgraph.assign %[[PH]] into %[[M]] {zdist.memory = "host"}
// CHECK-NEXT: return
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: %[[W:.*]] = zgraph.param "w" trainable {zdist.memory = "host", zdist.shards = 2 : i64} : tensor<2x3xf32>
// CHECK-NEXT: %[[GW:.*]] = zgraph.state "w" kind = "grad" : tensor<2x3xf32>
// CHECK-NEXT: %[[MW:.*]] = zgraph.state "w" kind = "exp_avg" {zdist.memory = "host"}
// CHECK-NEXT: %[[VW:.*]] = zgraph.state "w" kind = "exp_avg_sq" {zdist.memory = "host"}
// CHECK-NEXT: %[[GWH:.*]] = zdist.offload %[[GW]] : tensor<2x3xf32>
// CHECK-NEXT: %[[S1:.*]] = zdist.offload %arg0 : tensor<8xf64>
// CHECK-NEXT: zgraph.adamw %[[W]], %[[GWH]], %[[MW]], %[[VW]], %[[S1]] {zdist.memory = "host"}
// CHECK-NEXT: zgraph.fill %[[GW]] value = 0.000000e+00 : tensor<2x3xf32>
// CHECK-NEXT: %[[B:.*]] = zgraph.param "b" trainable : tensor<3xf32>
// CHECK-NEXT: %[[GB:.*]] = zgraph.state "b" kind = "grad" : tensor<3xf32>
// CHECK-NEXT: %[[MB:.*]] = zgraph.state "b" kind = "exp_avg" {zdist.memory = "host"}
// CHECK-NEXT: %[[VB:.*]] = zgraph.state "b" kind = "exp_avg_sq" {zdist.memory = "host"}
// CHECK-NEXT: %[[MASTER:.*]] = zgraph.state "b" kind = "master" {zdist.memory = "host"}
// CHECK-NEXT: %[[GBH:.*]] = zdist.offload %[[GB]] : tensor<3xf32>
// CHECK-NEXT: zgraph.adamw %[[MASTER]], %[[GBH]], %[[MB]], %[[VB]], %[[S1]] {zdist.memory = "host"}
// CHECK-NEXT: %[[BD:.*]] = zdist.fetch %[[MASTER]] : tensor<3xf32>
// CHECK-NEXT: zgraph.assign %[[BD]] into %[[B]] : tensor<3xf32> into tensor<3xf32>
// CHECK-NEXT: zgraph.fill %[[GB]] value = 0.000000e+00 : tensor<3xf32>
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

// -----

// ZeRO-2 on two ranks with offload_optimizer: the master rows already exist
// (stage 2) and move to the host with Adam's moments; the host flattens the
// updated rows of the bucket, and the flat buffer is fetched once for the
// all-gather back into the whole parameters.
// CHECK-LABEL: func.func @init
// CHECK: zgraph.state "a" kind = "master" {zdist.memory = "host"}
// CHECK-NEXT: zdist.offload
// CHECK-NEXT: zgraph.assign {{.*}} {zdist.memory = "host"}
// CHECK-LABEL: func.func @optimizer_step
// CHECK: %[[MA:.*]] = zgraph.state "a" kind = "master" {zdist.memory = "host"} : tensor<1x2xf32>
// CHECK: zgraph.adamw %[[MA]], %{{.*}} {zdist.memory = "host"}
// CHECK: %[[MB:.*]] = zgraph.state "b" kind = "master" {zdist.memory = "host"} : tensor<2xf32>
// CHECK: zgraph.adamw %[[MB]], %{{.*}} {zdist.memory = "host"}
// CHECK-NEXT: %[[FA:.*]] = zgraph.reshape %[[MA]] {zdist.memory = "host"} : tensor<1x2xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[CAT:.*]] = zgraph.concat %[[FA]], %[[MB]] axis = 0 {zdist.memory = "host"}
// CHECK-NEXT: %[[CATD:.*]] = zdist.fetch %[[CAT]] : tensor<4xf32>
// CHECK-NEXT: zdist.all_gather %[[CATD]] on @mesh axes = ["dp"] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
module attributes {zcc.config = {zero_optimization = {stage = 2 : i64, offload_optimizer = {device = "cpu"}}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @grad_norm() -> tensor<f64> {
    %ga = zgraph.state "a" kind = "grad" : tensor<2x2xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<4xf32>
    %s = zgraph.sum_squares %ga, %gb : tensor<2x2xf32>, tensor<4xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @micro_step() {
    return
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %a = zgraph.param "a" trainable : tensor<2x2xf32>
    %ga = zgraph.state "a" kind = "grad" : tensor<2x2xf32>
    %ma = zgraph.state "a" kind = "exp_avg" : tensor<2x2xf32>
    %va = zgraph.state "a" kind = "exp_avg_sq" : tensor<2x2xf32>
    zgraph.adamw %a, %ga, %ma, %va, %scalars {adam_w_mode = true} : tensor<2x2xf32>, tensor<8xf64>
    %b = zgraph.param "b" trainable : tensor<4xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<4xf32>
    %mb = zgraph.state "b" kind = "exp_avg" : tensor<4xf32>
    %vb = zgraph.state "b" kind = "exp_avg_sq" : tensor<4xf32>
    zgraph.adamw %b, %gb, %mb, %vb, %scalars {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    return
  }
}

// -----

// bf16 compute with offload_param on one rank: the micro-step's casts of
// "w" become reads of its host 16-bit copy, fetched right before the
// product (no host kernel in the micro-step), which @init sets and
// @optimizer_step refreshes after the host update. "v" is also read in f32,
// so it keeps its cast.
// CHECK-LABEL: func.func @micro_step
// CHECK-NEXT: %[[C:.*]] = zgraph.state "w" kind = "copy" {zdist.memory = "host"} : tensor<4x3xbf16>
// CHECK-NEXT: %[[CD:.*]] = zdist.fetch %[[C]] : tensor<4x3xbf16>
// CHECK-NEXT: zgraph.matmul %arg0, %[[CD]]
// CHECK-NEXT: %[[V:.*]] = zgraph.param "v" trainable {zdist.memory = "host"} : tensor<4x3xf32>
// CHECK-NEXT: zgraph.cast %[[V]] {zdist.memory = "host"}
// CHECK-NOT: kind = "copy"
// CHECK-LABEL: func.func @init
// CHECK-NEXT: %[[W:.*]] = zgraph.param "w" trainable {zdist.memory = "host"} : tensor<4x3xf32>
// CHECK-NEXT: %[[IC:.*]] = zgraph.state "w" kind = "copy" {zdist.memory = "host"} : tensor<4x3xbf16>
// CHECK-NEXT: %[[IH:.*]] = zgraph.cast %[[W]] {zdist.memory = "host"} : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK-NEXT: zgraph.assign %[[IH]] into %[[IC]] {zdist.memory = "host"}
// CHECK-NEXT: return
// CHECK-LABEL: func.func @optimizer_step
// CHECK: zgraph.adamw %[[UW:[^,]*]],
// CHECK-NEXT: %[[UC:.*]] = zgraph.state "w" kind = "copy" {zdist.memory = "host"} : tensor<4x3xbf16>
// CHECK-NEXT: %[[UH:.*]] = zgraph.cast %[[UW]] {zdist.memory = "host"} : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK-NEXT: zgraph.assign %[[UH]] into %[[UC]] {zdist.memory = "host"}
// CHECK-NOT: kind = "copy"
// CHECK: return
module attributes {zcc.config = {bf16 = {enabled = true}, zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 4 : i64, offload_optimizer = {device = "cpu"}, offload_param = {device = "cpu"}}}} {
  zdist.mesh @mesh ["dp" = 1]
  func.func @micro_step(%x: tensor<2x4xbf16> {zgraph.name = "x"}, %x32: tensor<2x4xf32> {zgraph.name = "x32"}) -> (tensor<2x3xf32> {zgraph.name = "y"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %wc = zgraph.cast %w : tensor<4x3xf32> -> tensor<4x3xbf16>
    %y = zgraph.matmul %x, %wc : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xbf16>
    %v = zgraph.param "v" trainable : tensor<4x3xf32>
    %vc = zgraph.cast %v : tensor<4x3xf32> -> tensor<4x3xbf16>
    %yv = zgraph.matmul %x, %vc : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xbf16>
    %y32 = zgraph.cast %yv : tensor<2x3xbf16> -> tensor<2x3xf32>
    %s = zgraph.reduce_sum %v axes = [0] keepdims = false : tensor<4x3xf32> -> tensor<3xf32>
    %z = zgraph.add %y32, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %t = zgraph.transpose %x32 perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %d = zgraph.matmul %t, %z : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    zgraph.accumulate %d into %gw : tensor<4x3xf32> into tensor<4x3xf32>
    %gv = zgraph.state "v" kind = "grad" : tensor<4x3xf32>
    zgraph.accumulate %d into %gv : tensor<4x3xf32> into tensor<4x3xf32>
    return %z : tensor<2x3xf32>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %mw = zgraph.state "w" kind = "exp_avg" : tensor<4x3xf32>
    %vw = zgraph.state "w" kind = "exp_avg_sq" : tensor<4x3xf32>
    zgraph.adamw %w, %gw, %mw, %vw, %scalars {adam_w_mode = true} : tensor<4x3xf32>, tensor<8xf64>
    %v = zgraph.param "v" trainable : tensor<4x3xf32>
    %gv = zgraph.state "v" kind = "grad" : tensor<4x3xf32>
    %mv = zgraph.state "v" kind = "exp_avg" : tensor<4x3xf32>
    %vv = zgraph.state "v" kind = "exp_avg_sq" : tensor<4x3xf32>
    zgraph.adamw %v, %gv, %mv, %vv, %scalars {adam_w_mode = true} : tensor<4x3xf32>, tensor<8xf64>
    return
  }
}

// -----

// offload_param alone: the host would own the shards but not their update.
// expected-error @+1 {{zero_optimization.offload_param needs offload_optimizer.device "cpu" (or "nvme") too: the host updates the offloaded shards in place}}
module attributes {zcc.config = {zero_optimization = {stage = 3 : i64, offload_param = {device = "cpu"}}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @grad_norm() -> tensor<f64> {
    %ga = zgraph.state "a" kind = "grad" : tensor<2xf32>
    %s = zgraph.sum_squares %ga : tensor<2xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @micro_step() {
    return
  }
  func.func @optimizer_step() {
    return
  }
}
