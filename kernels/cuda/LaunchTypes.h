//===- LaunchTypes.h - Plain types between host and device files -*- C++ -*-===//
//
// The host side of a cuda kernel (Group.cpp) reads the plan's arguments and
// calls a launcher in Group.cu with these plain types; neither protobuf nor
// the plan reaches device code.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_LAUNCHTYPES_H
#define ZCC_KERNELS_CUDA_LAUNCHTYPES_H

#include <cstdint>

namespace zcc::cuda {

/// The plan's DType numbers (schema/plan.proto).
enum class ElementType : int {
  kUnspecified = 0,
  kF32 = 1,
  kF16 = 2,
  kBF16 = 3,
  kF64 = 4,
  kI64 = 5,
  kI32 = 6,
  kI8 = 7,
  kBool = 8,
};

/// Bytes of one element (0 for unspecified).
inline constexpr int elementBytes(ElementType type) {
  switch (type) {
  case ElementType::kF32:
  case ElementType::kI32:
    return 4;
  case ElementType::kF16:
  case ElementType::kBF16:
    return 2;
  case ElementType::kF64:
  case ElementType::kI64:
    return 8;
  case ElementType::kI8:
  case ElementType::kBool:
    return 1;
  default:
    return 0;
  }
}

/// The most dimensions a cuda kernel walks (as the cpu kernels' kMaxRank).
constexpr int kMaxDeviceRank = 16;

/// A shape or a set of element strides, passed to kernels by value.
struct DeviceShape {
  int rank = 0;
  int64_t dims[kMaxDeviceRank] = {};
};

} // namespace zcc::cuda

#endif // ZCC_KERNELS_CUDA_LAUNCHTYPES_H
