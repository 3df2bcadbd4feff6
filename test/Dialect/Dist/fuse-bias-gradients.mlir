// RUN: zcc-opt %s -split-input-file -zcc-dist-fuse-bias-gradients | FileCheck %s

// A bias gradient (the sum of dY over its rows) accumulated next to the
// weight gradient's product over the same dY (viewed as a matrix) becomes
// the product's bias target, where the later of the two ran; the sum and
// its accumulation are gone. The marks stay.
// CHECK-LABEL: func.func @accumulated
// CHECK-SAME: (%[[X:.*]]: tensor<16x4xbf16>, %[[DY:.*]]: tensor<2x8x3xbf16>)
// CHECK-NOT: zgraph.reduce_sum
// CHECK: %[[B:.*]] = zgraph.state "b" kind = "grad" : tensor<3xf32>
// CHECK-NOT: zgraph.accumulate %
// CHECK: %[[ROWS:.*]] = zgraph.reshape %[[DY]]
// CHECK: %[[W:.*]] = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
// CHECK-NEXT: zgraph.accumulate_matmul %[[X]], %[[ROWS]] into %[[W]] bias %[[B]] {transpose_lhs, zdist.stage = 0 : i64} : (tensor<16x4xbf16>, tensor<16x3xbf16>) into tensor<4x3xf32>, tensor<3xf32>
// CHECK-NEXT: return
func.func @accumulated(%x: tensor<16x4xbf16>, %dy: tensor<2x8x3xbf16>) {
  %0 = zgraph.reduce_sum %dy axes = [0, 1] keepdims = false : tensor<2x8x3xbf16> -> tensor<3xbf16>
  %b = zgraph.state "b" kind = "grad" : tensor<3xf32>
  zgraph.accumulate %0 into %b {zdist.stage = 0 : i64} : tensor<3xbf16> into tensor<3xf32>
  %1 = zgraph.reshape %dy : tensor<2x8x3xbf16> -> tensor<16x3xbf16>
  %w = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
  zgraph.accumulate_matmul %x, %1 into %w {transpose_lhs, zdist.stage = 0 : i64} : (tensor<16x4xbf16>, tensor<16x3xbf16>) into tensor<4x3xf32>
  return
}

// -----

// A gradient that lives for one step: the assign pairs with an
// `overwrite` product, and the bias's write moves up to the product where
// the product ran first.
// CHECK-LABEL: func.func @overwritten
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xf32>, %[[DY:.*]]: tensor<8x3xf32>)
// CHECK: zgraph.accumulate_matmul %[[X]], %[[DY]] into %{{.*}} bias %{{.*}} {overwrite, transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>) into tensor<4x3xf32>, tensor<3xf32>
// CHECK-NOT: zgraph.reduce_sum
// CHECK-NOT: zgraph.assign
// CHECK: return
func.func @overwritten(%x: tensor<8x4xf32>, %dy: tensor<8x3xf32>) {
  %w = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
  %b = zgraph.state "b" kind = "grad" : tensor<3xf32>
  zgraph.accumulate_matmul %x, %dy into %w {overwrite, transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>) into tensor<4x3xf32>
  %0 = zgraph.reduce_sum %dy axes = [0] keepdims = false : tensor<8x3xf32> -> tensor<3xf32>
  zgraph.assign %0 into %b : tensor<3xf32> into tensor<3xf32>
  return
}

// -----

// Left alone: an assign beside an adding product (one `overwrite` serves
// both targets).
// CHECK-LABEL: func.func @assign_beside_addition
// CHECK-NOT: bias %
// CHECK: zgraph.reduce_sum
// CHECK: zgraph.assign
func.func @assign_beside_addition(%x: tensor<8x4xbf16>, %dy: tensor<8x3xbf16>) {
  %w = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
  %b = zgraph.state "b" kind = "grad" : tensor<3xf32>
  %0 = zgraph.reduce_sum %dy axes = [0] keepdims = false : tensor<8x3xbf16> -> tensor<3xbf16>
  zgraph.assign %0 into %b : tensor<3xbf16> into tensor<3xf32>
  zgraph.accumulate_matmul %x, %dy into %w {transpose_lhs} : (tensor<8x4xbf16>, tensor<8x3xbf16>) into tensor<4x3xf32>
  return
}

// -----

// Left alone: a sum something else reads too.
// CHECK-LABEL: func.func @sum_read_twice
// CHECK-NOT: bias %
// CHECK: zgraph.reduce_sum
func.func @sum_read_twice(%x: tensor<8x4xbf16>, %dy: tensor<8x3xbf16>) -> tensor<3xbf16> {
  %w = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
  %b = zgraph.state "b" kind = "grad" : tensor<3xf32>
  %0 = zgraph.reduce_sum %dy axes = [0] keepdims = false : tensor<8x3xbf16> -> tensor<3xbf16>
  zgraph.accumulate %0 into %b : tensor<3xbf16> into tensor<3xf32>
  zgraph.accumulate_matmul %x, %dy into %w {transpose_lhs} : (tensor<8x4xbf16>, tensor<8x3xbf16>) into tensor<4x3xf32>
  return %0 : tensor<3xbf16>
}

// -----

// Left alone: a sum that keeps its dimensions, and a product over another
// tensor than the sum's.
// CHECK-LABEL: func.func @other_sums
// CHECK-NOT: bias %
// CHECK: return
func.func @other_sums(%x: tensor<8x4xbf16>, %dy: tensor<8x3xbf16>, %dz: tensor<8x3xbf16>) {
  %w = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
  %k = zgraph.state "k" kind = "grad" : tensor<1x3xf32>
  %0 = zgraph.reduce_sum %dy axes = [0] keepdims = true : tensor<8x3xbf16> -> tensor<1x3xbf16>
  zgraph.accumulate %0 into %k : tensor<1x3xbf16> into tensor<1x3xf32>
  zgraph.accumulate_matmul %x, %dy into %w {transpose_lhs} : (tensor<8x4xbf16>, tensor<8x3xbf16>) into tensor<4x3xf32>
  %b = zgraph.state "b" kind = "grad" : tensor<3xf32>
  %1 = zgraph.reduce_sum %dz axes = [0] keepdims = false : tensor<8x3xbf16> -> tensor<3xbf16>
  zgraph.accumulate %1 into %b : tensor<3xbf16> into tensor<3xf32>
  return
}

// -----

// Left alone: the bias accumulator read between the two (by sum_squares,
// through another state op of the same name).
// CHECK-LABEL: func.func @read_between
// CHECK-NOT: bias %
// CHECK: zgraph.sum_squares
func.func @read_between(%x: tensor<8x4xbf16>, %dy: tensor<8x3xbf16>) -> tensor<f64> {
  %w = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
  %b = zgraph.state "b" kind = "grad" : tensor<3xf32>
  %0 = zgraph.reduce_sum %dy axes = [0] keepdims = false : tensor<8x3xbf16> -> tensor<3xbf16>
  zgraph.accumulate %0 into %b : tensor<3xbf16> into tensor<3xf32>
  %b2 = zgraph.state "b" kind = "grad" : tensor<3xf32>
  %n = zgraph.sum_squares %b2 : tensor<3xf32> -> tensor<f64>
  zgraph.accumulate_matmul %x, %dy into %w {transpose_lhs} : (tensor<8x4xbf16>, tensor<8x3xbf16>) into tensor<4x3xf32>
  return %n : tensor<f64>
}
