//===- CudaBackend.cpp - Plans on one CUDA device -------------------------===//

#include "runtime/Cuda/CudaBackend.h"

#include "kernels/cuda/CudnnAttention.h"
#include "runtime/Cuda/CudaStatus.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace zcc {

namespace {

/// The cuBLASLt candidates each product shape times, from the value of
/// ZCC_MATMUL_ALGOS: unset or "measured" times 8, "measured:N" times N
/// (1 to cuda::kMaxMatmulCandidates), "heuristic" keeps the heuristic's
/// first choice, which is the same from run to run.
StatusOr<int> matmulCandidatesFromEnv(const char *value) {
  constexpr int kDefaultCandidates = 8;
  if (!value || std::strcmp(value, "measured") == 0)
    return kDefaultCandidates;
  if (std::strcmp(value, "heuristic") == 0)
    return 1;
  // Digits only after the colon (strtol alone would take " 8" or "+8").
  if (std::strncmp(value, "measured:", 9) == 0 && value[9] >= '0' && value[9] <= '9') {
    char *end = nullptr;
    long count = std::strtol(value + 9, &end, 10);
    if (end != value + 9 && *end == '\0' && count >= 1 &&
        count <= cuda::kMaxMatmulCandidates)
      return static_cast<int>(count);
  }
  return makeStatus(StatusCode::kInvalidArgument,
                    "ZCC_MATMUL_ALGOS=%s: expected measured (time %d of cuBLASLt's "
                    "candidates for each product shape, the default), measured:N "
                    "(time N of them, 1 to %d) or heuristic (its first choice, the "
                    "same in every run)",
                    value, kDefaultCandidates, cuda::kMaxMatmulCandidates);
}

} // namespace

StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::create(int ordinal) {
  int count = 0;
  cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess || count == 0)
    return Status(StatusCode::kUnavailable,
                  std::string("the cuda backend needs a CUDA device, and there "
                              "is none here (") +
                      (counted != cudaSuccess ? cudaGetErrorString(counted)
                                              : "no device") +
                      "); run with --backend cpu");
  if (ordinal < 0 || ordinal >= count)
    return makeStatus(StatusCode::kInvalidArgument,
                      "CUDA device %d does not exist: this machine has %d; "
                      "run fewer ranks per node",
                      ordinal, count);
  std::unique_ptr<CudaBackend> backend(new CudaBackend());
  backend->ordinal_ = ordinal;
  ZCC_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  cudaDeviceProp properties;
  ZCC_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&properties, ordinal));
  backend->context_.multiprocessorCount = properties.multiProcessorCount;
  ZCC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&backend->context_.stream,
                                                     cudaStreamNonBlocking));
  cublasStatus_t blas = cublasLtCreate(&backend->context_.blasLt);
  if (blas != CUBLAS_STATUS_SUCCESS)
    return makeStatus(StatusCode::kInternal, "cublasLtCreate failed: %s",
                      cublasLtGetStatusString(blas));
  ZCC_CUDA_RETURN_IF_ERROR(
      cudaMalloc(&backend->context_.workspace, cuda::kWorkspaceBytes));
  backend->context_.workspaceBytes = cuda::kWorkspaceBytes;
  // Each product shape's algorithm: cuBLASLt's first candidates timed on
  // it and the fastest kept (measured, the default: 1-3% faster on gpt2-xl,
  // tools/gpu/matmul-algos.sh; measured:N times N of them), or its
  // heuristic's first choice, which is the same from run to run
  // (heuristic).
  StatusOr<int> candidates = matmulCandidatesFromEnv(std::getenv("ZCC_MATMUL_ALGOS"));
  if (!candidates.isOk())
    return candidates.takeStatus();
  backend->context_.matmulCandidates = *candidates;
  // ZCC_CUDNN_ATTENTION=0 keeps the attention on the own kernels (to
  // compare them, or where cuDNN misbehaves).
  const char *cudnn = std::getenv("ZCC_CUDNN_ATTENTION");
  if (!cudnn || std::strcmp(cudnn, "0") != 0) {
    Status created = cuda::CudnnAttention::create(backend->cudnnAttention_);
    if (!created.isOk())
      return Status(created.code(),
                    created.message() +
                        " (ZCC_CUDNN_ATTENTION=0 runs without cuDNN)");
    backend->context_.cudnnAttention = backend->cudnnAttention_.get();
  }
  return backend;
}

