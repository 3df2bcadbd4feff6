//===- CudaKernelsNormalizeTest.cpp - Row ops, reductions and losses ------===//
//
// The cuda kernels of Normalize.cpp, Reduce.cpp and Loss.cpp against their
// cpu references (CudaConformance.h), in every dtype each supports, with
// shapes that take each launch path: short rows (a warp each) and long ones
// (a block each), axes with inner > 1 (column tiles), tails that are not
// multiples of a block, reductions long enough to be split over blocks, and
// empty tensors. Also: the same refusals as the cpu, results that are
// bitwise reproducible, and out-of-range labels (which the cpu refuses on
// the host) treated as ignored.
//
//===----------------------------------------------------------------------===//

#include "test/Runtime/CudaConformance.h"
#include "test/Runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace zcc::test {
namespace {

using plan::DType;

constexpr DType kFloatTypes[] = {plan::F32, plan::F64, plan::F16, plan::BF16};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Mixed absolute/relative tolerance per dtype: `f32` for f32 (1e-5, or
/// 1e-4 for long reductions).
double tolerance(DType dtype, double f32 = 1e-5) {
  switch (dtype) {
  case plan::F64:
    return 1e-10;
  case plan::F32:
    return f32;
  default:
    return 1e-2;
  }
}

std::string dtypeLabel(DType dtype) { return cpu::dtypeName(dtype); }

Tensor random(DType dtype, std::vector<int64_t> shape, uint32_t seed,
              double lo = -2, double hi = 2) {
  int64_t n = countOf(shape);
  return encode(dtype, std::move(shape), randomValues(n, seed, lo, hi));
}

/// Runs `call` on both backends and compares each output relative to the
/// cpu's value (|cuda - cpu| <= tolerance * max(|cpu|, floor)): for results
/// far below 1 (probabilities over a large vocabulary), which the mixed
/// tolerance of expectCudaMatchesCpu would not check.
void expectCudaMatchesCpuRelative(const Call &call, DType dtype) {
  double relative = dtype == plan::F64   ? 1e-10
                    : dtype == plan::F32 ? 1e-4
                                         : 1e-2;
  // f16 has subnormals below 6e-5: compare those absolutely.
  double floor = dtype == plan::F16 ? 1e-4 : 1e-30;
  Call reference = call, actual = call;
  Status cpuStatus = reference.run();
  ASSERT_TRUE(cpuStatus.isOk()) << "cpu: " << cpuStatus.toString();
  Status cudaStatus = runOnCuda(actual);
  ASSERT_TRUE(cudaStatus.isOk()) << "cuda: " << cudaStatus.toString();
  for (size_t i = 0; i < actual.outputCount(); ++i) {
    std::vector<double> a = actual.values(i), e = reference.values(i);
    ASSERT_EQ(a.size(), e.size());
    int failures = 0;
    for (size_t k = 0; k < a.size() && failures < 10; ++k) {
      if (std::isnan(e[k]) || std::isinf(e[k])) {
        bool same = std::isnan(e[k]) ? std::isnan(a[k]) : a[k] == e[k];
        EXPECT_TRUE(same) << call.kernel() << " output " << i << " at " << k
                          << ": " << a[k] << " vs " << e[k];
        failures += same ? 0 : 1;
        continue;
      }
      double bound = relative * std::max(std::fabs(e[k]), floor);
      bool close = std::fabs(a[k] - e[k]) <= bound;
      EXPECT_TRUE(close) << call.kernel() << " output " << i << " at " << k
                         << ": " << a[k] << " vs " << e[k] << " ("
                         << dtypeLabel(dtype) << ")";
      failures += close ? 0 : 1;
    }
  }
}

/// Runs `call` twice on the cuda kernel and expects identical bytes.
void expectCudaReproducible(const Call &call) {
  Call first = call, second = call;
  ASSERT_OK(runOnCuda(first));
  ASSERT_OK(runOnCuda(second));
  for (size_t i = 0; i < first.outputCount(); ++i)
    EXPECT_EQ(first.result(i).bytes, second.result(i).bytes)
        << call.kernel() << " output " << i << " differs between runs";
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax and their gradients
//===----------------------------------------------------------------------===//

struct AxisCase {
  std::vector<int64_t> shape;
  int64_t axis;
};

// Short rows (a warp each), long rows with tails (a block each), and axes
// with inner > 1 (column tiles of 8 and of 32 columns, several tiles).
const AxisCase kAxisCases[] = {
    {{33, 100}, -1}, {{7, 1000}, 1},    {{3, 5000}, -1},
    {{4, 37, 5}, 1}, {{3, 300, 70}, 1}, {{2, 3, 4, 5}, 0},
};

TEST(CudaKernelsNormalize, Softmax) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1;
  for (const char *kernel : {"softmax", "log_softmax"})
    for (DType dtype : kFloatTypes)
      for (const AxisCase &c : kAxisCases) {
        SCOPED_TRACE(std::string(kernel) + " " + dtypeLabel(dtype));
        Call call(kernel);
        call.in(random(dtype, c.shape, seed++, -4, 4))
            .out(dtype, c.shape)
            .intAttr("axis", c.axis);
        expectCudaMatchesCpuRelative(call, dtype);
      }
}

// Large offsets, -inf entries (exp gives 0), a row of only -inf and a row
// with a NaN (both NaN throughout, as on the cpu), and a result written
// over its input.
TEST(CudaKernelsNormalize, SoftmaxSpecialValues) {
  ZCC_REQUIRE_GPU();
  constexpr int64_t kLength = 300;
  std::vector<double> values = randomValues(5 * kLength, 7, -3, 3);
  for (int64_t i = 0; i < kLength; ++i) {
    values[i] += 1e4;
    if (i % 3 == 0)
      values[kLength + i] = -kInf;
    values[2 * kLength + i] = -kInf;
  }
  values[3 * kLength + 123] = kNaN;
  values[4 * kLength + 5] = -kInf; // A lane whose first element is -inf.
  for (const char *kernel : {"softmax", "log_softmax"})
    for (DType dtype : {plan::F32, plan::F64})
      for (int64_t length : {kLength, int64_t{60}}) {
        SCOPED_TRACE(std::string(kernel) + " " + dtypeLabel(dtype));
        std::vector<double> rows;
        for (int r = 0; r < 5; ++r)
          rows.insert(rows.end(), values.begin() + r * kLength,
                      values.begin() + r * kLength + length);
        Call call(kernel);
        call.in(encode(dtype, {5, length}, rows))
            .out(dtype, {5, length})
            .intAttr("axis", 1);
        expectCudaMatchesCpu(call, tolerance(dtype));
        Call inPlace(kernel);
        inPlace.in(encode(dtype, {5, length}, rows))
            .inPlace(0)
            .intAttr("axis", -1);
        expectCudaMatchesCpu(inPlace, tolerance(dtype));
      }
}

TEST(CudaKernelsNormalize, SoftmaxGrad) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 100;
  for (const char *kernel : {"softmax_grad", "log_softmax_grad"})
    for (DType dtype : kFloatTypes)
      for (const AxisCase &c : kAxisCases) {
        SCOPED_TRACE(std::string(kernel) + " " + dtypeLabel(dtype));
        Call call(kernel);
        call.in(random(dtype, c.shape, seed, -1, 1))
            .in(random(dtype, c.shape, seed + 1))
            .out(dtype, c.shape)
            .intAttr("axis", c.axis);
        expectCudaMatchesCpu(call, tolerance(dtype, 1e-4));
        seed += 2;
      }
}

// The result may be either input's buffer: each row is read in full before
// it is written.
TEST(CudaKernelsNormalize, SoftmaxGradInPlace) {
  ZCC_REQUIRE_GPU();
  for (const char *kernel : {"softmax_grad", "log_softmax_grad"})
    for (size_t alias : {0, 1})
      for (const AxisCase &c : {AxisCase{{9, 1500}, 1}, AxisCase{{40, 64}, 1},
                                AxisCase{{3, 50, 20}, 1}}) {
        Call call(kernel);
        call.in(random(plan::F32, c.shape, 11, -1, 1))
            .in(random(plan::F32, c.shape, 12))
            .inPlace(alias)
            .intAttr("axis", c.axis);
        expectCudaMatchesCpu(call, 1e-4);
      }
}

//===----------------------------------------------------------------------===//
// layer_norm, layer_norm_grad
//===----------------------------------------------------------------------===//

// Rows kept in registers (up to 2048 columns, 1024 in f64) of GPT-2 XL's
// width, short, and of two normalised dimensions; wider rows (a block each,
// re-read per pass), 1500 columns among them only in f64; widths that are
// not multiples of a warp or a block.
const AxisCase kLayerNormCases[] = {
    {{16, 1600}, -1}, {{37, 100}, 1},   {{2, 3, 300}, 1},
    {{5, 7, 3}, 1},   {{300, 1000}, 1}, {{2048, 64}, 1},
    {{4, 3000}, -1},  {{3, 1500}, 1},   {{2, 2, 2100}, 2},
};

Call layerNormCall(DType dtype, const AxisCase &c, uint32_t seed) {
  std::vector<int64_t> normalized(
      c.shape.begin() + (c.axis < 0 ? c.axis + c.shape.size() : c.axis),
      c.shape.end());
  Call call("layer_norm");
  call.in(random(dtype, c.shape, seed, -3, 5))
      .in(random(dtype, normalized, seed + 1, 0.5, 2))
      .in(random(dtype, normalized, seed + 2))
      .out(dtype, c.shape)
      .intAttr("axis", c.axis)
      .floatAttr("epsilon", 1e-5);
  return call;
}

Call layerNormGradCall(DType dtype, const AxisCase &c, uint32_t seed,
                       int inPlace = -1, bool addend = false) {
  std::vector<int64_t> normalized(
      c.shape.begin() + (c.axis < 0 ? c.axis + c.shape.size() : c.axis),
      c.shape.end());
  Call call("layer_norm_grad");
  call.in(random(dtype, c.shape, seed, -3, 5))
      .in(random(dtype, normalized, seed + 1, 0.5, 2))
      .in(random(dtype, c.shape, seed + 2));
  if (addend)
    call.in(random(dtype, c.shape, seed + 3));
  if (inPlace >= 0)
    call.inPlace(static_cast<size_t>(inPlace));
  else
    call.out(dtype, c.shape);
  call.out(dtype, normalized)
      .out(dtype, normalized)
      .intAttr("axis", c.axis)
      .floatAttr("epsilon", 1e-5);
  return call;
}

TEST(CudaKernelsNormalize, LayerNorm) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 200;
  for (DType dtype : kFloatTypes)
    for (const AxisCase &c : kLayerNormCases) {
      SCOPED_TRACE(dtypeLabel(dtype));
      expectCudaMatchesCpu(layerNormCall(dtype, c, seed), tolerance(dtype));
      seed += 3;
    }
}

