//===- Optimizer.cpp - Gradient accumulation and optimizer updates --------===//
//
// The kernels that update training state in place: accumulate (gradient
// accumulation), fill (zeroing), sum_squares (the global gradient norm) and
// the adamw and sgd steps. The optimizer steps reproduce torch.optim's
// single-tensor ("for-loop") implementations operation by operation in the
// parameter's type: a hyperparameter combination computed in Python floats
// is computed here in double and rounded once to T, as torch rounds a
// Python scalar operand to the tensor's type, so an f32 run follows
// torch's f32 one as closely as the order of its operations allows.
//
// The step's scalars come from an f64[8] buffer the executor writes each step
// (plan.proto, Training.optimizer_scalars): lr, beta1, beta2, eps,
// weight_decay, step (1-based), grad_scale, momentum.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

namespace zcc::cpu::kernels {

/// Elements of an adamw step done before their 16-bit copy is cast (a
/// block of param, gradient and moments: 64 KiB each in f32, in L2).
constexpr int64_t kAdamCopyBlock = 16384;
/// Elements of a 16-bit gradient an adamw step widens to f32 at a time (on
/// the stack, 16 KiB).
constexpr int64_t kAdamWidenBlock = 4096;

using namespace detail;

namespace {

struct OptimizerScalars {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0, step = 0,
         gradScale = 0, momentum = 0;
};

constexpr int64_t kScalarCount = 8;

Status readScalars(const char *kernel, const TensorView &view,
                   OptimizerScalars &scalars) {
  if (Status s = expectDType(kernel, "scalars", view, plan::F64); !s.isOk())
    return s;
  SmallShape shape;
  shape.push_back(kScalarCount);
  if (Status s = expectShape(kernel, "scalars", view, shape); !s.isOk())
    return s;
  const double *values = view.as<const double>();
  scalars.lr = values[0];
  scalars.beta1 = values[1];
  scalars.beta2 = values[2];
  scalars.eps = values[3];
  scalars.weightDecay = values[4];
  scalars.step = values[5];
  scalars.gradScale = values[6];
  scalars.momentum = values[7];
  // Step 0 would divide by a zero bias correction (adamw) and skip sgd's
  // first-step buffer copy: a plan that forgot to count its steps.
  if (!(scalars.step >= 1))
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "step (scalars[5]) must be at least 1, got %g",
                       scalars.step);
  return Status::ok();
}


/// torch.lerp(self, end, weight): the form is chosen by the weight's size
/// for accuracy (aten/src/ATen/native/Lerp.h); `smallWeight` is that choice,
/// made once per tensor so the loops below have no branch and vectorise.
template <bool smallWeight, typename T> T lerp(T self, T end, T weight) {
  if constexpr (smallWeight)
    return self + weight * (end - self);
  else
    return end - (end - self) * (T(1) - weight);
}

/// The hyperparameters of one Adam step, as torch computes them: Python
/// floats (double) rounded once to T.
template <typename T> struct AdamConstants {
  T gradScale, decay, l2, avgWeight, beta2, squareWeight, correction2Sqrt, eps,
      negativeStepSize;
  bool weightDecay;
};

/// The element loop of torch.optim.Adam(W)'s _single_tensor_adam; every
/// choice that is the same for all elements is a template parameter, so the
/// loop is straight-line code the compiler vectorises.
template <typename T, bool smallWeight, bool weightDecay, bool decoupled>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// One copy per vector width, picked at load time by the CPU it runs on; the
// operations are IEEE ones (no contraction), so every copy gives the same
// bits.
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void adamwElements(const T *param, const T *grad, const T *expAvg, const T *expAvgSq,
                   T *paramOut, T *expAvgOut, T *expAvgSqOut, int64_t n,
                   const AdamConstants<T> &c) {
  // Element i reads and writes only element i of each array, and an output
  // is either its input (in place) or a buffer of its own: no iteration
  // depends on another, whatever the pointers alias.
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i) {
    T p = param[i];
    T g = grad[i] * c.gradScale;
    if constexpr (weightDecay) {
      if constexpr (decoupled)
        p = p * c.decay; // param.mul_(1 - lr * weight_decay)
      else
        g = g + c.l2 * p; // grad.add(param, alpha=weight_decay)
    }
    // exp_avg.lerp_(grad, 1 - beta1)
    T m = lerp<smallWeight>(expAvg[i], g, c.avgWeight);
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    T v = expAvgSq[i] * c.beta2;
    v = v + c.squareWeight * g * g;
    // (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    T denom = std::sqrt(v) / c.correction2Sqrt + c.eps;
    // param.addcdiv_(exp_avg, denom, value=-step_size)
    p = p + c.negativeStepSize * m / denom;
    paramOut[i] = p;
    expAvgOut[i] = m;
    expAvgSqOut[i] = v;
  }
}

