//===- NormalizeLaunch.h - Launchers of softmax and layer_norm --*- C++ -*-===//
//
// Between Normalize.cpp (argument checks) and Normalize.cu (device code):
// softmax, log_softmax, layer_norm and their gradients. Tensors are
// contiguous device buffers of one float element type; rows are walked as
// the cpu kernels walk them, an axis seen as [outer, length, inner].
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_NORMALIZELAUNCH_H
#define ZCC_KERNELS_CUDA_NORMALIZELAUNCH_H

#include "kernels/cuda/LaunchTypes.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace zcc::cuda {

/// softmax or log_softmax of `input` along the middle axis of [outer,
/// length, inner] into `result` (which may be `input`).
struct SoftmaxParams {
  ElementType type = ElementType::kUnspecified;
  const void *input = nullptr;
  void *result = nullptr;
  int64_t outer = 0, length = 0, inner = 1;
  bool logForm = false;
};

cudaError_t launchSoftmax(const SoftmaxParams &params, cudaStream_t stream);

/// softmax_grad or log_softmax_grad: `output` is the forward's result, `grad`
/// the incoming gradient; `result` may alias either.
struct SoftmaxGradParams {
  ElementType type = ElementType::kUnspecified;
  const void *output = nullptr, *grad = nullptr;
  void *result = nullptr;
  int64_t outer = 0, length = 0, inner = 1;
  bool logForm = false;
};

cudaError_t launchSoftmaxGrad(const SoftmaxGradParams &params,
                              cudaStream_t stream);

/// layer_norm of `rows` rows of `columns` elements; `scale` and `bias` have
/// `columns` elements.
struct LayerNormParams {
  ElementType type = ElementType::kUnspecified;
  const void *input = nullptr, *scale = nullptr, *bias = nullptr;
  void *result = nullptr;
  int64_t rows = 0, columns = 0;
  double epsilon = 0;
};

cudaError_t launchLayerNorm(const LayerNormParams &params, cudaStream_t stream);

/// layer_norm_grad. scale_grad and bias_grad are sums over all rows, made
/// deterministic in two passes: `chunks` groups of rows each write a partial
/// sum per column into the workspace, then one pass adds the partials of a
/// column in a fixed order. The workspace also keeps every row's mean and
/// inverse standard deviation. `inputGrad` may alias `input`, `grad` or
/// `addend`: where it overlaps `input` or `grad`, or the rows are too wide
/// to keep in registers, it is written last; otherwise first, its kernel
/// then finding the rows' statistics for the sums (no pass of their own
/// reads the input). A non-null `addend` (of
/// the input's shape) joins the input gradient before it is rounded.
struct LayerNormGradParams {
  ElementType type = ElementType::kUnspecified;
  const void *input = nullptr, *scale = nullptr, *grad = nullptr, *addend = nullptr;
  void *inputGrad = nullptr, *scaleGrad = nullptr, *biasGrad = nullptr;
  int64_t rows = 0, columns = 0;
  double epsilon = 0;
  /// From planLayerNormGrad.
  int64_t chunks = 1;
  void *workspace = nullptr;
};

/// Bytes of one accumulator: f64 sums in double, the other types in float.
inline constexpr size_t accumulatorBytes(ElementType type) {
  return type == ElementType::kF64 ? 8 : 4;
}

/// Workspace bytes layer_norm_grad needs with `chunks` row chunks.
inline constexpr size_t layerNormGradWorkspaceBytes(ElementType type,
                                                    int64_t rows,
                                                    int64_t columns,
                                                    int64_t chunks) {
  return accumulatorBytes(type) *
         (2 * static_cast<size_t>(rows) +
          2 * static_cast<size_t>(chunks) * static_cast<size_t>(columns));
}

/// The row chunks of layer_norm_grad's parameter sums: enough blocks to fill
/// the device (about 1024 blocks of 32 columns) with at least 32 rows per
/// chunk, fewer where the workspace is short. It depends on the shapes
/// alone, so the sums are reproducible on any device. 0 when even one
/// chunk does not fit in `workspaceBytes`.
inline int64_t planLayerNormGrad(ElementType type, int64_t rows,
                                 int64_t columns, size_t workspaceBytes) {
  constexpr int64_t kTargetBlocks = 1024, kMinChunkRows = 32, kMaxChunks = 1024;
  int64_t columnTiles = (columns + 31) / 32;
  if (columnTiles < 1)
    columnTiles = 1;
  int64_t chunks = (kTargetBlocks + columnTiles - 1) / columnTiles;
  int64_t byRows = (rows + kMinChunkRows - 1) / kMinChunkRows;
  if (chunks > byRows)
    chunks = byRows;
  if (chunks > kMaxChunks)
    chunks = kMaxChunks;
  if (chunks < 1)
    chunks = 1;
  while (chunks > 1 && layerNormGradWorkspaceBytes(type, rows, columns,
                                                   chunks) > workspaceBytes)
    chunks /= 2;
  if (layerNormGradWorkspaceBytes(type, rows, columns, chunks) > workspaceBytes)
    return 0;
  return chunks;
}

cudaError_t launchLayerNormGrad(const LayerNormGradParams &params,
                                cudaStream_t stream);

} // namespace zcc::cuda

#endif // ZCC_KERNELS_CUDA_NORMALIZELAUNCH_H
