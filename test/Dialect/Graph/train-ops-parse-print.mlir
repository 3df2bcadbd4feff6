// RUN: zcc-opt %s | zcc-opt | FileCheck %s
// RUN: zcc-opt %s --mlir-print-op-generic | zcc-opt | FileCheck %s

// The gradient ops autodiff emits and the training-state ops the optimizer
// pass and the plan lowering consume, each printed and parsed back.

// Softmax and log-softmax gradients take the forward output and an axis,
// which may count from the end.
// CHECK-LABEL: func.func @activation_grads
// CHECK: zgraph.softmax_grad %{{.*}}, %{{.*}} axis = -1 : tensor<4x8xf32>
// CHECK: zgraph.log_softmax_grad %{{.*}}, %{{.*}} axis = 1 : tensor<4x8xf32>
func.func @activation_grads(%y: tensor<4x8xf32>, %dy: tensor<4x8xf32>) {
  %0 = zgraph.softmax_grad %y, %dy axis = -1 : tensor<4x8xf32>
  %1 = zgraph.log_softmax_grad %y, %dy axis = 1 : tensor<4x8xf32>
  return
}

// gelu_grad's "none" default is elided; "tanh" must survive printing.
// CHECK-LABEL: func.func @gelu_grad
// CHECK: zgraph.gelu_grad %{{.*}}, %{{.*}} : tensor<4x8xf32>
// CHECK: zgraph.gelu_grad %{{.*}}, %{{.*}} {approximate = "tanh"} : tensor<4x8xf32>
func.func @gelu_grad(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>) {
  %0 = zgraph.gelu_grad %x, %dy : tensor<4x8xf32>
  %1 = zgraph.gelu_grad %x, %dy {approximate = "tanh"} : tensor<4x8xf32>
  return
}

// Three results each: the input's gradient and the scale's and bias's (of the
// scale's type), and attention's q, k, v gradients with the causal flag on and
// off.
// CHECK-LABEL: func.func @multi_result_grads
// CHECK: zgraph.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} axis = 1 epsilon = 1.000000e-05 : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK: zgraph.layer_norm_grad %{{.*}}, %{{.*}}, %[[DY:.*]] addend %[[DY]] axis = 1 epsilon = 1.000000e-05 : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK: zgraph.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale = 1.250000e-01 causal : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
// CHECK: zgraph.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale = 5.000000e-01 : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
func.func @multi_result_grads(%x: tensor<2x3x4xf32>, %s: tensor<3x4xf32>, %dx: tensor<2x3x4xf32>,
                              %q: tensor<2x4x8xf32>, %kv: tensor<2x6x8xf32>, %dq: tensor<2x4x8xf32>) {
  %0:3 = zgraph.layer_norm_grad %x, %s, %dx axis = 1 epsilon = 1.0e-5 : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
  %a:3 = zgraph.layer_norm_grad %x, %s, %dx addend %dx axis = 1 epsilon = 1.0e-5 : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
  %1:3 = zgraph.attention_grad %q, %kv, %kv, %dq scale = 0.125 causal : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
  %2:3 = zgraph.attention_grad %q, %kv, %kv, %dq scale = 0.5 : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
  return
}

// The forward with its saved statistics, and a backward that reads them.
// CHECK-LABEL: func.func @attention_saved_statistics
// CHECK: %[[O:.*]], %[[LSE:.*]] = zgraph.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.250000e-01 causal : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>) -> tensor<2x4x8xf32>, tensor<2x4xf32>
// CHECK: zgraph.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} saved(%[[O]], %[[LSE]] : tensor<2x4x8xf32>, tensor<2x4xf32>) scale = 1.250000e-01 causal : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
func.func @attention_saved_statistics(%q: tensor<2x4x8xf32>, %kv: tensor<2x6x8xf32>, %dq: tensor<2x4x8xf32>) {
  %o, %lse = zgraph.attention %q, %kv, %kv scale = 0.125 causal : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>) -> tensor<2x4x8xf32>, tensor<2x4xf32>
  %0:3 = zgraph.attention_grad %q, %kv, %kv, %dq saved(%o, %lse : tensor<2x4x8xf32>, tensor<2x4xf32>) scale = 0.125 causal : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
  return
}

