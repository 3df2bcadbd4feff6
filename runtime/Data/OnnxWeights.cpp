//===- OnnxWeights.cpp - Where an ONNX model's initializers lie -----------===//
//
// Field numbers (onnx.proto): ModelProto.graph = 7; GraphProto.initializer =
// 5; TensorProto dims = 1, data_type = 2, float_data = 4, name = 8,
// raw_data = 9, external_data = 13, data_location = 14;
// StringStringEntryProto key = 1, value = 2.
//
//===----------------------------------------------------------------------===//

#include "runtime/Data/OnnxWeights.h"

#include "runtime/Support/File.h"

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

namespace zcc {

using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

uint64_t onnxElementBytes(int32_t dtype) {
  switch (dtype) {
  case kOnnxUint8:
  case kOnnxInt8:
  case kOnnxBool:
    return 1;
  case kOnnxUint16:
  case kOnnxInt16:
  case kOnnxFloat16:
  case kOnnxBFloat16:
    return 2;
  case kOnnxFloat:
  case kOnnxInt32:
  case kOnnxUint32:
    return 4;
  case kOnnxInt64:
  case kOnnxDouble:
  case kOnnxUint64:
    return 8;
  default:
    return 0;
  }
}

namespace {

constexpr uint32_t kVarint = WireFormatLite::WIRETYPE_VARINT;
constexpr uint32_t kDelimited = WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
constexpr uint32_t kExternalLocation = 1; // TensorProto.EXTERNAL

constexpr uint32_t tagOf(uint32_t field, uint32_t wireType) {
  return (field << 3) | wireType;
}

/// Walks one model. Every read goes through one stream over the whole file,
/// with PushLimit for nested messages, so CurrentPosition() is a file offset.
class Walker {
public:
  Walker(const std::string &path, const uint8_t *data, int size)
      : path_(path), in_(data, size), size_(size) {
    // The default limit (64 MiB in older protobufs) would reject large
    // models that are still below protobuf's 2 GiB.
    in_.SetTotalBytesLimit(INT_MAX);
  }

  Status run(OnnxInitializers &found) {
    for (uint32_t tag; (tag = in_.ReadTag()) != 0;) {
      if (tag != tagOf(7, kDelimited)) {
        if (!WireFormatLite::SkipField(&in_, tag))
          return broken("a model field");
        continue;
      }
      CodedInputStream::Limit limit;
      if (!enter(limit))
        return broken("the graph");
      Status status = readGraph(found);
      if (!status.isOk())
        return status;
      in_.PopLimit(limit);
    }
    if (in_.CurrentPosition() != size_)
      return broken("a model field");
    return Status::ok();
  }

private:
  /// Reads a length prefix and limits the stream to that payload.
  bool enter(CodedInputStream::Limit &limit) {
    uint32_t length = 0;
    if (!in_.ReadVarint32(&length) || length > INT_MAX ||
        static_cast<int>(length) > size_ - in_.CurrentPosition())
      return false;
    limit = in_.PushLimit(static_cast<int>(length));
    return true;
  }

  /// True when the message just read ended exactly at its limit: ReadTag
  /// also returns 0 on a malformed tag, which must not pass for the end.
  bool atLimit() { return in_.BytesUntilLimit() == 0; }

  Status broken(const char *what) {
    return makeStatus(StatusCode::kDataLoss,
                      "'%s' is not a valid ONNX model: the protobuf encoding "
                      "of %s breaks at byte %d of %d (truncated or not ONNX?)",
                      path_.c_str(), what, in_.CurrentPosition(), size_);
  }

  /// A tensor's external_data entries, which count only when its
  /// data_location says EXTERNAL (it may come after them).
  struct External {
    std::string location;
    uint64_t offset = 0;
    uint64_t length = 0;
    bool hasLength = false;
  };

  Status readGraph(OnnxInitializers &found) {
    for (uint32_t tag; (tag = in_.ReadTag()) != 0;) {
      if (tag != tagOf(5, kDelimited)) {
        if (!WireFormatLite::SkipField(&in_, tag))
          return broken("a graph field");
        continue;
      }
      CodedInputStream::Limit limit;
      if (!enter(limit))
        return broken("an initializer");
      std::string name;
      InitializerLocation location;
      External external;
      Status status = readTensor(name, location, external);
      if (!status.isOk())
        return status;
      in_.PopLimit(limit);
      // Unnamed tensors cannot be asked for; the ONNX checker rejects them.
      if (name.empty())
        continue;
      if (location.external) {
        location.file = external.location;
        location.offset = external.offset;
        location.length = external.length;
        if (!external.hasLength) {
          // ONNX makes "length" optional: the data is then the whole
          // tensor.
          uint64_t elements = 1;
          for (int64_t dim : location.dims)
            elements *= static_cast<uint64_t>(dim < 0 ? 0 : dim);
          location.length = elements * onnxElementBytes(location.dtype);
        }
      } else {
        location.file = path_;
      }
      found[name] = std::move(location);
    }
    if (!atLimit())
      return broken("a graph field");
    return Status::ok();
  }

