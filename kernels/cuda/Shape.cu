//===- Shape.cu - Data movement kernels on the device ---------------------===//
//
// transpose, slice and broadcast are one strided copy (contiguous result,
// strided source); concat and slice_grad the inverse, a strided scatter.
// Before a launch the view is collapsed (size-1 dimensions dropped,
// neighbours walked contiguously merged) and, where its innermost dimension
// is contiguous and the sizes and pointers allow, its elements are grouped
// into units of up to 16 bytes, so a slice of whole rows or a concat moves
// 16-byte vectors. A view that swaps the last two dimensions (the source
// contiguous along the result's next-to-last one) goes through 32x32 tiles
// in shared memory, so that both the reads and the writes are coalesced.
//
// gather copies slices of units likewise. gather_grad is deterministic and
// sums exactly as the cpu kernel does: the (index, position) pairs are
// sorted stably by index (cub's radix sort, in the workspace), the run of
// positions that name each result slice is found by bisection, and a group
// of threads per slice adds their gradients in position order (packs of 16
// bytes where the slice allows), rounding to the element type after each
// addition as the cpu's in-place accumulation does. Slices no index names
// get zeros from the same pass.
//
// Index values cannot be checked on the host (they live in device memory):
// where the cpu kernels refuse an out-of-range index, gather writes zeros
// for its slice and gather_grad ignores it; neither reads or writes out of
// bounds.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/DeviceSupport.cuh"
#include "kernels/cuda/ShapeLaunch.h"

#include <cub/device/device_radix_sort.cuh>

#include <cstddef>
#include <cstdint>