// scale_grad and bias_grad sum over every row: [300, 1000] splits the rows
// into chunks of 30 rows, [2048, 64] into 64 chunks, [1000, 1600] (GPT-2
// XL's width) into 21 chunks, combined by tiles of 32 columns. Where the
// input gradient has its own buffer its kernel finds the rows' statistics
// for the sums (layer_norm's, the same values); LayerNormGradInPlace
// covers the other order.
TEST(CudaKernelsNormalize, LayerNormGrad) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 300;
  for (DType dtype : kFloatTypes) {
    for (const AxisCase &c : kLayerNormCases) {
      SCOPED_TRACE(dtypeLabel(dtype));
      expectCudaMatchesCpu(layerNormGradCall(dtype, c, seed),
                           tolerance(dtype, 1e-4));
      seed += 3;
    }
    SCOPED_TRACE(dtypeLabel(dtype));
    expectCudaMatchesCpu(layerNormGradCall(dtype, {{1000, 1600}, 1}, seed),
                         tolerance(dtype, 1e-4));
  }
}

// input_grad may be the input's or the incoming gradient's buffer.
TEST(CudaKernelsNormalize, LayerNormGradInPlace) {
  ZCC_REQUIRE_GPU();
  for (int alias : {0, 2})
    for (const AxisCase &c : {AxisCase{{64, 768}, 1}, AxisCase{{50, 20}, 1}})
      expectCudaMatchesCpu(layerNormGradCall(plan::F32, c, 400, alias), 1e-4);
}

