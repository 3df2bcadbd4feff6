//===- Elementwise.cu - Element-wise kernels on the device ----------------===//
//
// Every element-wise kernel is one generic map: an op functor applied to the
// elements of its inputs (raw storage values in, a raw storage value out).
// The launcher picks one of two loops:
//
// - flat, when every input has the result's shape: packs of up to 16 bytes
//   per operand are loaded and stored as vectors (where the pointers allow),
//   with a scalar tail;
// - broadcast, otherwise: each result index is split into coordinates of the
//   (collapsed) result shape and every input's offset is the dot product
//   with its strides, 0 along broadcast dimensions. Where the innermost
//   dimension is a multiple of the pack, packs are used here too: inputs
//   contiguous along it load a vector, broadcast ones one value.
//
// Dimensions are collapsed first (size-1 dimensions dropped, neighbours that
// every operand walks contiguously merged), so a bias add over [B, T, C]
// walks [B*T, C]. Float arithmetic happens in Acc<T> (f32 for f16, bf16 and
// f32; f64 for f64) and rounds once to nearest even on store, as the cpu
// kernels do; transcendental functions use CUDA's f32 (f64) functions,
// within a few ulps of the cpu reference's correctly rounded ones. Every
// result element is computed by one thread from its inputs alone: the
// results are deterministic and a result may alias an input.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/DropoutMask.h"
#include "kernels/cuda/DeviceSupport.cuh"
#include "kernels/cuda/ElementwiseLaunch.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

namespace zcc::cuda {

namespace {

constexpr unsigned kThreads = 256;

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

/// A stored float element as its accumulation type.
template <typename T> __device__ __forceinline__ Acc<T> widen(T value) {
  return static_cast<Acc<T>>(value);
}
template <> __device__ __forceinline__ float widen(__half value) {
  return __half2float(value);
}
template <> __device__ __forceinline__ float widen(__nv_bfloat16 value) {
  return __bfloat162float(value);
}

/// An accumulated value rounded (to nearest even) to storage type T.
template <typename T> __device__ __forceinline__ T narrow(Acc<T> value) {
  return static_cast<T>(value);
}
template <> __device__ __forceinline__ __half narrow<__half>(float value) {
  return __float2half_rn(value);
}
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float value) {
  return __float2bfloat16_rn(value);
}

template <typename T>
constexpr bool kIsHalfWidth =
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || kIsHalfWidth<T>;

// The math functions in f32 or f64, by overload.
__device__ __forceinline__ float mathExp(float x) { return expf(x); }
__device__ __forceinline__ double mathExp(double x) { return exp(x); }
__device__ __forceinline__ float mathLog(float x) { return logf(x); }
__device__ __forceinline__ double mathLog(double x) { return log(x); }
__device__ __forceinline__ float mathSqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double mathSqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float mathTanh(float x) { return tanhf(x); }
__device__ __forceinline__ double mathTanh(double x) { return tanh(x); }
__device__ __forceinline__ float mathErf(float x) { return erff(x); }
__device__ __forceinline__ double mathErf(double x) { return erf(x); }
__device__ __forceinline__ float mathPow(float x, float y) {
  return powf(x, y);
}
__device__ __forceinline__ double mathPow(double x, double y) {
  return pow(x, y);
}

//===----------------------------------------------------------------------===//
// Op functors: raw storage values in, a raw storage value out
//===----------------------------------------------------------------------===//

template <BinaryOp kOp, typename T> struct BinaryFn {
  __device__ __forceinline__ T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // Integers wrap on overflow, as the cpu kernels do.
      using U = std::make_unsigned_t<T>;
      if constexpr (kOp == BinaryOp::kAdd)
        return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      if constexpr (kOp == BinaryOp::kSub)
        return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
      if constexpr (kOp == BinaryOp::kMul)
        return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      if constexpr (kOp == BinaryOp::kMax)
        return a < b ? b : a;
      if constexpr (kOp == BinaryOp::kMin)
        return b < a ? b : a;
      return T();
    } else {
      using C = Acc<T>;
      C x = widen(a), y = widen(b), r = C(0);
      if constexpr (kOp == BinaryOp::kAdd)
        r = x + y;
      if constexpr (kOp == BinaryOp::kSub)
        r = x - y;
      if constexpr (kOp == BinaryOp::kMul)
        r = x * y;
      if constexpr (kOp == BinaryOp::kDiv)
        r = x / y;
      if constexpr (kOp == BinaryOp::kPow)
        r = mathPow(x, y);
      // max and min propagate NaN, as numpy.maximum and torch.maximum do.
      if constexpr (kOp == BinaryOp::kMax)
        r = isnan(x) || isnan(y) ? x + y : (x < y ? y : x);
      if constexpr (kOp == BinaryOp::kMin)
        r = isnan(x) || isnan(y) ? x + y : (y < x ? y : x);
      return narrow<T>(r);
    }
  }
};

