//===- Attention.cu - Flash-attention style forward and backward ----------===//
//
// No queries x keys matrix ever reaches global memory: the forward (after
// FlashAttention) gives each block a tile of queries of one head and streams
// the keys and values through shared memory in tiles, keeping a running
// maximum and sum per query row (the online softmax) and the output rows in
// registers; asked for it, it also writes each row's log-sum-exp. The
// backward (after FlashAttention-2) first keeps, per query row, the softmax
// maximum, the reciprocal of its sum and D = grad . output in the
// workspace: from the forward's saved result and log-sum-exp where the
// plan gives them (tensor-core kernels), else by running the forward once
// more; then one kernel gives each block a tile of keys and accumulates
// their key and value gradients over the query tiles, and another gives
// each block a tile of queries and accumulates their query gradients over
// the key tiles. Every sum runs in a fixed order: no atomics, the results
// are deterministic.
//
// Everything accumulates in f32 (f64 for f64 operands), loaded from and
// rounded to the operands' type at the edges.
//
// Two sets of kernels: f16 and bf16 with head sizes up to 128 multiply on
// tensor cores ("Tensor-core kernels" below); everything else (f32, f64,
// and head sizes up to kMaxAttentionHeadSize) on the f32 and f64 cores,
// in these kernels' thread layout: 128 threads, 16 row groups x 8 column
// groups. A thread owns the rows rowGroup + 16 r (r < R) of a tile of 16 R
// rows, the score columns columnGroup + 8 c (c < 2 R) of a tile of 16 R keys
// (or queries), and the head-size columns columnGroup + 8 t (t < kChunks).
// Shared tiles have odd row strides, so the column groups' reads down a
// column hit distinct banks.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/AttentionLaunch.h"
#include "kernels/cuda/DeviceSupport.cuh"

#include <initializer_list>
#include <type_traits>

namespace zcc::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kRowGroups = 16, kColumnGroups = 8;

extern __shared__ __align__(16) unsigned char attentionShared[];

__device__ __forceinline__ float expAcc(float x) { return expf(x); }
__device__ __forceinline__ double expAcc(double x) { return exp(x); }

/// Reductions over the 8 column groups of a row (adjacent lanes); every
/// lane of the warp must take part.
template <typename A> __device__ __forceinline__ A rowGroupMax(A value) {
  for (int offset = 1; offset < kColumnGroups; offset <<= 1)
    value = fmax(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}
template <typename A> __device__ __forceinline__ A rowGroupSum(A value) {
  for (int offset = 1; offset < kColumnGroups; offset <<= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// An odd row stride of at least `width` elements.
__host__ __device__ inline int oddStride(int64_t width) {
  return static_cast<int>(width) | 1;
}

/// An operand's layout (AttentionRows) as the kernels keep it: the row
/// stride in 32 bits (Attention.cpp refuses larger ones), to spare the
/// registers the tiles' address arithmetic takes.
struct Rows {
  int64_t batch, head;
  int row;
};

/// The sizes and layouts every kernel reads.
struct Dims {
  int64_t heads, queries, keys;
  int headSize, valueSize;
  bool causal;
  /// Key j is visible to query i iff j <= i + offset (causal only).
  int64_t offset;
  int groupHeads;
  Rows query, key, value, output;
};

Dims dimsOf(const AttentionShape &shape) {
  Dims d;
  d.heads = shape.heads;
  d.queries = shape.queries;
  d.keys = shape.keys;
  d.headSize = static_cast<int>(shape.headSize);
  d.valueSize = static_cast<int>(shape.valueSize);
  d.causal = shape.causal;
  d.offset = shape.keys - shape.queries;
  d.groupHeads = static_cast<int>(shape.groupHeads > 0 ? shape.groupHeads : 1);
  auto rows = [](const AttentionRows &r) {
    return Rows{r.batch, r.head, static_cast<int>(r.row)};
  };
  d.query = rows(shape.query);
  d.key = rows(shape.key);
  d.value = rows(shape.value);
  d.output = rows(shape.output);
  return d;
}

/// Row 0 of head `head` of an operand laid out as `rows`.
template <typename T>
__device__ __forceinline__ T *headRows(T *base, const Rows &rows,
                                       const Dims &dims, int64_t head) {
  // 32-bit division: the 64-bit one is a call, whose saved registers
  // spill in the register-bound kernels.
  int group = static_cast<int>(head) / dims.groupHeads;
  int within = static_cast<int>(head) - group * dims.groupHeads;
  return base + group * rows.batch + within * rows.head;
}

/// Copies rows [first, first + tileRows) of the [rowCount, width] matrix at
/// `src` (rows `srcRow` elements apart) into `dst` (row stride `stride`),
/// widened to A; rows past `rowCount` become zeros.
template <typename T, typename A>
__device__ void loadTile(A *dst, int stride, const T *src, int srcRow,
                         int64_t first, int64_t rowCount, int width,
                         int tileRows) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int r = warp; r < tileRows; r += kThreads / 32) {
    int64_t row = first + r;
    A *out = dst + r * stride;
    if (row < rowCount) {
      const T *in = src + row * srcRow;
      for (int c = lane; c < width; c += 32)
        out[c] = load(in + c);
    } else {
      for (int c = lane; c < width; c += 32)
        out[c] = A(0);
    }
  }
}

/// acc[r][c] += sum_d a[row r][d] * b[column c][d], rows rowGroup + 16 r of
/// `a`, columns columnGroup + 8 c of `b` (both row-major tiles in shared
/// memory with stride `stride`).
template <int R, int C, typename A>
__device__ __forceinline__ void tileProduct(A (&acc)[R][C], const A *a,
                                            const A *b, int stride, int width) {
  int rowGroup = threadIdx.x / kColumnGroups,
      columnGroup = threadIdx.x % kColumnGroups;
  const A *aRow = a + rowGroup * stride;
  const A *bRow = b + columnGroup * stride;
#pragma unroll 2
  for (int d = 0; d < width; ++d) {
    A av[R], bv[C];
#pragma unroll
    for (int r = 0; r < R; ++r)
      av[r] = aRow[r * kRowGroups * stride + d];
#pragma unroll
    for (int c = 0; c < C; ++c)
      bv[c] = bRow[c * kColumnGroups * stride + d];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < C; ++c)
        acc[r][c] += av[r] * bv[c];
  }
}

/// out[r][t] += sum_j weights[row r][j] * m[j][columnGroup + 8 t] over j <
/// `count`, for the columns below `width`.
template <int R, int kChunks, typename A>
__device__ __forceinline__ void
accumulateRows(A (&out)[R][kChunks], const A *weights, int weightStride,
               const A *m, int stride, int width, int count) {
  int rowGroup = threadIdx.x / kColumnGroups,
      columnGroup = threadIdx.x % kColumnGroups;
  const A *wRow = weights + rowGroup * weightStride;
  for (int j = 0; j < count; ++j) {
    A w[R];
#pragma unroll
    for (int r = 0; r < R; ++r)
      w[r] = wRow[r * kRowGroups * weightStride + j];
    const A *mRow = m + j * stride;
#pragma unroll
    for (int t = 0; t < kChunks; ++t) {
      int column = columnGroup + kColumnGroups * t;
      if (column < width) {
        A x = mRow[column];
#pragma unroll
        for (int r = 0; r < R; ++r)
          out[r][t] += w[r] * x;
      }
    }
  }
}

/// The device pointers and sizes of one launch.
struct KernelArgs {
  Dims dims;
  double scale;
  const void *query, *key, *value, *grad;
  void *result;                          // forward
  void *queryGrad, *keyGrad, *valueGrad; // backward
  // Per query row (heads * queries each, in A): the softmax maximum (of
  // the scaled scores; in base-2 units for the tensor-core kernels), the
  // reciprocal of the softmax sum, and D = grad . output.
  void *rowMax, *rowInverseSum, *rowDelta;
  // Forward: each row's log-sum-exp (f32), when asked for. Backward: the
  // forward's saved result and log-sum-exp, when given.
  void *lse;
  const void *output, *savedLse;
  // Every row of every operand is whole, 16-byte aligned pieces: the
  // tensor-core kernels copy tiles asynchronously and store pairs.
  bool async;
};