// With an addend (the residual stream's gradient) joining the input
// gradient before it is rounded, in every row kernel; input_grad may be
// the addend's buffer too.
TEST(CudaKernelsNormalize, LayerNormGradAddend) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 500;
  for (DType dtype : kFloatTypes)
    for (const AxisCase &c : kLayerNormCases) {
      SCOPED_TRACE(dtypeLabel(dtype));
      expectCudaMatchesCpu(layerNormGradCall(dtype, c, seed, -1, /*addend=*/true),
                           tolerance(dtype, 1e-4));
      seed += 4;
    }
  for (int alias : {0, 2, 3})
    for (const AxisCase &c : {AxisCase{{64, 1600}, 1}, AxisCase{{50, 20}, 1}})
      expectCudaMatchesCpu(layerNormGradCall(plan::BF16, c, 600, alias, /*addend=*/true),
                           tolerance(plan::BF16, 1e-4));
}

// No rows: the parameter gradients are sums over nothing, zero.
TEST(CudaKernelsNormalize, LayerNormGradNoRows) {
  ZCC_REQUIRE_GPU();
  expectCudaMatchesCpu(layerNormGradCall(plan::F32, {{0, 8}, 1}, 410), 0);
  expectCudaMatchesCpu(layerNormCall(plan::F32, {{0, 8}, 1}, 410), 0);
}

