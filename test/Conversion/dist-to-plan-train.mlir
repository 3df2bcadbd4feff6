// RUN: zcc-opt %s --split-input-file --zcc-graph-to-dist --zcc-dist-to-plan --zcc-plan-verify --verify-diagnostics | FileCheck %s --implicit-check-not=zgraph. --implicit-check-not=func.func

// The four functions of a training step (as autodiff and the optimizer pass
// write them for an embedding, a linear layer and cross-entropy) become four
// programs of one plan, in order. Parameters, gradients and Adam's moments
// are one buffer each, shared by name across the programs; the runtime's
// scalars (loss scale, optimizer scalars) are "scalars" buffers; the loss and
// the squared gradient norm are outputs. The in-place ops write their
// targets: accumulate and fill the gradient, adamw the parameter and both
// moments; the step's adamws become one multi-tensor adamw (each tensor's
// operands in turn, then the shared scalars) and its fills, like
// @zero_grads', one multi-tensor fill. The token range is the larger of the embedding's rows (10) and
// the loss's classes (3).
// CHECK-LABEL: module attributes
// CHECK-SAME: zplan.inputs = {{\[}}["ids", @device::@b0], ["labels", @device::@b1], ["zcc.loss_scale", @device::@b2], ["zcc.optimizer_scalars", @device::@b17]]
// CHECK-SAME: zplan.memory = {activations = 1024 : i64, gradients = 208 : i64, inputs = 32 : i64, optimizer_state = 416 : i64, outputs = 12 : i64, parameters = 208 : i64, peak_live_activations = 192 : i64, scalars = 68 : i64}
// CHECK-SAME: zplan.mode = "train"
// CHECK-SAME: zplan.outputs = {{\[}}["loss", @device::@b7], ["zcc.grad_norm_sq", @device::@b16]]
// CHECK-SAME: zplan.token_range = 10 : i64
// CHECK: zplan.arena @device size 4608 alignment 256 {
// CHECK-NEXT: zplan.buffer @b0 offset 0 size 16 {kind = "input", name = "ids", type = tensor<2xi64>}
// CHECK-NEXT: zplan.buffer @b1 offset 256 size 16 {kind = "input", name = "labels", type = tensor<2xi64>}
// CHECK-NEXT: zplan.buffer @b2 offset 512 size 4 {kind = "scalars", name = "zcc.loss_scale", type = tensor<f32>}
// CHECK-NEXT: zplan.buffer @b3 offset 768 size 160 {kind = "parameter", name = "emb", {{.*}}type = tensor<10x4xf32>}
// CHECK-NEXT: zplan.buffer @b4 offset 1024 size 48 {kind = "parameter", name = "w", {{.*}}type = tensor<4x3xf32>}
// CHECK-NEXT: zplan.buffer @b5 offset {{[0-9]+}} size 32 {kind = "activation", name = "h", type = tensor<2x4xf32>}
// CHECK-NEXT: zplan.buffer @b6 offset {{[0-9]+}} size 24 {kind = "activation", name = "logits", type = tensor<2x3xf32>}
// CHECK-NEXT: zplan.buffer @b7 offset 1280 size 4 {kind = "output", name = "loss", type = tensor<f32>}
// CHECK-NEXT: zplan.buffer @b8 offset {{[0-9]+}} size 24 {kind = "activation", name = "dlogits", type = tensor<2x3xf32>}
// CHECK-NEXT: zplan.buffer @b9 offset {{[0-9]+}} size 48 {kind = "activation"
// CHECK-NEXT: zplan.buffer @b10 offset {{[0-9]+}} size 32 {kind = "activation"
// CHECK-NEXT: zplan.buffer @b11 offset {{[0-9]+}} size 32 {kind = "activation"
// CHECK-NEXT: zplan.buffer @b12 offset {{[0-9]+}} size 48 {kind = "activation", name = "dw"
// CHECK-NEXT: zplan.buffer @b13 offset 1536 size 48 {kind = "gradient", name = "w.grad", type = tensor<4x3xf32>}
// CHECK-NEXT: zplan.buffer @b14 offset {{[0-9]+}} size 160 {kind = "activation", name = "demb"
// CHECK-NEXT: zplan.buffer @b15 offset 1792 size 160 {kind = "gradient", name = "emb.grad", type = tensor<10x4xf32>}
// CHECK-NEXT: zplan.buffer @b16 offset 2048 size 8 {kind = "output", name = "zcc.grad_norm_sq", type = tensor<f64>}
// CHECK-NEXT: zplan.buffer @b17 offset 2304 size 64 {kind = "scalars", name = "zcc.optimizer_scalars", type = tensor<8xf64>}
// CHECK-NEXT: zplan.buffer @b18 offset 2560 size 48 {kind = "optimizer_state", name = "w.exp_avg", type = tensor<4x3xf32>}
// CHECK-NEXT: zplan.buffer @b19 offset 2816 size 48 {kind = "optimizer_state", name = "w.exp_avg_sq", type = tensor<4x3xf32>}
// CHECK-NEXT: zplan.buffer @b20 offset 3072 size 160 {kind = "optimizer_state", name = "emb.exp_avg", type = tensor<10x4xf32>}
// CHECK-NEXT: zplan.buffer @b21 offset 3328 size 160 {kind = "optimizer_state", name = "emb.exp_avg_sq", type = tensor<10x4xf32>}
// CHECK-NEXT: }
// CHECK-NEXT: zplan.program @micro_step {
// CHECK-NEXT: zplan.kernel "gather" ins(@device::@b3, @device::@b0) outs(@device::@b5) stream 0 params {axis = 0 : i64}
// CHECK-NEXT: zplan.kernel "matmul" ins(@device::@b5, @device::@b4) outs(@device::@b6) stream 0
// CHECK-NEXT: zplan.kernel "cross_entropy" ins(@device::@b6, @device::@b1) outs(@device::@b7) stream 0 params {reduction = "mean"}
// CHECK-NEXT: zplan.kernel "cross_entropy_grad" ins(@device::@b6, @device::@b1, @device::@b2) outs(@device::@b8) stream 0 params {reduction = "mean"}
// CHECK-NEXT: zplan.kernel "transpose" ins(@device::@b4) outs(@device::@b9) stream 0 params {perm = array<i64: 1, 0>}
// CHECK-NEXT: zplan.kernel "matmul" ins(@device::@b8, @device::@b9) outs(@device::@b10) stream 0
// CHECK-NEXT: zplan.kernel "transpose" ins(@device::@b5) outs(@device::@b11) stream 0 params {perm = array<i64: 1, 0>}
// CHECK-NEXT: zplan.kernel "matmul" ins(@device::@b11, @device::@b8) outs(@device::@b12) stream 0
// CHECK-NEXT: zplan.kernel "accumulate" ins(@device::@b12) outs(@device::@b13) stream 0
// CHECK-NEXT: zplan.kernel "gather_grad" ins(@device::@b0, @device::@b10) outs(@device::@b14) stream 0 params {axis = 0 : i64}
// CHECK-NEXT: zplan.kernel "accumulate" ins(@device::@b14) outs(@device::@b15) stream 0
// CHECK-NEXT: }
// CHECK-NEXT: zplan.program @grad_norm {
// CHECK-NEXT: zplan.kernel "sum_squares" ins(@device::@b13, @device::@b15) outs(@device::@b16) stream 0
// CHECK-NEXT: }
// CHECK-NEXT: zplan.program @optimizer_step {
// CHECK-NEXT: zplan.kernel "adamw" ins(@device::@b4, @device::@b13, @device::@b18, @device::@b19, @device::@b3, @device::@b15, @device::@b20, @device::@b21, @device::@b17) outs(@device::@b4, @device::@b18, @device::@b19, @device::@b3, @device::@b20, @device::@b21) stream 0 params {adam_w_mode = true, bias_correction = true}
// CHECK-NEXT: zplan.kernel "fill" ins() outs(@device::@b13, @device::@b15) stream 0 params {value = 0.000000e+00 : f64}
// CHECK-NEXT: }
// CHECK-NEXT: zplan.program @zero_grads {
// CHECK-NEXT: zplan.kernel "fill" ins() outs(@device::@b13, @device::@b15) stream 0 params {value = 0.000000e+00 : f64}
// CHECK-NEXT: }
module attributes {zcc.config = {optimizer = {type = "AdamW"}}} {
  func.func @micro_step(%ids: tensor<2xi64> {zgraph.name = "ids"}, %labels: tensor<2xi64> {zgraph.name = "labels"}, %seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %emb = zgraph.param "emb" trainable : tensor<10x4xf32>
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %h = zgraph.gather %emb[%ids] axis = 0 : (tensor<10x4xf32>, tensor<2xi64>) -> tensor<2x4xf32> loc("h")
    %logits = zgraph.matmul %h, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32> loc("logits")
    %loss = zgraph.cross_entropy %logits, %labels : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %dlogits = zgraph.cross_entropy_grad %logits, %labels, %seed : (tensor<2x3xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x3xf32> loc("dlogits")
    %wt = zgraph.transpose %w perm = [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
    %dh = zgraph.matmul %dlogits, %wt : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %ht = zgraph.transpose %h perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = zgraph.matmul %ht, %dlogits : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32> loc("dw")
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    zgraph.accumulate %dw into %gw : tensor<4x3xf32> into tensor<4x3xf32>
    %demb = zgraph.gather_grad %ids, %dh axis = 0 : (tensor<2xi64>, tensor<2x4xf32>) -> tensor<10x4xf32> loc("demb")
    %gemb = zgraph.state "emb" kind = "grad" : tensor<10x4xf32>
    zgraph.accumulate %demb into %gemb : tensor<10x4xf32> into tensor<10x4xf32>
    return %loss : tensor<f32>
  }
  func.func @grad_norm() -> (tensor<f64> {zgraph.name = "zcc.grad_norm_sq"}) {
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %gemb = zgraph.state "emb" kind = "grad" : tensor<10x4xf32>
    %n = zgraph.sum_squares %gw, %gemb : tensor<4x3xf32>, tensor<10x4xf32> -> tensor<f64>
    return %n : tensor<f64>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %w = zgraph.param "w" trainable : tensor<4x3xf32>
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    %mw = zgraph.state "w" kind = "exp_avg" : tensor<4x3xf32>
    %vw = zgraph.state "w" kind = "exp_avg_sq" : tensor<4x3xf32>
    zgraph.adamw %w, %gw, %mw, %vw, %scalars {adam_w_mode = true} : tensor<4x3xf32>, tensor<8xf64>
    zgraph.fill %gw value = 0.0 : tensor<4x3xf32>
    %emb = zgraph.param "emb" trainable : tensor<10x4xf32>
    %gemb = zgraph.state "emb" kind = "grad" : tensor<10x4xf32>
    %memb = zgraph.state "emb" kind = "exp_avg" : tensor<10x4xf32>
    %vemb = zgraph.state "emb" kind = "exp_avg_sq" : tensor<10x4xf32>
    zgraph.adamw %emb, %gemb, %memb, %vemb, %scalars {adam_w_mode = true} : tensor<10x4xf32>, tensor<8xf64>
    zgraph.fill %gemb value = 0.0 : tensor<10x4xf32>
    return
  }
  func.func @zero_grads() {
    %gw = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
    zgraph.fill %gw value = 0.0 : tensor<4x3xf32>
    %gemb = zgraph.state "emb" kind = "grad" : tensor<10x4xf32>
    zgraph.fill %gemb value = 0.0 : tensor<10x4xf32>
    return
  }
}

// -----

// The programs run in turn on one timeline: the activation of @micro_step
// is dead when @grad_norm starts, so @grad_norm's activation takes its bytes.
// The gradient is one buffer for both programs. Without an integer input
// the token range is 0.
// CHECK-LABEL: module attributes
// CHECK-SAME: zplan.token_range = 0 : i64
// CHECK: zplan.buffer @b3 offset [[OFFSET:[0-9]+]] size 16 {kind = "activation", name = "a", type = tensor<4xf32>}
// CHECK: zplan.buffer @b5 offset {{[0-9]+}} size 16 {kind = "gradient", name = "w.grad", type = tensor<4xf32>}
// CHECK-NEXT: zplan.buffer @b6 offset [[OFFSET]] size 16 {kind = "activation", name = "n", type = tensor<4xf32>}
// CHECK: zplan.program @micro_step {
// CHECK-NEXT: zplan.kernel "mul" ins(@device::@b0, @device::@b2) outs(@device::@b3)
// CHECK-NEXT: zplan.kernel "reduce_sum" ins(@device::@b3) outs(@device::@b4)
// CHECK-NEXT: zplan.kernel "accumulate" ins(@device::@b3) outs(@device::@b5)
// CHECK: zplan.program @grad_norm {
// CHECK-NEXT: zplan.kernel "neg" ins(@device::@b5) outs(@device::@b6)
// CHECK-NEXT: zplan.kernel "sum_squares" ins(@device::@b6) outs(@device::@b7)
module {
  func.func @micro_step(%x: tensor<4xf32> {zgraph.name = "x"}, %seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %a = zgraph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("a")
    %l = zgraph.reduce_sum %a axes = [0] keepdims = false : tensor<4xf32> -> tensor<f32> loc("l")
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    zgraph.accumulate %a into %g : tensor<4xf32> into tensor<4xf32>
    return %l : tensor<f32>
  }
  func.func @grad_norm() -> (tensor<f64> {zgraph.name = "zcc.grad_norm_sq"}) {
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    %n = zgraph.neg %g : tensor<4xf32> loc("n")
    %s = zgraph.sum_squares %n : tensor<4xf32> -> tensor<f64>
    return %s : tensor<f64>
  }
}

// -----

// SGD writes the parameter and its momentum buffer (an optimizer state); a
// low-precision copy is a parameter_copy buffer, refreshed by assign, which
// runs as the "cast" kernel.
// CHECK-LABEL: module attributes
// CHECK-SAME: zplan.memory = {activations = 0 : i64, gradients = 16 : i64, optimizer_state = 16 : i64, parameter_copies = 8 : i64, parameters = 16 : i64, peak_live_activations = 0 : i64, scalars = 64 : i64}
// CHECK: zplan.buffer @b3 offset {{[0-9]+}} size 16 {kind = "optimizer_state", name = "w.momentum", type = tensor<4xf32>}
// CHECK-NEXT: zplan.buffer @b4 offset {{[0-9]+}} size 8 {kind = "parameter_copy", name = "w.copy", type = tensor<4xf16>}
// CHECK: zplan.program @optimizer_step {
// CHECK-NEXT: zplan.kernel "sgd" ins(@device::@b1, @device::@b2, @device::@b3, @device::@b0) outs(@device::@b1, @device::@b3) stream 0 params {dampening = 0.000000e+00 : f64, nesterov}
// CHECK-NEXT: zplan.kernel "cast" ins(@device::@b1) outs(@device::@b4) stream 0
module {
  func.func @optimizer_step(%s: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    %m = zgraph.state "w" kind = "momentum" : tensor<4xf32>
    zgraph.sgd %w, %g, %m, %s {nesterov} : tensor<4xf32>, tensor<8xf64>
    %c = zgraph.state "w" kind = "copy" : tensor<4xf16>
    zgraph.assign %w into %c : tensor<4xf32> into tensor<4xf16>
    return
  }
}

// -----

// A state shared by name must have one type in every program.
module {
  func.func @micro_step() {
    %g = zgraph.state "w" kind = "grad" : tensor<4xf32>
    zgraph.fill %g value = 0.0 : tensor<4xf32>
    return
  }
  func.func @zero_grads() {
    // expected-error @+1 {{'state:w.grad' has type 'tensor<8xf32>' here but 'tensor<4xf32>' elsewhere}}
    %g = zgraph.state "w" kind = "grad" : tensor<8xf32>
    zgraph.fill %g value = 0.0 : tensor<8xf32>
    return
  }
}

// -----

// A gradient that lives for one step (zdist.step_local) is planned from its
// first write to its last read, like an activation: here it takes the bytes
// of "a", dead before the gradient is written. The report counts it among
// the gradients and as a step gradient.
// CHECK-LABEL: module attributes
// CHECK-SAME: gradients = 16 : i64
// CHECK-SAME: step_gradients = 16 : i64
// CHECK: zplan.buffer @b3 offset {{[0-9]+}} size 16 {kind = "activation", name = "b", type = tensor<4xf32>}
// CHECK-NEXT: zplan.buffer @b4 offset [[A:[0-9]+]] size 16 {kind = "activation", name = "a", type = tensor<4xf32>}
// CHECK: zplan.buffer @b6 offset [[A]] size 16 {kind = "gradient", name = "w.grad", step_local, type = tensor<4xf32>}
// CHECK: zplan.program @micro_step {
// CHECK: zplan.kernel "cast" ins(@device::@b3) outs(@device::@b6)
// CHECK: zplan.program @optimizer_step {
// CHECK-NEXT: zplan.kernel "adamw" ins(@device::@b2, @device::@b6,
module {
  func.func @micro_step(%x: tensor<4xf32> {zgraph.name = "x"}, %seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %b = zgraph.neg %x : tensor<4xf32> loc("b")
    %a = zgraph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("a")
    %l = zgraph.reduce_sum %a axes = [0] keepdims = false : tensor<4xf32> -> tensor<f32> loc("l")
    %g = zgraph.state "w" kind = "grad" {zdist.step_local} : tensor<4xf32>
    zgraph.assign %b into %g : tensor<4xf32> into tensor<4xf32>
    return %l : tensor<f32>
  }
  func.func @grad_norm() -> (tensor<f64> {zgraph.name = "zcc.grad_norm_sq"}) {
    %g = zgraph.state "w" kind = "grad" {zdist.step_local} : tensor<4xf32>
    %n = zgraph.sum_squares %g : tensor<4xf32> -> tensor<f64>
    return %n : tensor<f64>
  }
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %w = zgraph.param "w" trainable : tensor<4xf32>
    %g = zgraph.state "w" kind = "grad" {zdist.step_local} : tensor<4xf32>
    %m = zgraph.state "w" kind = "exp_avg" : tensor<4xf32>
    %v = zgraph.state "w" kind = "exp_avg_sq" : tensor<4xf32>
    zgraph.adamw %w, %g, %m, %v, %scalars {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    return
  }
  func.func @zero_grads() {
    return
  }
}
