// RUN: zcc-opt %s -split-input-file -zcc-dist-verify -verify-diagnostics | FileCheck %s

// One mesh using exactly the job's devices (2 x 4 = 8) passes unchanged.
// CHECK-LABEL: module attributes {zcc.world_size = 8 : i64}
// CHECK: zdist.mesh @m ["pp" = 2, "dp" = 4]
// CHECK: zdist.all_reduce
module attributes {zcc.world_size = 8 : i64} {
  zdist.mesh @m ["pp" = 2, "dp" = 4]
  func.func @step(%g: tensor<8xf32>) -> tensor<8xf32> {
    %0 = zdist.all_reduce %g on @m axes = ["dp"] reduction = avg : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// Without zcc.world_size the mesh alone sets the number of ranks.
// CHECK-LABEL: module {
// CHECK: zdist.mesh @alone ["dp" = 3]
module {
  zdist.mesh @alone ["dp" = 3]
}

// -----

// The plan gives each rank its coordinates in the mesh, so one is needed.
// expected-error @+1 {{the dist phase must define a zdist.mesh, but the module has none}}
module {
  func.func @step() {
    return
  }
}

// -----

// Two meshes would leave a rank with two sets of coordinates.
module {
  // expected-note @+1 {{first mesh here}}
  zdist.mesh @a ["dp" = 2]
  // expected-error @+1 {{the dist phase defines one device mesh, but the module has 2}}
  zdist.mesh @b ["tp" = 2]
}

// -----

// The mesh must use the devices the job is started on, no more, no fewer.
module attributes {zcc.world_size = 4 : i64} {
  // expected-error @+1 {{mesh @m has 8 devices but zcc.world_size is 4}}
  zdist.mesh @m ["pp" = 2, "dp" = 4]
}

// -----

// A world size written as a string is a bug in whatever set it.
// expected-error @+1 {{zcc.world_size must be an integer, got "8"}}
module attributes {zcc.world_size = "8"} {
  zdist.mesh @m ["pp" = 2, "dp" = 4]
}
