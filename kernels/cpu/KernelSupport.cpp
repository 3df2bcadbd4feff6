//===- KernelSupport.cpp - Shared helpers of the cpu kernels --------------===//

#include "kernels/cpu/KernelSupport.h"

#include "kernels/cpu/Float16.h"
#include "kernels/cpu/FloatDispatch.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <utility>

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
Status checkView(const char *kernel, const char *role, const char *name,
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

/// The named operands and results (the first ones, when there are more).
static Status checkNamedViews(const KernelArgs &args, const char *kernel,
                              std::initializer_list<const char *> inputs,
                              std::initializer_list<const char *> outputs) {
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
  return checkNamedViews(args, kernel, inputs, outputs);
}

Status checkLayerNormGradOperands(const KernelArgs &args, const char *kernel,
                                  const TensorView *&addend) {
  // The addend is optional: a fourth input.
  Status checked =
      args.inputs.size() == 4
          ? checkOperands(args, kernel, {"input", "scale", "grad", "addend"},
                          {"input_grad", "scale_grad", "bias_grad"})
          : checkOperands(args, kernel, {"input", "scale", "grad"},
                          {"input_grad", "scale_grad", "bias_grad"});
  addend = checked.isOk() && args.inputs.size() == 4 ? &args.inputs[3] : nullptr;
  return checked;
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

Status expectLike(const char *kernel, const char *operand,
                  const TensorView &view, const char *likeName,
                  const TensorView &like) {
  if (Status s = expectSameDType(kernel, operand, view, likeName, like);
      !s.isOk())
    return s;
  return expectSameShape(kernel, operand, view, likeName, like);
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

Status checkConcatOperands(const KernelArgs &args, const char *kernel,
                           SmallShape &expected, int &a) {
  if (Status s = checkVariadicOperands(args, kernel, 1, "inputs", "result");
      !s.isOk())
    return s;
  const TensorView &first = args.inputs[0], &out = args.outputs[0];
  expected = SmallShape(first.shape);
  int64_t axis = 0;
  if (Status s = requiredAxis(args, kernel, expected.rank(), axis); !s.isOk())
    return s;
  a = static_cast<int>(axis);
  expected[a] = 0;
  for (size_t t = 0; t < args.inputs.size(); ++t) {
    const TensorView &in = args.inputs[t];
    if (in.dtype != first.dtype)
      return kernelError(StatusCode::kInvalidArgument, kernel,
                         "input #%zu has element type %s, but input #0 has %s",
                         t, dtypeName(in.dtype), dtypeName(first.dtype));
    bool compatible = in.shape.size() == first.shape.size();
    for (size_t d = 0; compatible && d < in.shape.size(); ++d)
      compatible = static_cast<int>(d) == a || in.shape[d] == first.shape[d];
    if (!compatible)
      return kernelError(StatusCode::kInvalidArgument, kernel,
                         "input #%zu has shape %s, which differs from input "
                         "#0's %s outside axis %d",
                         t, shapeString(in.shape).c_str(),
                         shapeString(first.shape).c_str(), a);
    expected[a] += in.shape[a];
  }
  if (Status s = expectSameDType(kernel, "result", out, "inputs", first);
      !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "result", out, expected); !s.isOk())
    return s;
  return Status::ok();
}

Status checkWhereOperands(const KernelArgs &args, const char *kernel) {
  if (Status s = checkOperands(
          args, kernel, {"condition", "on_true", "on_false"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &cond = args.inputs[0], &onTrue = args.inputs[1],
                   &onFalse = args.inputs[2], &out = args.outputs[0];
  if (Status s = expectDType(kernel, "condition", cond, plan::BOOL); !s.isOk())
    return s;
  if (Status s =
          expectSameDType(kernel, "on_false", onFalse, "on_true", onTrue);
      !s.isOk())
    return s;
  if (Status s = expectSameDType(kernel, "result", out, "on_true", onTrue);
      !s.isOk())
    return s;
  SmallShape shapes[3] = {SmallShape(cond.shape), SmallShape(onTrue.shape),
                          SmallShape(onFalse.shape)};
  SmallShape partial, shape;
  if (!broadcastShapes(shapes[0], shapes[1], partial) ||
      !broadcastShapes(partial, shapes[2], shape))
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "operand shapes %s, %s and %s are not "
                       "broadcast-compatible",
                       shapeString(cond.shape).c_str(),
                       shapeString(onTrue.shape).c_str(),
                       shapeString(onFalse.shape).c_str());
  if (Status s = expectShape(kernel, "result", out, shape); !s.isOk())
    return s;
  return Status::ok();
}

namespace {
/// What every product checks first: its optional transpose_lhs and
/// transpose_rhs, and float operands of one type.
Status checkProductBasics(const KernelArgs &args, const char *kernel, bool &transposeLhs,
                          bool &transposeRhs) {
  if (Status s = optionalBool(args, kernel, "transpose_lhs", false, transposeLhs); !s.isOk())
    return s;
  if (Status s = optionalBool(args, kernel, "transpose_rhs", false, transposeRhs); !s.isOk())
    return s;
  if (Status s = expectFloatDType(kernel, "lhs", args.inputs[0]); !s.isOk())
    return s;
  return expectSameDType(kernel, "rhs", args.inputs[1], "lhs", args.inputs[0]);
}
} // namespace

Status checkAccumulateMatmulOperands(const KernelArgs &args, const char *kernel,
                                     AccumulateMatmulOperands &operands) {
  if (Status s = checkOperands(args, kernel, {"lhs", "rhs"}, {"target"}); !s.isOk())
    return s;
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1], &target = args.outputs[0];
  if (Status s = checkProductBasics(args, kernel, operands.transposeLhs, operands.transposeRhs);
      !s.isOk())
    return s;
  if (Status s = optionalBool(args, kernel, "overwrite", false, operands.overwrite); !s.isOk())
    return s;
  plan::DType wide = lhs.dtype == plan::F64 ? plan::F64 : plan::F32;
  if (target.dtype != wide)
    return unsupportedDType(kernel, "target", target,
                            wide == plan::F64 ? "f64 (for f64 operands)"
                                              : "f32 (for f32, f16 and bf16 operands)");
  for (auto [name, view] : {std::pair<const char *, const TensorView *>{"lhs", &lhs},
                            {"rhs", &rhs},
                            {"target", &target}})
    if (view->shape.size() != 2)
      return kernelError(StatusCode::kInvalidArgument, kernel, "'%s' must be a matrix, got shape %s",
                         name, shapeString(view->shape).c_str());
  int64_t m = lhs.shape[operands.transposeLhs ? 1 : 0], k = lhs.shape[operands.transposeLhs ? 0 : 1];
  int64_t rhsK = rhs.shape[operands.transposeRhs ? 1 : 0], n = rhs.shape[operands.transposeRhs ? 0 : 1];
  if (k != rhsK)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "contracting dimensions differ: lhs %s has %lld, rhs %s has %lld",
                       shapeString(lhs.shape).c_str(), static_cast<long long>(k),
                       shapeString(rhs.shape).c_str(), static_cast<long long>(rhsK));
  if (target.shape[0] != m || target.shape[1] != n)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "the product is [%lld, %lld] but the target has shape %s",
                       static_cast<long long>(m), static_cast<long long>(n),
                       shapeString(target.shape).c_str());
  operands.m = m;
  operands.n = n;
  operands.k = k;
  return Status::ok();
}

Status checkMatmulOperands(const KernelArgs &args, const char *kernel,
                           MatmulOperands &operands) {
  // The bias and the addend are optional: `residual` names the last input
  // the addend, and an input left between it and rhs is the bias; with
  // "gelu_tanh_grad" the third input is the GELU's. Any other count is
  // held to the operands these name.
  bool residual = false;
  if (Status s = optionalBool(args, kernel, "residual", false, residual); !s.isOk())
    return s;
  const char *activation = nullptr;
  if (Status s = optionalString(args, kernel, "activation", "none", activation); !s.isOk())
    return s;
  operands.geluTanh = std::strcmp(activation, "gelu_tanh") == 0;
  bool geluGrad = std::strcmp(activation, "gelu_tanh_grad") == 0;
  if (!operands.geluTanh && !geluGrad && std::strcmp(activation, "none") != 0)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "activation must be \"none\", \"gelu_tanh\" or \"gelu_tanh_grad\", got "
                       "\"%s\"",
                       activation);
  if (geluGrad && residual)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "activation \"gelu_tanh_grad\" takes no addend ('residual')");
  bool hasBias = !geluGrad && args.inputs.size() >= (residual ? 4u : 3u);
  // An activation may write a second output, aux.
  bool hasAux = (operands.geluTanh || geluGrad) && args.outputs.size() == 2;
  std::initializer_list<const char *> outputs = {"result"}, withAux = {"result", "aux"};
  if (hasAux)
    outputs = withAux;
  Status counted =
      geluGrad ? checkOperands(args, kernel, {"lhs", "rhs", "gelu_input"}, outputs) :
      residual ? (hasBias ? checkOperands(args, kernel, {"lhs", "rhs", "bias", "addend"}, outputs)
                          : checkOperands(args, kernel, {"lhs", "rhs", "addend"}, outputs))
               : (hasBias ? checkOperands(args, kernel, {"lhs", "rhs", "bias"}, outputs)
                          : checkOperands(args, kernel, {"lhs", "rhs"}, outputs));
  if (!counted.isOk())
    return counted;
  if (hasAux) {
    const TensorView &aux = args.outputs[1], &result = args.outputs[0];
    operands.aux = &aux;
    if (operands.geluTanh) {
      if (Status s = expectSameDType(kernel, "aux", aux, "result", result); !s.isOk())
        return s;
      if (aux.shape != result.shape)
        return kernelError(StatusCode::kInvalidArgument, kernel,
                           "aux (the sum before the GELU) has shape %s, the result %s",
                           shapeString(aux.shape).c_str(), shapeString(result.shape).c_str());
    } else {
      if (Status s = expectSameDType(kernel, "aux", aux, "result", result); !s.isOk())
        return s;
      if (aux.shape.size() != 1 || result.shape.empty() || aux.shape[0] != result.shape.back())
        return kernelError(StatusCode::kInvalidArgument, kernel,
                           "aux (the bias gradient) must be a vector of the result's last "
                           "dimension, got shape %s for a result of shape %s",
                           shapeString(aux.shape).c_str(), shapeString(result.shape).c_str());
    }
  }
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1],
                   &out = args.outputs[0];
  if (Status s = checkProductBasics(args, kernel, operands.transposeLhs, operands.transposeRhs);
      !s.isOk())
    return s;
  operands.widened = out.dtype == plan::F32 &&
                     (lhs.dtype == plan::F16 || lhs.dtype == plan::BF16);
  if (operands.widened && (hasBias || residual || operands.geluTanh || geluGrad))
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "an f32 result of %s operands takes no bias, addend or activation",
                       dtypeName(lhs.dtype));
  if (!operands.widened)
    if (Status s = expectSameDType(kernel, "result", out, "lhs", lhs); !s.isOk())
      return s;
  if (hasBias)
    if (Status s =
            expectSameDType(kernel, "bias", args.inputs[2], "result", out);
        !s.isOk())
      return s;
  if (lhs.shape.empty() || rhs.shape.empty())
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "operands must have rank at least 1, got %s and %s",
                       shapeString(lhs.shape).c_str(),
                       shapeString(rhs.shape).c_str());
  // A vector has no two dimensions to swap.
  for (auto [attribute, operand, transposed, view] :
       {std::tuple<const char *, const char *, bool, const TensorView *>{
            "transpose_lhs", "lhs", operands.transposeLhs, &lhs},
        {"transpose_rhs", "rhs", operands.transposeRhs, &rhs}})
    if (transposed && view->shape.size() < 2)
      return kernelError(StatusCode::kInvalidArgument, kernel,
                         "%s needs '%s' of rank at least 2, got shape %s",
                         attribute, operand, shapeString(view->shape).c_str());

  // numpy.matmul: a rank-1 lhs is a row [1, K], a rank-1 rhs a column
  // [K, 1]; the added dimension is dropped from the result.
  bool lhsVector = lhs.shape.size() == 1, rhsVector = rhs.shape.size() == 1;
  size_t lhsRank = lhs.shape.size(), rhsRank = rhs.shape.size();
  int64_t m = 1, k = lhs.shape.back(), rhsK = rhs.shape[0], n = 1;
  if (!lhsVector) {
    m = lhs.shape[lhsRank - 2];
    if (operands.transposeLhs)
      std::swap(m, k);
  }
  if (!rhsVector) {
    rhsK = rhs.shape[rhsRank - 2];
    n = rhs.shape.back();
    if (operands.transposeRhs)
      std::swap(rhsK, n);
  }
  operands.lhsBatch = SmallShape(lhs.shape);
  operands.rhsBatch = SmallShape(rhs.shape);
  operands.lhsBatch.resize(lhsVector ? 0 : static_cast<int>(lhsRank) - 2);
  operands.rhsBatch.resize(rhsVector ? 0 : static_cast<int>(rhsRank) - 2);
  if (k != rhsK)
    return kernelError(
        StatusCode::kInvalidArgument, kernel,
        "contracting dimensions differ: lhs %s has %lld, rhs "
        "%s has %lld",
        shapeString(lhs.shape).c_str(), static_cast<long long>(k),
        shapeString(rhs.shape).c_str(), static_cast<long long>(rhsK));
  if (!broadcastShapes(operands.lhsBatch, operands.rhsBatch, operands.batch))
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "batch dimensions of lhs %s and rhs %s are not "
                       "broadcast-compatible",
                       shapeString(lhs.shape).c_str(),
                       shapeString(rhs.shape).c_str());
  SmallShape expected = operands.batch;
  if (!lhsVector)
    expected.push_back(m);
  if (!rhsVector)
    expected.push_back(n);
  if (Status s = expectShape(kernel, "result", out, expected); !s.isOk())
    return s;
  operands.m = m;
  operands.n = n;
  operands.k = k;
  operands.bias = nullptr;
  operands.addend = nullptr;
  operands.geluInput = nullptr;
  if (geluGrad) {
    const TensorView &geluInput = args.inputs[2];
    if (Status s = expectLike(kernel, "gelu_input", geluInput, "result", out); !s.isOk())
      return s;
    operands.geluInput = &geluInput;
  }
  if (residual) {
    const TensorView &addend = args.inputs.back();
    if (Status s = expectLike(kernel, "addend", addend, "result", out); !s.isOk())
      return s;
    operands.addend = &addend;
  }
  if (!hasBias)
    return Status::ok();
  // One value per column of the product (1 for a rank-1 rhs).
  const TensorView &bias = args.inputs[2];
  if (bias.shape.size() != 1 || bias.shape[0] != n)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "'bias' has shape %s, expected [%lld] (one value per "
                       "column of the product)",
                       shapeString(bias.shape).c_str(),
                       static_cast<long long>(n));
  operands.bias = &bias;
  return Status::ok();
}

