//===- Grad.cpp - Backward kernels of the training step -------------------===//
//
// The vector-Jacobian products of softmax, log_softmax, layer_norm,
// attention, the three losses, gather, slice and gelu, for the ops autodiff
// adds (dialects/Graph/IR/ZGraphOps.td, "Gradients"). Each is a template
// over the storage type T of its float operands (f32, f64, f16, bf16),
// computes in Compute<T> and sums in double, in a fixed order. Nothing the
// forward computed is kept: softmax rows, layer_norm's mean and variance
// and attention's probabilities are recomputed, since a kernel may not
// allocate.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/RowStats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

namespace zcc::cpu::kernels {

using namespace detail;

namespace {

/// Zero is all zero bits in every element type.
void zeroFill(const TensorView &view) {
  int64_t bytes =
      view.numElements() * static_cast<int64_t>(dtypeBytes(view.dtype));
  if (bytes > 0)
    std::memset(view.data, 0, static_cast<size_t>(bytes));
}

template <typename A, typename B>
double dot(const A *a, const B *b, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(load(a[i])) * static_cast<double>(load(b[i]));
  return sum;
}

//===----------------------------------------------------------------------===//
// softmax_grad, log_softmax_grad
//===----------------------------------------------------------------------===//

template <typename T>
void softmaxGradLoop(const TensorView &output, const TensorView &grad,
                     const TensorView &result, AxisLayout layout,
                     bool logForm) {
  using C = Compute<T>;
  const T *y = output.as<const T>();
  const T *dy = grad.as<const T>();
  T *dx = result.as<T>();
  int64_t length = layout.length, inner = layout.inner;
  for (int64_t o = 0; o < layout.outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      int64_t base = o * length * inner + j;
      // softmax: sum(dy * y); log_softmax: sum(dy). The row is read in full
      // before any of it is written, so the result may alias either input.
      double sum = 0;
      for (int64_t i = 0; i < length; ++i) {
        double g = load(dy[base + i * inner]);
        sum += logForm ? g : g * static_cast<double>(load(y[base + i * inner]));
      }
      C total = static_cast<C>(sum);
      for (int64_t i = 0; i < length; ++i) {
        int64_t e = base + i * inner;
        C yi = load(y[e]), gi = load(dy[e]);
        dx[e] =
            store<T>(logForm ? gi - std::exp(yi) * total : yi * (gi - total));
      }
    }
  }
}

Status softmaxGradImpl(const KernelArgs &args, const char *kernel,
                       bool logForm) {
  if (Status s = checkOperands(args, kernel, {"output", "grad"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &output = args.inputs[0], &grad = args.inputs[1],
                   &result = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "output", output); !s.isOk())
    return s;
  if (Status s = expectLike(kernel, "grad", grad, "output", output); !s.isOk())
    return s;
  if (Status s = expectLike(kernel, "result", result, "output", output);
      !s.isOk())
    return s;
  AxisLayout layout;
  if (Status s = readAxisLayout(args, kernel, SmallShape(output.shape), layout);
      !s.isOk())
    return s;
  return dispatchFloat(kernel, "output", output, [&](auto tag) {
    softmaxGradLoop<decltype(tag)>(output, grad, result, layout, logForm);
  });
}

//===----------------------------------------------------------------------===//
// layer_norm_grad
//===----------------------------------------------------------------------===//

/// Columns of scale_grad and bias_grad summed per pass over the rows: their
/// double accumulators live on the stack, and the row statistics are
/// recomputed for each block (once when the rows are at most this wide).
constexpr int64_t kColumnBlock = 1024;

template <typename T>
void layerNormGradLoop(const TensorView &input, const TensorView &scale,
                       const TensorView &grad, const TensorView *addend,
                       const TensorView &inputGrad, const TensorView &scaleGrad,
                       const TensorView &biasGrad, int64_t rows, int64_t columns,
                       double epsilon) {
  const T *x = input.as<const T>();
  const T *gamma = scale.as<const T>();
  const T *dy = grad.as<const T>();
  const T *residual = addend ? addend->as<const T>() : nullptr;
  T *dx = inputGrad.as<T>();
  T *dgamma = scaleGrad.as<T>();
  T *dbeta = biasGrad.as<T>();

  // scale_grad = sum over rows of dy * xhat, bias_grad = sum of dy. They are
  // done before input_grad, which may then alias `grad` or `input`.
  double scaleSums[kColumnBlock], biasSums[kColumnBlock];
  for (int64_t start = 0; start < columns; start += kColumnBlock) {
    int64_t length = std::min(kColumnBlock, columns - start);
    std::fill(scaleSums, scaleSums + length, 0.0);
    std::fill(biasSums, biasSums + length, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const T *row = x + r * columns;
      const T *rowGrad = dy + r * columns + start;
      RowStats stats = rowStats(row, columns, epsilon);
      for (int64_t c = 0; c < length; ++c) {
        double normalized =
            (load(row[start + c]) - stats.mean) * stats.inverseStd;
        double g = load(rowGrad[c]);
        scaleSums[c] += g * normalized;
        biasSums[c] += g;
      }
    }
    for (int64_t c = 0; c < length; ++c) {
      dgamma[start + c] = storeDouble<T>(scaleSums[c]);
      dbeta[start + c] = storeDouble<T>(biasSums[c]);
    }
  }

  // input_grad = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy *
  // scale, plus the addend's element (read before input_grad, which may
  // alias it, is written).
  for (int64_t r = 0; r < rows; ++r) {
    const T *row = x + r * columns;
    const T *rowGrad = dy + r * columns;
    RowStats stats = rowStats(row, columns, epsilon);
    double gradSum = 0, projection = 0;
    for (int64_t c = 0; c < columns; ++c) {
      double g = static_cast<double>(load(rowGrad[c])) * load(gamma[c]);
      gradSum += g;
      projection += g * (load(row[c]) - stats.mean) * stats.inverseStd;
    }
    double gradMean = gradSum / columns, projectionMean = projection / columns;
    for (int64_t c = 0; c < columns; ++c) {
      double g = static_cast<double>(load(rowGrad[c])) * load(gamma[c]);
      double normalized = (load(row[c]) - stats.mean) * stats.inverseStd;
      double value = stats.inverseStd * (g - gradMean - normalized * projectionMean);
      if (residual)
        value += load(residual[r * columns + c]);
      dx[r * columns + c] = storeDouble<T>(value);
    }
  }
}

//===----------------------------------------------------------------------===//
// attention_grad
//===----------------------------------------------------------------------===//

/// The gradients of the attention of `q`, `k` and `v` (the buffers the
/// layouts in `dims` index, as do `dq`, `dk` and `dv`), given `grad`; the
/// key and value gradients accumulate, so the caller zeroes them first.
template <typename T>
void attentionGradLoop(const AttentionDims &dims, double scale,
                       const TensorView &q, const TensorView &k,
                       const TensorView &v, const TensorView &grad,
                       const TensorView &dq, const TensorView &dk,
                       const TensorView &dv) {
  int64_t tq = dims.queries, headSize = dims.headSize,
          valueSize = dims.valueSize;
  int64_t qRow = dims.query.row, kRow = dims.key.row, vRow = dims.value.row,
          gRow = dims.output.row;
  int64_t groups = dims.groupHeads;
  double output[kAttentionGradMaxHeadSize];
  double queryGrad[kAttentionGradMaxHeadSize];
  for (int64_t h = 0; h < dims.heads; ++h) {
    const T *qh = q.as<const T>() + dims.query.rowStart(h, groups);
    const T *kh = k.as<const T>() + dims.key.rowStart(h, groups);
    const T *vh = v.as<const T>() + dims.value.rowStart(h, groups);
    const T *gh = grad.as<const T>() + dims.output.rowStart(h, groups);
    T *dqh = dq.as<T>() + dims.query.rowStart(h, groups);
    T *dkh = dk.as<T>() + dims.key.rowStart(h, groups);
    T *dvh = dv.as<T>() + dims.value.rowStart(h, groups);
    for (int64_t i = 0; i < tq; ++i) {
      int64_t visible = dims.visibleKeys(i);
      const T *qi = qh + i * qRow;
      const T *gi = gh + i * gRow;
      auto score = [&](int64_t j) {
        return scale * dot(qi, kh + j * kRow, headSize);
      };

      // Pass 1: the row's maximum score and softmax denominator, online.
      double rowMax = -std::numeric_limits<double>::infinity();
      double denominator = 0;
      for (int64_t j = 0; j < visible; ++j) {
        double s = score(j);
        if (s > rowMax) {
          denominator = denominator * std::exp(rowMax - s) + 1;
          rowMax = s;
        } else {
          denominator += std::exp(s - rowMax);
        }
      }

      // Pass 2: the row's output o_i and D_i = dout_i . o_i.
      std::fill(output, output + valueSize, 0.0);
      for (int64_t j = 0; j < visible; ++j) {
        double p = std::exp(score(j) - rowMax) / denominator;
        const T *vj = vh + j * vRow;
        for (int64_t d = 0; d < valueSize; ++d)
          output[d] += p * load(vj[d]);
      }
      double rowDot = 0;
      for (int64_t d = 0; d < valueSize; ++d)
        rowDot += static_cast<double>(load(gi[d])) * output[d];

      // Pass 3: ds_ij = p_ij (dout_i . v_j - D_i) into all three gradients.
      std::fill(queryGrad, queryGrad + headSize, 0.0);
      for (int64_t j = 0; j < visible; ++j) {
        double p = std::exp(score(j) - rowMax) / denominator;
        const T *kj = kh + j * kRow;
        const T *vj = vh + j * vRow;
        double ds = p * (dot(gi, vj, valueSize) - rowDot);
        double scaledDs = scale * ds;
        T *dvj = dvh + j * vRow;
        for (int64_t d = 0; d < valueSize; ++d)
          dvj[d] = storeDouble<T>(load(dvj[d]) + p * load(gi[d]));
        T *dkj = dkh + j * kRow;
        for (int64_t d = 0; d < headSize; ++d) {
          queryGrad[d] += scaledDs * load(kj[d]);
          dkj[d] = storeDouble<T>(load(dkj[d]) + scaledDs * load(qi[d]));
        }
      }
      for (int64_t d = 0; d < headSize; ++d)
        dqh[i * qRow + d] = storeDouble<T>(queryGrad[d]);
    }
  }
}

//===----------------------------------------------------------------------===//
// cross_entropy_grad, nll_loss_grad
//===----------------------------------------------------------------------===//

struct ClassLossLayout {
  int64_t batch = 0, classes = 0, inner = 0;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
  Reduction reduction = Reduction::Mean;
};

/// [N, C, inner] scores against [N, inner] labels. cross_entropy: (softmax
/// over the classes - onehot(label)) * g; nll_loss: -g at the label. g is
/// the incoming gradient of the position's loss: dloss / (labels counted)
/// for a mean, dloss for a sum, dloss[position] for none.
/// The result is of type R: T, or (for an f32 input) f16 or bf16, each
/// value rounded to T first and then to R, as a cast after it would round.
template <typename T, typename R, typename Label>
void classLossGradLoop(const TensorView &inputView, const Label *labels,
                       const TensorView &gradView, const TensorView &resultView,
                       const ClassLossLayout &layout, bool logSoftmax) {
  const T *input = inputView.as<const T>();
  const T *lossGrad = gradView.as<const T>();
  R *result = resultView.as<R>();
  auto toResult = [](double value) {
    if constexpr (std::is_same_v<T, R>)
      return detail::storeDouble<T>(value);
    else
      return store<R>(static_cast<Compute<R>>(detail::storeDouble<T>(value)));
  };
  int64_t classes = layout.classes, inner = layout.inner;
  int64_t positions = layout.batch * inner;
  auto ignored = [&](int64_t label) {
    return layout.hasIgnore && label == layout.ignoreIndex;
  };
  double seed = 0;
  if (layout.reduction != Reduction::None)
    seed = load(lossGrad[0]);
  if (layout.reduction == Reduction::Mean) {
    // All ignored leaves 0 / 0 unused: every position then gets zero, as in
    // torch.
    int64_t counted = 0;
    for (int64_t p = 0; p < positions; ++p)
      counted += ignored(labels[p]) ? 0 : 1;
    seed /= static_cast<double>(counted);
  }
  for (int64_t n = 0; n < layout.batch; ++n) {
    for (int64_t s = 0; s < inner; ++s) {
      int64_t position = n * inner + s;
      int64_t label = labels[position];
      // Class c of this position sits at row[c * inner].
      const T *row = input + n * classes * inner + s;
      R *rowGrad = result + n * classes * inner + s;
      if (ignored(label)) {
        for (int64_t c = 0; c < classes; ++c)
          rowGrad[c * inner] = toResult(0.0);
        continue;
      }
      double g = layout.reduction == Reduction::None
                     ? static_cast<double>(load(lossGrad[position]))
                     : seed;
      if (!logSoftmax) {
        for (int64_t c = 0; c < classes; ++c)
          rowGrad[c * inner] = toResult(c == label ? -g : 0.0);
        continue;
      }
      double maxValue = load(row[0]);
      for (int64_t c = 1; c < classes; ++c)
        maxValue =
            std::fmax(maxValue, static_cast<double>(load(row[c * inner])));
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c)
        sum += std::exp(load(row[c * inner]) - maxValue);
      for (int64_t c = 0; c < classes; ++c) {
        double probability = std::exp(load(row[c * inner]) - maxValue) / sum;
        rowGrad[c * inner] = toResult((probability - (c == label ? 1.0 : 0.0)) * g);
      }
    }
  }
}

Status classLossGrad(const KernelArgs &args, const char *kernel,
                     bool logSoftmax) {
  if (Status s =
          checkOperands(args, kernel, {"input", "labels", "grad"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &input = args.inputs[0], &labels = args.inputs[1],
                   &grad = args.inputs[2], &result = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "input", input); !s.isOk())
    return s;
  if (labels.dtype != plan::I64 && labels.dtype != plan::I32)
    return unsupportedDType(kernel, "labels", labels, "i64 and i32");
  if (Status s = expectSameDType(kernel, "grad", grad, "input", input);
      !s.isOk())
    return s;
  if (Status s = checkClassLossGradResult(kernel, result, input); !s.isOk())
    return s;
  SmallShape labelShape;
  if (Status s = checkClassLossShapes(kernel, input, labels, labelShape);
      !s.isOk())
    return s;

  ClassLossLayout layout;
  if (Status s = readClassLossAttributes(args, kernel, layout.reduction,
                                         layout.hasIgnore, layout.ignoreIndex);
      !s.isOk())
    return s;
  if (Status s = expectShape(
          kernel, "grad", grad,
          layout.reduction == Reduction::None ? labelShape : SmallShape());
      !s.isOk())
    return s;

  layout.batch = input.shape[0];
  layout.classes = input.shape[1];
  layout.inner =
      labelShape.numElements() / (layout.batch == 0 ? 1 : layout.batch);
  // All labels are checked before anything is written.
  if (Status s = checkLabels(kernel, labels, layout.classes, layout.hasIgnore,
                             layout.ignoreIndex);
      !s.isOk())
    return s;
  auto run = [&](auto inputTag, auto resultTag) {
    using T = decltype(inputTag);
    using R = decltype(resultTag);
    if (labels.dtype == plan::I64)
      classLossGradLoop<T, R>(input, labels.as<const int64_t>(), grad, result,
                              layout, logSoftmax);
    else
      classLossGradLoop<T, R>(input, labels.as<const int32_t>(), grad, result,
                              layout, logSoftmax);
  };
  // An f32 input's gradient written in 16 bits.
  if (result.dtype == plan::BF16 && input.dtype == plan::F32) {
    run(float(), BFloat16());
    return Status::ok();
  }
  if (result.dtype == plan::F16 && input.dtype == plan::F32) {
    run(float(), Half());
    return Status::ok();
  }
  return dispatchFloat(kernel, "input", input,
                       [&](auto tag) { run(tag, decltype(tag)()); });
}

//===----------------------------------------------------------------------===//
// gather_grad, slice_grad
//===----------------------------------------------------------------------===//

/// Adds slice i of `grad` (outer block o) into slice indices[i] of the
/// result, in index order: repeated indices sum in a fixed order.
template <typename T, typename Index>
void gatherGradLoop(const Index *indices, int64_t count, const TensorView &grad,
                    const TensorView &result, int64_t outer, int64_t extent,
                    int64_t sliceSize) {
  const T *src = grad.as<const T>();
  T *dst = result.as<T>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < count; ++i, src += sliceSize) {
      // Negative indices count from the end, as in the forward.
      int64_t index = indices[i] < 0 ? indices[i] + extent : indices[i];
      T *slice = dst + (o * extent + index) * sliceSize;
      for (int64_t e = 0; e < sliceSize; ++e)
        slice[e] = store<T>(load(slice[e]) + load(src[e]));
    }
  }
}

