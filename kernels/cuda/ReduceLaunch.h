//===- ReduceLaunch.h - Launchers of reduce_sum, _mean and _max -*- C++ -*-===//
//
// Between Reduce.cpp (argument checks, the reduction's layout) and Reduce.cu
// (device code).
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_REDUCELAUNCH_H
#define ZCC_KERNELS_CUDA_REDUCELAUNCH_H

#include "kernels/cuda/LaunchTypes.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace zcc::cuda {

enum class ReduceKind : int { kSum, kMean, kMax };

/// A reduction of a contiguous tensor: result element o (row-major over the
/// kept dimensions) combines the `count` input elements at keptOffset(o) +
/// reducedOffset(r), r in [0, count), where each offset walks its shape
/// row-major with its strides (in elements). Dimensions of size 1 are left
/// out and neighbours of one kind merged, so the shapes are short.
struct ReduceParams {
  ElementType type = ElementType::kUnspecified;
  ReduceKind kind = ReduceKind::kSum;
  const void *input = nullptr;
  void *result = nullptr;
  int64_t outputs = 0, count = 0;
  DeviceShape keptShape, keptStrides;
  DeviceShape reducedShape, reducedStrides;
  /// Scratch for partial results when a long reduction is split over
  /// blocks; the launcher splits no more than it fits (none when null).
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
};

/// f32, f64, f16 and bf16 for every kind; i64 and i32 for kSum (wrapping)
/// and kMax.
cudaError_t launchReduce(const ReduceParams &params, cudaStream_t stream);

} // namespace zcc::cuda

#endif // ZCC_KERNELS_CUDA_REDUCELAUNCH_H
