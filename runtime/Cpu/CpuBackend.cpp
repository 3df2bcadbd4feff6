//===- CpuBackend.cpp - The reference backend -----------------------------===//

#include "runtime/Cpu/CpuBackend.h"

#include <cstdlib>
#include <cstring>

namespace zcc {

Status CpuBackend::allocate(uint64_t bytes, uint64_t alignment, void **memory) {
  *memory = nullptr;
  // Cache-line alignment at least, so vectorised kernels never straddle.
  uint64_t align = alignment < 64 ? 64 : alignment;
  // aligned_alloc wants a size that is a multiple of the alignment, and a
  // plan without buffers still gets a valid (empty) arena.
  uint64_t rounded = bytes == 0 ? align : (bytes + align - 1) / align * align;
  if (rounded < bytes)
    return makeStatus(StatusCode::kResourceExhausted,
                      "cannot allocate %llu bytes on the cpu backend",
                      static_cast<unsigned long long>(bytes));
  void *allocation = std::aligned_alloc(static_cast<size_t>(align),
                                        static_cast<size_t>(rounded));
  if (!allocation) {
    double mib = static_cast<double>(bytes) / (1ull << 20);
    return makeStatus(StatusCode::kResourceExhausted,
                      "cannot allocate %llu bytes (%.2f %s) on the cpu "
                      "backend: out of host memory",
                      static_cast<unsigned long long>(bytes), mib < 1024 ? mib : mib / 1024,
                      mib < 1024 ? "MiB" : "GiB");
  }
  // Zeroed memory makes a run that reads a buffer before writing it (a plan
  // bug) repeatable instead of reading whatever was there.
  std::memset(allocation, 0, static_cast<size_t>(rounded));
  *memory = allocation;
  allocations_.emplace_back(allocation, bytes);
  allocatedBytes_ += bytes;
  return Status::ok();
}

Status CpuBackend::allocateHost(uint64_t bytes, uint64_t alignment, void **memory) {
  ZCC_RETURN_IF_ERROR(allocate(bytes, alignment, memory), "for the host arena");
  allocations_.back().second = 0;
  allocatedBytes_ -= bytes;
  return Status::ok();
}

void CpuBackend::deallocate(void *memory) {
  for (size_t i = 0; i < allocations_.size(); ++i)
    if (allocations_[i].first == memory) {
      allocatedBytes_ -= allocations_[i].second;
      allocations_.erase(allocations_.begin() + i);
      break;
    }
  std::free(memory);
}

Status CpuBackend::copyToDevice(void *device, const void *host,
                                uint64_t bytes) {
  if (bytes)
    std::memcpy(device, host, static_cast<size_t>(bytes));
  return Status::ok();
}

Status CpuBackend::copyOnDevice(void *destination, const void *source,
                                uint64_t bytes) {
  if (bytes && destination != source)
    std::memmove(destination, source, static_cast<size_t>(bytes));
  return Status::ok();
}

Status CpuBackend::copyToHost(void *host, const void *device, uint64_t bytes) {
  if (bytes)
    std::memcpy(host, device, static_cast<size_t>(bytes));
  return Status::ok();
}

StatusOr<KernelHandle> CpuBackend::resolveKernel(const std::string &name) {
  cpu::KernelFn kernel = cpu::findKernel(name);
  if (!kernel)
    return makeStatus(StatusCode::kNotFound,
                      "the cpu backend has no kernel '%s'", name.c_str());
  KernelHandle handle;
  handle.index = static_cast<uint32_t>(kernels_.size());
  kernels_.push_back(kernel);
  return handle;
}

Status CpuBackend::launch(KernelHandle kernel, const KernelArgs &args,
                          uint32_t stream) {
  // One thread runs everything in order, which already honours every
  // dependency the plan's streams and events express.
  (void)stream;
  return kernels_[kernel.index](args);
}

} // namespace zcc
