// RUN: zcc-opt %s | zcc-opt | FileCheck %s
// RUN: zcc-opt %s --mlir-print-op-generic | zcc-opt | FileCheck %s

// The importer emits both kinds of parameter; the flag must survive printing.
// CHECK-LABEL: func.func @params
// CHECK: zgraph.param "fc.weight" trainable : tensor<10x100xf32>
// CHECK: zgraph.param "pos.table" : tensor<8x4xf32>
func.func @params() -> (tensor<10x100xf32>, tensor<8x4xf32>) {
  %w = zgraph.param "fc.weight" trainable : tensor<10x100xf32>
  %t = zgraph.param "pos.table" : tensor<8x4xf32>
  return %w, %t : tensor<10x100xf32>, tensor<8x4xf32>
}

// Constants carry their type in the value; the op prints no separate type.
// CHECK-LABEL: func.func @constant
// CHECK: zgraph.constant dense<5.000000e-01> : tensor<4xf32>
func.func @constant() -> tensor<4xf32> {
  %c = zgraph.constant dense<0.5> : tensor<4xf32>
  return %c : tensor<4xf32>
}

// The binary ops broadcast as NumPy does: a bias row against a batch, and a
// scalar against a matrix.
// CHECK-LABEL: func.func @binary
// CHECK: zgraph.add %{{.*}}, %{{.*}} : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
// CHECK: zgraph.sub %{{.*}}, %{{.*}} : (tensor<4x10xf32>, tensor<4x1xf32>) -> tensor<4x10xf32>
// CHECK: zgraph.mul %{{.*}}, %{{.*}} : (tensor<f32>, tensor<4x10xf32>) -> tensor<4x10xf32>
// CHECK: zgraph.div %{{.*}}, %{{.*}} : (tensor<4x10xi32>, tensor<4x10xi32>) -> tensor<4x10xi32>
func.func @binary(%x: tensor<4x10xf32>, %b: tensor<10xf32>, %c: tensor<4x1xf32>,
                  %s: tensor<f32>, %i: tensor<4x10xi32>) {
  %0 = zgraph.add %x, %b : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  %1 = zgraph.sub %0, %c : (tensor<4x10xf32>, tensor<4x1xf32>) -> tensor<4x10xf32>
  %2 = zgraph.mul %s, %1 : (tensor<f32>, tensor<4x10xf32>) -> tensor<4x10xf32>
  %3 = zgraph.div %i, %i : (tensor<4x10xi32>, tensor<4x10xi32>) -> tensor<4x10xi32>
  return
}

// Every unary op shares one format; one line each keeps them all parsed.
// CHECK-LABEL: func.func @unary
// CHECK: zgraph.neg %{{.*}} : tensor<4xf32>
// CHECK: zgraph.exp %{{.*}} : tensor<4xf32>
// CHECK: zgraph.sqrt %{{.*}} : tensor<4xf32>
// CHECK: zgraph.tanh %{{.*}} : tensor<4xf32>
// CHECK: zgraph.relu %{{.*}} : tensor<4xf32>
// CHECK: zgraph.sigmoid %{{.*}} : tensor<4xf32>
func.func @unary(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = zgraph.neg %x : tensor<4xf32>
  %1 = zgraph.exp %0 : tensor<4xf32>
  %2 = zgraph.sqrt %1 : tensor<4xf32>
  %3 = zgraph.tanh %2 : tensor<4xf32>
  %4 = zgraph.relu %3 : tensor<4xf32>
  %5 = zgraph.sigmoid %4 : tensor<4xf32>
  return %5 : tensor<4xf32>
}

// "none" is the default and is elided; "tanh" must be printed.
// CHECK-LABEL: func.func @gelu
// CHECK: zgraph.gelu %{{.*}} : tensor<4xf32>
// CHECK: zgraph.gelu %{{.*}} {approximate = "tanh"} : tensor<4xf32>
func.func @gelu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = zgraph.gelu %x : tensor<4xf32>
  %1 = zgraph.gelu %0 {approximate = "tanh"} : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// The numpy.matmul cases the verifier computes a shape for: plain, batch
