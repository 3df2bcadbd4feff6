//===- KernelTestUtil.h - Tensors and kernel calls for kernel tests -*- C++
//-*-//
//
// What the cpu kernel tests (CpuKernelsTest.cpp, CpuKernelsDtypeTest.cpp,
// GradKernelsTest.cpp) share: tensors that own their bytes, a kernel call
// built operand by operand, and the checks of results and errors. Where
// ZCC_COUNT_ALLOCATIONS is defined (the no-allocation test binary), every
// successful kernel call must also make no allocation.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_TEST_RUNTIME_KERNELTESTUTIL_H
#define ZCC_TEST_RUNTIME_KERNELTESTUTIL_H

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Float16.h"
#ifdef ZCC_COUNT_ALLOCATIONS
#include "test/Runtime/CountingAllocator.h"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    ::zcc::Status status_ = (expr);                                            \
    ASSERT_TRUE(status_.isOk()) << status_.toString();                         \
  } while (false)

#define EXPECT_OK(expr)                                                        \
  do {                                                                         \
    ::zcc::Status status_ = (expr);                                            \
    EXPECT_TRUE(status_.isOk()) << status_.toString();                         \
  } while (false)

namespace zcc::test {

inline int64_t countOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// A tensor that owns its bytes.
struct Tensor {
  plan::DType dtype = plan::F32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;

  template <typename T> std::vector<T> values() const {
    std::vector<T> result(bytes.size() / sizeof(T));
    if (!result.empty())
      std::memcpy(result.data(), bytes.data(), bytes.size());
    return result;
  }
};

template <typename T>
Tensor makeTensor(plan::DType dtype, std::vector<int64_t> shape,
                  const std::vector<T> &values) {
  EXPECT_EQ(countOf(shape), static_cast<int64_t>(values.size()))
      << "test tensor built with the wrong number of values";
  Tensor t{dtype, std::move(shape), {}};
  t.bytes.resize(values.size() * sizeof(T));
  if (!values.empty())
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

inline Tensor f64(std::vector<int64_t> shape,
                  const std::vector<double> &values) {
  return makeTensor(plan::F64, std::move(shape), values);
}
inline Tensor i64(std::vector<int64_t> shape,
                  const std::vector<int64_t> &values) {
  return makeTensor(plan::I64, std::move(shape), values);
}
inline Tensor i32(std::vector<int64_t> shape,
                  const std::vector<int32_t> &values) {
  return makeTensor(plan::I32, std::move(shape), values);
}

/// `values` stored as the float type `dtype`: f32 and the 16-bit types
/// through float (each rounds to nearest even), f64 as they are.
inline Tensor encode(plan::DType dtype, std::vector<int64_t> shape,
                     const std::vector<double> &values) {
  switch (dtype) {
  case plan::F64:
    return makeTensor(dtype, std::move(shape), values);
  case plan::F32: {
    std::vector<float> v(values.begin(), values.end());
    return makeTensor(dtype, std::move(shape), v);
  }
  case plan::F16: {
    std::vector<uint16_t> v;
    for (double x : values)
      v.push_back(cpu::toHalf(static_cast<float>(x)).bits);
    return makeTensor(dtype, std::move(shape), v);
  }
  case plan::BF16: {
    std::vector<uint16_t> v;
    for (double x : values)
      v.push_back(cpu::toBFloat16(static_cast<float>(x)).bits);
    return makeTensor(dtype, std::move(shape), v);
  }
  default:
    ADD_FAILURE() << "encode: not a float type: " << cpu::dtypeName(dtype);
    return {};
  }
}

/// The elements of any tensor, as doubles (bool as 0 or 1).
inline std::vector<double> decode(const Tensor &t) {
  std::vector<double> result;
  auto append = [&](auto values) {
    for (auto v : values)
      result.push_back(static_cast<double>(v));
  };
  switch (t.dtype) {
  case plan::F32:
    append(t.values<float>());
    break;
  case plan::F64:
    append(t.values<double>());
    break;
  case plan::F16:
    for (uint16_t bits : t.values<uint16_t>())
      result.push_back(cpu::toFloat(cpu::Half{bits}));
    break;
  case plan::BF16:
    for (uint16_t bits : t.values<uint16_t>())
      result.push_back(cpu::toFloat(cpu::BFloat16{bits}));
    break;
  case plan::I64:
    append(t.values<int64_t>());
    break;
  case plan::I32:
    append(t.values<int32_t>());
    break;
  case plan::I8:
    append(t.values<int8_t>());
    break;
  case plan::BOOL:
    for (uint8_t b : t.values<uint8_t>())
      result.push_back(b != 0 ? 1.0 : 0.0);
    break;
  default:
    ADD_FAILURE() << "decode: unknown type " << cpu::dtypeName(t.dtype);
  }
  return result;
}

/// `values` as the float type `dtype` holds them.
inline std::vector<double> quantize(plan::DType dtype,
                                    const std::vector<double> &values) {
  return decode(encode(dtype, {static_cast<int64_t>(values.size())}, values));
}

inline std::vector<double> randomValues(int64_t n, uint32_t seed,
                                        double lo = -2.0, double hi = 2.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double &x : v)
    x = dist(rng);
  return v;
}

/// One kernel invocation: operands, result buffers and attributes, kept in
/// a plan Instruction as the runtime keeps them. Outputs are fresh buffers,
/// buffers with given contents (an accumulator), or an input's own buffer
/// (in-place kernels).
class Call {
public:
  explicit Call(std::string kernel) : kernel_(std::move(kernel)) {}