/// Every optimizer tensor but the scalars (input `scalarsIndex`) has the
/// parameter's dtype, f32 or f64, and shape.
/// With `halfGradient`, input 1 of an f32 parameter may be f16 or bf16.
static Status checkLikeParam(const char *kernel, const TensorView *inputs,
                             std::initializer_list<const char *> inputNames,
                             size_t scalarsIndex, const TensorView *outputs,
                             std::initializer_list<const char *> outputNames,
                             bool halfGradient = false) {
  const TensorView &param = inputs[0];
  if (param.dtype != plan::F32 && param.dtype != plan::F64)
    return unsupportedDType(kernel, "param", param, "f32 and f64");
  size_t i = 0;
  for (const char *name : inputNames) {
    const TensorView &view = inputs[i];
    bool half = halfGradient && i == 1 && param.dtype == plan::F32 &&
                (view.dtype == plan::F16 || view.dtype == plan::BF16);
    if (half) {
      if (Status s = expectShape(kernel, name, view, SmallShape(param.shape));
          !s.isOk())
        return s;
    } else if (i != 0 && i != scalarsIndex) {
      if (Status s = expectLike(kernel, name, view, "param", param); !s.isOk())
        return s;
    }
    ++i;
  }
  i = 0;
  for (const char *name : outputNames) {
    if (Status s = expectLike(kernel, name, outputs[i], "param", param);
        !s.isOk())
      return s;
    ++i;
  }
  return Status::ok();
}

