//===- Literal.cpp - Compile-time tensors for shape folding ---------------===//

#include "compiler/Import/Onnx/ImporterContext.h"

#include "mlir/Dialect/Traits.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <cstring>

using namespace mlir;

namespace zcc::onnx_import {

int64_t saturateToInt64(double value) {
  if (std::isnan(value))
    return 0;
  // 2^63 is exact as a double; INT64_MAX is not.
  if (value >= 9223372036854775808.0)
    return INT64_MAX;
  if (value <= -9223372036854775808.0)
    return INT64_MIN;
  return int64_t(value);
}

std::optional<int64_t> truncateToInteger(double value, unsigned width) {
  if (std::isnan(value))
    return std::nullopt;
  // Bounds as doubles first: the conversion to int64 below must be in range.
  double truncated = std::trunc(value);
  if (truncated < -9223372036854775808.0 || truncated >= 9223372036854775808.0)
    return std::nullopt;
  int64_t integer = int64_t(truncated);
  if (!fitsInteger(integer, width))
    return std::nullopt;
  return integer;
}

bool fitsInteger(int64_t value, unsigned width) {
  if (width >= 64)
    return true;
  if (width == 1)
    return value == 0 || value == 1;
  int64_t lowest = -(int64_t(1) << (width - 1));
  int64_t highest = width == 8 ? 255 : (int64_t(1) << (width - 1)) - 1;
  return value >= lowest && value <= highest;
}

Literal Literal::ofInts(RankedTensorType type, std::vector<int64_t> values) {
  Literal literal;
  literal.type = type;
  literal.ints = std::move(values);
  return literal;
}

Literal Literal::ofFloats(RankedTensorType type, std::vector<double> values) {
  Literal literal;
  literal.type = type;
  literal.floats = std::move(values);
  return literal;
}

namespace {
double toDouble(const APFloat &value) {
  APFloat copy = value;
  bool losesInfo = false;
  copy.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &losesInfo);
  return copy.convertToDouble();
}

APFloat fromDouble(double value, FloatType type) {
  APFloat result(value);
  bool losesInfo = false;
  result.convert(type.getFloatSemantics(), APFloat::rmNearestTiesToEven, &losesInfo);
  return result;
}
} // namespace

std::optional<Literal> Literal::fromAttr(DenseElementsAttr attr) {
  auto type = dyn_cast<RankedTensorType>(attr.getType());
  if (!type)
    return std::nullopt;
  if (isa<FloatType>(type.getElementType())) {
    std::vector<double> values;
    for (const APFloat &value : attr.getValues<APFloat>())
      values.push_back(toDouble(value));
    return ofFloats(type, std::move(values));
  }
  std::vector<int64_t> values;
  bool isBool = type.getElementType().isInteger(1);
  for (const APInt &value : attr.getValues<APInt>())
    values.push_back(isBool ? int64_t(!value.isZero()) : value.getSExtValue());
  return ofInts(type, std::move(values));
}

DenseElementsAttr Literal::toAttr() const {
  Type element = type.getElementType();
  if (auto floatType = dyn_cast<FloatType>(element)) {
    SmallVector<APFloat> values;
    values.reserve(floats.size());
    for (double value : floats)
      values.push_back(fromDouble(value, floatType));
    return DenseElementsAttr::get(type, values);
  }
  unsigned width = element.getIntOrFloatBitWidth();
  SmallVector<APInt> values;
  values.reserve(ints.size());
  for (int64_t value : ints)
    values.push_back(width == 1 ? APInt(1, value != 0) : APInt(width, value, /*isSigned=*/true));
  return DenseElementsAttr::get(type, values);
}

Literal Literal::castTo(Type elementType) const {
  RankedTensorType target = RankedTensorType::get(type.getShape(), elementType);
  if (isa<FloatType>(elementType)) {
    std::vector<double> values;
    for (int64_t i = 0; i < size(); ++i)
      values.push_back(asDouble(i));
    return ofFloats(target, std::move(values));
  }
  bool isBool = elementType.isInteger(1);
  std::vector<int64_t> values;
  for (int64_t i = 0; i < size(); ++i) {
    double value = asDouble(i);
    values.push_back(isBool ? int64_t(value != 0.0) : isFloat() ? saturateToInt64(value) : ints[i]);
  }
  return ofInts(target, std::move(values));
}