namespace zcc::cuda {

namespace {

constexpr unsigned kThreads = 256;

//===----------------------------------------------------------------------===//
// Units: elements moved as unsigned integers of their size
//===----------------------------------------------------------------------===//

/// Calls `body(U{})` with U an unsigned type of `bytes` bytes (uint4 for
/// 16); false for other sizes.
template <typename Body> bool dispatchUnit(int bytes, Body &&body) {
  switch (bytes) {
  case 1:
    body(uint8_t{});
    return true;
  case 2:
    body(uint16_t{});
    return true;
  case 4:
    body(uint32_t{});
    return true;
  case 8:
    body(uint64_t{});
    return true;
  case 16:
    body(uint4{});
    return true;
  default:
    return false;
  }
}

bool aligned(const void *p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

//===----------------------------------------------------------------------===//
// Strided copy and scatter
//===----------------------------------------------------------------------===//

/// A collapsed strided view.
struct ViewGeometry {
  DeviceShape shape;
  DeviceShape strides;
  int64_t base = 0;
  int64_t count = 0;
  /// Every index fits 32 bits: coordinates come from 32-bit divisions.
  bool smallIndex = false;
};

__device__ __forceinline__ int64_t viewOffset(int64_t index,
                                              const ViewGeometry &g) {
  int64_t offset = g.base;
  if (g.smallIndex) {
    uint32_t rest = static_cast<uint32_t>(index);
    for (int d = g.shape.rank - 1; d > 0; --d) {
      uint32_t extent = static_cast<uint32_t>(g.shape.dims[d]);
      offset += static_cast<int64_t>(rest % extent) * g.strides.dims[d];
      rest /= extent;
    }
    return offset + static_cast<int64_t>(rest) * g.strides.dims[0];
  }
  int64_t rest = index;
  for (int d = g.shape.rank - 1; d > 0; --d) {
    int64_t extent = g.shape.dims[d];
    offset += (rest % extent) * g.strides.dims[d];
    rest /= extent;
  }
  return offset + rest * g.strides.dims[0];
}

template <typename U, bool kScatter>
__global__ void __launch_bounds__(kThreads)
    stridedKernel(U *dst, const U *src,
                  const __grid_constant__ ViewGeometry g) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < g.count; i += stride) {
    int64_t offset = viewOffset(i, g);
    if constexpr (kScatter)
      dst[offset] = src[i];
    else
      dst[i] = src[offset];
  }
}

/// A batch of [a, b] -> [b, a] transposes: result element (batch, a, b) of
/// the [.., rows, columns] result is source element base +
/// offset(batch) + a + b * columnStride.
struct TransposeGeometry {
  DeviceShape batchShape, batchStrides;
  int64_t base = 0;
  int64_t rows = 0, columns = 0, columnStride = 0;
  int64_t rowTiles = 0, columnTiles = 0, tiles = 0;
};

constexpr int kTile = 32;
constexpr int kTileRows = 8;

template <typename U>
__global__ void __launch_bounds__(kTile *kTileRows)
    transposeKernel(U *dst, const U *src,
                    const __grid_constant__ TransposeGeometry g) {
  __shared__ U tile[kTile][kTile + 1];
  const int64_t tilesPerBatch = g.rowTiles * g.columnTiles;
  for (int64_t t = blockIdx.x; t < g.tiles; t += gridDim.x) {
    int64_t batch = t / tilesPerBatch, rest = t - batch * tilesPerBatch;
    int64_t row0 = (rest / g.columnTiles) * kTile;
    int64_t column0 = (rest % g.columnTiles) * kTile;
    const U *in =
        src + g.base + stridedOffset(batch, g.batchShape, g.batchStrides);
    U *out = dst + batch * g.rows * g.columns;
    // Read along rows (source-contiguous), write along columns.
    for (int y = threadIdx.y; y < kTile; y += kTileRows) {
      int64_t row = row0 + threadIdx.x, column = column0 + y;
      if (row < g.rows && column < g.columns)
        tile[y][threadIdx.x] = in[row + column * g.columnStride];
    }
    __syncthreads();
    for (int y = threadIdx.y; y < kTile; y += kTileRows) {
      int64_t row = row0 + y, column = column0 + threadIdx.x;
      if (row < g.rows && column < g.columns)
        out[row * g.columns + column] = tile[threadIdx.x][y];
    }
    __syncthreads();
  }
}

/// Drops size-1 dimensions and merges neighbours the view walks
/// contiguously; at least one dimension remains.
ViewGeometry collapse(const StridedView &view) {
  ViewGeometry g;
  g.base = view.base;
  int rank = 0;
  for (int d = 0; d < view.shape.rank; ++d) {
    int64_t extent = view.shape.dims[d], stride = view.strides.dims[d];
    if (extent == 1)
      continue;
    if (rank > 0 && g.strides.dims[rank - 1] == stride * extent) {
      g.shape.dims[rank - 1] *= extent;
      g.strides.dims[rank - 1] = stride;
    } else {
      g.shape.dims[rank] = extent;
      g.strides.dims[rank] = stride;
      ++rank;
    }
  }
  if (rank == 0) {
    g.shape.dims[0] = 1;
    g.strides.dims[0] = 0;
    rank = 1;
  }
  g.shape.rank = g.strides.rank = rank;
  g.count = 1;
  for (int d = 0; d < rank; ++d)
    g.count *= g.shape.dims[d];
  return g;
}

/// Regroups elements of `elementBytes` into the largest unit (up to 16
/// bytes) that the innermost dimension, the strides, the base and both
/// pointers allow; returns the unit's size in bytes.
int widenUnits(ViewGeometry &g, int elementBytes, const void *strided,
               const void *dense) {
  const int inner = g.shape.rank - 1;
  if (g.strides.dims[inner] != 1)
    return elementBytes;
  for (int unit = 16; unit > elementBytes; unit /= 2) {
    int64_t ratio = unit / elementBytes;
    bool fits = g.shape.dims[inner] % ratio == 0 && g.base % ratio == 0 &&
                aligned(strided, unit) && aligned(dense, unit);
    for (int d = 0; fits && d < inner; ++d)
      fits = g.strides.dims[d] % ratio == 0;
    if (!fits)
      continue;
    g.shape.dims[inner] /= ratio;
    for (int d = 0; d < inner; ++d)
      g.strides.dims[d] /= ratio;
    g.base /= ratio;
    g.count /= ratio;
    return unit;
  }
  return elementBytes;
}

cudaError_t launchStrided(void *dst, const void *src, const StridedView &view,
                          bool scatter, cudaStream_t stream) {
  ViewGeometry g = collapse(view);
  if (g.count == 0)
    return cudaSuccess;
  const int elementBytes = view.elementBytes;
  if (g.shape.rank == 1 && g.strides.dims[0] == 1) {
    size_t bytes = static_cast<size_t>(g.count) * elementBytes;
    size_t base = static_cast<size_t>(g.base) * elementBytes;
    if (scatter)
      return cudaMemcpyAsync(static_cast<char *>(dst) + base, src, bytes,
                             cudaMemcpyDeviceToDevice, stream);
    return cudaMemcpyAsync(dst, static_cast<const char *>(src) + base, bytes,
                           cudaMemcpyDeviceToDevice, stream);
  }

  const int rank = g.shape.rank;
  if (!scatter && rank >= 2 && g.strides.dims[rank - 2] == 1 &&
      g.shape.dims[rank - 2] >= 16 && g.shape.dims[rank - 1] >= 16) {
    TransposeGeometry t;
    t.batchShape.rank = t.batchStrides.rank = rank - 2;
    int64_t batches = 1;
    for (int d = 0; d < rank - 2; ++d) {
      t.batchShape.dims[d] = g.shape.dims[d];
      t.batchStrides.dims[d] = g.strides.dims[d];
      batches *= g.shape.dims[d];
    }
    t.base = g.base;
    t.columns = g.shape.dims[rank - 1];
    t.rows = g.shape.dims[rank - 2];
    t.columnStride = g.strides.dims[rank - 1];
    t.rowTiles = (t.rows + kTile - 1) / kTile;
    t.columnTiles = (t.columns + kTile - 1) / kTile;
    t.tiles = batches * t.rowTiles * t.columnTiles;
    unsigned blocks =
        static_cast<unsigned>(t.tiles < 65535LL * 32 ? t.tiles : 65535LL * 32);
    bool launched = dispatchUnit(elementBytes, [&](auto unit) {
      using U = decltype(unit);
      transposeKernel<U><<<blocks, dim3(kTile, kTileRows), 0, stream>>>(
          static_cast<U *>(dst), static_cast<const U *>(src), t);
    });
    return launched ? cudaGetLastError() : cudaErrorInvalidValue;
  }

  const int unitBytes =
      widenUnits(g, elementBytes, scatter ? dst : src, scatter ? src : dst);
  g.smallIndex = g.count <= int64_t{UINT32_MAX};
  bool launched = dispatchUnit(unitBytes, [&](auto unit) {
    using U = decltype(unit);
    unsigned blocks = gridFor(g.count, kThreads);
    if (scatter)
      stridedKernel<U, true><<<blocks, kThreads, 0, stream>>>(
          static_cast<U *>(dst), static_cast<const U *>(src), g);
    else
      stridedKernel<U, false><<<blocks, kThreads, 0, stream>>>(
          static_cast<U *>(dst), static_cast<const U *>(src), g);
  });
  return launched ? cudaGetLastError() : cudaErrorInvalidValue;
}

//===----------------------------------------------------------------------===//
// gather
//===----------------------------------------------------------------------===//

template <typename U, typename Index>
__global__ void __launch_bounds__(kThreads)
    gatherKernel(U *out, const U *data, const Index *indices, int64_t count,
                 int64_t extent, int64_t rowUnits, int64_t total) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       e < total; e += stride) {
    int64_t row = e / rowUnits, column = e - row * rowUnits;
    int64_t block = row / count, i = row - block * count;
    // Negative indices count from the end, as in ONNX.
    int64_t index = static_cast<int64_t>(indices[i]);
    if (index < 0)
      index += extent;
    // The cpu refuses out-of-range indices; here they give zeros.
    out[e] = index >= 0 && index < extent
                 ? data[(block * extent + index) * rowUnits + column]
                 : U{};
  }
}