/// torch.optim.Adam(W)'s _single_tensor_adam without amsgrad, maximize or
/// capturable, with the gradient first multiplied by grad_scale.
/// `in` points to (param, grad, exp_avg, exp_avg_sq), `out` to (new_param,
/// new_exp_avg, new_exp_avg_sq); `copy`, when not null, is the parameter's
/// 16-bit copy to refresh.
template <typename T>
void adamwLoop(const TensorView *in, const TensorView *out,
               const TensorView *copy, const OptimizerScalars &scalars,
               bool decoupled, bool biasCorrection) {
  // Python-float arithmetic of the torch step, in double (FusedAdam's
  // bias_correction false: both corrections 1) ...
  double biasCorrection1 = biasCorrection ? 1 - std::pow(scalars.beta1, scalars.step) : 1.0;
  double biasCorrection2 = biasCorrection ? 1 - std::pow(scalars.beta2, scalars.step) : 1.0;
  double stepSize = scalars.lr / biasCorrection1;
  // ... and its scalar operands, rounded to T.
  AdamConstants<T> c;
  c.weightDecay = scalars.weightDecay != 0;
  c.gradScale = static_cast<T>(scalars.gradScale);
  c.decay = static_cast<T>(1 - scalars.lr * scalars.weightDecay);
  c.l2 = static_cast<T>(scalars.weightDecay);
  c.avgWeight = static_cast<T>(1 - scalars.beta1);
  c.beta2 = static_cast<T>(scalars.beta2);
  c.squareWeight = static_cast<T>(1 - scalars.beta2);
  c.correction2Sqrt = static_cast<T>(std::pow(biasCorrection2, 0.5));
  c.eps = static_cast<T>(scalars.eps);
  c.negativeStepSize = static_cast<T>(-stepSize);

  // With a fourth result (the parameter's 16-bit copy), each
  // block of the updated parameter is cast while it is still in cache. A
  // 16-bit gradient is widened a block at a time into `widened` (exactly:
  // every f16 and bf16 value is an f32), which the step then reads.
  const int64_t n = in[0].numElements();
  const bool widen = in[1].dtype != in[0].dtype;
  const int64_t block = widen  ? kAdamWidenBlock
                        : copy ? kAdamCopyBlock
                               : std::max<int64_t>(n, 1);
  alignas(64) T widened[kAdamWidenBlock];
  auto run = [&](auto smallWeight, auto weightDecay, auto isDecoupled) {
    for (int64_t begin = 0; begin < n; begin += block) {
      int64_t count = std::min(block, n - begin);
      const T *grad = widened;
      if (widen)
        castElements(static_cast<const uint8_t *>(in[1].data) +
                         begin * dtypeBytes(in[1].dtype),
                     in[1].dtype, widened, in[0].dtype, count);
      else
        grad = in[1].as<const T>() + begin;
      adamwElements<T, decltype(smallWeight)::value, decltype(weightDecay)::value,
                    decltype(isDecoupled)::value>(
          in[0].as<const T>() + begin, grad,
          in[2].as<const T>() + begin, in[3].as<const T>() + begin,
          out[0].as<T>() + begin, out[1].as<T>() + begin,
          out[2].as<T>() + begin, count, c);
      if (copy)
        castElements(out[0].as<T>() + begin, out[0].dtype,
                     static_cast<uint8_t *>(copy->data) + begin * dtypeBytes(copy->dtype),
                     copy->dtype, count);
    }
  };
  using Yes = std::true_type;
  using No = std::false_type;
  bool small = std::abs(c.avgWeight) < T(0.5);
  auto withDecay = [&](auto smallWeight) {
    if (!c.weightDecay)
      run(smallWeight, No(), No());
    else if (decoupled)
      run(smallWeight, Yes(), Yes());
    else
      run(smallWeight, Yes(), No());
  };
  if (small)
    withDecay(Yes());
  else
    withDecay(No());
}

