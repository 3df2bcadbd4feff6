//===- Optimizer.cpp - Gradient accumulation and optimizer updates --------===//
//
// The cuda twins of kernels/cpu/Optimizer.cpp: the same operands, attributes
// and checks, then one launch (two for sum_squares) from Optimizer.cu.
//
// The step's scalars (an f64[8] the executor writes each step) stay in
// device memory: the kernels read them there, so the host checks their type
// and shape but cannot refuse a step below 1 as the cpu does; the device
// leaves the state alone for such a step instead (Optimizer.cu).
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Kernels.h"

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/KernelSupport.h"
#include "kernels/cuda/OptimizerLaunch.h"

#include <cstring>
#include <string>

namespace zcc::cuda::kernels {

using namespace cpu::detail;

namespace {

constexpr int64_t kScalarCount = 8;

/// The cpu's readScalars without the value checks (see the file comment).
Status checkScalars(const char *kernel, const TensorView &view) {
  if (Status s = expectDType(kernel, "scalars", view, plan::F64); !s.isOk())
    return s;
  SmallShape shape;
  shape.push_back(kScalarCount);
  return expectShape(kernel, "scalars", view, shape);
}


/// The bits of `value` rounded to T as the cpu's fill rounds it; `bytes`
/// gets T's size.
template <typename T> uint64_t elementBits(double value, int &bytes) {
  T element = storeDouble<T>(value);
  static_assert(sizeof(T) <= sizeof(uint64_t));
  uint64_t bits = 0;
  std::memcpy(&bits, &element, sizeof(T));
  bytes = static_cast<int>(sizeof(T));
  return bits;
}

} // namespace

Status accumulate(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "accumulate";
  if (Status s = checkOperands(args, kernel, {"value"}, {"target"}); !s.isOk())
    return s;
  const TensorView &value = args.inputs[0], &target = args.outputs[0];
  if (target.dtype != plan::F32 && target.dtype != plan::F64)
    return unsupportedDType(kernel, "target", target, "f32 and f64");
  if (Status s = expectFloatDType(kernel, "value", value); !s.isOk())
    return s;
  if (Status s = expectSameShape(kernel, "value", value, "target", target);
      !s.isOk())
    return s;
  AccumulateParams params;
  params.targetType = elementType(target.dtype);
  params.valueType = elementType(value.dtype);
  params.target = target.data;
  params.value = value.data;
  params.count = target.numElements();
  return launchStatus(kernel, launchAccumulate(params, context.stream));
}

namespace {

/// The value rounded to a (checked) fill target's element type on the host
/// exactly as the cpu rounds it: the device copies the bits.
void fillBits(const TensorView &target, double value, uint64_t &bits,
              int &bytes) {
  switch (target.dtype) {
  case plan::F32:
    bits = elementBits<float>(value, bytes);
    break;
  case plan::F64:
    bits = elementBits<double>(value, bytes);
    break;
  case plan::F16:
    bits = elementBits<cpu::Half>(value, bytes);
    break;
  default:
    bits = elementBits<cpu::BFloat16>(value, bytes);
    break;
  }
}

/// A multi-tensor fill (several checked targets): one launch a
/// kFillTensorsPerLaunch targets.
Status multiFill(const KernelArgs &args, double value,
                 const LaunchContext &context) {
  const char *kernel = "fill";
  size_t members = args.outputs.size();
  FillTensor chunk[kFillTensorsPerLaunch];
  int chunkSize = 0;
  for (size_t m = 0; m <= members; ++m) {
    if (chunkSize == kFillTensorsPerLaunch || (m == members && chunkSize > 0)) {
      if (Status s = launchStatus(
              kernel, launchMultiFill(chunk, chunkSize, context.stream));
          !s.isOk())
        return s;
      chunkSize = 0;
    }
    if (m == members)
      break;
    const TensorView &target = args.outputs[m];
    if (target.numElements() == 0)
      continue;
    FillTensor &t = chunk[chunkSize++];
    t.pattern = 0;
    fillBits(target, value, t.pattern, t.elementBytes);
    t.target = target.data;
    t.count = target.numElements();
  }
  return Status::ok();
}

} // namespace

Status fill(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "fill";
  double value = 0;
  if (Status s = checkFillOperands(args, kernel, value); !s.isOk())
    return s;
  if (args.outputs.size() > 1)
    return multiFill(args, value, context);
  const TensorView &target = args.outputs[0];
  uint64_t bits = 0;
  int bytes = 0;
  fillBits(target, value, bits, bytes);
  int64_t count = target.numElements();
  if (count == 0)
    return Status::ok();
  if (bits == 0)
    return launchStatus(kernel,
                        cudaMemsetAsync(target.data, 0,
                                        static_cast<size_t>(count) * bytes,
                                        context.stream));
  return launchStatus(kernel, launchFillPattern(target.data, bytes, bits, count,
                                                context.stream));
}

Status sumSquares(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "sum_squares";
  if (Status s = checkVariadicOperands(args, kernel, 1, "inputs", "result");
      !s.isOk())
    return s;
  const TensorView &result = args.outputs[0];
  if (Status s = expectDType(kernel, "result", result, plan::F64); !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "result", result, SmallShape()); !s.isOk())
    return s;
  for (size_t t = 0; t < args.inputs.size(); ++t)
    if (!isFloatDType(args.inputs[t].dtype))
      return kernelError(StatusCode::kUnimplemented, kernel,
                         "input #%zu has element type %s; this kernel "
                         "handles %s",
                         t, dtypeName(args.inputs[t].dtype), kFloatDTypeNames);

