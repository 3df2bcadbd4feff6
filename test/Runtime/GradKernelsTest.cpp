//===- GradKernelsTest.cpp - Backward, accumulation and optimizer kernels -===//
//
// Every gradient kernel against central finite differences of its forward
// kernel (findKernel("softmax") for softmax_grad, ...) on small random
// inputs in f64, then in f32, f16 and bf16 against its own f64 result; the
// optimizer steps against hand-written double references of torch.optim's
// formulas over several steps; and the errors each kernel must report
// instead of crashing. Built a second time with ZCC_COUNT_ALLOCATIONS, every
// successful kernel call must also make no allocation.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Float16.h"
#include "test/Runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <optional>
#include <vector>

namespace zcc::cpu {
namespace {

using namespace test;
using plan::DType;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

//===----------------------------------------------------------------------===//
// Test tensors and kernel calls
//===----------------------------------------------------------------------===//

Tensor f32(std::vector<int64_t> shape, const std::vector<double> &values) {
  return encode(plan::F32, std::move(shape), values);
}

//===----------------------------------------------------------------------===//
// Finite differences
//===----------------------------------------------------------------------===//

/// The dtype the forward kernels run in for the finite differences, and the
/// step and tolerance that go with it: rounding error ~ eps / step,
/// truncation error ~ step^2.
constexpr DType kForward = plan::F64;
constexpr double kStep = 1e-5;
constexpr double kFiniteDifferenceTolerance = 1e-6;

using Objective = std::function<double(const std::vector<double> &)>;

/// d objective / d x_k by central differences, for every k.
std::vector<double> numericGradient(const Objective &objective,
                                    std::vector<double> x) {
  std::vector<double> gradient(x.size());
  for (size_t k = 0; k < x.size(); ++k) {
    double saved = x[k];
    x[k] = saved + kStep;
    double up = objective(x);
    x[k] = saved - kStep;
    double down = objective(x);
    x[k] = saved;
    gradient[k] = (up - down) / (2 * kStep);
  }
  return gradient;
}

double dot(const std::vector<double> &a, const std::vector<double> &b) {
  EXPECT_EQ(a.size(), b.size());
  double sum = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    sum += a[i] * b[i];
  return sum;
}

/// The kernel's gradient must match the numeric one, and the numeric one
/// must not be all but zero (a vanishing gradient would match anything
/// that writes zeros).
void expectGradient(const std::vector<double> &actual, const Objective &f,
                    const std::vector<double> &x, const std::string &what) {
  std::vector<double> numeric = numericGradient(f, x);
  double largest = 0;
  for (double g : numeric)
    largest = std::max(largest, std::fabs(g));
  EXPECT_GT(largest, 1e-3) << what << ": the test checks a vanishing gradient";
  expectNear(actual, numeric, kFiniteDifferenceTolerance, what);
}

/// Runs a set-up forward kernel call, returning its one result in double.
std::vector<double> runForward(Call &call) {
  Status status = call.run();
  EXPECT_TRUE(status.isOk()) << status.toString();
  return call.values();
}

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

TEST(GradKernels, EveryTrainingKernelIsRegistered) {
  for (const char *name :
       {"softmax_grad", "log_softmax_grad", "layer_norm_grad", "attention_grad",
        "cross_entropy_grad", "nll_loss_grad", "mse_loss_grad", "gather_grad",
        "slice_grad", "gelu_grad", "accumulate", "fill", "sum_squares", "adamw",
        "sgd"})
    EXPECT_NE(findKernel(name), nullptr) << name;
  std::vector<std::string> names = kernelNames();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

//===----------------------------------------------------------------------===//
// softmax_grad, log_softmax_grad
//===----------------------------------------------------------------------===//

void checkSoftmaxGrad(const char *forward, const char *backward,
                      std::vector<int64_t> shape, int64_t axis, uint32_t seed) {
  int64_t n = countOf(shape);
  std::vector<double> x = randomValues(n, seed, -3, 3);
  std::vector<double> dy = randomValues(n, seed + 1);
  auto run = [&](const std::vector<double> &input) {
    Call call(forward);
    call.in(encode(kForward, shape, input))
        .out(kForward, shape)
        .intAttr("axis", axis);
    return runForward(call);
  };
  Call grad(backward);
  grad.in(f64(shape, run(x)))
      .in(f64(shape, dy))
      .out(plan::F64, shape)
      .intAttr("axis", axis);
  ASSERT_OK(grad.run());
  expectGradient(
      grad.values(),
      [&](const std::vector<double> &input) { return dot(run(input), dy); }, x,
      std::string(backward) + " axis " + std::to_string(axis));
}

TEST(GradKernels, SoftmaxGradMatchesFiniteDifferences) {
  checkSoftmaxGrad("softmax", "softmax_grad", {2, 3, 4}, 1, 10);
  checkSoftmaxGrad("softmax", "softmax_grad", {2, 3, 4}, -1, 20);
  checkSoftmaxGrad("softmax", "softmax_grad", {5}, 0, 30);
}

TEST(GradKernels, LogSoftmaxGradMatchesFiniteDifferences) {
  checkSoftmaxGrad("log_softmax", "log_softmax_grad", {2, 3, 4}, 1, 40);
  checkSoftmaxGrad("log_softmax", "log_softmax_grad", {3, 4}, -1, 50);
  checkSoftmaxGrad("log_softmax", "log_softmax_grad", {4, 2}, 0, 60);
}

// The row is read in full before it is written: the result may be the
// gradient's own buffer.
TEST(GradKernels, SoftmaxGradInPlace) {
  std::vector<double> y = {0.1, 0.2, 0.7, 0.5, 0.25, 0.25};
  std::vector<double> dy = {1, -2, 0.5, 3, 1, -1};
  Call separate("softmax_grad");
  separate.in(f64({2, 3}, y)).in(f64({2, 3}, dy)).out(plan::F64, {2, 3});
  separate.intAttr("axis", 1);
  ASSERT_OK(separate.run());
  Call inPlace("softmax_grad");
  inPlace.in(f64({2, 3}, y)).in(f64({2, 3}, dy)).inPlace(1);
  inPlace.intAttr("axis", 1);
  ASSERT_OK(inPlace.run());
  // Hand-checked first row: sum(dy * y) = 0.1 - 0.4 + 0.35 = 0.05.
  expectNear(separate.values(),
             {0.1 * 0.95, 0.2 * -2.05, 0.7 * 0.45, 0.5 * 1.5, 0.25 * -0.5,
              0.25 * -2.5},
             1e-15);
  expectNear(inPlace.values(), separate.values(), 0);
}

TEST(GradKernels, SoftmaxGradErrors) {
  Call count("softmax_grad");
  count.in(f64({2}, {1, 2})).out(plan::F64, {2}).intAttr("axis", 0);
  expectError(count.run(), StatusCode::kInvalidArgument,
              {"softmax_grad", "expected 2 inputs, got 1"});

  Call integer("log_softmax_grad");
  integer.in(i32({2}, {1, 2})).in(i32({2}, {1, 2})).out(plan::I32, {2});
  integer.intAttr("axis", 0);
  expectError(integer.run(), StatusCode::kUnimplemented,
              {"log_softmax_grad", "'output' has element type i32",
               "f32, f64, f16 and bf16"});

  Call mixed("softmax_grad");
  mixed.in(f32({2}, {1, 2})).in(f64({2}, {1, 2})).out(plan::F32, {2});
  mixed.intAttr("axis", 0);
  expectError(mixed.run(), StatusCode::kInvalidArgument,
              {"softmax_grad", "'grad' has element type f64, but 'output' "
                               "has f32"});

  Call shape("softmax_grad");
  shape.in(f64({2, 3}, randomValues(6, 1)))
      .in(f64({3, 2}, randomValues(6, 2)))
      .out(plan::F64, {2, 3})
      .intAttr("axis", 0);
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"softmax_grad", "'grad' has shape [3, 2], but 'output' has "
                               "[2, 3]"});

  Call result("softmax_grad");
  result.in(f64({2}, {1, 2})).in(f64({2}, {1, 2})).out(plan::F64, {3});
  result.intAttr("axis", 0);
  expectError(result.run(), StatusCode::kInvalidArgument,
              {"softmax_grad", "'result' has shape [3], but 'output' has [2]"});

  Call missing("softmax_grad");
  missing.in(f64({2}, {1, 2})).in(f64({2}, {1, 2})).out(plan::F64, {2});
  expectError(missing.run(), StatusCode::kInvalidArgument,
              {"softmax_grad", "missing attribute 'axis'"});

