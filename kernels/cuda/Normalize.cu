//===- Normalize.cu - softmax, log_softmax, layer_norm and gradients ------===//
//
// Row operations. An axis of contiguous length (inner == 1) is handled by
// one warp per row when the row is short and by one block per row
// otherwise; an axis with inner > 1 by tiles of adjacent columns
// (threadIdx.x) whose length is split over threadIdx.y and reduced in shared
// memory. softmax finds a row's maximum and sum of exponentials in one read
// (online softmax). layer_norm rows of up to 2048 columns (1024 in f64) are
// kept in the registers of one warp; wider ones take a block and re-read
// the row per pass. layer_norm_grad sums scale_grad and bias_grad over the
// rows in two passes through the workspace (NormalizeLaunch.h).
//
// Float types accumulate in float, f64 in double. Every reduction has a
// fixed order that depends on the shapes alone (and, for cached layer_norm
// rows, on whether the buffers allow 16-byte accesses), so results are
// reproducible run to run; no atomics. Each element is read and written by
// the same thread, after every read of its row: results may alias inputs.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/DeviceSupport.cuh"
#include "kernels/cuda/NormalizeLaunch.h"

#include <cstdint>
#include <type_traits>

namespace zcc::cuda {

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float accExp(float v) { return expf(v); }
__device__ __forceinline__ double accExp(double v) { return exp(v); }
__device__ __forceinline__ float accLog(float v) { return logf(v); }
__device__ __forceinline__ double accLog(double v) { return log(v); }
__device__ __forceinline__ float accSqrt(float v) { return sqrtf(v); }
__device__ __forceinline__ double accSqrt(double v) { return sqrt(v); }

template <typename A> __device__ __forceinline__ A warpSum(A value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

template <typename A> __device__ __forceinline__ A warpMax(A value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmax(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

/// Rows no longer than this go to one warp each.
constexpr int64_t kWarpRowLength = 256;
/// Threads of a block of warp rows and of a column tile.
constexpr unsigned kBlockThreads = 256;
/// The most blocks a grid-stride launch starts.
constexpr int64_t kMaxBlocks = 65535LL * 16;

/// The threads that share a row: a warp (kWarp) or the whole block. Rows
/// are dealt out grid-stride; the loop bound is uniform over the group, so
/// the block-wide reductions' barriers are reached by every thread.
template <bool kWarp> struct RowGroup {
  int lane, width;
  int64_t first, step;

  __device__ RowGroup() {
    if constexpr (kWarp) {
      int warps = static_cast<int>(blockDim.x >> 5);
      lane = static_cast<int>(threadIdx.x & 31);
      width = 32;
      first = static_cast<int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5);
      step = static_cast<int64_t>(gridDim.x) * warps;
    } else {
      lane = static_cast<int>(threadIdx.x);
      width = static_cast<int>(blockDim.x);
      first = blockIdx.x;
      step = gridDim.x;
    }
  }

  template <typename A> __device__ A sum(A value, A *scratch) const {
    if constexpr (kWarp)
      return warpSum(value);
    else
      return blockSum(value, scratch);
  }
  template <typename A> __device__ A max(A value, A *scratch) const {
    if constexpr (kWarp)
      return warpMax(value);
    else
      return blockMax(value, scratch);
  }
};

/// The threads of a block for rows of `length`: a power of two with about
/// eight elements each, 32 to 1024.
unsigned rowBlockThreads(int64_t length) {
  unsigned threads = 32;
  while (threads < 1024 && threads * 8 < length)
    threads *= 2;
  return threads;
}

/// Launches `kernel<true>` (warp rows) or `kernel<false>` (block rows) over
/// `rows` rows of `length`.
template <typename WarpKernel, typename BlockKernel, typename... Args>
cudaError_t launchRows(WarpKernel warpKernel, BlockKernel blockKernel,
                       int64_t rows, int64_t length, cudaStream_t stream,
                       Args... args) {
  if (rows <= 0)
    return cudaSuccess;
  if (length <= kWarpRowLength) {
    int64_t warps = kBlockThreads / 32;
    int64_t blocks = (rows + warps - 1) / warps;
    if (blocks > kMaxBlocks)
      blocks = kMaxBlocks;
    warpKernel<<<static_cast<unsigned>(blocks), kBlockThreads, 0, stream>>>(
        args...);
  } else {
    int64_t blocks = rows < kMaxBlocks ? rows : kMaxBlocks;
    blockKernel<<<static_cast<unsigned>(blocks), rowBlockThreads(length), 0,
                  stream>>>(args...);
  }
  return cudaGetLastError();
}

/// Column tiles: blockDim.x adjacent columns (at most 32, a power of two)
/// times blockDim.y threads along the axis, kBlockThreads in all.
dim3 columnTileBlock(int64_t inner) {
  unsigned x = 1;
  while (x < 32 && x < inner)
    x *= 2;
  return dim3(x, kBlockThreads / x);
}

/// Reduces `value` over threadIdx.y of a column tile (blockDim.y a power of
/// two) in a fixed tree order; every thread gets its column's result.
/// `shared` holds kBlockThreads values.
template <typename A, typename Op>
__device__ A columnReduce(A value, A *shared, Op op) {
  unsigned x = threadIdx.x, y = threadIdx.y, width = blockDim.x;
  shared[y * width + x] = value;
  __syncthreads();
  for (unsigned half = blockDim.y / 2; half > 0; half >>= 1) {
    if (y < half)
      shared[y * width + x] =
          op(shared[y * width + x], shared[(y + half) * width + x]);
    __syncthreads();
  }
  A result = shared[x];
  __syncthreads();
  return result;
}

struct AddOp {
  template <typename A> __device__ A operator()(A a, A b) const {
    return a + b;
  }
};

/// fmax ignores NaN, as the cpu kernels' std::fmax does.
struct FMaxOp {
  template <typename A> __device__ A operator()(A a, A b) const {
    return fmax(a, b);
  }
};

/// Folds `value` into a running maximum `m` and sum of exp(x - m) `s`
/// (online softmax: one read of the row). NaN never becomes the maximum but
/// makes the sum NaN, as in the cpu kernels; -inf adds nothing (a row of
/// only -inf still ends NaN: its maximum is -inf).
template <typename A>
__device__ __forceinline__ void onlineAdd(A value, A &m, A &s) {
  if (value > m) {
    s = s * accExp(m - value) + A(1);
    m = value;
  } else if (value != A(-INFINITY)) {
    s += accExp(value - m);
  }
}

/// onlineAdd of four values at once: at most one rescaling, then four
/// exponentials against the common maximum (the same special values: NaN
/// makes the sum NaN, -inf adds nothing).
template <typename A>
__device__ __forceinline__ void onlineAdd4(A v0, A v1, A v2, A v3, A &m, A &s) {
  A top = fmax(fmax(v0, v1), fmax(v2, v3));
  if (top > m) {
    s *= accExp(m - top);
    m = top;
  }
  if (m != A(-INFINITY))
    s += (accExp(v0 - m) + accExp(v1 - m)) + (accExp(v2 - m) + accExp(v3 - m));
  else if (v0 != v0 || v1 != v1 || v2 != v2 || v3 != v3)
    s = A(NAN);
}

/// Loads a thread issues before using any: a row pass with one load in
/// flight per thread is latency bound (and 2-byte elements need more than
/// four to keep the memory busy).
constexpr int kUnroll = 8;

/// Calls body(i, loadAt(i)) for i = first, first + step, ... below `end`,
/// kUnroll loads at a time. Each body(i, ...) follows the loads of i and of
/// the elements after it in its group, so a body may write element i of a
/// buffer that loadAt reads.
template <typename LoadAt, typename Body>
__device__ __forceinline__ void
forStrided(int64_t first, int64_t step, int64_t end, LoadAt loadAt, Body body) {
  int64_t i = first;
  for (; i + (kUnroll - 1) * step < end; i += kUnroll * step) {
    decltype(loadAt(i)) v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      v[u] = loadAt(i + u * step);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      body(i + u * step, v[u]);
  }
  for (; i < end; i += step)
    body(i, loadAt(i));
}

/// The running maximum and sum of exp(x - m) of loadAt(i), i = first, first
/// + step, ... below `end`, kUnroll loads in flight.
template <typename LoadAt, typename A>
__device__ __forceinline__ void
onlineRow(int64_t first, int64_t step, int64_t end, LoadAt loadAt, A &m, A &s) {
  static_assert(kUnroll % 4 == 0, "whole groups of four");
  int64_t i = first;
  for (; i + (kUnroll - 1) * step < end; i += kUnroll * step) {
    A v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      v[u] = loadAt(i + u * step);
#pragma unroll
    for (int u = 0; u < kUnroll; u += 4)
      onlineAdd4(v[u], v[u + 1], v[u + 2], v[u + 3], m, s);
  }
  for (; i < end; i += step)
    onlineAdd(loadAt(i), m, s);
}

/// Two values loaded together.
template <typename A> struct Two { A first, second; };

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

template <typename T, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kBlockThreads : 1024)
    softmaxRowsKernel(const T *x, T *y, int64_t rows, int64_t length,
                      bool logForm) {
  using A = Acc<T>;
  __shared__ A scratch[32];
  RowGroup<kWarp> group;
  for (int64_t r = group.first; r < rows; r += group.step) {
    const T *in = x + r * length;
    T *out = y + r * length;
    auto loadIn = [&](int64_t i) { return load(in + i); };
    A m = -INFINITY, s = 0;
    onlineRow(group.lane, group.width, length, loadIn, m, s);
    A rowMax = group.max(m, scratch);
    // A lane that saw nothing has s == 0 (and m == -inf): adds 0.
    A rowSum = group.sum(s == A(0) ? A(0) : s * accExp(m - rowMax), scratch);
    if (logForm) {
      A logSum = accLog(rowSum);
      forStrided(group.lane, group.width, length, loadIn, [&](int64_t i, A v) {
        store(out + i, (v - rowMax) - logSum);
      });
    } else {
      A inverseSum = A(1) / rowSum;
      forStrided(group.lane, group.width, length, loadIn, [&](int64_t i, A v) {
        store(out + i, accExp(v - rowMax) * inverseSum);
      });
    }
  }
}

template <typename T>
__global__ void softmaxColumnsKernel(const T *x, T *y, int64_t outer,
                                     int64_t length, int64_t inner,
                                     bool logForm) {
  using A = Acc<T>;
  __shared__ A shared[kBlockThreads];
  int64_t tilesPerOuter = (inner + blockDim.x - 1) / blockDim.x;
  int64_t tiles = outer * tilesPerOuter;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    int64_t o = t / tilesPerOuter;
    int64_t j = (t % tilesPerOuter) * blockDim.x + threadIdx.x;
    bool valid = j < inner;
    int64_t base = o * length * inner + j;
    auto loadIn = [&](int64_t i) { return load(x + base + i * inner); };
    A m = -INFINITY, s = 0;
    if (valid)
      onlineRow(threadIdx.y, blockDim.y, length, loadIn, m, s);
    A colMax = columnReduce(m, shared, FMaxOp());
    A colSum = columnReduce(s == A(0) ? A(0) : s * accExp(m - colMax), shared,
                            AddOp());
    if (!valid)
      continue;
    if (logForm) {
      A logSum = accLog(colSum);
      forStrided(threadIdx.y, blockDim.y, length, loadIn, [&](int64_t i, A v) {
        store(y + base + i * inner, (v - colMax) - logSum);
      });
    } else {
      A inverseSum = A(1) / colSum;
      forStrided(threadIdx.y, blockDim.y, length, loadIn, [&](int64_t i, A v) {
        store(y + base + i * inner, accExp(v - colMax) * inverseSum);
      });
    }
  }
}

/// The grid of a column-tile launch over [outer, length, inner].
unsigned columnTileGrid(int64_t outer, int64_t inner, dim3 block) {
  int64_t tiles = outer * ((inner + block.x - 1) / block.x);
  if (tiles > kMaxBlocks)
    tiles = kMaxBlocks;
  return static_cast<unsigned>(tiles < 1 ? 1 : tiles);
}

//===----------------------------------------------------------------------===//
// softmax_grad, log_softmax_grad
//===----------------------------------------------------------------------===//

// softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - exp(y) sum(dy).

template <typename T, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kBlockThreads : 1024)
    softmaxGradRowsKernel(const T *y, const T *dy, T *dx, int64_t rows,
                          int64_t length, bool logForm) {
  using A = Acc<T>;
  __shared__ A scratch[32];
  RowGroup<kWarp> group;
  for (int64_t r = group.first; r < rows; r += group.step) {
    int64_t base = r * length;
    auto loadBoth = [&](int64_t i) {
      return Two<A>{load(y + base + i), load(dy + base + i)};
    };
    A partial = 0;
    forStrided(group.lane, group.width, length, loadBoth,
               [&](int64_t, Two<A> v) {
                 partial += logForm ? v.second : v.second * v.first;
               });
    A total = group.sum(partial, scratch);
    forStrided(
        group.lane, group.width, length, loadBoth, [&](int64_t i, Two<A> v) {
          store(dx + base + i, logForm ? v.second - accExp(v.first) * total
                                       : v.first * (v.second - total));
        });
  }
}