CudaBackend::~CudaBackend() {
  for (size_t i = 1; i < streams_.size(); ++i)
    cudaStreamSynchronize(streams_[i]);
  if (context_.stream)
    cudaStreamSynchronize(context_.stream);
  for (auto &[memory, bytes] : allocations_)
    cudaFree(memory);
  for (void *memory : hostAllocations_)
    cudaFreeHost(memory);
  if (context_.workspace)
    cudaFree(context_.workspace);
  if (context_.blasLt)
    cublasLtDestroy(context_.blasLt);
  // The graphs launch cuDNN's kernels: they go first.
  for (cudaGraphExec_t graph : graphs_)
    cudaGraphExecDestroy(graph);
  cudnnAttention_.reset();
  for (cudaEvent_t event : events_)
    cudaEventDestroy(event);
  for (cudaEvent_t event : captureEvents_)
    cudaEventDestroy(event);
  for (size_t i = 1; i < streams_.size(); ++i)
    cudaStreamDestroy(streams_[i]);
  if (context_.stream)
    cudaStreamDestroy(context_.stream);
}

Status CudaBackend::allocate(uint64_t bytes, uint64_t alignment,
                             void **memory) {
  *memory = nullptr;
  // cudaMalloc aligns to 256 bytes; a plan asking for more cannot be served.
  if (alignment > 256 || (alignment & (alignment - 1)) != 0)
    return makeStatus(StatusCode::kInvalidArgument,
                      "the cuda backend aligns allocations to 256 bytes, not "
                      "%llu; recompile the plan with a smaller alignment",
                      static_cast<unsigned long long>(alignment));
  void *allocation = nullptr;
  cudaError_t result = cudaMalloc(&allocation, bytes ? bytes : 256);
  if (result != cudaSuccess) {
    cudaGetLastError();
    size_t freeBytes = 0, totalBytes = 0;
    cudaMemGetInfo(&freeBytes, &totalBytes);
    return makeStatus(StatusCode::kResourceExhausted,
                      "cannot allocate %.2f GiB on CUDA device %d (%s): %.2f "
                      "GiB of %.2f GiB are free",
                      static_cast<double>(bytes) / (1ull << 30), ordinal_,
                      cudaGetErrorString(result),
                      static_cast<double>(freeBytes) / (1ull << 30),
                      static_cast<double>(totalBytes) / (1ull << 30));
  }
  // As on the cpu backend: a plan bug that reads before writing reads zeros,
  // repeatably.
  ZCC_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(allocation, 0, bytes ? bytes : 256, context_.stream));
  ZCC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(context_.stream));
  *memory = allocation;
  allocations_.emplace_back(allocation, bytes);
  allocatedBytes_ += bytes;
  return Status::ok();
}

void CudaBackend::deallocate(void *memory) {
  if (!memory)
    return;
  cudaDeviceSynchronize();
  for (size_t i = 0; i < allocations_.size(); ++i)
    if (allocations_[i].first == memory) {
      allocatedBytes_ -= allocations_[i].second;
      allocations_.erase(allocations_.begin() + i);
      break;
    }
  cudaFree(memory);
}

uint64_t CudaBackend::deviceBytesInUse() const {
  size_t freeBytes = 0, totalBytes = 0;
  if (cudaSetDevice(ordinal_) != cudaSuccess ||
      cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return totalBytes - freeBytes;
}

Status CudaBackend::copyToDevice(void *device, const void *host,
                                 uint64_t bytes) {
  if (!bytes)
    return Status::ok();
  // The host buffer may go away on return: finish the copy first.
  // Default: `device` may be in the pinned host arena (offloaded state).
  ZCC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device, host, bytes,
                                           cudaMemcpyDefault,
                                           context_.stream));
  ZCC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(context_.stream));
  return Status::ok();
}

Status CudaBackend::copyToHost(void *host, const void *device,
                               uint64_t bytes) {
  if (!bytes)
    return Status::ok();
  ZCC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, device, bytes,
                                           cudaMemcpyDefault,
                                           context_.stream));
  ZCC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(context_.stream));
  return Status::ok();
}

Status CudaBackend::copyOnDevice(void *destination, const void *source,
                                 uint64_t bytes) {
  if (!bytes || destination == source)
    return Status::ok();
  ZCC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(destination, source, bytes,
                                           cudaMemcpyDeviceToDevice,
                                           context_.stream));
  return Status::ok();
}

Status CudaBackend::copyAsync(void *destination, const void *source,
                              uint64_t bytes, uint32_t stream) {
  if (!bytes)
    return Status::ok();
  // One side is the pinned host arena: the copy engine reads or writes it
  // directly, in stream order.
  ZCC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(destination, source, bytes,
                                           cudaMemcpyDefault,
                                           static_cast<cudaStream_t>(nativeStream(stream))));
  return Status::ok();
}

