//===- KernelNames.cpp - The kernels' names, without the kernels ----------===//
//
// What the plan validator (and with it zcc) needs of the kernel registry:
// the names, not the kernels and so not OpenBLAS, whose library starts a
// thread pool, with a workspace of 128 MiB per thread, when it is loaded.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace zcc::cpu {

namespace {
// Sorted by name (KernelList.def is).
constexpr const char *kNames[] = {
#define ZCC_KERNEL(name, function) name,
#include "kernels/cpu/KernelList.def"
};
} // namespace

bool isKernel(const std::string &name) {
  const char *const *end = std::end(kNames);
  const char *const *it = std::lower_bound(
      std::begin(kNames), end, name.c_str(),
      [](const char *a, const char *b) { return std::strcmp(a, b) < 0; });
  return it != end && name == *it;
}

std::vector<std::string> kernelNames() { return {std::begin(kNames), std::end(kNames)}; }

} // namespace zcc::cpu
