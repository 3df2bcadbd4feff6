// RUN: zcc-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// zplan.arena and zplan.buffer
//===----------------------------------------------------------------------===//

// The runtime rounds sizes and offsets with masks.
// expected-error @+1 {{'zplan.arena' op alignment 96 is not a power of two}}
zplan.arena @device size 4096 alignment 96 {
}

// -----

// Zero is not a power of two either; the attribute's type says so first.
// expected-error @+1 {{attribute 'alignment' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
zplan.arena @device size 4096 alignment 0 {
}

// -----

// An arena is memory, not a place for other symbols.
// expected-error @+1 {{'zplan.arena' op holds 'func.func'; an arena holds only zplan.buffer ops}}
zplan.arena @device size 4096 alignment 256 {
  func.func private @not_a_buffer()
}

// -----

// Every buffer starts on the arena's alignment.
zplan.arena @device size 4096 alignment 256 {
  // expected-error @+1 {{'zplan.buffer' op offset 100 is not a multiple of the arena alignment 256}}
  zplan.buffer @b0 offset 100 size 256
}

// -----

// A buffer ends within its arena.
zplan.arena @device size 4096 alignment 256 {
  // expected-error @+1 {{'zplan.buffer' op at offset 3072 with size 2048 does not fit in arena @device of size 4096}}
  zplan.buffer @b0 offset 3072 size 2048
}

// -----

// A buffer that starts past the end is caught without overflowing.
zplan.arena @device size 4096 alignment 256 {
  // expected-error @+1 {{'zplan.buffer' op at offset 8192 with size 1 does not fit in arena @device of size 4096}}
  zplan.buffer @b0 offset 8192 size 1
}

// -----

// An empty buffer would give two buffers the same address for no reason.
zplan.arena @device size 4096 alignment 256 {
  // expected-error @+1 {{attribute 'size' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  zplan.buffer @b0 offset 0 size 0
}

// -----

// Offsets are from the start of the arena.
zplan.arena @device size 4096 alignment 256 {
  // expected-error @+1 {{attribute 'offset' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  zplan.buffer @b0 offset -256 size 256
}

// -----

// A buffer has no address outside an arena.
// expected-error @+1 {{'zplan.buffer' op expects parent op 'zplan.arena'}}
zplan.buffer @b0 offset 0 size 256

// -----

// Buffer names are unique within their arena.
zplan.arena @device size 4096 alignment 256 {
  // expected-note @+1 {{see existing symbol definition here}}
  zplan.buffer @b0 offset 0 size 256
  // expected-error @+1 {{redefinition of symbol named 'b0'}}
  zplan.buffer @b0 offset 256 size 256
}

// -----

//===----------------------------------------------------------------------===//
// zplan.kernel
//===----------------------------------------------------------------------===//

// Every buffer a kernel names exists.
zplan.arena @device size 4096 alignment 256 {
  zplan.buffer @b0 offset 0 size 1024
}
zplan.program @p {
  // expected-error @+1 {{'zplan.kernel' op refers to @device::@missing, which is not a zplan.buffer}}
  zplan.kernel "relu_f32" ins(@device::@b0) outs(@device::@missing) stream 0
}

// -----

// A kernel reads and writes buffers, not whole arenas.
zplan.arena @device size 4096 alignment 256 {
  zplan.buffer @b0 offset 0 size 1024
}
zplan.program @p {
  // expected-error @+1 {{'zplan.kernel' op refers to @device, which is not a zplan.buffer}}
  zplan.kernel "relu_f32" ins(@device) outs(@device::@b0) stream 0
}

// -----

// Instructions run only as part of a program.
zplan.arena @device size 4096 alignment 256 {
  zplan.buffer @b0 offset 0 size 1024
}
// expected-error @+1 {{'zplan.kernel' op expects parent op 'zplan.program'}}
zplan.kernel "relu_f32" ins(@device::@b0) outs(@device::@b0) stream 0

// -----

// Streams are numbered from 0.
zplan.arena @device size 4096 alignment 256 {
  zplan.buffer @b0 offset 0 size 1024
}
zplan.program @p {
  // expected-error @+1 {{attribute 'stream' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  zplan.kernel "relu_f32" ins(@device::@b0) outs(@device::@b0) stream -1
}

// -----

//===----------------------------------------------------------------------===//
// zplan.event, zplan.record and zplan.wait
//===----------------------------------------------------------------------===//

// Every event a record names is declared.
zplan.program @p {
  // expected-error @+1 {{'zplan.record' op refers to @missing, which is not a zplan.event}}
  zplan.record @missing stream 0
}

// -----

// A wait names an event, not some other symbol.
zplan.program @p {
  // expected-error @+1 {{'zplan.wait' op refers to @p, which is not a zplan.event}}
  zplan.wait @p stream 0
}

// -----

// An event declared in one program is invisible to another.
zplan.program @a {
  zplan.event @local
}
zplan.program @b {
  // expected-error @+1 {{'zplan.wait' op refers to @local, which is not a zplan.event}}
  zplan.wait @local stream 0
}

// -----

// Events live in the module or in a program, nowhere else.
zplan.arena @device size 4096 alignment 256 {
  // expected-error @+1 {{'zplan.event' op expects parent op to be one of 'builtin.module, zplan.program'}}
  zplan.event @e0
}

// -----

// Record and wait are instructions like kernels.
zplan.event @e0
// expected-error @+1 {{'zplan.record' op expects parent op 'zplan.program'}}
zplan.record @e0 stream 0

// -----

// Unknown memory spaces are rejected by the parser.
// expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'memory_space' [device, host, nvme]}}
zplan.arena @device in managed size 4096 alignment 256 {
}
