//===- Fill.cu - Fill a device buffer with a value ------------------------===//

#include "kernels/cuda/Fill.h"

namespace zcc::cuda {

namespace {
__global__ void fillF32Kernel(float *data, size_t count, float value) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride)
    data[i] = value;
}
} // namespace

cudaError_t launchFillF32(float *data, size_t count, float value,
                          cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  constexpr unsigned kThreads = 256;
  size_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > 65535u * 8u)
    blocks = 65535u * 8u;
  fillF32Kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      data, count, value);
  return cudaGetLastError();
}

} // namespace zcc::cuda
