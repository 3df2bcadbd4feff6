//===- CudaBackend.h - Plans on one CUDA device -----------------*- C++ -*-===//
//
// One backend per rank and device: the arena is one cudaMalloc, kernels are
// the cuda kernels (kernels/cuda) enqueued on the plan's CUDA streams in
// plan order, ordered across streams by the plan's events. The streams, the
// events, the cuBLASLt handle and the kernels' workspace are made before the
// first step, so a step only enqueues. Kernels that use the workspace run on
// stream 0 only (the plan puts only data movement on other streams).
//
// A program whose instructions all run on the device can be captured as a
// CUDA graph (capture, replay): the arena never moves, so the graph's
// kernel arguments stay valid, and one graph launch replaces the program's
// thousands of kernel launches.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_CUDA_CUDABACKEND_H
#define ZCC_RUNTIME_CUDA_CUDABACKEND_H

#include "kernels/cuda/CudaKernels.h"
#include "runtime/Backend.h"

#include <memory>
#include <vector>

namespace zcc {

class CudaBackend final : public Backend {
public:
  /// A backend on device `ordinal`, which becomes the calling thread's
  /// current device.
  static StatusOr<std::unique_ptr<CudaBackend>> create(int ordinal);
  ~CudaBackend() override;

  const char *name() const override { return "cuda"; }
  Status allocate(uint64_t bytes, uint64_t alignment, void **memory) override;
  void deallocate(void *memory) override;
  Status allocateHost(uint64_t bytes, uint64_t alignment, void **memory) override;
  void deallocateHost(void *memory) override;
  Status copyAsync(void *destination, const void *source, uint64_t bytes,
                   uint32_t stream) override;
  Status enqueueHostCall(uint32_t stream, void (*call)(void *), void *data) override;
  Status prepareStreams(uint32_t streams, uint32_t events) override;
  Status recordEvent(uint32_t event, uint32_t stream) override;
  Status waitEvent(uint32_t event, uint32_t stream) override;
  uint64_t allocatedBytes() const override { return allocatedBytes_; }
  uint64_t deviceBytesInUse() const override;
  Status copyToDevice(void *device, const void *host, uint64_t bytes) override;
  Status copyToHost(void *host, const void *device, uint64_t bytes) override;
  Status copyOnDevice(void *destination, const void *source,
                      uint64_t bytes) override;
  StatusOr<KernelHandle> resolveKernel(const std::string &name) override;
  Status launch(KernelHandle kernel, const KernelArgs &args,
                uint32_t stream) override;
  Status synchronize(const std::function<Status()> &healthCheck) override;
  void *nativeStream(uint32_t index) override;
  bool canCapture() const override { return true; }
  StatusOr<uint32_t> capture(const std::function<Status()> &launches) override;
  Status replay(uint32_t graph) override;

  int deviceOrdinal() const { return ordinal_; }

private:
  CudaBackend() = default;

  int ordinal_ = 0;
  cuda::LaunchContext context_;
  std::unique_ptr<cuda::CudnnAttention> cudnnAttention_;
  std::vector<cuda::KernelFn> kernels_;
  std::vector<std::pair<void *, uint64_t>> allocations_;
  /// The plan's streams: [0] is context_.stream; more for plans that
  /// overlap communication with compute. And the plan's events.
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  /// A capture's fork (stream 0 to the others) and joins (each other
  /// stream back to 0), made by the first capture.
  std::vector<cudaEvent_t> captureEvents_;
  /// Captured programs, instantiated, by capture()'s index.
  std::vector<cudaGraphExec_t> graphs_;
  /// The pinned host allocations (the plan's host arena).
  std::vector<void *> hostAllocations_;
  uint64_t allocatedBytes_ = 0;
};

} // namespace zcc

#endif // ZCC_RUNTIME_CUDA_CUDABACKEND_H