// The loss gradients: a scalar grad for "mean" (the elided default) and
// "sum", the labels' shape for "none"; ignore_index is optional; i32 labels
// are accepted as well as i64.
// CHECK-LABEL: func.func @loss_grads
// CHECK: zgraph.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
// CHECK: zgraph.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -100 : i64, reduction = "sum"} : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK: zgraph.nll_loss_grad %{{.*}}, %{{.*}}, %{{.*}} {reduction = "none"} : (tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x8xf32>
// CHECK: zgraph.mse_loss_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
func.func @loss_grads(%x: tensor<4x8xf32>, %labels: tensor<4xi64>, %labels32: tensor<4xi32>,
                      %dl: tensor<f32>, %dls: tensor<4xf32>, %t: tensor<4x8xf32>) {
  %0 = zgraph.cross_entropy_grad %x, %labels, %dl : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  %1 = zgraph.cross_entropy_grad %x, %labels32, %dl {ignore_index = -100 : i64, reduction = "sum"} : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = zgraph.nll_loss_grad %x, %labels, %dls {reduction = "none"} : (tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x8xf32>
  %3 = zgraph.mse_loss_grad %x, %t, %dl : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return
}

// An embedding's backward (indices of rank 2 gathered on axis 0, and on a
// middle axis), and a strided slice's window placed back in zeros.
// CHECK-LABEL: func.func @scatter_grads
// CHECK: zgraph.gather_grad %{{.*}}, %{{.*}} axis = 0 : (tensor<2x3xi64>, tensor<2x3x8xf32>) -> tensor<50x8xf32>
// CHECK: zgraph.gather_grad %{{.*}}, %{{.*}} axis = -2 : (tensor<2x3xi64>, tensor<4x2x3x8xf32>) -> tensor<4x50x8xf32>
// CHECK: zgraph.slice_grad %{{.*}} starts = [0, 2] limits = [4, 10] strides = [2, 2] : tensor<2x4xf32> -> tensor<4x10xf32>
func.func @scatter_grads(%ids: tensor<2x3xi64>, %de: tensor<2x3x8xf32>, %dm: tensor<4x2x3x8xf32>,
                         %dw: tensor<2x4xf32>) {
  %0 = zgraph.gather_grad %ids, %de axis = 0 : (tensor<2x3xi64>, tensor<2x3x8xf32>) -> tensor<50x8xf32>
  %1 = zgraph.gather_grad %ids, %dm axis = -2 : (tensor<2x3xi64>, tensor<4x2x3x8xf32>) -> tensor<4x50x8xf32>
  %2 = zgraph.slice_grad %dw starts = [0, 2] limits = [4, 10] strides = [2, 2] : tensor<2x4xf32> -> tensor<4x10xf32>
  return
}

// Every state kind; an f16 gradient accumulated into an f32 state; fill and
// assign of a low-precision copy; the f64 squared norm of several operands.
// CHECK-LABEL: func.func @states
// CHECK: %[[W:.*]] = zgraph.param "fc.weight" trainable : tensor<4x8xf32>
// CHECK: %[[G:.*]] = zgraph.state "fc.weight" kind = "grad" : tensor<4x8xf32>
// CHECK: %[[M:.*]] = zgraph.state "fc.weight" kind = "exp_avg" : tensor<4x8xf32>
// CHECK: zgraph.state "fc.weight" kind = "exp_avg_sq" : tensor<4x8xf32>
// CHECK: zgraph.state "fc.weight" kind = "momentum" : tensor<4x8xf32>
// CHECK: %[[C:.*]] = zgraph.state "fc.weight" kind = "copy" : tensor<4x8xf16>
// CHECK: zgraph.accumulate %{{.*}} into %[[G]] : tensor<4x8xf16> into tensor<4x8xf32>
// CHECK: zgraph.fill %[[G]] value = 0.000000e+00 : tensor<4x8xf32>
// CHECK: zgraph.fill %[[W]] value = 2.500000e-01 : tensor<4x8xf32>
// CHECK: zgraph.assign %[[W]] into %[[C]] : tensor<4x8xf32> into tensor<4x8xf16>
// CHECK: zgraph.sum_squares %[[G]], %[[M]] : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<f64>
func.func @states(%dw: tensor<4x8xf16>) -> tensor<f64> {
  %w = zgraph.param "fc.weight" trainable : tensor<4x8xf32>
  %g = zgraph.state "fc.weight" kind = "grad" : tensor<4x8xf32>
  %m = zgraph.state "fc.weight" kind = "exp_avg" : tensor<4x8xf32>
  %v = zgraph.state "fc.weight" kind = "exp_avg_sq" : tensor<4x8xf32>
  %mo = zgraph.state "fc.weight" kind = "momentum" : tensor<4x8xf32>
  %c = zgraph.state "fc.weight" kind = "copy" : tensor<4x8xf16>
  zgraph.accumulate %dw into %g : tensor<4x8xf16> into tensor<4x8xf32>
  zgraph.fill %g value = 0.0 : tensor<4x8xf32>
  zgraph.fill %w value = 0.25 : tensor<4x8xf32>
  zgraph.assign %w into %c : tensor<4x8xf32> into tensor<4x8xf16>
  %n = zgraph.sum_squares %g, %m : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<f64>
  return %n : tensor<f64>
}

// A product added into an fp32 accumulator, with either operand transposed.
// CHECK-LABEL: func.func @accumulate_product
// CHECK: zgraph.accumulate_matmul %{{.*}}, %{{.*}} into %[[G:.*]] {transpose_lhs} : (tensor<16x4xbf16>, tensor<16x8xbf16>) into tensor<4x8xf32>
// CHECK: zgraph.accumulate_matmul %{{.*}}, %{{.*}} into %[[G]] {transpose_rhs} : (tensor<4x16xf32>, tensor<8x16xf32>) into tensor<4x8xf32>
func.func @accumulate_product(%x: tensor<16x4xbf16>, %dy: tensor<16x8xbf16>, %a: tensor<4x16xf32>, %b: tensor<8x16xf32>) {
  %g = zgraph.state "fc.weight" kind = "grad" : tensor<4x8xf32>
  zgraph.accumulate_matmul %x, %dy into %g {transpose_lhs} : (tensor<16x4xbf16>, tensor<16x8xbf16>) into tensor<4x8xf32>
  zgraph.accumulate_matmul %a, %b into %g {transpose_rhs} : (tensor<4x16xf32>, tensor<8x16xf32>) into tensor<4x8xf32>
  return
}

// adam_w_mode defaults to true and is elided, false is printed; SGD's
// dampening defaults to 0 and nesterov is a unit flag.
// CHECK-LABEL: func.func @optimizers
// CHECK: zgraph.adamw %[[W:.*]], %[[G:.*]], %[[M:.*]], %[[V:.*]], %[[S:.*]] : tensor<4x8xf32>, tensor<8xf64>
// CHECK-NEXT: zgraph.adamw %[[W]], %[[G]], %[[M]], %[[V]], %[[S]] {adam_w_mode = false} : tensor<4x8xf32>, tensor<8xf64>
// CHECK-NEXT: zgraph.sgd %[[W]], %[[G]], %[[MO:.*]], %[[S]] : tensor<4x8xf32>, tensor<8xf64>
// CHECK-NEXT: zgraph.sgd %[[W]], %[[G]], %[[MO]], %[[S]] {dampening = 5.000000e-01 : f64, nesterov} : tensor<4x8xf32>, tensor<8xf64>
// CHECK-NEXT: zgraph.lion %[[W]], %[[G]], %[[M]], %[[S]] : tensor<4x8xf32>, tensor<8xf64>
// CHECK-NEXT: zgraph.adagrad %[[W]], %[[G]], %[[V]], %[[S]] {lr_decay = 1.000000e-02 : f64} : tensor<4x8xf32>, tensor<8xf64>
// A 16-bit gradient of an f32 parameter (one copied to the host in 16
// bits) prints its type after `grad`.
// CHECK-NEXT: %[[H:.*]] = zgraph.state "w" kind = "host_grad" : tensor<4x8xbf16>
// CHECK-NEXT: zgraph.adamw %[[W]], %[[H]], %[[M]], %[[V]], %[[S]] : tensor<4x8xf32> grad tensor<4x8xbf16>, tensor<8xf64>
func.func @optimizers(%scalars: tensor<8xf64>) {
  %w = zgraph.param "w" trainable : tensor<4x8xf32>
  %g = zgraph.state "w" kind = "grad" : tensor<4x8xf32>
  %m = zgraph.state "w" kind = "exp_avg" : tensor<4x8xf32>
  %v = zgraph.state "w" kind = "exp_avg_sq" : tensor<4x8xf32>
  %mo = zgraph.state "w" kind = "momentum" : tensor<4x8xf32>
  zgraph.adamw %w, %g, %m, %v, %scalars : tensor<4x8xf32>, tensor<8xf64>
  zgraph.adamw %w, %g, %m, %v, %scalars {adam_w_mode = false} : tensor<4x8xf32>, tensor<8xf64>
  zgraph.sgd %w, %g, %mo, %scalars : tensor<4x8xf32>, tensor<8xf64>
  zgraph.sgd %w, %g, %mo, %scalars {dampening = 0.5 : f64, nesterov} : tensor<4x8xf32>, tensor<8xf64>
  zgraph.lion %w, %g, %m, %scalars : tensor<4x8xf32>, tensor<8xf64>
  zgraph.adagrad %w, %g, %v, %scalars {lr_decay = 0.01 : f64} : tensor<4x8xf32>, tensor<8xf64>
  %h = zgraph.state "w" kind = "host_grad" : tensor<4x8xbf16>
  zgraph.adamw %w, %h, %m, %v, %scalars : tensor<4x8xf32> grad tensor<4x8xbf16>, tensor<8xf64>
  return
}