template <typename T>
__global__ void softmaxGradColumnsKernel(const T *y, const T *dy, T *dx,
                                         int64_t outer, int64_t length,
                                         int64_t inner, bool logForm) {
  using A = Acc<T>;
  __shared__ A shared[kBlockThreads];
  int64_t tilesPerOuter = (inner + blockDim.x - 1) / blockDim.x;
  int64_t tiles = outer * tilesPerOuter;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    int64_t o = t / tilesPerOuter;
    int64_t j = (t % tilesPerOuter) * blockDim.x + threadIdx.x;
    bool valid = j < inner;
    int64_t base = o * length * inner + j;
    auto loadBoth = [&](int64_t i) {
      return Two<A>{load(y + base + i * inner), load(dy + base + i * inner)};
    };
    A partial = 0;
    if (valid)
      forStrided(threadIdx.y, blockDim.y, length, loadBoth,
                 [&](int64_t, Two<A> v) {
                   partial += logForm ? v.second : v.second * v.first;
                 });
    A total = columnReduce(partial, shared, AddOp());
    if (!valid)
      continue;
    forStrided(threadIdx.y, blockDim.y, length, loadBoth,
               [&](int64_t i, Two<A> v) {
                 store(dx + base + i * inner,
                       logForm ? v.second - accExp(v.first) * total
                               : v.first * (v.second - total));
               });
  }
}

