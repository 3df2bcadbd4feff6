//===- CudaKernels.cpp - The cuda kernel registry -------------------------===//

#include "kernels/cuda/CudaKernels.h"

#include "kernels/cuda/Kernels.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace zcc::cuda {

namespace {
struct KernelEntry {
  const char *name;
  KernelFn fn;
};

// The cpu registry's list (KernelList.def): findKernel bisects it.
constexpr KernelEntry kKernels[] = {
#define ZCC_KERNEL(name, function) {name, kernels::function},
#include "kernels/cpu/KernelList.def"
};

bool entryLess(const KernelEntry &a, const KernelEntry &b) {
  return std::strcmp(a.name, b.name) < 0;
}
} // namespace

KernelFn findKernel(const std::string &name) {
  const KernelEntry key{name.c_str(), nullptr};
  const KernelEntry *end = std::end(kKernels);
  const KernelEntry *it =
      std::lower_bound(std::begin(kKernels), end, key, entryLess);
  if (it == end || name != it->name)
    return nullptr;
  return it->fn;
}

std::vector<std::string> kernelNames() {
  std::vector<std::string> names;
  for (const KernelEntry &entry : kKernels)
    names.push_back(entry.name);
  return names;
}

} // namespace zcc::cuda