/// Bool elements are bytes: true when non-zero, whatever the byte.
struct BoolByte {
  uint8_t raw;
};

template <typename T> __device__ __forceinline__ auto compareValue(T value) {
  if constexpr (kIsFloat<T>)
    return widen(value);
  else
    return value;
}
__device__ __forceinline__ bool compareValue(BoolByte value) {
  return value.raw != 0;
}

template <CompareOp kOp, typename T> struct CompareFn {
  __device__ __forceinline__ uint8_t operator()(T a, T b) const {
    auto x = compareValue(a), y = compareValue(b);
    bool r = kOp == CompareOp::kEqual  ? x == y
             : kOp == CompareOp::kLess ? x < y
                                       : y < x;
    return r ? 1 : 0;
  }
};

/// where on raw element bits.
template <typename T> struct SelectFn {
  __device__ __forceinline__ T operator()(uint8_t condition, T onTrue,
                                          T onFalse) const {
    return condition ? onTrue : onFalse;
  }
};

template <typename T> struct IsNanFn {
  __device__ __forceinline__ uint8_t operator()(T x) const {
    return isnan(widen(x)) ? 1 : 0;
  }
};

template <UnaryOp kOp, typename C>
__device__ __forceinline__ C applyUnary(C x) {
  if constexpr (kOp == UnaryOp::kNeg)
    return -x;
  if constexpr (kOp == UnaryOp::kExp)
    return mathExp(x);
  if constexpr (kOp == UnaryOp::kSqrt)
    return mathSqrt(x);
  if constexpr (kOp == UnaryOp::kTanh)
    return mathTanh(x);
  if constexpr (kOp == UnaryOp::kRelu)
    return x > C(0) || isnan(x) ? x : C(0); // NaN passes, as in torch.
  if constexpr (kOp == UnaryOp::kSigmoid) {
    // Either branch keeps exp's argument non-positive: no overflow.
    if (x >= C(0))
      return C(1) / (C(1) + mathExp(-x));
    C e = mathExp(x);
    return e / (C(1) + e);
  }
  if constexpr (kOp == UnaryOp::kLog)
    return mathLog(x);
  if constexpr (kOp == UnaryOp::kErf)
    return mathErf(x);
  if constexpr (kOp == UnaryOp::kReciprocal)
    return C(1) / x;
  if constexpr (kOp == UnaryOp::kGeluErf)
    return C(0.5) * x * (C(1) + mathErf(x * C(0.7071067811865476)));
  if constexpr (kOp == UnaryOp::kGeluTanh)
    return C(0.5) * x *
           (C(1) +
            mathTanh(C(0.7978845608028654) * (x + C(0.044715) * x * x * x)));
  return x;
}

template <UnaryOp kOp, typename T> struct UnaryFn {
  __device__ __forceinline__ T operator()(T x) const {
    return narrow<T>(applyUnary<kOp>(widen(x)));
  }
};

