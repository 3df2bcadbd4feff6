//===- DeviceSupport.cuh - Shared device code of the cuda kernels -*- C++ -*-===//
//
// Included by the .cu files only. Element types travel to device code as
// the plan's DType numbers (ElementType below mirrors schema/plan.proto, so
// device files need no protobuf header); loads widen to float (double for
// f64) and stores round to nearest even, as the cpu kernels do.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_DEVICESUPPORT_CUH
#define ZCC_KERNELS_CUDA_DEVICESUPPORT_CUH

#include "kernels/cuda/LaunchTypes.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace zcc::cuda {

/// The accumulation type of an element type: double for f64, float for the
/// other float types.
template <typename T> struct AccumulateType {
  using type = float;
};
template <> struct AccumulateType<double> {
  using type = double;
};
template <typename T> using Acc = typename AccumulateType<T>::type;

template <typename T> __device__ __forceinline__ Acc<T> load(const T *p) {
  return static_cast<Acc<T>>(*p);
}
template <> __device__ __forceinline__ float load(const __half *p) {
  return __half2float(*p);
}
template <> __device__ __forceinline__ float load(const __nv_bfloat16 *p) {
  return __bfloat162float(*p);
}

template <typename T, typename V> __device__ __forceinline__ void store(T *p, V v) {
  *p = static_cast<T>(v);
}
template <typename V> __device__ __forceinline__ void store(__half *p, V v) {
  *p = __float2half_rn(static_cast<float>(v));
}
template <typename V>
__device__ __forceinline__ void store(__nv_bfloat16 *p, V v) {
  *p = __float2bfloat16_rn(static_cast<float>(v));
}

/// Calls `body(T{})` with T the C++ type of float element type `type` (f32,
/// f64, f16, bf16), for generic lambdas: `[&](auto tag) { using T =
/// decltype(tag); ... }`. Returns false for other types.
template <typename Body> __host__ bool dispatchFloat(ElementType type, Body &&body) {
  switch (type) {
  case ElementType::kF32:
    body(float{});
    return true;
  case ElementType::kF64:
    body(double{});
    return true;
  case ElementType::kF16:
    body(__half{});
    return true;
  case ElementType::kBF16:
    body(__nv_bfloat16{});
    return true;
  default:
    return false;
  }
}

/// Grid size for a grid-stride loop over `count` items with `threads` per
/// block, capped so huge tensors reuse blocks instead of overflowing.
inline unsigned gridFor(int64_t count, unsigned threads) {
  int64_t blocks = (count + threads - 1) / threads;
  if (blocks < 1)
    blocks = 1;
  if (blocks > 65535LL * 32)
    blocks = 65535LL * 32;
  return static_cast<unsigned>(blocks);
}

/// Element offset of linear index `index` of a row-major walk of `shape`
/// in a tensor read with `strides` (0 along broadcast dimensions).
__device__ __forceinline__ int64_t stridedOffset(int64_t index,
                                                 const DeviceShape &shape,
                                                 const DeviceShape &strides) {
  int64_t offset = 0;
  for (int d = shape.rank - 1; d >= 0; --d) {
    int64_t dim = shape.dims[d];
    int64_t i = index % dim;
    index /= dim;
    offset += i * strides.dims[d];
  }
  return offset;
}

/// Sum of `value` over the block (blockDim.x a multiple of 32, at most
/// 1024); every thread gets the result. `scratch` holds 32 values.
template <typename A>
__device__ __forceinline__ A blockSum(A value, A *scratch) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    scratch[warp] = value;
  __syncthreads();
  int warps = (blockDim.x + 31) >> 5;
  value = lane < warps ? scratch[lane] : A(0);
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// Maximum of `value` over the block, as blockSum.
template <typename A>
__device__ __forceinline__ A blockMax(A value, A *scratch) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmax(value, __shfl_xor_sync(0xffffffffu, value, offset));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    scratch[warp] = value;
  __syncthreads();
  int warps = (blockDim.x + 31) >> 5;
  value = lane < warps ? scratch[lane] : A(-INFINITY);
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmax(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

} // namespace zcc::cuda

#endif // ZCC_KERNELS_CUDA_DEVICESUPPORT_CUH