//===----------------------------------------------------------------------===//
// layer_norm, layer_norm_grad
//===----------------------------------------------------------------------===//

/// The mean and inverse standard deviation of a row, the mean before the
/// variance (as kernels/cpu/RowStats.h). layer_norm and the statistics pass
/// of layer_norm_grad share it and its launch shape, so both normalise a
/// row with the same values.
template <typename T, bool kWarp, typename A>
__device__ void rowStats(const T *row, int64_t columns, A epsilon,
                         const RowGroup<kWarp> &group, A *scratch, A &mean,
                         A &inverseStd) {
  auto loadRow = [&](int64_t c) { return load(row + c); };
  A sum = 0;
  forStrided(group.lane, group.width, columns, loadRow,
             [&](int64_t, A v) { sum += v; });
  mean = group.sum(sum, scratch) / static_cast<A>(columns);
  A squares = 0;
  forStrided(group.lane, group.width, columns, loadRow, [&](int64_t, A v) {
    A centered = v - mean;
    squares += centered * centered;
  });
  squares = group.sum(squares, scratch);
  inverseStd = A(1) / accSqrt(squares / static_cast<A>(columns) + epsilon);
}

template <typename T, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kBlockThreads : 1024)
    layerNormKernel(const T *x, const T *gamma, const T *beta, T *y,
                    int64_t rows, int64_t columns, double epsilon) {
  using A = Acc<T>;
  __shared__ A scratch[32];
  RowGroup<kWarp> group;
  for (int64_t r = group.first; r < rows; r += group.step) {
    const T *row = x + r * columns;
    A mean, inverseStd;
    rowStats(row, columns, static_cast<A>(epsilon), group, scratch, mean,
             inverseStd);
    forStrided(
        group.lane, group.width, columns,
        [&](int64_t c) { return load(row + c); },
        [&](int64_t c, A v) {
          store(y + r * columns + c,
                (v - mean) * inverseStd * load(gamma + c) + load(beta + c));
        });
  }
}