namespace {
/// The f64[2] sums of squares of a lamb_moments or lamb_step.
Status checkLambSquares(const char *kernel, const TensorView &squares) {
  ZCC_RETURN_IF_FAILED(expectDType(kernel, "squares", squares, plan::F64));
  SmallShape shape;
  shape.push_back(2);
  return expectShape(kernel, "squares", squares, shape);
}
} // namespace

Status checkLambMomentsOperands(const KernelArgs &args, const char *kernel) {
  ZCC_RETURN_IF_FAILED(checkOperands(args, kernel,
                                     {"param", "grad", "exp_avg", "exp_avg_sq", "scalars"},
                                     {"new_exp_avg", "new_exp_avg_sq", "squares"}));
  ZCC_RETURN_IF_FAILED(checkOptimizerMember(kernel, args.inputs.data(),
                                            {"param", "grad", "exp_avg", "exp_avg_sq"},
                                            args.outputs.data(),
                                            {"new_exp_avg", "new_exp_avg_sq"}));
  return checkLambSquares(kernel, args.outputs[2]);
}

Status checkLambStepOperands(const KernelArgs &args, const char *kernel) {
  ZCC_RETURN_IF_FAILED(checkOperands(args, kernel,
                                     {"param", "exp_avg", "exp_avg_sq", "scalars", "squares"},
                                     {"new_param"}));
  ZCC_RETURN_IF_FAILED(checkOptimizerMember(kernel, args.inputs.data(),
                                            {"param", "exp_avg", "exp_avg_sq"},
                                            args.outputs.data(), {"new_param"}));
  return checkLambSquares(kernel, args.inputs[4]);
}