/// torch.optim.SGD's _single_tensor_sgd without maximize, with the gradient
/// first multiplied by grad_scale. The first step (step == 1) starts the
/// momentum buffer from the gradient, as torch does when it has none yet.
template <typename T>
void sgdLoop(const KernelArgs &args, const OptimizerScalars &scalars,
             double dampening, bool nesterov) {
  const T *param = args.inputs[0].as<const T>();
  const T *grad = args.inputs[1].as<const T>();
  const T *buffer = args.inputs[2].as<const T>();
  T *paramOut = args.outputs[0].as<T>();
  T *bufferOut = args.outputs[1].as<T>();

  bool weightDecay = scalars.weightDecay != 0;
  bool useMomentum = scalars.momentum != 0;
  bool firstStep = scalars.step == 1;
  const T gradScale = static_cast<T>(scalars.gradScale);
  const T l2 = static_cast<T>(scalars.weightDecay);
  const T momentum = static_cast<T>(scalars.momentum);
  const T undamped = static_cast<T>(1 - dampening);
  const T negativeLr = static_cast<T>(-scalars.lr);

  int64_t n = args.inputs[0].numElements();
  for (int64_t i = 0; i < n; ++i) {
    T p = param[i];
    T g = grad[i] * gradScale;
    if (weightDecay)
      g = g + l2 * p; // grad.add(param, alpha=weight_decay)
    T b = buffer[i];
    if (useMomentum) {
      // buf = clone(grad), or buf.mul_(momentum).add_(grad, alpha=1-dampening)
      b = firstStep ? g : b * momentum + undamped * g;
      // grad.add(buf, alpha=momentum), or buf
      g = nesterov ? g + momentum * b : b;
    }
    p = p + negativeLr * g; // param.add_(grad, alpha=-lr)
    paramOut[i] = p;
    bufferOut[i] = b;
  }
}

/// One torch.optim.Adagrad step (foreach=False), operation by operation in
/// T: g = grad * grad_scale (+ weight_decay * p); sum += g * g;
/// p += -clr * (g / (sqrt(sum) + eps)), clr = lr / (1 + (step - 1) lr_decay).
template <typename T>
void adagradLoop(const KernelArgs &args, const OptimizerScalars &scalars, double lrDecay) {
  const T *param = args.inputs[0].as<const T>();
  const T *grad = args.inputs[1].as<const T>();
  const T *sum = args.inputs[2].as<const T>();
  T *paramOut = args.outputs[0].as<T>();
  T *sumOut = args.outputs[1].as<T>();
  const bool weightDecay = scalars.weightDecay != 0;
  const T gradScale = static_cast<T>(scalars.gradScale);
  const T l2 = static_cast<T>(scalars.weightDecay);
  const T eps = static_cast<T>(scalars.eps);
  const T negativeLr =
      static_cast<T>(-(scalars.lr / (1 + (scalars.step - 1) * lrDecay)));
  for (int64_t i = 0, n = args.inputs[0].numElements(); i < n; ++i) {
    T p = param[i];
    T g = grad[i] * gradScale;
    if (weightDecay)
      g = g + l2 * p;
    T s = sum[i] + g * g;
    paramOut[i] = p + negativeLr * (g / (std::sqrt(s) + eps));
    sumOut[i] = s;
  }
}

/// One Lion step (DeepSpeed's FusedLion; torch-style operations rounded
/// one by one in T): p *= 1 - lr wd; c = beta1 m + (1 - beta1) g;
/// p += -lr sign(c); m = beta2 m + (1 - beta2) g, with g the gradient times
/// grad_scale.
template <typename T>
void lionLoop(const KernelArgs &args, const OptimizerScalars &scalars) {
  const T *param = args.inputs[0].as<const T>();
  const T *grad = args.inputs[1].as<const T>();
  const T *avg = args.inputs[2].as<const T>();
  T *paramOut = args.outputs[0].as<T>();
  T *avgOut = args.outputs[1].as<T>();
  const T gradScale = static_cast<T>(scalars.gradScale);
  const T decay = static_cast<T>(1 - scalars.lr * scalars.weightDecay);
  const T beta1 = static_cast<T>(scalars.beta1), beta2 = static_cast<T>(scalars.beta2);
  const T rest1 = static_cast<T>(1 - scalars.beta1), rest2 = static_cast<T>(1 - scalars.beta2);
  const T negativeLr = static_cast<T>(-scalars.lr);
  for (int64_t i = 0, n = args.inputs[0].numElements(); i < n; ++i) {
    T g = grad[i] * gradScale;
    T m = avg[i];
    T c = m * beta1 + rest1 * g;
    T sign = c > T(0) ? T(1) : c < T(0) ? T(-1) : T(0);
    paramOut[i] = param[i] * decay + negativeLr * sign;
    avgOut[i] = m * beta2 + rest2 * g;
  }
}

