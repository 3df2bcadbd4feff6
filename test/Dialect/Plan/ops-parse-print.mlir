// RUN: zcc-opt %s | zcc-opt | FileCheck %s
// RUN: zcc-opt %s --mlir-print-op-generic | zcc-opt | FileCheck %s

// Device memory is the default and is not printed. Buffers may overlap: @b2
// reuses the bytes of @b0, which is the point of liveness-based planning.
// CHECK-LABEL: zplan.arena @device size 4096 alignment 256 {
// CHECK-NEXT: zplan.buffer @b0 offset 0 size 1024
// CHECK-NEXT: zplan.buffer @b1 offset 1024 size 3072
// CHECK-NEXT: zplan.buffer @b2 offset 0 size 512
// CHECK-NEXT: }
zplan.arena @device size 4096 alignment 256 {
  zplan.buffer @b0 offset 0 size 1024
  zplan.buffer @b1 offset 1024 size 3072
  zplan.buffer @b2 offset 0 size 512
}

// Pinned host memory for offloaded optimizer state; a buffer may fill the
// arena exactly.
// CHECK-LABEL: zplan.arena @pinned in host size 1024 alignment 64 {
// CHECK-NEXT: zplan.buffer @adam_m offset 0 size 1024
zplan.arena @pinned in host size 1024 alignment 64 {
  zplan.buffer @adam_m offset 0 size 1024
}

// An empty arena (a plan with nothing to stage) still parses and prints.
// CHECK-LABEL: zplan.arena @empty in host size 0 alignment 1 {
// CHECK-NEXT: }
zplan.arena @empty in host size 0 alignment 1 {
}

// Module-level events are visible to every program.
// CHECK: zplan.event @grads_ready
zplan.event @grads_ready

// Kernels name buffers through their arena; a kernel may read nothing
// (a fill), carry its own parameters, and carry discardable attributes.
// CHECK-LABEL: zplan.program @micro_step {
// CHECK-NEXT: zplan.kernel "matmul_f32" ins(@device::@b0, @device::@b1) outs(@device::@b2) stream 0
// CHECK-NEXT: zplan.kernel "fill_f32" ins() outs(@device::@b1) stream 0 params {value = 0.000000e+00 : f32}
// CHECK-NEXT: zplan.kernel "gelu_f32" ins(@device::@b0) outs(@device::@b2) stream 2 {zcc.origin = "fc1"}
zplan.program @micro_step {
  zplan.kernel "matmul_f32" ins(@device::@b0, @device::@b1) outs(@device::@b2) stream 0
  zplan.kernel "fill_f32" ins() outs(@device::@b1) stream 0 params {value = 0.0 : f32}
  zplan.kernel "gelu_f32" ins(@device::@b0) outs(@device::@b2) stream 2 {zcc.origin = "fc1"}
}

// Events order streams: one declared in the module, one in the program.
// CHECK-LABEL: zplan.program @optimizer_step {
// CHECK-NEXT: zplan.event @local
// CHECK-NEXT: zplan.record @grads_ready stream 1
// CHECK-NEXT: zplan.wait @grads_ready stream 0
// CHECK-NEXT: zplan.record @local stream 0
// CHECK-NEXT: zplan.wait @local stream 1
zplan.program @optimizer_step {
  zplan.event @local
  zplan.record @grads_ready stream 1
  zplan.wait @grads_ready stream 0
  zplan.record @local stream 0
  zplan.wait @local stream 1
}

// An empty program is legal (a phase with nothing to do).
// CHECK-LABEL: zplan.program @init {
// CHECK-NEXT: }
zplan.program @init {
}
