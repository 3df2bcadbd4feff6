// RUN: zcc-opt %s --split-input-file --zcc-graph-to-dist --verify-diagnostics | FileCheck %s

// Without a config the graph goes on a one-rank data-parallel mesh.
// CHECK-LABEL: module
// CHECK: zdist.mesh @mesh ["dp" = 1]
module {
}

// -----

// The config's sizes define the mesh.
// CHECK-LABEL: module attributes
// CHECK: zdist.mesh @mesh ["dp" = 1]
module attributes {zcc.config = {world_size = 1 : i64, data_parallel_size = 1 : i64, pipeline_parallel_size = 1 : i64}} {
}

// -----

// Pipeline stages are not built yet.
// expected-error @+1 {{pipeline parallelism (2 stages) is not supported yet: stage partitioning and schedules come later; disable the pipeline section, or compile with --world-size 2}}
module attributes {zcc.config = {world_size = 4 : i64, data_parallel_size = 2 : i64, pipeline_parallel_size = 2 : i64}} {
}

// -----

// Data parallelism alone: a "dp" axis of the world size.
// CHECK-LABEL: module attributes
// CHECK: zdist.mesh @mesh ["dp" = 4]
module attributes {zcc.config = {world_size = 4 : i64, data_parallel_size = 4 : i64, pipeline_parallel_size = 1 : i64}} {
}