/// The trust ratio ||p|| / ||u|| clamped to [minCoeff, maxCoeff], or 1 when
/// either norm is 0 (FusedLamb's lamb_coeff), from the squared norms.
double lambRatio(double paramSquares, double updateSquares, const LambOptions &options) {
  double paramNorm = std::sqrt(paramSquares), updateNorm = std::sqrt(updateSquares);
  if (paramNorm == 0 || updateNorm == 0)
    return 1.0;
  return std::clamp(paramNorm / updateNorm, options.minCoeff, options.maxCoeff);
}

/// Lamb's scalars rounded to T, and its update u = m / (sqrt(v) + eps) +
/// weight_decay p (sqrt(v + eps) with eps_inside_sqrt), operation by
/// operation in T as DeepSpeed's FusedLamb computes it.
template <typename T> struct LambConstants {
  LambConstants(const OptimizerScalars &scalars, bool epsInsideSqrt)
      : gradScale(static_cast<T>(scalars.gradScale)), beta1(static_cast<T>(scalars.beta1)),
        beta2(static_cast<T>(scalars.beta2)), rest1(static_cast<T>(1 - scalars.beta1)),
        rest2(static_cast<T>(1 - scalars.beta2)), eps(static_cast<T>(scalars.eps)),
        decay(static_cast<T>(scalars.weightDecay)), epsInsideSqrt(epsInsideSqrt) {}
  T update(T p, T m, T v) const {
    T denom = epsInsideSqrt ? std::sqrt(v + eps) : std::sqrt(v) + eps;
    return m / denom + decay * p;
  }
  T gradScale, beta1, beta2, rest1, rest2, eps, decay;
  bool epsInsideSqrt;
};

/// Lamb's first half: g = grad * grad_scale; m = beta1 m + (1 - beta1) g;
/// v = beta2 v + (1 - beta2) g g; squares = [sum p^2, sum u^2] in double.
template <typename T>
void lambMomentsLoop(const KernelArgs &args, const OptimizerScalars &scalars,
                     bool epsInsideSqrt) {
  const T *param = args.inputs[0].as<const T>();
  const T *grad = args.inputs[1].as<const T>();
  const T *avg = args.inputs[2].as<const T>();
  const T *avgSq = args.inputs[3].as<const T>();
  T *avgOut = args.outputs[0].as<T>();
  T *avgSqOut = args.outputs[1].as<T>();
  const LambConstants<T> c(scalars, epsInsideSqrt);
  double paramSquares = 0, updateSquares = 0;
  for (int64_t i = 0, n = args.inputs[0].numElements(); i < n; ++i) {
    T g = grad[i] * c.gradScale;
    T m = avg[i] * c.beta1 + c.rest1 * g;
    T v = avgSq[i] * c.beta2 + c.rest2 * g * g;
    avgOut[i] = m;
    avgSqOut[i] = v;
    double p = static_cast<double>(param[i]);
    double u = static_cast<double>(c.update(param[i], m, v));
    paramSquares += p * p;
    updateSquares += u * u;
  }
  double *squares = args.outputs[2].as<double>();
  squares[0] = paramSquares;
  squares[1] = updateSquares;
}

/// Lamb's second half: p -= (step_size * ratio) u, the product of the two
/// rounded to T, with step_size = lr sqrt(1 - beta2^t) / (1 - beta1^t)
/// (lr without bias correction) and u recomputed from the new moments.
template <typename T>
void lambStepLoop(const KernelArgs &args, const OptimizerScalars &scalars,
                  const LambOptions &options) {
  const T *param = args.inputs[0].as<const T>();
  const T *avg = args.inputs[1].as<const T>();
  const T *avgSq = args.inputs[2].as<const T>();
  const double *squares = args.inputs[4].as<const double>();
  T *paramOut = args.outputs[0].as<T>();
  const LambConstants<T> c(scalars, options.epsInsideSqrt);
  double stepSize = scalars.lr;
  if (options.biasCorrection)
    stepSize *= std::sqrt(1 - std::pow(scalars.beta2, scalars.step)) /
                (1 - std::pow(scalars.beta1, scalars.step));
  const T factor = static_cast<T>(stepSize) *
                   static_cast<T>(lambRatio(squares[0], squares[1], options));
  for (int64_t i = 0, n = args.inputs[0].numElements(); i < n; ++i)
    paramOut[i] = param[i] - factor * c.update(param[i], avg[i], avgSq[i]);
}

