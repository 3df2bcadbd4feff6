//===- Safetensors.cpp - The index of a .safetensors file -----------------===//

#include "runtime/Data/Safetensors.h"

#include "runtime/Support/File.h"

#include <cstdint>

#ifdef ZCC_HAVE_NLOHMANN_JSON
#include <nlohmann/json.hpp>
#endif

namespace zcc {

plan::DType safetensorsDType(const std::string &name) {
  static const std::pair<const char *, plan::DType> kTypes[] = {
      {"F32", plan::F32}, {"F16", plan::F16}, {"BF16", plan::BF16},
      {"F64", plan::F64}, {"I64", plan::I64}, {"I32", plan::I32},
      {"I8", plan::I8},   {"BOOL", plan::BOOL}};
  for (const auto &[text, dtype] : kTypes)
    if (name == text)
      return dtype;
  return plan::DTYPE_UNSPECIFIED;
}

#ifndef ZCC_HAVE_NLOHMANN_JSON

bool haveSafetensorsSupport() { return false; }

StatusOr<SafetensorsIndex> readSafetensorsIndex(const std::string &path) {
  return Status(StatusCode::kUnimplemented,
                "cannot read '" + path +
                    "': this zrun was built without nlohmann-json; "
                    "safetensors weights are not available (install "
                    "nlohmann-json3-dev and rebuild, or pass the ONNX model "
                    "with --weights MODEL.onnx)");
}

#else

bool haveSafetensorsSupport() { return true; }

namespace {
using Json = nlohmann::json;

Status malformed(const std::string &path, const std::string &problem) {
  return Status(StatusCode::kDataLoss,
                "'" + path + "' is not a valid safetensors file: " + problem +
                    " (truncated, or written by something else? save it with "
                    "safetensors.torch.save_file)");
}

/// A non-negative integer; nlohmann reads unsigned literals as unsigned and
/// keeps signed ones for negative values.
bool readCount(const Json &value, uint64_t &count) {
  if (value.is_number_unsigned()) {
    count = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    count = static_cast<uint64_t>(value.get<int64_t>());
    return true;
  }
  return false;
}

Status readEntry(const std::string &path, const std::string &name,
                 const Json &entry, uint64_t dataStart, uint64_t fileBytes,
                 SafetensorsTensor &tensor) {
  std::string which = "tensor '" + name + "'";
  if (!entry.is_object())
    return malformed(path, which + " is not a JSON object");
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string())
    return malformed(path, which + " has no string \"dtype\"");
  tensor.dtype = dtype->get<std::string>();
  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array())
    return malformed(path, which + " has no array \"shape\"");
  for (const Json &dim : *shape) {
    uint64_t value = 0;
    if (!readCount(dim, value) || value > static_cast<uint64_t>(INT64_MAX))
      return malformed(path, which + " has a shape entry that is not a "
                                     "non-negative integer");
    tensor.shape.push_back(static_cast<int64_t>(value));
  }
  auto offsets = entry.find("data_offsets");
  uint64_t begin = 0, end = 0;
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !readCount((*offsets)[0], begin) || !readCount((*offsets)[1], end) ||
      begin > end)
    return malformed(path, which + " needs \"data_offsets\": [begin, end] "
                                   "with 0 <= begin <= end");
  if (end > fileBytes - dataStart)
    return malformed(
        path, which +
                  formatString(" has data_offsets [%llu, %llu), beyond the "
                               "%llu bytes of data in the file",
                               static_cast<unsigned long long>(begin),
                               static_cast<unsigned long long>(end),
                               static_cast<unsigned long long>(fileBytes -
                                                               dataStart)));
  tensor.offset = dataStart + begin;
  tensor.length = end - begin;
  return Status::ok();
}
} // namespace

StatusOr<SafetensorsIndex> readSafetensorsIndex(const std::string &path) {
  StatusOr<uint64_t> fileBytes = fileSize(path);
  if (!fileBytes.isOk())
    return fileBytes.takeStatus();
  if (*fileBytes < 8)
    return malformed(path, formatString("it has %llu bytes, fewer than the "
                                        "8 of the header size",
                                        static_cast<unsigned long long>(
                                            *fileBytes)));
  unsigned char sizeBytes[8];
  Status status = readFileRange(path, 0, 8, sizeBytes);
  if (!status.isOk())
    return status;
  // Little-endian whatever the host's order.
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | sizeBytes[i];
  bool tooLarge = headerBytes > kMaxSafetensorsHeaderBytes;
  if (tooLarge || headerBytes > *fileBytes - 8)
    return malformed(
        path, formatString("its header size is %llu bytes, above the %llu "
                           "bytes that %s",
                           static_cast<unsigned long long>(headerBytes),
                           static_cast<unsigned long long>(
                               tooLarge ? kMaxSafetensorsHeaderBytes
                                        : *fileBytes - 8),
                           tooLarge ? "zrun accepts"
                                    : "follow it in the file"));
  std::string header(static_cast<size_t>(headerBytes), '\0');
  status = readFileRange(path, 8, headerBytes, header.data());
  if (!status.isOk())
    return status;
  // The runtime builds without exceptions: nlohmann must report through a
  // discarded value, and every get<>() below follows a type check.
  Json json = Json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object())
    return malformed(path, "its header is not a JSON object");
  SafetensorsIndex index;
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() == "__metadata__")
      continue;
    SafetensorsTensor tensor;
    status = readEntry(path, it.key(), it.value(), 8 + headerBytes,
                       *fileBytes, tensor);
    if (!status.isOk())
      return status;
    index.emplace(it.key(), std::move(tensor));
  }
  return index;
}

#endif // ZCC_HAVE_NLOHMANN_JSON

} // namespace zcc
