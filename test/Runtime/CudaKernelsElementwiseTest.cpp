//===- CudaKernelsElementwiseTest.cpp - Element-wise and shape kernels ----===//
//
// The cuda element-wise kernels (kernels/cuda/Elementwise.cpp) and data
// movement kernels (kernels/cuda/Shape.cpp) against their cpu references:
// every kernel in every element type it takes, on random inputs large
// enough for several blocks and for the scalar tails of the vectorized
// loops, through the flat, broadcast, vectorized and scalar paths and every
// attribute variant; then the refusals, which must match the cpu's code and
// message. Casts, comparisons and data movement must agree bit for bit.
//
//===----------------------------------------------------------------------===//

#include "test/Runtime/CudaConformance.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace zcc::cuda {
namespace {

using namespace test;
using plan::DType;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr DType kFloatTypes[] = {plan::F32, plan::F64, plan::F16, plan::BF16};
constexpr DType kAllTypes[] = {plan::F32, plan::F64, plan::F16, plan::BF16,
                               plan::I64, plan::I32, plan::I8,  plan::BOOL};
/// One element type of each size (1, 2, 4 and 8 bytes) for data movement,
/// plus bool.
constexpr DType kSizedTypes[] = {plan::I8, plan::F16, plan::F32, plan::F64,
                                 plan::BOOL};

/// f64 1e-12, f32 1e-5, f16 and bf16 1e-2 (mixed absolute/relative).
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

std::string name(DType dtype) { return cpu::dtypeName(dtype); }

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

/// Random elements of any type: floats uniform in [lo, hi); integers over
/// their whole range (so that arithmetic wraps); bools as the bytes 0, 1, 2
/// and 255 (every non-zero byte is true).
Tensor randomTensor(DType dtype, std::vector<int64_t> shape, uint32_t seed,
                    double lo = -2.0, double hi = 2.0) {
  int64_t n = countOf(shape);
  std::mt19937_64 rng(seed);
  switch (dtype) {
  case plan::I64: {
    std::uniform_int_distribution<int64_t> dist(
        std::numeric_limits<int64_t>::min(),
        std::numeric_limits<int64_t>::max());
    std::vector<int64_t> v(n);
    for (auto &x : v)
      x = dist(rng);
    return makeTensor(dtype, std::move(shape), v);
  }
  case plan::I32: {
    std::uniform_int_distribution<int32_t> dist(
        std::numeric_limits<int32_t>::min(),
        std::numeric_limits<int32_t>::max());
    std::vector<int32_t> v(n);
    for (auto &x : v)
      x = dist(rng);
    return makeTensor(dtype, std::move(shape), v);
  }
  case plan::I8: {
    std::uniform_int_distribution<int> dist(-128, 127);
    std::vector<int8_t> v(n);
    for (auto &x : v)
      x = static_cast<int8_t>(dist(rng));
    return makeTensor(dtype, std::move(shape), v);
  }
  case plan::BOOL: {
    const uint8_t bytes[] = {0, 1, 2, 255};
    std::uniform_int_distribution<int> dist(0, 3);
    std::vector<uint8_t> v(n);
    for (auto &x : v)
      x = bytes[dist(rng)];
    return makeTensor(dtype, std::move(shape), v);
  }
  default:
    return encode(dtype, std::move(shape), randomValues(n, seed, lo, hi));
  }
}

/// Values from a small set, so that comparisons meet equal elements: floats
/// from {-2, -1.5, ..., 2} (exact in every float type) with some NaN,
/// integers from [-3, 3], bools as random bytes.
Tensor smallValues(DType dtype, std::vector<int64_t> shape, uint32_t seed) {
  int64_t n = countOf(shape);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-4, 4);
  switch (dtype) {
  case plan::I64: {
    std::vector<int64_t> v(n);
    for (auto &x : v)
      x = dist(rng) % 4;
    return makeTensor(dtype, std::move(shape), v);
  }
  case plan::I32: {
    std::vector<int32_t> v(n);
    for (auto &x : v)
      x = dist(rng) % 4;
    return makeTensor(dtype, std::move(shape), v);
  }
  case plan::I8: {
    std::vector<int8_t> v(n);
    for (auto &x : v)
      x = static_cast<int8_t>(dist(rng) % 4);
    return makeTensor(dtype, std::move(shape), v);
  }
  case plan::BOOL:
    return randomTensor(dtype, std::move(shape), seed);
  default: {
    std::vector<double> v(n);
    for (auto &x : v) {
      int k = dist(rng);
      x = k == 4 ? kNaN : k * 0.5;
    }
    return encode(dtype, std::move(shape), v);
  }
  }
}

/// Indices in [-extent, extent) of type i64 or i32.
Tensor randomIndices(DType dtype, std::vector<int64_t> shape, int64_t extent,
                     uint32_t seed) {
  int64_t n = countOf(shape);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(-extent, extent - 1);
  if (dtype == plan::I64) {
    std::vector<int64_t> v(n);
    for (auto &x : v)
      x = dist(rng);
    return makeTensor(dtype, std::move(shape), v);
  }
  std::vector<int32_t> v(n);
  for (auto &x : v)
    x = static_cast<int32_t>(dist(rng));
  return makeTensor(dtype, std::move(shape), v);
}

