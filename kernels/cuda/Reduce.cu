//===- Reduce.cu - reduce_sum, reduce_mean and reduce_max -----------------===//
//
// Two launch shapes. When the innermost input dimension is reduced and the
// reduction is long, a block reduces one result element, its threads
// walking the reduced elements in memory order (coalesced). Otherwise a
// block reduces 32 adjacent result elements (threadIdx.x, which read
// adjacent memory when the innermost dimension is kept), their reduced
// elements split over threadIdx.y and combined in shared memory.
//
// A long reduction with few results is split into chunks over several
// blocks: each writes a partial result into the workspace and a second
// kernel combines a result's partials in chunk order. The split depends on
// the shapes alone (not on the device), and every combination has a fixed
// order, so results are reproducible; no atomics.
//
// Float types accumulate in float (f64 in double); integer sums wrap as
// uint64 like the cpu kernel's; reduce_max propagates NaN and returns -inf
// (the type's lowest integer) for an empty reduction.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/DeviceSupport.cuh"
#include "kernels/cuda/ReduceLaunch.h"

#include <limits>
#include <type_traits>

namespace zcc::cuda {

namespace {

/// What the kernels need of ReduceParams, passed by value.
struct ReduceLayout {
  int64_t outputs = 0, count = 0;
  DeviceShape keptShape, keptStrides, reducedShape, reducedStrides;
};

/// How elements of storage type T combine for reduction kind K: in the
/// accumulator type A, from identity(), with combine(), and finish() writes
/// a result.
template <typename T, ReduceKind K> struct Reducer {
  static constexpr bool kFloat = !std::is_integral<T>::value;
  using A = std::conditional_t<
      kFloat, Acc<T>,
      std::conditional_t<K == ReduceKind::kMax, T, unsigned long long>>;

  static __device__ __forceinline__ A identity() {
    if constexpr (K != ReduceKind::kMax)
      return A(0);
    else if constexpr (kFloat)
      return A(-INFINITY);
    else
      return std::numeric_limits<T>::lowest();
  }

  static __device__ __forceinline__ A read(const T *p) {
    if constexpr (kFloat)
      return load(p);
    else if constexpr (K == ReduceKind::kMax)
      return *p;
    else
      return static_cast<A>(static_cast<long long>(*p));
  }

  static __device__ __forceinline__ A combine(A a, A b) {
    if constexpr (K != ReduceKind::kMax)
      return a + b;
    else if constexpr (kFloat)
      return (a != a || a > b) ? a : b; // NaN wins, as in torch.amax.
    else
      return a > b ? a : b;
  }

  static __device__ __forceinline__ void finish(T *out, A value,
                                                int64_t count) {
    if constexpr (!kFloat)
      *out = static_cast<T>(value); // Integer sums wrap modulo 2^64.
    else if constexpr (K == ReduceKind::kMean)
      store(out, value / static_cast<A>(count));
    else
      store(out, value);
  }
};

__device__ __forceinline__ int64_t walkOffset(int64_t index,
                                              const DeviceShape &shape,
                                              const DeviceShape &strides) {
  if (shape.rank == 0)
    return 0;
  if (shape.rank == 1)
    return index * strides.dims[0];
  int64_t offset = 0;
  for (int d = shape.rank - 1; d >= 0; --d) {
    int64_t dim = shape.dims[d];
    offset += (index % dim) * strides.dims[d];
    index /= dim;
  }
  return offset;
}

/// Loads a thread issues before combining any: one at a time is latency
/// bound.
constexpr int kUnroll = 8;

/// Folds the elements r = first, first + step, ... below `end` into `acc`,
/// kUnroll loads in flight per thread.
template <typename R, typename T>
__device__ __forceinline__ void
accumulate(typename R::A &acc, const T *x, int64_t base, int64_t first,
           int64_t step, int64_t end, const ReduceLayout &layout) {
  auto at = [&](int64_t r) {
    return R::read(x + base +
                   walkOffset(r, layout.reducedShape, layout.reducedStrides));
  };
  int64_t r = first;
  for (; r + (kUnroll - 1) * step < end; r += kUnroll * step) {
    typename R::A v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      v[u] = at(r + u * step);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      acc = R::combine(acc, v[u]);
  }
  for (; r < end; r += step)
    acc = R::combine(acc, at(r));
}

template <typename R, typename A> __device__ __forceinline__ A warpReduce(A v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = R::combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// blockDim.x a multiple of 32; every thread gets the result.
template <typename R, typename A>
__device__ A blockReduce(A value, A *scratch) {
  value = warpReduce<R>(value);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    scratch[warp] = value;
  __syncthreads();
  int warps = blockDim.x >> 5;
  value = lane < warps ? scratch[lane] : R::identity();
  return warpReduce<R>(value);
}

/// Threads of a column-tile block: 32 results times kTileRows.
constexpr unsigned kTileColumns = 32, kTileRows = 8;
/// Blocks a launch aims at (about eight per SM of an H100/H200).
constexpr int64_t kTargetBlocks = 1024;
/// The fewest elements a thread reduces before a reduction is split more.
constexpr int64_t kMinPerThread = 16;
/// The most blocks a grid-stride launch starts.
constexpr int64_t kMaxBlocks = 65535LL * 16;

/// Result o's partial from chunk s of its reduced elements; `splits` chunks
/// of `chunk` elements. With one chunk the result itself is written.
template <typename R, typename T>
__device__ __forceinline__ void
writeChunk(T *y, typename R::A *partials, const ReduceLayout &layout, int64_t o,
           int64_t s, int64_t splits, typename R::A value) {
  if (splits == 1)
    R::finish(y + o, value, layout.count);
  else
    partials[s * layout.outputs + o] = value;
}

template <typename T, ReduceKind K>
__global__ void __launch_bounds__(1024)
    reduceRowsKernel(const T *x, T *y, ReduceLayout layout, int64_t splits,
                     int64_t chunk, typename Reducer<T, K>::A *partials) {
  using R = Reducer<T, K>;
  using A = typename R::A;
  __shared__ A scratch[32];
  int64_t items = layout.outputs * splits;
  for (int64_t u = blockIdx.x; u < items; u += gridDim.x) {
    int64_t o = u / splits, s = u % splits;
    int64_t base = walkOffset(o, layout.keptShape, layout.keptStrides);
    int64_t begin = s * chunk;
    int64_t end = begin + chunk < layout.count ? begin + chunk : layout.count;
    A acc = R::identity();
    accumulate<R>(acc, x, base, begin + threadIdx.x, blockDim.x, end, layout);
    acc = blockReduce<R>(acc, scratch);
    if (threadIdx.x == 0)
      writeChunk<R>(y, partials, layout, o, s, splits, acc);
  }
}

template <typename T, ReduceKind K>
__global__ void reduceColumnsKernel(const T *x, T *y, ReduceLayout layout,
                                    int64_t splits, int64_t chunk,
                                    typename Reducer<T, K>::A *partials) {
  using R = Reducer<T, K>;
  using A = typename R::A;
  __shared__ A shared[kTileColumns * kTileRows];
  unsigned tx = threadIdx.x, ty = threadIdx.y;
  int64_t tiles = (layout.outputs + kTileColumns - 1) / kTileColumns;
  int64_t items = tiles * splits;
  for (int64_t u = blockIdx.x; u < items; u += gridDim.x) {
    int64_t tile = u / splits, s = u % splits;
    int64_t o = tile * kTileColumns + tx;
    bool valid = o < layout.outputs;
    A acc = R::identity();
    if (valid) {
      int64_t base = walkOffset(o, layout.keptShape, layout.keptStrides);
      int64_t begin = s * chunk;
      int64_t end = begin + chunk < layout.count ? begin + chunk : layout.count;
      accumulate<R>(acc, x, base, begin + ty, kTileRows, end, layout);
    }
    // A fixed tree over threadIdx.y.
    shared[ty * kTileColumns + tx] = acc;
    __syncthreads();
    for (unsigned half = kTileRows / 2; half > 0; half >>= 1) {
      if (ty < half)
        shared[ty * kTileColumns + tx] =
            R::combine(shared[ty * kTileColumns + tx],
                       shared[(ty + half) * kTileColumns + tx]);
      __syncthreads();
    }
    if (valid && ty == 0)
      writeChunk<R>(y, partials, layout, o, s, splits, shared[tx]);
    __syncthreads();
  }
}

/// The column kernel for a contiguous [count, outputs] input of float
/// type (the bias gradient's [tokens, features]): each thread owns
/// kVector adjacent columns and reads them with one 16-byte load per row,
/// so a warp moves 512 contiguous bytes a row instead of 32 elements. The
/// rows a thread takes and the tree over threadIdx.y are the column
/// kernel's.
template <typename T, ReduceKind K>
__global__ void __launch_bounds__(kTileColumns *kTileRows)
    reduceColumnsVectorKernel(const T *x, T *y, ReduceLayout layout, int64_t splits,
                              int64_t chunk, typename Reducer<T, K>::A *partials) {
  using R = Reducer<T, K>;
  using A = typename R::A;
  constexpr int kVector = 16 / sizeof(T);
  __shared__ A shared[kTileRows][kTileColumns * kVector];
  unsigned tx = threadIdx.x, ty = threadIdx.y;
  int64_t columns = layout.outputs, groups = columns / kVector;
  int64_t tiles = (groups + kTileColumns - 1) / kTileColumns;
  for (int64_t u = blockIdx.x; u < tiles * splits; u += gridDim.x) {
    int64_t tile = u / splits, s = u % splits;
    int64_t group = tile * kTileColumns + tx;
    bool valid = group < groups;
    A acc[kVector];
#pragma unroll
    for (int c = 0; c < kVector; ++c)
      acc[c] = R::identity();
    if (valid) {
      int64_t begin = s * chunk;
      int64_t end = begin + chunk < layout.count ? begin + chunk : layout.count;
      const T *column = x + group * kVector;
      int64_t r = begin + ty;
      constexpr int kInFlight = 4;
      for (; r + (kInFlight - 1) * kTileRows < end; r += kInFlight * kTileRows) {
        uint4 raw[kInFlight];
#pragma unroll
        for (int i = 0; i < kInFlight; ++i)
          raw[i] = *reinterpret_cast<const uint4 *>(column + (r + i * kTileRows) * columns);
#pragma unroll
        for (int i = 0; i < kInFlight; ++i)
#pragma unroll
          for (int c = 0; c < kVector; ++c)
            acc[c] = R::combine(acc[c], R::read(reinterpret_cast<const T *>(&raw[i]) + c));
      }
      for (; r < end; r += kTileRows) {
        uint4 raw = *reinterpret_cast<const uint4 *>(column + r * columns);
#pragma unroll
        for (int c = 0; c < kVector; ++c)
          acc[c] = R::combine(acc[c], R::read(reinterpret_cast<const T *>(&raw) + c));
      }
    }
#pragma unroll
    for (int c = 0; c < kVector; ++c)
      shared[ty][tx * kVector + c] = acc[c];
    __syncthreads();
    for (unsigned half = kTileRows / 2; half > 0; half >>= 1) {
      if (ty < half)
#pragma unroll
        for (int c = 0; c < kVector; ++c)
          shared[ty][tx * kVector + c] =
              R::combine(shared[ty][tx * kVector + c], shared[ty + half][tx * kVector + c]);
      __syncthreads();
    }
    if (valid && ty == 0)
#pragma unroll
      for (int c = 0; c < kVector; ++c)
        writeChunk<R>(y, partials, layout, group * kVector + c, s, splits,
                      shared[0][tx * kVector + c]);
    __syncthreads();
  }
}

/// Combines each result's partials in chunk order: a warp per result.
template <typename T, ReduceKind K>
__global__ void reduceCombineKernel(const typename Reducer<T, K>::A *partials,
                                    T *y, int64_t outputs, int64_t splits,
                                    int64_t count) {
  using R = Reducer<T, K>;
  using A = typename R::A;
  int lane = threadIdx.x & 31;
  int64_t warps = blockDim.x >> 5;
  int64_t step = static_cast<int64_t>(gridDim.x) * warps;
  for (int64_t o =
           static_cast<int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5);
       o < outputs; o += step) {
    A acc = R::identity();
    for (int64_t s = lane; s < splits; s += 32)
      acc = R::combine(acc, partials[s * outputs + o]);
    acc = warpReduce<R>(acc);
    if (lane == 0)
      R::finish(y + o, acc, count);
  }
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Merges adjacent dimensions that one stride walks (the outer's stride is
/// the inner's times its size) and drops dimensions of size 1. The walk
/// visits the same offsets in the same order, but a rank-1 walk needs no
/// division per element: the bias gradient's reduction over [batch,
/// sequence] becomes one strided loop.
void collapse(DeviceShape &shape, DeviceShape &strides) {
  DeviceShape outShape, outStrides;
  for (int d = 0; d < shape.rank; ++d) {
    if (shape.dims[d] == 1)
      continue;
    int last = outShape.rank - 1;
    if (last >= 0 && outStrides.dims[last] == strides.dims[d] * shape.dims[d]) {
      outShape.dims[last] *= shape.dims[d];
      outStrides.dims[last] = strides.dims[d];
      continue;
    }
    outShape.dims[outShape.rank] = shape.dims[d];
    outStrides.dims[outShape.rank] = strides.dims[d];
    ++outShape.rank;
    ++outStrides.rank;
  }
  shape = outShape;
  strides = outStrides;
}

template <typename T, ReduceKind K>
cudaError_t launchTyped(const ReduceParams &p, cudaStream_t stream) {
  using A = typename Reducer<T, K>::A;
  ReduceLayout layout;
  layout.outputs = p.outputs;
  layout.count = p.count;
  layout.keptShape = p.keptShape;
  layout.keptStrides = p.keptStrides;
  layout.reducedShape = p.reducedShape;
  layout.reducedStrides = p.reducedStrides;
  collapse(layout.keptShape, layout.keptStrides);
  collapse(layout.reducedShape, layout.reducedStrides);
  const T *x = static_cast<const T *>(p.input);
  T *y = static_cast<T *>(p.result);

  // Rows: the innermost input dimension is reduced (stride 1) and long
  // enough to give a block's threads coalesced work.
  int rank = layout.reducedShape.rank;
  bool rows = rank > 0 && layout.reducedStrides.dims[rank - 1] == 1 && p.count >= 64;
  unsigned rowThreads = 32;
  while (rowThreads < 1024 && rowThreads * kMinPerThread < p.count)
    rowThreads *= 2;
  // Columns of a contiguous [count, outputs] float input, 16 bytes a load.
  constexpr int64_t kVector = 16 / sizeof(T);
  bool vector = !rows && !std::is_integral<T>::value && layout.keptShape.rank == 1 &&
                layout.keptStrides.dims[0] == 1 && layout.reducedShape.rank == 1 &&
                layout.reducedStrides.dims[0] == p.outputs && p.outputs % kVector == 0 &&
                reinterpret_cast<uintptr_t>(x) % 16 == 0;
  int64_t units = rows     ? p.outputs
                  : vector ? ceilDiv(p.outputs / kVector, kTileColumns)
                           : ceilDiv(p.outputs, kTileColumns);
  int64_t perChunk =
      kMinPerThread * (rows ? int64_t{rowThreads} : int64_t{kTileRows});
  int64_t splits = ceilDiv(kTargetBlocks, units);
  int64_t bySize = ceilDiv(p.count, perChunk);
  if (splits > bySize)
    splits = bySize;
  int64_t byWorkspace =
      p.workspace
          ? static_cast<int64_t>(p.workspaceBytes / (sizeof(A) * p.outputs))
          : 0;
  if (splits > byWorkspace)
    splits = byWorkspace;
  if (splits < 2)
    splits = 1;
  int64_t chunk = ceilDiv(p.count, splits);
  A *partials = splits > 1 ? static_cast<A *>(p.workspace) : nullptr;

  int64_t blocks = units * splits;
  if (blocks > kMaxBlocks)
    blocks = kMaxBlocks;
  if (vector)
    reduceColumnsVectorKernel<T, K>
        <<<static_cast<unsigned>(blocks), dim3(kTileColumns, kTileRows), 0, stream>>>(
            x, y, layout, splits, chunk, partials);
  else if (rows)
    reduceRowsKernel<T, K>
        <<<static_cast<unsigned>(blocks), rowThreads, 0, stream>>>(
            x, y, layout, splits, chunk, partials);
  else
    reduceColumnsKernel<T, K>
        <<<static_cast<unsigned>(blocks), dim3(kTileColumns, kTileRows), 0,
           stream>>>(x, y, layout, splits, chunk, partials);
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess || splits == 1)
    return error;
  constexpr unsigned kCombineThreads = 256;
  int64_t combineBlocks = ceilDiv(p.outputs, kCombineThreads / 32);
  if (combineBlocks > kMaxBlocks)
    combineBlocks = kMaxBlocks;
  reduceCombineKernel<T, K>
      <<<static_cast<unsigned>(combineBlocks), kCombineThreads, 0, stream>>>(
          partials, y, p.outputs, splits, p.count);
  return cudaGetLastError();
}

template <ReduceKind K>
cudaError_t launchKind(const ReduceParams &p, cudaStream_t stream) {
  cudaError_t error = cudaErrorInvalidValue;
  if (dispatchFloat(p.type, [&](auto tag) {
        error = launchTyped<decltype(tag), K>(p, stream);
      }))
    return error;
  if constexpr (K != ReduceKind::kMean) {
    if (p.type == ElementType::kI64)
      return launchTyped<int64_t, K>(p, stream);
    if (p.type == ElementType::kI32)
      return launchTyped<int32_t, K>(p, stream);
  }
  return cudaErrorInvalidValue;
}

} // namespace

cudaError_t launchReduce(const ReduceParams &params, cudaStream_t stream) {
  if (params.outputs <= 0)
    return cudaSuccess;
  switch (params.kind) {
  case ReduceKind::kSum:
    return launchKind<ReduceKind::kSum>(params, stream);
  case ReduceKind::kMean:
    return launchKind<ReduceKind::kMean>(params, stream);
  case ReduceKind::kMax:
    return launchKind<ReduceKind::kMax>(params, stream);
  }
  return cudaErrorInvalidValue;
}

} // namespace zcc::cuda
