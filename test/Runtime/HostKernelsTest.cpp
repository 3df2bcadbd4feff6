//===- HostKernelsTest.cpp - Host kernels on a pool of threads ------------===//
//
// The host optimizer of a plan with CPU offload is split over threads; the
// split must not change a single bit of the result, and must cover every
// element exactly once.
//
//===----------------------------------------------------------------------===//

#include "runtime/HostKernels.h"

#include "kernels/cpu/Kernels.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>

namespace zcc {
namespace {

cpu::TensorView view(std::vector<float> &data) {
  cpu::TensorView v;
  v.data = data.data();
  v.dtype = plan::F32;
  v.shape = {static_cast<int64_t>(data.size())};
  return v;
}

/// One Adam step of `n` elements on `threads` threads: the updated
/// parameter, moments and all. With `bf16Gradient`, the gradient is given
/// in bf16 (its values' upper halves), as an offloaded mixed-precision one.
std::vector<float> adamStep(int64_t n, int threads, bool bf16Gradient = false) {
  std::mt19937 random(11);
  std::normal_distribution<float> normal;
  std::vector<float> param(n), grad(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {
    param[i] = normal(random);
    grad[i] = normal(random);
    m[i] = 0.1f * normal(random);
    v[i] = std::abs(normal(random));
  }
  cpu::TensorView scalars;
  std::vector<double> values = {1e-3, 0.9, 0.999, 1e-8, 0.01, 3, 0.5, 0};
  scalars.data = values.data();
  scalars.dtype = plan::F64;
  scalars.shape = {8};
  cpu::KernelArgs args;
  std::vector<uint16_t> half(n);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &grad[i], sizeof(bits));
    half[i] = static_cast<uint16_t>(bits >> 16);
  }
  cpu::TensorView gradient = view(grad);
  if (bf16Gradient) {
    gradient.data = half.data();
    gradient.dtype = plan::BF16;
  }
  args.inputs = {view(param), gradient, view(m), view(v), scalars};
  args.outputs = {view(param), view(m), view(v)};
  cpu::KernelFn adamw = cpu::findKernel("adamw");
  StatusOr<std::unique_ptr<HostKernelPool>> created = HostKernelPool::create(threads);
  EXPECT_TRUE(created.isOk()) << created.status().message();
  if (!created.isOk())
    return {};
  HostKernelPool &pool = **created;
  std::vector<cpu::KernelArgs> chunks = splitElementwise("adamw", args, pool.threads(), 1000);
  Status status = chunks.empty() ? adamw(args) : pool.run(adamw, chunks);
  EXPECT_TRUE(status.isOk()) << status.message();
  std::vector<float> out(param);
  out.insert(out.end(), m.begin(), m.end());
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

TEST(HostKernels, ThreadsDoNotChangeAnyBit) {
  // An odd size, so the last chunk is short; an f32 and a bf16 gradient
  // (each chunk widens its own part).
  for (bool bf16 : {false, true}) {
    std::vector<float> one = adamStep(100003, 1, bf16);
    for (int threads : {2, 3, 8}) {
      std::vector<float> many = adamStep(100003, threads, bf16);
      ASSERT_EQ(one.size(), many.size());
      EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0)
          << threads << " threads" << (bf16 ? ", bf16 gradient" : "");
    }
  }
  // The gradient's bf16 rounding shows in the step: the bf16 one is read.
  EXPECT_NE(adamStep(1000, 1, true), adamStep(1000, 1, false));
}

TEST(HostKernels, ChunksCoverEveryElementOnce) {
  std::vector<float> a(5000), b(5000);
  cpu::KernelArgs args;
  args.inputs = {view(a)};
  args.outputs = {view(b)};
  std::vector<cpu::KernelArgs> chunks = splitElementwise("cast", args, 3, 100);
  ASSERT_EQ(chunks.size(), 3u);
  int64_t next = 0;
  for (const cpu::KernelArgs &chunk : chunks) {
    EXPECT_EQ(chunk.inputs[0].data, a.data() + next);
    EXPECT_EQ(chunk.outputs[0].data, b.data() + next);
    EXPECT_EQ(chunk.inputs[0].numElements(), chunk.outputs[0].numElements());
    EXPECT_EQ(next % 16, 0) << "chunks start on cache lines";
    next += chunk.outputs[0].numElements();
  }
  EXPECT_EQ(next, 5000);
  // Too small to split, one thread, or not element-wise: run whole.
  EXPECT_TRUE(splitElementwise("cast", args, 3, 5000).empty());
  EXPECT_TRUE(splitElementwise("cast", args, 1, 100).empty());
  EXPECT_TRUE(splitElementwise("matmul", args, 3, 100).empty());
}

TEST(HostKernels, PoolReportsAChunksFailure) {
  cpu::KernelArgs args;
  std::vector<float> a(4000), b(3000);
  args.inputs = {view(a)};
  args.outputs = {view(b)};
  // Split by the output's 3000 elements: the 4000-element input is passed
  // whole to every chunk, and cast refuses the shape mismatch.
  std::vector<cpu::KernelArgs> chunks = splitElementwise("cast", args, 2, 100);
  ASSERT_EQ(chunks.size(), 2u);
  StatusOr<std::unique_ptr<HostKernelPool>> created = HostKernelPool::create(2);
  ASSERT_TRUE(created.isOk()) << created.status().message();
  HostKernelPool &pool = **created;
  Status status = pool.run(cpu::findKernel("cast"), chunks);
  EXPECT_FALSE(status.isOk());
  // The pool keeps working after a failure.
  std::vector<float> c(3000);
  args.inputs = {view(c)};
  chunks = splitElementwise("cast", args, 2, 100);
  EXPECT_TRUE(pool.run(cpu::findKernel("cast"), chunks).isOk());
}

/// The gradient norm's sum of squares over inputs of awkward sizes (a short
/// last block, one shorter than a block, several blocks), run whole and
/// split over `threads` threads whose per-block sums are added in order.
TEST(HostKernels, SumSquaresOnThreadsMatchesTheKernelBitForBit) {
  namespace kernels = cpu::kernels;
  std::mt19937 random(5);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> data;
  for (int64_t n : {int64_t{100003}, int64_t{5}, 3 * kernels::kSumSquaresBlock, int64_t{70001}}) {
    std::vector<float> values(n);
    float scale = std::ldexp(1.0f, static_cast<int>(data.size()) * 7 - 10);
    for (float &value : values)
      value = scale * normal(random);
    data.push_back(std::move(values));
  }
  cpu::KernelArgs args;
  long double exact = 0;
  int64_t blocks = 0;
  for (std::vector<float> &values : data) {
    args.inputs.push_back(view(values));
    blocks += kernels::sumSquaresBlocks(static_cast<int64_t>(values.size()));
    for (float value : values)
      exact += static_cast<long double>(value) * value;
  }
  double whole = 0;
  cpu::TensorView result;
  result.data = &whole;
  result.dtype = plan::F64;
  args.outputs = {result};
  ASSERT_TRUE(kernels::sumSquares(args).isOk());
  EXPECT_NEAR(whole, static_cast<double>(exact), 1e-12 * static_cast<double>(exact));

  for (int threads : {2, 3, 8}) {
    std::vector<double> partials(static_cast<size_t>(blocks), -1.0);
    std::vector<cpu::KernelArgs> chunks = splitSumSquares(args, threads, partials.data());
    ASSERT_EQ(chunks.size(), static_cast<size_t>(threads)) << threads << " threads";
    StatusOr<std::unique_ptr<HostKernelPool>> pool = HostKernelPool::create(threads);
    ASSERT_TRUE(pool.isOk()) << pool.status().message();
    ASSERT_TRUE((*pool)->run(kernels::sumSquaresBlocks, chunks).isOk());
    double sum = 0;
    for (double partial : partials) {
      EXPECT_GE(partial, 0.0) << "every block's sum is written";
      sum += partial;
    }
    EXPECT_EQ(std::memcmp(&sum, &whole, sizeof(double)), 0)
        << threads << " threads: " << sum << " vs " << whole;
  }
  // One thread, or a single block: run whole.
  std::vector<double> partials(static_cast<size_t>(blocks));
  EXPECT_TRUE(splitSumSquares(args, 1, partials.data()).empty());
}

} // namespace
} // namespace zcc