/// Whether every pointer is 16-byte aligned and both head sizes and every
/// stride between rows are multiples of 8 elements (16 bytes of a 16-bit
/// type).
bool wholePieces(const AttentionShape &shape,
                 std::initializer_list<const void *> pointers) {
  if (shape.headSize % 8 != 0 || shape.valueSize % 8 != 0)
    return false;
  for (const AttentionRows &rows :
       {shape.query, shape.key, shape.value, shape.output})
    if (rows.batch % 8 != 0 || rows.head % 8 != 0 || rows.row % 8 != 0)
      return false;
  for (const void *p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Forward (also the statistics pass of the backward)
//===----------------------------------------------------------------------===//

/// Block: a tile of 16 R queries of one head. With kStats, writes the row
/// statistics instead of the output.
template <typename T, int R, int kChunks, bool kStats>
__global__ void __launch_bounds__(kThreads)
    attentionForwardKernel(KernelArgs args) {
  using A = Acc<T>;
  constexpr int kTile = kRowGroups * R, C = 2 * R;
  const Dims &dims = args.dims;
  const int qStride = oddStride(dims.headSize),
            vStride = oddStride(dims.valueSize), pStride = kTile + 1;
  A *qs = reinterpret_cast<A *>(attentionShared);
  A *ks = qs + kTile * qStride;
  A *vs = ks + kTile * qStride;
  A *ps = vs + kTile * vStride;

  // Tile-major order, last (for causal: heaviest) query tiles first.
  int64_t tiles = (dims.queries + kTile - 1) / kTile;
  int64_t head = blockIdx.x % dims.heads;
  int64_t q0 = (tiles - 1 - blockIdx.x / dims.heads) * kTile;
  const T *query =
      headRows(static_cast<const T *>(args.query), dims.query, dims, head);
  const T *key = headRows(static_cast<const T *>(args.key), dims.key, dims, head);
  const T *value =
      headRows(static_cast<const T *>(args.value), dims.value, dims, head);

  const int rowGroup = threadIdx.x / kColumnGroups,
            columnGroup = threadIdx.x % kColumnGroups;
  const A scale = static_cast<A>(args.scale);
  const A negativeInfinity = -INFINITY;
  A rowMax[R], rowSum[R], acc[R][kChunks];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    rowMax[r] = negativeInfinity;
    rowSum[r] = 0;
#pragma unroll
    for (int t = 0; t < kChunks; ++t)
      acc[r][t] = 0;
  }

  loadTile(qs, qStride, query, dims.query.row, q0, dims.queries, dims.headSize, kTile);
  int64_t keyEnd = dims.keys;
  if (dims.causal) {
    int64_t lastQuery = min(q0 + kTile, dims.queries) - 1;
    keyEnd = min(dims.keys, lastQuery + dims.offset + 1);
  }
  for (int64_t k0 = 0; k0 < keyEnd; k0 += kTile) {
    __syncthreads(); // The previous tile is consumed.
    loadTile(ks, qStride, key, dims.key.row, k0, dims.keys, dims.headSize, kTile);
    loadTile(vs, vStride, value, dims.value.row, k0, dims.keys, dims.valueSize, kTile);
    __syncthreads();
    A s[R][C];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < C; ++c)
        s[r][c] = 0;
    tileProduct(s, qs, ks, qStride, dims.headSize);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      int64_t i = q0 + rowGroup + kRowGroups * r;
      int64_t lastKey = dims.causal ? i + dims.offset : dims.keys - 1;
      A tileMax = negativeInfinity;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        int64_t j = k0 + columnGroup + kColumnGroups * c;
        s[r][c] =
            j < dims.keys && j <= lastKey ? s[r][c] * scale : negativeInfinity;
        tileMax = fmax(tileMax, s[r][c]);
      }
      A newMax = fmax(rowMax[r], rowGroupMax(tileMax));
      // A row with nothing visible yet keeps all its weights at zero.
      A reference = newMax == negativeInfinity ? A(0) : newMax;
      A correction = expAcc(rowMax[r] - reference);
      A sum = 0;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        s[r][c] = expAcc(s[r][c] - reference);
        sum += s[r][c];
        ps[(rowGroup + kRowGroups * r) * pStride + columnGroup +
           kColumnGroups * c] = s[r][c];
      }
      rowSum[r] = rowSum[r] * correction + rowGroupSum(sum);
      rowMax[r] = newMax;
#pragma unroll
      for (int t = 0; t < kChunks; ++t)
        acc[r][t] *= correction;
    }
    __syncthreads();
    int count = static_cast<int>(min(int64_t{kTile}, keyEnd - k0));
    accumulateRows(acc, ps, pStride, vs, vStride, dims.valueSize, count);
  }

  int64_t rowBase = head * dims.queries;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    int64_t i = q0 + rowGroup + kRowGroups * r;
    bool valid = i < dims.queries;
    if constexpr (!kStats) {
      // Without any key the cpu divides 0 by 0: NaN here too.
      T *out = headRows(static_cast<T *>(args.result), dims.output, dims, head) +
               i * dims.output.row;
#pragma unroll
      for (int t = 0; t < kChunks; ++t) {
        int column = columnGroup + kColumnGroups * t;
        if (valid && column < dims.valueSize)
          store(out + column, acc[r][t] / rowSum[r]);
      }
      if (args.lse && valid && columnGroup == 0)
        static_cast<float *>(args.lse)[rowBase + i] =
            static_cast<float>(rowMax[r] + log(rowSum[r]));
    } else {
      A inverseSum = A(1) / rowSum[r];
      const T *grad =
          headRows(static_cast<const T *>(args.grad), dims.output, dims, head) +
          (valid ? i : 0) * dims.output.row;
      A delta = 0;
#pragma unroll
      for (int t = 0; t < kChunks; ++t) {
        int column = columnGroup + kColumnGroups * t;
        if (valid && column < dims.valueSize)
          delta += load(grad + column) * (acc[r][t] * inverseSum);
      }
      delta = rowGroupSum(delta);
      if (valid && columnGroup == 0) {
        static_cast<A *>(args.rowMax)[rowBase + i] =
            rowMax[r] == negativeInfinity ? A(0) : rowMax[r];
        static_cast<A *>(args.rowInverseSum)[rowBase + i] = inverseSum;
        static_cast<A *>(args.rowDelta)[rowBase + i] = delta;
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Backward: key and value gradients
//===----------------------------------------------------------------------===//

/// Block: a tile of 16 R keys of one head, accumulating over the query
/// tiles that see them. Thread rows are keys, score columns queries.
template <typename T, int R, int kChunks>
__global__ void __launch_bounds__(kThreads)
    attentionKeyGradKernel(KernelArgs args) {
  using A = Acc<T>;
  constexpr int kTile = kRowGroups * R, C = 2 * R;
  const Dims &dims = args.dims;
  const int qStride = oddStride(dims.headSize),
            vStride = oddStride(dims.valueSize), pStride = kTile + 1;
  A *ks = reinterpret_cast<A *>(attentionShared);
  A *vs = ks + kTile * qStride;
  A *qs = vs + kTile * vStride;
  A *gs = qs + kTile * qStride; // grad rows
  A *ps = gs + kTile * vStride; // P^T
  A *ds = ps + kTile * pStride; // dS^T
  A *statMax = ds + kTile * pStride;
  A *statInverseSum = statMax + kTile;
  A *statDelta = statInverseSum + kTile;

  // Tile-major order, first (for causal: heaviest) key tiles first.
  int64_t head = blockIdx.x % dims.heads;
  int64_t k0 = (blockIdx.x / dims.heads) * kTile;
  int64_t qkBase = head * dims.queries;
  const T *query =
      headRows(static_cast<const T *>(args.query), dims.query, dims, head);
  const T *grad =
      headRows(static_cast<const T *>(args.grad), dims.output, dims, head);
  const T *key = headRows(static_cast<const T *>(args.key), dims.key, dims, head);
  const T *value =
      headRows(static_cast<const T *>(args.value), dims.value, dims, head);
  const A *rowMax = static_cast<const A *>(args.rowMax) + qkBase;
  const A *rowInverseSum = static_cast<const A *>(args.rowInverseSum) + qkBase;
  const A *rowDelta = static_cast<const A *>(args.rowDelta) + qkBase;

  const int rowGroup = threadIdx.x / kColumnGroups,
            columnGroup = threadIdx.x % kColumnGroups;
  const A scale = static_cast<A>(args.scale);
  A keyGrad[R][kChunks], valueGrad[R][kChunks];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < kChunks; ++t)
      keyGrad[r][t] = valueGrad[r][t] = 0;

  loadTile(ks, qStride, key, dims.key.row, k0, dims.keys, dims.headSize, kTile);
  loadTile(vs, vStride, value, dims.value.row, k0, dims.keys, dims.valueSize, kTile);
  // The first query that sees key k0.
  int64_t firstQuery = dims.causal && k0 > dims.offset ? k0 - dims.offset : 0;
  for (int64_t q0 = firstQuery / kTile * kTile; q0 < dims.queries;
       q0 += kTile) {
    __syncthreads(); // The previous tile is consumed.
    loadTile(qs, qStride, query, dims.query.row, q0, dims.queries, dims.headSize, kTile);
    loadTile(gs, vStride, grad, dims.output.row, q0, dims.queries, dims.valueSize, kTile);
    for (int r = threadIdx.x; r < kTile; r += kThreads) {
      bool valid = q0 + r < dims.queries;
      statMax[r] = valid ? rowMax[q0 + r] : A(0);
      statInverseSum[r] = valid ? rowInverseSum[q0 + r] : A(0);
      statDelta[r] = valid ? rowDelta[q0 + r] : A(0);
    }
    __syncthreads();
    A s[R][C], dp[R][C];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < C; ++c)
        s[r][c] = dp[r][c] = 0;
    tileProduct(s, ks, qs, qStride, dims.headSize);
    tileProduct(dp, vs, gs, vStride, dims.valueSize);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      int64_t j = k0 + rowGroup + kRowGroups * r;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        int local = columnGroup + kColumnGroups * c;
        int64_t i = q0 + local;
        bool visible = i < dims.queries && j < dims.keys &&
                       (!dims.causal || j <= i + dims.offset);
        A p = visible ? expAcc(s[r][c] * scale - statMax[local]) *
                            statInverseSum[local]
                      : A(0);
        int at = (rowGroup + kRowGroups * r) * pStride + local;
        ps[at] = p;
        ds[at] = p * (dp[r][c] - statDelta[local]);
      }
    }
    __syncthreads();
    int count = static_cast<int>(min(int64_t{kTile}, dims.queries - q0));
    accumulateRows(valueGrad, ps, pStride, gs, vStride, dims.valueSize, count);
    accumulateRows(keyGrad, ds, pStride, qs, qStride, dims.headSize, count);
  }

