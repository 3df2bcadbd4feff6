//===- Elementwise.cpp - Element-wise kernels -----------------------------===//
//
// Broadcasting arithmetic and comparisons, where, cast, is_nan and the unary
// activations. Float math is f32 in memory; transcendental functions are
// evaluated in double and rounded once, so the reference is as close to the
// exact result as one rounding allows.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/KernelSupport.h"
#include "kernels/cpu/Kernels.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace zcc::cpu::kernels {

using namespace detail;

namespace {

//===----------------------------------------------------------------------===//
// Broadcasting binary arithmetic
//===----------------------------------------------------------------------===//

enum class BinaryKind { Add, Sub, Mul, Div, Pow, Max, Min };

/// Integers wrap on overflow (as ONNX Runtime and torch do) instead of
/// invoking undefined behaviour.
template <typename T> T wrapping(uint64_t value) {
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(value));
}

template <BinaryKind Kind, typename T> T applyBinary(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if constexpr (Kind == BinaryKind::Add)
      return a + b;
    if constexpr (Kind == BinaryKind::Sub)
      return a - b;
    if constexpr (Kind == BinaryKind::Mul)
      return a * b;
    if constexpr (Kind == BinaryKind::Div)
      return a / b;
    if constexpr (Kind == BinaryKind::Pow)
      return static_cast<T>(
          std::pow(static_cast<double>(a), static_cast<double>(b)));
    // max and min propagate NaN, as numpy.maximum and torch.maximum do.
    if constexpr (Kind == BinaryKind::Max)
      return std::isnan(a) || std::isnan(b) ? a + b : (a < b ? b : a);
    if constexpr (Kind == BinaryKind::Min)
      return std::isnan(a) || std::isnan(b) ? a + b : (b < a ? b : a);
  } else {
    using U = std::make_unsigned_t<T>;
    if constexpr (Kind == BinaryKind::Add)
      return wrapping<T>(static_cast<U>(a) + static_cast<U>(b));
    if constexpr (Kind == BinaryKind::Sub)
      return wrapping<T>(static_cast<U>(a) - static_cast<U>(b));
    if constexpr (Kind == BinaryKind::Mul)
      return wrapping<T>(static_cast<U>(a) * static_cast<U>(b));
    if constexpr (Kind == BinaryKind::Max)
      return a < b ? b : a;
    if constexpr (Kind == BinaryKind::Min)
      return b < a ? b : a;
    static_assert(Kind != BinaryKind::Div && Kind != BinaryKind::Pow,
                  "integer division and power are not supported");
  }
  return T();
}

template <BinaryKind Kind, typename T>
void binaryLoop(const TensorView &lhs, const TensorView &rhs,
                const TensorView &out) {
  const T *a = lhs.as<const T>();
  const T *b = rhs.as<const T>();
  T *result = out.as<T>();
  SmallShape shapes[2] = {SmallShape(lhs.shape), SmallShape(rhs.shape)};
  forEachBroadcast(
      SmallShape(out.shape), shapes, [&](int64_t i, const int64_t *offsets) {
        result[i] = applyBinary<Kind, T>(a[offsets[0]], b[offsets[1]]);
      });
}

/// The checks every broadcasting op shares: operands of one element type
/// whose broadcast shape is the result's.
Status checkBroadcastOperands(const char *kernel, const TensorView &lhs,
                              const TensorView &rhs, const TensorView &out) {
  if (Status s = expectSameDType(kernel, "rhs", rhs, "lhs", lhs); !s.isOk())
    return s;
  SmallShape shape;
  if (!broadcastShapes(SmallShape(lhs.shape), SmallShape(rhs.shape), shape))
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "operand shapes %s and %s are not broadcast-compatible",
                       shapeString(lhs.shape).c_str(),
                       shapeString(rhs.shape).c_str());
  return expectShape(kernel, "result", out, shape);
}

