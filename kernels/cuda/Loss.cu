//===- Loss.cu - mse_loss, cross_entropy, nll_loss and gradients ----------===//
//
// cross_entropy over [batch, classes] (inner == 1) takes one warp (short
// rows) or one block (long rows, e.g. a 50304-word vocabulary) per row and
// reads the row once for its maximum and sum of exponentials (online
// softmax); with inner > 1 a block takes a tile of adjacent positions
// (threadIdx.x) with the classes split over threadIdx.y. nll_loss and
// nll_loss_grad are one thread per element.
//
// Reductions to a scalar are deterministic without atomics: each warp or
// block of the first pass adds its positions in a fixed order into a
// partial (value and count) in the workspace, and one block adds the
// partials in order. Grid sizes depend on the shapes alone.
//
// Labels: ignore_index as in the cpu kernels (a zero loss and gradient, not
// counted by the mean). The cpu kernels refuse out-of-range labels before
// computing anything; their values live in device memory here, so a kernel
// cannot refuse them without a synchronising copy. Instead an out-of-range
// label is treated as ignored: nothing is read or written out of bounds.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/DeviceSupport.cuh"
#include "kernels/cuda/LossLaunch.h"

namespace zcc::cuda {

namespace {

using Count = unsigned long long;

__device__ __forceinline__ float accExp(float v) { return expf(v); }
__device__ __forceinline__ double accExp(double v) { return exp(v); }
__device__ __forceinline__ float accLog(float v) { return logf(v); }
__device__ __forceinline__ double accLog(double v) { return log(v); }

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

/// Rows of at most this many classes go to one warp each.
constexpr int64_t kWarpRowLength = 256;
/// Threads of the one-dimensional blocks and of the column tiles.
constexpr unsigned kBlockThreads = 256;
/// The most blocks of a pass that writes partials: with kBlockThreads / 32
/// warps each, at most kMaxLossPartials partials.
constexpr int64_t kMaxPartialBlocks = kMaxLossPartials / (kBlockThreads / 32);
static_assert(kMaxPartialBlocks >= 1, "partials for at least one block");
/// The most blocks of an elementwise grid-stride launch.
constexpr int64_t kMaxBlocks = 65535LL * 16;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

unsigned capBlocks(int64_t blocks, int64_t cap) {
  if (blocks > cap)
    blocks = cap;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

/// The threads that share a row: a warp (kWarp) or the whole block; rows
/// are dealt out grid-stride, `first` is also the group's partial index and
/// `step` the number of groups.
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

/// The most threads of a block that shares a row: 512 leaves the row
/// kernels 64 registers a thread (at 1024 they spill).
constexpr unsigned kMaxRowThreads = 512;

/// A power of two with about eight classes per thread, 32 to
/// kMaxRowThreads.
unsigned rowBlockThreads(int64_t length) {
  unsigned threads = 32;
  while (threads < kMaxRowThreads && threads * 8 < length)
    threads *= 2;
  return threads;
}

/// Column tiles: blockDim.x adjacent positions (at most 32, a power of two)
/// times blockDim.y threads over the classes, kBlockThreads in all.
dim3 columnTileBlock(int64_t inner) {
  unsigned x = 1;
  while (x < 32 && x < inner)
    x *= 2;
  return dim3(x, kBlockThreads / x);
}

struct AddOp {
  template <typename A> __device__ A operator()(A a, A b) const {
    return a + b;
  }
};

struct FMaxOp {
  template <typename A> __device__ A operator()(A a, A b) const {
    return fmax(a, b);
  }
};

/// Reduces `value` over threadIdx.y of a column tile in a fixed tree order;
/// every thread gets its column's result. `shared` holds kBlockThreads
/// values.
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

/// Folds `value` into a running maximum `m` and sum of exp(x - m) `s`, so
/// a row is read once. NaN makes the sum NaN (the cpu kernels' result);
/// -inf adds nothing.
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

/// A lane's sum rescaled to the row's maximum; a lane that saw nothing
/// (s == 0) adds 0.
template <typename A>
__device__ __forceinline__ A rescaled(A m, A s, A rowMax) {
  return s == A(0) ? A(0) : s * accExp(m - rowMax);
}

/// The label of `position` when it counts, else -1: ignore_index, and
/// out-of-range labels, which the cpu kernels refuse on the host (see the
/// file comment).
template <typename Label>
__device__ __forceinline__ int64_t countedLabel(const Label *labels,
                                                int64_t position,
                                                int64_t classes, bool hasIgnore,
                                                int64_t ignoreIndex) {
  int64_t label = labels[position];
  if (hasIgnore && label == ignoreIndex)
    return -1;
  if (label < 0 || label >= classes)
    return -1;
  return label;
}

/// Where a reduction's partials live in the workspace.
template <typename A> struct Partials {
  A *values;
  Count *counts;
  Count *total;
};

template <typename A> Partials<A> partialsIn(void *workspace) {
  if (!workspace)
    return {nullptr, nullptr, nullptr};
  auto *base = static_cast<unsigned char *>(workspace);
  return {reinterpret_cast<A *>(base),
          reinterpret_cast<Count *>(base + 8 * kMaxLossPartials),
          reinterpret_cast<Count *>(base + 16 * kMaxLossPartials)};
}

//===----------------------------------------------------------------------===//
// Reductions to a scalar
//===----------------------------------------------------------------------===//

/// What the last pass of a reduction to a scalar writes.
enum class Finish { kSum, kMeanOfCounted, kMeanOfElements };

/// Adds `groups` partials in order (one block) and writes their sum, their
/// mean over the counted labels (0 / 0 = NaN when none counts, as in the
/// cpu kernels and torch) or over `elements`.
template <typename T>
__global__ void __launch_bounds__(1024)
    finishLossKernel(const Acc<T> *values, const Count *counts, int64_t groups,
                     Finish finish, int64_t elements, T *loss) {
  using A = Acc<T>;
  __shared__ A valueScratch[32];
  __shared__ Count countScratch[32];
  A total = 0;
  Count counted = 0;
  for (int64_t i = threadIdx.x; i < groups; i += blockDim.x) {
    total += values[i];
    if (finish == Finish::kMeanOfCounted)
      counted += counts[i];
  }
  total = blockSum(total, valueScratch);
  counted = blockSum(counted, countScratch);
  if (threadIdx.x != 0)
    return;
  switch (finish) {
  case Finish::kSum:
    store(loss, total);
    break;
  case Finish::kMeanOfCounted:
    store(loss, total / static_cast<A>(counted));
    break;
  case Finish::kMeanOfElements:
    store(loss, total / static_cast<A>(elements));
    break;
  }
}

//===----------------------------------------------------------------------===//
// cross_entropy, nll_loss
//===----------------------------------------------------------------------===//

/// loss = max + log(sum(exp(x - max))) - x[label] per row; with
/// `perPosition` written per row, else summed per group into the partials.
template <typename T, typename Label, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kBlockThreads : kMaxRowThreads)
    crossEntropyRowsKernel(const T *x, const Label *labels, T *loss,
                           int64_t rows, int64_t classes, bool hasIgnore,
                           int64_t ignoreIndex, bool perPosition,
                           Partials<Acc<T>> partials) {
  using A = Acc<T>;
  __shared__ A scratch[32];
  RowGroup<kWarp> group;
  A total = 0;
  Count counted = 0;
  for (int64_t r = group.first; r < rows; r += group.step) {
    // Uniform over the group: every thread reads the same label.
    int64_t label = countedLabel(labels, r, classes, hasIgnore, ignoreIndex);
    A value = 0;
    if (label >= 0) {
      const T *row = x + r * classes;
      A m = -INFINITY, s = 0;
      onlineRow(
          group.lane, group.width, classes,
          [&](int64_t c) { return load(row + c); }, m, s);
      A rowMax = group.max(m, scratch);
      A rowSum = group.sum(rescaled(m, s, rowMax), scratch);
      value = rowMax + accLog(rowSum) - load(row + label);
      total += value;
      ++counted;
    }
    if (perPosition && group.lane == 0)
      store(loss + r, value);
  }
  if (!perPosition && group.lane == 0) {
    partials.values[group.first] = total;
    partials.counts[group.first] = counted;
  }
}

/// The same over [batch, classes, inner] with inner > 1: a tile of
/// adjacent positions, the classes split over threadIdx.y. One partial per
/// block.
template <typename T, typename Label>
__global__ void
crossEntropyColumnsKernel(const T *x, const Label *labels, T *loss,
                          int64_t batch, int64_t classes, int64_t inner,
                          bool hasIgnore, int64_t ignoreIndex, bool perPosition,
                          Partials<Acc<T>> partials) {
  using A = Acc<T>;
  __shared__ A shared[kBlockThreads];
  int64_t tilesPerBatch = (inner + blockDim.x - 1) / blockDim.x;
  int64_t tiles = batch * tilesPerBatch;
  A total = 0;
  Count counted = 0;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    int64_t n = t / tilesPerBatch;
    int64_t s = (t % tilesPerBatch) * blockDim.x + threadIdx.x;
    bool valid = s < inner;
    int64_t position = n * inner + s;
    int64_t label =
        valid ? countedLabel(labels, position, classes, hasIgnore, ignoreIndex)
              : -1;
    int64_t base = n * classes * inner + s;
    auto loadClass = [&](int64_t c) { return load(x + base + c * inner); };
    A m = -INFINITY, sum = 0;
    if (label >= 0)
      onlineRow(threadIdx.y, blockDim.y, classes, loadClass, m, sum);
    A colMax = columnReduce(m, shared, FMaxOp());
    A colSum = columnReduce(rescaled(m, sum, colMax), shared, AddOp());
    if (valid && threadIdx.y == 0) {
      A value = 0;
      if (label >= 0) {
        value = colMax + accLog(colSum) - load(x + base + label * inner);
        total += value;
        ++counted;
      }
      if (perPosition)
        store(loss + position, value);
    }
  }
  // Only threadIdx.y == 0 (the first blockDim.x threads, all in warp 0)
  // holds anything.
  if (!perPosition && threadIdx.y * blockDim.x + threadIdx.x < 32) {
    total = warpSum(total);
    counted = warpSum(counted);
    if (threadIdx.x == 0 && threadIdx.y == 0) {
      partials.values[blockIdx.x] = total;
      partials.counts[blockIdx.x] = counted;
    }
  }
}

/// loss = -x[label], a thread per position; one partial per block.
template <typename T, typename Label>
__global__ void nllLossKernel(const T *x, const Label *labels, T *loss,
                              int64_t positions, int64_t classes, int64_t inner,
                              bool hasIgnore, int64_t ignoreIndex,
                              bool perPosition, Partials<Acc<T>> partials) {
  using A = Acc<T>;
  __shared__ A valueScratch[32];
  __shared__ Count countScratch[32];
  A total = 0;
  Count counted = 0;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       p < positions; p += stride) {
    int64_t label = countedLabel(labels, p, classes, hasIgnore, ignoreIndex);
    A value = 0;
    if (label >= 0) {
      int64_t n = p / inner, s = p - n * inner;
      value = -load(x + (n * classes + label) * inner + s);
      total += value;
      ++counted;
    }
    if (perPosition)
      store(loss + p, value);
  }
  if (perPosition)
    return;
  total = blockSum(total, valueScratch);
  counted = blockSum(counted, countScratch);
  if (threadIdx.x == 0) {
    partials.values[blockIdx.x] = total;
    partials.counts[blockIdx.x] = counted;
  }
}