/// The inverse of stridedCopy: element (i0, i1, ...) of the contiguous `src`
/// of `shape` goes to element offset dstBase + i0 * dstStrides[0] + ...
void stridedScatter(void *dst, const void *src, size_t elementBytes,
                    const SmallShape &shape, const SmallShape &dstStrides,
                    int64_t dstBase) {
  int64_t total = shape.numElements();
  if (total == 0)
    return;
  auto *out = static_cast<char *>(dst);
  const auto *in = static_cast<const char *>(src);
  SmallShape strides[1] = {dstStrides};
  IndexWalker<1> walker(shape, strides);
  walker.setBase(0, dstBase);
  for (int64_t i = 0; i < total; ++i, in += elementBytes, walker.next())
    copyElement(out + walker.offset(0) * elementBytes, in, elementBytes);
}

//===----------------------------------------------------------------------===//
// gelu_grad
//===----------------------------------------------------------------------===//

template <typename T>
void geluGradLoop(const TensorView &input, const TensorView &grad,
                  const TensorView &result, bool tanhForm) {
  using C = Compute<T>;
  const T *x = input.as<const T>();
  const T *dy = grad.as<const T>();
  T *dx = result.as<T>();
  // The forward's constant 1/sqrt(2); and 1/sqrt(2 pi).
  const C sqrtHalf = static_cast<C>(0.7071067811865476);
  const C invSqrt2Pi = static_cast<C>(0.3989422804014327);
  const C half = static_cast<C>(0.5), one = 1;
  int64_t n = input.numElements();
  for (int64_t i = 0; i < n; ++i) {
    C v = load(x[i]), derivative;
    if (tanhForm) {
      derivative = geluTanhDerivative(v);
    } else {
      // d/dx x Phi(x) = Phi(x) + x phi(x).
      derivative = half * (one + std::erf(v * sqrtHalf)) +
                   v * std::exp(-half * v * v) * invSqrt2Pi;
    }
    dx[i] = store<T>(load(dy[i]) * derivative);
  }
}

} // namespace