/// Pass 1 of layer_norm_grad where the input gradient is written last:
/// stats[2 r] = mean, stats[2 r + 1] = inverse standard deviation of row r.
template <typename T, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kBlockThreads : 1024)
    layerNormStatsKernel(const T *x, int64_t rows, int64_t columns,
                         double epsilon, Acc<T> *stats) {
  using A = Acc<T>;
  __shared__ A scratch[32];
  RowGroup<kWarp> group;
  for (int64_t r = group.first; r < rows; r += group.step) {
    A mean, inverseStd;
    rowStats(x + r * columns, columns, static_cast<A>(epsilon), group, scratch,
             mean, inverseStd);
    if (group.lane == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = inverseStd;
    }
  }
}

/// Pass 2: block (x, y) = (column tile, row chunk) sums dy * xhat and dy of
/// its 32 columns over its chunk of rows, the rows split over threadIdx.y,
/// into partials[chunk][column] (scale) and partials[chunks + chunk][column]
/// (bias).
template <typename T>
__global__ void layerNormPartialsKernel(const T *x, const T *dy,
                                        const Acc<T> *stats, int64_t rows,
                                        int64_t columns, int64_t chunkRows,
                                        int64_t chunks, Acc<T> *partials) {
  using A = Acc<T>;
  __shared__ A shared[kBlockThreads];
  int64_t column = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t chunk = blockIdx.y;
  int64_t begin = chunk * chunkRows;
  int64_t end = begin + chunkRows < rows ? begin + chunkRows : rows;
  A scaleSum = 0, biasSum = 0;
  if (column < columns)
    forStrided(
        begin + threadIdx.y, blockDim.y, end,
        [&](int64_t r) {
          return Two<A>{load(x + r * columns + column),
                        load(dy + r * columns + column)};
        },
        [&](int64_t r, Two<A> v) {
          A normalized = (v.first - stats[2 * r]) * stats[2 * r + 1];
          scaleSum += v.second * normalized;
          biasSum += v.second;
        });
  scaleSum = columnReduce(scaleSum, shared, AddOp());
  biasSum = columnReduce(biasSum, shared, AddOp());
  if (column < columns && threadIdx.y == 0) {
    partials[chunk * columns + column] = scaleSum;
    partials[(chunks + chunk) * columns + column] = biasSum;
  }
}

/// Pass 3: block x sums the partials of columns 32 x + [0, 32): thread
/// (tx, ty) adds chunks ty, ty + 8, ... in order, then the 8 sums of a
/// column are added in a fixed tree.
template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    layerNormParamGradKernel(const Acc<T> *partials, int64_t columns,
                             int64_t chunks, T *scaleGrad, T *biasGrad) {
  using A = Acc<T>;
  __shared__ A shared[kBlockThreads];
  int64_t column = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  A scaleSum = 0, biasSum = 0;
  if (column < columns)
    for (int64_t k = threadIdx.y; k < chunks; k += blockDim.y) {
      scaleSum += partials[k * columns + column];
      biasSum += partials[(chunks + k) * columns + column];
    }
  scaleSum = columnReduce(scaleSum, shared, AddOp());
  biasSum = columnReduce(biasSum, shared, AddOp());
  if (column < columns && threadIdx.y == 0) {
    store(scaleGrad + column, scaleSum);
    store(biasGrad + column, biasSum);
  }
}