/// target += value, each sum rounded once to the target's type.
template <typename T, typename V>
void accumulateLoop(const TensorView &target, const TensorView &value) {
  T *sum = target.as<T>();
  const V *addend = value.as<const V>();
  for (int64_t i = 0, n = target.numElements(); i < n; ++i)
    sum[i] = sum[i] + static_cast<T>(load(addend[i]));
}

} // namespace

Status accumulate(const KernelArgs &args) {
  const char *kernel = "accumulate";
  if (Status s = checkOperands(args, kernel, {"value"}, {"target"}); !s.isOk())
    return s;
  // `target` is read and written: it is the accumulator's own buffer.
  const TensorView &value = args.inputs[0], &target = args.outputs[0];
  if (target.dtype != plan::F32 && target.dtype != plan::F64)
    return unsupportedDType(kernel, "target", target, "f32 and f64");
  if (Status s = expectFloatDType(kernel, "value", value); !s.isOk())
    return s;
  if (Status s = expectSameShape(kernel, "value", value, "target", target);
      !s.isOk())
    return s;
  // Both dtypes are checked: the inner dispatch cannot fail.
  Status valueStatus;
  Status targetStatus =
      dispatchWideFloat(kernel, "target", target, [&](auto targetTag) {
        valueStatus = dispatchFloat(kernel, "value", value, [&](auto valueTag) {
          accumulateLoop<decltype(targetTag), decltype(valueTag)>(target,
                                                                  value);
        });
      });
  return targetStatus.isOk() ? valueStatus : targetStatus;
}

namespace {

template <typename T> void fillView(const TensorView &target, double value) {
  T element = storeDouble<T>(value);
  T *data = target.as<T>();
  for (int64_t i = 0, n = target.numElements(); i < n; ++i)
    data[i] = element;
}

} // namespace

/// One target, or several (the compiler's fusion of the gradients'
/// zeroing): every target is checked before any is written.
Status fill(const KernelArgs &args) {
  double value = 0;
  if (Status s = checkFillOperands(args, "fill", value); !s.isOk())
    return s;
  for (const TensorView &target : args.outputs)
    (void)dispatchFloat("fill", "target", target, [&](auto tag) {
      fillView<decltype(tag)>(target, value);
    });
  return Status::ok();
}

namespace {

/// Checks sum_squares-like operands: float inputs, and `result` of dtype f64
/// and shape `shape`.
Status checkSumSquares(const KernelArgs &args, const char *kernel, const SmallShape &shape) {
  if (Status s = checkVariadicOperands(args, kernel, 1, "inputs", "result");
      !s.isOk())
    return s;
  const TensorView &result = args.outputs[0];
  if (Status s = expectDType(kernel, "result", result, plan::F64); !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "result", result, shape); !s.isOk())
    return s;
  for (size_t t = 0; t < args.inputs.size(); ++t)
    if (!isFloatDType(args.inputs[t].dtype))
      return kernelError(StatusCode::kUnimplemented, kernel,
                         "input #%zu has element type %s; this kernel "
                         "handles %s",
                         t, dtypeName(args.inputs[t].dtype), kFloatDTypeNames);
  return Status::ok();
}

/// Calls `block(partial)` with the sum of squares of each block of
/// kSumSquaresBlock elements of `input`, in order: four running sums of
/// every fourth element, added pairwise at the end. Infinities and NaNs
/// propagate.
template <typename Fn>
Status forEachBlockSum(const char *kernel, const TensorView &input, Fn &&block) {
  return dispatchFloat(kernel, "inputs", input, [&](auto tag) {
    using T = decltype(tag);
    const T *data = input.as<const T>();
    int64_t n = input.numElements();
    for (int64_t begin = 0; begin < n; begin += kSumSquaresBlock) {
      int64_t end = std::min(n, begin + kSumSquaresBlock);
      double lane[4] = {0, 0, 0, 0};
      int64_t i = begin;
      for (; i + 4 <= end; i += 4)
        for (int j = 0; j < 4; ++j) {
          double x = load(data[i + j]);
          lane[j] += x * x;
        }
      for (int j = 0; i < end; ++i, ++j) {
        double x = load(data[i]);
        lane[j] += x * x;
      }
      block((lane[0] + lane[1]) + (lane[2] + lane[3]));
    }
  });
}

} // namespace

