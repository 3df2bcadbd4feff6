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

// Pipeline stages times data parallelism: a "pp" axis before "dp", so the
// ranks of one stage are consecutive.
// CHECK-LABEL: module attributes
// CHECK: zdist.mesh @mesh ["pp" = 2, "dp" = 2]
module attributes {zcc.config = {world_size = 4 : i64, data_parallel_size = 2 : i64, pipeline_parallel_size = 2 : i64}} {
}

// -----

// The stages and data-parallel ranks must fill the world.
// expected-error @+1 {{the mesh of 2 pipeline stages x 3 data-parallel ranks does not fill the world size 4; pipeline.num_stages must divide it}}
module attributes {zcc.config = {world_size = 4 : i64, data_parallel_size = 3 : i64, pipeline_parallel_size = 2 : i64}} {
}

// -----

// Data parallelism alone: a "dp" axis of the world size.
// CHECK-LABEL: module attributes
// CHECK: zdist.mesh @mesh ["dp" = 4]
module attributes {zcc.config = {world_size = 4 : i64, data_parallel_size = 4 : i64, pipeline_parallel_size = 1 : i64}} {
}
