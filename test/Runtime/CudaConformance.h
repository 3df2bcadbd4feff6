//===- CudaConformance.h - A cuda kernel against its cpu reference -*- C++ -*-===//
//
// The cuda kernel tests build a kernel call once (KernelTestUtil.h's Call),
// run it on the cpu reference kernel and on the cuda kernel of the same name
// with the same inputs and attributes, and compare every output. Each test
// binary skips itself where no GPU is present.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_TEST_RUNTIME_CUDACONFORMANCE_H
#define ZCC_TEST_RUNTIME_CUDACONFORMANCE_H

#include "kernels/cuda/CudaKernels.h"
#include "test/Runtime/KernelTestUtil.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zcc::test {

/// One stream, one cuBLASLt handle and the workspace, for a whole test
/// binary; null when there is no GPU.
class CudaTestContext {
public:
  static CudaTestContext *get() {
    static CudaTestContext *context = [] {
      int count = 0;
      if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
        return static_cast<CudaTestContext *>(nullptr);
      auto *c = new CudaTestContext();
      cudaDeviceProp props{};
      cudaGetDeviceProperties(&props, 0);
      c->launch.multiprocessorCount = props.multiProcessorCount;
      if (cudaStreamCreate(&c->launch.stream) != cudaSuccess ||
          cublasLtCreate(&c->launch.blasLt) != CUBLAS_STATUS_SUCCESS ||
          cudaMalloc(&c->launch.workspace, cuda::kWorkspaceBytes) !=
              cudaSuccess)
        return static_cast<CudaTestContext *>(nullptr);
      c->launch.workspaceBytes = cuda::kWorkspaceBytes;
      return c;
    }();
    return context;
  }
  cuda::LaunchContext launch;
};

#define ZCC_REQUIRE_GPU()                                                      \
  do {                                                                         \
    if (!::zcc::test::CudaTestContext::get())                                  \
      GTEST_SKIP() << "no CUDA device";                                        \
  } while (false)

/// Launches `fn` once more, captured as a CUDA graph on `launch`'s stream,
/// after clearing the outputs that are not inputs too; runOnCuda's graph.
inline Status replayAsGraph(cuda::KernelFn fn, const Call &call,
                            const cpu::KernelArgs &host,
                            const cpu::KernelArgs &device,
                            const cuda::LaunchContext &launch) {
  cudaStream_t stream = launch.stream;
  if (cudaStreamSynchronize(stream) != cudaSuccess)
    return Status(StatusCode::kInternal, "the eager launch failed");
  for (size_t i = 0; i < device.outputs.size(); ++i)
    if (call.aliasOf(i) < 0)
      cudaMemset(device.outputs[i].data, 0,
                 static_cast<size_t>(host.outputs[i].numElements()) *
                     cpu::dtypeBytes(host.outputs[i].dtype));
  cudaGraph_t graph = nullptr;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) !=
      cudaSuccess)
    return Status(StatusCode::kInternal, "cannot begin a capture");
  Status status = fn(device, launch);
  cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!status.isOk())
    return status;
  if (ended != cudaSuccess)
    return Status(StatusCode::kInternal,
                  std::string("the capture failed: ") + cudaGetErrorString(ended));
  cudaGraphExec_t executable = nullptr;
  cudaError_t made = cudaGraphInstantiate(&executable, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess)
    return Status(StatusCode::kInternal, std::string("cannot instantiate the graph: ") +
                                             cudaGetErrorString(made));
  cudaError_t replayed = cudaGraphLaunch(executable, stream);
  if (replayed == cudaSuccess)
    replayed = cudaStreamSynchronize(stream);
  cudaGraphExecDestroy(executable);
  if (replayed != cudaSuccess)
    return Status(StatusCode::kInternal,
                  std::string("the graph failed: ") + cudaGetErrorString(replayed));
  return Status::ok();
}

