//===- NeuralOps.cpp - Linear algebra, normalisation, reductions, losses --===//
//
// MatMul, Gemm, Softmax, LogSoftmax, LayerNormalization, ReduceMean,
// ReduceSum, ReduceMax, SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss.
//
//===----------------------------------------------------------------------===//

#include "compiler/Import/Onnx/ImporterContext.h"

using namespace mlir;

namespace zcc::onnx_import {
namespace {

Value scalarConstant(NodeContext &ctx, Type element, double value) {
  auto type = RankedTensorType::get({}, element);
  return ctx.builder().create<zgraph::ConstantOp>(
      ctx.loc(), Literal::ofFloats(type, {value}).toAttr());
}

FailureOr<SmallVector<int64_t>> matmulShape(NodeContext &ctx, ArrayRef<int64_t> lhs,
                                            ArrayRef<int64_t> rhs) {
  if (lhs.empty() || rhs.empty()) {
    (void)ctx.error("operands must have rank at least 1");
    return failure();
  }
  SmallVector<int64_t> a(lhs), b(rhs);
  if (lhs.size() == 1)
    a.insert(a.begin(), 1);
  if (rhs.size() == 1)
    b.push_back(1);
  if (a.back() != b[b.size() - 2]) {
    (void)ctx.error("contracting dimensions differ: " + Twine(a.back()) + " vs " +
                    Twine(b[b.size() - 2]));
    return failure();
  }
  FailureOr<SmallVector<int64_t>> batch =
      broadcastShape(ArrayRef<int64_t>(a).drop_back(2), ArrayRef<int64_t>(b).drop_back(2));
  if (failed(batch)) {
    (void)ctx.error("batch dimensions are not broadcast-compatible");
    return failure();
  }
  SmallVector<int64_t> shape = *batch;
  if (lhs.size() != 1)
    shape.push_back(a[a.size() - 2]);
  if (rhs.size() != 1)
    shape.push_back(b.back());
  return shape;
}

LogicalResult importMatMul(NodeContext &ctx) {
  RankedTensorType lhs = ctx.inputType(0), rhs = ctx.inputType(1);
  if (lhs.getElementType() != rhs.getElementType() || !isa<FloatType>(lhs.getElementType()))
    return ctx.error("expects floating-point operands of one element type");
  FailureOr<SmallVector<int64_t>> shape = matmulShape(ctx, lhs.getShape(), rhs.getShape());
  if (failed(shape))
    return failure();
  ctx.setOutput(0, ctx.create<zgraph::MatMulOp>(
                       RankedTensorType::get(*shape, lhs.getElementType()), ctx.input(0),
                       ctx.input(1)));
  return success();
}

Value transpose2d(NodeContext &ctx, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  auto resultType = RankedTensorType::get({type.getDimSize(1), type.getDimSize(0)},
                                          type.getElementType());
  return ctx.create<zgraph::TransposeOp>(resultType, value,
                                         ctx.builder().getDenseI64ArrayAttr({1, 0}));
}

LogicalResult importGemm(NodeContext &ctx) {
  RankedTensorType aType = ctx.inputType(0), bType = ctx.inputType(1);
  if (aType.getRank() != 2 || bType.getRank() != 2)
    return ctx.error("A and B must be matrices");
  if (aType.getElementType() != bType.getElementType() ||
      !isa<FloatType>(aType.getElementType()))
    return ctx.error("A and B must be floating-point of one element type");
  Type element = aType.getElementType();
  Value a = ctx.input(0), b = ctx.input(1);
  if (ctx.intAttr("transA", 0))
    a = transpose2d(ctx, a);
  if (ctx.intAttr("transB", 0))
    b = transpose2d(ctx, b);
  auto aT = cast<RankedTensorType>(a.getType()), bT = cast<RankedTensorType>(b.getType());
  if (aT.getDimSize(1) != bT.getDimSize(0))
    return ctx.error("contracting dimensions differ: " + Twine(aT.getDimSize(1)) + " vs " +
                     Twine(bT.getDimSize(0)));
  auto resultType = RankedTensorType::get({aT.getDimSize(0), bT.getDimSize(1)}, element);
  Value result = ctx.create<zgraph::MatMulOp>(resultType, a, b);
  float alpha = ctx.floatAttr("alpha", 1.0f), beta = ctx.floatAttr("beta", 1.0f);
  if (alpha != 1.0f)
    result = ctx.create<zgraph::MulOp>(resultType, result, scalarConstant(ctx, element, alpha));
  if (ctx.hasInput(2) && beta != 0.0f) {
    RankedTensorType cType = ctx.inputType(2);
    FailureOr<SmallVector<int64_t>> shape = broadcastShape(resultType.getShape(), cType.getShape());
    if (failed(shape) || ArrayRef<int64_t>(*shape) != resultType.getShape())
      return ctx.error("C does not broadcast to the product's shape");
    Value c = ctx.input(2);
    if (beta != 1.0f)
      c = ctx.create<zgraph::MulOp>(cType, c, scalarConstant(ctx, element, beta));
    result = ctx.create<zgraph::AddOp>(resultType, result, c);
  }
  ctx.setOutput(0, result);
  return success();
}

template <typename OpTy> LogicalResult importSoftmaxLike(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  std::optional<int64_t> axis = normalizeAxis(ctx.intAttr("axis", -1), type.getRank());
  if (!axis)
    return ctx.error("axis is out of range");
  if (!isa<FloatType>(type.getElementType()))
    return ctx.error("expects a floating-point input");
  ctx.setOutput(0, ctx.create<OpTy>(type, ctx.input(0), *axis));
  return success();
}

LogicalResult importLayerNorm(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  std::optional<int64_t> axis = normalizeAxis(ctx.intAttr("axis", -1), type.getRank());
  if (!axis)
    return ctx.error("axis is out of range");
  if (ctx.hasOutput(1) || ctx.hasOutput(2))
    return ctx.error("the Mean and InvStdDev outputs are not supported");
  auto normalized = RankedTensorType::get(type.getShape().drop_front(*axis),
                                          type.getElementType());
  if (ctx.inputType(1) != normalized)
    return ctx.error("Scale must have the normalised shape");
  Value bias;
  if (ctx.hasInput(2)) {
    if (ctx.inputType(2) != normalized)
      return ctx.error("B must have the normalised shape");
    bias = ctx.input(2);
  } else {
    bias = ctx.builder().create<zgraph::ConstantOp>(
        ctx.loc(), Literal::ofFloats(normalized, std::vector<double>(
                                                     normalized.getNumElements(), 0.0))
                       .toAttr());
  }
  double epsilon = ctx.floatAttr("epsilon", 1e-5f);
  ctx.setOutput(0, ctx.create<zgraph::LayerNormOp>(
                       type, ctx.input(0), ctx.input(1), bias,
                       ctx.builder().getI64IntegerAttr(*axis),
                       ctx.builder().getF64FloatAttr(epsilon)));
  return success();
}

enum class Reduction { Sum, Mean, Max };

OpImporterFn reduce(Reduction kind) {
  return [kind](NodeContext &ctx) -> LogicalResult {
    RankedTensorType type = ctx.inputType(0);
    FailureOr<std::vector<int64_t>> givenAxes =
        ctx.optionalConstantInts(1, "axes", ctx.intsAttr("axes"));
    if (failed(givenAxes))
      return failure();
    std::vector<int64_t> axes = *givenAxes;
    bool keepdims = ctx.intAttr("keepdims", 1) != 0;
    if (axes.empty()) {
      if (ctx.intAttr("noop_with_empty_axes", 0)) {
        ctx.setOutput(0, ctx.input(0));
        return success();
      }
      for (int64_t d = 0; d < type.getRank(); ++d)
        axes.push_back(d);
    }
    SmallVector<int64_t> normalized;
    for (int64_t axis : axes) {
      std::optional<int64_t> d = normalizeAxis(axis, type.getRank());
      if (!d || llvm::is_contained(normalized, *d))
        return ctx.error("axis " + Twine(axis) + " is out of range or repeated");
      normalized.push_back(*d);
    }
    llvm::sort(normalized);
    SmallVector<int64_t> shape;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (!llvm::is_contained(normalized, d))
        shape.push_back(type.getDimSize(d));
      else if (keepdims)
        shape.push_back(1);
    }
    auto resultType = RankedTensorType::get(shape, type.getElementType());
    Builder &b = ctx.builder();
    DenseI64ArrayAttr axesAttr = b.getDenseI64ArrayAttr(normalized);
    BoolAttr keepAttr = b.getBoolAttr(keepdims);
    Value input = ctx.input(0);
    Value result;
    switch (kind) {
    case Reduction::Sum:
      result = ctx.create<zgraph::ReduceSumOp>(resultType, input, axesAttr, keepAttr);
      break;
    case Reduction::Mean:
      result = ctx.create<zgraph::ReduceMeanOp>(resultType, input, axesAttr, keepAttr);
      break;
    case Reduction::Max:
      result = ctx.create<zgraph::ReduceMaxOp>(resultType, input, axesAttr, keepAttr);
      break;
    }
    ctx.setOutput(0, result);
    return success();
  };
}

template <typename LossOp> LogicalResult importClassLoss(NodeContext &ctx) {
  RankedTensorType scores = ctx.inputType(0), labels = ctx.inputType(1);
  if (ctx.hasInput(2))
    return ctx.error("class weights are not supported yet");
  if (!isa<FloatType>(scores.getElementType()))
    return ctx.error("scores must be floating-point");
  if (!isa<IntegerType>(labels.getElementType()) || labels.getElementType().isInteger(1) ||
      labels.getElementType().isInteger(8))
    return ctx.error("labels must be int32 or int64");
  std::string reduction = ctx.stringAttr("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return ctx.error("reduction must be \"mean\", \"sum\" or \"none\", got \"" + reduction + "\"");
  if (scores.getRank() < 2)
    return ctx.error("scores must be [N, C] or [N, C, d1, ...]");
  SmallVector<int64_t> labelShape{scores.getDimSize(0)};
  llvm::append_range(labelShape, scores.getShape().drop_front(2));
  if (labels.getShape() != ArrayRef<int64_t>(labelShape))
    return ctx.error("labels must have the scores' shape without the class axis");
  auto lossType = RankedTensorType::get(
      reduction == "none" ? ArrayRef<int64_t>(labelShape) : ArrayRef<int64_t>(),
      scores.getElementType());
  IntegerAttr ignoreIndex;
  if (ctx.hasAttr("ignore_index"))
    ignoreIndex = ctx.builder().getI64IntegerAttr(ctx.intAttr("ignore_index", -100));
  ctx.setOutput(0, ctx.create<LossOp>(lossType, ctx.input(0), ctx.input(1), ignoreIndex,
                                      ctx.builder().getStringAttr(reduction)));
  if (ctx.hasOutput(1)) {
    if constexpr (std::is_same_v<LossOp, zgraph::CrossEntropyOp>)
      ctx.setOutput(1, ctx.create<zgraph::LogSoftmaxOp>(scores, ctx.input(0), 1));
    else
      return ctx.error("has one output");
  }
  return success();
}

} // namespace

void addNeuralImporters(std::vector<OpImporter> &table) {
  table.push_back({"MatMul", 13, importMatMul});
  table.push_back({"Gemm", 13, importGemm});
  table.push_back({"Softmax", 13, importSoftmaxLike<zgraph::SoftmaxOp>});
  table.push_back({"LogSoftmax", 13, importSoftmaxLike<zgraph::LogSoftmaxOp>});
  table.push_back({"LayerNormalization", 17, importLayerNorm});
  table.push_back({"ReduceSum", 13, reduce(Reduction::Sum)});
  table.push_back({"ReduceMean", 13, reduce(Reduction::Mean)});
  table.push_back({"ReduceMax", 13, reduce(Reduction::Max)});
  table.push_back({"SoftmaxCrossEntropyLoss", 13, importClassLoss<zgraph::CrossEntropyOp>});
  table.push_back({"NegativeLogLikelihoodLoss", 13, importClassLoss<zgraph::NllLossOp>});
}

} // namespace zcc::onnx_import