#pragma unroll
  for (int r = 0; r < R; ++r) {
    int64_t j = k0 + rowGroup + kRowGroups * r;
    if (j >= dims.keys)
      continue;
    T *kOut = headRows(static_cast<T *>(args.keyGrad), dims.key, dims, head) +
              j * dims.key.row;
    T *vOut =
        headRows(static_cast<T *>(args.valueGrad), dims.value, dims, head) +
        j * dims.value.row;
#pragma unroll
    for (int t = 0; t < kChunks; ++t) {
      int column = columnGroup + kColumnGroups * t;
      if (column < dims.headSize)
        store(kOut + column, keyGrad[r][t] * scale);
      if (column < dims.valueSize)
        store(vOut + column, valueGrad[r][t]);
    }
  }
}

//===----------------------------------------------------------------------===//
// Backward: query gradients
//===----------------------------------------------------------------------===//

/// Block: a tile of 16 R queries of one head, accumulating over the key
/// tiles they see.
template <typename T, int R, int kChunks>
__global__ void __launch_bounds__(kThreads)
    attentionQueryGradKernel(KernelArgs args) {
  using A = Acc<T>;
  constexpr int kTile = kRowGroups * R, C = 2 * R;
  const Dims &dims = args.dims;
  const int qStride = oddStride(dims.headSize),
            vStride = oddStride(dims.valueSize), pStride = kTile + 1;
  A *qs = reinterpret_cast<A *>(attentionShared);
  A *gs = qs + kTile * qStride;
  A *ks = gs + kTile * vStride;
  A *vs = ks + kTile * qStride;
  A *ds = vs + kTile * vStride;

  int64_t tiles = (dims.queries + kTile - 1) / kTile;
  int64_t head = blockIdx.x % dims.heads;
  int64_t q0 = (tiles - 1 - blockIdx.x / dims.heads) * kTile;
  int64_t qBase = head * dims.queries;
  const T *query =
      headRows(static_cast<const T *>(args.query), dims.query, dims, head);
  const T *grad =
      headRows(static_cast<const T *>(args.grad), dims.output, dims, head);
  const T *key = headRows(static_cast<const T *>(args.key), dims.key, dims, head);
  const T *value =
      headRows(static_cast<const T *>(args.value), dims.value, dims, head);

  const int rowGroup = threadIdx.x / kColumnGroups,
            columnGroup = threadIdx.x % kColumnGroups;
  const A scale = static_cast<A>(args.scale);
  A queryGrad[R][kChunks], statMax[R], statInverseSum[R], statDelta[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    int64_t i = q0 + rowGroup + kRowGroups * r;
    bool valid = i < dims.queries;
    statMax[r] = valid ? static_cast<const A *>(args.rowMax)[qBase + i] : A(0);
    statInverseSum[r] =
        valid ? static_cast<const A *>(args.rowInverseSum)[qBase + i] : A(0);
    statDelta[r] =
        valid ? static_cast<const A *>(args.rowDelta)[qBase + i] : A(0);
#pragma unroll
    for (int t = 0; t < kChunks; ++t)
      queryGrad[r][t] = 0;
  }

  loadTile(qs, qStride, query, dims.query.row, q0, dims.queries, dims.headSize, kTile);
  loadTile(gs, vStride, grad, dims.output.row, q0, dims.queries, dims.valueSize, kTile);
  int64_t keyEnd = dims.keys;
  if (dims.causal) {
    int64_t lastQuery = min(q0 + kTile, dims.queries) - 1;
    keyEnd = min(dims.keys, lastQuery + dims.offset + 1);
  }
  for (int64_t k0 = 0; k0 < keyEnd; k0 += kTile) {
    __syncthreads(); // The previous tile is consumed.
    loadTile(ks, qStride, key, dims.key.row, k0, dims.keys, dims.headSize, kTile);
    loadTile(vs, vStride, value, dims.value.row, k0, dims.keys, dims.valueSize, kTile);
    __syncthreads();
    A s[R][C], dp[R][C];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < C; ++c)
        s[r][c] = dp[r][c] = 0;
    tileProduct(s, qs, ks, qStride, dims.headSize);
    tileProduct(dp, gs, vs, vStride, dims.valueSize);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      int64_t i = q0 + rowGroup + kRowGroups * r;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        int64_t j = k0 + columnGroup + kColumnGroups * c;
        bool visible = i < dims.queries && j < dims.keys &&
                       (!dims.causal || j <= i + dims.offset);
        A p = visible ? expAcc(s[r][c] * scale - statMax[r]) * statInverseSum[r]
                      : A(0);
        ds[(rowGroup + kRowGroups * r) * pStride + columnGroup +
           kColumnGroups * c] = p * (dp[r][c] - statDelta[r]);
      }
    }
    __syncthreads();
    int count = static_cast<int>(min(int64_t{kTile}, keyEnd - k0));
    accumulateRows(queryGrad, ds, pStride, ks, qStride, dims.headSize, count);
  }

#pragma unroll
  for (int r = 0; r < R; ++r) {
    int64_t i = q0 + rowGroup + kRowGroups * r;
    if (i >= dims.queries)
      continue;
    T *out = headRows(static_cast<T *>(args.queryGrad), dims.query, dims, head) +
             i * dims.query.row;
#pragma unroll
    for (int t = 0; t < kChunks; ++t) {
      int column = columnGroup + kColumnGroups * t;
      if (column < dims.headSize)
        store(out + column, queryGrad[r][t] * scale);
    }
  }
}

//===----------------------------------------------------------------------===//
// Tensor-core kernels for f16 and bf16
//===----------------------------------------------------------------------===//
//
// The same three passes with the products on tensor cores (mma.sync
// m16n8k16, f32 accumulation) for 16-bit operands with head sizes up to
// kMmaMaxHead, after FlashAttention-2: each of 4 warps owns 16 R rows of
// the block's tile of 64 R (R by Tiling below), and the fragment layouts
// of the PTX ISA (row g = lane / 4, column pair 2 t, t = lane % 4) let the
// scores' f32 accumulators become the next product's 16-bit operands in
// registers. Operand fragments come from shared memory through ldmatrix (.trans where
// a product reads a tile down its columns); the streamed tiles are double
// buffered, the next one copied by cp.async while the current one is
// multiplied, when every row is whole 16-byte pieces (head sizes that are
// multiples of 8; otherwise plain loads fill the same buffers). Scores
// live in base-2 units (scale log2 e folded in, exp2 on the special
// function unit), and only tiles that cross the causal diagonal or the
// sequence ends are masked. The probabilities (and, backward, the score
// gradients) enter the second products rounded to the operands' type; the
// softmax statistics and every sum stay in f32, in a fixed order.

