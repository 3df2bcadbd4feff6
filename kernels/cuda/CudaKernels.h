//===- CudaKernels.h - The kernels of the cuda backend ----------*- C++ -*-===//
//
// The cuda backend runs the same kernels as the cpu backend (one per zgraph
// op, named as the op, the op's attributes under the same names; see
// kernels/cpu/CpuKernels.h) and is checked against it kernel by kernel
// (test/Runtime/CudaKernelsTest*.cpp) and plan by plan.
//
// A kernel is a host function: it checks its arguments with the cpu kernels'
// checks (kernels/cpu/KernelSupport.h), so both backends refuse the same
// arguments with the same messages, then enqueues device work on the
// context's stream and returns without waiting. It must not allocate device
// or host memory on its success path: scratch space comes from the context's
// workspace. (cuDNN's attention builds its execution plan on a shape's first
// call, before any CUDA graph is captured, and each of its eager calls makes
// a small cuDNN variant pack on the host; graph replays make none.)
// Tensor views point into device memory.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_CUDAKERNELS_H
#define ZCC_KERNELS_CUDA_CUDAKERNELS_H

#include "kernels/cpu/CpuKernels.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

namespace zcc::cuda {

using cpu::KernelArgs;
using cpu::TensorView;

class CudnnAttention;

/// What a kernel launch may use besides its arguments; owned by the backend
/// and valid for the backend's lifetime.
struct LaunchContext {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t blasLt = nullptr;
  /// Device scratch memory. Kernels on one stream run in order, so a kernel
  /// may use all of it; its contents do not survive to the next kernel.
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  int multiprocessorCount = 0;
  /// cuDNN's fused attention (CudnnAttention.h), which the 16-bit attention
  /// kernels use where it takes the shape; null runs the own kernels only.
  CudnnAttention *cudnnAttention = nullptr;
  /// The first time a matrix product of a shape runs (outside a graph
  /// capture, not accumulating into its result), time this many of the
  /// cuBLASLt heuristic's first candidates on it and keep the fastest
  /// (at most kMaxMatmulCandidates); 1 keeps the heuristic's first. The
  /// backend sets it from ZCC_MATMUL_ALGOS; the kernel tests leave it 1.
  int matmulCandidates = 1;
};

/// The most cuBLASLt candidates a product shape times (matmulCandidates).
constexpr int kMaxMatmulCandidates = 64;

/// Bytes of workspace the backend allocates: cuBLASLt's recommendation for
/// Hopper, room for reductions, and cuDNN's attention gradient's f32 query
/// gradient (64 MiB for 4 x 32 heads of 1024 x 128).
constexpr size_t kWorkspaceBytes = size_t{128} << 20;

using KernelFn = Status (*)(const KernelArgs &args,
                            const LaunchContext &context);

/// The kernel of this name, or null.
KernelFn findKernel(const std::string &name);

/// Every kernel name, sorted.
std::vector<std::string> kernelNames();

} // namespace zcc::cuda

#endif // ZCC_KERNELS_CUDA_CUDAKERNELS_H