/// The cpu's gelu_grad, in Acc<T> with the same constants and formula.
template <bool kTanhForm, typename T> struct GeluGradFn {
  __device__ __forceinline__ T operator()(T input, T grad) const {
    using C = Acc<T>;
    const C sqrtHalf = C(0.7071067811865476);
    const C sqrt2OverPi = C(0.7978845608028654);
    const C invSqrt2Pi = C(0.3989422804014327);
    const C cubic = C(0.044715);
    const C half = C(0.5), one = C(1), three = C(3);
    C v = widen(input), derivative;
    if constexpr (kTanhForm) {
      // d/dx 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
      C t = mathTanh(sqrt2OverPi * (v + cubic * v * v * v));
      derivative = half * (one + t) + half * v * (one - t * t) * sqrt2OverPi *
                                          (one + three * cubic * v * v);
    } else {
      // d/dx x Phi(x) = Phi(x) + x phi(x).
      derivative = half * (one + mathErf(v * sqrtHalf)) +
                   v * mathExp(-half * v * v) * invSqrt2Pi;
    }
    return narrow<T>(widen(grad) * derivative);
  }
};

//===----------------------------------------------------------------------===//
// Cast, with the cpu kernel's (ONNX Cast's) rules
//===----------------------------------------------------------------------===//

template <typename T> struct IntLimits;
template <> struct IntLimits<int64_t> {
  static constexpr int64_t kMin = INT64_MIN, kMax = INT64_MAX;
};
template <> struct IntLimits<int32_t> {
  static constexpr int32_t kMin = INT32_MIN, kMax = INT32_MAX;
};
template <> struct IntLimits<int8_t> {
  static constexpr int8_t kMin = INT8_MIN, kMax = INT8_MAX;
};

/// `value` rounded toward zero to f32, with the lowest mantissa bit set when
/// that dropped anything (rounding to odd): rounding this once more to f16
/// or bf16 rounds `value` correctly. The same result as the cpu's
/// roundToOddFloat, whose nearest-then-step-toward-zero is this rounding
/// toward zero.
__device__ __forceinline__ float roundToOddFloat(double value) {
  if (!isfinite(value))
    return static_cast<float>(value);
  float rounded = __double2float_rz(value);
  if (static_cast<double>(rounded) != value)
    rounded = __int_as_float(__float_as_int(rounded) | 1);
  return rounded;
}

/// The same for an integer (which may have more than 53 bits).
__device__ __forceinline__ float roundToOddFloat(int64_t value) {
  uint64_t magnitude = value < 0 ? uint64_t(0) - static_cast<uint64_t>(value)
                                 : static_cast<uint64_t>(value);
  int bits = 64 - __clzll(static_cast<long long>(magnitude));
  int shift = bits > 24 ? bits - 24 : 0;
  uint64_t kept = magnitude >> shift;
  if ((kept << shift) != magnitude)
    kept |= 1;
  // Exact: kept has at most 24 bits and the scale is a power of two.
  float result = ldexpf(static_cast<float>(kept), shift);
  return value < 0 ? -result : result;
}

/// A stored element as the cast reads it: f16 and bf16 as f32, bool as
/// bool (uint8_t is the storage of bool here).
template <typename From> __device__ __forceinline__ auto castSource(From raw) {
  if constexpr (std::is_same_v<From, uint8_t>)
    return raw != 0;
  else if constexpr (kIsHalfWidth<From>)
    return widen(raw);
  else
    return raw;
}

