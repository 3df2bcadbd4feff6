//===- CpuKernelsTest.cpp - The cpu backend's reference kernels -----------===//
//
// Every kernel against expectations computed by hand or independently in the
// test (naive loops in double), plus the errors each must report instead of
// crashing. Built a second time with ZCC_COUNT_ALLOCATIONS, as a binary of
// its own whose operator new counts, every successful call must also make
// no allocation: a step of the cpu backend allocates nothing.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/KernelSupport.h"
#include "test/Runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace zcc::cpu {
namespace {

using namespace test;
using plan::DType;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

//===----------------------------------------------------------------------===//
// Test tensors and kernel calls
//===----------------------------------------------------------------------===//

Tensor f32(std::vector<int64_t> shape, const std::vector<float> &values) {
  return makeTensor(plan::F32, std::move(shape), values);
}
Tensor i8(std::vector<int64_t> shape, const std::vector<int8_t> &values) {
  return makeTensor(plan::I8, std::move(shape), values);
}
Tensor boolean(std::vector<int64_t> shape, const std::vector<uint8_t> &values) {
  return makeTensor(plan::BOOL, std::move(shape), values);
}
Tensor bits16(DType dtype, std::vector<int64_t> shape,
              const std::vector<uint16_t> &values) {
  return makeTensor(dtype, std::move(shape), values);
}

/// Values 0, 1, 2, ... (as T), handy for data-movement kernels.
template <typename T> std::vector<T> iota(int64_t n, T start = T(0)) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<T>(start + static_cast<T>(i));
  return v;
}

std::vector<float> randomFloats(int64_t n, uint32_t seed, float lo = -2.0f,
                                float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float &x : v)
    x = dist(rng);
  return v;
}

//===----------------------------------------------------------------------===//
// Registry and argument checks
//===----------------------------------------------------------------------===//

// The registry bisects a sorted table: an unsorted entry would be unfindable.
TEST(CpuKernels, EveryOpHasAKernelAndNamesAreSorted) {
  const char *expected[] = {
      "add", "sub", "mul", "div", "pow", "max", "min", "equal", "less",
      "greater", "where", "cast", "is_nan", "neg", "exp", "sqrt", "tanh",
      "relu", "sigmoid", "log", "erf", "reciprocal", "gelu", "dropout", "matmul",
      "softmax", "log_softmax", "layer_norm", "reduce_sum", "reduce_mean",
      "reduce_max", "attention", "qkv_attention", "reshape", "transpose", "concat", "slice",
      "gather", "broadcast", "trilu", "mse_loss", "cross_entropy", "nll_loss",
      "copy",
      // The training kernels (GradKernelsTest.cpp).
      "softmax_grad", "log_softmax_grad", "layer_norm_grad", "attention_grad",
      "qkv_attention_grad",
      "cross_entropy_grad", "nll_loss_grad", "mse_loss_grad", "gather_grad",
      "slice_grad", "gelu_grad", "accumulate", "accumulate_matmul", "fill", "sum_squares", "adamw",
      "adagrad", "lamb_moments", "lamb_step", "lion", "sgd"};
  std::vector<std::string> names = kernelNames();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names.size(), std::size(expected));
  for (const char *name : expected)
    EXPECT_NE(findKernel(name), nullptr) << name;
  for (const std::string &name : names)
    EXPECT_NE(findKernel(name), nullptr) << name;
  EXPECT_EQ(findKernel("bogus"), nullptr);
  EXPECT_EQ(findKernel(""), nullptr);
  EXPECT_EQ(findKernel("zzz"), nullptr);
}

#ifdef ZCC_COUNT_ALLOCATIONS
// The no-allocation checks are only as good as the counter behind them.
TEST(CpuKernels, AllocationCounterSeesAllocations) {
  test::AllocationCounter counter;
  std::vector<int> *vector = new std::vector<int>(3);
  delete vector;
  EXPECT_EQ(counter.count(), 2);
}
#endif

TEST(CpuKernels, DTypeHelpers) {
  EXPECT_EQ(dtypeBytes(plan::F32), 4u);
  EXPECT_EQ(dtypeBytes(plan::F16), 2u);
  EXPECT_EQ(dtypeBytes(plan::BF16), 2u);
  EXPECT_EQ(dtypeBytes(plan::F64), 8u);
  EXPECT_EQ(dtypeBytes(plan::I64), 8u);
  EXPECT_EQ(dtypeBytes(plan::I32), 4u);
  EXPECT_EQ(dtypeBytes(plan::I8), 1u);
  EXPECT_EQ(dtypeBytes(plan::BOOL), 1u);
  EXPECT_EQ(dtypeBytes(plan::DTYPE_UNSPECIFIED), 0u);
  EXPECT_STREQ(dtypeName(plan::BF16), "bf16");
  EXPECT_STREQ(dtypeName(static_cast<DType>(99)), "unknown");
  TensorView scalar;
  EXPECT_EQ(scalar.numElements(), 1);
  TensorView empty{nullptr, plan::F32, {3, 0, 2}};
  EXPECT_EQ(empty.numElements(), 0);
}

TEST(CpuKernels, KernelArgsAttributeAccessors) {
  plan::Instruction instruction;
  auto &attrs = *instruction.mutable_attributes();
  attrs["i"].set_i(7);
  attrs["f"].set_f(0.5);
  attrs["s"].set_s("tanh");
  attrs["b"].set_b(true);
  attrs["unit"];
  attrs["ints"].mutable_ints()->add_values(3);
  attrs["ints"].mutable_ints()->add_values(-1);
  KernelArgs args;
  args.attributes = &instruction.attributes();
  EXPECT_TRUE(args.hasAttr("i"));
  EXPECT_FALSE(args.hasAttr("missing"));
  EXPECT_EQ(args.intAttr("i", 0), 7);
  EXPECT_EQ(args.intAttr("missing", -3), -3);
  EXPECT_EQ(args.intAttr("s", -3), -3);
  EXPECT_EQ(args.floatAttr("f", 0), 0.5);
  EXPECT_EQ(args.floatAttr("i", 0), 7.0);
  EXPECT_EQ(args.stringAttr("s", "none"), "tanh");
  EXPECT_EQ(args.stringAttr("i", "none"), "none");
  EXPECT_EQ(args.intsAttr("ints"), (std::vector<int64_t>{3, -1}));
  EXPECT_TRUE(args.intsAttr("i").empty());
  EXPECT_TRUE(args.boolAttr("b", false));
  EXPECT_TRUE(args.boolAttr("unit", false));
  EXPECT_FALSE(args.boolAttr("missing", false));
  KernelArgs none;
  EXPECT_FALSE(none.hasAttr("i"));
  EXPECT_EQ(none.intAttr("i", 4), 4);
}

TEST(CpuKernels, OperandCountsAreChecked) {
  Call call("add");
  call.in(f32({1}, {1})).out(plan::F32, {1});
  expectError(call.run(), StatusCode::kInvalidArgument,
              {"add", "expected 2 inputs, got 1"});
  Call noResult("exp");
  noResult.in(f32({1}, {1}));
  expectError(noResult.run(), StatusCode::kInvalidArgument,
              {"exp", "expected 1 outputs, got 0"});
}

TEST(CpuKernels, UnknownDTypeIsRefused) {
  Call call("relu");
  Tensor odd = f32({2}, {1, 2});
  odd.dtype = static_cast<DType>(42);
  call.in(odd).out(plan::F32, {2});
  expectError(call.run(), StatusCode::kInvalidArgument,
              {"relu", "'input'", "unknown"});
  Call unspecified("reshape");
  Tensor blank = f32({2}, {1, 2});
  blank.dtype = plan::DTYPE_UNSPECIFIED;
  unspecified.in(blank).out(plan::F32, {2});
  expectError(unspecified.run(), StatusCode::kInvalidArgument,
              {"reshape", "unspecified"});
}

TEST(CpuKernels, MissingDataAndNegativeDimsAreRefused) {
  KernelArgs args;
  args.inputs.push_back({nullptr, plan::F32, {2}});
  float result[2];
  args.outputs.push_back({result, plan::F32, {2}});
  expectError(findKernel("neg")(args), StatusCode::kInvalidArgument,
              {"neg", "'input'", "no data"});
  args.inputs[0] = {result, plan::F32, {-2}};
  expectError(findKernel("neg")(args), StatusCode::kInvalidArgument,
              {"neg", "negative dimension"});
}

TEST(CpuKernels, AttributeOfTheWrongKindIsRefused) {
  Call call("softmax");
  call.in(f32({2}, {1, 2})).out(plan::F32, {2}).stringAttr("axis", "0");
  expectError(call.run(), StatusCode::kInvalidArgument,
              {"softmax", "attribute 'axis' must be an int, got a string"});
}

//===----------------------------------------------------------------------===//
// Broadcasting binary arithmetic
//===----------------------------------------------------------------------===//

// [2, 3] + [3] broadcasts the row; [2, 3] + [2, 1] the column.
TEST(CpuKernels, AddBroadcastsTrailingAndUnitDimensions) {
  Call row("add");
  row.in(f32({2, 3}, {1, 2, 3, 4, 5, 6}))
      .in(f32({3}, {10, 20, 30}))
      .out(plan::F32, {2, 3});
  ASSERT_OK(row.run());
  expectNear(row.floats(), std::vector<float>{11, 22, 33, 14, 25, 36});

  Call column("add");
  column.in(f32({2, 3}, {1, 2, 3, 4, 5, 6}))
      .in(f32({2, 1}, {100, 200}))
      .out(plan::F32, {2, 3});
  ASSERT_OK(column.run());
  expectNear(column.floats(), std::vector<float>{101, 102, 103, 204, 205, 206});

  Call scalar("add");
  scalar.in(f32({}, {0.5f})).in(f32({2}, {1, 2})).out(plan::F32, {2});
  ASSERT_OK(scalar.run());
  expectNear(scalar.floats(), std::vector<float>{1.5f, 2.5f});
}

// Both operands stretch: [2, 1, 3] op [4, 1] -> [2, 4, 3], checked against
// explicit index arithmetic for every float op.
TEST(CpuKernels, FloatBinaryOpsWithTwoSidedBroadcast) {
  std::vector<float> lhs = {0.5f, 1.5f, 2.0f, -1.0f, 3.0f, 0.25f};
  std::vector<float> rhs = {2.0f, -0.5f, 1.0f, 4.0f};
  struct Op {
    const char *name;
    double (*fn)(double, double);
  };
  const Op ops[] = {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return a / b; }},
      {"pow", [](double a, double b) { return std::pow(a, b); }},
      {"max", [](double a, double b) { return a > b ? a : b; }},
      {"min", [](double a, double b) { return a < b ? a : b; }},
  };
  for (const Op &op : ops) {
    SCOPED_TRACE(op.name);
    Call call(op.name);
    call.in(f32({2, 1, 3}, lhs)).in(f32({4, 1}, rhs)).out(plan::F32, {2, 4, 3});
    ASSERT_OK(call.run());
    std::vector<double> expected;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 3; ++k)
          expected.push_back(op.fn(lhs[i * 3 + k], rhs[j]));
    expectNear(call.floats(), expected, 1e-6);
  }
}

TEST(CpuKernels, MaxAndMinPropagateNaN) {
  for (const char *name : {"max", "min"}) {
    Call call(name);
    call.in(f32({3}, {kNaN, 1, 2}))
        .in(f32({3}, {0, kNaN, 5}))
        .out(plan::F32, {3});
    ASSERT_OK(call.run());
    std::vector<float> got = call.floats();
    EXPECT_TRUE(std::isnan(got[0])) << name;
    EXPECT_TRUE(std::isnan(got[1])) << name;
    EXPECT_EQ(got[2], std::string(name) == "max" ? 5.0f : 2.0f);
  }
}

TEST(CpuKernels, IntegerArithmeticWrapsAndBroadcasts) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Call add("add");
  add.in(i64({3}, {kMax, -5, 7})).in(i64({3}, {1, 3, -7})).out(plan::I64, {3});
  ASSERT_OK(add.run());
  EXPECT_EQ(add.result().values<int64_t>(),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -2, 0}));

  Call mul("mul");
  mul.in(i64({2, 2}, {1, 2, 3, 4}))
      .in(i64({2}, {10, -1}))
      .out(plan::I64, {2, 2});
  ASSERT_OK(mul.run());
  EXPECT_EQ(mul.result().values<int64_t>(),
            (std::vector<int64_t>{10, -2, 30, -4}));

  Call sub("sub");
  sub.in(i32({2}, {5, -3})).in(i32({}, {4})).out(plan::I32, {2});
  ASSERT_OK(sub.run());
  EXPECT_EQ(sub.result().values<int32_t>(), (std::vector<int32_t>{1, -7}));

  Call max("max");
  max.in(i64({3}, {1, 9, -4})).in(i64({3}, {2, 3, -5})).out(plan::I64, {3});
  ASSERT_OK(max.run());
  EXPECT_EQ(max.result().values<int64_t>(), (std::vector<int64_t>{2, 9, -4}));

  Call min("min");
  min.in(i64({3}, {1, 9, -4})).in(i64({3}, {2, 3, -5})).out(plan::I64, {3});
  ASSERT_OK(min.run());
  EXPECT_EQ(min.result().values<int64_t>(), (std::vector<int64_t>{1, 3, -5}));
}