/// Pass 4: input_grad = rstd (g - mean(g) - xhat mean(g xhat)) (+ the
/// addend's element, where there is one), g = dy * scale, with the
/// statistics of pass 1.
template <typename T, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kBlockThreads : 1024)
    layerNormInputGradKernel(const T *x, const T *gamma, const T *dy,
                             const Acc<T> *stats, const T *addend, T *dx, int64_t rows,
                             int64_t columns) {
  using A = Acc<T>;
  __shared__ A scratch[32];
  RowGroup<kWarp> group;
  for (int64_t r = group.first; r < rows; r += group.step) {
    int64_t base = r * columns;
    A mean = stats[2 * r], inverseStd = stats[2 * r + 1];
    // (dy * scale, xhat) of column c.
    auto loadColumn = [&](int64_t c) {
      return Two<A>{load(dy + base + c) * load(gamma + c),
                    (load(x + base + c) - mean) * inverseStd};
    };
    A gradSum = 0, projection = 0;
    forStrided(group.lane, group.width, columns, loadColumn,
               [&](int64_t, Two<A> v) {
                 gradSum += v.first;
                 projection += v.first * v.second;
               });
    A gradMean = group.sum(gradSum, scratch) / static_cast<A>(columns);
    A projectionMean = group.sum(projection, scratch) / static_cast<A>(columns);
    forStrided(
        group.lane, group.width, columns, loadColumn, [&](int64_t c, Two<A> v) {
          A value = inverseStd * (v.first - gradMean - v.second * projectionMean);
          if (addend)
            value += load(addend + base + c);
          store(dx + base + c, value);
        });
  }
}

//===----------------------------------------------------------------------===//
// layer_norm rows kept in registers
//===----------------------------------------------------------------------===//
//
// Rows of up to kCachedColumns<T> columns (every GPT-2 width) are read once
// into registers, kPerLane elements per lane of one warp: no block barriers
// and one trip to memory per row, where the kernels above re-read the row
// for each pass. Where the row length and the buffers allow, a lane moves
// kWidth adjacent elements (up to 16 bytes) per access, which cuts the
// instructions per element (these kernels are otherwise issue bound).

/// The widest row kept in registers: 64 floats or 32 doubles per lane.
template <typename T>
constexpr int64_t kCachedColumns = sizeof(Acc<T>) == 8 ? 1024 : 2048;

/// The unsigned type of `kBytes` bytes that one access moves.
template <int kBytes> struct RawBits;
template <> struct RawBits<2> { using type = unsigned short; };
template <> struct RawBits<4> { using type = unsigned int; };
template <> struct RawBits<8> { using type = uint2; };
template <> struct RawBits<16> { using type = uint4; };

/// Loads elements p[0, kWidth) in one access (p aligned to their size).
template <int kWidth, typename T>
__device__ __forceinline__ void loadPack(const T *p, Acc<T> *v) {
  using Raw = typename RawBits<kWidth * sizeof(T)>::type;
  Raw raw = *reinterpret_cast<const Raw *>(p);
  const T *elements = reinterpret_cast<const T *>(&raw);
#pragma unroll
  for (int j = 0; j < kWidth; ++j)
    v[j] = load(elements + j);
}

/// Stores p[0, kWidth) in one access.
template <int kWidth, typename T>
__device__ __forceinline__ void storePack(T *p, const Acc<T> *v) {
  using Raw = typename RawBits<kWidth * sizeof(T)>::type;
  Raw raw;
  T *elements = reinterpret_cast<T *>(&raw);
#pragma unroll
  for (int j = 0; j < kWidth; ++j)
    store(elements + j, v[j]);
  *reinterpret_cast<Raw *>(p) = raw;
}

/// Calls body(integral_constant<int, K>, integral_constant<int, W>) with
/// the fewest elements per lane K (4 to 64) that hold a row of `columns`
/// and the widest access W (up to 16 bytes, at most K) that `columns` and
/// the buffers' addresses (`addressBits`: their bitwise or) allow, else 1.
/// False when no K does.
template <typename T, typename Body>
bool dispatchCached(int64_t columns, uintptr_t addressBits, Body &&body) {
  if (columns > kCachedColumns<T>)
    return false;
  auto withWidth = [&](auto perLane) {
    constexpr int kPerLane = decltype(perLane)::value;
    constexpr int kVector = static_cast<int>(16 / sizeof(T));
    constexpr int kWidth = kVector < kPerLane ? kVector : kPerLane;
    if (columns % kWidth == 0 && addressBits % (kWidth * sizeof(T)) == 0)
      body(perLane, std::integral_constant<int, kWidth>());
    else
      body(perLane, std::integral_constant<int, 1>());
  };
  if (columns <= 4 * 32)
    withWidth(std::integral_constant<int, 4>());
  else if (columns <= 8 * 32)
    withWidth(std::integral_constant<int, 8>());
  else if (columns <= 16 * 32)
    withWidth(std::integral_constant<int, 16>());
  else if (columns <= 32 * 32)
    withWidth(std::integral_constant<int, 32>());
  else if constexpr (kCachedColumns<T> > 32 * 32)
    withWidth(std::integral_constant<int, 64>());
  return true;
}

uintptr_t addressBits(const void *a, const void *b, const void *c,
                      const void *d) {
  return reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
         reinterpret_cast<uintptr_t>(c) | reinterpret_cast<uintptr_t>(d);
}

/// Threads of a block of cached rows, and the blocks an SM should hold of
/// the kernels that keep one value per element: 16 warps (rows in flight)
/// at up to 128 registers a thread. The input gradient keeps two and may
/// take 255.
constexpr unsigned kCachedThreads = 128;
constexpr int kCachedBlocks = 4;