template <typename To, typename From> struct CastFn {
  __device__ __forceinline__ To operator()(From raw) const {
    auto value = castSource(raw);
    using V = decltype(value);
    if constexpr (std::is_same_v<To, uint8_t>) {
      return value != V(0) ? 1 : 0;
    } else if constexpr (kIsHalfWidth<To>) {
      if constexpr (std::is_same_v<V, float>)
        return narrow<To>(value);
      else if constexpr (std::is_same_v<V, double>)
        return narrow<To>(roundToOddFloat(value));
      else
        return narrow<To>(roundToOddFloat(static_cast<int64_t>(value)));
    } else if constexpr (std::is_integral_v<To> &&
                         std::is_floating_point_v<V>) {
      // NaN becomes 0 and out-of-range values saturate. Both limits are
      // powers of two (minus one for the maximum, which then rounds up to
      // the power of two): the comparisons are exact.
      if (isnan(value))
        return To(0);
      if (value <= static_cast<V>(IntLimits<To>::kMin))
        return IntLimits<To>::kMin;
      if (value >= static_cast<V>(IntLimits<To>::kMax))
        return IntLimits<To>::kMax;
      return static_cast<To>(value);
    } else if constexpr (std::is_integral_v<To>) {
      // Narrowing keeps the low bits (two's complement), as numpy does.
      return static_cast<To>(
          static_cast<std::make_unsigned_t<To>>(static_cast<uint64_t>(value)));
    } else {
      // To f32 or f64: the conversion rounds to nearest even.
      return static_cast<To>(value);
    }
  }
};

//===----------------------------------------------------------------------===//
// The map loops
//===----------------------------------------------------------------------===//

template <typename T, int N> struct alignas(sizeof(T) * N) Pack { T v[N]; };

template <int N, typename Op, typename Out, typename... In>
__device__ __forceinline__ void applyPacks(const Op &op, Pack<Out, N> &out,
                                           const Pack<In, N> &...in) {
#pragma unroll
  for (int k = 0; k < N; ++k)
    out.v[k] = op(in.v[k]...);
}

/// Every input has the result's shape: element i of each.
template <int N, typename Op, typename Out, typename... In>
__global__ void __launch_bounds__(kThreads)
    flatKernel(Out *out, int64_t count, Op op, const In *...in) {
  const int64_t packs = count / N;
  const int64_t first =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = first; p < packs; p += stride) {
    Pack<Out, N> result;
    applyPacks<N>(op, result, reinterpret_cast<const Pack<In, N> *>(in)[p]...);
    reinterpret_cast<Pack<Out, N> *>(out)[p] = result;
  }
  if constexpr (N > 1) {
    // Fewer than N elements remain: the first threads take one each.
    int64_t tail = packs * N + first;
    if (tail < count)
      out[tail] = op(in[tail]...);
  }
}

/// The collapsed index space of a broadcasting kernel with K inputs.
template <int K> struct Geometry {
  DeviceShape shape;
  DeviceShape strides[K];
  int64_t count = 0;
  /// Every index fits 32 bits: coordinates come from 32-bit divisions.
  bool smallIndex = false;
};

template <int K>
__device__ __forceinline__ void offsetsOf(int64_t index, const Geometry<K> &g,
                                          int64_t (&offsets)[K]) {
#pragma unroll
  for (int j = 0; j < K; ++j)
    offsets[j] = 0;
  if (g.smallIndex) {
    uint32_t rest = static_cast<uint32_t>(index);
    for (int d = g.shape.rank - 1; d >= 0; --d) {
      uint32_t extent = static_cast<uint32_t>(g.shape.dims[d]);
      uint32_t i = d > 0 ? rest % extent : rest;
      rest /= extent;
#pragma unroll
      for (int j = 0; j < K; ++j)
        offsets[j] += static_cast<int64_t>(i) * g.strides[j].dims[d];
    }
  } else {
    int64_t rest = index;
    for (int d = g.shape.rank - 1; d >= 0; --d) {
      int64_t extent = g.shape.dims[d];
      int64_t i = d > 0 ? rest % extent : rest;
      rest /= extent;
#pragma unroll
      for (int j = 0; j < K; ++j)
        offsets[j] += i * g.strides[j].dims[d];
    }
  }
}

/// N elements of `in` from `offset` on: a vector where the input is
/// contiguous along the innermost dimension, one value repeated where it
/// is broadcast along it.
template <int N, typename T>
__device__ __forceinline__ Pack<T, N> loadPack(const T *in, int64_t offset,
                                               bool contiguous) {
  Pack<T, N> pack;
  if (N == 1 || contiguous) {
    pack = *reinterpret_cast<const Pack<T, N> *>(in + offset);
  } else {
    T value = in[offset];
#pragma unroll
    for (int k = 0; k < N; ++k)
      pack.v[k] = value;
  }
  return pack;
}