int64_t sumSquaresBlocks(int64_t elements) {
  return (elements + kSumSquaresBlock - 1) / kSumSquaresBlock;
}

Status sumSquares(const KernelArgs &args) {
  const char *kernel = "sum_squares";
  if (Status s = checkSumSquares(args, kernel, SmallShape()); !s.isOk())
    return s;
  // The blocks' sums in operand order, then block order: a fixed order
  // whatever runs it (sum_squares_blocks on a pool of threads adds the same
  // sums in the same order), so the norm (and the loss scaler's overflow
  // decision) is a function of the gradients.
  double sum = 0;
  for (const TensorView &input : args.inputs)
    if (Status s = forEachBlockSum(kernel, input, [&](double partial) { sum += partial; });
        !s.isOk())
      return s;
  args.outputs[0].as<double>()[0] = sum;
  return Status::ok();
}

Status sumSquaresBlocks(const KernelArgs &args) {
  const char *kernel = "sum_squares_blocks";
  int64_t blocks = 0;
  for (const TensorView &input : args.inputs)
    blocks += sumSquaresBlocks(input.numElements());
  if (Status s = checkSumSquares(args, kernel, SmallShape(std::vector<int64_t>{blocks})); !s.isOk())
    return s;
  double *partial = args.outputs[0].as<double>();
  for (const TensorView &input : args.inputs)
    if (Status s = forEachBlockSum(kernel, input, [&](double sum) { *partial++ = sum; });
        !s.isOk())
      return s;
  return Status::ok();
}

namespace {

/// A multi-tensor adamw (the compiler's fusion of a step's adamw
/// instructions): (param, grad, exp_avg, exp_avg_sq) for each tensor, then
/// the scalars they share; (new_param, new_exp_avg, new_exp_avg_sq) for
/// each, then its new_param_copy when every tensor has one. Every tensor is
/// checked before any is updated, then each is stepped exactly as its
/// single-tensor instruction would step it.
Status multiAdamw(const KernelArgs &args) {
  const char *kernel = "adamw";
  size_t members = 0;
  bool copies = false;
  if (Status s = checkMultiAdamwOperands(args, kernel, members, copies); !s.isOk())
    return s;
  const size_t stride = copies ? 4 : 3;
  OptimizerScalars scalars;
  if (Status s = readScalars(kernel, args.inputs.back(), scalars); !s.isOk())
    return s;
  bool decoupled = true, biasCorrection = true;
  if (Status s = optionalBool(args, kernel, "adam_w_mode", true, decoupled);
      !s.isOk())
    return s;
  if (Status s = optionalBool(args, kernel, "bias_correction", true, biasCorrection);
      !s.isOk())
    return s;
  for (size_t m = 0; m < members; ++m)
    (void)dispatchWideFloat(kernel, "param", args.inputs[4 * m], [&](auto tag) {
      adamwLoop<decltype(tag)>(&args.inputs[4 * m], &args.outputs[stride * m],
                               copies ? &args.outputs[stride * m + 3] : nullptr,
                               scalars, decoupled, biasCorrection);
    });
  return Status::ok();
}

} // namespace

Status adamw(const KernelArgs &args) {
  const char *kernel = "adamw";
  if (args.inputs.size() != 5)
    return multiAdamw(args);
  if (Status s = checkOptimizerOperands(
          args, kernel, {"param", "grad", "exp_avg", "exp_avg_sq", "scalars"},
          {"new_param", "new_exp_avg", "new_exp_avg_sq"}, /*scalarsIndex=*/4,
          /*optionalOutputs=*/1, /*halfGradient=*/true);
      !s.isOk())
    return s;
  // The optional fourth result: the updated parameter cast to 16 bits.
  const TensorView *copy = nullptr;
  if (args.outputs.size() == 4) {
    copy = &args.outputs[3];
    if (Status s = checkAdamwCopy(kernel, *copy, args.inputs[0]); !s.isOk())
      return s;
  }
  OptimizerScalars scalars;
  if (Status s = readScalars(kernel, args.inputs[4], scalars); !s.isOk())
    return s;
  bool decoupled = true, biasCorrection = true;
  if (Status s = optionalBool(args, kernel, "adam_w_mode", true, decoupled);
      !s.isOk())
    return s;
  if (Status s = optionalBool(args, kernel, "bias_correction", true, biasCorrection);
      !s.isOk())
    return s;
  return dispatchWideFloat(kernel, "param", args.inputs[0], [&](auto tag) {
    adamwLoop<decltype(tag)>(args.inputs.data(), args.outputs.data(), copy,
                             scalars, decoupled, biasCorrection);
  });
}

