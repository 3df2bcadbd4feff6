// RUN: zcc-opt %s --allow-unregistered-dialect --split-input-file --zcc-graph-to-dist --zcc-dist-to-plan --zcc-plan-verify --verify-diagnostics | FileCheck %s --implicit-check-not=zgraph. --implicit-check-not=func.func

// A chain of activations: persistent buffers first (input, parameter,
// output), then activations that share bytes once the earlier one is dead.
// CHECK-LABEL: module attributes
// CHECK-SAME: zplan.inputs = {{\[}}["x", @device::@b0]]
// CHECK-SAME: zplan.memory = {activations = 512 : i64, inputs = 64 : i64, outputs = 64 : i64, parameters = 64 : i64, peak_live_activations = 128 : i64}
// CHECK-SAME: zplan.mesh = {axis_names = ["dp"], axis_sizes = array<i64: 1>}
// CHECK-SAME: zplan.mode = "infer"
// CHECK-SAME: zplan.outputs = {{\[}}["y", @device::@b5]]
// CHECK: zplan.arena @device size 1280 alignment 256 {
// CHECK-NEXT: zplan.buffer @b0 offset 0 size 64 {kind = "input", name = "x", type = tensor<4x4xf32>}
// CHECK-NEXT: zplan.buffer @b1 offset 256 size 64 {kind = "parameter", name = "w", random_init = {kind = "normal", std = 2.000000e-02 : f64}, type = tensor<4x4xf32>, weight = {file = "m.onnx", length = 64 : i64, offset = 10 : i64}}
// The three activations alternate between two slots: a, b live together,
// then b, c; a and c share bytes.
// CHECK-NEXT: zplan.buffer @b2 offset 768 size 64 {kind = "activation", name = "a"
// CHECK-NEXT: zplan.buffer @b3 offset 1024 size 64 {kind = "activation", name = "b"
// CHECK-NEXT: zplan.buffer @b4 offset 768 size 64 {kind = "activation", name = "c"
// CHECK-NEXT: zplan.buffer @b5 offset 512 size 64 {kind = "output", name = "y"
// CHECK: zplan.program @infer {
// CHECK-NEXT: zplan.kernel "matmul" ins(@device::@b0, @device::@b1) outs(@device::@b2) stream 0
// CHECK-NEXT: zplan.kernel "relu" ins(@device::@b2) outs(@device::@b3) stream 0
// CHECK-NEXT: zplan.kernel "softmax" ins(@device::@b3) outs(@device::@b4) stream 0 params {axis = -1 : i64}
// CHECK-NEXT: zplan.kernel "add" ins(@device::@b4, @device::@b0) outs(@device::@b5) stream 0
module {
  func.func @main(%x: tensor<4x4xf32> {zgraph.name = "x"}) -> (tensor<4x4xf32> {zgraph.name = "y"}) {
    %w = zgraph.param "w" trainable {source = {file = "m.onnx", offset = 10 : i64, length = 64 : i64}} : tensor<4x4xf32>
    %a = zgraph.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("a")
    %b = zgraph.relu %a : tensor<4x4xf32> loc("b")
    %c = zgraph.softmax %b axis = -1 : tensor<4x4xf32> loc("c")
    %y = zgraph.add %c, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("y")
    return %y : tensor<4x4xf32>
  }
}

// -----

// Returning an input (or a parameter) copies it into an output buffer of its
// own; constants keep their value; a layer norm's scale is drawn as ones.
// CHECK-LABEL: module attributes
// CHECK: zplan.buffer @b1 offset {{[0-9]+}} size 4 {kind = "constant", name = "constant1", type = tensor<f32>, value = dense<2.000000e+00> : tensor<f32>}
// CHECK: zplan.buffer @b2 offset {{[0-9]+}} size 8 {kind = "parameter", name = "ln.weight", random_init = {kind = "ones"}
// CHECK: zplan.buffer @b3 offset {{[0-9]+}} size 8 {kind = "parameter", name = "ln.bias", random_init = {kind = "zeros"}
// CHECK: kind = "output", name = "same"
// CHECK: zplan.kernel "layer_norm"
// CHECK-SAME: params {axis = 1 : i64, epsilon = 1.000000e-05 : f64}
// CHECK: zplan.kernel "mul"
// CHECK: zplan.kernel "copy" ins(@device::@b0) outs(@device::@b{{[0-9]+}}) stream 0
module {
  func.func @main(%x: tensor<3x2xf32> {zgraph.name = "x"}) -> (tensor<3x2xf32> {zgraph.name = "scaled"}, tensor<3x2xf32> {zgraph.name = "same"}) {
    %c = zgraph.constant dense<2.0> : tensor<f32>
    %g = zgraph.param "ln.weight" trainable : tensor<2xf32>
    %b = zgraph.param "ln.bias" trainable : tensor<2xf32>
    %n = zgraph.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-5 : (tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
    %y = zgraph.mul %n, %c : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
    return %y, %x : tensor<3x2xf32>, tensor<3x2xf32>
  }
}

// -----

// Ops from outside zgraph cannot become kernels.
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{'test.foo' cannot be lowered to a kernel}}
    %y = "test.foo"(%x) : (tensor<2xf32>) -> tensor<2xf32>
    return %y : tensor<2xf32>
  }
}

// -----

// A reshape's result is a view of its input: both buffers have the same
// bytes, which stay live until the view's last reader (the input's bytes
// are not reused by c while the view is still read), and the reshape runs
// in place. A reshape of a persistent buffer (the input x) is a copy.
// CHECK-LABEL: module attributes
// CHECK: zplan.buffer @b1 offset [[A:[0-9]+]] size 64 {kind = "activation", name = "a"
// CHECK-NEXT: zplan.buffer @b2 offset [[A]] size 64 {kind = "activation", name = "view", type = tensor<16xf32>}
// CHECK-NEXT: zplan.buffer @b3 offset [[C:[0-9]+]] size 64 {kind = "activation", name = "c"
// CHECK-NEXT: zplan.buffer @b4 offset [[C]] size 64 {kind = "activation", name = "d"
// CHECK-NEXT: zplan.buffer @b5 offset [[XV:[0-9]+]] size 64 {kind = "activation", name = "xview"
// CHECK-NOT: offset [[A]] size
// CHECK: zplan.kernel "relu" ins(@device::@b0) outs(@device::@b1)
// CHECK-NEXT: zplan.kernel "reshape" ins(@device::@b1) outs(@device::@b2)
module {
  func.func @main(%x: tensor<4x4xf32> {zgraph.name = "x"}) -> (tensor<16xf32> {zgraph.name = "y"}) {
    %a = zgraph.relu %x : tensor<4x4xf32> loc("a")
    %v = zgraph.reshape %a : tensor<4x4xf32> -> tensor<16xf32> loc("view")
    %c = zgraph.relu %x : tensor<4x4xf32> loc("c")
    %d = zgraph.reshape %c : tensor<4x4xf32> -> tensor<16xf32> loc("d")
    %xv = zgraph.reshape %x : tensor<4x4xf32> -> tensor<16xf32> loc("xview")
    %s = zgraph.add %v, %d : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc("s")
    %y = zgraph.add %s, %xv : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc("y")
    return %y : tensor<16xf32>
  }
}