constexpr int kMmaMaxHead = 128;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ uint32_t pack16(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

template <typename T> __device__ uint16_t roundBits(float x);
template <> __device__ __forceinline__ uint16_t roundBits<__half>(float x) {
  return __half_as_ushort(__float2half_rn(x));
}
template <>
__device__ __forceinline__ uint16_t roundBits<__nv_bfloat16>(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}
template <typename T>
__device__ __forceinline__ uint32_t packFloats(float lo, float hi) {
  return pack16(roundBits<T>(lo), roundBits<T>(hi));
}

/// d += a b for a 16 x 16 `a` (row-major fragment) and a 16 x 8 `b`.
template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void
mma<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma<__nv_bfloat16>(float (&d)[4],
                                                   const uint32_t (&a)[4],
                                                   uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t sharedAddress(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// Four 8 x 8 matrices of 16-bit elements; lane l gives the address of row
/// l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix(uint32_t (&r)[4], const uint16_t *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(sharedAddress(p)));
}
__device__ __forceinline__ void ldmatrixTrans(uint32_t (&r)[4],
                                              const uint16_t *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(sharedAddress(p)));
}

/// 16 bytes from global to shared memory, asynchronously; zeros when not
/// `valid` (then nothing is read).
__device__ __forceinline__ void copyAsync16(uint16_t *dst, const uint16_t *src,
                                            bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   sharedAddress(dst)),
               "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commitCopies() {
  asm volatile("cp.async.commit_group;\n" ::);
}
/// Waits until at most `kPending` committed groups of copies are in flight.
template <int kPending> __device__ __forceinline__ void waitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

/// Stages rows [first, first + tileRows) of the [rowCount, width] matrix
/// at `src` (rows `srcRow` elements apart) into `dst` (row stride
/// `stride`), columns up to kPad; rows and columns past the matrix become
/// zeros. With `async` (width and `srcRow` multiples of 8, `src` 16-byte
/// aligned) the copies are cp.async ones the caller waits for; otherwise
/// plain stores, visible after the next barrier.
template <int kPad>
__device__ __forceinline__ void
stageTile(uint16_t *dst, int stride, const uint16_t *src, int srcRow,
          int64_t first, int64_t rowCount, int width, int tileRows,
          bool async) {
  if (async) {
    constexpr int kPieces = kPad / 8;
    for (int index = threadIdx.x; index < tileRows * kPieces;
         index += kThreads) {
      int r = index / kPieces, c = index % kPieces * 8;
      int64_t row = first + r;
      bool valid = row < rowCount && c < width;
      copyAsync16(dst + r * stride + c, valid ? src + row * srcRow + c : src,
                  valid);
    }
    return;
  }
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int r = warp; r < tileRows; r += kThreads / 32) {
    int64_t row = first + r;
    uint16_t *out = dst + r * stride;
    const uint16_t *in = src + row * srcRow;
    bool valid = row < rowCount;
    for (int c = lane; c < kPad; c += 32)
      out[c] = valid && c < width ? in[c] : uint16_t(0);
  }
}

/// Stages keys and values [k0, k0 + rows) into `ks` and `vs`.
template <int kPad>
__device__ __forceinline__ void
stageKeysAndValues(uint16_t *ks, uint16_t *vs, int stride, const uint16_t *key,
                   const uint16_t *value, int64_t k0, const Dims &dims,
                   int rows, bool async) {
  stageTile<kPad>(ks, stride, key, dims.key.row, k0, dims.keys, dims.headSize,
                  rows, async);
  stageTile<kPad>(vs, stride, value, dims.value.row, k0, dims.keys,
                  dims.valueSize, rows, async);
}

/// The step of a loop over double-buffered tiles of `rows` keys and values
/// (tile t in buffer t % 2): starts copying tile `tile` + 1, if there is
/// one, into the other buffer and waits for tile `tile`'s copies; the
/// caller then synchronises the block.
template <int kPad>
__device__ __forceinline__ void
advanceKeyTiles(uint16_t *ks, uint16_t *vs, int stride, const uint16_t *key,
                const uint16_t *value, int64_t tile, int64_t tiles,
                const Dims &dims, int rows, bool async) {
  if (tile + 1 < tiles) {
    int next = static_cast<int>((tile + 1) & 1);
    stageKeysAndValues<kPad>(ks + next * rows * stride,
                             vs + next * rows * stride, stride, key, value,
                             (tile + 1) * rows, dims, rows, async);
    commitCopies();
    waitCopies<1>();
  } else {
    waitCopies<0>();
  }
}

/// The A fragment of rows [row, row + 16) and columns [column, column +
/// 16) of a row-major tile.
__device__ __forceinline__ void loadA(uint32_t (&a)[4], const uint16_t *tile,
                                      int stride, int row, int column) {
  int lane = threadIdx.x & 31;
  ldmatrix(a, tile + (row + (lane & 15)) * stride + column + (lane >> 4) * 8);
}

/// The B fragments (k x n = 16 x 8) of two n-tiles whose columns n are the
/// rows [row, row + 16) of a row-major tile, over the tile's columns
/// [column, column + 16) (products with a transposed tile, q k^T):
/// b[0], b[1] for rows row.., b[2], b[3] for rows row + 8...
__device__ __forceinline__ void loadBRows(uint32_t (&b)[4],
                                          const uint16_t *tile, int stride,
                                          int row, int column) {
  int lane = threadIdx.x & 31;
  ldmatrix(b, tile + (row + (lane & 7) + (lane >> 4) * 8) * stride + column +
                  ((lane >> 3) & 1) * 8);
}

/// The B fragments (k x n = 16 x 8) of rows [row, row + 16) of a row-major
/// tile and its columns [column, column + 16) (p v, ds k): b[0], b[1] for
/// columns column.., b[2], b[3] for columns column + 8...
__device__ __forceinline__ void loadBColumns(uint32_t (&b)[4],
                                             const uint16_t *tile, int stride,
                                             int row, int column) {
  int lane = threadIdx.x & 31;
  ldmatrixTrans(b, tile + (row + (lane & 7) + ((lane >> 3) & 1) * 8) * stride +
                       column + (lane >> 4) * 8);
}

/// acc[r][n] += a_r b over the k-steps of a tile product whose B fragments
/// are rows of `tile` (scores = q k^T); a_r is rows [aRow + 16 r, aRow +
/// 16 r + 16) of `aTile`. Each B fragment feeds the R row tiles.
template <typename T, int kSteps, int R, int N>
__device__ __forceinline__ void productRows(float (&acc)[R][N][4],
                                            const uint16_t *aTile,
                                            const uint16_t *tile, int stride,
                                            int aRow) {
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    uint32_t a[R][4];
#pragma unroll
    for (int r = 0; r < R; ++r)
      loadA(a[r], aTile, stride, aRow + 16 * r, 16 * step);
#pragma unroll
    for (int n = 0; n < N; n += 2) {
      uint32_t b[4];
      loadBRows(b, tile, stride, 8 * n, 16 * step);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        mma<T>(acc[r][n], a[r], b[0], b[1]);
        mma<T>(acc[r][n + 1], a[r], b[2], b[3]);
      }
    }
  }
}

/// The A fragment of k-step `step` from accumulators of 16 x 8 tiles
/// (2 step and 2 step + 1), rounded to T.
template <typename T, int N>
__device__ __forceinline__ void
accumulatorsAsA(uint32_t (&a)[4], const float (&c)[N][4], int step) {
  a[0] = packFloats<T>(c[2 * step][0], c[2 * step][1]);
  a[1] = packFloats<T>(c[2 * step][2], c[2 * step][3]);
  a[2] = packFloats<T>(c[2 * step + 1][0], c[2 * step + 1][1]);
  a[3] = packFloats<T>(c[2 * step + 1][2], c[2 * step + 1][3]);
}

/// acc[r] += c[r] tile over the k-steps of accumulators `c` (R row tiles
/// of 16 x 8 tiles, rounded to T), B fragments down the columns of `tile`
/// (p v, ds k). Each B fragment feeds the R row tiles.
template <typename T, int R, int M, int N>
__device__ __forceinline__ void productColumns(float (&acc)[R][N][4],
                                               const float (&c)[R][M][4],
                                               const uint16_t *tile,
                                               int stride) {
#pragma unroll
  for (int step = 0; step < M / 2; ++step) {
    uint32_t a[R][4];
#pragma unroll
    for (int r = 0; r < R; ++r)
      accumulatorsAsA<T>(a[r], c[r], step);
#pragma unroll
    for (int n = 0; n < N; n += 2) {
      uint32_t b[4];
      loadBColumns(b, tile, stride, 16 * step, 8 * n);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        mma<T>(acc[r][n], a[r], b[0], b[1]);
        mma<T>(acc[r][n + 1], a[r], b[2], b[3]);
      }
    }
  }
}

/// Sums over the four lanes that share a row of an accumulator tile.
__device__ __forceinline__ float quadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float quadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

