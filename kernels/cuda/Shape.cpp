//===- Shape.cpp - Data movement kernels of the cuda backend --------------===//
//
// copy, reshape, transpose, concat, slice, slice_grad, gather, gather_grad,
// broadcast and trilu. The argument checks are the cpu kernels'
// (kernels/cpu/Shape.cpp, Grad.cpp), in the same order and with the same
// messages, except one: the cpu refuses out-of-range index values of gather
// and gather_grad, which live in device memory here and cannot be read
// without waiting; the device kernels stay in bounds instead (gather writes
// zeros for such an index, gather_grad ignores it). The device work is in
// Shape.cu.
//
// gather_grad uses the workspace (indices, sort keys and cub's radix sort
// storage: about 16 bytes per index plus 4 per slice of the gathered axis)
// and refuses, with kResourceExhausted, a call that needs more than there is.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Kernels.h"

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/KernelSupport.h"
#include "kernels/cuda/ShapeLaunch.h"

namespace zcc::cuda::kernels {

using namespace cpu::detail;

namespace {

DeviceShape deviceShape(const SmallShape &shape) {
  DeviceShape result;
  result.rank = shape.rank();
  for (int d = 0; d < shape.rank(); ++d)
    result.dims[d] = shape[d];
  return result;
}

Status launchStatus(cudaError_t error, const char *kernel) {
  if (error == cudaSuccess)
    return Status::ok();
  return kernelError(StatusCode::kInternal, kernel,
                     "cuda launch failed: %s (%s)", cudaGetErrorString(error),
                     cudaGetErrorName(error));
}

int64_t byteSize(const TensorView &view) {
  return view.numElements() * static_cast<int64_t>(dtypeBytes(view.dtype));
}

/// A device-to-device copy on the stream; nothing when the plan runs a copy
/// or reshape in place. (The planner never hands overlapping distinct
/// buffers, which cudaMemcpyAsync, unlike the cpu's memmove, would not
/// handle.)
Status moveBytes(const TensorView &out, const TensorView &in,
                 const LaunchContext &context, const char *kernel) {
  int64_t bytes = byteSize(in);
  if (bytes <= 0 || out.data == in.data)
    return Status::ok();
  return launchStatus(cudaMemcpyAsync(out.data, in.data,
                                      static_cast<size_t>(bytes),
                                      cudaMemcpyDeviceToDevice, context.stream),
                      kernel);
}

/// Checks a single-input data-movement kernel: one input, one result of the
/// input's element type.
Status checkMove(const KernelArgs &args, const char *kernel) {
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  return expectSameDType(kernel, "result", args.outputs[0], "input",
                         args.inputs[0]);
}

StridedView stridedView(plan::DType dtype, const SmallShape &shape,
                        const SmallShape &strides, int64_t base) {
  StridedView view;
  view.elementBytes = static_cast<int>(dtypeBytes(dtype));
  view.shape = deviceShape(shape);
  view.strides = deviceShape(strides);
  view.base = base;
  return view;
}

} // namespace

Status copy(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "copy";
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  // A plain byte copy: element types and shapes may differ as long as the
  // sizes agree (the planner copies between buffers of one layout).
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (byteSize(in) != byteSize(out))
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "'input' (%s %s) has %lld bytes but 'result' (%s %s) "
                       "has %lld",
                       dtypeName(in.dtype), shapeString(in.shape).c_str(),
                       static_cast<long long>(byteSize(in)),
                       dtypeName(out.dtype), shapeString(out.shape).c_str(),
                       static_cast<long long>(byteSize(out)));
  return moveBytes(out, in, context, kernel);
}

Status reshape(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "reshape";
  if (Status s = checkMove(args, kernel); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.numElements() != out.numElements())
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "cannot reshape %s (%lld elements) into %s (%lld)",
                       shapeString(in.shape).c_str(),
                       static_cast<long long>(in.numElements()),
                       shapeString(out.shape).c_str(),
                       static_cast<long long>(out.numElements()));
  return moveBytes(out, in, context, kernel);
}