template <BinaryKind Kind>
Status binary(const KernelArgs &args, const char *kernel) {
  if (Status s = checkOperands(args, kernel, {"lhs", "rhs"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1],
                   &out = args.outputs[0];
  if (Status s = checkBroadcastOperands(kernel, lhs, rhs, out); !s.isOk())
    return s;
  if (Status s = expectSameDType(kernel, "result", out, "lhs", lhs); !s.isOk())
    return s;
  // Division and power are float-only: integer division by zero would trap.
  constexpr bool kIntegers = Kind != BinaryKind::Div && Kind != BinaryKind::Pow;
  switch (lhs.dtype) {
  case plan::F32:
    binaryLoop<Kind, float>(lhs, rhs, out);
    return Status::ok();
  case plan::I64:
    if constexpr (kIntegers) {
      binaryLoop<Kind, int64_t>(lhs, rhs, out);
      return Status::ok();
    }
    break;
  case plan::I32:
    if constexpr (kIntegers) {
      binaryLoop<Kind, int32_t>(lhs, rhs, out);
      return Status::ok();
    }
    break;
  default:
    break;
  }
  return unsupportedDType(kernel, "lhs", lhs,
                          kIntegers ? "f32, i64 and i32" : "f32");
}

//===----------------------------------------------------------------------===//
// Comparisons
//===----------------------------------------------------------------------===//

enum class CompareKind { Equal, Less, Greater };

template <CompareKind Kind, typename T>
void compareLoop(const TensorView &lhs, const TensorView &rhs,
                 const TensorView &out) {
  const T *a = lhs.as<const T>();
  const T *b = rhs.as<const T>();
  uint8_t *result = out.as<uint8_t>();
  SmallShape shapes[2] = {SmallShape(lhs.shape), SmallShape(rhs.shape)};
  forEachBroadcast(SmallShape(out.shape), shapes,
                   [&](int64_t i, const int64_t *offsets) {
                     T x = a[offsets[0]], y = b[offsets[1]];
                     bool value = Kind == CompareKind::Equal  ? x == y
                                  : Kind == CompareKind::Less ? x < y
                                                              : y < x;
                     result[i] = value ? 1 : 0;
                   });
}

/// Reads bool elements as 0 or 1, whatever other non-zero byte they hold.
struct BoolByte {
  uint8_t raw;
  bool operator==(BoolByte other) const {
    return (raw != 0) == (other.raw != 0);
  }
  bool operator<(BoolByte other) const { return (raw != 0) < (other.raw != 0); }
};

template <CompareKind Kind>
Status compare(const KernelArgs &args, const char *kernel) {
  if (Status s = checkOperands(args, kernel, {"lhs", "rhs"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1],
                   &out = args.outputs[0];
  if (Status s = checkBroadcastOperands(kernel, lhs, rhs, out); !s.isOk())
    return s;
  if (Status s = expectDType(kernel, "result", out, plan::BOOL); !s.isOk())
    return s;
  switch (lhs.dtype) {
  case plan::F32:
    compareLoop<Kind, float>(lhs, rhs, out);
    return Status::ok();
  case plan::F64:
    compareLoop<Kind, double>(lhs, rhs, out);
    return Status::ok();
  case plan::I64:
    compareLoop<Kind, int64_t>(lhs, rhs, out);
    return Status::ok();
  case plan::I32:
    compareLoop<Kind, int32_t>(lhs, rhs, out);
    return Status::ok();
  case plan::I8:
    compareLoop<Kind, int8_t>(lhs, rhs, out);
    return Status::ok();
  case plan::BOOL:
    compareLoop<Kind, BoolByte>(lhs, rhs, out);
    return Status::ok();
  default:
    return unsupportedDType(kernel, "lhs", lhs,
                            "f32, f64, i64, i32, i8 and bool");
  }
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

/// Converts one value with ONNX Cast's rules. Float to integer truncates
/// toward zero; out-of-range values saturate and NaN becomes 0 where ONNX
/// leaves the result undefined, so the reference never relies on undefined
/// behaviour.
template <typename To, typename From> To convertValue(From value) {
  if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else if constexpr (std::is_integral_v<To> &&
                       std::is_floating_point_v<From>) {
    if (std::isnan(value))
      return 0;
    // Both limits are powers of two (minus one for the maximum, which then
    // rounds up to the power of two): the comparisons are exact.
    if (value <= static_cast<From>(std::numeric_limits<To>::min()))
      return std::numeric_limits<To>::min();
    if (value >= static_cast<From>(std::numeric_limits<To>::max()))
      return std::numeric_limits<To>::max();
    return static_cast<To>(value);
  } else if constexpr (std::is_integral_v<To> && std::is_integral_v<From>) {
    // Narrowing keeps the low bits (two's complement), as numpy does.
    return static_cast<To>(
        static_cast<std::make_unsigned_t<To>>(static_cast<uint64_t>(value)));
  } else {
    // To a float type: the conversion rounds to nearest even.
    return static_cast<To>(value);
  }
}

/// Element types as the cast loops read them: bool as a byte that may hold
/// any non-zero value.
template <typename From> From loadElement(const void *data, int64_t i) {
  return static_cast<const From *>(data)[i];
}
template <> bool loadElement<bool>(const void *data, int64_t i) {
  return static_cast<const uint8_t *>(data)[i] != 0;
}

template <typename To> void storeElement(void *data, int64_t i, To value) {
  static_cast<To *>(data)[i] = value;
}
template <> void storeElement<bool>(void *data, int64_t i, bool value) {
  static_cast<uint8_t *>(data)[i] = value ? 1 : 0;
}

template <typename From, typename To>
void castLoop(const TensorView &in, const TensorView &out) {
  for (int64_t i = 0, n = in.numElements(); i < n; ++i)
    storeElement<To>(out.data, i,
                     convertValue<To>(loadElement<From>(in.data, i)));
}

template <typename From>
bool castFrom(const TensorView &in, const TensorView &out) {
  switch (out.dtype) {
  case plan::F32:
    castLoop<From, float>(in, out);
    return true;
  case plan::F64:
    castLoop<From, double>(in, out);
    return true;
  case plan::I64:
    castLoop<From, int64_t>(in, out);
    return true;
  case plan::I32:
    castLoop<From, int32_t>(in, out);
    return true;
  case plan::I8:
    castLoop<From, int8_t>(in, out);
    return true;
  case plan::BOOL:
    castLoop<From, bool>(in, out);
    return true;
  default:
    return false;
  }
}

//===----------------------------------------------------------------------===//
// Unary float kernels
//===----------------------------------------------------------------------===//

enum class UnaryKind {
  Neg,
  Exp,
  Sqrt,
  Tanh,
  Relu,
  Sigmoid,
  Log,
  Erf,
  Reciprocal,
  GeluErf,
  GeluTanh
};

template <UnaryKind Kind> float applyUnary(float x) {
  double v = x;
  if constexpr (Kind == UnaryKind::Neg)
    return -x;
  if constexpr (Kind == UnaryKind::Exp)
    return static_cast<float>(std::exp(v));
  if constexpr (Kind == UnaryKind::Sqrt)
    return std::sqrt(x); // Correctly rounded in f32 already.
  if constexpr (Kind == UnaryKind::Tanh)
    return static_cast<float>(std::tanh(v));
  if constexpr (Kind == UnaryKind::Relu)
    return x > 0.0f || std::isnan(x) ? x : 0.0f; // NaN passes, as in torch.
  if constexpr (Kind == UnaryKind::Sigmoid) {
    // Either branch keeps exp's argument non-positive: no overflow.
    if (v >= 0)
      return static_cast<float>(1.0 / (1.0 + std::exp(-v)));
    double e = std::exp(v);
    return static_cast<float>(e / (1.0 + e));
  }
  if constexpr (Kind == UnaryKind::Log)
    return static_cast<float>(std::log(v));
  if constexpr (Kind == UnaryKind::Erf)
    return static_cast<float>(std::erf(v));
  if constexpr (Kind == UnaryKind::Reciprocal)
    return 1.0f / x;
  if constexpr (Kind == UnaryKind::GeluErf) {
    constexpr double kSqrtHalf = 0.7071067811865476;
    return static_cast<float>(0.5 * v * (1.0 + std::erf(v * kSqrtHalf)));
  }
  if constexpr (Kind == UnaryKind::GeluTanh) {
    constexpr double kSqrt2OverPi = 0.7978845608028654;
    return static_cast<float>(
        0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v))));
  }
  return x;
}

/// Checks a unary float kernel's operands: one f32 input and a result of the
/// same type (SameOperandsAndResultType).
Status checkUnaryFloat(const KernelArgs &args, const char *kernel) {
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.dtype != plan::F32)
    return unsupportedDType(kernel, "input", in, "f32");
  if (Status s = expectDType(kernel, "result", out, plan::F32); !s.isOk())
    return s;
  return expectShape(kernel, "result", out, SmallShape(in.shape));
}

template <UnaryKind Kind> void unaryLoop(const KernelArgs &args) {
  const float *in = args.inputs[0].as<const float>();
  float *out = args.outputs[0].as<float>();
  for (int64_t i = 0, n = args.inputs[0].numElements(); i < n; ++i)
    out[i] = applyUnary<Kind>(in[i]);
}

template <UnaryKind Kind>
Status unary(const KernelArgs &args, const char *kernel) {
  if (Status s = checkUnaryFloat(args, kernel); !s.isOk())
    return s;
  unaryLoop<Kind>(args);
  return Status::ok();
}

} // namespace

