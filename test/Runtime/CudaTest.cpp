//===- CudaTest.cpp - The CUDA toolchain path, on a GPU -------------------===//
//
// Proves that code built for sm_90 here runs on the GPU machine: device
// discovery, the Status boundary and one kernel launch. Skipped by name where
// no GPU is present.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Fill.h"
#include "runtime/Cuda/CudaDevice.h"
#include "runtime/Cuda/CudaStatus.h"

#include <gtest/gtest.h>

#include <vector>

namespace zcc {
namespace {

bool haveGpu() {
  StatusOr<std::vector<CudaDeviceInfo>> devices = listCudaDevices();
  return devices.isOk() && !devices->empty();
}

TEST(CudaDevice, ListsDevicesOrExplainsWhyNot) {
  StatusOr<std::vector<CudaDeviceInfo>> devices = listCudaDevices();
  if (!devices.isOk()) {
    EXPECT_NE(devices.status().message().find("while listing CUDA devices"),
              std::string::npos);
    GTEST_SKIP() << "no CUDA device: " << devices.status().toString();
  }
  if (devices->empty())
    GTEST_SKIP() << "no CUDA device";
  for (const CudaDeviceInfo &device : *devices) {
    EXPECT_FALSE(device.name.empty());
    EXPECT_GT(device.totalMemoryBytes, 0u);
    EXPECT_GE(device.computeCapabilityMajor, 7);
  }
}

Status fillAndReadBack(size_t count, float value, std::vector<float> &out) {
  float *device = nullptr;
  ZCC_CUDA_RETURN_IF_ERROR(
      cudaMalloc(reinterpret_cast<void **>(&device), count * sizeof(float)));
  Status status = cudaResultToStatus(cuda::launchFillF32(device, count, value, nullptr),
                                     "launchFillF32", __FILE__, __LINE__);
  out.assign(count, 0.0f);
  if (status.isOk())
    status = cudaResultToStatus(cudaMemcpy(out.data(), device, count * sizeof(float),
                                           cudaMemcpyDeviceToHost),
                                "cudaMemcpy", __FILE__, __LINE__);
  Status freed = cudaResultToStatus(cudaFree(device), "cudaFree", __FILE__, __LINE__);
  return status.isOk() ? freed : status;
}

TEST(CudaKernels, FillWritesEveryElement) {
  if (!haveGpu())
    GTEST_SKIP() << "no CUDA device";
  std::vector<float> host;
  // Larger than one grid-stride pass so the loop is exercised.
  const size_t count = (1u << 20) * 20 + 7;
  Status status = fillAndReadBack(count, 2.5f, host);
  ASSERT_TRUE(status.isOk()) << status.toString();
  for (size_t i = 0; i < count; ++i)
    ASSERT_EQ(host[i], 2.5f) << "at " << i;
}

TEST(CudaStatus, ConvertsErrorsWithTheExpression) {
  Status status = cudaResultToStatus(cudaErrorInvalidValue, "cudaMemcpy(a, b)", "x.cpp", 7);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("cudaMemcpy(a, b)"), std::string::npos);
  EXPECT_NE(status.message().find("x.cpp:7"), std::string::npos);
}

} // namespace
} // namespace zcc