  // Partial sums in operand order, then one block adds them in order: a
  // fixed order, so the norm is a function of the gradients alone.
  int64_t partialCount = 0;
  for (const TensorView &input : args.inputs)
    partialCount += sumSquaresPartialCount(input.numElements());
  int64_t capacity =
      static_cast<int64_t>(context.workspaceBytes / sizeof(double));
  if (partialCount > capacity)
    return kernelError(StatusCode::kResourceExhausted, kernel,
                       "%lld partial sums need %lld bytes of workspace, more "
                       "than the %zu available",
                       static_cast<long long>(partialCount),
                       static_cast<long long>(partialCount * 8),
                       context.workspaceBytes);
  auto *partials = static_cast<double *>(context.workspace);
  SumSquaresInput chunk[kSumSquaresInputsPerLaunch];
  int chunkSize = 0;
  int64_t first = 0, chunkFirst = 0;
  for (size_t t = 0; t <= args.inputs.size(); ++t) {
    bool last = t == args.inputs.size();
    if (chunkSize == kSumSquaresInputsPerLaunch || (last && chunkSize > 0)) {
      if (Status s = launchStatus(
              kernel, launchSumSquaresPartials(chunk, chunkSize, partials,
                                               chunkFirst, context.stream));
          !s.isOk())
        return s;
      chunkSize = 0;
      chunkFirst = first;
    }
    if (last)
      break;
    const TensorView &input = args.inputs[t];
    chunk[chunkSize].data = input.data;
    chunk[chunkSize].count = input.numElements();
    chunk[chunkSize].type = elementType(input.dtype);
    ++chunkSize;
    first += sumSquaresPartialCount(input.numElements());
  }
  return launchStatus(kernel, launchSumSquaresFinal(partials, partialCount,
                                                    result.as<double>(),
                                                    context.stream));
}

