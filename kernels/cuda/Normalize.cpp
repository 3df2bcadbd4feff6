//===- Normalize.cpp - softmax, log_softmax, layer_norm and gradients -----===//
//
// The host side: the cpu kernels' checks (kernels/cpu/Normalize.cpp and
// Grad.cpp), then one launcher call of Normalize.cu on the context's stream.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/KernelSupport.h"
#include "kernels/cuda/Kernels.h"
#include "kernels/cuda/NormalizeLaunch.h"

#include <utility>

namespace zcc::cuda::kernels {

using namespace cpu::detail;

namespace {

Status launched(const char *kernel, cudaError_t error) {
  if (error == cudaSuccess)
    return Status::ok();
  return kernelError(StatusCode::kInternal, kernel,
                     "CUDA kernel launch failed: %s",
                     cudaGetErrorString(error));
}

Status softmaxImpl(const KernelArgs &args, const LaunchContext &context,
                   const char *kernel, bool logForm) {
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
  SoftmaxParams params;
  params.type = elementType(in);
  params.input = in.data;
  params.result = out.data;
  params.outer = layout.outer;
  params.length = layout.length;
  params.inner = layout.inner;
  params.logForm = logForm;
  return launched(kernel, launchSoftmax(params, context.stream));
}

Status softmaxGradImpl(const KernelArgs &args, const LaunchContext &context,
                       const char *kernel, bool logForm) {
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
  SoftmaxGradParams params;
  params.type = elementType(output);
  params.output = output.data;
  params.grad = grad.data;
  params.result = result.data;
  params.outer = layout.outer;
  params.length = layout.length;
  params.inner = layout.inner;
  params.logForm = logForm;
  return launched(kernel, launchSoftmaxGrad(params, context.stream));
}

} // namespace

Status softmax(const KernelArgs &args, const LaunchContext &context) {
  return softmaxImpl(args, context, "softmax", /*logForm=*/false);
}

Status logSoftmax(const KernelArgs &args, const LaunchContext &context) {
  return softmaxImpl(args, context, "log_softmax", /*logForm=*/true);
}

Status softmaxGrad(const KernelArgs &args, const LaunchContext &context) {
  return softmaxGradImpl(args, context, "softmax_grad", /*logForm=*/false);
}

Status logSoftmaxGrad(const KernelArgs &args, const LaunchContext &context) {
  return softmaxGradImpl(args, context, "log_softmax_grad", /*logForm=*/true);
}

Status layerNorm(const KernelArgs &args, const LaunchContext &context) {
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
  LayerNormParams params;
  params.type = elementType(in);
  params.input = in.data;
  params.scale = scale.data;
  params.bias = bias.data;
  params.result = out.data;
  params.rows = shape.numElements() / columns;
  params.columns = columns;
  params.epsilon = epsilon;
  return launched(kernel, launchLayerNorm(params, context.stream));
}

Status layerNormGrad(const KernelArgs &args, const LaunchContext &context) {
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
  LayerNormGradParams params;
  params.type = elementType(input);
  params.input = input.data;
  params.scale = scale.data;
  params.grad = grad.data;
  params.addend = addend ? addend->data : nullptr;
  params.inputGrad = inputGrad.data;
  params.scaleGrad = scaleGrad.data;
  params.biasGrad = biasGrad.data;
  params.rows = shape.numElements() / columns;
  params.columns = columns;
  params.epsilon = epsilon;
  params.chunks =
      planLayerNormGrad(params.type, params.rows, columns,
                        context.workspace ? context.workspaceBytes : 0);
  if (params.chunks == 0)
    return kernelError(
        StatusCode::kResourceExhausted, kernel,
        "%lld rows of %lld columns need %zu bytes of workspace for the "
        "row statistics and parameter sums; the workspace has %zu",
        static_cast<long long>(params.rows), static_cast<long long>(columns),
        layerNormGradWorkspaceBytes(params.type, params.rows, columns, 1),
        context.workspace ? context.workspaceBytes : size_t{0});
  params.workspace = context.workspace;
  return launched(kernel, launchLayerNormGrad(params, context.stream));
}

} // namespace zcc::cuda::kernels