TEST(CpuKernels, BinaryErrors) {
  Call shapes("add");
  shapes.in(f32({2, 3}, iota<float>(6)))
      .in(f32({4}, iota<float>(4)))
      .out(plan::F32, {2, 3});
  expectError(shapes.run(), StatusCode::kInvalidArgument,
              {"add", "[2, 3] and [4] are not broadcast-compatible"});

  Call result("mul");
  result.in(f32({2, 3}, iota<float>(6)))
      .in(f32({3}, iota<float>(3)))
      .out(plan::F32, {3, 2});
  expectError(result.run(), StatusCode::kInvalidArgument,
              {"mul", "'result' has shape [3, 2], expected [2, 3]"});

  Call mixed("sub");
  mixed.in(f32({2}, {1, 2})).in(i64({2}, {1, 2})).out(plan::F32, {2});
  expectError(mixed.run(), StatusCode::kInvalidArgument,
              {"sub", "'rhs' has element type i64, but 'lhs' has f32"});

  Call intDiv("div");
  intDiv.in(i64({1}, {4})).in(i64({1}, {0})).out(plan::I64, {1});
  expectError(intDiv.run(), StatusCode::kUnimplemented, {"div", "i64", "f32"});

  Call boolAdd("add");
  boolAdd.in(boolean({1}, {1})).in(boolean({1}, {1})).out(plan::BOOL, {1});
  expectError(boolAdd.run(), StatusCode::kUnimplemented, {"add", "bool"});
}

//===----------------------------------------------------------------------===//
// Comparisons, where, is_nan
//===----------------------------------------------------------------------===//

TEST(CpuKernels, ComparisonsBroadcastAndYieldBool) {
  std::vector<float> lhs = {1, 2, 3, kNaN, 5, 6};
  std::vector<float> rhs = {2, 5, kNaN};
  struct Case {
    const char *name;
    std::vector<uint8_t> expected;
  };
  // lhs [2, 3] against rhs [3]; NaN compares false everywhere.
  const Case cases[] = {
      {"equal", {0, 0, 0, 0, 1, 0}},
      {"less", {1, 1, 0, 0, 0, 0}},
      {"greater", {0, 0, 0, 0, 0, 0}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    Call call(c.name);
    call.in(f32({2, 3}, lhs)).in(f32({3}, rhs)).out(plan::BOOL, {2, 3});
    ASSERT_OK(call.run());
    EXPECT_EQ(call.result().values<uint8_t>(), c.expected);
  }
  Call ints("greater");
  ints.in(i64({3}, {-1, 0, 7})).in(i64({1}, {0})).out(plan::BOOL, {3});
  ASSERT_OK(ints.run());
  EXPECT_EQ(ints.result().values<uint8_t>(), (std::vector<uint8_t>{0, 0, 1}));
  Call bools("equal");
  bools.in(boolean({2}, {1, 0})).in(boolean({2}, {2, 0})).out(plan::BOOL, {2});
  ASSERT_OK(bools.run());
  EXPECT_EQ(bools.result().values<uint8_t>(), (std::vector<uint8_t>{1, 1}));
}

TEST(CpuKernels, ComparisonErrors) {
  Call notBool("less");
  notBool.in(f32({1}, {1})).in(f32({1}, {2})).out(plan::F32, {1});
  expectError(notBool.run(), StatusCode::kInvalidArgument,
              {"less", "'result' has element type f32, expected bool"});
  Call mixed("equal");
  mixed.in(i32({1}, {1})).in(i64({1}, {1})).out(plan::BOOL, {1});
  expectError(mixed.run(), StatusCode::kInvalidArgument, {"equal", "i32"});
}

TEST(CpuKernels, WhereSelectsWithThreeWayBroadcast) {
  // condition [2, 1], on_true [2, 3], on_false a scalar.
  Call call("where");
  call.in(boolean({2, 1}, {1, 0}))
      .in(f32({2, 3}, {1, 2, 3, 4, 5, 6}))
      .in(f32({}, {-1}))
      .out(plan::F32, {2, 3});
  ASSERT_OK(call.run());
  expectNear(call.floats(), std::vector<float>{1, 2, 3, -1, -1, -1});

  Call ints("where");
  ints.in(boolean({3}, {0, 1, 0}))
      .in(i64({1}, {7}))
      .in(i64({2, 3}, {1, 2, 3, 4, 5, 6}))
      .out(plan::I64, {2, 3});
  ASSERT_OK(ints.run());
  EXPECT_EQ(ints.result().values<int64_t>(),
            (std::vector<int64_t>{1, 7, 3, 4, 7, 6}));
}

TEST(CpuKernels, WhereErrors) {
  Call notBool("where");
  notBool.in(f32({1}, {1}))
      .in(f32({1}, {1}))
      .in(f32({1}, {2}))
      .out(plan::F32, {1});
  expectError(notBool.run(), StatusCode::kInvalidArgument,
              {"where", "'condition' has element type f32, expected bool"});
  Call branches("where");
  branches.in(boolean({1}, {1}))
      .in(f32({1}, {1}))
      .in(i64({1}, {2}))
      .out(plan::F32, {1});
  expectError(branches.run(), StatusCode::kInvalidArgument,
              {"where", "'on_false'"});
  Call shapes("where");
  shapes.in(boolean({2}, {1, 0}))
      .in(f32({3}, {1, 2, 3}))
      .in(f32({1}, {0}))
      .out(plan::F32, {3});
  expectError(shapes.run(), StatusCode::kInvalidArgument,
              {"where", "not broadcast-compatible"});
}

TEST(CpuKernels, IsNan) {
  Call call("is_nan");
  call.in(f32({4}, {kNaN, 1, kInf, -kNaN})).out(plan::BOOL, {4});
  ASSERT_OK(call.run());
  EXPECT_EQ(call.result().values<uint8_t>(),
            (std::vector<uint8_t>{1, 0, 0, 1}));
  Call half("is_nan");
  half.in(bits16(plan::F16, {3}, {0x7e00, 0x7c00, 0x3c00}))
      .out(plan::BOOL, {3});
  ASSERT_OK(half.run());
  EXPECT_EQ(half.result().values<uint8_t>(), (std::vector<uint8_t>{1, 0, 0}));
  Call ints("is_nan");
  ints.in(i64({1}, {1})).out(plan::BOOL, {1});
  expectError(ints.run(), StatusCode::kUnimplemented, {"is_nan", "i64"});
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

TEST(CpuKernels, CastFloatToIntegerTruncatesAndSaturates) {
  Call call("cast");
  call.in(f32({6}, {-1.7f, 2.9f, -0.5f, kNaN, 1e10f, -1e10f}))
      .out(plan::I32, {6});
  ASSERT_OK(call.run());
  EXPECT_EQ(
      call.result().values<int32_t>(),
      (std::vector<int32_t>{-1, 2, 0, 0, std::numeric_limits<int32_t>::max(),
                            std::numeric_limits<int32_t>::min()}));
  Call toI8("cast");
  toI8.in(f64({3}, {127.9, -128.5, 300})).out(plan::I8, {3});
  ASSERT_OK(toI8.run());
  EXPECT_EQ(toI8.result().values<int8_t>(),
            (std::vector<int8_t>{127, -128, 127}));
}

TEST(CpuKernels, CastBetweenIntegersBoolsAndFloats) {
  Call toBool("cast");
  toBool.in(i64({3}, {0, -3, 5})).out(plan::BOOL, {3});
  ASSERT_OK(toBool.run());
  EXPECT_EQ(toBool.result().values<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));

  Call fromBool("cast");
  fromBool.in(boolean({3}, {0, 1, 7})).out(plan::F32, {3});
  ASSERT_OK(fromBool.run());
  expectNear(fromBool.floats(), std::vector<float>{0, 1, 1});

  // Narrowing keeps the low bits: 300 = 0x12c -> 0x2c = 44.
  Call narrow("cast");
  narrow.in(i64({3}, {300, -1, 1LL << 40})).out(plan::I8, {3});
  ASSERT_OK(narrow.run());
  EXPECT_EQ(narrow.result().values<int8_t>(), (std::vector<int8_t>{44, -1, 0}));

  Call widen("cast");
  widen.in(i8({2}, {-128, 5})).out(plan::I64, {2});
  ASSERT_OK(widen.run());
  EXPECT_EQ(widen.result().values<int64_t>(), (std::vector<int64_t>{-128, 5}));

  // f64 -> f32 rounds to nearest even: 1 + 2^-24 is a tie, goes to 1.
  Call toF32("cast");
  toF32.in(f64({2}, {1.0 + std::ldexp(1.0, -24), 0.1})).out(plan::F32, {2});
  ASSERT_OK(toF32.run());
  EXPECT_EQ(toF32.floats(), (std::vector<float>{1.0f, 0.1f}));

  Call toF64("cast");
  toF64.in(i32({2}, {-7, 1 << 30})).out(plan::F64, {2});
  ASSERT_OK(toF64.run());
  EXPECT_EQ(toF64.result().values<double>(),
            (std::vector<double>{-7.0, 1073741824.0}));

  Call same("cast");
  same.in(i64({2}, {3, 4})).out(plan::I64, {2});
  ASSERT_OK(same.run());
  EXPECT_EQ(same.result().values<int64_t>(), (std::vector<int64_t>{3, 4}));
}

TEST(CpuKernels, CastHalfAndBFloat16ThroughF32) {
  // 65520 is the tie between the largest half (65504) and infinity; 1 +
  // 2^-11 the tie between 1 and its successor: both round to even.
  Call toHalf("cast");
  toHalf
      .in(f32({6}, {1.0f, -2.0f, 65504.0f, 65520.0f,
                    1.0f + std::ldexp(1.0f, -11), std::ldexp(1.0f, -24)}))
      .out(plan::F16, {6});
  ASSERT_OK(toHalf.run());
  EXPECT_EQ(
      toHalf.result().values<uint16_t>(),
      (std::vector<uint16_t>{0x3c00, 0xc000, 0x7bff, 0x7c00, 0x3c00, 0x0001}));
  Call fromHalf("cast");
  fromHalf.in(bits16(plan::F16, {4}, {0x3c00, 0x0001, 0xfc00, 0x3555}))
      .out(plan::F32, {4});
  ASSERT_OK(fromHalf.run());
  expectNear(
      fromHalf.floats(),
      std::vector<double>{1.0, std::ldexp(1.0, -24), -INFINITY, 0.333251953125},
      0);

  Call toBf16("cast");
  // 0x3f808000 is the tie between bf16 0x3f80 and 0x3f81 (to even: 0x3f80);
  // 0x3f818000 the tie between 0x3f81 and 0x3f82 (to even: 0x3f82).
  float tieDown, tieUp;
  uint32_t down = 0x3f808000, up = 0x3f818000;
  std::memcpy(&tieDown, &down, 4);
  std::memcpy(&tieUp, &up, 4);
  toBf16.in(f32({4}, {1.0f, tieDown, tieUp, kNaN})).out(plan::BF16, {4});
  ASSERT_OK(toBf16.run());
  std::vector<uint16_t> bf = toBf16.result().values<uint16_t>();
  EXPECT_EQ(bf[0], 0x3f80);
  EXPECT_EQ(bf[1], 0x3f80);
  EXPECT_EQ(bf[2], 0x3f82);
  EXPECT_EQ(bf[3] & 0x7f80, 0x7f80);
  EXPECT_NE(bf[3] & 0x7f, 0) << "NaN must stay NaN";

  Call fromBf16("cast");
  fromBf16.in(bits16(plan::BF16, {2}, {0x3f80, 0xc0a0})).out(plan::F32, {2});
  ASSERT_OK(fromBf16.run());
  EXPECT_EQ(fromBf16.floats(), (std::vector<float>{1.0f, -5.0f}));
}

// Every finite half round-trips, and every midpoint between neighbours
// rounds to the one with the even mantissa.
TEST(CpuKernels, HalfConversionRoundsToNearestEvenEverywhere) {
  using detail::floatToHalf;
  using detail::halfToFloat;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    float value = halfToFloat(static_cast<uint16_t>(h));
    ASSERT_EQ(floatToHalf(value), h) << "round trip of " << h;
    ASSERT_EQ(floatToHalf(-value), h | 0x8000) << "round trip of -" << h;
    if (h + 1 == 0x7c00)
      break; // Above the largest half lies infinity: see the cast test.
    float next = halfToFloat(static_cast<uint16_t>(h + 1));
    float mid = (value + next) / 2; // Exact: halves have 11-bit mantissas.
    uint32_t even = (h & 1) ? h + 1 : h;
    ASSERT_EQ(floatToHalf(mid), even) << "midpoint above " << h;
    ASSERT_EQ(floatToHalf(std::nextafter(mid, 0.0f)), h) << "below mid " << h;
    ASSERT_EQ(floatToHalf(std::nextafter(mid, kInf)), h + 1)
        << "above mid " << h;
  }
  EXPECT_EQ(floatToHalf(kInf), 0x7c00);
  EXPECT_EQ(floatToHalf(-kInf), 0xfc00);
  EXPECT_EQ(floatToHalf(kNaN) & 0x7c00, 0x7c00);
  EXPECT_NE(floatToHalf(kNaN) & 0x3ff, 0);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7e00)));
}