Status softmaxGrad(const KernelArgs &args) {
  return softmaxGradImpl(args, "softmax_grad", /*logForm=*/false);
}

Status logSoftmaxGrad(const KernelArgs &args) {
  return softmaxGradImpl(args, "log_softmax_grad", /*logForm=*/true);
}

Status layerNormGrad(const KernelArgs &args) {
  const char *kernel = "layer_norm_grad";
  const TensorView *addend = nullptr;
  if (Status s = checkLayerNormGradOperands(args, kernel, addend); !s.isOk())
    return s;
  const TensorView &input = args.inputs[0], &scale = args.inputs[1],
                   &grad = args.inputs[2], &inputGrad = args.outputs[0],
                   &scaleGrad = args.outputs[1], &biasGrad = args.outputs[2];
  if (Status s = expectFloatDType(kernel, "input", input); !s.isOk())
    return s;
  if (Status s = expectSameDType(kernel, "scale", scale, "input", input);
      !s.isOk())
    return s;
  if (Status s = expectLike(kernel, "grad", grad, "input", input); !s.isOk())
    return s;
  if (addend)
    if (Status s = expectLike(kernel, "addend", *addend, "input", input); !s.isOk())
      return s;
  if (Status s = expectLike(kernel, "input_grad", inputGrad, "input", input);
      !s.isOk())
    return s;
  SmallShape shape(input.shape);
  // scale and both parameter gradients have the normalised (trailing) shape.
  double epsilon = 0;
  SmallShape normalized;
  if (Status s =
          readLayerNormAttributes(args, kernel, shape, epsilon, normalized);
      !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "scale", scale, normalized); !s.isOk())
    return s;
  for (auto [name, view] :
       {std::pair<const char *, const TensorView *>{"scale_grad", &scaleGrad},
        {"bias_grad", &biasGrad}}) {
    if (Status s = expectSameDType(kernel, name, *view, "input", input);
        !s.isOk())
      return s;
    if (Status s = expectShape(kernel, name, *view, normalized); !s.isOk())
      return s;
  }

  int64_t columns = normalized.numElements();
  if (columns == 0)
    return Status::ok();
  int64_t rows = shape.numElements() / columns;
  return dispatchFloat(kernel, "input", input, [&](auto tag) {
    layerNormGradLoop<decltype(tag)>(input, scale, grad, addend, inputGrad, scaleGrad,
                                     biasGrad, rows, columns, epsilon);
  });
}


