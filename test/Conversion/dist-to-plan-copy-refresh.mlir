// RUN: zcc-opt %s --zcc-dist-zero --zcc-dist-compute-copies --zcc-dist-to-plan --zcc-plan-verify | FileCheck %s

// With overlap_comm, the casts that set and refresh a device parameter's
// 16-bit copy compute on stream 0 (no other program of theirs reads the
// copy, but it is no communication's): here SGD, whose update the refresh
// does not fuse into, and @init. The micro-step reads the copy.
// CHECK-DAG: zplan.buffer @[[W:b[0-9]+]] offset {{[0-9]+}} size 32 {kind = "parameter", name = "w"
// CHECK-DAG: zplan.buffer @[[C:b[0-9]+]] offset {{[0-9]+}} size 16 {kind = "parameter_copy", name = "w.copy"
// CHECK-LABEL: zplan.program @micro_step {
// CHECK: zplan.kernel "mul" ins(@device::@{{b[0-9]+}}, @device::@[[C]])
// CHECK-LABEL: zplan.program @init {
// CHECK-NEXT: zplan.kernel "cast" ins(@device::@[[W]]) outs(@device::@[[C]]) stream 0
// CHECK-NEXT: }
// CHECK-LABEL: zplan.program @optimizer_step {
// CHECK-NEXT: zplan.kernel "sgd" ins(@device::@[[W]], {{.*}}) stream 0
// CHECK-NEXT: zplan.kernel "cast" ins(@device::@[[W]]) outs(@device::@[[C]]) stream 0
// CHECK-NEXT: }
module attributes {zcc.config = {bf16 = {enabled = true}, zero_optimization = {stage = 0 : i64, overlap_comm = true}}} {
  zdist.mesh @mesh ["dp" = 1]
  func.func @micro_step(%x: tensor<4x2xbf16> {zgraph.name = "x"}, %g: tensor<4x2xf32> {zgraph.name = "g"}) -> (tensor<4x2xbf16> {zgraph.name = "y"}) {
    %w = zgraph.param "w" trainable : tensor<4x2xf32>
    %w16 = zgraph.cast %w : tensor<4x2xf32> -> tensor<4x2xbf16>
    %y = zgraph.mul %x, %w16 : (tensor<4x2xbf16>, tensor<4x2xbf16>) -> tensor<4x2xbf16>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x2xf32>
    zgraph.accumulate %g into %gw : tensor<4x2xf32> into tensor<4x2xf32>
    return %y : tensor<4x2xbf16>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %w = zgraph.param "w" trainable : tensor<4x2xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x2xf32>
    %mw = zgraph.state "w" kind = "momentum" : tensor<4x2xf32>
    zgraph.sgd %w, %gw, %mw, %scalars : tensor<4x2xf32>, tensor<8xf64>
    return
  }
}
