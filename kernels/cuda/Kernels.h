//===- Kernels.h - The cuda kernels, one function each ----------*- C++ -*-===//
//
// Internal: the registry in CudaKernels.cpp maps op names to these; everything
// else reaches them through findKernel(). Each group lives in a host file
// (Group.cpp: argument checks, launch parameters) and a device file
// (Group.cu: the __global__ functions and their launchers).
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_KERNELS_H
#define ZCC_KERNELS_CUDA_KERNELS_H

#include "kernels/cpu/KernelSupport.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/LaunchTypes.h"

namespace zcc::cuda::kernels {

/// The launchers' element type of a plan dtype (the two enums share their
/// values).
inline ElementType elementType(plan::DType dtype) {
  return static_cast<ElementType>(static_cast<int>(dtype));
}
inline ElementType elementType(const TensorView &view) { return elementType(view.dtype); }

/// A launcher's error as the kernel's status (ok for cudaSuccess).
inline Status launchStatus(const char *kernel, cudaError_t error) {
  if (error == cudaSuccess)
    return Status::ok();
  return cpu::detail::kernelError(StatusCode::kInternal, kernel, "launch failed: %s (%s)",
                                  cudaGetErrorName(error), cudaGetErrorString(error));
}

#define ZCC_CUDA_KERNEL(fn) Status fn(const KernelArgs &, const LaunchContext &)

// Elementwise.cpp
ZCC_CUDA_KERNEL(add);
ZCC_CUDA_KERNEL(sub);
ZCC_CUDA_KERNEL(mul);
ZCC_CUDA_KERNEL(div);
ZCC_CUDA_KERNEL(pow);
ZCC_CUDA_KERNEL(max);
ZCC_CUDA_KERNEL(min);
ZCC_CUDA_KERNEL(equal);
ZCC_CUDA_KERNEL(less);
ZCC_CUDA_KERNEL(greater);
ZCC_CUDA_KERNEL(where);
ZCC_CUDA_KERNEL(cast);
ZCC_CUDA_KERNEL(isNan);
ZCC_CUDA_KERNEL(neg);
ZCC_CUDA_KERNEL(exp);
ZCC_CUDA_KERNEL(sqrt);
ZCC_CUDA_KERNEL(tanh);
ZCC_CUDA_KERNEL(relu);
ZCC_CUDA_KERNEL(sigmoid);
ZCC_CUDA_KERNEL(log);
ZCC_CUDA_KERNEL(erf);
ZCC_CUDA_KERNEL(reciprocal);
ZCC_CUDA_KERNEL(gelu);
ZCC_CUDA_KERNEL(geluGrad);
ZCC_CUDA_KERNEL(dropout);

// Shape.cpp
ZCC_CUDA_KERNEL(copy);
ZCC_CUDA_KERNEL(reshape);
ZCC_CUDA_KERNEL(transpose);
ZCC_CUDA_KERNEL(concat);
ZCC_CUDA_KERNEL(slice);
ZCC_CUDA_KERNEL(sliceGrad);
ZCC_CUDA_KERNEL(gather);
ZCC_CUDA_KERNEL(gatherGrad);
ZCC_CUDA_KERNEL(broadcast);
ZCC_CUDA_KERNEL(trilu);

// Normalize.cpp
ZCC_CUDA_KERNEL(softmax);
ZCC_CUDA_KERNEL(logSoftmax);
ZCC_CUDA_KERNEL(layerNorm);
ZCC_CUDA_KERNEL(softmaxGrad);
ZCC_CUDA_KERNEL(logSoftmaxGrad);
ZCC_CUDA_KERNEL(layerNormGrad);

// Reduce.cpp
ZCC_CUDA_KERNEL(reduceSum);
ZCC_CUDA_KERNEL(reduceMean);
ZCC_CUDA_KERNEL(reduceMax);

// Loss.cpp
ZCC_CUDA_KERNEL(mseLoss);
ZCC_CUDA_KERNEL(crossEntropy);
ZCC_CUDA_KERNEL(nllLoss);
ZCC_CUDA_KERNEL(mseLossGrad);
ZCC_CUDA_KERNEL(crossEntropyGrad);
ZCC_CUDA_KERNEL(nllLossGrad);

// Linalg.cpp (matrix products through cuBLASLt)
ZCC_CUDA_KERNEL(matmul);
ZCC_CUDA_KERNEL(accumulateMatmul);

// Attention.cpp
ZCC_CUDA_KERNEL(attention);
ZCC_CUDA_KERNEL(attentionGrad);
ZCC_CUDA_KERNEL(qkvAttention);
ZCC_CUDA_KERNEL(qkvAttentionGrad);

// Optimizer.cpp
ZCC_CUDA_KERNEL(accumulate);
ZCC_CUDA_KERNEL(fill);
ZCC_CUDA_KERNEL(sumSquares);
ZCC_CUDA_KERNEL(adamw);
ZCC_CUDA_KERNEL(adagrad);
ZCC_CUDA_KERNEL(lambMoments);
ZCC_CUDA_KERNEL(lambStep);
ZCC_CUDA_KERNEL(lion);
ZCC_CUDA_KERNEL(sgd);

#undef ZCC_CUDA_KERNEL

} // namespace zcc::cuda::kernels

#endif // ZCC_KERNELS_CUDA_KERNELS_H
