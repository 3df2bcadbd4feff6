// RUN: zcc-opt %s --split-input-file --zcc-dist-offload | FileCheck %s

// offload_param on one rank with overlap_comm: the fetches of the 16-bit
// copies, which the micro-step only reads, are scheduled like ZeRO-3's
// gathers. "a" is read again after only "b" (16 elements, within
// stage3_max_reuse_distance 16): its first fetch serves both products.
// "b" is read again after "c" and "d" (32 elements): fetched again. Each
// fetch is issued before the previous fetch's first use (the copy of "b"
// before the product with "a", and so on), so the copy engine moves the
// next weight while stream 0 computes with this one.
// CHECK-LABEL: func.func @micro_step
// CHECK-NEXT: %[[A:.*]] = zgraph.state "a" kind = "copy"
// CHECK-NEXT: %[[FA:.*]] = zdist.fetch %[[A]]
// CHECK-NEXT: %[[B:.*]] = zgraph.state "b" kind = "copy"
// CHECK-NEXT: %[[FB:.*]] = zdist.fetch %[[B]]
// CHECK-NEXT: %[[Y1:.*]] = zgraph.matmul %arg0, %[[FA]]
// CHECK-NEXT: %[[C:.*]] = zgraph.state "c" kind = "copy"
// CHECK-NEXT: %[[FC:.*]] = zdist.fetch %[[C]]
// CHECK-NEXT: %[[Y2:.*]] = zgraph.matmul %[[Y1]], %[[FB]]
// CHECK-NEXT: %[[Y3:.*]] = zgraph.matmul %[[Y2]], %[[FA]]
// CHECK-NEXT: %[[D:.*]] = zgraph.state "d" kind = "copy"
// CHECK-NEXT: %[[FD:.*]] = zdist.fetch %[[D]]
// CHECK-NEXT: %[[Y4:.*]] = zgraph.matmul %[[Y3]], %[[FC]]
// CHECK-NEXT: %[[B2:.*]] = zgraph.state "b" kind = "copy"
// CHECK-NEXT: %[[FB2:.*]] = zdist.fetch %[[B2]]
// CHECK-NEXT: %[[Y5:.*]] = zgraph.matmul %[[Y4]], %[[FD]]
// CHECK-NEXT: zgraph.matmul %[[Y5]], %[[FB2]]
// CHECK-NOT: zdist.fetch
// CHECK: return
module attributes {zcc.config = {bf16 = {enabled = true}, zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 4 : i64, stage3_max_reuse_distance = 16 : i64, stage3_max_live_parameters = 1000 : i64, overlap_comm = true, offload_optimizer = {device = "cpu"}, offload_param = {device = "cpu"}}}} {
  zdist.mesh @mesh ["dp" = 1]
  func.func @micro_step(%x: tensor<2x4xbf16> {zgraph.name = "x"}, %x32: tensor<2x4xf32> {zgraph.name = "x32"}) -> (tensor<2x4xbf16> {zgraph.name = "y"}) {
    %a = zgraph.param "a" trainable : tensor<4x4xf32>
    %ac = zgraph.cast %a : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y1 = zgraph.matmul %x, %ac : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %b = zgraph.param "b" trainable : tensor<4x4xf32>
    %bc = zgraph.cast %b : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y2 = zgraph.matmul %y1, %bc : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %a2 = zgraph.param "a" trainable : tensor<4x4xf32>
    %ac2 = zgraph.cast %a2 : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y3 = zgraph.matmul %y2, %ac2 : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %c = zgraph.param "c" trainable : tensor<4x4xf32>
    %cc = zgraph.cast %c : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y4 = zgraph.matmul %y3, %cc : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %d1 = zgraph.param "d" trainable : tensor<4x4xf32>
    %dc = zgraph.cast %d1 : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y5 = zgraph.matmul %y4, %dc : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %b2 = zgraph.param "b" trainable : tensor<4x4xf32>
    %bc2 = zgraph.cast %b2 : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y6 = zgraph.matmul %y5, %bc2 : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %t = zgraph.transpose %x32 perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %g = zgraph.matmul %t, %x32 : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %ga = zgraph.state "a" kind = "grad" : tensor<4x4xf32>
    zgraph.accumulate %g into %ga : tensor<4x4xf32> into tensor<4x4xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<4x4xf32>
    zgraph.accumulate %g into %gb : tensor<4x4xf32> into tensor<4x4xf32>
    %gc = zgraph.state "c" kind = "grad" : tensor<4x4xf32>
    zgraph.accumulate %g into %gc : tensor<4x4xf32> into tensor<4x4xf32>
    %gd = zgraph.state "d" kind = "grad" : tensor<4x4xf32>
    zgraph.accumulate %g into %gd : tensor<4x4xf32> into tensor<4x4xf32>
    return %y6 : tensor<2x4xbf16>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %a = zgraph.param "a" trainable : tensor<4x4xf32>
    %ga = zgraph.state "a" kind = "grad" : tensor<4x4xf32>
    %ma = zgraph.state "a" kind = "exp_avg" : tensor<4x4xf32>
    %va = zgraph.state "a" kind = "exp_avg_sq" : tensor<4x4xf32>
    zgraph.adamw %a, %ga, %ma, %va, %scalars {adam_w_mode = true} : tensor<4x4xf32>, tensor<8xf64>
    %b = zgraph.param "b" trainable : tensor<4x4xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<4x4xf32>
    %mb = zgraph.state "b" kind = "exp_avg" : tensor<4x4xf32>
    %vb = zgraph.state "b" kind = "exp_avg_sq" : tensor<4x4xf32>
    zgraph.adamw %b, %gb, %mb, %vb, %scalars {adam_w_mode = true} : tensor<4x4xf32>, tensor<8xf64>
    %c = zgraph.param "c" trainable : tensor<4x4xf32>
    %gc = zgraph.state "c" kind = "grad" : tensor<4x4xf32>
    %mc = zgraph.state "c" kind = "exp_avg" : tensor<4x4xf32>
    %vc = zgraph.state "c" kind = "exp_avg_sq" : tensor<4x4xf32>
    zgraph.adamw %c, %gc, %mc, %vc, %scalars {adam_w_mode = true} : tensor<4x4xf32>, tensor<8xf64>
    %d = zgraph.param "d" trainable : tensor<4x4xf32>
    %gd = zgraph.state "d" kind = "grad" : tensor<4x4xf32>
    %md = zgraph.state "d" kind = "exp_avg" : tensor<4x4xf32>
    %vd = zgraph.state "d" kind = "exp_avg_sq" : tensor<4x4xf32>
    zgraph.adamw %d, %gd, %md, %vd, %scalars {adam_w_mode = true} : tensor<4x4xf32>, tensor<8xf64>
    return
  }
}

