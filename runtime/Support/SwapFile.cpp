//===- SwapFile.cpp - The rank's NVMe swap file ---------------------------===//

#include "runtime/Support/SwapFile.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace zcc {

StatusOr<std::unique_ptr<SwapFile>> SwapFile::create(const std::string &folder, uint64_t bytes,
                                                     Requests requests) {
  if (requests.blockSize == 0 || requests.blockSize % kBlock != 0 || requests.queueDepth < 1 ||
      requests.queueDepth > 256)
    return makeStatus(StatusCode::kInvalidArgument,
                      "aio.block_size %llu and aio.queue_depth %d: the block size must be a "
                      "positive multiple of %llu bytes and the queue depth 1 to 256",
                      static_cast<unsigned long long>(requests.blockSize), requests.queueDepth,
                      static_cast<unsigned long long>(kBlock));
  struct stat info;
  if (folder.empty() || ::stat(folder.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    return Status(StatusCode::kNotFound,
                  "the NVMe swap folder '" + folder +
                      "' does not exist; create it, or give zrun --nvme-path a folder on an "
                      "NVMe drive (the config's offload_optimizer or offload_param nvme_path)");
  // Rounding up near 2^64 would wrap to a small file, and off_t is signed.
  if (bytes > static_cast<uint64_t>(INT64_MAX) - kBlock)
    return makeStatus(StatusCode::kInvalidArgument,
                      "a swap file of %llu bytes is larger than any file can be; the plan's "
                      "nvme_bytes is corrupt: recompile the plan",
                      static_cast<unsigned long long>(bytes));
  std::unique_ptr<SwapFile> file(new SwapFile());
  file->requests_ = requests;
  std::string pattern = folder + (folder.back() == '/' ? "" : "/") + "zcc-swap-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  file->fd_ = ::mkstemp(name.data());
  if (file->fd_ < 0)
    return makeStatus(StatusCode::kFailedPrecondition, "cannot create a swap file in '%s': %s",
                      folder.c_str(), std::strerror(errno));
  file->path_ = name.data();
  // Gone with the process, however it ends.
  ::unlink(file->path_.c_str());
  file->bytes_ = (bytes + kBlock - 1) / kBlock * kBlock;
  if (file->bytes_ > 0) {
    int error = ::posix_fallocate(file->fd_, 0, static_cast<off_t>(file->bytes_));
    if (error == EOPNOTSUPP || error == EINVAL)
      error = ::ftruncate(file->fd_, static_cast<off_t>(file->bytes_)) == 0 ? 0 : errno;
    if (error != 0)
      return makeStatus(error == ENOSPC ? StatusCode::kResourceExhausted : StatusCode::kInternal,
                        "cannot allocate the %llu-byte swap file in '%s': %s",
                        static_cast<unsigned long long>(file->bytes_), folder.c_str(),
                        std::strerror(error));
  }
  for (int k = 0; k < requests.queueDepth; ++k) {
    void *staging = nullptr;
    if (::posix_memalign(&staging, kBlock, requests.blockSize) != 0)
      return Status(StatusCode::kResourceExhausted,
                    "cannot allocate the swap file's staging blocks");
    file->staging_.push_back(static_cast<uint8_t *>(staging));
  }
  for (int worker = 1; worker < requests.queueDepth; ++worker) {
    StatusOr<Thread> thread = Thread::start(
        [raw = file.get(), worker] { raw->work(worker); },
        formatString("swap file thread %d of %d", worker, requests.queueDepth - 1),
        "lower the config's aio.queue_depth or raise the process's limits (ulimit -u / -v)");
    // The destructor stops and joins the threads started so far.
    if (!thread.isOk())
      return thread.takeStatus();
    file->workers_.push_back(std::move(*thread));
  }
  // Direct I/O where the file system has it (tmpfs has not).
  int flags = ::fcntl(file->fd_, F_GETFL);
  file->direct_ = flags >= 0 && ::fcntl(file->fd_, F_SETFL, flags | O_DIRECT) == 0;
  return StatusOr<std::unique_ptr<SwapFile>>(std::move(file));
}

SwapFile::~SwapFile() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (Thread &worker : workers_)
    worker.join();
  if (fd_ >= 0)
    ::close(fd_);
  for (uint8_t *staging : staging_)
    std::free(staging);
}

Status SwapFile::failed(const char *action, uint64_t offset, int error) const {
  return makeStatus(StatusCode::kInternal, "cannot %s the swap file '%s' at byte %llu: %s",
                    action, path_.c_str(), static_cast<unsigned long long>(offset),
                    error ? std::strerror(error) : "the file ended early");
}

Status SwapFile::checkRange(uint64_t offset, uint64_t bytes) const {
  if (offset % kBlock != 0 || offset > bytes_ || bytes > bytes_ - offset)
    return makeStatus(StatusCode::kOutOfRange,
                      "bytes [%llu, %llu) are not a block-aligned range of the %llu-byte swap "
                      "file",
                      static_cast<unsigned long long>(offset),
                      static_cast<unsigned long long>(offset + bytes),
                      static_cast<unsigned long long>(bytes_));
  return Status::ok();
}

Status SwapFile::request(bool write, uint64_t offset, uint8_t *memory, uint64_t bytes,
                         uint64_t k, uint8_t *staging) {
  uint64_t start = k * requests_.blockSize;
  uint64_t chunk = std::min(requests_.blockSize, bytes - start);
  // Whole blocks: the file holds nothing else up to the next boundary.
  uint64_t whole = (chunk + kBlock - 1) / kBlock * kBlock;
  off_t at = static_cast<off_t>(offset + start);
  if (write) {
    std::memcpy(staging, memory + start, chunk);
    std::memset(staging + chunk, 0, whole - chunk);
  }
  for (uint64_t done = 0; done < whole;) {
    ssize_t n = write ? ::pwrite(fd_, staging + done, whole - done, at + static_cast<off_t>(done))
                      : ::pread(fd_, staging + done, whole - done, at + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return failed(write ? "write" : "read", offset + start + done, n < 0 ? errno : 0);
    done += static_cast<uint64_t>(n);
  }
  if (!write)
    std::memcpy(memory + start, staging, chunk);
  return Status::ok();
}

Status SwapFile::drain(int worker) {
  Status first = Status::ok();
  for (uint64_t k = next_++; k < jobCount_; k = next_++) {
    Status status = request(jobWrite_, jobOffset_, jobMemory_, jobBytes_, k, staging_[worker]);
    if (!status.isOk() && first.isOk()) {
      first = std::move(status);
      next_ = jobCount_;
    }
  }
  return first;
}

void SwapFile::work(int worker) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_)
      return;
    seen = generation_;
    lock.unlock();
    Status status = drain(worker);
    lock.lock();
    if (!status.isOk() && firstError_.isOk())
      firstError_ = std::move(status);
    if (--busy_ == 0)
      done_.notify_one();
  }
}