Status attentionGrad(const KernelArgs &args) {
  const char *kernel = "attention_grad";
  // The forward's saved result and log-sum-exp, when given, are checked
  // and not read: this kernel recomputes each row's probabilities exactly.
  AttentionDims dims;
  double scale = 0;
  const TensorView *output = nullptr, *lse = nullptr;
  if (Status s =
          checkAttentionBackward(args, kernel, dims, scale, output, lse);
      !s.isOk())
    return s;
  if (Status s = checkAttentionGradHeadSizes(kernel, dims); !s.isOk())
    return s;
  for (const TensorView &out : args.outputs)
    zeroFill(out);
  return dispatchFloat(kernel, "query", args.inputs[0], [&](auto tag) {
    attentionGradLoop<decltype(tag)>(dims, scale, args.inputs[0],
                                     args.inputs[1], args.inputs[2],
                                     args.inputs[3], args.outputs[0],
                                     args.outputs[1], args.outputs[2]);
  });
}

Status qkvAttentionGrad(const KernelArgs &args) {
  const char *kernel = "qkv_attention_grad";
  // As attention_grad: the saved result and lse are checked, not read.
  AttentionDims dims;
  double scale = 0;
  const TensorView *output = nullptr, *lse = nullptr;
  if (Status s =
          checkQkvAttentionBackward(args, kernel, dims, scale, output, lse);
      !s.isOk())
    return s;
  if (Status s = checkAttentionGradHeadSizes(kernel, dims); !s.isOk())
    return s;
  const TensorView &qkv = args.inputs[0], &qkvGrad = args.outputs[0];
  zeroFill(qkvGrad);
  return dispatchFloat(kernel, "qkv", qkv, [&](auto tag) {
    attentionGradLoop<decltype(tag)>(dims, scale, qkv, qkv, qkv,
                                     args.inputs[1], qkvGrad, qkvGrad,
                                     qkvGrad);
  });
}