/// Runs `call` on both backends and expects every output to agree byte for
/// byte, except that any NaN matches any NaN.
void expectCudaMatchesCpuExactly(const Call &call) {
  Call reference = call, actual = call;
  Status cpuStatus = reference.run();
  ASSERT_TRUE(cpuStatus.isOk()) << "cpu: " << cpuStatus.toString();
  Status cudaStatus = runOnCuda(actual);
  ASSERT_TRUE(cudaStatus.isOk()) << "cuda: " << cudaStatus.toString();
  for (size_t i = 0; i < actual.outputCount(); ++i) {
    const Tensor &got = actual.result(i), &want = reference.result(i);
    ASSERT_EQ(got.bytes.size(), want.bytes.size());
    std::vector<double> gotValues = decode(got), wantValues = decode(want);
    size_t width = cpu::dtypeBytes(got.dtype);
    int mismatches = 0;
    for (size_t e = 0; e < gotValues.size() && mismatches < 10; ++e) {
      if (std::isnan(gotValues[e]) && std::isnan(wantValues[e]))
        continue;
      if (got.dtype == plan::BOOL
              ? gotValues[e] != wantValues[e]
              : std::memcmp(&got.bytes[e * width], &want.bytes[e * width],
                            width) != 0) {
        ADD_FAILURE() << call.kernel() << " output " << i << " element " << e
                      << ": cuda " << gotValues[e] << ", cpu " << wantValues[e];
        ++mismatches;
      }
    }
  }
}

/// Shapes of the two operands of a binary op, with what each exercises.
struct BinaryShapes {
  std::vector<int64_t> lhs, rhs, result;
};

const BinaryShapes kBinaryShapes[] = {
    // Flat: vector packs and a scalar tail, several blocks.
    {{3, 1031}, {3, 1031}, {3, 1031}},
    // Bias add: the innermost dimension broadcasts as a vector.
    {{6, 1024}, {1024}, {6, 1024}},
    // Two-sided broadcast with unit dimensions.
    {{4, 1, 129}, {5, 1}, {4, 5, 129}},
    // A scalar operand on either side.
    {{}, {37, 33}, {37, 33}},
    {{1000, 3}, {1}, {1000, 3}},
    // An innermost dimension no pack divides: the scalar broadcast loop.
    {{7, 13}, {13}, {7, 13}},
    {{2, 3, 1, 5}, {3, 4, 1}, {2, 3, 4, 5}},
};

//===----------------------------------------------------------------------===//
// Binary arithmetic
//===----------------------------------------------------------------------===//

TEST(CudaKernelsElementwise, FloatArithmeticMatchesCpu) {
  ZCC_REQUIRE_GPU();
  const char *kernels[] = {"add", "sub", "mul", "div", "pow", "max", "min"};
  uint32_t seed = 1;
  for (const char *kernel : kernels) {
    bool positive = std::string(kernel) == "pow";
    bool divisor = std::string(kernel) == "div";
    for (DType dtype : kFloatTypes) {
      for (const BinaryShapes &shapes : kBinaryShapes) {
        SCOPED_TRACE(std::string(kernel) + " " + name(dtype) + " " +
                     shapeText(shapes.lhs) + " " + shapeText(shapes.rhs));
        Call call(kernel);
        call.in(randomTensor(dtype, shapes.lhs, seed, positive ? 0.1 : -2.0,
                             2.0))
            .in(randomTensor(dtype, shapes.rhs, seed + 1, divisor ? 0.5 : -2.0,
                             2.0))
            .out(dtype, shapes.result);
        seed += 2;
        expectCudaMatchesCpu(call, toleranceFor(dtype));
      }
    }
  }
}

TEST(CudaKernelsElementwise, MaxAndMinPropagateNaNAndPowSpecialValues) {
  ZCC_REQUIRE_GPU();
  std::vector<double> a = {kNaN, 1.0, kNaN, -kInf, 2.0, -0.0, 0.0, -8.0};
  std::vector<double> b = {1.0, kNaN, kNaN, 3.0, kInf, 0.0, -0.0, 1.0 / 3};
  for (const char *kernel : {"max", "min", "pow", "div"})
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE(std::string(kernel) + " " + name(dtype));
      Call call(kernel);
      call.in(encode(dtype, {8}, a)).in(encode(dtype, {8}, b)).out(dtype, {8});
      expectCudaMatchesCpu(call, toleranceFor(dtype));
    }
}

TEST(CudaKernelsElementwise, IntegerArithmeticWrapsLikeCpu) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 100;
  for (const char *kernel : {"add", "sub", "mul", "max", "min"})
    for (DType dtype : {plan::I64, plan::I32})
      for (const BinaryShapes &shapes : kBinaryShapes) {
        SCOPED_TRACE(std::string(kernel) + " " + name(dtype));
        Call call(kernel);
        call.in(randomTensor(dtype, shapes.lhs, seed))
            .in(randomTensor(dtype, shapes.rhs, seed + 1))
            .out(dtype, shapes.result);
        seed += 2;
        expectCudaMatchesCpuExactly(call);
      }
}

TEST(CudaKernelsElementwise, LargeFlatAndBroadcastOperands) {
  ZCC_REQUIRE_GPU();
  // More elements than the grid has threads: the grid-stride loops.
  Call flat("add");
  flat.in(randomTensor(plan::F32, {(1 << 21) + 5}, 1))
      .in(randomTensor(plan::F32, {(1 << 21) + 5}, 2))
      .out(plan::F32, {(1 << 21) + 5});
  expectCudaMatchesCpu(flat, 1e-5);
  // A GPT-2 sized bias add in f16 and bf16.
  for (DType dtype : {plan::F16, plan::BF16}) {
    Call bias("add");
    bias.in(randomTensor(dtype, {512, 1600}, 3))
        .in(randomTensor(dtype, {1600}, 4))
        .out(dtype, {512, 1600});
    expectCudaMatchesCpu(bias, 1e-2);
  }
  // An unaligned view: the result's pointer is fine but the shapes leave
  // the innermost dimension odd.
  Call odd("mul");
  odd.in(randomTensor(plan::F64, {300, 1, 257}, 5))
      .in(randomTensor(plan::F64, {17, 257}, 6))
      .out(plan::F64, {300, 17, 257});
  expectCudaMatchesCpu(odd, 1e-12);
}

