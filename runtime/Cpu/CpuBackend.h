//===- CpuBackend.h - The reference backend ---------------------*- C++ -*-===//
//
// Device memory is host memory and every kernel runs to completion on the
// calling thread in launch order, so streams need no events and a run is
// deterministic: the reference the cuda backend is compared against.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_CPU_CPUBACKEND_H
#define ZCC_RUNTIME_CPU_CPUBACKEND_H

#include "runtime/Backend.h"

#include <vector>

namespace zcc {

class CpuBackend final : public Backend {
public:
  const char *name() const override { return "cpu"; }
  Status allocate(uint64_t bytes, uint64_t alignment, void **memory) override;
  void deallocate(void *memory) override;
  /// Host memory is the cpu backend's device memory, but it is not counted
  /// in allocatedBytes().
  Status allocateHost(uint64_t bytes, uint64_t alignment, void **memory) override;
  void deallocateHost(void *memory) override { deallocate(memory); }
  Status copyAsync(void *destination, const void *source, uint64_t bytes,
                   uint32_t /*stream*/) override {
    return copyOnDevice(destination, source, bytes);
  }
  /// Everything runs in launch order on the calling thread, which is every
  /// order a plan's events can ask for.
  Status prepareStreams(uint32_t, uint32_t) override { return Status::ok(); }
  Status recordEvent(uint32_t, uint32_t) override { return Status::ok(); }
  Status waitEvent(uint32_t, uint32_t) override { return Status::ok(); }
  uint64_t allocatedBytes() const override { return allocatedBytes_; }
  Status copyToDevice(void *device, const void *host, uint64_t bytes) override;
  Status copyToHost(void *host, const void *device, uint64_t bytes) override;
  StatusOr<KernelHandle> resolveKernel(const std::string &name) override;
  Status launch(KernelHandle kernel, const KernelArgs &args,
                uint32_t stream) override;
  Status copyOnDevice(void *destination, const void *source,
                      uint64_t bytes) override;
  Status synchronize(const std::function<Status()> &) override {
    return Status::ok();
  }

private:
  /// Resolved kernels, indexed by KernelHandle::index.
  std::vector<cpu::KernelFn> kernels_;
  /// Live allocations and the bytes each counts in allocatedBytes() (a
  /// plan makes one or two).
  std::vector<std::pair<void *, uint64_t>> allocations_;
  uint64_t allocatedBytes_ = 0;
};

} // namespace zcc

#endif // ZCC_RUNTIME_CPU_CPUBACKEND_H
