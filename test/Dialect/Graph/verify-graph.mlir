// RUN: zcc-opt %s -split-input-file -zcc-graph-verify -verify-diagnostics | FileCheck %s

// A graph the later phases accept passes unchanged, including one parameter
// read twice under the same name and type (forward and backward use it).
// CHECK-LABEL: func.func @forward
// CHECK: zgraph.param "fc.weight" trainable : tensor<4x4xf32>
// CHECK: zgraph.matmul
// CHECK-LABEL: func.func @backward
// CHECK: zgraph.param "fc.weight" trainable : tensor<4x4xf32>
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = zgraph.param "fc.weight" trainable : tensor<4x4xf32>
  %y = zgraph.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
func.func @backward() -> tensor<4x4xf32> {
  %w = zgraph.param "fc.weight" trainable : tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}

// -----

// A dynamic input dimension must be bound before the plan can size buffers.
// expected-error @+1 {{argument 0 of @dynamic_input has type 'tensor<?x4xf32>'; zcc needs statically shaped tensors (bind dynamic dimensions with --input-shape)}}
func.func @dynamic_input(%x: tensor<?x4xf32>) {
  return
}

// -----

// Results are checked too, also on a declaration without a body.
// expected-error @+1 {{result 0 of @dynamic_output has type 'tensor<?xf32>'; zcc needs statically shaped tensors}}
func.func private @dynamic_output() -> tensor<?xf32>

// -----

// An importer that lets a foreign op through is caught here, not in lowering.
func.func private @callee()
func.func @foreign_op() {
  // expected-error @+1 {{'func.call' is not a zgraph op; the graph phase accepts only zgraph ops and func.return}}
  func.call @callee() : () -> ()
  return
}

// -----

// The weight manifest keys parameters by name, across functions.
func.func @first() -> tensor<4xf32> {
  // expected-note @+1 {{first declared here}}
  %w = zgraph.param "w" : tensor<4xf32>
  return %w : tensor<4xf32>
}
func.func @second() -> tensor<8xf32> {
  // expected-error @+1 {{parameter "w" has type 'tensor<8xf32>' here but 'tensor<4xf32>' elsewhere}}
  %w = zgraph.param "w" : tensor<8xf32>
  return %w : tensor<8xf32>
}