template <typename T, typename Label>
cudaError_t launchClassLossTyped(const ClassLossParams &p,
                                 cudaStream_t stream) {
  using A = Acc<T>;
  const T *x = static_cast<const T *>(p.input);
  const Label *labels = static_cast<const Label *>(p.labels);
  T *loss = static_cast<T *>(p.loss);
  bool perPosition = p.reduction == LossReduction::kNone;
  int64_t positions = p.batch * p.inner;
  if (perPosition && positions == 0)
    return cudaSuccess;
  Partials<A> partials = partialsIn<A>(p.workspace);
  // With no positions the partial pass still runs: it writes zeros.
  int64_t groups = 0;
  if (!p.logSoftmax) {
    unsigned blocks =
        capBlocks(ceilDiv(positions, kBlockThreads), kMaxPartialBlocks);
    nllLossKernel<T, Label><<<blocks, kBlockThreads, 0, stream>>>(
        x, labels, loss, positions, p.classes, p.inner, p.hasIgnore,
        p.ignoreIndex, perPosition, partials);
    groups = blocks;
  } else if (p.inner == 1) {
    if (p.classes <= kWarpRowLength) {
      unsigned blocks =
          capBlocks(ceilDiv(p.batch, kBlockThreads / 32), kMaxPartialBlocks);
      crossEntropyRowsKernel<T, Label, true>
          <<<blocks, kBlockThreads, 0, stream>>>(
              x, labels, loss, p.batch, p.classes, p.hasIgnore, p.ignoreIndex,
              perPosition, partials);
      groups = int64_t{blocks} * (kBlockThreads / 32);
    } else {
      unsigned blocks = capBlocks(p.batch, kMaxLossPartials);
      crossEntropyRowsKernel<T, Label, false>
          <<<blocks, rowBlockThreads(p.classes), 0, stream>>>(
              x, labels, loss, p.batch, p.classes, p.hasIgnore, p.ignoreIndex,
              perPosition, partials);
      groups = blocks;
    }
  } else {
    dim3 block = columnTileBlock(p.inner);
    unsigned blocks =
        capBlocks(p.batch * ceilDiv(p.inner, block.x), kMaxLossPartials);
    crossEntropyColumnsKernel<T, Label><<<blocks, block, 0, stream>>>(
        x, labels, loss, p.batch, p.classes, p.inner, p.hasIgnore,
        p.ignoreIndex, perPosition, partials);
    groups = blocks;
  }
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess || perPosition)
    return error;
  finishLossKernel<T><<<1, 1024, 0, stream>>>(
      partials.values, partials.counts, groups,
      p.reduction == LossReduction::kMean ? Finish::kMeanOfCounted
                                          : Finish::kSum,
      positions, loss);
  return cudaGetLastError();
}