namespace {

/// A multi-tensor adamw (as the cpu kernel's): every tensor is checked, all
/// of one element type, before any launch; then one launch a
/// kAdamwTensorsPerLaunch tensors.
Status multiAdamw(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "adamw";
  size_t members = 0;
  bool copies = false;
  if (Status s = checkMultiAdamwOperands(args, kernel, members, copies); !s.isOk())
    return s;
  const size_t stride = copies ? 4 : 3;
  const ElementType copyType =
      copies ? elementType(args.outputs[3].dtype) : ElementType::kUnspecified;
  const TensorView &scalars = args.inputs.back();
  if (Status s = checkScalars(kernel, scalars); !s.isOk())
    return s;
  bool decoupled = true, biasCorrection = true;
  if (Status s = optionalBool(args, kernel, "adam_w_mode", true, decoupled);
      !s.isOk())
    return s;
  if (Status s = optionalBool(args, kernel, "bias_correction", true, biasCorrection);
      !s.isOk())
    return s;
  AdamwTensor chunk[kAdamwTensorsPerLaunch];
  int chunkSize = 0;
  for (size_t m = 0; m <= members; ++m) {
    if (chunkSize == kAdamwTensorsPerLaunch || (m == members && chunkSize > 0)) {
      if (Status s = launchStatus(
              kernel, launchMultiAdamw(chunk, chunkSize,
                                       elementType(args.inputs[0].dtype),
                                       copyType, scalars.as<const double>(),
                                       decoupled, biasCorrection, context.stream));
          !s.isOk())
        return s;
      chunkSize = 0;
    }
    if (m == members)
      break;
    const TensorView *in = &args.inputs[4 * m];
    const TensorView *out = &args.outputs[stride * m];
    if (in[0].numElements() == 0)
      continue;
    AdamwTensor &t = chunk[chunkSize++];
    t.param = in[0].data;
    t.grad = in[1].data;
    t.expAvg = in[2].data;
    t.expAvgSq = in[3].data;
    t.paramOut = out[0].data;
    t.expAvgOut = out[1].data;
    t.expAvgSqOut = out[2].data;
    t.count = in[0].numElements();
    t.copy = copies ? out[3].data : nullptr;
  }
  return Status::ok();
}

} // namespace

Status adamw(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "adamw";
  // Several tensors, or one with its 16-bit copy: the multi-tensor kernel.
  if (args.inputs.size() != 5 || args.outputs.size() == 4)
    return multiAdamw(args, context);
  if (Status s = checkOptimizerOperands(
          args, kernel, {"param", "grad", "exp_avg", "exp_avg_sq", "scalars"},
          {"new_param", "new_exp_avg", "new_exp_avg_sq"}, /*scalarsIndex=*/4);
      !s.isOk())
    return s;
  if (Status s = checkScalars(kernel, args.inputs[4]); !s.isOk())
    return s;
  bool decoupled = true, biasCorrection = true;
  if (Status s = optionalBool(args, kernel, "adam_w_mode", true, decoupled);
      !s.isOk())
    return s;
  if (Status s = optionalBool(args, kernel, "bias_correction", true, biasCorrection);
      !s.isOk())
    return s;
  AdamwParams params;
  params.type = elementType(args.inputs[0].dtype);
  params.param = args.inputs[0].data;
  params.grad = args.inputs[1].data;
  params.expAvg = args.inputs[2].data;
  params.expAvgSq = args.inputs[3].data;
  params.scalars = args.inputs[4].as<const double>();
  params.paramOut = args.outputs[0].data;
  params.expAvgOut = args.outputs[1].data;
  params.expAvgSqOut = args.outputs[2].data;
  params.count = args.inputs[0].numElements();
  params.decoupled = decoupled;
  params.biasCorrection = biasCorrection;
  return launchStatus(kernel, launchAdamw(params, context.stream));
}

Status adagrad(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "adagrad";
  if (Status s = checkOptimizerOperands(args, kernel, {"param", "grad", "sum", "scalars"},
                                        {"new_param", "new_sum"}, /*scalarsIndex=*/3);
      !s.isOk())
    return s;
  if (Status s = checkScalars(kernel, args.inputs[3]); !s.isOk())
    return s;
  AdagradParams params;
  if (findAttr(args, "lr_decay"))
    if (Status s = requiredFloat(args, kernel, "lr_decay", params.lrDecay); !s.isOk())
      return s;
  params.type = elementType(args.inputs[0].dtype);
  params.param = args.inputs[0].data;
  params.grad = args.inputs[1].data;
  params.sum = args.inputs[2].data;
  params.scalars = args.inputs[3].as<const double>();
  params.paramOut = args.outputs[0].data;
  params.sumOut = args.outputs[1].data;
  params.count = args.inputs[0].numElements();
  return launchStatus(kernel, launchAdagrad(params, context.stream));
}

