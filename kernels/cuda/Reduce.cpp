//===- Reduce.cpp - reduce_sum, reduce_mean and reduce_max ----------------===//
//
// The host side: the cpu kernel's checks (kernels/cpu/Reduce.cpp), then the
// reduction's layout for Reduce.cu with unit dimensions left out and
// neighbouring dimensions of one kind (both kept or both reduced) merged,
// so that the device walks as few dimensions as possible.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/KernelSupport.h"
#include "kernels/cuda/Kernels.h"
#include "kernels/cuda/ReduceLaunch.h"

namespace zcc::cuda::kernels {

using namespace cpu::detail;

namespace {

/// Appends a dimension of `size` and `stride` to `shape`, merged into the
/// last one when the two are contiguous with each other.
void appendDim(DeviceShape &shape, DeviceShape &strides, int64_t size,
               int64_t stride) {
  if (size == 1)
    return;
  int last = shape.rank - 1;
  if (last >= 0 && strides.dims[last] == stride * size) {
    shape.dims[last] *= size;
    strides.dims[last] = stride;
    return;
  }
  shape.dims[shape.rank] = size;
  strides.dims[strides.rank] = stride;
  ++shape.rank;
  ++strides.rank;
}

template <ReduceKind Kind>
Status reduce(const KernelArgs &args, const LaunchContext &context,
              const char *kernel) {
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
  ReduceParams params;
  params.outputs = 1;
  params.count = 1;
  SmallShape strides = contiguousStrides(shape), expected;
  for (int d = 0; d < shape.rank(); ++d) {
    if (reduced[d]) {
      appendDim(params.reducedShape, params.reducedStrides, shape[d],
                strides[d]);
      params.count *= shape[d];
      if (keepdims)
        expected.push_back(1);
    } else {
      appendDim(params.keptShape, params.keptStrides, shape[d], strides[d]);
      params.outputs *= shape[d];
      expected.push_back(shape[d]);
    }
  }
  if (Status s = expectShape(kernel, "result", out, expected); !s.isOk())
    return s;

  bool supported = isFloatDType(in.dtype) ||
                   (Kind != ReduceKind::kMean &&
                    (in.dtype == plan::I64 || in.dtype == plan::I32));
  if (!supported)
    return unsupportedDType(kernel, "input", in,
                            Kind == ReduceKind::kMean
                                ? kFloatDTypeNames
                                : "f32, f64, f16, bf16, i64 and i32");

  params.type = static_cast<ElementType>(static_cast<int>(in.dtype));
  params.kind = Kind;
  params.input = in.data;
  params.result = out.data;
  params.workspace = context.workspace;
  params.workspaceBytes = context.workspace ? context.workspaceBytes : 0;
  cudaError_t error = launchReduce(params, context.stream);
  if (error != cudaSuccess)
    return kernelError(StatusCode::kInternal, kernel,
                       "CUDA kernel launch failed: %s",
                       cudaGetErrorString(error));
  return Status::ok();
}

} // namespace

Status reduceSum(const KernelArgs &args, const LaunchContext &context) {
  return reduce<ReduceKind::kSum>(args, context, "reduce_sum");
}
Status reduceMean(const KernelArgs &args, const LaunchContext &context) {
  return reduce<ReduceKind::kMean>(args, context, "reduce_mean");
}
Status reduceMax(const KernelArgs &args, const LaunchContext &context) {
  return reduce<ReduceKind::kMax>(args, context, "reduce_max");
}

} // namespace zcc::cuda::kernels