//===----------------------------------------------------------------------===//
// cross_entropy_grad, nll_loss_grad
//===----------------------------------------------------------------------===//

/// Pass 1 of a mean's gradient: the labels that count, per block.
template <typename Label>
__global__ void countLabelsKernel(const Label *labels, int64_t positions,
                                  int64_t classes, bool hasIgnore,
                                  int64_t ignoreIndex, Count *partialCounts) {
  __shared__ Count scratch[32];
  Count counted = 0;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       p < positions; p += stride)
    counted += countedLabel(labels, p, classes, hasIgnore, ignoreIndex) >= 0;
  counted = blockSum(counted, scratch);
  if (threadIdx.x == 0)
    partialCounts[blockIdx.x] = counted;
}

/// Pass 2: their total.
__global__ void __launch_bounds__(1024)
    finishCountKernel(const Count *partialCounts, int64_t blocks,
                      Count *total) {
  __shared__ Count scratch[32];
  Count counted = 0;
  for (int64_t i = threadIdx.x; i < blocks; i += blockDim.x)
    counted += partialCounts[i];
  counted = blockSum(counted, scratch);
  if (threadIdx.x == 0)
    *total = counted;
}

/// The gradient every counted position of a reduced loss gets: dloss, over
/// the counted labels for a mean.
template <typename T>
__device__ __forceinline__ Acc<T>
reducedSeed(const T *grad, LossReduction reduction, const Count *count) {
  using A = Acc<T>;
  if (reduction == LossReduction::kNone)
    return A(0);
  A seed = load(grad);
  // All ignored leaves 0 / 0 unused: every position then gets zero.
  if (reduction == LossReduction::kMean)
    seed = seed / static_cast<A>(*count);
  return seed;
}

