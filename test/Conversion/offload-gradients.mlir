// RUN: zcc-opt %s --zcc-dist-zero --zcc-dist-offload --zcc-dist-step-gradients --zcc-dist-offload-gradients | FileCheck %s
// RUN: zcc-opt %s --zcc-dist-zero --zcc-dist-offload --zcc-dist-step-gradients --zcc-dist-offload-gradients --zcc-dist-to-plan | FileCheck %s --check-prefix=PLAN
// RUN: zcc-opt %s --zcc-dist-zero --zcc-dist-offload --zcc-dist-offload-gradients | FileCheck %s --check-prefix=ACCUMULATING

// ZeRO-3 on two ranks with both offloads and one micro-step per optimizer
// step. "w"'s gradient shard (reduce-scattered, updated on the host) goes
// to host memory as soon as the backward has written it: right after its
// write, its sum of squares is added into a device accumulator (zeroed
// when the micro-step starts) and it is copied to the host state
// "host_grad", which @optimizer_step's host update reads instead of
// offloading the device gradient after the backward; @grad_norm reads the
// accumulator instead of the gradient. "b" (at the persistence threshold)
// is all-reduced in @grad_norm, so its gradient stays on the device.
// CHECK-LABEL: func.func @micro_step
// CHECK-NEXT: %[[ACC:.*]] = zgraph.state "zcc.streamed_gradients.0" kind = "norm_sq" {zdist.step_local} : tensor<f64>
// CHECK-NEXT: zgraph.fill %[[ACC]] value = 0.000000e+00 : tensor<f64>
// CHECK: %[[GW:.*]] = zgraph.state "w" kind = "grad" {zdist.step_local} : tensor<2x3xf32>
// CHECK: %[[RS:.*]] = zdist.reduce_scatter
// CHECK-NEXT: zgraph.assign %[[RS]] into %[[GW]]
// CHECK-NEXT: %[[SQ:.*]] = zgraph.sum_squares %[[GW]] : tensor<2x3xf32> -> tensor<f64>
// CHECK-NEXT: zgraph.accumulate %[[SQ]] into %[[ACC]] : tensor<f64> into tensor<f64>
// CHECK-NEXT: %[[HW:.*]] = zgraph.state "w" kind = "host_grad" {zdist.memory = "host", zdist.step_local} : tensor<2x3xf32>
// CHECK-NEXT: %[[COPY:.*]] = zdist.offload %[[GW]] : tensor<2x3xf32>
// CHECK-NEXT: zgraph.assign %[[COPY]] into %[[HW]] {zdist.memory = "host"}
// CHECK: %[[GB:.*]] = zgraph.state "b" kind = "grad" {zdist.step_local} : tensor<3xf32>
// CHECK-NOT: zdist.offload
// CHECK: return
// CHECK-LABEL: func.func @grad_norm
// CHECK-NOT: "w" kind = "grad"
// CHECK: %[[B:.*]] = zgraph.state "b" kind = "grad"
// CHECK-NEXT: %[[BR:.*]] = zdist.all_reduce %[[B]]
// CHECK: %[[ACC:.*]] = zgraph.state "zcc.streamed_gradients.0" kind = "norm_sq" {zdist.step_local} : tensor<f64>
// CHECK-NEXT: %[[S:.*]] = zdist.all_reduce %[[ACC]] on @mesh axes = ["dp"] reduction = sum
// CHECK-NEXT: %[[SB:.*]] = zgraph.sum_squares %[[BR]] : tensor<3xf32>
// CHECK-NEXT: zgraph.add %[[S]], %[[SB]]
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NOT: kind = "grad" {{.*}}tensor<2x3xf32>
// CHECK: %[[W:.*]] = zgraph.param "w"
// CHECK: %[[HW:.*]] = zgraph.state "w" kind = "host_grad" {zdist.memory = "host", zdist.step_local}
// CHECK-NEXT: %[[S1:.*]] = zdist.offload %arg0
// CHECK-NEXT: zgraph.adamw %[[W]], %[[HW]], {{.*}} {zdist.memory = "host"}
// CHECK: %[[GB:.*]] = zgraph.state "b" kind = "grad" {zdist.step_local}
// CHECK: %[[GBH:.*]] = zdist.offload %[[GB]] : tensor<3xf32>
// CHECK: zgraph.adamw {{.*}}, %[[GBH]], {{.*}} {zdist.memory = "host"}

// In the plan the copy writes the host gradient itself (no host kernel in
// the micro-step or the norm), and the device gradient lives only in
// @micro_step.
// PLAN-DAG: zplan.buffer @[[DEV:b[0-9]+]] offset {{[0-9]+}} size 24 {kind = "gradient", name = "w.grad", step_local
// PLAN-DAG: zplan.buffer @[[HOST:b[0-9]+]] offset {{[0-9]+}} size 24 {kind = "gradient", name = "w.host_grad", step_local
// PLAN-DAG: zplan.buffer @[[ACC:b[0-9]+]] offset {{[0-9]+}} size 8 {kind = "gradient", name = "zcc.streamed_gradients.0.norm_sq", step_local
// PLAN-LABEL: zplan.program @micro_step
// PLAN-NEXT: zplan.kernel "fill" ins() outs(@device::@[[ACC]])
// PLAN: zplan.kernel "reduce_scatter" {{.*}} outs(@device::@[[DEV]])
// PLAN-NEXT: zplan.kernel "sum_squares" ins(@device::@[[DEV]]) outs(@device::@[[SQ:b[0-9]+]])
// PLAN-NEXT: zplan.kernel "accumulate" ins(@device::@[[SQ]]) outs(@device::@[[ACC]])
// PLAN-NEXT: zplan.kernel "offload" ins(@device::@[[DEV]]) outs(@host::@[[HOST]])
// PLAN-NOT: @host::
// PLAN-LABEL: zplan.program @grad_norm
// PLAN-NOT: @host::
// PLAN: zplan.kernel "all_reduce" ins(@device::@[[ACC]])
// PLAN-NOT: @host::
// PLAN-LABEL: zplan.program @init
// PLAN-LABEL: zplan.program @optimizer_step
// PLAN-NOT: @[[DEV]]
// PLAN: zplan.kernel "adamw" ins(@host::@{{b[0-9]+}}, @host::@[[HOST]],
// PLAN-NOT: @[[DEV]]
// PLAN-LABEL: zplan.program @zero_grads

// Gradients that accumulate (here: without zcc-dist-step-gradients, as with
// gradient_accumulation_steps above 1) stay on the device.
// ACCUMULATING-NOT: host_grad
module attributes {zcc.config = {gradient_accumulation_steps = 1 : i64, zero_optimization = {stage = 3 : i64, stage3_param_persistence_threshold = 4 : i64, offload_optimizer = {device = "cpu"}, offload_param = {device = "cpu"}}}} {
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
