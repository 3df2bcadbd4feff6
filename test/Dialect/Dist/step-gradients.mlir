// RUN: zcc-opt %s -split-input-file -zcc-dist-step-gradients | FileCheck %s

// One micro-step a step: each accumulator's first write in @micro_step
// overwrites it (an accumulate becomes an assign, an accumulate_matmul
// takes `overwrite`), its resets are gone, and its states are marked.
// "b" is read before it is written and "c" is used by @init: both keep
// their accumulation and their resets.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[W:.*]] = zgraph.state "w" kind = "grad" {zdist.step_local} : tensor<4x3xf32>
// CHECK-NEXT: zgraph.accumulate_matmul %{{.*}}, %{{.*}} into %[[W]] {overwrite, transpose_lhs} :
// CHECK-NEXT: zgraph.accumulate_matmul %{{.*}}, %{{.*}} into %[[W]] {transpose_lhs} :
// CHECK: %[[V:.*]] = zgraph.state "v" kind = "grad" {zdist.step_local} : tensor<3xf32>
// CHECK-NEXT: zgraph.assign %{{.*}} into %[[V]] {zdist.stage = 0 : i64} : tensor<3xbf16> into tensor<3xf32>
// CHECK: %[[B:.*]] = zgraph.state "b" kind = "grad" : tensor<3xf32>
// CHECK-NEXT: zgraph.sum_squares %[[B]]
// CHECK-NEXT: zgraph.accumulate %{{.*}} into %[[B]]
// CHECK: %[[C:.*]] = zgraph.state "c" kind = "grad" : tensor<3xf32>
// CHECK-NEXT: zgraph.accumulate %{{.*}} into %[[C]]
// CHECK-LABEL: func.func @optimizer_step
// CHECK: zgraph.adamw
// CHECK-NEXT: %[[OB:.*]] = zgraph.state "b" kind = "grad" : tensor<3xf32>
// CHECK-NEXT: zgraph.fill %[[OB]]
// CHECK-NEXT: %[[OC:.*]] = zgraph.state "c" kind = "grad" : tensor<3xf32>
// CHECK-NEXT: zgraph.fill %[[OC]]
// CHECK-NEXT: return
// CHECK-LABEL: func.func @zero_grads
// CHECK-NEXT: %[[ZB:.*]] = zgraph.state "b" kind = "grad" : tensor<3xf32>
// CHECK-NEXT: zgraph.fill %[[ZB]]
// CHECK-NEXT: %[[ZC:.*]] = zgraph.state "c" kind = "grad" : tensor<3xf32>
// CHECK-NEXT: zgraph.fill %[[ZC]]
// CHECK-NEXT: return
module attributes {zcc.config = {gradient_accumulation_steps = 1 : i64}} {
  func.func @micro_step(%x: tensor<8x4xbf16>, %dy: tensor<8x3xbf16>, %g: tensor<3xbf16>) -> tensor<f64> {
    %w = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    zgraph.accumulate_matmul %x, %dy into %w {transpose_lhs} : (tensor<8x4xbf16>, tensor<8x3xbf16>) into tensor<4x3xf32>
    zgraph.accumulate_matmul %x, %dy into %w {transpose_lhs} : (tensor<8x4xbf16>, tensor<8x3xbf16>) into tensor<4x3xf32>
    %v = zgraph.state "v" kind = "grad" : tensor<3xf32>
    zgraph.accumulate %g into %v {zdist.stage = 0 : i64} : tensor<3xbf16> into tensor<3xf32>
    %b = zgraph.state "b" kind = "grad" : tensor<3xf32>
    %n = zgraph.sum_squares %b : tensor<3xf32> -> tensor<f64>
    zgraph.accumulate %g into %b : tensor<3xbf16> into tensor<3xf32>
    %c = zgraph.state "c" kind = "grad" : tensor<3xf32>
    zgraph.accumulate %g into %c : tensor<3xbf16> into tensor<3xf32>
    return %n : tensor<f64>
  }
  func.func @optimizer_step(%s: tensor<8xf64>) {
    %p = zgraph.param "v" trainable : tensor<3xf32>
    %v = zgraph.state "v" kind = "grad" : tensor<3xf32>
    %m = zgraph.state "v" kind = "exp_avg" : tensor<3xf32>
    %m2 = zgraph.state "v" kind = "exp_avg_sq" : tensor<3xf32>
    zgraph.adamw %p, %v, %m, %m2, %s : tensor<3xf32>, tensor<8xf64>
    %w = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    zgraph.fill %w value = 0.0 : tensor<4x3xf32>
    zgraph.fill %v value = 0.0 : tensor<3xf32>
    %b = zgraph.state "b" kind = "grad" : tensor<3xf32>
    zgraph.fill %b value = 0.0 : tensor<3xf32>
    %c = zgraph.state "c" kind = "grad" : tensor<3xf32>
    zgraph.fill %c value = 0.0 : tensor<3xf32>
    return
  }
  func.func @zero_grads() {
    %w = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    zgraph.fill %w value = 0.0 : tensor<4x3xf32>
    %b = zgraph.state "b" kind = "grad" : tensor<3xf32>
    zgraph.fill %b value = 0.0 : tensor<3xf32>
    %c = zgraph.state "c" kind = "grad" : tensor<3xf32>
    zgraph.fill %c value = 0.0 : tensor<3xf32>
    return
  }
  func.func @init() {
    %c = zgraph.state "c" kind = "grad" : tensor<3xf32>
    zgraph.fill %c value = 0.0 : tensor<3xf32>
    return
  }
}

