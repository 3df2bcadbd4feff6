//===- CudaKernelsLinalgTest.cpp - Products, attention, optimizers --------===//
//
// The cuda matmul (cuBLASLt), attention and attention_grad (flash-attention
// style kernels) and the optimizer kernels against their cpu references
// (CudaConformance.h), for every dtype each takes, with shapes that leave
// partial tiles and blocks, and the argument errors both must refuse alike.
//
//===----------------------------------------------------------------------===//

#include "test/Runtime/CudaConformance.h"

#include "kernels/cuda/CudnnAttention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace zcc::test {
namespace {

using plan::DType;

constexpr DType kFloatTypes[] = {plan::F32, plan::F64, plan::F16, plan::BF16};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The tolerance of a result computed in `dtype` with short sums.
double toleranceFor(DType dtype) {
  switch (dtype) {
  case plan::F64:
    return 1e-12;
  case plan::F32:
    return 1e-5;
  default:
    return 1e-2;
  }
}

Tensor randomTensor(DType dtype, const std::vector<int64_t> &shape,
                    uint32_t seed, double lo = -1, double hi = 1) {
  return encode(dtype, shape, randomValues(countOf(shape), seed, lo, hi));
}

std::string describe(DType dtype, const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b) {
  auto text = [](const std::vector<int64_t> &shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
      s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  };
  return std::string(cpu::dtypeName(dtype)) + " " + text(a) + " x " + text(b);
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

/// numpy.matmul's result shape of lhs x rhs (both valid).
std::vector<int64_t> matmulShape(const std::vector<int64_t> &lhs,
                                 const std::vector<int64_t> &rhs) {
  std::vector<int64_t> lhsBatch(lhs.begin(),
                                lhs.end() - (lhs.size() == 1 ? 1 : 2));
  std::vector<int64_t> rhsBatch(rhs.begin(),
                                rhs.end() - (rhs.size() == 1 ? 1 : 2));
  size_t rank = std::max(lhsBatch.size(), rhsBatch.size());
  std::vector<int64_t> shape(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    size_t fromEnd = rank - d;
    int64_t a =
        fromEnd <= lhsBatch.size() ? lhsBatch[lhsBatch.size() - fromEnd] : 1;
    int64_t b =
        fromEnd <= rhsBatch.size() ? rhsBatch[rhsBatch.size() - fromEnd] : 1;
    shape[d] = a == 1 ? b : a;
  }
  if (lhs.size() > 1)
    shape.push_back(lhs[lhs.size() - 2]);
  if (rhs.size() > 1)
    shape.push_back(rhs.back());
  return shape;
}

void expectMatmulMatches(DType dtype, const std::vector<int64_t> &lhs,
                         const std::vector<int64_t> &rhs, double tolerance,
                         uint32_t seed) {
  SCOPED_TRACE(describe(dtype, lhs, rhs));
  Call call("matmul");
  call.in(randomTensor(dtype, lhs, seed))
      .in(randomTensor(dtype, rhs, seed + 1))
      .out(dtype, matmulShape(lhs, rhs));
  expectCudaMatchesCpu(call, tolerance);
}

// Every shape numpy.matmul takes: plain, rank-1 on either side, equal
// batches (one strided batch), a shared rhs (folded into rows), a shared
// lhs (batch stride 0), and batches that broadcast on both sides (one
// strided batch per outer slice); sizes off every tile size.
TEST(CudaKernelsLinalg, MatmulShapes) {
  ZCC_REQUIRE_GPU();
  const std::vector<std::vector<int64_t>> shapes[] = {
      {{37, 53}, {53, 29}},
      {{1, 1}, {1, 1}},
      {{53}, {53, 29}},
      {{37, 53}, {53}},
      {{53}, {53}},
      {{53}, {4, 53, 29}},
      {{4, 37, 53}, {53}},
      {{4, 37, 53}, {4, 53, 29}},
      {{2, 3, 37, 53}, {53, 29}},
      {{37, 53}, {3, 53, 29}},
      {{3, 1, 37, 53}, {5, 53, 29}},
      {{1, 37, 53}, {6, 53, 29}},
      {{2, 1, 3, 7, 9}, {4, 1, 9, 5}},
      {{2, 3, 1, 7, 9}, {3, 4, 9, 5}},
      {{5, 1, 16}, {5, 16, 1}},
  };
  uint32_t seed = 100;
  for (DType dtype : kFloatTypes)
    for (const auto &pair : shapes)
      expectMatmulMatches(dtype, pair[0], pair[1], toleranceFor(dtype),
                          seed += 2);
}

// 16-bit operands with an f32 result (the widened product: cuBLASLt's f32
// D), on every batch path, and an empty contraction (zeros).
TEST(CudaKernelsLinalg, MatmulWidened) {
  ZCC_REQUIRE_GPU();
  const std::vector<std::vector<int64_t>> shapes[] = {
      {{37, 53}, {53, 29}},        {{2, 3, 37, 53}, {53, 29}}, {{4, 37, 53}, {4, 53, 29}},
      {{3, 1, 37, 53}, {5, 53, 29}}, {{2, 64, 768}, {768, 96}}, {{4, 5, 0}, {0, 7}},
  };
  uint32_t seed = 1600;
  for (DType dtype : {plan::F16, plan::BF16})
    for (const auto &pair : shapes) {
      SCOPED_TRACE(describe(dtype, pair[0], pair[1]) + " -> f32");
      seed += 2;
      Call call("matmul");
      call.in(randomTensor(dtype, pair[0], seed))
          .in(randomTensor(dtype, pair[1], seed + 1))
          .out(plan::F32, matmulShape(pair[0], pair[1]));
      expectCudaMatchesCpu(call, 1e-4);
    }
}

// Products large enough for cuBLASLt's tiled (and split) algorithms; the
// longer contraction gets the long-sum tolerance.
TEST(CudaKernelsLinalg, MatmulLarge) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 300;
  for (DType dtype : kFloatTypes) {
    double tolerance = dtype == plan::F32 ? 1e-4 : toleranceFor(dtype);
    expectMatmulMatches(dtype, {2, 130, 257}, {257, 190}, tolerance, seed += 2);
    expectMatmulMatches(dtype, {3, 64, 768}, {3, 768, 96}, tolerance,
                        seed += 2);
    expectMatmulMatches(dtype, {4, 1000}, {1000, 3}, tolerance, seed += 2);
  }
}

// An empty contraction is all zeros; empty batches and rows write nothing.
TEST(CudaKernelsLinalg, MatmulEmpty) {
  ZCC_REQUIRE_GPU();
  for (DType dtype : kFloatTypes) {
    expectMatmulMatches(dtype, {3, 0}, {0, 4}, 0, 500);
    expectMatmulMatches(dtype, {2, 3, 0}, {0, 4}, 0, 502);
    expectMatmulMatches(dtype, {0, 3, 4}, {4, 5}, 0, 504);
    expectMatmulMatches(dtype, {0, 4}, {4, 5}, 0, 506);
  }
}

TEST(CudaKernelsLinalg, MatmulRefusesLikeCpu) {
  ZCC_REQUIRE_GPU();
  auto call = [](Tensor lhs, Tensor rhs, DType resultType,
                 std::vector<int64_t> resultShape) {
    Call c("matmul");
    c.in(std::move(lhs)).in(std::move(rhs)).out(resultType, resultShape);
    return c;
  };
  // Rank 0.
  expectCudaRefusesLikeCpu(call(randomTensor(plan::F32, {}, 1),
                                randomTensor(plan::F32, {3}, 2), plan::F32,
                                {}));
  // Contractions differ.
  expectCudaRefusesLikeCpu(call(randomTensor(plan::F32, {2, 3}, 1),
                                randomTensor(plan::F32, {4, 5}, 2), plan::F32,
                                {2, 5}));
  // Batches that do not broadcast.
  expectCudaRefusesLikeCpu(call(randomTensor(plan::F32, {2, 2, 3}, 1),
                                randomTensor(plan::F32, {3, 3, 5}, 2),
                                plan::F32, {2, 2, 5}));
  // The wrong result shape, and the wrong result type.
  expectCudaRefusesLikeCpu(call(randomTensor(plan::F32, {2, 3}, 1),
                                randomTensor(plan::F32, {3, 5}, 2), plan::F32,
                                {5, 2}));
  expectCudaRefusesLikeCpu(call(randomTensor(plan::F32, {2, 3}, 1),
                                randomTensor(plan::F32, {3, 5}, 2), plan::F64,
                                {2, 5}));
  // Mixed and integer operands.
  expectCudaRefusesLikeCpu(call(randomTensor(plan::F32, {2, 3}, 1),
                                randomTensor(plan::F16, {3, 5}, 2), plan::F32,
                                {2, 5}));
  expectCudaRefusesLikeCpu(call(i64({2, 2}, {1, 2, 3, 4}),
                                i64({2, 2}, {1, 2, 3, 4}), plan::I64, {2, 2}));
}

/// A matmul with operands as stored (transposed where the flags say), a
/// bias of `bias` elements (none for 0), an addend of the result's shape
/// (`residual`), GELU's tanh form, and the given result shape.
struct FusedMatmul {
  std::vector<int64_t> lhs, rhs, result;
  bool transposeLhs = false, transposeRhs = false;
  int64_t bias = 0;
  bool addend = false, gelu = false, geluGrad = false;
  /// The second output: the sum before the GELU, or the bias gradient.
  bool aux = false;
};

Call fusedMatmulCall(DType dtype, const FusedMatmul &c, uint32_t seed) {
  Call call("matmul");
  call.in(randomTensor(dtype, c.lhs, seed))
      .in(randomTensor(dtype, c.rhs, seed + 1));
  if (c.bias > 0)
    call.in(randomTensor(dtype, {c.bias}, seed + 2));
  if (c.addend)
    call.in(randomTensor(dtype, c.result, seed + 3)).boolAttr("residual", true);
  if (c.gelu)
    call.stringAttr("activation", "gelu_tanh");
  if (c.geluGrad)
    call.in(randomTensor(dtype, c.result, seed + 4, -3, 3))
        .stringAttr("activation", "gelu_tanh_grad");
  if (c.transposeLhs)
    call.boolAttr("transpose_lhs", true);
  if (c.transposeRhs)
    call.boolAttr("transpose_rhs", true);
  call.out(dtype, c.result);
  if (c.aux && c.gelu)
    call.out(dtype, c.result);
  if (c.aux && c.geluGrad)
    call.out(dtype, {c.result.back()});
  return call;
}

std::string describe(DType dtype, const FusedMatmul &c) {
  return describe(dtype, c.lhs, c.rhs) + (c.transposeLhs ? " lhs^T" : "") +
         (c.transposeRhs ? " rhs^T" : "") +
         (c.bias > 0 ? " + bias " + std::to_string(c.bias) : "") +
         (c.addend ? " + addend" : "") + (c.gelu ? " then gelu_tanh" : "") +
         (c.geluGrad ? " times gelu_tanh'" : "") + (c.aux ? " with aux" : "");
}

// Transposes (cuBLASLt's TRANSA for rhs, TRANSB for lhs) and the bias
// epilogue against the cpu, with sizes off every tile size and of 16:
// plain products, equal batches (one strided batch, one bias for all), a
// shared rhs (folded into rows unless lhs is transposed), a shared lhs,
// batches broadcast on both sides (one strided batch per outer slice), and
// rank-1 operands beside a transposed one.
TEST(CudaKernelsLinalg, MatmulTransposesAndBias) {
  ZCC_REQUIRE_GPU();
  const FusedMatmul cases[] = {
      {{37, 53}, {53, 29}, {37, 29}, false, false, 29},
      {{53, 37}, {53, 29}, {37, 29}, true, false, 0},
      {{37, 53}, {29, 53}, {37, 29}, false, true, 0},
      {{53, 37}, {29, 53}, {37, 29}, true, true, 0},
      {{53, 37}, {53, 29}, {37, 29}, true, false, 29},
      {{37, 53}, {29, 53}, {37, 29}, false, true, 29},
      {{53, 37}, {29, 53}, {37, 29}, true, true, 29},
      {{4, 53, 37}, {4, 29, 53}, {4, 37, 29}, true, true, 29},
      {{4, 37, 53}, {4, 53, 29}, {4, 37, 29}, false, false, 29},
      {{2, 3, 53, 37}, {53, 29}, {2, 3, 37, 29}, true, false, 29},
      {{2, 3, 37, 53}, {29, 53}, {2, 3, 37, 29}, false, true, 29},
      {{53, 37}, {3, 29, 53}, {3, 37, 29}, true, true, 29},
      {{3, 1, 53, 37}, {5, 53, 29}, {3, 5, 37, 29}, true, false, 29},
      {{2, 1, 3, 9, 7}, {4, 1, 5, 9}, {2, 4, 3, 7, 5}, true, true, 5},
      {{53}, {29, 53}, {29}, false, true, 29},
      {{53}, {4, 29, 53}, {4, 29}, false, true, 29},
      {{53, 37}, {53}, {37}, true, false, 1},
      {{1, 1}, {1, 1}, {1, 1}, true, true, 1},
  };
  uint32_t seed = 700;
  for (DType dtype : kFloatTypes)
    for (const FusedMatmul &c : cases) {
      SCOPED_TRACE(describe(dtype, c));
      expectCudaMatchesCpu(fusedMatmulCall(dtype, c, seed += 3),
                           toleranceFor(dtype));
    }
}

// The epilogue beyond the bias: the addend as cuBLASLt's C (beta = 1, C
// apart from D), GELU's tanh form (the GELU and GELU_BIAS epilogues), both,
// and GELU's derivative (DGELU, the GELU input as its aux matrix; outer
// slices take the gelu_grad launch), on one product, a folded batch, a
// strided batch and outer slices (the addend's offsets follow the
// result's), sizes off the tiles and the large shapes of gpt2-xl's MLP.
// f32 and f64 take the element-wise GELU launches (cuBLASLt's f64 GELU
// measured ~3e-10 off), so they are held to the plain products'
// tolerances; f32's contractions over 6400 to 5e-4 (partial sums
// ~80 in another order). 16-bit results to 2e-2: one bf16 ulp of 2 (GELU's
// and its derivative's values) and of the long contractions' sums (up to
// ~30, relative) besides the rounding either side of a boundary. The worst
// error of each is printed for the record.
TEST(CudaKernelsLinalg, MatmulAddendAndGelu) {
  ZCC_REQUIRE_GPU();
  const FusedMatmul cases[] = {
      {{37, 53}, {53, 29}, {37, 29}, false, false, 0, true, false},
      {{37, 53}, {53, 29}, {37, 29}, false, false, 29, true, false},
      {{37, 53}, {29, 53}, {37, 29}, false, true, 0, false, true},
      {{53, 37}, {53, 29}, {37, 29}, true, false, 29, false, true},
      {{4, 37, 53}, {53, 29}, {4, 37, 29}, false, false, 29, true, false},
      {{4, 53, 37}, {4, 29, 53}, {4, 37, 29}, true, true, 29, true, false},
      {{3, 1, 53, 37}, {5, 53, 29}, {3, 5, 37, 29}, true, false, 0, true, false},
      {{4, 37, 53}, {53, 29}, {4, 37, 29}, false, false, 29, false, true},
      {{2, 3, 37, 53}, {29, 53}, {2, 3, 37, 29}, false, true, 29, false, true},
      {{256, 1600}, {1600, 6400}, {256, 6400}, false, false, 6400, false, true},
      {{256, 6400}, {6400, 1600}, {256, 1600}, false, false, 1600, true, false},
      {{0, 3}, {4, 0}, {3, 4}, true, true, 4, true, false},
      {{2, 3, 0}, {0, 5}, {2, 3, 5}, false, false, 5, false, true},
      {{37, 53}, {29, 53}, {37, 29}, false, true, 0, false, false, true},
      {{4, 37, 53}, {4, 53, 29}, {4, 37, 29}, false, false, 0, false, false, true},
      {{3, 1, 53, 37}, {5, 53, 29}, {3, 5, 37, 29}, true, false, 0, false, false, true},
      {{256, 1600}, {6400, 1600}, {256, 6400}, false, true, 0, false, false, true},
      {{2, 0, 3}, {0, 2}, {2, 3, 2}, true, false, 0, false, false, true},
  };
  uint32_t seed = 1700;
  for (DType dtype : kFloatTypes)
    for (const FusedMatmul &c : cases) {
      SCOPED_TRACE(describe(dtype, c));
      Call call = fusedMatmulCall(dtype, c, seed += 4);
      double tolerance = toleranceFor(dtype);
      bool longSums = c.lhs.back() > 1000;
      if (dtype == plan::F32 && longSums)
        tolerance = 5e-4;
      if (dtype == plan::F16 || dtype == plan::BF16)
        tolerance = 2e-2;
      Call reference = call, actual = call;
      ASSERT_OK(reference.run());
      ASSERT_OK(runOnCuda(actual));
      double worst = 0;
      std::vector<double> got = actual.values(), want = reference.values();
      for (size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i])));
      std::printf("matmul epilogue %s: worst relative error %.3g\n", describe(dtype, c).c_str(),
                  worst);
      expectNear(got, want, tolerance, "matmul");
    }
}