  Call axis("softmax_grad");
  axis.in(f64({2}, {1, 2})).in(f64({2}, {1, 2})).out(plan::F64, {2});
  axis.intAttr("axis", 1);
  expectError(axis.run(), StatusCode::kInvalidArgument,
              {"softmax_grad", "axis 1 is out of range for rank 1"});
}

//===----------------------------------------------------------------------===//
// layer_norm_grad
//===----------------------------------------------------------------------===//

void checkLayerNormGrad(std::vector<int64_t> shape, int64_t axis,
                        double epsilon, uint32_t seed) {
  int64_t n = countOf(shape);
  int64_t a = axis < 0 ? axis + static_cast<int64_t>(shape.size()) : axis;
  std::vector<int64_t> normalized(shape.begin() + a, shape.end());
  int64_t columns = countOf(normalized);
  std::vector<double> x = randomValues(n, seed, -4, 4);
  std::vector<double> scale = randomValues(columns, seed + 1, 0.5, 2);
  std::vector<double> bias = randomValues(columns, seed + 2);
  std::vector<double> dy = randomValues(n, seed + 3);
  auto run = [&](const std::vector<double> &input,
                 const std::vector<double> &gamma,
                 const std::vector<double> &beta) {
    Call call("layer_norm");
    call.in(encode(kForward, shape, input))
        .in(encode(kForward, normalized, gamma))
        .in(encode(kForward, normalized, beta))
        .out(kForward, shape)
        .intAttr("axis", axis)
        .floatAttr("epsilon", epsilon);
    return runForward(call);
  };
  Call grad("layer_norm_grad");
  grad.in(f64(shape, x))
      .in(f64(normalized, scale))
      .in(f64(shape, dy))
      .out(plan::F64, shape)
      .out(plan::F64, normalized)
      .out(plan::F64, normalized)
      .intAttr("axis", axis)
      .floatAttr("epsilon", epsilon);
  ASSERT_OK(grad.run());
  std::string where = "axis " + std::to_string(axis);
  expectGradient(
      grad.values(0),
      [&](const std::vector<double> &v) {
        return dot(run(v, scale, bias), dy);
      },
      x, "input_grad, " + where);
  expectGradient(
      grad.values(1),
      [&](const std::vector<double> &v) { return dot(run(x, v, bias), dy); },
      scale, "scale_grad, " + where);
  expectGradient(
      grad.values(2),
      [&](const std::vector<double> &v) { return dot(run(x, scale, v), dy); },
      bias, "bias_grad, " + where);
}

TEST(GradKernels, LayerNormGradMatchesFiniteDifferences) {
  checkLayerNormGrad({2, 3, 4}, 1, 1e-5, 100);
  checkLayerNormGrad({2, 3, 4}, -1, 0.5, 110);
  checkLayerNormGrad({3, 5}, 0, 1e-5, 120);
}

// Rows wider than one block of column sums recompute their statistics per
// block; the sums must not depend on it.
TEST(GradKernels, LayerNormGradWideRows) {
  constexpr int64_t kRows = 3, kColumns = 2500;
  std::vector<double> x = randomValues(kRows * kColumns, 130, -4, 4);
  std::vector<double> scale = randomValues(kColumns, 131);
  std::vector<double> dy = randomValues(kRows * kColumns, 132);
  Call grad("layer_norm_grad");
  grad.in(f64({kRows, kColumns}, x))
      .in(f64({kColumns}, scale))
      .in(f64({kRows, kColumns}, dy))
      .out(plan::F64, {kRows, kColumns})
      .out(plan::F64, {kColumns})
      .out(plan::F64, {kColumns})
      .intAttr("axis", 1)
      .floatAttr("epsilon", 1e-5);
  ASSERT_OK(grad.run());
  // A naive reference in double.
  std::vector<double> dx(kRows * kColumns), dscale(kColumns), dbias(kColumns);
  for (int64_t r = 0; r < kRows; ++r) {
    const double *row = x.data() + r * kColumns;
    double mean = 0, variance = 0;
    for (int64_t c = 0; c < kColumns; ++c)
      mean += row[c] / kColumns;
    for (int64_t c = 0; c < kColumns; ++c)
      variance += (row[c] - mean) * (row[c] - mean) / kColumns;
    double rstd = 1 / std::sqrt(variance + 1e-5);
    double sumG = 0, sumGX = 0;
    for (int64_t c = 0; c < kColumns; ++c) {
      double xhat = (row[c] - mean) * rstd, g = dy[r * kColumns + c] * scale[c];
      dscale[c] += dy[r * kColumns + c] * xhat;
      dbias[c] += dy[r * kColumns + c];
      sumG += g;
      sumGX += g * xhat;
    }
    for (int64_t c = 0; c < kColumns; ++c) {
      double xhat = (row[c] - mean) * rstd, g = dy[r * kColumns + c] * scale[c];
      dx[r * kColumns + c] =
          rstd * (g - sumG / kColumns - xhat * sumGX / kColumns);
    }
  }
  expectNear(grad.values(0), dx, 1e-10, "input_grad");
  expectNear(grad.values(1), dscale, 1e-10, "scale_grad");
  expectNear(grad.values(2), dbias, 1e-10, "bias_grad");
}

// scale_grad and bias_grad are summed before input_grad is written, so
// input_grad may be the incoming gradient's buffer.
TEST(GradKernels, LayerNormGradInPlace) {
  std::vector<double> x = randomValues(12, 140), scale = randomValues(4, 141),
                      dy = randomValues(12, 142);
  auto call = [&](bool inPlace) {
    Call grad("layer_norm_grad");
    grad.in(f64({3, 4}, x)).in(f64({4}, scale)).in(f64({3, 4}, dy));
    if (inPlace)
      grad.inPlace(2);
    else
      grad.out(plan::F64, {3, 4});
    grad.out(plan::F64, {4}).out(plan::F64, {4});
    grad.intAttr("axis", 1).floatAttr("epsilon", 1e-5);
    EXPECT_OK(grad.run());
    return std::vector<std::vector<double>>{grad.values(0), grad.values(1),
                                            grad.values(2)};
  };
  auto separate = call(false), shared = call(true);
  for (int i = 0; i < 3; ++i)
    expectNear(shared[i], separate[i], 0, "output " + std::to_string(i));
}

// An addend joins the input gradient (the residual stream's gradient around
// the layer norm): in f64 the sum of the two computed apart, bit for bit,
// and the same where input_grad is the addend's own buffer. The parameter
// gradients do not see it.
TEST(GradKernels, LayerNormGradAddsTheAddend) {
  std::vector<double> x = randomValues(3 * 40, 150), scale = randomValues(40, 151),
                      dy = randomValues(3 * 40, 152), residual = randomValues(3 * 40, 153);
  auto call = [&](bool addend, bool inPlace) {
    Call grad("layer_norm_grad");
    grad.in(f64({3, 40}, x)).in(f64({40}, scale)).in(f64({3, 40}, dy));
    if (addend)
      grad.in(f64({3, 40}, residual));
    if (inPlace)
      grad.inPlace(3);
    else
      grad.out(plan::F64, {3, 40});
    grad.out(plan::F64, {40}).out(plan::F64, {40});
    grad.intAttr("axis", 1).floatAttr("epsilon", 1e-5);
    EXPECT_OK(grad.run());
    return std::vector<std::vector<double>>{grad.values(0), grad.values(1), grad.values(2)};
  };
  auto plain = call(false, false), added = call(true, false), shared = call(true, true);
  std::vector<double> expected = plain[0];
  for (size_t i = 0; i < expected.size(); ++i)
    expected[i] += residual[i];
  expectNear(added[0], expected, 0, "input_grad");
  for (int i = 0; i < 3; ++i)
    expectNear(shared[i], added[i], 0, "in place, output " + std::to_string(i));
  expectNear(added[1], plain[1], 0, "scale_grad");
  expectNear(added[2], plain[2], 0, "bias_grad");

  Call wrong("layer_norm_grad");
  wrong.in(f64({3, 40}, x)).in(f64({40}, scale)).in(f64({3, 40}, dy));
  wrong.in(f64({40, 3}, residual));
  wrong.out(plan::F64, {3, 40}).out(plan::F64, {40}).out(plan::F64, {40});
  wrong.intAttr("axis", 1).floatAttr("epsilon", 1e-5);
  expectError(wrong.run(), StatusCode::kInvalidArgument, {"layer_norm_grad", "'addend'"});
}

TEST(GradKernels, LayerNormGradErrors) {
  auto base = [](std::vector<int64_t> scaleShape,
                 std::vector<int64_t> scaleGradShape, double epsilon) {
    Call call("layer_norm_grad");
    call.in(f64({2, 3}, randomValues(6, 1)))
        .in(f64(scaleShape, randomValues(countOf(scaleShape), 2)))
        .in(f64({2, 3}, randomValues(6, 3)))
        .out(plan::F64, {2, 3})
        .out(plan::F64, scaleGradShape)
        .out(plan::F64, {3})
        .intAttr("axis", -1)
        .floatAttr("epsilon", epsilon);
    return call.run();
  };
  expectError(base({2}, {3}, 1e-5), StatusCode::kInvalidArgument,
              {"layer_norm_grad", "'scale' has shape [2], expected [3]"});
  expectError(
      base({3}, {2, 3}, 1e-5), StatusCode::kInvalidArgument,
      {"layer_norm_grad", "'scale_grad' has shape [2, 3], expected [3]"});
  expectError(base({3}, {3}, 0), StatusCode::kInvalidArgument,
              {"layer_norm_grad", "epsilon must be positive"});

  Call dtype("layer_norm_grad");
  dtype.in(f64({2, 3}, randomValues(6, 1)))
      .in(f32({3}, {1, 1, 1}))
      .in(f64({2, 3}, randomValues(6, 3)))
      .out(plan::F64, {2, 3})
      .out(plan::F64, {3})
      .out(plan::F64, {3})
      .intAttr("axis", 1)
      .floatAttr("epsilon", 1e-5);
  expectError(dtype.run(), StatusCode::kInvalidArgument,
              {"layer_norm_grad", "'scale' has element type f32, but 'input' "
                                  "has f64"});

  Call outputs("layer_norm_grad");
  outputs.in(f64({3}, {1, 2, 3}))
      .in(f64({3}, {1, 1, 1}))
      .in(f64({3}, {1, 1, 1}))
      .out(plan::F64, {3})
      .intAttr("axis", 0)
      .floatAttr("epsilon", 1e-5);
  expectError(outputs.run(), StatusCode::kInvalidArgument,
              {"layer_norm_grad", "expected 3 outputs, got 1"});
}

//===----------------------------------------------------------------------===//
// attention_grad
//===----------------------------------------------------------------------===//

struct AttentionCase {
  std::vector<int64_t> batch;
  int64_t tq, tk, d, dv;
  bool causal;
  double scale;
};

std::vector<int64_t> withLast(std::vector<int64_t> batch, int64_t rows,
                              int64_t columns) {
  batch.push_back(rows);
  batch.push_back(columns);
  return batch;
}

void checkAttentionGrad(const AttentionCase &c, uint32_t seed) {
  auto qShape = withLast(c.batch, c.tq, c.d),
       kShape = withLast(c.batch, c.tk, c.d),
       vShape = withLast(c.batch, c.tk, c.dv),
       oShape = withLast(c.batch, c.tq, c.dv);
  std::vector<double> q = randomValues(countOf(qShape), seed),
                      k = randomValues(countOf(kShape), seed + 1),
                      v = randomValues(countOf(vShape), seed + 2),
                      dout = randomValues(countOf(oShape), seed + 3);
  auto run = [&](const std::vector<double> &query,
                 const std::vector<double> &key,
                 const std::vector<double> &value) {
    Call call("attention");
    call.in(encode(kForward, qShape, query))
        .in(encode(kForward, kShape, key))
        .in(encode(kForward, vShape, value))
        .out(kForward, oShape)
        .floatAttr("scale", c.scale);
    if (c.causal)
      call.unitAttr("causal");
    return runForward(call);
  };
  Call grad("attention_grad");
  grad.in(f64(qShape, q))
      .in(f64(kShape, k))
      .in(f64(vShape, v))
      .in(f64(oShape, dout))
      .out(plan::F64, qShape)
      .out(plan::F64, kShape)
      .out(plan::F64, vShape)
      .floatAttr("scale", c.scale);
  if (c.causal)
    grad.unitAttr("causal");
  ASSERT_OK(grad.run());
  std::string where = c.causal ? "causal" : "full";
  expectGradient(
      grad.values(0),
      [&](const std::vector<double> &x) { return dot(run(x, k, v), dout); }, q,
      "query_grad, " + where);
  expectGradient(
      grad.values(1),
      [&](const std::vector<double> &x) { return dot(run(q, x, v), dout); }, k,
      "key_grad, " + where);
  expectGradient(
      grad.values(2),
      [&](const std::vector<double> &x) { return dot(run(q, k, x), dout); }, v,
      "value_grad, " + where);
}

// With the forward's saved result and log-sum-exp the gradients are the
// same bits (the cpu recomputes the probabilities either way); saved
// operands of the wrong shape are refused by name.
TEST(GradKernels, AttentionGradWithSavedStatistics) {
  std::vector<int64_t> qShape{2, 3, 4}, kShape{2, 5, 4}, vShape{2, 5, 3},
      oShape{2, 3, 3};
  Call forward("attention");
  forward.in(f64(qShape, randomValues(24, 300)))
      .in(f64(kShape, randomValues(40, 301)))
      .in(f64(vShape, randomValues(30, 302)))
      .out(plan::F64, oShape)
      .out(plan::F32, {2, 3})
      .floatAttr("scale", 0.5)
      .unitAttr("causal");
  ASSERT_OK(forward.run());
  auto build = [&](bool saved, std::vector<int64_t> lseShape) {
    Call grad("attention_grad");
    grad.in(forward.input(0))
        .in(forward.input(1))
        .in(forward.input(2))
        .in(f64(oShape, randomValues(18, 303)));
    if (saved)
      grad.in(forward.result(0)).in(encode(plan::F32, lseShape, std::vector<double>(countOf(lseShape), 0.0)));
    grad.out(plan::F64, qShape)
        .out(plan::F64, kShape)
        .out(plan::F64, vShape)
        .floatAttr("scale", 0.5)
        .unitAttr("causal");
    return grad;
  };
  Call plain = build(false, {}), saved = build(true, {2, 3});
  saved.input(5) = forward.result(1);
  ASSERT_OK(plain.run());
  ASSERT_OK(saved.run());
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(saved.result(i).bytes, plain.result(i).bytes) << "gradient " << i;
  Call wrong = build(true, {2, 5});
  expectError(wrong.run(), StatusCode::kInvalidArgument,
              {"attention_grad", "'lse'"});
}

TEST(GradKernels, AttentionGradMatchesFiniteDifferences) {
  checkAttentionGrad({{2}, 3, 5, 4, 3, false, 0.5}, 200);
  checkAttentionGrad({{2, 1}, 4, 4, 3, 2, false, 1.0}, 210);
}

// Causal masking with Tk > Tq aligns the queries at the end; the first
// query sees Tk - Tq + 1 keys, and keys no query sees get zero gradients.
TEST(GradKernels, AttentionGradCausalMatchesFiniteDifferences) {
  checkAttentionGrad({{2}, 3, 5, 4, 3, true, 0.7}, 220);
  checkAttentionGrad({{1}, 4, 4, 2, 3, true, 1.0}, 230);
}

TEST(GradKernels, AttentionGradErrors) {
  auto base = [](std::vector<int64_t> gradShape, bool causal, int64_t tq,
                 int64_t tk) {
    Call call("attention_grad");
    call.in(f64({tq, 2}, randomValues(tq * 2, 1)))
        .in(f64({tk, 2}, randomValues(tk * 2, 2)))
        .in(f64({tk, 3}, randomValues(tk * 3, 3)))
        .in(f64(gradShape, randomValues(countOf(gradShape), 4)))
        .out(plan::F64, {tq, 2})
        .out(plan::F64, {tk, 2})
        .out(plan::F64, {tk, 3})
        .floatAttr("scale", 1.0);
    if (causal)
      call.unitAttr("causal");
    return call.run();
  };
  EXPECT_OK(base({3, 3}, true, 3, 4));
  expectError(base({3, 2}, false, 3, 4), StatusCode::kInvalidArgument,
              {"attention_grad", "'grad' has shape [3, 2], expected [3, 3]"});
  expectError(base({4, 3}, true, 4, 3), StatusCode::kInvalidArgument,
              {"attention_grad", "at least as many keys as queries"});

  Call mixed("attention_grad");
  mixed.in(f64({1, 2}, {1, 2}))
      .in(f32({1, 2}, {1, 2}))
      .in(f64({1, 2}, {1, 2}))
      .in(f64({1, 2}, {1, 2}))
      .out(plan::F64, {1, 2})
      .out(plan::F64, {1, 2})
      .out(plan::F64, {1, 2})
      .floatAttr("scale", 1.0);
  expectError(mixed.run(), StatusCode::kInvalidArgument,
              {"attention_grad", "'key' has element type f32, but 'query' "
                                 "has f64"});

  Call keyGrad("attention_grad");
  keyGrad.in(f64({1, 2}, {1, 2}))
      .in(f64({2, 2}, {1, 2, 3, 4}))
      .in(f64({2, 2}, {1, 2, 3, 4}))
      .in(f64({1, 2}, {1, 2}))
      .out(plan::F64, {1, 2})
      .out(plan::F64, {1, 2})
      .out(plan::F64, {2, 2})
      .floatAttr("scale", 1.0);
  expectError(keyGrad.run(), StatusCode::kInvalidArgument,
              {"attention_grad", "'key_grad' has shape [1, 2], but 'key' has "
                                 "[2, 2]"});

  // A query row's output and gradient live in fixed stack arrays.
  constexpr int64_t kWide = 1025;
  Call wide("attention_grad");
  wide.in(f64({1, kWide}, std::vector<double>(kWide, 0.0)))
      .in(f64({1, kWide}, std::vector<double>(kWide, 0.0)))
      .in(f64({1, 2}, {1, 2}))
      .in(f64({1, 2}, {1, 2}))
      .out(plan::F64, {1, kWide})
      .out(plan::F64, {1, kWide})
      .out(plan::F64, {1, 2})
      .floatAttr("scale", 1.0);
  expectError(wide.run(), StatusCode::kUnimplemented,
              {"attention_grad", "head size 1025 exceeds the 1024"});

  Call missing("attention_grad");
  missing.in(f64({1, 2}, {1, 2}))
      .in(f64({1, 2}, {1, 2}))
      .in(f64({1, 2}, {1, 2}))
      .in(f64({1, 2}, {1, 2}))
      .out(plan::F64, {1, 2})
      .out(plan::F64, {1, 2})
      .out(plan::F64, {1, 2});
  expectError(missing.run(), StatusCode::kInvalidArgument,
              {"attention_grad", "missing attribute 'scale'"});
}

//===----------------------------------------------------------------------===//
// cross_entropy_grad, nll_loss_grad, mse_loss_grad
//===----------------------------------------------------------------------===//

struct ClassLossCase {
  std::vector<int64_t> inputShape;
  std::vector<int64_t> labels;
  bool int32Labels;
  const char *reduction;
  bool hasIgnore;
  int64_t ignoreIndex;
};

void checkClassLossGrad(const char *forward, const char *backward,
                        const ClassLossCase &c, uint32_t seed) {
  std::vector<int64_t> labelShape = {c.inputShape[0]};
  for (size_t d = 2; d < c.inputShape.size(); ++d)
    labelShape.push_back(c.inputShape[d]);
  bool none = std::string(c.reduction) == "none";
  std::vector<int64_t> lossShape = none ? labelShape : std::vector<int64_t>{};
  std::vector<double> input = randomValues(countOf(c.inputShape), seed, -3, 3);
  std::vector<double> dloss =
      randomValues(countOf(lossShape), seed + 1, 0.5, 2);
  auto labels = [&] {
    return c.int32Labels
               ? i32(labelShape,
                     std::vector<int32_t>(c.labels.begin(), c.labels.end()))
               : i64(labelShape, c.labels);
  };
  auto setAttrs = [&](Call &call) {
    call.stringAttr("reduction", c.reduction);
    if (c.hasIgnore)
      call.intAttr("ignore_index", c.ignoreIndex);
  };
  auto run = [&](const std::vector<double> &x) {
    Call call(forward);
    call.in(encode(kForward, c.inputShape, x))
        .in(labels())
        .out(kForward, lossShape);
    setAttrs(call);
    return runForward(call);
  };
  Call grad(backward);
  grad.in(f64(c.inputShape, input))
      .in(labels())
      .in(f64(lossShape, dloss))
      .out(plan::F64, c.inputShape);
  setAttrs(grad);
  ASSERT_OK(grad.run());
  expectGradient(
      grad.values(),
      [&](const std::vector<double> &x) { return dot(run(x), dloss); }, input,
      std::string(backward) + " reduction " + c.reduction);
}

TEST(GradKernels, CrossEntropyGradMatchesFiniteDifferences) {
  for (const char *reduction : {"mean", "sum", "none"}) {
    checkClassLossGrad("cross_entropy", "cross_entropy_grad",
                       {{3, 5}, {1, 4, 0}, false, reduction, false, 0}, 300);
    // Ignored labels get zero gradient and do not count towards the mean.
    checkClassLossGrad(
        "cross_entropy", "cross_entropy_grad",
        {{4, 3}, {2, -100, 0, -100}, false, reduction, true, -100}, 310);
    // Classes on axis 1 of [N, C, d1]; i32 labels; ignore_index a class.
    checkClassLossGrad("cross_entropy", "cross_entropy_grad",
                       {{2, 3, 2}, {0, 2, 1, 1}, true, reduction, true, 1},
                       320);
  }
}

TEST(GradKernels, NllLossGradMatchesFiniteDifferences) {
  for (const char *reduction : {"mean", "sum", "none"}) {
    checkClassLossGrad("nll_loss", "nll_loss_grad",
                       {{3, 4}, {3, 0, 3}, false, reduction, false, 0}, 330);
    checkClassLossGrad("nll_loss", "nll_loss_grad",
                       {{2, 3, 2}, {0, -1, 2, 1}, true, reduction, true, -1},
                       340);
  }
}

// Hand-checked: mean over the two counted labels, so g = dloss / 2.
TEST(GradKernels, NllLossGradByHand) {
  Call grad("nll_loss_grad");
  grad.in(f64({3, 2}, randomValues(6, 1)))
      .in(i64({3}, {1, 7, 0}))
      .in(f64({}, {3.0}))
      .out(plan::F64, {3, 2})
      .intAttr("ignore_index", 7);
  ASSERT_OK(grad.run());
  expectNear(grad.values(), {0, -1.5, 0, 0, -1.5, 0}, 0);
}

// With every label ignored the mean is 0 / 0 in the forward; torch's
// backward then writes zeros, and so does this one.
TEST(GradKernels, CrossEntropyGradAllIgnored) {
  Call grad("cross_entropy_grad");
  grad.in(f64({2, 3}, randomValues(6, 1)))
      .in(i64({2}, {5, 5}))
      .in(f64({}, {1.0}))
      .out(plan::F64, {2, 3})
      .intAttr("ignore_index", 5);
  ASSERT_OK(grad.run());
  expectNear(grad.values(), std::vector<double>(6, 0.0), 0);
}

// An f32 input's gradient written in f16 or bf16 (the narrowing cast of
// mixed precision folded into the kernel) holds, bit for bit, what the
// cast of the f32 gradient holds: each value rounded to f32, then once to
// 16 bits. Rows over the classes and classes over an inner dimension, with
// an ignored label. A 16-bit result of an f64 input is refused.
TEST(GradKernels, ClassLossGradInSixteenBits) {
  for (const char *kernel : {"cross_entropy_grad", "nll_loss_grad"})
    for (std::vector<int64_t> shape : {std::vector<int64_t>{6, 37}, {2, 9, 5}})
      for (DType narrow : {plan::BF16, plan::F16}) {
        std::vector<int64_t> labelShape = shape;
        labelShape.erase(labelShape.begin() + 1);
        int64_t positions = countOf(labelShape);
        std::vector<int64_t> labels;
        for (int64_t p = 0; p < positions; ++p)
          labels.push_back((p * 7) % shape[1]);
        labels[1] = 3; // ignored
        auto build = [&](DType resultType) {
          Call call(kernel);
          call.in(f32(shape, randomValues(countOf(shape), 61, -4, 4)))
              .in(i64(labelShape, labels))
              .in(f32({}, {0.75}))
              .out(resultType, shape)
              .intAttr("ignore_index", 3);
          return call;
        };
        Call wide = build(plan::F32), narrowed = build(narrow);
        ASSERT_OK(wide.run());
        ASSERT_OK(narrowed.run());
        Call cast("cast");
        cast.in(wide.result()).out(narrow, shape);
        ASSERT_OK(cast.run());
        EXPECT_EQ(narrowed.result().bytes, cast.result().bytes)
            << kernel << " in " << dtypeName(narrow);
      }
  Call f64Input("cross_entropy_grad");
  f64Input.in(f64({2, 3}, randomValues(6, 1)))
      .in(i64({2}, {0, 1}))
      .in(f64({}, {1.0}))
      .out(plan::BF16, {2, 3});
  expectError(f64Input.run(), StatusCode::kInvalidArgument,
              {"cross_entropy_grad", "'result' has element type bf16, but 'input' has f64"});
}

TEST(GradKernels, ClassLossGradErrors) {
  Call range("cross_entropy_grad");
  range.in(f64({2, 5}, randomValues(10, 1)))
      .in(i64({2}, {1, 7}))
      .in(f64({}, {1.0}))
      .out(plan::F64, {2, 5});
  expectError(range.run(), StatusCode::kOutOfRange,
              {"cross_entropy_grad", "label 7 (at position 1 of 'labels') is "
                                     "out of range for 5 classes"});
  // Labels are checked before anything is written.
  for (unsigned char byte : range.result().bytes)
    ASSERT_EQ(byte, 0xA5);

  Call negative("nll_loss_grad");
  negative.in(f64({2, 5}, randomValues(10, 1)))
      .in(i32({2}, {-1, 0}))
      .in(f64({}, {1.0}))
      .out(plan::F64, {2, 5});
  expectError(negative.run(), StatusCode::kOutOfRange,
              {"nll_loss_grad", "label -1 (at position 0 of 'labels')"});

  Call none("cross_entropy_grad");
  none.in(f64({2, 5}, randomValues(10, 1)))
      .in(i64({2}, {1, 2}))
      .in(f64({}, {1.0}))
      .out(plan::F64, {2, 5})
      .stringAttr("reduction", "none");
  expectError(none.run(), StatusCode::kInvalidArgument,
              {"cross_entropy_grad", "'grad' has shape [], expected [2]"});

  Call reduction("cross_entropy_grad");
  reduction.in(f64({2, 5}, randomValues(10, 1)))
      .in(i64({2}, {1, 2}))
      .in(f64({}, {1.0}))
      .out(plan::F64, {2, 5})
      .stringAttr("reduction", "max");
  expectError(reduction.run(), StatusCode::kInvalidArgument,
              {"cross_entropy_grad", "reduction must be"});

  Call labels("cross_entropy_grad");
  labels.in(f64({2, 5}, randomValues(10, 1)))
      .in(f64({2}, {1, 2}))
      .in(f64({}, {1.0}))
      .out(plan::F64, {2, 5});
  expectError(labels.run(), StatusCode::kUnimplemented,
              {"cross_entropy_grad", "'labels' has element type f64"});

  Call labelShape("nll_loss_grad");
  labelShape.in(f64({2, 5, 3}, randomValues(30, 1)))
      .in(i64({2}, {1, 2}))
      .in(f64({}, {1.0}))
      .out(plan::F64, {2, 5, 3});
  expectError(labelShape.run(), StatusCode::kInvalidArgument,
              {"nll_loss_grad", "'labels' has shape [2], expected [2, 3]"});

  Call gradType("cross_entropy_grad");
  gradType.in(f64({2, 5}, randomValues(10, 1)))
      .in(i64({2}, {1, 2}))
      .in(f32({}, {1.0}))
      .out(plan::F64, {2, 5});
  expectError(gradType.run(), StatusCode::kInvalidArgument,
              {"cross_entropy_grad", "'grad' has element type f32, but "
                                     "'input' has f64"});
}

TEST(GradKernels, MseLossGradMatchesFiniteDifferences) {
  std::vector<int64_t> shape = {2, 3};
  std::vector<double> prediction = randomValues(6, 400),
                      target = randomValues(6, 401);
  double dloss = 1.3;
  auto run = [&](const std::vector<double> &p) {
    Call call("mse_loss");
    call.in(encode(kForward, shape, p))
        .in(encode(kForward, shape, target))
        .out(kForward, {});
    return runForward(call);
  };
  Call grad("mse_loss_grad");
  grad.in(f64(shape, prediction))
      .in(f64(shape, target))
      .in(f64({}, {dloss}))
      .out(plan::F64, shape);
  ASSERT_OK(grad.run());
  expectGradient(
      grad.values(),
      [&](const std::vector<double> &p) { return run(p)[0] * dloss; },
      prediction, "mse_loss_grad");
}

TEST(GradKernels, MseLossGradErrors) {
  Call shape("mse_loss_grad");
  shape.in(f64({2, 3}, randomValues(6, 1)))
      .in(f64({3, 2}, randomValues(6, 2)))
      .in(f64({}, {1.0}))
      .out(plan::F64, {2, 3});
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"mse_loss_grad", "'target' has shape [3, 2], but 'prediction' "
                                "has [2, 3]"});
  Call scalar("mse_loss_grad");
  scalar.in(f64({2}, {1, 2}))
      .in(f64({2}, {1, 2}))
      .in(f64({1}, {1.0}))
      .out(plan::F64, {2});
  expectError(scalar.run(), StatusCode::kInvalidArgument,
              {"mse_loss_grad", "'grad' has shape [1], expected []"});
  Call integer("mse_loss_grad");
  integer.in(i64({2}, {1, 2}))
      .in(i64({2}, {1, 2}))
      .in(i64({}, {1}))
      .out(plan::I64, {2});
  expectError(integer.run(), StatusCode::kUnimplemented,
              {"mse_loss_grad", "'prediction' has element type i64"});
}

