// RUN: zcc-opt %s --split-input-file --zcc-graph-optimizer -verify-diagnostics | FileCheck %s

// AdamW: @grad_norm sums the squares of every gradient accumulator, in the
// order @micro_step fills them; @optimizer_step updates each trained
// parameter with its grad and moments, then clears the grad; @zero_grads
// only clears. The frozen parameter has no accumulator and is left alone.
// "AdamW" always decouples the weight decay, even with adam_w_mode false
// (no {adam_w_mode = false} on the ops).
// CHECK-LABEL: module attributes
// CHECK: func.func @micro_step
// CHECK: func.func @grad_norm() -> (tensor<f64> {zgraph.name = "zcc.grad_norm_sq"}) {
// CHECK-NEXT: %[[GB:.*]] = zgraph.state "b" kind = "grad" : tensor<2xf32>
// CHECK-NEXT: %[[GW:.*]] = zgraph.state "w" kind = "grad" : tensor<3x2xf32>
// CHECK-NEXT: %[[N:.*]] = zgraph.sum_squares %[[GB]], %[[GW]] : tensor<2xf32>, tensor<3x2xf32> -> tensor<f64>
// CHECK-NEXT: return %[[N]] : tensor<f64>
// CHECK: func.func @optimizer_step(%[[S:.*]]: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
// CHECK-NEXT: %[[B:.*]] = zgraph.param "b" trainable : tensor<2xf32>
// CHECK-NEXT: %[[GB:.*]] = zgraph.state "b" kind = "grad" : tensor<2xf32>
// CHECK-NEXT: %[[MB:.*]] = zgraph.state "b" kind = "exp_avg" : tensor<2xf32>
// CHECK-NEXT: %[[VB:.*]] = zgraph.state "b" kind = "exp_avg_sq" : tensor<2xf32>
// CHECK-NEXT: zgraph.adamw %[[B]], %[[GB]], %[[MB]], %[[VB]], %[[S]] : tensor<2xf32>, tensor<8xf64>
// CHECK-NEXT: zgraph.fill %[[GB]] value = 0.000000e+00 : tensor<2xf32>
// CHECK-NEXT: %[[W:.*]] = zgraph.param "w" trainable : tensor<3x2xf32>
// CHECK-NEXT: %[[GW:.*]] = zgraph.state "w" kind = "grad" : tensor<3x2xf32>
// CHECK-NEXT: %[[MW:.*]] = zgraph.state "w" kind = "exp_avg" : tensor<3x2xf32>
// CHECK-NEXT: %[[VW:.*]] = zgraph.state "w" kind = "exp_avg_sq" : tensor<3x2xf32>
// CHECK-NEXT: zgraph.adamw %[[W]], %[[GW]], %[[MW]], %[[VW]], %[[S]] : tensor<3x2xf32>, tensor<8xf64>
// CHECK-NEXT: zgraph.fill %[[GW]] value = 0.000000e+00 : tensor<3x2xf32>
// CHECK-NEXT: return
// CHECK: func.func @zero_grads() {
// CHECK-NEXT: %[[GB:.*]] = zgraph.state "b" kind = "grad" : tensor<2xf32>
// CHECK-NEXT: zgraph.fill %[[GB]] value = 0.000000e+00 : tensor<2xf32>
// CHECK-NEXT: %[[GW:.*]] = zgraph.state "w" kind = "grad" : tensor<3x2xf32>
// CHECK-NEXT: zgraph.fill %[[GW]] value = 0.000000e+00 : tensor<3x2xf32>
// CHECK-NEXT: return
module attributes {zcc.config = {optimizer = {type = "AdamW", params = {lr = 1.0e-3 : f64, weight_decay = 0.01 : f64, adam_w_mode = false}}}} {
  func.func @micro_step(%x: tensor<4x3xf32> {zgraph.name = "x"}, %seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<3x2xf32>
    %b = zgraph.param "b" trainable : tensor<2xf32>
    %f = zgraph.param "frozen" : tensor<2xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<2xf32>
    %db = zgraph.constant dense<1.0> : tensor<2xf32>
    zgraph.accumulate %db into %gb : tensor<2xf32> into tensor<2xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<3x2xf32>
    %dw = zgraph.constant dense<1.0> : tensor<3x2xf32>
    zgraph.accumulate %dw into %gw : tensor<3x2xf32> into tensor<3x2xf32>
    return %seed : tensor<f32>
  }
}