// matmul's aux output against the cpu: the sum before the GELU (GELU_AUX
// and GELU_AUX_BIAS; outer slices copy the sum before a GELU launch) and
// the bias gradient beside GELU's derivative (the DGELU result's rows
// summed by reduce_sum's kernels, as the cpu sums them), sizes off the
// tiles, gpt2-xl's MLP shapes and an empty contraction. 16-bit results
// are held to 2e-2 relative (of at least 1). The worst errors are printed
// for the record.
TEST(CudaKernelsLinalg, MatmulGeluAuxAndBiasGrad) {
  ZCC_REQUIRE_GPU();
  const FusedMatmul cases[] = {
      {{37, 53}, {53, 29}, {37, 29}, false, false, 29, false, true, false, true},
      {{37, 53}, {53, 32}, {37, 32}, false, false, 0, false, true, false, true},
      {{4, 37, 53}, {53, 29}, {4, 37, 29}, false, false, 29, false, true, false, true},
      {{4, 53, 37}, {4, 29, 53}, {4, 37, 29}, true, true, 29, false, true, false, true},
      {{3, 1, 53, 37}, {5, 53, 29}, {3, 5, 37, 29}, true, false, 29, false, true, false, true},
      {{256, 1600}, {1600, 6400}, {256, 6400}, false, false, 6400, false, true, false, true},
      {{0, 3}, {4, 0}, {3, 4}, true, true, 4, false, true, false, true},
      {{37, 53}, {29, 53}, {37, 29}, false, true, 0, false, false, true, true},
      {{4, 37, 53}, {53, 32}, {4, 37, 32}, false, false, 0, false, false, true, true},
      {{4, 37, 53}, {4, 53, 29}, {4, 37, 29}, false, false, 0, false, false, true, true},
      {{3, 1, 53, 37}, {5, 53, 29}, {3, 5, 37, 29}, true, false, 0, false, false, true, true},
      {{256, 1600}, {6400, 1600}, {256, 6400}, false, true, 0, false, false, true, true},
      {{2, 0, 3}, {0, 2}, {2, 3, 2}, true, false, 0, false, false, true, true},
      {{0, 53}, {29, 53}, {0, 29}, false, true, 0, false, false, true, true},
      // A leading dimension cuBLASLt's aux cannot take (not a multiple of
      // 8): the epilogue without aux, then a launch.
      {{37, 53}, {53, 29}, {37, 29}, false, false, 0, false, true, false, true},
  };
  uint32_t seed = 1900;
  for (DType dtype : kFloatTypes)
    for (const FusedMatmul &c : cases) {
      SCOPED_TRACE(describe(dtype, c));
      Call call = fusedMatmulCall(dtype, c, seed += 4);
      double tolerance = toleranceFor(dtype);
      if (dtype == plan::F32)
        tolerance = 5e-4;
      if (dtype == plan::F16 || dtype == plan::BF16)
        tolerance = 2e-2;
      Call reference = call, actual = call;
      ASSERT_OK(reference.run());
      ASSERT_OK(runOnCuda(actual));
      for (size_t output : {size_t{0}, size_t{1}}) {
        double worst = 0;
        std::vector<double> got = actual.values(output), want = reference.values(output);
        for (size_t i = 0; i < got.size(); ++i)
          worst = std::max(worst,
                           std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i])));
        std::printf("matmul %s %s: worst relative error %.3g\n", describe(dtype, c).c_str(),
                    output == 0 ? "result" : "aux", worst);
        expectNear(got, want, tolerance, output == 0 ? "result" : "aux");
      }
    }
}

