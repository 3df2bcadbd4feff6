//===- Backend.h - What the executor needs from a device --------*- C++ -*-===//
//
// The executor is written once against this interface: device memory, copies
// between host and device, kernels resolved by name before the first step
// and launched in plan order. The cpu backend runs the reference kernels on
// the calling thread; the cuda backend will enqueue on CUDA streams. Both run
// the same conformance tests.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_BACKEND_H
#define ZCC_RUNTIME_BACKEND_H

#include "kernels/cpu/CpuKernels.h"
#include "runtime/Support/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace zcc {

/// Kernel arguments are backend-neutral: tensor views of device memory and
/// the instruction's attributes.
using KernelArgs = cpu::KernelArgs;
using TensorView = cpu::TensorView;

/// A kernel resolved once, at instantiation; only the backend that resolved
/// it reads it.
struct KernelHandle {
  uint32_t index = 0;
};

class Backend {
public:
  virtual ~Backend() = default;

  /// "cpu", "cuda": for messages.
  virtual const char *name() const = 0;

  /// Allocates `bytes` of zero-filled device memory aligned to `alignment` (a
  /// power of two). `*memory` is null unless this succeeds.
  virtual Status allocate(uint64_t bytes, uint64_t alignment,
                          void **memory) = 0;
  /// Frees what allocate returned; null is ignored.
  virtual void deallocate(void *memory) = 0;
  /// Bytes of device memory allocate() handed out and not yet freed: the
  /// measured side of "predicted memory is actual memory".
  virtual uint64_t allocatedBytes() const = 0;

  virtual Status copyToDevice(void *device, const void *host,
                              uint64_t bytes) = 0;
  virtual Status copyToHost(void *host, const void *device, uint64_t bytes) = 0;

  /// Looks a kernel up once so that launching it needs no lookup.
  virtual StatusOr<KernelHandle> resolveKernel(const std::string &name) = 0;

  /// Launches `kernel` on `stream`. Called in the step loop: it must not
  /// allocate. A backend that runs kernels asynchronously may report a
  /// kernel's failure from a later launch or from synchronize.
  virtual Status launch(KernelHandle kernel, const KernelArgs &args,
                        uint32_t stream) = 0;

  /// Waits until everything launched has finished.
  virtual Status synchronize() = 0;
};

/// The backend named `name` ("cpu"; "cuda" is not built yet).
StatusOr<std::unique_ptr<Backend>> createBackend(const std::string &name);

} // namespace zcc

#endif // ZCC_RUNTIME_BACKEND_H
