//===- ProcessLimits.h - Limits for death tests' children -------*- C++ -*-===//

#ifndef ZCC_TEST_RUNTIME_PROCESSLIMITS_H
#define ZCC_TEST_RUNTIME_PROCESSLIMITS_H

#include "gtest/gtest.h"

#include <cstdint>
#include <cstdio>
#include <sys/resource.h>
#include <unistd.h>

namespace zcc::test {

/// Limits the address space (RLIMIT_AS, which binds root too) to what this
/// process maps now plus `slack`: every mapping beyond that fails. For a
/// death test's child, which must end by _Exit: a library's own threads
/// (OpenBLAS's) may be retrying an allocation the limit refuses, and its
/// exit handler would join them forever.
inline void limitAddressSpace(uint64_t slack) {
  long pages = 0;
  std::FILE *statm = std::fopen("/proc/self/statm", "r");
  ASSERT_NE(statm, nullptr);
  ASSERT_EQ(std::fscanf(statm, "%ld", &pages), 1);
  std::fclose(statm);
  rlimit limit;
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &limit), 0);
  limit.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) +
                   static_cast<rlim_t>(slack);
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &limit), 0);
}

} // namespace zcc::test

#endif // ZCC_TEST_RUNTIME_PROCESSLIMITS_H