// -----

// Two micro-steps a step accumulate: nothing changes.
// CHECK-LABEL: func.func @micro_step
// CHECK-NOT: step_local
// CHECK: zgraph.accumulate %{{.*}} into
// CHECK-LABEL: func.func @optimizer_step
// CHECK: zgraph.fill
// CHECK-LABEL: func.func @zero_grads
// CHECK: zgraph.fill
module attributes {zcc.config = {gradient_accumulation_steps = 2 : i64}} {
  func.func @micro_step(%g: tensor<3xf32>) {
    %v = zgraph.state "v" kind = "grad" : tensor<3xf32>
    zgraph.accumulate %g into %v : tensor<3xf32> into tensor<3xf32>
    return
  }
  func.func @optimizer_step() {
    %v = zgraph.state "v" kind = "grad" : tensor<3xf32>
    zgraph.fill %v value = 0.0 : tensor<3xf32>
    return
  }
  func.func @zero_grads() {
    %v = zgraph.state "v" kind = "grad" : tensor<3xf32>
    zgraph.fill %v value = 0.0 : tensor<3xf32>
    return
  }
}

// -----

// zcc --accumulating-gradients keeps the accumulators (for zrun
// --grad-accum): nothing changes.
// CHECK-LABEL: func.func @micro_step
// CHECK-NOT: step_local
// CHECK: zgraph.accumulate %{{.*}} into
// CHECK-LABEL: func.func @zero_grads
// CHECK: zgraph.fill
module attributes {zcc.accumulating_gradients, zcc.config = {gradient_accumulation_steps = 1 : i64}} {
  func.func @micro_step(%g: tensor<3xf32>) {
    %v = zgraph.state "v" kind = "grad" : tensor<3xf32>
    zgraph.accumulate %g into %v : tensor<3xf32> into tensor<3xf32>
    return
  }
  func.func @optimizer_step() {
    %v = zgraph.state "v" kind = "grad" : tensor<3xf32>
    zgraph.fill %v value = 0.0 : tensor<3xf32>
    return
  }
  func.func @zero_grads() {
    %v = zgraph.state "v" kind = "grad" : tensor<3xf32>
    zgraph.fill %v value = 0.0 : tensor<3xf32>
    return
  }
}
