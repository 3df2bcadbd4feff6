// RUN: zcc-opt %s --split-input-file --zcc-dist-zero | FileCheck %s

// Stage 3's fetch schedule on a micro-step that uses three 8-element
// parameters a, b, c in the order a b c c b a (a forward and a backward
// pass), on two ranks: where each whole copy is all-gathered (fetch and
// prefetch), with which others in one coalesced all-gather (bucket), and
// where it is released (its last use before a re-gather). Every
// parameter is a 2x2 shard of its 4x2 rows.

// DeepSpeed's defaults (prefetch bucket 5e7, max live 1e9, reuse distance
// 1e9): the first use fetches all three in one bucket (shards flattened,
// concatenated, gathered rank-major, cut back out) and nothing is released
// before its last use.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[A:.*]] = zgraph.param "a" {{.*}}zdist.shards = 2 : i64} : tensor<2x2xf32>
// CHECK: %[[B:.*]] = zgraph.param "b"
// CHECK: %[[C:.*]] = zgraph.param "c"
// CHECK-NEXT: %[[FA:.*]] = zgraph.reshape %[[A]] : tensor<2x2xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[FB:.*]] = zgraph.reshape %[[B]] : tensor<2x2xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[FC:.*]] = zgraph.reshape %[[C]] : tensor<2x2xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[CAT:.*]] = zgraph.concat %[[FA]], %[[FB]], %[[FC]] axis = 0
// CHECK-NEXT: %[[ALL:.*]] = zdist.all_gather %[[CAT]] on @mesh axes = ["dp"] gather_axis = 0 : tensor<12xf32> -> tensor<24xf32>
// CHECK-NEXT: %[[RANKS:.*]] = zgraph.reshape %[[ALL]] : tensor<24xf32> -> tensor<2x12xf32>
// CHECK-NEXT: %[[SA:.*]] = zgraph.slice %[[RANKS]] starts = [0, 0] limits = [2, 4] strides = [1, 1]
// CHECK-NEXT: %[[WA:.*]] = zgraph.reshape %[[SA]] : tensor<2x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[SB:.*]] = zgraph.slice %[[RANKS]] starts = [0, 4] limits = [2, 8] strides = [1, 1]
// CHECK-NEXT: %[[WB:.*]] = zgraph.reshape %[[SB]]
// CHECK-NEXT: %[[SC:.*]] = zgraph.slice %[[RANKS]] starts = [0, 8] limits = [2, 12] strides = [1, 1]
// CHECK-NEXT: %[[WC:.*]] = zgraph.reshape %[[SC]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WA]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WB]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WC]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WC]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WB]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WA]]
// CHECK-NEXT: return
module attributes {zcc.config = {zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 0 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
    %a = zgraph.param "a" trainable : tensor<4x2xf32>
    %b = zgraph.param "b" trainable : tensor<4x2xf32>
    %c = zgraph.param "c" trainable : tensor<4x2xf32>
    %0 = zgraph.mul %x, %a : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %1 = zgraph.mul %0, %b : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %2 = zgraph.mul %1, %c : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %3 = zgraph.mul %2, %c : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %4 = zgraph.mul %3, %b : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %5 = zgraph.mul %4, %a : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    return %5 : tensor<4x2xf32>
  }
  func.func @grad_norm() -> tensor<f64> {
    %a = zgraph.state "a" kind = "grad" : tensor<4x2xf32>
    %b = zgraph.state "b" kind = "grad" : tensor<4x2xf32>
    %c = zgraph.state "c" kind = "grad" : tensor<4x2xf32>
    %s = zgraph.sum_squares %a, %b, %c : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @optimizer_step() {
    return
  }
}

// -----

// stage3_prefetch_bucket_size 0: no prefetch, each parameter is fetched
// alone at its first use; the reuse distance still keeps each resident to
// its last use.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[A:.*]] = zgraph.param "a"
// CHECK: %[[B:.*]] = zgraph.param "b"
// CHECK: %[[C:.*]] = zgraph.param "c"
// CHECK-NEXT: %[[WA:.*]] = zdist.all_gather %[[A]]
// CHECK-NEXT: %[[M0:.*]] = zgraph.mul %{{.*}}, %[[WA]]
// CHECK-NEXT: %[[WB:.*]] = zdist.all_gather %[[B]]
// CHECK-NEXT: %[[M1:.*]] = zgraph.mul %[[M0]], %[[WB]]
// CHECK-NEXT: %[[WC:.*]] = zdist.all_gather %[[C]]
// CHECK-NEXT: zgraph.mul %[[M1]], %[[WC]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WC]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WB]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WA]]
// CHECK-NOT: zdist.all_gather
module attributes {zcc.config = {zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 0 : i64, stage3_prefetch_bucket_size = 0 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
    %a = zgraph.param "a" trainable : tensor<4x2xf32>
    %b = zgraph.param "b" trainable : tensor<4x2xf32>
    %c = zgraph.param "c" trainable : tensor<4x2xf32>
    %0 = zgraph.mul %x, %a : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %1 = zgraph.mul %0, %b : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %2 = zgraph.mul %1, %c : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %3 = zgraph.mul %2, %c : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %4 = zgraph.mul %3, %b : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %5 = zgraph.mul %4, %a : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    return %5 : tensor<4x2xf32>
  }
  func.func @grad_norm() -> tensor<f64> {
    %a = zgraph.state "a" kind = "grad" : tensor<4x2xf32>
    %b = zgraph.state "b" kind = "grad" : tensor<4x2xf32>
    %c = zgraph.state "c" kind = "grad" : tensor<4x2xf32>
    %s = zgraph.sum_squares %a, %b, %c : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @optimizer_step() {
    return
  }
}

// -----

// stage3_max_reuse_distance 0 (and no prefetch): a parameter is released
// after a use when any other parameter is used before its next one, so b
// and a are gathered again for the backward pass; c, used twice in a row,
// stays.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[A:.*]] = zgraph.param "a"
// CHECK: %[[B:.*]] = zgraph.param "b"
// CHECK: %[[C:.*]] = zgraph.param "c"
// CHECK-NEXT: %[[WA:.*]] = zdist.all_gather %[[A]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WA]]
// CHECK-NEXT: %[[WB:.*]] = zdist.all_gather %[[B]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WB]]
// CHECK-NEXT: %[[WC:.*]] = zdist.all_gather %[[C]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WC]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WC]]
// CHECK-NEXT: %[[WB2:.*]] = zdist.all_gather %[[B]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WB2]]
// CHECK-NEXT: %[[WA2:.*]] = zdist.all_gather %[[A]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WA2]]
module attributes {zcc.config = {zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 0 : i64, stage3_prefetch_bucket_size = 0 : i64, stage3_max_reuse_distance = 0 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
    %a = zgraph.param "a" trainable : tensor<4x2xf32>
    %b = zgraph.param "b" trainable : tensor<4x2xf32>
    %c = zgraph.param "c" trainable : tensor<4x2xf32>
    %0 = zgraph.mul %x, %a : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %1 = zgraph.mul %0, %b : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %2 = zgraph.mul %1, %c : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %3 = zgraph.mul %2, %c : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %4 = zgraph.mul %3, %b : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %5 = zgraph.mul %4, %a : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    return %5 : tensor<4x2xf32>
  }
  func.func @grad_norm() -> tensor<f64> {
    %a = zgraph.state "a" kind = "grad" : tensor<4x2xf32>
    %b = zgraph.state "b" kind = "grad" : tensor<4x2xf32>
    %c = zgraph.state "c" kind = "grad" : tensor<4x2xf32>
    %s = zgraph.sum_squares %a, %b, %c : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @optimizer_step() {
    return
  }
}

// -----

// stage3_max_live_parameters 16 (two parameters): the first fetch
// prefetches b with a (16 elements live), and c must wait for its own use.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[C:.*]] = zgraph.param "c"
// CHECK: zdist.all_gather %{{.*}} : tensor<8xf32> -> tensor<16xf32>
// CHECK-COUNT-2: zgraph.mul
// CHECK-NEXT: %[[WC:.*]] = zdist.all_gather %[[C]] on @mesh axes = ["dp"] gather_axis = 0 : tensor<2x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WC]]
// CHECK-NOT: zdist.all_gather
module attributes {zcc.config = {zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 0 : i64, stage3_max_live_parameters = 16 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
    %a = zgraph.param "a" trainable : tensor<4x2xf32>
    %b = zgraph.param "b" trainable : tensor<4x2xf32>
    %c = zgraph.param "c" trainable : tensor<4x2xf32>
    %0 = zgraph.mul %x, %a : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %1 = zgraph.mul %0, %b : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %2 = zgraph.mul %1, %c : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %3 = zgraph.mul %2, %c : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %4 = zgraph.mul %3, %b : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %5 = zgraph.mul %4, %a : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    return %5 : tensor<4x2xf32>
  }
  func.func @grad_norm() -> tensor<f64> {
    %a = zgraph.state "a" kind = "grad" : tensor<4x2xf32>
    %b = zgraph.state "b" kind = "grad" : tensor<4x2xf32>
    %c = zgraph.state "c" kind = "grad" : tensor<4x2xf32>
    %s = zgraph.sum_squares %a, %b, %c : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @optimizer_step() {
    return
  }
}

// -----

// Mixed precision: a parameter used only through casts to bf16 is cast as
// a shard right before its gather, and gathered in bf16 (half the bytes, no
// whole fp32 copy); its uses read the gathered bf16 value. A parameter with another
// use (b, also added in fp32) is gathered in fp32 and cast as before.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[A:.*]] = zgraph.param "a" {{.*}} : tensor<2x2xf32>
// CHECK: %[[B:.*]] = zgraph.param "b" {{.*}} : tensor<2x2xf32>
// CHECK-NEXT: %[[A16:.*]] = zgraph.cast %[[A]] : tensor<2x2xf32> -> tensor<2x2xbf16>
// CHECK-NEXT: %[[WA:.*]] = zdist.all_gather %[[A16]] on @mesh axes = ["dp"] gather_axis = 0 : tensor<2x2xbf16> -> tensor<4x2xbf16>
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WA]] : (tensor<4x2xbf16>, tensor<4x2xbf16>)
// CHECK-NEXT: %[[WB:.*]] = zdist.all_gather %[[B]] on @mesh axes = ["dp"] gather_axis = 0 : tensor<2x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[B16:.*]] = zgraph.cast %[[WB]] : tensor<4x2xf32> -> tensor<4x2xbf16>
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[B16]]
// CHECK-NEXT: zgraph.mul %{{.*}}, %[[WA]]
// CHECK-NEXT: zgraph.add %{{.*}}, %[[WB]]
// CHECK-NEXT: return
module attributes {zcc.config = {zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 0 : i64, stage3_prefetch_bucket_size = 0 : i64}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%x: tensor<4x2xbf16>, %y: tensor<4x2xf32>) -> (tensor<4x2xbf16>, tensor<4x2xf32>) {
    %a = zgraph.param "a" trainable : tensor<4x2xf32>
    %b = zgraph.param "b" trainable : tensor<4x2xf32>
    %a16 = zgraph.cast %a : tensor<4x2xf32> -> tensor<4x2xbf16>
    %0 = zgraph.mul %x, %a16 : (tensor<4x2xbf16>, tensor<4x2xbf16>) -> tensor<4x2xbf16>
    %b16 = zgraph.cast %b : tensor<4x2xf32> -> tensor<4x2xbf16>
    %1 = zgraph.mul %0, %b16 : (tensor<4x2xbf16>, tensor<4x2xbf16>) -> tensor<4x2xbf16>
    %a16again = zgraph.cast %a : tensor<4x2xf32> -> tensor<4x2xbf16>
    %2 = zgraph.mul %1, %a16again : (tensor<4x2xbf16>, tensor<4x2xbf16>) -> tensor<4x2xbf16>
    %3 = zgraph.add %y, %b : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    return %2, %3 : tensor<4x2xbf16>, tensor<4x2xf32>
  }
  func.func @grad_norm() -> tensor<f64> {
    %a = zgraph.state "a" kind = "grad" : tensor<4x2xf32>
    %b = zgraph.state "b" kind = "grad" : tensor<4x2xf32>
    %s = zgraph.sum_squares %a, %b : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @optimizer_step() {
    return
  }
}

// -----

// overlap_comm: each gather is issued right before the first use of the
// bucket before it, so it runs while that bucket computes (b's gather
// before a's first product, a's second gather before b's first product).
// A parameter gathered twice (a: released after its forward use, as the
// reuse distance is 0) is cast twice, each cast right before its gather:
// no 16-bit shard stays live between the two.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[A:.*]] = zgraph.param "a"
// CHECK: %[[B:.*]] = zgraph.param "b"
// CHECK-NEXT: %[[CA:.*]] = zgraph.cast %[[A]] : tensor<2x2xf32> -> tensor<2x2xbf16>
// CHECK-NEXT: %[[WA:.*]] = zdist.all_gather %[[CA]]
// CHECK-NEXT: %[[CB:.*]] = zgraph.cast %[[B]] : tensor<2x2xf32> -> tensor<2x2xbf16>
// CHECK-NEXT: %[[WB:.*]] = zdist.all_gather %[[CB]]
// CHECK-NEXT: %[[M0:.*]] = zgraph.mul %{{.*}}, %[[WA]]
// CHECK-NEXT: %[[CA2:.*]] = zgraph.cast %[[A]] : tensor<2x2xf32> -> tensor<2x2xbf16>
// CHECK-NEXT: %[[WA2:.*]] = zdist.all_gather %[[CA2]]
// CHECK-NEXT: %[[M1:.*]] = zgraph.mul %[[M0]], %[[WB]]
// CHECK-NEXT: %[[M2:.*]] = zgraph.mul %[[M1]], %[[WB]]
// CHECK-NEXT: zgraph.mul %[[M2]], %[[WA2]]
// CHECK-NEXT: return
module attributes {zcc.config = {zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 0 : i64, stage3_prefetch_bucket_size = 4 : i64, stage3_max_reuse_distance = 0 : i64, overlap_comm = true}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%x: tensor<4x2xbf16>) -> tensor<4x2xbf16> {
    %a = zgraph.param "a" trainable : tensor<4x2xf32>
    %b = zgraph.param "b" trainable : tensor<4x2xf32>
    %a16 = zgraph.cast %a : tensor<4x2xf32> -> tensor<4x2xbf16>
    %b16 = zgraph.cast %b : tensor<4x2xf32> -> tensor<4x2xbf16>
    %0 = zgraph.mul %x, %a16 : (tensor<4x2xbf16>, tensor<4x2xbf16>) -> tensor<4x2xbf16>
    %1 = zgraph.mul %0, %b16 : (tensor<4x2xbf16>, tensor<4x2xbf16>) -> tensor<4x2xbf16>
    %2 = zgraph.mul %1, %b16 : (tensor<4x2xbf16>, tensor<4x2xbf16>) -> tensor<4x2xbf16>
    %3 = zgraph.mul %2, %a16 : (tensor<4x2xbf16>, tensor<4x2xbf16>) -> tensor<4x2xbf16>
    return %3 : tensor<4x2xbf16>
  }
  func.func @grad_norm() -> tensor<f64> {
    %a = zgraph.state "a" kind = "grad" : tensor<4x2xf32>
    %b = zgraph.state "b" kind = "grad" : tensor<4x2xf32>
    %s = zgraph.sum_squares %a, %b : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @optimizer_step() {
    return
  }
}