  Status readTensor(std::string &name, InitializerLocation &location,
                    External &external) {
    for (uint32_t tag; (tag = in_.ReadTag()) != 0;) {
      uint32_t field = WireFormatLite::GetTagFieldNumber(tag);
      uint32_t wireType = WireFormatLite::GetTagWireType(tag);
      bool ok = true;
      if (field == 8 && wireType == kDelimited) {
        ok = readString(name);
      } else if ((field == 9 || field == 4) && wireType == kDelimited) {
        // raw_data, or float_data packed: either way the payload is the
        // tensor's little-endian elements.
        uint32_t length = 0;
        ok = in_.ReadVarint32(&length);
        location.offset = static_cast<uint64_t>(in_.CurrentPosition());
        location.length = length;
        ok = ok && length <= INT_MAX && in_.Skip(static_cast<int>(length));
      } else if (field == 1 && wireType == kVarint) {
        uint64_t dim = 0;
        ok = in_.ReadVarint64(&dim);
        location.dims.push_back(static_cast<int64_t>(dim));
      } else if (field == 1 && wireType == kDelimited) {
        CodedInputStream::Limit limit;
        ok = enter(limit);
        for (uint64_t dim = 0; ok && in_.BytesUntilLimit() > 0;) {
          ok = in_.ReadVarint64(&dim);
          location.dims.push_back(static_cast<int64_t>(dim));
        }
        if (ok)
          in_.PopLimit(limit);
      } else if (field == 2 && wireType == kVarint) {
        uint32_t dtype = 0;
        ok = in_.ReadVarint32(&dtype);
        location.dtype = static_cast<int32_t>(dtype);
      } else if (field == 14 && wireType == kVarint) {
        uint32_t where = 0;
        ok = in_.ReadVarint32(&where);
        location.external = where == kExternalLocation;
      } else if (field == 13 && wireType == kDelimited) {
        CodedInputStream::Limit limit;
        if (!enter(limit))
          return broken("an initializer's external_data");
        Status status = readExternalEntry(name, external);
        if (!status.isOk())
          return status;
        in_.PopLimit(limit);
      } else {
        ok = WireFormatLite::SkipField(&in_, tag);
      }
      if (!ok)
        return broken(name.empty() ? "an initializer"
                                   : ("initializer '" + name + "'").c_str());
    }
    if (!atLimit())
      return broken("an initializer");
    return Status::ok();
  }

  /// One StringStringEntryProto of external_data: location, offset or
  /// length (others, like checksum, do not locate data).
  Status readExternalEntry(const std::string &tensor, External &external) {
    std::string key, value;
    for (uint32_t tag; (tag = in_.ReadTag()) != 0;) {
      bool ok;
      if (tag == tagOf(1, kDelimited))
        ok = readString(key);
      else if (tag == tagOf(2, kDelimited))
        ok = readString(value);
      else
        ok = WireFormatLite::SkipField(&in_, tag);
      if (!ok)
        return broken("an initializer's external_data");
    }
    if (!atLimit())
      return broken("an initializer's external_data");
    if (key == "location") {
      external.location = value;
      return Status::ok();
    }
    if (key != "offset" && key != "length")
      return Status::ok();
    // The tensor's name may come after its external_data: say so rather
    // than print an empty name.
    std::string which =
        tensor.empty() ? std::string("an initializer") : "initializer '" + tensor + "'";
    errno = 0;
    char *end = nullptr;
    unsigned long long number = std::strtoull(value.c_str(), &end, 10);
    if (value.empty() || value[0] == '-' || value[0] == '+' || errno != 0 ||
        *end != '\0')
      return makeStatus(StatusCode::kDataLoss,
                        "'%s': %s has external_data %s '%s', which is not a "
                        "non-negative integer; re-save the model with "
                        "onnx.save_model(..., save_as_external_data=True)",
                        path_.c_str(), which.c_str(), key.c_str(),
                        value.c_str());
    if (key == "offset") {
      external.offset = number;
    } else {
      external.length = number;
      external.hasLength = true;
    }
    return Status::ok();
  }

  bool readString(std::string &text) {
    uint32_t length = 0;
    return in_.ReadVarint32(&length) && length <= INT_MAX &&
           in_.ReadString(&text, static_cast<int>(length));
  }

  const std::string &path_;
  CodedInputStream in_;
  int size_;
};

} // namespace

StatusOr<OnnxInitializers> findOnnxInitializers(const std::string &onnxPath,
                                                const void *bytes,
                                                size_t size) {
  // CodedInputStream counts in int; protobuf cannot parse such a model
  // either, which is why ONNX has external data.
  if (size >= static_cast<size_t>(INT_MAX))
    return makeStatus(StatusCode::kInvalidArgument,
                      "'%s' is %llu MiB, above protobuf's 2 GiB limit for a "
                      "model; save it with external data "
                      "(onnx.save_model(..., save_as_external_data=True))",
                      onnxPath.c_str(),
                      static_cast<unsigned long long>(size >> 20));
  OnnxInitializers found;
  Walker walker(onnxPath, static_cast<const uint8_t *>(bytes),
                static_cast<int>(size));
  Status status = walker.run(found);
  if (!status.isOk())
    return status;
  return found;
}

StatusOr<OnnxInitializers> findOnnxInitializers(const std::string &onnxPath) {
  StatusOr<uint64_t> size = fileSize(onnxPath);
  if (size.isOk() && *size >= static_cast<uint64_t>(INT_MAX))
    return findOnnxInitializers(onnxPath, nullptr, static_cast<size_t>(*size));
  StatusOr<std::string> bytes = readFile(onnxPath);
  if (!bytes.isOk())
    return bytes.takeStatus();
  return findOnnxInitializers(onnxPath, bytes->data(), bytes->size());
}

} // namespace zcc
