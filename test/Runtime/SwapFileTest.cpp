//===- SwapFileTest.cpp - The NVMe swap file --------------------------------===//

#include "runtime/Support/SwapFile.h"
#include "test/Runtime/PlanTestUtil.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <random>

namespace zcc {
namespace {

using test::TempDir;

std::vector<uint8_t> randomBytes(size_t count, unsigned seed) {
  std::mt19937 engine(seed);
  std::vector<uint8_t> bytes(count);
  for (uint8_t &byte : bytes)
    byte = static_cast<uint8_t>(engine());
  return bytes;
}

std::unique_ptr<SwapFile> create(const TempDir &dir, uint64_t bytes, SwapFile::Requests requests) {
  StatusOr<std::unique_ptr<SwapFile>> file = SwapFile::create(dir.path(), bytes, requests);
  EXPECT_TRUE(file.isOk()) << file.status().message();
  return file.isOk() ? std::move(*file) : nullptr;
}

// A read returns what the last write at its offset wrote, for ranges that
// end inside a block and span many requests, whether the requests run one
// at a time or several at once; a neighbour's write (the rest of its last
// block is padding) leaves it alone; a new file reads as zeros.
TEST(SwapFile, ReadsWhatWasWritten) {
  for (int depth : {1, 4}) {
    TempDir dir;
    SwapFile::Requests requests;
    requests.blockSize = 2 * SwapFile::kBlock;
    requests.queueDepth = depth;
    std::unique_ptr<SwapFile> file = create(dir, 20 * SwapFile::kBlock, requests);
    ASSERT_TRUE(file);
    std::vector<uint8_t> zeros(5000, 1);
    ASSERT_TRUE(file->read(0, zeros.data(), zeros.size()).isOk());
    EXPECT_EQ(zeros, std::vector<uint8_t>(5000, 0));

    std::vector<uint8_t> state = randomBytes(10 * SwapFile::kBlock + 123, 1);
    std::vector<uint8_t> neighbour = randomBytes(SwapFile::kBlock - 7, 2);
    ASSERT_TRUE(file->write(SwapFile::kBlock, state.data(), state.size()).isOk());
    ASSERT_TRUE(file->write(0, neighbour.data(), neighbour.size()).isOk());
    ASSERT_TRUE(file->write(12 * SwapFile::kBlock, neighbour.data(), neighbour.size()).isOk());
    std::vector<uint8_t> back(state.size());
    ASSERT_TRUE(file->read(SwapFile::kBlock, back.data(), back.size()).isOk());
    EXPECT_EQ(back, state) << "queue depth " << depth;
    std::vector<uint8_t> small(neighbour.size());
    ASSERT_TRUE(file->read(12 * SwapFile::kBlock, small.data(), small.size()).isOk());
    EXPECT_EQ(small, neighbour);
  }
}

// The file is unlinked as soon as it exists: nothing is left behind, even
// by a process that dies.
TEST(SwapFile, LeavesNothingInTheFolder) {
  TempDir dir;
  std::unique_ptr<SwapFile> file = create(dir, 1 << 20, SwapFile::Requests());
  ASSERT_TRUE(file);
  EXPECT_EQ(file->path().rfind(dir.path() + "/zcc-swap-", 0), 0u) << file->path();
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(SwapFile, Errors) {
  TempDir dir;
  StatusOr<std::unique_ptr<SwapFile>> missing =
      SwapFile::create(dir.file("missing"), 4096, SwapFile::Requests());
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "the NVMe swap folder '" + dir.file("missing") +
                "' does not exist; create it, or give zrun --nvme-path a folder on an NVMe "
                "drive (the config's offload_optimizer or offload_param nvme_path)");

  SwapFile::Requests odd;
  odd.blockSize = 1000;
  StatusOr<std::unique_ptr<SwapFile>> badBlock = SwapFile::create(dir.path(), 4096, odd);
  ASSERT_FALSE(badBlock.isOk());
  EXPECT_EQ(badBlock.status().message(),
            "aio.block_size 1000 and aio.queue_depth 8: the block size must be a positive "
            "multiple of 4096 bytes and the queue depth 1 to 256");

  // A corrupt nvme_bytes near 2^64 once wrapped, rounded up, to a tiny file.
  StatusOr<std::unique_ptr<SwapFile>> huge =
      SwapFile::create(dir.path(), UINT64_MAX - 1, SwapFile::Requests());
  ASSERT_FALSE(huge.isOk());
  EXPECT_EQ(huge.status().message(),
            "a swap file of 18446744073709551614 bytes is larger than any file can be; the "
            "plan's nvme_bytes is corrupt: recompile the plan");

  std::unique_ptr<SwapFile> file = create(dir, 8192, SwapFile::Requests());
  ASSERT_TRUE(file);
  std::vector<uint8_t> bytes(100);
  Status unaligned = file->read(100, bytes.data(), bytes.size());
  EXPECT_EQ(unaligned.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(unaligned.message(),
            "bytes [100, 200) are not a block-aligned range of the 8192-byte swap file");
  EXPECT_EQ(file->write(8192, bytes.data(), bytes.size()).code(), StatusCode::kOutOfRange);
}

} // namespace
} // namespace zcc