/// Warp-per-row indices: the warp's first row and the number of warps.
struct WarpRows {
  int lane;
  int64_t first, step;
  __device__ WarpRows() {
    int warps = static_cast<int>(blockDim.x >> 5);
    lane = static_cast<int>(threadIdx.x & 31);
    first = static_cast<int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5);
    step = static_cast<int64_t>(gridDim.x) * warps;
  }
};

/// A lane's share of a row: access k covers columns (lane + 32 k) kWidth +
/// [0, kWidth), held in v[k kWidth + j]; `columns` is a multiple of kWidth,
/// so an access is wholly inside the row or wholly past it.
template <int kPerLane, int kWidth> struct LaneColumns {
  static constexpr int kAccesses = kPerLane / kWidth;
  static __device__ __forceinline__ int first(int lane, int k) {
    return (lane + 32 * k) * kWidth;
  }
};

/// Loads the lane's share of `row` (zero past the end).
template <int kPerLane, int kWidth, typename T>
__device__ __forceinline__ void loadCached(const T *row, int columns, int lane,
                                           Acc<T> (&v)[kPerLane]) {
  using Lane = LaneColumns<kPerLane, kWidth>;
#pragma unroll
  for (int k = 0; k < Lane::kAccesses; ++k) {
    int c = Lane::first(lane, k);
    if (c < columns) {
      loadPack<kWidth>(row + c, v + k * kWidth);
    } else {
#pragma unroll
      for (int j = 0; j < kWidth; ++j)
        v[k * kWidth + j] = Acc<T>(0);
    }
  }
}

/// rowStats for a cached row: the mean, then the centred squares.
template <int kPerLane, int kWidth, typename A>
__device__ __forceinline__ void cachedStats(const A (&v)[kPerLane], int columns,
                                            int lane, A epsilon, A &mean,
                                            A &inverseStd) {
  using Lane = LaneColumns<kPerLane, kWidth>;
  A sum = 0;
#pragma unroll
  for (int e = 0; e < kPerLane; ++e)
    sum += v[e];
  mean = warpSum(sum) / static_cast<A>(columns);
  A squares = 0;
#pragma unroll
  for (int k = 0; k < Lane::kAccesses; ++k)
    if (Lane::first(lane, k) < columns)
#pragma unroll
      for (int j = 0; j < kWidth; ++j) {
        A centered = v[k * kWidth + j] - mean;
        squares += centered * centered;
      }
  squares = warpSum(squares);
  inverseStd = A(1) / accSqrt(squares / static_cast<A>(columns) + epsilon);
}

template <typename T, int kPerLane, int kWidth>
__global__ void __launch_bounds__(kCachedThreads, kCachedBlocks)
    layerNormCachedKernel(const T *x, const T *gamma, const T *beta, T *y,
                          int64_t rows, int columns, double epsilon) {
  using A = Acc<T>;
  using Lane = LaneColumns<kPerLane, kWidth>;
  WarpRows warp;
  for (int64_t r = warp.first; r < rows; r += warp.step) {
    A v[kPerLane];
    loadCached<kPerLane, kWidth>(x + r * columns, columns, warp.lane, v);
    A mean, inverseStd;
    cachedStats<kPerLane, kWidth>(v, columns, warp.lane,
                                  static_cast<A>(epsilon), mean, inverseStd);
    T *out = y + r * columns;
#pragma unroll
    for (int k = 0; k < Lane::kAccesses; ++k) {
      int c = Lane::first(warp.lane, k);
      if (c >= columns)
        continue;
      A scale[kWidth], bias[kWidth], result[kWidth];
      loadPack<kWidth>(gamma + c, scale);
      loadPack<kWidth>(beta + c, bias);
#pragma unroll
      for (int j = 0; j < kWidth; ++j)
        result[j] =
            (v[k * kWidth + j] - mean) * inverseStd * scale[j] + bias[j];
      storePack<kWidth>(out + c, result);
    }
  }
}

template <typename T, int kPerLane, int kWidth>
__global__ void __launch_bounds__(kCachedThreads, kCachedBlocks)
    layerNormStatsCachedKernel(const T *x, int64_t rows, int columns,
                               double epsilon, Acc<T> *stats) {
  using A = Acc<T>;
  WarpRows warp;
  for (int64_t r = warp.first; r < rows; r += warp.step) {
    A v[kPerLane];
    loadCached<kPerLane, kWidth>(x + r * columns, columns, warp.lane, v);
    A mean, inverseStd;
    cachedStats<kPerLane, kWidth>(v, columns, warp.lane,
                                  static_cast<A>(epsilon), mean, inverseStd);
    if (warp.lane == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = inverseStd;
    }
  }
}

