// RUN: zcc-opt %s --split-input-file --zcc-graph-mixed-precision=precision=fp16 | FileCheck %s --check-prefix=FP16
// RUN: zcc-opt %s --split-input-file --zcc-graph-mixed-precision=precision=bf16 | FileCheck %s --check-prefix=BF16
// RUN: zcc-opt %s --split-input-file --zcc-graph-mixed-precision | FileCheck %s --check-prefix=CONFIG
// RUN: zcc-opt %s --split-input-file --zcc-graph-mixed-precision=precision=fp32 | FileCheck %s --check-prefix=FP32 --implicit-check-not='f16>'
// RUN: zcc-opt %s --split-input-file --zcc-graph-mixed-precision=precision=fp16 --zcc-graph-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: not zcc-opt %s --zcc-graph-mixed-precision=precision=fp8 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: zcc-opt %s --split-input-file --zcc-graph-mixed-precision="precision=bf16 low-precision-weights" | FileCheck %s --check-prefix=WEIGHTS

// The unknown precision is named with the supported ones.
// UNKNOWN: error: unknown precision 'fp8'; use fp32, fp16 or bf16

// A linear layer with an fp32 constant and an MSE loss, and no config: the
// option alone decides. The f32 inputs are cast once at the entry (the i64
// input is not), the fp32 master weight is cast where it is used, the
// constant is converted, the ops compute in the 16-bit type, the loss takes
// fp32 operands and gives an fp32 loss, and the 16-bit output is cast back
// to its declared f32.
// FP16-LABEL: module @linear
// FP16: func.func @main(%[[X:.*]]: tensor<4x3xf32> {zgraph.name = "x"}, %[[T:.*]]: tensor<4x2xf32> {zgraph.name = "t"}, %{{.*}}: tensor<4xi64> {zgraph.name = "ids"}) -> (tensor<4x2xf32> {zgraph.name = "y"}, tensor<f32> {zgraph.name = "loss"})
// FP16-NEXT: %[[XH:.*]] = zgraph.cast %[[X]] : tensor<4x3xf32> -> tensor<4x3xf16>
// FP16-NEXT: %[[TH:.*]] = zgraph.cast %[[T]] : tensor<4x2xf32> -> tensor<4x2xf16>
// FP16-NEXT: %[[W:.*]] = zgraph.param "w" trainable : tensor<3x2xf32>
// FP16-NEXT: %[[WH:.*]] = zgraph.cast %[[W]] : tensor<3x2xf32> -> tensor<3x2xf16>
// FP16-NEXT: %[[C:.*]] = zgraph.constant dense<5.000000e-01> : tensor<f16>
// FP16-NEXT: %[[MM:.*]] = zgraph.matmul %[[XH]], %[[WH]] : (tensor<4x3xf16>, tensor<3x2xf16>) -> tensor<4x2xf16>
// FP16-NEXT: %[[Y:.*]] = zgraph.mul %[[MM]], %[[C]] : (tensor<4x2xf16>, tensor<f16>) -> tensor<4x2xf16>
// FP16-NEXT: %[[YF:.*]] = zgraph.cast %[[Y]] : tensor<4x2xf16> -> tensor<4x2xf32>
// FP16-NEXT: %[[TF:.*]] = zgraph.cast %[[TH]] : tensor<4x2xf16> -> tensor<4x2xf32>
// FP16-NEXT: %[[L:.*]] = zgraph.mse_loss %[[YF]], %[[TF]] : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
// FP16-NEXT: %[[OUT:.*]] = zgraph.cast %[[Y]] : tensor<4x2xf16> -> tensor<4x2xf32>
// FP16-NEXT: return %[[OUT]], %[[L]] : tensor<4x2xf32>, tensor<f32>

// BF16-LABEL: module @linear
// BF16: zgraph.cast %{{.*}} : tensor<4x3xf32> -> tensor<4x3xbf16>
// BF16: zgraph.param "w" trainable : tensor<3x2xf32>
// BF16-NEXT: zgraph.cast %{{.*}} : tensor<3x2xf32> -> tensor<3x2xbf16>
// BF16-NEXT: zgraph.constant dense<5.000000e-01> : tensor<bf16>
// BF16-NEXT: zgraph.matmul %{{.*}}, %{{.*}} : (tensor<4x3xbf16>, tensor<3x2xbf16>) -> tensor<4x2xbf16>
// BF16: zgraph.mse_loss %{{.*}}, %{{.*}} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
// BF16-NEXT: zgraph.cast %{{.*}} : tensor<4x2xbf16> -> tensor<4x2xf32>
// BF16-NEXT: return