// A matmul whose addend is its own result buffer (C = D) gives what the
// same product into a separate result does.
TEST(CudaKernelsLinalg, MatmulAddendInPlace) {
  ZCC_REQUIRE_GPU();
  for (DType dtype : {plan::F32, plan::BF16}) {
    SCOPED_TRACE(cpu::dtypeName(dtype));
    Call apart = fusedMatmulCall(dtype, {{64, 96}, {96, 80}, {64, 80}, false, false, 80, true, true},
                                 1800);
    Call together("matmul");
    together.in(apart.input(0)).in(apart.input(1)).in(apart.input(2)).in(apart.input(3));
    together.boolAttr("residual", true).stringAttr("activation", "gelu_tanh").inPlace(3);
    ASSERT_OK(runOnCuda(apart));
    ASSERT_OK(runOnCuda(together));
    EXPECT_EQ(together.values(), apart.values());
  }
}

// The same shapes again, with other values: the algorithm cuBLASLt's
// heuristic chose the first time (kept by shape, transposes, bias and
// alignment) must serve them too, and a shape that differs only in its
// transposes or its bias must not get another's algorithm.
TEST(CudaKernelsLinalg, MatmulRepeatedShapes) {
  ZCC_REQUIRE_GPU();
  const FusedMatmul cases[] = {
      {{3, 64, 96}, {96, 80}, {3, 64, 80}, false, false, 80},
      {{3, 96, 64}, {96, 80}, {3, 64, 80}, true, false, 80},
      {{3, 64, 96}, {80, 96}, {3, 64, 80}, false, true, 80},
      {{3, 64, 96}, {80, 96}, {3, 64, 80}, false, true, 0},
      {{3, 96, 64}, {80, 96}, {3, 64, 80}, true, true, 80},
  };
  for (DType dtype : kFloatTypes)
    for (uint32_t round = 0; round < 3; ++round)
      for (const FusedMatmul &c : cases) {
        SCOPED_TRACE(describe(dtype, c) + " round " + std::to_string(round));
        expectCudaMatchesCpu(fusedMatmulCall(dtype, c, 800 + 10 * round),
                             toleranceFor(dtype));
      }
}

// Large enough for tiled and split-K algorithms with the bias epilogue.
TEST(CudaKernelsLinalg, MatmulTransposesAndBiasLarge) {
  ZCC_REQUIRE_GPU();
  const FusedMatmul cases[] = {
      {{2, 257, 130}, {190, 257}, {2, 130, 190}, true, true, 190},
      {{3, 768, 64}, {3, 768, 96}, {3, 64, 96}, true, false, 96},
      {{1000, 4}, {1000, 3}, {4, 3}, true, false, 3},
      {{4, 1000}, {3, 1000}, {4, 3}, false, true, 3},
  };
  uint32_t seed = 900;
  for (DType dtype : kFloatTypes) {
    double tolerance = dtype == plan::F32 ? 1e-4 : toleranceFor(dtype);
    for (const FusedMatmul &c : cases) {
      SCOPED_TRACE(describe(dtype, c));
      expectCudaMatchesCpu(fusedMatmulCall(dtype, c, seed += 3), tolerance);
    }
  }
}

// An empty contraction leaves the bias rows, every batch of them.
TEST(CudaKernelsLinalg, MatmulEmptyWithBias) {
  ZCC_REQUIRE_GPU();
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(cpu::dtypeName(dtype));
    expectCudaMatchesCpu(
        fusedMatmulCall(dtype, {{0, 3}, {4, 0}, {3, 4}, true, true, 4}, 950),
        0);
    expectCudaMatchesCpu(
        fusedMatmulCall(dtype, {{2, 3, 0}, {0, 5}, {2, 3, 5}, false, false, 5},
                        953),
        0);
    expectCudaMatchesCpu(
        fusedMatmulCall(dtype, {{0, 3, 4}, {4, 5}, {0, 3, 5}, false, false, 5},
                        956),
        0);
  }
}

// The bias joins the f32 sum before the one rounding (as on the cpu,
// CpuKernelsDType.MatmulBiasIsAddedBeforeRounding): 1 + 15u/32 alone
// rounds to 1, plus the bias u/16 to 1 + u (u an ulp at 1); exactly, in
// one product and in a strided batch of them.
TEST(CudaKernelsLinalg, MatmulBiasIsAddedBeforeRounding) {
  ZCC_REQUIRE_GPU();
  for (DType dtype : {plan::F16, plan::BF16}) {
    SCOPED_TRACE(cpu::dtypeName(dtype));
    double ulp =
        dtype == plan::F16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
    for (int64_t batch : {1, 3}) {
      std::vector<double> lhs, rhs;
      for (int64_t b = 0; b < batch; ++b) {
        lhs.insert(lhs.end(), {1, 1});
        rhs.insert(rhs.end(), {1, 15 * ulp / 32});
      }
      Call call("matmul");
      call.in(encode(dtype, {batch, 1, 2}, lhs))
          .in(encode(dtype, {batch, 1, 2}, rhs))
          .in(encode(dtype, {1}, {ulp / 16}))
          .boolAttr("transpose_rhs", true)
          .out(dtype, {batch, 1, 1});
      ASSERT_OK(runOnCuda(call));
      EXPECT_EQ(call.values(), std::vector<double>(batch, 1 + ulp));
    }
  }
}

TEST(CudaKernelsLinalg, MatmulTransposeAndBiasRefusesLikeCpu) {
  ZCC_REQUIRE_GPU();
  auto call = [](std::vector<int64_t> lhs, std::vector<int64_t> rhs,
                 std::vector<int64_t> result) {
    Call c("matmul");
    c.in(randomTensor(plan::F32, lhs, 1))
        .in(randomTensor(plan::F32, rhs, 2))
        .out(plan::F32, result);
    return c;
  };
  // A transposed vector.
  Call vectorLhs = call({3}, {3, 2}, {2});
  vectorLhs.boolAttr("transpose_lhs", true);
  expectCudaRefusesLikeCpu(vectorLhs);
  Call vectorRhs = call({2, 3}, {3}, {2});
  vectorRhs.boolAttr("transpose_rhs", true);
  expectCudaRefusesLikeCpu(vectorRhs);
  // Contractions that differ once lhs is transposed; a transpose that is
  // not a bool.
  Call contraction = call({3, 2}, {2, 4}, {2, 4});
  contraction.boolAttr("transpose_lhs", true);
  expectCudaRefusesLikeCpu(contraction);
  Call kind = call({2, 3}, {3, 4}, {2, 4});
  kind.intAttr("transpose_rhs", 2);
  expectCudaRefusesLikeCpu(kind);
  // Biases of the wrong length (also after a transpose), rank and type.
  Call length = call({2, 3}, {3, 4}, {2, 4});
  length.in(randomTensor(plan::F32, {3}, 3));
  expectCudaRefusesLikeCpu(length);
  Call transposedLength = call({2, 3}, {4, 3}, {2, 4});
  transposedLength.boolAttr("transpose_rhs", true)
      .in(randomTensor(plan::F32, {3}, 3));
  expectCudaRefusesLikeCpu(transposedLength);
  Call rank = call({2, 3}, {3, 4}, {2, 4});
  rank.in(randomTensor(plan::F32, {1, 4}, 3));
  expectCudaRefusesLikeCpu(rank);
  Call type = call({2, 3}, {3, 4}, {2, 4});
  type.in(randomTensor(plan::F16, {4}, 3));
  expectCudaRefusesLikeCpu(type);
  Call extra = call({2, 3}, {3, 4}, {2, 4});
  extra.in(randomTensor(plan::F32, {4}, 3)).in(randomTensor(plan::F32, {4}, 4));
  expectCudaRefusesLikeCpu(extra);
}

//===----------------------------------------------------------------------===//
// attention, attention_grad
//===----------------------------------------------------------------------===//

struct AttentionCase {
  std::vector<int64_t> batch;
  int64_t queries, keys, headSize, valueSize;
  bool causal;
};

std::vector<int64_t> withLast(std::vector<int64_t> batch, int64_t rows,
                              int64_t columns) {
  batch.push_back(rows);
  batch.push_back(columns);
  return batch;
}

std::string describe(const AttentionCase &c, DType dtype) {
  std::string s = cpu::dtypeName(dtype);
  s += " batch";
  for (int64_t d : c.batch)
    s += " " + std::to_string(d);
  s += " q " + std::to_string(c.queries) + " k " + std::to_string(c.keys) +
       " d " + std::to_string(c.headSize) + " dv " +
       std::to_string(c.valueSize) + (c.causal ? " causal" : "");
  return s;
}