TEST(CpuKernels, CastErrors) {
  // Every pair of known types converts (f16 1.0 to i64 1); only shapes and
  // unknown types are errors.
  Call halfToInt("cast");
  halfToInt.in(bits16(plan::F16, {1}, {0x3c00})).out(plan::I64, {1});
  ASSERT_OK(halfToInt.run());
  EXPECT_EQ(halfToInt.result().values<int64_t>(), std::vector<int64_t>{1});
  Call shape("cast");
  shape.in(f32({2}, {1, 2})).out(plan::I64, {3});
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"cast", "'result' has shape [3], expected [2]"});
}

//===----------------------------------------------------------------------===//
// Unary float kernels and gelu
//===----------------------------------------------------------------------===//

TEST(CpuKernels, UnaryFloatKernels) {
  std::vector<float> x = {-3.0f, -0.5f, 0.0f, 0.25f, 1.0f, 4.0f};
  std::vector<float> positive = {0.25f, 0.5f, 1.0f, 2.0f, 4.0f, 9.0f};
  struct Case {
    const char *name;
    const std::vector<float> *input;
    double (*fn)(double);
  };
  const Case cases[] = {
      {"neg", &x, [](double v) { return -v; }},
      {"exp", &x, [](double v) { return std::exp(v); }},
      {"sqrt", &positive, [](double v) { return std::sqrt(v); }},
      {"tanh", &x, [](double v) { return std::tanh(v); }},
      {"relu", &x, [](double v) { return v > 0 ? v : 0.0; }},
      {"sigmoid", &x, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"log", &positive, [](double v) { return std::log(v); }},
      {"erf", &x, [](double v) { return std::erf(v); }},
      {"reciprocal", &positive, [](double v) { return 1 / v; }},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    Call call(c.name);
    call.in(f32({2, 3}, *c.input)).out(plan::F32, {2, 3});
    ASSERT_OK(call.run());
    std::vector<double> expected;
    for (float v : *c.input)
      expected.push_back(c.fn(v));
    expectNear(call.floats(), expected, 1e-6);
  }
}

TEST(CpuKernels, UnaryEdgeValues) {
  Call sigmoid("sigmoid");
  sigmoid.in(f32({3}, {-200.0f, 200.0f, 0.0f})).out(plan::F32, {3});
  ASSERT_OK(sigmoid.run());
  EXPECT_EQ(sigmoid.floats(), (std::vector<float>{0.0f, 1.0f, 0.5f}));
  Call relu("relu");
  relu.in(f32({2}, {kNaN, -kInf})).out(plan::F32, {2});
  ASSERT_OK(relu.run());
  EXPECT_TRUE(std::isnan(relu.floats()[0]));
  EXPECT_EQ(relu.floats()[1], 0.0f);
  Call log("log");
  log.in(f32({2}, {0.0f, -1.0f})).out(plan::F32, {2});
  ASSERT_OK(log.run());
  EXPECT_EQ(log.floats()[0], -kInf);
  EXPECT_TRUE(std::isnan(log.floats()[1]));
}

TEST(CpuKernels, UnaryErrors) {
  Call ints("exp");
  ints.in(i64({1}, {1})).out(plan::I64, {1});
  expectError(ints.run(), StatusCode::kUnimplemented,
              {"exp", "'input' has element type i64"});
  Call shape("tanh");
  shape.in(f32({2}, {1, 2})).out(plan::F32, {1, 2});
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"tanh", "'result' has shape [1, 2], expected [2]"});
  Call dtype("neg");
  dtype.in(f32({1}, {1})).out(plan::F64, {1});
  expectError(dtype.run(), StatusCode::kInvalidArgument,
              {"neg", "'result' has element type f64, expected f32"});
}

TEST(CpuKernels, GeluBothForms) {
  std::vector<float> x = {-2.0f, -0.5f, 0.0f, 1.0f, 3.0f};
  // The default is the erf form.
  for (const char *approximate : {"", "none", "tanh"}) {
    SCOPED_TRACE(approximate);
    Call call("gelu");
    call.in(f32({5}, x)).out(plan::F32, {5});
    if (*approximate)
      call.stringAttr("approximate", approximate);
    ASSERT_OK(call.run());
    std::vector<double> expected;
    for (double v : x) {
      if (std::string(approximate) == "tanh")
        expected.push_back(
            0.5 * v *
            (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
      else
        expected.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    }
    expectNear(call.floats(), expected, 1e-6);
  }
  // Published values: gelu(1) = 0.8413447 (erf), 0.8411920 (tanh).
  Call exact("gelu");
  exact.in(f32({1}, {1.0f})).out(plan::F32, {1});
  ASSERT_OK(exact.run());
  EXPECT_NEAR(exact.floats()[0], 0.8413447, 1e-6);
  Call tanhForm("gelu");
  tanhForm.in(f32({1}, {1.0f}))
      .out(plan::F32, {1})
      .stringAttr("approximate", "tanh");
  ASSERT_OK(tanhForm.run());
  EXPECT_NEAR(tanhForm.floats()[0], 0.8411920, 1e-6);
}

TEST(CpuKernels, GeluRejectsUnknownApproximation) {
  Call call("gelu");
  call.in(f32({1}, {1}))
      .out(plan::F32, {1})
      .stringAttr("approximate", "sigmoid");
  expectError(
      call.run(), StatusCode::kInvalidArgument,
      {"gelu", "approximate must be \"none\" or \"tanh\"", "\"sigmoid\""});
}

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//

/// A dropout call over `x` of `rows` samples, keyed by (seed, first).
Call dropoutCall(Tensor x, int64_t rows, int64_t seed, int64_t first, int64_t key = 11,
                 double ratio = 0.25) {
  int64_t elements = countOf(x.shape);
  plan::DType dtype = x.dtype;
  std::vector<int64_t> shape = x.shape;
  Call call("dropout");
  call.in(std::move(x)).in(i64({2}, {seed, first})).out(dtype, shape);
  call.floatAttr("ratio", ratio).intAttr("key", key).intAttr("sample_elements", elements / rows);
  return call;
}

TEST(CpuKernels, DropoutDropsAboutTheRatioAndScalesTheRest) {
  const int64_t n = 200000;
  Call call = dropoutCall(f32({4, n / 4}, std::vector<float>(n, 1.0f)), 4, 5, 0);
  ASSERT_OK(call.run());
  const float kept = static_cast<float>(1.0 / 0.75);
  int64_t dropped = 0;
  for (double v : call.floats()) {
    ASSERT_TRUE(v == 0.0 || v == kept) << v;
    dropped += v == 0.0;
  }
  // 0.25 +- 0.005: five standard deviations of the fraction over n draws.
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.25, 0.005);
}

TEST(CpuKernels, DropoutMaskIsKeyedBySampleSeedAndKey) {
  std::vector<float> values(4 * 6);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = 1.0f + static_cast<float>(i);
  auto run = [](Call call) {
    EXPECT_OK(call.run());
    return call.floats();
  };
  // Samples 8..11 at once, and as two micro-batches of 2 (8, 9 and 10, 11):
  // each sample gets the same mask.
  std::vector<float> whole = run(dropoutCall(f32({4, 6}, values), 4, 3, 8, 11, 0.5));
  std::vector<float> front(values.begin(), values.begin() + 12), back(values.begin() + 12,
                                                                      values.end());
  std::vector<float> parts = run(dropoutCall(f32({2, 6}, front), 2, 3, 8, 11, 0.5));
  std::vector<float> second = run(dropoutCall(f32({2, 6}, back), 2, 3, 10, 11, 0.5));
  parts.insert(parts.end(), second.begin(), second.end());
  EXPECT_EQ(whole, parts);
  EXPECT_EQ(whole, run(dropoutCall(f32({4, 6}, values), 4, 3, 8, 11, 0.5)));
  // Another sample, seed or key draws another mask.
  EXPECT_NE(whole, run(dropoutCall(f32({4, 6}, values), 4, 3, 12, 11, 0.5)));
  EXPECT_NE(whole, run(dropoutCall(f32({4, 6}, values), 4, 4, 8, 11, 0.5)));
  EXPECT_NE(whole, run(dropoutCall(f32({4, 6}, values), 4, 3, 8, 12, 0.5)));
}

TEST(CpuKernels, DropoutOf16BitValuesRoundsTheScaledValue) {
  std::vector<double> values = {0.1, -1.7, 3.3, 1e-3, 250.0, -0.01, 7.0, 2.5};
  for (plan::DType dtype : {plan::BF16, plan::F16}) {
    SCOPED_TRACE(cpu::dtypeName(dtype));
    Call call = dropoutCall(encode(dtype, {2, 4}, values), 2, 1, 0, 11, 0.3);
    ASSERT_OK(call.run());
    std::vector<double> in = decode(encode(dtype, {2, 4}, values));
    std::vector<double> out = decode(call.result(0));
    const float scale = static_cast<float>(1.0 / 0.7);
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] == 0.0)
        continue;
      double expected = decode(encode(dtype, {1}, {static_cast<float>(in[i]) * scale}))[0];
      EXPECT_EQ(out[i], expected) << "element " << i;
    }
  }
}

TEST(CpuKernels, DropoutRefusesBadOperands) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Call ratio = dropoutCall(x, 2, 0, 0, 1, 1.0);
  expectError(ratio.run(), StatusCode::kInvalidArgument, {"dropout", "ratio must be in (0, 1)"});
  Call elements = dropoutCall(x, 2, 0, 0);
  elements.intAttr("sample_elements", 4);
  expectError(elements.run(), StatusCode::kInvalidArgument,
              {"dropout", "sample_elements 4 must be positive and divide the input's 6"});
  Call state("dropout");
  state.in(x).in(i64({3}, {0, 0, 0})).out(plan::F32, {2, 3});
  state.floatAttr("ratio", 0.5).intAttr("key", 1).intAttr("sample_elements", 3);
  expectError(state.run(), StatusCode::kInvalidArgument, {"dropout", "state"});
  Call key("dropout");
  key.in(x).in(i64({2}, {0, 0})).out(plan::F32, {2, 3});
  key.floatAttr("ratio", 0.5).intAttr("sample_elements", 3);
  expectError(key.run(), StatusCode::kInvalidArgument, {"dropout", "key"});
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

/// The product numpy.matmul defines, as a naive loop over an explicit batch
/// index map: out[b] = lhs[lhsBatch(b)] * rhs[rhsBatch(b)].
std::vector<double> naiveMatmul(const std::vector<float> &lhs,
                                const std::vector<float> &rhs,
                                const std::vector<int64_t> &lhsBatchOf,
                                const std::vector<int64_t> &rhsBatchOf,
                                int64_t m, int64_t k, int64_t n) {
  std::vector<double> out;
  for (size_t b = 0; b < lhsBatchOf.size(); ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += static_cast<double>(lhs[(lhsBatchOf[b] * m + i) * k + p]) *
                 rhs[(rhsBatchOf[b] * k + p) * n + j];
        out.push_back(sum);
      }
  return out;
}

TEST(CpuKernels, MatmulTwoDimensional) {
  std::vector<float> a = randomFloats(3 * 4, 1), b = randomFloats(4 * 5, 2);
  Call call("matmul");
  call.in(f32({3, 4}, a)).in(f32({4, 5}, b)).out(plan::F32, {3, 5});
  ASSERT_OK(call.run());
  expectNear(call.floats(), naiveMatmul(a, b, {0}, {0}, 3, 4, 5), 1e-5);
}

