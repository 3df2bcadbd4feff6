//===- File.cpp - Whole-file reads and writes for the runtime -------------===//

#include "runtime/Support/File.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace zcc {

static Status ioError(const char *action, const std::string &path, int error) {
  StatusCode code =
      error == ENOENT ? StatusCode::kNotFound : StatusCode::kUnavailable;
  return makeStatus(code, "cannot %s '%s': %s", action, path.c_str(),
                    std::strerror(error));
}

namespace {
/// Closes the descriptor on every return path.
class FileDescriptor {
public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  FileDescriptor(const FileDescriptor &) = delete;
  FileDescriptor &operator=(const FileDescriptor &) = delete;
  int get() const { return fd_; }
  /// Closes now, so that a failing close (a full disk on NFS) is reported.
  int release() {
    int result = ::close(fd_);
    fd_ = -1;
    return result;
  }

private:
  int fd_;
};
} // namespace

/// Reads until `length` bytes arrived or the file ended; returns how many.
static StatusOr<uint64_t> readFully(int fd, const std::string &path,
                                    uint64_t offset, uint64_t length,
                                    char *destination) {
  uint64_t done = 0;
  while (done < length) {
    // pread takes at most SSIZE_MAX per call; 1 GiB keeps every call small.
    size_t chunk =
        static_cast<size_t>(std::min<uint64_t>(length - done, 1u << 30));
    ssize_t got = ::pread(fd, destination + done, chunk,
                          static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR)
        continue;
      return ioError("read", path, errno);
    }
    if (got == 0)
      break;
    done += static_cast<uint64_t>(got);
  }
  return done;
}

/// A folder, or a file whose size stat does not give (a pipe, a device): the
/// size of a pipe or of /dev/zero is 0, which would read as an empty file.
static Status notAFile(const std::string &path, mode_t mode) {
  if (S_ISDIR(mode))
    return makeStatus(StatusCode::kInvalidArgument,
                      "'%s' is a folder, not a file", path.c_str());
  const char *kind = S_ISFIFO(mode)   ? "pipe"
                     : S_ISCHR(mode)  ? "character device"
                     : S_ISBLK(mode)  ? "block device"
                     : S_ISSOCK(mode) ? "socket"
                                      : "special file";
  return makeStatus(StatusCode::kInvalidArgument,
                    "'%s' is a %s, not a regular file; save its content to a file "
                    "and pass that",
                    path.c_str(), kind);
}

StatusOr<uint64_t> fileSize(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0)
    return ioError("open", path, errno);
  if (!S_ISREG(info.st_mode))
    return notAFile(path, info.st_mode);
  return static_cast<uint64_t>(info.st_size);
}

/// A pipe's bytes up to its end (`zrun <(cat a.plan)`, /dev/stdin fed by a
/// pipe). A named pipe nothing writes to ends at once: it was opened
/// without blocking, so that it does not wait for a writer forever.
static StatusOr<std::string> readPipe(int fd, const std::string &path) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    return ioError("read", path, errno);
  std::string bytes;
  char chunk[1 << 16];
  for (;;) {
    ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0) {
      if (errno == EINTR)
        continue;
      return ioError("read", path, errno);
    }
    if (got == 0)
      break;
    bytes.append(chunk, static_cast<size_t>(got));
  }
  if (bytes.empty())
    return makeStatus(StatusCode::kInvalidArgument,
                      "'%s' is a pipe and nothing was written to it; pass a file, or a "
                      "pipe that a program writes into",
                      path.c_str());
  return bytes;
}

StatusOr<std::string> readFile(const std::string &path) {
  // O_NONBLOCK: opening a named pipe without a writer would wait forever.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0)
    return ioError("open", path, errno);
  struct stat info;
  if (::fstat(fd.get(), &info) != 0)
    return ioError("open", path, errno);
  if (S_ISFIFO(info.st_mode))
    return readPipe(fd.get(), path);
  if (!S_ISREG(info.st_mode))
    return notAFile(path, info.st_mode);
  uint64_t size = static_cast<uint64_t>(info.st_size);
  std::string bytes(size, '\0');
  StatusOr<uint64_t> got = readFully(fd.get(), path, 0, size, bytes.data());
  if (!got.isOk())
    return got.takeStatus();
  // A file that shrank between stat and read is short, not padded with zeros.
  bytes.resize(*got);
  return bytes;
}