//===----------------------------------------------------------------------===//
// gather_grad
//===----------------------------------------------------------------------===//

/// Sort keys: the index in [0, extent), or extent for an out-of-range one
/// (sorted last, summed nowhere); values: the positions.
template <typename Index>
__global__ void __launch_bounds__(kThreads)
    gatherGradKeysKernel(uint32_t *keys, int32_t *positions,
                         const Index *indices, int64_t count, int64_t extent) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    int64_t index = static_cast<int64_t>(indices[i]);
    if (index < 0)
      index += extent;
    keys[i] =
        static_cast<uint32_t>(index >= 0 && index < extent ? index : extent);
    positions[i] = static_cast<int32_t>(i);
  }
}

/// segments[r] = the first sorted position whose key is at least r, for r
/// in [0, extent]: slice r's run is [segments[r], segments[r + 1]).
__global__ void __launch_bounds__(kThreads)
    gatherGradSegmentsKernel(int32_t *segments, const uint32_t *keys,
                             int64_t count, int64_t extent) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       r <= extent; r += stride) {
    int64_t lo = 0, hi = count;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (static_cast<int64_t>(keys[mid]) < r)
        lo = mid + 1;
      else
        hi = mid;
    }
    segments[r] = static_cast<int32_t>(lo);
  }
}

