// RUN: zcc-opt %s --zcc-graph-to-dist --zcc-dist-to-plan | FileCheck %s
// The token range of a gather along a negative axis (I64Attr, read as
// unsigned) is taken from the normalised axis. The importer normalises ONNX
// axes, so only hand-written or rewritten IR has one.

// An embedding gathered along axis -2 (rows) of a 10x4 table: token ids are
// below 10.
// CHECK: zplan.mode = "train"
// CHECK-SAME: zplan.token_range = 10 : i64
module {
  func.func @micro_step(%ids: tensor<2xi64> {zgraph.name = "ids"}, %seed: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %emb = zgraph.param "emb" trainable : tensor<10x4xf32>
    %h = zgraph.gather %emb[%ids] axis = -2 : (tensor<10x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    %l = zgraph.reduce_sum %h axes = [0, 1] keepdims = false : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
