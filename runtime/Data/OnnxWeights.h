//===- OnnxWeights.h - Where an ONNX model's initializers lie ---*- C++ -*-===//
//
// The runtime reads weights as byte ranges of files and never parses ONNX
// with ONNX's own classes (it must build without ONNX). This walks the
// protobuf wire format of a ModelProto with protobuf's io classes only and
// says, for each initializer of the main graph, its type, shape and which
// bytes hold its little-endian data. The compiler uses it to record those
// ranges in a plan, zrun --weights MODEL.onnx to read weights by name.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_DATA_ONNXWEIGHTS_H
#define ZCC_RUNTIME_DATA_ONNXWEIGHTS_H

#include "runtime/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zcc {

/// ONNX TensorProto.DataType values this file needs by name.
enum OnnxDataType : int32_t {
  kOnnxUndefined = 0,
  kOnnxFloat = 1,
  kOnnxUint8 = 2,
  kOnnxInt8 = 3,
  kOnnxUint16 = 4,
  kOnnxInt16 = 5,
  kOnnxInt32 = 6,
  kOnnxInt64 = 7,
  kOnnxString = 8,
  kOnnxBool = 9,
  kOnnxFloat16 = 10,
  kOnnxDouble = 11,
  kOnnxUint32 = 12,
  kOnnxUint64 = 13,
  kOnnxBFloat16 = 16,
};

/// The bytes of one element of ONNX data type `dtype`; 0 for types without a
/// fixed size (strings, complex, unknown).
uint64_t onnxElementBytes(int32_t dtype);

/// Where one initializer's data is.
struct InitializerLocation {
  /// TensorProto.data_type (an OnnxDataType value).
  int32_t dtype = kOnnxUndefined;
  std::vector<int64_t> dims;
  /// The model's path as given when the data is inside it; otherwise the
  /// external-data location as written in the model, relative to the model's
  /// folder.
  std::string file;
  /// [offset, offset + length) of `file`. Inline data is raw_data or packed
  /// float_data; a tensor with neither (int64_data, ...) has length 0. An
  /// external tensor without a "length" entry gets its shape's byte count.
  uint64_t offset = 0;
  uint64_t length = 0;
  /// data_location is EXTERNAL.
  bool external = false;
};

using OnnxInitializers = std::map<std::string, InitializerLocation>;

/// The initializers of `onnxPath`'s main graph, by name (a later one of the
/// same name replaces an earlier one, as ONNX runtimes do). A file that is
/// not a well-formed protobuf message is an error naming the file.
StatusOr<OnnxInitializers> findOnnxInitializers(const std::string &onnxPath);

/// The same on the model's bytes already in memory; `onnxPath` names the
/// file in messages and in InitializerLocation::file.
StatusOr<OnnxInitializers> findOnnxInitializers(const std::string &onnxPath,
                                                const void *bytes,
                                                size_t size);

} // namespace zcc

#endif // ZCC_RUNTIME_DATA_ONNXWEIGHTS_H