template <typename T, int N> struct alignas(sizeof(T) * N) Pack { T v[N]; };

/// One group of `threadsPerRow` threads (a power of two dividing the block)
/// per result slice, each thread a pack of N elements at a time: the sum of
/// the slice's gradients, in position order, rounded to T after each
/// addition as the cpu's in-place accumulation does.
template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    gatherGradSumKernel(T *result, const T *grad, const int32_t *positions,
                        const int32_t *segments, int64_t count, int64_t extent,
                        int64_t packsPerSlice, int64_t slices,
                        int threadsPerRow) {
  using P = Pack<T, N>;
  const int slicesPerBlock = blockDim.x / threadsPerRow;
  const int lane = threadIdx.x % threadsPerRow;
  const int64_t step = static_cast<int64_t>(gridDim.x) * slicesPerBlock;
  for (int64_t slice = static_cast<int64_t>(blockIdx.x) * slicesPerBlock +
                       threadIdx.x / threadsPerRow;
       slice < slices; slice += step) {
    int64_t block = slice / extent, r = slice - block * extent;
    const int32_t begin = segments[r], end = segments[r + 1];
    const P *in =
        reinterpret_cast<const P *>(grad) + block * count * packsPerSlice;
    P *out = reinterpret_cast<P *>(result) + slice * packsPerSlice;
    for (int64_t p = lane; p < packsPerSlice; p += threadsPerRow) {
      P sum;
#pragma unroll
      for (int j = 0; j < N; ++j)
        store(&sum.v[j], Acc<T>(0));
      for (int32_t k = begin; k < end; ++k) {
        P g = in[static_cast<int64_t>(positions[k]) * packsPerSlice + p];
#pragma unroll
        for (int j = 0; j < N; ++j)
          store(&sum.v[j], load(&sum.v[j]) + load(&g.v[j]));
      }
      out[p] = sum;
    }
  }
}

template <typename T, int N>
cudaError_t launchGatherGradSum(const GatherGradParams &params,
                                const int32_t *positions,
                                const int32_t *segments, cudaStream_t stream) {
  const int64_t packsPerSlice = params.sliceSize / N;
  const int64_t slices = params.outer * params.extent;
  int threadsPerRow = 1;
  while (threadsPerRow < static_cast<int>(kThreads) &&
         threadsPerRow < packsPerSlice)
    threadsPerRow *= 2;
  const int64_t slicesPerBlock = kThreads / threadsPerRow;
  gatherGradSumKernel<T, N>
      <<<gridFor((slices + slicesPerBlock - 1) / slicesPerBlock, 1), kThreads,
         0, stream>>>(static_cast<T *>(params.result),
                      static_cast<const T *>(params.grad), positions, segments,
                      params.count, params.extent, packsPerSlice, slices,
                      threadsPerRow);
  return cudaGetLastError();
}