Literal Literal::reshaped(ArrayRef<int64_t> shape) const {
  Literal copy = *this;
  copy.type = RankedTensorType::get(shape, type.getElementType());
  return copy;
}

FailureOr<Literal> readTensorLiteral(MLIRContext *context, const onnx::TensorProto &tensor,
                                     std::string &error) {
  Type element = convertElementType(context, tensor.data_type());
  if (!element) {
    error = "unsupported data type " + std::to_string(tensor.data_type());
    return failure();
  }
  auto type = RankedTensorType::get(
      SmallVector<int64_t>(tensor.dims().begin(), tensor.dims().end()), element);
  int64_t count = type.getNumElements();
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    error = "constant data stored externally is not supported";
    return failure();
  }
  int32_t dataType = tensor.data_type();
  auto countMismatch = [&](int64_t have) {
    error = "holds " + std::to_string(have) + " elements, but its shape needs " +
            std::to_string(count);
    return failure();
  };
  if (tensor.has_raw_data()) {
    const std::string &raw = tensor.raw_data();
    unsigned width = std::max(1u, element.getIntOrFloatBitWidth() / 8);
    if (int64_t(raw.size()) != count * width)
      return countMismatch(int64_t(raw.size()) / width);
    const char *data = raw.data();
    auto read = [&](auto sample, int64_t i) {
      decltype(sample) value;
      std::memcpy(&value, data + i * sizeof(value), sizeof(value));
      return value;
    };
    if (auto floatType = dyn_cast<FloatType>(element)) {
      std::vector<double> values(count);
      for (int64_t i = 0; i < count; ++i) {
        if (floatType.isF32())
          values[i] = read(float(), i);
        else if (floatType.isF64())
          values[i] = read(double(), i);
        else
          values[i] = toDouble(APFloat(floatType.getFloatSemantics(),
                                       APInt(16, read(uint16_t(), i))));
      }
      return Literal::ofFloats(type, std::move(values));
    }
    std::vector<int64_t> values(count);
    for (int64_t i = 0; i < count; ++i) {
      switch (dataType) {
      case onnx::TensorProto::INT64:
        values[i] = read(int64_t(), i);
        break;
      case onnx::TensorProto::INT32:
        values[i] = read(int32_t(), i);
        break;
      case onnx::TensorProto::INT8:
        values[i] = read(int8_t(), i);
        break;
      default: // UINT8, BOOL
        values[i] = read(uint8_t(), i);
        if (dataType == onnx::TensorProto::BOOL)
          values[i] = values[i] != 0;
        break;
      }
    }
    return Literal::ofInts(type, std::move(values));
  }
  switch (dataType) {
  case onnx::TensorProto::FLOAT: {
    if (tensor.float_data_size() != count)
      return countMismatch(tensor.float_data_size());
    return Literal::ofFloats(type, std::vector<double>(tensor.float_data().begin(),
                                                       tensor.float_data().end()));
  }
  case onnx::TensorProto::DOUBLE: {
    if (tensor.double_data_size() != count)
      return countMismatch(tensor.double_data_size());
    return Literal::ofFloats(type, std::vector<double>(tensor.double_data().begin(),
                                                       tensor.double_data().end()));
  }
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: {
    if (tensor.int32_data_size() != count)
      return countMismatch(tensor.int32_data_size());
    std::vector<double> values;
    auto floatType = cast<FloatType>(element);
    for (int32_t bits : tensor.int32_data())
      values.push_back(toDouble(APFloat(floatType.getFloatSemantics(),
                                        APInt(16, uint16_t(bits)))));
    return Literal::ofFloats(type, std::move(values));
  }
  case onnx::TensorProto::INT64: {
    if (tensor.int64_data_size() != count)
      return countMismatch(tensor.int64_data_size());
    return Literal::ofInts(type, std::vector<int64_t>(tensor.int64_data().begin(),
                                                      tensor.int64_data().end()));
  }
  default: {
    if (tensor.int32_data_size() != count)
      return countMismatch(tensor.int32_data_size());
    std::vector<int64_t> values(tensor.int32_data().begin(), tensor.int32_data().end());
    if (dataType == onnx::TensorProto::BOOL)
      for (int64_t &value : values)
        value = value != 0;
    return Literal::ofInts(type, std::move(values));
  }
  }
}

