//===- KernelSupport.cpp - Shared helpers of the cpu kernels --------------===//

#include "kernels/cpu/KernelSupport.h"

#include "kernels/cpu/Float16.h"

#include <cstdarg>
#include <cstdio>

namespace zcc::cpu::detail {

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

SmallShape::SmallShape(const std::vector<int64_t> &dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank))
    return;
  for (int64_t dim : dims)
    dims_[rank_++] = dim;
}

bool SmallShape::push_back(int64_t dim) {
  if (rank_ == kMaxRank)
    return false;
  dims_[rank_++] = dim;
  return true;
}

void SmallShape::resize(int rank, int64_t fill) {
  for (int d = rank_; d < rank; ++d)
    dims_[d] = fill;
  rank_ = rank;
}

int64_t SmallShape::numElements() const {
  int64_t count = 1;
  for (int d = 0; d < rank_; ++d)
    count *= dims_[d];
  return count;
}

bool SmallShape::operator==(const SmallShape &other) const {
  if (rank_ != other.rank_)
    return false;
  for (int d = 0; d < rank_; ++d)
    if (dims_[d] != other.dims_[d])
      return false;
  return true;
}

bool SmallShape::equals(const std::vector<int64_t> &dims) const {
  if (static_cast<size_t>(rank_) != dims.size())
    return false;
  for (int d = 0; d < rank_; ++d)
    if (dims_[d] != dims[d])
      return false;
  return true;
}

template <typename Dims> static std::string formatDims(const Dims &dims) {
  std::string result = "[";
  bool first = true;
  for (int64_t dim : dims) {
    if (!first)
      result += ", ";
    first = false;
    result += std::to_string(dim);
  }
  return result + "]";
}

std::string shapeString(const SmallShape &shape) { return formatDims(shape); }
std::string shapeString(const std::vector<int64_t> &shape) {
  return formatDims(shape);
}

SmallShape contiguousStrides(const SmallShape &shape) {
  SmallShape strides;
  strides.resize(shape.rank());
  int64_t stride = 1;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

bool broadcastShapes(const SmallShape &a, const SmallShape &b,
                     SmallShape &result) {
  int rank = a.rank() > b.rank() ? a.rank() : b.rank();
  result.resize(rank);
  for (int d = 0; d < rank; ++d) {
    int da = d - (rank - a.rank()), db = d - (rank - b.rank());
    int64_t x = da >= 0 ? a[da] : 1, y = db >= 0 ? b[db] : 1;
    if (x == y || y == 1)
      result[d] = x;
    else if (x == 1)
      result[d] = y;
    else
      return false;
  }
  return true;
}

SmallShape broadcastStrides(const SmallShape &shape, const SmallShape &target) {
  SmallShape own = contiguousStrides(shape);
  SmallShape strides;
  strides.resize(target.rank(), 0);
  int lead = target.rank() - shape.rank();
  for (int d = 0; d < shape.rank(); ++d)
    strides[lead + d] = shape[d] == target[lead + d] ? own[d] : 0;
  return strides;
}

void stridedCopy(void *dst, const void *src, size_t elementBytes,
                 const SmallShape &shape, const SmallShape &srcStrides,
                 int64_t srcBase) {
  int64_t total = shape.numElements();
  if (total == 0)
    return;
  auto *out = static_cast<char *>(dst);
  const auto *in = static_cast<const char *>(src);
  if (shape.rank() == 0) {
    copyElement(out, in + srcBase * elementBytes, elementBytes);
    return;
  }
  // Walk the outer dimensions and copy rows of the last one, in one memcpy
  // where the row is contiguous in the source.
  int64_t rowLength = shape.back();
  int64_t rowStride = srcStrides.back();
  SmallShape outer = shape, outerStrides[1] = {srcStrides};
  outer.resize(shape.rank() - 1);
  outerStrides[0].resize(shape.rank() - 1);
  IndexWalker<1> walker(outer, outerStrides);
  walker.setBase(0, srcBase);
  size_t rowBytes = static_cast<size_t>(rowLength) * elementBytes;
  for (int64_t row = 0, rows = total / rowLength; row < rows; ++row) {
    const char *rowStart = in + walker.offset(0) * elementBytes;
    if (rowStride == 1) {
      std::memcpy(out, rowStart, rowBytes);
      out += rowBytes;
    } else {
      for (int64_t i = 0; i < rowLength; ++i, out += elementBytes)
        copyElement(out, rowStart + i * rowStride * elementBytes, elementBytes);
    }
    walker.next();
  }
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

Status kernelError(StatusCode code, const char *kernel, const char *format,
                   ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  int size = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string message(size > 0 ? static_cast<size_t>(size) : 0, '\0');
  if (size > 0)
    std::vsnprintf(message.data(), message.size() + 1, format, args);
  va_end(args);
  return Status(code, std::string(kernel) + ": " + message);
}

/// Checks one view; `index` numbers the operands of a variadic kernel and is
/// -1 elsewhere.
static Status checkView(const char *kernel, const char *role, const char *name,
                        int index, const TensorView &view) {
  std::string label = index < 0 ? std::string() : " #" + std::to_string(index);
  if (dtypeBytes(view.dtype) == 0)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "%s '%s'%s has element type %s (%d), which no kernel "
                       "handles",
                       role, name, label.c_str(), dtypeName(view.dtype),
                       static_cast<int>(view.dtype));
  if (view.shape.size() > static_cast<size_t>(kMaxRank))
    return kernelError(StatusCode::kUnimplemented, kernel,
                       "%s '%s'%s has rank %zu, more than the %d supported",
                       role, name, label.c_str(), view.shape.size(), kMaxRank);
  for (int64_t dim : view.shape)
    if (dim < 0)
      return kernelError(StatusCode::kInvalidArgument, kernel,
                         "%s '%s'%s has a negative dimension in shape %s", role,
                         name, label.c_str(), shapeString(view.shape).c_str());
  if (!view.data && view.numElements() > 0)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "%s '%s'%s of shape %s has no data", role, name,
                       label.c_str(), shapeString(view.shape).c_str());
  return Status::ok();
}

