//===- File.h - Whole-file reads and writes for the runtime -----*- C++ -*-===//
//
// Plans, .npy arrays and weight files are read through these so that every
// I/O failure becomes a Status naming the path and the operating system's
// reason, never an exception or a silently short buffer.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_SUPPORT_FILE_H
#define ZCC_RUNTIME_SUPPORT_FILE_H

#include "runtime/Support/Status.h"

#include <cstdint>
#include <string>

namespace zcc {

/// The whole content of `path`; kNotFound when it does not exist.
StatusOr<std::string> readFile(const std::string &path);

/// Writes `bytes` to `path` through a temporary file, fsync and a rename, so
/// a reader (or a crash) never sees half a file. An existing `path` must be a
/// regular file, or a symbolic link to one (whose file is replaced, the link
/// kept): a directory, device, pipe or dangling link is kInvalidArgument.
Status writeFile(const std::string &path, const std::string &bytes);

/// Reads exactly `length` bytes at `offset` of `path` into `destination`; an
/// error names the path and says how many bytes the file has when it is too
/// short.
Status readFileRange(const std::string &path, uint64_t offset, uint64_t length,
                     void *destination);

/// The size of `path` in bytes; kNotFound when it does not exist.
StatusOr<uint64_t> fileSize(const std::string &path);

/// "dir/name" unless `name` is absolute; `dir` may be empty.
std::string joinPath(const std::string &dir, const std::string &name);

/// The folder part of `path` ("a/b.onnx" -> "a", "b.onnx" -> "").
std::string parentPath(const std::string &path);

} // namespace zcc

#endif // ZCC_RUNTIME_SUPPORT_FILE_H
