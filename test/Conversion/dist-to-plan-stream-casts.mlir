// RUN: zcc-opt %s --zcc-dist-zero --zcc-dist-step-gradients --zcc-dist-to-plan --zcc-plan-verify | FileCheck %s

// ZeRO-3 with overlap_comm and one micro-step a step: the cast of a's
// shard to bf16 only feeds its all-gather, so it runs on the communication
// stream with it; the reduce-scatter writes its result straight into the
// gradient (which lives for this step: the assign after it moves nothing
// and is gone), and nothing on the compute stream waits for it.
// CHECK: zplan.buffer @[[GRAD:b[0-9]+]] offset {{[0-9]+}} size 16 {kind = "gradient", name = "a.grad", step_local
// CHECK-LABEL: zplan.program @micro_step {
// CHECK: zplan.wait @e0 stream 1
// CHECK-NEXT: zplan.kernel "cast" ins(@device::@[[SHARD:b[0-9]+]]) outs(@device::@[[HALF:b[0-9]+]]) stream 1
// CHECK-NEXT: zplan.kernel "all_gather" ins(@device::@[[HALF]]) outs(@device::@[[W:b[0-9]+]]) stream 1
// CHECK-NEXT: zplan.record @e1 stream 1
// CHECK-NEXT: zplan.wait @e1 stream 0
// CHECK-NEXT: zplan.kernel "mul" ins(@device::@{{b[0-9]+}}, @device::@[[W]]) outs({{.*}}) stream 0
// CHECK-NEXT: zplan.record @e2 stream 0
// CHECK-NEXT: zplan.wait @e2 stream 1
// CHECK-NEXT: zplan.kernel "reduce_scatter" ins(@device::@{{b[0-9]+}}) outs(@device::@[[GRAD]]) stream 1
// CHECK-NEXT: zplan.record @e3 stream 1
// CHECK-NEXT: }
module attributes {zcc.config = {gradient_accumulation_steps = 1 : i64, zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 0 : i64, overlap_comm = true}}} {
  zdist.mesh @mesh ["dp" = 2]
  func.func @micro_step(%x: tensor<4x2xbf16> {zgraph.name = "x"}, %g: tensor<4x2xf32> {zgraph.name = "g"}) -> (tensor<4x2xbf16> {zgraph.name = "y"}) {
    %a = zgraph.param "a" trainable : tensor<4x2xf32>
    %a16 = zgraph.cast %a : tensor<4x2xf32> -> tensor<4x2xbf16>
    %y = zgraph.mul %x, %a16 : (tensor<4x2xbf16>, tensor<4x2xbf16>) -> tensor<4x2xbf16>
    %ga = zgraph.state "a" kind = "grad" : tensor<4x2xf32>
    zgraph.accumulate %g into %ga : tensor<4x2xf32> into tensor<4x2xf32>
    return %y : tensor<4x2xbf16>
  }
  func.func @grad_norm() -> (tensor<f64> {zgraph.name = "zcc.grad_norm_sq"}) {
    %ga = zgraph.state "a" kind = "grad" : tensor<4x2xf32>
    %s = zgraph.sum_squares %ga : tensor<4x2xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %a = zgraph.param "a" trainable : tensor<4x2xf32>
    %ga = zgraph.state "a" kind = "grad" : tensor<4x2xf32>
    %m = zgraph.state "a" kind = "exp_avg" : tensor<4x2xf32>
    %v = zgraph.state "a" kind = "exp_avg_sq" : tensor<4x2xf32>
    zgraph.adamw %a, %ga, %m, %v, %scalars {adam_w_mode = true} : tensor<4x2xf32>, tensor<8xf64>
    zgraph.fill %ga value = 0.0 : tensor<4x2xf32>
    return
  }
  func.func @zero_grads() {
    %ga = zgraph.state "a" kind = "grad" : tensor<4x2xf32>
    zgraph.fill %ga value = 0.0 : tensor<4x2xf32>
    return
  }
}
