//===- CudaStatus.cpp - CUDA results at the Status boundary ---------------===//

#include "runtime/Cuda/CudaStatus.h"

namespace zcc {

Status cudaResultToStatus(cudaError_t result, const char *expression,
                          const char *file, int line) {
  if (result == cudaSuccess)
    return Status::ok();
  // Clear the sticky "last error" so the next call does not report it again.
  (void)cudaGetLastError();
  StatusCode code = StatusCode::kInternal;
  if (result == cudaErrorNoDevice || result == cudaErrorInsufficientDriver)
    code = StatusCode::kUnavailable;
  else if (result == cudaErrorMemoryAllocation)
    code = StatusCode::kResourceExhausted;
  else if (result == cudaErrorInvalidValue)
    code = StatusCode::kInvalidArgument;
  return makeStatus(code, "%s (%s) from %s at %s:%d", cudaGetErrorString(result),
                    cudaGetErrorName(result), expression, file, line);
}

} // namespace zcc