// lhs [2, 1, 3, 4] x rhs [3, 4, 2]: batch [2, 1] and [3] broadcast to
// [2, 3]; lhs batch index is i (stretched over j), rhs batch index is j.
TEST(CpuKernels, MatmulBroadcastsBatchDimensions) {
  std::vector<float> a = randomFloats(2 * 3 * 4, 3),
                     b = randomFloats(3 * 4 * 2, 4);
  Call call("matmul");
  call.in(f32({2, 1, 3, 4}, a))
      .in(f32({3, 4, 2}, b))
      .out(plan::F32, {2, 3, 3, 2});
  ASSERT_OK(call.run());
  expectNear(call.floats(),
             naiveMatmul(a, b, {0, 0, 0, 1, 1, 1}, {0, 1, 2, 0, 1, 2}, 3, 4, 2),
             1e-5);
}

TEST(CpuKernels, MatmulSharedAndBatchedRhs) {
  std::vector<float> a = randomFloats(2 * 3 * 4, 5), b = randomFloats(4 * 5, 6);
  Call shared("matmul");
  shared.in(f32({2, 3, 4}, a)).in(f32({4, 5}, b)).out(plan::F32, {2, 3, 5});
  ASSERT_OK(shared.run());
  expectNear(shared.floats(), naiveMatmul(a, b, {0, 1}, {0, 0}, 3, 4, 5), 1e-5);

  std::vector<float> c = randomFloats(3 * 4, 7), d = randomFloats(2 * 4 * 5, 8);
  Call batchedRhs("matmul");
  batchedRhs.in(f32({3, 4}, c)).in(f32({2, 4, 5}, d)).out(plan::F32, {2, 3, 5});
  ASSERT_OK(batchedRhs.run());
  expectNear(batchedRhs.floats(), naiveMatmul(c, d, {0, 0}, {0, 1}, 3, 4, 5),
             1e-5);
}

// numpy.matmul promotes rank-1 operands and drops the added dimension.
TEST(CpuKernels, MatmulRankOneOperands) {
  std::vector<float> v = {1, 2, 3};
  std::vector<float> m = {1, 0, 2, -1, 3, 1}; // [3, 2]
  Call vecMat("matmul");
  vecMat.in(f32({3}, v)).in(f32({3, 2}, m)).out(plan::F32, {2});
  ASSERT_OK(vecMat.run());
  expectNear(vecMat.floats(), std::vector<float>{1 + 4 + 9, 0 - 2 + 3});

  std::vector<float> mt = {1, 2, 3, 4, 5, 6}; // [2, 3]
  Call matVec("matmul");
  matVec.in(f32({2, 3}, mt)).in(f32({3}, v)).out(plan::F32, {2});
  ASSERT_OK(matVec.run());
  expectNear(matVec.floats(), std::vector<float>{14, 32});

  Call dot("matmul");
  dot.in(f32({3}, v)).in(f32({3}, {4, 5, 6})).out(plan::F32, {});
  ASSERT_OK(dot.run());
  expectNear(dot.floats(), std::vector<float>{32});

  Call batchVec("matmul");
  batchVec.in(f32({2, 2, 3}, iota<float>(12)))
      .in(f32({3}, v))
      .out(plan::F32, {2, 2});
  ASSERT_OK(batchVec.run());
  expectNear(batchVec.floats(), std::vector<float>{8, 26, 44, 62});
}

TEST(CpuKernels, MatmulEmptyContractionIsZero) {
  Call call("matmul");
  call.in(f32({2, 0}, {})).in(f32({0, 3}, {})).out(plan::F32, {2, 3});
  ASSERT_OK(call.run());
  expectNear(call.floats(), std::vector<float>(6, 0.0f));
}

TEST(CpuKernels, MatmulErrors) {
  Call k("matmul");
  k.in(f32({2, 3}, iota<float>(6)))
      .in(f32({4, 2}, iota<float>(8)))
      .out(plan::F32, {2, 2});
  expectError(k.run(), StatusCode::kInvalidArgument,
              {"matmul", "contracting dimensions differ", "[2, 3] has 3",
               "[4, 2] has 4"});
  Call batch("matmul");
  batch.in(f32({2, 1, 2}, iota<float>(4)))
      .in(f32({3, 2, 1}, iota<float>(6)))
      .out(plan::F32, {3, 1, 1});
  expectError(batch.run(), StatusCode::kInvalidArgument,
              {"matmul", "batch dimensions", "not broadcast-compatible"});
  Call result("matmul");
  result.in(f32({2, 3}, iota<float>(6)))
      .in(f32({3}, iota<float>(3)))
      .out(plan::F32, {2, 1});
  expectError(result.run(), StatusCode::kInvalidArgument,
              {"matmul", "'result' has shape [2, 1], expected [2]"});
  Call ints("matmul");
  ints.in(i64({1, 1}, {1})).in(i64({1, 1}, {1})).out(plan::I64, {1, 1});
  expectError(ints.run(), StatusCode::kUnimplemented, {"matmul", "i64"});
  Call scalar("matmul");
  scalar.in(f32({}, {1})).in(f32({1}, {1})).out(plan::F32, {});
  expectError(scalar.run(), StatusCode::kInvalidArgument,
              {"matmul", "rank at least 1"});
}

// transpose_lhs and transpose_rhs swap an operand's last two dimensions;
// the bias is added to every row. Small enough to check by hand: lhs^T =
// [[1, 3], [2, 4]], rhs^T = [[1, 2, 0], [0, 1, 1]].
TEST(CpuKernels, MatmulTransposedOperandsAndBias) {
  Call call("matmul");
  call.in(f32({2, 2}, {1, 2, 3, 4}))
      .in(f32({3, 2}, {1, 0, 2, 1, 0, 1}))
      .in(f32({3}, {10, 20, 30}))
      .boolAttr("transpose_lhs", true)
      .boolAttr("transpose_rhs", true)
      .out(plan::F32, {2, 3});
  ASSERT_OK(call.run());
  expectNear(call.floats(), std::vector<float>{11, 25, 33, 12, 28, 34});

  // A unit attribute reads as true; lhs [2, 3, 2] (read [2, 2, 3]) under a
  // shared rhs must not fold its batch into rows.
  std::vector<float> a = randomFloats(2 * 3 * 2, 11),
                     b = randomFloats(3 * 4, 12);
  Call batched("matmul");
  batched.in(f32({2, 3, 2}, a))
      .in(f32({3, 4}, b))
      .in(f32({4}, {1, -1, 0.5f, 0}))
      .unitAttr("transpose_lhs")
      .out(plan::F32, {2, 2, 4});
  ASSERT_OK(batched.run());
  std::vector<float> aT(a.size());
  for (int batch = 0; batch < 2; ++batch)
    for (int i = 0; i < 2; ++i)
      for (int p = 0; p < 3; ++p)
        aT[batch * 6 + i * 3 + p] = a[batch * 6 + p * 2 + i];
  std::vector<double> expected = naiveMatmul(aT, b, {0, 1}, {0, 0}, 2, 3, 4);
  const double bias[] = {1, -1, 0.5, 0};
  for (size_t i = 0; i < expected.size(); ++i)
    expected[i] += bias[i % 4];
  expectNear(batched.values(), expected, 1e-5);
}

TEST(CpuKernels, MatmulTransposeAndBiasErrors) {
  auto product = [](std::vector<int64_t> lhs, std::vector<int64_t> rhs,
                    std::vector<int64_t> result) {
    Call c("matmul");
    c.in(f32(lhs, std::vector<float>(countOf(lhs), 1.0f)))
        .in(f32(rhs, std::vector<float>(countOf(rhs), 1.0f)))
        .out(plan::F32, result);
    return c;
  };
  // A vector has no two dimensions to swap.
  Call vectorLhs = product({3}, {3, 2}, {2});
  vectorLhs.boolAttr("transpose_lhs", true);
  expectError(vectorLhs.run(), StatusCode::kInvalidArgument,
              {"matmul", "transpose_lhs needs 'lhs' of rank at least 2",
               "got shape [3]"});
  Call vectorRhs = product({2, 3}, {3}, {2});
  vectorRhs.boolAttr("transpose_rhs", true);
  expectError(vectorRhs.run(), StatusCode::kInvalidArgument,
              {"matmul", "transpose_rhs needs 'rhs' of rank at least 2",
               "got shape [3]"});
  // The contraction is read after the swap: lhs [3, 2] transposed
  // contracts over 3.
  Call contraction = product({3, 2}, {2, 4}, {2, 4});
  contraction.boolAttr("transpose_lhs", true);
  expectError(contraction.run(), StatusCode::kInvalidArgument,
              {"matmul", "contracting dimensions differ", "[3, 2] has 3",
               "[2, 4] has 2"});
  // A transpose is a bool.
  Call kind = product({2, 3}, {3, 4}, {2, 4});
  kind.stringAttr("transpose_rhs", "yes");
  expectError(
      kind.run(), StatusCode::kInvalidArgument,
      {"matmul", "attribute 'transpose_rhs' must be a bool", "a string"});

  // The bias is [n], of the result's type.
  Call length = product({2, 3}, {3, 4}, {2, 4});
  length.in(f32({3}, {1, 2, 3}));
  expectError(length.run(), StatusCode::kInvalidArgument,
              {"matmul", "'bias' has shape [3], expected [4]"});
  Call transposedLength = product({2, 3}, {4, 3}, {2, 4});
  transposedLength.boolAttr("transpose_rhs", true).in(f32({3}, {1, 2, 3}));
  expectError(transposedLength.run(), StatusCode::kInvalidArgument,
              {"matmul", "'bias' has shape [3], expected [4]"});
  Call rank = product({2, 3}, {3, 4}, {2, 4});
  rank.in(f32({1, 4}, {1, 2, 3, 4}));
  expectError(rank.run(), StatusCode::kInvalidArgument,
              {"matmul", "'bias' has shape [1, 4], expected [4]"});
  Call scalar = product({2, 3}, {3, 4}, {2, 4});
  scalar.in(f32({}, {1}));
  expectError(scalar.run(), StatusCode::kInvalidArgument,
              {"matmul", "'bias' has shape [], expected [4]"});
  Call dtype = product({2, 3}, {3, 4}, {2, 4});
  dtype.in(f64({4}, {1, 2, 3, 4}));
  expectError(dtype.run(), StatusCode::kInvalidArgument,
              {"matmul", "'bias' has element type f64, but 'result' has f32"});
  Call extra = product({2, 3}, {3, 4}, {2, 4});
  extra.in(f32({4}, {1, 2, 3, 4})).in(f32({4}, {1, 2, 3, 4}));
  expectError(extra.run(), StatusCode::kInvalidArgument,
              {"matmul", "expected 3 inputs, got 4"});
  Call one("matmul");
  one.in(f32({2, 3}, iota<float>(6))).out(plan::F32, {2, 3});
  expectError(one.run(), StatusCode::kInvalidArgument,
              {"matmul", "expected 2 inputs, got 1"});

  // `residual` names the last input the addend, of the result's shape and
  // type, after the bias where there is one.
  Call addendShape = product({2, 3}, {3, 4}, {2, 4});
  addendShape.in(f32({4}, {1, 2, 3, 4})).boolAttr("residual", true);
  expectError(addendShape.run(), StatusCode::kInvalidArgument,
              {"matmul", "'addend' has shape [4], but 'result' has [2, 4]"});
  Call addendType = product({2, 3}, {3, 4}, {2, 4});
  addendType.in(f32({4}, {1, 2, 3, 4})).in(f64({2, 4}, std::vector<double>(8, 1.0)));
  addendType.boolAttr("residual", true);
  expectError(addendType.run(), StatusCode::kInvalidArgument,
              {"matmul", "'addend' has element type f64, but 'result' has f32"});
  Call noAddend = product({2, 3}, {3, 4}, {2, 4});
  noAddend.boolAttr("residual", true);
  expectError(noAddend.run(), StatusCode::kInvalidArgument,
              {"matmul", "expected 3 inputs, got 2"});
  Call tooMany = product({2, 3}, {3, 4}, {2, 4});
  tooMany.in(f32({4}, {1, 2, 3, 4})).in(f32({2, 4}, iota<float>(8))).in(f32({2, 4}, iota<float>(8)));
  tooMany.boolAttr("residual", true);
  expectError(tooMany.run(), StatusCode::kInvalidArgument,
              {"matmul", "expected 4 inputs, got 5"});
  Call activation = product({2, 3}, {3, 4}, {2, 4});
  activation.stringAttr("activation", "relu");
  expectError(activation.run(), StatusCode::kInvalidArgument,
              {"matmul", "activation must be \"none\", \"gelu_tanh\" or \"gelu_tanh_grad\", got "
                         "\"relu\""});
  // The GELU's derivative reads the GELU's input, third, of the result's
  // shape, and takes no addend.
  Call geluInput = product({2, 3}, {3, 4}, {2, 4});
  geluInput.in(f32({4}, {1, 2, 3, 4})).stringAttr("activation", "gelu_tanh_grad");
  expectError(geluInput.run(), StatusCode::kInvalidArgument,
              {"matmul", "'gelu_input' has shape [4], but 'result' has [2, 4]"});
  Call noGeluInput = product({2, 3}, {3, 4}, {2, 4});
  noGeluInput.stringAttr("activation", "gelu_tanh_grad");
  expectError(noGeluInput.run(), StatusCode::kInvalidArgument,
              {"matmul", "expected 3 inputs, got 2"});
  Call geluGradAddend = product({2, 3}, {3, 4}, {2, 4});
  geluGradAddend.in(f32({2, 4}, iota<float>(8))).boolAttr("residual", true);
  geluGradAddend.stringAttr("activation", "gelu_tanh_grad");
  expectError(geluGradAddend.run(), StatusCode::kInvalidArgument,
              {"matmul", "activation \"gelu_tanh_grad\" takes no addend ('residual')"});
}