//===----------------------------------------------------------------------===//
// gather_grad, slice_grad
//===----------------------------------------------------------------------===//

void checkGatherGrad(std::vector<int64_t> dataShape, int64_t axis,
                     std::vector<int64_t> indexShape,
                     const std::vector<int64_t> &indices, uint32_t seed) {
  int64_t a = axis < 0 ? axis + static_cast<int64_t>(dataShape.size()) : axis;
  std::vector<int64_t> outShape(dataShape.begin(), dataShape.begin() + a);
  outShape.insert(outShape.end(), indexShape.begin(), indexShape.end());
  outShape.insert(outShape.end(), dataShape.begin() + a + 1, dataShape.end());
  std::vector<double> data = randomValues(countOf(dataShape), seed);
  std::vector<double> dy = randomValues(countOf(outShape), seed + 1);
  auto run = [&](const std::vector<double> &x) {
    Call call("gather");
    call.in(encode(kForward, dataShape, x))
        .in(i64(indexShape, indices))
        .out(kForward, outShape)
        .intAttr("axis", axis);
    return runForward(call);
  };
  Call grad("gather_grad");
  grad.in(i64(indexShape, indices))
      .in(f64(outShape, dy))
      .out(plan::F64, dataShape)
      .intAttr("axis", axis);
  ASSERT_OK(grad.run());
  expectGradient(
      grad.values(),
      [&](const std::vector<double> &x) { return dot(run(x), dy); }, data,
      "gather_grad axis " + std::to_string(axis));
}

// Repeated and negative indices: an embedding backward sums the rows of
// every occurrence.
TEST(GradKernels, GatherGradMatchesFiniteDifferences) {
  checkGatherGrad({4, 3}, 0, {2, 3}, {0, -1, 2, 0, 3, 0}, 500);
  checkGatherGrad({2, 4, 3}, 1, {5}, {1, 1, -4, 3, 0}, 510);
  checkGatherGrad({3, 4}, -1, {}, {2}, 520);
}

