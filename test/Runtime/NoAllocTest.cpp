//===- NoAllocTest.cpp - A step allocates nothing -------------------------===//
//
// The runtime's promise is that instantiate() allocates everything and the
// step loop only launches. This binary replaces the global operator new with
// a counting one and checks that Executor::run() calls it zero times.
//
//===----------------------------------------------------------------------===//

#include "PlanTestUtil.h"

#include "runtime/Executor.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};

void *countedAllocate(std::size_t size, std::size_t alignment) {
  if (counting.load(std::memory_order_relaxed))
    allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0)
    size = 1;
  void *memory = alignment > alignof(std::max_align_t)
                     ? std::aligned_alloc(alignment, (size + alignment - 1) /
                                                         alignment * alignment)
                     : std::malloc(size);
  return memory;
}
} // namespace

// Every replaceable allocation form funnels through countedAllocate.
void *operator new(std::size_t size) {
  void *memory = countedAllocate(size, 0);
  if (!memory)
    std::abort();
  return memory;
}
void *operator new[](std::size_t size) { return operator new(size); }
void *operator new(std::size_t size, const std::nothrow_t &) noexcept {
  return countedAllocate(size, 0);
}
void *operator new[](std::size_t size, const std::nothrow_t &) noexcept {
  return countedAllocate(size, 0);
}
void *operator new(std::size_t size, std::align_val_t alignment) {
  void *memory = countedAllocate(size, static_cast<std::size_t>(alignment));
  if (!memory)
    std::abort();
  return memory;
}
void *operator new[](std::size_t size, std::align_val_t alignment) {
  return operator new(size, alignment);
}
void operator delete(void *memory) noexcept { std::free(memory); }
void operator delete[](void *memory) noexcept { std::free(memory); }
void operator delete(void *memory, std::size_t) noexcept { std::free(memory); }
void operator delete[](void *memory, std::size_t) noexcept {
  std::free(memory);
}
void operator delete(void *memory, std::align_val_t) noexcept {
  std::free(memory);
}
void operator delete[](void *memory, std::align_val_t) noexcept {
  std::free(memory);
}
void operator delete(void *memory, std::size_t, std::align_val_t) noexcept {
  std::free(memory);
}
void operator delete[](void *memory, std::size_t, std::align_val_t) noexcept {
  std::free(memory);
}

namespace zcc {
namespace {

/// Allocations made by `body`.
template <typename Body> long allocationsDuring(Body body) {
  allocations = 0;
  counting = true;
  body();
  counting = false;
  return allocations.load();
}

std::unique_ptr<Executor> instantiate(const plan::Plan &plan, bool profile = false) {
  StatusOr<LoadedPlan> loaded =
      parsePlanFile(encodePlanFile(plan, "t"), "test.bin");
  EXPECT_TRUE(loaded.isOk()) << loaded.status().toString();
  if (!loaded.isOk())
    return nullptr;
  ExecutorOptions options;
  options.weights.source = WeightSource::kRandom;
  options.profile = profile;
  StatusOr<std::unique_ptr<Executor>> executor =
      Executor::instantiate(std::move(*loaded), options);
  EXPECT_TRUE(executor.isOk()) << executor.status().toString();
  return executor.isOk() ? std::move(*executor) : nullptr;
}

TEST(NoAlloc, TheCounterCounts) {
  // Without this, a counter that never counts would pass every test below.
  long counted = allocationsDuring([] {
    int *volatile leak = new int(3);
    delete leak;
  });
  EXPECT_EQ(counted, 1);
}

TEST(NoAlloc, RunAllocatesNothing) {
  for (const plan::Plan &plan :
       {test::addConstantPlan(), test::matmulWeightPlan()}) {
    std::unique_ptr<Executor> executor = instantiate(plan);
    ASSERT_TRUE(executor);
    std::vector<float> x = {1, 2, 3, 4, 5, 6};
    ASSERT_TRUE(
        executor->setInput("x", x.data(), 24, plan::F32, {2, 3}).isOk());
    const std::string program = "infer";
    Status status;
    long counted = allocationsDuring([&] { status = executor->run(program); });
    ASSERT_TRUE(status.isOk()) << status.toString();
    EXPECT_EQ(counted, 0) << "run() allocated";
  }
}

// start() and finish(), as an inference pipeline runs its steps.
TEST(NoAlloc, StartedRunsAllocateNothing) {
  std::unique_ptr<Executor> executor = instantiate(test::matmulWeightPlan());
  ASSERT_TRUE(executor);
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(executor->setInput("x", x.data(), 24, plan::F32, {2, 3}).isOk());
  const std::string program = "infer";
  Status started, finished;
  long counted = allocationsDuring([&] {
    started = executor->start(program);
    if (started.isOk())
      started = executor->start(program);
    finished = executor->finish();
  });
  ASSERT_TRUE(started.isOk()) << started.toString();
  ASSERT_TRUE(finished.isOk()) << finished.toString();
  EXPECT_EQ(counted, 0) << "start() or finish() allocated";
}

// Profiling times each instruction into counters made by instantiate().
TEST(NoAlloc, ProfiledRunAllocatesNothing) {
  for (const plan::Plan &plan : {test::addConstantPlan(), test::matmulWeightPlan()}) {
    std::unique_ptr<Executor> executor = instantiate(plan, /*profile=*/true);
    ASSERT_TRUE(executor);
    std::vector<float> x = {1, 2, 3, 4, 5, 6};
    ASSERT_TRUE(executor->setInput("x", x.data(), 24, plan::F32, {2, 3}).isOk());
    const std::string program = "infer";
    Status status;
    long counted = allocationsDuring([&] { status = executor->run(program); });
    ASSERT_TRUE(status.isOk()) << status.toString();
    EXPECT_EQ(counted, 0) << "run() allocated";
    EXPECT_EQ(executor->profile()[0].instructions[0].calls, 1u);
  }
}

} // namespace
} // namespace zcc