template <int N, typename Op, typename Out, typename... In, size_t... J>
__device__ __forceinline__ void
broadcastPack(Out *out, int64_t pack, const Geometry<sizeof...(In)> &g,
              const Op &op, std::index_sequence<J...>, const In *...in) {
  int64_t offsets[sizeof...(In)];
  offsetsOf(pack * N, g, offsets);
  const int inner = g.shape.rank - 1;
  Pack<Out, N> result;
  applyPacks<N>(op, result,
                loadPack<N>(in, offsets[J], g.strides[J].dims[inner] == 1)...);
  reinterpret_cast<Pack<Out, N> *>(out)[pack] = result;
}

/// NumPy broadcasting; N divides the innermost dimension.
template <int N, typename Op, typename Out, typename... In>
__global__ void __launch_bounds__(kThreads)
    broadcastKernel(Out *out, const __grid_constant__ Geometry<sizeof...(In)> g,
                    Op op, const In *...in) {
  const int64_t packs = g.count / N;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       p < packs; p += stride)
    broadcastPack<N>(out, p, g, op, std::index_sequence_for<In...>{}, in...);
}

//===----------------------------------------------------------------------===//
// Launch helpers
//===----------------------------------------------------------------------===//

/// Elements per pack: 16 bytes of the widest operand.
template <typename Out, typename... In> constexpr int vectorWidth() {
  size_t widest = std::max({sizeof(Out), sizeof(In)...});
  return widest >= 16 ? 1 : static_cast<int>(16 / widest);
}

template <int N, typename T> bool packAligned(const T *p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * N) == 0;
}

template <typename Op, typename Out, typename... In>
cudaError_t launchFlat(cudaStream_t stream, Op op, Out *out, int64_t count,
                       const In *...in) {
  if (count <= 0)
    return cudaSuccess;
  constexpr int kVec = vectorWidth<Out, In...>();
  if (kVec > 1 && packAligned<kVec>(out) && (packAligned<kVec>(in) && ...)) {
    int64_t packs = std::max<int64_t>(count / kVec, 1);
    flatKernel<kVec><<<gridFor(packs, kThreads), kThreads, 0, stream>>>(
        out, count, op, in...);
  } else {
    flatKernel<1><<<gridFor(count, kThreads), kThreads, 0, stream>>>(out, count,
                                                                     op, in...);
  }
  return cudaGetLastError();
}

/// Strides reading a contiguous tensor of `shape` as broadcast to `target`
/// (trailing dimensions aligned; 0 along stretched and missing ones).
DeviceShape broadcastStrides(const DeviceShape &shape,
                             const DeviceShape &target) {
  DeviceShape strides;
  strides.rank = target.rank;
  int lead = target.rank - shape.rank;
  int64_t stride = 1;
  for (int d = shape.rank - 1; d >= 0; --d) {
    strides.dims[lead + d] =
        shape.dims[d] == target.dims[lead + d] ? stride : 0;
    stride *= shape.dims[d];
  }
  return strides;
}

/// Drops size-1 dimensions and merges neighbours every operand walks
/// contiguously; at least one dimension remains.
template <int K>
Geometry<K> collapse(const DeviceShape &shape,
                     const DeviceShape (&strides)[K]) {
  Geometry<K> g;
  int rank = 0;
  for (int d = 0; d < shape.rank; ++d) {
    int64_t extent = shape.dims[d];
    if (extent == 1)
      continue;
    bool merge = rank > 0;
    for (int j = 0; merge && j < K; ++j)
      merge = g.strides[j].dims[rank - 1] == strides[j].dims[d] * extent;
    if (merge) {
      g.shape.dims[rank - 1] *= extent;
      for (int j = 0; j < K; ++j)
        g.strides[j].dims[rank - 1] = strides[j].dims[d];
    } else {
      g.shape.dims[rank] = extent;
      for (int j = 0; j < K; ++j)
        g.strides[j].dims[rank] = strides[j].dims[d];
      ++rank;
    }
  }
  if (rank == 0) {
    g.shape.dims[0] = 1;
    for (int j = 0; j < K; ++j)
      g.strides[j].dims[0] = 0;
    rank = 1;
  }
  g.shape.rank = rank;
  for (int j = 0; j < K; ++j)
    g.strides[j].rank = rank;
  g.count = 1;
  for (int d = 0; d < rank; ++d)
    g.count *= g.shape.dims[d];
  g.smallIndex = g.count <= int64_t{UINT32_MAX};
  return g;
}