Status adagrad(const KernelArgs &args) {
  const char *kernel = "adagrad";
  if (Status s = checkOptimizerOperands(args, kernel, {"param", "grad", "sum", "scalars"},
                                        {"new_param", "new_sum"}, /*scalarsIndex=*/3);
      !s.isOk())
    return s;
  OptimizerScalars scalars;
  if (Status s = readScalars(kernel, args.inputs[3], scalars); !s.isOk())
    return s;
  double lrDecay = 0;
  if (findAttr(args, "lr_decay"))
    if (Status s = requiredFloat(args, kernel, "lr_decay", lrDecay); !s.isOk())
      return s;
  return dispatchWideFloat(kernel, "param", args.inputs[0], [&](auto tag) {
    adagradLoop<decltype(tag)>(args, scalars, lrDecay);
  });
}

Status lambMoments(const KernelArgs &args) {
  const char *kernel = "lamb_moments";
  ZCC_RETURN_IF_FAILED(checkLambMomentsOperands(args, kernel));
  OptimizerScalars scalars;
  ZCC_RETURN_IF_FAILED(readScalars(kernel, args.inputs[4], scalars));
  LambOptions options;
  ZCC_RETURN_IF_FAILED(readLambOptions(args, kernel, options));
  return dispatchWideFloat(kernel, "param", args.inputs[0], [&](auto tag) {
    lambMomentsLoop<decltype(tag)>(args, scalars, options.epsInsideSqrt);
  });
}

Status lambStep(const KernelArgs &args) {
  const char *kernel = "lamb_step";
  ZCC_RETURN_IF_FAILED(checkLambStepOperands(args, kernel));
  OptimizerScalars scalars;
  ZCC_RETURN_IF_FAILED(readScalars(kernel, args.inputs[3], scalars));
  LambOptions options;
  ZCC_RETURN_IF_FAILED(readLambOptions(args, kernel, options));
  return dispatchWideFloat(kernel, "param", args.inputs[0], [&](auto tag) {
    lambStepLoop<decltype(tag)>(args, scalars, options);
  });
}

Status lion(const KernelArgs &args) {
  const char *kernel = "lion";
  if (Status s = checkOptimizerOperands(args, kernel, {"param", "grad", "exp_avg", "scalars"},
                                        {"new_param", "new_exp_avg"}, /*scalarsIndex=*/3);
      !s.isOk())
    return s;
  OptimizerScalars scalars;
  if (Status s = readScalars(kernel, args.inputs[3], scalars); !s.isOk())
    return s;
  return dispatchWideFloat(kernel, "param", args.inputs[0],
                           [&](auto tag) { lionLoop<decltype(tag)>(args, scalars); });
}

Status sgd(const KernelArgs &args) {
  const char *kernel = "sgd";
  if (Status s = checkOptimizerOperands(
          args, kernel, {"param", "grad", "momentum_buffer", "scalars"},
          {"new_param", "new_momentum_buffer"}, /*scalarsIndex=*/3);
      !s.isOk())
    return s;
  OptimizerScalars scalars;
  if (Status s = readScalars(kernel, args.inputs[3], scalars); !s.isOk())
    return s;
  double dampening = 0;
  if (findAttr(args, "dampening"))
    if (Status s = requiredFloat(args, kernel, "dampening", dampening);
        !s.isOk())
      return s;
  bool nesterov = false;
  if (Status s = optionalBool(args, kernel, "nesterov", false, nesterov);
      !s.isOk())
    return s;
  return dispatchWideFloat(kernel, "param", args.inputs[0], [&](auto tag) {
    sgdLoop<decltype(tag)>(args, scalars, dampening, nesterov);
  });
}

} // namespace zcc::cpu::kernels