TEST(CudaKernelsElementwise, BinaryInPlace) {
  ZCC_REQUIRE_GPU();
  for (DType dtype : kFloatTypes) {
    Call call("add");
    call.in(randomTensor(dtype, {33, 1025}, 7))
        .in(randomTensor(dtype, {1025}, 8))
        .inPlace(0);
    expectCudaMatchesCpu(call, toleranceFor(dtype));
  }
}

//===----------------------------------------------------------------------===//
// Comparisons and where
//===----------------------------------------------------------------------===//

TEST(CudaKernelsElementwise, ComparisonsInEveryType) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 200;
  for (const char *kernel : {"equal", "less", "greater"})
    for (DType dtype : kAllTypes)
      for (const BinaryShapes &shapes : kBinaryShapes) {
        SCOPED_TRACE(std::string(kernel) + " " + name(dtype) + " " +
                     shapeText(shapes.result));
        Call call(kernel);
        call.in(smallValues(dtype, shapes.lhs, seed))
            .in(smallValues(dtype, shapes.rhs, seed + 1))
            .out(plan::BOOL, shapes.result);
        seed += 2;
        expectCudaMatchesCpuExactly(call);
      }
}

TEST(CudaKernelsElementwise, WhereInEveryTypeWithThreeWayBroadcast) {
  ZCC_REQUIRE_GPU();
  struct Shapes {
    std::vector<int64_t> condition, onTrue, onFalse, result;
  };
  const Shapes cases[] = {
      {{5, 1030}, {5, 1030}, {5, 1030}, {5, 1030}},
      {{1, 1024}, {7, 1024}, {1}, {7, 1024}},
      {{4, 1, 9}, {3, 1}, {1, 1, 9}, {4, 3, 9}},
      {{}, {66, 5}, {5}, {66, 5}},
  };
  uint32_t seed = 300;
  for (DType dtype : kAllTypes)
    for (const Shapes &s : cases) {
      SCOPED_TRACE(name(dtype) + " " + shapeText(s.result));
      Call call("where");
      call.in(randomTensor(plan::BOOL, s.condition, seed))
          .in(randomTensor(dtype, s.onTrue, seed + 1))
          .in(randomTensor(dtype, s.onFalse, seed + 2))
          .out(dtype, s.result);
      seed += 3;
      expectCudaMatchesCpuExactly(call);
    }
}

//===----------------------------------------------------------------------===//
// Cast and is_nan
//===----------------------------------------------------------------------===//

/// Values a cast must get right: signed zeros, infinities and NaN, the
/// limits of every integer type and just beyond, half ties (1 + 2^-11,
/// 65520), values a step past a tie that double rounding through f32 would
/// round the wrong way, then random values of several magnitudes.
std::vector<double> castFloatValues(uint32_t seed) {
  std::vector<double> v = {0.0,
                           -0.0,
                           kNaN,
                           kInf,
                           -kInf,
                           1.0,
                           -1.7,
                           2.9,
                           -0.5,
                           2.5,
                           127.9,
                           -128.5,
                           300.0,
                           65504.0,
                           65520.0,
                           1e10,
                           -1e10,
                           3e38,
                           1e39,
                           1e-40,
                           9.3e18,
                           -9.3e18,
                           2147483647.0,
                           -2147483649.0,
                           1.0 + std::ldexp(1.0, -11),
                           1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40),
                           1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40),
                           std::ldexp(1.0, -24),
                           std::ldexp(1.0, -25) + std::ldexp(1.0, -60)};
  for (double scale : {1.0, 1e3, 1e6, 1e12})
    for (double x : randomValues(300, seed++, -scale, scale))
      v.push_back(x);
  return v;
}

std::vector<int64_t> castIntegerValues(uint32_t seed) {
  std::vector<int64_t> v = {0,
                            1,
                            -1,
                            127,
                            128,
                            -129,
                            300,
                            2049,
                            65519,
                            65520,
                            (1LL << 24) + 1,
                            (1LL << 32) + (1LL << 24) + 1,
                            (1LL << 53) + 1,
                            std::numeric_limits<int64_t>::max(),
                            std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int32_t>::max(),
                            std::numeric_limits<int32_t>::min()};
  std::mt19937_64 rng(seed);
  for (int bits : {8, 16, 31, 40, 63}) {
    std::uniform_int_distribution<int64_t> dist(-(1LL << (bits - 1)),
                                                (1LL << (bits - 1)) - 1);
    for (int i = 0; i < 300; ++i)
      v.push_back(dist(rng));
  }
  return v;
}

/// `castFloatValues` or `castIntegerValues` stored as `dtype` (integers
/// narrowed to their low bits, bools as random bytes).
Tensor castSource(DType dtype, uint32_t seed) {
  if (dtype == plan::F64 || dtype == plan::F32 || dtype == plan::F16 ||
      dtype == plan::BF16) {
    std::vector<double> v = castFloatValues(seed);
    return encode(dtype, {static_cast<int64_t>(v.size())}, v);
  }
  std::vector<int64_t> v = castIntegerValues(seed);
  int64_t n = static_cast<int64_t>(v.size());
  switch (dtype) {
  case plan::I64:
    return makeTensor(dtype, {n}, v);
  case plan::I32:
    return makeTensor(dtype, {n}, std::vector<int32_t>(v.begin(), v.end()));
  case plan::I8:
    return makeTensor(dtype, {n}, std::vector<int8_t>(v.begin(), v.end()));
  default:
    return randomTensor(plan::BOOL, {n}, seed);
  }
}

