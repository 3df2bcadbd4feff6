// RUN: zcc-opt %s -zcc-dist-fuse-accumulate | FileCheck %s

// A 16-bit gradient widened only to be accumulated is accumulated as it is;
// the cast is gone.
// CHECK-LABEL: func.func @widened_for_accumulation
// CHECK-SAME: (%[[G:.*]]: tensor<4x3xbf16>, %[[H:.*]]: tensor<3xf16>)
// CHECK-NOT: zgraph.cast
// CHECK: zgraph.accumulate %[[G]] into %{{.*}} : tensor<4x3xbf16> into tensor<4x3xf32>
// CHECK: zgraph.accumulate %[[H]] into %{{.*}} : tensor<3xf16> into tensor<3xf64>
func.func @widened_for_accumulation(%g: tensor<4x3xbf16>, %h: tensor<3xf16>) {
  %gw = zgraph.state "w.grad" kind = "grad" : tensor<4x3xf32>
  %gb = zgraph.state "b.grad" kind = "grad" : tensor<3xf64>
  %0 = zgraph.cast %g : tensor<4x3xbf16> -> tensor<4x3xf32>
  zgraph.accumulate %0 into %gw : tensor<4x3xf32> into tensor<4x3xf32>
  %1 = zgraph.cast %h : tensor<3xf16> -> tensor<3xf64>
  zgraph.accumulate %1 into %gb : tensor<3xf64> into tensor<3xf64>
  return
}