Literal Literal::take(RankedTensorType resultType, const std::vector<int64_t> &indices) const {
  Literal result;
  result.type = resultType;
  if (isFloat()) {
    result.floats.reserve(indices.size());
    for (int64_t index : indices)
      result.floats.push_back(floats[index]);
  } else {
    result.ints.reserve(indices.size());
    for (int64_t index : indices)
      result.ints.push_back(ints[index]);
  }
  return result;
}

std::vector<int64_t> broadcastIndices(ArrayRef<int64_t> outShape, ArrayRef<int64_t> inShape) {
  int64_t total = 1;
  for (int64_t d : outShape)
    total *= d;
  std::vector<int64_t> result(total);
  size_t offset = outShape.size() - inShape.size();
  SmallVector<int64_t> inStrides(inShape.size(), 1);
  for (int64_t d = int64_t(inShape.size()) - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * inShape[d + 1];
  SmallVector<int64_t> index(outShape.size(), 0);
  for (int64_t linear = 0; linear < total; ++linear) {
    int64_t in = 0;
    for (size_t d = 0; d < inShape.size(); ++d)
      if (inShape[d] != 1)
        in += index[d + offset] * inStrides[d];
    result[linear] = in;
    for (int64_t d = int64_t(outShape.size()) - 1; d >= 0; --d) {
      if (++index[d] < outShape[d])
        break;
      index[d] = 0;
    }
  }
  return result;
}

std::vector<int64_t> stridedIndices(ArrayRef<int64_t> inShape, ArrayRef<int64_t> outShape,
                                    ArrayRef<int64_t> starts, ArrayRef<int64_t> steps,
                                    ArrayRef<int64_t> permutation) {
  int64_t total = 1;
  for (int64_t d : outShape)
    total *= d;
  SmallVector<int64_t> inStrides(inShape.size(), 1);
  for (int64_t d = int64_t(inShape.size()) - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * inShape[d + 1];
  std::vector<int64_t> result(total);
  SmallVector<int64_t> index(outShape.size(), 0);
  for (int64_t linear = 0; linear < total; ++linear) {
    int64_t in = 0;
    for (size_t d = 0; d < outShape.size(); ++d) {
      int64_t source = permutation.empty() ? int64_t(d) : permutation[d];
      in += (starts[source] + index[d] * steps[source]) * inStrides[source];
    }
    result[linear] = in;
    for (int64_t d = int64_t(outShape.size()) - 1; d >= 0; --d) {
      if (++index[d] < outShape[d])
        break;
      index[d] = 0;
    }
  }
  return result;
}

FailureOr<SmallVector<int64_t>> broadcastShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  SmallVector<int64_t> result;
  if (!OpTrait::util::getBroadcastedShape(a, b, result))
    return failure();
  return result;
}

bool fitsTensorBytes(ArrayRef<int64_t> shape, Type element) {
  int64_t bytes = std::max<int64_t>(1, element.getIntOrFloatBitWidth() / 8);
  if (llvm::any_of(shape, [](int64_t dim) { return dim < 0; }))
    return false;
  if (llvm::is_contained(shape, 0))
    return true;
  for (int64_t dim : shape)
    if (__builtin_mul_overflow(bytes, dim, &bytes) || bytes > kMaxTensorBytes)
      return false;
  return true;
}

std::string shapeText(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  return llvm::join(llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }), "x");
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

} // namespace zcc::onnx_import
