// RUN: zcc-opt %s --zcc-dist-pipeline-partition --zcc-graph-autodiff --zcc-graph-optimizer --zcc-graph-to-dist --zcc-dist-pipeline-schedule --zcc-dist-pipeline-split | FileCheck %s

// Two layers on two stages, 1F1B over 4 micro-batches: stage 0 holds two
// micro-batches (slots 0 and 1), stage 1 one. Each slot has its forward and
// backward programs and its sends and receives; values that cross programs
// live in named buffers (zcc.pp.*): t<i> for transfer i, a<j> for an
// activation the backward pass keeps, d<n> for data input n it keeps.
// CHECK-LABEL: zdist.pipeline "1f1b" micro_batches = 4 buffers = [2, 1]

// The first layer: it keeps its product (for the ReLU's gradient) and its
// input (for the weight's), and stores its output for the send.
// CHECK-LABEL: func.func @s0.forward.0(%{{.*}}: tensor<4x8xf32> {zgraph.name = "x"}) attributes {zdist.stage = 0 : i64}
// CHECK: %[[H:.*]] = zgraph.matmul
// CHECK: %[[A:.*]] = zgraph.relu %[[H]]
// CHECK: zdist.store %[[H]] into "input:zcc.pp.a0.k0"
// CHECK: zdist.store %{{.*}} into "input:zcc.pp.d0.k0"
// CHECK: zdist.store %[[A]] into "input:zcc.pp.t0.k0"
// CHECK-LABEL: func.func @s0.backward.0(%{{.*}}: tensor<4x8xf32> {zgraph.name = "zcc.pp.a0.k0"}, %{{.*}}: tensor<4x8xf32> {zgraph.name = "zcc.pp.t1.k0"}, %{{.*}}: tensor<4x8xf32> {zgraph.name = "zcc.pp.d0.k0"})
// CHECK: zgraph.accumulate
// CHECK-LABEL: func.func @s0.forward.1
// CHECK: zdist.store %{{.*}} into "input:zcc.pp.t0.k1"
// CHECK-LABEL: func.func @s0.backward.1

// The second layer reads the received activation, returns the loss and
// stores the gradient of its input for the send back.
// CHECK-LABEL: func.func @s1.forward.0(%{{.*}}: tensor<4x8xf32> {zgraph.name = "zcc.pp.t0.k0"}, %{{.*}}: tensor<4x8xf32> {zgraph.name = "t"}) -> (tensor<f32> {zgraph.name = "loss"}) attributes {zdist.stage = 1 : i64}
// CHECK: zgraph.mse_loss
// CHECK-LABEL: func.func @s1.backward.0
// CHECK-SAME: {zgraph.name = "zcc.loss_scale"}
// CHECK: zdist.store %{{.*}} into "input:zcc.pp.t1.k0"

// Sends read the stored values, receives fill the named buffers.
// CHECK: func.func @s0.send_activations.0(%[[S:.*]]: tensor<4x8xf32> {zgraph.name = "zcc.pp.t0.k0"})
// CHECK-NEXT: zdist.send %[[S]] to 1 : tensor<4x8xf32>
// CHECK-LABEL: func.func @s0.recv_gradients.0()
// CHECK-NEXT: zdist.recv from 1 into "input:zcc.pp.t1.k0" : tensor<4x8xf32>
// CHECK-LABEL: func.func @s1.recv_activations.0()
// CHECK-NEXT: zdist.recv from 0 into "input:zcc.pp.t0.k0" : tensor<4x8xf32>
// CHECK: func.func @s1.send_gradients.0(%[[G:.*]]: tensor<4x8xf32> {zgraph.name = "zcc.pp.t1.k0"})
// CHECK-NEXT: zdist.send %[[G]] to 0 : tensor<4x8xf32>

// The step functions keep each stage's own parameters.
// CHECK-LABEL: func.func @s0.grad_norm()
// CHECK: zgraph.state "w0" kind = "grad"
// CHECK-NOT: "w1"
// CHECK: zgraph.sum_squares
// CHECK-LABEL: func.func @s1.grad_norm()
// CHECK: zgraph.state "w1" kind = "grad"
// CHECK-LABEL: func.func @s0.optimizer_step
// CHECK: zgraph.sgd
// CHECK-NOT: zgraph.sgd
// CHECK-LABEL: func.func @s1.optimizer_step
// CHECK-NOT: func.func @micro_step
module attributes {zcc.config = {world_size = 2 : i64, data_parallel_size = 1 : i64, pipeline_parallel_size = 2 : i64, optimizer = {type = "SGD", params = {lr = 0.1 : f64}}, pipeline = {enabled = true, num_stages = 2 : i64, partition_method = "uniform", schedule = "1f1b", micro_batches = 4 : i64}}} {
  func.func @main(%x: tensor<4x8xf32> {zgraph.name = "x"}, %t: tensor<4x8xf32> {zgraph.name = "t"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w0 = zgraph.param "w0" trainable : tensor<8x8xf32>
    %w1 = zgraph.param "w1" trainable : tensor<8x8xf32>
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %a0 = zgraph.relu %h0 : tensor<4x8xf32>
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %l = zgraph.mse_loss %h1, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