TEST(CudaKernelsNormalize, RefusesLikeCpu) {
  ZCC_REQUIRE_GPU();
  Call axis("softmax");
  axis.in(random(plan::F32, {2, 3}, 1))
      .out(plan::F32, {2, 3})
      .intAttr("axis", 2);
  expectCudaRefusesLikeCpu(axis);

  Call integer("log_softmax");
  integer.in(i64({2}, {1, 2})).out(plan::I64, {2}).intAttr("axis", 0);
  expectCudaRefusesLikeCpu(integer);

  Call like("softmax_grad");
  like.in(random(plan::F32, {2, 3}, 1))
      .in(random(plan::F64, {2, 3}, 2))
      .out(plan::F32, {2, 3})
      .intAttr("axis", 1);
  expectCudaRefusesLikeCpu(like);

  Call scale("layer_norm");
  scale.in(random(plan::F32, {2, 3}, 1))
      .in(random(plan::F32, {2}, 2))
      .in(random(plan::F32, {3}, 3))
      .out(plan::F32, {2, 3})
      .intAttr("axis", 1)
      .floatAttr("epsilon", 1e-5);
  expectCudaRefusesLikeCpu(scale);

  Call epsilon = layerNormGradCall(plan::F32, {{2, 3}, 1}, 5);
  epsilon.floatAttr("epsilon", 0);
  expectCudaRefusesLikeCpu(epsilon);

  Call outputs("layer_norm_grad");
  outputs.in(random(plan::F32, {3}, 1))
      .in(random(plan::F32, {3}, 2))
      .in(random(plan::F32, {3}, 3))
      .out(plan::F32, {3})
      .intAttr("axis", 0)
      .floatAttr("epsilon", 1e-5);
  expectCudaRefusesLikeCpu(outputs);
}

//===----------------------------------------------------------------------===//
// reduce_sum, reduce_mean, reduce_max
//===----------------------------------------------------------------------===//

struct ReduceCase {
  std::vector<int64_t> shape;
  std::vector<int64_t> axes;
  bool keepdims;
};

/// The result shape of reducing `c`.
std::vector<int64_t> reducedShape(const ReduceCase &c) {
  std::vector<int64_t> result;
  int64_t rank = static_cast<int64_t>(c.shape.size());
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = false;
    for (int64_t axis : c.axes)
      reduced |= (axis < 0 ? axis + rank : axis) == d;
    if (!reduced)
      result.push_back(c.shape[d]);
    else if (c.keepdims)
      result.push_back(1);
  }
  return result;
}

// The innermost dimension reduced (a block per result) or kept (32 results
// per block); a long reduction with few results (split into chunks over
// blocks, both ways); interleaved kept and reduced dimensions; unit
// dimensions; no axes; and empty tensors (a sum over nothing is 0, a mean
// NaN, a maximum -inf). Leading dimensions reduced over a contiguous kept
// row whose width is a multiple of 8 (a bias gradient) take the 16-byte
// column kernel, with and without chunks; [8, 512, 1600] (a GPT-2 XL bias
// gradient's shape, halved) splits into 32 chunks of 128 rows in 16 bits.
const ReduceCase kReduceCases[] = {
    {{8, 100, 64}, {0, 1}, false},
    {{8, 512, 1600}, {0, 1}, false},
    {{2, 5000, 24}, {0, 1}, true},
    {{16384, 48}, {0}, false},
    {{37, 1000}, {1}, true},
    {{37, 1000}, {0}, false},
    {{6, 50, 70}, {0, 2}, true},
    {{6, 50, 70}, {1}, false},
    {{6, 50, 70}, {0, 1, 2}, false},
    {{100003}, {0}, true},
    {{20000, 3}, {0}, false},
    {{3, 20000}, {-1}, false},
    {{4, 1, 9, 1, 5}, {1, 2, 4}, true},
    {{5, 7}, {}, true},
    {{1000, 40}, {1}, false},
    {{0, 5}, {0}, true},
    {{4, 0}, {0}, false},
};

