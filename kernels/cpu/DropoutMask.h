//===- DropoutMask.h - Which elements a dropout keeps -----------*- C++ -*-===//
//
// The mask of the dropout kernel, one function for the cpu and the cuda
// backends, so that both drop the same elements bit for bit. Element
// `counter` of stream (seed, key) is SplitMix64's output at that position
// of a generator seeded from the pair: a counter-based draw that needs no
// state, so a recomputation and the backward pass draw the forward pass's
// mask again. It is kept when the draw's upper 32 bits reach `threshold`,
// ratio * 2^32: dropped with probability ratio.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CPU_DROPOUTMASK_H
#define ZCC_KERNELS_CPU_DROPOUTMASK_H

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define ZCC_DROPOUT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ZCC_DROPOUT_HOST_DEVICE inline
#endif

namespace zcc::dropout {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

/// SplitMix64's output function.
ZCC_DROPOUT_HOST_DEVICE uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The generator state of dropout `key` in a run seeded with `seed`.
ZCC_DROPOUT_HOST_DEVICE uint64_t stream(uint64_t seed, uint64_t key) {
  return mix(mix(seed + kGamma) ^ key);
}

/// Whether element `counter` of `stream` is kept.
ZCC_DROPOUT_HOST_DEVICE bool keep(uint64_t stream, uint64_t counter, uint32_t threshold) {
  return static_cast<uint32_t>(mix(stream + (counter + 1) * kGamma) >> 32) >= threshold;
}

/// ratio * 2^32, rounded: the draws below it are dropped. ratio is in (0, 1).
inline uint32_t threshold(double ratio) {
  double scaled = std::nearbyint(ratio * 4294967296.0);
  return scaled >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(scaled);
}

} // namespace zcc::dropout

#endif // ZCC_KERNELS_CPU_DROPOUTMASK_H
