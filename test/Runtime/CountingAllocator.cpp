//===- CountingAllocator.cpp - Counts global operator new calls -----------===//

#include "test/Runtime/CountingAllocator.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<int> gCounters{0};
std::atomic<long> gAllocations{0};
} // namespace

// The array and nothrow forms forward to this one in libstdc++.
void *operator new(std::size_t size) {
  if (gCounters.load(std::memory_order_relaxed) > 0)
    gAllocations.fetch_add(1, std::memory_order_relaxed);
  if (void *p = std::malloc(size ? size : 1))
    return p;
  throw std::bad_alloc();
}

void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }

namespace zcc::test {

AllocationCounter::AllocationCounter() {
  gAllocations = 0;
  gCounters.fetch_add(1);
}

AllocationCounter::~AllocationCounter() { gCounters.fetch_sub(1); }

long AllocationCounter::count() const { return gAllocations.load(); }

} // namespace zcc::test
