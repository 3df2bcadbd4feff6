//===- Thread.h - Threads whose start can fail as a Status ------*- C++ -*-===//
//
// std::thread reports a thread it cannot start (too many threads, no
// address space left for its stack under `ulimit -v`) by throwing
// std::system_error; the runtime builds with -fno-exceptions, so that
// throw ends the process in std::terminate with no word of what it was
// doing. The runtime's threads are started here instead, with
// pthread_create, and a failure is a Status that names the thread, the
// operating system's reason and what the user can change.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_SUPPORT_THREAD_H
#define ZCC_RUNTIME_SUPPORT_THREAD_H

#include "runtime/Support/Status.h"

#include <cstddef>
#include <functional>
#include <pthread.h>
#include <string>

namespace zcc {

/// A started thread, joined by its owner: join() waits for its body to
/// return, and so does the destructor of a thread not joined yet (an owner
/// that returns early, on an error, waits for the threads it started rather
/// than leaving them running; it must first tell them to stop).
class Thread {
public:
  struct Options {
    /// The thread's stack in bytes; 0 for the default (RLIMIT_STACK's).
    size_t stackBytes = 0;
  };

  /// Starts `body` on a new thread. When it cannot be started, the Status
  /// (kResourceExhausted when the system is out of threads or memory) reads
  /// "could not start <what>: <the system's reason>; <remedy>", e.g.
  /// "could not start host kernel thread 37 of 300: Resource temporarily
  /// unavailable; lower --host-threads or raise the process's limits
  /// (ulimit -u / -v)".
  static StatusOr<Thread> start(std::function<void()> body, const std::string &what,
                                const std::string &remedy);
  static StatusOr<Thread> start(std::function<void()> body, const std::string &what,
                                const std::string &remedy, const Options &options);

  Thread() = default;
  Thread(Thread &&other) noexcept;
  Thread &operator=(Thread &&other) noexcept;
  Thread(const Thread &) = delete;
  Thread &operator=(const Thread &) = delete;
  ~Thread();

  /// Whether the thread was started and not joined yet.
  bool joinable() const { return joinable_; }
  /// Waits for the thread's body to return; nothing when not joinable().
  void join();

private:
  pthread_t handle_{};
  bool joinable_ = false;
};

} // namespace zcc

#endif // ZCC_RUNTIME_SUPPORT_THREAD_H