/// Stores the pair (x, y) at columns `column`, `column` + 1 of a row of
/// `width` elements: one 32-bit store where `paired` (even widths, aligned
/// rows), else element by element below `width`.
template <typename T>
__device__ __forceinline__ void storePair(T *row, int column, int width,
                                          float x, float y, bool paired) {
  if (paired && column + 1 < width) {
    *reinterpret_cast<uint32_t *>(row + column) = packFloats<T>(x, y);
    return;
  }
  if (column < width)
    store(row + column, x);
  if (column + 1 < width)
    store(row + column + 1, y);
}

/// Whether key j is visible to query i.
__device__ __forceinline__ bool visible(const Dims &dims, int64_t i,
                                        int64_t j) {
  return i < dims.queries && j < dims.keys &&
         (!dims.causal || j <= i + dims.offset);
}

/// Whether a tile of queries [q0, q0 + rows) against keys [k0, k0 + cols)
/// has a pair that is not visible (past the keys, or over the causal
/// diagonal); past the queries, rows read zeros and are never written.
__device__ __forceinline__ bool needsMask(const Dims &dims, int64_t q0,
                                          int64_t k0, int cols) {
  return k0 + cols > dims.keys ||
         (dims.causal && k0 + cols - 1 > q0 + dims.offset);
}

/// The exclusive end of the keys visible to queries [q0, q0 + rows).
__device__ __forceinline__ int64_t keyEndFor(const Dims &dims, int64_t q0,
                                             int rows) {
  if (!dims.causal)
    return dims.keys;
  return min(dims.keys, min(q0 + rows, dims.queries) - 1 + dims.offset + 1);
}

// The tilings of the three passes for head sizes up to 64; wider heads
// take one row tile a warp, 64 keys per forward tile, 32 queries per key
// gradient tile and 64 keys per query gradient tile, and the registers
// they need. bench/attention_sweep.sh builds the attention benchmark with
// other values (-D) to compare them; these are the fastest it measured
// (bench/NOTES.md): one row tile a warp, and registers capped so that four
// blocks fit a multiprocessor, which hides more latency than a second row
// tile's reuse of each fragment saves.
#ifndef ZCC_ATTENTION_FORWARD_ROWS
#define ZCC_ATTENTION_FORWARD_ROWS 1
#endif
#ifndef ZCC_ATTENTION_FORWARD_STREAM
#define ZCC_ATTENTION_FORWARD_STREAM 64
#endif
#ifndef ZCC_ATTENTION_FORWARD_MIN_BLOCKS
#define ZCC_ATTENTION_FORWARD_MIN_BLOCKS 4
#endif
#ifndef ZCC_ATTENTION_KEY_ROWS
#define ZCC_ATTENTION_KEY_ROWS 1
#endif
#ifndef ZCC_ATTENTION_KEY_STREAM
#define ZCC_ATTENTION_KEY_STREAM 32
#endif
#ifndef ZCC_ATTENTION_KEY_MIN_BLOCKS
#define ZCC_ATTENTION_KEY_MIN_BLOCKS 4
#endif
#ifndef ZCC_ATTENTION_QUERY_ROWS
#define ZCC_ATTENTION_QUERY_ROWS 1
#endif
#ifndef ZCC_ATTENTION_QUERY_STREAM
#define ZCC_ATTENTION_QUERY_STREAM 32
#endif
#ifndef ZCC_ATTENTION_QUERY_MIN_BLOCKS
#define ZCC_ATTENTION_QUERY_MIN_BLOCKS 4
#endif

/// One pass's tiling: row tiles of 16 per warp (each B fragment read from
/// shared memory feeds that many products; a block owns 64 rows of each),
/// rows of each streamed tile, and the blocks per multiprocessor the
/// register allocation must leave room for.
struct Tiling {
  int rows, stream, minBlocks;
};
enum class MmaPass { kForward, kKeyGrad, kQueryGrad };
template <int kPad, MmaPass kPass> constexpr Tiling tilingFor() {
  if (kPad > 64)
    return {1, kPass == MmaPass::kKeyGrad ? 32 : 64, 1};
  switch (kPass) {
  case MmaPass::kForward:
    return {ZCC_ATTENTION_FORWARD_ROWS, ZCC_ATTENTION_FORWARD_STREAM,
            ZCC_ATTENTION_FORWARD_MIN_BLOCKS};
  case MmaPass::kKeyGrad:
    return {ZCC_ATTENTION_KEY_ROWS, ZCC_ATTENTION_KEY_STREAM,
            ZCC_ATTENTION_KEY_MIN_BLOCKS};
  default:
    return {ZCC_ATTENTION_QUERY_ROWS, ZCC_ATTENTION_QUERY_STREAM,
            ZCC_ATTENTION_QUERY_MIN_BLOCKS};
  }
}

/// Forward (kStats: the backward's statistics pass): a block owns 64 R
/// queries of one head (16 R a warp) and streams tiles of 64 keys.
template <typename T, int kPad, bool kStats,
          int R = tilingFor<kPad, MmaPass::kForward>().rows,
          int kStream = tilingFor<kPad, MmaPass::kForward>().stream,
          int kMinBlocks = tilingFor<kPad, MmaPass::kForward>().minBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    mmaForwardKernel(KernelArgs args) {
  constexpr int kBlock = 64 * R;
  constexpr int kSteps = kPad / 16, kOut = kPad / 8,
                kScores = kStream / 8;
  constexpr int stride = kPad + 8;
  const Dims &dims = args.dims;
  uint16_t *qs = reinterpret_cast<uint16_t *>(attentionShared);
  uint16_t *ks = qs + kBlock * stride; // two buffers
  uint16_t *vs = ks + 2 * kStream * stride;

  int64_t tiles = (dims.queries + kBlock - 1) / kBlock;
  int64_t head = blockIdx.x % dims.heads;
  int64_t q0 = (tiles - 1 - blockIdx.x / dims.heads) * kBlock;
  int64_t qBase = head * dims.queries;
  const uint16_t *query = headRows(static_cast<const uint16_t *>(args.query),
                                   dims.query, dims, head);
  const uint16_t *key =
      headRows(static_cast<const uint16_t *>(args.key), dims.key, dims, head);
  const uint16_t *value = headRows(static_cast<const uint16_t *>(args.value),
                                   dims.value, dims, head);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2,
            t = lane & 3, warpRow = 16 * R * warp;
  const float scaleLog2 = static_cast<float>(args.scale) * kLog2e;
  const bool async = args.async;
  // This thread's rows: row g and row g + 8 of each of the warp's tiles.
  int64_t rows[R][2];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      rows[r][h] = q0 + warpRow + 16 * r + g + 8 * h;

  const int64_t keyTiles =
      (keyEndFor(dims, q0, kBlock) + kStream - 1) / kStream;
  stageTile<kPad>(qs, stride, query, dims.query.row, q0, dims.queries, dims.headSize, kBlock,
                  async);
  commitCopies();
  if (keyTiles > 0)
    stageKeysAndValues<kPad>(ks, vs, stride, key, value, 0, dims, kStream,
                             async);
  commitCopies();

  float out[R][kOut][4] = {};
  // The running maximum (base-2 units) and this lane's part of the sum.
  float rowMax[R][2], rowSum[R][2];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      rowMax[r][h] = -INFINITY;
      rowSum[r][h] = 0;
    }
  for (int64_t tile = 0; tile < keyTiles; ++tile) {
    const int64_t k0 = tile * kStream;
    const int buffer = tile & 1;
    advanceKeyTiles<kPad>(ks, vs, stride, key, value, tile, keyTiles, dims,
                          kStream, async);
    __syncthreads(); // This tile (and the queries) are in shared memory.
    const uint16_t *kt = ks + buffer * kStream * stride;
    const uint16_t *vt = vs + buffer * kStream * stride;

    float s[R][kScores][4] = {};
    productRows<T, kSteps>(s, qs, kt, stride, warpRow);
    const bool masked = needsMask(dims, q0 + warpRow, k0, kStream);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float tileMax = -INFINITY;
#pragma unroll
        for (int n = 0; n < kScores; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float &x = s[r][n][2 * h + e];
            x *= scaleLog2;
            if (masked && !visible(dims, rows[r][h], k0 + 8 * n + 2 * t + e))
              x = -INFINITY;
            tileMax = fmaxf(tileMax, x);
          }
        float newMax = fmaxf(rowMax[r][h], quadMax(tileMax));
        float reference = newMax == -INFINITY ? 0.0f : newMax;
        float correction = exp2f(rowMax[r][h] - reference);
        rowMax[r][h] = newMax;
        float sum = 0;
#pragma unroll
        for (int n = 0; n < kScores; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float &x = s[r][n][2 * h + e];
            x = exp2f(x - reference);
            sum += x;
          }
        rowSum[r][h] = rowSum[r][h] * correction + sum;
#pragma unroll
        for (int n = 0; n < kOut; ++n) {
          out[r][n][2 * h] *= correction;
          out[r][n][2 * h + 1] *= correction;
        }
      }
    productColumns<T>(out, s, vt, stride);
    __syncthreads(); // This tile's buffer is consumed.
  }
  waitCopies<0>();

