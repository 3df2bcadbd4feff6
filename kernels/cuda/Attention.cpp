//===- Attention.cpp - Attention and its gradient -------------------------===//
//
// The cuda twins of the cpu's attention (kernels/cpu/Linalg.cpp) and
// attention_grad (kernels/cpu/Grad.cpp): the same operands, attributes and
// checks, then the flash-attention style kernels of Attention.cu. Those keep
// a tile of head-size columns per thread, so head sizes above
// kMaxAttentionHeadSize are refused where the cpu would take them.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Kernels.h"

#include "kernels/cpu/KernelSupport.h"
#include "kernels/cuda/AttentionLaunch.h"

#include <climits>
#include <tuple>
#include <utility>

namespace zcc::cuda::kernels {

using namespace cpu::detail;

namespace {

/// The cpu attention's size limit, with its message.
Status checkBlasSize(const char *kernel, const char *what, int64_t value) {
  if (value <= INT_MAX)
    return Status::ok();
  return kernelError(StatusCode::kUnimplemented, kernel,
                     "%s %lld exceeds what BLAS addresses (%d)", what,
                     static_cast<long long>(value), INT_MAX);
}

/// The cpu attention_grad's limit on head sizes, with its message.
constexpr int64_t kCpuGradMaxHeadSize = 1024;

Status checkDeviceHeadSizes(const char *kernel, const AttentionDims &dims) {
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"head size", dims.headSize},
        {"value head size", dims.valueSize}})
    if (value > kMaxAttentionHeadSize)
      return kernelError(StatusCode::kUnimplemented, kernel,
                         "%s %lld exceeds the %lld the cuda kernel keeps on "
                         "chip",
                         what, static_cast<long long>(value),
                         static_cast<long long>(kMaxAttentionHeadSize));
  return Status::ok();
}

AttentionShape shapeOf(const AttentionDims &dims, double scale) {
  AttentionShape shape;
  shape.heads = dims.heads;
  shape.queries = dims.queries;
  shape.keys = dims.keys;
  shape.headSize = dims.headSize;
  shape.valueSize = dims.valueSize;
  shape.causal = dims.causal;
  shape.scale = scale;
  return shape;
}

} // namespace

Status attention(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "attention";
  AttentionDims dims;
  double scale = 0;
  const TensorView *lse = nullptr;
  if (Status s = checkAttentionForward(args, kernel, dims, scale, lse);
      !s.isOk())
    return s;
  const TensorView &q = args.inputs[0], &k = args.inputs[1],
                   &v = args.inputs[2], &out = args.outputs[0];
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"head size", dims.headSize},
        {"value head size", dims.valueSize}})
    if (Status s = checkBlasSize(kernel, what, value); !s.isOk())
      return s;

  if (dims.queries == 0 || dims.heads == 0 ||
      (dims.valueSize == 0 && !lse))
    return Status::ok();
  if (Status s = checkDeviceHeadSizes(kernel, dims); !s.isOk())
    return s;
  AttentionParams params;
  params.type = elementType(q.dtype);
  params.shape = shapeOf(dims, scale);
  params.query = q.data;
  params.key = k.data;
  params.value = v.data;
  params.result = out.data;
  params.lse = lse ? lse->data : nullptr;
  return launchStatus(kernel, launchAttention(params, context.stream));
}

Status attentionGrad(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "attention_grad";
  AttentionDims dims;
  double scale = 0;
  const TensorView *output = nullptr, *lse = nullptr;
  if (Status s =
          checkAttentionBackward(args, kernel, dims, scale, output, lse);
      !s.isOk())
    return s;
  const TensorView &q = args.inputs[0], &k = args.inputs[1],
                   &v = args.inputs[2], &grad = args.inputs[3];
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"head size", dims.headSize},
        {"value head size", dims.valueSize}})
    if (value > kCpuGradMaxHeadSize)
      return kernelError(StatusCode::kUnimplemented, kernel,
                         "%s %lld exceeds the %lld this kernel handles", what,
                         static_cast<long long>(value),
                         static_cast<long long>(kCpuGradMaxHeadSize));

  if (dims.heads == 0)
    return Status::ok();
  if (Status s = checkDeviceHeadSizes(kernel, dims); !s.isOk())
    return s;
  AttentionGradParams params;
  params.type = elementType(q.dtype);
  params.shape = shapeOf(dims, scale);
  size_t workspace = attentionGradWorkspaceBytes(params.type, params.shape);
  if (workspace > context.workspaceBytes)
    return kernelError(StatusCode::kResourceExhausted, kernel,
                       "the softmax statistics of %lld query rows need %zu "
                       "bytes of workspace, more than the %zu available",
                       static_cast<long long>(dims.heads * dims.queries),
                       workspace, context.workspaceBytes);
  params.query = q.data;
  params.key = k.data;
  params.value = v.data;
  params.grad = grad.data;
  params.output = output ? output->data : nullptr;
  params.lse = lse ? lse->data : nullptr;
  params.queryGrad = args.outputs[0].data;
  params.keyGrad = args.outputs[1].data;
  params.valueGrad = args.outputs[2].data;
  params.workspace = context.workspace;
  return launchStatus(kernel, launchAttentionGrad(params, context.stream));
}

} // namespace zcc::cuda::kernels
