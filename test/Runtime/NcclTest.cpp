//===- NcclTest.cpp - The NCCL communicator on one GPU --------------------===//
//
// One rank's NCCL group: its collectives on device memory and on the
// training loop's host scalars, a split of it, and its watchdog, which
// aborts a run that outlives the timeout even when the rank's thread never
// looks. Skipped where no GPU is present.
//
//===----------------------------------------------------------------------===//

#include "runtime/Cuda/CudaDevice.h"
#include "runtime/Cuda/NcclCommunicator.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace zcc {
namespace {

bool haveGpu() {
  StatusOr<std::vector<CudaDeviceInfo>> devices = listCudaDevices();
  return devices.isOk() && !devices->empty();
}

/// Each case starts a one-rank group on GPU 0 (NCCL's setup takes about a
/// second, within a generous creation timeout), then gives its runs and
/// collectives the case's own timeout.
class NcclCommunicatorTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!haveGpu())
      GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }

  std::unique_ptr<NcclCommunicator> oneRank(std::chrono::milliseconds timeout) {
    StatusOr<ncclUniqueId> id = makeNcclId();
    EXPECT_TRUE(id.isOk()) << id.status().toString();
    if (!id.isOk())
      return nullptr;
    StatusOr<std::unique_ptr<NcclCommunicator>> created =
        NcclCommunicator::create(*id, /*rank=*/0, /*size=*/1, std::chrono::seconds(60));
    EXPECT_TRUE(created.isOk()) << created.status().toString();
    if (!created.isOk())
      return nullptr;
    (*created)->setTimeout(timeout);
    return std::move(*created);
  }
};

TEST_F(NcclCommunicatorTest, OneRankReducesDeviceAndHostValuesAndSplits) {
  std::unique_ptr<NcclCommunicator> communicator = oneRank(std::chrono::seconds(30));
  ASSERT_TRUE(communicator);
  std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f};
  float *device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, values.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device, values.data(), values.size() * sizeof(float),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  Status reduced = communicator->allReduce(device, device, values.size(), plan::F32,
                                           ReduceOp::kSum);
  ASSERT_TRUE(reduced.isOk()) << reduced.toString();
  std::vector<float> back(values.size());
  ASSERT_EQ(cudaMemcpy(back.data(), device, back.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(back, values);
  // A host scalar (the loss, the norm) goes through the staging buffer.
  double loss = 2.5;
  Status host = communicator->allReduce(&loss, &loss, 1, plan::F64, ReduceOp::kSum);
  ASSERT_TRUE(host.isOk()) << host.toString();
  EXPECT_EQ(loss, 2.5);

  StatusOr<std::unique_ptr<NcclCommunicator>> split = communicator->split(/*color=*/0, /*key=*/0);
  ASSERT_TRUE(split.isOk()) << split.status().toString();
  EXPECT_EQ((*split)->size(), 1);
  EXPECT_EQ((*split)->rank(), 0);
  Status childReduced = (*split)->allReduce(device, device, values.size(), plan::F32,
                                            ReduceOp::kAverage);
  EXPECT_TRUE(childReduced.isOk()) << childReduced.toString();
  split->reset();
  cudaFree(device);
}

TEST_F(NcclCommunicatorTest, WatchdogAbortsARunPastTheTimeout) {
  std::unique_ptr<NcclCommunicator> communicator = oneRank(std::chrono::milliseconds(200));
  ASSERT_TRUE(communicator);
  // A run that never polls (its thread stuck elsewhere): the watchdog
  // aborts it, and every later call says why.
  communicator->watchRun(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  double value = 1;
  Status after = communicator->allReduce(&value, &value, 1, plan::F64, ReduceOp::kSum);
  communicator->watchRun(false);
  ASSERT_FALSE(after.isOk());
  EXPECT_NE(after.message().find("was aborted"), std::string::npos) << after.toString();
  EXPECT_NE(after.message().find("waited"), std::string::npos) << after.toString();
  EXPECT_NE(after.message().find("--comm-timeout"), std::string::npos) << after.toString();
}

TEST_F(NcclCommunicatorTest, IdleCommunicatorOutlivesItsTimeout) {
  std::unique_ptr<NcclCommunicator> communicator = oneRank(std::chrono::milliseconds(200));
  ASSERT_TRUE(communicator);
  // Between runs nothing is watched: a slow host (data loading, a
  // checkpoint) is not a hung peer.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  double value = 3;
  Status after = communicator->allReduce(&value, &value, 1, plan::F64, ReduceOp::kSum);
  EXPECT_TRUE(after.isOk()) << after.toString();
  EXPECT_EQ(value, 3);
}

} // namespace
} // namespace zcc