#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int64_t i = rows[r][h];
      bool valid = i < dims.queries;
      float total = quadSum(rowSum[r][h]);
      if constexpr (!kStats) {
        if (!valid)
          continue;
        // Without any key the cpu divides 0 by 0: NaN here too.
        T *result =
            headRows(static_cast<T *>(args.result), dims.output, dims, head) +
            i * dims.output.row;
#pragma unroll
        for (int n = 0; n < kOut; ++n)
          storePair(result, 8 * n + 2 * t, dims.valueSize,
                    out[r][n][2 * h] / total, out[r][n][2 * h + 1] / total,
                    async);
        // ln(sum 2^x) = ln 2 (max + log2(sum 2^(x - max))); -inf without keys.
        if (args.lse && t == 0)
          static_cast<float *>(args.lse)[qBase + i] =
              (rowMax[r][h] + log2f(total)) * kLn2;
      } else {
        float inverseSum = 1.0f / total;
        const T *grad = headRows(static_cast<const T *>(args.grad),
                                 dims.output, dims, head) +
                        (valid ? i : 0) * dims.output.row;
        float delta = 0;
#pragma unroll
        for (int n = 0; n < kOut; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            int column = 8 * n + 2 * t + e;
            if (valid && column < dims.valueSize)
              delta +=
                  load(grad + column) * (out[r][n][2 * h + e] * inverseSum);
          }
        delta = quadSum(delta);
        if (valid && t == 0) {
          static_cast<float *>(args.rowMax)[qBase + i] =
              rowMax[r][h] == -INFINITY ? 0.0f : rowMax[r][h];
          static_cast<float *>(args.rowInverseSum)[qBase + i] = inverseSum;
          static_cast<float *>(args.rowDelta)[qBase + i] = delta;
        }
      }
    }
}

/// The backward's statistics from the forward's saved result and
/// log-sum-exp, for the tensor-core kernels: per query row the maximum in
/// base-2 units (lse log2 e, with a reciprocal sum of 1, so p = 2^(x -
/// lse log2 e)) and D = grad . output. A warp a row; a row without keys
/// (lse -inf) gets zero probabilities.
template <typename T>
__global__ void __launch_bounds__(kThreads) savedStatisticsKernel(KernelArgs args) {
  const Dims &dims = args.dims;
  int64_t rows = dims.heads * dims.queries;
  int warps = kThreads / 32, lane = threadIdx.x & 31;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5);
       row < rows; row += static_cast<int64_t>(gridDim.x) * warps) {
    int64_t head = row / dims.queries, i = row % dims.queries;
    const T *grad =
        headRows(static_cast<const T *>(args.grad), dims.output, dims, head) +
        i * dims.output.row;
    const T *output =
        headRows(static_cast<const T *>(args.output), dims.output, dims, head) +
        i * dims.output.row;
    float delta = 0;
    for (int c = lane; c < dims.valueSize; c += 32)
      delta += load(grad + c) * load(output + c);
    for (int offset = 16; offset > 0; offset >>= 1)
      delta += __shfl_xor_sync(0xffffffffu, delta, offset);
    if (lane == 0) {
      float lse = static_cast<const float *>(args.savedLse)[row];
      bool any = lse != -INFINITY;
      static_cast<float *>(args.rowMax)[row] = any ? lse * kLog2e : 0.0f;
      static_cast<float *>(args.rowInverseSum)[row] = any ? 1.0f : 0.0f;
      static_cast<float *>(args.rowDelta)[row] = delta;
    }
  }
}

/// Key and value gradients: a block owns 64 R keys of one head (16 R a
/// warp) and streams the query tiles that see them.
template <typename T, int kPad,
          int R = tilingFor<kPad, MmaPass::kKeyGrad>().rows,
          int kStream = tilingFor<kPad, MmaPass::kKeyGrad>().stream,
          int kMinBlocks = tilingFor<kPad, MmaPass::kKeyGrad>().minBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    mmaKeyGradKernel(KernelArgs args) {
  constexpr int kBlock = 64 * R;
  constexpr int kSteps = kPad / 16,
                kOut = kPad / 8, kScores = kStream / 8;
  constexpr int stride = kPad + 8;
  const Dims &dims = args.dims;
  float *stats = reinterpret_cast<float *>(attentionShared); // two buffers
  uint16_t *ks = reinterpret_cast<uint16_t *>(stats + 2 * 3 * kStream);
  uint16_t *vs = ks + kBlock * stride;
  uint16_t *qs = vs + kBlock * stride; // two buffers
  uint16_t *gs = qs + 2 * kStream * stride;

  int64_t head = blockIdx.x % dims.heads;
  int64_t k0 = (blockIdx.x / dims.heads) * kBlock;
  int64_t qBase = head * dims.queries;
  const uint16_t *query = headRows(static_cast<const uint16_t *>(args.query),
                                   dims.query, dims, head);
  const uint16_t *grad = headRows(static_cast<const uint16_t *>(args.grad),
                                  dims.output, dims, head);
  const uint16_t *key =
      headRows(static_cast<const uint16_t *>(args.key), dims.key, dims, head);
  const uint16_t *value = headRows(static_cast<const uint16_t *>(args.value),
                                   dims.value, dims, head);
  const float *rowMax = static_cast<const float *>(args.rowMax) + qBase;
  const float *rowInverseSum =
      static_cast<const float *>(args.rowInverseSum) + qBase;
  const float *rowDelta = static_cast<const float *>(args.rowDelta) + qBase;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2,
            t = lane & 3, warpRow = 16 * R * warp;
  const float scale = static_cast<float>(args.scale),
              scaleLog2 = scale * kLog2e;
  const bool async = args.async;
  int64_t keys[R][2];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      keys[r][h] = k0 + warpRow + 16 * r + g + 8 * h;

  // Stages query tile `q0` (queries, gradients, statistics) into `buffer`.
  auto stageQueries = [&](int64_t q0, int buffer) {
    stageTile<kPad>(qs + buffer * kStream * stride, stride, query, dims.query.row, q0,
                    dims.queries, dims.headSize, kStream, async);
    stageTile<kPad>(gs + buffer * kStream * stride, stride, grad, dims.output.row, q0,
                    dims.queries, dims.valueSize, kStream, async);
    float *stat = stats + buffer * 3 * kStream;
    for (int r = threadIdx.x; r < kStream; r += kThreads) {
      bool valid = q0 + r < dims.queries;
      stat[r] = valid ? rowMax[q0 + r] : 0.0f;
      stat[kStream + r] = valid ? rowInverseSum[q0 + r] : 0.0f;
      stat[2 * kStream + r] = valid ? rowDelta[q0 + r] : 0.0f;
    }
  };

  int64_t firstQuery = dims.causal && k0 > dims.offset ? k0 - dims.offset : 0;
  const int64_t firstTile = firstQuery / kStream,
                endTile = (dims.queries + kStream - 1) / kStream;
  stageKeysAndValues<kPad>(ks, vs, stride, key, value, k0, dims, kBlock, async);
  if (firstTile < endTile)
    stageQueries(firstTile * kStream, 0);
  commitCopies();

  float keyGrad[R][kOut][4] = {}, valueGrad[R][kOut][4] = {};
  for (int64_t tile = firstTile; tile < endTile; ++tile) {
    const int64_t q0 = tile * kStream;
    const int buffer = (tile - firstTile) & 1;
    if (tile + 1 < endTile) {
      stageQueries(q0 + kStream, buffer ^ 1);
      commitCopies();
      waitCopies<1>();
    } else {
      waitCopies<0>();
    }
    __syncthreads(); // This tile (and the keys) are in shared memory.
    const uint16_t *qt = qs + buffer * kStream * stride;
    const uint16_t *gt = gs + buffer * kStream * stride;
    const float *stat = stats + buffer * 3 * kStream;

    // Transposed scores s^T = k q^T and dp^T = v grad^T: rows are keys.
    float s[R][kScores][4] = {}, dp[R][kScores][4] = {};
    productRows<T, kSteps>(s, ks, qt, stride, warpRow);
    productRows<T, kSteps>(dp, vs, gt, stride, warpRow);
    // p^T into s, ds^T into dp.
    const bool masked = needsMask(dims, q0, k0 + warpRow, 16 * R);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int n = 0; n < kScores; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int local = 8 * n + 2 * t + (e & 1);
          float p = exp2f(s[r][n][e] * scaleLog2 - stat[local]) *
                    stat[kStream + local];
          if (masked && !visible(dims, q0 + local, keys[r][e >> 1]))
            p = 0.0f;
          s[r][n][e] = p;
          dp[r][n][e] = p * (dp[r][n][e] - stat[2 * kStream + local]);
        }
    productColumns<T>(valueGrad, s, gt, stride);
    productColumns<T>(keyGrad, dp, qt, stride);
    __syncthreads(); // This tile's buffer is consumed.
  }
  waitCopies<0>();

