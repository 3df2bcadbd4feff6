// RUN: zcc-opt %s --split-input-file --zcc-dist-pipeline-partition --verify-diagnostics | FileCheck %s

// One model, an embedding table of 8000 elements and four 8x8 layers, cut
// in two stages by each partition method: the cut moves with what is
// balanced.

// By parameters: the table alone outweighs the four layers (8000 vs 256
// elements), so it is stage 0 and every layer is stage 1.
// CHECK-LABEL: module attributes
// CHECK-SAME: zdist.partition = {flops = array<i64: 32, 2144>, method = "parameters", parameters = array<i64: 8000, 256>, weights = array<i64: 8000, 256>}
// CHECK: zgraph.param "embed" trainable {zdist.stage = 0 : i64}
// CHECK: zgraph.param "w0" trainable {zdist.stage = 1 : i64}
// CHECK: zgraph.gather {{.*}}zdist.stage = 0
// CHECK: zgraph.matmul {{.*}}zdist.stage = 1
// CHECK: zgraph.relu {{.*}}zdist.stage = 1
// CHECK: zgraph.matmul {{.*}}zdist.stage = 1
// CHECK: zgraph.relu {{.*}}zdist.stage = 1
// CHECK: zgraph.matmul {{.*}}zdist.stage = 1
// CHECK: zgraph.relu {{.*}}zdist.stage = 1
// CHECK: zgraph.matmul {{.*}}zdist.stage = 1
module attributes {zcc.config = {pipeline = {enabled = true, num_stages = 2 : i64, partition_method = "parameters"}}} {
  func.func @main(%ids: tensor<4xi64> {zgraph.name = "ids"}) -> tensor<4x8xf32> {
    %table = zgraph.param "embed" trainable : tensor<1000x8xf32>
    %w0 = zgraph.param "w0" trainable : tensor<8x8xf32>
    %w1 = zgraph.param "w1" trainable : tensor<8x8xf32>
    %w2 = zgraph.param "w2" trainable : tensor<8x8xf32>
    %w3 = zgraph.param "w3" trainable : tensor<8x8xf32>
    %x = zgraph.gather %table[%ids] axis = 0 : (tensor<1000x8xf32>, tensor<4xi64>) -> tensor<4x8xf32> loc("embed/Gather")
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block0/fc/MatMul")
    %a0 = zgraph.relu %h0 : tensor<4x8xf32> loc("block0/Relu")
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block1/fc/MatMul")
    %a1 = zgraph.relu %h1 : tensor<4x8xf32> loc("block1/Relu")
    %h2 = zgraph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block2/fc/MatMul")
    %a2 = zgraph.relu %h2 : tensor<4x8xf32> loc("block2/Relu")
    %h3 = zgraph.matmul %a2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block3/fc/MatMul")
    return %h3 : tensor<4x8xf32>
  }
}

// -----