TEST(GradKernels, GatherGradByHand) {
  // Rows 0 and 2 of a [3, 2] table gathered as [2, 0, 2]: row 2 gets the
  // sum of two gradient rows, row 1 stays zero.
  Call grad("gather_grad");
  grad.in(i32({3}, {2, 0, -1}))
      .in(f32({3, 2}, {1, 2, 10, 20, 100, 200}))
      .out(plan::F32, {3, 2})
      .intAttr("axis", 0);
  ASSERT_OK(grad.run());
  expectNear(grad.values(), {10, 20, 0, 0, 101, 202}, 0);
}

TEST(GradKernels, GatherGradErrors) {
  Call range("gather_grad");
  range.in(i64({2}, {0, 3}))
      .in(f64({2, 2}, {1, 2, 3, 4}))
      .out(plan::F64, {3, 2})
      .intAttr("axis", 0);
  expectError(range.run(), StatusCode::kOutOfRange,
              {"gather_grad", "index 3 (at position 1 of 'indices') is out of "
                              "range for an axis of size 3"});
  for (unsigned char byte : range.result().bytes)
    ASSERT_EQ(byte, 0xA5);

  Call shape("gather_grad");
  shape.in(i64({2}, {0, 1}))
      .in(f64({3, 2}, randomValues(6, 1)))
      .out(plan::F64, {3, 2})
      .intAttr("axis", 0);
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"gather_grad", "'grad' has shape [3, 2], expected [2, 2]"});

  Call indices("gather_grad");
  indices.in(f64({2}, {0, 1}))
      .in(f64({2, 2}, randomValues(4, 1)))
      .out(plan::F64, {3, 2})
      .intAttr("axis", 0);
  expectError(indices.run(), StatusCode::kUnimplemented,
              {"gather_grad", "'indices' has element type f64"});

  Call dtype("gather_grad");
  dtype.in(i64({2}, {0, 1}))
      .in(f32({2, 2}, randomValues(4, 1)))
      .out(plan::F64, {3, 2})
      .intAttr("axis", 0);
  expectError(dtype.run(), StatusCode::kInvalidArgument,
              {"gather_grad", "'grad' has element type f32, but 'result' has "
                              "f64"});
}

TEST(GradKernels, SliceGradMatchesFiniteDifferences) {
  struct SliceCase {
    std::vector<int64_t> shape, starts, limits, strides;
  };
  for (const SliceCase &c :
       {SliceCase{{4, 5}, {1, 0}, {4, 5}, {2, 2}},
        SliceCase{{2, 3, 4}, {0, 1, 1}, {2, 3, 4}, {1, 1, 3}},
        SliceCase{{3}, {0}, {3}, {1}}}) {
    std::vector<int64_t> window;
    for (size_t d = 0; d < c.shape.size(); ++d)
      window.push_back((c.limits[d] - c.starts[d] + c.strides[d] - 1) /
                       c.strides[d]);
    std::vector<double> x = randomValues(countOf(c.shape), 600);
    std::vector<double> dy = randomValues(countOf(window), 601);
    auto setAttrs = [&](Call &call) {
      call.intsAttr("starts", c.starts)
          .intsAttr("limits", c.limits)
          .intsAttr("strides", c.strides);
    };
    auto run = [&](const std::vector<double> &input) {
      Call call("slice");
      call.in(encode(kForward, c.shape, input)).out(kForward, window);
      setAttrs(call);
      return runForward(call);
    };
    Call grad("slice_grad");
    grad.in(f64(window, dy)).out(plan::F64, c.shape);
    setAttrs(grad);
    ASSERT_OK(grad.run());
    expectGradient(
        grad.values(),
        [&](const std::vector<double> &input) { return dot(run(input), dy); },
        x, "slice_grad of shape " + std::to_string(c.shape.size()) + "d");
  }
}

// slice_grad moves bytes, so it serves integer tensors as slice does.
TEST(GradKernels, SliceGradAnyElementType) {
  Call grad("slice_grad");
  grad.in(i32({2, 2}, {1, 2, 3, 4}))
      .out(plan::I32, {3, 4})
      .intsAttr("starts", {1, 1})
      .intsAttr("limits", {3, 4})
      .intsAttr("strides", {1, 2});
  ASSERT_OK(grad.run());
  EXPECT_EQ(grad.result().values<int32_t>(),
            (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 0, 2, 0, 3, 0, 4}));
}

TEST(GradKernels, SliceGradErrors) {
  auto base = [](Tensor dy, DType outType, std::vector<int64_t> starts,
                 std::vector<int64_t> strides) {
    Call call("slice_grad");
    call.in(std::move(dy))
        .out(outType, {4})
        .intsAttr("starts", starts)
        .intsAttr("limits", {4})
        .intsAttr("strides", strides);
    return call.run();
  };
  EXPECT_OK(base(f64({2}, {1, 2}), plan::F64, {0}, {2}));
  expectError(base(f64({3}, {1, 2, 3}), plan::F64, {0}, {2}),
              StatusCode::kInvalidArgument,
              {"slice_grad", "'grad' has shape [3], expected [2]"});
  expectError(base(f32({2}, {1, 2}), plan::F64, {0}, {2}),
              StatusCode::kInvalidArgument,
              {"slice_grad", "'result' has element type f64, but 'grad' has "
                             "f32"});
  expectError(base(f64({2}, {1, 2}), plan::F64, {0}, {0}),
              StatusCode::kInvalidArgument,
              {"slice_grad", "strides must be positive"});
  expectError(base(f64({2}, {1, 2}), plan::F64, {5}, {1}),
              StatusCode::kInvalidArgument,
              {"slice_grad", "dimension 0: need 0 <= start <= limit <= 4"});
  expectError(base(f64({2}, {1, 2}), plan::F64, {0, 0}, {2}),
              StatusCode::kInvalidArgument,
              {"slice_grad", "need one entry per dimension"});
}

//===----------------------------------------------------------------------===//
// gelu_grad
//===----------------------------------------------------------------------===//

TEST(GradKernels, GeluGradMatchesFiniteDifferences) {
  std::vector<int64_t> shape = {3, 4};
  std::vector<double> x = randomValues(12, 700, -4, 4);
  std::vector<double> dy = randomValues(12, 701);
  for (const char *approximate : {"none", "tanh"}) {
    auto run = [&](const std::vector<double> &input) {
      Call call("gelu");
      call.in(encode(kForward, shape, input))
          .out(kForward, shape)
          .stringAttr("approximate", approximate);
      return runForward(call);
    };
    Call grad("gelu_grad");
    grad.in(f64(shape, x))
        .in(f64(shape, dy))
        .out(plan::F64, shape)
        .stringAttr("approximate", approximate);
    ASSERT_OK(grad.run());
    expectGradient(
        grad.values(),
        [&](const std::vector<double> &input) { return dot(run(input), dy); },
        x, std::string("gelu_grad ") + approximate);
  }
}

TEST(GradKernels, GeluGradErrors) {
  Call approximate("gelu_grad");
  approximate.in(f64({2}, {1, 2}))
      .in(f64({2}, {1, 2}))
      .out(plan::F64, {2})
      .stringAttr("approximate", "exact");
  expectError(approximate.run(), StatusCode::kInvalidArgument,
              {"gelu_grad", "approximate must be \"none\" or \"tanh\", got "
                            "\"exact\""});
  Call shape("gelu_grad");
  shape.in(f64({2}, {1, 2})).in(f64({3}, {1, 2, 3})).out(plan::F64, {2});
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"gelu_grad", "'grad' has shape [3], but 'input' has [2]"});
}

//===----------------------------------------------------------------------===//
// Every float dtype
//===----------------------------------------------------------------------===//

/// Runs the call that `build(dtype)` sets up in `dtype` and in f64 on the
/// same (rounded) values, and compares every output.
void expectMatchesF64(const std::function<Call(DType)> &build, DType dtype,
                      double tolerance, const std::string &what) {
  Call reference = build(plan::F64);
  ASSERT_OK(reference.run());
  Call narrow = build(dtype);
  ASSERT_OK(narrow.run());
  for (size_t i = 0; i < reference.outputCount(); ++i) {
    EXPECT_EQ(narrow.result(i).dtype, dtype);
    expectNear(narrow.values(i), reference.values(i), tolerance,
               what + " in " + dtypeName(dtype) + ", output " +
                   std::to_string(i));
  }
}

// Each kernel is one template for every float dtype; in f32, f16 and bf16
// it must agree with its f64 self to the precision of the type.
TEST(GradKernels, EveryFloatDTypeAgreesWithF64) {
  std::vector<int64_t> shape = {3, 5};
  std::vector<double> raw = randomValues(15, 800, -2, 2);
  std::vector<double> rawGrad = randomValues(15, 801);
  for (auto [dtype, tolerance] : {std::pair<DType, double>{plan::F32, 1e-5},
                                  {plan::F16, 4e-3},
                                  {plan::BF16, 3e-2}}) {
    std::vector<double> x = quantize(dtype, raw), dy = quantize(dtype, rawGrad);
    std::vector<double> probabilities(15);
    for (int r = 0; r < 3; ++r) {
      double sum = 0;
      for (int c = 0; c < 5; ++c)
        sum += std::exp(x[r * 5 + c]);
      for (int c = 0; c < 5; ++c)
        probabilities[r * 5 + c] = std::exp(x[r * 5 + c]) / sum;
    }
    std::vector<double> y = quantize(dtype, probabilities);
    std::vector<double> logY(15);
    for (int i = 0; i < 15; ++i)
      logY[i] = std::log(probabilities[i]);
    logY = quantize(dtype, logY);
    std::vector<double> scale = quantize(dtype, randomValues(5, 802, 0.5, 2));

    for (const char *kernel : {"softmax_grad", "log_softmax_grad"})
      expectMatchesF64(
          [&](DType t) {
            Call call(kernel);
            call.in(encode(t, shape,
                           std::string(kernel) == "softmax_grad" ? y : logY))
                .in(encode(t, shape, dy))
                .out(t, shape)
                .intAttr("axis", 1);
            return call;
          },
          dtype, tolerance, kernel);
    expectMatchesF64(
        [&](DType t) {
          Call call("layer_norm_grad");
          call.in(encode(t, shape, x))
              .in(encode(t, {5}, scale))
              .in(encode(t, shape, dy))
              .out(t, shape)
              .out(t, {5})
              .out(t, {5})
              .intAttr("axis", 1)
              .floatAttr("epsilon", 1e-5);
          return call;
        },
        dtype, tolerance, "layer_norm_grad");
    expectMatchesF64(
        [&](DType t) {
          Call call("attention_grad");
          call.in(encode(t, {1, 3, 5}, x))
              .in(encode(t, {1, 3, 5}, dy))
              .in(encode(t, {1, 3, 5}, y))
              .in(encode(t, {1, 3, 5}, logY))
              .out(t, {1, 3, 5})
              .out(t, {1, 3, 5})
              .out(t, {1, 3, 5})
              .floatAttr("scale", 0.5)
              .unitAttr("causal");
          return call;
        },
        dtype, tolerance, "attention_grad");
    for (const char *kernel : {"cross_entropy_grad", "nll_loss_grad"})
      expectMatchesF64(
          [&](DType t) {
            Call call(kernel);
            call.in(encode(t, shape, x))
                .in(i64({3}, {4, 0, 2}))
                .in(encode(t, {}, {0.75}))
                .out(t, shape);
            return call;
          },
          dtype, tolerance, kernel);
    expectMatchesF64(
        [&](DType t) {
          Call call("mse_loss_grad");
          call.in(encode(t, shape, x))
              .in(encode(t, shape, dy))
              .in(encode(t, {}, {1.5}))
              .out(t, shape);
          return call;
        },
        dtype, tolerance, "mse_loss_grad");
    expectMatchesF64(
        [&](DType t) {
          Call call("gather_grad");
          call.in(i64({2, 3}, {0, 2, 0, 1, 0, 2}))
              .in(encode(t, {2, 3, 5}, quantize(dtype, randomValues(30, 803))))
              .out(t, shape)
              .intAttr("axis", 0);
          return call;
        },
        dtype, tolerance, "gather_grad");
    for (const char *approximate : {"none", "tanh"})
      expectMatchesF64(
          [&](DType t) {
            Call call("gelu_grad");
            call.in(encode(t, shape, x))
                .in(encode(t, shape, dy))
                .out(t, shape)
                .stringAttr("approximate", approximate);
            return call;
          },
          dtype, tolerance, std::string("gelu_grad ") + approximate);
    expectMatchesF64(
        [&](DType t) {
          Call call("slice_grad");
          call.in(encode(t, {2, 2}, {x[0], x[1], x[2], x[3]}))
              .out(t, shape)
              .intsAttr("starts", {1, 1})
              .intsAttr("limits", {3, 5})
              .intsAttr("strides", {1, 2});
          return call;
        },
        dtype, 0, "slice_grad");
  }
}

//===----------------------------------------------------------------------===//
// accumulate, fill, sum_squares
//===----------------------------------------------------------------------===//

// target += value in the target's type: each element one rounding of
// target + value.
TEST(GradKernels, AccumulateAddsInPlace) {
  std::vector<double> start = {1, -2.5, 1e-3, 4096, 0.1};
  std::vector<double> addend = {0.5, 0.25, 3.3, 1.0 / 3, -0.1};
  for (DType valueType : {plan::F32, plan::F64, plan::F16, plan::BF16}) {
    std::vector<double> value = quantize(valueType, addend);
    Call f32Target("accumulate");
    f32Target.in(encode(valueType, {5}, addend)).out(f32({5}, start));
    ASSERT_OK(f32Target.run());
    std::vector<double> expected;
    for (size_t i = 0; i < start.size(); ++i)
      expected.push_back(static_cast<float>(start[i]) +
                         static_cast<float>(value[i]));
    expectNear(f32Target.values(), expected, 0,
               std::string("f32 += ") + dtypeName(valueType));

    Call f64Target("accumulate");
    f64Target.in(encode(valueType, {5}, addend)).out(f64({5}, start));
    ASSERT_OK(f64Target.run());
    expected.clear();
    for (size_t i = 0; i < start.size(); ++i)
      expected.push_back(start[i] + value[i]);
    expectNear(f64Target.values(), expected, 0,
               std::string("f64 += ") + dtypeName(valueType));
  }
  // Twice: the target really is read.
  Call twice("accumulate");
  twice.in(f32({2}, {1, 2})).out(f32({2}, {10, 20}));
  ASSERT_OK(twice.run());
  ASSERT_OK(twice.run());
  expectNear(twice.values(), {12, 24}, 0);
}