#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int64_t j = keys[r][h];
      if (j >= dims.keys)
        continue;
      T *keyOut = headRows(static_cast<T *>(args.keyGrad), dims.key, dims, head) +
                  j * dims.key.row;
      T *valueOut =
          headRows(static_cast<T *>(args.valueGrad), dims.value, dims, head) +
          j * dims.value.row;
#pragma unroll
      for (int n = 0; n < kOut; ++n) {
        int column = 8 * n + 2 * t;
        storePair(keyOut, column, dims.headSize, keyGrad[r][n][2 * h] * scale,
                  keyGrad[r][n][2 * h + 1] * scale, async);
        storePair(valueOut, column, dims.valueSize, valueGrad[r][n][2 * h],
                  valueGrad[r][n][2 * h + 1], async);
      }
    }
}

/// Query gradients: a block owns 64 R queries of one head (16 R a warp)
/// and streams tiles of keys.
template <typename T, int kPad,
          int R = tilingFor<kPad, MmaPass::kQueryGrad>().rows,
          int kStream = tilingFor<kPad, MmaPass::kQueryGrad>().stream,
          int kMinBlocks = tilingFor<kPad, MmaPass::kQueryGrad>().minBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    mmaQueryGradKernel(KernelArgs args) {
  constexpr int kBlock = 64 * R;
  constexpr int kSteps = kPad / 16,
                kOut = kPad / 8, kScores = kStream / 8;
  constexpr int stride = kPad + 8;
  const Dims &dims = args.dims;
  uint16_t *qs = reinterpret_cast<uint16_t *>(attentionShared);
  uint16_t *gs = qs + kBlock * stride;
  uint16_t *ks = gs + kBlock * stride; // two buffers
  uint16_t *vs = ks + 2 * kStream * stride;

  int64_t tiles = (dims.queries + kBlock - 1) / kBlock;
  int64_t head = blockIdx.x % dims.heads;
  int64_t q0 = (tiles - 1 - blockIdx.x / dims.heads) * kBlock;
  int64_t qBase = head * dims.queries;
  const uint16_t *query = headRows(static_cast<const uint16_t *>(args.query),
                                   dims.query, dims, head);
  const uint16_t *grad = headRows(static_cast<const uint16_t *>(args.grad),
                                  dims.output, dims, head);
  const uint16_t *key =
      headRows(static_cast<const uint16_t *>(args.key), dims.key, dims, head);
  const uint16_t *value = headRows(static_cast<const uint16_t *>(args.value),
                                   dims.value, dims, head);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2,
            t = lane & 3, warpRow = 16 * R * warp;
  const float scale = static_cast<float>(args.scale),
              scaleLog2 = scale * kLog2e;
  const bool async = args.async;
  int64_t rows[R][2];
  float statMax[R][2], statInverseSum[R][2], statDelta[R][2];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int64_t i = q0 + warpRow + 16 * r + g + 8 * h;
      rows[r][h] = i;
      bool valid = i < dims.queries;
      statMax[r][h] =
          valid ? static_cast<const float *>(args.rowMax)[qBase + i] : 0;
      statInverseSum[r][h] =
          valid ? static_cast<const float *>(args.rowInverseSum)[qBase + i]
                : 0;
      statDelta[r][h] =
          valid ? static_cast<const float *>(args.rowDelta)[qBase + i] : 0;
    }

  const int64_t keyTiles =
      (keyEndFor(dims, q0, kBlock) + kStream - 1) / kStream;
  stageTile<kPad>(qs, stride, query, dims.query.row, q0, dims.queries, dims.headSize, kBlock,
                  async);
  stageTile<kPad>(gs, stride, grad, dims.output.row, q0, dims.queries, dims.valueSize, kBlock,
                  async);
  if (keyTiles > 0)
    stageKeysAndValues<kPad>(ks, vs, stride, key, value, 0, dims, kStream,
                             async);
  commitCopies();

  float queryGrad[R][kOut][4] = {};
  for (int64_t tile = 0; tile < keyTiles; ++tile) {
    const int64_t k0 = tile * kStream;
    const int buffer = tile & 1;
    advanceKeyTiles<kPad>(ks, vs, stride, key, value, tile, keyTiles, dims,
                          kStream, async);
    __syncthreads(); // This tile (and the queries) are in shared memory.
    const uint16_t *kt = ks + buffer * kStream * stride;
    const uint16_t *vt = vs + buffer * kStream * stride;

    float s[R][kScores][4] = {}, dp[R][kScores][4] = {};
    productRows<T, kSteps>(s, qs, kt, stride, warpRow);
    productRows<T, kSteps>(dp, gs, vt, stride, warpRow);
    // ds into dp.
    const bool masked = needsMask(dims, q0 + warpRow, k0, kStream);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int n = 0; n < kScores; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int h = e >> 1;
          float p = exp2f(s[r][n][e] * scaleLog2 - statMax[r][h]) *
                    statInverseSum[r][h];
          if (masked &&
              !visible(dims, rows[r][h], k0 + 8 * n + 2 * t + (e & 1)))
            p = 0.0f;
          dp[r][n][e] = p * (dp[r][n][e] - statDelta[r][h]);
        }
    productColumns<T>(queryGrad, dp, kt, stride);
    __syncthreads(); // This tile's buffer is consumed.
  }
  waitCopies<0>();

#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int64_t i = rows[r][h];
      if (i >= dims.queries)
        continue;
      T *out =
          headRows(static_cast<T *>(args.queryGrad), dims.query, dims, head) +
          i * dims.query.row;
#pragma unroll
      for (int n = 0; n < kOut; ++n)
        storePair(out, 8 * n + 2 * t, dims.headSize,
                  queryGrad[r][n][2 * h] * scale,
                  queryGrad[r][n][2 * h + 1] * scale, async);
    }
}

//===----------------------------------------------------------------------===//
// Launch configurations
//===----------------------------------------------------------------------===//

/// Head-size columns per thread: the wider head size rounded up to 64, 128
/// or 256 (eight column groups).
int chunksFor(const AttentionShape &shape) {
  int64_t widest =
      shape.headSize > shape.valueSize ? shape.headSize : shape.valueSize;
  if (widest <= 64)
    return 8;
  if (widest <= 128)
    return 16;
  return 32;
}

/// Rows per thread: tiles as large as registers and shared memory allow
/// (f64 takes twice the room; the backward keeps two accumulators).
template <typename A, int kChunks, bool kBackward> constexpr int rowsFor() {
  constexpr int limit = kBackward ? 8 : 16;
  constexpr int rows = kChunks <= limit ? 4 : 2;
  return sizeof(A) == 8 ? rows / 2 : rows;
}

enum class Pass { kForward, kStats, kKeyGrad, kQueryGrad };

/// Shared memory of one block of `pass`, in elements of A.
int64_t sharedElements(Pass pass, int tile, const AttentionShape &shape) {
  int64_t q = tile * int64_t{oddStride(shape.headSize)};
  int64_t v = tile * int64_t{oddStride(shape.valueSize)};
  int64_t p = tile * int64_t{tile + 1};
  switch (pass) {
  case Pass::kForward:
  case Pass::kStats:
    return 2 * q + v + p;
  case Pass::kKeyGrad:
    return 2 * q + 2 * v + 2 * p + 3 * tile;
  case Pass::kQueryGrad:
    return 2 * q + 2 * v + p;
  }
  return 0;
}

template <typename Kernel>
cudaError_t launchPass(Kernel kernel, int64_t blocks, size_t sharedBytes,
                       const KernelArgs &args, cudaStream_t stream) {
  if (blocks == 0)
    return cudaSuccess;
  if (blocks > 0x7fffffff)
    return cudaErrorInvalidConfiguration;
  cudaError_t error =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(sharedBytes));
  if (error != cudaSuccess)
    return error;
  kernel<<<static_cast<unsigned>(blocks), kThreads, sharedBytes, stream>>>(
      args);
  return cudaGetLastError();
}