// Without the option and without a config, the graph stays fp32.
// CONFIG-LABEL: module @linear
// CONFIG-NOT: zgraph.cast
// CONFIG: zgraph.matmul %{{.*}}, %{{.*}} : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
// CONFIG-NOT: zgraph.cast
// CONFIG: return

// An explicit fp32 keeps every type (no f16 or bf16 anywhere), over the
// config too.
// FP32-LABEL: module @linear
// FP32: zgraph.matmul %{{.*}}, %{{.*}} : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>

// Autodiff after the pass: the gradient flows back through the weight's cast
// and reaches the f32 accumulator as f32.
// GRAD-LABEL: module @linear
// GRAD: %[[GH:.*]] = zgraph.matmul %{{.*}}, %{{.*}} : (tensor<3x4xf16>, tensor<4x2xf16>) -> tensor<3x2xf16>
// GRAD-NEXT: %[[G:.*]] = zgraph.cast %[[GH]] : tensor<3x2xf16> -> tensor<3x2xf32>
// GRAD-NEXT: %[[ACC:.*]] = zgraph.state "w" kind = "grad" : tensor<3x2xf32>
// GRAD-NEXT: zgraph.accumulate %[[G]] into %[[ACC]] : tensor<3x2xf32> into tensor<3x2xf32>
module @linear {
  func.func @main(%x: tensor<4x3xf32> {zgraph.name = "x"}, %t: tensor<4x2xf32> {zgraph.name = "t"}, %ids: tensor<4xi64> {zgraph.name = "ids"}) -> (tensor<4x2xf32> {zgraph.name = "y"}, tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<3x2xf32>
    %c = zgraph.constant dense<0.5> : tensor<f32>
    %0 = zgraph.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %1 = zgraph.mul %0, %c : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
    %l = zgraph.mse_loss %1, %t : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
    return %1, %l : tensor<4x2xf32>, tensor<f32>
  }
}

// -----

// The precision comes from the config's bf16.enabled when the option is
// empty (and the option wins over it). An explicit conversion to fp32 now
// converts to the compute type; f64 parameters stay f64; the log-softmax
// computes in bf16 and the nll loss takes it cast back to fp32; the i64
// labels are untouched.
// CONFIG-LABEL: module @config_bf16
// CONFIG: func.func @main(%[[X:.*]]: tensor<4x3xf32> {zgraph.name = "x"}, %[[L:.*]]: tensor<4xi64> {zgraph.name = "labels"}) -> (tensor<f32> {zgraph.name = "loss"})
// CONFIG-NEXT: %[[XB:.*]] = zgraph.cast %[[X]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// CONFIG-NEXT: %[[W:.*]] = zgraph.param "w" trainable : tensor<3x5xf32>
// CONFIG-NEXT: %[[WB:.*]] = zgraph.cast %[[W]] : tensor<3x5xf32> -> tensor<3x5xbf16>
// CONFIG-NEXT: %[[P:.*]] = zgraph.param "pos" : tensor<4x5xf64>
// CONFIG-NEXT: %[[MM:.*]] = zgraph.matmul %[[XB]], %[[WB]] : (tensor<4x3xbf16>, tensor<3x5xbf16>) -> tensor<4x5xbf16>
// CONFIG-NEXT: %[[PB:.*]] = zgraph.cast %[[P]] : tensor<4x5xf64> -> tensor<4x5xbf16>
// CONFIG-NEXT: %[[S:.*]] = zgraph.add %[[MM]], %[[PB]] : (tensor<4x5xbf16>, tensor<4x5xbf16>) -> tensor<4x5xbf16>
// CONFIG-NEXT: %[[LS:.*]] = zgraph.log_softmax %[[S]] axis = -1 : tensor<4x5xbf16>
// CONFIG-NEXT: %[[LSF:.*]] = zgraph.cast %[[LS]] : tensor<4x5xbf16> -> tensor<4x5xf32>
// CONFIG-NEXT: %[[LOSS:.*]] = zgraph.nll_loss %[[LSF]], %[[L]] : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
// CONFIG-NEXT: return %[[LOSS]] : tensor<f32>

// FP16-LABEL: module @config_bf16
// FP16: zgraph.log_softmax %{{.*}} axis = -1 : tensor<4x5xf16>