// -----

// DeepSpeed's "Adam" with adam_w_mode false is torch.optim.Adam (L2 weight
// decay): the flag reaches the op.
// CHECK-LABEL: module attributes
// CHECK: func.func @optimizer_step
// CHECK: zgraph.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {adam_w_mode = false} : tensor<4xf32>, tensor<8xf64>
module attributes {zcc.config = {optimizer = {type = "Adam", params = {lr = 1.0e-3 : f64, adam_w_mode = false}}}} {
  func.func @micro_step(%seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    zgraph.accumulate %w into %g : tensor<4xf32> into tensor<4xf32>
    return %seed : tensor<f32>
  }
}

// -----

// "Adam" without adam_w_mode is AdamW, as in DeepSpeed (the default flag is
// elided).
// CHECK-LABEL: module attributes
// CHECK: func.func @optimizer_step
// CHECK: zgraph.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<8xf64>
module attributes {zcc.config = {optimizer = {type = "adam"}}} {
  func.func @micro_step(%seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    zgraph.accumulate %w into %g : tensor<4xf32> into tensor<4xf32>
    return %seed : tensor<f32>
  }
}

// -----

// SGD: a momentum buffer instead of Adam's moments; dampening and nesterov
// become attributes (the momentum itself is a runtime scalar).
// CHECK-LABEL: module attributes
// CHECK: func.func @optimizer_step(%[[S:.*]]: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
// CHECK-NEXT: %[[W:.*]] = zgraph.param "w" trainable : tensor<4xf32>
// CHECK-NEXT: %[[G:.*]] = zgraph.state "w" kind = "grad" : tensor<4xf32>
// CHECK-NEXT: %[[M:.*]] = zgraph.state "w" kind = "momentum" : tensor<4xf32>
// CHECK-NEXT: zgraph.sgd %[[W]], %[[G]], %[[M]], %[[S]] {dampening = 1.000000e-01 : f64, nesterov} : tensor<4xf32>, tensor<8xf64>
// CHECK-NEXT: zgraph.fill %[[G]] value = 0.000000e+00 : tensor<4xf32>
// CHECK-NEXT: return
module attributes {zcc.config = {optimizer = {type = "SGD", params = {lr = 0.1 : f64, momentum = 0.9 : f64, dampening = 0.1 : f64, nesterov = true}}}} {
  func.func @micro_step(%seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    zgraph.accumulate %w into %g : tensor<4xf32> into tensor<4xf32>
    return %seed : tensor<f32>
  }
}

// -----

// Plain SGD: no dampening printed (the default 0), no nesterov; an integer
// dampening in the config is read as a number.
// CHECK-LABEL: module attributes
// CHECK: func.func @optimizer_step
// CHECK: zgraph.sgd %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<8xf64>
module attributes {zcc.config = {optimizer = {type = "sgd", params = {lr = 1 : i64, dampening = 0 : i64}}}} {
  func.func @micro_step(%seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    zgraph.accumulate %w into %g : tensor<4xf32> into tensor<4xf32>
    return %seed : tensor<f32>
  }
}

// -----

// Lion: one state, exp_avg, per parameter; its update reads the scalars.
// CHECK-LABEL: module attributes
// CHECK: func.func @optimizer_step(%[[S:.*]]: tensor<8xf64>
// CHECK: %[[W:.*]] = zgraph.param "w" trainable
// CHECK: %[[G:.*]] = zgraph.state "w" kind = "grad"
// CHECK: %[[M:.*]] = zgraph.state "w" kind = "exp_avg"
// CHECK: zgraph.lion %[[W]], %[[G]], %[[M]], %[[S]] : tensor<4xf32>, tensor<8xf64>
// CHECK-NOT: exp_avg_sq
module attributes {zcc.config = {optimizer = {type = "lion", params = {lr = 1.0e-4 : f64}}}} {
  func.func @micro_step(%seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    zgraph.accumulate %w into %g : tensor<4xf32> into tensor<4xf32>
    return %seed : tensor<f32>
  }
}

