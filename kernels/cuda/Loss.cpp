//===- Loss.cpp - mse_loss, cross_entropy, nll_loss and gradients ---------===//
//
// The host side: the cpu kernels' checks (kernels/cpu/Loss.cpp and
// Grad.cpp), then the launchers of Loss.cu on the context's stream. The one
// check the cpu kernels make that these cannot is checkLabels: it reads
// label values, which are in device memory here. Loss.cu treats an
// out-of-range label as ignored instead (it never reads or writes out of
// bounds).
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/KernelSupport.h"
#include "kernels/cuda/Kernels.h"
#include "kernels/cuda/LossLaunch.h"

namespace zcc::cuda::kernels {

using namespace cpu::detail;

namespace {

LossReduction lossReduction(Reduction reduction) {
  switch (reduction) {
  case Reduction::Mean:
    return LossReduction::kMean;
  case Reduction::Sum:
    return LossReduction::kSum;
  case Reduction::None:
    break;
  }
  return LossReduction::kNone;
}

Status launched(const char *kernel, cudaError_t error) {
  if (error == cudaSuccess)
    return Status::ok();
  return kernelError(StatusCode::kInternal, kernel,
                     "CUDA kernel launch failed: %s",
                     cudaGetErrorString(error));
}

/// The workspace a reduction over the loss positions needs.
Status checkWorkspace(const char *kernel, const LaunchContext &context) {
  size_t available = context.workspace ? context.workspaceBytes : 0;
  if (available >= kLossWorkspaceBytes)
    return Status::ok();
  return kernelError(StatusCode::kResourceExhausted, kernel,
                     "the reduction needs %zu bytes of workspace; the "
                     "workspace has %zu",
                     kLossWorkspaceBytes, available);
}

Status classLoss(const KernelArgs &args, const LaunchContext &context,
                 const char *kernel, bool logSoftmax) {
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
  if (reduction != Reduction::None)
    if (Status s = checkWorkspace(kernel, context); !s.isOk())
      return s;

  ClassLossParams params;
  params.type = elementType(in);
  params.labelType = elementType(labels);
  params.input = in.data;
  params.labels = labels.data;
  params.loss = out.data;
  params.batch = in.shape[0];
  params.classes = in.shape[1];
  params.inner =
      labelShape.numElements() / (params.batch == 0 ? 1 : params.batch);
  params.logSoftmax = logSoftmax;
  params.hasIgnore = hasIgnore;
  params.ignoreIndex = ignoreIndex;
  params.reduction = lossReduction(reduction);
  params.workspace = context.workspace;
  return launched(kernel, launchClassLoss(params, context.stream));
}

Status classLossGrad(const KernelArgs &args, const LaunchContext &context,
                     const char *kernel, bool logSoftmax) {
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
  Reduction reduction;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
  if (Status s = readClassLossAttributes(args, kernel, reduction, hasIgnore,
                                         ignoreIndex);
      !s.isOk())
    return s;
  if (Status s =
          expectShape(kernel, "grad", grad,
                      reduction == Reduction::None ? labelShape : SmallShape());
      !s.isOk())
    return s;
  if (reduction == Reduction::Mean)
    if (Status s = checkWorkspace(kernel, context); !s.isOk())
      return s;

  ClassLossGradParams params;
  params.type = elementType(input);
  params.resultType = elementType(result);
  params.labelType = elementType(labels);
  params.input = input.data;
  params.labels = labels.data;
  params.grad = grad.data;
  params.result = result.data;
  params.batch = input.shape[0];
  params.classes = input.shape[1];
  params.inner =
      labelShape.numElements() / (params.batch == 0 ? 1 : params.batch);
  params.logSoftmax = logSoftmax;
  params.hasIgnore = hasIgnore;
  params.ignoreIndex = ignoreIndex;
  params.reduction = lossReduction(reduction);
  params.workspace = context.workspace;
  return launched(kernel, launchClassLossGrad(params, context.stream));
}

} // namespace

Status mseLoss(const KernelArgs &args, const LaunchContext &context) {
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
  if (Status s = checkWorkspace(kernel, context); !s.isOk())
    return s;
  MseLossParams params;
  params.type = elementType(prediction);
  params.prediction = prediction.data;
  params.target = target.data;
  params.loss = out.data;
  params.count = prediction.numElements();
  params.workspace = context.workspace;
  return launched(kernel, launchMseLoss(params, context.stream));
}

Status crossEntropy(const KernelArgs &args, const LaunchContext &context) {
  return classLoss(args, context, "cross_entropy", /*logSoftmax=*/true);
}

Status nllLoss(const KernelArgs &args, const LaunchContext &context) {
  return classLoss(args, context, "nll_loss", /*logSoftmax=*/false);
}

Status mseLossGrad(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "mse_loss_grad";
  if (Status s = checkOperands(args, kernel, {"prediction", "target", "grad"},
                               {"result"});
      !s.isOk())
    return s;
  const TensorView &prediction = args.inputs[0], &target = args.inputs[1],
                   &grad = args.inputs[2], &result = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "prediction", prediction); !s.isOk())
    return s;
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
  MseLossGradParams params;
  params.type = elementType(prediction);
  params.prediction = prediction.data;
  params.target = target.data;
  params.grad = grad.data;
  params.result = result.data;
  params.count = prediction.numElements();
  return launched(kernel, launchMseLossGrad(params, context.stream));
}

Status crossEntropyGrad(const KernelArgs &args, const LaunchContext &context) {
  return classLossGrad(args, context, "cross_entropy_grad",
                       /*logSoftmax=*/true);
}

Status nllLossGrad(const KernelArgs &args, const LaunchContext &context) {
  return classLossGrad(args, context, "nll_loss_grad", /*logSoftmax=*/false);
}

} // namespace zcc::cuda::kernels