/// (softmax - onehot(label)) * g per row; zero for a row that does not
/// count.
template <typename T, typename R, typename Label, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kBlockThreads : kMaxRowThreads)
    crossEntropyGradRowsKernel(const T *x, const Label *labels, const T *grad,
                               R *dx, int64_t rows, int64_t classes,
                               bool hasIgnore, int64_t ignoreIndex,
                               LossReduction reduction, const Count *count) {
  using A = Acc<T>;
  __shared__ A scratch[32];
  RowGroup<kWarp> group;
  A seed = reducedSeed(grad, reduction, count);
  for (int64_t r = group.first; r < rows; r += group.step) {
    int64_t label = countedLabel(labels, r, classes, hasIgnore, ignoreIndex);
    const T *row = x + r * classes;
    R *rowGrad = dx + r * classes;
    if (label < 0) {
      for (int64_t c = group.lane; c < classes; c += group.width)
        store(rowGrad + c, A(0));
      continue;
    }
    A g = reduction == LossReduction::kNone ? load(grad + r) : seed;
    auto loadRow = [&](int64_t c) { return load(row + c); };
    A m = -INFINITY, s = 0;
    onlineRow(group.lane, group.width, classes, loadRow, m, s);
    A rowMax = group.max(m, scratch);
    A inverseSum = A(1) / group.sum(rescaled(m, s, rowMax), scratch);
    forStrided(group.lane, group.width, classes, loadRow, [&](int64_t c, A v) {
      A probability = accExp(v - rowMax) * inverseSum;
      store(rowGrad + c, (probability - (c == label ? A(1) : A(0))) * g);
    });
  }
}