Call attentionCall(const AttentionCase &c, DType dtype, bool gradient,
                   uint32_t seed) {
  auto q = withLast(c.batch, c.queries, c.headSize),
       k = withLast(c.batch, c.keys, c.headSize),
       v = withLast(c.batch, c.keys, c.valueSize),
       o = withLast(c.batch, c.queries, c.valueSize);
  Call call(gradient ? "attention_grad" : "attention");
  call.in(randomTensor(dtype, q, seed, -2, 2))
      .in(randomTensor(dtype, k, seed + 1, -2, 2))
      .in(randomTensor(dtype, v, seed + 2, -2, 2));
  if (gradient)
    call.in(randomTensor(dtype, o, seed + 3, -2, 2))
        .out(dtype, q)
        .out(dtype, k)
        .out(dtype, v);
  else
    call.out(dtype, o);
  call.floatAttr("scale", 1.0 / std::sqrt(static_cast<double>(
                                    std::max<int64_t>(c.headSize, 1))));
  if (c.causal)
    call.unitAttr("causal");
  return call;
}

// Sequence lengths off the tile sizes (16, 32, 64), several heads, fewer
// queries than keys (causal aligns them at the end), head sizes in each of
// the kernels' register tilings (up to 64, 128 and 256).
const AttentionCase kAttentionCases[] = {
    {{2, 3}, 77, 77, 64, 64, false},  {{2, 3}, 77, 77, 64, 64, true},
    {{3}, 50, 130, 32, 48, false},    {{3}, 50, 130, 32, 48, true},
    {{1}, 1, 1, 8, 8, true},          {{2}, 129, 129, 100, 72, true},
    {{2}, 33, 70, 200, 256, false},   {{2}, 33, 70, 256, 130, true},
    {{1, 2}, 300, 300, 64, 64, true}, {{2}, 70, 200, 128, 8, true},
    {{2}, 65, 65, 20, 100, false},
};

TEST(CudaKernelsLinalg, Attention) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 700;
  for (DType dtype : kFloatTypes)
    for (const AttentionCase &c : kAttentionCases) {
      SCOPED_TRACE(describe(c, dtype));
      expectCudaMatchesCpu(attentionCall(c, dtype, false, seed += 4),
                           toleranceFor(dtype));
    }
}

// Without keys every softmax is 0 / 0 (NaN) on both backends; without a
// head size every score is 0.
TEST(CudaKernelsLinalg, AttentionEdgeSizes) {
  ZCC_REQUIRE_GPU();
  for (DType dtype : kFloatTypes) {
    for (const AttentionCase &c : {AttentionCase{{2}, 5, 0, 4, 3, false},
                                   AttentionCase{{2}, 5, 7, 0, 3, false},
                                   AttentionCase{{2}, 5, 7, 0, 3, true},
                                   AttentionCase{{0}, 5, 7, 4, 3, false},
                                   AttentionCase{{2}, 0, 7, 4, 3, false}}) {
      SCOPED_TRACE(describe(c, dtype));
      expectCudaMatchesCpu(attentionCall(c, dtype, false, 800),
                           toleranceFor(dtype));
    }
  }
}

/// attention_grad's tolerance against the cpu: it sums in double, but
/// rounds the key and value gradients of 16-bit types after every query.
double gradToleranceFor(DType dtype) {
  switch (dtype) {
  case plan::F64:
    return 1e-12;
  case plan::F32:
    return 2e-5;
  case plan::F16:
    return 1e-2;
  default:
    return 4e-2;
  }
}

/// Runs `call` (16-bit operands) on the cuda kernel, and its operands'
/// values in f64 on the cpu kernel, and expects the cuda results within
/// `tolerance` of the f64 ones: the 16-bit kernel's accuracy itself.
/// `call` with every operand's values in f64 (and f64 results).
Call inF64(Call call) {
  for (size_t i = 0; i < call.inputCount(); ++i) {
    Tensor &input = call.input(i);
    input = encode(plan::F64, input.shape, decode(input));
  }
  for (size_t i = 0; i < call.outputCount(); ++i) {
    Tensor &output = call.result(i);
    output = encode(plan::F64, output.shape,
                    std::vector<double>(countOf(output.shape), 0.0));
  }
  return call;
}

void expectCudaNearF64(const Call &call, double tolerance) {
  Call actual = call, reference = inF64(call);
  ASSERT_OK(runOnCuda(actual));
  ASSERT_OK(reference.run());
  for (size_t i = 0; i < actual.outputCount(); ++i)
    expectNear(actual.values(i), reference.values(i), tolerance,
               call.kernel() + " output " + std::to_string(i) + " against f64");
}

TEST(CudaKernelsLinalg, AttentionGrad) {
  ZCC_REQUIRE_GPU();
  const AttentionCase cases[] = {
      {{2, 2}, 45, 45, 64, 64, false},  {{2, 2}, 45, 45, 64, 64, true},
      {{3}, 20, 70, 16, 40, true},      {{3}, 20, 70, 16, 40, false},
      {{1}, 1, 1, 8, 8, true},          {{2}, 37, 37, 96, 128, true},
      {{1}, 40, 23, 256, 200, false},   {{1}, 33, 33, 130, 20, true},
      {{1}, 100, 100, 32, 32, true},    {{2}, 200, 260, 64, 64, true},
      {{2}, 150, 150, 128, 128, false},
  };
  uint32_t seed = 900;
  for (DType dtype : kFloatTypes)
    for (const AttentionCase &c : cases) {
      SCOPED_TRACE(describe(c, dtype));
      Call call = attentionCall(c, dtype, true, seed += 4);
      bool wide = dtype == plan::F32 || dtype == plan::F64;
      // The cpu's 16-bit key and value gradients drift with its rounding
      // after every query: beyond short sequences, 16-bit types are held to
      // f64 alone.
      if (wide || c.queries <= 20)
        expectCudaMatchesCpu(call, gradToleranceFor(dtype));
      if (!wide)
        expectCudaNearF64(call, dtype == plan::F16 ? 1e-2 : 2e-2);
    }
}

// The 16-bit forward against f64 too (its probabilities enter the tensor
// cores rounded to 16 bits).
TEST(CudaKernelsLinalg, AttentionHalfAccuracy) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 950;
  for (DType dtype : {plan::F16, plan::BF16})
    for (const AttentionCase &c : kAttentionCases) {
      SCOPED_TRACE(describe(c, dtype));
      expectCudaNearF64(attentionCall(c, dtype, false, seed += 4),
                        dtype == plan::F16 ? 5e-3 : 1e-2);
    }
}

/// The shape of an attention's log-sum-exp: the query's without its last
/// dimension.
std::vector<int64_t> lseShape(const AttentionCase &c) {
  std::vector<int64_t> shape = c.batch;
  shape.push_back(c.queries);
  return shape;
}

// The optional log-sum-exp result, on every kernel path (the tensor-core
// kernels' base-2 statistics, the f32 and f64 cores' natural ones), next to
// an unchanged result.
TEST(CudaKernelsLinalg, AttentionLogSumExp) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1200;
  for (DType dtype : kFloatTypes)
    for (const AttentionCase &c : kAttentionCases) {
      SCOPED_TRACE(describe(c, dtype));
      Call call = attentionCall(c, dtype, false, seed += 4);
      call.out(plan::F32, lseShape(c));
      expectCudaMatchesCpu(call, toleranceFor(dtype));
    }
}

/// The tolerance of a backward that reads the saved statistics, against
/// the f64 gradients.
double savedGradToleranceFor(DType dtype) {
  return dtype == plan::F64 ? 1e-12 : dtype == plan::F32 ? 2e-5 : dtype == plan::F16 ? 1e-2 : 2e-2;
}

// The backward reading the forward's saved result and log-sum-exp (the
// cpu's, which the cuda forward matches above) against the f64 gradients.
TEST(CudaKernelsLinalg, AttentionGradFromSavedStatistics) {
  ZCC_REQUIRE_GPU();
  const AttentionCase cases[] = {
      {{2, 2}, 45, 45, 64, 64, true}, {{3}, 20, 70, 16, 40, false},
      {{2}, 37, 37, 96, 128, true},   {{2}, 200, 260, 64, 64, true},
      {{1}, 33, 33, 130, 20, true},   {{2}, 65, 65, 20, 100, false},
  };
  uint32_t seed = 1300;
  for (DType dtype : kFloatTypes)
    for (const AttentionCase &c : cases) {
      SCOPED_TRACE(describe(c, dtype));
      Call forward = attentionCall(c, dtype, false, seed += 4);
      forward.out(plan::F32, lseShape(c));
      ASSERT_OK(forward.run());
      Call grad = attentionCall(c, dtype, true, seed);
      for (size_t i = 0; i < 3; ++i)
        grad.input(i) = forward.input(i);
      Call saved = grad;
      saved.in(forward.result(0)).in(forward.result(1));
      ASSERT_OK(runOnCuda(saved));
      Call reference = inF64(grad);
      ASSERT_OK(reference.run());
      double tolerance = savedGradToleranceFor(dtype);
      for (size_t i = 0; i < 3; ++i)
        expectNear(saved.values(i), reference.values(i), tolerance,
                   "gradient " + std::to_string(i) + " against f64");
    }
}

// qkv_attention and its gradient read and write the heads of the packed
// [B, T, 3, H, d] projection in place (rows 3 H d apart, results H d
// apart); the cpu kernels match attention on the heads transposed out
// (CpuKernelsDType.QkvAttentionReadsHeadsInPlace). Head sizes 64 and 128
// take the tensor cores' asynchronous copies; 20 their plain loads, and
// the f32 and f64 cores everything.
TEST(CudaKernelsLinalg, QkvAttention) {
  ZCC_REQUIRE_GPU();
  const std::pair<QkvShape, bool> cases[] = {
      {{2, 77, 3, 64}, true}, {{1, 130, 2, 128}, true}, {{2, 45, 2, 20}, false},
      {{3, 200, 1, 64}, true}, {{1, 1, 2, 8}, true},
  };
  uint32_t seed = 1500;
  for (DType dtype : kFloatTypes)
    for (auto [shape, causal] : cases) {
      SCOPED_TRACE(std::string(cpu::dtypeName(dtype)) + " T " + std::to_string(shape.length) +
                   " d " + std::to_string(shape.size));
      Call forward = qkvAttentionCall(shape, dtype, causal, false, seed += 4);
      expectCudaMatchesCpu(forward, toleranceFor(dtype));
      ASSERT_OK(forward.run());
      Call grad = qkvAttentionCall(shape, dtype, causal, true, seed);
      bool wide = dtype == plan::F32 || dtype == plan::F64;
      if (wide || shape.length <= 20)
        expectCudaMatchesCpu(grad, gradToleranceFor(dtype));
      // The backward reading the forward's saved result and lse, as
      // training plans run it, against the f64 gradient.
      Call saved = grad;
      saved.in(forward.result(0)).in(forward.result(1));
      ASSERT_OK(runOnCuda(saved));
      Call reference = inF64(grad);
      ASSERT_OK(reference.run());
      double tolerance = savedGradToleranceFor(dtype);
      expectNear(saved.values(0), reference.values(0), tolerance, "qkv_grad against f64");
    }
}