Status add(const KernelArgs &args) {
  return binary<BinaryKind::Add>(args, "add");
}
Status sub(const KernelArgs &args) {
  return binary<BinaryKind::Sub>(args, "sub");
}
Status mul(const KernelArgs &args) {
  return binary<BinaryKind::Mul>(args, "mul");
}
Status div(const KernelArgs &args) {
  return binary<BinaryKind::Div>(args, "div");
}
Status pow(const KernelArgs &args) {
  return binary<BinaryKind::Pow>(args, "pow");
}
Status max(const KernelArgs &args) {
  return binary<BinaryKind::Max>(args, "max");
}
Status min(const KernelArgs &args) {
  return binary<BinaryKind::Min>(args, "min");
}

Status equal(const KernelArgs &args) {
  return compare<CompareKind::Equal>(args, "equal");
}
Status less(const KernelArgs &args) {
  return compare<CompareKind::Less>(args, "less");
}
Status greater(const KernelArgs &args) {
  return compare<CompareKind::Greater>(args, "greater");
}

Status where(const KernelArgs &args) {
  const char *kernel = "where";
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
  // The branches are selected by bytes, so any element type works.
  size_t bytes = dtypeBytes(out.dtype);
  const uint8_t *c = cond.as<const uint8_t>();
  const char *t = onTrue.as<const char>();
  const char *f = onFalse.as<const char>();
  char *result = out.as<char>();
  forEachBroadcast(shape, shapes, [&](int64_t i, const int64_t *offsets) {
    const char *source =
        c[offsets[0]] ? t + offsets[1] * bytes : f + offsets[2] * bytes;
    copyElement(result + i * bytes, source, bytes);
  });
  return Status::ok();
}