// The addend may be the result's own buffer (the plan may place them
// together): each element is read before it is written, in f32 (BLAS's C)
// and in bf16 (the tiles).
TEST(CpuKernels, MatmulAddendInPlace) {
  for (plan::DType dtype : {plan::F32, plan::BF16}) {
    SCOPED_TRACE(dtypeName(dtype));
    auto call = [&](bool inPlace) {
      Call c("matmul");
      c.in(encode(dtype, {300, 20}, randomValues(6000, 1)))
          .in(encode(dtype, {20, 1100}, randomValues(22000, 2)))
          .in(encode(dtype, {1100}, randomValues(1100, 3)))
          .in(encode(dtype, {300, 1100}, randomValues(330000, 4)))
          .boolAttr("residual", true)
          .stringAttr("activation", "gelu_tanh");
      if (inPlace)
        c.inPlace(3);
      else
        c.out(dtype, {300, 1100});
      EXPECT_TRUE(c.run().isOk());
      return c.values();
    };
    EXPECT_EQ(call(true), call(false));
  }
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

struct AttentionCase {
  std::vector<int64_t> lead;
  int64_t tq, tk, d, dv;
  bool causal;
};

void checkAttention(const AttentionCase &c, uint32_t seed) {
  int64_t heads = countOf(c.lead);
  auto shape = [&](int64_t t, int64_t width) {
    std::vector<int64_t> s = c.lead;
    s.push_back(t);
    s.push_back(width);
    return s;
  };
  std::vector<float> q = randomFloats(heads * c.tq * c.d, seed);
  std::vector<float> k = randomFloats(heads * c.tk * c.d, seed + 1);
  std::vector<float> v = randomFloats(heads * c.tk * c.dv, seed + 2);
  // Later keys grow, so later blocks of a long row raise the running max.
  for (int64_t j = 0; j < heads * c.tk * c.d; ++j)
    k[j] *= 1.0f + static_cast<float>((j / c.d) % c.tk) / 400.0f;
  double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  Call call("attention");
  call.in(f32(shape(c.tq, c.d), q))
      .in(f32(shape(c.tk, c.d), k))
      .in(f32(shape(c.tk, c.dv), v))
      .out(plan::F32, shape(c.tq, c.dv))
      .floatAttr("scale", scale);
  if (c.causal)
    call.unitAttr("causal");
  ASSERT_OK(call.run());
  expectNear(
      call.floats(),
      naiveAttention(q, k, v, heads, c.tq, c.tk, c.d, c.dv, scale, c.causal),
      2e-5);
}

TEST(CpuKernels, AttentionMatchesNaiveSoftmax) {
  checkAttention({{2, 2}, 5, 7, 8, 6, false}, 10);
  checkAttention({{3}, 4, 4, 16, 16, false}, 20);
}

// Causal with more keys than queries: query i sees keys j <= i + Tk - Tq.
TEST(CpuKernels, AttentionCausalAlignsAtTheEnd) {
  checkAttention({{2, 2}, 6, 6, 8, 8, true}, 30);
  checkAttention({{2}, 3, 5, 4, 3, true}, 40);
  // Hand-checked: one query, two keys, causal with Tk - Tq = 1 sees both;
  // with equal scores the result is the mean of the values.
  Call call("attention");
  call.in(f32({1, 1}, {0}))
      .in(f32({2, 1}, {1, 2}))
      .in(f32({2, 2}, {1, 10, 3, 30}))
      .out(plan::F32, {1, 2})
      .floatAttr("scale", 1.0)
      .boolAttr("causal", true);
  ASSERT_OK(call.run());
  expectNear(call.floats(), std::vector<float>{2, 20});
  // Two queries, two keys, causal: the first query sees only the first key.
  Call square("attention");
  square.in(f32({2, 1}, {0, 0}))
      .in(f32({2, 1}, {1, 2}))
      .in(f32({2, 2}, {1, 10, 3, 30}))
      .out(plan::F32, {2, 2})
      .floatAttr("scale", 1.0)
      .boolAttr("causal", true);
  ASSERT_OK(square.run());
  expectNear(square.floats(), std::vector<float>{1, 10, 2, 20});
}

// More keys than one block of scores: the blocked softmax must agree with
// the materialised one, causal or not.
TEST(CpuKernels, AttentionLongKeySequences) {
  checkAttention({{1}, 3, 2500, 4, 5, false}, 50);
  checkAttention({{2}, 4, 2100, 4, 3, true}, 60);
}

/// Each query row's log-sum-exp of its scaled, masked scores, in double.
std::vector<double> naiveLse(const std::vector<float> &q,
                             const std::vector<float> &k, int64_t heads,
                             int64_t tq, int64_t tk, int64_t d, double scale,
                             bool causal) {
  std::vector<double> lse;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < tq; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < tk; ++j) {
        if (causal && j > i + tk - tq)
          continue;
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += static_cast<double>(q[(h * tq + i) * d + c]) *
                 k[(h * tk + j) * d + c];
        sum += std::exp(dot * scale);
      }
      lse.push_back(std::log(sum));
    }
  return lse;
}

// The optional second result: each row's log-sum-exp, the result itself
// unchanged by asking for it.
TEST(CpuKernels, AttentionLogSumExp) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    int64_t heads = 3, tq = 5, tk = 7, d = 4, dv = 6;
    std::vector<float> q = randomFloats(heads * tq * d, 70),
                       k = randomFloats(heads * tk * d, 71),
                       v = randomFloats(heads * tk * dv, 72);
    double scale = 0.5;
    auto build = [&](bool withLse) {
      Call call("attention");
      call.in(f32({heads, tq, d}, q))
          .in(f32({heads, tk, d}, k))
          .in(f32({heads, tk, dv}, v))
          .out(plan::F32, {heads, tq, dv})
          .floatAttr("scale", scale);
      if (withLse)
        call.out(plan::F32, {heads, tq});
      if (causal)
        call.unitAttr("causal");
      return call;
    };
    Call plain = build(false), saving = build(true);
    ASSERT_OK(plain.run());
    ASSERT_OK(saving.run());
    EXPECT_EQ(saving.result(0).bytes, plain.result(0).bytes);
    expectNear(saving.values(1), naiveLse(q, k, heads, tq, tk, d, scale, causal),
               1e-6);
  }
  // Hand-checked: one query against two keys of equal score: log 2.
  Call two("attention");
  two.in(f32({1, 1}, {0}))
      .in(f32({2, 1}, {1, 2}))
      .in(f32({2, 1}, {1, 3}))
      .out(plan::F32, {1, 1})
      .out(plan::F32, {1})
      .floatAttr("scale", 1.0);
  ASSERT_OK(two.run());
  expectNear(two.values(1), std::vector<double>{std::log(2.0)}, 1e-7);

  Call wrong("attention");
  wrong.in(f32({2, 1}, {0, 0}))
      .in(f32({2, 1}, {1, 2}))
      .in(f32({2, 1}, {1, 3}))
      .out(plan::F32, {2, 1})
      .out(plan::F32, {1})
      .floatAttr("scale", 1.0);
  expectError(wrong.run(), StatusCode::kInvalidArgument, {"attention", "lse"});
}

TEST(CpuKernels, AttentionErrors) {
  auto base = [] {
    Call call("attention");
    call.in(f32({2, 4}, iota<float>(8)))
        .in(f32({3, 4}, iota<float>(12)))
        .in(f32({3, 2}, iota<float>(6)))
        .out(plan::F32, {2, 2});
    return call;
  };
  Call missingScale = base();
  expectError(missingScale.run(), StatusCode::kInvalidArgument,
              {"attention", "missing attribute 'scale'"});

  Call tooFewKeys("attention");
  tooFewKeys.in(f32({3, 1}, {1, 2, 3}))
      .in(f32({2, 1}, {1, 2}))
      .in(f32({2, 1}, {1, 2}))
      .out(plan::F32, {3, 1})
      .floatAttr("scale", 1.0)
      .unitAttr("causal");
  expectError(tooFewKeys.run(), StatusCode::kInvalidArgument,
              {"attention", "at least as many keys as queries"});

  Call head("attention");
  head.in(f32({2, 4}, iota<float>(8)))
      .in(f32({3, 3}, iota<float>(9)))
      .in(f32({3, 2}, iota<float>(6)))
      .out(plan::F32, {2, 2})
      .floatAttr("scale", 1.0);
  expectError(head.run(), StatusCode::kInvalidArgument,
              {"attention", "head sizes differ: 4 vs 3"});

  Call lead("attention");
  lead.in(f32({2, 1, 1}, {1, 2}))
      .in(f32({1, 1, 1}, {1}))
      .in(f32({1, 1, 1}, {1}))
      .out(plan::F32, {2, 1, 1})
      .floatAttr("scale", 1.0);
  expectError(lead.run(), StatusCode::kInvalidArgument,
              {"attention", "same leading dimensions"});

  Call result = base();
  result.floatAttr("scale", 1.0);
  result.result().shape = {2, 4};
  result.result().bytes.resize(8 * 4);
  expectError(result.run(), StatusCode::kInvalidArgument,
              {"attention", "'result' has shape [2, 4], expected [2, 2]"});
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax, layer_norm
//===----------------------------------------------------------------------===//

/// softmax along `axis` of a [2, 3, 2] tensor, by explicit indexing.
std::vector<double> naiveSoftmax(const std::vector<float> &x, int axis,
                                 bool logForm) {
  const int64_t dims[3] = {2, 3, 2};
  std::vector<double> out(x.size());
  auto at = [&](int64_t a, int64_t b, int64_t c) {
    return (a * dims[1] + b) * dims[2] + c;
  };
  for (int64_t a = 0; a < dims[0]; ++a)
    for (int64_t b = 0; b < dims[1]; ++b)
      for (int64_t c = 0; c < dims[2]; ++c) {
        int64_t idx[3] = {a, b, c};
        double sum = 0;
        for (int64_t r = 0; r < dims[axis]; ++r) {
          int64_t j[3] = {a, b, c};
          j[axis] = r;
          sum += std::exp(static_cast<double>(x[at(j[0], j[1], j[2])]));
        }
        double value =
            std::exp(static_cast<double>(x[at(idx[0], idx[1], idx[2])]));
        out[at(a, b, c)] = logForm ? std::log(value / sum) : value / sum;
      }
  return out;
}

TEST(CpuKernels, SoftmaxAlongAnyAxis) {
  std::vector<float> x = randomFloats(12, 70);
  for (int64_t axis : {-1, 0, 1, 2, -3}) {
    SCOPED_TRACE(axis);
    int normalized = static_cast<int>(axis < 0 ? axis + 3 : axis);
    Call soft("softmax");
    soft.in(f32({2, 3, 2}, x)).out(plan::F32, {2, 3, 2}).intAttr("axis", axis);
    ASSERT_OK(soft.run());
    expectNear(soft.floats(), naiveSoftmax(x, normalized, false), 1e-6);
    Call logSoft("log_softmax");
    logSoft.in(f32({2, 3, 2}, x))
        .out(plan::F32, {2, 3, 2})
        .intAttr("axis", axis);
    ASSERT_OK(logSoft.run());
    expectNear(logSoft.floats(), naiveSoftmax(x, normalized, true), 1e-6);
  }
}

// exp(1000) overflows; the max-shifted form does not.
TEST(CpuKernels, SoftmaxIsStableForLargeInputs) {
  Call soft("softmax");
  soft.in(f32({3}, {1000, 1001, 1002})).out(plan::F32, {3}).intAttr("axis", 0);
  ASSERT_OK(soft.run());
  double denominator = 1 + std::exp(-1.0) + std::exp(-2.0);
  expectNear(soft.floats(), std::vector<double>{std::exp(-2.0) / denominator,
                                                std::exp(-1.0) / denominator,
                                                1 / denominator});
  Call logSoft("log_softmax");
  logSoft.in(f32({2}, {-1000, 1000})).out(plan::F32, {2}).intAttr("axis", -1);
  ASSERT_OK(logSoft.run());
  expectNear(logSoft.floats(), std::vector<float>{-2000, 0});
}

TEST(CpuKernels, SoftmaxErrors) {
  Call range("softmax");
  range.in(f32({2, 2}, iota<float>(4)))
      .out(plan::F32, {2, 2})
      .intAttr("axis", 2);
  expectError(range.run(), StatusCode::kInvalidArgument,
              {"softmax", "axis 2 is out of range for rank 2"});
  Call missing("log_softmax");
  missing.in(f32({2}, {1, 2})).out(plan::F32, {2});
  expectError(missing.run(), StatusCode::kInvalidArgument,
              {"log_softmax", "missing attribute 'axis'"});
}

/// layer_norm over everything from `axis` on, straight from the formula.
std::vector<double> naiveLayerNorm(const std::vector<float> &x,
                                   const std::vector<float> &scale,
                                   const std::vector<float> &bias,
                                   int64_t columns, double epsilon) {
  std::vector<double> out;
  for (size_t start = 0; start < x.size(); start += columns) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < columns; ++c)
      mean += x[start + c];
    mean /= columns;
    for (int64_t c = 0; c < columns; ++c)
      var += (x[start + c] - mean) * (x[start + c] - mean);
    var /= columns;
    for (int64_t c = 0; c < columns; ++c)
      out.push_back((x[start + c] - mean) / std::sqrt(var + epsilon) *
                        scale[c] +
                    bias[c]);
  }
  return out;
}