template <typename Op, typename Out, typename... In, size_t... J>
cudaError_t launchBroadcastImpl(const BroadcastOperands &operands,
                                cudaStream_t stream, Op op,
                                std::index_sequence<J...>) {
  constexpr int K = sizeof...(In);
  int64_t count = 1;
  for (int d = 0; d < operands.outShape.rank; ++d)
    count *= operands.outShape.dims[d];
  if (count <= 0)
    return cudaSuccess;
  Out *out = static_cast<Out *>(operands.output);
  std::tuple<const In *...> inputs{
      static_cast<const In *>(operands.inputs[J])...};
  const DeviceShape strides[K] = {
      broadcastStrides(operands.inShapes[J], operands.outShape)...};
  Geometry<K> g = collapse(operands.outShape, strides);
  bool flat = g.shape.rank == 1;
  for (int j = 0; j < K; ++j)
    flat &= g.strides[j].dims[0] == 1;
  if (flat)
    return launchFlat(stream, op, out, count, std::get<J>(inputs)...);

  constexpr int kVec = vectorWidth<Out, In...>();
  const int inner = g.shape.rank - 1;
  bool vectorized = kVec > 1 && g.shape.dims[inner] % kVec == 0 &&
                    packAligned<kVec>(out) &&
                    (packAligned<kVec>(std::get<J>(inputs)) && ...);
  for (int j = 0; j < K; ++j)
    vectorized &=
        g.strides[j].dims[inner] == 0 || g.strides[j].dims[inner] == 1;
  if (vectorized)
    broadcastKernel<kVec>
        <<<gridFor(count / kVec, kThreads), kThreads, 0, stream>>>(
            out, g, op, std::get<J>(inputs)...);
  else
    broadcastKernel<1><<<gridFor(count, kThreads), kThreads, 0, stream>>>(
        out, g, op, std::get<J>(inputs)...);
  return cudaGetLastError();
}