Status cast(const KernelArgs &args) {
  const char *kernel = "cast";
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (Status s = expectShape(kernel, "result", out, SmallShape(in.shape));
      !s.isOk())
    return s;
  int64_t n = in.numElements();
  if (in.dtype == out.dtype) {
    if (n > 0 && in.data != out.data)
      std::memmove(out.data, in.data, n * dtypeBytes(in.dtype));
    return Status::ok();
  }
  // The 16-bit float types convert through f32 only, the one pairing the
  // compiler emits (mixed precision around f32 master weights).
  if (in.dtype == plan::F16 && out.dtype == plan::F32) {
    for (int64_t i = 0; i < n; ++i)
      out.as<float>()[i] = halfToFloat(in.as<const uint16_t>()[i]);
    return Status::ok();
  }
  if (in.dtype == plan::BF16 && out.dtype == plan::F32) {
    for (int64_t i = 0; i < n; ++i)
      out.as<float>()[i] = bfloat16ToFloat(in.as<const uint16_t>()[i]);
    return Status::ok();
  }
  if (in.dtype == plan::F32 && out.dtype == plan::F16) {
    for (int64_t i = 0; i < n; ++i)
      out.as<uint16_t>()[i] = floatToHalf(in.as<const float>()[i]);
    return Status::ok();
  }
  if (in.dtype == plan::F32 && out.dtype == plan::BF16) {
    for (int64_t i = 0; i < n; ++i)
      out.as<uint16_t>()[i] = floatToBFloat16(in.as<const float>()[i]);
    return Status::ok();
  }
  bool done = false;
  switch (in.dtype) {
  case plan::F32:
    done = castFrom<float>(in, out);
    break;
  case plan::F64:
    done = castFrom<double>(in, out);
    break;
  case plan::I64:
    done = castFrom<int64_t>(in, out);
    break;
  case plan::I32:
    done = castFrom<int32_t>(in, out);
    break;
  case plan::I8:
    done = castFrom<int8_t>(in, out);
    break;
  case plan::BOOL:
    done = castFrom<bool>(in, out);
    break;
  default:
    break;
  }
  if (done)
    return Status::ok();
  return kernelError(StatusCode::kUnimplemented, kernel,
                     "cannot cast %s to %s; casts run between f32, f64, i64, "
                     "i32, i8 and bool, and between f16 or bf16 and f32",
                     dtypeName(in.dtype), dtypeName(out.dtype));
}

