// RUN: zcc-opt %s --zcc-dist-pipeline-partition --zcc-graph-autodiff --zcc-graph-optimizer --zcc-graph-to-dist --zcc-dist-pipeline-schedule | FileCheck %s
// RUN: zcc-opt %s --zcc-dist-pipeline-partition --zcc-graph-autodiff --zcc-graph-optimizer --zcc-graph-to-dist --zcc-dist-pipeline-schedule --zcc-dist-pipeline-split | FileCheck %s --check-prefix=SPLIT

// ZB-H1 on four layers over four stages, 8 micro-batches. Stages 1 to 3
// send a gradient back: what it needs (the gradient of the layer's input)
// is their B pass, the weight's gradient and its accumulation their W pass
// (zdist.weights). Stage 0 sends none and keeps one backward pass.
// CHECK-LABEL: module attributes
// CHECK: zgraph.matmul {{.*}}{zdist.backward, zdist.stage = 3 : i64, zdist.weights}
// CHECK: zgraph.accumulate {{.*}}{zdist.backward, zdist.stage = 3 : i64, zdist.weights}
// CHECK: zgraph.accumulate {{.*}}{zdist.backward, zdist.stage = 2 : i64, zdist.weights}
// CHECK: zgraph.accumulate {{.*}}{zdist.backward, zdist.stage = 1 : i64, zdist.weights}
// CHECK: zgraph.accumulate {{.*}}{zdist.backward, zdist.stage = 0 : i64}
// CHECK-NOT: zdist.weights
// The passes and messages are 1F1B's; each W runs where its stage would
// wait. A stage holds a micro-batch from the receive of its activations
// to its W (stage 1 runs W0 before it receives micro-batch 3 into
// micro-batch 0's slot), and more than under 1F1B only while its
// estimated bytes stay within 1F1B's heaviest stage's: here stage 3 holds
// two and defers W6 and W7 past its last send. The predicted bubble is
// 0.221 (1F1B's on these stages: 0.313).
// CHECK: zdist.pipeline "zb-h1" micro_batches = 8 buffers = [4, 3, 2, 2] bubble_fraction = 0.221
// CHECK-SAME: stages = [
// CHECK-SAME: "F0 sa0 F1 sa1 F2 sa2 F3 sa3 rg0 B0 F4 sa4 rg1 B1 F5 sa5 rg2 B2 F6 sa6 rg3 B3 F7 sa7 rg4 B4 rg5 B5 rg6 B6 rg7 B7",
// CHECK-SAME: "ra0 F0 sa0 ra1 F1 sa1 ra2 F2 rg0 sa2 B0 W0 ra3 sg0 F3 rg1 sa3 B1 W1 ra4 sg1 F4 rg2 sa4 B2 W2 ra5 sg2 F5 rg3 sa5 B3 W3 ra6 sg3 F6 rg4 sa6 B4 W4 ra7 sg4 F7 rg5 sa7 B5 sg5 W5 rg6 B6 sg6 W6 rg7 B7 sg7 W7",
// CHECK-SAME: "ra0 F0 sa0 ra1 F1 sa1 rg0 B0 sg0 W0 ra2 F2 sa2 rg1 B1 W1 sg1 ra3 F3 sa3 rg2 B2 W2 sg2 ra4 F4 sa4 rg3 B3 W3 sg3 ra5 F5 sa5 rg4 B4 W4 sg4 ra6 F6 sa6 rg5 B5 W5 sg5 ra7 F7 sa7 rg6 B6 sg6 W6 rg7 B7 sg7 W7",
// CHECK-SAME: "ra0 F0 B0 ra1 sg0 F1 B1 W0 ra2 sg1 F2 B2 W1 ra3 sg2 F3 B3 W2 ra4 sg3 F4 B4 W3 ra5 sg4 F5 B5 W4 ra6 sg5 F6 B6 W5 ra7 sg6 F7 B7 sg7 W6 W7"]
// Forward, B and W flops per split stage; what one micro-batch keeps grows
// by the gradient its W reads from B.
// CHECK-SAME: flops = {{\[\[}}544, 672], [544, 640, 608], [544, 640, 608], [513, 608, 608]]
// CHECK-SAME: memory = [{activation_buffer = 256 : i64, activations = 1024 : i64
// CHECK-SAME: {activation_buffer = 384 : i64, activations = 1152 : i64

// Split: a split stage's B program stores the gradient its W program
// reads (zcc.pp.g0, one slot per buffer), and W accumulates the weight's
// gradient; stage 0 has no W program.
// SPLIT-NOT: func.func @s0.weights
// SPLIT-LABEL: func.func @s1.backward.0(
// SPLIT: zdist.store %[[G:.*]] into "input:zcc.pp.g0.k0"
// SPLIT: zdist.store %{{.*}} into "input:zcc.pp.t
// SPLIT-LABEL: func.func @s1.weights.0(
// SPLIT-SAME: {zgraph.name = "zcc.pp.g0.k0"}
// SPLIT: zgraph.matmul
// SPLIT: zgraph.accumulate
// SPLIT-NOT: zdist.send
// SPLIT-LABEL: func.func @s1.weights.2(
// SPLIT-SAME: {zgraph.name = "zcc.pp.g0.k2"}
// SPLIT-NOT: func.func @s1.weights.3(

module attributes {zcc.config = {world_size = 4 : i64, data_parallel_size = 1 : i64, pipeline_parallel_size = 4 : i64, optimizer = {type = "SGD", params = {lr = 0.1 : f64}}, pipeline = {enabled = true, num_stages = 4 : i64, partition_method = "uniform", schedule = "zb-h1", micro_batches = 8 : i64}}} {
  func.func @main(%x: tensor<4x8xf32> {zgraph.name = "x"}, %t: tensor<4x8xf32> {zgraph.name = "t"}) -> (tensor<f32> {zgraph.name = "loss"}) {
    %w0 = zgraph.param "w0" trainable : tensor<8x8xf32>
    %w1 = zgraph.param "w1" trainable : tensor<8x8xf32>
    %w2 = zgraph.param "w2" trainable : tensor<8x8xf32>
    %w3 = zgraph.param "w3" trainable : tensor<8x8xf32>
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %a0 = zgraph.relu %h0 : tensor<4x8xf32>
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %a1 = zgraph.relu %h1 : tensor<4x8xf32>
    %h2 = zgraph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %a2 = zgraph.relu %h2 : tensor<4x8xf32>
    %h3 = zgraph.matmul %a2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %l = zgraph.mse_loss %h3, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

