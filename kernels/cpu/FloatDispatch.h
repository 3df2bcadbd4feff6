//===- FloatDispatch.h - A kernel body per float dtype ----------*- C++ -*-===//
//
// Kernels are templates over the storage type T of their float operands
// (Float16.h); these helpers map a plan dtype to that T once, after the
// operand checks, so each kernel body is written once and serves every float
// dtype it accepts.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CPU_FLOATDISPATCH_H
#define ZCC_KERNELS_CPU_FLOATDISPATCH_H

#include "kernels/cpu/Float16.h"
#include "kernels/cpu/KernelSupport.h"

namespace zcc::cpu::detail {

/// For messages: the dtypes dispatchFloat accepts.
inline constexpr const char *kFloatDTypeNames = "f32, f64, f16 and bf16";

inline bool isFloatDType(plan::DType dtype) {
  return dtype == plan::F32 || dtype == plan::F64 || dtype == plan::F16 ||
         dtype == plan::BF16;
}

/// Refuses anything but the four float dtypes.
inline Status expectFloatDType(const char *kernel, const char *operand,
                               const TensorView &view) {
  if (isFloatDType(view.dtype))
    return Status::ok();
  return unsupportedDType(kernel, operand, view, kFloatDTypeNames);
}

/// Calls `body(T())` with T the storage type of `view`'s dtype (float,
/// double, Half or BFloat16); a generic lambda takes T as decltype of its
/// argument. Other dtypes are refused, naming `operand`.
template <typename Body>
Status dispatchFloat(const char *kernel, const char *operand,
                     const TensorView &view, Body &&body) {
  switch (view.dtype) {
  case plan::F32:
    body(float());
    return Status::ok();
  case plan::F64:
    body(double());
    return Status::ok();
  case plan::F16:
    body(Half());
    return Status::ok();
  case plan::BF16:
    body(BFloat16());
    return Status::ok();
  default:
    return unsupportedDType(kernel, operand, view, kFloatDTypeNames);
  }
}

/// The same for the f32 and f64 only (optimizer state, accumulators).
template <typename Body>
Status dispatchWideFloat(const char *kernel, const char *operand,
                         const TensorView &view, Body &&body) {
  switch (view.dtype) {
  case plan::F32:
    body(float());
    return Status::ok();
  case plan::F64:
    body(double());
    return Status::ok();
  default:
    return unsupportedDType(kernel, operand, view, "f32 and f64");
  }
}

/// Rounds a value computed in double to storage type T (through Compute<T>).
template <typename T> inline T storeDouble(double value) {
  return store<T>(static_cast<Compute<T>>(value));
}

} // namespace zcc::cpu::detail

#endif // ZCC_KERNELS_CPU_FLOATDISPATCH_H
