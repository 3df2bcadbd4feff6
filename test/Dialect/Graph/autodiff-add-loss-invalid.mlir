// RUN: zcc-opt %s --split-input-file --zcc-graph-autodiff=add-loss=cross-entropy -verify-diagnostics

// The added loss's labels input would collide with the model's own.
// expected-error @+1 {{--loss adds an input named 'labels', but the model has one}}
func.func @main(%x: tensor<4x2xf32> {zgraph.name = "x"}, %y: tensor<4xi64> {zgraph.name = "labels"}) -> (tensor<4x2xf32> {zgraph.name = "logits"}) {
  %w = zgraph.param "w" trainable : tensor<4x2xf32>
  %0 = zgraph.mul %x, %w : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// Cross-entropy needs a class axis after at least one row axis.
// expected-error @+1 {{--loss cross-entropy needs an output of rank 2 or more ([..., C])}}
func.func @main(%x: tensor<4xf32> {zgraph.name = "x"}) -> (tensor<4xf32> {zgraph.name = "logits"}) {
  %w = zgraph.param "w" trainable : tensor<4xf32>
  %0 = zgraph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Integer outputs cannot be logits.
// expected-error @+1 {{--loss cross-entropy needs a float tensor output, got 'tensor<4x2xi64>'}}
func.func @main(%x: tensor<4x2xi64> {zgraph.name = "x"}) -> (tensor<4x2xi64> {zgraph.name = "ids"}) {
  return %x : tensor<4x2xi64>
}

// -----

// expected-error @+1 {{the model has no output to add a loss to}}
func.func @main(%x: tensor<4x2xf32> {zgraph.name = "x"}) {
  return
}