/// The shared launch context with cuDNN's attention.
struct CudnnLaunch {
  std::unique_ptr<cuda::CudnnAttention> cudnn;
  cuda::LaunchContext launch;
};

Status makeCudnnLaunch(CudnnLaunch &result) {
  Status created = cuda::CudnnAttention::create(result.cudnn);
  if (!created.isOk())
    return created;
  result.launch = CudaTestContext::get()->launch;
  result.launch.cudnnAttention = result.cudnn.get();
  return Status::ok();
}

/// Runs `call` with cuDNN's attention and expects it to have run there
/// (`onCudnn`) or to have been declined, leaving it to the own kernels.
void runExpectingCudnn(Call &call, CudnnLaunch &c, bool onCudnn,
                       bool replayGraph = false) {
  int64_t before = c.cudnn->runs();
  ASSERT_OK(runOnCuda(call, &c.launch, replayGraph));
  if (onCudnn)
    EXPECT_EQ(c.cudnn->runs(), before + (replayGraph ? 2 : 1))
        << "declined: " << c.cudnn->lastDeclined();
  else
    EXPECT_EQ(c.cudnn->runs(), before);
}

/// `actual`'s outputs against `call`'s in f64 on the cpu (an f32 lse stays
/// f32, as the kernels take it).
void expectNearF64(Call &actual, Call call,
                   std::initializer_list<double> tolerances) {
  Call reference = inF64(call);
  for (size_t i = 0; i < call.outputCount(); ++i)
    if (call.result(i).dtype == plan::F32 && call.input(0).dtype != plan::F32)
      reference.result(i) = call.result(i);
  ASSERT_OK(reference.run());
  size_t i = 0;
  for (double tolerance : tolerances) {
    expectNear(actual.values(i), reference.values(i), tolerance,
               call.kernel() + " output " + std::to_string(i) + " against f64");
    ++i;
  }
}

// cuDNN's fused attention as the cuda backend runs it (CudnnAttention.h):
// qkv_attention with its lse over the packed projection and without it (in
// inference), the gradient from
// the saved result and lse, and attention over contiguous heads; each call
// runs on cuDNN (its run count grows) and is held to the f64 results as
// the own kernels are. Sequence lengths are multiples of 128 (the
// backward's padding-free case before cuDNN 9.16).
TEST(CudaKernelsLinalg, CudnnAttention) {
  ZCC_REQUIRE_GPU();
  CudnnLaunch c;
  ASSERT_OK(makeCudnnLaunch(c));
  const std::pair<QkvShape, bool> cases[] = {
      {{2, 256, 3, 64}, true}, {{1, 128, 2, 128}, true},
      {{2, 128, 2, 64}, false}, {{1, 384, 1, 64}, true}};
  uint32_t seed = 1700;
  for (DType dtype : {plan::F16, plan::BF16}) {
    double tolerance = dtype == plan::F16 ? 5e-3 : 1e-2;
    for (auto [shape, causal] : cases) {
      SCOPED_TRACE(std::string(cpu::dtypeName(dtype)) + " T " +
                   std::to_string(shape.length) + " d " +
                   std::to_string(shape.size) + (causal ? " causal" : ""));
      Call forward = qkvAttentionCall(shape, dtype, causal, false, seed += 4);
      Call actual = forward;
      runExpectingCudnn(actual, c, true);
      expectNearF64(actual, forward, {tolerance, 1e-3});
      // Inference's forward, without the lse.
      Call inference(forward.kernel());
      inference.in(forward.input(0))
          .out(forward.result(0))
          .floatAttr("scale",
                     1.0 / std::sqrt(static_cast<double>(shape.size)));
      if (causal)
        inference.unitAttr("causal");
      Call inferred = inference;
      runExpectingCudnn(inferred, c, true);
      expectNearF64(inferred, inference, {tolerance});
      ASSERT_OK(forward.run());
      Call grad = qkvAttentionCall(shape, dtype, causal, true, seed);
      Call saved = grad;
      saved.in(forward.result(0)).in(forward.result(1));
      runExpectingCudnn(saved, c, true);
      expectNearF64(saved, grad, {savedGradToleranceFor(dtype)});
    }
    AttentionCase heads{{2, 3}, 256, 256, 64, 64, true};
    SCOPED_TRACE(describe(heads, dtype));
    Call forward = attentionCall(heads, dtype, false, seed += 4);
    forward.out(plan::F32, lseShape(heads));
    Call actual = forward;
    runExpectingCudnn(actual, c, true);
    expectNearF64(actual, forward, {tolerance, 1e-3});
    ASSERT_OK(forward.run());
    Call grad = attentionCall(heads, dtype, true, seed);
    for (size_t i = 0; i < 3; ++i)
      grad.input(i) = forward.input(i);
    Call saved = grad;
    saved.in(forward.result(0)).in(forward.result(1));
    runExpectingCudnn(saved, c, true);
    double gradTolerance = savedGradToleranceFor(dtype);
    expectNearF64(saved, grad, {gradTolerance, gradTolerance, gradTolerance});
  }
}

// cuDNN's graphs captured in a CUDA graph, as the backend replays a
// program: the replay's results equal the eager run's, bit for bit.
TEST(CudaKernelsLinalg, CudnnAttentionInCudaGraph) {
  ZCC_REQUIRE_GPU();
  CudnnLaunch c;
  ASSERT_OK(makeCudnnLaunch(c));
  QkvShape shape{2, 256, 3, 64};
  Call forward = qkvAttentionCall(shape, plan::BF16, true, false, 1900);
  Call eager = forward, replayed = forward;
  runExpectingCudnn(eager, c, true);
  runExpectingCudnn(replayed, c, true, /*replayGraph=*/true);
  for (size_t i = 0; i < 2; ++i)
    expectNear(replayed.values(i), eager.values(i), 0,
               "forward output " + std::to_string(i));
  Call grad = qkvAttentionCall(shape, plan::BF16, true, true, 1900);
  grad.in(eager.result(0)).in(eager.result(1));
  Call eagerGrad = grad, replayedGrad = grad;
  runExpectingCudnn(eagerGrad, c, true);
  runExpectingCudnn(replayedGrad, c, true, /*replayGraph=*/true);
  // cuDNN's engine may sum the query gradient in a varying order: within
  // rounding of the eager run, not necessarily bit for bit.
  expectNear(replayedGrad.values(0), eagerGrad.values(0), 1e-2, "qkv_grad");
}

// What cuDNN's engines do not take runs on the own kernels, with the same
// results: f32, a head size not a multiple of 8, causal attention with
// fewer queries than keys, and a gradient without the saved statistics.
TEST(CudaKernelsLinalg, CudnnAttentionDeclines) {
  ZCC_REQUIRE_GPU();
  CudnnLaunch c;
  ASSERT_OK(makeCudnnLaunch(c));
  struct Declined {
    AttentionCase shape;
    DType dtype;
    const char *why;
  };
  const Declined cases[] = {
      {{{2}, 128, 128, 64, 64, true}, plan::F32, "only 16-bit"},
      {{{2}, 128, 128, 20, 20, false}, plan::BF16, "multiples of 8"},
      {{{2}, 64, 128, 64, 64, true}, plan::BF16, "as many queries as keys"},
  };
  uint32_t seed = 1800;
  for (const Declined &d : cases) {
    SCOPED_TRACE(describe(d.shape, d.dtype));
    Call forward = attentionCall(d.shape, d.dtype, false, seed += 4);
    Call actual = forward;
    runExpectingCudnn(actual, c, false);
    EXPECT_NE(c.cudnn->lastDeclined().find(d.why), std::string::npos)
        << c.cudnn->lastDeclined();
    expectNearF64(actual, forward,
                  {d.dtype == plan::F32 ? 2e-5 : 1e-2});
  }
  Call grad = attentionCall({{2}, 128, 128, 64, 64, true}, plan::BF16, true,
                            seed += 4);
  Call actual = grad;
  runExpectingCudnn(actual, c, false);
  EXPECT_NE(c.cudnn->lastDeclined().find("recomputes"), std::string::npos)
      << c.cudnn->lastDeclined();
  expectNearF64(actual, grad, {2e-2, 2e-2, 2e-2});
}

// No queries: zero key and value gradients; no keys: zero query gradients.
TEST(CudaKernelsLinalg, AttentionGradEdgeSizes) {
  ZCC_REQUIRE_GPU();
  for (DType dtype : {plan::F32, plan::F64}) {
    for (const AttentionCase &c : {AttentionCase{{2}, 0, 7, 4, 3, false},
                                   AttentionCase{{2}, 5, 0, 4, 3, false},
                                   AttentionCase{{2}, 5, 7, 0, 3, true},
                                   AttentionCase{{2}, 5, 7, 4, 0, false}}) {
      SCOPED_TRACE(describe(c, dtype));
      expectCudaMatchesCpu(attentionCall(c, dtype, true, 1000),
                           toleranceFor(dtype));
    }
  }
}