TEST(CudaKernelsElementwise, CastBetweenEveryPairOfTypes) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 400;
  for (DType from : kAllTypes)
    for (DType to : kAllTypes) {
      SCOPED_TRACE(name(from) + " -> " + name(to));
      Tensor source = castSource(from, seed++);
      std::vector<int64_t> shape = source.shape;
      Call call("cast");
      call.in(std::move(source)).out(to, shape);
      expectCudaMatchesCpuExactly(call);
    }
}

TEST(CudaKernelsElementwise, CastLargeAndInPlace) {
  ZCC_REQUIRE_GPU();
  Call narrow("cast");
  narrow.in(randomTensor(plan::F32, {4099, 257}, 1, -100, 100))
      .out(plan::BF16, {4099, 257});
  expectCudaMatchesCpuExactly(narrow);
  Call widen("cast");
  widen.in(randomTensor(plan::F16, {3, 100003}, 2)).out(plan::F32, {3, 100003});
  expectCudaMatchesCpuExactly(widen);
  // Same type: a copy, or nothing at all in place.
  Call same("cast");
  same.in(randomTensor(plan::F32, {1000}, 3)).out(plan::F32, {1000});
  expectCudaMatchesCpuExactly(same);
  Call inPlace("cast");
  inPlace.in(randomTensor(plan::I32, {1000}, 4)).inPlace(0);
  expectCudaMatchesCpuExactly(inPlace);
}

TEST(CudaKernelsElementwise, IsNan) {
  ZCC_REQUIRE_GPU();
  for (DType dtype : kFloatTypes) {
    std::vector<double> v = castFloatValues(7);
    Call call("is_nan");
    int64_t n = static_cast<int64_t>(v.size());
    call.in(encode(dtype, {n}, v)).out(plan::BOOL, {n});
    expectCudaMatchesCpuExactly(call);
    Call big("is_nan");
    big.in(smallValues(dtype, {2, 5003}, 8)).out(plan::BOOL, {2, 5003});
    expectCudaMatchesCpuExactly(big);
  }
}

//===----------------------------------------------------------------------===//
// Unary float kernels
//===----------------------------------------------------------------------===//

struct UnaryCase {
  const char *kernel;
  double lo, hi;
  const char *approximate = nullptr;
};

const UnaryCase kUnaryCases[] = {
    {"neg", -4, 4},    {"exp", -6, 6},          {"sqrt", 0.01, 9},
    {"tanh", -5, 5},   {"relu", -2, 2},         {"sigmoid", -12, 12},
    {"log", 0.01, 10}, {"erf", -3, 3},          {"reciprocal", 0.1, 4},
    {"gelu", -5, 5},   {"gelu", -5, 5, "none"}, {"gelu", -5, 5, "tanh"},
};

Call unaryCall(const UnaryCase &c, Tensor input) {
  DType dtype = input.dtype;
  std::vector<int64_t> shape = input.shape;
  Call call(c.kernel);
  call.in(std::move(input)).out(dtype, shape);
  if (c.approximate)
    call.stringAttr("approximate", c.approximate);
  return call;
}

TEST(CudaKernelsElementwise, UnaryFunctionsMatchCpu) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 500;
  for (const UnaryCase &c : kUnaryCases)
    for (DType dtype : kFloatTypes)
      for (std::vector<int64_t> shape :
           {std::vector<int64_t>{3, 1031}, std::vector<int64_t>{70001},
            std::vector<int64_t>{}, std::vector<int64_t>{0, 5}}) {
        SCOPED_TRACE(std::string(c.kernel) + " " +
                     (c.approximate ? c.approximate : "") + " " + name(dtype) +
                     " " + shapeText(shape));
        expectCudaMatchesCpu(
            unaryCall(c, randomTensor(dtype, shape, seed++, c.lo, c.hi)),
            toleranceFor(dtype));
      }
}

TEST(CudaKernelsElementwise, DropoutDropsWhatTheCpuDrops) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 900;
  for (DType dtype : kFloatTypes)
    for (auto [shape, rows] : {std::pair<std::vector<int64_t>, int64_t>{{3, 1031}, 3},
                               {{7, 4, 2500}, 7},
                               {{70001}, 1}}) {
      SCOPED_TRACE(std::string(name(dtype)) + " " + shapeText(shape));
      int64_t elements = 1;
      for (int64_t d : shape)
        elements *= d;
      Call call("dropout");
      call.in(randomTensor(dtype, shape, seed++, -4, 4))
          .in(i64({2}, {static_cast<int64_t>(seed), 12345}))
          .out(dtype, shape);
      call.floatAttr("ratio", 0.1).intAttr("key", -77).intAttr("sample_elements",
                                                                elements / rows);
      // The same elements dropped and the same products kept: bit for bit.
      expectCudaMatchesCpu(call, 0.0);
    }
  Call ratio("dropout");
  ratio.in(randomTensor(plan::F32, {2, 3}, 7, -1, 1)).in(i64({2}, {0, 0})).out(plan::F32, {2, 3});
  ratio.floatAttr("ratio", 0.0).intAttr("key", 1).intAttr("sample_elements", 3);
  expectCudaRefusesLikeCpu(ratio);
}

