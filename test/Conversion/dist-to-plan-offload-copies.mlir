// RUN: zcc-opt %s --zcc-dist-zero --zcc-dist-offload --zcc-dist-to-plan | FileCheck %s

// The 16-bit host copy of an offloaded parameter is a host
// parameter_copies buffer that the host cast writes itself in @init (its
// assign moves nothing: no second kernel writes the copy), that the host
// adamw of @optimizer_step writes as its fourth result (the refresh cast
// fused into the update, block by block), and that the micro-step fetches.
// CHECK: zplan.host_memory = {{{.*}}parameter_copies = 24 : i64
// CHECK: zplan.arena @host in host
// CHECK: zplan.buffer @[[C:b[0-9]+]] offset {{[0-9]+}} size 24 {kind = "parameter_copy", {{.*}}name = "w.copy"
// CHECK-LABEL: zplan.program @micro_step {
// CHECK-NEXT: zplan.kernel "fetch" ins(@host::@[[C]]) outs(@device::@{{b[0-9]+}}) stream 0
// CHECK-LABEL: zplan.program @init {
// CHECK-NEXT: zplan.kernel "cast" ins(@host::@[[W:b[0-9]+]]) outs(@host::@[[C]]) stream 0
// CHECK-NEXT: }
// CHECK-LABEL: zplan.program @optimizer_step {
// CHECK: zplan.kernel "adamw" ins(@host::@[[W]], {{.*}}) outs(@host::@[[W]], @host::@{{b[0-9]+}}, @host::@{{b[0-9]+}}, @host::@[[C]]) stream 0
// CHECK-NOT: "cast"
// CHECK-NOT: outs(@host::@[[C]])
// CHECK: }
module attributes {zcc.config = {bf16 = {enabled = true}, zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 4 : i64, offload_optimizer = {device = "cpu"}, offload_param = {device = "cpu"}}}} {
  zdist.mesh @mesh ["dp" = 1]
  func.func @micro_step(%x: tensor<2x4xbf16> {zgraph.name = "x"}, %x32: tensor<2x4xf32> {zgraph.name = "x32"}) -> (tensor<2x3xf32> {zgraph.name = "y"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %wc = zgraph.cast %w : tensor<4x3xf32> -> tensor<4x3xbf16>
    %y = zgraph.matmul %x, %wc : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xbf16>
    %y32 = zgraph.cast %y : tensor<2x3xbf16> -> tensor<2x3xf32>
    %t = zgraph.transpose %x32 perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %d = zgraph.matmul %t, %y32 : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    zgraph.accumulate %d into %gw : tensor<4x3xf32> into tensor<4x3xf32>
    return %y32 : tensor<2x3xf32>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %mw = zgraph.state "w" kind = "exp_avg" : tensor<4x3xf32>
    %vw = zgraph.state "w" kind = "exp_avg_sq" : tensor<4x3xf32>
    zgraph.adamw %w, %gw, %mw, %vw, %scalars {adam_w_mode = true} : tensor<4x3xf32>, tensor<8xf64>
    zgraph.fill %gw value = 0.0 : tensor<4x3xf32>
    return
  }
}
