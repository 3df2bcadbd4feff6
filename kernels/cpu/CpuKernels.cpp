//===- CpuKernels.cpp - Registry and argument helpers ---------------------===//

#include "kernels/cpu/CpuKernels.h"

#include "kernels/cpu/Kernels.h"

#include <algorithm>
#include <cstring>

namespace zcc::cpu {

int64_t TensorView::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

//===----------------------------------------------------------------------===//
// KernelArgs
//===----------------------------------------------------------------------===//
//
// The lenient accessors: a missing attribute, or one of a kind that cannot
// be read as the requested one, gives the default. Kernels use the strict
// readers of KernelSupport.h, which report the wrong kind instead.

static const plan::Attribute *lookup(const AttributeMap *attributes,
                                     const std::string &name) {
  if (!attributes)
    return nullptr;
  auto it = attributes->find(name);
  return it == attributes->end() ? nullptr : &it->second;
}

bool KernelArgs::hasAttr(const std::string &name) const {
  return lookup(attributes, name) != nullptr;
}

int64_t KernelArgs::intAttr(const std::string &name,
                            int64_t defaultValue) const {
  const plan::Attribute *attr = lookup(attributes, name);
  if (!attr)
    return defaultValue;
  if (attr->value_case() == plan::Attribute::kI)
    return attr->i();
  if (attr->value_case() == plan::Attribute::kB)
    return attr->b() ? 1 : 0;
  return defaultValue;
}

double KernelArgs::floatAttr(const std::string &name,
                             double defaultValue) const {
  const plan::Attribute *attr = lookup(attributes, name);
  if (!attr)
    return defaultValue;
  if (attr->value_case() == plan::Attribute::kF)
    return attr->f();
  if (attr->value_case() == plan::Attribute::kI)
    return static_cast<double>(attr->i());
  return defaultValue;
}

std::string KernelArgs::stringAttr(const std::string &name,
                                   const std::string &defaultValue) const {
  const plan::Attribute *attr = lookup(attributes, name);
  if (!attr || attr->value_case() != plan::Attribute::kS)
    return defaultValue;
  return attr->s();
}

std::vector<int64_t> KernelArgs::intsAttr(const std::string &name) const {
  const plan::Attribute *attr = lookup(attributes, name);
  if (!attr || attr->value_case() != plan::Attribute::kInts)
    return {};
  return std::vector<int64_t>(attr->ints().values().begin(),
                              attr->ints().values().end());
}

bool KernelArgs::boolAttr(const std::string &name, bool defaultValue) const {
  const plan::Attribute *attr = lookup(attributes, name);
  if (!attr)
    return defaultValue;
  switch (attr->value_case()) {
  case plan::Attribute::kB:
    return attr->b();
  case plan::Attribute::kI:
    return attr->i() != 0;
  case plan::Attribute::VALUE_NOT_SET:
    // A unit attribute: its presence is the value.
    return true;
  default:
    return defaultValue;
  }
}

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

namespace {
struct KernelEntry {
  const char *name;
  KernelFn fn;
};

// Sorted by name: findKernel bisects it.
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

} // namespace zcc::cpu
