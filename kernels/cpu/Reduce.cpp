//===- Reduce.cpp - reduce_sum, reduce_mean and reduce_max ----------------===//
//
// Each result element visits its reduced elements in row-major order, so
// the summation order (and with it every rounding) is fixed by the shapes
// alone. Float sums accumulate in double; f16 and bf16 elements are read as
// f32 and each result is rounded once.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/Kernels.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace zcc::cpu::kernels {

using namespace detail;

namespace {

enum class ReduceKind { Sum, Mean, Max };

/// The kept and the reduced dimensions of the input, with their strides.
struct ReductionLayout {
  SmallShape keptShape, keptStrides[1];
  SmallShape reducedShape, reducedStrides[1];
};

/// Reduces elements of storage type T (a float or an integer type) in
/// Compute<T>.
template <ReduceKind Kind, typename T>
void reduceLoop(const TensorView &in, const TensorView &out,
                const ReductionLayout &layout) {
  using C = Compute<T>;
  constexpr bool kFloat = std::is_floating_point_v<C>;
  const T *x = in.as<const T>();
  T *y = out.as<T>();
  int64_t outCount = layout.keptShape.numElements();
  int64_t count = layout.reducedShape.numElements();
  IndexWalker<1> outer(layout.keptShape, layout.keptStrides);
  for (int64_t o = 0; o < outCount; ++o, outer.next()) {
    IndexWalker<1> inner(layout.reducedShape, layout.reducedStrides);
    inner.setBase(0, outer.offset(0));
    if constexpr (Kind == ReduceKind::Max) {
      // The maximum of nothing is the type's lowest value (ONNX ReduceMax);
      // NaN wins over everything, as in torch.amax.
      C best = kFloat ? -std::numeric_limits<C>::infinity()
                      : std::numeric_limits<C>::lowest();
      for (int64_t i = 0; i < count; ++i, inner.next()) {
        C value = load(x[inner.offset(0)]);
        if constexpr (kFloat)
          if (std::isnan(value)) {
            best = value;
            break;
          }
        if (best < value)
          best = value;
      }
      y[o] = store<T>(best);
    } else if constexpr (kFloat) {
      double sum = 0;
      for (int64_t i = 0; i < count; ++i, inner.next())
        sum += load(x[inner.offset(0)]);
      y[o] = store<T>(
          static_cast<C>(Kind == ReduceKind::Mean ? sum / count : sum));
    } else {
      // Integer sums wrap instead of overflowing into undefined behaviour.
      uint64_t sum = 0;
      for (int64_t i = 0; i < count; ++i, inner.next())
        sum += static_cast<uint64_t>(x[inner.offset(0)]);
      y[o] = static_cast<T>(sum);
    }
  }
}

template <ReduceKind Kind>
Status reduce(const KernelArgs &args, const char *kernel) {
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (Status s = expectSameDType(kernel, "result", out, "input", in); !s.isOk())
    return s;
  SmallShape axes;
  if (Status s = requiredInts(args, kernel, "axes", axes); !s.isOk())
    return s;
  bool keepdims = true;
  if (Status s = optionalBool(args, kernel, "keepdims", true, keepdims);
      !s.isOk())
    return s;

  SmallShape shape(in.shape);
  bool reduced[kMaxRank] = {};
  for (int i = 0; i < axes.rank(); ++i) {
    int64_t axis = 0;
    if (Status s =
            normalizeAxis(kernel, "axes entry", axes[i], shape.rank(), axis);
        !s.isOk())
      return s;
    if (reduced[axis])
      return kernelError(StatusCode::kInvalidArgument, kernel,
                         "axis %lld appears twice in axes %s",
                         static_cast<long long>(axis),
                         shapeString(axes).c_str());
    reduced[axis] = true;
  }
  ReductionLayout layout;
  SmallShape strides = contiguousStrides(shape), expected;
  for (int d = 0; d < shape.rank(); ++d) {
    if (reduced[d]) {
      layout.reducedShape.push_back(shape[d]);
      layout.reducedStrides[0].push_back(strides[d]);
      if (keepdims)
        expected.push_back(1);
    } else {
      layout.keptShape.push_back(shape[d]);
      layout.keptStrides[0].push_back(strides[d]);
      expected.push_back(shape[d]);
    }
  }
  if (Status s = expectShape(kernel, "result", out, expected); !s.isOk())
    return s;

  if (isFloatDType(in.dtype))
    return dispatchFloat(kernel, "input", in, [&](auto tag) {
      reduceLoop<Kind, decltype(tag)>(in, out, layout);
    });
  switch (in.dtype) {
  case plan::I64:
    if constexpr (Kind != ReduceKind::Mean) {
      reduceLoop<Kind, int64_t>(in, out, layout);
      return Status::ok();
    }
    break;
  case plan::I32:
    if constexpr (Kind != ReduceKind::Mean) {
      reduceLoop<Kind, int32_t>(in, out, layout);
      return Status::ok();
    }
    break;
  default:
    break;
  }
  return unsupportedDType(kernel, "input", in,
                          Kind == ReduceKind::Mean
                              ? kFloatDTypeNames
                              : "f32, f64, f16, bf16, i64 and i32");
}

} // namespace

Status reduceSum(const KernelArgs &args) {
  return reduce<ReduceKind::Sum>(args, "reduce_sum");
}
Status reduceMean(const KernelArgs &args) {
  return reduce<ReduceKind::Mean>(args, "reduce_mean");
}
Status reduceMax(const KernelArgs &args) {
  return reduce<ReduceKind::Max>(args, "reduce_max");
}

} // namespace zcc::cpu::kernels
