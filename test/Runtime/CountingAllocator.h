//===- CountingAllocator.h - Counts global operator new calls ---*- C++ -*-===//
//
// The runtime promises that a step allocates nothing; tests prove it by
// counting the calls to the global operator new (replaced in
// CountingAllocator.cpp, its own translation unit so the compiler cannot
// inline the replacement into callers) around the code under test.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_TEST_RUNTIME_COUNTINGALLOCATOR_H
#define ZCC_TEST_RUNTIME_COUNTINGALLOCATOR_H

namespace zcc::test {

/// Counts operator new calls, on any thread, while it lives.
class AllocationCounter {
public:
  AllocationCounter();
  ~AllocationCounter();
  AllocationCounter(const AllocationCounter &) = delete;
  AllocationCounter &operator=(const AllocationCounter &) = delete;

  /// Calls so far.
  long count() const;
};

} // namespace zcc::test

#endif // ZCC_TEST_RUNTIME_COUNTINGALLOCATOR_H
