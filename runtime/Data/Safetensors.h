//===- Safetensors.h - The index of a .safetensors file ---------*- C++ -*-===//
//
// zrun --weights FILE.safetensors reads parameters by name from the format
// Hugging Face uses to share weights: an 8-byte little-endian header size, a
// JSON header {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {...}}, then the data, offsets counted from the header's
// end. This reads and checks the header; the data stays in the file.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_DATA_SAFETENSORS_H
#define ZCC_RUNTIME_DATA_SAFETENSORS_H

#include "plan.pb.h"
#include "runtime/Support/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zcc {

/// The largest header accepted: a sanity bound against a corrupt size field
/// (the safetensors library uses the same 100 MB).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsTensor {
  /// As written ("F32", "BF16", ...).
  std::string dtype;
  std::vector<int64_t> shape;
  /// Byte range in the file, counted from its start (not the header's end).
  uint64_t offset = 0;
  uint64_t length = 0;
};

using SafetensorsIndex = std::map<std::string, SafetensorsTensor>;

/// Whether this build can read safetensors (it needs nlohmann-json).
bool haveSafetensorsSupport();

/// The tensors of `path` by name, every one checked: dtype a string, shape
/// non-negative integers, data_offsets an ordered pair within the file.
StatusOr<SafetensorsIndex> readSafetensorsIndex(const std::string &path);

/// The plan dtype of a safetensors dtype name; DTYPE_UNSPECIFIED for names
/// the runtime has no buffers of (U16, F8_E4M3, ...).
plan::DType safetensorsDType(const std::string &name);

} // namespace zcc

#endif // ZCC_RUNTIME_DATA_SAFETENSORS_H