// -----

// The same step with stage3_max_live_parameters 24: two weights of 16
// elements never fit at once, so each fetch stays right before its first
// use. Reuse still holds ("a" is fetched once).
// CHECK-LABEL: func.func @micro_step
// CHECK-NEXT: %[[A:.*]] = zgraph.state "a" kind = "copy"
// CHECK-NEXT: %[[FA:.*]] = zdist.fetch %[[A]]
// CHECK-NEXT: %[[Y1:.*]] = zgraph.matmul %arg0, %[[FA]]
// CHECK-NEXT: zgraph.state "b" kind = "copy"
// CHECK-NEXT: zdist.fetch
// CHECK-NEXT: %[[Y2:.*]] = zgraph.matmul %[[Y1]],
// CHECK-NEXT: zgraph.matmul %[[Y2]], %[[FA]]
// CHECK-NEXT: zgraph.state "c" kind = "copy"
// CHECK-NEXT: zdist.fetch
// CHECK-NEXT: zgraph.matmul
// CHECK-COUNT-2: zdist.fetch
// CHECK-NOT: zdist.fetch
// CHECK: return
module attributes {zcc.config = {bf16 = {enabled = true}, zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 4 : i64, stage3_max_reuse_distance = 16 : i64, stage3_max_live_parameters = 24 : i64, overlap_comm = true, offload_optimizer = {device = "cpu"}, offload_param = {device = "cpu"}}}} {
  zdist.mesh @mesh ["dp" = 1]
  func.func @micro_step(%x: tensor<2x4xbf16> {zgraph.name = "x"}, %x32: tensor<2x4xf32> {zgraph.name = "x32"}) -> (tensor<2x4xbf16> {zgraph.name = "y"}) {
    %a = zgraph.param "a" trainable : tensor<4x4xf32>
    %ac = zgraph.cast %a : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y1 = zgraph.matmul %x, %ac : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %b = zgraph.param "b" trainable : tensor<4x4xf32>
    %bc = zgraph.cast %b : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y2 = zgraph.matmul %y1, %bc : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %a2 = zgraph.param "a" trainable : tensor<4x4xf32>
    %ac2 = zgraph.cast %a2 : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y3 = zgraph.matmul %y2, %ac2 : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %c = zgraph.param "c" trainable : tensor<4x4xf32>
    %cc = zgraph.cast %c : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y4 = zgraph.matmul %y3, %cc : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %d1 = zgraph.param "d" trainable : tensor<4x4xf32>
    %dc = zgraph.cast %d1 : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y5 = zgraph.matmul %y4, %dc : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %b2 = zgraph.param "b" trainable : tensor<4x4xf32>
    %bc2 = zgraph.cast %b2 : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y6 = zgraph.matmul %y5, %bc2 : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %t = zgraph.transpose %x32 perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %g = zgraph.matmul %t, %x32 : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %ga = zgraph.state "a" kind = "grad" : tensor<4x4xf32>
    zgraph.accumulate %g into %ga : tensor<4x4xf32> into tensor<4x4xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<4x4xf32>
    zgraph.accumulate %g into %gb : tensor<4x4xf32> into tensor<4x4xf32>
    %gc = zgraph.state "c" kind = "grad" : tensor<4x4xf32>
    zgraph.accumulate %g into %gc : tensor<4x4xf32> into tensor<4x4xf32>
    %gd = zgraph.state "d" kind = "grad" : tensor<4x4xf32>
    zgraph.accumulate %g into %gd : tensor<4x4xf32> into tensor<4x4xf32>
    return %y6 : tensor<2x4xbf16>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %a = zgraph.param "a" trainable : tensor<4x4xf32>
    %ga = zgraph.state "a" kind = "grad" : tensor<4x4xf32>
    %ma = zgraph.state "a" kind = "exp_avg" : tensor<4x4xf32>
    %va = zgraph.state "a" kind = "exp_avg_sq" : tensor<4x4xf32>
    zgraph.adamw %a, %ga, %ma, %va, %scalars {adam_w_mode = true} : tensor<4x4xf32>, tensor<8xf64>
    %b = zgraph.param "b" trainable : tensor<4x4xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<4x4xf32>
    %mb = zgraph.state "b" kind = "exp_avg" : tensor<4x4xf32>
    %vb = zgraph.state "b" kind = "exp_avg_sq" : tensor<4x4xf32>
    zgraph.adamw %b, %gb, %mb, %vb, %scalars {adam_w_mode = true} : tensor<4x4xf32>, tensor<8xf64>
    %c = zgraph.param "c" trainable : tensor<4x4xf32>
    %gc = zgraph.state "c" kind = "grad" : tensor<4x4xf32>
    %mc = zgraph.state "c" kind = "exp_avg" : tensor<4x4xf32>
    %vc = zgraph.state "c" kind = "exp_avg_sq" : tensor<4x4xf32>
    zgraph.adamw %c, %gc, %mc, %vc, %scalars {adam_w_mode = true} : tensor<4x4xf32>, tensor<8xf64>
    %d = zgraph.param "d" trainable : tensor<4x4xf32>
    %gd = zgraph.state "d" kind = "grad" : tensor<4x4xf32>
    %md = zgraph.state "d" kind = "exp_avg" : tensor<4x4xf32>
    %vd = zgraph.state "d" kind = "exp_avg_sq" : tensor<4x4xf32>
    zgraph.adamw %d, %gd, %md, %vd, %scalars {adam_w_mode = true} : tensor<4x4xf32>, tensor<8xf64>
    return
  }
}
