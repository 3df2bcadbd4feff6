//===- SwapFile.h - The rank's NVMe swap file -------------------*- C++ -*-===//
//
// A plan that offloads its optimizer state to NVMe keeps it in one file per
// rank, created in the config's nvme_path when the plan is instantiated and
// unlinked right away, so that it goes when the process does, however it
// ends. Its blocks are allocated up front (a full drive fails then, not in
// the middle of a step) and read as zeros, the optimizer state's initial
// value. A read or write is cut into requests of the config's
// aio.block_size, up to aio.queue_depth of them in flight at once (on as
// many threads, each with an aligned staging block of its own), with
// direct I/O where the file system allows it (O_DIRECT), so the state
// moves between the drive and the host arena at the drive's bandwidth and
// without filling the page cache. The threads are made with the file, so
// a read or write allocates nothing.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_SUPPORT_SWAPFILE_H
#define ZCC_RUNTIME_SUPPORT_SWAPFILE_H

#include "runtime/Support/Status.h"
#include "runtime/Support/Thread.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zcc {

/// How a swap file's reads and writes are cut and issued (DeepSpeed's
/// `aio` section).
struct SwapRequests {
  /// Bytes a request moves, a multiple of SwapFile::kBlock
  /// (aio.block_size, default 1 MiB).
  uint64_t blockSize = uint64_t(1) << 20;
  /// Requests in flight at once (aio.queue_depth, default 8).
  int queueDepth = 8;
};

class SwapFile {
public:
  using Requests = SwapRequests;

  /// Creates a swap file of `bytes` (rounded up to whole blocks) in the
  /// folder `folder`, which must exist.
  static StatusOr<std::unique_ptr<SwapFile>> create(const std::string &folder, uint64_t bytes,
                                                    Requests requests = SwapRequests());

  ~SwapFile();
  SwapFile(const SwapFile &) = delete;
  SwapFile &operator=(const SwapFile &) = delete;

  /// Copies `bytes` at `offset` of the file into `destination` (from any
  /// thread; transfers take turns). `offset`
  /// is a multiple of the block size, and the file holds nothing but this
  /// buffer up to the next block boundary after it.
  Status read(uint64_t offset, void *destination, uint64_t bytes);
  /// Writes `bytes` of `source` at `offset` (as for read(); the rest of the
  /// last block is overwritten with zeros).
  Status write(uint64_t offset, const void *source, uint64_t bytes);

  /// Where the file was created (it is unlinked already).
  const std::string &path() const { return path_; }
  /// Whether reads and writes bypass the page cache.
  bool direct() const { return direct_; }

  static constexpr uint64_t kBlock = 4096;

private:
  SwapFile() = default;
  Status failed(const char *action, uint64_t offset, int error) const;
  Status checkRange(uint64_t offset, uint64_t bytes) const;
  /// Runs request k of [offset, offset + bytes) through staging block
  /// `staging` (a read into `memory`, or a write from it).
  Status request(bool write, uint64_t offset, uint8_t *memory, uint64_t bytes, uint64_t k,
                 uint8_t *staging);
  /// Every request of a read or write, up to queueDepth at once.
  Status transfer(bool write, uint64_t offset, uint8_t *memory, uint64_t bytes);
  /// Takes requests of the current job until none is left.
  Status drain(int worker);
  void work(int worker);

  int fd_ = -1;
  std::string path_;
  uint64_t bytes_ = 0;
  bool direct_ = false;
  Requests requests_;
  /// One aligned staging block of requests_.blockSize per request in
  /// flight.
  std::vector<uint8_t *> staging_;
  /// queueDepth - 1 threads that take requests beside the caller's.
  std::vector<Thread> workers_;
  /// One transfer at a time: reads and writes come from the rank's thread
  /// and from its copy stream's host calls.
  std::mutex transferMutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  /// The job the workers run: a generation they wait for, the transfer,
  /// the next request to take, the workers still at it, its first error.
  uint64_t generation_ = 0;
  bool stopping_ = false;
  bool jobWrite_ = false;
  uint64_t jobOffset_ = 0, jobBytes_ = 0, jobCount_ = 0;
  uint8_t *jobMemory_ = nullptr;
  std::atomic<uint64_t> next_{0};
  size_t busy_ = 0;
  Status firstError_ = Status::ok();
};

} // namespace zcc

#endif // ZCC_RUNTIME_SUPPORT_SWAPFILE_H
