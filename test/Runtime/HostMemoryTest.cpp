//===- HostMemoryTest.cpp - Host memory exhausted: errors, not hangs ------===//
//
// Under an address-space limit (RLIMIT_AS, which binds root too), set in a
// death test's child just above what the process maps already:
//  - OpenBLAS retries forever when it cannot map a product's workspace, so
//    zrun maps the rank threads' workspaces (cpu::reserveBlasWorkspaces)
//    before any arena: a product after that needs no new mapping, and a
//    process that cannot map them gets a Status saying how much it needed;
//  - any other allocation that fails ends the process with one message and
//    status 1 (installOutOfMemoryHandler), not std::terminate's SIGABRT.
// The children end by _Exit (ThreadTest.cpp says why).
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "runtime/Support/OutOfMemory.h"
#include "test/Runtime/KernelTestUtil.h"

#include "test/Runtime/ProcessLimits.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace zcc {
namespace {

using test::Call;

using test::limitAddressSpace;

/// A 256 x 256 f32 product of ones (every element 256) through the cpu
/// backend's matmul kernel, which calls OpenBLAS's sgemm.
bool productOfOnes() {
  const int64_t n = 256;
  std::vector<float> ones(static_cast<size_t>(n * n), 1.0f);
  Call call("matmul");
  call.in(test::makeTensor(plan::F32, {n, n}, ones))
      .in(test::makeTensor(plan::F32, {n, n}, ones))
      .out(plan::F32, {n, n});
  if (!call.run().isOk())
    return false;
  for (float value : call.floats())
    if (value != static_cast<float>(n))
      return false;
  return true;
}

// Two rank threads' workspaces mapped first, the limit then leaves 32 MiB,
// a fraction of one workspace: products on two threads at once still run.
// Without the reservation the first of them spins in OpenBLAS's allocator
// and the alarm kills the child.
void productsAfterReservingUnderLimit() {
  ::alarm(60);
  if (Status reserved = cpu::reserveBlasWorkspaces(2); !reserved.isOk()) {
    std::fprintf(stderr, "reserve: %s\n", reserved.message().c_str());
    std::_Exit(2);
  }
  // The inputs, outputs and the second thread's stack before the limit.
  std::vector<int> ok(2, 0);
  limitAddressSpace(uint64_t(32) << 20);
  std::thread other([&] { ok[1] = productOfOnes() ? 1 : 0; });
  ok[0] = productOfOnes() ? 1 : 0;
  other.join();
  std::fprintf(stderr, "products: %d %d\n", ok[0], ok[1]);
  std::_Exit(ok[0] && ok[1] ? 0 : 1);
}

TEST(HostMemoryDeathTest, ProductsRunInTheWorkspacesReservedBeforeTheLimit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(productsAfterReservingUnderLimit(), ::testing::ExitedWithCode(0),
              "products: 1 1");
}

// No room for the workspaces: a Status with the sizes and the limit, at
// once (OpenBLAS is not asked for a workspace it cannot get).
void reserveUnderLimit() {
  ::alarm(60);
  limitAddressSpace(uint64_t(64) << 20);
  Status reserved = cpu::reserveBlasWorkspaces(3);
  std::fprintf(stderr, "%s: %s\n", statusCodeName(reserved.code()), reserved.message().c_str());
  std::_Exit(reserved.isOk() ? 1 : 0);
}

TEST(HostMemoryDeathTest, WorkspacesThatCannotBeMappedAreAStatus) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(reserveUnderLimit(), ::testing::ExitedWithCode(0),
              statusCodeName(StatusCode::kResourceExhausted) +
                  std::string(": the cpu backend's BLAS \\(OpenBLAS\\) needs a 128 MiB workspace "
                              "for each of the job's 3 rank threads, and the process cannot map "
                              "their 384 MiB \\(.*; an address-space limit \\(ulimit -v\\) of "
                              "[0-9]+ KiB\\): raise the limit"));
}

// An allocation with no room left: the handler's message and status 1.
void allocateUnderLimit() {
  installOutOfMemoryHandler("zrun", "raise the limit or free host memory");
  limitAddressSpace(uint64_t(16) << 20);
  std::vector<char> big(size_t(1) << 30, 1);
  std::fprintf(stderr, "allocated %d\n", big[big.size() / 2]);
  std::_Exit(0);
}

TEST(HostMemoryDeathTest, AllocationThatFailsEndsWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(allocateUnderLimit(), ::testing::ExitedWithCode(1),
              "zrun: error: out of host memory: an allocation failed under its address-space "
              "limit \\(ulimit -v\\) of [0-9]+ KiB; raise the limit or free host memory");
}

} // namespace
} // namespace zcc