TEST(GradKernels, AccumulateErrors) {
  Call half("accumulate");
  half.in(f32({2}, {1, 2})).out(encode(plan::F16, {2}, {1, 2}));
  expectError(half.run(), StatusCode::kUnimplemented,
              {"accumulate", "'target' has element type f16; this kernel "
                             "handles f32 and f64"});
  Call integer("accumulate");
  integer.in(i32({2}, {1, 2})).out(f32({2}, {1, 2}));
  expectError(integer.run(), StatusCode::kUnimplemented,
              {"accumulate", "'value' has element type i32"});
  Call shape("accumulate");
  shape.in(f32({3}, {1, 2, 3})).out(f32({2}, {1, 2}));
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"accumulate", "'value' has shape [3], but 'target' has [2]"});
}

/// Element (i, j) of op(lhs)[m, k] op(rhs)[k, n], summed in double.
double productElement(const std::vector<double> &lhs, const std::vector<double> &rhs, int64_t m,
                      int64_t n, int64_t k, bool transposeLhs, bool transposeRhs, int64_t i,
                      int64_t j) {
  double sum = 0;
  for (int64_t p = 0; p < k; ++p)
    sum += lhs[static_cast<size_t>(transposeLhs ? p * m + i : i * k + p)] *
           rhs[static_cast<size_t>(transposeRhs ? j * k + p : p * n + j)];
  return sum;
}

// target[m, n] += op(lhs) op(rhs) against a double-precision sum of the
// operands' (rounded) values, for every operand type and transpose, the
// 16-bit ones larger than one tile of their path (256 rows, 1024 columns,
// depth 256) so that tiles start from the target's values more than once.
// Run twice: the target really is read.
TEST(GradKernels, AccumulateMatmulAddsTheProduct) {
  int64_t m = 300, n = 1030, k = 270;
  auto values = [](int64_t count, double scale, int seed) {
    std::vector<double> out(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      out[static_cast<size_t>(i)] = scale * (static_cast<double>((i * 37 + seed * 11) % 101) / 50.0 - 1.0);
    return out;
  };
  for (DType type : {plan::F32, plan::F16, plan::BF16, plan::F64})
    for (bool transposeLhs : {false, true})
      for (bool transposeRhs : {false, true}) {
        // f64 goes straight to dgemm: a small product checks it.
        if (type == plan::F64)
          m = 40, n = 50, k = 30;
        std::vector<double> start = values(m * n, 2.0, 3);
        std::vector<int64_t> lhsShape = transposeLhs ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
        std::vector<int64_t> rhsShape = transposeRhs ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
        std::vector<double> lhs = quantize(type, values(m * k, 0.5, 1));
        std::vector<double> rhs = quantize(type, values(k * n, 0.25, 2));
        DType wide = type == plan::F64 ? plan::F64 : plan::F32;
        Call call("accumulate_matmul");
        call.in(encode(type, lhsShape, lhs)).in(encode(type, rhsShape, rhs));
        call.out(encode(wide, {m, n}, start));
        if (transposeLhs)
          call.boolAttr("transpose_lhs", true);
        if (transposeRhs)
          call.boolAttr("transpose_rhs", true);
        ASSERT_OK(call.run());
        ASSERT_OK(call.run());
        std::vector<double> expected(static_cast<size_t>(m * n));
        double largest = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double sum = productElement(lhs, rhs, m, n, k, transposeLhs, transposeRhs, i, j);
            double &e = expected[static_cast<size_t>(i * n + j)];
            e = quantize(wide, {start[static_cast<size_t>(i * n + j)]})[0] + 2 * sum;
            largest = std::max(largest, std::fabs(e));
          }
        // Sums of 270 products in f32: well under 1e-5 of the largest.
        std::vector<double> got = call.values();
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i)
          worst = std::max(worst, std::fabs(got[i] - expected[i]));
        EXPECT_LE(worst, (wide == plan::F64 ? 1e-12 : 1e-5) * largest)
            << dtypeName(type) << " transpose_lhs " << transposeLhs << " transpose_rhs "
            << transposeRhs;
      }
}

// With `overwrite` the product replaces the target (the first write of a
// gradient that lives for one step): the target's old values are never
// read, so a second run gives the same result, and an empty contraction
// writes zeros.
TEST(GradKernels, AccumulateMatmulOverwriteReplacesTheTarget) {
  for (DType type : {plan::F32, plan::F16, plan::BF16, plan::F64})
    for (bool transposeLhs : {false, true}) {
      // The 16-bit path's tiles (256 rows, 1024 columns, depth 256) more
      // than once.
      int64_t m = type == plan::F64 ? 20 : 300, n = type == plan::F64 ? 30 : 1030,
              k = type == plan::F64 ? 10 : 270;
      std::vector<int64_t> lhsShape = transposeLhs ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
      std::vector<double> lhs(static_cast<size_t>(m * k)), rhs(static_cast<size_t>(k * n));
      for (size_t i = 0; i < lhs.size(); ++i)
        lhs[i] = static_cast<double>((i * 7) % 13) / 8.0 - 0.75;
      for (size_t i = 0; i < rhs.size(); ++i)
        rhs[i] = static_cast<double>((i * 5) % 11) / 4.0 - 1.25;
      lhs = quantize(type, lhs);
      rhs = quantize(type, rhs);
      DType wide = type == plan::F64 ? plan::F64 : plan::F32;
      Call call("accumulate_matmul");
      call.in(encode(type, lhsShape, lhs)).in(encode(type, {k, n}, rhs));
      call.out(encode(wide, {m, n}, std::vector<double>(static_cast<size_t>(m * n), 1e6)));
      call.boolAttr("overwrite", true);
      if (transposeLhs)
        call.boolAttr("transpose_lhs", true);
      ASSERT_OK(call.run());
      ASSERT_OK(call.run());
      std::vector<double> got = call.values();
      double worst = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = productElement(lhs, rhs, m, n, k, transposeLhs, false, i, j);
          worst = std::max(worst, std::fabs(got[static_cast<size_t>(i * n + j)] - sum));
        }
      // The operands are multiples of 1/8 and 1/4 below 1.25: every sum is
      // exact in f32.
      EXPECT_EQ(worst, 0.0) << dtypeName(type) << " transpose_lhs " << transposeLhs;
    }
  Call empty("accumulate_matmul");
  empty.in(f32({3, 0}, {})).in(f32({0, 2}, {})).out(f32({3, 2}, {1, 2, 3, 4, 5, 6}));
  empty.boolAttr("overwrite", true);
  ASSERT_OK(empty.run());
  EXPECT_EQ(empty.values(), std::vector<double>(6, 0.0));
}

TEST(GradKernels, AccumulateMatmulErrors) {
  Call narrow("accumulate_matmul");
  narrow.in(f32({2, 3}, std::vector<double>(6, 1))).in(f32({3, 2}, std::vector<double>(6, 1)));
  narrow.out(encode(plan::BF16, {2, 2}, std::vector<double>(4, 0)));
  expectError(narrow.run(), StatusCode::kUnimplemented,
              {"accumulate_matmul", "'target' has element type bf16", "f32 (for f32, f16 and bf16"});
  Call shape("accumulate_matmul");
  shape.in(f32({2, 3}, std::vector<double>(6, 1))).in(f32({3, 2}, std::vector<double>(6, 1)));
  shape.out(f32({2, 3}, std::vector<double>(6, 0)));
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"accumulate_matmul", "the product is [2, 2] but the target has shape [2, 3]"});
  Call contraction("accumulate_matmul");
  contraction.in(f32({2, 3}, std::vector<double>(6, 1))).in(f32({2, 3}, std::vector<double>(6, 1)));
  contraction.out(f32({2, 3}, std::vector<double>(6, 0)));
  expectError(contraction.run(), StatusCode::kInvalidArgument,
              {"accumulate_matmul", "contracting dimensions differ"});
  Call batched("accumulate_matmul");
  batched.in(f32({1, 2, 3}, std::vector<double>(6, 1))).in(f32({3, 2}, std::vector<double>(6, 1)));
  batched.out(f32({2, 2}, std::vector<double>(4, 0)));
  expectError(batched.run(), StatusCode::kInvalidArgument,
              {"accumulate_matmul", "'lhs' must be a matrix, got shape [1, 2, 3]"});
}

TEST(GradKernels, FillSetsEveryElement) {
  for (DType dtype : {plan::F32, plan::F64, plan::F16, plan::BF16}) {
    for (double value : {0.0, 0.1, -3.0}) {
      Call call("fill");
      call.out(dtype, {2, 3}).floatAttr("value", value);
      ASSERT_OK(call.run());
      // Bit-exact: one rounding of the value to the dtype.
      EXPECT_EQ(call.result().bytes,
                encode(dtype, {2, 3}, std::vector<double>(6, value)).bytes)
          << dtypeName(dtype) << " " << value;
    }
  }
  Call scalar("fill");
  scalar.out(plan::F64, {}).floatAttr("value", 2.5);
  ASSERT_OK(scalar.run());
  expectNear(scalar.values(), {2.5}, 0);
}

TEST(GradKernels, FillErrors) {
  Call missing("fill");
  missing.out(plan::F32, {2});
  expectError(missing.run(), StatusCode::kInvalidArgument,
              {"fill", "missing attribute 'value'"});
  Call integer("fill");
  integer.out(plan::I64, {2}).floatAttr("value", 1);
  expectError(integer.run(), StatusCode::kUnimplemented,
              {"fill", "'target' has element type i64"});
  Call inputs("fill");
  inputs.in(f32({1}, {1})).out(plan::F32, {1}).floatAttr("value", 1);
  expectError(inputs.run(), StatusCode::kInvalidArgument,
              {"fill", "expected 0 inputs, got 1"});
}

TEST(GradKernels, SumSquaresOverEveryOperandInDouble) {
  Call call("sum_squares");
  call.in(f32({2}, {1, 2}))
      .in(encode(plan::F16, {1}, {3}))
      .in(encode(plan::BF16, {1}, {0.5}))
      .in(f64({2, 1}, {-2, 0}))
      .in(f32({0}, {}))
      .out(plan::F64, {});
  ASSERT_OK(call.run());
  expectNear(call.values(), {18.25}, 0);

  // Squares that overflow f32 are fine in the double sum.
  Call large("sum_squares");
  large.in(f32({2}, {1e20, -1e20})).out(plan::F64, {});
  ASSERT_OK(large.run());
  expectNear(large.values(), {2 * std::pow(static_cast<double>(1e20f), 2)},
             1e-15);
}

// An overflowed gradient must show in the norm: the loss scaler skips the
// step on it.
TEST(GradKernels, SumSquaresPropagatesInfinityAndNaN) {
  Call inf("sum_squares");
  inf.in(f32({2}, {1, 2}))
      .in(encode(plan::F16, {2}, {-kInf, 1}))
      .out(plan::F64, {});
  ASSERT_OK(inf.run());
  expectNear(inf.values(), {kInf}, 0);

  Call nan("sum_squares");
  nan.in(f32({2}, {1, kNaN})).in(f64({1}, {kInf})).out(plan::F64, {});
  ASSERT_OK(nan.run());
  EXPECT_TRUE(std::isnan(nan.values()[0]));
}

TEST(GradKernels, SumSquaresErrors) {
  Call none("sum_squares");
  none.out(plan::F64, {});
  expectError(none.run(), StatusCode::kInvalidArgument,
              {"sum_squares", "expected at least 1 inputs, got 0"});
  Call result("sum_squares");
  result.in(f32({1}, {1})).out(plan::F32, {});
  expectError(result.run(), StatusCode::kInvalidArgument,
              {"sum_squares", "'result' has element type f32, expected f64"});
  Call shape("sum_squares");
  shape.in(f32({1}, {1})).out(plan::F64, {1});
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"sum_squares", "'result' has shape [1], expected []"});
  Call integer("sum_squares");
  integer.in(f32({1}, {1})).in(i64({1}, {1})).out(plan::F64, {});
  expectError(integer.run(), StatusCode::kUnimplemented,
              {"sum_squares", "input #1 has element type i64"});
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

/// torch.optim.AdamW (decoupled) or Adam (L2) in double, from torch's
/// _single_tensor_adam, with the gradient first multiplied by grad_scale.
void referenceAdamStep(const Hyper &h, double step, bool decoupled,
                       const std::vector<double> &grad,
                       std::vector<double> &param, std::vector<double> &expAvg,
                       std::vector<double> &expAvgSq, bool biasCorrection = true) {
  for (size_t i = 0; i < param.size(); ++i) {
    double g = grad[i] * h.gradScale;
    if (decoupled)
      param[i] *= 1 - h.lr * h.weightDecay;
    else
      g += h.weightDecay * param[i];
    expAvg[i] += (g - expAvg[i]) * (1 - h.beta1);
    expAvgSq[i] = expAvgSq[i] * h.beta2 + (1 - h.beta2) * g * g;
    double correction1 = biasCorrection ? 1 - std::pow(h.beta1, step) : 1.0;
    double correction2 = biasCorrection ? 1 - std::pow(h.beta2, step) : 1.0;
    double denom = std::sqrt(expAvgSq[i]) / std::sqrt(correction2) + h.eps;
    param[i] -= h.lr / correction1 * expAvg[i] / denom;
  }
}