// A tied table: the 16x8 embedding (128 elements) is read again, transposed,
// by the output layer. DeepSpeed builds and counts each layer spec, so the
// tied table weighs on both ends: 128 + 4 x 64 + 128, and the cut falls
// after the second layer (256 each). Counted once it would fall after the
// first (192 each), leaving the output layer's work out of the balance.
// CHECK-LABEL: module attributes
// CHECK-SAME: parameters = array<i64: 256, 256>, weights = array<i64: 256, 256>
// CHECK: zgraph.param "embed" trainable {zdist.stage = 0 : i64}
// CHECK: zgraph.gather {{.*}}zdist.stage = 0
// CHECK: zgraph.matmul {{.*}}zdist.stage = 0
// CHECK: zgraph.matmul {{.*}}zdist.stage = 0
// CHECK: zgraph.matmul {{.*}}zdist.stage = 1
// CHECK: zgraph.matmul {{.*}}zdist.stage = 1
// CHECK: zgraph.matmul {{.*}}{transpose_rhs{{.*}}zdist.stage = 1
module attributes {zcc.config = {pipeline = {enabled = true, num_stages = 2 : i64, partition_method = "parameters"}}} {
  func.func @main(%ids: tensor<4xi64> {zgraph.name = "ids"}) -> tensor<4x16xf32> {
    %table = zgraph.param "embed" trainable : tensor<16x8xf32>
    %w0 = zgraph.param "w0" trainable : tensor<8x8xf32>
    %w1 = zgraph.param "w1" trainable : tensor<8x8xf32>
    %w2 = zgraph.param "w2" trainable : tensor<8x8xf32>
    %w3 = zgraph.param "w3" trainable : tensor<8x8xf32>
    %x = zgraph.gather %table[%ids] axis = 0 : (tensor<16x8xf32>, tensor<4xi64>) -> tensor<4x8xf32> loc("embed/Gather")
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block0/fc/MatMul")
    %h1 = zgraph.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block1/fc/MatMul")
    %h2 = zgraph.matmul %h1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block2/fc/MatMul")
    %h3 = zgraph.matmul %h2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block3/fc/MatMul")
    %logits = zgraph.matmul %h3, %table {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32> loc("head/MatMul")
    return %logits : tensor<4x16xf32>
  }
}

// -----

// By flops: the lookup costs 32 flops, each layer 512 (2 x 4 x 8 x 8) and
// each ReLU 32, so the cut falls after the second layer's product: 1088
// flops each.
// CHECK-LABEL: module attributes
// CHECK-SAME: zdist.partition = {flops = array<i64: 1088, 1088>, method = "flops", parameters = array<i64: 8128, 128>, weights = array<i64: 1088, 1088>}
// CHECK: zgraph.gather {{.*}}zdist.stage = 0
// CHECK: zgraph.matmul {{.*}}zdist.stage = 0
// CHECK: zgraph.relu {{.*}}zdist.stage = 0
// CHECK: zgraph.matmul {{.*}}zdist.stage = 0
// CHECK: zgraph.relu {{.*}}zdist.stage = 1
// CHECK: zgraph.matmul {{.*}}zdist.stage = 1
// CHECK: zgraph.relu {{.*}}zdist.stage = 1
// CHECK: zgraph.matmul {{.*}}zdist.stage = 1
module attributes {zcc.config = {pipeline = {enabled = true, num_stages = 2 : i64, partition_method = "flops"}}} {
  func.func @main(%ids: tensor<4xi64> {zgraph.name = "ids"}) -> tensor<4x8xf32> {
    %table = zgraph.param "embed" trainable : tensor<1000x8xf32>
    %w0 = zgraph.param "w0" trainable : tensor<8x8xf32>
    %w1 = zgraph.param "w1" trainable : tensor<8x8xf32>
    %w2 = zgraph.param "w2" trainable : tensor<8x8xf32>
    %w3 = zgraph.param "w3" trainable : tensor<8x8xf32>
    %x = zgraph.gather %table[%ids] axis = 0 : (tensor<1000x8xf32>, tensor<4xi64>) -> tensor<4x8xf32> loc("embed/Gather")
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block0/fc/MatMul")
    %a0 = zgraph.relu %h0 : tensor<4x8xf32> loc("block0/Relu")
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block1/fc/MatMul")
    %a1 = zgraph.relu %h1 : tensor<4x8xf32> loc("block1/Relu")
    %h2 = zgraph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block2/fc/MatMul")
    %a2 = zgraph.relu %h2 : tensor<4x8xf32> loc("block2/Relu")
    %h3 = zgraph.matmul %a2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block3/fc/MatMul")
    return %h3 : tensor<4x8xf32>
  }
}

// -----

// Uniform: five layers (ops with a parameter) over two stages.
// CHECK-LABEL: module attributes
// CHECK-SAME: method = "uniform"
// CHECK-SAME: weights = array<i64: 3, 2>
module attributes {zcc.config = {pipeline = {enabled = true, num_stages = 2 : i64, partition_method = "uniform"}}} {
  func.func @main(%ids: tensor<4xi64> {zgraph.name = "ids"}) -> tensor<4x8xf32> {
    %table = zgraph.param "embed" trainable : tensor<1000x8xf32>
    %w0 = zgraph.param "w0" trainable : tensor<8x8xf32>
    %w1 = zgraph.param "w1" trainable : tensor<8x8xf32>
    %w2 = zgraph.param "w2" trainable : tensor<8x8xf32>
    %w3 = zgraph.param "w3" trainable : tensor<8x8xf32>
    %x = zgraph.gather %table[%ids] axis = 0 : (tensor<1000x8xf32>, tensor<4xi64>) -> tensor<4x8xf32> loc("embed/Gather")
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block0/fc/MatMul")
    %a0 = zgraph.relu %h0 : tensor<4x8xf32> loc("block0/Relu")
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block1/fc/MatMul")
    %a1 = zgraph.relu %h1 : tensor<4x8xf32> loc("block1/Relu")
    %h2 = zgraph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block2/fc/MatMul")
    %a2 = zgraph.relu %h2 : tensor<4x8xf32> loc("block2/Relu")
    %h3 = zgraph.matmul %a2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block3/fc/MatMul")
    return %h3 : tensor<4x8xf32>
  }
}

// -----

// type:REGEX counts the ops whose ONNX node name matches: the four
// "block" MatMuls, two per stage; the lookup stays with the first.
// CHECK-LABEL: module attributes
// CHECK-SAME: method = "type:block[0-9]/fc"
// CHECK-SAME: weights = array<i64: 2, 2>
// CHECK: zgraph.gather {{.*}}zdist.stage = 0
// CHECK: zgraph.matmul {{.*}}zdist.stage = 0
// CHECK: zgraph.matmul {{.*}}zdist.stage = 0
// CHECK: zgraph.matmul {{.*}}zdist.stage = 1
// CHECK: zgraph.matmul {{.*}}zdist.stage = 1
module attributes {zcc.config = {pipeline = {enabled = true, num_stages = 2 : i64, partition_method = "type:block[0-9]/fc"}}} {
  func.func @main(%ids: tensor<4xi64> {zgraph.name = "ids"}) -> tensor<4x8xf32> {
    %table = zgraph.param "embed" trainable : tensor<1000x8xf32>
    %w0 = zgraph.param "w0" trainable : tensor<8x8xf32>
    %w1 = zgraph.param "w1" trainable : tensor<8x8xf32>
    %w2 = zgraph.param "w2" trainable : tensor<8x8xf32>
    %w3 = zgraph.param "w3" trainable : tensor<8x8xf32>
    %x = zgraph.gather %table[%ids] axis = 0 : (tensor<1000x8xf32>, tensor<4xi64>) -> tensor<4x8xf32> loc("embed/Gather")
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block0/fc/MatMul")
    %a0 = zgraph.relu %h0 : tensor<4x8xf32> loc("block0/Relu")
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block1/fc/MatMul")
    %a1 = zgraph.relu %h1 : tensor<4x8xf32> loc("block1/Relu")
    %h2 = zgraph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block2/fc/MatMul")
    %a2 = zgraph.relu %h2 : tensor<4x8xf32> loc("block2/Relu")
    %h3 = zgraph.matmul %a2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block3/fc/MatMul")
    return %h3 : tensor<4x8xf32>
  }
}

// -----

// Four stages, one per layer by uniform: the table's lookup shares the
// first.
// CHECK-LABEL: module attributes
// CHECK-SAME: weights = array<i64: 2, 1, 1, 1>
module attributes {zcc.config = {pipeline = {enabled = true, num_stages = 4 : i64, partition_method = "uniform"}}} {
  func.func @main(%ids: tensor<4xi64> {zgraph.name = "ids"}) -> tensor<4x8xf32> {
    %table = zgraph.param "embed" trainable : tensor<1000x8xf32>
    %w0 = zgraph.param "w0" trainable : tensor<8x8xf32>
    %w1 = zgraph.param "w1" trainable : tensor<8x8xf32>
    %w2 = zgraph.param "w2" trainable : tensor<8x8xf32>
    %w3 = zgraph.param "w3" trainable : tensor<8x8xf32>
    %x = zgraph.gather %table[%ids] axis = 0 : (tensor<1000x8xf32>, tensor<4xi64>) -> tensor<4x8xf32> loc("embed/Gather")
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block0/fc/MatMul")
    %a0 = zgraph.relu %h0 : tensor<4x8xf32> loc("block0/Relu")
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block1/fc/MatMul")
    %a1 = zgraph.relu %h1 : tensor<4x8xf32> loc("block1/Relu")
    %h2 = zgraph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block2/fc/MatMul")
    %a2 = zgraph.relu %h2 : tensor<4x8xf32> loc("block2/Relu")
    %h3 = zgraph.matmul %a2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block3/fc/MatMul")
    return %h3 : tensor<4x8xf32>
  }
}

// -----

// More stages than layers.
// expected-error @+1 {{pipeline.num_stages: 6 stages need at least one layer each, but partition_method 'uniform' finds 5 (ops that use a parameter); set num_stages to at most 5}}
module attributes {zcc.config = {pipeline = {enabled = true, num_stages = 6 : i64, partition_method = "uniform"}}} {
  func.func @main(%ids: tensor<4xi64> {zgraph.name = "ids"}) -> tensor<4x8xf32> {
    %table = zgraph.param "embed" trainable : tensor<1000x8xf32>
    %w0 = zgraph.param "w0" trainable : tensor<8x8xf32>
    %w1 = zgraph.param "w1" trainable : tensor<8x8xf32>
    %w2 = zgraph.param "w2" trainable : tensor<8x8xf32>
    %w3 = zgraph.param "w3" trainable : tensor<8x8xf32>
    %x = zgraph.gather %table[%ids] axis = 0 : (tensor<1000x8xf32>, tensor<4xi64>) -> tensor<4x8xf32> loc("embed/Gather")
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block0/fc/MatMul")
    %a0 = zgraph.relu %h0 : tensor<4x8xf32> loc("block0/Relu")
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block1/fc/MatMul")
    %a1 = zgraph.relu %h1 : tensor<4x8xf32> loc("block1/Relu")
    %h2 = zgraph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block2/fc/MatMul")
    %a2 = zgraph.relu %h2 : tensor<4x8xf32> loc("block2/Relu")
    %h3 = zgraph.matmul %a2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block3/fc/MatMul")
    return %h3 : tensor<4x8xf32>
  }
}

// -----

// A regular expression that matches too few ops.
// expected-error @+1 {{pipeline.num_stages: 2 stages need at least one layer each, but partition_method 'type:attention' finds 0 (ops whose name matches the regular expression); set num_stages to at most 1 or match more ops}}
module attributes {zcc.config = {pipeline = {enabled = true, num_stages = 2 : i64, partition_method = "type:attention"}}} {
  func.func @main(%ids: tensor<4xi64> {zgraph.name = "ids"}) -> tensor<4x8xf32> {
    %table = zgraph.param "embed" trainable : tensor<1000x8xf32>
    %w0 = zgraph.param "w0" trainable : tensor<8x8xf32>
    %w1 = zgraph.param "w1" trainable : tensor<8x8xf32>
    %w2 = zgraph.param "w2" trainable : tensor<8x8xf32>
    %w3 = zgraph.param "w3" trainable : tensor<8x8xf32>
    %x = zgraph.gather %table[%ids] axis = 0 : (tensor<1000x8xf32>, tensor<4xi64>) -> tensor<4x8xf32> loc("embed/Gather")
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block0/fc/MatMul")
    %a0 = zgraph.relu %h0 : tensor<4x8xf32> loc("block0/Relu")
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block1/fc/MatMul")
    %a1 = zgraph.relu %h1 : tensor<4x8xf32> loc("block1/Relu")
    %h2 = zgraph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block2/fc/MatMul")
    %a2 = zgraph.relu %h2 : tensor<4x8xf32> loc("block2/Relu")
    %h3 = zgraph.matmul %a2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block3/fc/MatMul")
    return %h3 : tensor<4x8xf32>
  }
}

// -----

// An invalid regular expression.
// expected-error @+1 {{pipeline.partition_method: 'block[' is not a valid regular expression}}
module attributes {zcc.config = {pipeline = {enabled = true, num_stages = 2 : i64, partition_method = "type:block["}}} {
  func.func @main(%ids: tensor<4xi64> {zgraph.name = "ids"}) -> tensor<4x8xf32> {
    %table = zgraph.param "embed" trainable : tensor<1000x8xf32>
    %w0 = zgraph.param "w0" trainable : tensor<8x8xf32>
    %w1 = zgraph.param "w1" trainable : tensor<8x8xf32>
    %w2 = zgraph.param "w2" trainable : tensor<8x8xf32>
    %w3 = zgraph.param "w3" trainable : tensor<8x8xf32>
    %x = zgraph.gather %table[%ids] axis = 0 : (tensor<1000x8xf32>, tensor<4xi64>) -> tensor<4x8xf32> loc("embed/Gather")
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block0/fc/MatMul")
    %a0 = zgraph.relu %h0 : tensor<4x8xf32> loc("block0/Relu")
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block1/fc/MatMul")
    %a1 = zgraph.relu %h1 : tensor<4x8xf32> loc("block1/Relu")
    %h2 = zgraph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block2/fc/MatMul")
    %a2 = zgraph.relu %h2 : tensor<4x8xf32> loc("block2/Relu")
    %h3 = zgraph.matmul %a2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block3/fc/MatMul")
    return %h3 : tensor<4x8xf32>
  }
}

// -----

// One stage: nothing changes.
// CHECK-LABEL: module attributes
// CHECK-NOT: zdist.stage
module attributes {zcc.config = {pipeline = {enabled = true, num_stages = 1 : i64, partition_method = "parameters"}}} {
  func.func @main(%ids: tensor<4xi64> {zgraph.name = "ids"}) -> tensor<4x8xf32> {
    %table = zgraph.param "embed" trainable : tensor<1000x8xf32>
    %w0 = zgraph.param "w0" trainable : tensor<8x8xf32>
    %w1 = zgraph.param "w1" trainable : tensor<8x8xf32>
    %w2 = zgraph.param "w2" trainable : tensor<8x8xf32>
    %w3 = zgraph.param "w3" trainable : tensor<8x8xf32>
    %x = zgraph.gather %table[%ids] axis = 0 : (tensor<1000x8xf32>, tensor<4xi64>) -> tensor<4x8xf32> loc("embed/Gather")
    %h0 = zgraph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block0/fc/MatMul")
    %a0 = zgraph.relu %h0 : tensor<4x8xf32> loc("block0/Relu")
    %h1 = zgraph.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block1/fc/MatMul")
    %a1 = zgraph.relu %h1 : tensor<4x8xf32> loc("block1/Relu")
    %h2 = zgraph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block2/fc/MatMul")
    %a2 = zgraph.relu %h2 : tensor<4x8xf32> loc("block2/Relu")
    %h3 = zgraph.matmul %a2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("block3/fc/MatMul")
    return %h3 : tensor<4x8xf32>
  }
}
