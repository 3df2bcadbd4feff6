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
