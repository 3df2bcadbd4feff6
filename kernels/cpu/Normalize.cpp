//===- Normalize.cpp - softmax, log_softmax and layer_norm ----------------===//
//
// Sums run in double and every statistic is computed in two passes (the
// maximum before the exponentials, the mean before the variance), so the
// reference stays accurate for long rows and large offsets.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/KernelSupport.h"
#include "kernels/cpu/Kernels.h"

#include <cmath>

namespace zcc::cpu::kernels {

using namespace detail;

namespace {

Status softmaxImpl(const KernelArgs &args, const char *kernel, bool logForm) {
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.dtype != plan::F32)
    return unsupportedDType(kernel, "input", in, "f32");
  if (Status s = expectDType(kernel, "result", out, plan::F32); !s.isOk())
    return s;
  SmallShape shape(in.shape);
  if (Status s = expectShape(kernel, "result", out, shape); !s.isOk())
    return s;
  int64_t axis = 0;
  if (Status s = requiredInt(args, kernel, "axis", axis); !s.isOk())
    return s;
  if (Status s = normalizeAxis(kernel, "axis", axis, shape.rank(), axis);
      !s.isOk())
    return s;

  int64_t length = shape[static_cast<int>(axis)];
  int64_t inner = 1;
  for (int d = static_cast<int>(axis) + 1; d < shape.rank(); ++d)
    inner *= shape[d];
  int64_t outer =
      length * inner == 0 ? 0 : shape.numElements() / (length * inner);
  const float *x = in.as<const float>();
  float *y = out.as<float>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      int64_t base = o * length * inner + j;
      float maxValue = x[base];
      for (int64_t i = 1; i < length; ++i)
        maxValue = std::fmax(maxValue, x[base + i * inner]);
      double sum = 0;
      for (int64_t i = 0; i < length; ++i)
        sum += std::exp(static_cast<double>(x[base + i * inner]) - maxValue);
      double logSum = std::log(sum);
      for (int64_t i = 0; i < length; ++i) {
        double shifted = static_cast<double>(x[base + i * inner]) - maxValue;
        y[base + i * inner] = static_cast<float>(
            logForm ? shifted - logSum : std::exp(shifted) / sum);
      }
    }
  }
  return Status::ok();
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
  if (in.dtype != plan::F32)
    return unsupportedDType(kernel, "input", in, "f32");
  for (auto [name, view] :
       {std::pair<const char *, const TensorView *>{"scale", &scale},
        {"bias", &bias},
        {"result", &out}})
    if (Status s = expectDType(kernel, name, *view, plan::F32); !s.isOk())
      return s;
  SmallShape shape(in.shape);
  if (Status s = expectShape(kernel, "result", out, shape); !s.isOk())
    return s;
  int64_t axis = 0;
  if (Status s = requiredInt(args, kernel, "axis", axis); !s.isOk())
    return s;
  if (Status s = normalizeAxis(kernel, "axis", axis, shape.rank(), axis);
      !s.isOk())
    return s;
  double epsilon = 0;
  if (Status s = requiredFloat(args, kernel, "epsilon", epsilon); !s.isOk())
    return s;
  if (!(epsilon > 0))
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "epsilon must be positive, got %g", epsilon);
  // scale and bias have the normalised (trailing) shape.
  SmallShape normalized;
  for (int d = static_cast<int>(axis); d < shape.rank(); ++d)
    normalized.push_back(shape[d]);
  if (Status s = expectShape(kernel, "scale", scale, normalized); !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "bias", bias, normalized); !s.isOk())
    return s;

  int64_t columns = normalized.numElements();
  if (columns == 0)
    return Status::ok();
  int64_t rows = shape.numElements() / columns;
  const float *x = in.as<const float>();
  const float *gamma = scale.as<const float>();
  const float *beta = bias.as<const float>();
  float *y = out.as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x + r * columns;
    double sum = 0;
    for (int64_t c = 0; c < columns; ++c)
      sum += row[c];
    double mean = sum / columns;
    double squares = 0;
    for (int64_t c = 0; c < columns; ++c) {
      double centered = row[c] - mean;
      squares += centered * centered;
    }
    double inverseStd = 1.0 / std::sqrt(squares / columns + epsilon);
    for (int64_t c = 0; c < columns; ++c)
      y[r * columns + c] =
          static_cast<float>((row[c] - mean) * inverseStd * gamma[c] + beta[c]);
  }
  return Status::ok();
}

} // namespace zcc::cpu::kernels
