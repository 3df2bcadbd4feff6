//===- Upload16.h - 16-bit operands for the cuda benchmarks -----*- C++ -*-===//
//
// The benchmark programs fill their operands on the host from a value
// generator, round them to bf16 or f16 and copy them into fresh device
// memory.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_BENCH_UPLOAD16_H
#define ZCC_BENCH_UPLOAD16_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace zcc::bench {

/// `count` values of `next()` as bf16 (or f16) in new device memory at
/// `*device`; the first CUDA error, or cudaSuccess.
template <typename Next>
cudaError_t upload16(size_t count, bool bf16, Next &&next, void **device) {
  std::vector<uint16_t> host(count);
  for (uint16_t &x : host) {
    float v = next();
    if (bf16) {
      __nv_bfloat16 b = __float2bfloat16(v);
      std::memcpy(&x, &b, 2);
    } else {
      __half h = __float2half(v);
      std::memcpy(&x, &h, 2);
    }
  }
  cudaError_t error = cudaMalloc(device, count * 2);
  if (error == cudaSuccess)
    error = cudaMemcpy(*device, host.data(), count * 2, cudaMemcpyHostToDevice);
  return error;
}

} // namespace zcc::bench

#endif // ZCC_BENCH_UPLOAD16_H
