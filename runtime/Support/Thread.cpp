//===- Thread.cpp - Threads whose start can fail as a Status ---------------===//

#include "runtime/Support/Thread.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

namespace zcc {

namespace {

void *runBody(void *argument) {
  std::unique_ptr<std::function<void()>> body(static_cast<std::function<void()> *>(argument));
  (*body)();
  return nullptr;
}

Status notStarted(const std::string &what, const std::string &remedy, int error) {
  // EAGAIN: out of threads (RLIMIT_NPROC, kernel.threads-max) or of memory
  // for the stack (RLIMIT_AS); glibc reports a stack it cannot map as
  // EAGAIN too.
  StatusCode code =
      error == EAGAIN || error == ENOMEM ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return Status(code, "could not start " + what + ": " + std::strerror(error) + "; " + remedy);
}

} // namespace

StatusOr<Thread> Thread::start(std::function<void()> body, const std::string &what,
                               const std::string &remedy) {
  return start(std::move(body), what, remedy, Options());
}

StatusOr<Thread> Thread::start(std::function<void()> body, const std::string &what,
                               const std::string &remedy, const Options &options) {
  pthread_attr_t attributes;
  if (int error = ::pthread_attr_init(&attributes); error != 0)
    return notStarted(what, remedy, error);
  if (options.stackBytes > 0)
    if (int error = ::pthread_attr_setstacksize(&attributes, options.stackBytes); error != 0) {
      ::pthread_attr_destroy(&attributes);
      return notStarted(what, remedy, error);
    }
  // Owned by the new thread once it starts; ours to free until then.
  auto *owned = new (std::nothrow) std::function<void()>(std::move(body));
  if (!owned) {
    ::pthread_attr_destroy(&attributes);
    return notStarted(what, remedy, ENOMEM);
  }
  Thread thread;
  int error = ::pthread_create(&thread.handle_, &attributes, runBody, owned);
  ::pthread_attr_destroy(&attributes);
  if (error != 0) {
    delete owned;
    return notStarted(what, remedy, error);
  }
  thread.joinable_ = true;
  return StatusOr<Thread>(std::move(thread));
}

Thread::Thread(Thread &&other) noexcept
    : handle_(other.handle_), joinable_(std::exchange(other.joinable_, false)) {}

Thread &Thread::operator=(Thread &&other) noexcept {
  if (this != &other) {
    join();
    handle_ = other.handle_;
    joinable_ = std::exchange(other.joinable_, false);
  }
  return *this;
}

Thread::~Thread() { join(); }

void Thread::join() {
  if (!joinable_)
    return;
  ::pthread_join(handle_, nullptr);
  joinable_ = false;
}

} // namespace zcc