Status readLambOptions(const KernelArgs &args, const char *kernel, LambOptions &options) {
  if (findAttr(args, "max_coeff"))
    ZCC_RETURN_IF_FAILED(requiredFloat(args, kernel, "max_coeff", options.maxCoeff));
  if (findAttr(args, "min_coeff"))
    ZCC_RETURN_IF_FAILED(requiredFloat(args, kernel, "min_coeff", options.minCoeff));
  ZCC_RETURN_IF_FAILED(
      optionalBool(args, kernel, "bias_correction", true, options.biasCorrection));
  ZCC_RETURN_IF_FAILED(
      optionalBool(args, kernel, "eps_inside_sqrt", false, options.epsInsideSqrt));
  if (!(options.minCoeff >= 0) || !(options.maxCoeff > 0) || options.minCoeff > options.maxCoeff)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "needs 0 <= min_coeff <= max_coeff and max_coeff > 0, got [%g, %g]",
                       options.minCoeff, options.maxCoeff);
  return Status::ok();
}

Status checkOptimizerOperands(const KernelArgs &args, const char *kernel,
                              std::initializer_list<const char *> inputs,
                              std::initializer_list<const char *> outputs,
                              size_t scalarsIndex, size_t optionalOutputs,
                              bool halfGradient) {
  if (args.outputs.size() > outputs.size() &&
      args.outputs.size() <= outputs.size() + optionalOutputs) {
    if (Status s = checkCount(kernel, "inputs", args.inputs.size(), inputs.size()); !s.isOk())
      return s;
    if (Status s = checkNamedViews(args, kernel, inputs, outputs); !s.isOk())
      return s;
  } else if (Status s = checkOperands(args, kernel, inputs, outputs); !s.isOk()) {
    return s;
  }
  return checkLikeParam(kernel, args.inputs.data(), inputs, scalarsIndex,
                        args.outputs.data(), outputs, halfGradient);
}

Status checkOptimizerMember(const char *kernel, const TensorView *inputs,
                            std::initializer_list<const char *> inputNames,
                            const TensorView *outputs,
                            std::initializer_list<const char *> outputNames) {
  size_t i = 0;
  for (const char *name : inputNames)
    if (Status s = checkView(kernel, "operand", name, -1, inputs[i++]); !s.isOk())
      return s;
  i = 0;
  for (const char *name : outputNames)
    if (Status s = checkView(kernel, "result", name, -1, outputs[i++]); !s.isOk())
      return s;
  return checkLikeParam(kernel, inputs, inputNames, inputNames.size(), outputs,
                        outputNames);
}

Status countMembers(const KernelArgs &args, const char *kernel,
                    size_t inputsPerMember, size_t sharedInputs,
                    size_t outputsPerMember, size_t &members) {
  size_t own = args.inputs.size() >= sharedInputs
                   ? args.inputs.size() - sharedInputs
                   : 0;
  members = outputsPerMember ? args.outputs.size() / outputsPerMember : 0;
  bool fits = args.inputs.size() >= sharedInputs && members > 0 &&
              args.outputs.size() == members * outputsPerMember &&
              own == members * inputsPerMember;
  if (fits)
    return Status::ok();
  return kernelError(StatusCode::kInvalidArgument, kernel,
                     "expected, for each of N tensors, %zu inputs and %zu "
                     "outputs, and %zu shared inputs after the tensors' "
                     "inputs; got %zu inputs and %zu outputs",
                     inputsPerMember, outputsPerMember, sharedInputs,
                     args.inputs.size(), args.outputs.size());
}

Status checkClassLossGradResult(const char *kernel, const TensorView &result,
                                const TensorView &input) {
  bool narrowed = input.dtype == plan::F32 &&
                  (result.dtype == plan::F16 || result.dtype == plan::BF16);
  if (!narrowed)
    return expectLike(kernel, "result", result, "input", input);
  // Narrower rows than the input's: rows written would overlap rows other
  // threads still read.
  if (result.data == input.data && input.numElements() > 0)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "a %s result may not overwrite its f32 input",
                       dtypeName(result.dtype));
  return expectSameShape(kernel, "result", result, "input", input);
}

Status checkAdamwCopy(const char *kernel, const TensorView &copy,
                      const TensorView &param) {
  if (Status s = checkView(kernel, "result", "new_param_copy", -1, copy); !s.isOk())
    return s;
  if (copy.dtype != plan::F16 && copy.dtype != plan::BF16)
    return unsupportedDType(kernel, "new_param_copy", copy, "f16 and bf16");
  if (param.dtype != plan::F32)
    return unsupportedDType(kernel, "param", param, "f32 (with a 16-bit copy)");
  if (copy.numElements() != param.numElements())
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "new_param_copy has %lld elements, param %lld",
                       static_cast<long long>(copy.numElements()),
                       static_cast<long long>(param.numElements()));
  return Status::ok();
}

Status checkMultiAdamwOperands(const KernelArgs &args, const char *kernel,
                               size_t &members, bool &copies) {
  // Four results a tensor (its copy last) when the outputs match the
  // inputs' tensors four to four; three otherwise.
  size_t own = args.inputs.empty() ? 0 : args.inputs.size() - 1;
  copies = own > 0 && own % 4 == 0 && args.outputs.size() == own;
  const size_t stride = copies ? 4 : 3;
  if (Status s = countMembers(args, kernel, 4, 1, stride, members); !s.isOk())
    return s.addContext("4 outputs a tensor where every tensor writes its 16-bit copy");
  for (size_t m = 0; m < members; ++m) {
    const TensorView *in = &args.inputs[4 * m];
    const TensorView *out = &args.outputs[stride * m];
    Status s = checkOptimizerMember(
        kernel, in, {"param", "grad", "exp_avg", "exp_avg_sq"}, out,
        {"new_param", "new_exp_avg", "new_exp_avg_sq"});
    if (s.isOk() && m > 0)
      s = expectSameDType(kernel, "param", in[0], "the first tensor's param",
                          args.inputs[0]);
    if (s.isOk() && copies)
      s = checkAdamwCopy(kernel, out[3], in[0]);
    if (s.isOk() && copies && m > 0)
      s = expectSameDType(kernel, "new_param_copy", out[3],
                          "the first tensor's new_param_copy", args.outputs[3]);
    // One tensor's message is its single-tensor instruction's.
    if (!s.isOk() && members > 1)
      return s.addContext("in tensor #" + std::to_string(m) + " of " +
                          std::to_string(members));
    if (!s.isOk())
      return s;
  }
  return Status::ok();
}

