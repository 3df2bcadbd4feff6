//===- Backend.h - What the executor needs from a device --------*- C++ -*-===//
//
// The executor is written once against this interface: device memory, copies
// between host and device, kernels resolved by name before the first step
// and launched in plan order. The cpu backend runs the reference kernels on
// the calling thread; the cuda backend enqueues them on a CUDA stream. The
// cuda kernels are checked against the cpu ones (test/Runtime/CudaKernels*).
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_BACKEND_H
#define ZCC_RUNTIME_BACKEND_H

#include "kernels/cpu/CpuKernels.h"
#include "runtime/Support/Status.h"

#include <cstdint>
#include <functional>
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
  /// Allocates `bytes` of zero-filled host memory that copyAsync moves to
  /// and from the device without staging (pinned memory on GPUs), for the
  /// plan's host arena. `*memory` is null unless this succeeds.
  virtual Status allocateHost(uint64_t bytes, uint64_t alignment, void **memory) = 0;
  /// Frees what allocateHost returned; null is ignored.
  virtual void deallocateHost(void *memory) = 0;
  /// Bytes of device memory allocate() handed out and not yet freed: the
  /// measured side of "predicted memory is actual memory".
  virtual uint64_t allocatedBytes() const = 0;
  /// Bytes of the device's memory in use now, by anything: allocate()'s
  /// blocks and what the backend, its libraries, the driver's context and the
  /// communicators took for themselves (on a device that no other process
  /// uses, what this rank needs of a card). allocatedBytes() where the
  /// backend's memory is the process's own.
  virtual uint64_t deviceBytesInUse() const { return allocatedBytes(); }

  virtual Status copyToDevice(void *device, const void *host,
                              uint64_t bytes) = 0;
  virtual Status copyToHost(void *host, const void *device, uint64_t bytes) = 0;
  /// Copies between two device buffers in launch order (after everything
  /// launched before it). Called in the step loop: it must not allocate.
  virtual Status copyOnDevice(void *destination, const void *source,
                              uint64_t bytes) = 0;
  /// Copies between device memory and memory from allocateHost, either way,
  /// in launch order on `stream`; the host side must not be touched until a
  /// synchronize. Called in the step loop: it must not allocate.
  virtual Status copyAsync(void *destination, const void *source, uint64_t bytes,
                           uint32_t stream) = 0;

  /// Runs `call(data)` on the host in launch order on `stream`: after the
  /// work launched on it before, and before the work launched on it after
  /// (a swap of NVMe data on a copy stream). `call` must not use the
  /// backend. Called in the step loop: it must not allocate. A backend that
  /// runs everything on the calling thread calls it right away.
  virtual Status enqueueHostCall(uint32_t /*stream*/, void (*call)(void *), void *data) {
    call(data);
    return Status::ok();
  }

  /// Makes the plan's streams 0 .. `streams` - 1 and events 0 .. `events` -
  /// 1, once, before the first launch.
  virtual Status prepareStreams(uint32_t streams, uint32_t events) = 0;
  /// Marks the point in `stream` that a later waitEvent(event, ...) waits
  /// for. Called in the step loop: it must not allocate.
  virtual Status recordEvent(uint32_t event, uint32_t stream) = 0;
  /// Work launched on `stream` after this starts once the work before the
  /// latest recordEvent(event, ...) has finished.
  virtual Status waitEvent(uint32_t event, uint32_t stream) = 0;

  /// Looks a kernel up once so that launching it needs no lookup.
  virtual StatusOr<KernelHandle> resolveKernel(const std::string &name) = 0;

  /// Launches `kernel` on `stream`. Called in the step loop: it must not
  /// allocate. A backend that runs kernels asynchronously may report a
  /// kernel's failure from a later launch or from synchronize.
  virtual Status launch(KernelHandle kernel, const KernelArgs &args,
                        uint32_t stream) = 0;

  /// Waits until everything launched has finished. `healthCheck`, when
  /// given, is called while waiting (e.g. a communicator's check for a
  /// failed or hung peer); its first error ends the wait with that error.
  virtual Status synchronize(const std::function<Status()> &healthCheck = {}) = 0;

  /// Whether capture() can record a program's launches for replay().
  virtual bool canCapture() const { return false; }
  /// Records what `launches` enqueues, on every stream, as one graph that
  /// replay() runs; nothing of it runs here. Fails, leaving the backend as
  /// it was, where `launches` fails or enqueues what a graph cannot hold.
  /// Called once per program, not in the step loop: it may allocate.
  virtual StatusOr<uint32_t> capture(const std::function<Status()> & /*launches*/) {
    return Status(StatusCode::kUnimplemented,
                  std::string("the ") + name() + " backend runs kernels as they are launched");
  }
  /// Enqueues graph `graph` (from capture()) once more, on stream 0; the
  /// other streams it forked join stream 0 at its end. Must not allocate.
  virtual Status replay(uint32_t /*graph*/) {
    return Status(StatusCode::kInternal, "replay of a graph this backend never captured");
  }

  /// The native stream the plan's stream `index` runs on (a cudaStream_t on
  /// the cuda backend), for communicators that enqueue collectives on it;
  /// null on backends that run everything on the calling thread.
  virtual void *nativeStream(uint32_t /*index*/) { return nullptr; }
};

/// The backend named `name`: "cpu", or "cuda" on CUDA device
/// `deviceOrdinal` where zcc was built with CUDA.
StatusOr<std::unique_ptr<Backend>> createBackend(const std::string &name,
                                                 int deviceOrdinal = 0);

} // namespace zcc

#endif // ZCC_RUNTIME_BACKEND_H