template <typename T, typename R, typename Label>
__global__ void crossEntropyGradColumnsKernel(
    const T *x, const Label *labels, const T *grad, R *dx, int64_t batch,
    int64_t classes, int64_t inner, bool hasIgnore, int64_t ignoreIndex,
    LossReduction reduction, const Count *count) {
  using A = Acc<T>;
  __shared__ A shared[kBlockThreads];
  A seed = reducedSeed(grad, reduction, count);
  int64_t tilesPerBatch = (inner + blockDim.x - 1) / blockDim.x;
  int64_t tiles = batch * tilesPerBatch;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    int64_t n = t / tilesPerBatch;
    int64_t s = (t % tilesPerBatch) * blockDim.x + threadIdx.x;
    bool valid = s < inner;
    int64_t position = n * inner + s;
    int64_t label =
        valid ? countedLabel(labels, position, classes, hasIgnore, ignoreIndex)
              : -1;
    int64_t base = n * classes * inner + s;
    auto loadClass = [&](int64_t c) { return load(x + base + c * inner); };
    A m = -INFINITY, sum = 0;
    if (label >= 0)
      onlineRow(threadIdx.y, blockDim.y, classes, loadClass, m, sum);
    A colMax = columnReduce(m, shared, FMaxOp());
    A inverseSum =
        A(1) / columnReduce(rescaled(m, sum, colMax), shared, AddOp());
    if (!valid)
      continue;
    if (label < 0) {
      for (int64_t c = threadIdx.y; c < classes; c += blockDim.y)
        store(dx + base + c * inner, A(0));
      continue;
    }
    A g = reduction == LossReduction::kNone ? load(grad + position) : seed;
    forStrided(threadIdx.y, blockDim.y, classes, loadClass,
               [&](int64_t c, A v) {
                 A probability = accExp(v - colMax) * inverseSum;
                 store(dx + base + c * inner,
                       (probability - (c == label ? A(1) : A(0))) * g);
               });
  }
}