static Status checkCount(const char *kernel, const char *what, size_t got,
                         size_t expected) {
  if (got == expected)
    return Status::ok();
  return kernelError(StatusCode::kInvalidArgument, kernel,
                     "expected %zu %s, got %zu", expected, what, got);
}

Status checkOperands(const KernelArgs &args, const char *kernel,
                     std::initializer_list<const char *> inputs,
                     std::initializer_list<const char *> outputs) {
  if (Status s =
          checkCount(kernel, "inputs", args.inputs.size(), inputs.size());
      !s.isOk())
    return s;
  if (Status s =
          checkCount(kernel, "outputs", args.outputs.size(), outputs.size());
      !s.isOk())
    return s;
  size_t i = 0;
  for (const char *name : inputs)
    if (Status s = checkView(kernel, "operand", name, -1, args.inputs[i++]);
        !s.isOk())
      return s;
  i = 0;
  for (const char *name : outputs)
    if (Status s = checkView(kernel, "result", name, -1, args.outputs[i++]);
        !s.isOk())
      return s;
  return Status::ok();
}

Status checkVariadicOperands(const KernelArgs &args, const char *kernel,
                             size_t minInputs, const char *inputName,
                             const char *outputName) {
  if (args.inputs.size() < minInputs)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "expected at least %zu inputs, got %zu", minInputs,
                       args.inputs.size());
  if (Status s = checkCount(kernel, "outputs", args.outputs.size(), 1);
      !s.isOk())
    return s;
  for (size_t i = 0; i < args.inputs.size(); ++i)
    if (Status s = checkView(kernel, "operand", inputName, static_cast<int>(i),
                             args.inputs[i]);
        !s.isOk())
      return s;
  return checkView(kernel, "result", outputName, -1, args.outputs[0]);
}

Status expectDType(const char *kernel, const char *operand,
                   const TensorView &view, plan::DType expected) {
  if (view.dtype == expected)
    return Status::ok();
  return kernelError(StatusCode::kInvalidArgument, kernel,
                     "'%s' has element type %s, expected %s", operand,
                     dtypeName(view.dtype), dtypeName(expected));
}

Status expectSameDType(const char *kernel, const char *operand,
                       const TensorView &view, const char *otherOperand,
                       const TensorView &other) {
  if (view.dtype == other.dtype)
    return Status::ok();
  return kernelError(StatusCode::kInvalidArgument, kernel,
                     "'%s' has element type %s, but '%s' has %s", operand,
                     dtypeName(view.dtype), otherOperand,
                     dtypeName(other.dtype));
}

Status expectShape(const char *kernel, const char *operand,
                   const TensorView &view, const SmallShape &expected) {
  if (expected.equals(view.shape))
    return Status::ok();
  return kernelError(
      StatusCode::kInvalidArgument, kernel, "'%s' has shape %s, expected %s",
      operand, shapeString(view.shape).c_str(), shapeString(expected).c_str());
}

Status expectSameShape(const char *kernel, const char *operand,
                       const TensorView &view, const char *otherOperand,
                       const TensorView &other) {
  if (view.shape == other.shape)
    return Status::ok();
  return kernelError(StatusCode::kInvalidArgument, kernel,
                     "'%s' has shape %s, but '%s' has %s", operand,
                     shapeString(view.shape).c_str(), otherOperand,
                     shapeString(other.shape).c_str());
}

Status unsupportedDType(const char *kernel, const char *operand,
                        const TensorView &view, const char *supported) {
  return kernelError(StatusCode::kUnimplemented, kernel,
                     "'%s' has element type %s; this kernel handles %s",
                     operand, dtypeName(view.dtype), supported);
}

Status normalizeAxis(const char *kernel, const char *attr, int64_t axis,
                     int64_t rank, int64_t &result) {
  if (axis < -rank || axis >= rank)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "%s %lld is out of range for rank %lld", attr,
                       static_cast<long long>(axis),
                       static_cast<long long>(rank));
  result = axis < 0 ? axis + rank : axis;
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

