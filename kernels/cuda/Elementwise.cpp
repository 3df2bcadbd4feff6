//===- Elementwise.cpp - Element-wise kernels of the cuda backend ---------===//
//
// Broadcasting arithmetic and comparisons, where, cast, is_nan, the unary
// activations and gelu_grad. The argument checks are the cpu kernels'
// (kernels/cpu/Elementwise.cpp, Grad.cpp), in the same order and with the
// same messages; the device work is in Elementwise.cu.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Kernels.h"

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/KernelSupport.h"
#include "kernels/cuda/ElementwiseLaunch.h"

#include <cstring>

namespace zcc::cuda::kernels {

using namespace cpu::detail;

namespace {

/// checkOperands has limited the rank to kMaxRank == kMaxDeviceRank.
DeviceShape deviceShape(const std::vector<int64_t> &shape) {
  DeviceShape result;
  result.rank = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
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

//===----------------------------------------------------------------------===//
// Broadcasting binary arithmetic and comparisons
//===----------------------------------------------------------------------===//

/// The checks every broadcasting op shares: operands of one element type
/// whose broadcast shape is the result's.
Status checkBroadcastOperands(const char *kernel, const TensorView &lhs,
                              const TensorView &rhs, const TensorView &out) {
  if (Status s = expectSameDType(kernel, "rhs", rhs, "lhs", lhs); !s.isOk())
    return s;
  SmallShape shape;
  if (!broadcastShapes(SmallShape(lhs.shape), SmallShape(rhs.shape), shape))
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "operand shapes %s and %s are not broadcast-compatible",
                       shapeString(lhs.shape).c_str(),
                       shapeString(rhs.shape).c_str());
  return expectShape(kernel, "result", out, shape);
}

BroadcastOperands broadcastOperands(const KernelArgs &args) {
  BroadcastOperands operands;
  operands.outShape = deviceShape(args.outputs[0].shape);
  operands.output = args.outputs[0].data;
  for (size_t i = 0; i < args.inputs.size() && i < 3; ++i) {
    operands.inShapes[i] = deviceShape(args.inputs[i].shape);
    operands.inputs[i] = args.inputs[i].data;
  }
  return operands;
}

Status binary(const KernelArgs &args, const LaunchContext &context,
              const char *kernel, BinaryOp op) {
  if (Status s = checkOperands(args, kernel, {"lhs", "rhs"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1],
                   &out = args.outputs[0];
  if (Status s = checkBroadcastOperands(kernel, lhs, rhs, out); !s.isOk())
    return s;
  if (Status s = expectSameDType(kernel, "result", out, "lhs", lhs); !s.isOk())
    return s;
  // Division and power are float-only: integer division by zero would trap.
  bool integers = op != BinaryOp::kDiv && op != BinaryOp::kPow;
  bool supported =
      isFloatDType(lhs.dtype) ||
      (integers && (lhs.dtype == plan::I64 || lhs.dtype == plan::I32));
  if (!supported)
    return unsupportedDType(kernel, "lhs", lhs,
                            integers ? "f32, f64, f16, bf16, i64 and i32"
                                     : kFloatDTypeNames);
  return launchStatus(launchBinary(op, elementType(lhs.dtype),
                                   broadcastOperands(args), context.stream),
                      kernel);
}

Status compare(const KernelArgs &args, const LaunchContext &context,
               const char *kernel, CompareOp op) {
  if (Status s = checkOperands(args, kernel, {"lhs", "rhs"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1],
                   &out = args.outputs[0];
  if (Status s = checkBroadcastOperands(kernel, lhs, rhs, out); !s.isOk())
    return s;
  if (Status s = expectDType(kernel, "result", out, plan::BOOL); !s.isOk())
    return s;
  switch (lhs.dtype) {
  case plan::F32:
  case plan::F64:
  case plan::F16:
  case plan::BF16:
  case plan::I64:
  case plan::I32:
  case plan::I8:
  case plan::BOOL:
    break;
  default:
    return unsupportedDType(kernel, "lhs", lhs,
                            "f32, f64, f16, bf16, i64, i32, i8 and bool");
  }
  return launchStatus(launchCompare(op, elementType(lhs.dtype),
                                    broadcastOperands(args), context.stream),
                      kernel);
}

//===----------------------------------------------------------------------===//
// Unary float kernels
//===----------------------------------------------------------------------===//

/// Checks a unary float kernel's operands: one float input and a result of
/// the same type (SameOperandsAndResultType).
Status checkUnaryFloat(const KernelArgs &args, const char *kernel) {
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "input", in); !s.isOk())
    return s;
  if (Status s = expectDType(kernel, "result", out, in.dtype); !s.isOk())
    return s;
  return expectShape(kernel, "result", out, SmallShape(in.shape));
}

Status unaryLaunch(const KernelArgs &args, const LaunchContext &context,
                   const char *kernel, UnaryOp op) {
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  return launchStatus(launchUnary(op, elementType(in.dtype), in.data, out.data,
                                  in.numElements(), context.stream),
                      kernel);
}

Status unary(const KernelArgs &args, const LaunchContext &context,
             const char *kernel, UnaryOp op) {
  if (Status s = checkUnaryFloat(args, kernel); !s.isOk())
    return s;
  return unaryLaunch(args, context, kernel, op);
}

} // namespace

Status add(const KernelArgs &args, const LaunchContext &context) {
  return binary(args, context, "add", BinaryOp::kAdd);
}
Status sub(const KernelArgs &args, const LaunchContext &context) {
  return binary(args, context, "sub", BinaryOp::kSub);
}
Status mul(const KernelArgs &args, const LaunchContext &context) {
  return binary(args, context, "mul", BinaryOp::kMul);
}
Status div(const KernelArgs &args, const LaunchContext &context) {
  return binary(args, context, "div", BinaryOp::kDiv);
}
Status pow(const KernelArgs &args, const LaunchContext &context) {
  return binary(args, context, "pow", BinaryOp::kPow);
}
Status max(const KernelArgs &args, const LaunchContext &context) {
  return binary(args, context, "max", BinaryOp::kMax);
}
Status min(const KernelArgs &args, const LaunchContext &context) {
  return binary(args, context, "min", BinaryOp::kMin);
}

Status equal(const KernelArgs &args, const LaunchContext &context) {
  return compare(args, context, "equal", CompareOp::kEqual);
}
Status less(const KernelArgs &args, const LaunchContext &context) {
  return compare(args, context, "less", CompareOp::kLess);
}
Status greater(const KernelArgs &args, const LaunchContext &context) {
  return compare(args, context, "greater", CompareOp::kGreater);
}

Status where(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "where";
  if (Status s = checkWhereOperands(args, kernel); !s.isOk())
    return s;
  const TensorView &out = args.outputs[0];
  // The branches are selected by bytes, so any element type works.
  return launchStatus(launchWhere(static_cast<int>(dtypeBytes(out.dtype)),
                                  broadcastOperands(args), context.stream),
                      kernel);
}

Status cast(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "cast";
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (Status s = expectShape(kernel, "result", out, SmallShape(in.shape));
      !s.isOk())
    return s;
  int64_t n = in.numElements();
  if (in.dtype == out.dtype) {
    if (n <= 0 || in.data == out.data)
      return Status::ok();
    return launchStatus(
        cudaMemcpyAsync(out.data, in.data,
                        static_cast<size_t>(n) * dtypeBytes(in.dtype),
                        cudaMemcpyDeviceToDevice, context.stream),
        kernel);
  }
  // checkOperands has refused every other element type already.
  if (elementBytes(elementType(in.dtype)) == 0 ||
      elementBytes(elementType(out.dtype)) == 0)
    return kernelError(StatusCode::kUnimplemented, kernel,
                       "cannot cast %s to %s", dtypeName(in.dtype),
                       dtypeName(out.dtype));
  return launchStatus(launchCast(elementType(in.dtype), elementType(out.dtype),
                                 in.data, out.data, n, context.stream),
                      kernel);
}

Status isNan(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "is_nan";
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (Status s = expectDType(kernel, "result", out, plan::BOOL); !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "result", out, SmallShape(in.shape));
      !s.isOk())
    return s;
  if (Status s = expectFloatDType(kernel, "input", in); !s.isOk())
    return s;
  return launchStatus(launchIsNan(elementType(in.dtype), in.data, out.data,
                                  in.numElements(), context.stream),
                      kernel);
}

Status neg(const KernelArgs &args, const LaunchContext &context) {
  return unary(args, context, "neg", UnaryOp::kNeg);
}
Status exp(const KernelArgs &args, const LaunchContext &context) {
  return unary(args, context, "exp", UnaryOp::kExp);
}
Status sqrt(const KernelArgs &args, const LaunchContext &context) {
  return unary(args, context, "sqrt", UnaryOp::kSqrt);
}
Status tanh(const KernelArgs &args, const LaunchContext &context) {
  return unary(args, context, "tanh", UnaryOp::kTanh);
}
Status relu(const KernelArgs &args, const LaunchContext &context) {
  return unary(args, context, "relu", UnaryOp::kRelu);
}
Status sigmoid(const KernelArgs &args, const LaunchContext &context) {
  return unary(args, context, "sigmoid", UnaryOp::kSigmoid);
}
Status log(const KernelArgs &args, const LaunchContext &context) {
  return unary(args, context, "log", UnaryOp::kLog);
}
Status erf(const KernelArgs &args, const LaunchContext &context) {
  return unary(args, context, "erf", UnaryOp::kErf);
}
Status reciprocal(const KernelArgs &args, const LaunchContext &context) {
  return unary(args, context, "reciprocal", UnaryOp::kReciprocal);
}

Status gelu(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "gelu";
  if (Status s = checkUnaryFloat(args, kernel); !s.isOk())
    return s;
  const char *approximate = nullptr;
  if (Status s =
          optionalString(args, kernel, "approximate", "none", approximate);
      !s.isOk())
    return s;
  if (std::strcmp(approximate, "none") == 0)
    return unaryLaunch(args, context, kernel, UnaryOp::kGeluErf);
  if (std::strcmp(approximate, "tanh") == 0)
    return unaryLaunch(args, context, kernel, UnaryOp::kGeluTanh);
  return kernelError(StatusCode::kInvalidArgument, kernel,
                     "approximate must be \"none\" or \"tanh\", got \"%s\"",
                     approximate);
}

Status dropout(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "dropout";
  DropoutAttributes attributes;
  if (Status s = checkDropoutOperands(args, kernel, attributes); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  return launchStatus(launchDropout(elementType(in.dtype), in.data,
                                    args.inputs[1].as<const int64_t>(), attributes.key,
                                    attributes.sampleElements, attributes.ratio, out.data,
                                    in.numElements(), context.stream),
                      kernel);
}

Status geluGrad(const KernelArgs &args, const LaunchContext &context) {
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
  return launchStatus(launchGeluGrad(tanhForm, elementType(input.dtype),
                                     input.data, grad.data, result.data,
                                     input.numElements(), context.stream),
                      kernel);
}

} // namespace zcc::cuda::kernels