  Call &in(Tensor t) {
    inputs_.push_back(std::move(t));
    return *this;
  }
  /// A result buffer pre-filled with a 0xA5 pattern, so an element the
  /// kernel forgets to write shows up.
  Call &out(plan::DType dtype, std::vector<int64_t> shape) {
    Tensor t{dtype, std::move(shape), {}};
    t.bytes.assign(countOf(t.shape) * cpu::dtypeBytes(dtype), 0xA5);
    return out(std::move(t));
  }
  Call &out(Tensor initial) {
    outputs_.push_back(std::move(initial));
    aliases_.push_back(-1);
    return *this;
  }
  /// An output that is input `input`'s buffer.
  Call &inPlace(size_t input) {
    outputs_.emplace_back();
    aliases_.push_back(static_cast<int>(input));
    return *this;
  }
  Call &intAttr(const std::string &name, int64_t value) {
    attr(name).set_i(value);
    return *this;
  }
  Call &floatAttr(const std::string &name, double value) {
    attr(name).set_f(value);
    return *this;
  }
  Call &stringAttr(const std::string &name, const std::string &value) {
    attr(name).set_s(value);
    return *this;
  }
  Call &boolAttr(const std::string &name, bool value) {
    attr(name).set_b(value);
    return *this;
  }
  Call &unitAttr(const std::string &name) {
    attr(name).Clear();
    return *this;
  }
  Call &intsAttr(const std::string &name, const std::vector<int64_t> &values) {
    plan::Ints *ints = attr(name).mutable_ints();
    ints->clear_values();
    for (int64_t v : values)
      ints->add_values(v);
    return *this;
  }

  const std::string &kernel() const { return kernel_; }
  const plan::Instruction &instruction() const { return instruction_; }
  /// The index of the input output `i` aliases, or -1.
  int aliasOf(size_t i) const { return aliases_.at(i); }
  size_t inputCount() const { return inputs_.size(); }

  /// The kernel's arguments, pointing at this call's host tensors.
  cpu::KernelArgs hostArgs() {
    cpu::KernelArgs args;
    for (Tensor &t : inputs_)
      args.inputs.push_back({t.bytes.data(), t.dtype, t.shape});
    for (size_t i = 0; i < outputs_.size(); ++i) {
      Tensor &t = result(i);
      args.outputs.push_back({t.bytes.data(), t.dtype, t.shape});
    }
    args.attributes = &instruction_.attributes();
    return args;
  }

  /// Runs the kernel; where allocations are counted, a successful run must
  /// not have made any.
  Status run() {
    cpu::KernelFn fn = cpu::findKernel(kernel_);
    if (!fn)
      return Status(StatusCode::kNotFound, "no kernel " + kernel_);
    cpu::KernelArgs args = hostArgs();
#ifdef ZCC_COUNT_ALLOCATIONS
    long allocations = 0;
    Status status;
    {
      AllocationCounter counter;
      status = fn(args);
      allocations = counter.count();
    }
    if (status.isOk()) {
      EXPECT_EQ(allocations, 0) << kernel_ << " allocated on its success path";
    }
    return status;
#else
    return fn(args);
#endif
  }

  size_t outputCount() const { return aliases_.size(); }
  Tensor &result(size_t i = 0) {
    int alias = aliases_.at(i);
    return alias < 0 ? outputs_.at(i) : inputs_.at(alias);
  }
  /// Result `i` of a float kernel: as f32 values, or widened to double.
  std::vector<float> floats(size_t i = 0) { return result(i).values<float>(); }
  std::vector<double> values(size_t i = 0) { return decode(result(i)); }
  Tensor &input(size_t i) { return inputs_.at(i); }

private:
  plan::Attribute &attr(const std::string &name) {
    return (*instruction_.mutable_attributes())[name];
  }

