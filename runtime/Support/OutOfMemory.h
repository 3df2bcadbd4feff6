//===- OutOfMemory.h - Host memory exhaustion as an error ------*- C++ -*-===//
//
// The runtime has no exceptions: a host allocation that fails would end in
// std::terminate on std::bad_alloc ("terminate called ...", SIGABRT). The
// large allocations (arenas, swap files, staging buffers) are checked where
// they are made and become Status errors; every other allocation that fails
// ends the process through this handler, with one message that says so and
// how to make room.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_SUPPORT_OUTOFMEMORY_H
#define ZCC_RUNTIME_SUPPORT_OUTOFMEMORY_H

namespace zcc {

/// Makes a failed operator new print "<program>: error: out of host memory
/// ..." (naming the address-space limit, when there is one) and exit with
/// status 1, without running the exit handlers (the other threads may be
/// anywhere). `program` must outlive the process.
void installOutOfMemoryHandler(const char *program);

} // namespace zcc

#endif // ZCC_RUNTIME_SUPPORT_OUTOFMEMORY_H