Status readFileRange(const std::string &path, uint64_t offset, uint64_t length,
                     void *destination) {
  StatusOr<uint64_t> size = fileSize(path);
  if (!size.isOk())
    return size.takeStatus();
  if (offset > *size || length > *size - offset)
    return makeStatus(StatusCode::kOutOfRange,
                      "'%s' has %llu bytes, too few for bytes [%llu, %llu)",
                      path.c_str(), static_cast<unsigned long long>(*size),
                      static_cast<unsigned long long>(offset),
                      static_cast<unsigned long long>(offset + length));
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0)
    return ioError("open", path, errno);
  StatusOr<uint64_t> got = readFully(fd.get(), path, offset, length,
                                     static_cast<char *>(destination));
  if (!got.isOk())
    return got.takeStatus();
  if (*got != length)
    return makeStatus(StatusCode::kOutOfRange,
                      "'%s' ended after %llu of the %llu bytes at offset %llu",
                      path.c_str(), static_cast<unsigned long long>(*got),
                      static_cast<unsigned long long>(length),
                      static_cast<unsigned long long>(offset));
  return Status::ok();
}

namespace {
/// What a file that is not a regular one is, for messages.
const char *fileKind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  if (S_ISFIFO(mode))
    return "a pipe";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}
} // namespace

Status writeFile(const std::string &path, const std::string &bytes) {
  // The bytes go to a temporary file renamed over the destination, and a
  // rename replaces whatever is there: only a regular file may be (zcc -o
  // /dev/full, run as root, left a regular file in place of the device). A
  // symbolic link to a regular file is followed: the file it names gets the
  // bytes, and the link stays.
  std::string destination = path;
  struct stat link;
  if (::lstat(path.c_str(), &link) == 0) {
    struct stat file = link;
    if (S_ISLNK(link.st_mode)) {
      if (::stat(path.c_str(), &file) != 0)
        return makeStatus(StatusCode::kInvalidArgument,
                          "cannot write '%s': it is a symbolic link to a file that does not "
                          "exist; give the path of a new or regular file",
                          path.c_str());
      char *resolved = ::realpath(path.c_str(), nullptr);
      if (!resolved)
        return ioError("resolve", path, errno);
      destination = resolved;
      std::free(resolved);
    }
    if (!S_ISREG(file.st_mode))
      return makeStatus(StatusCode::kInvalidArgument,
                        "cannot write '%s': it is %s, not a regular file; give the path of a "
                        "new or regular file",
                        path.c_str(), fileKind(file.st_mode));
  }
  std::string temporary = destination + ".tmp." + std::to_string(::getpid());
  FileDescriptor fd(::open(temporary.c_str(),
                           O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0)
    return ioError("create", temporary, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t wrote = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (wrote < 0) {
      if (errno == EINTR)
        continue;
      int error = errno;
      ::unlink(temporary.c_str());
      return ioError("write", temporary, error);
    }
    done += static_cast<size_t>(wrote);
  }
  // On disk before the rename makes it visible: a crash leaves either the
  // old file or the whole new one.
  if (::fsync(fd.get()) != 0) {
    int error = errno;
    ::unlink(temporary.c_str());
    return ioError("write", temporary, error);
  }
  if (fd.release() != 0) {
    int error = errno;
    ::unlink(temporary.c_str());
    return ioError("write", temporary, error);
  }
  if (::rename(temporary.c_str(), destination.c_str()) != 0) {
    int error = errno;
    ::unlink(temporary.c_str());
    return ioError("write", destination, error);
  }
  return Status::ok();
}

std::string joinPath(const std::string &dir, const std::string &name) {
  if (dir.empty() || (!name.empty() && name[0] == '/'))
    return name;
  if (dir.back() == '/')
    return dir + name;
  return dir + "/" + name;
}

std::string parentPath(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return std::string();
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

} // namespace zcc