Status checkDropoutOperands(const KernelArgs &args, const char *kernel,
                            DropoutAttributes &attributes) {
  if (Status s = checkOperands(args, kernel, {"input", "state"}, {"result"}); !s.isOk())
    return s;
  const TensorView &input = args.inputs[0], &state = args.inputs[1], &result = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "input", input); !s.isOk())
    return s;
  if (Status s = expectDType(kernel, "state", state, plan::I64); !s.isOk())
    return s;
  SmallShape pair;
  pair.push_back(2);
  if (Status s = expectShape(kernel, "state", state, pair); !s.isOk())
    return s;
  if (Status s = expectLike(kernel, "result", result, "input", input); !s.isOk())
    return s;
  if (Status s = requiredFloat(args, kernel, "ratio", attributes.ratio); !s.isOk())
    return s;
  if (!(attributes.ratio > 0.0 && attributes.ratio < 1.0))
    return kernelError(StatusCode::kInvalidArgument, kernel, "ratio must be in (0, 1), got %g",
                       attributes.ratio);
  int64_t key = 0;
  if (Status s = requiredInt(args, kernel, "key", key); !s.isOk())
    return s;
  attributes.key = static_cast<uint64_t>(key);
  if (Status s = requiredInt(args, kernel, "sample_elements", attributes.sampleElements);
      !s.isOk())
    return s;
  int64_t count = input.numElements();
  if (attributes.sampleElements <= 0 || count % attributes.sampleElements != 0)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "sample_elements %lld must be positive and divide the input's %lld "
                       "elements",
                       static_cast<long long>(attributes.sampleElements),
                       static_cast<long long>(count));
  return Status::ok();
}