Status SwapFile::transfer(bool write, uint64_t offset, uint8_t *memory, uint64_t bytes) {
  if (Status range = checkRange(offset, bytes); !range.isOk())
    return range;
  std::lock_guard<std::mutex> turn(transferMutex_);
  uint64_t count = (bytes + requests_.blockSize - 1) / requests_.blockSize;
  bool helped = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobWrite_ = write;
    jobOffset_ = offset;
    jobMemory_ = memory;
    jobBytes_ = bytes;
    jobCount_ = count;
    next_ = 0;
    firstError_ = Status::ok();
    // One request needs no help.
    busy_ = count > 1 ? workers_.size() : 0;
    helped = busy_ > 0;
    if (helped)
      ++generation_;
  }
  if (helped)
    wake_.notify_all();
  Status mine = drain(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return busy_ == 0; });
  return mine.isOk() ? firstError_ : mine;
}

Status SwapFile::read(uint64_t offset, void *destination, uint64_t bytes) {
  return transfer(false, offset, static_cast<uint8_t *>(destination), bytes);
}

Status SwapFile::write(uint64_t offset, const void *source, uint64_t bytes) {
  return transfer(true, offset, const_cast<uint8_t *>(static_cast<const uint8_t *>(source)),
                  bytes);
}

} // namespace zcc