template <typename Op, typename Out, typename... In>
cudaError_t launchBroadcast(const BroadcastOperands &operands,
                            cudaStream_t stream, Op op) {
  return launchBroadcastImpl<Op, Out, In...>(operands, stream, op,
                                             std::index_sequence_for<In...>{});
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

template <typename T>
cudaError_t binaryFor(BinaryOp op, const BroadcastOperands &operands,
                      cudaStream_t stream) {
  switch (op) {
  case BinaryOp::kAdd:
    return launchBroadcast<BinaryFn<BinaryOp::kAdd, T>, T, T, T>(operands,
                                                                 stream, {});
  case BinaryOp::kSub:
    return launchBroadcast<BinaryFn<BinaryOp::kSub, T>, T, T, T>(operands,
                                                                 stream, {});
  case BinaryOp::kMul:
    return launchBroadcast<BinaryFn<BinaryOp::kMul, T>, T, T, T>(operands,
                                                                 stream, {});
  case BinaryOp::kMax:
    return launchBroadcast<BinaryFn<BinaryOp::kMax, T>, T, T, T>(operands,
                                                                 stream, {});
  case BinaryOp::kMin:
    return launchBroadcast<BinaryFn<BinaryOp::kMin, T>, T, T, T>(operands,
                                                                 stream, {});
  case BinaryOp::kDiv:
  case BinaryOp::kPow:
    // Float only: integer division by zero would trap.
    if constexpr (kIsFloat<T>) {
      if (op == BinaryOp::kDiv)
        return launchBroadcast<BinaryFn<BinaryOp::kDiv, T>, T, T, T>(
            operands, stream, {});
      return launchBroadcast<BinaryFn<BinaryOp::kPow, T>, T, T, T>(operands,
                                                                   stream, {});
    }
    break;
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t compareFor(CompareOp op, const BroadcastOperands &operands,
                       cudaStream_t stream) {
  switch (op) {
  case CompareOp::kEqual:
    return launchBroadcast<CompareFn<CompareOp::kEqual, T>, uint8_t, T, T>(
        operands, stream, {});
  case CompareOp::kLess:
    return launchBroadcast<CompareFn<CompareOp::kLess, T>, uint8_t, T, T>(
        operands, stream, {});
  case CompareOp::kGreater:
    return launchBroadcast<CompareFn<CompareOp::kGreater, T>, uint8_t, T, T>(
        operands, stream, {});
  }
  return cudaErrorInvalidValue;
}

/// Calls `body(T{})` with T the device storage type of any element type
/// (uint8_t for bool); false for unspecified.
template <typename Body> bool dispatchAny(ElementType type, Body &&body) {
  switch (type) {
  case ElementType::kI64:
    body(int64_t{});
    return true;
  case ElementType::kI32:
    body(int32_t{});
    return true;
  case ElementType::kI8:
    body(int8_t{});
    return true;
  case ElementType::kBool:
    body(uint8_t{});
    return true;
  default:
    return dispatchFloat(type, body);
  }
}

template <typename T>
cudaError_t unaryFor(UnaryOp op, const void *input, void *output, int64_t count,
                     cudaStream_t stream) {
  const T *in = static_cast<const T *>(input);
  T *out = static_cast<T *>(output);
  switch (op) {
#define ZCC_UNARY_CASE(kind)                                                   \
  case UnaryOp::kind:                                                          \
    return launchFlat(stream, UnaryFn<UnaryOp::kind, T>{}, out, count, in);
    ZCC_UNARY_CASE(kNeg)
    ZCC_UNARY_CASE(kExp)
    ZCC_UNARY_CASE(kSqrt)
    ZCC_UNARY_CASE(kTanh)
    ZCC_UNARY_CASE(kRelu)
    ZCC_UNARY_CASE(kSigmoid)
    ZCC_UNARY_CASE(kLog)
    ZCC_UNARY_CASE(kErf)
    ZCC_UNARY_CASE(kReciprocal)
    ZCC_UNARY_CASE(kGeluErf)
    ZCC_UNARY_CASE(kGeluTanh)
#undef ZCC_UNARY_CASE
  }
  return cudaErrorInvalidValue;
}

} // namespace

cudaError_t launchBinary(BinaryOp op, ElementType type,
                         const BroadcastOperands &operands,
                         cudaStream_t stream) {
  switch (type) {
  case ElementType::kI64:
    return binaryFor<int64_t>(op, operands, stream);
  case ElementType::kI32:
    return binaryFor<int32_t>(op, operands, stream);
  default:
    break;
  }
  cudaError_t result = cudaErrorInvalidValue;
  dispatchFloat(type, [&](auto tag) {
    result = binaryFor<decltype(tag)>(op, operands, stream);
  });
  return result;
}

cudaError_t launchCompare(CompareOp op, ElementType type,
                          const BroadcastOperands &operands,
                          cudaStream_t stream) {
  if (type == ElementType::kBool)
    return compareFor<BoolByte>(op, operands, stream);
  cudaError_t result = cudaErrorInvalidValue;
  dispatchAny(type, [&](auto tag) {
    result = compareFor<decltype(tag)>(op, operands, stream);
  });
  return result;
}

cudaError_t launchWhere(int elementBytes, const BroadcastOperands &operands,
                        cudaStream_t stream) {
  switch (elementBytes) {
  case 1:
    return launchBroadcast<SelectFn<uint8_t>, uint8_t, uint8_t, uint8_t,
                           uint8_t>(operands, stream, {});
  case 2:
    return launchBroadcast<SelectFn<uint16_t>, uint16_t, uint8_t, uint16_t,
                           uint16_t>(operands, stream, {});
  case 4:
    return launchBroadcast<SelectFn<uint32_t>, uint32_t, uint8_t, uint32_t,
                           uint32_t>(operands, stream, {});
  case 8:
    return launchBroadcast<SelectFn<uint64_t>, uint64_t, uint8_t, uint64_t,
                           uint64_t>(operands, stream, {});
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t launchCast(ElementType from, ElementType to, const void *input,
                       void *output, int64_t count, cudaStream_t stream) {
  cudaError_t result = cudaErrorInvalidValue;
  dispatchAny(from, [&](auto fromTag) {
    using From = decltype(fromTag);
    dispatchAny(to, [&](auto toTag) {
      using To = decltype(toTag);
      if constexpr (!std::is_same_v<From, To>)
        result =
            launchFlat(stream, CastFn<To, From>{}, static_cast<To *>(output),
                       count, static_cast<const From *>(input));
    });
  });
  return result;
}

cudaError_t launchIsNan(ElementType type, const void *input, void *output,
                        int64_t count, cudaStream_t stream) {
  cudaError_t result = cudaErrorInvalidValue;
  dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    result = launchFlat(stream, IsNanFn<T>{}, static_cast<uint8_t *>(output),
                        count, static_cast<const T *>(input));
  });
  return result;
}

cudaError_t launchUnary(UnaryOp op, ElementType type, const void *input,
                        void *output, int64_t count, cudaStream_t stream) {
  cudaError_t result = cudaErrorInvalidValue;
  dispatchFloat(type, [&](auto tag) {
    result = unaryFor<decltype(tag)>(op, input, output, count, stream);
  });
  return result;
}

cudaError_t launchGeluGrad(bool tanhForm, ElementType type, const void *input,
                           const void *grad, void *result, int64_t count,
                           cudaStream_t stream) {
  cudaError_t error = cudaErrorInvalidValue;
  dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    const T *x = static_cast<const T *>(input);
    const T *dy = static_cast<const T *>(grad);
    T *dx = static_cast<T *>(result);
    if (tanhForm)
      error = launchFlat(stream, GeluGradFn<true, T>{}, dx, count, x, dy);
    else
      error = launchFlat(stream, GeluGradFn<false, T>{}, dx, count, x, dy);
  });
  return error;
}