Status checkFillOperands(const KernelArgs &args, const char *kernel,
                         double &value) {
  if (args.outputs.size() > 1) {
    size_t members = 0;
    if (Status s = countMembers(args, kernel, 0, 0, 1, members); !s.isOk())
      return s;
    for (size_t m = 0; m < members; ++m) {
      const TensorView &target = args.outputs[m];
      if (Status s = checkView(kernel, "result", "target", static_cast<int>(m),
                               target);
          !s.isOk())
        return s;
      if (Status s = expectFloatDType(kernel, "target", target); !s.isOk())
        return s.addContext("in target #" + std::to_string(m));
    }
  } else {
    if (Status s = checkOperands(args, kernel, {}, {"target"}); !s.isOk())
      return s;
    if (Status s = expectFloatDType(kernel, "target", args.outputs[0]);
        !s.isOk())
      return s;
  }
  return requiredFloat(args, kernel, "value", value);
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

Status requiredAxis(const KernelArgs &args, const char *kernel, int64_t rank,
                    int64_t &axis) {
  if (Status s = requiredInt(args, kernel, "axis", axis); !s.isOk())
    return s;
  return normalizeAxis(kernel, "axis", axis, rank, axis);
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
// Checks a forward kernel shares with its gradient
//===----------------------------------------------------------------------===//

bool sliceIsView(const SliceWindow &window, const TensorView &in, const TensorView &out) {
  const uint8_t *start = static_cast<const uint8_t *>(in.data) +
                         window.base * static_cast<int64_t>(dtypeBytes(in.dtype));
  if (out.data != start)
    return false;
  int64_t expected = 1;
  for (int d = window.shape.rank() - 1; d >= 0; --d) {
    if (window.shape[d] != 1 && window.strides[d] != expected)
      return false;
    expected *= window.shape[d];
  }
  return true;
}

Status readSliceWindow(const KernelArgs &args, const char *kernel,
                       const char *operand, const SmallShape &shape,
                       SliceWindow &window) {
  SmallShape starts, limits, steps;
  if (Status s = requiredInts(args, kernel, "starts", starts); !s.isOk())
    return s;
  if (Status s = requiredInts(args, kernel, "limits", limits); !s.isOk())
    return s;
  if (Status s = requiredInts(args, kernel, "strides", steps); !s.isOk())
    return s;
  if (starts.rank() != shape.rank() || limits.rank() != shape.rank() ||
      steps.rank() != shape.rank())
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "starts %s, limits %s and strides %s need one entry "
                       "per dimension of '%s' %s",
                       shapeString(starts).c_str(), shapeString(limits).c_str(),
                       shapeString(steps).c_str(), operand,
                       shapeString(shape).c_str());
  SmallShape strides = contiguousStrides(shape);
  window = SliceWindow();
  for (int d = 0; d < shape.rank(); ++d) {
    if (steps[d] <= 0)
      return kernelError(StatusCode::kInvalidArgument, kernel,
                         "strides must be positive, got %s",
                         shapeString(steps).c_str());
    if (starts[d] < 0 || limits[d] < starts[d] || limits[d] > shape[d])
      return kernelError(StatusCode::kInvalidArgument, kernel,
                         "dimension %d: need 0 <= start <= limit <= %lld, got "
                         "[%lld, %lld)",
                         d, static_cast<long long>(shape[d]),
                         static_cast<long long>(starts[d]),
                         static_cast<long long>(limits[d]));
    // A step past the window's extent takes its first element only; so
    // bounded, neither the count nor the stride can overflow.
    int64_t extent = limits[d] - starts[d];
    int64_t step = std::min(steps[d], std::max<int64_t>(extent, 1));
    window.shape.push_back(extent == 0 ? 0 : 1 + (extent - 1) / step);
    window.strides.push_back(strides[d] * step);
    window.base += starts[d] * strides[d];
  }
  return Status::ok();
}

Status readAxisLayout(const KernelArgs &args, const char *kernel,
                      const SmallShape &shape, AxisLayout &layout) {
  int64_t axis = 0;
  if (Status s = requiredAxis(args, kernel, shape.rank(), axis); !s.isOk())
    return s;
  layout = AxisLayout();
  layout.length = shape[static_cast<int>(axis)];
  for (int d = static_cast<int>(axis) + 1; d < shape.rank(); ++d)
    layout.inner *= shape[d];
  int64_t block = layout.length * layout.inner;
  layout.outer = block == 0 ? 0 : shape.numElements() / block;
  return Status::ok();
}

Status readGatherLayout(const KernelArgs &args, const char *kernel,
                        const std::vector<int64_t> &dataShape,
                        const TensorView &indices, const char *what,
                        GatherLayout &layout, SmallShape &gathered) {
  SmallShape shape(dataShape);
  int64_t axis = 0;
  if (Status s = requiredAxis(args, kernel, shape.rank(), axis); !s.isOk())
    return s;
  int a = static_cast<int>(axis);
  gathered = SmallShape();
  bool fits = true;
  for (int d = 0; d < a; ++d)
    fits &= gathered.push_back(shape[d]);
  for (int64_t dim : indices.shape)
    fits &= gathered.push_back(dim);
  for (int d = a + 1; d < shape.rank(); ++d)
    fits &= gathered.push_back(shape[d]);
  if (!fits)
    return kernelError(StatusCode::kUnimplemented, kernel,
                       "the %s of gathering %s at %s along axis %d has "
                       "more than %d dimensions",
                       what, shapeString(dataShape).c_str(),
                       shapeString(indices.shape).c_str(), a, kMaxRank);
  layout = GatherLayout();
  layout.axis = a;
  layout.extent = shape[a];
  for (int d = 0; d < a; ++d)
    layout.outer *= shape[d];
  for (int d = a + 1; d < shape.rank(); ++d)
    layout.sliceSize *= shape[d];
  return Status::ok();
}

namespace {

template <typename Index>
Status checkIndexValues(const char *kernel, const Index *indices, int64_t count,
                        int64_t extent) {
  for (int64_t i = 0; i < count; ++i)
    if (indices[i] < -extent || indices[i] >= extent)
      return kernelError(StatusCode::kOutOfRange, kernel,
                         "index %lld (at position %lld of 'indices') is out "
                         "of range for an axis of size %lld",
                         static_cast<long long>(indices[i]),
                         static_cast<long long>(i),
                         static_cast<long long>(extent));
  return Status::ok();
}

} // namespace

Status checkIndices(const char *kernel, const TensorView &indices,
                    int64_t extent) {
  int64_t count = indices.numElements();
  if (indices.dtype == plan::I64)
    return checkIndexValues(kernel, indices.as<const int64_t>(), count, extent);
  return checkIndexValues(kernel, indices.as<const int32_t>(), count, extent);
}

Status readLayerNormAttributes(const KernelArgs &args, const char *kernel,
                               const SmallShape &shape, double &epsilon,
                               SmallShape &normalized) {
  int64_t axis = 0;
  if (Status s = requiredAxis(args, kernel, shape.rank(), axis); !s.isOk())
    return s;
  if (Status s = requiredFloat(args, kernel, "epsilon", epsilon); !s.isOk())
    return s;
  if (!(epsilon > 0))
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "epsilon must be positive, got %g", epsilon);
  normalized = SmallShape();
  for (int d = static_cast<int>(axis); d < shape.rank(); ++d)
    normalized.push_back(shape[d]);
  return Status::ok();
}

Status checkAttentionOperands(const char *kernel, const TensorView &query,
                              const TensorView &key, const TensorView &value,
                              const char *likeName, const TensorView &like,
                              AttentionDims &dims) {
  if (Status s = expectFloatDType(kernel, "query", query); !s.isOk())
    return s;
  for (auto [name, view] :
       {std::pair<const char *, const TensorView *>{"key", &key},
        {"value", &value},
        {likeName, &like}})
    if (Status s = expectSameDType(kernel, name, *view, "query", query);
        !s.isOk())
      return s;
  const std::vector<int64_t> &q = query.shape, &k = key.shape, &v = value.shape;
  size_t rank = q.size();
  if (rank < 2 || k.size() != rank || v.size() != rank)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "query %s, key %s and value %s must have the same "
                       "rank, at least 2",
                       shapeString(q).c_str(), shapeString(k).c_str(),
                       shapeString(v).c_str());
  for (size_t d = 0; d + 2 < rank; ++d)
    if (k[d] != q[d] || v[d] != q[d])
      return kernelError(StatusCode::kInvalidArgument, kernel,
                         "query %s, key %s and value %s must have the same "
                         "leading dimensions",
                         shapeString(q).c_str(), shapeString(k).c_str(),
                         shapeString(v).c_str());
  dims.queries = q[rank - 2];
  dims.headSize = q[rank - 1];
  dims.keys = k[rank - 2];
  dims.valueSize = v[rank - 1];
  if (k[rank - 1] != dims.headSize)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "query and key head sizes differ: %lld vs %lld",
                       static_cast<long long>(dims.headSize),
                       static_cast<long long>(k[rank - 1]));
  if (v[rank - 2] != dims.keys)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "key and value sequence lengths differ: %lld vs %lld",
                       static_cast<long long>(dims.keys),
                       static_cast<long long>(v[rank - 2]));
  dims.heads = 1;
  for (size_t d = 0; d + 2 < rank; ++d)
    dims.heads *= q[d];
  dims.groupHeads = std::max<int64_t>(dims.heads, 1);
  dims.query = AttentionRows::contiguous(dims.queries, dims.headSize);
  dims.key = AttentionRows::contiguous(dims.keys, dims.headSize);
  dims.value = AttentionRows::contiguous(dims.keys, dims.valueSize);
  dims.output = AttentionRows::contiguous(dims.queries, dims.valueSize);
  SmallShape resultShape(q);
  resultShape[static_cast<int>(rank) - 1] = dims.valueSize;
  return expectShape(kernel, likeName, like, resultShape);
}