/// The input gradient of cached rows. With kFindStats the kernel finds
/// each row's statistics itself, as layerNormStatsCachedKernel does (the
/// same values), and writes them to `stats` for the parameter sums;
/// otherwise it reads them from there. With kFindStats input_grad must not
/// overlap input or grad (the sums read them after).
template <typename T, int kPerLane, int kWidth, bool kFindStats>
__global__ void __launch_bounds__(kCachedThreads)
    layerNormInputGradCachedKernel(const T *x, const T *gamma, const T *dy,
                                   Acc<T> *stats, const T *addend, T *dx,
                                   int64_t rows, int columns, double epsilon) {
  using A = Acc<T>;
  using Lane = LaneColumns<kPerLane, kWidth>;
  WarpRows warp;
  for (int64_t r = warp.first; r < rows; r += warp.step) {
    int64_t base = r * columns;
    // g = dy * scale and xhat of the lane's columns (zero past the end).
    A g[kPerLane], normalized[kPerLane];
    loadCached<kPerLane, kWidth>(dy + base, columns, warp.lane, g);
    loadCached<kPerLane, kWidth>(x + base, columns, warp.lane, normalized);
    A mean, inverseStd;
    if constexpr (kFindStats) {
      cachedStats<kPerLane, kWidth>(normalized, columns, warp.lane,
                                    static_cast<A>(epsilon), mean, inverseStd);
      if (warp.lane == 0) {
        stats[2 * r] = mean;
        stats[2 * r + 1] = inverseStd;
      }
    } else {
      mean = stats[2 * r];
      inverseStd = stats[2 * r + 1];
    }
    A gradSum = 0, projection = 0;
#pragma unroll
    for (int k = 0; k < Lane::kAccesses; ++k) {
      int c = Lane::first(warp.lane, k);
      if (c >= columns)
        continue;
      A scale[kWidth];
      loadPack<kWidth>(gamma + c, scale);
#pragma unroll
      for (int j = 0; j < kWidth; ++j) {
        int e = k * kWidth + j;
        g[e] *= scale[j];
        normalized[e] = (normalized[e] - mean) * inverseStd;
        gradSum += g[e];
        projection += g[e] * normalized[e];
      }
    }
    A gradMean = warpSum(gradSum) / static_cast<A>(columns);
    A projectionMean = warpSum(projection) / static_cast<A>(columns);
    // Every load of the row is done: input_grad may alias input or grad.
    T *out = dx + base;
#pragma unroll
    for (int k = 0; k < Lane::kAccesses; ++k) {
      int c = Lane::first(warp.lane, k);
      if (c >= columns)
        continue;
      A result[kWidth], residual[kWidth] = {};
      if (addend)
        loadPack<kWidth>(addend + base + c, residual);
#pragma unroll
      for (int j = 0; j < kWidth; ++j) {
        int e = k * kWidth + j;
        result[j] =
            inverseStd * (g[e] - gradMean - normalized[e] * projectionMean) + residual[j];
      }
      storePack<kWidth>(out + c, result);
    }
  }
}