TEST(CudaKernelsLinalg, AttentionRefusesLikeCpu) {
  ZCC_REQUIRE_GPU();
  for (bool gradient : {false, true}) {
    // More queries than keys under causal.
    expectCudaRefusesLikeCpu(
        attentionCall({{1}, 5, 4, 8, 8, true}, plan::F32, gradient, 1));
    // Missing scale.
    Call noScale(gradient ? "attention_grad" : "attention");
    noScale.in(randomTensor(plan::F32, {2, 4}, 1))
        .in(randomTensor(plan::F32, {3, 4}, 2))
        .in(randomTensor(plan::F32, {3, 4}, 3));
    if (gradient)
      noScale.in(randomTensor(plan::F32, {2, 4}, 4))
          .out(plan::F32, {2, 4})
          .out(plan::F32, {3, 4})
          .out(plan::F32, {3, 4});
    else
      noScale.out(plan::F32, {2, 4});
    expectCudaRefusesLikeCpu(noScale);
    // Key and query head sizes differ.
    Call heads(gradient ? "attention_grad" : "attention");
    heads.in(randomTensor(plan::F32, {2, 4}, 1))
        .in(randomTensor(plan::F32, {3, 5}, 2))
        .in(randomTensor(plan::F32, {3, 4}, 3));
    if (gradient)
      heads.in(randomTensor(plan::F32, {2, 4}, 4))
          .out(plan::F32, {2, 4})
          .out(plan::F32, {3, 5})
          .out(plan::F32, {3, 4});
    else
      heads.out(plan::F32, {2, 4});
    heads.floatAttr("scale", 1.0);
    expectCudaRefusesLikeCpu(heads);
  }
  // A gradient of the wrong shape.
  Call keyGrad = attentionCall({{1}, 2, 3, 4, 4, false}, plan::F32, true, 5);
  keyGrad.result(1) = randomTensor(plan::F32, {2, 4}, 6);
  expectCudaRefusesLikeCpu(keyGrad);
  // attention_grad's own head size limit.
  expectCudaRefusesLikeCpu(
      attentionCall({{1}, 1, 1, 1025, 2, false}, plan::F32, true, 7));
  // Mixed element types.
  Call mixed = attentionCall({{1}, 2, 3, 4, 4, false}, plan::F32, false, 8);
  mixed.input(1) = randomTensor(plan::F64, {1, 3, 4}, 9);
  expectCudaRefusesLikeCpu(mixed);
}

// Head sizes past what the kernels keep on chip: a clear refusal.
TEST(CudaKernelsLinalg, AttentionRefusesWideHeads) {
  ZCC_REQUIRE_GPU();
  for (bool gradient : {false, true}) {
    Call call =
        attentionCall({{1}, 2, 3, 300, 4, false}, plan::F32, gradient, 11);
    Status status = runOnCuda(call);
    EXPECT_EQ(status.code(), StatusCode::kUnimplemented) << status.toString();
    EXPECT_NE(status.message().find("head size 300 exceeds the 256"),
              std::string::npos)
        << status.message();
  }
}

//===----------------------------------------------------------------------===//
// accumulate, fill, sum_squares
//===----------------------------------------------------------------------===//

const int64_t kFlatSizes[] = {1, 1000, 4099, (1 << 20) + 3};

TEST(CudaKernelsLinalg, Accumulate) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1100;
  for (DType target : {plan::F32, plan::F64})
    for (DType value : kFloatTypes)
      for (int64_t n : kFlatSizes) {
        SCOPED_TRACE(describe(target, {n}, {n}) +
                     " += " + cpu::dtypeName(value));
        seed += 2;
        Call call("accumulate");
        call.in(randomTensor(value, {n}, seed))
            .out(randomTensor(target, {n}, seed + 1));
        expectCudaMatchesCpu(call, 0);
      }
}

// A product added into its accumulator (f32 for f32 and 16-bit operands,
// f64 for f64) in cuBLASLt's epilogue, or with `overwrite` written there
// (beta = 0), against the cpu's, with every transpose and sizes from an
// empty contraction to cuBLASLt's tiled algorithms.
TEST(CudaKernelsLinalg, AccumulateMatmul) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1300;
  const int64_t sizes[][3] = {{5, 7, 0}, {1, 1, 1}, {37, 29, 53}, {130, 190, 257}, {96, 768, 1000}};
  for (DType dtype : kFloatTypes)
    for (const auto &size : sizes)
      for (bool transposeLhs : {false, true})
        for (bool transposeRhs : {false, true})
          for (bool overwrite : {false, true}) {
            int64_t m = size[0], n = size[1], k = size[2];
            std::vector<int64_t> lhs = transposeLhs ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
            std::vector<int64_t> rhs = transposeRhs ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
            DType wide = dtype == plan::F64 ? plan::F64 : plan::F32;
            SCOPED_TRACE(describe(dtype, lhs, rhs) + (transposeLhs ? " transpose_lhs" : "") +
                         (transposeRhs ? " transpose_rhs" : "") + (overwrite ? " overwrite" : ""));
            seed += 3;
            Call call("accumulate_matmul");
            call.in(randomTensor(dtype, lhs, seed))
                .in(randomTensor(dtype, rhs, seed + 1))
                .out(randomTensor(wide, {m, n}, seed + 2));
            if (transposeLhs)
              call.boolAttr("transpose_lhs", true);
            if (transposeRhs)
              call.boolAttr("transpose_rhs", true);
            if (overwrite)
              call.boolAttr("overwrite", true);
            // Sums in f32 (f64) on both sides, in different orders.
            expectCudaMatchesCpu(call, dtype == plan::F64 ? 1e-12 : 1e-4);
          }
}

TEST(CudaKernelsLinalg, Fill) {
  ZCC_REQUIRE_GPU();
  for (DType dtype : kFloatTypes)
    for (double value : {0.0, -0.0, 0.1, -3.0, 65504.0, 1e10})
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1001},
                        int64_t{(1 << 20) + 5}}) {
        SCOPED_TRACE(describe(dtype, {n}, {}) + " " + std::to_string(value));
        Call call("fill");
        call.out(dtype, {n}).floatAttr("value", value);
        Call reference = call, actual = call;
        ASSERT_OK(reference.run());
        ASSERT_OK(runOnCuda(actual));
        // Bit-exact: the one rounding of the value, everywhere.
        EXPECT_EQ(actual.result().bytes, reference.result().bytes);
      }
}

TEST(CudaKernelsLinalg, SumSquares) {
  ZCC_REQUIRE_GPU();
  // One operand of each size and type.
  uint32_t seed = 1200;
  for (DType dtype : kFloatTypes)
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{3 << 20}}) {
      SCOPED_TRACE(describe(dtype, {n}, {}));
      Call call("sum_squares");
      call.in(randomTensor(dtype, {n}, seed += 1)).out(plan::F64, {});
      expectCudaMatchesCpu(call, 1e-12);
    }
  // Many operands of mixed types and sizes, some empty: more than one
  // launch's worth of operands.
  Call many("sum_squares");
  for (int i = 0; i < 75; ++i) {
    DType dtype = kFloatTypes[i % 4];
    int64_t n = i % 7 == 0 ? 0 : (i * 7919) % 20000 + 1;
    many.in(randomTensor(dtype, {n}, seed += 1, -3, 3));
  }
  many.in(randomTensor(plan::F32, {1 << 21}, seed += 1));
  many.out(plan::F64, {});
  expectCudaMatchesCpu(many, 1e-12);
  // Only empty operands.
  Call empty("sum_squares");
  empty.in(encode(plan::F32, {0}, {})).out(plan::F64, {});
  expectCudaMatchesCpu(empty, 0);
}

// Overflowed gradients show in the norm: the loss scaler skips the step.
TEST(CudaKernelsLinalg, SumSquaresPropagatesInfinityAndNaN) {
  ZCC_REQUIRE_GPU();
  Call inf("sum_squares");
  inf.in(randomTensor(plan::F32, {5000}, 1))
      .in(encode(plan::F16, {3}, {-kInf, 1, 2}))
      .out(plan::F64, {});
  expectCudaMatchesCpu(inf, 0);
  Call nan("sum_squares");
  nan.in(encode(plan::F32, {2}, {1, kNaN}))
      .in(encode(plan::F64, {1}, {kInf}))
      .out(plan::F64, {});
  expectCudaMatchesCpu(nan, 0);
  // Squares that overflow f32 are fine in the double sum.
  Call large("sum_squares");
  large.in(encode(plan::F32, {2}, {1e20, -1e20})).out(plan::F64, {});
  expectCudaMatchesCpu(large, 1e-15);
}

TEST(CudaKernelsLinalg, AccumulateFillSumSquaresRefuseLikeCpu) {
  ZCC_REQUIRE_GPU();
  Call half("accumulate");
  half.in(randomTensor(plan::F32, {2}, 1)).out(randomTensor(plan::F16, {2}, 2));
  expectCudaRefusesLikeCpu(half);
  Call integer("accumulate");
  integer.in(i32({2}, {1, 2})).out(randomTensor(plan::F32, {2}, 2));
  expectCudaRefusesLikeCpu(integer);
  Call shape("accumulate");
  shape.in(randomTensor(plan::F32, {3}, 1))
      .out(randomTensor(plan::F32, {2}, 2));
  expectCudaRefusesLikeCpu(shape);

  Call missing("fill");
  missing.out(plan::F32, {2});
  expectCudaRefusesLikeCpu(missing);
  Call intFill("fill");
  intFill.out(plan::I64, {2}).floatAttr("value", 1);
  expectCudaRefusesLikeCpu(intFill);

  Call none("sum_squares");
  none.out(plan::F64, {});
  expectCudaRefusesLikeCpu(none);
  Call result("sum_squares");
  result.in(randomTensor(plan::F32, {1}, 1)).out(plan::F32, {});
  expectCudaRefusesLikeCpu(result);
  Call resultShape("sum_squares");
  resultShape.in(randomTensor(plan::F32, {1}, 1)).out(plan::F64, {1});
  expectCudaRefusesLikeCpu(resultShape);
  Call intInput("sum_squares");
  intInput.in(randomTensor(plan::F32, {1}, 1))
      .in(i64({1}, {1}))
      .out(plan::F64, {});
  expectCudaRefusesLikeCpu(intInput);
}

