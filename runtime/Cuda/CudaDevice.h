//===- CudaDevice.h - CUDA device discovery ---------------------*- C++ -*-===//

#ifndef ZCC_RUNTIME_CUDA_CUDADEVICE_H
#define ZCC_RUNTIME_CUDA_CUDADEVICE_H

#include "runtime/Support/Status.h"

#include <cstddef>
#include <string>
#include <vector>

namespace zcc {

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int computeCapabilityMajor = 0;
  int computeCapabilityMinor = 0;
  size_t totalMemoryBytes = 0;
  int multiprocessorCount = 0;
};

/// The visible CUDA devices; kUnavailable where there is no driver or GPU.
StatusOr<std::vector<CudaDeviceInfo>> listCudaDevices();

} // namespace zcc

#endif // ZCC_RUNTIME_CUDA_CUDADEVICE_H