TEST(CpuKernels, LayerNormOverTrailingDimensions) {
  std::vector<float> x = randomFloats(2 * 3 * 4, 80, -5, 5);
  // Normalise over [3, 4] (axis 1) and over [4] (axis -1).
  std::vector<float> scale12 = randomFloats(12, 81),
                     bias12 = randomFloats(12, 82);
  Call wide("layer_norm");
  wide.in(f32({2, 3, 4}, x))
      .in(f32({3, 4}, scale12))
      .in(f32({3, 4}, bias12))
      .out(plan::F32, {2, 3, 4})
      .intAttr("axis", 1)
      .floatAttr("epsilon", 1e-5);
  ASSERT_OK(wide.run());
  expectNear(wide.floats(), naiveLayerNorm(x, scale12, bias12, 12, 1e-5), 1e-5);

  std::vector<float> scale4 = randomFloats(4, 83), bias4 = randomFloats(4, 84);
  Call last("layer_norm");
  last.in(f32({2, 3, 4}, x))
      .in(f32({4}, scale4))
      .in(f32({4}, bias4))
      .out(plan::F32, {2, 3, 4})
      .intAttr("axis", -1)
      .floatAttr("epsilon", 0.5);
  ASSERT_OK(last.run());
  expectNear(last.floats(), naiveLayerNorm(x, scale4, bias4, 4, 0.5), 1e-5);

  // Hand-checked: [1, 3] with mean 2 and variance 1 gives [-1, 1] (eps ~ 0).
  Call hand("layer_norm");
  hand.in(f32({1, 2}, {1, 3}))
      .in(f32({2}, {1, 1}))
      .in(f32({2}, {0, 10}))
      .out(plan::F32, {1, 2})
      .intAttr("axis", 1)
      .floatAttr("epsilon", 1e-12);
  ASSERT_OK(hand.run());
  expectNear(hand.floats(), std::vector<float>{-1, 11});
}

TEST(CpuKernels, LayerNormErrors) {
  Call scale("layer_norm");
  scale.in(f32({2, 3}, iota<float>(6)))
      .in(f32({2}, {1, 1}))
      .in(f32({3}, {0, 0, 0}))
      .out(plan::F32, {2, 3})
      .intAttr("axis", -1)
      .floatAttr("epsilon", 1e-5);
  expectError(scale.run(), StatusCode::kInvalidArgument,
              {"layer_norm", "'scale' has shape [2], expected [3]"});
  Call epsilon("layer_norm");
  epsilon.in(f32({3}, iota<float>(3)))
      .in(f32({3}, {1, 1, 1}))
      .in(f32({3}, {0, 0, 0}))
      .out(plan::F32, {3})
      .intAttr("axis", 0)
      .floatAttr("epsilon", 0);
  expectError(epsilon.run(), StatusCode::kInvalidArgument,
              {"layer_norm", "epsilon must be positive"});
  Call dtype("layer_norm");
  dtype.in(f32({3}, iota<float>(3)))
      .in(f64({3}, {1, 1, 1}))
      .in(f32({3}, {0, 0, 0}))
      .out(plan::F32, {3})
      .intAttr("axis", 0)
      .floatAttr("epsilon", 1e-5);
  expectError(dtype.run(), StatusCode::kInvalidArgument,
              {"layer_norm", "'scale' has element type f64, expected f32"});
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

TEST(CpuKernels, ReductionsOverSeveralAxes) {
  std::vector<float> x = iota<float>(24); // [2, 3, 4], x[a][b][c] = 12a+4b+c
  // Over axes 0 and 2: for each b, sum of 12a + 4b + c over a<2, c<4.
  Call sum("reduce_sum");
  sum.in(f32({2, 3, 4}, x))
      .out(plan::F32, {3})
      .intsAttr("axes", {0, 2})
      .boolAttr("keepdims", false);
  ASSERT_OK(sum.run());
  std::vector<double> expectedSum;
  for (int b = 0; b < 3; ++b) {
    double s = 0;
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 4; ++c)
        s += 12 * a + 4 * b + c;
    expectedSum.push_back(s);
  }
  expectNear(sum.floats(), expectedSum);

  Call mean("reduce_mean");
  mean.in(f32({2, 3, 4}, x))
      .out(plan::F32, {1, 3, 1})
      .intsAttr("axes", {0, 2})
      .boolAttr("keepdims", true);
  ASSERT_OK(mean.run());
  std::vector<double> expectedMean;
  for (double s : expectedSum)
    expectedMean.push_back(s / 8);
  expectNear(mean.floats(), expectedMean);

  // Negative axis -1 is axis 2; keepdims defaults to true as in ONNX.
  Call max("reduce_max");
  max.in(f32({2, 3, 4}, x)).out(plan::F32, {2, 3, 1}).intsAttr("axes", {-1});
  ASSERT_OK(max.run());
  expectNear(max.floats(), std::vector<float>{3, 7, 11, 15, 19, 23});

  Call all("reduce_sum");
  all.in(f32({2, 3, 4}, x))
      .out(plan::F32, {})
      .intsAttr("axes", {0, 1, 2})
      .boolAttr("keepdims", false);
  ASSERT_OK(all.run());
  expectNear(all.floats(), std::vector<float>{276});
}

TEST(CpuKernels, ReductionEdgeCases) {
  // No axes: nothing is reduced (zgraph's reading; the importer expands
  // ONNX's "all axes" before it gets here).
  Call none("reduce_sum");
  none.in(f32({2}, {1, 2}))
      .out(plan::F32, {2})
      .intsAttr("axes", {})
      .boolAttr("keepdims", false);
  ASSERT_OK(none.run());
  expectNear(none.floats(), std::vector<float>{1, 2});

  // An empty list whose writer never touched the `ints` field reads the
  // same.
  Call unset("reduce_mean");
  unset.in(f32({2}, {1, 2}))
      .out(plan::F32, {2})
      .unitAttr("axes")
      .boolAttr("keepdims", false);
  ASSERT_OK(unset.run());
  expectNear(unset.floats(), std::vector<float>{1, 2});

  Call nan("reduce_max");
  nan.in(f32({2, 2}, {1, kNaN, 3, 2}))
      .out(plan::F32, {2})
      .intsAttr("axes", {1})
      .boolAttr("keepdims", false);
  ASSERT_OK(nan.run());
  EXPECT_TRUE(std::isnan(nan.floats()[0]));
  EXPECT_EQ(nan.floats()[1], 3.0f);

  Call ints("reduce_sum");
  ints.in(i64({2, 2}, {1, 2, 30, 40}))
      .out(plan::I64, {2})
      .intsAttr("axes", {0})
      .boolAttr("keepdims", false);
  ASSERT_OK(ints.run());
  EXPECT_EQ(ints.result().values<int64_t>(), (std::vector<int64_t>{31, 42}));

  Call intMax("reduce_max");
  intMax.in(i32({3}, {-5, 9, 2}))
      .out(plan::I32, {1})
      .intsAttr("axes", {0})
      .boolAttr("keepdims", true);
  ASSERT_OK(intMax.run());
  EXPECT_EQ(intMax.result().values<int32_t>(), (std::vector<int32_t>{9}));
}

TEST(CpuKernels, ReductionErrors) {
  Call twice("reduce_sum");
  twice.in(f32({2, 2}, iota<float>(4)))
      .out(plan::F32, {})
      .intsAttr("axes", {1, -1})
      .boolAttr("keepdims", false);
  expectError(twice.run(), StatusCode::kInvalidArgument,
              {"reduce_sum", "axis 1 appears twice"});
  Call range("reduce_max");
  range.in(f32({2, 2}, iota<float>(4)))
      .out(plan::F32, {2})
      .intsAttr("axes", {2})
      .boolAttr("keepdims", false);
  expectError(range.run(), StatusCode::kInvalidArgument,
              {"reduce_max", "out of range for rank 2"});
  Call shape("reduce_mean");
  shape.in(f32({2, 2}, iota<float>(4)))
      .out(plan::F32, {2})
      .intsAttr("axes", {1})
      .boolAttr("keepdims", true);
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"reduce_mean", "'result' has shape [2], expected [2, 1]"});
  Call intMean("reduce_mean");
  intMean.in(i64({2}, {1, 2}))
      .out(plan::I64, {})
      .intsAttr("axes", {0})
      .boolAttr("keepdims", false);
  expectError(intMean.run(), StatusCode::kUnimplemented,
              {"reduce_mean", "i64"});
  Call noAxes("reduce_sum");
  noAxes.in(f32({2}, {1, 2})).out(plan::F32, {});
  expectError(noAxes.run(), StatusCode::kInvalidArgument,
              {"reduce_sum", "missing attribute 'axes'"});
}

// 16-bit operands with an f32 result: the f32 sum the 16-bit product
// rounds once, so rounding it gives that product bit for bit; on the
// folded (shared rhs), per-batch and empty-contraction paths.
TEST(CpuKernels, MatmulWidensSixteenBitProducts) {
  const std::vector<std::vector<int64_t>> shapes[] = {
      {{2, 3, 40}, {40, 24}}, {{2, 3, 40}, {2, 40, 24}}, {{3, 0}, {0, 5}}};
  uint32_t seed = 40;
  for (plan::DType dtype : {plan::F16, plan::BF16})
    for (const auto &pair : shapes) {
      std::vector<int64_t> result = pair[0];
      result.back() = pair[1].back();
      Tensor lhs = encode(dtype, pair[0], randomValues(countOf(pair[0]), seed++));
      Tensor rhs = encode(dtype, pair[1], randomValues(countOf(pair[1]), seed++));
      Call widened("matmul"), narrow("matmul");
      widened.in(lhs).in(rhs).out(plan::F32, result);
      narrow.in(lhs).in(rhs).out(dtype, result);
      ASSERT_OK(widened.run());
      ASSERT_OK(narrow.run());
      EXPECT_EQ(quantize(dtype, widened.values()), narrow.values());
      Call wide("matmul");
      wide.in(encode(plan::F64, pair[0], decode(lhs)))
          .in(encode(plan::F64, pair[1], decode(rhs)))
          .out(plan::F64, result);
      ASSERT_OK(wide.run());
      expectNear(widened.values(), wide.values(), 1e-6, "widened against f64");
    }
  Call bias("matmul");
  bias.in(encode(plan::BF16, {2, 3}, randomValues(6, 1)))
      .in(encode(plan::BF16, {3, 4}, randomValues(12, 2)))
      .in(encode(plan::BF16, {4}, randomValues(4, 3)))
      .out(plan::F32, {2, 4});
  expectError(bias.run(), StatusCode::kInvalidArgument,
              {"matmul", "an f32 result of bf16 operands takes no bias"});
  Call f64("matmul");
  f64.in(f32({2, 3}, iota<float>(6))).in(f32({3, 4}, iota<float>(12))).out(plan::F64, {2, 4});
  expectError(f64.run(), StatusCode::kInvalidArgument, {"matmul", "'result'"});
}

