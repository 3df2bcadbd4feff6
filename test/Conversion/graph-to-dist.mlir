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

// More than one rank needs sharding and collectives, which are not built yet.
// expected-error @+1 {{plans for 4 ranks are not supported yet}}
module attributes {zcc.config = {world_size = 4 : i64, data_parallel_size = 2 : i64, pipeline_parallel_size = 2 : i64}} {
}
