//===- AttentionLaunch.h - Launchers of the attention kernels ---*- C++ -*-===//
//
// Between Attention.cpp (argument checks, as the cpu kernels) and
// Attention.cu (flash-attention style device code that never materialises
// a queries x keys matrix).
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_ATTENTIONLAUNCH_H
#define ZCC_KERNELS_CUDA_ATTENTIONLAUNCH_H

#include "kernels/cuda/LaunchTypes.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace zcc::cuda {

/// Where the rows of one operand lie, in elements from its pointer: row i
/// of head h starts at (h / groupHeads) batch + (h % groupHeads) head +
/// i row (AttentionShape::groupHeads).
struct AttentionRows {
  int64_t batch = 0, head = 0, row = 0;
};

/// `heads` independent attentions of [queries, headSize] query rows against
/// [keys, headSize] keys and [keys, valueSize] values. With `causal`, key j
/// is visible to query i iff j <= i + keys - queries. The rows lie as
/// `query`, `key`, `value` (each gradient as its operand) and `output` (the
/// result, its gradient and the saved result) say, with the heads numbered
/// batch-major, `groupHeads` to a batch; setContiguous() lays out
/// [heads, rows, width] operands.
struct AttentionShape {
  int64_t heads = 0, queries = 0, keys = 0, headSize = 0, valueSize = 0;
  bool causal = false;
  double scale = 1;
  int64_t groupHeads = 1;
  AttentionRows query, key, value, output;

  void setContiguous() {
    groupHeads = heads > 0 ? heads : 1;
    query = {0, queries * headSize, headSize};
    key = {0, keys * headSize, headSize};
    value = {0, keys * valueSize, valueSize};
    output = {0, queries * valueSize, valueSize};
  }
};

/// The largest head size (of queries and keys, and of values) the kernels
/// keep in shared memory and registers.
constexpr int64_t kMaxAttentionHeadSize = 256;

/// result = softmax(query key^T * scale) value, row by row; with `lse`
/// (f32, heads * queries), also each row's log-sum-exp of its scaled,
/// masked scores.
struct AttentionParams {
  ElementType type = ElementType::kUnspecified; // f32, f64, f16 or bf16
  AttentionShape shape;
  const void *query = nullptr, *key = nullptr, *value = nullptr;
  void *result = nullptr;
  void *lse = nullptr;
};
cudaError_t launchAttention(const AttentionParams &params, cudaStream_t stream);

/// The gradients of the attention's query, key and value given the
/// gradient `grad` of its result. Uses attentionGradWorkspaceBytes() of
/// `workspace` (per-query softmax statistics). With the forward's `output`
/// and `lse` (AttentionParams::lse), the tensor-core kernels take the
/// statistics from them instead of a statistics pass over the keys.
struct AttentionGradParams {
  ElementType type = ElementType::kUnspecified;
  AttentionShape shape;
  const void *query = nullptr, *key = nullptr, *value = nullptr,
             *grad = nullptr;
  const void *output = nullptr, *lse = nullptr;
  void *queryGrad = nullptr, *keyGrad = nullptr, *valueGrad = nullptr;
  void *workspace = nullptr;
};
size_t attentionGradWorkspaceBytes(ElementType type,
                                   const AttentionShape &shape);
cudaError_t launchAttentionGrad(const AttentionGradParams &params,
                                cudaStream_t stream);

} // namespace zcc::cuda

#endif // ZCC_KERNELS_CUDA_ATTENTIONLAUNCH_H