/// The workspace of gather_grad, in 256-byte aligned regions.
struct GatherGradLayout {
  size_t keysIn = 0, keysOut = 0, positionsIn = 0, positionsOut = 0,
         segments = 0, temp = 0, tempBytes = 0, total = 0;
};

size_t alignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

int keyBits(int64_t extent) {
  int bits = 1;
  while (bits < 32 && (int64_t{1} << bits) <= extent)
    ++bits;
  return bits;
}

cudaError_t gatherGradLayout(int64_t count, int64_t extent,
                             GatherGradLayout &layout) {
  size_t items = static_cast<size_t>(count);
  size_t tempBytes = 0;
  cudaError_t error = cub::DeviceRadixSort::SortPairs(
      nullptr, tempBytes, static_cast<const uint32_t *>(nullptr),
      static_cast<uint32_t *>(nullptr), static_cast<const int32_t *>(nullptr),
      static_cast<int32_t *>(nullptr), static_cast<int>(count), 0,
      keyBits(extent));
  if (error != cudaSuccess)
    return error;
  size_t offset = 0;
  auto region = [&](size_t bytes) {
    size_t at = offset;
    offset += alignUp(bytes);
    return at;
  };
  layout.keysIn = region(items * sizeof(uint32_t));
  layout.keysOut = region(items * sizeof(uint32_t));
  layout.positionsIn = region(items * sizeof(int32_t));
  layout.positionsOut = region(items * sizeof(int32_t));
  layout.segments = region(static_cast<size_t>(extent + 1) * sizeof(int32_t));
  layout.temp = region(tempBytes);
  layout.tempBytes = tempBytes;
  layout.total = offset;
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// trilu
//===----------------------------------------------------------------------===//

template <typename U>
__global__ void __launch_bounds__(kThreads)
    triluKernel(U *dst, const U *src, int64_t total, int64_t rows,
                int64_t columns, int64_t k, bool upper) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       e < total; e += stride) {
    int64_t line = e / columns, j = e - line * columns, i = line % rows;
    // The triangle is offset by diagonal k (ONNX Trilu); zero is all zero
    // bytes in every element type.
    bool keep = upper ? j - i >= k : j - i <= k;
    dst[e] = keep ? src[e] : U{};
  }
}

} // namespace

cudaError_t launchStridedCopy(void *dst, const void *src,
                              const StridedView &view, cudaStream_t stream) {
  return launchStrided(dst, src, view, /*scatter=*/false, stream);
}

cudaError_t launchStridedScatter(void *dst, const void *src,
                                 const StridedView &view, cudaStream_t stream) {
  return launchStrided(dst, src, view, /*scatter=*/true, stream);
}

cudaError_t launchGather(const GatherParams &params, cudaStream_t stream) {
  int64_t sliceBytes = params.sliceSize * params.elementBytes;
  int64_t total = params.outer * params.count * sliceBytes;
  if (total == 0)
    return cudaSuccess;
  int unitBytes = 16;
  while (unitBytes > 1 &&
         (sliceBytes % unitBytes != 0 || !aligned(params.data, unitBytes) ||
          !aligned(params.result, unitBytes)))
    unitBytes /= 2;
  int64_t rowUnits = sliceBytes / unitBytes;
  total /= unitBytes;
  dispatchUnit(unitBytes, [&](auto unit) {
    using U = decltype(unit);
    unsigned blocks = gridFor(total, kThreads);
    U *out = static_cast<U *>(params.result);
    const U *data = static_cast<const U *>(params.data);
    if (params.indices64)
      gatherKernel<<<blocks, kThreads, 0, stream>>>(
          out, data, static_cast<const int64_t *>(params.indices), params.count,
          params.extent, rowUnits, total);
    else
      gatherKernel<<<blocks, kThreads, 0, stream>>>(
          out, data, static_cast<const int32_t *>(params.indices), params.count,
          params.extent, rowUnits, total);
  });
  return cudaGetLastError();
}