TEST(CudaKernelsNormalize, ReduceFloat) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 500;
  for (const char *kernel : {"reduce_sum", "reduce_mean", "reduce_max"})
    for (DType dtype : kFloatTypes)
      for (const ReduceCase &c : kReduceCases) {
        SCOPED_TRACE(std::string(kernel) + " " + dtypeLabel(dtype) + " case " +
                     std::to_string(&c - kReduceCases));
        Call call(kernel);
        call.in(random(dtype, c.shape, seed++))
            .out(dtype, reducedShape(c))
            .intsAttr("axes", c.axes)
            .boolAttr("keepdims", c.keepdims);
        expectCudaMatchesCpu(call, tolerance(dtype, 1e-4));
      }
}

// Integer sums wrap modulo 2^64 (then to the type), as on the cpu.
TEST(CudaKernelsNormalize, ReduceInteger) {
  ZCC_REQUIRE_GPU();
  std::mt19937_64 rng(600);
  for (const char *kernel : {"reduce_sum", "reduce_max"})
    for (const ReduceCase &c : kReduceCases) {
      SCOPED_TRACE(std::string(kernel) + " case " +
                   std::to_string(&c - kReduceCases));
      int64_t n = countOf(c.shape);
      std::vector<int64_t> big(n);
      std::vector<int32_t> small(n);
      for (int64_t i = 0; i < n; ++i) {
        big[i] = static_cast<int64_t>(rng()); // Sums overflow.
        small[i] = static_cast<int32_t>(rng() % 2000001) - 1000000;
      }
      Call wide(kernel);
      wide.in(i64(c.shape, big))
          .out(plan::I64, reducedShape(c))
          .intsAttr("axes", c.axes)
          .boolAttr("keepdims", c.keepdims);
      expectCudaMatchesCpu(wide, 0);
      Call narrow(kernel);
      narrow.in(i32(c.shape, small))
          .out(plan::I32, reducedShape(c))
          .intsAttr("axes", c.axes)
          .boolAttr("keepdims", c.keepdims);
      expectCudaMatchesCpu(narrow, 0);
    }
}

// NaN wins in reduce_max (as torch.amax); -inf is an ordinary value.
TEST(CudaKernelsNormalize, ReduceMaxNaN) {
  ZCC_REQUIRE_GPU();
  std::vector<double> values = randomValues(4 * 3000, 610);
  values[3000 + 1234] = kNaN;
  values[2 * 3000 + 7] = kNaN;
  for (int64_t i = 0; i < 3000; ++i)
    values[3 * 3000 + i] = -kInf;
  for (DType dtype : kFloatTypes) {
    for (int64_t axis : {0, 1}) {
      Call call("reduce_max");
      call.in(encode(dtype, {4, 3000}, values))
          .out(dtype,
               axis == 1 ? std::vector<int64_t>{4} : std::vector<int64_t>{3000})
          .intsAttr("axes", {axis})
          .boolAttr("keepdims", false);
      expectCudaMatchesCpu(call, 0);
    }
  }
}

TEST(CudaKernelsNormalize, ReduceRefusesLikeCpu) {
  ZCC_REQUIRE_GPU();
  Call mean("reduce_mean");
  mean.in(i32({2, 2}, {1, 2, 3, 4}))
      .out(plan::I32, {2, 1})
      .intsAttr("axes", {1});
  expectCudaRefusesLikeCpu(mean);

  Call twice("reduce_sum");
  twice.in(random(plan::F32, {2, 3}, 1))
      .out(plan::F32, {1, 1})
      .intsAttr("axes", {1, -1});
  expectCudaRefusesLikeCpu(twice);

  Call shape("reduce_max");
  shape.in(random(plan::F32, {2, 3}, 1))
      .out(plan::F32, {2})
      .intsAttr("axes", {1});
  expectCudaRefusesLikeCpu(shape);

  Call boolean("reduce_sum");
  boolean.in(makeTensor<uint8_t>(plan::BOOL, {2}, {1, 0}))
      .out(plan::BOOL, {1})
      .intsAttr("axes", {0});
  expectCudaRefusesLikeCpu(boolean);
}

