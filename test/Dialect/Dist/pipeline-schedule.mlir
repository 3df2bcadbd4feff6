// RUN: zcc-opt %s --split-input-file --zcc-dist-pipeline-partition --zcc-graph-autodiff --zcc-graph-optimizer --zcc-graph-to-dist --zcc-dist-pipeline-schedule --verify-diagnostics | FileCheck %s

// Four layers on four stages (partition_method uniform), 8 micro-batches.
// F<k>/B<k>: forward/backward of micro-batch k; sa/ra: send/receive its
// activations; sg/rg: send/receive its gradients.

// The boundaries become transfers: each layer's output goes forward to the
// next stage, the gradient of each stage's input back to the one before.
// GPipe runs all eight forward passes, then all eight backward passes, so
// every stage holds the activations of all 8 micro-batches.
// CHECK-LABEL: module attributes
// CHECK: zdist.mesh @mesh ["pp" = 4, "dp" = 1]
// CHECK: zgraph.matmul {{.*}}zdist.stage = 0
// CHECK: zdist.transfer %{{.*}} from 0 to 1 {zdist.stage = 1 : i64} : tensor<4x8xf32>
// CHECK: zdist.transfer %{{.*}} from 1 to 2 {zdist.stage = 2 : i64} : tensor<4x8xf32>
// CHECK: zdist.transfer %{{.*}} from 2 to 3 {zdist.stage = 3 : i64} : tensor<4x8xf32>
// CHECK: zgraph.mse_loss {{.*}}zdist.stage = 3
// CHECK: zdist.transfer %{{.*}} from 3 to 2 {zdist.backward, zdist.stage = 2 : i64} : tensor<4x8xf32>
// CHECK: zdist.transfer %{{.*}} from 2 to 1 {zdist.backward, zdist.stage = 1 : i64} : tensor<4x8xf32>
// CHECK: zdist.transfer %{{.*}} from 1 to 0 {zdist.backward, zdist.stage = 0 : i64} : tensor<4x8xf32>
// CHECK: zdist.pipeline "gpipe" micro_batches = 8 buffers = [8, 8, 8, 8]
// CHECK-SAME: stages = [
// CHECK-SAME: "F0 sa0 F1 sa1 F2 sa2 F3 sa3 F4 sa4 F5 sa5 F6 sa6 F7 sa7 rg0 B0 rg1 B1 rg2 B2 rg3 B3 rg4 B4 rg5 B5 rg6 B6 rg7 B7",
// CHECK-SAME: "ra0 F0 sa0 ra1 F1 sa1 ra2 F2 sa2 ra3 F3 sa3 ra4 F4 sa4 ra5 F5 sa5 ra6 F6 sa6 ra7 F7 sa7 rg0 B0 sg0 rg1 B1 sg1 rg2 B2 sg2 rg3 B3 sg3 rg4 B4 sg4 rg5 B5 sg5 rg6 B6 sg6 rg7 B7 sg7",
// CHECK-SAME: "ra0 F0 sa0 ra1 F1 sa1 ra2 F2 sa2 ra3 F3 sa3 ra4 F4 sa4 ra5 F5 sa5 ra6 F6 sa6 ra7 F7 sa7 rg0 B0 sg0 rg1 B1 sg1 rg2 B2 sg2 rg3 B3 sg3 rg4 B4 sg4 rg5 B5 sg5 rg6 B6 sg6 rg7 B7 sg7",
// CHECK-SAME: "ra0 F0 ra1 F1 ra2 F2 ra3 F3 ra4 F4 ra5 F5 ra6 F6 ra7 F7 B0 sg0 B1 sg1 B2 sg2 B3 sg3 B4 sg4 B5 sg5 B6 sg6 B7 sg7"]
// Activation memory is the buffers times what one micro-batch keeps.
// CHECK-SAME: memory = [{activation_buffer = 256 : i64, activations = 2048 : i64
module attributes {zcc.config = {world_size = 4 : i64, data_parallel_size = 1 : i64, pipeline_parallel_size = 4 : i64, optimizer = {type = "SGD", params = {lr = 0.1 : f64}}, pipeline = {enabled = true, num_stages = 4 : i64, partition_method = "uniform", schedule = "gpipe", micro_batches = 8 : i64}}} {
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

// -----

// 1F1B: stage s runs 3 - s forward passes, then alternates forward and
// backward, then drains: it holds at most 4 - s micro-batches. Where a
// stage sends to and receives from one neighbour in a row, even stages send
// first and odd stages receive first, so neighbours never both wait in a
// send.
// CHECK-LABEL: module attributes
// CHECK: zdist.pipeline "1f1b" micro_batches = 8 buffers = [4, 3, 2, 1]
// CHECK-SAME: stages = [
// CHECK-SAME: "F0 sa0 F1 sa1 F2 sa2 F3 sa3 rg0 B0 F4 sa4 rg1 B1 F5 sa5 rg2 B2 F6 sa6 rg3 B3 F7 sa7 rg4 B4 rg5 B5 rg6 B6 rg7 B7",
// CHECK-SAME: "ra0 F0 sa0 ra1 F1 sa1 ra2 F2 rg0 sa2 B0 ra3 sg0 F3 rg1 sa3 B1 ra4 sg1 F4 rg2 sa4 B2 ra5 sg2 F5 rg3 sa5 B3 ra6 sg3 F6 rg4 sa6 B4 ra7 sg4 F7 rg5 sa7 B5 sg5 rg6 B6 sg6 rg7 B7 sg7",
// CHECK-SAME: "ra0 F0 sa0 ra1 F1 sa1 rg0 B0 sg0 ra2 F2 sa2 rg1 B1 sg1 ra3 F3 sa3 rg2 B2 sg2 ra4 F4 sa4 rg3 B3 sg3 ra5 F5 sa5 rg4 B4 sg4 ra6 F6 sa6 rg5 B5 sg5 ra7 F7 sa7 rg6 B6 sg6 rg7 B7 sg7",
// CHECK-SAME: "ra0 F0 B0 ra1 sg0 F1 B1 ra2 sg1 F2 B2 ra3 sg2 F3 B3 ra4 sg3 F4 B4 ra5 sg4 F5 B5 ra6 sg5 F6 B6 ra7 sg6 F7 B7 sg7"]
// CHECK-SAME: memory = [{activation_buffer = 256 : i64, activations = 1024 : i64
module attributes {zcc.config = {world_size = 4 : i64, data_parallel_size = 1 : i64, pipeline_parallel_size = 4 : i64, optimizer = {type = "SGD", params = {lr = 0.1 : f64}}, pipeline = {enabled = true, num_stages = 4 : i64, partition_method = "uniform", schedule = "1f1b", micro_batches = 8 : i64}}} {
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

// -----

// Fewer micro-batches than stages: 1F1B's warm-up is cut short.
// CHECK-LABEL: module attributes
// CHECK: zdist.pipeline "1f1b" micro_batches = 2 buffers = [2, 2, 2, 1]
module attributes {zcc.config = {world_size = 4 : i64, data_parallel_size = 1 : i64, pipeline_parallel_size = 4 : i64, optimizer = {type = "SGD", params = {lr = 0.1 : f64}}, pipeline = {enabled = true, num_stages = 4 : i64, partition_method = "uniform", schedule = "1f1b", micro_batches = 2 : i64}}} {
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

// -----

// Interleaved 1F1B: the four layers are four chunks, chunk c on stage
// c mod 2 (stage 0 holds layers 0 and 2), the last chunk's activations
// going back to stage 0 for chunk 2. Each instruction names its chunk
// (F<k>@<c>). Stage 0 warms up with micro-batches 0 and 1 through chunk 0
// and then chunk 2, and alternates forward and backward passes from
// there, as Megatron's order; every send meets its receive in one global
// order (both stages' lists pair up). `buffers` counts each chunk's slots.
// CHECK-LABEL: module attributes
// CHECK: zdist.mesh @mesh ["pp" = 2, "dp" = 1]
// CHECK: zdist.transfer %{{.*}} from 0 to 1
// CHECK: zdist.transfer %{{.*}} from 1 to 2
// CHECK: zdist.transfer %{{.*}} from 2 to 3
// CHECK: zdist.transfer %{{.*}} from 3 to 2 {zdist.backward
// CHECK: zdist.pipeline "interleaved" micro_batches = 4 buffers = [4, 4, 2, 1]
// CHECK-SAME: stages = [
// CHECK-SAME: "F0@0 sa0@0 F1@0 ra0@2 sa1@0 F0@2 ra1@2 sa0@2 F1@2 F2@0 rg0@2 sa1@2 B0@2 F3@0 rg1@2 sa2@0 sg0@2 B1@2 ra2@2 sa3@0 F2@2 rg0@0 sg1@2 B0@0 ra3@2 sa2@2 F3@2 rg1@0 B1@0 rg2@2 sa3@2 B2@2 rg3@2 sg2@2 B3@2 rg2@0 sg3@2 B2@0 rg3@0 B3@0",
// CHECK-SAME: "ra0@1 F0@1 sa0@1 ra1@1 F1@1 sa1@1 ra0@3 F0@3 B0@3 sg0@3 ra1@3 F1@3 B1@3 sg1@3 ra2@1 F2@1 rg0@1 B0@1 sa2@1 ra3@1 F3@1 sg0@1 rg1@1 B1@1 sa3@1 ra2@3 F2@3 sg1@1 B2@3 sg2@3 ra3@3 F3@3 B3@3 sg3@3 rg2@1 B2@1 sg2@1 rg3@1 B3@1 sg3@1"]
// Each stage's flops and bytes are its two chunks'.
// CHECK-SAME: flops = {{\[\[}}1088, 1920], [1057, 2464]]
module attributes {zcc.config = {world_size = 2 : i64, data_parallel_size = 1 : i64, pipeline_parallel_size = 2 : i64, optimizer = {type = "SGD", params = {lr = 0.1 : f64}}, pipeline = {enabled = true, num_stages = 2 : i64, chunks = 2 : i64, partition_method = "uniform", schedule = "interleaved", micro_batches = 4 : i64}}} {
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

// -----

// The interleaved schedule takes the micro-batches in groups of num_stages.
// expected-error @+1 {{pipeline.micro_batches: the 'interleaved' schedule runs the micro-batches in groups of num_stages (2), but there are 3}}
module attributes {zcc.config = {world_size = 2 : i64, data_parallel_size = 1 : i64, pipeline_parallel_size = 2 : i64, optimizer = {type = "SGD", params = {lr = 0.1 : f64}}, pipeline = {enabled = true, num_stages = 2 : i64, chunks = 2 : i64, partition_method = "uniform", schedule = "interleaved", micro_batches = 3 : i64}}} {
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