// The widened copy stays where something else reads it too (here an
// all-reduce), where the cast narrows, and where it converts an integer.
// CHECK-LABEL: func.func @kept
// CHECK: %[[WIDE:.*]] = zgraph.cast %{{.*}} : tensor<4xbf16> -> tensor<4xf32>
// CHECK: zdist.all_reduce %[[WIDE]]
// CHECK: zgraph.accumulate %[[WIDE]] into
// CHECK: %[[NARROW:.*]] = zgraph.cast %{{.*}} : tensor<4xf64> -> tensor<4xf32>
// CHECK: zgraph.accumulate %[[NARROW]] into
// CHECK: %[[INT:.*]] = zgraph.cast %{{.*}} : tensor<4xi32> -> tensor<4xf32>
// CHECK: zgraph.accumulate %[[INT]] into
module {
  zdist.mesh @m ["dp" = 2]
  func.func @kept(%g: tensor<4xbf16>, %d: tensor<4xf64>, %i: tensor<4xi32>) -> tensor<4xf32> {
    %a = zgraph.state "a.grad" kind = "grad" : tensor<4xf32>
    %0 = zgraph.cast %g : tensor<4xbf16> -> tensor<4xf32>
    %1 = zdist.all_reduce %0 on @m axes = ["dp"] reduction = avg : tensor<4xf32>
    zgraph.accumulate %0 into %a : tensor<4xf32> into tensor<4xf32>
    %2 = zgraph.cast %d : tensor<4xf64> -> tensor<4xf32>
    zgraph.accumulate %2 into %a : tensor<4xf32> into tensor<4xf32>
    %3 = zgraph.cast %i : tensor<4xi32> -> tensor<4xf32>
    zgraph.accumulate %3 into %a : tensor<4xf32> into tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}

// A weight gradient's product accumulated alone becomes one
// accumulate_matmul in the accumulation's place, with the product's
// transposes and the accumulation's marks; the product is gone.
// CHECK-LABEL: func.func @product
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xbf16>, %[[DY:.*]]: tensor<8x3xbf16>)
// CHECK: %[[ACC:.*]] = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
// CHECK-NOT: zgraph.matmul
// CHECK-NOT: zgraph.cast
// CHECK: zgraph.accumulate_matmul %[[X]], %[[DY]] into %[[ACC]] {transpose_lhs, zdist.stage = 0 : i64} : (tensor<8x4xbf16>, tensor<8x3xbf16>) into tensor<4x3xf32>
// CHECK-NEXT: return
func.func @product(%x: tensor<8x4xbf16>, %dy: tensor<8x3xbf16>) {
  %acc = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
  %0 = zgraph.matmul %x, %dy {transpose_lhs} : (tensor<8x4xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
  %1 = zgraph.cast %0 : tensor<4x3xbf16> -> tensor<4x3xf32>
  zgraph.accumulate %1 into %acc {zdist.stage = 0 : i64} : tensor<4x3xf32> into tensor<4x3xf32>
  return
}

// Products stay where something else reads them, where they have a bias,
// where they are batched, and where the accumulator is in host memory
// (the offload pass's mark): a host kernel does not multiply matrices.
// CHECK-LABEL: func.func @products_kept
// CHECK-NOT: zgraph.accumulate_matmul
// CHECK: return
func.func @products_kept(%x: tensor<8x4xf32>, %dy: tensor<8x3xf32>, %b: tensor<3xf32>, %bx: tensor<2x8x4xf32>, %by: tensor<2x8x3xf32>) -> tensor<4x3xf32> {
  %acc = zgraph.state "w" kind = "grad" : tensor<4x3xf32>
  %0 = zgraph.matmul %x, %dy {transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  zgraph.accumulate %0 into %acc : tensor<4x3xf32> into tensor<4x3xf32>
  %1 = zgraph.matmul %x, %dy, %b {transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  zgraph.accumulate %1 into %acc : tensor<4x3xf32> into tensor<4x3xf32>
  %bacc = zgraph.state "v" kind = "grad" : tensor<2x4x3xf32>
  %2 = zgraph.matmul %bx, %by {transpose_lhs} : (tensor<2x8x4xf32>, tensor<2x8x3xf32>) -> tensor<2x4x3xf32>
  zgraph.accumulate %2 into %bacc : tensor<2x4x3xf32> into tensor<2x4x3xf32>
  %hacc = zgraph.state "h" kind = "grad" {zdist.memory = "host"} : tensor<4x3xf32>
  %3 = zgraph.matmul %x, %dy {transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  zgraph.accumulate %3 into %hacc : tensor<4x3xf32> into tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}



// A weight gradient widened for a collective: the product writes f32
// itself and the cast is gone. One read by something else too (an
// offload of the 16-bit gradient), or narrowed, keeps its cast.
// CHECK-LABEL: func.func @widened_for_collective
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xbf16>, %[[DY:.*]]: tensor<8x3xbf16>)
// CHECK: %[[P:.*]] = zgraph.matmul %[[X]], %[[DY]] {transpose_lhs} : (tensor<8x4xbf16>, tensor<8x3xbf16>) -> tensor<4x3xf32>
// CHECK-NEXT: zdist.reduce_scatter %[[P]]
// CHECK: %[[Q:.*]] = zgraph.matmul %[[X]], %[[DY]] {transpose_lhs} : (tensor<8x4xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
// CHECK-NEXT: zgraph.cast %[[Q]] : tensor<4x3xbf16> -> tensor<4x3xf32>
module {
  zdist.mesh @m ["dp" = 2]
  func.func @widened_for_collective(%x: tensor<8x4xbf16>, %dy: tensor<8x3xbf16>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<4x3xbf16>) {
    %0 = zgraph.matmul %x, %dy {transpose_lhs} : (tensor<8x4xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
    %1 = zgraph.cast %0 : tensor<4x3xbf16> -> tensor<4x3xf32>
    %2 = zdist.reduce_scatter %1 on @m axes = ["dp"] scatter_axis = 0 reduction = avg : tensor<4x3xf32> -> tensor<2x3xf32>
    %3 = zgraph.matmul %x, %dy {transpose_lhs} : (tensor<8x4xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
    %4 = zgraph.cast %3 : tensor<4x3xbf16> -> tensor<4x3xf32>
    %5 = zdist.reduce_scatter %4 on @m axes = ["dp"] scatter_axis = 0 reduction = avg : tensor<4x3xf32> -> tensor<2x3xf32>
    return %2, %5, %3 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<4x3xbf16>
  }
}