TEST(CudaKernelsElementwise, UnaryFunctionsOfSpecialValues) {
  ZCC_REQUIRE_GPU();
  std::vector<double> v = {0.0,  -0.0, kNaN,  kInf, -kInf, 1.0,
                           -1.0, 20.0, -20.0, 1e-3, -90.0, 90.0};
  for (const UnaryCase &c : kUnaryCases)
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE(std::string(c.kernel) + " " + name(dtype));
      expectCudaMatchesCpu(unaryCall(c, encode(dtype, {12}, v)),
                           toleranceFor(dtype));
    }
}

TEST(CudaKernelsElementwise, UnaryInPlace) {
  ZCC_REQUIRE_GPU();
  for (DType dtype : kFloatTypes) {
    Call call("tanh");
    call.in(randomTensor(dtype, {4097}, 9)).inPlace(0);
    expectCudaMatchesCpu(call, toleranceFor(dtype));
  }
}

TEST(CudaKernelsElementwise, GeluGradBothForms) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 600;
  for (const char *approximate : {"none", "tanh", ""})
    for (DType dtype : kFloatTypes)
      for (std::vector<int64_t> shape :
           {std::vector<int64_t>{5, 1601}, std::vector<int64_t>{7}}) {
        SCOPED_TRACE(std::string(approximate) + " " + name(dtype));
        Call call("gelu_grad");
        call.in(randomTensor(dtype, shape, seed, -5, 5))
            .in(randomTensor(dtype, shape, seed + 1))
            .out(dtype, shape);
        seed += 2;
        if (*approximate)
          call.stringAttr("approximate", approximate);
        expectCudaMatchesCpu(call, toleranceFor(dtype));
      }
}

//===----------------------------------------------------------------------===//
// Refusals
//===----------------------------------------------------------------------===//

TEST(CudaKernelsElementwise, RefusesLikeCpu) {
  ZCC_REQUIRE_GPU();
  Tensor a = randomTensor(plan::F32, {2, 3}, 1);
  Call shapes("add");
  shapes.in(a).in(randomTensor(plan::F32, {4}, 2)).out(plan::F32, {2, 3});
  expectCudaRefusesLikeCpu(shapes);
  Call result("sub");
  result.in(a).in(a).out(plan::F32, {3, 2});
  expectCudaRefusesLikeCpu(result);
  Call mixed("mul");
  mixed.in(a).in(randomTensor(plan::F64, {2, 3}, 3)).out(plan::F32, {2, 3});
  expectCudaRefusesLikeCpu(mixed);
  Call intDiv("div");
  Tensor ints = randomTensor(plan::I64, {4}, 4);
  intDiv.in(ints).in(ints).out(plan::I64, {4});
  expectCudaRefusesLikeCpu(intDiv);
  Call i8Add("add");
  Tensor bytes = randomTensor(plan::I8, {4}, 5);
  i8Add.in(bytes).in(bytes).out(plan::I8, {4});
  expectCudaRefusesLikeCpu(i8Add);
  Call compare("less");
  compare.in(a).in(a).out(plan::F32, {2, 3});
  expectCudaRefusesLikeCpu(compare);
  Call where("where");
  where.in(a).in(a).in(a).out(plan::F32, {2, 3});
  expectCudaRefusesLikeCpu(where);
  Call whereShapes("where");
  whereShapes.in(randomTensor(plan::BOOL, {2, 3}, 6))
      .in(a)
      .in(randomTensor(plan::F32, {5}, 7))
      .out(plan::F32, {2, 3});
  expectCudaRefusesLikeCpu(whereShapes);
  Call cast("cast");
  cast.in(a).out(plan::F16, {6});
  expectCudaRefusesLikeCpu(cast);
  Call isNan("is_nan");
  isNan.in(ints).out(plan::BOOL, {4});
  expectCudaRefusesLikeCpu(isNan);
  Call unary("exp");
  unary.in(ints).out(plan::I64, {4});
  expectCudaRefusesLikeCpu(unary);
  Call unaryType("sqrt");
  unaryType.in(a).out(plan::F64, {2, 3});
  expectCudaRefusesLikeCpu(unaryType);
  Call count("neg");
  count.in(a).in(a).out(plan::F32, {2, 3});
  expectCudaRefusesLikeCpu(count);
  Call gelu("gelu");
  gelu.in(a).out(plan::F32, {2, 3}).stringAttr("approximate", "fast");
  expectCudaRefusesLikeCpu(gelu);
  Call geluKind("gelu");
  geluKind.in(a).out(plan::F32, {2, 3}).intAttr("approximate", 1);
  expectCudaRefusesLikeCpu(geluKind);
  Call geluGrad("gelu_grad");
  geluGrad.in(a).in(randomTensor(plan::F32, {3, 2}, 8)).out(plan::F32, {2, 3});
  expectCudaRefusesLikeCpu(geluGrad);
  Call geluGradForm("gelu_grad");
  geluGradForm.in(a)
      .in(a)
      .out(plan::F32, {2, 3})
      .stringAttr("approximate", "erf");
  expectCudaRefusesLikeCpu(geluGradForm);
}

//===----------------------------------------------------------------------===//
// Data movement: copy, reshape, transpose, concat, slice, broadcast, trilu
//===----------------------------------------------------------------------===//