TEST(CpuKernels, QkvAttentionErrors) {
  Call notPacked("qkv_attention");
  notPacked.in(f32({2, 4, 2, 1, 2}, iota<float>(32)))
      .out(plan::F32, {2, 4, 1, 2})
      .floatAttr("scale", 1.0);
  expectError(notPacked.run(), StatusCode::kInvalidArgument,
              {"qkv_attention", "'qkv' must be [B, T, 3, H, d]", "[2, 4, 2, 1, 2]"});
  Call heads("qkv_attention");
  heads.in(f32({2, 4, 3, 1, 2}, iota<float>(48)))
      .out(plan::F32, {2, 1, 4, 2})
      .floatAttr("scale", 1.0);
  expectError(heads.run(), StatusCode::kInvalidArgument,
              {"qkv_attention", "'result' has shape [2, 1, 4, 2], expected [2, 4, 1, 2]"});
  Call lse("qkv_attention");
  lse.in(f32({2, 4, 3, 1, 2}, iota<float>(48)))
      .out(plan::F32, {2, 4, 1, 2})
      .out(plan::F32, {2, 4, 1})
      .floatAttr("scale", 1.0);
  expectError(lse.run(), StatusCode::kInvalidArgument,
              {"qkv_attention", "'lse' has shape [2, 4, 1], expected [2, 1, 4]"});
  Call grad("qkv_attention_grad");
  grad.in(f32({2, 4, 3, 1, 2}, iota<float>(48)))
      .in(f32({2, 4, 1, 2}, iota<float>(16)))
      .out(plan::F32, {2, 4, 1, 2})
      .floatAttr("scale", 1.0);
  expectError(grad.run(), StatusCode::kInvalidArgument,
              {"qkv_attention_grad", "'qkv_grad'"});
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST(CpuKernels, ReshapeAndCopyMoveBytes) {
  Call reshape("reshape");
  reshape.in(i64({2, 3}, iota<int64_t>(6))).out(plan::I64, {3, 2});
  ASSERT_OK(reshape.run());
  EXPECT_EQ(reshape.result().values<int64_t>(), iota<int64_t>(6));

  Call copy("copy");
  copy.in(f32({2}, {1.5f, -2.0f})).out(plan::F32, {2});
  ASSERT_OK(copy.run());
  EXPECT_EQ(copy.floats(), (std::vector<float>{1.5f, -2.0f}));

  Call reshapeBad("reshape");
  reshapeBad.in(f32({2, 3}, iota<float>(6))).out(plan::F32, {4});
  expectError(reshapeBad.run(), StatusCode::kInvalidArgument,
              {"reshape", "cannot reshape [2, 3] (6 elements) into [4]"});
  Call copyBad("copy");
  copyBad.in(f32({2}, {1, 2})).out(plan::F64, {2});
  expectError(copyBad.run(), StatusCode::kInvalidArgument,
              {"copy", "has 8 bytes", "has 16"});
}

TEST(CpuKernels, TransposeAnyElementSize) {
  // [2, 3, 4] with perm [2, 0, 1] -> [4, 2, 3]; out[c][a][b] = in[a][b][c].
  std::vector<int8_t> in8 = iota<int8_t>(24);
  Call call("transpose");
  call.in(i8({2, 3, 4}, in8))
      .out(plan::I8, {4, 2, 3})
      .intsAttr("perm", {2, 0, 1});
  ASSERT_OK(call.run());
  std::vector<int8_t> expected;
  for (int c = 0; c < 4; ++c)
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 3; ++b)
        expected.push_back(in8[(a * 3 + b) * 4 + c]);
  EXPECT_EQ(call.result().values<int8_t>(), expected);

  Call matrix("transpose");
  matrix.in(f64({2, 3}, {1, 2, 3, 4, 5, 6}))
      .out(plan::F64, {3, 2})
      .intsAttr("perm", {1, 0});
  ASSERT_OK(matrix.run());
  EXPECT_EQ(matrix.result().values<double>(),
            (std::vector<double>{1, 4, 2, 5, 3, 6}));

  Call bad("transpose");
  bad.in(f32({2, 3}, iota<float>(6)))
      .out(plan::F32, {3, 2})
      .intsAttr("perm", {1, 1});
  expectError(bad.run(), StatusCode::kInvalidArgument,
              {"transpose", "not a permutation"});
  Call shape("transpose");
  shape.in(f32({2, 3}, iota<float>(6)))
      .out(plan::F32, {2, 3})
      .intsAttr("perm", {1, 0});
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"transpose", "expected [3, 2]"});
}

TEST(CpuKernels, ConcatAlongAnAxis) {
  // [2, 1] ++ [2, 2] ++ [2, 0] along axis -1.
  Call call("concat");
  call.in(i64({2, 1}, {1, 2}))
      .in(i64({2, 2}, {10, 11, 20, 21}))
      .in(i64({2, 0}, {}))
      .out(plan::I64, {2, 3})
      .intAttr("axis", -1);
  ASSERT_OK(call.run());
  EXPECT_EQ(call.result().values<int64_t>(),
            (std::vector<int64_t>{1, 10, 11, 2, 20, 21}));
  Call rows("concat");
  rows.in(f32({1, 2}, {1, 2}))
      .in(f32({2, 2}, {3, 4, 5, 6}))
      .out(plan::F32, {3, 2})
      .intAttr("axis", 0);
  ASSERT_OK(rows.run());
  expectNear(rows.floats(), std::vector<float>{1, 2, 3, 4, 5, 6});

  Call bad("concat");
  bad.in(f32({2, 1}, {1, 2}))
      .in(f32({3, 1}, {1, 2, 3}))
      .out(plan::F32, {5, 1})
      .intAttr("axis", 1);
  expectError(bad.run(), StatusCode::kInvalidArgument,
              {"concat", "input #1 has shape [3, 1]", "outside axis 1"});
  Call dtype("concat");
  dtype.in(f32({1}, {1}))
      .in(i64({1}, {1}))
      .out(plan::F32, {2})
      .intAttr("axis", 0);
  expectError(dtype.run(), StatusCode::kInvalidArgument,
              {"concat", "input #1 has element type i64"});
  Call empty("concat");
  empty.out(plan::F32, {0}).intAttr("axis", 0);
  expectError(empty.run(), StatusCode::kInvalidArgument,
              {"concat", "at least 1 inputs, got 0"});
}

// A slice whose result the plan placed on its own window of the input (a
// contiguous range: a view) is recognised, so the kernels move nothing; a
// window elsewhere, or one that is not contiguous, is copied.
TEST(CpuKernels, SliceRecognisesAViewOfItsInput) {
  using detail::readSliceWindow;
  using detail::SliceWindow;
  using detail::sliceIsView;
  using detail::SmallShape;
  std::vector<float> bytes = iota<float>(24);
  TensorView input{bytes.data(), plan::F32, {3, 2, 4}};
  auto window = [&](std::vector<int64_t> starts, std::vector<int64_t> limits) {
    plan::Instruction instruction;
    auto &attrs = *instruction.mutable_attributes();
    for (int64_t v : starts)
      attrs["starts"].mutable_ints()->add_values(v);
    for (int64_t v : limits)
      attrs["limits"].mutable_ints()->add_values(v);
    for (size_t d = 0; d < starts.size(); ++d)
      attrs["strides"].mutable_ints()->add_values(1);
    KernelArgs args;
    args.attributes = &instruction.attributes();
    SliceWindow result;
    EXPECT_TRUE(readSliceWindow(args, "slice", "input", SmallShape(input.shape), result).isOk());
    return result;
  };
  // The second [2, 4] block is elements [8, 16).
  SliceWindow block = window({1, 0, 0}, {2, 2, 4});
  EXPECT_TRUE(sliceIsView(block, input, TensorView{bytes.data() + 8, plan::F32, {1, 2, 4}}));
  EXPECT_FALSE(sliceIsView(block, input, TensorView{bytes.data() + 4, plan::F32, {1, 2, 4}}));
  std::vector<float> own(8, -1.f);
  EXPECT_FALSE(sliceIsView(block, input, TensorView{own.data(), plan::F32, {1, 2, 4}}));
  // Columns 0..2 of every row are not one range, wherever the result is.
  SliceWindow columns = window({0, 0, 0}, {3, 2, 2});
  EXPECT_FALSE(sliceIsView(columns, input, TensorView{bytes.data(), plan::F32, {3, 2, 2}}));
  // The copy path still copies.
  Call copy("slice");
  copy.in(f32({3, 2, 4}, iota<float>(24)))
      .out(plan::F32, {1, 2, 4})
      .intsAttr("starts", {1, 0, 0})
      .intsAttr("limits", {2, 2, 4})
      .intsAttr("strides", {1, 1, 1});
  ASSERT_OK(copy.run());
  expectNear(copy.floats(), std::vector<float>{8, 9, 10, 11, 12, 13, 14, 15});
}

// A step of INT64_MAX (ONNX's "to the end" written as a step) takes the
// window's first element, with no overflow in its count or its stride.
TEST(CpuKernels, SliceWithAStepPastTheEnd) {
  Call call("slice");
  call.in(i32({3, 5}, iota<int32_t>(15)))
      .out(plan::I32, {2, 1})
      .intsAttr("starts", {1, 2})
      .intsAttr("limits", {3, 5})
      .intsAttr("strides", {1, std::numeric_limits<int64_t>::max()});
  ASSERT_OK(call.run());
  EXPECT_EQ(call.result().values<int32_t>(), (std::vector<int32_t>{7, 12}));
}

TEST(CpuKernels, SliceWithStrides) {
  // [3, 5]: rows 0..3 step 2, columns 1..5 step 3 -> rows {0, 2}, cols {1, 4}.
  Call call("slice");
  call.in(i32({3, 5}, iota<int32_t>(15)))
      .out(plan::I32, {2, 2})
      .intsAttr("starts", {0, 1})
      .intsAttr("limits", {3, 5})
      .intsAttr("strides", {2, 3});
  ASSERT_OK(call.run());
  EXPECT_EQ(call.result().values<int32_t>(),
            (std::vector<int32_t>{1, 4, 11, 14}));
  // The qkv split of the op's example: a contiguous window of the last axis.
  Call window("slice");
  window.in(f32({2, 6}, iota<float>(12)))
      .out(plan::F32, {2, 2})
      .intsAttr("starts", {0, 2})
      .intsAttr("limits", {2, 4})
      .intsAttr("strides", {1, 1});
  ASSERT_OK(window.run());
  expectNear(window.floats(), std::vector<float>{2, 3, 8, 9});

  Call range("slice");
  range.in(f32({3}, iota<float>(3)))
      .out(plan::F32, {2})
      .intsAttr("starts", {1})
      .intsAttr("limits", {4})
      .intsAttr("strides", {1});
  expectError(range.run(), StatusCode::kInvalidArgument,
              {"slice", "dimension 0: need 0 <= start <= limit <= 3"});
  Call step("slice");
  step.in(f32({3}, iota<float>(3)))
      .out(plan::F32, {0})
      .intsAttr("starts", {0})
      .intsAttr("limits", {0})
      .intsAttr("strides", {0});
  expectError(step.run(), StatusCode::kInvalidArgument,
              {"slice", "strides must be positive"});
}

TEST(CpuKernels, GatherAlongAnyAxisWithNegativeIndices) {
  // Embedding lookup: [4, 2] table, i64 indices [2, 2] incl. -1 (row 3).
  std::vector<float> table = iota<float>(8);
  Call embed("gather");
  embed.in(f32({4, 2}, table))
      .in(i64({2, 2}, {0, -1, 2, 1}))
      .out(plan::F32, {2, 2, 2})
      .intAttr("axis", 0);
  ASSERT_OK(embed.run());
  expectNear(embed.floats(), std::vector<float>{0, 1, 6, 7, 4, 5, 2, 3});

  // Axis 1 of [2, 3] with i32 indices [2]: columns 2 and -3 (= 0).
  Call columns("gather");
  columns.in(i64({2, 3}, {1, 2, 3, 4, 5, 6}))
      .in(i32({2}, {2, -3}))
      .out(plan::I64, {2, 2})
      .intAttr("axis", -1);
  ASSERT_OK(columns.run());
  EXPECT_EQ(columns.result().values<int64_t>(),
            (std::vector<int64_t>{3, 1, 6, 4}));

  Call range("gather");
  range.in(f32({4, 2}, table))
      .in(i64({1}, {4}))
      .out(plan::F32, {1, 2})
      .intAttr("axis", 0);
  expectError(range.run(), StatusCode::kOutOfRange,
              {"gather", "index 4", "axis of size 4"});
  Call negative("gather");
  negative.in(f32({4, 2}, table))
      .in(i32({1}, {-5}))
      .out(plan::F32, {1, 2})
      .intAttr("axis", 0);
  expectError(negative.run(), StatusCode::kOutOfRange, {"gather", "-5"});
  Call floatIndices("gather");
  floatIndices.in(f32({4, 2}, table))
      .in(f32({1}, {0}))
      .out(plan::F32, {1, 2})
      .intAttr("axis", 0);
  expectError(floatIndices.run(), StatusCode::kUnimplemented,
              {"gather", "'indices' has element type f32"});
}