/// -g at the label, zero elsewhere: a thread per element of the result.
template <typename T, typename R, typename Label>
__global__ void nllLossGradKernel(const Label *labels, const T *grad, R *dx,
                                  int64_t elements, int64_t classes,
                                  int64_t inner, bool hasIgnore,
                                  int64_t ignoreIndex, LossReduction reduction,
                                  const Count *count) {
  using A = Acc<T>;
  A seed = reducedSeed(grad, reduction, count);
  int64_t rowElements = classes * inner;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       e < elements; e += stride) {
    int64_t n = e / rowElements, rest = e - n * rowElements;
    int64_t c = rest / inner, s = rest - c * inner;
    int64_t position = n * inner + s;
    int64_t label =
        countedLabel(labels, position, classes, hasIgnore, ignoreIndex);
    A value = 0;
    if (label == c)
      value =
          -(reduction == LossReduction::kNone ? load(grad + position) : seed);
    store(dx + e, value);
  }
}

/// The result of type R: T, or (for an f32 input) f16 or bf16, each value
/// computed in f32 and rounded once.
template <typename T, typename R, typename Label>
cudaError_t launchClassLossGradTyped(const ClassLossGradParams &p,
                                     cudaStream_t stream) {
  const T *x = static_cast<const T *>(p.input);
  const Label *labels = static_cast<const Label *>(p.labels);
  const T *grad = static_cast<const T *>(p.grad);
  R *dx = static_cast<R *>(p.result);
  int64_t positions = p.batch * p.inner;
  int64_t elements = positions * p.classes;
  if (elements == 0)
    return cudaSuccess;
  const Count *count = nullptr;
  if (p.reduction == LossReduction::kMean) {
    Partials<float> partials = partialsIn<float>(p.workspace);
    unsigned blocks =
        capBlocks(ceilDiv(positions, kBlockThreads), kMaxLossPartials);
    countLabelsKernel<Label><<<blocks, kBlockThreads, 0, stream>>>(
        labels, positions, p.classes, p.hasIgnore, p.ignoreIndex,
        partials.counts);
    finishCountKernel<<<1, 1024, 0, stream>>>(partials.counts, blocks,
                                              partials.total);
    cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess)
      return error;
    count = partials.total;
  }
  if (!p.logSoftmax) {
    nllLossGradKernel<T, R, Label>
        <<<capBlocks(ceilDiv(elements, kBlockThreads), kMaxBlocks),
           kBlockThreads, 0, stream>>>(labels, grad, dx, elements, p.classes,
                                       p.inner, p.hasIgnore, p.ignoreIndex,
                                       p.reduction, count);
  } else if (p.inner == 1) {
    if (p.classes <= kWarpRowLength)
      crossEntropyGradRowsKernel<T, R, Label, true>
          <<<capBlocks(ceilDiv(p.batch, kBlockThreads / 32), kMaxBlocks),
             kBlockThreads, 0, stream>>>(x, labels, grad, dx, p.batch,
                                         p.classes, p.hasIgnore, p.ignoreIndex,
                                         p.reduction, count);
    else
      crossEntropyGradRowsKernel<T, R, Label, false>
          <<<capBlocks(p.batch, kMaxBlocks), rowBlockThreads(p.classes), 0,
             stream>>>(x, labels, grad, dx, p.batch, p.classes, p.hasIgnore,
                       p.ignoreIndex, p.reduction, count);
  } else {
    dim3 block = columnTileBlock(p.inner);
    crossEntropyGradColumnsKernel<T, R, Label>
        <<<capBlocks(p.batch * ceilDiv(p.inner, block.x), kMaxBlocks), block, 0,
           stream>>>(x, labels, grad, dx, p.batch, p.classes, p.inner,
                     p.hasIgnore, p.ignoreIndex, p.reduction, count);
  }
  return cudaGetLastError();
}

//===----------------------------------------------------------------------===//
// mse_loss, mse_loss_grad
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void mseLossPartialsKernel(const T *prediction, const T *target,
                                      int64_t count, Acc<T> *partials) {
  using A = Acc<T>;
  __shared__ A scratch[32];
  A sum = 0;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  forStrided(
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, stride,
      count, [&](int64_t i) { return load(prediction + i) - load(target + i); },
      [&](int64_t, A difference) { sum += difference * difference; });
  sum = blockSum(sum, scratch);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = sum;
}

