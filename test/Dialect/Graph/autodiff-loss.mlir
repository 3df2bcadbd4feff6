// Which output is the loss, and the losses autodiff adds (zcc --loss).
// RUN: zcc-opt %s --zcc-graph-autodiff | FileCheck %s --check-prefix=SCALAR
// RUN: zcc-opt %s --zcc-graph-autodiff=loss=total | FileCheck %s --check-prefix=SCALAR
// RUN: zcc-opt %s --zcc-graph-autodiff=add-loss=cross-entropy | FileCheck %s --check-prefix=CE
// RUN: zcc-opt %s --zcc-graph-autodiff=add-loss=mse | FileCheck %s --check-prefix=MSE
// RUN: not zcc-opt %s --zcc-graph-autodiff=loss=missing 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not zcc-opt %s --zcc-graph-autodiff=loss=logits 2>&1 | FileCheck %s --check-prefix=NOT-SCALAR
// RUN: not zcc-opt %s --zcc-graph-autodiff=add-loss=hinge 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// Without an output named "loss", the only scalar float output is the loss
// (and --loss=total names it): @micro_step returns it alone, under its name,
// and its gradient reaches w through the sum.
// SCALAR-LABEL: func.func @micro_step
// SCALAR-SAME: (%[[X:.*]]: tensor<2x3x4xf32> {zgraph.name = "x"}, %[[SEED:.*]]: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "total"})
// SCALAR: %[[LOSS:.*]] = zgraph.reduce_sum
// SCALAR-NEXT: %[[R:.*]] = zgraph.reshape %[[SEED]] : tensor<f32> -> tensor<1x1x1xf32>
// SCALAR-NEXT: zgraph.broadcast %[[R]] : tensor<1x1x1xf32> -> tensor<2x3x5xf32>
// SCALAR: zgraph.state "w" kind = "grad" : tensor<4x5xf32>
// SCALAR-NEXT: zgraph.accumulate
// SCALAR-NEXT: return %[[LOSS]] : tensor<f32>

// Cross-entropy on the first output: a new i64 input "labels" of the
// logits' shape without the class axis, inserted before the seed; logits and
// labels flattened to rows; the seed goes into cross_entropy_grad.
// CE-LABEL: func.func @micro_step
// CE-SAME: (%[[X:.*]]: tensor<2x3x4xf32> {zgraph.name = "x"}, %[[LABELS:.*]]: tensor<2x3xi64> {zgraph.name = "labels"}, %[[SEED:.*]]: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"})
// CE: %[[LOGITS:.*]] = zgraph.matmul %[[X]], %{{.*}} : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
// CE: %[[ROWS:.*]] = zgraph.reshape %[[LOGITS]] : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CE-NEXT: %[[FLAT:.*]] = zgraph.reshape %[[LABELS]] : tensor<2x3xi64> -> tensor<6xi64>
// CE-NEXT: %[[LOSS:.*]] = zgraph.cross_entropy %[[ROWS]], %[[FLAT]] : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
// CE-NEXT: %[[DROWS:.*]] = zgraph.cross_entropy_grad %[[ROWS]], %[[FLAT]], %[[SEED]] : (tensor<6x5xf32>, tensor<6xi64>, tensor<f32>) -> tensor<6x5xf32>
// CE-NEXT: zgraph.reshape %[[DROWS]] : tensor<6x5xf32> -> tensor<2x3x5xf32>
// CE: zgraph.state "w" kind = "grad" : tensor<4x5xf32>
// CE-NEXT: zgraph.accumulate
// CE-NEXT: return %[[LOSS]] : tensor<f32>

// MSE on the first output: a new input "labels" of the output's type.
// MSE-LABEL: func.func @micro_step
// MSE-SAME: (%[[X:.*]]: tensor<2x3x4xf32> {zgraph.name = "x"}, %[[LABELS:.*]]: tensor<2x3x5xf32> {zgraph.name = "labels"}, %[[SEED:.*]]: tensor<f32> {zgraph.name = "zcc.loss_scale"}) -> (tensor<f32> {zgraph.name = "loss"})
// MSE: %[[OUT:.*]] = zgraph.matmul %[[X]], %{{.*}}
// MSE: %[[LOSS:.*]] = zgraph.mse_loss %[[OUT]], %[[LABELS]] : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<f32>
// MSE-NEXT: zgraph.mse_loss_grad %[[OUT]], %[[LABELS]], %[[SEED]]
// MSE: zgraph.state "w" kind = "grad" : tensor<4x5xf32>
// MSE-NEXT: zgraph.accumulate
// MSE-NEXT: return %[[LOSS]] : tensor<f32>

// A loss name that no output has: the message lists the outputs.
// MISSING: error: the model has no loss output named 'missing' (its outputs: 'logits', 'total'); export the model with its loss, or pass --loss cross-entropy|mse to add one on the first output

// The named loss must be a scalar.
// NOT-SCALAR: error: the loss must be a float scalar, got 'tensor<2x3x5xf32>'

// UNKNOWN: error: unknown --loss 'hinge'; use cross-entropy or mse

func.func @main(%x: tensor<2x3x4xf32> {zgraph.name = "x"}) -> (tensor<2x3x5xf32> {zgraph.name = "logits"}, tensor<f32> {zgraph.name = "total"}) {
  %w = zgraph.param "w" trainable : tensor<4x5xf32>
  %0 = zgraph.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %1 = zgraph.reduce_sum %0 axes = [0, 1, 2] keepdims = false : tensor<2x3x5xf32> -> tensor<f32>
  return %0, %1 : tensor<2x3x5xf32>, tensor<f32>
}