Status isNan(const KernelArgs &args) {
  const char *kernel = "is_nan";
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (Status s = expectDType(kernel, "result", out, plan::BOOL); !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "result", out, SmallShape(in.shape));
      !s.isOk())
    return s;
  uint8_t *result = out.as<uint8_t>();
  int64_t n = in.numElements();
  switch (in.dtype) {
  case plan::F32:
    for (int64_t i = 0; i < n; ++i)
      result[i] = std::isnan(in.as<const float>()[i]) ? 1 : 0;
    return Status::ok();
  case plan::F64:
    for (int64_t i = 0; i < n; ++i)
      result[i] = std::isnan(in.as<const double>()[i]) ? 1 : 0;
    return Status::ok();
  case plan::F16:
    // All exponent bits set and a non-zero mantissa.
    for (int64_t i = 0; i < n; ++i)
      result[i] = (in.as<const uint16_t>()[i] & 0x7fff) > 0x7c00 ? 1 : 0;
    return Status::ok();
  case plan::BF16:
    for (int64_t i = 0; i < n; ++i)
      result[i] = (in.as<const uint16_t>()[i] & 0x7fff) > 0x7f80 ? 1 : 0;
    return Status::ok();
  default:
    return unsupportedDType(kernel, "input", in, "f32, f64, f16 and bf16");
  }
}

Status neg(const KernelArgs &args) {
  return unary<UnaryKind::Neg>(args, "neg");
}
Status exp(const KernelArgs &args) {
  return unary<UnaryKind::Exp>(args, "exp");
}
Status sqrt(const KernelArgs &args) {
  return unary<UnaryKind::Sqrt>(args, "sqrt");
}
Status tanh(const KernelArgs &args) {
  return unary<UnaryKind::Tanh>(args, "tanh");
}
Status relu(const KernelArgs &args) {
  return unary<UnaryKind::Relu>(args, "relu");
}
Status sigmoid(const KernelArgs &args) {
  return unary<UnaryKind::Sigmoid>(args, "sigmoid");
}
Status log(const KernelArgs &args) {
  return unary<UnaryKind::Log>(args, "log");
}
Status erf(const KernelArgs &args) {
  return unary<UnaryKind::Erf>(args, "erf");
}
Status reciprocal(const KernelArgs &args) {
  return unary<UnaryKind::Reciprocal>(args, "reciprocal");
}

Status gelu(const KernelArgs &args) {
  const char *kernel = "gelu";
  if (Status s = checkUnaryFloat(args, kernel); !s.isOk())
    return s;
  const char *approximate = nullptr;
  if (Status s =
          optionalString(args, kernel, "approximate", "none", approximate);
      !s.isOk())
    return s;
  if (std::strcmp(approximate, "none") == 0)
    unaryLoop<UnaryKind::GeluErf>(args);
  else if (std::strcmp(approximate, "tanh") == 0)
    unaryLoop<UnaryKind::GeluTanh>(args);
  else
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "approximate must be \"none\" or \"tanh\", got \"%s\"",
                       approximate);
  return Status::ok();
}

} // namespace zcc::cpu::kernels
