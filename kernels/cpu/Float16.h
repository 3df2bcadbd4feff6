//===- Float16.h - 16-bit float storage types for cpu kernels ---*- C++ -*-===//
//
// f16 (IEEE binary16) and bf16 (bfloat16) as storage-only types: a kernel
// loads them into float, computes in float and rounds once when it stores
// (round to nearest, ties to even; NaN stays NaN). `Compute<T>` is the type a
// kernel computes in for a storage type T: float for f16, bf16 and f32,
// double for f64. Kernels templated on T thus serve every float dtype.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CPU_FLOAT16_H
#define ZCC_KERNELS_CPU_FLOAT16_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace zcc::cpu {

/// IEEE 754 binary16, stored as its bits.
struct Half {
  uint16_t bits = 0;
};

/// bfloat16 (the upper half of a binary32), stored as its bits.
struct BFloat16 {
  uint16_t bits = 0;
};

inline uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float bitsFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline float toFloat(BFloat16 value) {
  return bitsFloat(uint32_t(value.bits) << 16);
}

inline BFloat16 toBFloat16(float value) {
  uint32_t bits = floatBits(value);
  if (std::isnan(value))
    return BFloat16{uint16_t((bits >> 16) | 0x40)};
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return BFloat16{uint16_t((bits + rounding) >> 16)};
}

inline float toFloat(Half value) {
  uint32_t sign = uint32_t(value.bits & 0x8000) << 16;
  uint32_t exponent = (value.bits >> 10) & 0x1f;
  uint32_t mantissa = value.bits & 0x3ff;
  if (exponent == 0x1f)
    return bitsFloat(sign | 0x7f800000 | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 (exact in float).
    float magnitude = float(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return bitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline Half toHalf(float value) {
  uint32_t bits = floatBits(value);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000) // NaN
    return Half{uint16_t(sign | 0x7e00)};
  if (magnitude >= 0x477ff000) // rounds to or beyond 65520: infinity
    return Half{uint16_t(sign | 0x7c00)};
  if (magnitude < 0x38800000) {
    // Subnormal or zero in binary16: round magnitude / 2^-24 to an integer.
    float scaled = bitsFloat(magnitude) * 0x1p24f; // Exact.
    return Half{uint16_t(sign | uint16_t(std::nearbyint(scaled)))};
  }
  uint32_t rounding = 0xfff + ((magnitude >> 13) & 1);
  magnitude += rounding;
  return Half{uint16_t(sign | (((magnitude >> 23) - 112) << 10) |
                       ((magnitude >> 13) & 0x3ff))};
}

template <typename T> struct ComputeTypeOf { using type = T; };
template <> struct ComputeTypeOf<Half> { using type = float; };
template <> struct ComputeTypeOf<BFloat16> { using type = float; };

/// The type a kernel computes in for storage type T.
template <typename T> using Compute = typename ComputeTypeOf<T>::type;

/// Reads a stored element as its compute type.
template <typename T> inline Compute<T> load(T value) { return value; }
inline float load(Half value) { return toFloat(value); }
inline float load(BFloat16 value) { return toFloat(value); }

/// Rounds a computed value to storage type T.
template <typename T> inline T store(Compute<T> value) { return value; }
template <> inline Half store<Half>(float value) { return toHalf(value); }
template <> inline BFloat16 store<BFloat16>(float value) {
  return toBFloat16(value);
}

} // namespace zcc::cpu

#endif // ZCC_KERNELS_CPU_FLOAT16_H