Status crossEntropyGrad(const KernelArgs &args) {
  return classLossGrad(args, "cross_entropy_grad", /*logSoftmax=*/true);
}

Status nllLossGrad(const KernelArgs &args) {
  return classLossGrad(args, "nll_loss_grad", /*logSoftmax=*/false);
}

Status mseLossGrad(const KernelArgs &args) {
  const char *kernel = "mse_loss_grad";
  if (Status s = checkOperands(args, kernel, {"prediction", "target", "grad"},
                               {"result"});
      !s.isOk())
    return s;
  const TensorView &prediction = args.inputs[0], &target = args.inputs[1],
                   &grad = args.inputs[2], &result = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "prediction", prediction); !s.isOk())
    return s;
  // As mse_loss: target and prediction of one shape, no broadcasting.
  if (Status s = expectLike(kernel, "target", target, "prediction", prediction);
      !s.isOk())
    return s;
  if (Status s =
          expectSameDType(kernel, "grad", grad, "prediction", prediction);
      !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "grad", grad, SmallShape()); !s.isOk())
    return s;
  if (Status s = expectLike(kernel, "result", result, "prediction", prediction);
      !s.isOk())
    return s;
  int64_t n = prediction.numElements();
  if (n == 0)
    return Status::ok();
  return dispatchFloat(kernel, "prediction", prediction, [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    const T *p = prediction.as<const T>();
    const T *t = target.as<const T>();
    T *dp = result.as<T>();
    C factor = static_cast<C>(2.0 * load(grad.as<const T>()[0]) /
                              static_cast<double>(n));
    for (int64_t i = 0; i < n; ++i)
      dp[i] = store<T>((load(p[i]) - load(t[i])) * factor);
  });
}