template <typename T, int kChunks>
cudaError_t runForward(const KernelArgs &args, const AttentionShape &shape,
                       bool stats, cudaStream_t stream) {
  using A = Acc<T>;
  constexpr int R = rowsFor<A, kChunks, false>();
  constexpr int kTile = kRowGroups * R;
  int64_t blocks = (shape.queries + kTile - 1) / kTile * shape.heads;
  size_t bytes = sharedElements(Pass::kForward, kTile, shape) * sizeof(A);
  if (stats)
    return launchPass(attentionForwardKernel<T, R, kChunks, true>, blocks,
                      bytes, args, stream);
  return launchPass(attentionForwardKernel<T, R, kChunks, false>, blocks, bytes,
                    args, stream);
}

template <typename T, int kChunks>
cudaError_t runBackward(const KernelArgs &args, const AttentionShape &shape,
                        cudaStream_t stream) {
  if (cudaError_t error = runForward<T, kChunks>(args, shape, true, stream);
      error != cudaSuccess)
    return error;
  using A = Acc<T>;
  constexpr int R = rowsFor<A, kChunks, true>();
  constexpr int kTile = kRowGroups * R;
  int64_t keyBlocks = (shape.keys + kTile - 1) / kTile * shape.heads;
  if (cudaError_t error =
          launchPass(attentionKeyGradKernel<T, R, kChunks>, keyBlocks,
                     sharedElements(Pass::kKeyGrad, kTile, shape) * sizeof(A),
                     args, stream);
      error != cudaSuccess)
    return error;
  int64_t queryBlocks = (shape.queries + kTile - 1) / kTile * shape.heads;
  return launchPass(attentionQueryGradKernel<T, R, kChunks>, queryBlocks,
                    sharedElements(Pass::kQueryGrad, kTile, shape) * sizeof(A),
                    args, stream);
}

template <typename T, int kPad>
cudaError_t runMmaForward(const KernelArgs &args, const AttentionShape &shape,
                          bool stats, cudaStream_t stream) {
  constexpr Tiling tiling = tilingFor<kPad, MmaPass::kForward>();
  constexpr size_t stride = kPad + 8, rows = 64 * tiling.rows;
  int64_t blocks = (shape.queries + rows - 1) / rows * shape.heads;
  // The queries, and two buffers each of keys and values.
  size_t bytes = (rows + 4 * tiling.stream) * stride * sizeof(uint16_t);
  if (stats)
    return launchPass(mmaForwardKernel<T, kPad, true>, blocks, bytes, args,
                      stream);
  return launchPass(mmaForwardKernel<T, kPad, false>, blocks, bytes, args,
                    stream);
}

template <typename T, int kPad>
cudaError_t runMmaBackward(const KernelArgs &args, const AttentionShape &shape,
                           cudaStream_t stream) {
  cudaError_t error = cudaSuccess;
  if (args.output && args.savedLse) {
    int64_t rows = shape.heads * shape.queries;
    int64_t blocks = (rows + kThreads / 32 - 1) / (kThreads / 32);
    savedStatisticsKernel<T>
        <<<static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16),
           kThreads, 0, stream>>>(args);
    error = cudaGetLastError();
  } else {
    error = runMmaForward<T, kPad>(args, shape, true, stream);
  }
  if (error != cudaSuccess)
    return error;
  constexpr Tiling keyTiling = tilingFor<kPad, MmaPass::kKeyGrad>(),
                   queryTiling = tilingFor<kPad, MmaPass::kQueryGrad>();
  constexpr size_t stride = kPad + 8, keyRows = 64 * keyTiling.rows,
                   queryRows = 64 * queryTiling.rows;
  int64_t keyBlocks = (shape.keys + keyRows - 1) / keyRows * shape.heads;
  // The block's keys and values; two buffers each of query statistics,
  // queries and gradients.
  size_t keyBytes =
      2 * 3 * keyTiling.stream * sizeof(float) +
      (2 * keyRows + 4 * keyTiling.stream) * stride * sizeof(uint16_t);
  if (cudaError_t error = launchPass(mmaKeyGradKernel<T, kPad>, keyBlocks,
                                     keyBytes, args, stream);
      error != cudaSuccess)
    return error;
  int64_t queryBlocks =
      (shape.queries + queryRows - 1) / queryRows * shape.heads;
  // The block's queries and gradients; two buffers each of keys and values.
  size_t queryBytes =
      (2 * queryRows + 4 * queryTiling.stream) * stride * sizeof(uint16_t);
  return launchPass(mmaQueryGradKernel<T, kPad>, queryBlocks, queryBytes, args,
                    stream);
}

template <typename T, int kChunks>
cudaError_t runPasses(const KernelArgs &args, const AttentionShape &shape,
                      bool backward, cudaStream_t stream) {
  if (backward)
    return runBackward<T, kChunks>(args, shape, stream);
  return runForward<T, kChunks>(args, shape, false, stream);
}

template <typename T, int kPad>
cudaError_t runMmaPasses(const KernelArgs &args, const AttentionShape &shape,
                         bool backward, cudaStream_t stream) {
  if (backward)
    return runMmaBackward<T, kPad>(args, shape, stream);
  return runMmaForward<T, kPad>(args, shape, false, stream);
}

/// Runs the forward or the backward for the element type and the head
/// sizes of `shape`: on tensor cores for 16-bit types and head sizes up to
/// kMmaMaxHead, else on the f32 (f64) cores.
cudaError_t dispatchAttention(ElementType type, const AttentionShape &shape,
                              const KernelArgs &args, bool backward,
                              cudaStream_t stream) {
  if (shape.headSize > kMaxAttentionHeadSize ||
      shape.valueSize > kMaxAttentionHeadSize)
    return cudaErrorInvalidValue;
  cudaError_t error = cudaErrorInvalidValue;
  int64_t widest =
      shape.headSize > shape.valueSize ? shape.headSize : shape.valueSize;
  int chunks = chunksFor(shape);
  dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, __half> ||
                  std::is_same_v<T, __nv_bfloat16>) {
      if (widest <= kMmaMaxHead) {
        error = widest <= 64
                    ? runMmaPasses<T, 64>(args, shape, backward, stream)
                    : runMmaPasses<T, 128>(args, shape, backward, stream);
        return;
      }
    }
    if (chunks == 8)
      error = runPasses<T, 8>(args, shape, backward, stream);
    else if (chunks == 16)
      error = runPasses<T, 16>(args, shape, backward, stream);
    else
      error = runPasses<T, 32>(args, shape, backward, stream);
  });
  return error;
}

} // namespace

size_t attentionGradWorkspaceBytes(ElementType type,
                                   const AttentionShape &shape) {
  size_t accumulator = type == ElementType::kF64 ? 8 : 4;
  return 3 * static_cast<size_t>(shape.heads) *
         static_cast<size_t>(shape.queries) * accumulator;
}

cudaError_t launchAttention(const AttentionParams &params,
                            cudaStream_t stream) {
  const AttentionShape &shape = params.shape;
  if (shape.heads == 0 || shape.queries == 0 ||
      (shape.valueSize == 0 && !params.lse))
    return cudaSuccess;
  KernelArgs args = {};
  args.dims = dimsOf(shape);
  args.scale = shape.scale;
  args.query = params.query;
  args.key = params.key;
  args.value = params.value;
  args.result = params.result;
  args.lse = params.lse;
  args.async = wholePieces(shape, {params.query, params.key, params.value,
                                   params.result});
  return dispatchAttention(params.type, shape, args, /*backward=*/false,
                           stream);
}

cudaError_t launchAttentionGrad(const AttentionGradParams &params,
                                cudaStream_t stream) {
  const AttentionShape &shape = params.shape;
  if (shape.heads == 0)
    return cudaSuccess;
  size_t rows = static_cast<size_t>(shape.heads * shape.queries);
  size_t accumulator = params.type == ElementType::kF64 ? 8 : 4;
  KernelArgs args = {};
  args.dims = dimsOf(shape);
  args.scale = shape.scale;
  args.query = params.query;
  args.key = params.key;
  args.value = params.value;
  args.grad = params.grad;
  args.output = params.output;
  args.savedLse = params.lse;
  args.queryGrad = params.queryGrad;
  args.keyGrad = params.keyGrad;
  args.valueGrad = params.valueGrad;
  auto *stats = static_cast<unsigned char *>(params.workspace);
  args.rowMax = stats;
  args.rowInverseSum = stats + rows * accumulator;
  args.rowDelta = stats + 2 * rows * accumulator;
  args.async = wholePieces(shape, {params.query, params.key, params.value,
                                   params.grad, params.queryGrad,
                                   params.keyGrad, params.valueGrad});
  return dispatchAttention(params.type, shape, args, /*backward=*/true, stream);
}

} // namespace zcc::cuda
