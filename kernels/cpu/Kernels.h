//===- Kernels.h - The cpu kernels, one function each -----------*- C++ -*-===//
//
// Internal: the registry in CpuKernels.cpp maps op names to these; everything
// else reaches them through findKernel().
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CPU_KERNELS_H
#define ZCC_KERNELS_CPU_KERNELS_H

#include "kernels/cpu/CpuKernels.h"

namespace zcc::cpu::kernels {

// Elementwise.cpp
Status add(const KernelArgs &args);
Status sub(const KernelArgs &args);
Status mul(const KernelArgs &args);
Status div(const KernelArgs &args);
Status pow(const KernelArgs &args);
Status max(const KernelArgs &args);
Status min(const KernelArgs &args);
Status equal(const KernelArgs &args);
Status less(const KernelArgs &args);
Status greater(const KernelArgs &args);
Status where(const KernelArgs &args);
Status cast(const KernelArgs &args);
/// `n` elements of type `from` at `in` converted to `to` at `out`, bit for
/// bit as `cast` converts them (no checks); false for a type `cast` does
/// not take.
bool castElements(const void *in, plan::DType from, void *out, plan::DType to, int64_t n);
Status isNan(const KernelArgs &args);
Status neg(const KernelArgs &args);
Status exp(const KernelArgs &args);
Status sqrt(const KernelArgs &args);
Status tanh(const KernelArgs &args);
Status relu(const KernelArgs &args);
Status sigmoid(const KernelArgs &args);
Status log(const KernelArgs &args);
Status erf(const KernelArgs &args);
Status reciprocal(const KernelArgs &args);
Status gelu(const KernelArgs &args);
/// Inverted dropout keyed by sample (DropoutMask.h).
Status dropout(const KernelArgs &args);

// Linalg.cpp
Status matmul(const KernelArgs &args);
Status attention(const KernelArgs &args);
Status qkvAttention(const KernelArgs &args);

// Normalize.cpp
Status softmax(const KernelArgs &args);
Status logSoftmax(const KernelArgs &args);
Status layerNorm(const KernelArgs &args);

// Reduce.cpp
Status reduceSum(const KernelArgs &args);
Status reduceMean(const KernelArgs &args);
Status reduceMax(const KernelArgs &args);

// Shape.cpp
Status copy(const KernelArgs &args);
Status reshape(const KernelArgs &args);
Status transpose(const KernelArgs &args);
Status concat(const KernelArgs &args);
Status slice(const KernelArgs &args);
Status gather(const KernelArgs &args);
Status broadcast(const KernelArgs &args);
Status trilu(const KernelArgs &args);

// Loss.cpp
Status mseLoss(const KernelArgs &args);
Status crossEntropy(const KernelArgs &args);
Status nllLoss(const KernelArgs &args);

// Grad.cpp
Status softmaxGrad(const KernelArgs &args);
Status logSoftmaxGrad(const KernelArgs &args);
Status layerNormGrad(const KernelArgs &args);
Status attentionGrad(const KernelArgs &args);
Status qkvAttentionGrad(const KernelArgs &args);
Status crossEntropyGrad(const KernelArgs &args);
Status nllLossGrad(const KernelArgs &args);
Status mseLossGrad(const KernelArgs &args);
Status gatherGrad(const KernelArgs &args);
Status sliceGrad(const KernelArgs &args);
Status geluGrad(const KernelArgs &args);

// Optimizer.cpp
Status accumulate(const KernelArgs &args);
// Linalg.cpp: target += lhs @ rhs.
Status accumulateMatmul(const KernelArgs &args);
Status fill(const KernelArgs &args);
/// The sum of squares of every element of the inputs, as f64, added in a
/// fixed order: each input's blocks of kSumSquaresBlock elements (their
/// sums in order), then the inputs in order.
Status sumSquares(const KernelArgs &args);
/// The blocks' sums themselves, one f64 per block of each input in order:
/// a pool of threads runs it on runs of blocks, and adding its results in
/// order gives sum_squares bit for bit.
Status sumSquaresBlocks(const KernelArgs &args);
constexpr int64_t kSumSquaresBlock = 1 << 14;
/// How many blocks an input of `elements` elements has.
int64_t sumSquaresBlocks(int64_t elements);
Status adamw(const KernelArgs &args);
Status adagrad(const KernelArgs &args);
Status lambMoments(const KernelArgs &args);
Status lambStep(const KernelArgs &args);
Status lion(const KernelArgs &args);
Status sgd(const KernelArgs &args);

} // namespace zcc::cpu::kernels

#endif // ZCC_KERNELS_CPU_KERNELS_H