Status gatherGrad(const KernelArgs &args) {
  const char *kernel = "gather_grad";
  if (Status s = checkOperands(args, kernel, {"indices", "grad"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &indices = args.inputs[0], &grad = args.inputs[1],
                   &result = args.outputs[0];
  if (indices.dtype != plan::I64 && indices.dtype != plan::I32)
    return unsupportedDType(kernel, "indices", indices, "i64 and i32");
  if (Status s = expectFloatDType(kernel, "result", result); !s.isOk())
    return s;
  if (Status s = expectSameDType(kernel, "grad", grad, "result", result);
      !s.isOk())
    return s;
  // The result has the gathered data's shape; grad has the gather's:
  // data.shape[:axis] + indices.shape + data.shape[axis+1:].
  GatherLayout layout;
  SmallShape expected;
  if (Status s = readGatherLayout(args, kernel, result.shape, indices,
                                  "gradient", layout, expected);
      !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "grad", grad, expected); !s.isOk())
    return s;

  int64_t outer = layout.outer, extent = layout.extent,
          sliceSize = layout.sliceSize;
  int64_t count = indices.numElements();
  // All indices are checked before anything is written.
  if (Status s = checkIndices(kernel, indices, extent); !s.isOk())
    return s;
  zeroFill(result);
  return dispatchFloat(kernel, "result", result, [&](auto tag) {
    using T = decltype(tag);
    if (indices.dtype == plan::I64)
      gatherGradLoop<T>(indices.as<const int64_t>(), count, grad, result, outer,
                        extent, sliceSize);
    else
      gatherGradLoop<T>(indices.as<const int32_t>(), count, grad, result, outer,
                        extent, sliceSize);
  });
}

Status sliceGrad(const KernelArgs &args) {
  const char *kernel = "slice_grad";
  if (Status s = checkOperands(args, kernel, {"grad"}, {"result"}); !s.isOk())
    return s;
  // Like slice, it moves bytes and so serves every element type.
  const TensorView &grad = args.inputs[0], &result = args.outputs[0];
  if (Status s = expectSameDType(kernel, "result", result, "grad", grad);
      !s.isOk())
    return s;
  // The result has the sliced input's shape.
  SliceWindow window;
  if (Status s = readSliceWindow(args, kernel, "result",
                                 SmallShape(result.shape), window);
      !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "grad", grad, window.shape); !s.isOk())
    return s;
  zeroFill(result);
  stridedScatter(result.data, grad.data, dtypeBytes(grad.dtype), window.shape,
                 window.strides, window.base);
  return Status::ok();
}

Status geluGrad(const KernelArgs &args) {
  const char *kernel = "gelu_grad";
  if (Status s = checkOperands(args, kernel, {"input", "grad"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &input = args.inputs[0], &grad = args.inputs[1],
                   &result = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "input", input); !s.isOk())
    return s;
  if (Status s = expectLike(kernel, "grad", grad, "input", input); !s.isOk())
    return s;
  if (Status s = expectLike(kernel, "result", result, "input", input);
      !s.isOk())
    return s;
  const char *approximate = nullptr;
  if (Status s =
          optionalString(args, kernel, "approximate", "none", approximate);
      !s.isOk())
    return s;
  bool tanhForm = std::strcmp(approximate, "tanh") == 0;
  if (!tanhForm && std::strcmp(approximate, "none") != 0)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "approximate must be \"none\" or \"tanh\", got \"%s\"",
                       approximate);
  return dispatchFloat(kernel, "input", input, [&](auto tag) {
    geluGradLoop<decltype(tag)>(input, grad, result, tanhForm);
  });
}

} // namespace zcc::cpu::kernels