//===----------------------------------------------------------------------===//
// adamw, sgd
//===----------------------------------------------------------------------===//

struct Hyper {
  double lr = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0,
         gradScale = 1, momentum = 0;
};

Tensor scalarsTensor(const Hyper &h, double step) {
  return f64({8}, {h.lr, h.beta1, h.beta2, h.eps, h.weightDecay, step,
                   h.gradScale, h.momentum});
}

std::vector<Hyper> hypers() {
  Hyper plain;
  Hyper decayed;
  decayed.weightDecay = 0.1;
  decayed.gradScale = 0.25;
  decayed.lr = 3e-2;
  decayed.momentum = 0.9;
  Hyper fast; // beta1 < 0.5 takes torch.lerp's other form.
  fast.beta1 = 0.4;
  fast.beta2 = 0.9;
  fast.weightDecay = 0.01;
  fast.gradScale = 2;
  fast.momentum = 0.5;
  return {plain, decayed, fast};
}

/// f32 steps round operation by operation as the cpu's do: they match to
/// the last bit but for the device's pow (bias corrections) in the last
/// place of a double.
double optimizerToleranceFor(DType dtype) {
  return dtype == plan::F64 ? 1e-13 : 1e-6;
}

TEST(CudaKernelsLinalg, Adamw) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1300;
  for (DType dtype : {plan::F32, plan::F64})
    for (const Hyper &h : hypers())
      for (bool decoupled : {true, false})
        for (double step : {1.0, 2.0, 37.0})
          for (int64_t n : {int64_t{7}, int64_t{1000}, int64_t{100003}})
            for (bool inPlace : {true, false}) {
              SCOPED_TRACE(describe(dtype, {n}, {}) + " step " +
                           std::to_string(step) +
                           (decoupled ? " adamw" : " adam") +
                           (inPlace ? " in place" : ""));
              seed += 4;
              Call call("adamw");
              call.in(randomTensor(dtype, {n}, seed))
                  .in(randomTensor(dtype, {n}, seed + 1, -3, 3))
                  .in(randomTensor(dtype, {n}, seed + 2, -0.5, 0.5))
                  .in(randomTensor(dtype, {n}, seed + 3, 0, 0.3))
                  .in(scalarsTensor(h, step));
              if (inPlace)
                call.inPlace(0).inPlace(2).inPlace(3);
              else
                call.out(dtype, {n}).out(dtype, {n}).out(dtype, {n});
              if (!decoupled)
                call.boolAttr("adam_w_mode", false);
              expectCudaMatchesCpu(call, optimizerToleranceFor(dtype));
            }
}

// The multi-tensor adamw: more tensors than one launch takes, of sizes
// from 1 element to several blocks' worth (the wide path, its tail, and
// the element-wise one), each stepped as the cpu steps it.
TEST(CudaKernelsLinalg, MultiTensorAdamw) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1700;
  Hyper h;
  h.weightDecay = 0.1;
  h.gradScale = 0.25;
  for (DType dtype : {plan::F32, plan::F64})
    for (bool decoupled : {true, false}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) +
                   (decoupled ? " adamw" : " adam"));
      Call call("adamw");
      constexpr int kTensors = 45;
      for (int t = 0; t < kTensors; ++t) {
        int64_t n = t % 9 == 0 ? 100003 : (t * 7919) % 3000 + 1;
        call.in(randomTensor(dtype, {n}, seed))
            .in(randomTensor(dtype, {n}, seed + 1, -3, 3))
            .in(randomTensor(dtype, {n}, seed + 2, -0.5, 0.5))
            .in(randomTensor(dtype, {n}, seed + 3, 0, 0.3));
        seed += 4;
      }
      call.in(scalarsTensor(h, 3));
      for (int t = 0; t < kTensors; ++t)
        call.inPlace(4 * t).inPlace(4 * t + 2).inPlace(4 * t + 3);
      if (!decoupled)
        call.boolAttr("adam_w_mode", false);
      expectCudaMatchesCpu(call, optimizerToleranceFor(dtype));
    }
  // Refusals: a bad tensor among good ones, mixed element types, operands
  // that are not whole tensors.
  auto two = [&](DType second, int64_t secondState) {
    Call call("adamw");
    call.in(randomTensor(plan::F32, {3}, 1))
        .in(randomTensor(plan::F32, {3}, 2))
        .in(randomTensor(plan::F32, {3}, 3))
        .in(randomTensor(plan::F32, {3}, 4, 0, 1))
        .in(randomTensor(second, {3}, 5))
        .in(randomTensor(second, {3}, 6))
        .in(randomTensor(second, {secondState}, 7))
        .in(randomTensor(second, {3}, 8, 0, 1))
        .in(scalarsTensor(h, 1));
    for (int t = 0; t < 2; ++t)
      call.inPlace(4 * t).inPlace(4 * t + 2).inPlace(4 * t + 3);
    return call;
  };
  expectCudaRefusesLikeCpu(two(plan::F32, 4));
  expectCudaRefusesLikeCpu(two(plan::F64, 3));
  Call layout = two(plan::F32, 3);
  layout.inPlace(0);
  expectCudaRefusesLikeCpu(layout);
}

// A multi-tensor adamw whose tensors write their 16-bit copies (the fused
// refresh of zcc-dist-compute-copies): more tensors than one launch takes,
// each on the wide path and its element-by-element tail (whole tensors are
// aligned). The updates follow the cpu's; each copy is the cast of the
// cuda update itself, bit for bit (round to nearest even, as the cast
// kernels round). An f64 parameter with a copy is refused as the cpu
// refuses it.
TEST(CudaKernelsLinalg, MultiTensorAdamwWritesCopies) {
  ZCC_REQUIRE_GPU();
  Hyper h;
  h.weightDecay = 0.1;
  h.gradScale = 0.5;
  uint32_t seed = 1900;
  for (DType copyType : {plan::BF16, plan::F16}) {
    SCOPED_TRACE(dtypeName(copyType));
    Call call("adamw");
    constexpr int kTensors = 43;
    std::vector<int64_t> sizes;
    for (int t = 0; t < kTensors; ++t) {
      int64_t n = t % 7 == 0 ? 70001 : (t * 7919) % 2500 + 1;
      sizes.push_back(n);
      call.in(randomTensor(plan::F32, {n}, seed))
          .in(randomTensor(plan::F32, {n}, seed + 1, -3, 3))
          .in(randomTensor(plan::F32, {n}, seed + 2, -0.5, 0.5))
          .in(randomTensor(plan::F32, {n}, seed + 3, 0, 0.3));
      seed += 4;
    }
    call.in(scalarsTensor(h, 2));
    for (int t = 0; t < kTensors; ++t)
      call.inPlace(4 * t).inPlace(4 * t + 2).inPlace(4 * t + 3).out(copyType, {sizes[t]});
    Call reference = call, actual = call;
    ASSERT_OK(reference.run());
    ASSERT_OK(runOnCuda(actual));
    for (int t = 0; t < kTensors; ++t) {
      std::string what = "tensor " + std::to_string(t);
      for (int i = 0; i < 3; ++i)
        expectNear(actual.values(4 * t + i), reference.values(4 * t + i),
                   optimizerToleranceFor(plan::F32), what);
      Call cast("cast");
      cast.in(encode(plan::F32, {sizes[t]}, actual.values(4 * t))).out(copyType, {sizes[t]});
      ASSERT_OK(cast.run());
      EXPECT_EQ(actual.result(4 * t + 3).bytes, cast.result(0).bytes) << what;
    }
  }
  Call wide("adamw");
  wide.in(randomTensor(plan::F64, {3}, 1))
      .in(randomTensor(plan::F64, {3}, 2))
      .in(randomTensor(plan::F64, {3}, 3))
      .in(randomTensor(plan::F64, {3}, 4, 0, 1))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2)
      .inPlace(3)
      .out(plan::BF16, {3});
  expectCudaRefusesLikeCpu(wide);
}

// The multi-tensor fill: more targets than one launch takes, of every
// float type, empty and unaligned sizes among them, bit for bit the cpu's.
TEST(CudaKernelsLinalg, MultiTensorFill) {
  ZCC_REQUIRE_GPU();
  for (double value : {0.0, 0.1, -3.0}) {
    SCOPED_TRACE(value);
    Call call("fill");
    for (int t = 0; t < 70; ++t)
      call.out(kFloatTypes[t % 4], {t % 11 == 0 ? 0 : (t * 977) % 5000 + 1});
    call.floatAttr("value", value);
    Call reference = call, actual = call;
    ASSERT_OK(reference.run());
    ASSERT_OK(runOnCuda(actual));
    for (size_t t = 0; t < 70; ++t)
      EXPECT_EQ(actual.result(t).bytes, reference.result(t).bytes) << t;
  }
  Call integer("fill");
  integer.out(plan::F32, {2}).out(plan::I64, {2}).floatAttr("value", 1);
  expectCudaRefusesLikeCpu(integer);
}

TEST(CudaKernelsLinalg, Sgd) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1500;
  for (DType dtype : {plan::F32, plan::F64})
    for (const Hyper &h : hypers())
      for (double dampening : {0.0, 0.1})
        for (bool nesterov : {false, true})
          for (double step : {1.0, 5.0})
            for (int64_t n : {int64_t{6}, int64_t{100003}}) {
              SCOPED_TRACE(describe(dtype, {n}, {}) + " step " +
                           std::to_string(step) + " momentum " +
                           std::to_string(h.momentum) +
                           (nesterov ? " nesterov" : ""));
              seed += 3;
              Call call("sgd");
              call.in(randomTensor(dtype, {n}, seed))
                  .in(randomTensor(dtype, {n}, seed + 1, -3, 3))
                  .in(randomTensor(dtype, {n}, seed + 2))
                  .in(scalarsTensor(h, step))
                  .inPlace(0)
                  .inPlace(2);
              if (dampening != 0)
                call.floatAttr("dampening", dampening);
              if (nesterov)
                call.unitAttr("nesterov");
              expectCudaMatchesCpu(call, optimizerToleranceFor(dtype));
            }
}