TEST(CudaKernelsShape, CopyAndReshape) {
  ZCC_REQUIRE_GPU();
  for (DType dtype : kAllTypes) {
    SCOPED_TRACE(name(dtype));
    Call copy("copy");
    copy.in(randomTensor(dtype, {3, 1001}, 1)).out(dtype, {3, 1001});
    expectCudaMatchesCpuExactly(copy);
    Call reshape("reshape");
    reshape.in(randomTensor(dtype, {6, 170}, 2)).out(dtype, {17, 60});
    expectCudaMatchesCpuExactly(reshape);
  }
  // copy moves bytes: f32 [4] into i8 [16].
  Call bytes("copy");
  bytes.in(randomTensor(plan::F32, {4}, 3)).out(plan::I8, {16});
  expectCudaMatchesCpuExactly(bytes);
  Call inPlace("reshape");
  inPlace.in(randomTensor(plan::F16, {4, 5}, 4)).inPlace(0);
  expectCudaMatchesCpuExactly(inPlace);
  Call empty("copy");
  empty.in(randomTensor(plan::F32, {0, 3}, 5)).out(plan::F32, {0});
  expectCudaMatchesCpuExactly(empty);
}

TEST(CudaKernelsShape, TransposeEveryPermutationOfRank3) {
  ZCC_REQUIRE_GPU();
  const std::vector<int64_t> perms[] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                        {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  uint32_t seed = 1;
  for (DType dtype : kAllTypes)
    for (const std::vector<int64_t> &perm : perms)
      for (std::vector<int64_t> shape :
           {std::vector<int64_t>{4, 5, 6}, std::vector<int64_t>{3, 40, 37},
            std::vector<int64_t>{2, 1, 130}}) {
        SCOPED_TRACE(name(dtype) + " " + shapeText(shape) + " perm " +
                     shapeText(perm));
        std::vector<int64_t> result;
        for (int64_t p : perm)
          result.push_back(shape[p]);
        Call call("transpose");
        call.in(randomTensor(dtype, shape, seed++))
            .out(dtype, result)
            .intsAttr("perm", perm);
        expectCudaMatchesCpuExactly(call);
      }
}

TEST(CudaKernelsShape, TransposeTiledAndWidenedPaths) {
  ZCC_REQUIRE_GPU();
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  const Case cases[] = {
      // The last two dimensions swapped: tiles, with partial edge tiles.
      {{2, 100, 67}, {0, 2, 1}},
      {{1030, 33}, {1, 0}},
      // Attention heads: [B, T, H, D] -> [B, H, T, D], rows of D elements
      // moved as 16-byte units.
      {{2, 37, 3, 64}, {0, 2, 1, 3}},
      // Rank 1 and rank 0.
      {{1000}, {0}},
      {{}, {}},
      {{5, 4, 3, 2, 2}, {4, 2, 0, 3, 1}},
  };
  uint32_t seed = 50;
  for (DType dtype : kSizedTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(name(dtype) + " " + shapeText(c.shape));
      std::vector<int64_t> result;
      for (int64_t p : c.perm)
        result.push_back(c.shape[p]);
      Call call("transpose");
      call.in(randomTensor(dtype, c.shape, seed++))
          .out(dtype, result)
          .intsAttr("perm", c.perm);
      expectCudaMatchesCpuExactly(call);
    }
}

TEST(CudaKernelsShape, ConcatAlongEveryAxis) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1;
  for (DType dtype : kAllTypes)
    for (int axis : {0, 1, 2, -1}) {
      SCOPED_TRACE(name(dtype) + " axis " + std::to_string(axis));
      int a = axis < 0 ? axis + 3 : axis;
      std::vector<int64_t> base = {4, 6, 130};
      Call call("concat");
      std::vector<int64_t> result = base;
      result[a] = 0;
      for (int64_t length : {3, 0, 5, 1}) {
        std::vector<int64_t> shape = base;
        shape[a] = length;
        result[a] += length;
        call.in(randomTensor(dtype, shape, seed++));
      }
      call.out(dtype, result).intAttr("axis", axis);
      expectCudaMatchesCpuExactly(call);
    }
  // Many rows of 16-byte aligned blocks.
  Call rows("concat");
  rows.in(randomTensor(plan::F32, {1000, 64}, 2))
      .in(randomTensor(plan::F32, {1000, 32}, 3))
      .out(plan::F32, {1000, 96})
      .intAttr("axis", 1);
  expectCudaMatchesCpuExactly(rows);
  Call single("concat");
  single.in(randomTensor(plan::F16, {7, 9}, 4))
      .out(plan::F16, {7, 9})
      .intAttr("axis", 0);
  expectCudaMatchesCpuExactly(single);
}

struct SliceCase {
  std::vector<int64_t> shape, starts, limits, strides;
};

const SliceCase kSliceCases[] = {
    {{10, 37, 20}, {1, 0, 3}, {9, 37, 19}, {2, 1, 3}},
    // Whole rows: a contiguous block moved as 16-byte units where aligned.
    {{100, 64}, {10, 0}, {50, 64}, {1, 1}},
    {{100, 64}, {0, 8}, {100, 40}, {1, 1}},
    // Every element, a single one, and nothing.
    {{6, 7}, {0, 0}, {6, 7}, {1, 1}},
    {{6, 7}, {5, 6}, {6, 7}, {1, 1}},
    {{6, 7}, {2, 3}, {2, 7}, {1, 2}},
    {{3000}, {1}, {2999}, {7}},
};

std::vector<int64_t> sliceShape(const SliceCase &c) {
  std::vector<int64_t> shape;
  for (size_t d = 0; d < c.shape.size(); ++d)
    shape.push_back((c.limits[d] - c.starts[d] + c.strides[d] - 1) /
                    c.strides[d]);
  return shape;
}

TEST(CudaKernelsShape, SliceWindows) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1;
  for (DType dtype : kAllTypes)
    for (const SliceCase &c : kSliceCases) {
      SCOPED_TRACE(name(dtype) + " " + shapeText(c.shape) + " from " +
                   shapeText(c.starts));
      Call call("slice");
      call.in(randomTensor(dtype, c.shape, seed++))
          .out(dtype, sliceShape(c))
          .intsAttr("starts", c.starts)
          .intsAttr("limits", c.limits)
          .intsAttr("strides", c.strides);
      expectCudaMatchesCpuExactly(call);
    }
}