Status CudaBackend::enqueueHostCall(uint32_t stream, void (*call)(void *), void *data) {
  // A host node in a captured graph, a host function otherwise: CUDA runs
  // it on a thread of its own once the stream reaches it.
  ZCC_CUDA_RETURN_IF_ERROR(
      cudaLaunchHostFunc(static_cast<cudaStream_t>(nativeStream(stream)), call, data));
  return Status::ok();
}

Status CudaBackend::prepareStreams(uint32_t streams, uint32_t events) {
  if (streams_.empty())
    streams_.push_back(context_.stream);
  while (streams_.size() < streams) {
    cudaStream_t stream = nullptr;
    ZCC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    streams_.push_back(stream);
  }
  while (events_.size() < events) {
    cudaEvent_t event = nullptr;
    ZCC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    events_.push_back(event);
  }
  return Status::ok();
}

Status CudaBackend::recordEvent(uint32_t event, uint32_t stream) {
  if (event >= events_.size() || stream >= std::max<size_t>(1, streams_.size()))
    return makeStatus(StatusCode::kInternal, "event %u or stream %u was not prepared", event,
                      stream);
  ZCC_CUDA_RETURN_IF_ERROR(
      cudaEventRecord(events_[event], static_cast<cudaStream_t>(nativeStream(stream))));
  return Status::ok();
}

Status CudaBackend::waitEvent(uint32_t event, uint32_t stream) {
  if (event >= events_.size() || stream >= std::max<size_t>(1, streams_.size()))
    return makeStatus(StatusCode::kInternal, "event %u or stream %u was not prepared", event,
                      stream);
  ZCC_CUDA_RETURN_IF_ERROR(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(nativeStream(stream)), events_[event], 0));
  return Status::ok();
}

Status CudaBackend::allocateHost(uint64_t bytes, uint64_t alignment,
                                 void **memory) {
  *memory = nullptr;
  // cudaHostAlloc returns page-aligned memory.
  if (alignment > 4096 || (alignment & (alignment - 1)) != 0)
    return makeStatus(StatusCode::kInvalidArgument,
                      "pinned host memory is aligned to 4096 bytes, not %llu",
                      static_cast<unsigned long long>(alignment));
  void *allocation = nullptr;
  cudaError_t result = cudaHostAlloc(&allocation, bytes ? bytes : 256,
                                     cudaHostAllocPortable);
  if (result != cudaSuccess) {
    cudaGetLastError();
    return makeStatus(StatusCode::kResourceExhausted,
                      "cannot pin %.2f GiB of host memory for offloaded state "
                      "(%s); give the job more host memory or offload less",
                      static_cast<double>(bytes) / (1ull << 30),
                      cudaGetErrorString(result));
  }
  std::memset(allocation, 0, bytes ? bytes : 256);
  *memory = allocation;
  hostAllocations_.push_back(allocation);
  return Status::ok();
}

void CudaBackend::deallocateHost(void *memory) {
  if (!memory)
    return;
  cudaDeviceSynchronize();
  for (size_t i = 0; i < hostAllocations_.size(); ++i)
    if (hostAllocations_[i] == memory) {
      hostAllocations_.erase(hostAllocations_.begin() + i);
      break;
    }
  cudaFreeHost(memory);
}

StatusOr<KernelHandle> CudaBackend::resolveKernel(const std::string &name) {
  cuda::KernelFn fn = cuda::findKernel(name);
  if (!fn) {
    std::string known;
    for (const std::string &kernel : cuda::kernelNames())
      known += (known.empty() ? "" : ", ") + kernel;
    return Status(StatusCode::kNotFound,
                  "the cuda backend has no kernel '" + name +
                      "' (its kernels: " + known + ")");
  }
  kernels_.push_back(fn);
  return KernelHandle{static_cast<uint32_t>(kernels_.size() - 1)};
}

Status CudaBackend::launch(KernelHandle kernel, const KernelArgs &args,
                           uint32_t stream) {
  if (kernel.index >= kernels_.size())
    return Status(StatusCode::kInternal, "launch of an unresolved kernel");
  if (stream == 0) {
    ZCC_RETURN_IF_ERROR(kernels_[kernel.index](args, context_), "on CUDA device %d", ordinal_);
  } else {
    cuda::LaunchContext onStream = context_;
    onStream.stream = static_cast<cudaStream_t>(nativeStream(stream));
    ZCC_RETURN_IF_ERROR(kernels_[kernel.index](args, onStream), "on CUDA device %d",
                        ordinal_);
  }
  // A bad launch configuration shows here; a fault inside the kernel shows
  // at the next synchronize.
  ZCC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::ok();
}