TEST(CudaKernelsLinalg, Adagrad) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1900;
  for (DType dtype : {plan::F32, plan::F64})
    for (const Hyper &h : hypers())
      for (double lrDecay : {0.0, 0.05})
        for (double step : {1.0, 5.0})
          for (int64_t n : {int64_t{6}, int64_t{100003}}) {
            SCOPED_TRACE(describe(dtype, {n}, {}) + " step " + std::to_string(step));
            seed += 3;
            Call call("adagrad");
            call.in(randomTensor(dtype, {n}, seed))
                .in(randomTensor(dtype, {n}, seed + 1, -3, 3))
                .in(randomTensor(dtype, {n}, seed + 2, 0, 2))
                .in(scalarsTensor(h, step))
                .inPlace(0)
                .inPlace(2);
            if (lrDecay != 0)
              call.floatAttr("lr_decay", lrDecay);
            // Each operation rounded alone, sqrt and division included.
            expectCudaMatchesCpu(call, 0.0);
          }
}

TEST(CudaKernelsLinalg, Lion) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1700;
  for (DType dtype : {plan::F32, plan::F64})
    for (const Hyper &h : hypers())
      for (double step : {1.0, 5.0})
        for (int64_t n : {int64_t{6}, int64_t{100003}}) {
          SCOPED_TRACE(describe(dtype, {n}, {}) + " step " + std::to_string(step));
          seed += 3;
          Call call("lion");
          call.in(randomTensor(dtype, {n}, seed))
              .in(randomTensor(dtype, {n}, seed + 1, -3, 3))
              .in(randomTensor(dtype, {n}, seed + 2))
              .in(scalarsTensor(h, step))
              .inPlace(0)
              .inPlace(2);
          // The same products, each rounded alone: bit for bit.
          expectCudaMatchesCpu(call, 0.0);
        }
}

// FusedAdam's bias_correction false: both backends step by lr alone.
TEST(CudaKernelsLinalg, AdamwWithoutBiasCorrection) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1900;
  for (DType dtype : {plan::F32, plan::F64})
    for (const Hyper &h : hypers())
      for (int64_t n : {int64_t{7}, int64_t{100003}}) {
        SCOPED_TRACE(describe(dtype, {n}, {}));
        seed += 4;
        Call call("adamw");
        call.in(randomTensor(dtype, {n}, seed))
            .in(randomTensor(dtype, {n}, seed + 1, -3, 3))
            .in(randomTensor(dtype, {n}, seed + 2, -0.5, 0.5))
            .in(randomTensor(dtype, {n}, seed + 3, 0, 0.3))
            .in(scalarsTensor(h, 3))
            .inPlace(0)
            .inPlace(2)
            .inPlace(3)
            .boolAttr("bias_correction", false);
        expectCudaMatchesCpu(call, optimizerToleranceFor(dtype));
      }
}

// Lamb's halves: the moments as the cpu rounds them, their sums of squares
// in double in another order (a relative 1e-12 apart), and the step from
// the same sums as the cpu's but for the device's pow in the bias
// corrections (optimizerToleranceFor).
TEST(CudaKernelsLinalg, Lamb) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 2100;
  for (DType dtype : {plan::F32, plan::F64})
    for (const Hyper &h : hypers())
      for (bool options : {false, true})
        for (double step : {1.0, 5.0})
          for (int64_t n : {int64_t{6}, int64_t{100003}, int64_t{3000017}}) {
            SCOPED_TRACE(describe(dtype, {n}, {}) + " step " + std::to_string(step) +
                         (options ? " eps_inside_sqrt, no bias correction, clamped" : ""));
            seed += 4;
            Call moments("lamb_moments"), apply("lamb_step");
            for (Call *call : {&moments, &apply})
              if (options)
                call->boolAttr("eps_inside_sqrt", true)
                    .boolAttr("bias_correction", false)
                    .floatAttr("max_coeff", 0.05)
                    .floatAttr("min_coeff", 0.01);
            moments.in(randomTensor(dtype, {n}, seed))
                .in(randomTensor(dtype, {n}, seed + 1, -3, 3))
                .in(randomTensor(dtype, {n}, seed + 2, -0.5, 0.5))
                .in(randomTensor(dtype, {n}, seed + 3, 0, 0.3))
                .in(scalarsTensor(h, step))
                .inPlace(2)
                .inPlace(3)
                .out(plan::F64, {2});
            Call reference = moments;
            ASSERT_TRUE(reference.run().isOk());
            // The moments exactly, the sums within 1e-12.
            Call actual = moments;
            ASSERT_TRUE(runOnCuda(actual).isOk());
            expectNear(actual.values(0), reference.values(0), 0.0, "exp_avg");
            expectNear(actual.values(1), reference.values(1), 0.0, "exp_avg_sq");
            expectNear(actual.values(2), reference.values(2), 1e-12, "squares");
            apply.in(randomTensor(dtype, {n}, seed))
                .in(encode(dtype, {n}, reference.values(0)))
                .in(encode(dtype, {n}, reference.values(1)))
                .in(scalarsTensor(h, step))
                .in(f64({2}, reference.values(2)))
                .inPlace(0);
            expectCudaMatchesCpu(apply, optimizerToleranceFor(dtype));
          }
}

TEST(CudaKernelsLinalg, OptimizersRefuseLikeCpu) {
  ZCC_REQUIRE_GPU();
  Hyper h;
  auto adamw = [&](Tensor scalars, std::vector<int64_t> stateShape,
                   DType paramType) {
    Call call("adamw");
    call.in(randomTensor(paramType, {3}, 1))
        .in(randomTensor(paramType, {3}, 2))
        .in(randomTensor(paramType, stateShape, 3))
        .in(randomTensor(paramType, {3}, 4, 0, 1))
        .in(std::move(scalars))
        .inPlace(0)
        .inPlace(2)
        .inPlace(3);
    return call;
  };
  expectCudaRefusesLikeCpu(adamw(scalarsTensor(h, 1), {4}, plan::F32));
  expectCudaRefusesLikeCpu(adamw(scalarsTensor(h, 1), {3}, plan::F16));
  expectCudaRefusesLikeCpu(
      adamw(f64({7}, std::vector<double>(7, 1.0)), {3}, plan::F32));
  expectCudaRefusesLikeCpu(adamw(
      encode(plan::F32, {8}, std::vector<double>(8, 1.0)), {3}, plan::F32));
  Call attr = adamw(scalarsTensor(h, 1), {3}, plan::F32);
  attr.stringAttr("adam_w_mode", "yes");
  expectCudaRefusesLikeCpu(attr);

  Call sgd("sgd");
  sgd.in(randomTensor(plan::F32, {3}, 1))
      .in(randomTensor(plan::F64, {3}, 2))
      .in(randomTensor(plan::F32, {3}, 3))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2);
  expectCudaRefusesLikeCpu(sgd);
  Call damp("sgd");
  damp.in(randomTensor(plan::F32, {3}, 1))
      .in(randomTensor(plan::F32, {3}, 2))
      .in(randomTensor(plan::F32, {3}, 3))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2)
      .stringAttr("dampening", "no");
  expectCudaRefusesLikeCpu(damp);
}

// A 16-bit gradient of an f32 parameter only reaches host updates (the
// offloaded mixed-precision gradients): the device's adamw says so by
// refusing it, where the cpu kernel widens it.
TEST(CudaKernelsLinalg, AdamwRefusesA16BitGradient) {
  ZCC_REQUIRE_GPU();
  Hyper h;
  Call call("adamw");
  call.in(randomTensor(plan::F32, {3}, 1))
      .in(randomTensor(plan::BF16, {3}, 2))
      .in(randomTensor(plan::F32, {3}, 3))
      .in(randomTensor(plan::F32, {3}, 4, 0, 1))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2)
      .inPlace(3);
  Call host = call;
  ASSERT_OK(host.run());
  Status status = runOnCuda(call);
  expectError(status, StatusCode::kInvalidArgument,
              {"adamw", "'grad' has element type bf16, but 'param' has f32"});
}

// The cpu refuses a step below 1 by reading the scalars; the cuda kernel
// cannot read device memory on the host, so it leaves the state alone.
TEST(CudaKernelsLinalg, OptimizerStepZeroLeavesStateAlone) {
  ZCC_REQUIRE_GPU();
  Hyper h;
  h.momentum = 0.9;
  Call adamw("adamw");
  adamw.in(randomTensor(plan::F32, {100}, 1))
      .in(randomTensor(plan::F32, {100}, 2))
      .in(randomTensor(plan::F32, {100}, 3))
      .in(randomTensor(plan::F32, {100}, 4, 0, 1))
      .in(scalarsTensor(h, 0))
      .out(plan::F32, {100})
      .out(plan::F32, {100})
      .out(plan::F32, {100});
  ASSERT_OK(runOnCuda(adamw));
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(adamw.result(i).bytes, adamw.input(i == 0 ? 0 : i + 1).bytes);
  Call sgd("sgd");
  sgd.in(randomTensor(plan::F64, {100}, 1))
      .in(randomTensor(plan::F64, {100}, 2))
      .in(randomTensor(plan::F64, {100}, 3))
      .in(scalarsTensor(h, 0))
      .out(plan::F64, {100})
      .out(plan::F64, {100});
  ASSERT_OK(runOnCuda(sgd));
  EXPECT_EQ(sgd.result(0).bytes, sgd.input(0).bytes);
  EXPECT_EQ(sgd.result(1).bytes, sgd.input(2).bytes);
}

} // namespace
} // namespace zcc::test
