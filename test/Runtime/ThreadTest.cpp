//===- ThreadTest.cpp - Threads whose start can fail as a Status ----------===//
//
// A thread that cannot be started used to end the process in
// std::terminate (std::thread throws, the runtime has no exceptions). Here
// each site that starts threads is made to fail for certain: a stack too
// large for any address space, or, in a child process, an address-space
// limit (RLIMIT_AS, which binds root too) just above what the process
// already uses. The failure must come back as a Status that names the
// thread and the remedy, with the threads started before it joined.
//
//===----------------------------------------------------------------------===//

#include "runtime/Support/Thread.h"
#include "runtime/HostKernels.h"
#include "runtime/Support/SwapFile.h"
#include "test/Runtime/PlanTestUtil.h"

#include "test/Runtime/ProcessLimits.h"

#include "gtest/gtest.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

namespace zcc {
namespace {

// What strerror says for pthread_create's EAGAIN, which glibc returns both
// for too many threads and for a stack it cannot map.
std::string again() { return std::strerror(EAGAIN); }

// Every stack a new thread maps beyond the limit's slack fails.
using test::limitAddressSpace;

TEST(Thread, RunsItsBodyAndIsJoined) {
  std::atomic<int> ran{0};
  StatusOr<Thread> thread = Thread::start([&] { ran += 1; }, "a test thread", "none needed");
  ASSERT_TRUE(thread.isOk()) << thread.status().message();
  EXPECT_TRUE(thread->joinable());
  Thread moved = std::move(*thread);
  EXPECT_FALSE(thread->joinable()) << "a moved-from thread is nobody's to join";
  moved.join();
  EXPECT_FALSE(moved.joinable());
  EXPECT_EQ(ran.load(), 1);
}

// A stack of 4 EiB fits no address space: pthread_create refuses it, and
// the Status says which thread, why and what to change.
TEST(Thread, StackTooLargeToMapIsAStatus) {
  Thread::Options options;
  options.stackBytes = uint64_t(1) << 62;
  bool ran = false;
  StatusOr<Thread> thread =
      Thread::start([&] { ran = true; }, "test thread 3 of 4", "ask for a smaller stack", options);
  ASSERT_FALSE(thread.isOk());
  EXPECT_EQ(thread.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(thread.status().message(),
            "could not start test thread 3 of 4: " + again() + "; ask for a smaller stack");
  EXPECT_FALSE(ran);
}

// The host kernel pool whose workers run out of address space part way
// returns the error (the workers it started are stopped and joined, or the
// child would hang instead of exiting) and the process goes on.
void startHostKernelPoolUnderLimit() {
  limitAddressSpace(uint64_t(64) << 20);
  Thread::Options options;
  options.stackBytes = size_t(8) << 20; // 255 stacks of 8 MiB: 2 GiB
  StatusOr<std::unique_ptr<HostKernelPool>> pool = HostKernelPool::create(256, options);
  std::fprintf(stderr, "%s: %s\n", statusCodeName(pool.status().code()),
               pool.status().message().c_str());
  std::_Exit(pool.isOk() ? 1 : 0);
}

TEST(ThreadDeathTest, HostKernelPoolThatCannotStartIsAStatus) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(startHostKernelPoolUnderLimit(), ::testing::ExitedWithCode(0),
              statusCodeName(StatusCode::kResourceExhausted) +
                  std::string(": could not start host kernel thread [0-9]+ of 256: ") + again() +
                  "; lower --host-threads or raise the process's limits \\(ulimit -u / -v\\)");
}

// Likewise the swap file's request threads (aio.queue_depth 256: 255
// threads beside the caller's).
void createSwapFileUnderLimit() {
  int result = 1;
  {
    test::TempDir dir;
    limitAddressSpace(uint64_t(64) << 20);
    SwapFile::Requests requests;
    requests.blockSize = SwapFile::kBlock;
    requests.queueDepth = 256;
    StatusOr<std::unique_ptr<SwapFile>> file =
        SwapFile::create(dir.path(), 16 * SwapFile::kBlock, requests);
    std::fprintf(stderr, "%s: %s\n", statusCodeName(file.status().code()),
                 file.status().message().c_str());
    result = file.isOk() ? 1 : 0;
  }
  std::_Exit(result);
}

TEST(ThreadDeathTest, SwapFileThreadThatCannotStartIsAStatus) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(createSwapFileUnderLimit(), ::testing::ExitedWithCode(0),
              statusCodeName(StatusCode::kResourceExhausted) +
                  std::string(": could not start swap file thread [0-9]+ of 255: ") + again() +
                  "; lower the config's aio.queue_depth or raise the process's limits "
                  "\\(ulimit -u / -v\\)");
}

} // namespace
} // namespace zcc