/// Runs `call` on the cuda kernel of its name: inputs and initial outputs
/// copied to the device, results copied back into `call`'s tensors. With
/// `launch`, the kernel runs with that context (the shared one's stream and
/// workspace with something added) instead of the shared one. With
/// `replayGraph`, the kernel then runs again captured in a CUDA graph, into
/// cleared outputs, and the results are the graph's.
inline Status runOnCuda(Call &call, const cuda::LaunchContext *launch = nullptr,
                        bool replayGraph = false) {
  CudaTestContext *context = CudaTestContext::get();
  if (!context)
    return Status(StatusCode::kUnavailable, "no CUDA device");
  cuda::KernelFn fn = cuda::findKernel(call.kernel());
  if (!fn)
    return Status(StatusCode::kNotFound, "no cuda kernel " + call.kernel());
  cpu::KernelArgs host = call.hostArgs();
  cpu::KernelArgs device = host;
  std::vector<void *> allocations;
  auto toDevice = [&](cpu::TensorView &view) -> Status {
    size_t bytes = static_cast<size_t>(view.numElements()) *
                   cpu::dtypeBytes(view.dtype);
    void *memory = nullptr;
    if (cudaMalloc(&memory, bytes ? bytes : 1) != cudaSuccess)
      return Status(StatusCode::kResourceExhausted, "cudaMalloc failed");
    allocations.push_back(memory);
    if (bytes)
      cudaMemcpy(memory, view.data, bytes, cudaMemcpyHostToDevice);
    view.data = memory;
    return Status();
  };
  Status status;
  for (size_t i = 0; i < device.inputs.size() && status.isOk(); ++i)
    status = toDevice(device.inputs[i]);
  for (size_t i = 0; i < device.outputs.size() && status.isOk(); ++i) {
    int alias = call.aliasOf(i);
    if (alias >= 0)
      device.outputs[i].data = device.inputs[alias].data;
    else
      status = toDevice(device.outputs[i]);
  }
  const cuda::LaunchContext &used = launch ? *launch : context->launch;
  if (status.isOk())
    status = fn(device, used);
  if (status.isOk() && replayGraph)
    status = replayAsGraph(fn, call, host, device, used);
  cudaError_t synced = cudaStreamSynchronize(context->launch.stream);
  if (status.isOk() && synced != cudaSuccess)
    status = Status(StatusCode::kInternal,
                    std::string("kernel failed: ") + cudaGetErrorString(synced));
  if (status.isOk()) {
    for (size_t i = 0; i < device.outputs.size(); ++i) {
      size_t bytes = static_cast<size_t>(host.outputs[i].numElements()) *
                     cpu::dtypeBytes(host.outputs[i].dtype);
      if (bytes)
        cudaMemcpy(host.outputs[i].data, device.outputs[i].data, bytes,
                   cudaMemcpyDeviceToHost);
    }
  }
  for (void *memory : allocations)
    cudaFree(memory);
  return status;
}

/// Runs a copy of `call` on the cpu kernel and `call` itself on the cuda
/// kernel, and expects every output to agree within `tolerance` (mixed
/// absolute/relative, as expectNear). Both must succeed.
inline void expectCudaMatchesCpu(const Call &call, double tolerance) {
  Call reference = call, actual = call;
  Status cpuStatus = reference.run();
  ASSERT_TRUE(cpuStatus.isOk()) << "cpu: " << cpuStatus.toString();
  Status cudaStatus = runOnCuda(actual);
  ASSERT_TRUE(cudaStatus.isOk()) << "cuda: " << cudaStatus.toString();
  for (size_t i = 0; i < actual.outputCount(); ++i)
    expectNear(actual.values(i), reference.values(i), tolerance,
               call.kernel() + " output " + std::to_string(i));
}

/// Expects the cuda kernel to refuse `call` as the cpu kernel does: same
/// status code and message.
inline void expectCudaRefusesLikeCpu(const Call &call) {
  Call reference = call, actual = call;
  Status cpuStatus = reference.run();
  ASSERT_FALSE(cpuStatus.isOk()) << "the cpu kernel accepted the call";
  Status cudaStatus = runOnCuda(actual);
  ASSERT_FALSE(cudaStatus.isOk()) << "the cuda kernel accepted the call";
  EXPECT_EQ(cudaStatus.code(), cpuStatus.code());
  EXPECT_EQ(cudaStatus.message(), cpuStatus.message());
}

} // namespace zcc::test

#endif // ZCC_TEST_RUNTIME_CUDACONFORMANCE_H
