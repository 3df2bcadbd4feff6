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
/// ..." (naming the address-space limit, when there is one, and `remedy`)
/// and exit with status 1, without running the exit handlers (the other
/// threads may be anywhere). Both strings must outlive the process.
void installOutOfMemoryHandler(const char *program, const char *remedy);

/// What the handler does, for a library's own allocation failure hook
/// (LLVM's bad-alloc handler).
[[noreturn]] void reportOutOfMemory();

} // namespace zcc

#endif // ZCC_RUNTIME_SUPPORT_OUTOFMEMORY_H