// FP32-LABEL: module @config_bf16
// FP32: zgraph.log_softmax %{{.*}} axis = -1 : tensor<4x5xf32>
module @config_bf16 attributes {zcc.config = {fp16 = {enabled = false}, bf16 = {enabled = true}}} {
  func.func @main(%x: tensor<4x3xf32> {zgraph.name = "x"}, %ids: tensor<4xi64> {zgraph.name = "labels"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<3x5xf32>
    %e = zgraph.param "pos" : tensor<4x5xf64>
    %0 = zgraph.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %1 = zgraph.cast %e : tensor<4x5xf64> -> tensor<4x5xf32>
    %2 = zgraph.add %0, %1 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    %3 = zgraph.log_softmax %2 axis = -1 : tensor<4x5xf32>
    %l = zgraph.nll_loss %3, %ids : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// fp16.enabled in the config; cross-entropy also computes in fp32.
// CONFIG-LABEL: module @config_fp16
// CONFIG: %[[H:.*]] = zgraph.matmul %{{.*}}, %{{.*}} : (tensor<4x3xf16>, tensor<3x5xf16>) -> tensor<4x5xf16>
// CONFIG-NEXT: %[[HF:.*]] = zgraph.cast %[[H]] : tensor<4x5xf16> -> tensor<4x5xf32>
// CONFIG-NEXT: zgraph.cross_entropy %[[HF]], %{{.*}} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>

// BF16-LABEL: module @config_fp16
// BF16: zgraph.matmul %{{.*}}, %{{.*}} : (tensor<4x3xbf16>, tensor<3x5xbf16>) -> tensor<4x5xbf16>
module @config_fp16 attributes {zcc.config = {fp16 = {enabled = true}}} {
  func.func @main(%x: tensor<4x3xf32> {zgraph.name = "x"}, %ids: tensor<4xi64> {zgraph.name = "labels"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable : tensor<3x5xf32>
    %0 = zgraph.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %l = zgraph.cross_entropy %0, %ids : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Two layers: each 16-bit weight copy is differentiated as soon as its
// gradient is complete, so the second layer's gradient reaches its
// accumulator (widened back to fp32) before the first layer's backward
// product is built, not after the whole backward. ZeRO's buckets (and
// their collectives) then follow the backward instead of trailing it.
// GRAD-LABEL: module @two_layers
// GRAD: %[[G2H:.*]] = zgraph.matmul %{{.*}}, %{{.*}} : (tensor<3x4xf16>, tensor<4x2xf16>) -> tensor<3x2xf16>
// GRAD-NEXT: %[[G2:.*]] = zgraph.cast %[[G2H]] : tensor<3x2xf16> -> tensor<3x2xf32>
// GRAD-NEXT: %[[A2:.*]] = zgraph.state "w2" kind = "grad" : tensor<3x2xf32>
// GRAD-NEXT: zgraph.accumulate %[[G2]] into %[[A2]]
// GRAD-NEXT: zgraph.transpose
// GRAD-NEXT: zgraph.matmul %{{.*}}, %{{.*}} : (tensor<3x4xf16>, tensor<4x3xf16>) -> tensor<3x3xf16>
// GRAD-NEXT: zgraph.cast
// GRAD-NEXT: zgraph.state "w1" kind = "grad" : tensor<3x3xf32>
// GRAD-NEXT: zgraph.accumulate
// GRAD-NEXT: return
module @two_layers {
  func.func @main(%x: tensor<4x3xf32> {zgraph.name = "x"}, %t: tensor<4x2xf32> {zgraph.name = "t"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w1 = zgraph.param "w1" trainable : tensor<3x3xf32>
    %w2 = zgraph.param "w2" trainable : tensor<3x2xf32>
    %0 = zgraph.matmul %x, %w1 : (tensor<4x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
    %1 = zgraph.matmul %0, %w2 : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %l = zgraph.mse_loss %1, %t : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// With low-precision-weights (inference plans) a parameter is a bf16
// parameter used as it is, no cast; its source says the file holds f32.
// WEIGHTS-LABEL: module @weights
// WEIGHTS: %[[W:.*]] = zgraph.param "w" trainable {source = {dtype = f32, file = "m.onnx", kind = "initializer", length = 24 : i64, offset = 8 : i64}} : tensor<3x2xbf16>
// WEIGHTS-NOT: zgraph.cast %[[W]]
// WEIGHTS: zgraph.matmul %{{.*}}, %[[W]] : (tensor<4x3xbf16>, tensor<3x2xbf16>) -> tensor<4x2xbf16>
module @weights {
  func.func @main(%x: tensor<4x3xf32> {zgraph.name = "x"}, %t: tensor<4x2xf32> {zgraph.name = "t"}) -> (tensor<4x2xf32> {zgraph.name = "y"}, tensor<f32> {zgraph.name = "loss"}) {
    %w = zgraph.param "w" trainable {source = {file = "m.onnx", kind = "initializer", length = 24 : i64, offset = 8 : i64}} : tensor<3x2xf32>
    %0 = zgraph.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %l = zgraph.mse_loss %0, %t : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
    return %0, %l : tensor<4x2xf32>, tensor<f32>
  }
}
