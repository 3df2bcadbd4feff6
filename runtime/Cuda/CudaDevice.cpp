//===- CudaDevice.cpp - CUDA device discovery -----------------------------===//

#include "runtime/Cuda/CudaDevice.h"

#include "runtime/Cuda/CudaStatus.h"

namespace zcc {

static Status queryDevices(std::vector<CudaDeviceInfo> &devices) {
  int count = 0;
  ZCC_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    cudaDeviceProp properties;
    ZCC_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&properties, ordinal));
    CudaDeviceInfo info;
    info.ordinal = ordinal;
    info.name = properties.name;
    info.computeCapabilityMajor = properties.major;
    info.computeCapabilityMinor = properties.minor;
    info.totalMemoryBytes = properties.totalGlobalMem;
    info.multiprocessorCount = properties.multiProcessorCount;
    devices.push_back(std::move(info));
  }
  return Status::ok();
}

StatusOr<std::vector<CudaDeviceInfo>> listCudaDevices() {
  std::vector<CudaDeviceInfo> devices;
  Status status = queryDevices(devices);
  if (!status.isOk())
    return status.addContext("while listing CUDA devices");
  return devices;
}

} // namespace zcc
