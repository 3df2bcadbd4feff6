// RUN: zcc-opt %s --split-input-file --zcc-dist-zero --zcc-dist-offload --zcc-dist-compute-copies | FileCheck %s

// bf16 compute on one rank (ZeRO-0): the micro-step's two casts of "w"
// (the forward's and the backward's) become reads of its device 16-bit
// copy, which a new @init sets and @optimizer_step refreshes right after
// the update. "v" is also read in f32, so it keeps its cast; the frozen "e"
// gets a copy that only @init sets.
// CHECK-LABEL: func.func @micro_step
// CHECK-NEXT: %[[C:.*]] = zgraph.state "w" kind = "copy" : tensor<4x3xbf16>
// CHECK-NEXT: zgraph.matmul %arg0, %[[C]]
// CHECK-NEXT: %[[V:.*]] = zgraph.param "v" trainable : tensor<4x3xf32>
// CHECK-NEXT: zgraph.cast %[[V]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK: %[[E:.*]] = zgraph.state "e" kind = "copy" : tensor<3xbf16>
// CHECK-NEXT: zgraph.add %{{.*}}, %[[E]]
// CHECK: %[[C2:.*]] = zgraph.state "w" kind = "copy" : tensor<4x3xbf16>
// CHECK-NEXT: zgraph.transpose %[[C2]]
// CHECK-NOT: zgraph.param "w"
// CHECK-LABEL: func.func @init
// CHECK-NEXT: %[[IW:.*]] = zgraph.param "w" trainable : tensor<4x3xf32>
// CHECK-NEXT: %[[IC:.*]] = zgraph.state "w" kind = "copy" : tensor<4x3xbf16>
// CHECK-NEXT: %[[IH:.*]] = zgraph.cast %[[IW]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK-NEXT: zgraph.assign %[[IH]] into %[[IC]]
// CHECK-NEXT: %[[IE:.*]] = zgraph.param "e" : tensor<3xf32>
// CHECK-NEXT: %[[ICE:.*]] = zgraph.state "e" kind = "copy" : tensor<3xbf16>
// CHECK-NEXT: %[[IHE:.*]] = zgraph.cast %[[IE]]
// CHECK-NEXT: zgraph.assign %[[IHE]] into %[[ICE]]
// CHECK-NEXT: return
// CHECK-LABEL: func.func @optimizer_step
// CHECK: zgraph.adamw %[[UW:[^,]*]],
// CHECK-NEXT: %[[UC:.*]] = zgraph.state "w" kind = "copy" : tensor<4x3xbf16>
// CHECK-NEXT: %[[UH:.*]] = zgraph.cast %[[UW]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK-NEXT: zgraph.assign %[[UH]] into %[[UC]]
// CHECK-NEXT: zgraph.param "v"
// CHECK-NOT: kind = "copy"
// CHECK: return
module attributes {zcc.config = {bf16 = {enabled = true}, zero_optimization = {stage = 0 : i64}}} {
  zdist.mesh @mesh ["dp" = 1]
  func.func @micro_step(%x: tensor<2x4xbf16> {zgraph.name = "x"}) -> (tensor<2x3xf32> {zgraph.name = "y"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %wc = zgraph.cast %w : tensor<4x3xf32> -> tensor<4x3xbf16>
    %y = zgraph.matmul %x, %wc : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xbf16>
    %v = zgraph.param "v" trainable : tensor<4x3xf32>
    %vc = zgraph.cast %v : tensor<4x3xf32> -> tensor<4x3xbf16>
    %yv = zgraph.matmul %x, %vc : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xbf16>
    %e = zgraph.param "e" : tensor<3xf32>
    %ec = zgraph.cast %e : tensor<3xf32> -> tensor<3xbf16>
    %ye = zgraph.add %yv, %ec : (tensor<2x3xbf16>, tensor<3xbf16>) -> tensor<2x3xbf16>
    %y32 = zgraph.cast %ye : tensor<2x3xbf16> -> tensor<2x3xf32>
    %s = zgraph.reduce_sum %v axes = [0] keepdims = false : tensor<4x3xf32> -> tensor<3xf32>
    %z = zgraph.add %y32, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %wb = zgraph.cast %w : tensor<4x3xf32> -> tensor<4x3xbf16>
    %wt = zgraph.transpose %wb perm = [1, 0] : tensor<4x3xbf16> -> tensor<3x4xbf16>
    %dx = zgraph.matmul %y, %wt : (tensor<2x3xbf16>, tensor<3x4xbf16>) -> tensor<2x4xbf16>
    %dxt = zgraph.transpose %dx perm = [1, 0] : tensor<2x4xbf16> -> tensor<4x2xbf16>
    %d = zgraph.matmul %dxt, %y : (tensor<4x2xbf16>, tensor<2x3xbf16>) -> tensor<4x3xbf16>
    %d32 = zgraph.cast %d : tensor<4x3xbf16> -> tensor<4x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    zgraph.accumulate %d32 into %gw : tensor<4x3xf32> into tensor<4x3xf32>
    %gv = zgraph.state "v" kind = "grad" : tensor<4x3xf32>
    zgraph.accumulate %d32 into %gv : tensor<4x3xf32> into tensor<4x3xf32>
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

// ZeRO-3 on two ranks: the partitioned "w" keeps its cast (each gather
// casts the rank's own shard: no rank holds a 16-bit copy of its shards);
// "b" (at the persistence threshold) is whole on every rank and gets a
// copy, refreshed after its update.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[W:.*]] = zgraph.param "w" trainable {{{.*}}zdist.shards = 2 : i64} : tensor<2x3xf32>
// CHECK-NEXT: %[[WC:.*]] = zgraph.cast %[[W]] : tensor<2x3xf32> -> tensor<2x3xbf16>
// CHECK-NEXT: zdist.all_gather %[[WC]]
// CHECK: %[[B:.*]] = zgraph.state "b" kind = "copy" : tensor<3xbf16>
// CHECK-NEXT: zgraph.add %{{.*}}, %[[B]]
// CHECK-NOT: kind = "copy"
// CHECK-LABEL: func.func @init
// CHECK: zgraph.state "b" kind = "copy" : tensor<3xbf16>
// CHECK-NOT: kind = "copy"
// CHECK: return
// CHECK-LABEL: func.func @optimizer_step
// CHECK: zgraph.adamw %[[UB:[^,]*]], {{.*}} : tensor<3xf32>
// CHECK-NEXT: %[[UC:.*]] = zgraph.state "b" kind = "copy" : tensor<3xbf16>
// CHECK-NEXT: %[[UH:.*]] = zgraph.cast %[[UB]] : tensor<3xf32> -> tensor<3xbf16>
// CHECK-NEXT: zgraph.assign %[[UH]] into %[[UC]]
// CHECK-NOT: kind = "copy"
// CHECK: return
module attributes {zcc.config = {bf16 = {enabled = true}, zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 3 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%x: tensor<2x4xbf16> {zgraph.name = "x"}) -> (tensor<2x3xbf16> {zgraph.name = "y"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %wc = zgraph.cast %w : tensor<4x3xf32> -> tensor<4x3xbf16>
    %y = zgraph.matmul %x, %wc : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xbf16>
    %b = zgraph.param "b" trainable : tensor<3xf32>
    %bc = zgraph.cast %b : tensor<3xf32> -> tensor<3xbf16>
    %z = zgraph.add %y, %bc : (tensor<2x3xbf16>, tensor<3xbf16>) -> tensor<2x3xbf16>
    %z32 = zgraph.cast %z : tensor<2x3xbf16> -> tensor<2x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %s = zgraph.reduce_sum %z32 axes = [0] keepdims = false : tensor<2x3xf32> -> tensor<3xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<3xf32>
    zgraph.accumulate %s into %gb : tensor<3xf32> into tensor<3xf32>
    return %z : tensor<2x3xbf16>
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
    %b = zgraph.param "b" trainable : tensor<3xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<3xf32>
    %mb = zgraph.state "b" kind = "exp_avg" : tensor<3xf32>
    %vb = zgraph.state "b" kind = "exp_avg_sq" : tensor<3xf32>
    zgraph.adamw %b, %gb, %mb, %vb, %scalars {adam_w_mode = true} : tensor<3xf32>, tensor<8xf64>
    return
  }
}

// -----

// ZeRO-2 on two ranks: each rank updates its rows of "w" (a master shard
// set by @init) and the gathered rows are assigned into the whole
// parameter; the copy is refreshed after that assign, the parameter's
// last write, and @init sets it after the master.
// CHECK-LABEL: func.func @micro_step
// CHECK: zgraph.state "w" kind = "copy" : tensor<4x3xbf16>
// CHECK-LABEL: func.func @init
// CHECK: zgraph.state "w" kind = "master"
// CHECK: %[[IC:.*]] = zgraph.state "w" kind = "copy" : tensor<4x3xbf16>
// CHECK-NEXT: %[[IH:.*]] = zgraph.cast
// CHECK-NEXT: zgraph.assign %[[IH]] into %[[IC]]
// CHECK-NEXT: return
// CHECK-LABEL: func.func @optimizer_step
// CHECK: zdist.all_gather
// CHECK: zgraph.assign %{{.*}} into %[[P:[^ ]*]] : tensor<4x3xf32>
// CHECK-NEXT: %[[UC:.*]] = zgraph.state "w" kind = "copy" : tensor<4x3xbf16>
// CHECK-NEXT: %[[UH:.*]] = zgraph.cast %[[P]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK-NEXT: zgraph.assign %[[UH]] into %[[UC]]
// CHECK-NEXT: return
module attributes {zcc.config = {bf16 = {enabled = true}, zero_optimization = {stage = 2 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%x: tensor<2x4xbf16> {zgraph.name = "x"}, %x32: tensor<2x4xf32> {zgraph.name = "x32"}) -> (tensor<2x3xbf16> {zgraph.name = "y"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %wc = zgraph.cast %w : tensor<4x3xf32> -> tensor<4x3xbf16>
    %y = zgraph.matmul %x, %wc : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xbf16>
    %y32 = zgraph.cast %y : tensor<2x3xbf16> -> tensor<2x3xf32>
    %t = zgraph.transpose %x32 perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %d = zgraph.matmul %t, %y32 : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    zgraph.accumulate %d into %gw : tensor<4x3xf32> into tensor<4x3xf32>
    return %y : tensor<2x3xbf16>
  }
  func.func @grad_norm() -> tensor<f64> {
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %s = zgraph.sum_squares %gw : tensor<4x3xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %mw = zgraph.state "w" kind = "exp_avg" : tensor<4x3xf32>
    %vw = zgraph.state "w" kind = "exp_avg_sq" : tensor<4x3xf32>
    zgraph.adamw %w, %gw, %mw, %vw, %scalars {adam_w_mode = true} : tensor<4x3xf32>, tensor<8xf64>
    return
  }
}

// -----

// A parameter a micro-step writes (here assigns) keeps its casts: a copy
// would miss the write; one read in f32 has no cast to keep. With no copy
// there is no @init.
// CHECK-LABEL: func.func @micro_step
// CHECK: zgraph.cast
// CHECK-NOT: kind = "copy"
// CHECK-NOT: func.func @init
module attributes {zcc.config = {bf16 = {enabled = true}, zero_optimization = {stage = 0 : i64}}} {
  zdist.mesh @mesh ["dp" = 1]
  func.func @micro_step(%x: tensor<3xf32> {zgraph.name = "x"}) -> (tensor<3xbf16> {zgraph.name = "y"}) {
    %w = zgraph.param "w" trainable : tensor<3xf32>
    %wc = zgraph.cast %w : tensor<3xf32> -> tensor<3xbf16>
    zgraph.assign %x into %w : tensor<3xf32> into tensor<3xf32>
    %v = zgraph.param "v" trainable : tensor<3xf32>
    %s = zgraph.add %x, %v : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return %wc : tensor<3xbf16>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %w = zgraph.param "w" trainable : tensor<3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<3xf32>
    %mw = zgraph.state "w" kind = "exp_avg" : tensor<3xf32>
    %vw = zgraph.state "w" kind = "exp_avg_sq" : tensor<3xf32>
    zgraph.adamw %w, %gw, %mw, %vw, %scalars {adam_w_mode = true} : tensor<3xf32>, tensor<8xf64>
    return
  }
}

// -----

// A pipelined step's parameter keeps its op, unused, after its casts
// become reads of the copy: its `zdist.stage` names the stage that owns
// its gradient and optimizer state, which zcc-dist-pipeline-split reads.
// CHECK-LABEL: func.func @micro_step
// CHECK-NEXT: zgraph.param "w" trainable {zdist.stage = 1 : i64} : tensor<3xf32>
// CHECK-NEXT: %[[C:.*]] = zgraph.state "w" kind = "copy" : tensor<3xbf16>
// CHECK-NEXT: zgraph.add %arg0, %[[C]] {zdist.stage = 1 : i64}
module attributes {zcc.config = {bf16 = {enabled = true}, zero_optimization = {stage = 0 : i64}}} {
  zdist.mesh @mesh ["dp" = 1]
  func.func @micro_step(%x: tensor<3xbf16> {zgraph.name = "x"}) -> (tensor<3xbf16> {zgraph.name = "y"}) {
    %w = zgraph.param "w" trainable {zdist.stage = 1 : i64} : tensor<3xf32>
    %wc = zgraph.cast %w {zdist.stage = 1 : i64} : tensor<3xf32> -> tensor<3xbf16>
    %y = zgraph.add %x, %wc {zdist.stage = 1 : i64} : (tensor<3xbf16>, tensor<3xbf16>) -> tensor<3xbf16>
    return %y : tensor<3xbf16>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %w = zgraph.param "w" trainable : tensor<3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<3xf32>
    %mw = zgraph.state "w" kind = "exp_avg" : tensor<3xf32>
    %vw = zgraph.state "w" kind = "exp_avg_sq" : tensor<3xf32>
    zgraph.adamw %w, %gw, %mw, %vw, %scalars {adam_w_mode = true} : tensor<3xf32>, tensor<8xf64>
    return
  }
}

// -----

// offload_optimizer alone (ZeRO-Offload): the host updates "w"'s fp32
// master and the updated master is fetched back into the device
// parameter; the device copy is refreshed after that assign, the
// parameter's last write, and @init sets it after the master.
// CHECK-LABEL: func.func @micro_step
// CHECK-NEXT: %[[C:.*]] = zgraph.state "w" kind = "copy" : tensor<4x3xbf16>
// CHECK-NEXT: zgraph.matmul %arg0, %[[C]]
// CHECK-LABEL: func.func @init
// CHECK: zgraph.state "w" kind = "master" {zdist.memory = "host"}
// CHECK: %[[IC:.*]] = zgraph.state "w" kind = "copy" : tensor<4x3xbf16>
// CHECK-NEXT: %[[IH:.*]] = zgraph.cast
// CHECK-NEXT: zgraph.assign %[[IH]] into %[[IC]]
// CHECK-NEXT: return
// CHECK-LABEL: func.func @optimizer_step
// CHECK: zgraph.adamw {{.*}}zdist.memory = "host"
// CHECK: %[[F:.*]] = zdist.fetch
// CHECK-NEXT: zgraph.assign %[[F]] into %[[P:[^ ]*]] : tensor<4x3xf32>
// CHECK-NEXT: %[[UC:.*]] = zgraph.state "w" kind = "copy" : tensor<4x3xbf16>
// CHECK-NEXT: %[[UH:.*]] = zgraph.cast %[[P]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK-NEXT: zgraph.assign %[[UH]] into %[[UC]]
// CHECK-NEXT: return
module attributes {zcc.config = {bf16 = {enabled = true}, zero_optimization = {stage = 2 : i64, offload_optimizer = {device = "cpu"}}}} {
  zdist.mesh @mesh ["dp" = 1]
  func.func @micro_step(%x: tensor<2x4xbf16> {zgraph.name = "x"}, %x32: tensor<2x4xf32> {zgraph.name = "x32"}) -> (tensor<2x3xbf16> {zgraph.name = "y"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %wc = zgraph.cast %w : tensor<4x3xf32> -> tensor<4x3xbf16>
    %y = zgraph.matmul %x, %wc : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xbf16>
    %y32 = zgraph.cast %y : tensor<2x3xbf16> -> tensor<2x3xf32>
    %t = zgraph.transpose %x32 perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %d = zgraph.matmul %t, %y32 : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    zgraph.accumulate %d into %gw : tensor<4x3xf32> into tensor<4x3xf32>
    return %y : tensor<2x3xbf16>
  }
  func.func @grad_norm() -> tensor<f64> {
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %s = zgraph.sum_squares %gw : tensor<4x3xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %mw = zgraph.state "w" kind = "exp_avg" : tensor<4x3xf32>
    %vw = zgraph.state "w" kind = "exp_avg_sq" : tensor<4x3xf32>
    zgraph.adamw %w, %gw, %mw, %vw, %scalars {adam_w_mode = true} : tensor<4x3xf32>, tensor<8xf64>
    return
  }
}