//===----------------------------------------------------------------------===//
// cross_entropy, nll_loss and their gradients
//===----------------------------------------------------------------------===//

struct ClassLossCase {
  std::vector<int64_t> shape; // [N, C, d1, ...]
  bool int32Labels;
  bool hasIgnore;
};

std::vector<int64_t> labelShapeOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> labels = {shape[0]};
  labels.insert(labels.end(), shape.begin() + 2, shape.end());
  return labels;
}

/// Random labels in [0, classes), about one in five set to -100 when
/// `hasIgnore`.
Tensor randomLabels(const ClassLossCase &c, uint32_t seed) {
  std::vector<int64_t> shape = labelShapeOf(c.shape);
  std::mt19937 rng(seed);
  std::vector<int64_t> labels(countOf(shape));
  for (int64_t &label : labels)
    label = c.hasIgnore && rng() % 5 == 0 ? -100 : rng() % c.shape[1];
  if (c.int32Labels)
    return i32(shape, std::vector<int32_t>(labels.begin(), labels.end()));
  return i64(shape, labels);
}

// Short rows (a warp each) and long ones (a block each), rows with a
// vocabulary of GPT-2's size, and classes on axis 1 of [N, C, d1] (column
// tiles).
const ClassLossCase kClassLossCases[] = {
    {{100, 50}, false, false},   {{64, 1000}, true, true},
    {{8, 50304}, false, true},   {{4, 7, 33}, true, true},
    {{3, 300, 5}, false, false}, {{2, 5, 3, 4}, false, true},
};

void setClassLossAttributes(Call &call, const ClassLossCase &c,
                            const char *reduction) {
  call.stringAttr("reduction", reduction);
  if (c.hasIgnore)
    call.intAttr("ignore_index", -100);
}

TEST(CudaKernelsNormalize, ClassLoss) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 700;
  for (const char *kernel : {"cross_entropy", "nll_loss"})
    for (DType dtype : kFloatTypes)
      for (const ClassLossCase &c : kClassLossCases)
        for (const char *reduction : {"mean", "sum", "none"}) {
          SCOPED_TRACE(std::string(kernel) + " " + dtypeLabel(dtype) + " " +
                       reduction + " case " +
                       std::to_string(&c - kClassLossCases));
          bool none = std::string(reduction) == "none";
          Call call(kernel);
          call.in(random(dtype, c.shape, seed, -4, 4))
              .in(randomLabels(c, seed + 1))
              .out(dtype,
                   none ? labelShapeOf(c.shape) : std::vector<int64_t>{});
          setClassLossAttributes(call, c, reduction);
          expectCudaMatchesCpu(call, tolerance(dtype, 1e-4));
          seed += 2;
        }
}

TEST(CudaKernelsNormalize, ClassLossGrad) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 800;
  for (const char *kernel : {"cross_entropy_grad", "nll_loss_grad"})
    for (DType dtype : kFloatTypes)
      for (const ClassLossCase &c : kClassLossCases)
        for (const char *reduction : {"mean", "sum", "none"}) {
          SCOPED_TRACE(std::string(kernel) + " " + dtypeLabel(dtype) + " " +
                       reduction + " case " +
                       std::to_string(&c - kClassLossCases));
          bool none = std::string(reduction) == "none";
          std::vector<int64_t> gradShape =
              none ? labelShapeOf(c.shape) : std::vector<int64_t>{};
          Call call(kernel);
          call.in(random(dtype, c.shape, seed, -4, 4))
              .in(randomLabels(c, seed + 1))
              .in(random(dtype, gradShape, seed + 2, 0.5, 2))
              .out(dtype, c.shape);
          setClassLossAttributes(call, c, reduction);
          expectCudaMatchesCpuRelative(call, dtype);
          seed += 3;
        }
}

// An f32 input's gradient written in bf16 or f16 (mixed precision's cast
// folded in): each value computed in f32 and rounded once, as the cpu.
TEST(CudaKernelsNormalize, ClassLossGradInSixteenBits) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 850;
  for (const char *kernel : {"cross_entropy_grad", "nll_loss_grad"})
    for (DType narrow : {plan::BF16, plan::F16})
      for (const ClassLossCase &c : kClassLossCases) {
        SCOPED_TRACE(std::string(kernel) + " " + dtypeLabel(narrow) + " case " +
                     std::to_string(&c - kClassLossCases));
        Call call(kernel);
        call.in(random(plan::F32, c.shape, seed, -4, 4))
            .in(randomLabels(c, seed + 1))
            .in(random(plan::F32, {}, seed + 2, 0.5, 2))
            .out(narrow, c.shape);
        setClassLossAttributes(call, c, "mean");
        expectCudaMatchesCpuRelative(call, narrow);
        seed += 3;
      }
}

