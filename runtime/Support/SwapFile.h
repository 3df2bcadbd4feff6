//===- SwapFile.h - The rank's NVMe swap file -------------------*- C++ -*-===//
//
// A plan that offloads its optimizer state to NVMe keeps it in one file per
// rank, created in the config's nvme_path when the plan is instantiated and
// unlinked right away, so that it goes when the process does, however it
// ends. Its blocks are allocated up front (a full drive fails then, not in
// the middle of a step) and read as zeros, the optimizer state's initial
// value. Reads and writes go through an aligned staging block with direct
// I/O where the file system allows it (O_DIRECT), so the state moves
// between the drive and the host arena without filling the page cache.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_SUPPORT_SWAPFILE_H
#define ZCC_RUNTIME_SUPPORT_SWAPFILE_H

#include "runtime/Support/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace zcc {

class SwapFile {
public:
  /// Creates a swap file of `bytes` (rounded up to whole blocks) in the
  /// folder `folder`, which must exist.
  static StatusOr<std::unique_ptr<SwapFile>> create(const std::string &folder, uint64_t bytes);

  ~SwapFile();
  SwapFile(const SwapFile &) = delete;
  SwapFile &operator=(const SwapFile &) = delete;

  /// Copies `bytes` at `offset` of the file into `destination`. `offset`
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

  int fd_ = -1;
  std::string path_;
  uint64_t bytes_ = 0;
  bool direct_ = false;
  /// The aligned staging block, kStaging bytes.
  uint8_t *staging_ = nullptr;
  static constexpr uint64_t kStaging = uint64_t(8) << 20;
};

} // namespace zcc

#endif // ZCC_RUNTIME_SUPPORT_SWAPFILE_H
