//===- CpuKernelsDtypeTest.cpp - The cpu kernels in f64, f16 and bf16 -----===//
//
// Every float kernel once more, in each float element type. f64 must agree
// with f32 (loosely: f32 rounds its inputs and its arithmetic) and with the
// same computation done here in double (tightly). f16 and bf16 compute in
// f32 and round once on store, so their result must be the f32 kernel's on
// the same (rounded) inputs, rounded: bit for bit where the kernel runs the
// f32 code, within one ulp where it must reorder its sums to stay off the
// heap (matmul, attention). The conversions of Float16.h, on which all of
// this rests, are checked on their own, exhaustively where that is cheap.
// Like CpuKernelsTest.cpp, this file is built a second time with
// ZCC_COUNT_ALLOCATIONS, where every successful kernel call must allocate
// nothing.
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
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace zcc::cpu {
namespace {

using namespace test;
using plan::DType;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr DType kHalfWidthTypes[] = {plan::F16, plan::BF16};

//===----------------------------------------------------------------------===//
// 16-bit floats, ulp by ulp
//===----------------------------------------------------------------------===//

float toFloatOf(DType dtype, uint16_t bits) {
  return dtype == plan::F16 ? toFloat(Half{bits}) : toFloat(BFloat16{bits});
}

bool isNaN16(DType dtype, uint16_t bits) {
  return (bits & 0x7fff) > (dtype == plan::F16 ? 0x7c00 : 0x7f80);
}

/// Units in the last place between two values of a 16-bit float type:
/// both encodings order like sign-magnitude integers. Equal bits are 0
/// apart, any two NaNs too; +0 and -0 are 1 apart, so that a wrong sign of
/// zero fails an exact comparison.
int ulpDistance(DType dtype, uint16_t a, uint16_t b) {
  if (a == b)
    return 0;
  bool nanA = isNaN16(dtype, a), nanB = isNaN16(dtype, b);
  if (nanA || nanB)
    return nanA && nanB ? 0 : std::numeric_limits<int>::max();
  auto ordered = [](uint16_t bits) {
    int magnitude = bits & 0x7fff;
    return (bits & 0x8000) ? -magnitude : magnitude;
  };
  return std::max(1, std::abs(ordered(a) - ordered(b)));
}

/// Each element of `actual` at most `maxUlps` from `expected`, or, where
/// the kernel may sum in another order than the f32 one, at most
/// `absoluteSlack` from it (this only matters near zero, where an ulp is
/// smaller than what reordering an f32 sum may change).
void expectWithinUlps(const Tensor &actual, const Tensor &expected, int maxUlps,
                      double absoluteSlack) {
  ASSERT_EQ(actual.dtype, expected.dtype);
  std::vector<uint16_t> a = actual.values<uint16_t>();
  std::vector<uint16_t> e = expected.values<uint16_t>();
  ASSERT_EQ(a.size(), e.size());
  for (size_t i = 0; i < a.size(); ++i) {
    float x = toFloatOf(actual.dtype, a[i]), y = toFloatOf(actual.dtype, e[i]);
    if (ulpDistance(actual.dtype, a[i], e[i]) <= maxUlps ||
        std::fabs(static_cast<double>(x) - y) <= absoluteSlack)
      continue;
    ADD_FAILURE() << dtypeName(actual.dtype) << " at " << i << ": got 0x"
                  << std::hex << a[i] << " (" << x << "), expected 0x" << e[i]
                  << " (" << y << ")" << std::dec << ", "
                  << ulpDistance(actual.dtype, a[i], e[i]) << " ulps apart";
  }
}

//===----------------------------------------------------------------------===//
// One kernel in every float type
//===----------------------------------------------------------------------===//

/// An operand of a kernel case: float values, given in double, that each
/// run stores in the element type under test; or, for labels and
/// conditions, a tensor every run passes as it is.
struct Operand {
  std::vector<int64_t> shape;
  std::vector<double> values;
  std::optional<Tensor> fixed;
};

Operand floats(std::vector<int64_t> shape, std::vector<double> values) {
  EXPECT_EQ(countOf(shape), static_cast<int64_t>(values.size()));
  return {std::move(shape), std::move(values), std::nullopt};
}
Operand fixed(Tensor t) { return {t.shape, {}, std::move(t)}; }

using Values = std::vector<std::vector<double>>;

struct KernelCase {
  std::string name; // For messages.
  std::string kernel;
  std::vector<Operand> operands;
  std::vector<int64_t> resultShape;
  bool boolResult = false;
  std::function<void(Call &)> attributes;
  /// The result computed here in double from the float operands' values;
  /// empty where that is not cheap.
  std::function<std::vector<double>(const Values &)> exact;
  /// How far f64 may be from f32 (mixed absolute/relative).
  double f32Tolerance = 2e-6;
  /// How far f16 and bf16 may be from the f32 kernel's result, rounded:
  /// 0 where the kernel runs the f32 code on widened values.
  int halfWidthUlps = 0;
  double halfWidthSlack = 0;
};

/// Runs `c` with its float operands stored as `dtype`, holding `values`.
Tensor runAs(const KernelCase &c, DType dtype, const Values &values) {
  Call call(c.kernel);
  size_t next = 0;
  for (const Operand &operand : c.operands) {
    if (operand.fixed)
      call.in(*operand.fixed);
    else
      call.in(encode(dtype, operand.shape, values[next++]));
  }
  call.out(c.boolResult ? plan::BOOL : dtype, c.resultShape);
  if (c.attributes)
    c.attributes(call);
  Status status = call.run();
  EXPECT_TRUE(status.isOk()) << dtypeName(dtype) << ": " << status.toString();
  if (!status.isOk())
    return {};
  return call.result();
}

Values valuesOf(const KernelCase &c) {
  Values values;
  for (const Operand &operand : c.operands)
    if (!operand.fixed)
      values.push_back(operand.values);
  return values;
}

Values quantizeAll(DType dtype, const Values &values) {
  Values result;
  for (const std::vector<double> &v : values)
    result.push_back(quantize(dtype, v));
  return result;
}

/// The checks of the file comment, for one kernel case.
void checkEveryFloatType(const KernelCase &c) {
  SCOPED_TRACE(c.name);
  Values values = valuesOf(c);

  // f64 against f32 (on the f32 roundings of the inputs), and against the
  // computation in double.
  Tensor wide = runAs(c, plan::F64, values);
  Tensor narrow = runAs(c, plan::F32, quantizeAll(plan::F32, values));
  if (c.boolResult)
    EXPECT_EQ(decode(wide), decode(narrow)) << "f64 against f32";
  else
    expectNear(decode(wide), decode(narrow), c.f32Tolerance, "f64 vs f32");
  if (c.exact)
    expectNear(decode(wide), c.exact(values), 1e-12, "f64 vs double");

  // f16 and bf16 against the f32 kernel on the same values, rounded once.
  for (DType dtype : kHalfWidthTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    Values rounded = quantizeAll(dtype, values);
    Tensor half = runAs(c, dtype, rounded);
    Tensor single = runAs(c, plan::F32, rounded);
    if (c.boolResult) {
      EXPECT_EQ(decode(half), decode(single));
      continue;
    }
    Tensor expected = encode(dtype, single.shape, decode(single));
    expectWithinUlps(half, expected, c.halfWidthUlps, c.halfWidthSlack);
  }
}

/// Values for element-wise cases: random ones and the edges a 16-bit type
/// must carry through (signed zero, infinities, NaN, an f16 subnormal and a
/// value beyond the largest f16).
std::vector<double> withEdges(std::vector<double> values) {
  const double edges[] = {0.0, -0.0, kInf, -kInf, kNaN, 3e-6, -70000.0};
  values.insert(values.end(), std::begin(edges), std::end(edges));
  return values;
}

//===----------------------------------------------------------------------===//
// Float16.h
//===----------------------------------------------------------------------===//

static_assert(std::is_same_v<Compute<float>, float>);
static_assert(std::is_same_v<Compute<double>, double>);
static_assert(std::is_same_v<Compute<Half>, float>);
static_assert(std::is_same_v<Compute<BFloat16>, float>);
static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2,
              "16-bit types must be laid out as their bits");

// Every finite half converts to float and back unchanged, and every
// midpoint between neighbours (subnormals included) rounds to the one with
// the even mantissa, while its float neighbours round to the nearer half.
TEST(CpuKernelsDType, HalfRoundsToNearestEvenEverywhere) {
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    float value = toFloat(Half{static_cast<uint16_t>(h)});
    ASSERT_EQ(toHalf(value).bits, h) << "round trip of " << h;
    ASSERT_EQ(toHalf(-value).bits, h | 0x8000) << "round trip of -" << h;
    if (h + 1 == 0x7c00)
      break;
    float next = toFloat(Half{static_cast<uint16_t>(h + 1)});
    float mid = (value + next) / 2; // Exact: halves have 11-bit mantissas.
    uint32_t even = (h & 1) ? h + 1 : h;
    ASSERT_EQ(toHalf(mid).bits, even) << "midpoint above " << h;
    ASSERT_EQ(toHalf(-mid).bits, even | 0x8000) << "midpoint below -" << h;
    ASSERT_EQ(toHalf(std::nextafter(mid, 0.0f)).bits, h) << "below mid " << h;
    ASSERT_EQ(toHalf(std::nextafter(mid, kInfF)).bits, h + 1)
        << "above mid " << h;
  }
}

