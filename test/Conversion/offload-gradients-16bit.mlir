// RUN: zcc-opt %s --zcc-dist-zero --zcc-dist-offload --zcc-dist-step-gradients --zcc-dist-offload-gradients | FileCheck %s
// RUN: zcc-opt %s --zcc-dist-zero --zcc-dist-offload --zcc-dist-step-gradients --zcc-dist-offload-gradients --zcc-dist-to-plan | FileCheck %s --check-prefix=PLAN
// RUN: sed -e 's/bf16 = {enabled = true}/fp16 = {enabled = true}/' %s | zcc-opt --zcc-dist-zero --zcc-dist-offload --zcc-dist-step-gradients --zcc-dist-offload-gradients | FileCheck %s --check-prefix=FP16
// RUN: sed -e 's/bf16 = {enabled = true}, //' %s | zcc-opt --zcc-dist-zero --zcc-dist-offload --zcc-dist-step-gradients --zcc-dist-offload-gradients | FileCheck %s --check-prefix=FP32

// offload-gradients.mlir's ZeRO-3 case in a mixed-precision config: the
// streamed gradient of "w" crosses to the host in 16 bits (bf16 here, f16
// with fp16), as DeepSpeed's offload moves the 16-bit gradients: right
// after its write it is cast on the device, the norm sums the squares of
// the 16-bit copy (so an fp16 overflow of the cast is seen by the loss
// scaler), and that copy goes to a 16-bit host gradient, which the host
// adamw widens as it reads it. fp32 training keeps f32 gradients.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[GW:.*]] = zgraph.state "w" kind = "grad" {zdist.step_local} : tensor<2x3xf32>
// CHECK: %[[RS:.*]] = zdist.reduce_scatter
// CHECK-NEXT: zgraph.assign %[[RS]] into %[[GW]]
// CHECK-NEXT: %[[HALF:.*]] = zgraph.cast %[[GW]] : tensor<2x3xf32> -> tensor<2x3xbf16>
// CHECK-NEXT: %[[SQ:.*]] = zgraph.sum_squares %[[HALF]] : tensor<2x3xbf16> -> tensor<f64>
// CHECK-NEXT: zgraph.accumulate %[[SQ]] into
// CHECK-NEXT: %[[HW:.*]] = zgraph.state "w" kind = "host_grad" {zdist.memory = "host", zdist.step_local} : tensor<2x3xbf16>
// CHECK-NEXT: %[[COPY:.*]] = zdist.offload %[[HALF]] : tensor<2x3xbf16>
// CHECK-NEXT: zgraph.assign %[[COPY]] into %[[HW]] {zdist.memory = "host"}
// CHECK-LABEL: func.func @optimizer_step
// CHECK: %[[W:.*]] = zgraph.param "w"
// CHECK: %[[HW:.*]] = zgraph.state "w" kind = "host_grad" {zdist.memory = "host", zdist.step_local} : tensor<2x3xbf16>
// CHECK: zgraph.adamw %[[W]], %[[HW]], {{.*}} : tensor<2x3xf32> grad tensor<2x3xbf16>, tensor<8xf64>

// FP16: zgraph.cast %{{.*}} : tensor<2x3xf32> -> tensor<2x3xf16>
// FP16: zgraph.state "w" kind = "host_grad" {zdist.memory = "host", zdist.step_local} : tensor<2x3xf16>
// FP16: zgraph.adamw {{.*}} : tensor<2x3xf32> grad tensor<2x3xf16>, tensor<8xf64>

// FP32-NOT: zgraph.cast
// FP32: zgraph.state "w" kind = "host_grad" {zdist.memory = "host", zdist.step_local} : tensor<2x3xf32>
// FP32-NOT: grad tensor

// The host gradient takes half the f32 gradient's bytes, and the device
// casts before the copy.
// PLAN-DAG: zplan.buffer @[[DEV:b[0-9]+]] offset {{[0-9]+}} size 24 {kind = "gradient", name = "w.grad", step_local
// PLAN-DAG: zplan.buffer @[[HOST:b[0-9]+]] offset {{[0-9]+}} size 12 {kind = "gradient", name = "w.host_grad", step_local
// PLAN-LABEL: zplan.program @micro_step
// PLAN: zplan.kernel "reduce_scatter" {{.*}} outs(@device::@[[DEV]])
// PLAN-NEXT: zplan.kernel "cast" ins(@device::@[[DEV]]) outs(@device::@[[HALF:b[0-9]+]])
// PLAN-NEXT: zplan.kernel "sum_squares" ins(@device::@[[HALF]])
// PLAN-NEXT: zplan.kernel "accumulate"
// PLAN-NEXT: zplan.kernel "offload" ins(@device::@[[HALF]]) outs(@host::@[[HOST]])
// PLAN-LABEL: zplan.program @optimizer_step
// PLAN: zplan.kernel "adamw" ins(@host::@{{b[0-9]+}}, @host::@[[HOST]],
module attributes {zcc.config = {bf16 = {enabled = true}, gradient_accumulation_steps = 1 : i64, zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 4 : i64, offload_optimizer = {device = "cpu"}, offload_param = {device = "cpu"}}}} {
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
    %gb = zgraph.state "b" kind = "grad" : tensor<3xf32>
    %db = zgraph.reduce_sum %z axes = [0] keepdims = false : tensor<2x3xf32> -> tensor<3xf32>
    zgraph.accumulate %db into %gb : tensor<3xf32> into tensor<3xf32>
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
  func.func @zero_grads() {
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    zgraph.fill %gw value = 0.0 : tensor<4x3xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<3xf32>
    zgraph.fill %gb value = 0.0 : tensor<3xf32>
    return
  }
}