Status readAttentionAttributes(const KernelArgs &args, const char *kernel,
                               AttentionDims &dims, double &scale) {
  if (Status s = requiredFloat(args, kernel, "scale", scale); !s.isOk())
    return s;
  if (Status s = optionalBool(args, kernel, "causal", false, dims.causal);
      !s.isOk())
    return s;
  if (dims.causal && dims.queries > dims.keys)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "a causal attention needs at least as many keys as "
                       "queries, got %lld queries and %lld keys",
                       static_cast<long long>(dims.queries),
                       static_cast<long long>(dims.keys));
  return Status::ok();
}

namespace {
/// The log-sum-exp `lse` of an attention over `query`: f32, the query's
/// shape without its last dimension.
Status checkAttentionLse(const char *kernel, const char *name,
                         const TensorView &lse, const TensorView &query) {
  if (Status s = expectDType(kernel, name, lse, plan::F32); !s.isOk())
    return s;
  SmallShape expected(query.shape);
  expected.resize(expected.rank() - 1);
  return expectShape(kernel, name, lse, expected);
}
} // namespace

Status checkAttentionForward(const KernelArgs &args, const char *kernel,
                             AttentionDims &dims, double &scale,
                             const TensorView *&lse) {
  lse = nullptr;
  bool withLse = args.outputs.size() >= 2;
  Status counted =
      withLse ? checkOperands(args, kernel, {"query", "key", "value"},
                              {"result", "lse"})
              : checkOperands(args, kernel, {"query", "key", "value"},
                              {"result"});
  if (!counted.isOk())
    return counted;
  const TensorView &q = args.inputs[0];
  if (Status s = checkAttentionOperands(kernel, q, args.inputs[1],
                                        args.inputs[2], "result",
                                        args.outputs[0], dims);
      !s.isOk())
    return s;
  if (withLse) {
    if (Status s = checkAttentionLse(kernel, "lse", args.outputs[1], q);
        !s.isOk())
      return s;
    lse = &args.outputs[1];
  }
  return readAttentionAttributes(args, kernel, dims, scale);
}

Status checkAttentionBackward(const KernelArgs &args, const char *kernel,
                              AttentionDims &dims, double &scale,
                              const TensorView *&output,
                              const TensorView *&lse) {
  output = lse = nullptr;
  bool saved = args.inputs.size() >= 5;
  Status counted =
      saved ? checkOperands(args, kernel,
                            {"query", "key", "value", "grad", "output", "lse"},
                            {"query_grad", "key_grad", "value_grad"})
            : checkOperands(args, kernel, {"query", "key", "value", "grad"},
                            {"query_grad", "key_grad", "value_grad"});
  if (!counted.isOk())
    return counted;
  const TensorView &q = args.inputs[0], &k = args.inputs[1],
                   &v = args.inputs[2], &grad = args.inputs[3];
  if (Status s = checkAttentionOperands(kernel, q, k, v, "grad", grad, dims);
      !s.isOk())
    return s;
  for (auto [name, view, like, likeName] :
       {std::tuple<const char *, const TensorView *, const TensorView *,
                   const char *>{"query_grad", &args.outputs[0], &q, "query"},
        {"key_grad", &args.outputs[1], &k, "key"},
        {"value_grad", &args.outputs[2], &v, "value"}})
    if (Status s = expectLike(kernel, name, *view, likeName, *like); !s.isOk())
      return s;
  if (saved) {
    if (Status s = expectLike(kernel, "output", args.inputs[4], "grad", grad);
        !s.isOk())
      return s;
    if (Status s = checkAttentionLse(kernel, "lse", args.inputs[5], q);
        !s.isOk())
      return s;
    output = &args.inputs[4];
    lse = &args.inputs[5];
  }
  return readAttentionAttributes(args, kernel, dims, scale);
}

Status checkAttentionGradHeadSizes(const char *kernel, const AttentionDims &dims) {
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"head size", dims.headSize},
        {"value head size", dims.valueSize}})
    if (value > kAttentionGradMaxHeadSize)
      return kernelError(StatusCode::kUnimplemented, kernel,
                         "%s %lld exceeds the %lld this kernel handles", what,
                         static_cast<long long>(value),
                         static_cast<long long>(kAttentionGradMaxHeadSize));
  return Status::ok();
}

namespace {
/// Checks the packed [B, T, 3, H, d] `qkv` and `like` ([B, T, H, d], its
/// type) and lays the attention out in them.
Status checkQkvOperands(const char *kernel, const TensorView &qkv,
                        const char *likeName, const TensorView &like,
                        AttentionDims &dims) {
  if (Status s = expectFloatDType(kernel, "qkv", qkv); !s.isOk())
    return s;
  if (Status s = expectSameDType(kernel, likeName, like, "qkv", qkv);
      !s.isOk())
    return s;
  const std::vector<int64_t> &shape = qkv.shape;
  if (shape.size() != 5 || shape[2] != 3)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "'qkv' must be [B, T, 3, H, d] (the query, key and "
                       "value heads of one projection), got %s",
                       shapeString(shape).c_str());
  int64_t batch = shape[0], length = shape[1], heads = shape[3],
          size = shape[4];
  SmallShape expected;
  for (int64_t dim : {batch, length, heads, size})
    expected.push_back(dim);
  if (Status s = expectShape(kernel, likeName, like, expected); !s.isOk())
    return s;
  dims.heads = batch * heads;
  dims.groupHeads = std::max<int64_t>(heads, 1);
  dims.queries = dims.keys = length;
  dims.headSize = dims.valueSize = size;
  int64_t width = heads * size;
  for (auto [rows, index] : {std::pair{&dims.query, 0}, std::pair{&dims.key, 1},
                             std::pair{&dims.value, 2}})
    *rows = {index * width, length * 3 * width, size, 3 * width};
  dims.output = {0, length * width, size, width};
  return Status::ok();
}