template <typename T>
__global__ void mseLossGradKernel(const T *prediction, const T *target,
                                  const T *grad, T *result, int64_t count) {
  using A = Acc<T>;
  // As the cpu kernel: the factor in double, rounded once.
  A factor = static_cast<A>(2.0 * static_cast<double>(load(grad)) /
                            static_cast<double>(count));
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride)
    store(result + i, (load(prediction + i) - load(target + i)) * factor);
}

} // namespace

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

cudaError_t launchClassLoss(const ClassLossParams &params,
                            cudaStream_t stream) {
  if (params.reduction != LossReduction::kNone && !params.workspace)
    return cudaErrorInvalidValue;
  cudaError_t error = cudaErrorInvalidValue;
  dispatchFloat(params.type, [&](auto tag) {
    using T = decltype(tag);
    if (params.labelType == ElementType::kI64)
      error = launchClassLossTyped<T, int64_t>(params, stream);
    else if (params.labelType == ElementType::kI32)
      error = launchClassLossTyped<T, int32_t>(params, stream);
  });
  return error;
}

cudaError_t launchClassLossGrad(const ClassLossGradParams &params,
                                cudaStream_t stream) {
  if (params.reduction == LossReduction::kMean && !params.workspace)
    return cudaErrorInvalidValue;
  cudaError_t error = cudaErrorInvalidValue;
  auto launch = [&](auto inputTag, auto resultTag) {
    using T = decltype(inputTag);
    using R = decltype(resultTag);
    if (params.labelType == ElementType::kI64)
      error = launchClassLossGradTyped<T, R, int64_t>(params, stream);
    else if (params.labelType == ElementType::kI32)
      error = launchClassLossGradTyped<T, R, int32_t>(params, stream);
  };
  ElementType resultType =
      params.resultType == ElementType::kUnspecified ? params.type : params.resultType;
  if (resultType == params.type)
    dispatchFloat(params.type, [&](auto tag) { launch(tag, tag); });
  else if (params.type == ElementType::kF32 && resultType == ElementType::kBF16)
    launch(float{}, __nv_bfloat16{});
  else if (params.type == ElementType::kF32 && resultType == ElementType::kF16)
    launch(float{}, __half{});
  return error;
}

cudaError_t launchMseLoss(const MseLossParams &params, cudaStream_t stream) {
  if (!params.workspace)
    return cudaErrorInvalidValue;
  cudaError_t error = cudaErrorInvalidValue;
  dispatchFloat(params.type, [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    A *partials = partialsIn<A>(params.workspace).values;
    // An empty tensor still gets one block: its loss is 0 / 0, NaN.
    unsigned blocks =
        capBlocks(ceilDiv(params.count, kBlockThreads * 4), kMaxLossPartials);
    mseLossPartialsKernel<T><<<blocks, kBlockThreads, 0, stream>>>(
        static_cast<const T *>(params.prediction),
        static_cast<const T *>(params.target), params.count, partials);
    if ((error = cudaGetLastError()) != cudaSuccess)
      return;
    finishLossKernel<T><<<1, 1024, 0, stream>>>(
        partials, nullptr, blocks, Finish::kMeanOfElements, params.count,
        static_cast<T *>(params.loss));
    error = cudaGetLastError();
  });
  return error;
}

cudaError_t launchMseLossGrad(const MseLossGradParams &params,
                              cudaStream_t stream) {
  if (params.count <= 0)
    return cudaSuccess;
  cudaError_t error = cudaErrorInvalidValue;
  dispatchFloat(params.type, [&](auto tag) {
    using T = decltype(tag);
    mseLossGradKernel<T>
        <<<capBlocks(ceilDiv(params.count, kBlockThreads), kMaxBlocks),
           kBlockThreads, 0, stream>>>(
            static_cast<const T *>(params.prediction),
            static_cast<const T *>(params.target),
            static_cast<const T *>(params.grad),
            static_cast<T *>(params.result), params.count);
    error = cudaGetLastError();
  });
  return error;
}

} // namespace zcc::cuda
