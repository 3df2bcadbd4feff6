//===- ElementwiseLaunch.h - Launchers of the element-wise kernels -*- C++ -*-//
//
// What Elementwise.cpp (argument checks) hands to Elementwise.cu (device
// code): plain shapes, element types and device pointers. Every launcher
// enqueues its work on `stream` and returns the launch's error; none waits.
// A launcher given an element type the host checks should have refused
// returns cudaErrorInvalidValue.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_ELEMENTWISELAUNCH_H
#define ZCC_KERNELS_CUDA_ELEMENTWISELAUNCH_H

#include "kernels/cuda/LaunchTypes.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace zcc::cuda {

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin };
enum class CompareOp { kEqual, kLess, kGreater };
enum class UnaryOp {
  kNeg,
  kExp,
  kSqrt,
  kTanh,
  kRelu,
  kSigmoid,
  kLog,
  kErf,
  kReciprocal,
  kGeluErf,
  kGeluTanh,
};

/// The operands of a NumPy-broadcasting kernel: `inputs[i]`, contiguous and
/// row-major of shape `inShapes[i]`, each broadcast to `outShape`, the shape
/// of the contiguous `output`. Binary kernels use the first two inputs.
struct BroadcastOperands {
  DeviceShape outShape;
  DeviceShape inShapes[3];
  const void *inputs[3] = {};
  void *output = nullptr;
};

/// add, sub, mul, div, pow, max, min on operands of element type `type`
/// (f32, f64, f16, bf16; i64 and i32 except for div and pow).
cudaError_t launchBinary(BinaryOp op, ElementType type,
                         const BroadcastOperands &operands,
                         cudaStream_t stream);

/// equal, less, greater on operands of element type `type` (every type but
/// unspecified); the result is bool (one byte, 0 or 1).
cudaError_t launchCompare(CompareOp op, ElementType type,
                          const BroadcastOperands &operands,
                          cudaStream_t stream);

/// where: inputs are the bool condition, on_true and on_false, whose
/// elements (and the result's) have `elementBytes` bytes (1, 2, 4 or 8).
cudaError_t launchWhere(int elementBytes, const BroadcastOperands &operands,
                        cudaStream_t stream);

/// `count` elements of type `from` at `input` converted to `to` at `output`
/// (different types; every pair of the eight element types).
cudaError_t launchCast(ElementType from, ElementType to, const void *input,
                       void *output, int64_t count, cudaStream_t stream);

/// is_nan of `count` float elements into bools.
cudaError_t launchIsNan(ElementType type, const void *input, void *output,
                        int64_t count, cudaStream_t stream);

/// A unary float function of `count` elements; `output` may be `input`.
cudaError_t launchUnary(UnaryOp op, ElementType type, const void *input,
                        void *output, int64_t count, cudaStream_t stream);

/// gelu_grad: result = grad * gelu'(input), the erf form or (`tanhForm`)
/// the tanh approximation's derivative.
cudaError_t launchGeluGrad(bool tanhForm, ElementType type, const void *input,
                           const void *grad, void *result, int64_t count,
                           cudaStream_t stream);

/// dropout: `count` float elements of `input` into `output`, each kept (and
/// multiplied by 1 / (1 - ratio) in the cpu kernel's compute type) when
/// dropout::keep draws so for counter state[1] * sampleElements + i of
/// stream (state[0], key); `state` is the i64[2] in device memory.
cudaError_t launchDropout(ElementType type, const void *input, const int64_t *state,
                          uint64_t key, int64_t sampleElements, double ratio, void *output,
                          int64_t count, cudaStream_t stream);

} // namespace zcc::cuda

#endif // ZCC_KERNELS_CUDA_ELEMENTWISELAUNCH_H