TEST(CpuKernelsDType, HalfEdgeValues) {
  // Subnormals: 2^-24 is the smallest; 2^-25 ties with zero (even), 3 *
  // 2^-25 ties between 1 and 2 ulps (even: 2); the largest subnormal
  // 1023 * 2^-24 reads back exactly.
  EXPECT_EQ(toHalf(std::ldexp(1.0f, -24)).bits, 0x0001);
  EXPECT_EQ(toHalf(std::ldexp(1.0f, -25)).bits, 0x0000);
  EXPECT_EQ(toHalf(-std::ldexp(1.0f, -25)).bits, 0x8000);
  EXPECT_EQ(toHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)).bits, 0x0001);
  EXPECT_EQ(toHalf(3 * std::ldexp(1.0f, -25)).bits, 0x0002);
  EXPECT_EQ(toHalf(std::ldexp(1.0f, -30)).bits, 0x0000);
  EXPECT_EQ(toFloat(Half{0x03ff}), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(toFloat(Half{0x0001}), std::ldexp(1.0f, -24));
  EXPECT_EQ(toHalf(2047 * std::ldexp(1.0f, -25)).bits, 0x0400)
      << "the tie above the largest subnormal rounds to the smallest normal";
  // Overflow: 65504 is the largest half, 65520 the tie with 2^16 and so
  // infinity; anything just below stays finite.
  EXPECT_EQ(toHalf(65504.0f).bits, 0x7bff);
  EXPECT_EQ(toHalf(std::nextafter(65520.0f, 0.0f)).bits, 0x7bff);
  EXPECT_EQ(toHalf(65520.0f).bits, 0x7c00);
  EXPECT_EQ(toHalf(-65520.0f).bits, 0xfc00);
  EXPECT_EQ(toHalf(1e30f).bits, 0x7c00);
  EXPECT_EQ(toHalf(kInfF).bits, 0x7c00);
  EXPECT_EQ(toHalf(-kInfF).bits, 0xfc00);
  EXPECT_EQ(toFloat(Half{0x7c00}), kInfF);
  EXPECT_EQ(toFloat(Half{0xfc00}), -kInfF);
  // NaN stays NaN, quiet and with its sign, whatever its payload.
  EXPECT_EQ(toHalf(std::numeric_limits<float>::quiet_NaN()).bits & 0x7e00,
            0x7e00);
  EXPECT_EQ(toHalf(-std::numeric_limits<float>::quiet_NaN()).bits & 0xfe00,
            0xfe00);
  EXPECT_TRUE(isNaN16(
      plan::F16, toHalf(std::numeric_limits<float>::signaling_NaN()).bits));
  EXPECT_TRUE(std::isnan(toFloat(Half{0x7e00})));
  EXPECT_TRUE(std::isnan(toFloat(Half{0x7c01})));
  EXPECT_TRUE(std::isnan(toFloat(Half{0xfc01})));
  // Signed zeros.
  EXPECT_EQ(toHalf(-0.0f).bits, 0x8000);
  EXPECT_TRUE(std::signbit(toFloat(Half{0x8000})));
}

// The same for every bfloat16: round trips, ties to even (subnormals
// included) and their float neighbours.
TEST(CpuKernelsDType, BFloat16RoundsToNearestEvenEverywhere) {
  for (uint32_t b = 0; b < 0x7f80; ++b) {
    float value = toFloat(BFloat16{static_cast<uint16_t>(b)});
    ASSERT_EQ(toBFloat16(value).bits, b) << "round trip of " << b;
    ASSERT_EQ(toBFloat16(-value).bits, b | 0x8000) << "round trip of -" << b;
    if (b + 1 == 0x7f80)
      break;
    float next = toFloat(BFloat16{static_cast<uint16_t>(b + 1)});
    // Exact (9 bits fit a float), and without overflow at the top.
    float mid = value + (next - value) / 2;
    uint32_t even = (b & 1) ? b + 1 : b;
    ASSERT_EQ(toBFloat16(mid).bits, even) << "midpoint above " << b;
    ASSERT_EQ(toBFloat16(std::nextafter(mid, 0.0f)).bits, b)
        << "below mid " << b;
    ASSERT_EQ(toBFloat16(std::nextafter(mid, kInfF)).bits, b + 1)
        << "above mid " << b;
  }
}

TEST(CpuKernelsDType, BFloat16EdgeValues) {
  // The largest float lies beyond the tie between the largest bfloat16
  // (0x7f7f) and 2^128: it rounds to infinity.
  EXPECT_EQ(toBFloat16(std::numeric_limits<float>::max()).bits, 0x7f80);
  EXPECT_EQ(toBFloat16(-std::numeric_limits<float>::max()).bits, 0xff80);
  EXPECT_EQ(toBFloat16(kInfF).bits, 0x7f80);
  EXPECT_EQ(toFloat(BFloat16{0xff80}), -kInfF);
  // The smallest float subnormal is far below the smallest bfloat16 one.
  EXPECT_EQ(toBFloat16(std::numeric_limits<float>::denorm_min()).bits, 0);
  EXPECT_EQ(toFloat(BFloat16{0x0001}), std::ldexp(1.0f, -133));
  // NaN stays NaN, including a signalling NaN whose payload sits in the
  // bits that truncation would drop.
  uint32_t signaling = 0x7f800001;
  float snan;
  std::memcpy(&snan, &signaling, 4);
  EXPECT_TRUE(isNaN16(plan::BF16, toBFloat16(snan).bits));
  EXPECT_TRUE(isNaN16(plan::BF16, toBFloat16(-snan).bits));
  EXPECT_EQ(toBFloat16(-snan).bits & 0x8000, 0x8000);
  EXPECT_TRUE(std::isnan(toFloat(BFloat16{0x7fc0})));
  EXPECT_EQ(toBFloat16(-0.0f).bits, 0x8000);
}

