//===- Normalize.cpp - softmax, log_softmax and layer_norm ----------------===//
//
// Sums run in double and every statistic is computed in two passes (the
// maximum before the exponentials, the mean before the variance), so the
// reference stays accurate for long rows and large offsets. The kernels are
// templates over the storage type T of their operands (f32, f64, f16, bf16)
// and compute in Compute<T>, rounding once on store.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/RowStats.h"

#include <cmath>

namespace zcc::cpu::kernels {

using namespace detail;

namespace {

template <typename T>
void softmaxLoop(const T *x, T *y, int64_t outer, int64_t length, int64_t inner,
                 bool logForm) {
  using C = Compute<T>;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      int64_t base = o * length * inner + j;
      C maxValue = load(x[base]);
      for (int64_t i = 1; i < length; ++i)
        maxValue = std::fmax(maxValue, load(x[base + i * inner]));
      double sum = 0;
      for (int64_t i = 0; i < length; ++i)
        sum +=
            std::exp(static_cast<double>(load(x[base + i * inner])) - maxValue);
      double logSum = std::log(sum);
      for (int64_t i = 0; i < length; ++i) {
        double shifted =
            static_cast<double>(load(x[base + i * inner])) - maxValue;
        y[base + i * inner] = store<T>(static_cast<C>(
            logForm ? shifted - logSum : std::exp(shifted) / sum));
      }
    }
  }
}

Status softmaxImpl(const KernelArgs &args, const char *kernel, bool logForm) {
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "input", in); !s.isOk())
    return s;
  if (Status s = expectDType(kernel, "result", out, in.dtype); !s.isOk())
    return s;
  SmallShape shape(in.shape);
  if (Status s = expectShape(kernel, "result", out, shape); !s.isOk())
    return s;
  AxisLayout layout;
  if (Status s = readAxisLayout(args, kernel, shape, layout); !s.isOk())
    return s;
  return dispatchFloat(kernel, "input", in, [&](auto tag) {
    using T = decltype(tag);
    softmaxLoop(in.as<const T>(), out.as<T>(), layout.outer, layout.length,
                layout.inner, logForm);
  });
}

template <typename T>
void layerNormLoop(const T *x, const T *gamma, const T *beta, T *y,
                   int64_t rows, int64_t columns, double epsilon) {
  using C = Compute<T>;
  for (int64_t r = 0; r < rows; ++r) {
    const T *row = x + r * columns;
    RowStats stats = rowStats(row, columns, epsilon);
    for (int64_t c = 0; c < columns; ++c)
      y[r * columns + c] = store<T>(static_cast<C>(
          (load(row[c]) - stats.mean) * stats.inverseStd * load(gamma[c]) +
          load(beta[c])));
  }
}

} // namespace

Status softmax(const KernelArgs &args) {
  return softmaxImpl(args, "softmax", /*logForm=*/false);
}

Status logSoftmax(const KernelArgs &args) {
  return softmaxImpl(args, "log_softmax", /*logForm=*/true);
}

Status layerNorm(const KernelArgs &args) {
  const char *kernel = "layer_norm";
  if (Status s =
          checkOperands(args, kernel, {"input", "scale", "bias"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &scale = args.inputs[1],
                   &bias = args.inputs[2], &out = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "input", in); !s.isOk())
    return s;
  for (auto [name, view] :
       {std::pair<const char *, const TensorView *>{"scale", &scale},
        {"bias", &bias},
        {"result", &out}})
    if (Status s = expectDType(kernel, name, *view, in.dtype); !s.isOk())
      return s;
  SmallShape shape(in.shape);
  if (Status s = expectShape(kernel, "result", out, shape); !s.isOk())
    return s;
  // scale and bias have the normalised (trailing) shape.
  double epsilon = 0;
  SmallShape normalized;
  if (Status s =
          readLayerNormAttributes(args, kernel, shape, epsilon, normalized);
      !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "scale", scale, normalized); !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "bias", bias, normalized); !s.isOk())
    return s;

  int64_t columns = normalized.numElements();
  if (columns == 0)
    return Status::ok();
  int64_t rows = shape.numElements() / columns;
  return dispatchFloat(kernel, "input", in, [&](auto tag) {
    using T = decltype(tag);
    layerNormLoop(in.as<const T>(), scale.as<const T>(), bias.as<const T>(),
                  out.as<T>(), rows, columns, epsilon);
  });
}

} // namespace zcc::cpu::kernels
