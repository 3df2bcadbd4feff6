// RUN: zcc-opt %s --split-input-file --zcc-graph-autodiff | FileCheck %s --implicit-check-not=func.func

// The broadcasting binary ops: each operand's gradient is summed back over
// the dimensions it was broadcast along (a bias row over the batch, a column
// over the features, a scalar over everything). The backward runs in reverse
// order, seeded with the new argument zcc.loss_scale, and each parameter's
// accumulate comes right after its gradient is complete, before the
// gradients of earlier ops are built.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: (%[[X:.*]]: tensor<4x3xf32> {zgraph.name = "x"}, %[[T:.*]]: tensor<4x3xf32> {zgraph.name = "t"}, %[[SEED:.*]]: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"})
// CHECK: %[[B:.*]] = zgraph.param "b" trainable : tensor<3xf32>
// CHECK-NEXT: %[[C:.*]] = zgraph.param "c" trainable : tensor<4x1xf32>
// CHECK-NEXT: %[[S:.*]] = zgraph.param "s" trainable : tensor<f32>
// CHECK-NEXT: %[[D:.*]] = zgraph.param "d" trainable : tensor<3xf32>
// CHECK-NEXT: %[[ADD:.*]] = zgraph.add %[[X]], %[[B]]
// CHECK-NEXT: %[[SUB:.*]] = zgraph.sub %[[ADD]], %[[C]]
// CHECK-NEXT: %[[MUL:.*]] = zgraph.mul %[[SUB]], %[[S]]
// CHECK-NEXT: %[[DIV:.*]] = zgraph.div %[[MUL]], %[[D]]
// CHECK-NEXT: %[[LOSS:.*]] = zgraph.mse_loss %[[DIV]], %[[T]]
// The seed is dL/dloss.
// CHECK-NEXT: %[[DDIV:.*]] = zgraph.mse_loss_grad %[[DIV]], %[[T]], %[[SEED]] : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
// div: d/da = dy / b; d/db = -(dy * (a / b)) / b, summed over the batch.
// CHECK-NEXT: %[[DMUL:.*]] = zgraph.div %[[DDIV]], %[[D]] : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %[[T1:.*]] = zgraph.mul %[[DDIV]], %[[DIV]]
// CHECK-NEXT: %[[T2:.*]] = zgraph.div %[[T1]], %[[D]]
// CHECK-NEXT: %[[T3:.*]] = zgraph.neg %[[T2]]
// CHECK-NEXT: %[[GD:.*]] = zgraph.reduce_sum %[[T3]] axes = [0] keepdims = false : tensor<4x3xf32> -> tensor<3xf32>
// CHECK-NEXT: %[[ACC_D:.*]] = zgraph.state "d" kind = "grad" : tensor<3xf32>
// CHECK-NEXT: zgraph.accumulate %[[GD]] into %[[ACC_D]] : tensor<3xf32> into tensor<3xf32>
// mul by a scalar parameter: d/da = dy * s; d/ds = sum over everything of dy * a.
// CHECK-NEXT: %[[DSUB:.*]] = zgraph.mul %[[DMUL]], %[[S]] : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
// CHECK-NEXT: %[[T4:.*]] = zgraph.mul %[[DMUL]], %[[SUB]]
// CHECK-NEXT: %[[GS:.*]] = zgraph.reduce_sum %[[T4]] axes = [0, 1] keepdims = false : tensor<4x3xf32> -> tensor<f32>
// CHECK-NEXT: %[[ACC_S:.*]] = zgraph.state "s" kind = "grad" : tensor<f32>
// CHECK-NEXT: zgraph.accumulate %[[GS]] into %[[ACC_S]]
// sub of a column: -dy summed over the features, back to 4x1.
// CHECK-NEXT: %[[T5:.*]] = zgraph.neg %[[DSUB]]
// CHECK-NEXT: %[[T6:.*]] = zgraph.reduce_sum %[[T5]] axes = [1] keepdims = false : tensor<4x3xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[GC:.*]] = zgraph.reshape %[[T6]] : tensor<4xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[ACC_C:.*]] = zgraph.state "c" kind = "grad" : tensor<4x1xf32>
// CHECK-NEXT: zgraph.accumulate %[[GC]] into %[[ACC_C]]
// add of a row: dy summed over the batch; the input x gets no gradient.
// CHECK-NEXT: %[[GB:.*]] = zgraph.reduce_sum %[[DSUB]] axes = [0] keepdims = false : tensor<4x3xf32> -> tensor<3xf32>
// CHECK-NEXT: %[[ACC_B:.*]] = zgraph.state "b" kind = "grad" : tensor<3xf32>
// CHECK-NEXT: zgraph.accumulate %[[GB]] into %[[ACC_B]]
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
func.func @main(%x: tensor<4x3xf32> {zgraph.name = "x"}, %t: tensor<4x3xf32> {zgraph.name = "t"}) -> (tensor<f32> {zgraph.name = "loss"}) {
  %b = zgraph.param "b" trainable : tensor<3xf32>
  %c = zgraph.param "c" trainable : tensor<4x1xf32>
  %s = zgraph.param "s" trainable : tensor<f32>
  %d = zgraph.param "d" trainable : tensor<3xf32>
  %0 = zgraph.add %x, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %1 = zgraph.sub %0, %c : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
  %2 = zgraph.mul %1, %s : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %3 = zgraph.div %2, %d : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %l = zgraph.mse_loss %3, %t : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Matrix products. A 2-D weight under a batched activation folds every batch
// dimension into one product: dW = reshape(x, 6x4)^T @ reshape(dy, 6x5). A
// batched weight gets the batched product x^T @ dy; the activation's
// gradient is dy @ k^T. The mean's gradient is the seed times 1/18.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32> {zgraph.name = "x"}, %[[SEED:.*]]: tensor<f32> {zgraph.name = "zcc.loss_scale"})
// CHECK: %[[W:.*]] = zgraph.param "w" trainable : tensor<4x5xf32>
// CHECK-NEXT: %[[K:.*]] = zgraph.param "k" trainable : tensor<2x5x3xf32>
// CHECK-NEXT: %[[H:.*]] = zgraph.matmul %[[X]], %[[W]]
// CHECK-NEXT: %[[Y:.*]] = zgraph.matmul %[[H]], %[[K]]
// CHECK-NEXT: %[[LOSS:.*]] = zgraph.reduce_mean %[[Y]]
// CHECK-NEXT: %[[R:.*]] = zgraph.reshape %[[SEED]] : tensor<f32> -> tensor<1x1x1xf32>
// CHECK-NEXT: %[[N:.*]] = zgraph.constant dense<0.055555556> : tensor<f32>
// CHECK-NEXT: %[[M:.*]] = zgraph.mul %[[R]], %[[N]]
// CHECK-NEXT: %[[DY:.*]] = zgraph.broadcast %[[M]] : tensor<1x1x1xf32> -> tensor<2x3x3xf32>
// CHECK-NEXT: %[[KT:.*]] = zgraph.transpose %[[K]] perm = [0, 2, 1] : tensor<2x5x3xf32> -> tensor<2x3x5xf32>
// CHECK-NEXT: %[[DH:.*]] = zgraph.matmul %[[DY]], %[[KT]] : (tensor<2x3x3xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT: %[[HT:.*]] = zgraph.transpose %[[H]] perm = [0, 2, 1] : tensor<2x3x5xf32> -> tensor<2x5x3xf32>
// CHECK-NEXT: %[[GK:.*]] = zgraph.matmul %[[HT]], %[[DY]] : (tensor<2x5x3xf32>, tensor<2x3x3xf32>) -> tensor<2x5x3xf32>
// CHECK-NEXT: %[[ACC_K:.*]] = zgraph.state "k" kind = "grad" : tensor<2x5x3xf32>
// CHECK-NEXT: zgraph.accumulate %[[GK]] into %[[ACC_K]]
// CHECK-NEXT: %[[XR:.*]] = zgraph.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %[[DHR:.*]] = zgraph.reshape %[[DH]] : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK-NEXT: %[[XT:.*]] = zgraph.transpose %[[XR]] perm = [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
// CHECK-NEXT: %[[GW:.*]] = zgraph.matmul %[[XT]], %[[DHR]] : (tensor<4x6xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT: %[[ACC_W:.*]] = zgraph.state "w" kind = "grad" : tensor<4x5xf32>
// CHECK-NEXT: zgraph.accumulate %[[GW]] into %[[ACC_W]]
// CHECK-NEXT: return %[[LOSS]]
func.func @main(%x: tensor<2x3x4xf32> {zgraph.name = "x"}) -> (tensor<f32> {zgraph.name = "loss"}) {
  %w = zgraph.param "w" trainable : tensor<4x5xf32>
  %k = zgraph.param "k" trainable : tensor<2x5x3xf32>
  %0 = zgraph.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %1 = zgraph.matmul %0, %k : (tensor<2x3x5xf32>, tensor<2x5x3xf32>) -> tensor<2x3x3xf32>
  %2 = zgraph.reduce_mean %1 axes = [0, 1, 2] keepdims = false : tensor<2x3x3xf32> -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// A weight broadcast along the batch (1x4x5 against 2 batches) gets the
// batched product summed over the batch; a vector weight is a 5x1 matrix
// whose gradient is folded over every row and reshaped back to 5.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[K:.*]] = zgraph.param "k" trainable : tensor<1x4x5xf32>
// CHECK: %[[TV:.*]] = zgraph.matmul %{{.*}}, %{{.*}} : (tensor<5x6xf32>, tensor<6x1xf32>) -> tensor<5x1xf32>
// CHECK-NEXT: %[[GV:.*]] = zgraph.reshape %[[TV]] : tensor<5x1xf32> -> tensor<5xf32>
// CHECK-NEXT: %[[ACC_V:.*]] = zgraph.state "v" kind = "grad" : tensor<5xf32>
// CHECK-NEXT: zgraph.accumulate %[[GV]] into %[[ACC_V]]
// CHECK: %[[TK:.*]] = zgraph.matmul %{{.*}}, %{{.*}} : (tensor<2x4x3xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
// CHECK-NEXT: %[[SK:.*]] = zgraph.reduce_sum %[[TK]] axes = [0] keepdims = false : tensor<2x4x5xf32> -> tensor<4x5xf32>
// CHECK-NEXT: %[[GK:.*]] = zgraph.reshape %[[SK]] : tensor<4x5xf32> -> tensor<1x4x5xf32>
// CHECK-NEXT: %[[ACC_K:.*]] = zgraph.state "k" kind = "grad" : tensor<1x4x5xf32>
// CHECK-NEXT: zgraph.accumulate %[[GK]] into %[[ACC_K]]
func.func @main(%x: tensor<2x3x4xf32> {zgraph.name = "x"}) -> (tensor<f32> {zgraph.name = "loss"}) {
  %k = zgraph.param "k" trainable : tensor<1x4x5xf32>
  %v = zgraph.param "v" trainable : tensor<5xf32>
  %0 = zgraph.matmul %x, %k : (tensor<2x3x4xf32>, tensor<1x4x5xf32>) -> tensor<2x3x5xf32>
  %1 = zgraph.matmul %0, %v : (tensor<2x3x5xf32>, tensor<5xf32>) -> tensor<2x3xf32>
  %l = zgraph.reduce_sum %1 axes = [0, 1] keepdims = false : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A parameter used twice gets the sum of both gradients and one accumulate,
// after its first use (the last one differentiated). The input plus a
// frozen table does not depend on a trainable parameter: no gradient flows
// into it (no product with w^T for the first matmul), and the frozen
// parameter gets no state.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: (%[[X:.*]]: tensor<4x3xf32> {zgraph.name = "x"}, %[[SEED:.*]]: tensor<f32> {zgraph.name = "zcc.loss_scale"})
// CHECK-NEXT: %[[W:.*]] = zgraph.param "w" trainable : tensor<3x3xf32>
// CHECK-NEXT: %[[P:.*]] = zgraph.param "pos" : tensor<4x3xf32>
// CHECK-NEXT: %[[H0:.*]] = zgraph.add %[[X]], %[[P]]
// CHECK-NEXT: %[[H1:.*]] = zgraph.matmul %[[H0]], %[[W]]
// CHECK-NEXT: %[[H2:.*]] = zgraph.tanh %[[H1]]
// CHECK-NEXT: %[[H3:.*]] = zgraph.matmul %[[H2]], %[[W]]
// CHECK-NEXT: %[[LOSS:.*]] = zgraph.reduce_sum %[[H3]]
// CHECK-NEXT: %[[R:.*]] = zgraph.reshape %[[SEED]] : tensor<f32> -> tensor<1x1xf32>
// CHECK-NEXT: %[[DY:.*]] = zgraph.broadcast %[[R]] : tensor<1x1xf32> -> tensor<4x3xf32>
// The second use: dH2 = dy @ w^T and dW2 = h2^T @ dy.
// CHECK-NEXT: %[[WT:.*]] = zgraph.transpose %[[W]] perm = [1, 0]
// CHECK-NEXT: %[[DH2:.*]] = zgraph.matmul %[[DY]], %[[WT]]
// CHECK-NEXT: %[[H2T:.*]] = zgraph.transpose %[[H2]] perm = [1, 0]
// CHECK-NEXT: %[[GW2:.*]] = zgraph.matmul %[[H2T]], %[[DY]]
// tanh: dy * (1 - y^2).
// CHECK-NEXT: %[[SQ:.*]] = zgraph.mul %[[H2]], %[[H2]]
// CHECK-NEXT: %[[ONE:.*]] = zgraph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[SLOPE:.*]] = zgraph.sub %[[ONE]], %[[SQ]]
// CHECK-NEXT: %[[DH1:.*]] = zgraph.mul %[[DH2]], %[[SLOPE]]
// The first use: only dW1 = h0^T @ dH1, then the sum and one accumulate;
// nothing for h0, x or the frozen table.
// CHECK-NEXT: %[[H0T:.*]] = zgraph.transpose %[[H0]] perm = [1, 0]
// CHECK-NEXT: %[[GW1:.*]] = zgraph.matmul %[[H0T]], %[[DH1]]
// CHECK-NEXT: %[[GW:.*]] = zgraph.add %[[GW2]], %[[GW1]] : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
// CHECK-NEXT: %[[ACC:.*]] = zgraph.state "w" kind = "grad" : tensor<3x3xf32>
// CHECK-NEXT: zgraph.accumulate %[[GW]] into %[[ACC]]
// CHECK-NEXT: return %[[LOSS]]
func.func @main(%x: tensor<4x3xf32> {zgraph.name = "x"}) -> (tensor<f32> {zgraph.name = "loss"}) {
  %w = zgraph.param "w" trainable : tensor<3x3xf32>
  %p = zgraph.param "pos" : tensor<4x3xf32>
  %h0 = zgraph.add %x, %p : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %h1 = zgraph.matmul %h0, %w : (tensor<4x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
  %h2 = zgraph.tanh %h1 : tensor<4x3xf32>
  %h3 = zgraph.matmul %h2, %w : (tensor<4x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
  %l = zgraph.reduce_sum %h3 axes = [0, 1] keepdims = false : tensor<4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// @micro_step returns only the loss (found by its name among the outputs)
// and keeps the loss's result attributes; a trainable parameter that only
// feeds another output gets no gradient and no state; a loss of shape 1
// gets the 0-d seed reshaped to its type.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32> {zgraph.name = "x"}, %[[SEED:.*]]: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<1xf32> {zgraph.name = "loss", zgraph.note = "kept"})
// CHECK-NEXT: %[[W:.*]] = zgraph.param "w" trainable : tensor<4xf32>
// CHECK-NEXT: zgraph.param "unused" trainable : tensor<4xf32>
// CHECK-NEXT: %[[Y:.*]] = zgraph.mul %[[X]], %[[W]]
// CHECK-NEXT: zgraph.add
// CHECK-NEXT: %[[S:.*]] = zgraph.reduce_sum %[[Y]]
// CHECK-NEXT: %[[LOSS:.*]] = zgraph.reshape %[[S]] : tensor<f32> -> tensor<1xf32>
// CHECK-NEXT: %[[DL:.*]] = zgraph.reshape %[[SEED]] : tensor<f32> -> tensor<1xf32>
// CHECK-NEXT: %[[DS:.*]] = zgraph.reshape %[[DL]] : tensor<1xf32> -> tensor<f32>
// CHECK-NEXT: %[[DS1:.*]] = zgraph.reshape %[[DS]] : tensor<f32> -> tensor<1xf32>
// CHECK-NEXT: %[[DY:.*]] = zgraph.broadcast %[[DS1]] : tensor<1xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[GW:.*]] = zgraph.mul %[[DY]], %[[X]]
// CHECK-NEXT: %[[ACC:.*]] = zgraph.state "w" kind = "grad" : tensor<4xf32>
// CHECK-NEXT: zgraph.accumulate %[[GW]] into %[[ACC]]
// CHECK-NEXT: return %[[LOSS]] : tensor<1xf32>
func.func @main(%x: tensor<4xf32> {zgraph.name = "x"}) -> (tensor<4xf32> {zgraph.name = "y"}, tensor<1xf32> {zgraph.name = "loss", zgraph.note = "kept"}, tensor<4xf32> {zgraph.name = "z"}) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %u = zgraph.param "unused" trainable : tensor<4xf32>
  %y = zgraph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %z = zgraph.add %x, %u : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = zgraph.reduce_sum %y axes = [0] keepdims = false : tensor<4xf32> -> tensor<f32>
  %l = zgraph.reshape %s : tensor<f32> -> tensor<1xf32>
  return %y, %l, %z : tensor<4xf32>, tensor<1xf32>, tensor<4xf32>
}