// broadcast, and a rank-1 operand on either side.
// CHECK-LABEL: func.func @matmul
// CHECK: zgraph.matmul %{{.*}}, %{{.*}} : (tensor<4x100xf32>, tensor<100x10xf32>) -> tensor<4x10xf32>
// CHECK: zgraph.matmul %{{.*}}, %{{.*}} : (tensor<2x1x4x8xf32>, tensor<3x8x5xf32>) -> tensor<2x3x4x5xf32>
// CHECK: zgraph.matmul %{{.*}}, %{{.*}} : (tensor<100xf32>, tensor<100x10xf32>) -> tensor<10xf32>
// CHECK: zgraph.matmul %{{.*}}, %{{.*}} : (tensor<4x100xf32>, tensor<100xf32>) -> tensor<4xf32>
func.func @matmul(%a: tensor<4x100xf32>, %b: tensor<100x10xf32>,
                  %c: tensor<2x1x4x8xf32>, %d: tensor<3x8x5xf32>,
                  %v: tensor<100xf32>) {
  %0 = zgraph.matmul %a, %b : (tensor<4x100xf32>, tensor<100x10xf32>) -> tensor<4x10xf32>
  %1 = zgraph.matmul %c, %d : (tensor<2x1x4x8xf32>, tensor<3x8x5xf32>) -> tensor<2x3x4x5xf32>
  %2 = zgraph.matmul %v, %b : (tensor<100xf32>, tensor<100x10xf32>) -> tensor<10xf32>
  %3 = zgraph.matmul %a, %v : (tensor<4x100xf32>, tensor<100xf32>) -> tensor<4xf32>
  return
}

// A negative axis counts from the end, as in ONNX.
// CHECK-LABEL: func.func @softmax
// CHECK: zgraph.softmax %{{.*}} axis = -1 : tensor<4x10xf32>
func.func @softmax(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %0 = zgraph.softmax %x axis = -1 : tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// Scale and bias take the normalised trailing shape, from a positive and from
// a negative axis.
// CHECK-LABEL: func.func @layer_norm
// CHECK: zgraph.layer_norm %{{.*}}, %{{.*}}, %{{.*}} axis = 1 epsilon = 1.000000e-05 : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: zgraph.layer_norm %{{.*}}, %{{.*}}, %{{.*}} axis = -1 epsilon = 1.000000e-05 : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
func.func @layer_norm(%x: tensor<2x3x4xf32>, %s: tensor<3x4xf32>, %t: tensor<4xf32>) {
  %0 = zgraph.layer_norm %x, %s, %s axis = 1 epsilon = 1.0e-5 : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %1 = zgraph.layer_norm %x, %t, %t axis = -1 epsilon = 1.0e-5 : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return
}

// Shape ops: a reshape keeps the element count, a transpose permutes.
// CHECK-LABEL: func.func @shape
// CHECK: zgraph.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: zgraph.transpose %{{.*}} perm = [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
func.func @shape(%x: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
  %0 = zgraph.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = zgraph.transpose %0 perm = [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
  return %1 : tensor<4x6xf32>
}

// The loss is a 0-d tensor.
// CHECK-LABEL: func.func @mse_loss
// CHECK: zgraph.mse_loss %{{.*}}, %{{.*}} : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<f32>
func.func @mse_loss(%p: tensor<4x10xf32>, %t: tensor<4x10xf32>) -> tensor<f32> {
  %0 = zgraph.mse_loss %p, %t : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Dropout as imported (no state) and in a training step.
// CHECK-LABEL: func.func @dropout
// CHECK: zgraph.dropout %{{.*}} {key = -3 : i64, ratio = 1.000000e-01 : f64} : tensor<2x3xbf16>
// CHECK: zgraph.dropout %{{.*}} state %{{.*}} : tensor<2xi64> {key = -3 : i64, ratio = 1.000000e-01 : f64, sample_elements = 3 : i64} : tensor<2x3xbf16>
func.func @dropout(%x: tensor<2x3xbf16>, %s: tensor<2xi64>) -> (tensor<2x3xbf16>, tensor<2x3xbf16>) {
  %0 = zgraph.dropout %x {key = -3 : i64, ratio = 0.1 : f64} : tensor<2x3xbf16>
  %1 = zgraph.dropout %x state %s : tensor<2xi64> {key = -3 : i64, ratio = 0.1 : f64, sample_elements = 3 : i64} : tensor<2x3xbf16>
  return %0, %1 : tensor<2x3xbf16>, tensor<2x3xbf16>
}