TEST(CpuKernels, BroadcastToALargerShape) {
  // [3, 1] -> [2, 3, 4] on bools.
  Call call("broadcast");
  call.in(boolean({3, 1}, {1, 0, 1})).out(plan::BOOL, {2, 3, 4});
  ASSERT_OK(call.run());
  std::vector<uint8_t> expected;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        expected.push_back(b == 1 ? 0 : 1);
  EXPECT_EQ(call.result().values<uint8_t>(), expected);

  Call row("broadcast");
  row.in(i32({3}, {7, 8, 9})).out(plan::I32, {2, 3});
  ASSERT_OK(row.run());
  EXPECT_EQ(row.result().values<int32_t>(),
            (std::vector<int32_t>{7, 8, 9, 7, 8, 9}));

  Call bad("broadcast");
  bad.in(f32({3}, {1, 2, 3})).out(plan::F32, {2, 4});
  expectError(bad.run(), StatusCode::kInvalidArgument,
              {"broadcast", "[3] does not broadcast to", "[2, 4]"});
  Call shrink("broadcast");
  shrink.in(f32({2, 1}, {1, 2})).out(plan::F32, {2});
  expectError(shrink.run(), StatusCode::kInvalidArgument,
              {"broadcast", "does not broadcast"});
}

TEST(CpuKernels, TriluKeepsATriangle) {
  // Two 3x4 matrices of ones: the mask pattern repeats per matrix.
  std::vector<float> ones(24, 1.0f);
  struct Case {
    bool upper;
    int64_t k;
  };
  for (Case c :
       {Case{true, 0}, Case{false, -1}, Case{true, 1}, Case{false, 2}}) {
    SCOPED_TRACE(testing::Message() << "upper=" << c.upper << " k=" << c.k);
    Call call("trilu");
    call.in(f32({2, 3, 4}, ones))
        .out(plan::F32, {2, 3, 4})
        .boolAttr("upper", c.upper)
        .intAttr("k", c.k);
    ASSERT_OK(call.run());
    std::vector<float> expected;
    for (int m = 0; m < 2; ++m)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j)
          expected.push_back((c.upper ? j - i >= c.k : j - i <= c.k) ? 1 : 0);
    EXPECT_EQ(call.floats(), expected);
  }
  // Hand-checked on an i64 matrix: the lower triangle, then the defaults
  // (upper, k = 0).
  Call lower("trilu");
  lower.in(i64({2, 2}, {1, 2, 3, 4}))
      .out(plan::I64, {2, 2})
      .boolAttr("upper", false);
  ASSERT_OK(lower.run());
  EXPECT_EQ(lower.result().values<int64_t>(),
            (std::vector<int64_t>{1, 0, 3, 4}));
  Call upper("trilu");
  upper.in(i64({2, 2}, {1, 2, 3, 4})).out(plan::I64, {2, 2});
  ASSERT_OK(upper.run());
  EXPECT_EQ(upper.result().values<int64_t>(),
            (std::vector<int64_t>{1, 2, 0, 4}));

  Call vector("trilu");
  vector.in(f32({3}, {1, 2, 3})).out(plan::F32, {3});
  expectError(vector.run(), StatusCode::kInvalidArgument,
              {"trilu", "rank at least 2"});
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

TEST(CpuKernels, MseLossIsTheMeanSquaredError) {
  Call call("mse_loss");
  call.in(f32({2, 2}, {1, 2, 3, 4}))
      .in(f32({2, 2}, {1, 0, 3, 1}))
      .out(plan::F32, {});
  ASSERT_OK(call.run());
  expectNear(call.floats(), std::vector<float>{(0 + 4 + 0 + 9) / 4.0f});

  Call shape("mse_loss");
  shape.in(f32({2}, {1, 2})).in(f32({2, 1}, {1, 2})).out(plan::F32, {});
  expectError(shape.run(), StatusCode::kInvalidArgument,
              {"mse_loss", "'target' has shape [2, 1], but 'prediction' has "
                           "[2]"});
  Call result("mse_loss");
  result.in(f32({2}, {1, 2})).in(f32({2}, {1, 2})).out(plan::F32, {1});
  expectError(result.run(), StatusCode::kInvalidArgument,
              {"mse_loss", "'loss' has shape [1], expected []"});
}

/// -log_softmax(logits)[label] per row of [N, C] logits, in double.
std::vector<double> naiveCrossEntropy(const std::vector<float> &logits,
                                      const std::vector<int64_t> &labels,
                                      int64_t classes) {
  std::vector<double> losses;
  for (size_t n = 0; n < labels.size(); ++n) {
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(static_cast<double>(logits[n * classes + c]));
    losses.push_back(std::log(sum) - logits[n * classes + labels[n]]);
  }
  return losses;
}

TEST(CpuKernels, CrossEntropyReductionsAndIgnoreIndex) {
  std::vector<float> logits = randomFloats(4 * 5, 90);
  std::vector<int64_t> labels = {3, -100, 0, 4};
  std::vector<double> each = naiveCrossEntropy(logits, {3, 0, 0, 4}, 5);
  each[1] = 0; // Ignored.

  Call none("cross_entropy");
  none.in(f32({4, 5}, logits))
      .in(i64({4}, labels))
      .out(plan::F32, {4})
      .intAttr("ignore_index", -100)
      .stringAttr("reduction", "none");
  ASSERT_OK(none.run());
  expectNear(none.floats(), each, 1e-6);

  Call sum("cross_entropy");
  sum.in(f32({4, 5}, logits))
      .in(i64({4}, labels))
      .out(plan::F32, {})
      .intAttr("ignore_index", -100)
      .stringAttr("reduction", "sum");
  ASSERT_OK(sum.run());
  expectNear(sum.floats(), std::vector<double>{each[0] + each[2] + each[3]},
             1e-6);

  // mean divides by the three labels that count, not by four.
  Call mean("cross_entropy");
  mean.in(f32({4, 5}, logits))
      .in(i64({4}, labels))
      .out(plan::F32, {})
      .intAttr("ignore_index", -100);
  ASSERT_OK(mean.run());
  expectNear(mean.floats(),
             std::vector<double>{(each[0] + each[2] + each[3]) / 3}, 1e-6);

  // Without ignore_index every label counts (and -100 is then invalid).
  Call noIgnore("cross_entropy");
  noIgnore.in(f32({4, 5}, logits))
      .in(i64({4}, {3, 1, 0, 4}))
      .out(plan::F32, {});
  ASSERT_OK(noIgnore.run());
  std::vector<double> all = naiveCrossEntropy(logits, {3, 1, 0, 4}, 5);
  expectNear(noIgnore.floats(),
             std::vector<double>{(all[0] + all[1] + all[2] + all[3]) / 4},
             1e-6);

  // Hand-checked: uniform logits over 4 classes lose log(4) per label.
  Call uniform("cross_entropy");
  uniform.in(f32({1, 4}, {2, 2, 2, 2})).in(i32({1}, {1})).out(plan::F32, {});
  ASSERT_OK(uniform.run());
  expectNear(uniform.floats(), std::vector<double>{std::log(4.0)}, 1e-6);
}

// [N, C, d]: classes on axis 1, labels [N, d]; element (n, c, s) sits at
// (n * C + c) * d + s.
TEST(CpuKernels, CrossEntropyWithSpatialDimensions) {
  const int64_t n = 2, classes = 3, d = 2;
  std::vector<float> x = randomFloats(n * classes * d, 91);
  std::vector<int64_t> labels = {2, 0, 1, 1};
  Call call("cross_entropy");
  call.in(f32({n, classes, d}, x))
      .in(i64({n, d}, labels))
      .out(plan::F32, {n, d})
      .stringAttr("reduction", "none");
  ASSERT_OK(call.run());
  std::vector<double> expected;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t s = 0; s < d; ++s) {
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c)
        sum += std::exp(static_cast<double>(x[(b * classes + c) * d + s]));
      expected.push_back(std::log(sum) -
                         x[(b * classes + labels[b * d + s]) * d + s]);
    }
  expectNear(call.floats(), expected, 1e-6);
}

TEST(CpuKernels, NllLossPicksNegatedLogProbabilities) {
  // log-probabilities [3, 2], labels with one ignored (ignore_index 1).
  std::vector<float> logp = {-0.1f, -2.0f, -0.5f, -0.9f, -3.0f, -0.05f};
  Call none("nll_loss");
  none.in(f32({3, 2}, logp))
      .in(i32({3}, {1, 1, 0}))
      .out(plan::F32, {3})
      .intAttr("ignore_index", 1)
      .stringAttr("reduction", "none");
  ASSERT_OK(none.run());
  expectNear(none.floats(), std::vector<float>{0, 0, 3.0f});
  Call mean("nll_loss");
  mean.in(f32({3, 2}, logp)).in(i64({3}, {1, 0, 1})).out(plan::F32, {});
  ASSERT_OK(mean.run());
  expectNear(mean.floats(), std::vector<float>{(2.0f + 0.5f + 0.05f) / 3});
  Call sum("nll_loss");
  sum.in(f32({3, 2}, logp))
      .in(i64({3}, {1, 0, 1}))
      .out(plan::F32, {})
      .stringAttr("reduction", "sum")
      .intAttr("ignore_index", 0);
  ASSERT_OK(sum.run());
  expectNear(sum.floats(), std::vector<float>{2.0f + 0.05f});

  // Every label ignored: the mean is 0 / 0, as in torch.
  Call allIgnored("nll_loss");
  allIgnored.in(f32({3, 2}, logp))
      .in(i64({3}, {-1, -1, -1}))
      .out(plan::F32, {})
      .intAttr("ignore_index", -1);
  ASSERT_OK(allIgnored.run());
  EXPECT_TRUE(std::isnan(allIgnored.floats()[0]));
}

TEST(CpuKernels, ClassLossErrors) {
  std::vector<float> x = iota<float>(6);
  Call bogus("cross_entropy");
  bogus.in(f32({3, 2}, x))
      .in(i64({3}, {0, 1, 0}))
      .out(plan::F32, {})
      .stringAttr("reduction", "bogus");
  expectError(bogus.run(), StatusCode::kInvalidArgument,
              {"cross_entropy", "reduction must be", "\"bogus\""});
  Call label("nll_loss");
  label.in(f32({3, 2}, x)).in(i64({3}, {0, 2, 0})).out(plan::F32, {});
  expectError(label.run(), StatusCode::kOutOfRange,
              {"nll_loss", "label 2", "position 1", "2 classes"});
  Call labels("cross_entropy");
  labels.in(f32({3, 2}, x)).in(i64({2}, {0, 1})).out(plan::F32, {});
  expectError(labels.run(), StatusCode::kInvalidArgument,
              {"cross_entropy", "'labels' has shape [2], expected [3]"});
  Call noneShape("cross_entropy");
  noneShape.in(f32({3, 2}, x))
      .in(i64({3}, {0, 1, 0}))
      .out(plan::F32, {})
      .stringAttr("reduction", "none");
  expectError(noneShape.run(), StatusCode::kInvalidArgument,
              {"cross_entropy", "'loss' has shape [], expected [3]"});
  Call floatLabels("nll_loss");
  floatLabels.in(f32({3, 2}, x)).in(f32({3}, {0, 1, 0})).out(plan::F32, {});
  expectError(floatLabels.run(), StatusCode::kUnimplemented,
              {"nll_loss", "'labels' has element type f32"});
  Call rank("cross_entropy");
  rank.in(f32({3}, {1, 2, 3})).in(i64({3}, {0, 0, 0})).out(plan::F32, {});
  expectError(rank.run(), StatusCode::kInvalidArgument,
              {"cross_entropy", "[N, C]"});
}

} // namespace
} // namespace zcc::cpu