TEST(CudaKernelsShape, SliceGradScattersIntoZeros) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 100;
  for (DType dtype : kAllTypes)
    for (const SliceCase &c : kSliceCases) {
      SCOPED_TRACE(name(dtype) + " " + shapeText(c.shape) + " from " +
                   shapeText(c.starts));
      Call call("slice_grad");
      call.in(randomTensor(dtype, sliceShape(c), seed++))
          .out(dtype, c.shape)
          .intsAttr("starts", c.starts)
          .intsAttr("limits", c.limits)
          .intsAttr("strides", c.strides);
      expectCudaMatchesCpuExactly(call);
    }
}

TEST(CudaKernelsShape, BroadcastToLargerShapes) {
  ZCC_REQUIRE_GPU();
  struct Case {
    std::vector<int64_t> in, out;
  };
  const Case cases[] = {
      {{1, 5, 1}, {3, 5, 7}}, {{7}, {2, 3, 7}},          {{}, {1000}},
      {{64}, {300, 64}},      {{300, 1}, {300, 64}},     {{2, 3}, {2, 3}},
      {{1}, {0, 4}},          {{4, 1, 33}, {4, 20, 33}},
  };
  uint32_t seed = 1;
  for (DType dtype : kAllTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(name(dtype) + " " + shapeText(c.in) + " -> " +
                   shapeText(c.out));
      Call call("broadcast");
      call.in(randomTensor(dtype, c.in, seed++)).out(dtype, c.out);
      expectCudaMatchesCpuExactly(call);
    }
}

TEST(CudaKernelsShape, TriluBothTrianglesAndDiagonals) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1;
  for (DType dtype : kAllTypes)
    for (int upper : {-1, 0, 1})
      for (int64_t k : {-2, 0, 3})
        for (std::vector<int64_t> shape :
             {std::vector<int64_t>{2, 5, 7}, std::vector<int64_t>{40, 33}}) {
          SCOPED_TRACE(name(dtype) + " upper " + std::to_string(upper) + " k " +
                       std::to_string(k));
          Call call("trilu");
          call.in(randomTensor(dtype, shape, seed++)).out(dtype, shape);
          if (upper >= 0)
            call.intAttr("upper", upper);
          if (k != 0)
            call.intAttr("k", k);
          expectCudaMatchesCpuExactly(call);
        }
  Call inPlace("trilu");
  inPlace.in(randomTensor(plan::F32, {3, 64, 64}, 7))
      .inPlace(0)
      .boolAttr("upper", false);
  expectCudaMatchesCpuExactly(inPlace);
}

//===----------------------------------------------------------------------===//
// gather, gather_grad
//===----------------------------------------------------------------------===//

struct GatherCase {
  std::vector<int64_t> data, indices;
  int axis;
};

const GatherCase kGatherCases[] = {
    // An embedding lookup with negative indices.
    {{50, 64}, {3, 7}, 0}, {{4, 10, 6}, {5}, 1}, {{4, 10, 6}, {2, 3}, -1},
    {{9}, {20}, 0},        {{8, 5}, {}, 0},      {{6, 3}, {0}, 1},
};

std::vector<int64_t> gatheredShape(const GatherCase &c) {
  int axis = c.axis < 0 ? c.axis + static_cast<int>(c.data.size()) : c.axis;
  std::vector<int64_t> shape(c.data.begin(), c.data.begin() + axis);
  shape.insert(shape.end(), c.indices.begin(), c.indices.end());
  shape.insert(shape.end(), c.data.begin() + axis + 1, c.data.end());
  return shape;
}

int64_t extentOf(const GatherCase &c) {
  int rank = static_cast<int>(c.data.size());
  return c.data[c.axis < 0 ? c.axis + rank : c.axis];
}

TEST(CudaKernelsShape, GatherAlongEveryAxis) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1;
  for (DType dtype : kAllTypes)
    for (DType indexType : {plan::I64, plan::I32})
      for (const GatherCase &c : kGatherCases) {
        SCOPED_TRACE(name(dtype) + " " + name(indexType) + " " +
                     shapeText(c.data) + " axis " + std::to_string(c.axis));
        Call call("gather");
        call.in(randomTensor(dtype, c.data, seed))
            .in(randomIndices(indexType, c.indices, extentOf(c), seed + 1))
            .out(dtype, gatheredShape(c))
            .intAttr("axis", c.axis);
        seed += 2;
        expectCudaMatchesCpuExactly(call);
      }
  // A GPT-2 sized embedding lookup.
  Call embed("gather");
  embed.in(randomTensor(plan::BF16, {1000, 1600}, 3))
      .in(randomIndices(plan::I64, {4, 256}, 1000, 4))
      .out(plan::BF16, {4, 256, 1600})
      .intAttr("axis", 0);
  expectCudaMatchesCpuExactly(embed);
}