// The gradient may overwrite the logits.
TEST(CudaKernelsNormalize, CrossEntropyGradInPlace) {
  ZCC_REQUIRE_GPU();
  for (const ClassLossCase &c : kClassLossCases) {
    Call call("cross_entropy_grad");
    call.in(random(plan::F32, c.shape, 900, -4, 4))
        .in(randomLabels(c, 901))
        .in(encode(plan::F32, {}, {1.5}))
        .inPlace(0);
    setClassLossAttributes(call, c, "mean");
    expectCudaMatchesCpuRelative(call, plan::F32);
  }
}

// Every label ignored: the mean is 0 / 0 (NaN) and the gradient zero.
TEST(CudaKernelsNormalize, ClassLossAllIgnored) {
  ZCC_REQUIRE_GPU();
  for (const char *kernel : {"cross_entropy", "nll_loss"}) {
    Call call(kernel);
    call.in(random(plan::F32, {3, 400}, 1))
        .in(i64({3}, {5, 5, 5}))
        .out(plan::F32, {})
        .intAttr("ignore_index", 5);
    expectCudaMatchesCpu(call, 0);
  }
  for (const char *kernel : {"cross_entropy_grad", "nll_loss_grad"}) {
    Call call(kernel);
    call.in(random(plan::F32, {3, 400}, 1))
        .in(i64({3}, {5, 5, 5}))
        .in(encode(plan::F32, {}, {1.0}))
        .out(plan::F32, {3, 400})
        .intAttr("ignore_index", 5);
    expectCudaMatchesCpu(call, 0);
  }
}

// The cpu refuses out-of-range labels after reading them on the host; the
// cuda kernels cannot read device labels without synchronising, so they
// treat them as ignored (and never touch memory out of bounds): the same
// results as the cpu's with those labels set to ignore_index.
TEST(CudaKernelsNormalize, OutOfRangeLabelsAreIgnored) {
  ZCC_REQUIRE_GPU();
  for (int64_t classes : {int64_t{5}, int64_t{3000}}) {
    std::vector<int64_t> bad = {1, classes, 0, -3, 2, classes + 1000};
    std::vector<int64_t> ignored = {1, -100, 0, -100, 2, -100};
    Tensor input = random(plan::F32, {6, classes}, 950, -3, 3);
    for (const char *kernel :
         {"cross_entropy", "nll_loss", "cross_entropy_grad", "nll_loss_grad"})
      for (const char *reduction : {"mean", "none"}) {
        SCOPED_TRACE(std::string(kernel) + " " + reduction);
        bool grad = std::string(kernel).find("_grad") != std::string::npos;
        bool none = std::string(reduction) == "none";
        std::vector<int64_t> lossShape =
            none ? std::vector<int64_t>{6} : std::vector<int64_t>{};
        auto build = [&](const std::vector<int64_t> &labels, bool withIgnore) {
          Call call(kernel);
          call.in(input).in(i64({6}, labels));
          if (grad)
            call.in(random(plan::F32, lossShape, 951, 0.5, 2))
                .out(plan::F32, {6, classes});
          else
            call.out(plan::F32, lossShape);
          call.stringAttr("reduction", reduction);
          if (withIgnore)
            call.intAttr("ignore_index", -100);
          return call;
        };
        Call reference = build(ignored, true), actual = build(bad, false);
        ASSERT_OK(reference.run());
        ASSERT_OK(runOnCuda(actual));
        for (size_t i = 0; i < actual.outputCount(); ++i)
          expectNear(actual.values(i), reference.values(i), 1e-5, kernel);
      }
  }
}