void checkAdamw(DType dtype, const Hyper &h, bool decoupled, double tolerance,
                uint32_t seed, bool biasCorrection = true) {
  constexpr int64_t kCount = 7;
  std::vector<double> param = quantize(dtype, randomValues(kCount, seed));
  std::vector<double> expAvg(kCount, 0.0), expAvgSq(kCount, 0.0);
  Call call("adamw");
  call.in(encode(dtype, {kCount}, param))
      .in(encode(dtype, {kCount}, std::vector<double>(kCount, 0.0)))
      .in(encode(dtype, {kCount}, expAvg))
      .in(encode(dtype, {kCount}, expAvgSq))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2)
      .inPlace(3);
  if (!decoupled)
    call.boolAttr("adam_w_mode", false);
  if (!biasCorrection)
    call.boolAttr("bias_correction", false);
  for (int step = 1; step <= 6; ++step) {
    // Gradients of varying sign and size, with a zero among them.
    std::vector<double> grad =
        quantize(dtype, randomValues(kCount, seed + step, -3, 3));
    grad[step % kCount] = 0;
    call.input(1) = encode(dtype, {kCount}, grad);
    call.input(4) = scalarsTensor(h, step);
    ASSERT_OK(call.run());
    referenceAdamStep(h, step, decoupled, grad, param, expAvg, expAvgSq, biasCorrection);
    std::string what = std::string(dtypeName(dtype)) + " step " +
                       std::to_string(step) +
                       (decoupled ? " adamw" : " adam (L2)") +
                       (biasCorrection ? "" : " without bias correction");
    expectNear(call.values(0), param, tolerance, "param, " + what);
    expectNear(call.values(1), expAvg, tolerance, "exp_avg, " + what);
    expectNear(call.values(2), expAvgSq, tolerance, "exp_avg_sq, " + what);
  }
}

TEST(GradKernels, AdamwMatchesTorchFormulas) {
  Hyper plain;
  Hyper decayed;
  decayed.weightDecay = 0.1;
  decayed.gradScale = 0.25;
  decayed.lr = 3e-2;
  Hyper fast; // beta1 >= 0.5 takes torch.lerp's other form: weight 0.6.
  fast.beta1 = 0.4;
  fast.beta2 = 0.9;
  fast.weightDecay = 0.01;
  fast.gradScale = 2;
  for (const Hyper &h : {plain, decayed, fast})
    for (bool decoupled : {true, false}) {
      checkAdamw(plan::F64, h, decoupled, 1e-12, 900);
      checkAdamw(plan::F32, h, decoupled, 2e-5, 910);
      checkAdamw(plan::F64, h, decoupled, 1e-12, 930, /*biasCorrection=*/false);
      checkAdamw(plan::F32, h, decoupled, 2e-5, 940, /*biasCorrection=*/false);
    }
}

/// DeepSpeed's FusedLamb step (csrc/lamb/fused_lamb_cuda_kernel.cu) in
/// double; returns the trust ratio it applied.
struct LambHyper {
  double maxCoeff = 10.0, minCoeff = 0.01;
  bool biasCorrection = true, epsInsideSqrt = false;
};
double referenceLambStep(const Hyper &h, const LambHyper &l, double step,
                         const std::vector<double> &grad, std::vector<double> &param,
                         std::vector<double> &expAvg, std::vector<double> &expAvgSq) {
  std::vector<double> update(param.size());
  double paramSquares = 0, updateSquares = 0;
  for (size_t i = 0; i < param.size(); ++i) {
    double g = grad[i] * h.gradScale;
    expAvg[i] = h.beta1 * expAvg[i] + (1 - h.beta1) * g;
    expAvgSq[i] = h.beta2 * expAvgSq[i] + (1 - h.beta2) * g * g;
    double denom = l.epsInsideSqrt ? std::sqrt(expAvgSq[i] + h.eps)
                                   : std::sqrt(expAvgSq[i]) + h.eps;
    update[i] = expAvg[i] / denom + h.weightDecay * param[i];
    paramSquares += param[i] * param[i];
    updateSquares += update[i] * update[i];
  }
  double ratio = 1;
  if (paramSquares != 0 && updateSquares != 0)
    ratio = std::clamp(std::sqrt(paramSquares) / std::sqrt(updateSquares), l.minCoeff,
                       l.maxCoeff);
  double stepSize = h.lr;
  if (l.biasCorrection)
    stepSize *= std::sqrt(1 - std::pow(h.beta2, step)) / (1 - std::pow(h.beta1, step));
  for (size_t i = 0; i < param.size(); ++i)
    param[i] -= stepSize * ratio * update[i];
  return ratio;
}

/// A lamb_moments then a lamb_step call on `param`, `expAvg` and
/// `expAvgSq` (updated), with `l`'s attributes on both.
struct LambCalls {
  Call moments{"lamb_moments"}, step{"lamb_step"};
};
LambCalls lambCalls(DType dtype, const Hyper &h, const LambHyper &l, double stepNumber,
                    const std::vector<double> &param, const std::vector<double> &grad,
                    const std::vector<double> &expAvg, const std::vector<double> &expAvgSq) {
  const int64_t n = static_cast<int64_t>(param.size());
  LambCalls calls;
  for (Call *call : {&calls.moments, &calls.step})
    call->floatAttr("max_coeff", l.maxCoeff)
        .floatAttr("min_coeff", l.minCoeff)
        .boolAttr("bias_correction", l.biasCorrection)
        .boolAttr("eps_inside_sqrt", l.epsInsideSqrt);
  calls.moments.in(encode(dtype, {n}, param))
      .in(encode(dtype, {n}, grad))
      .in(encode(dtype, {n}, expAvg))
      .in(encode(dtype, {n}, expAvgSq))
      .in(scalarsTensor(h, stepNumber))
      .inPlace(2)
      .inPlace(3)
      .out(plan::F64, {2});
  return calls;
}

/// Runs `calls`: the moments, then the step from their results.
Status runLamb(DType dtype, const Hyper &h, double stepNumber, LambCalls &calls) {
  if (Status s = calls.moments.run(); !s.isOk())
    return s;
  const int64_t n = calls.moments.input(0).shape[0];
  calls.step.in(calls.moments.input(0))
      .in(encode(dtype, {n}, calls.moments.values(0)))
      .in(encode(dtype, {n}, calls.moments.values(1)))
      .in(scalarsTensor(h, stepNumber))
      .in(f64({2}, calls.moments.values(2)))
      .inPlace(0);
  return calls.step.run();
}

void checkLamb(DType dtype, const Hyper &h, const LambHyper &l, double paramScale,
               double tolerance, uint32_t seed) {
  constexpr int64_t kCount = 301;
  std::vector<double> param =
      quantize(dtype, randomValues(kCount, seed, -paramScale, paramScale));
  std::vector<double> expAvg(kCount, 0.0), expAvgSq(kCount, 0.0);
  for (int step = 1; step <= 5; ++step) {
    std::vector<double> grad = quantize(dtype, randomValues(kCount, seed + step, -3, 3));
    LambCalls calls = lambCalls(dtype, h, l, step, param, grad, expAvg, expAvgSq);
    ASSERT_OK(runLamb(dtype, h, step, calls));
    std::vector<double> before = param;
    referenceLambStep(h, l, step, grad, param, expAvg, expAvgSq);
    std::string what = std::string(dtypeName(dtype)) + " step " + std::to_string(step);
    expectNear(calls.step.values(0), param, tolerance, "param, " + what);
    expectNear(calls.moments.values(0), expAvg, tolerance, "exp_avg, " + what);
    expectNear(calls.moments.values(1), expAvgSq, tolerance, "exp_avg_sq, " + what);
    double squares = 0;
    for (double x : before)
      squares += x * x;
    EXPECT_NEAR(calls.moments.values(2)[0], squares, 1e-9 * squares) << what;
    param = calls.step.values(0);
    expAvg = calls.moments.values(0);
    expAvgSq = calls.moments.values(1);
  }
}

TEST(GradKernels, LambMatchesFusedLamb) {
  Hyper h;
  h.lr = 0.02;
  h.weightDecay = 0.01;
  h.gradScale = 0.5;
  LambHyper plain;
  LambHyper options; // eps under the root, no bias correction
  options.biasCorrection = false;
  options.epsInsideSqrt = true;
  h.eps = 1e-8;
  for (DType dtype : {plan::F64, plan::F32}) {
    SCOPED_TRACE(dtypeName(dtype));
    double tolerance = dtype == plan::F64 ? 1e-12 : 2e-5;
    checkLamb(dtype, h, plain, 1.0, tolerance, 1100);
    checkLamb(dtype, h, options, 1.0, tolerance, 1110);
    // Large parameters: ||p|| / ||u|| above max_coeff, clamped.
    LambHyper capped = plain;
    capped.maxCoeff = 2.0;
    checkLamb(dtype, h, capped, 50.0, tolerance, 1120);
    // Small ones: below min_coeff, raised.
    LambHyper floored = plain;
    floored.minCoeff = 0.5;
    checkLamb(dtype, h, floored, 1e-3, tolerance, 1130);
  }
}

// The ratio is what sets Lamb apart: a parameter ten times larger takes a
// step ten times larger (within the clamp), and a zero parameter (a bias
// at its initial value) steps with ratio 1. lamb_step takes the ratio from
// the sums it is given (a partition's, all-reduced, under ZeRO): four times
// the parameter's squares, a step twice as large.
TEST(GradKernels, LambTrustRatio) {
  Hyper h;
  h.lr = 0.01;
  const std::vector<double> grad = {0.5, -1.0, 2.0, -0.25}, zeros(4, 0.0);
  auto stepOf = [&](std::vector<double> param, double scaleSquares) {
    LambCalls calls = lambCalls(plan::F64, h, LambHyper(), 1, param, grad, zeros, zeros);
    EXPECT_TRUE(calls.moments.run().isOk());
    std::vector<double> squares = calls.moments.values(2);
    squares[0] *= scaleSquares;
    calls.step.in(calls.moments.input(0))
        .in(f64({4}, calls.moments.values(0)))
        .in(f64({4}, calls.moments.values(1)))
        .in(scalarsTensor(h, 1))
        .in(f64({2}, squares))
        .inPlace(0);
    EXPECT_TRUE(calls.step.run().isOk());
    std::vector<double> after = calls.step.values(0), moved(4);
    for (size_t i = 0; i < 4; ++i)
      moved[i] = param[i] - after[i];
    return moved;
  };
  std::vector<double> small = stepOf({0.1, 0.2, -0.3, 0.4}, 1);
  std::vector<double> large = stepOf({1.0, 2.0, -3.0, 4.0}, 1);
  std::vector<double> wider = stepOf({0.1, 0.2, -0.3, 0.4}, 4);
  std::vector<double> zero = stepOf({0, 0, 0, 0}, 1);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(large[i], 10 * small[i], 1e-12) << i;
    EXPECT_NEAR(wider[i], 2 * small[i], 1e-12) << i;
    // Step 1 with bias correction: u = sign(g) (up to eps), ratio 1.
    EXPECT_NEAR(zero[i], h.lr * (grad[i] > 0 ? 1 : -1), 1e-7) << i;
  }
}

TEST(GradKernels, LambErrors) {
  Hyper h;
  LambHyper inverted;
  inverted.minCoeff = 2.0;
  inverted.maxCoeff = 1.0;
  LambCalls coeffs = lambCalls(plan::F64, h, inverted, 1, {1, 2}, {1, 2}, {0, 0}, {0, 0});
  expectError(runLamb(plan::F64, h, 1, coeffs), StatusCode::kInvalidArgument,
              {"lamb_moments", "min_coeff <= max_coeff", "[2, 1]"});
  LambCalls state = lambCalls(plan::F64, h, LambHyper(), 1, {1, 2, 3}, {1, 2, 3}, {0, 0, 0},
                              {0, 0, 0});
  state.moments.input(3) = f64({2}, {0, 0});
  expectError(state.moments.run(), StatusCode::kInvalidArgument,
              {"lamb_moments", "'exp_avg_sq' has shape [2], but 'param' has [3]"});
  Call squares("lamb_step");
  squares.in(f64({2}, {1, 2}))
      .in(f64({2}, {0, 0}))
      .in(f64({2}, {1, 1}))
      .in(scalarsTensor(h, 1))
      .in(encode(plan::F32, {2}, {1, 1}))
      .inPlace(0);
  expectError(squares.run(), StatusCode::kInvalidArgument,
              {"lamb_step", "'squares' has element type f32, expected f64"});
}

// Distinct output buffers get what the in-place update writes.
TEST(GradKernels, AdamwOutOfPlace) {
  Hyper h;
  h.weightDecay = 0.05;
  std::vector<double> param = randomValues(4, 920), grad = randomValues(4, 921),
                      expAvg = randomValues(4, 922),
                      expAvgSq = randomValues(4, 923, 0, 1);
  auto build = [&] {
    Call call("adamw");
    call.in(f64({4}, param))
        .in(f64({4}, grad))
        .in(f64({4}, expAvg))
        .in(f64({4}, expAvgSq))
        .in(scalarsTensor(h, 3));
    return call;
  };
  Call inPlace = build();
  inPlace.inPlace(0).inPlace(2).inPlace(3);
  ASSERT_OK(inPlace.run());
  Call separate = build();
  separate.out(plan::F64, {4}).out(plan::F64, {4}).out(plan::F64, {4});
  ASSERT_OK(separate.run());
  for (size_t i = 0; i < 3; ++i)
    expectNear(separate.values(i), inPlace.values(i), 0);
  expectNear(decode(separate.input(0)), param, 0, "input param untouched");
}