TEST(CudaKernelsShape, GatherGradSumsRepeatedIndicesInOrder) {
  ZCC_REQUIRE_GPU();
  uint32_t seed = 1;
  for (DType dtype : kFloatTypes)
    for (DType indexType : {plan::I64, plan::I32})
      for (const GatherCase &c : kGatherCases) {
        SCOPED_TRACE(name(dtype) + " " + name(indexType) + " " +
                     shapeText(c.data) + " axis " + std::to_string(c.axis));
        Call call("gather_grad");
        call.in(randomIndices(indexType, c.indices, extentOf(c), seed))
            .in(randomTensor(dtype, gatheredShape(c), seed + 1))
            .out(dtype, c.data)
            .intAttr("axis", c.axis);
        seed += 2;
        // The same sums in the same order, rounded the same way.
        expectCudaMatchesCpuExactly(call);
      }
  // Many repeats of few rows, and many rows never named.
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(name(dtype));
    Call crowded("gather_grad");
    crowded.in(randomIndices(plan::I32, {4096}, 7, 5))
        .in(randomTensor(dtype, {4096, 33}, 6))
        .out(dtype, {7, 33})
        .intAttr("axis", 0);
    expectCudaMatchesCpuExactly(crowded);
    Call sparse("gather_grad");
    sparse.in(randomIndices(plan::I64, {8, 128}, 5000, 7))
        .in(randomTensor(dtype, {8, 128, 100}, 8))
        .out(dtype, {5000, 100})
        .intAttr("axis", 0);
    expectCudaMatchesCpuExactly(sparse);
  }
}

//===----------------------------------------------------------------------===//
// Refusals
//===----------------------------------------------------------------------===//

TEST(CudaKernelsShape, RefusesLikeCpu) {
  ZCC_REQUIRE_GPU();
  Tensor a = randomTensor(plan::F32, {2, 3}, 1);
  Call copy("copy");
  copy.in(a).out(plan::F32, {5});
  expectCudaRefusesLikeCpu(copy);
  Call reshape("reshape");
  reshape.in(a).out(plan::F32, {4});
  expectCudaRefusesLikeCpu(reshape);
  Call reshapeType("reshape");
  reshapeType.in(a).out(plan::I32, {6});
  expectCudaRefusesLikeCpu(reshapeType);
  Call perm("transpose");
  perm.in(a).out(plan::F32, {3, 2}).intsAttr("perm", {1, 1});
  expectCudaRefusesLikeCpu(perm);
  Call permRank("transpose");
  permRank.in(a).out(plan::F32, {3, 2}).intsAttr("perm", {1, 0, 2});
  expectCudaRefusesLikeCpu(permRank);
  Call permMissing("transpose");
  permMissing.in(a).out(plan::F32, {3, 2});
  expectCudaRefusesLikeCpu(permMissing);
  Call concatType("concat");
  concatType.in(a)
      .in(randomTensor(plan::F64, {2, 3}, 2))
      .out(plan::F32, {4, 3})
      .intAttr("axis", 0);
  expectCudaRefusesLikeCpu(concatType);
  Call concatShape("concat");
  concatShape.in(a)
      .in(randomTensor(plan::F32, {2, 4}, 3))
      .out(plan::F32, {4, 3})
      .intAttr("axis", 0);
  expectCudaRefusesLikeCpu(concatShape);
  Call concatAxis("concat");
  concatAxis.in(a).out(plan::F32, {2, 3}).intAttr("axis", 2);
  expectCudaRefusesLikeCpu(concatAxis);
  Call slice("slice");
  slice.in(a)
      .out(plan::F32, {2, 3})
      .intsAttr("starts", {0, 0})
      .intsAttr("limits", {2, 4})
      .intsAttr("strides", {1, 1});
  expectCudaRefusesLikeCpu(slice);
  Call sliceStep("slice");
  sliceStep.in(a)
      .out(plan::F32, {2, 3})
      .intsAttr("starts", {0, 0})
      .intsAttr("limits", {2, 3})
      .intsAttr("strides", {1, 0});
  expectCudaRefusesLikeCpu(sliceStep);
  Call sliceGrad("slice_grad");
  sliceGrad.in(a)
      .out(plan::F32, {4, 3})
      .intsAttr("starts", {0, 0})
      .intsAttr("limits", {3, 3})
      .intsAttr("strides", {1, 1});
  expectCudaRefusesLikeCpu(sliceGrad);
  Call gatherIndices("gather");
  gatherIndices.in(a)
      .in(randomTensor(plan::F32, {2}, 4))
      .out(plan::F32, {2, 3})
      .intAttr("axis", 0);
  expectCudaRefusesLikeCpu(gatherIndices);
  Call gatherShape("gather");
  gatherShape.in(a)
      .in(randomIndices(plan::I64, {4}, 2, 5))
      .out(plan::F32, {2, 3})
      .intAttr("axis", 0);
  expectCudaRefusesLikeCpu(gatherShape);
  Call gatherGrad("gather_grad");
  gatherGrad.in(randomIndices(plan::I64, {2}, 2, 6))
      .in(randomTensor(plan::F32, {3, 3}, 7))
      .out(plan::F32, {2, 3})
      .intAttr("axis", 0);
  expectCudaRefusesLikeCpu(gatherGrad);
  Call gatherGradType("gather_grad");
  gatherGradType.in(randomIndices(plan::I64, {2}, 2, 8))
      .in(randomTensor(plan::I32, {2, 3}, 9))
      .out(plan::I32, {2, 3})
      .intAttr("axis", 0);
  expectCudaRefusesLikeCpu(gatherGradType);
  Call broadcast("broadcast");
  broadcast.in(randomTensor(plan::F32, {3}, 10)).out(plan::F32, {2, 4});
  expectCudaRefusesLikeCpu(broadcast);
  Call trilu("trilu");
  trilu.in(randomTensor(plan::F32, {3}, 11)).out(plan::F32, {3});
  expectCudaRefusesLikeCpu(trilu);
  Call triluUpper("trilu");
  triluUpper.in(a).out(plan::F32, {2, 3}).intAttr("upper", 2);
  expectCudaRefusesLikeCpu(triluUpper);
}

} // namespace
} // namespace zcc::cuda