TEST(CpuKernelsDType, LoadAndStoreRoundOnceOnStore) {
  EXPECT_EQ(load(Half{0x3c00}), 1.0f);
  EXPECT_EQ(load(BFloat16{0xc0a0}), -5.0f);
  EXPECT_EQ(load(2.5), 2.5);
  EXPECT_EQ(load(2.5f), 2.5f);
  // 1 + 2^-11 ties between 1 and its f16 successor; 1 + 2^-8 the same for
  // bf16: both go to the even 1.
  EXPECT_EQ(store<Half>(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);
  EXPECT_EQ(store<Half>(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);
  EXPECT_EQ(store<BFloat16>(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  EXPECT_EQ(store<BFloat16>(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_EQ(store<double>(0.1), 0.1);
  EXPECT_EQ(store<float>(0.1f), 0.1f);
}

//===----------------------------------------------------------------------===//
// Element-wise kernels
//===----------------------------------------------------------------------===//

double maxPropagatingNaN(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? a + b : std::max(a, b);
}
double minPropagatingNaN(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? a + b : std::min(a, b);
}

/// `fn` over lhs [2, 3, 4] and rhs [3, 1], broadcast.
std::vector<double> broadcastBinary(const Values &v,
                                    double (*fn)(double, double)) {
  std::vector<double> out;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        out.push_back(fn(v[0][(i * 3 + j) * 4 + k], v[1][j]));
  return out;
}

TEST(CpuKernelsDType, BinaryArithmetic) {
  struct Binary {
    const char *kernel;
    double (*fn)(double, double);
    double lo, hi; // Range of the rhs; the lhs has edges too.
  };
  const Binary binaries[] = {
      {"add", [](double a, double b) { return a + b; }, -3, 3},
      {"sub", [](double a, double b) { return a - b; }, -3, 3},
      {"mul", [](double a, double b) { return a * b; }, -3, 3},
      {"div", [](double a, double b) { return a / b; }, 0.25, 3},
      {"pow", [](double a, double b) { return std::pow(a, b); }, -2, 2},
      {"max", maxPropagatingNaN, -3, 3},
      {"min", minPropagatingNaN, -3, 3},
  };
  for (const Binary &b : binaries) {
    std::vector<double> lhs = withEdges(randomValues(17, 1, 0.1, 3));
    std::vector<double> rhs = randomValues(3, 2, b.lo, b.hi);
    if (std::string(b.kernel) == "max" || std::string(b.kernel) == "min")
      rhs[1] = kNaN;
    KernelCase c;
    c.name = b.kernel;
    c.kernel = b.kernel;
    c.operands = {floats({2, 3, 4}, lhs), floats({3, 1}, rhs)};
    c.resultShape = {2, 3, 4};
    c.exact = [fn = b.fn](const Values &v) { return broadcastBinary(v, fn); };
    checkEveryFloatType(c);
  }
}

TEST(CpuKernelsDType, Comparisons) {
  // Halves on [-4, 4] are exact in every float type, so every type sees the
  // same values and must give the same answers; many are equal.
  std::mt19937 rng(3);
  std::vector<double> lhs, rhs;
  for (int i = 0; i < 24; ++i)
    lhs.push_back(static_cast<int>(rng() % 17) / 2.0 - 4);
  for (int i = 0; i < 4; ++i)
    rhs.push_back(static_cast<int>(rng() % 17) / 2.0 - 4);
  lhs[0] = kNaN;
  lhs[1] = kInf;
  lhs[2] = -0.0;
  rhs[0] = 0.0;
  struct Compare {
    const char *kernel;
    bool (*fn)(double, double);
  };
  const Compare compares[] = {
      {"equal", [](double a, double b) { return a == b; }},
      {"less", [](double a, double b) { return a < b; }},
      {"greater", [](double a, double b) { return a > b; }},
  };
  for (const Compare &cmp : compares) {
    KernelCase c;
    c.name = cmp.kernel;
    c.kernel = cmp.kernel;
    c.operands = {floats({6, 4}, lhs), floats({4}, rhs)};
    c.resultShape = {6, 4};
    c.boolResult = true;
    c.exact = [fn = cmp.fn](const Values &v) {
      std::vector<double> out;
      for (int i = 0; i < 24; ++i)
        out.push_back(fn(v[0][i], v[1][i % 4]) ? 1 : 0);
      return out;
    };
    checkEveryFloatType(c);
  }
}

TEST(CpuKernelsDType, WhereSelectsElementsOfEveryWidth) {
  std::vector<uint8_t> condition = {1, 0, 0, 1, 1, 0};
  KernelCase c;
  c.name = c.kernel = "where";
  c.operands = {fixed(makeTensor(plan::BOOL, {2, 3}, condition)),
                floats({2, 3}, randomValues(6, 4)),
                floats({3}, {kNaN, -0.0, 70000.0})};
  c.resultShape = {2, 3};
  c.exact = [condition](const Values &v) {
    std::vector<double> out;
    for (int i = 0; i < 6; ++i)
      out.push_back(condition[i] ? v[0][i] : v[1][i % 3]);
    return out;
  };
  checkEveryFloatType(c);
}

TEST(CpuKernelsDType, IsNan) {
  KernelCase c;
  c.name = c.kernel = "is_nan";
  c.operands = {floats({10}, withEdges(randomValues(3, 5)))};
  c.resultShape = {10};
  c.boolResult = true;
  c.exact = [](const Values &v) {
    std::vector<double> out;
    for (double x : v[0])
      out.push_back(std::isnan(x) ? 1 : 0);
    return out;
  };
  checkEveryFloatType(c);
}

TEST(CpuKernelsDType, UnaryKernels) {
  struct Unary {
    const char *kernel;
    double (*fn)(double);
    double lo, hi;
  };
  const Unary unaries[] = {
      {"neg", [](double v) { return -v; }, -3, 3},
      {"exp", [](double v) { return std::exp(v); }, -12, 12},
      {"sqrt", [](double v) { return std::sqrt(v); }, 0, 9},
      {"tanh", [](double v) { return std::tanh(v); }, -4, 4},
      {"relu", [](double v) { return v > 0 || std::isnan(v) ? v : 0.0; }, -3,
       3},
      {"sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }, -20, 20},
      {"log", [](double v) { return std::log(v); }, 0.01, 100},
      {"erf", [](double v) { return std::erf(v); }, -3, 3},
      {"reciprocal", [](double v) { return 1 / v; }, 0.1, 10},
  };
  for (const Unary &u : unaries) {
    KernelCase c;
    c.name = c.kernel = u.kernel;
    c.operands = {floats({4, 6}, withEdges(randomValues(17, 6, u.lo, u.hi)))};
    c.resultShape = {4, 6};
    c.exact = [fn = u.fn](const Values &v) {
      std::vector<double> out;
      for (double x : v[0])
        out.push_back(fn(x));
      return out;
    };
    // log and sqrt of the negative edge are NaN in every type.
    checkEveryFloatType(c);
  }
}

TEST(CpuKernelsDType, GeluBothForms) {
  for (const char *approximate : {"none", "tanh"}) {
    KernelCase c;
    c.name = std::string("gelu ") + approximate;
    c.kernel = "gelu";
    c.operands = {floats({20}, withEdges(randomValues(13, 7, -6, 6)))};
    c.resultShape = {20};
    c.attributes = [approximate](Call &call) {
      call.stringAttr("approximate", approximate);
    };
    bool tanhForm = std::string(approximate) == "tanh";
    c.exact = [tanhForm](const Values &v) {
      std::vector<double> out;
      for (double x : v[0])
        out.push_back(tanhForm ? 0.5 * x *
                                     (1 + std::tanh(0.7978845608028654 *
                                                    (x + 0.044715 * x * x * x)))
                               : 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))));
      return out;
    };
    checkEveryFloatType(c);
  }
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

/// `values` in any element type (bool as non-zero).
Tensor typed(DType dtype, const std::vector<double> &values,
             std::vector<int64_t> shape = {}) {
  if (shape.empty())
    shape = {static_cast<int64_t>(values.size())};
  switch (dtype) {
  case plan::I64:
    return makeTensor(dtype, shape,
                      std::vector<int64_t>(values.begin(), values.end()));
  case plan::I32:
    return makeTensor(dtype, shape,
                      std::vector<int32_t>(values.begin(), values.end()));
  case plan::I8:
    return makeTensor(dtype, shape,
                      std::vector<int8_t>(values.begin(), values.end()));
  case plan::BOOL: {
    std::vector<uint8_t> bytes;
    for (double v : values)
      bytes.push_back(v != 0 ? 1 : 0);
    return makeTensor(dtype, shape, bytes);
  }
  default:
    return encode(dtype, shape, values);
  }
}

constexpr DType kAllTypes[] = {plan::F32, plan::F64, plan::F16, plan::BF16,
                               plan::I64, plan::I32, plan::I8,  plan::BOOL};

// Values every type holds exactly (bool as 0 and 1) go through every pair
// of types unchanged; bool reads any non-zero value as true.
TEST(CpuKernelsDType, CastBetweenEveryPairOfTypes) {
  const std::vector<double> values = {0, 1, -2, 3, 100, -7, 64, -128};
  for (DType from : kAllTypes) {
    for (DType to : kAllTypes) {
      SCOPED_TRACE(std::string(dtypeName(from)) + " -> " + dtypeName(to));
      std::vector<double> source = values;
      if (from == plan::BOOL)
        for (double &v : source)
          v = v != 0 ? 1 : 0;
      Call call("cast");
      call.in(typed(from, source)).out(to, {8});
      ASSERT_OK(call.run());
      std::vector<double> expected = source;
      if (to == plan::BOOL)
        for (double &v : expected)
          v = v != 0 ? 1 : 0;
      EXPECT_EQ(decode(call.result()), expected);
    }
  }
}

// Float to integer truncates toward zero, saturates and maps NaN to 0, from
// the 16-bit types as from f32.
TEST(CpuKernelsDType, CastHalfWidthToIntegerTruncatesAndSaturates) {
  for (DType from : kHalfWidthTypes) {
    SCOPED_TRACE(dtypeName(from));
    Call call("cast");
    call.in(encode(from, {7}, {-1.75, 2.875, -0.5, kNaN, 300, -kInf, kInf}))
        .out(plan::I8, {7});
    ASSERT_OK(call.run());
    EXPECT_EQ(call.result().values<int8_t>(),
              (std::vector<int8_t>{-1, 2, 0, 0, 127, -128, 127}));
    Call wide("cast");
    wide.in(encode(from, {4}, {-1.75, 2.875, 65280, -kInf}))
        .out(plan::I64, {4});
    ASSERT_OK(wide.run());
    EXPECT_EQ(wide.result().values<int64_t>(),
              (std::vector<int64_t>{-1, 2, 65280,
                                    std::numeric_limits<int64_t>::min()}));
    Call flag("cast");
    flag.in(encode(from, {4}, {0.0, -0.0, kNaN, 0.25})).out(plan::BOOL, {4});
    ASSERT_OK(flag.run());
    EXPECT_EQ(flag.result().values<uint8_t>(),
              (std::vector<uint8_t>{0, 0, 1, 1}));
  }
}

uint16_t bitsOf(const Tensor &t, size_t i) { return t.values<uint16_t>()[i]; }

/// Casts `source` to the 16-bit type `to` and checks each element's bits
/// against `scalar`'s.
template <typename Scalar>
void expectCastBits(const std::vector<float> &source, DType to, Scalar scalar) {
  ASSERT_NE(source.size() % 8, 0u) << "the tail after the last block of eight goes untested";
  int64_t n = static_cast<int64_t>(source.size());
  Call cast("cast");
  cast.in(makeTensor(plan::F32, {n}, source)).out(to, {n});
  ASSERT_OK(cast.run());
  std::vector<uint16_t> bits = cast.result().values<uint16_t>();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(bits[i], scalar(source[i])) << "element " << i << ": " << source[i];
}

// The f32 <-> f16 casts run eight at a time where the processor converts in
// hardware (the host's cast of offloaded parameters to their fp16 copies):
// every element must come out as the scalar conversions of Float16.h give
// it, ties, subnormals, overflow, NaN (whose bits the scalar code fixes)
// and the tail after the last whole block included; and every half back to
// f32, exactly.
TEST(CpuKernelsDType, CastF32AndF16MatchTheScalarConversions) {
  std::vector<float> source = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.996f, 65520.0f,
                               -65520.0f, kInfF, -kInfF, std::ldexp(1.0f, -24),
                               std::ldexp(1.0f, -25), 3 * std::ldexp(1.0f, -25),
                               std::ldexp(1.0f, -14), 1 + std::ldexp(1.0f, -11),
                               1 + 3 * std::ldexp(1.0f, -11),
                               std::numeric_limits<float>::quiet_NaN(),
                               -std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(11);
  for (int i = 0; i < 100003; ++i) {
    uint32_t bits = rng();
    // Half of them near the f16 range, where the rounding matters.
    if (i % 2)
      bits = (bits & 0x807fffff) | ((0x60 + (bits >> 24) % 0x30) << 23);
    float value;
    std::memcpy(&value, &bits, sizeof value);
    source.push_back(value);
  }
  expectCastBits(source, plan::F16, [](float value) { return toHalf(value).bits; });

  std::vector<uint16_t> every(0x10000 + 3);
  for (size_t h = 0; h < every.size(); ++h)
    every[h] = static_cast<uint16_t>(h);
  int64_t m = static_cast<int64_t>(every.size());
  Call toF32("cast");
  toF32.in(makeTensor(plan::F16, {m}, every)).out(plan::F32, {m});
  ASSERT_OK(toF32.run());
  std::vector<float> floats = toF32.floats();
  for (int64_t i = 0; i < m; ++i) {
    float expected = toFloat(Half{every[i]});
    if (std::isnan(expected))
      ASSERT_TRUE(std::isnan(floats[i])) << "half " << every[i];
    else
      ASSERT_EQ(std::memcmp(&floats[i], &expected, sizeof expected), 0) << "half " << every[i];
  }
}

// The f32 -> bf16 cast runs eight at a time in integer lanes (the refresh
// of bf16 copies of offloaded parameters): every element as toBFloat16
// gives it: ties both ways, the largest finite values (which round to
// infinity), infinities, subnormals, NaNs of either sign (quieted by the
// scalar code), and the tail after the last whole block.
TEST(CpuKernelsDType, CastF32ToBFloat16MatchesTheScalarConversion) {
  std::vector<float> source = {0.0f, -0.0f, 1.0f, -1.0f, kInfF, -kInfF,
                               std::numeric_limits<float>::max(),
                               -std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::quiet_NaN(),
                               -std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::signaling_NaN()};
  std::mt19937 rng(12);
  for (int i = 0; i < 100003; ++i) {
    uint32_t bits = rng();
    // A third of them exactly on a tie (the low 16 bits 0x8000).
    if (i % 3 == 0)
      bits = (bits & 0xffff0000u) | 0x8000u;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    source.push_back(value);
  }
  expectCastBits(source, plan::BF16, [](float value) { return toBFloat16(value).bits; });
}

// A cast to f16 or bf16 rounds once, from the source value, even where
// rounding to f32 first would land on a tie and round the wrong way.
TEST(CpuKernelsDType, CastToHalfWidthRoundsOnce) {
  // f64 just above a tie: through f32 it becomes the tie, which rounds
  // down to even; rounding once goes up.
  double halfTie = 1 + std::ldexp(1.0, -11), bf16Tie = 1 + std::ldexp(1.0, -8);
  Call toF16("cast");
  toF16
      .in(makeTensor(plan::F64, {8},
                     std::vector<double>{
                         halfTie + std::ldexp(1.0, -40), halfTie,
                         -halfTie - std::ldexp(1.0, -40), 65520.0,
                         std::nextafter(65520.0, 0.0), 1e300, -1e-300, kNaN}))
      .out(plan::F16, {8});
  ASSERT_OK(toF16.run());
  EXPECT_EQ(toF16.result().values<uint16_t>(),
            (std::vector<uint16_t>{0x3c01, 0x3c00, 0xbc01, 0x7c00, 0x7bff,
                                   0x7c00, 0x8000, bitsOf(toF16.result(), 7)}));
  EXPECT_TRUE(isNaN16(plan::F16, bitsOf(toF16.result(), 7)));

  Call toBf16("cast");
  toBf16
      .in(makeTensor(plan::F64, {5},
                     std::vector<double>{bf16Tie + std::ldexp(1.0, -40),
                                         bf16Tie, 1e300,
                                         std::ldexp(1.0, -134) * 1.0000001,
                                         std::ldexp(1.0, -134)}))
      .out(plan::BF16, {5});
  ASSERT_OK(toBf16.run());
  EXPECT_EQ(toBf16.result().values<uint16_t>(),
            (std::vector<uint16_t>{0x3f81, 0x3f80, 0x7f80, 0x0001, 0x0000}));

  // Integers with more significant bits than f32 (or f64) keeps: 2^30 +
  // 2^22 + 1 is just above the bf16 tie 2^30 + 2^22, as 2^62 + 2^54 + 1 is
  // above 2^62 + 2^54; 2^63 - 1 rounds to 2^63.
  Call fromI32("cast");
  fromI32
      .in(makeTensor(plan::I32, {3},
                     std::vector<int32_t>{(1 << 30) + (1 << 22) + 1,
                                          (1 << 30) + (1 << 22), -65519}))
      .out(plan::BF16, {3});
  ASSERT_OK(fromI32.run());
  EXPECT_EQ(fromI32.result().values<uint16_t>(),
            (std::vector<uint16_t>{0x4e81, 0x4e80, 0xc780}));
  Call fromI64("cast");
  fromI64
      .in(makeTensor(
          plan::I64, {3},
          std::vector<int64_t>{(int64_t(1) << 62) + (int64_t(1) << 54) + 1,
                               std::numeric_limits<int64_t>::max(),
                               std::numeric_limits<int64_t>::min()}))
      .out(plan::BF16, {3});
  ASSERT_OK(fromI64.run());
  EXPECT_EQ(fromI64.result().values<uint16_t>(),
            (std::vector<uint16_t>{0x5e81, 0x5f00, 0xdf00}));
  Call intToHalf("cast");
  intToHalf
      .in(makeTensor(plan::I64, {4},
                     std::vector<int64_t>{2049, 2051, 65519, 65520}))
      .out(plan::F16, {4});
  ASSERT_OK(intToHalf.run());
  // 2049 ties between 2048 and 2050 (even: 2048), 2051 between 2050 and
  // 2052 (even: 2052); 65519 stays finite, 65520 does not.
  EXPECT_EQ(intToHalf.result().values<uint16_t>(),
            (std::vector<uint16_t>{0x6800, 0x6802, 0x7bff, 0x7c00}));

  // Between the 16-bit types, through the exact f32.
  Call halfToBf16("cast");
  halfToBf16.in(encode(plan::F16, {3}, {1.0 / 3, 65504, -kInf}))
      .out(plan::BF16, {3});
  ASSERT_OK(halfToBf16.run());
  EXPECT_EQ(halfToBf16.result().values<uint16_t>(),
            (std::vector<uint16_t>{toBFloat16(toFloat(toHalf(1.0f / 3))).bits,
                                   0x4780, 0xff80}));
  Call bf16ToHalf("cast");
  bf16ToHalf.in(encode(plan::BF16, {3}, {1e5, 1.0 / 3, -1e-9}))
      .out(plan::F16, {3});
  ASSERT_OK(bf16ToHalf.run());
  EXPECT_EQ(bf16ToHalf.result().values<uint16_t>(),
            (std::vector<uint16_t>{0x7c00, 0x3558, 0x8000}));
  Call halfToF64("cast");
  halfToF64
      .in(makeTensor(plan::F16, {3},
                     std::vector<uint16_t>{0x0001, 0x3555, 0xfbff}))
      .out(plan::F64, {3});
  ASSERT_OK(halfToF64.run());
  EXPECT_EQ(
      halfToF64.result().values<double>(),
      (std::vector<double>{std::ldexp(1.0, -24), 0.333251953125, -65504.0}));
}

//===----------------------------------------------------------------------===//
// matmul and attention
//===----------------------------------------------------------------------===//

/// C = A B for row-major [m, k] and [k, n], in double.
std::vector<double> naiveMatmul(const std::vector<double> &a,
                                const std::vector<double> &b, int64_t m,
                                int64_t k, int64_t n, int64_t aOffset = 0,
                                int64_t bOffset = 0) {
  std::vector<double> c;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += a[aOffset + i * k + p] * b[bOffset + p * n + j];
      c.push_back(sum);
    }
  return c;
}

KernelCase matmulCase(std::vector<int64_t> lhsShape,
                      std::vector<int64_t> rhsShape,
                      std::vector<int64_t> resultShape, uint32_t seed) {
  KernelCase c;
  c.name = "matmul " + std::to_string(seed);
  c.kernel = "matmul";
  c.operands = {floats(lhsShape, randomValues(countOf(lhsShape), seed)),
                floats(rhsShape, randomValues(countOf(rhsShape), seed + 1))};
  c.resultShape = std::move(resultShape);
  c.f32Tolerance = 3e-5;
  // The 16-bit product sums slice by slice of the contraction, not as one
  // sgemm: another order of f32 roundings, which moves results of
  // magnitude ~sqrt(k) here by ~1e-6 (many ulps only right next to zero).
  c.halfWidthUlps = 1;
  c.halfWidthSlack = 2e-5;
  return c;
}

TEST(CpuKernelsDType, MatmulShapes) {
  KernelCase plain = matmulCase({5, 7}, {7, 3}, {5, 3}, 10);
  plain.exact = [](const Values &v) {
    return naiveMatmul(v[0], v[1], 5, 7, 3);
  };
  checkEveryFloatType(plain);

  // Batch [2, 1] against [3]: broadcast; lhs batch (i, j) uses lhs i.
  KernelCase batched = matmulCase({2, 1, 4, 6}, {3, 6, 5}, {2, 3, 4, 5}, 20);
  batched.exact = [](const Values &v) {
    std::vector<double> out;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) {
        std::vector<double> c =
            naiveMatmul(v[0], v[1], 4, 6, 5, i * 24, j * 30);
        out.insert(out.end(), c.begin(), c.end());
      }
    return out;
  };
  checkEveryFloatType(batched);

  // A shared rhs folds the batch into rows; rank-1 operands drop a
  // dimension.
  KernelCase shared = matmulCase({2, 3, 4, 6}, {6, 5}, {2, 3, 4, 5}, 30);
  shared.exact = [](const Values &v) {
    return naiveMatmul(v[0], v[1], 24, 6, 5);
  };
  checkEveryFloatType(shared);
  KernelCase vectorLhs = matmulCase({6}, {2, 6, 3}, {2, 3}, 40);
  vectorLhs.exact = [](const Values &v) {
    std::vector<double> out = naiveMatmul(v[0], v[1], 1, 6, 3);
    std::vector<double> second = naiveMatmul(v[0], v[1], 1, 6, 3, 0, 18);
    out.insert(out.end(), second.begin(), second.end());
    return out;
  };
  checkEveryFloatType(vectorLhs);
  KernelCase vectorRhs = matmulCase({4, 6}, {6}, {4}, 50);
  vectorRhs.exact = [](const Values &v) {
    return naiveMatmul(v[0], v[1], 4, 6, 1);
  };
  checkEveryFloatType(vectorRhs);

  // An empty contraction is zero in every type.
  KernelCase empty = matmulCase({3, 0}, {0, 2}, {3, 2}, 60);
  empty.exact = [](const Values &) { return std::vector<double>(6, 0.0); };
  checkEveryFloatType(empty);
}

// Large enough for several tiles of C in each direction, partial ones at
// the edges, and a contraction over several slices.
TEST(CpuKernelsDType, MatmulAcrossTiles) {
  KernelCase c = matmulCase({70, 300}, {300, 130}, {70, 130}, 70);
  c.exact = [](const Values &v) {
    return naiveMatmul(v[0], v[1], 70, 300, 130);
  };
  checkEveryFloatType(c);
  // Batched, with a broadcast lhs: one 16-bit product per batch.
  KernelCase batched = matmulCase({1, 33, 129}, {2, 129, 65}, {2, 33, 65}, 80);
  batched.exact = [](const Values &v) {
    std::vector<double> out = naiveMatmul(v[0], v[1], 33, 129, 65);
    std::vector<double> second =
        naiveMatmul(v[0], v[1], 33, 129, 65, 0, 129 * 65);
    out.insert(out.end(), second.begin(), second.end());
    return out;
  };
  checkEveryFloatType(batched);
}

/// `values` of `shape` [..., a, b] with its last two dimensions swapped
/// ([..., b, a]); `shape` becomes the swapped shape.
std::vector<double> transposeLastTwo(const std::vector<double> &values,
                                     std::vector<int64_t> &shape) {
  size_t rank = shape.size();
  int64_t a = shape[rank - 2], b = shape[rank - 1];
  std::vector<double> result(values.size());
  for (int64_t base = 0; base < static_cast<int64_t>(values.size());
       base += a * b)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        result[base + j * a + i] = values[base + i * b + j];
  std::swap(shape[rank - 2], shape[rank - 1]);
  return result;
}

/// A matmul with transposed operands and a bias, as the kernel gets them:
/// lhs and rhs as stored, the bias's length (0 for none).
struct FusedMatmulCase {
  std::vector<int64_t> lhs, rhs, result;
  bool transposeLhs = false, transposeRhs = false;
  int64_t bias = 0;
  /// Sets the attributes even where false (absent means false too).
  bool explicitFalse = false;
  /// An addend of the result's shape (`residual`), and GELU's tanh form;
  /// or the product times that form's derivative at a GELU input.
  bool addend = false, gelu = false, geluGrad = false;
  /// The second output, aux: the sum before the GELU, or the bias
  /// gradient beside the GELU's derivative.
  bool aux = false;
};

/// GELU's tanh form in double, written out here.
double geluTanhReference(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

/// Its derivative in double, through sech^2 u = 1 / cosh^2 u.
double geluTanhDerivativeReference(double x) {
  double k = std::sqrt(2 / M_PI), u = k * (x + 0.044715 * x * x * x);
  return 0.5 * (1 + std::tanh(u)) +
         0.5 * x * k * (1 + 3 * 0.044715 * x * x) / (std::cosh(u) * std::cosh(u));
}

/// The fused matmul in `dtype` against the unfused composition: explicit
/// transposed copies, a plain matmul (in f32 for the 16-bit types, whose
/// product the fused kernel also keeps in f32), the bias and the addend
/// added and the GELU applied in double, rounded once to `dtype`.
void checkFusedMatmul(DType dtype, const FusedMatmulCase &c, uint32_t seed) {
  SCOPED_TRACE(std::string(dtypeName(dtype)) + " case " + std::to_string(seed));
  std::vector<double> lhs = quantize(dtype, randomValues(countOf(c.lhs), seed));
  std::vector<double> rhs =
      quantize(dtype, randomValues(countOf(c.rhs), seed + 1));
  std::vector<double> bias = quantize(dtype, randomValues(c.bias, seed + 2));
  std::vector<double> addend =
      quantize(dtype, randomValues(c.addend ? countOf(c.result) : 0, seed + 3));
  std::vector<double> geluInput =
      quantize(dtype, randomValues(c.geluGrad ? countOf(c.result) : 0, seed + 4, -3, 3));

  Call fused("matmul");
  fused.in(encode(dtype, c.lhs, lhs)).in(encode(dtype, c.rhs, rhs));
  if (c.bias > 0)
    fused.in(encode(dtype, {c.bias}, bias));
  if (c.addend)
    fused.in(encode(dtype, c.result, addend)).boolAttr("residual", true);
  if (c.gelu)
    fused.stringAttr("activation", "gelu_tanh");
  if (c.geluGrad)
    fused.in(encode(dtype, c.result, geluInput)).stringAttr("activation", "gelu_tanh_grad");
  if (c.transposeLhs || c.explicitFalse)
    fused.boolAttr("transpose_lhs", c.transposeLhs);
  if (c.transposeRhs || c.explicitFalse)
    fused.boolAttr("transpose_rhs", c.transposeRhs);
  fused.out(dtype, c.result);
  int64_t columns = c.result.empty() ? 1 : c.result.back();
  if (c.aux && c.gelu)
    fused.out(dtype, c.result);
  if (c.aux && c.geluGrad)
    fused.out(dtype, {columns});
  ASSERT_OK(fused.run());

  std::vector<int64_t> lhsShape = c.lhs, rhsShape = c.rhs;
  std::vector<double> plainLhs =
      c.transposeLhs ? transposeLastTwo(lhs, lhsShape) : lhs;
  std::vector<double> plainRhs =
      c.transposeRhs ? transposeLastTwo(rhs, rhsShape) : rhs;
  DType productType = dtype == plan::F64 ? plan::F64 : plan::F32;
  Call plain("matmul");
  plain.in(encode(productType, lhsShape, plainLhs))
      .in(encode(productType, rhsShape, plainRhs))
      .out(productType, c.result);
  ASSERT_OK(plain.run());
  std::vector<double> expected = plain.values();
  std::vector<double> preActivation(expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    if (c.bias > 0)
      expected[i] += bias[i % c.bias];
    if (c.addend)
      expected[i] += addend[i];
    preActivation[i] = expected[i];
    if (c.gelu)
      expected[i] = geluTanhReference(expected[i]);
    if (c.geluGrad)
      expected[i] *= geluTanhDerivativeReference(geluInput[i]);
  }
  Tensor rounded = encode(dtype, c.result, expected);

  // The fused product sums in another order than the plain one (the bias
  // first, a transposed operand, one product per batch, the 16-bit
  // product slice by slice of the contraction). Its partial sums, of up to
  // 270 products of magnitude up to 4, reach ~40, where an f32 ulp is
  // ~4e-6: another order moves a result by some of those, whatever its
  // own magnitude.
  constexpr double kReorderSlack = 8e-5;
  switch (dtype) {
  case plan::F64:
    expectNear(decode(fused.result()), expected, 1e-12, "f64");
    break;
  case plan::F32:
    expectNear(decode(fused.result()), decode(rounded), kReorderSlack, "f32");
    break;
  default:
    // One ulp of the 16-bit type (the two f32 results may sit on either
    // side of a rounding boundary), or the f32 slack near zero.
    expectWithinUlps(fused.result(), rounded, 1, kReorderSlack);
  }
  if (!c.aux)
    return;
  if (c.gelu) {
    // The sum before the GELU, rounded once, as the result is.
    Tensor pre = encode(dtype, c.result, preActivation);
    if (dtype == plan::F64)
      expectNear(fused.values(1), preActivation, 1e-12, "f64 aux");
    else if (dtype == plan::F32)
      expectNear(fused.values(1), decode(pre), kReorderSlack, "f32 aux");
    else
      expectWithinUlps(fused.result(1), pre, 1, kReorderSlack);
    return;
  }
  // The bias gradient: the rounded result's sums over its rows in double,
  // rounded once: the bits reduce_sum gives.
  std::vector<double> result = decode(fused.result());
  std::vector<double> sums(static_cast<size_t>(columns), 0.0);
  for (size_t i = 0; i < result.size(); ++i)
    sums[i % columns] += result[i];
  Tensor summed = encode(dtype, {columns}, sums);
  EXPECT_EQ(fused.values(1), decode(summed)) << "bias gradient";
}

// The bias is added to the product in f32 and the sum rounded once: lhs
// [1, 1] . rhs [1, 15u/32] (u an ulp at 1) is 1 + 15u/32, which rounds to
// 1 alone, but plus the bias u/16 it is just above 1 + u/2 and so rounds
// to 1 + u. Rounding the product first, then its sum with the bias, would
// give 1.
TEST(CpuKernelsDType, MatmulBiasIsAddedBeforeRounding) {
  for (DType dtype : kHalfWidthTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    double ulp =
        dtype == plan::F16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
    Call call("matmul");
    call.in(encode(dtype, {1, 2}, {1, 1}))
        .in(encode(dtype, {1, 2}, {1, 15 * ulp / 32}))
        .in(encode(dtype, {1}, {ulp / 16}))
        .boolAttr("transpose_rhs", true)
        .out(dtype, {1, 1});
    ASSERT_OK(call.run());
    EXPECT_EQ(call.values(), std::vector<double>{1 + ulp});
  }
}

constexpr DType kEveryFloatType[] = {plan::F32, plan::F64, plan::F16,
                                     plan::BF16};

// Each transpose and the bias, alone and together, on batches that
// broadcast on either side, a shared rhs (whose batch folds into the rows
// of one product, which a transposed lhs must not do), a shared lhs,
// rank-1 operands and an empty contraction (the bias rows alone).
TEST(CpuKernelsDType, MatmulTransposesAndBias) {
  const FusedMatmulCase cases[] = {
      {{5, 7}, {7, 3}, {5, 3}, false, false, 3},
      {{7, 5}, {7, 3}, {5, 3}, true, false, 0},
      {{5, 7}, {3, 7}, {5, 3}, false, true, 0},
      {{7, 5}, {3, 7}, {5, 3}, true, true, 3, true},
      {{5, 7}, {7, 3}, {5, 3}, false, false, 0, true},
      {{2, 1, 6, 4}, {3, 5, 6}, {2, 3, 4, 5}, true, true, 5},
      {{2, 1, 4, 6}, {3, 6, 5}, {2, 3, 4, 5}, false, false, 5},
      {{2, 3, 6, 4}, {6, 5}, {2, 3, 4, 5}, true, false, 5},
      {{2, 3, 4, 6}, {5, 6}, {2, 3, 4, 5}, false, true, 5},
      {{2, 3, 6, 4}, {5, 6}, {2, 3, 4, 5}, true, true, 0},
      {{6, 4}, {3, 6, 5}, {3, 4, 5}, true, false, 5},
      {{1, 6, 4}, {3, 5, 6}, {3, 4, 5}, true, true, 5},
      {{6}, {5, 6}, {5}, false, true, 5},
      {{6}, {2, 5, 6}, {2, 5}, false, true, 5},
      {{6, 4}, {6}, {4}, true, false, 1},
      {{2, 6, 4}, {6}, {2, 4}, true, false, 0},
      {{0, 3}, {2, 0}, {3, 2}, true, true, 2},
      {{2, 0, 3}, {0, 2}, {2, 3, 2}, true, false, 0},
      // The epilogue: an addend, GELU, both with and without the bias, on
      // a folded batch, one product per batch and an empty contraction.
      {{5, 7}, {7, 3}, {5, 3}, false, false, 3, false, true, false},
      {{5, 7}, {7, 3}, {5, 3}, false, false, 0, false, true, false},
      {{5, 7}, {3, 7}, {5, 3}, false, true, 3, false, false, true},
      {{7, 5}, {7, 3}, {5, 3}, true, false, 0, false, false, true},
      {{2, 3, 4, 6}, {5, 6}, {2, 3, 4, 5}, false, true, 5, false, true, false},
      {{2, 3, 6, 4}, {6, 5}, {2, 3, 4, 5}, true, false, 5, false, true, true},
      {{2, 1, 4, 6}, {3, 6, 5}, {2, 3, 4, 5}, false, false, 0, false, true, true},
      {{0, 3}, {2, 0}, {3, 2}, true, true, 2, false, true, true},
      {{5, 7}, {3, 7}, {5, 3}, false, true, 0, false, false, false, true},
      {{2, 3, 4, 6}, {5, 6}, {2, 3, 4, 5}, false, true, 0, false, false, false, true},
      {{2, 1, 6, 4}, {3, 5, 6}, {2, 3, 4, 5}, true, true, 0, false, false, false, true},
      {{2, 0, 3}, {0, 2}, {2, 3, 2}, true, false, 0, false, false, false, true},
      // aux: the sum before the GELU (with the bias, a folded batch, one
      // product per batch, an empty contraction), and the bias gradient
      // beside the GELU's derivative.
      {{5, 7}, {7, 3}, {5, 3}, false, false, 3, false, false, true, false, true},
      {{2, 3, 4, 6}, {5, 6}, {2, 3, 4, 5}, false, true, 5, false, false, true, false, true},
      {{2, 1, 6, 4}, {3, 5, 6}, {2, 3, 4, 5}, true, true, 0, false, false, true, false, true},
      {{0, 3}, {2, 0}, {3, 2}, true, true, 2, false, false, true, false, true},
      {{5, 7}, {3, 7}, {5, 3}, false, true, 0, false, false, false, true, true},
      {{2, 3, 4, 6}, {5, 6}, {2, 3, 4, 5}, false, true, 0, false, false, false, true, true},
      {{2, 1, 6, 4}, {3, 5, 6}, {2, 3, 4, 5}, true, true, 0, false, false, false, true, true},
      {{2, 0, 3}, {0, 2}, {2, 3, 2}, true, false, 0, false, false, false, true, true},
      // No rows: the bias gradient is zeros.
      {{0, 7}, {3, 7}, {0, 3}, false, true, 0, false, false, false, true, true},
  };
  uint32_t seed = 900;
  for (DType dtype : kEveryFloatType)
    for (const FusedMatmulCase &c : cases)
      checkFusedMatmul(dtype, c, seed += 3);
}

// m = 300, n = 1100 and k = 270 each cross a tile of the 16-bit product
// (256 rows, 1024 columns, 256 deep) and end in a partial one, so every
// tile of a transposed operand, and the bias of every column tile, is
// read from the right place.
TEST(CpuKernelsDType, MatmulTransposesAndBiasAcrossTiles) {
  const FusedMatmulCase cases[] = {
      {{300, 270}, {270, 1100}, {300, 1100}, false, false, 1100},
      {{270, 300}, {270, 1100}, {300, 1100}, true, false, 1100},
      {{300, 270}, {1100, 270}, {300, 1100}, false, true, 1100},
      {{270, 300}, {1100, 270}, {300, 1100}, true, true, 0},
      {{270, 300}, {1100, 270}, {300, 1100}, true, true, 1100},
      // Batched, lhs transposed under a shared rhs: one product per batch.
      {{2, 270, 300}, {1100, 270}, {2, 300, 1100}, true, true, 1100},
      // The addend's and the GELU's tiles too.
      {{300, 270}, {270, 1100}, {300, 1100}, false, false, 1100, false, true, true},
      {{2, 270, 300}, {1100, 270}, {2, 300, 1100}, true, true, 0, false, true, false},
      {{300, 270}, {1100, 270}, {300, 1100}, false, true, 0, false, false, false, true},
      {{300, 270}, {270, 1100}, {300, 1100}, false, false, 1100, false, false, true, false, true},
      {{300, 270}, {1100, 270}, {300, 1100}, false, true, 0, false, false, false, true, true},
  };
  uint32_t seed = 1200;
  for (DType dtype : kEveryFloatType)
    for (const FusedMatmulCase &c : cases)
      checkFusedMatmul(dtype, c, seed += 3);
}

KernelCase attentionCase(std::vector<int64_t> lead, int64_t tq, int64_t tk,
                         int64_t d, int64_t dv, bool causal, uint32_t seed) {
  int64_t heads = countOf(lead);
  auto shape = [&](int64_t t, int64_t width) {
    std::vector<int64_t> s = lead;
    s.push_back(t);
    s.push_back(width);
    return s;
  };
  double scale = 1.0 / std::sqrt(static_cast<double>(d));
  KernelCase c;
  c.name = "attention " + std::to_string(seed);
  c.kernel = "attention";
  c.operands = {floats(shape(tq, d), randomValues(heads * tq * d, seed)),
                floats(shape(tk, d), randomValues(heads * tk * d, seed + 1)),
                floats(shape(tk, dv), randomValues(heads * tk * dv, seed + 2))};
  c.resultShape = shape(tq, dv);
  c.attributes = [scale, causal](Call &call) {
    call.floatAttr("scale", scale);
    if (causal)
      call.boolAttr("causal", true);
  };
  c.exact = [=](const Values &v) {
    return naiveAttention(v[0], v[1], v[2], heads, tq, tk, d, dv, scale,
                          causal);
  };
  c.f32Tolerance = 2e-5;
  // The 16-bit kernel forms its dot products in loops, not with sgemv:
  // another order of f32 roundings, which moves results of magnitude ~1 by
  // ~1e-7.
  c.halfWidthUlps = 1;
  c.halfWidthSlack = 1e-6;
  return c;
}

TEST(CpuKernelsDType, Attention) {
  checkEveryFloatType(attentionCase({2, 2}, 5, 7, 8, 6, false, 100));
  checkEveryFloatType(attentionCase({3}, 4, 6, 4, 5, true, 110));
}

// More keys than one block (the running maximum rescales the partial
// output) and, for the 16-bit types, more value dimensions than their f32
// accumulator holds at once.
TEST(CpuKernelsDType, AttentionLongRowsAndWideValues) {
  checkEveryFloatType(attentionCase({1}, 3, 1500, 8, 300, false, 120));
  checkEveryFloatType(attentionCase({1}, 3, 1500, 8, 300, true, 130));
}

/// qkv_attention and qkv_attention_grad read and write the heads of the
/// packed projection in place; they must give, bit for bit, what attention
/// and attention_grad give on the heads transposed out of it.
void checkQkvAgainstHeads(DType dtype, const QkvShape &s, bool causal, uint32_t seed) {
  SCOPED_TRACE(std::string(cpu::dtypeName(dtype)) + " qkv seed " + std::to_string(seed));
  std::vector<int64_t> heads = {s.batch, s.heads, s.length, s.size};
  double scale = 1.0 / std::sqrt(static_cast<double>(s.size));
  Call forward = qkvAttentionCall(s, dtype, causal, false, seed);
  ASSERT_OK(forward.run());
  std::vector<double> packed = decode(forward.input(0));
  Call reference("attention");
  for (int part = 0; part < 3; ++part)
    reference.in(encode(dtype, heads, headsOf(packed, s, part)));
  reference.out(dtype, heads).out(plan::F32, {s.batch, s.heads, s.length});
  reference.floatAttr("scale", scale);
  if (causal)
    reference.unitAttr("causal");
  ASSERT_OK(reference.run());
  EXPECT_EQ(headsOf(forward.values(0), s, -1), reference.values(0));
  EXPECT_EQ(forward.values(1), reference.values(1));

  Call backward = qkvAttentionCall(s, dtype, causal, true, seed);
  ASSERT_OK(backward.run());
  Call gradients("attention_grad");
  for (int part = 0; part < 3; ++part)
    gradients.in(encode(dtype, heads, headsOf(packed, s, part)));
  gradients.in(encode(dtype, heads, headsOf(decode(backward.input(1)), s, -1)));
  for (int part = 0; part < 3; ++part)
    gradients.out(dtype, heads);
  gradients.floatAttr("scale", scale);
  if (causal)
    gradients.unitAttr("causal");
  ASSERT_OK(gradients.run());
  std::vector<double> expected(packed.size());
  for (int part = 0; part < 3; ++part)
    packHeads(expected, gradients.values(part), s, part);
  EXPECT_EQ(backward.values(0), expected);
}

TEST(CpuKernelsDType, QkvAttentionReadsHeadsInPlace) {
  uint32_t seed = 1400;
  for (DType dtype : kEveryFloatType)
    for (auto [shape, causal] : {std::pair{QkvShape{2, 7, 3, 4}, true},
                                 std::pair{QkvShape{1, 9, 2, 8}, false},
                                 std::pair{QkvShape{2, 1, 1, 2}, true}})
      checkQkvAgainstHeads(dtype, shape, causal, seed += 3);
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax, layer_norm
//===----------------------------------------------------------------------===//

/// [outer, length, inner] views around `axis` of a [3, 4, 5] tensor.
struct Around {
  int64_t outer, length, inner;
};
Around around(int axis) {
  const int64_t dims[] = {3, 4, 5};
  Around a{1, dims[axis], 1};
  for (int d = 0; d < axis; ++d)
    a.outer *= dims[d];
  for (int d = axis + 1; d < 3; ++d)
    a.inner *= dims[d];
  return a;
}

std::vector<double> naiveSoftmax(const std::vector<double> &x, int axis,
                                 bool logForm) {
  Around a = around(axis);
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t j = 0; j < a.inner; ++j) {
      auto at = [&](int64_t i) { return (o * a.length + i) * a.inner + j; };
      double maxValue = -kInf, sum = 0;
      for (int64_t i = 0; i < a.length; ++i)
        maxValue = std::max(maxValue, x[at(i)]);
      for (int64_t i = 0; i < a.length; ++i)
        sum += std::exp(x[at(i)] - maxValue);
      for (int64_t i = 0; i < a.length; ++i)
        y[at(i)] = logForm ? x[at(i)] - maxValue - std::log(sum)
                           : std::exp(x[at(i)] - maxValue) / sum;
    }
  return y;
}

TEST(CpuKernelsDType, SoftmaxAndLogSoftmax) {
  std::vector<double> x = randomValues(60, 200, -8, 8);
  x[7] = -kInf; // A masked entry.
  for (bool logForm : {false, true})
    for (int axis = 0; axis < 3; ++axis) {
      KernelCase c;
      c.kernel = logForm ? "log_softmax" : "softmax";
      c.name = c.kernel + " axis " + std::to_string(axis);
      c.operands = {floats({3, 4, 5}, x)};
      c.resultShape = {3, 4, 5};
      c.attributes = [axis](Call &call) { call.intAttr("axis", axis - 3); };
      c.exact = [axis, logForm](const Values &v) {
        return naiveSoftmax(v[0], axis, logForm);
      };
      c.f32Tolerance = 1e-5;
      checkEveryFloatType(c);
    }
}

TEST(CpuKernelsDType, LayerNorm) {
  // An offset of 10 makes a one-pass variance lose digits; the kernel's
  // two passes must not.
  std::vector<double> x = randomValues(60, 210, 8, 12);
  for (int axis = 1; axis < 3; ++axis) {
    Around a = around(axis);
    int64_t columns = a.length * a.inner;
    std::vector<int64_t> normalized =
        axis == 1 ? std::vector<int64_t>{4, 5} : std::vector<int64_t>{5};
    KernelCase c;
    c.kernel = "layer_norm";
    c.name = "layer_norm axis " + std::to_string(axis);
    c.operands = {floats({3, 4, 5}, x),
                  floats(normalized, randomValues(columns, 220, 0.5, 1.5)),
                  floats(normalized, randomValues(columns, 230))};
    c.resultShape = {3, 4, 5};
    c.attributes = [axis](Call &call) {
      call.intAttr("axis", axis).floatAttr("epsilon", 1e-5);
    };
    c.exact = [columns](const Values &v) {
      std::vector<double> y;
      for (size_t r = 0; r < v[0].size() / columns; ++r) {
        double mean = 0, variance = 0;
        for (int64_t c = 0; c < columns; ++c)
          mean += v[0][r * columns + c] / columns;
        for (int64_t c = 0; c < columns; ++c)
          variance += std::pow(v[0][r * columns + c] - mean, 2) / columns;
        for (int64_t c = 0; c < columns; ++c)
          y.push_back((v[0][r * columns + c] - mean) /
                          std::sqrt(variance + 1e-5) * v[1][c] +
                      v[2][c]);
      }
      return y;
    };
    c.f32Tolerance = 2e-5;
    checkEveryFloatType(c);
  }
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

TEST(CpuKernelsDType, Reductions) {
  std::vector<double> x = randomValues(60, 300, -50, 50);
  std::vector<double> withNaN = x;
  withNaN[17] = kNaN; // Reduced into result (1, *) along axes {0, 2}.
  struct Reduce {
    const char *kernel;
    const std::vector<double> *input;
  };
  for (Reduce r : {Reduce{"reduce_sum", &x}, Reduce{"reduce_mean", &x},
                   Reduce{"reduce_max", &x}, Reduce{"reduce_max", &withNaN}}) {
    std::string kernel = r.kernel;
    KernelCase c;
    c.name = kernel + (r.input == &withNaN ? " with NaN" : "");
    c.kernel = kernel;
    c.operands = {floats({3, 4, 5}, *r.input)};
    c.resultShape = {1, 4, 1};
    c.attributes = [](Call &call) {
      call.intsAttr("axes", {0, -1}).boolAttr("keepdims", true);
    };
    c.exact = [kernel](const Values &v) {
      std::vector<double> out;
      for (int j = 0; j < 4; ++j) {
        double sum = 0, best = -kInf;
        for (int i = 0; i < 3; ++i)
          for (int k = 0; k < 5; ++k) {
            double value = v[0][(i * 4 + j) * 5 + k];
            sum += value;
            best = std::isnan(best) || std::isnan(value)
                       ? kNaN
                       : std::max(best, value);
          }
        out.push_back(kernel == "reduce_sum"    ? sum
                      : kernel == "reduce_mean" ? sum / 15
                                                : best);
      }
      return out;
    };
    c.f32Tolerance = 1e-5;
    checkEveryFloatType(c);
  }
  // Over nothing: the sum is 0 and the maximum -infinity, in every type.
  for (const char *kernel : {"reduce_sum", "reduce_max"}) {
    KernelCase c;
    c.name = c.kernel = kernel;
    c.operands = {floats({2, 0}, {})};
    c.resultShape = {2};
    c.attributes = [](Call &call) {
      call.intsAttr("axes", {1}).boolAttr("keepdims", false);
    };
    bool isMax = std::string(kernel) == "reduce_max";
    c.exact = [isMax](const Values &) {
      return std::vector<double>(2, isMax ? -kInf : 0.0);
    };
    checkEveryFloatType(c);
  }
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

TEST(CpuKernelsDType, MseLoss) {
  KernelCase c;
  c.name = c.kernel = "mse_loss";
  c.operands = {floats({4, 5}, randomValues(20, 400)),
                floats({4, 5}, randomValues(20, 410))};
  c.resultShape = {};
  c.exact = [](const Values &v) {
    double sum = 0;
    for (size_t i = 0; i < v[0].size(); ++i)
      sum += (v[0][i] - v[1][i]) * (v[0][i] - v[1][i]);
    return std::vector<double>{sum / v[0].size()};
  };
  checkEveryFloatType(c);
}

TEST(CpuKernelsDType, CrossEntropyAndNllLoss) {
  // [6, 5, 3] scores against [6, 3] labels; label 1 is ignored.
  std::mt19937 rng(500);
  std::vector<int64_t> labels;
  for (int i = 0; i < 18; ++i)
    labels.push_back(rng() % 5);
  std::vector<int32_t> labels32(labels.begin(), labels.end());
  for (const char *kernel : {"cross_entropy", "nll_loss"})
    for (const char *reduction : {"mean", "sum", "none"}) {
      bool logits = std::string(kernel) == "cross_entropy";
      bool none = std::string(reduction) == "none";
      KernelCase c;
      c.kernel = kernel;
      c.name = std::string(kernel) + " " + reduction;
      c.operands = {floats({6, 5, 3}, randomValues(90, 510, logits ? -4 : -6,
                                                   logits ? 4 : 0)),
                    fixed(logits ? makeTensor(plan::I64, {6, 3}, labels)
                                 : makeTensor(plan::I32, {6, 3}, labels32))};
      c.resultShape =
          none ? std::vector<int64_t>{6, 3} : std::vector<int64_t>{};
      c.attributes = [reduction](Call &call) {
        call.stringAttr("reduction", reduction).intAttr("ignore_index", 1);
      };
      std::string reductionName = reduction;
      c.exact = [labels, logits, reductionName](const Values &v) {
        std::vector<double> losses;
        double total = 0;
        int counted = 0;
        for (int n = 0; n < 6; ++n)
          for (int s = 0; s < 3; ++s) {
            int64_t label = labels[n * 3 + s];
            auto score = [&](int64_t c) { return v[0][(n * 5 + c) * 3 + s]; };
            double loss = 0;
            if (label != 1) {
              double logSum = 0;
              if (logits) {
                double sum = 0;
                for (int64_t c = 0; c < 5; ++c)
                  sum += std::exp(score(c));
                logSum = std::log(sum);
              }
              loss = logSum - score(label);
              total += loss;
              ++counted;
            }
            losses.push_back(loss);
          }
        if (reductionName == "sum")
          return std::vector<double>{total};
        if (reductionName == "mean")
          return std::vector<double>{total / counted};
        return losses;
      };
      c.f32Tolerance = 1e-5;
      checkEveryFloatType(c);
    }
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// The same kernel on 2-, 4- and 8-byte elements must move the same
/// elements: the 16-bit and f64 results are checked against the i32 one.
/// The inputs hold 1, 2, 3, ... (exact in every type), so each result
/// element names its source.
void checkMovesEveryWidth(const std::string &name,
                          const std::vector<std::vector<int64_t>> &shapes,
                          const std::vector<int64_t> &resultShape,
                          const std::function<void(Call &)> &attributes,
                          const std::optional<Tensor> &indices = {}) {
  SCOPED_TRACE(name);
  auto run = [&](DType dtype, const std::vector<std::vector<double>> &values) {
    Call call(name);
    for (size_t i = 0; i < shapes.size(); ++i) {
      call.in(typed(dtype, values[i], shapes[i]));
      if (indices && i == 0)
        call.in(*indices);
    }
    call.out(dtype, resultShape);
    attributes(call);
    Status status = call.run();
    EXPECT_TRUE(status.isOk()) << dtypeName(dtype) << ": " << status.toString();
    return decode(call.result());
  };
  // Distinct, non-zero values every type holds exactly.
  std::vector<std::vector<double>> values;
  double next = 1;
  for (const std::vector<int64_t> &shape : shapes) {
    std::vector<double> v;
    for (int64_t i = 0; i < countOf(shape); ++i)
      v.push_back(next++);
    values.push_back(v);
  }
  std::vector<double> reference = run(plan::I32, values);
  for (DType dtype : {plan::F16, plan::BF16, plan::F64})
    EXPECT_EQ(run(dtype, values), reference) << dtypeName(dtype);
  // And the reference itself is right where that is easy to say: every
  // element comes from the input or is zero (trilu).
  for (double v : reference)
    EXPECT_TRUE(v >= 0 && v < next) << v;
}

TEST(CpuKernelsDType, DataMovementHandlesTwoByteElements) {
  checkMovesEveryWidth("copy", {{2, 3}}, {6}, [](Call &) {});
  checkMovesEveryWidth("reshape", {{2, 3}}, {3, 2}, [](Call &) {});
  checkMovesEveryWidth("transpose", {{2, 3, 4}}, {4, 2, 3}, [](Call &call) {
    call.intsAttr("perm", {2, 0, 1});
  });
  checkMovesEveryWidth("concat", {{2, 3}, {2, 1}, {2, 2}}, {2, 6},
                       [](Call &call) { call.intAttr("axis", 1); });
  checkMovesEveryWidth("slice", {{4, 5}}, {2, 2}, [](Call &call) {
    call.intsAttr("starts", {1, 0})
        .intsAttr("limits", {4, 5})
        .intsAttr("strides", {2, 3});
  });
  checkMovesEveryWidth("broadcast", {{3, 1}}, {2, 3, 4}, [](Call &) {});
  checkMovesEveryWidth("trilu", {{2, 3, 3}}, {2, 3, 3},
                       [](Call &call) { call.boolAttr("upper", false); });
  checkMovesEveryWidth(
      "gather", {{4, 3}}, {2, 2, 3},
      [](Call &call) { call.intAttr("axis", 0); },
      makeTensor(plan::I64, {2, 2}, std::vector<int64_t>{3, -1, 0, 2}));
}

// Spot checks of the reference above: a transpose of f16 bits and a trilu
// that zeroes bf16 elements.
TEST(CpuKernelsDType, DataMovementKeepsSixteenBitPatterns) {
  Call transpose("transpose");
  transpose
      .in(makeTensor(plan::F16, {2, 3},
                     std::vector<uint16_t>{0x3c00, 0x7e00, 0x8001, 0xfc00,
                                           0x7bff, 0x0000}))
      .out(plan::F16, {3, 2})
      .intsAttr("perm", {1, 0});
  ASSERT_OK(transpose.run());
  EXPECT_EQ(
      transpose.result().values<uint16_t>(),
      (std::vector<uint16_t>{0x3c00, 0xfc00, 0x7e00, 0x7bff, 0x8001, 0x0000}));
  Call trilu("trilu");
  trilu
      .in(makeTensor(plan::BF16, {2, 2},
                     std::vector<uint16_t>{0x3f80, 0xc000, 0x4040, 0xbf80}))
      .out(plan::BF16, {2, 2});
  ASSERT_OK(trilu.run());
  EXPECT_EQ(trilu.result().values<uint16_t>(),
            (std::vector<uint16_t>{0x3f80, 0xc000, 0x0000, 0xbf80}));
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

// Mixed element types and non-float operands stay clear errors.
TEST(CpuKernelsDType, WrongElementTypesAreRefused) {
  Tensor half = encode(plan::F16, {2}, {1, 2});
  Tensor bf16 = encode(plan::BF16, {2}, {1, 2});
  Tensor f64 = encode(plan::F64, {2}, {1, 2});

  Call mixed("add");
  mixed.in(half).in(bf16).out(plan::F16, {2});
  expectError(mixed.run(), StatusCode::kInvalidArgument,
              {"add", "'rhs' has element type bf16, but 'lhs' has f16"});
  Call result("exp");
  result.in(half).out(plan::F32, {2});
  expectError(result.run(), StatusCode::kInvalidArgument,
              {"exp", "'result' has element type f32, expected f16"});
  Call ints("softmax");
  ints.in(makeTensor(plan::I32, {2}, std::vector<int32_t>{1, 2}))
      .out(plan::I32, {2})
      .intAttr("axis", 0);
  expectError(
      ints.run(), StatusCode::kUnimplemented,
      {"softmax", "'input' has element type i32", "f32, f64, f16 and bf16"});
  Call matmul("matmul");
  matmul.in(makeTensor(plan::I8, {1, 1}, std::vector<int8_t>{1}))
      .in(makeTensor(plan::I8, {1, 1}, std::vector<int8_t>{1}))
      .out(plan::I8, {1, 1});
  expectError(
      matmul.run(), StatusCode::kUnimplemented,
      {"matmul", "'lhs' has element type i8", "f32, f64, f16 and bf16"});
  Call matmulMixed("matmul");
  matmulMixed.in(encode(plan::F64, {1, 2}, {1, 2}))
      .in(encode(plan::F32, {2, 1}, {1, 2}))
      .out(plan::F64, {1, 1});
  expectError(matmulMixed.run(), StatusCode::kInvalidArgument,
              {"matmul", "'rhs' has element type f32, but 'lhs' has f64"});
  Call scale("layer_norm");
  scale.in(half)
      .in(encode(plan::F32, {2}, {1, 1}))
      .in(half)
      .out(plan::F16, {2})
      .intAttr("axis", 0)
      .floatAttr("epsilon", 1e-5);
  expectError(scale.run(), StatusCode::kInvalidArgument,
              {"layer_norm", "'scale' has element type f32, expected f16"});
  Call loss("cross_entropy");
  loss.in(encode(plan::F64, {1, 2}, {1, 2}))
      .in(makeTensor(plan::I64, {1}, std::vector<int64_t>{0}))
      .out(plan::F32, {});
  expectError(loss.run(), StatusCode::kInvalidArgument,
              {"cross_entropy", "'loss' has element type f32, expected f64"});
  Call target("mse_loss");
  target.in(bf16).in(half).out(plan::BF16, {});
  expectError(target.run(), StatusCode::kInvalidArgument,
              {"mse_loss", "'target' has element type f16, expected bf16"});
  Call keys("attention");
  keys.in(encode(plan::F64, {1, 1}, {1}))
      .in(encode(plan::F32, {1, 1}, {1}))
      .in(encode(plan::F64, {1, 1}, {1}))
      .out(plan::F64, {1, 1})
      .floatAttr("scale", 1);
  expectError(keys.run(), StatusCode::kInvalidArgument,
              {"attention", "'key' has element type f32, but 'query' has f64"});
  Call mean("reduce_mean");
  mean.in(makeTensor(plan::I32, {2}, std::vector<int32_t>{1, 2}))
      .out(plan::I32, {})
      .intsAttr("axes", {0})
      .boolAttr("keepdims", false);
  expectError(mean.run(), StatusCode::kUnimplemented,
              {"reduce_mean", "i32", "f32, f64, f16 and bf16"});
  Call pow("pow");
  pow.in(makeTensor(plan::I64, {1}, std::vector<int64_t>{2}))
      .in(makeTensor(plan::I64, {1}, std::vector<int64_t>{2}))
      .out(plan::I64, {1});
  expectError(pow.run(), StatusCode::kUnimplemented,
              {"pow", "i64", "f32, f64, f16 and bf16"});
  Call compare("less");
  compare.in(f64).in(half).out(plan::BOOL, {2});
  expectError(compare.run(), StatusCode::kInvalidArgument,
              {"less", "'rhs' has element type f16, but 'lhs' has f64"});
}

} // namespace
} // namespace zcc::cpu