// A fourth result, the parameter's 16-bit copy (CPU offload's refresh),
// holds what a cast of the updated parameter writes, bit for bit, over
// several of the kernel's blocks and a partial one; the update itself is
// unchanged.
TEST(GradKernels, AdamwWritesTheCastCopyBitForBit) {
  constexpr int64_t kCount = 40000;
  Hyper h;
  h.weightDecay = 0.01;
  h.gradScale = 0.5;
  std::vector<double> param = quantize(plan::F32, randomValues(kCount, 930));
  std::vector<double> grad = quantize(plan::F32, randomValues(kCount, 931, -3, 3));
  std::vector<double> expAvg = quantize(plan::F32, randomValues(kCount, 932, -1, 1));
  std::vector<double> expAvgSq = quantize(plan::F32, randomValues(kCount, 933, 0, 1));
  for (DType copyType : {plan::F16, plan::BF16}) {
    auto build = [&] {
      Call call("adamw");
      call.in(f32({kCount}, param))
          .in(f32({kCount}, grad))
          .in(f32({kCount}, expAvg))
          .in(f32({kCount}, expAvgSq))
          .in(scalarsTensor(h, 4))
          .inPlace(0)
          .inPlace(2)
          .inPlace(3);
      return call;
    };
    Call separate = build();
    ASSERT_OK(separate.run());
    Call cast("cast");
    cast.in(f32({kCount}, separate.values(0))).out(copyType, {kCount});
    ASSERT_OK(cast.run());
    Call fused = build();
    fused.out(copyType, {kCount});
    ASSERT_OK(fused.run());
    std::string what = std::string("copy in ") + dtypeName(copyType);
    for (size_t i = 0; i < 3; ++i)
      expectNear(fused.values(i), separate.values(i), 0, what);
    expectNear(fused.values(3), cast.values(0), 0, what);
  }
}

TEST(GradKernels, AdamwErrors) {
  // Optionally with a fourth result (the 16-bit copy) of `copy`'s type
  // and element count.
  auto base = [](Tensor scalars, std::vector<int64_t> stateShape, DType paramType,
                 std::optional<std::pair<DType, int64_t>> copy = std::nullopt) {
    Call call("adamw");
    call.in(encode(paramType, {3}, {1, 2, 3}))
        .in(encode(paramType, {3}, {1, 2, 3}))
        .in(encode(paramType, stateShape,
                   std::vector<double>(countOf(stateShape), 0.0)))
        .in(encode(paramType, {3}, {0, 0, 0}))
        .in(std::move(scalars))
        .inPlace(0)
        .inPlace(2)
        .inPlace(3);
    if (copy)
      call.out(copy->first, {copy->second});
    return call.run();
  };
  Hyper h;
  EXPECT_OK(base(scalarsTensor(h, 1), {3}, plan::F32));
  expectError(base(scalarsTensor(h, 1), {4}, plan::F32),
              StatusCode::kInvalidArgument,
              {"adamw", "'exp_avg' has shape [4], but 'param' has [3]"});
  expectError(base(scalarsTensor(h, 1), {3}, plan::F16),
              StatusCode::kUnimplemented,
              {"adamw", "'param' has element type f16; this kernel handles "
                        "f32 and f64"});
  expectError(base(scalarsTensor(h, 0), {3}, plan::F32),
              StatusCode::kInvalidArgument,
              {"adamw", "step (scalars[5]) must be at least 1, got 0"});
  expectError(base(f64({7}, std::vector<double>(7, 1.0)), {3}, plan::F32),
              StatusCode::kInvalidArgument,
              {"adamw", "'scalars' has shape [7], expected [8]"});
  expectError(base(f32({8}, std::vector<double>(8, 1.0)), {3}, plan::F32),
              StatusCode::kInvalidArgument,
              {"adamw", "'scalars' has element type f32, expected f64"});

  Call grad("adamw");
  grad.in(f32({3}, {1, 2, 3}))
      .in(f64({3}, {1, 2, 3}))
      .in(f32({3}, {0, 0, 0}))
      .in(f32({3}, {0, 0, 0}))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2)
      .inPlace(3);
  expectError(grad.run(), StatusCode::kInvalidArgument,
              {"adamw", "'grad' has element type f64, but 'param' has f32"});

  Call outputs("adamw");
  outputs.in(f32({3}, {1, 2, 3}))
      .in(f32({3}, {1, 2, 3}))
      .in(f32({3}, {0, 0, 0}))
      .in(f32({3}, {0, 0, 0}))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2)
      .out(plan::F32, {2});
  expectError(outputs.run(), StatusCode::kInvalidArgument,
              {"adamw", "'new_exp_avg_sq' has shape [2], but 'param' has [3]"});

  EXPECT_OK(base(scalarsTensor(h, 1), {3}, plan::F32, {{plan::BF16, 3}}));
  expectError(base(scalarsTensor(h, 1), {3}, plan::F32, {{plan::F32, 3}}),
              StatusCode::kUnimplemented,
              {"adamw", "'new_param_copy' has element type f32; this kernel handles f16 and bf16"});
  expectError(base(scalarsTensor(h, 1), {3}, plan::F32, {{plan::F16, 2}}),
              StatusCode::kInvalidArgument, {"adamw", "new_param_copy has 2 elements, param 3"});

  Call attr("adamw");
  attr.in(f32({1}, {1}))
      .in(f32({1}, {1}))
      .in(f32({1}, {0}))
      .in(f32({1}, {0}))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2)
      .inPlace(3)
      .stringAttr("adam_w_mode", "yes");
  expectError(attr.run(), StatusCode::kInvalidArgument,
              {"adamw", "attribute 'adam_w_mode' must be a bool"});
}

// A 16-bit gradient of an f32 parameter (a mixed-precision gradient
// offloaded in 16 bits) steps exactly as the same values in f32: over
// several widening blocks and a partial one, with and without the 16-bit
// copy, and cut into chunks for the host's threads.
TEST(GradKernels, AdamwWidensA16BitGradient) {
  constexpr int64_t kCount = 10000;
  Hyper h;
  h.weightDecay = 0.01;
  h.gradScale = 0.125;
  std::vector<double> param = quantize(plan::F32, randomValues(kCount, 950));
  std::vector<double> expAvg = quantize(plan::F32, randomValues(kCount, 951, -1, 1));
  std::vector<double> expAvgSq = quantize(plan::F32, randomValues(kCount, 952, 0, 1));
  for (DType gradType : {plan::BF16, plan::F16})
    for (bool withCopy : {false, true}) {
      std::vector<double> grad = quantize(gradType, randomValues(kCount, 953, -3, 3));
      auto build = [&](DType type) {
        Call call("adamw");
        call.in(f32({kCount}, param))
            .in(encode(type, {kCount}, grad))
            .in(f32({kCount}, expAvg))
            .in(f32({kCount}, expAvgSq))
            .in(scalarsTensor(h, 7))
            .inPlace(0)
            .inPlace(2)
            .inPlace(3);
        if (withCopy)
          call.out(plan::BF16, {kCount});
        return call;
      };
      Call wide = build(plan::F32), half = build(gradType);
      ASSERT_OK(wide.run());
      ASSERT_OK(half.run());
      for (size_t i = 0; i < wide.outputCount(); ++i)
        EXPECT_EQ(half.result(i).bytes, wide.result(i).bytes)
            << dtypeName(gradType) << " output " << i;
    }
  // Only an f32 parameter widens, and only a gradient of its shape.
  auto step = [&](DType paramType, Tensor grad) {
    Call call("adamw");
    call.in(encode(paramType, {3}, {1, 2, 3}))
        .in(std::move(grad))
        .in(encode(paramType, {3}, {0, 0, 0}))
        .in(encode(paramType, {3}, {0, 0, 0}))
        .in(scalarsTensor(h, 1))
        .inPlace(0)
        .inPlace(2)
        .inPlace(3);
    return call.run();
  };
  expectError(step(plan::F64, encode(plan::BF16, {3}, {1, 1, 1})),
              StatusCode::kInvalidArgument,
              {"adamw", "'grad' has element type bf16, but 'param' has f64"});
  expectError(step(plan::F32, encode(plan::BF16, {2}, {1, 1})),
              StatusCode::kInvalidArgument,
              {"adamw", "'grad' has shape [2], expected [3]"});
}

// A multi-tensor adamw (the compiler's fusion of a step's adamw
// instructions) steps every tensor exactly as its own instruction would:
// same bits, whatever the tensors' sizes.
TEST(GradKernels, MultiTensorAdamwStepsEachTensorAsAlone) {
  Hyper h;
  h.weightDecay = 0.02;
  h.gradScale = 0.5;
  const std::vector<int64_t> sizes = {7, 1, 1000, 33, 4096};
  uint32_t seed = 940;
  for (DType dtype : {plan::F32, plan::F64})
    for (bool decoupled : {true, false}) {
      Call fused("adamw");
      std::vector<Call> alone;
      for (int64_t n : sizes) {
        auto randomTensor = [&](uint32_t at, double lo = -1, double hi = 1) {
          return encode(dtype, {n}, randomValues(n, at, lo, hi));
        };
        Call one("adamw");
        one.in(randomTensor(seed))
            .in(randomTensor(seed + 1, -3, 3))
            .in(randomTensor(seed + 2, -0.5, 0.5))
            .in(randomTensor(seed + 3, 0, 0.3))
            .in(scalarsTensor(h, 5))
            .inPlace(0)
            .inPlace(2)
            .inPlace(3);
        seed += 4;
        if (!decoupled)
          one.boolAttr("adam_w_mode", false);
        for (size_t i = 0; i < 4; ++i)
          fused.in(one.input(i));
        alone.push_back(std::move(one));
      }
      fused.in(scalarsTensor(h, 5));
      for (size_t t = 0; t < sizes.size(); ++t)
        fused.inPlace(4 * t).inPlace(4 * t + 2).inPlace(4 * t + 3);
      if (!decoupled)
        fused.boolAttr("adam_w_mode", false);
      ASSERT_OK(fused.run());
      for (size_t t = 0; t < sizes.size(); ++t) {
        ASSERT_OK(alone[t].run());
        for (size_t i = 0; i < 3; ++i)
          EXPECT_EQ(fused.result(3 * t + i).bytes, alone[t].result(i).bytes)
              << dtypeName(dtype) << " tensor " << t << " output " << i;
      }
    }
}

TEST(GradKernels, MultiTensorAdamwErrors) {
  Hyper h;
  // Two tensors of 3 elements; `second` may change the second's state.
  auto build = [&](DType secondType, std::vector<int64_t> secondState) {
    Call call("adamw");
    call.in(f32({3}, {1, 2, 3}))
        .in(f32({3}, {1, 1, 1}))
        .in(f32({3}, {0, 0, 0}))
        .in(f32({3}, {0, 0, 0}))
        .in(encode(secondType, {3}, {4, 5, 6}))
        .in(encode(secondType, {3}, {1, 1, 1}))
        .in(encode(secondType, secondState,
                   std::vector<double>(countOf(secondState), 0.0)))
        .in(encode(secondType, {3}, {0, 0, 0}))
        .in(scalarsTensor(h, 1));
    for (size_t t = 0; t < 2; ++t)
      call.inPlace(4 * t).inPlace(4 * t + 2).inPlace(4 * t + 3);
    return call;
  };
  Call good = build(plan::F32, {3});
  ASSERT_OK(good.run());
  EXPECT_NE(good.values(3), std::vector<double>({4, 5, 6}));

  // A bad second tensor: nothing is written, the first tensor included.
  Call shape = build(plan::F32, {4});
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"adamw", "'exp_avg' has shape [4], but 'param' has [3]",
               "tensor #1 of 2"});
  EXPECT_EQ(shape.values(0), std::vector<double>({1, 2, 3}));
  Call mixed = build(plan::F64, {3});
  expectError(mixed.run(), StatusCode::kInvalidArgument,
              {"adamw", "'param' has element type f64, but 'the first "
                        "tensor's param' has f32",
               "tensor #1 of 2"});

  // Operands that are not whole tensors.
  Call layout = build(plan::F32, {3});
  layout.inPlace(0);
  expectError(layout.run(), StatusCode::kInvalidArgument,
              {"adamw", "for each of N tensors, 4 inputs and 3 outputs",
               "got 9 inputs and 7 outputs"});
}

