//===- SwapFile.cpp - The rank's NVMe swap file ---------------------------===//

#include "runtime/Support/SwapFile.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace zcc {

StatusOr<std::unique_ptr<SwapFile>> SwapFile::create(const std::string &folder, uint64_t bytes) {
  struct stat info;
  if (folder.empty() || ::stat(folder.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    return Status(StatusCode::kNotFound,
                  "the NVMe swap folder '" + folder +
                      "' does not exist; create it, or give zrun --nvme-path a folder on an "
                      "NVMe drive (the config's offload_optimizer.nvme_path)");
  std::unique_ptr<SwapFile> file(new SwapFile());
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
  void *staging = nullptr;
  if (::posix_memalign(&staging, kBlock, kStaging) != 0)
    return Status(StatusCode::kResourceExhausted, "cannot allocate the swap file's staging block");
  file->staging_ = static_cast<uint8_t *>(staging);
  // Direct I/O where the file system has it (tmpfs has not).
  int flags = ::fcntl(file->fd_, F_GETFL);
  file->direct_ = flags >= 0 && ::fcntl(file->fd_, F_SETFL, flags | O_DIRECT) == 0;
  return StatusOr<std::unique_ptr<SwapFile>>(std::move(file));
}

SwapFile::~SwapFile() {
  if (fd_ >= 0)
    ::close(fd_);
  std::free(staging_);
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

Status SwapFile::read(uint64_t offset, void *destination, uint64_t bytes) {
  if (Status range = checkRange(offset, bytes); !range.isOk())
    return range;
  auto *out = static_cast<uint8_t *>(destination);
  for (uint64_t done = 0; done < bytes;) {
    uint64_t chunk = std::min(kStaging, bytes - done);
    uint64_t whole = (chunk + kBlock - 1) / kBlock * kBlock;
    for (uint64_t got = 0; got < whole;) {
      ssize_t n = ::pread(fd_, staging_ + got, whole - got, static_cast<off_t>(offset + done + got));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return failed("read", offset + done + got, n < 0 ? errno : 0);
      got += static_cast<uint64_t>(n);
    }
    std::memcpy(out + done, staging_, chunk);
    done += chunk;
  }
  return Status::ok();
}

Status SwapFile::write(uint64_t offset, const void *source, uint64_t bytes) {
  if (Status range = checkRange(offset, bytes); !range.isOk())
    return range;
  const auto *in = static_cast<const uint8_t *>(source);
  for (uint64_t done = 0; done < bytes;) {
    uint64_t chunk = std::min(kStaging, bytes - done);
    uint64_t whole = (chunk + kBlock - 1) / kBlock * kBlock;
    std::memcpy(staging_, in + done, chunk);
    std::memset(staging_ + chunk, 0, whole - chunk);
    for (uint64_t put = 0; put < whole;) {
      ssize_t n = ::pwrite(fd_, staging_ + put, whole - put, static_cast<off_t>(offset + done + put));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return failed("write", offset + done + put, n < 0 ? errno : 0);
      put += static_cast<uint64_t>(n);
    }
    done += chunk;
  }
  return Status::ok();
}

} // namespace zcc
