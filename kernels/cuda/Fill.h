//===- Fill.h - Fill a device buffer with a value ---------------*- C++ -*-===//
//
// Used to poison arenas in debug runs and to initialise norms and biases for
// `--weights random`.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_FILL_H
#define ZCC_KERNELS_CUDA_FILL_H

#include <cstddef>
#include <cuda_runtime_api.h>

namespace zcc::cuda {

/// Enqueues `data[i] = value` for i in [0, count) on `stream`.
cudaError_t launchFillF32(float *data, size_t count, float value,
                          cudaStream_t stream);

} // namespace zcc::cuda

#endif // ZCC_KERNELS_CUDA_FILL_H