// A multi-tensor adamw whose tensors each write their 16-bit copy (the
// refresh zcc-dist-compute-copies keeps, fused into the step) steps and
// copies every tensor exactly as its own adamw with a copy does, which
// writes what the cast kernel writes. A copy of another type than the
// first tensor's, or of another length than its parameter, stops the
// step before anything is written.
TEST(GradKernels, MultiTensorAdamwWritesEachCopyAsAlone) {
  Hyper h;
  h.weightDecay = 0.1;
  h.gradScale = 0.25;
  const std::vector<int64_t> sizes = {5, 20000, 1, 16385};
  for (DType copyType : {plan::BF16, plan::F16}) {
    uint32_t seed = 960;
    Call fused("adamw");
    std::vector<Call> alone;
    for (int64_t n : sizes) {
      Call one("adamw");
      one.in(f32({n}, randomValues(n, seed)))
          .in(f32({n}, randomValues(n, seed + 1, -3, 3)))
          .in(f32({n}, randomValues(n, seed + 2, -0.5, 0.5)))
          .in(f32({n}, randomValues(n, seed + 3, 0, 0.3)))
          .in(scalarsTensor(h, 7))
          .inPlace(0)
          .inPlace(2)
          .inPlace(3)
          .out(copyType, {n});
      seed += 4;
      for (size_t i = 0; i < 4; ++i)
        fused.in(one.input(i));
      alone.push_back(std::move(one));
    }
    fused.in(scalarsTensor(h, 7));
    for (size_t t = 0; t < sizes.size(); ++t)
      fused.inPlace(4 * t).inPlace(4 * t + 2).inPlace(4 * t + 3).out(copyType, {sizes[t]});
    ASSERT_OK(fused.run());
    for (size_t t = 0; t < sizes.size(); ++t) {
      ASSERT_OK(alone[t].run());
      for (size_t i = 0; i < 4; ++i)
        EXPECT_EQ(fused.result(4 * t + i).bytes, alone[t].result(i).bytes)
            << dtypeName(copyType) << " tensor " << t << " output " << i;
    }
  }

  auto two = [&](DType secondCopy, int64_t secondCopyLength) {
    Call call("adamw");
    for (int t = 0; t < 2; ++t)
      call.in(f32({3}, {1, 2, 3}))
          .in(f32({3}, {1, 1, 1}))
          .in(f32({3}, {0, 0, 0}))
          .in(f32({3}, {0, 0, 0}));
    call.in(scalarsTensor(h, 1));
    call.inPlace(0).inPlace(2).inPlace(3).out(plan::BF16, {3});
    call.inPlace(4).inPlace(6).inPlace(7).out(secondCopy, {secondCopyLength});
    return call;
  };
  Call good = two(plan::BF16, 3);
  ASSERT_OK(good.run());
  EXPECT_NE(good.values(3), std::vector<double>({0, 0, 0}));
  Call mixed = two(plan::F16, 3);
  expectError(mixed.run(), StatusCode::kInvalidArgument,
              {"adamw", "'new_param_copy' has element type f16, but 'the first tensor's "
                        "new_param_copy' has bf16",
               "tensor #1 of 2"});
  EXPECT_EQ(mixed.values(0), std::vector<double>({1, 2, 3}));
  expectError(two(plan::BF16, 2).run(), StatusCode::kInvalidArgument,
              {"adamw", "new_param_copy has 2 elements, param 3", "tensor #1 of 2"});
  expectError(two(plan::F32, 3).run(), StatusCode::kUnimplemented,
              {"adamw", "'new_param_copy' has element type f32; this kernel handles f16 and bf16",
               "tensor #1 of 2"});
  // The copies' tensors are f32 (zcc-dist-compute-copies makes them so).
  Call wide("adamw");
  wide.in(f64({3}, {1, 2, 3}))
      .in(f64({3}, {1, 1, 1}))
      .in(f64({3}, {0, 0, 0}))
      .in(f64({3}, {0, 0, 0}))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2)
      .inPlace(3)
      .out(plan::BF16, {3});
  expectError(wide.run(), StatusCode::kUnimplemented,
              {"adamw", "'param' has element type f64; this kernel handles f32 (with a 16-bit "
                        "copy)"});
}

// A multi-tensor fill writes each target as its own fill would, whatever
// its type; a target of the wrong type stops it before anything is
// written.
TEST(GradKernels, MultiTensorFill) {
  Call fused("fill");
  std::vector<Call> alone;
  const DType types[] = {plan::F32, plan::BF16, plan::F64, plan::F16};
  for (int t = 0; t < 7; ++t) {
    Call one("fill");
    one.out(types[t % 4], {t * 13 + 1}).floatAttr("value", 0.3);
    fused.out(types[t % 4], {t * 13 + 1});
    alone.push_back(std::move(one));
  }
  fused.floatAttr("value", 0.3);
  ASSERT_OK(fused.run());
  for (size_t t = 0; t < alone.size(); ++t) {
    ASSERT_OK(alone[t].run());
    EXPECT_EQ(fused.result(t).bytes, alone[t].result().bytes) << "target " << t;
  }

  Call integer("fill");
  integer.out(f32({2}, {1, 2})).out(i64({2}, {1, 2})).floatAttr("value", 0);
  expectError(integer.run(), StatusCode::kUnimplemented,
              {"fill", "target", "target #1"});
  EXPECT_EQ(integer.values(0), std::vector<double>({1, 2}));
  Call input("fill");
  input.in(f32({2}, {1, 2})).out(plan::F32, {2}).out(plan::F32, {2});
  input.floatAttr("value", 0);
  expectError(input.run(), StatusCode::kInvalidArgument,
              {"fill", "got 1 inputs and 2 outputs"});
}

/// torch.optim.SGD in double, from torch's _single_tensor_sgd, with the
/// gradient first multiplied by grad_scale.
void referenceSgdStep(const Hyper &h, double step, double dampening,
                      bool nesterov, const std::vector<double> &grad,
                      std::vector<double> &param, std::vector<double> &buffer) {
  for (size_t i = 0; i < param.size(); ++i) {
    double g = grad[i] * h.gradScale + h.weightDecay * param[i];
    if (h.momentum != 0) {
      buffer[i] = step == 1 ? g : h.momentum * buffer[i] + (1 - dampening) * g;
      g = nesterov ? g + h.momentum * buffer[i] : buffer[i];
    }
    param[i] -= h.lr * g;
  }
}

void checkSgd(DType dtype, const Hyper &h, double dampening, bool nesterov,
              double tolerance, uint32_t seed) {
  constexpr int64_t kCount = 6;
  std::vector<double> param = quantize(dtype, randomValues(kCount, seed));
  // Stale values: the first step must overwrite them (or, without
  // momentum, leave them alone).
  std::vector<double> buffer =
      quantize(dtype, randomValues(kCount, seed + 100));
  Call call("sgd");
  call.in(encode(dtype, {kCount}, param))
      .in(encode(dtype, {kCount}, std::vector<double>(kCount, 0.0)))
      .in(encode(dtype, {kCount}, buffer))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2);
  if (dampening != 0)
    call.floatAttr("dampening", dampening);
  if (nesterov)
    call.unitAttr("nesterov");
  for (int step = 1; step <= 5; ++step) {
    std::vector<double> grad =
        quantize(dtype, randomValues(kCount, seed + step, -3, 3));
    call.input(1) = encode(dtype, {kCount}, grad);
    call.input(3) = scalarsTensor(h, step);
    ASSERT_OK(call.run());
    referenceSgdStep(h, step, dampening, nesterov, grad, param, buffer);
    std::string what = std::string(dtypeName(dtype)) + " step " +
                       std::to_string(step) + " momentum " +
                       std::to_string(h.momentum) +
                       (nesterov ? " nesterov" : "");
    expectNear(call.values(0), param, tolerance, "param, " + what);
    expectNear(call.values(1), buffer, tolerance, "momentum_buffer, " + what);
  }
}

TEST(GradKernels, SgdMatchesTorchFormulas) {
  Hyper plain;
  plain.lr = 0.1;
  Hyper decayed = plain;
  decayed.weightDecay = 0.05;
  decayed.gradScale = 0.5;
  Hyper momentum = decayed;
  momentum.momentum = 0.9;
  for (DType dtype : {plan::F64, plan::F32}) {
    double tolerance = dtype == plan::F64 ? 1e-13 : 1e-5;
    checkSgd(dtype, plain, 0, false, tolerance, 1000);
    checkSgd(dtype, decayed, 0, false, tolerance, 1010);
    checkSgd(dtype, momentum, 0, false, tolerance, 1020);
    checkSgd(dtype, momentum, 0.3, false, tolerance, 1030);
    checkSgd(dtype, momentum, 0, true, tolerance, 1040);
  }
}

/// DeepSpeed's FusedLion step in double, for the elements where the
/// direction's sign is not in doubt.
void referenceLionStep(const Hyper &h, const std::vector<double> &grad,
                       std::vector<double> &param, std::vector<double> &avg) {
  for (size_t i = 0; i < param.size(); ++i) {
    double g = grad[i] * h.gradScale;
    double c = h.beta1 * avg[i] + (1 - h.beta1) * g;
    double sign = c > 0 ? 1 : c < 0 ? -1 : 0;
    param[i] = param[i] * (1 - h.lr * h.weightDecay) - h.lr * sign;
    avg[i] = h.beta2 * avg[i] + (1 - h.beta2) * g;
  }
}

TEST(GradKernels, LionMatchesItsFormula) {
  Hyper h;
  h.lr = 0.01;
  h.beta1 = 0.9;
  h.beta2 = 0.99;
  h.weightDecay = 0.1;
  h.gradScale = 0.5;
  const int64_t kCount = 257;
  for (DType dtype : {plan::F64, plan::F32}) {
    SCOPED_TRACE(dtypeName(dtype));
    double tolerance = dtype == plan::F64 ? 1e-13 : 1e-5;
    std::vector<double> param = quantize(dtype, randomValues(kCount, 60, -1, 1));
    std::vector<double> avg(kCount, 0.0);
    Call call("lion");
    call.in(encode(dtype, {kCount}, param))
        .in(encode(dtype, {kCount}, param))
        .in(encode(dtype, {kCount}, avg))
        .in(scalarsTensor(h, 1))
        .inPlace(0)
        .inPlace(2);
    for (int step = 1; step <= 5; ++step) {
      std::vector<double> grad = quantize(dtype, randomValues(kCount, 70 + step, -3, 3));
      // A zero gradient on a zero average: sign 0, the parameter only decays.
      if (step == 1)
        grad[0] = 0;
      call.input(1) = encode(dtype, {kCount}, grad);
      call.input(3) = scalarsTensor(h, step);
      ASSERT_OK(call.run());
      referenceLionStep(h, grad, param, avg);
      expectNear(call.values(0), param, tolerance, "param, step " + std::to_string(step));
      expectNear(call.values(1), avg, tolerance, "exp_avg, step " + std::to_string(step));
      // Every step moves each element by lr (the sign) up to the decay.
      param = call.values(0);
      avg = call.values(1);
    }
  }
}

TEST(GradKernels, AdagradMatchesTorchFormulas) {
  Hyper h;
  h.lr = 0.05;
  h.eps = 1e-10;
  h.weightDecay = 0.01;
  h.gradScale = 0.5;
  const double lrDecay = 0.1;
  const int64_t kCount = 129;
  for (DType dtype : {plan::F64, plan::F32}) {
    SCOPED_TRACE(dtypeName(dtype));
    double tolerance = dtype == plan::F64 ? 1e-13 : 1e-5;
    std::vector<double> param = quantize(dtype, randomValues(kCount, 90, -1, 1));
    std::vector<double> sum(kCount, 0.0);
    Call call("adagrad");
    call.in(encode(dtype, {kCount}, param))
        .in(encode(dtype, {kCount}, param))
        .in(encode(dtype, {kCount}, sum))
        .in(scalarsTensor(h, 1))
        .inPlace(0)
        .inPlace(2)
        .floatAttr("lr_decay", lrDecay);
    for (int step = 1; step <= 5; ++step) {
      std::vector<double> grad = quantize(dtype, randomValues(kCount, 95 + step, -3, 3));
      call.input(1) = encode(dtype, {kCount}, grad);
      call.input(3) = scalarsTensor(h, step);
      ASSERT_OK(call.run());
      // torch.optim.Adagrad: g += wd p; sum += g^2; p -= clr g / (sqrt(sum) + eps).
      double clr = h.lr / (1 + (step - 1) * lrDecay);
      for (int64_t i = 0; i < kCount; ++i) {
        double g = grad[i] * h.gradScale + h.weightDecay * param[i];
        sum[i] += g * g;
        param[i] -= clr * g / (std::sqrt(sum[i]) + h.eps);
      }
      expectNear(call.values(0), param, tolerance, "param, step " + std::to_string(step));
      expectNear(call.values(1), sum, tolerance, "sum, step " + std::to_string(step));
      param = call.values(0);
      sum = call.values(1);
    }
  }
}

TEST(GradKernels, LionErrors) {
  Hyper h;
  Call state("lion");
  state.in(f64({3}, {1, 2, 3}))
      .in(f64({3}, {1, 2, 3}))
      .in(f64({2}, {0, 0}))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2);
  expectError(state.run(), StatusCode::kInvalidArgument,
              {"lion", "'exp_avg' has shape [2], but 'param' has [3]"});
  Call step("lion");
  step.in(f64({1}, {1})).in(f64({1}, {1})).in(f64({1}, {0})).in(scalarsTensor(h, 0));
  step.inPlace(0).inPlace(2);
  expectError(step.run(), StatusCode::kInvalidArgument,
              {"lion", "step (scalars[5]) must be at least 1"});
}

TEST(GradKernels, SgdErrors) {
  Hyper h;
  Call buffer("sgd");
  buffer.in(f64({3}, {1, 2, 3}))
      .in(f64({3}, {1, 2, 3}))
      .in(f64({2}, {0, 0}))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2);
  expectError(buffer.run(), StatusCode::kInvalidArgument,
              {"sgd", "'momentum_buffer' has shape [2], but 'param' has [3]"});
  Call count("sgd");
  count.in(f64({3}, {1, 2, 3}))
      .in(f64({3}, {1, 2, 3}))
      .in(f64({3}, {0, 0, 0}))
      .in(scalarsTensor(h, 1))
      .inPlace(0);
  expectError(count.run(), StatusCode::kInvalidArgument,
              {"sgd", "expected 2 outputs, got 1"});
  Call dampening("sgd");
  dampening.in(f64({1}, {1}))
      .in(f64({1}, {1}))
      .in(f64({1}, {0}))
      .in(scalarsTensor(h, 1))
      .inPlace(0)
      .inPlace(2)
      .stringAttr("dampening", "0.1");
  expectError(dampening.run(), StatusCode::kInvalidArgument,
              {"sgd", "attribute 'dampening' must be a float"});
}

} // namespace
} // namespace zcc::cpu
