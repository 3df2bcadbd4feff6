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
#include "kernels/cuda/CudnnAttention.h"

#include <climits>
#include <tuple>
#include <type_traits>
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

/// The kernels keep row strides in 32 bits (as the cpu's BLAS does the
/// keys' and values').
Status checkRowStrides(const char *kernel, const AttentionDims &dims) {
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"query row stride", dims.query.row},
        {"key row stride", dims.key.row},
        {"value row stride", dims.value.row},
        {"result row stride", dims.output.row}})
    if (value > INT_MAX)
      return kernelError(StatusCode::kUnimplemented, kernel,
                         "%s %lld exceeds the %d the cuda kernels address", what,
                         static_cast<long long>(value), INT_MAX);
  return Status::ok();
}

AttentionRows rowsOf(const cpu::detail::AttentionRows &rows) {
  return {rows.batch, rows.head, rows.row};
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
  shape.groupHeads = dims.groupHeads;
  shape.query = rowsOf(dims.query);
  shape.key = rowsOf(dims.key);
  shape.value = rowsOf(dims.value);
  shape.output = rowsOf(dims.output);
  return shape;
}

/// Where `view`'s operand laid out as `rows` starts.
template <typename Pointer>
Pointer rowsStart(Pointer data, const TensorView &view,
                  const cpu::detail::AttentionRows &rows) {
  using Byte = std::conditional_t<std::is_const_v<std::remove_pointer_t<Pointer>>,
                                  const unsigned char, unsigned char>;
  return static_cast<Byte *>(data) + rows.offset * plan::dtypeBytes(view.dtype);
}

/// attention and qkv_attention, once their operands are checked: `q`, `k`
/// and `v` are the buffers the layouts in `dims` index.
Status runAttention(const char *kernel, const AttentionDims &dims,
                    double scale, const TensorView &q, const TensorView &k,
                    const TensorView &v, const TensorView &out,
                    const TensorView *lse, const LaunchContext &context) {
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"head size", dims.headSize},
        {"value head size", dims.valueSize}})
    if (Status s = checkBlasSize(kernel, what, value); !s.isOk())
      return s;
  if (Status s = checkRowStrides(kernel, dims); !s.isOk())
    return s;

  if (dims.queries == 0 || dims.heads == 0 ||
      (dims.valueSize == 0 && !lse))
    return Status::ok();
  if (Status s = checkDeviceHeadSizes(kernel, dims); !s.isOk())
    return s;
  AttentionParams params;
  params.type = elementType(q.dtype);
  params.shape = shapeOf(dims, scale);
  params.query = rowsStart(static_cast<const void *>(q.data), q, dims.query);
  params.key = rowsStart(static_cast<const void *>(k.data), k, dims.key);
  params.value = rowsStart(static_cast<const void *>(v.data), v, dims.value);
  params.result = rowsStart(out.data, out, dims.output);
  params.lse = lse ? lse->data : nullptr;
  if (context.cudnnAttention) {
    bool ran = false;
    if (Status s = context.cudnnAttention->forward(
            params, context.stream, context.workspace, context.workspaceBytes,
            ran);
        !s.isOk() || ran)
      return std::move(s.addContext(kernel));
  }
  return launchStatus(kernel, launchAttention(params, context.stream));
}

/// attention_grad and qkv_attention_grad, once their operands are checked.
Status runAttentionGrad(const char *kernel, const AttentionDims &dims,
                        double scale, const TensorView &q, const TensorView &k,
                        const TensorView &v, const TensorView &grad,
                        const TensorView *output, const TensorView *lse,
                        const TensorView &dq, const TensorView &dk,
                        const TensorView &dv, const LaunchContext &context) {
  // The cpu's limit first, with its message.
  if (Status s = checkAttentionGradHeadSizes(kernel, dims); !s.isOk())
    return s;
  if (Status s = checkRowStrides(kernel, dims); !s.isOk())
    return s;
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
  params.query = rowsStart(static_cast<const void *>(q.data), q, dims.query);
  params.key = rowsStart(static_cast<const void *>(k.data), k, dims.key);
  params.value = rowsStart(static_cast<const void *>(v.data), v, dims.value);
  params.grad = rowsStart(static_cast<const void *>(grad.data), grad, dims.output);
  params.output =
      output ? rowsStart(static_cast<const void *>(output->data), *output, dims.output)
             : nullptr;
  params.lse = lse ? lse->data : nullptr;
  params.queryGrad = rowsStart(dq.data, dq, dims.query);
  params.keyGrad = rowsStart(dk.data, dk, dims.key);
  params.valueGrad = rowsStart(dv.data, dv, dims.value);
  params.workspace = context.workspace;
  if (context.cudnnAttention) {
    bool ran = false;
    if (Status s = context.cudnnAttention->backward(
            params, context.stream, context.workspace, context.workspaceBytes,
            ran);
        !s.isOk() || ran)
      return std::move(s.addContext(kernel));
  }
  return launchStatus(kernel, launchAttentionGrad(params, context.stream));
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
  return runAttention(kernel, dims, scale, args.inputs[0], args.inputs[1],
                      args.inputs[2], args.outputs[0], lse, context);
}

Status qkvAttention(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "qkv_attention";
  AttentionDims dims;
  double scale = 0;
  const TensorView *lse = nullptr;
  if (Status s = checkQkvAttentionForward(args, kernel, dims, scale, lse);
      !s.isOk())
    return s;
  const TensorView &qkv = args.inputs[0];
  return runAttention(kernel, dims, scale, qkv, qkv, qkv, args.outputs[0], lse,
                      context);
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
  return runAttentionGrad(kernel, dims, scale, args.inputs[0], args.inputs[1],
                          args.inputs[2], args.inputs[3], output, lse,
                          args.outputs[0], args.outputs[1], args.outputs[2],
                          context);
}

Status qkvAttentionGrad(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "qkv_attention_grad";
  AttentionDims dims;
  double scale = 0;
  const TensorView *output = nullptr, *lse = nullptr;
  if (Status s =
          checkQkvAttentionBackward(args, kernel, dims, scale, output, lse);
      !s.isOk())
    return s;
  // Every element of qkv_grad is one head's query, key or value gradient,
  // so the kernels write it whole.
  const TensorView &qkv = args.inputs[0], &qkvGrad = args.outputs[0];
  return runAttentionGrad(kernel, dims, scale, qkv, qkv, qkv, args.inputs[1],
                          output, lse, qkvGrad, qkvGrad, qkvGrad, context);
}

} // namespace zcc::cuda::kernels