cudaError_t gatherGradWorkspaceBytes(int64_t count, int64_t extent,
                                     size_t *bytes) {
  *bytes = 0;
  if (count <= 0 || count > kMaxGatherGradCount || extent <= 0 ||
      extent > kMaxGatherGradExtent)
    return cudaErrorInvalidValue;
  GatherGradLayout layout;
  cudaError_t error = gatherGradLayout(count, extent, layout);
  if (error == cudaSuccess)
    *bytes = layout.total;
  return error;
}

cudaError_t launchGatherGrad(const GatherGradParams &params,
                             cudaStream_t stream) {
  const int64_t total = params.outer * params.extent * params.sliceSize;
  if (total == 0)
    return cudaSuccess;
  const size_t resultBytes =
      static_cast<size_t>(total) * elementBytes(params.type);
  if (params.count == 0)
    return cudaMemsetAsync(params.result, 0, resultBytes, stream);

  GatherGradLayout layout;
  if (cudaError_t error = gatherGradLayout(params.count, params.extent, layout);
      error != cudaSuccess)
    return error;
  if (!params.workspace || layout.total > params.workspaceBytes)
    return cudaErrorInvalidValue;
  char *workspace = static_cast<char *>(params.workspace);
  auto *keysIn = reinterpret_cast<uint32_t *>(workspace + layout.keysIn);
  auto *keysOut = reinterpret_cast<uint32_t *>(workspace + layout.keysOut);
  auto *positionsIn =
      reinterpret_cast<int32_t *>(workspace + layout.positionsIn);
  auto *positionsOut =
      reinterpret_cast<int32_t *>(workspace + layout.positionsOut);
  auto *segments = reinterpret_cast<int32_t *>(workspace + layout.segments);

  unsigned blocks = gridFor(params.count, kThreads);
  if (params.indices64)
    gatherGradKeysKernel<<<blocks, kThreads, 0, stream>>>(
        keysIn, positionsIn, static_cast<const int64_t *>(params.indices),
        params.count, params.extent);
  else
    gatherGradKeysKernel<<<blocks, kThreads, 0, stream>>>(
        keysIn, positionsIn, static_cast<const int32_t *>(params.indices),
        params.count, params.extent);
  if (cudaError_t error = cudaGetLastError(); error != cudaSuccess)
    return error;

  size_t tempBytes = layout.tempBytes;
  if (cudaError_t error = cub::DeviceRadixSort::SortPairs(
          workspace + layout.temp, tempBytes,
          static_cast<const uint32_t *>(keysIn), keysOut,
          static_cast<const int32_t *>(positionsIn), positionsOut,
          static_cast<int>(params.count), 0, keyBits(params.extent), stream);
      error != cudaSuccess)
    return error;

  gatherGradSegmentsKernel<<<gridFor(params.extent + 1, kThreads), kThreads, 0,
                             stream>>>(segments, keysOut, params.count,
                                       params.extent);
  if (cudaError_t error = cudaGetLastError(); error != cudaSuccess)
    return error;

  cudaError_t result = cudaErrorInvalidValue;
  dispatchFloat(params.type, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    if (params.sliceSize % kVec == 0 && aligned(params.grad, 16) &&
        aligned(params.result, 16))
      result =
          launchGatherGradSum<T, kVec>(params, positionsOut, segments, stream);
    else
      result =
          launchGatherGradSum<T, 1>(params, positionsOut, segments, stream);
  });
  return result;
}

cudaError_t launchTrilu(const TriluParams &params, cudaStream_t stream) {
  int64_t total = params.matrices * params.rows * params.columns;
  if (total == 0)
    return cudaSuccess;
  bool launched = dispatchUnit(params.elementBytes, [&](auto unit) {
    using U = decltype(unit);
    triluKernel<<<gridFor(total, kThreads), kThreads, 0, stream>>>(
        static_cast<U *>(params.dst), static_cast<const U *>(params.src), total,
        params.rows, params.columns, params.k, params.upper);
  });
  return launched ? cudaGetLastError() : cudaErrorInvalidValue;
}

} // namespace zcc::cuda