/// The [B, H, T] log-sum-exp of a qkv_attention over `qkv`.
Status checkQkvLse(const char *kernel, const TensorView &lse,
                   const TensorView &qkv) {
  if (Status s = expectDType(kernel, "lse", lse, plan::F32); !s.isOk())
    return s;
  SmallShape expected;
  for (int64_t dim : {qkv.shape[0], qkv.shape[3], qkv.shape[1]})
    expected.push_back(dim);
  return expectShape(kernel, "lse", lse, expected);
}
} // namespace

Status checkQkvAttentionForward(const KernelArgs &args, const char *kernel,
                                AttentionDims &dims, double &scale,
                                const TensorView *&lse) {
  lse = nullptr;
  bool withLse = args.outputs.size() >= 2;
  Status counted =
      withLse ? checkOperands(args, kernel, {"qkv"}, {"result", "lse"})
              : checkOperands(args, kernel, {"qkv"}, {"result"});
  if (!counted.isOk())
    return counted;
  const TensorView &qkv = args.inputs[0];
  if (Status s =
          checkQkvOperands(kernel, qkv, "result", args.outputs[0], dims);
      !s.isOk())
    return s;
  if (withLse) {
    if (Status s = checkQkvLse(kernel, args.outputs[1], qkv); !s.isOk())
      return s;
    lse = &args.outputs[1];
  }
  return readAttentionAttributes(args, kernel, dims, scale);
}

Status checkQkvAttentionBackward(const KernelArgs &args, const char *kernel,
                                 AttentionDims &dims, double &scale,
                                 const TensorView *&output,
                                 const TensorView *&lse) {
  output = lse = nullptr;
  bool saved = args.inputs.size() >= 3;
  Status counted =
      saved ? checkOperands(args, kernel, {"qkv", "grad", "output", "lse"},
                            {"qkv_grad"})
            : checkOperands(args, kernel, {"qkv", "grad"}, {"qkv_grad"});
  if (!counted.isOk())
    return counted;
  const TensorView &qkv = args.inputs[0], &grad = args.inputs[1];
  if (Status s = checkQkvOperands(kernel, qkv, "grad", grad, dims); !s.isOk())
    return s;
  if (Status s = expectLike(kernel, "qkv_grad", args.outputs[0], "qkv", qkv);
      !s.isOk())
    return s;
  if (saved) {
    if (Status s = expectLike(kernel, "output", args.inputs[2], "grad", grad);
        !s.isOk())
      return s;
    if (Status s = checkQkvLse(kernel, args.inputs[3], qkv); !s.isOk())
      return s;
    output = &args.inputs[2];
    lse = &args.inputs[3];
  }
  return readAttentionAttributes(args, kernel, dims, scale);
}

Status checkClassLossShapes(const char *kernel, const TensorView &input,
                            const TensorView &labels, SmallShape &labelShape) {
  SmallShape shape(input.shape);
  if (shape.rank() < 2)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "'input' must be [N, C] or [N, C, d1, ...], got %s",
                       shapeString(input.shape).c_str());
  labelShape = SmallShape();
  labelShape.push_back(shape[0]);
  for (int d = 2; d < shape.rank(); ++d)
    labelShape.push_back(shape[d]);
  return expectShape(kernel, "labels", labels, labelShape);
}

Status readClassLossAttributes(const KernelArgs &args, const char *kernel,
                               Reduction &reduction, bool &hasIgnore,
                               int64_t &ignoreIndex) {
  const char *name = nullptr;
  if (Status s = optionalString(args, kernel, "reduction", "mean", name);
      !s.isOk())
    return s;
  if (std::strcmp(name, "mean") == 0)
    reduction = Reduction::Mean;
  else if (std::strcmp(name, "sum") == 0)
    reduction = Reduction::Sum;
  else if (std::strcmp(name, "none") == 0)
    reduction = Reduction::None;
  else
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "reduction must be \"mean\", \"sum\" or \"none\", got "
                       "\"%s\"",
                       name);
  // Without ignore_index every label counts (ONNX); torch's -100 default is
  // the importer's business.
  hasIgnore = findAttr(args, "ignore_index") != nullptr;
  return optionalInt(args, kernel, "ignore_index", 0, ignoreIndex);
}

namespace {

template <typename Label>
Status checkLabelValues(const char *kernel, const Label *labels, int64_t count,
                        int64_t classes, bool hasIgnore, int64_t ignoreIndex) {
  for (int64_t i = 0; i < count; ++i) {
    int64_t label = labels[i];
    if (hasIgnore && label == ignoreIndex)
      continue;
    if (label < 0 || label >= classes)
      return kernelError(StatusCode::kOutOfRange, kernel,
                         "label %lld (at position %lld of 'labels') is out "
                         "of range for %lld classes",
                         static_cast<long long>(label),
                         static_cast<long long>(i),
                         static_cast<long long>(classes));
  }
  return Status::ok();
}

} // namespace

Status checkLabels(const char *kernel, const TensorView &labels,
                   int64_t classes, bool hasIgnore, int64_t ignoreIndex) {
  int64_t count = labels.numElements();
  if (labels.dtype == plan::I64)
    return checkLabelValues(kernel, labels.as<const int64_t>(), count, classes,
                            hasIgnore, ignoreIndex);
  return checkLabelValues(kernel, labels.as<const int32_t>(), count, classes,
                          hasIgnore, ignoreIndex);
}

//===----------------------------------------------------------------------===//
// Element conversions
//===----------------------------------------------------------------------===//

uint16_t floatToHalf(float value) { return toHalf(value).bits; }
float halfToFloat(uint16_t bits) { return toFloat(Half{bits}); }
uint16_t floatToBFloat16(float value) { return toBFloat16(value).bits; }
float bfloat16ToFloat(uint16_t bits) { return toFloat(BFloat16{bits}); }

} // namespace zcc::cpu::detail
