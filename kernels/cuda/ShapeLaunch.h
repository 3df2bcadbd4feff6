//===- ShapeLaunch.h - Launchers of the data movement kernels ---*- C++ -*-===//
//
// What Shape.cpp (argument checks) hands to Shape.cu (device code). These
// kernels move elements without interpreting them (but gather_grad, which
// sums floats), so most take an element size in bytes rather than a type.
// Every launcher enqueues its work on `stream` and returns the launch's
// error; none waits.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_SHAPELAUNCH_H
#define ZCC_KERNELS_CUDA_SHAPELAUNCH_H

#include "kernels/cuda/LaunchTypes.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace zcc::cuda {

/// A strided view of a tensor walked in row-major order of `shape`: index
/// (i0, i1, ...) is the element at offset base + i0 * strides[0] + ... of
/// `strided`; the other side, `dense`, is contiguous. Elements have
/// `elementBytes` bytes (1, 2, 4 or 8).
struct StridedView {
  int elementBytes = 0;
  DeviceShape shape;
  DeviceShape strides;
  int64_t base = 0;
};

/// Fills the contiguous `dst` from the view of `src` (transpose, slice,
/// broadcast). `dst` must not overlap `src`.
cudaError_t launchStridedCopy(void *dst, const void *src,
                              const StridedView &view, cudaStream_t stream);

/// The inverse: writes the contiguous `src` into the view of `dst`, leaving
/// the rest of `dst` as it is (concat, slice_grad). The view must not
/// reach an element twice.
cudaError_t launchStridedScatter(void *dst, const void *src,
                                 const StridedView &view, cudaStream_t stream);

/// gather: `data` seen as [outer, extent, sliceSize] elements of
/// `elementBytes` bytes; result [outer, count, sliceSize] takes slice
/// indices[i] (negative counts from the end) for each of the `count`
/// indices (i64, or i32 unless `indices64`).
struct GatherParams {
  const void *data = nullptr;
  const void *indices = nullptr;
  bool indices64 = true;
  void *result = nullptr;
  int elementBytes = 0;
  int64_t outer = 0, extent = 0, count = 0, sliceSize = 0;
};

cudaError_t launchGather(const GatherParams &params, cudaStream_t stream);

/// gather_grad: `result` (float `type`, [outer, extent, sliceSize]) gets,
/// for each slice, the sum of the `grad` slices ([outer, count, sliceSize])
/// whose index names it, in index order; zero where none does.
struct GatherGradParams {
  ElementType type = ElementType::kUnspecified;
  const void *indices = nullptr;
  bool indices64 = true;
  const void *grad = nullptr;
  void *result = nullptr;
  int64_t outer = 0, extent = 0, count = 0, sliceSize = 0;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
};

/// Indices and extents gatherGrad handles (positions and keys are 32-bit).
constexpr int64_t kMaxGatherGradCount = INT32_MAX;
constexpr int64_t kMaxGatherGradExtent = int64_t{UINT32_MAX} - 1;

/// The workspace launchGatherGrad needs for `count` indices into an axis of
/// `extent` (both positive and within the limits above).
cudaError_t gatherGradWorkspaceBytes(int64_t count, int64_t extent,
                                     size_t *bytes);

cudaError_t launchGatherGrad(const GatherGradParams &params,
                             cudaStream_t stream);

/// trilu over `matrices` [rows, columns] matrices of `elementBytes`-byte
/// elements: keeps the elements with j - i >= k (`upper`) or j - i <= k,
/// zeroes the others. `dst` may be `src`.
struct TriluParams {
  void *dst = nullptr;
  const void *src = nullptr;
  int elementBytes = 0;
  int64_t matrices = 0, rows = 0, columns = 0, k = 0;
  bool upper = true;
};

cudaError_t launchTrilu(const TriluParams &params, cudaStream_t stream);

} // namespace zcc::cuda

#endif // ZCC_KERNELS_CUDA_SHAPELAUNCH_H
