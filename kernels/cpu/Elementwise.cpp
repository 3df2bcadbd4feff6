//===- Elementwise.cpp - Element-wise kernels -----------------------------===//
//
// Broadcasting arithmetic and comparisons, where, cast, is_nan and the unary
// activations. Float kernels are templates over the storage type T (f32,
// f64, f16, bf16) and compute in Compute<T>: f32 for the 16-bit types, which
// are rounded once on store. Transcendental functions are evaluated in double
// and rounded once to Compute<T>, so the reference is as close to the exact
// result as one rounding allows.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/DropoutMask.h"
#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/Kernels.h"

#include <cmath>
#include <limits>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
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

/// Elements of storage type T, computed in Compute<T> (integers as they
/// are).
template <BinaryKind Kind, typename T>
void binaryLoop(const TensorView &lhs, const TensorView &rhs,
                const TensorView &out) {
  const T *a = lhs.as<const T>();
  const T *b = rhs.as<const T>();
  T *result = out.as<T>();
  SmallShape shapes[2] = {SmallShape(lhs.shape), SmallShape(rhs.shape)};
  forEachBroadcast(SmallShape(out.shape), shapes,
                   [&](int64_t i, const int64_t *offsets) {
                     result[i] = store<T>(applyBinary<Kind, Compute<T>>(
                         load(a[offsets[0]]), load(b[offsets[1]])));
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
  if (isFloatDType(lhs.dtype))
    return dispatchFloat(kernel, "lhs", lhs, [&](auto tag) {
      binaryLoop<Kind, decltype(tag)>(lhs, rhs, out);
    });
  // Division and power are float-only: integer division by zero would trap.
  constexpr bool kIntegers = Kind != BinaryKind::Div && Kind != BinaryKind::Pow;
  switch (lhs.dtype) {
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
                          kIntegers ? "f32, f64, f16, bf16, i64 and i32"
                                    : kFloatDTypeNames);
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
  forEachBroadcast(
      SmallShape(out.shape), shapes, [&](int64_t i, const int64_t *offsets) {
        Compute<T> x = load(a[offsets[0]]), y = load(b[offsets[1]]);
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
  case plan::F16:
    compareLoop<Kind, Half>(lhs, rhs, out);
    return Status::ok();
  case plan::BF16:
    compareLoop<Kind, BFloat16>(lhs, rhs, out);
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
                            "f32, f64, f16, bf16, i64, i32, i8 and bool");
  }
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

template <typename T>
constexpr bool kIsHalfWidth =
    std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// `value` rounded toward zero to float, with the lowest mantissa bit set
/// when that dropped anything (rounding to odd). Float keeps 13 or more bits
/// beyond f16 and bf16 (and a finer grid among the subnormals), so rounding
/// the result once more to either type rounds `value` correctly: the odd bit
/// stands for everything dropped and keeps a value just off a tie from
/// rounding as the tie would.
float roundToOddFloat(double value) {
  float rounded = static_cast<float>(value);
  if (!std::isfinite(value) || static_cast<double>(rounded) == value)
    return rounded;
  if (std::fabs(static_cast<double>(rounded)) > std::fabs(value))
    rounded = std::nextafter(rounded, 0.0f); // Also turns infinity into max.
  return bitsFloat(floatBits(rounded) | 1);
}

/// The same for an integer, which may have more significant bits than the
/// double that would otherwise carry it.
float roundToOddFloat(int64_t value) {
  uint64_t magnitude = value < 0 ? 0 - static_cast<uint64_t>(value)
                                 : static_cast<uint64_t>(value);
  int shift = 0;
  while ((magnitude >> shift) >= (uint64_t(1) << 24))
    ++shift;
  uint64_t kept = magnitude >> shift;
  if ((kept << shift) != magnitude)
    kept |= 1;
  // Exact: kept has at most 24 bits and the scale is a power of two.
  float result = std::ldexp(static_cast<float>(kept), shift);
  return value < 0 ? -result : result;
}

/// Converts one value with ONNX Cast's rules. `value` is what the cast loop
/// read: f16 and bf16 arrive as float, bool as bool. Float to integer
/// truncates toward zero; out-of-range values saturate and NaN becomes 0
/// where ONNX leaves the result undefined, so the reference never relies on
/// undefined behaviour. Every conversion to a float type rounds once, to
/// nearest even.
template <typename To, typename From> To convertValue(From value) {
  if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else if constexpr (kIsHalfWidth<To>) {
    if constexpr (std::is_same_v<From, float>)
      return store<To>(value);
    else if constexpr (std::is_same_v<From, double>)
      return store<To>(roundToOddFloat(value));
    else
      return store<To>(roundToOddFloat(static_cast<int64_t>(value)));
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
    // To f32 or f64: the conversion rounds to nearest even.
    return static_cast<To>(value);
  }
}

/// Reads element i as the cast converts it: f16 and bf16 as float, bool as
/// a byte that is true when non-zero.
template <typename From> auto loadElement(const void *data, int64_t i) {
  if constexpr (std::is_same_v<From, bool>)
    return static_cast<const uint8_t *>(data)[i] != 0;
  else
    return load(static_cast<const From *>(data)[i]);
}

template <typename To> void storeElement(void *data, int64_t i, To value) {
  if constexpr (std::is_same_v<To, bool>)
    static_cast<uint8_t *>(data)[i] = value ? 1 : 0;
  else
    static_cast<To *>(data)[i] = value;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/// f32 to f16 eight at a time with the F16C conversion (round to nearest
/// even, as toHalf): the host's cast of offloaded fp32 parameters to their
/// fp16 copies after each update is over the whole model. A block holding a
/// NaN goes through toHalf, whose NaN bits (sign | 0x7e00) F16C's
/// payload-keeping NaNs would not match. Returns the elements converted.
__attribute__((target("avx,f16c"))) int64_t floatsToHalfF16c(const float *in, Half *out,
                                                              int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 value = _mm256_loadu_ps(in + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(value, value, _CMP_UNORD_Q)) != 0) {
      for (int64_t j = i; j < i + 8; ++j)
        out[j] = toHalf(in[j]);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i),
                     _mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}

/// f16 to f32 eight at a time (exact, as toFloat; NaNs stay NaNs).
__attribute__((target("avx,f16c"))) int64_t halvesToFloatF16c(const Half *in, float *out,
                                                              int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i *>(in + i))));
  return i;
}

