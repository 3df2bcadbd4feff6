//===- Loss.cpp - mse_loss, cross_entropy and nll_loss --------------------===//
//
// Losses accumulate in double and visit elements in memory order, so a loss
// value is a deterministic function of its inputs. Scores and losses share
// one float element type (f32, f64, f16, bf16); f16 and bf16 are read as f32
// and each loss is rounded once.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/Kernels.h"

#include <cmath>

namespace zcc::cpu::kernels {

using namespace detail;

namespace {

/// The loss of every label position: [N, C, inner] scores against [N,
/// inner] labels, reduced as asked. `logSoftmax` says whether the scores are
/// logits (cross_entropy) or already log-probabilities (nll_loss).
template <typename T, typename Label>
void classLossLoop(const T *input, const Label *labels, int64_t batch,
                   int64_t classes, int64_t inner, bool logSoftmax,
                   bool hasIgnore, int64_t ignoreIndex, Reduction reduction,
                   T *loss) {
  using C = Compute<T>;
  double total = 0;
  int64_t counted = 0;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t s = 0; s < inner; ++s) {
      int64_t position = n * inner + s;
      int64_t label = labels[position];
      double value = 0;
      if (!(hasIgnore && label == ignoreIndex)) {
        // Class c of this position sits at row[c * inner].
        const T *row = input + n * classes * inner + s;
        value = -static_cast<double>(load(row[label * inner]));
        if (logSoftmax) {
          C maxValue = load(row[0]);
          for (int64_t c = 1; c < classes; ++c)
            maxValue = std::fmax(maxValue, load(row[c * inner]));
          double sum = 0;
          for (int64_t c = 0; c < classes; ++c)
            sum +=
                std::exp(static_cast<double>(load(row[c * inner])) - maxValue);
          value += maxValue + std::log(sum);
        }
        total += value;
        ++counted;
      }
      if (reduction == Reduction::None)
        loss[position] = store<T>(static_cast<C>(value));
    }
  }
  // The mean is over the labels that count, as in torch: all ignored gives
  // 0 / 0, NaN.
  if (reduction == Reduction::Sum)
    loss[0] = store<T>(static_cast<C>(total));
  else if (reduction == Reduction::Mean)
    loss[0] = store<T>(static_cast<C>(total / static_cast<double>(counted)));
}

Status classLoss(const KernelArgs &args, const char *kernel, bool logSoftmax) {
  if (Status s = checkOperands(args, kernel, {"input", "labels"}, {"loss"});
      !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &labels = args.inputs[1],
                   &out = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "input", in); !s.isOk())
    return s;
  if (labels.dtype != plan::I64 && labels.dtype != plan::I32)
    return unsupportedDType(kernel, "labels", labels, "i64 and i32");
  if (Status s = expectDType(kernel, "loss", out, in.dtype); !s.isOk())
    return s;
  SmallShape labelShape;
  if (Status s = checkClassLossShapes(kernel, in, labels, labelShape);
      !s.isOk())
    return s;
  Reduction reduction;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
  if (Status s = readClassLossAttributes(args, kernel, reduction, hasIgnore,
                                         ignoreIndex);
      !s.isOk())
    return s;
  if (Status s =
          expectShape(kernel, "loss", out,
                      reduction == Reduction::None ? labelShape : SmallShape());
      !s.isOk())
    return s;

  int64_t batch = in.shape[0], classes = in.shape[1];
  int64_t inner = labelShape.numElements() / (batch == 0 ? 1 : batch);
  // All labels are checked before anything is written.
  if (Status s = checkLabels(kernel, labels, classes, hasIgnore, ignoreIndex);
      !s.isOk())
    return s;
  return dispatchFloat(kernel, "input", in, [&](auto tag) {
    using T = decltype(tag);
    if (labels.dtype == plan::I64)
      classLossLoop(in.as<const T>(), labels.as<const int64_t>(), batch,
                    classes, inner, logSoftmax, hasIgnore, ignoreIndex,
                    reduction, out.as<T>());
    else
      classLossLoop(in.as<const T>(), labels.as<const int32_t>(), batch,
                    classes, inner, logSoftmax, hasIgnore, ignoreIndex,
                    reduction, out.as<T>());
  });
}

} // namespace

Status mseLoss(const KernelArgs &args) {
  const char *kernel = "mse_loss";
  if (Status s =
          checkOperands(args, kernel, {"prediction", "target"}, {"loss"});
      !s.isOk())
    return s;
  const TensorView &prediction = args.inputs[0], &target = args.inputs[1],
                   &out = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "prediction", prediction); !s.isOk())
    return s;
  if (Status s = expectDType(kernel, "target", target, prediction.dtype);
      !s.isOk())
    return s;
  if (Status s = expectDType(kernel, "loss", out, prediction.dtype); !s.isOk())
    return s;
  if (Status s =
          expectSameShape(kernel, "target", target, "prediction", prediction);
      !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "loss", out, SmallShape()); !s.isOk())
    return s;
  return dispatchFloat(kernel, "prediction", prediction, [&](auto tag) {
    using T = decltype(tag);
    const T *p = prediction.as<const T>();
    const T *t = target.as<const T>();
    int64_t n = prediction.numElements();
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      double difference = static_cast<double>(load(p[i])) - load(t[i]);
      sum += difference * difference;
    }
    out.as<T>()[0] =
        store<T>(static_cast<Compute<T>>(sum / static_cast<double>(n)));
  });
}

Status crossEntropy(const KernelArgs &args) {
  return classLoss(args, "cross_entropy", /*logSoftmax=*/true);
}

Status nllLoss(const KernelArgs &args) {
  return classLoss(args, "nll_loss", /*logSoftmax=*/false);
}

} // namespace zcc::cpu::kernels