// -----

// Lamb: Adam's two moments, in two halves (the moments and the sums of
// squares, then the step from them) that carry FusedLamb's options, here
// the config's (defaults elided: bias_correction true, min_coeff 0.01).
// CHECK-LABEL: module attributes
// CHECK: func.func @optimizer_step(%[[S:.*]]: tensor<8xf64>
// CHECK: %[[W:.*]] = zgraph.param "w" trainable
// CHECK: %[[G:.*]] = zgraph.state "w" kind = "grad"
// CHECK: %[[M:.*]] = zgraph.state "w" kind = "exp_avg"
// CHECK: %[[V:.*]] = zgraph.state "w" kind = "exp_avg_sq"
// CHECK: %[[SQ:.*]] = zgraph.lamb_moments %[[W]], %[[G]], %[[M]], %[[V]], %[[S]] {eps_inside_sqrt = true} : tensor<4xf32>, tensor<8xf64> -> tensor<2xf64>
// CHECK: zgraph.lamb_step %[[W]], %[[M]], %[[V]], %[[S]], %[[SQ]] {eps_inside_sqrt = true, max_coeff = 3.000000e-01 : f64} : tensor<4xf32>, tensor<8xf64>, tensor<2xf64>
module attributes {zcc.config = {optimizer = {type = "lamb", params = {lr = 1.0e-3 : f64, max_coeff = 0.3 : f64, eps_inside_sqrt = true}}}} {
  func.func @micro_step(%seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    zgraph.accumulate %w into %g : tensor<4xf32> into tensor<4xf32>
    return %seed : tensor<f32>
  }
}

// -----

// An optimizer zcc does not implement is named, with the supported ones.
// expected-error @+1 {{optimizer 'OneBitLamb' is not supported yet; zcc implements Adam, AdamW, Adagrad, Lamb, Lion and SGD}}
module attributes {zcc.config = {optimizer = {type = "OneBitLamb", params = {lr = 1.0e-3 : f64}}}} {
  func.func @micro_step(%seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    zgraph.accumulate %w into %g : tensor<4xf32> into tensor<4xf32>
    return %seed : tensor<f32>
  }
}

// -----

// A training plan needs an optimizer section.
// expected-error @+1 {{a training plan needs an optimizer: add an "optimizer" section to the config (for example {"type": "AdamW", "params": {"lr": 1e-4}})}}
module attributes {zcc.config = {train_batch_size = 8 : i64}} {
  func.func @micro_step(%seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    zgraph.accumulate %w into %g : tensor<4xf32> into tensor<4xf32>
    return %seed : tensor<f32>
  }
}

// -----

// AMSGrad's extra state is not implemented: refused rather than ignored.
// expected-error @+1 {{optimizer.params.amsgrad: AMSGrad is not supported yet; remove it}}
module attributes {zcc.config = {optimizer = {type = "AdamW", params = {amsgrad = true}}}} {
  func.func @micro_step(%seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    zgraph.accumulate %w into %g : tensor<4xf32> into tensor<4xf32>
    return %seed : tensor<f32>
  }
}

// -----

// The optimizer step is built from autodiff's output.
// expected-error @+1 {{the optimizer pass needs @micro_step (run zcc-graph-autodiff first)}}
module attributes {zcc.config = {optimizer = {type = "AdamW"}}} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// No gradient accumulator: nothing to optimise.
module attributes {zcc.config = {optimizer = {type = "AdamW"}}} {
  // expected-error @+1 {{the model has no trainable parameter that the loss depends on}}
  func.func @micro_step(%seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    return %seed : tensor<f32>
  }
}