bool hasF16c() {
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
}

/// f32 to bf16 eight at a time: toBFloat16's round to nearest even in
/// 32-bit integer lanes (bits + 0x7fff + the kept part's lowest bit, then
/// the high half). A block holding a NaN goes through toBFloat16, which
/// quiets it. Returns the elements converted.
__attribute__((target("avx2"))) int64_t floatsToBFloat16Avx2(const float *in, BFloat16 *out,
                                                              int64_t n) {
  const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 value = _mm256_loadu_ps(in + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(value, value, _CMP_UNORD_Q)) != 0) {
      for (int64_t j = i; j < i + 8; ++j)
        out[j] = toBFloat16(in[j]);
      continue;
    }
    __m256i bits = _mm256_castps_si256(value);
    __m256i rounding = _mm256_add_epi32(half, _mm256_and_si256(_mm256_srli_epi32(bits, 16), one));
    __m256i high = _mm256_srli_epi32(_mm256_add_epi32(bits, rounding), 16);
    // Lanes 0-3 and 4-7 packed to 16 bits (each below 2^16, so no
    // saturation), then the two 64-bit halves that hold them side by side.
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(high, high), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i), _mm256_castsi256_si128(packed));
  }
  return i;
}

bool hasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

template <typename From, typename To> void castLoop(const void *in, void *out, int64_t n) {
  // The blocks of eight the processor converts, then the scalar code for
  // the rest.
  int64_t done = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if constexpr (std::is_same_v<From, float> && std::is_same_v<To, Half>) {
    if (hasF16c())
      done = floatsToHalfF16c(static_cast<const float *>(in), static_cast<Half *>(out), n);
  } else if constexpr (std::is_same_v<From, Half> && std::is_same_v<To, float>) {
    if (hasF16c())
      done = halvesToFloatF16c(static_cast<const Half *>(in), static_cast<float *>(out), n);
  } else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, BFloat16>) {
    if (hasAvx2())
      done = floatsToBFloat16Avx2(static_cast<const float *>(in), static_cast<BFloat16 *>(out), n);
  }
#endif
  for (int64_t i = done; i < n; ++i)
    storeElement<To>(out, i, convertValue<To>(loadElement<From>(in, i)));
}