const plan::Attribute *findAttr(const KernelArgs &args, const char *name) {
  if (!args.attributes)
    return nullptr;
  // Attribute names fit std::string's inline buffer: no allocation here.
  auto it = args.attributes->find(name);
  return it == args.attributes->end() ? nullptr : &it->second;
}

static const char *kindName(const plan::Attribute &attr) {
  switch (attr.value_case()) {
  case plan::Attribute::kI:
    return "an int";
  case plan::Attribute::kF:
    return "a float";
  case plan::Attribute::kS:
    return "a string";
  case plan::Attribute::kInts:
    return "an int list";
  case plan::Attribute::kB:
    return "a bool";
  default:
    return "a unit attribute";
  }
}

static Status wrongKind(const char *kernel, const char *name,
                        const plan::Attribute &attr, const char *expected) {
  return kernelError(StatusCode::kInvalidArgument, kernel,
                     "attribute '%s' must be %s, got %s", name, expected,
                     kindName(attr));
}

static Status missing(const char *kernel, const char *name,
                      const char *expected) {
  return kernelError(StatusCode::kInvalidArgument, kernel,
                     "missing attribute '%s' (%s)", name, expected);
}

Status optionalInt(const KernelArgs &args, const char *kernel, const char *name,
                   int64_t defaultValue, int64_t &value) {
  const plan::Attribute *attr = findAttr(args, name);
  if (!attr) {
    value = defaultValue;
    return Status::ok();
  }
  if (attr->value_case() != plan::Attribute::kI)
    return wrongKind(kernel, name, *attr, "an int");
  value = attr->i();
  return Status::ok();
}

Status requiredInt(const KernelArgs &args, const char *kernel, const char *name,
                   int64_t &value) {
  if (!findAttr(args, name))
    return missing(kernel, name, "an int");
  return optionalInt(args, kernel, name, 0, value);
}

Status requiredFloat(const KernelArgs &args, const char *kernel,
                     const char *name, double &value) {
  const plan::Attribute *attr = findAttr(args, name);
  if (!attr)
    return missing(kernel, name, "a float");
  if (attr->value_case() == plan::Attribute::kF)
    value = attr->f();
  else if (attr->value_case() == plan::Attribute::kI)
    value = static_cast<double>(attr->i());
  else
    return wrongKind(kernel, name, *attr, "a float");
  return Status::ok();
}

Status optionalBool(const KernelArgs &args, const char *kernel,
                    const char *name, bool defaultValue, bool &value) {
  const plan::Attribute *attr = findAttr(args, name);
  if (!attr) {
    value = defaultValue;
    return Status::ok();
  }
  switch (attr->value_case()) {
  case plan::Attribute::kB:
    value = attr->b();
    return Status::ok();
  case plan::Attribute::kI:
    if (attr->i() != 0 && attr->i() != 1)
      break;
    value = attr->i() != 0;
    return Status::ok();
  case plan::Attribute::VALUE_NOT_SET:
    // A unit attribute: present means true.
    value = true;
    return Status::ok();
  default:
    break;
  }
  return wrongKind(kernel, name, *attr, "a bool");
}

Status optionalString(const KernelArgs &args, const char *kernel,
                      const char *name, const char *defaultValue,
                      const char *&value) {
  const plan::Attribute *attr = findAttr(args, name);
  if (!attr) {
    value = defaultValue;
    return Status::ok();
  }
  if (attr->value_case() != plan::Attribute::kS)
    return wrongKind(kernel, name, *attr, "a string");
  value = attr->s().c_str();
  return Status::ok();
}

Status requiredInts(const KernelArgs &args, const char *kernel,
                    const char *name, SmallShape &values) {
  const plan::Attribute *attr = findAttr(args, name);
  if (!attr)
    return missing(kernel, name, "an int list");
  values = SmallShape();
  // An empty list may arrive with no value set: protobuf cannot tell an
  // empty `ints` from an unset one unless the writer touched the field.
  if (attr->value_case() == plan::Attribute::VALUE_NOT_SET)
    return Status::ok();
  if (attr->value_case() != plan::Attribute::kInts)
    return wrongKind(kernel, name, *attr, "an int list");
  for (int64_t v : attr->ints().values())
    if (!values.push_back(v))
      return kernelError(StatusCode::kUnimplemented, kernel,
                         "attribute '%s' has %d entries, more than the %d "
                         "supported",
                         name, attr->ints().values_size(), kMaxRank);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Element conversions
//===----------------------------------------------------------------------===//

uint16_t floatToHalf(float value) { return toHalf(value).bits; }
float halfToFloat(uint16_t bits) { return toFloat(Half{bits}); }
uint16_t floatToBFloat16(float value) { return toBFloat16(value).bits; }
float bfloat16ToFloat(uint16_t bits) { return toFloat(BFloat16{bits}); }

} // namespace zcc::cpu::detail
