//===- OutOfMemory.cpp - Host memory exhaustion as an error ---------------===//

#include "runtime/Support/OutOfMemory.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <sys/resource.h>
#include <unistd.h>

namespace zcc {

namespace {

const char *programName = "zcc";

/// Runs where nothing more can be allocated: formats into the stack and
/// writes with write(2), which allocate nothing.
[[noreturn]] void outOfMemory() {
  // One message: a second thread out of memory waits for the first's exit.
  static std::atomic<bool> reported{false};
  if (reported.exchange(true))
    for (;;)
      ::pause();
  char limit[96] = "";
  rlimit rl{};
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    std::snprintf(limit, sizeof limit, " under its address-space limit (ulimit -v) of %llu KiB",
                  static_cast<unsigned long long>(rl.rlim_cur >> 10));
  char message[512];
  int length = std::snprintf(
      message, sizeof message,
      "%s: error: out of host memory: an allocation failed%s; raise the limit or free host "
      "memory, or run fewer ranks on this host (zcc --report gives the host memory a rank "
      "needs)\n",
      programName, limit);
  if (length > 0) {
    size_t size = static_cast<size_t>(length) < sizeof message ? static_cast<size_t>(length)
                                                               : sizeof message - 1;
    ssize_t written = ::write(STDERR_FILENO, message, size);
    (void)written;
  }
  std::_Exit(1);
}

} // namespace

void installOutOfMemoryHandler(const char *program) {
  programName = program;
  std::set_new_handler(outOfMemory);
}

} // namespace zcc