Status CudaBackend::synchronize(const std::function<Status()> &healthCheck) {
  if (!healthCheck) {
    ZCC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(context_.stream));
    for (size_t i = 1; i < streams_.size(); ++i)
      ZCC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(streams_[i]));
    return Status::ok();
  }
  // Poll, so that a collective whose peer died or hangs ends the wait with
  // the communicator's error instead of blocking this rank forever.
  auto pause = std::chrono::microseconds(20);
  size_t stream = 0;
  for (;;) {
    cudaError_t result = cudaStreamQuery(static_cast<cudaStream_t>(nativeStream(stream)));
    if (result == cudaSuccess) {
      if (++stream >= std::max<size_t>(1, streams_.size()))
        return Status::ok();
      continue;
    }
    if (result != cudaErrorNotReady)
      ZCC_CUDA_RETURN_IF_ERROR(result);
    Status health = healthCheck();
    if (!health.isOk())
      return health;
    std::this_thread::sleep_for(pause);
    // At most ~0.1 ms late: a pipeline stage's micro-batch runs take a few
    // milliseconds, and each rank has a core to poll with.
    if (pause < std::chrono::microseconds(80))
      pause *= 2;
  }
}

StatusOr<uint32_t> CudaBackend::capture(const std::function<Status()> &launches) {
  if (streams_.empty())
    streams_.push_back(context_.stream);
  while (captureEvents_.size() < streams_.size()) {
    cudaEvent_t event = nullptr;
    ZCC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    captureEvents_.push_back(event);
  }
  // Thread-local: another thread's CUDA calls (a host kernel pool, a
  // communicator's watchdog) neither join nor break this capture.
  ZCC_CUDA_RETURN_IF_ERROR(
      cudaStreamBeginCapture(context_.stream, cudaStreamCaptureModeThreadLocal));
  // The other streams join the capture through an event of stream 0 and
  // leave it through one event each that stream 0 waits for at the end.
  cudaError_t forked = cudaEventRecord(captureEvents_[0], context_.stream);
  for (size_t i = 1; i < streams_.size() && forked == cudaSuccess; ++i)
    forked = cudaStreamWaitEvent(streams_[i], captureEvents_[0], 0);
  Status launched = forked == cudaSuccess ? launches() : Status::ok();
  cudaError_t joined = cudaSuccess;
  for (size_t i = 1; i < streams_.size() && joined == cudaSuccess; ++i) {
    joined = cudaEventRecord(captureEvents_[i], streams_[i]);
    if (joined == cudaSuccess)
      joined = cudaStreamWaitEvent(context_.stream, captureEvents_[i], 0);
  }
  // Ending the capture is what returns the streams to normal, whatever
  // happened in it.
  cudaGraph_t graph = nullptr;
  cudaError_t ended = cudaStreamEndCapture(context_.stream, &graph);
  cudaGetLastError();
  auto discard = [&] {
    if (graph)
      cudaGraphDestroy(graph);
  };
  if (forked != cudaSuccess || !launched.isOk() || joined != cudaSuccess ||
      ended != cudaSuccess) {
    discard();
    if (!launched.isOk())
      return launched.addContext("while capturing a CUDA graph");
    cudaError_t failed = forked != cudaSuccess ? forked : joined != cudaSuccess ? joined : ended;
    return makeStatus(StatusCode::kFailedPrecondition,
                      "the program cannot be captured as a CUDA graph: %s (%s)",
                      cudaGetErrorName(failed), cudaGetErrorString(failed));
  }
  cudaGraphExec_t executable = nullptr;
  cudaError_t instantiated = cudaGraphInstantiate(&executable, graph, 0);
  discard();
  if (instantiated != cudaSuccess) {
    cudaGetLastError();
    return makeStatus(StatusCode::kFailedPrecondition,
                      "the captured CUDA graph cannot be instantiated: %s (%s)",
                      cudaGetErrorName(instantiated), cudaGetErrorString(instantiated));
  }
  // Uploading now keeps the first replay as fast as the others.
  ZCC_CUDA_RETURN_IF_ERROR(cudaGraphUpload(executable, context_.stream));
  graphs_.push_back(executable);
  return static_cast<uint32_t>(graphs_.size() - 1);
}

Status CudaBackend::replay(uint32_t graph) {
  if (graph >= graphs_.size())
    return makeStatus(StatusCode::kInternal, "replay of CUDA graph %u, which was never captured",
                      graph);
  ZCC_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graphs_[graph], context_.stream));
  return Status::ok();
}

void *CudaBackend::nativeStream(uint32_t index) {
  return index < streams_.size() ? streams_[index] : context_.stream;
}

} // namespace zcc
