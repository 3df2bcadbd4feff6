// RUN: zcc-opt %s --split-input-file --zcc-dist-pipeline-partition --zcc-graph-to-dist --zcc-dist-pipeline-schedule | FileCheck %s

// Pipeline inference: four layers on four stages, forward passes only.

// Inference: forward passes only, one buffer each. The four stages do the
// same work (a product and a ReLU), so the idle share is GPipe's
// (p - 1) / (m + p - 1) = 3 / 11.
// CHECK-LABEL: module attributes
// CHECK: zdist.pipeline "gpipe" micro_batches = 8 buffers = [1, 1, 1, 1] bubble_fraction = 0.27272727272727
// CHECK-SAME: "F0 sa0 F1 sa1 F2 sa2 F3 sa3 F4 sa4 F5 sa5 F6 sa6 F7 sa7"
// CHECK-SAME: "ra0 F0 ra1 F1 ra2 F2 ra3 F3 ra4 F4 ra5 F5 ra6 F6 ra7 F7"
// CHECK-SAME: flops = {{\[}}[544, 0], [544, 0], [544, 0], [544, 0]]
module attributes {zcc.config = {world_size = 4 : i64, data_parallel_size = 1 : i64, pipeline_parallel_size = 4 : i64, pipeline = {enabled = true, num_stages = 4 : i64, partition_method = "uniform", schedule = "gpipe", micro_batches = 8 : i64}}} {
  func.func @main(%x: tensor<4x8xf32> {zgraph.name = "x"}) -> (tensor<4x8xf32> {zgraph.name = "y"}) {
    %w0 = zgraph.param "w0" : tensor<8x8xf32>
    %w1 = zgraph.param "w1" : tensor<8x8xf32>
    %w2 = zgraph.param "w2" : tensor<8x8xf32>
    %w3 = zgraph.param "w3" : tensor<8x8xf32>
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %a0 = zgraph.relu %h0 : tensor<4x8xf32>
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %a1 = zgraph.relu %h1 : tensor<4x8xf32>
    %h2 = zgraph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %a2 = zgraph.relu %h2 : tensor<4x8xf32>
    %h3 = zgraph.matmul %a2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %a3 = zgraph.relu %h3 : tensor<4x8xf32>
    return %a3 : tensor<4x8xf32>
  }
}

// -----

// With 2 micro-batches the same pipeline idles 3 / 5 of the time.
// CHECK-LABEL: module attributes
// CHECK: zdist.pipeline "gpipe" micro_batches = 2 buffers = [1, 1, 1, 1] bubble_fraction = 6.000000e-01
module attributes {zcc.config = {world_size = 4 : i64, data_parallel_size = 1 : i64, pipeline_parallel_size = 4 : i64, pipeline = {enabled = true, num_stages = 4 : i64, partition_method = "uniform", schedule = "gpipe", micro_batches = 2 : i64}}} {
  func.func @main(%x: tensor<4x8xf32> {zgraph.name = "x"}) -> (tensor<4x8xf32> {zgraph.name = "y"}) {
    %w0 = zgraph.param "w0" : tensor<8x8xf32>
    %w1 = zgraph.param "w1" : tensor<8x8xf32>
    %w2 = zgraph.param "w2" : tensor<8x8xf32>
    %w3 = zgraph.param "w3" : tensor<8x8xf32>
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %a0 = zgraph.relu %h0 : tensor<4x8xf32>
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %a1 = zgraph.relu %h1 : tensor<4x8xf32>
    %h2 = zgraph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %a2 = zgraph.relu %h2 : tensor<4x8xf32>
    %h3 = zgraph.matmul %a2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %a3 = zgraph.relu %h3 : tensor<4x8xf32>
    return %a3 : tensor<4x8xf32>
  }
}