Status transpose(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "transpose";
  if (Status s = checkMove(args, kernel); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  SmallShape perm;
  if (Status s = requiredInts(args, kernel, "perm", perm); !s.isOk())
    return s;
  SmallShape shape(in.shape);
  if (perm.rank() != shape.rank())
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "perm %s has %d entries for 'input' of rank %d",
                       shapeString(perm).c_str(), perm.rank(), shape.rank());
  SmallShape inStrides = contiguousStrides(shape), expected, srcStrides;
  bool seen[kMaxRank] = {};
  for (int i = 0; i < perm.rank(); ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= shape.rank() || seen[p])
      return kernelError(StatusCode::kInvalidArgument, kernel,
                         "perm %s is not a permutation of 0..%d",
                         shapeString(perm).c_str(), shape.rank() - 1);
    seen[p] = true;
    // Result dimension i is input dimension perm[i].
    expected.push_back(shape[static_cast<int>(p)]);
    srcStrides.push_back(inStrides[static_cast<int>(p)]);
  }
  if (Status s = expectShape(kernel, "result", out, expected); !s.isOk())
    return s;
  return launchStatus(
      launchStridedCopy(out.data, in.data,
                        stridedView(in.dtype, expected, srcStrides, 0),
                        context.stream),
      kernel);
}

Status concat(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "concat";
  SmallShape expected;
  int a = 0;
  if (Status s = checkConcatOperands(args, kernel, expected, a); !s.isOk())
    return s;
  const TensorView &out = args.outputs[0];

  // Each input is a [outer, length * inner] block of the result's [outer,
  // total * inner] rows, at its column offset: one strided scatter each.
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; ++d)
    outer *= expected[d];
  for (int d = a + 1; d < expected.rank(); ++d)
    inner *= expected[d];
  int64_t rowLength = expected[a] * inner, column = 0;
  for (const TensorView &in : args.inputs) {
    int64_t block = in.shape[a] * inner;
    if (block == 0 || outer == 0)
      continue;
    SmallShape shape, strides;
    shape.push_back(outer);
    shape.push_back(block);
    strides.push_back(rowLength);
    strides.push_back(1);
    if (Status s = launchStatus(
            launchStridedScatter(out.data, in.data,
                                 stridedView(in.dtype, shape, strides, column),
                                 context.stream),
            kernel);
        !s.isOk())
      return s;
    column += block;
  }
  return Status::ok();
}

Status slice(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "slice";
  if (Status s = checkMove(args, kernel); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  SliceWindow window;
  if (Status s =
          readSliceWindow(args, kernel, "input", SmallShape(in.shape), window);
      !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "result", out, window.shape); !s.isOk())
    return s;
  if (sliceIsView(window, in, out))
    return Status::ok();
  return launchStatus(
      launchStridedCopy(
          out.data, in.data,
          stridedView(in.dtype, window.shape, window.strides, window.base),
          context.stream),
      kernel);
}

Status sliceGrad(const KernelArgs &args, const LaunchContext &context) {
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
  // Zero everywhere (all zero bytes in every element type), then the
  // window.
  int64_t bytes = byteSize(result);
  if (bytes > 0)
    if (Status s = launchStatus(cudaMemsetAsync(result.data, 0,
                                                static_cast<size_t>(bytes),
                                                context.stream),
                                kernel);
        !s.isOk())
      return s;
  return launchStatus(
      launchStridedScatter(
          result.data, grad.data,
          stridedView(grad.dtype, window.shape, window.strides, window.base),
          context.stream),
      kernel);
}

