//===- CudaStatus.h - CUDA results at the Status boundary -------*- C++ -*-===//
//
// CUDA runtime results are converted to Status where they are produced, with
// the failing expression, file and line, so no CUDA error code travels further.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_CUDA_CUDASTATUS_H
#define ZCC_RUNTIME_CUDA_CUDASTATUS_H

#include "runtime/Support/Status.h"

#include <cuda_runtime_api.h>

namespace zcc {

/// Ok for cudaSuccess; otherwise a Status naming the CUDA error, the
/// expression that returned it and where.
Status cudaResultToStatus(cudaError_t result, const char *expression,
                          const char *file, int line);

} // namespace zcc

#define ZCC_CUDA_RETURN_IF_ERROR(expr)                                         \
  do {                                                                         \
    ::zcc::Status zccCudaStatus_ =                                             \
        ::zcc::cudaResultToStatus((expr), #expr, __FILE__, __LINE__);          \
    if (!zccCudaStatus_.isOk())                                                \
      return zccCudaStatus_;                                                   \
  } while (false)

#endif // ZCC_RUNTIME_CUDA_CUDASTATUS_H