TEST(CudaKernelsNormalize, ClassLossRefusesLikeCpu) {
  ZCC_REQUIRE_GPU();
  Call labels("cross_entropy");
  labels.in(random(plan::F32, {2, 5}, 1))
      .in(random(plan::F32, {2}, 2))
      .out(plan::F32, {});
  expectCudaRefusesLikeCpu(labels);

  Call reduction("nll_loss");
  reduction.in(random(plan::F32, {2, 5}, 1))
      .in(i64({2}, {1, 2}))
      .out(plan::F32, {})
      .stringAttr("reduction", "max");
  expectCudaRefusesLikeCpu(reduction);

  Call labelShape("cross_entropy");
  labelShape.in(random(plan::F32, {2, 5, 3}, 1))
      .in(i64({2}, {1, 2}))
      .out(plan::F32, {});
  expectCudaRefusesLikeCpu(labelShape);

  Call gradShape("cross_entropy_grad");
  gradShape.in(random(plan::F32, {2, 5}, 1))
      .in(i64({2}, {1, 2}))
      .in(random(plan::F32, {}, 2))
      .out(plan::F32, {2, 5})
      .stringAttr("reduction", "none");
  expectCudaRefusesLikeCpu(gradShape);

  Call rank("nll_loss_grad");
  rank.in(random(plan::F32, {5}, 1))
      .in(i64({1}, {1}))
      .in(random(plan::F32, {}, 2))
      .out(plan::F32, {5});
  expectCudaRefusesLikeCpu(rank);
}

//===----------------------------------------------------------------------===//
// mse_loss, mse_loss_grad
//===----------------------------------------------------------------------===//

TEST(CudaKernelsNormalize, MseLoss) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1000;
  for (DType dtype : kFloatTypes)
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{5}, {1000, 37}, {3, 100003}, {0}}) {
      SCOPED_TRACE(dtypeLabel(dtype));
      Call loss("mse_loss");
      loss.in(random(dtype, shape, seed))
          .in(random(dtype, shape, seed + 1))
          .out(dtype, {});
      expectCudaMatchesCpu(loss, tolerance(dtype, 1e-4));
      Call grad("mse_loss_grad");
      grad.in(random(dtype, shape, seed))
          .in(random(dtype, shape, seed + 1))
          .in(random(dtype, {}, seed + 2, 0.5, 2))
          .out(dtype, shape);
      expectCudaMatchesCpu(grad, tolerance(dtype));
      seed += 3;
    }
}

TEST(CudaKernelsNormalize, MseLossRefusesLikeCpu) {
  ZCC_REQUIRE_GPU();
  Call shape("mse_loss");
  shape.in(random(plan::F32, {2, 3}, 1))
      .in(random(plan::F32, {3, 2}, 2))
      .out(plan::F32, {});
  expectCudaRefusesLikeCpu(shape);

  Call grad("mse_loss_grad");
  grad.in(random(plan::F32, {2, 3}, 1))
      .in(random(plan::F32, {2, 3}, 2))
      .in(random(plan::F32, {1}, 3))
      .out(plan::F32, {2, 3});
  expectCudaRefusesLikeCpu(grad);

  Call integer("mse_loss");
  integer.in(i32({2}, {1, 2})).in(i32({2}, {1, 2})).out(plan::I32, {});
  expectCudaRefusesLikeCpu(integer);
}

//===----------------------------------------------------------------------===//
// Reproducibility
//===----------------------------------------------------------------------===//

// Sums split over blocks are combined in a fixed order, without atomics:
// the same inputs give the same bits on every run.
TEST(CudaKernelsNormalize, Reproducible) {
  ZCC_REQUIRE_GPU();
  Call sum("reduce_sum");
  sum.in(random(plan::F32, {1 << 20}, 1))
      .out(plan::F32, {1})
      .intsAttr("axes", {0});
  expectCudaReproducible(sum);
  Call columns("reduce_mean");
  columns.in(random(plan::F32, {4096, 64}, 2))
      .out(plan::F32, {64})
      .intsAttr("axes", {0})
      .boolAttr("keepdims", false);
  expectCudaReproducible(columns);
  expectCudaReproducible(layerNormGradCall(plan::F32, {{2048, 256}, 1}, 3));
  Call loss("cross_entropy");
  loss.in(random(plan::F32, {512, 1000}, 4))
      .in(randomLabels({{512, 1000}, false, true}, 5))
      .out(plan::F32, {})
      .intAttr("ignore_index", -100);
  expectCudaReproducible(loss);
  Call mse("mse_loss");
  mse.in(random(plan::F32, {300000}, 6))
      .in(random(plan::F32, {300000}, 7))
      .out(plan::F32, {});
  expectCudaReproducible(mse);
}

} // namespace
} // namespace zcc::test