Status gather(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "gather";
  if (Status s = checkOperands(args, kernel, {"data", "indices"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &data = args.inputs[0], &indices = args.inputs[1],
                   &out = args.outputs[0];
  if (indices.dtype != plan::I64 && indices.dtype != plan::I32)
    return unsupportedDType(kernel, "indices", indices, "i64 and i32");
  if (Status s = expectSameDType(kernel, "result", out, "data", data);
      !s.isOk())
    return s;
  GatherLayout layout;
  SmallShape expected;
  if (Status s = readGatherLayout(args, kernel, data.shape, indices, "result",
                                  layout, expected);
      !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "result", out, expected); !s.isOk())
    return s;
  // The cpu's checkIndices reads the index values; see the file comment.
  GatherParams params;
  params.data = data.data;
  params.indices = indices.data;
  params.indices64 = indices.dtype == plan::I64;
  params.result = out.data;
  params.elementBytes = static_cast<int>(dtypeBytes(data.dtype));
  params.outer = layout.outer;
  params.extent = layout.extent;
  params.count = indices.numElements();
  params.sliceSize = layout.sliceSize;
  return launchStatus(launchGather(params, context.stream), kernel);
}

Status gatherGrad(const KernelArgs &args, const LaunchContext &context) {
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
  // The cpu's checkIndices reads the index values; see the file comment.

  GatherGradParams params;
  params.type = elementType(result.dtype);
  params.indices = indices.data;
  params.indices64 = indices.dtype == plan::I64;
  params.grad = grad.data;
  params.result = result.data;
  params.outer = layout.outer;
  params.extent = layout.extent;
  params.count = indices.numElements();
  params.sliceSize = layout.sliceSize;
  params.workspace = context.workspace;
  params.workspaceBytes = context.workspaceBytes;
  if (result.numElements() > 0 && params.count > 0) {
    if (params.count > kMaxGatherGradCount ||
        params.extent > kMaxGatherGradExtent)
      return kernelError(StatusCode::kResourceExhausted, kernel,
                         "%lld indices into an axis of size %lld are more "
                         "than the cuda kernel handles (%lld and %lld)",
                         static_cast<long long>(params.count),
                         static_cast<long long>(params.extent),
                         static_cast<long long>(kMaxGatherGradCount),
                         static_cast<long long>(kMaxGatherGradExtent));
    size_t needed = 0;
    if (Status s = launchStatus(
            gatherGradWorkspaceBytes(params.count, params.extent, &needed),
            kernel);
        !s.isOk())
      return s;
    if (!context.workspace || needed > context.workspaceBytes)
      return kernelError(StatusCode::kResourceExhausted, kernel,
                         "%lld indices into an axis of size %lld need %zu "
                         "bytes of workspace, more than the %zu there are",
                         static_cast<long long>(params.count),
                         static_cast<long long>(params.extent), needed,
                         context.workspace ? context.workspaceBytes : 0);
  }
  return launchStatus(launchGatherGrad(params, context.stream), kernel);
}

Status broadcast(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "broadcast";
  if (Status s = checkMove(args, kernel); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  SmallShape inShape(in.shape), outShape(out.shape), shape;
  if (inShape.rank() > outShape.rank() ||
      !broadcastShapes(inShape, outShape, shape) || shape != outShape)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "'input' of shape %s does not broadcast to 'result' "
                       "of shape %s",
                       shapeString(in.shape).c_str(),
                       shapeString(out.shape).c_str());
  return launchStatus(
      launchStridedCopy(out.data, in.data,
                        stridedView(in.dtype, outShape,
                                    broadcastStrides(inShape, outShape), 0),
                        context.stream),
      kernel);
}

Status trilu(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "trilu";
  if (Status s = checkMove(args, kernel); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  SmallShape shape(in.shape);
  if (shape.rank() < 2)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "'input' must have rank at least 2, got %s",
                       shapeString(in.shape).c_str());
  if (Status s = expectShape(kernel, "result", out, shape); !s.isOk())
    return s;
  bool upper = true;
  if (Status s = optionalBool(args, kernel, "upper", true, upper); !s.isOk())
    return s;
  int64_t k = 0;
  if (Status s = optionalInt(args, kernel, "k", 0, k); !s.isOk())
    return s;

  TriluParams params;
  params.dst = out.data;
  params.src = in.data;
  params.elementBytes = static_cast<int>(dtypeBytes(in.dtype));
  params.rows = shape[shape.rank() - 2];
  params.columns = shape.back();
  params.matrices = params.rows * params.columns == 0
                        ? 0
                        : shape.numElements() / (params.rows * params.columns);
  params.k = k;
  params.upper = upper;
  return launchStatus(launchTrilu(params, context.stream), kernel);
}

} // namespace zcc::cuda::kernels