/// The grid of a warp-per-row launch of kCachedThreads threads.
unsigned warpRowsGrid(int64_t rows) {
  int64_t warps = kCachedThreads / 32;
  int64_t blocks = (rows + warps - 1) / warps;
  return static_cast<unsigned>(blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

} // namespace

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

cudaError_t launchSoftmax(const SoftmaxParams &p, cudaStream_t stream) {
  if (p.outer <= 0 || p.length <= 0 || p.inner <= 0)
    return cudaSuccess;
  cudaError_t error = cudaErrorInvalidValue;
  dispatchFloat(p.type, [&](auto tag) {
    using T = decltype(tag);
    const T *x = static_cast<const T *>(p.input);
    T *y = static_cast<T *>(p.result);
    if (p.inner == 1) {
      error = launchRows(softmaxRowsKernel<T, true>,
                         softmaxRowsKernel<T, false>, p.outer, p.length, stream,
                         x, y, p.outer, p.length, p.logForm);
      return;
    }
    dim3 block = columnTileBlock(p.inner);
    softmaxColumnsKernel<T>
        <<<columnTileGrid(p.outer, p.inner, block), block, 0, stream>>>(
            x, y, p.outer, p.length, p.inner, p.logForm);
    error = cudaGetLastError();
  });
  return error;
}

cudaError_t launchSoftmaxGrad(const SoftmaxGradParams &p, cudaStream_t stream) {
  if (p.outer <= 0 || p.length <= 0 || p.inner <= 0)
    return cudaSuccess;
  cudaError_t error = cudaErrorInvalidValue;
  dispatchFloat(p.type, [&](auto tag) {
    using T = decltype(tag);
    const T *y = static_cast<const T *>(p.output);
    const T *dy = static_cast<const T *>(p.grad);
    T *dx = static_cast<T *>(p.result);
    if (p.inner == 1) {
      error = launchRows(softmaxGradRowsKernel<T, true>,
                         softmaxGradRowsKernel<T, false>, p.outer, p.length,
                         stream, y, dy, dx, p.outer, p.length, p.logForm);
      return;
    }
    dim3 block = columnTileBlock(p.inner);
    softmaxGradColumnsKernel<T>
        <<<columnTileGrid(p.outer, p.inner, block), block, 0, stream>>>(
            y, dy, dx, p.outer, p.length, p.inner, p.logForm);
    error = cudaGetLastError();
  });
  return error;
}

cudaError_t launchLayerNorm(const LayerNormParams &p, cudaStream_t stream) {
  if (p.rows <= 0 || p.columns <= 0)
    return cudaSuccess;
  cudaError_t error = cudaErrorInvalidValue;
  dispatchFloat(p.type, [&](auto tag) {
    using T = decltype(tag);
    const T *x = static_cast<const T *>(p.input);
    const T *gamma = static_cast<const T *>(p.scale);
    const T *beta = static_cast<const T *>(p.bias);
    T *y = static_cast<T *>(p.result);
    if (dispatchCached<T>(
            p.columns, addressBits(x, gamma, beta, y),
            [&](auto perLane, auto width) {
              layerNormCachedKernel<T, decltype(perLane)::value,
                                    decltype(width)::value>
                  <<<warpRowsGrid(p.rows), kCachedThreads, 0, stream>>>(
                      x, gamma, beta, y, p.rows, static_cast<int>(p.columns),
                      p.epsilon);
              error = cudaGetLastError();
            }))
      return;
    error = launchRows(layerNormKernel<T, true>, layerNormKernel<T, false>,
                       p.rows, p.columns, stream, x, gamma, beta, y, p.rows,
                       p.columns, p.epsilon);
  });
  return error;
}

/// Whether [a, a + bytes) and [b, b + bytes) share a byte.
bool overlaps(const void *a, const void *b, size_t bytes) {
  auto first = reinterpret_cast<uintptr_t>(a), second = reinterpret_cast<uintptr_t>(b);
  return first < second + bytes && second < first + bytes;
}

cudaError_t launchLayerNormGrad(const LayerNormGradParams &p,
                                cudaStream_t stream) {
  if (p.columns <= 0)
    return cudaSuccess;
  if (p.chunks < 1 || !p.workspace)
    return cudaErrorInvalidValue;
  cudaError_t error = cudaErrorInvalidValue;
  dispatchFloat(p.type, [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T *x = static_cast<const T *>(p.input);
    const T *gamma = static_cast<const T *>(p.scale);
    const T *dy = static_cast<const T *>(p.grad);
    T *dx = static_cast<T *>(p.inputGrad);
    const T *addend = static_cast<const T *>(p.addend);
    A *stats = static_cast<A *>(p.workspace);
    A *partials = stats + 2 * p.rows;
    uintptr_t bits = addressBits(x, gamma, dy, dx) | reinterpret_cast<uintptr_t>(addend);
    int columns = static_cast<int>(p.columns);

    // The input gradient of rows kept in registers (finding the statistics
    // itself with kFindStats), else false.
    auto cachedInputGrad = [&](auto findStats) {
      return p.rows > 0 &&
             dispatchCached<T>(p.columns, bits, [&](auto perLane, auto width) {
               layerNormInputGradCachedKernel<T, decltype(perLane)::value,
                                              decltype(width)::value, decltype(findStats)::value>
                   <<<warpRowsGrid(p.rows), kCachedThreads, 0, stream>>>(
                       x, gamma, dy, stats, addend, dx, p.rows, columns, p.epsilon);
               error = cudaGetLastError();
             });
    };
    size_t bytes = static_cast<size_t>(p.rows) * static_cast<size_t>(p.columns) * sizeof(T);
    bool inputGradFirst = !overlaps(dx, x, bytes) && !overlaps(dx, dy, bytes);
    bool done = inputGradFirst && cachedInputGrad(std::true_type());
    if (done && error != cudaSuccess)
      return;

    if (!done) {
      // The row statistics, by layer_norm's code (in its order, when the
      // buffers allow the same access width).
      bool cached =
          p.rows > 0 &&
          dispatchCached<T>(p.columns, bits, [&](auto perLane, auto width) {
            layerNormStatsCachedKernel<T, decltype(perLane)::value,
                                       decltype(width)::value>
                <<<warpRowsGrid(p.rows), kCachedThreads, 0, stream>>>(
                    x, p.rows, columns, p.epsilon, stats);
            error = cudaGetLastError();
          });
      if (!cached)
        error = launchRows(layerNormStatsKernel<T, true>,
                           layerNormStatsKernel<T, false>, p.rows, p.columns,
                           stream, x, p.rows, p.columns, p.epsilon, stats);
      if (error != cudaSuccess)
        return;
    }

    // With no rows the partials (and so the parameter gradients) are zero.
    int64_t chunkRows = (p.rows + p.chunks - 1) / p.chunks;
    dim3 tileBlock(32, kBlockThreads / 32);
    dim3 partialGrid(static_cast<unsigned>((p.columns + 31) / 32),
                     static_cast<unsigned>(p.chunks));
    layerNormPartialsKernel<T><<<partialGrid, tileBlock, 0, stream>>>(
        x, dy, stats, p.rows, p.columns, chunkRows, p.chunks, partials);
    if ((error = cudaGetLastError()) != cudaSuccess)
      return;
    layerNormParamGradKernel<T>
        <<<static_cast<unsigned>((p.columns + 31) / 32), tileBlock, 0, stream>>>(
            partials, p.columns, p.chunks, static_cast<T *>(p.scaleGrad),
            static_cast<T *>(p.biasGrad));
    if ((error = cudaGetLastError()) != cudaSuccess || done)
      return;

    // Last: input_grad may alias input or grad.
    if (cachedInputGrad(std::false_type()))
      return;
    error = launchRows(layerNormInputGradKernel<T, true>,
                       layerNormInputGradKernel<T, false>, p.rows, p.columns,
                       stream, x, gamma, dy, static_cast<const A *>(stats), addend, dx,
                       p.rows, p.columns);
  });
  return error;
}

} // namespace zcc::cuda
