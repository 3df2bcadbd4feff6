// RUN: zcc-opt %s -split-input-file -zcc-plan-verify -verify-diagnostics | FileCheck %s

// A plan whose every wait follows a record on another stream passes
// unchanged: an event recorded on two streams satisfies a wait on either,
// a program-local event works like a module one, and an event may be
// recorded again and waited on again.
// CHECK-LABEL: zplan.program @micro_step
// CHECK: zplan.record @grads_ready stream 0
// CHECK: zplan.wait @grads_ready stream 1
// CHECK-LABEL: zplan.program @optimizer_step
// CHECK: zplan.wait @local stream 2
zplan.arena @device size 4096 alignment 256 {
  zplan.buffer @grads offset 0 size 2048
  zplan.buffer @params offset 2048 size 2048
}
zplan.event @grads_ready
zplan.program @micro_step {
  zplan.kernel "backward_f32" ins(@device::@params) outs(@device::@grads) stream 0
  zplan.record @grads_ready stream 0
  zplan.wait @grads_ready stream 1
  zplan.kernel "all_reduce_f32" ins(@device::@grads) outs(@device::@grads) stream 1
  zplan.record @grads_ready stream 1
  zplan.wait @grads_ready stream 0
}
zplan.program @optimizer_step {
  zplan.event @local
  zplan.record @local stream 0
  zplan.record @local stream 1
  zplan.wait @local stream 0
  zplan.wait @local stream 2
}

// -----

// zgraph ops left over mean the graph was not lowered.
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'zgraph.relu' is left in the plan; every zgraph and zdist op must be lowered to zplan}}
  %0 = zgraph.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// So do zdist ops, including the mesh itself.
// expected-error @+1 {{'zdist.mesh' is left in the plan; every zgraph and zdist op must be lowered to zplan}}
zdist.mesh @m ["dp" = 2]

// -----

// A wait with no record at all would wait for nothing.
zplan.event @e0
zplan.program @p {
  // expected-error @+1 {{wait on @e0 has no earlier record on another stream}}
  zplan.wait @e0 stream 0
}

// -----

// Program order matters: a record after the wait does not count.
zplan.event @e0
zplan.program @p {
  // expected-error @+1 {{wait on @e0 has no earlier record on another stream}}
  zplan.wait @e0 stream 0
  zplan.record @e0 stream 1
}

// -----

// A stream waiting on its own record orders nothing across streams.
zplan.event @e0
zplan.program @p {
  zplan.record @e0 stream 0
  // expected-error @+1 {{wait on @e0 has no earlier record on another stream}}
  zplan.wait @e0 stream 0
}

// -----

// Programs run on their own: a record in one does not satisfy a wait in
// another, even on a module-level event.
zplan.event @e0
zplan.program @a {
  zplan.record @e0 stream 1
}
zplan.program @b {
  // expected-error @+1 {{wait on @e0 has no earlier record on another stream}}
  zplan.wait @e0 stream 0
}

// -----

// Records of another event do not count.
zplan.event @e0
zplan.event @e1
zplan.program @p {
  zplan.record @e1 stream 1
  // expected-error @+1 {{wait on @e0 has no earlier record on another stream}}
  zplan.wait @e0 stream 0
}

// -----

// Two buffers the memory plan gives the same bytes, written on stream 1
// and read on stream 0 with no event between: a race.
zplan.arena @device size 768 alignment 256 {
  zplan.buffer @gathered offset 0 size 512
  zplan.buffer @reused offset 256 size 256
  zplan.buffer @other offset 512 size 256
}
zplan.program @micro_step {
  zplan.kernel "all_gather" ins(@device::@other) outs(@device::@gathered) stream 1
  // expected-error @+1 {{'matmul' on stream 0 reads @reused while 'all_gather' on stream 1 writes @gathered, which shares its bytes, and no event orders the two (program 'micro_step')}}
  zplan.kernel "matmul" ins(@device::@reused) outs(@device::@other) stream 0
}

// -----

// Ordered: stream 0 waits for the gather's event; reads on two streams
// never race; a chain of events orders across three streams.
// CHECK-LABEL: zplan.program @ordered
// CHECK: zplan.kernel "matmul"
zplan.arena @device size 768 alignment 256 {
  zplan.buffer @w offset 0 size 256
  zplan.buffer @x offset 256 size 256
  zplan.buffer @y offset 512 size 256
}
zplan.program @ordered {
  zplan.event @e0
  zplan.event @e1
  zplan.event @e2
  zplan.kernel "all_gather" ins(@device::@x) outs(@device::@w) stream 1
  zplan.record @e0 stream 1
  zplan.kernel "relu" ins(@device::@x) outs(@device::@y) stream 0
  zplan.wait @e0 stream 2
  zplan.record @e1 stream 2
  zplan.wait @e1 stream 0
  zplan.kernel "matmul" ins(@device::@w, @device::@x) outs(@device::@y) stream 0
  zplan.record @e2 stream 0
  zplan.wait @e2 stream 1
  zplan.kernel "all_reduce" ins(@device::@y) outs(@device::@w) stream 1
}

// -----

// An event orders only the work recorded before it: the second write on
// stream 0 comes after the record, so the read on stream 1 races with it.
zplan.arena @device size 512 alignment 256 {
  zplan.buffer @x offset 0 size 256
  zplan.buffer @y offset 256 size 256
}
zplan.program @micro_step {
  zplan.event @e0
  zplan.kernel "fill" ins() outs(@device::@x) stream 0
  zplan.record @e0 stream 0
  zplan.wait @e0 stream 1
  zplan.kernel "fill" ins() outs(@device::@x) stream 0
  // expected-error @+1 {{'all_reduce' on stream 1 reads @x while 'fill' on stream 0 writes @x, which shares its bytes, and no event orders the two (program 'micro_step')}}
  zplan.kernel "all_reduce" ins(@device::@x) outs(@device::@y) stream 1
}