/// Calls `body(T())` with T the C++ type of any element type a cast handles
/// (bool for bool); false for the others.
template <typename Body> bool visitElementType(plan::DType dtype, Body &&body) {
  switch (dtype) {
  case plan::F32:
    body(float());
    return true;
  case plan::F64:
    body(double());
    return true;
  case plan::F16:
    body(Half());
    return true;
  case plan::BF16:
    body(BFloat16());
    return true;
  case plan::I64:
    body(int64_t());
    return true;
  case plan::I32:
    body(int32_t());
    return true;
  case plan::I8:
    body(int8_t());
    return true;
  case plan::BOOL:
    body(bool());
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

/// One element in compute type C (float or double).
template <UnaryKind Kind, typename C> C applyUnary(C x) {
  double v = x;
  if constexpr (Kind == UnaryKind::Neg)
    return -x;
  if constexpr (Kind == UnaryKind::Exp)
    return static_cast<C>(std::exp(v));
  if constexpr (Kind == UnaryKind::Sqrt)
    return std::sqrt(x); // Correctly rounded in C already.
  if constexpr (Kind == UnaryKind::Tanh)
    return static_cast<C>(std::tanh(v));
  if constexpr (Kind == UnaryKind::Relu)
    return x > C(0) || std::isnan(x) ? x : C(0); // NaN passes, as in torch.
  if constexpr (Kind == UnaryKind::Sigmoid) {
    // Either branch keeps exp's argument non-positive: no overflow.
    if (v >= 0)
      return static_cast<C>(1.0 / (1.0 + std::exp(-v)));
    double e = std::exp(v);
    return static_cast<C>(e / (1.0 + e));
  }
  if constexpr (Kind == UnaryKind::Log)
    return static_cast<C>(std::log(v));
  if constexpr (Kind == UnaryKind::Erf)
    return static_cast<C>(std::erf(v));
  if constexpr (Kind == UnaryKind::Reciprocal)
    return C(1) / x;
  if constexpr (Kind == UnaryKind::GeluErf) {
    constexpr double kSqrtHalf = 0.7071067811865476;
    return static_cast<C>(0.5 * v * (1.0 + std::erf(v * kSqrtHalf)));
  }
  if constexpr (Kind == UnaryKind::GeluTanh)
    return static_cast<C>(geluTanh(v));
  return x;
}

/// Checks a unary float kernel's operands: one float input and a result of
/// the same type (SameOperandsAndResultType).
Status checkUnaryFloat(const KernelArgs &args, const char *kernel) {
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "input", in); !s.isOk())
    return s;
  if (Status s = expectDType(kernel, "result", out, in.dtype); !s.isOk())
    return s;
  return expectShape(kernel, "result", out, SmallShape(in.shape));
}

template <UnaryKind Kind>
Status unaryLoop(const char *kernel, const KernelArgs &args) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  return dispatchFloat(kernel, "input", in, [&](auto tag) {
    using T = decltype(tag);
    const T *x = in.as<const T>();
    T *y = out.as<T>();
    for (int64_t i = 0, n = in.numElements(); i < n; ++i)
      y[i] = store<T>(applyUnary<Kind, Compute<T>>(load(x[i])));
  });
}

template <UnaryKind Kind>
Status unary(const KernelArgs &args, const char *kernel) {
  if (Status s = checkUnaryFloat(args, kernel); !s.isOk())
    return s;
  return unaryLoop<Kind>(kernel, args);
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
  if (Status s = checkWhereOperands(args, kernel); !s.isOk())
    return s;
  const TensorView &cond = args.inputs[0], &onTrue = args.inputs[1],
                   &onFalse = args.inputs[2], &out = args.outputs[0];
  SmallShape shapes[3] = {SmallShape(cond.shape), SmallShape(onTrue.shape),
                          SmallShape(onFalse.shape)};
  SmallShape shape(out.shape);
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

bool castElements(const void *in, plan::DType from, void *out, plan::DType to, int64_t n) {
  bool converted = false;
  visitElementType(from, [&](auto fromTag) {
    converted = visitElementType(to, [&](auto toTag) {
      castLoop<decltype(fromTag), decltype(toTag)>(in, out, n);
    });
  });
  return converted;
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
  if (castElements(in.data, in.dtype, out.data, out.dtype, n))
    return Status::ok();
  // checkOperands has refused every other element type already.
  return kernelError(StatusCode::kUnimplemented, kernel, "cannot cast %s to %s",
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
  return dispatchFloat(kernel, "input", in, [&](auto tag) {
    using T = decltype(tag);
    const T *x = in.as<const T>();
    uint8_t *result = out.as<uint8_t>();
    for (int64_t i = 0, n = in.numElements(); i < n; ++i)
      result[i] = std::isnan(load(x[i])) ? 1 : 0;
  });
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
    return unaryLoop<UnaryKind::GeluErf>(kernel, args);
  if (std::strcmp(approximate, "tanh") == 0)
    return unaryLoop<UnaryKind::GeluTanh>(kernel, args);
  return kernelError(StatusCode::kInvalidArgument, kernel,
                     "approximate must be \"none\" or \"tanh\", got \"%s\"",
                     approximate);
}

Status dropout(const KernelArgs &args) {
  const char *kernel = "dropout";
  DropoutAttributes attributes;
  if (Status s = checkDropoutOperands(args, kernel, attributes); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  const int64_t *state = args.inputs[1].as<const int64_t>();
  const uint64_t stream = dropout::stream(static_cast<uint64_t>(state[0]), attributes.key);
  const uint64_t first = static_cast<uint64_t>(state[1]) *
                         static_cast<uint64_t>(attributes.sampleElements);
  const uint32_t threshold = dropout::threshold(attributes.ratio);
  return dispatchFloat(kernel, "input", in, [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    const C scale = static_cast<C>(1.0 / (1.0 - attributes.ratio));
    const T *x = in.as<const T>();
    T *y = out.as<T>();
    for (int64_t i = 0, n = in.numElements(); i < n; ++i)
      y[i] = dropout::keep(stream, first + static_cast<uint64_t>(i), threshold)
                 ? store<T>(load(x[i]) * scale)
                 : store<T>(C(0));
  });
}

} // namespace zcc::cpu::kernels