namespace {

/// The cpu's dropout: the same draw and the same product in Acc<T>.
template <typename T>
__global__ void dropoutKernel(const T *input, const int64_t *state, uint64_t key,
                              int64_t sampleElements, uint32_t threshold, Acc<T> scale, T *output,
                              int64_t count) {
  const uint64_t stream = dropout::stream(static_cast<uint64_t>(state[0]), key);
  const uint64_t first =
      static_cast<uint64_t>(state[1]) * static_cast<uint64_t>(sampleElements);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    Acc<T> value = dropout::keep(stream, first + static_cast<uint64_t>(i), threshold)
                       ? widen(input[i]) * scale
                       : Acc<T>(0);
    output[i] = narrow<T>(value);
  }
}

} // namespace

cudaError_t launchDropout(ElementType type, const void *input, const int64_t *state,
                          uint64_t key, int64_t sampleElements, double ratio, void *output,
                          int64_t count, cudaStream_t stream) {
  if (count <= 0)
    return cudaSuccess;
  cudaError_t error = cudaErrorInvalidValue;
  const uint32_t threshold = dropout::threshold(ratio);
  dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    const Acc<T> scale = static_cast<Acc<T>>(1.0 / (1.0 - ratio));
    dropoutKernel<T><<<gridFor(count, kThreads), kThreads, 0, stream>>>(
        static_cast<const T *>(input), state, key, sampleElements, threshold, scale,
        static_cast<T *>(output), count);
    error = cudaGetLastError();
  });
  return error;
}

} // namespace zcc::cuda