namespace {
/// A lamb_moments' or lamb_step's attributes into `params`.
Status readLambParams(const KernelArgs &args, const char *kernel, LambParams &params) {
  LambOptions options;
  ZCC_RETURN_IF_FAILED(readLambOptions(args, kernel, options));
  params.type = elementType(args.inputs[0].dtype);
  params.count = args.inputs[0].numElements();
  params.maxCoeff = options.maxCoeff;
  params.minCoeff = options.minCoeff;
  params.biasCorrection = options.biasCorrection;
  params.epsInsideSqrt = options.epsInsideSqrt;
  return Status::ok();
}
} // namespace

Status lambMoments(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "lamb_moments";
  ZCC_RETURN_IF_FAILED(checkLambMomentsOperands(args, kernel));
  ZCC_RETURN_IF_FAILED(checkScalars(kernel, args.inputs[4]));
  if (context.workspaceBytes < kLambWorkspaceBytes)
    return kernelError(StatusCode::kResourceExhausted, kernel,
                       "its partial sums need %zu bytes of workspace, more than the %zu "
                       "available",
                       kLambWorkspaceBytes, context.workspaceBytes);
  LambParams params;
  ZCC_RETURN_IF_FAILED(readLambParams(args, kernel, params));
  params.param = args.inputs[0].data;
  params.grad = args.inputs[1].data;
  params.expAvg = args.inputs[2].data;
  params.expAvgSq = args.inputs[3].data;
  params.scalars = args.inputs[4].as<const double>();
  params.expAvgOut = args.outputs[0].data;
  params.expAvgSqOut = args.outputs[1].data;
  params.squares = args.outputs[2].as<double>();
  return launchStatus(kernel, launchLambMoments(params, context.workspace, context.stream));
}

Status lambStep(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "lamb_step";
  ZCC_RETURN_IF_FAILED(checkLambStepOperands(args, kernel));
  ZCC_RETURN_IF_FAILED(checkScalars(kernel, args.inputs[3]));
  LambParams params;
  ZCC_RETURN_IF_FAILED(readLambParams(args, kernel, params));
  params.param = args.inputs[0].data;
  params.expAvg = args.inputs[1].data;
  params.expAvgSq = args.inputs[2].data;
  params.scalars = args.inputs[3].as<const double>();
  params.squares = const_cast<double *>(args.inputs[4].as<const double>());
  params.paramOut = args.outputs[0].data;
  return launchStatus(kernel, launchLambStep(params, context.stream));
}

Status lion(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "lion";
  if (Status s = checkOptimizerOperands(args, kernel, {"param", "grad", "exp_avg", "scalars"},
                                        {"new_param", "new_exp_avg"}, /*scalarsIndex=*/3);
      !s.isOk())
    return s;
  if (Status s = checkScalars(kernel, args.inputs[3]); !s.isOk())
    return s;
  LionParams params;
  params.type = elementType(args.inputs[0].dtype);
  params.param = args.inputs[0].data;
  params.grad = args.inputs[1].data;
  params.expAvg = args.inputs[2].data;
  params.scalars = args.inputs[3].as<const double>();
  params.paramOut = args.outputs[0].data;
  params.expAvgOut = args.outputs[1].data;
  params.count = args.inputs[0].numElements();
  return launchStatus(kernel, launchLion(params, context.stream));
}

Status sgd(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "sgd";
  if (Status s = checkOptimizerOperands(
          args, kernel, {"param", "grad", "momentum_buffer", "scalars"},
          {"new_param", "new_momentum_buffer"}, /*scalarsIndex=*/3);
      !s.isOk())
    return s;
  if (Status s = checkScalars(kernel, args.inputs[3]); !s.isOk())
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
  SgdParams params;
  params.type = elementType(args.inputs[0].dtype);
  params.param = args.inputs[0].data;
  params.grad = args.inputs[1].data;
  params.buffer = args.inputs[2].data;
  params.scalars = args.inputs[3].as<const double>();
  params.paramOut = args.outputs[0].data;
  params.bufferOut = args.outputs[1].data;
  params.count = args.inputs[0].numElements();
  params.dampening = dampening;
  params.nesterov = nesterov;
  return launchStatus(kernel, launchSgd(params, context.stream));
}

} // namespace zcc::cuda::kernels
