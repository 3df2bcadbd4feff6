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
const char *programRemedy = "free host memory";

} // namespace

/// Runs where nothing more can be allocated: formats into the stack and
/// writes with write(2), which allocate nothing.
void reportOutOfMemory() {
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
  char message[768];
  int length = std::snprintf(
      message, sizeof message,
      "%s: error: out of host memory: an allocation failed%s; %s\n", programName, limit,
      programRemedy);
  if (length > 0) {
    size_t size = static_cast<size_t>(length) < sizeof message ? static_cast<size_t>(length)
                                                               : sizeof message - 1;
    ssize_t written = ::write(STDERR_FILENO, message, size);
    (void)written;
  }
  std::_Exit(1);
}

void installOutOfMemoryHandler(const char *program, const char *remedy) {
  programName = program;
  programRemedy = remedy;
  std::set_new_handler(reportOutOfMemory);
}

} // namespace zcc