  std::string kernel_;
  std::vector<Tensor> inputs_, outputs_;
  std::vector<int> aliases_;
  plan::Instruction instruction_;
};

/// Checks the code and that the message names everything in `needles`.
inline void expectError(const Status &status, StatusCode code,
                        std::initializer_list<const char *> needles) {
  ASSERT_FALSE(status.isOk())
      << "expected an error containing " << *needles.begin();
  EXPECT_EQ(status.code(), code) << status.toString();
  for (const char *needle : needles)
    EXPECT_NE(status.message().find(needle), std::string::npos)
        << "'" << needle << "' not in: " << status.message();
}

/// Element-wise closeness with a mixed absolute/relative tolerance; NaN
/// must meet NaN and infinity the same infinity.
inline void expectNear(const std::vector<double> &actual,
                       const std::vector<double> &expected,
                       double tolerance = 1e-6, const std::string &what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    double a = actual[i], e = expected[i];
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(a))
          << what << " at " << i << ": " << a << " vs NaN";
      continue;
    }
    if (std::isinf(e)) {
      EXPECT_EQ(a, e) << what << " at " << i;
      continue;
    }
    EXPECT_NEAR(a, e, tolerance * std::max(1.0, std::fabs(e)))
        << what << " at " << i;
  }
}

/// The same for values of other element types, widened to double.
template <typename A, typename B>
void expectNear(const std::vector<A> &actual, const std::vector<B> &expected,
                double tolerance = 1e-6) {
  expectNear(std::vector<double>(actual.begin(), actual.end()),
             std::vector<double>(expected.begin(), expected.end()), tolerance);
}

/// softmax(q k^T * scale + mask) v, materialised naively in double, for
/// `heads` [tq, d] queries against [tk, d] keys and [tk, dv] values.
template <typename T>
std::vector<double>
naiveAttention(const std::vector<T> &q, const std::vector<T> &k,
               const std::vector<T> &v, int64_t heads, int64_t tq, int64_t tk,
               int64_t d, int64_t dv, double scale, bool causal) {
  std::vector<double> out;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < tq; ++i) {
      std::vector<double> scores(tk);
      double maxScore = -INFINITY;
      for (int64_t j = 0; j < tk; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += static_cast<double>(q[(h * tq + i) * d + c]) *
                 k[(h * tk + j) * d + c];
        bool masked = causal && j > i + tk - tq;
        scores[j] = masked ? -INFINITY : dot * scale;
        maxScore = std::max(maxScore, scores[j]);
      }
      double sum = 0;
      for (double &s : scores)
        sum += (s = std::exp(s - maxScore));
      for (int64_t c = 0; c < dv; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < tk; ++j)
          acc += scores[j] / sum * v[(h * tk + j) * dv + c];
        out.push_back(acc);
      }
    }
  return out;
}

/// The sizes of a qkv_attention: a packed [B, T, 3, H, d] projection.
struct QkvShape {
  int64_t batch, length, heads, size;
};

/// Part `part` (0 query, 1 key, 2 value) of a packed [B, T, 3, H, d]
/// projection as [B, H, T, d] heads, or (`part` < 0) a [B, T, H, d] tensor
/// as [B, H, T, d].
inline std::vector<double> headsOf(const std::vector<double> &packed,
                                   const QkvShape &s, int part) {
  int64_t parts = part < 0 ? 1 : 3, at = part < 0 ? 0 : part;
  std::vector<double> heads;
  heads.reserve(static_cast<size_t>(s.batch * s.heads * s.length * s.size));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t t = 0; t < s.length; ++t)
        for (int64_t c = 0; c < s.size; ++c)
          heads.push_back(
              packed[static_cast<size_t>(
                  (((b * s.length + t) * parts + at) * s.heads + h) * s.size + c)]);
  return heads;
}

/// The inverse of headsOf: [B, H, T, d] heads into `part` of `packed` (or
/// into all of a [B, T, H, d] tensor).
inline void packHeads(std::vector<double> &packed, const std::vector<double> &heads,
                      const QkvShape &s, int part) {
  int64_t parts = part < 0 ? 1 : 3, at = part < 0 ? 0 : part;
  size_t next = 0;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t t = 0; t < s.length; ++t)
        for (int64_t c = 0; c < s.size; ++c)
          packed[static_cast<size_t>(
              (((b * s.length + t) * parts + at) * s.heads + h) * s.size + c)] =
              heads[next++];
}

/// qkv_attention (or, with `gradient`, qkv_attention_grad of a random
/// result gradient) over a random packed projection; the forward also
/// returns its lse.
inline Call qkvAttentionCall(const QkvShape &s, plan::DType dtype, bool causal,
                             bool gradient, uint32_t seed) {
  std::vector<int64_t> packed = {s.batch, s.length, 3, s.heads, s.size},
                       rows = {s.batch, s.length, s.heads, s.size};
  Call call(gradient ? "qkv_attention_grad" : "qkv_attention");
  call.in(encode(dtype, packed, randomValues(countOf(packed), seed)));
  if (gradient)
    call.in(encode(dtype, rows, randomValues(countOf(rows), seed + 1))).out(dtype, packed);
  else
    call.out(dtype, rows).out(plan::F32, {s.batch, s.heads, s.length});
  call.floatAttr("scale", 1.0 / std::sqrt(static_cast<double>(s.size)));
  if (causal)
    call.unitAttr("causal");
  return call;
}

} // namespace zcc::test

#endif // ZCC_TEST_RUNTIME_KERNELTESTUTIL_H
