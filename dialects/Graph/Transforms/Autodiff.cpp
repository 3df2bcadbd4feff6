//===- Autodiff.cpp - Reverse-mode differentiation of the forward graph ---===//
//
// Turns `@main` (the imported forward graph with its loss) into
// `@micro_step`: the forward graph, then the backward graph built op by op
// in reverse order, seeded with the loss scale, each trainable parameter's
// gradient added into its `grad` state as soon as it is complete. Gradients
// of a value used more than once are summed. Only values that depend on a
// trainable parameter are differentiated.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <functional>

namespace zcc::zgraph {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "dialects/Graph/Transforms/Passes.h.inc"
} // namespace zcc::zgraph

using namespace mlir;

namespace zcc::zgraph {
namespace {

RankedTensorType tensorType(Value value) { return cast<RankedTensorType>(value.getType()); }

bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// Builds the backward ops of one function.
class GradientBuilder {
public:
  GradientBuilder(OpBuilder &builder) : builder(builder) {}

  /// Adds `grad` to the gradient of `value`.
  void addGradient(Value value, Value grad) {
    if (!grad)
      return;
    auto it = gradients.find(value);
    if (it == gradients.end()) {
      gradients[value] = grad;
      return;
    }
    it->second = binary<AddOp>(it->second, grad);
  }

  Value gradientOf(Value value) const { return gradients.lookup(value); }

  /// Emits the gradient rule of `op`, given the gradients of its results.
  LogicalResult differentiate(Operation *op, const llvm::DenseSet<Value> &needed);

  OpBuilder &builder;
  Location loc = UnknownLoc::get(builder.getContext());

private:
  llvm::DenseMap<Value, Value> gradients;

  Value scalar(Type elementType, double value) {
    auto type = RankedTensorType::get({}, elementType);
    Attribute attr = builder.getFloatAttr(elementType, value);
    return builder.create<ConstantOp>(loc, DenseElementsAttr::get(type, attr));
  }

  template <typename Op> Value binary(Value lhs, Value rhs) {
    SmallVector<int64_t> shape;
    OpTrait::util::getBroadcastedShape(tensorType(lhs).getShape(), tensorType(rhs).getShape(),
                                       shape);
    auto type = RankedTensorType::get(shape, tensorType(lhs).getElementType());
    return builder.create<Op>(loc, type, lhs, rhs);
  }

  template <typename Op> Value unary(Value input) {
    return builder.create<Op>(loc, input.getType(), input);
  }

  Value reshape(Value value, ArrayRef<int64_t> shape) {
    if (tensorType(value).getShape() == shape)
      return value;
    return builder.create<ReshapeOp>(
        loc, RankedTensorType::get(shape, tensorType(value).getElementType()), value);
  }

  Value transpose(Value value, ArrayRef<int64_t> perm) {
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(tensorType(value).getDimSize(p));
    return builder.create<TransposeOp>(
        loc, RankedTensorType::get(shape, tensorType(value).getElementType()), value,
        builder.getDenseI64ArrayAttr(perm));
  }

  /// Swaps the last two dimensions.
  Value transposeLast2(Value value) {
    int64_t rank = tensorType(value).getRank();
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    std::swap(perm[rank - 1], perm[rank - 2]);
    return transpose(value, perm);
  }

  Value matmul(Value lhs, Value rhs) {
    ArrayRef<int64_t> a = tensorType(lhs).getShape(), b = tensorType(rhs).getShape();
    SmallVector<int64_t> shape;
    OpTrait::util::getBroadcastedShape(a.drop_back(2), b.drop_back(2), shape);
    shape.push_back(a[a.size() - 2]);
    shape.push_back(b.back());
    return builder.create<MatMulOp>(
        loc, RankedTensorType::get(shape, tensorType(lhs).getElementType()), lhs, rhs)
        .getResult();
  }

  Value reduceSum(Value value, ArrayRef<int64_t> axes) {
    if (axes.empty())
      return value;
    SmallVector<int64_t> shape;
    ArrayRef<int64_t> in = tensorType(value).getShape();
    for (auto [i, dim] : llvm::enumerate(in))
      if (!llvm::is_contained(axes, int64_t(i)))
        shape.push_back(dim);
    return builder.create<ReduceSumOp>(
        loc, RankedTensorType::get(shape, tensorType(value).getElementType()), value,
        builder.getDenseI64ArrayAttr(axes), builder.getBoolAttr(false));
  }

  /// Sums a broadcast gradient back to `target`'s shape (the adjoint of
  /// NumPy broadcasting).
  Value reduceTo(Value grad, RankedTensorType target) {
    ArrayRef<int64_t> from = tensorType(grad).getShape(), to = target.getShape();
    if (from == to)
      return grad;
    int64_t extra = int64_t(from.size()) - int64_t(to.size());
    SmallVector<int64_t> axes;
    for (int64_t i = 0; i < int64_t(from.size()); ++i)
      if (i < extra || (to[i - extra] == 1 && from[i] != 1))
        axes.push_back(i);
    return reshape(reduceSum(grad, axes), to);
  }

  Value broadcastTo(Value value, RankedTensorType target) {
    if (tensorType(value).getShape() == target.getShape())
      return value;
    return builder.create<BroadcastOp>(
        loc, RankedTensorType::get(target.getShape(), tensorType(value).getElementType()), value);
  }

  Value where(Value condition, Value onTrue, Value onFalse) {
    SmallVector<int64_t> shape, both;
    OpTrait::util::getBroadcastedShape(tensorType(onTrue).getShape(),
                                       tensorType(onFalse).getShape(), both);
    OpTrait::util::getBroadcastedShape(tensorType(condition).getShape(), both, shape);
    return builder.create<WhereOp>(
        loc, RankedTensorType::get(shape, tensorType(onTrue).getElementType()), condition,
        onTrue, onFalse);
  }

  template <typename Op> Value compare(Value lhs, Value rhs) {
    SmallVector<int64_t> shape;
    OpTrait::util::getBroadcastedShape(tensorType(lhs).getShape(), tensorType(rhs).getShape(),
                                       shape);
    return builder.create<Op>(loc, RankedTensorType::get(shape, builder.getI1Type()), lhs, rhs);
  }

  /// The gradient of a reduction's input from its result's: the result's
  /// gradient with the reduced dimensions restored as 1.
  Value restoreReduced(Value grad, RankedTensorType input, ArrayRef<int64_t> axes, bool keepdims) {
    SmallVector<int64_t> kept(input.getShape());
    for (int64_t axis : axes)
      kept[axis] = 1;
    return keepdims ? grad : reshape(grad, kept);
  }

  LogicalResult matmulRule(MatMulOp op, Value dy, const llvm::DenseSet<Value> &needed);
};

LogicalResult GradientBuilder::matmulRule(MatMulOp op, Value dy,
                                          const llvm::DenseSet<Value> &needed) {
  // Fused products appear only after autodiff (zcc-graph-fuse-kernels).
  if (op.hasEpilogue() || op.isWidened() || op.getTransposeLhs() || op.getTransposeRhs())
    return op.emitOpError("autodiff: a fused product (bias, addend, activation, f32 result of "
                          "16-bit operands or transposed operand) has no gradient rule; run "
                          "zcc-graph-fuse-kernels after autodiff");
  Value a = op.getLhs(), b = op.getRhs();
  RankedTensorType aType = tensorType(a), bType = tensorType(b);
  // Promote vectors to matrices as numpy.matmul does.
  Value a2 = aType.getRank() == 1 ? reshape(a, {1, aType.getDimSize(0)}) : a;
  Value b2 = bType.getRank() == 1 ? reshape(b, {bType.getDimSize(0), 1}) : b;
  ArrayRef<int64_t> as = tensorType(a2).getShape(), bs = tensorType(b2).getShape();
  SmallVector<int64_t> yShape;
  OpTrait::util::getBroadcastedShape(as.drop_back(2), bs.drop_back(2), yShape);
  yShape.push_back(as[as.size() - 2]);
  yShape.push_back(bs.back());
  Value dy2 = reshape(dy, yShape);

  if (needed.contains(a)) {
    Value da = matmul(dy2, transposeLast2(b2));
    da = reduceTo(da, tensorType(a2));
    addGradient(a, reshape(da, aType.getShape()));
  }
  if (needed.contains(b)) {
    Value db;
    if (bs.size() == 2 && as.size() >= 2) {
      // A weight matrix: fold every batch dimension into one product,
      // dB = A^T dY over all rows.
      int64_t k = as.back(), n = bs.back();
      int64_t rows = tensorType(a2).getNumElements() / k;
      Value aRows = reshape(a2, {rows, k});
      Value dyRows = reshape(broadcastTo(dy2, RankedTensorType::get(
                                                  yShape, tensorType(dy).getElementType())),
                             {rows, n});
      if (tensorType(dy2).getNumElements() != rows * n)
        return op.emitOpError("autodiff: unexpected batch broadcast of a matrix product");
      db = matmul(transposeLast2(aRows), dyRows);
    } else {
      db = matmul(transposeLast2(a2), dy2);
      db = reduceTo(db, tensorType(b2));
    }
    addGradient(b, reshape(db, bType.getShape()));
  }
  return success();
}

LogicalResult GradientBuilder::differentiate(Operation *op, const llvm::DenseSet<Value> &needed) {
  loc = op->getLoc();
  auto need = [&](Value value) { return needed.contains(value); };
  Value dy = op->getNumResults() == 1 ? gradientOf(op->getResult(0)) : Value();
  auto elem = [](Value value) { return tensorType(value).getElementType(); };

  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](AddOp add) {
        if (need(add.getLhs()))
          addGradient(add.getLhs(), reduceTo(dy, tensorType(add.getLhs())));
        if (need(add.getRhs()))
          addGradient(add.getRhs(), reduceTo(dy, tensorType(add.getRhs())));
        return success();
      })
      .Case([&](SubOp sub) {
        if (need(sub.getLhs()))
          addGradient(sub.getLhs(), reduceTo(dy, tensorType(sub.getLhs())));
        if (need(sub.getRhs()))
          addGradient(sub.getRhs(), reduceTo(unary<NegOp>(dy), tensorType(sub.getRhs())));
        return success();
      })
      .Case([&](MulOp mul) {
        if (need(mul.getLhs()))
          addGradient(mul.getLhs(),
                      reduceTo(binary<MulOp>(dy, mul.getRhs()), tensorType(mul.getLhs())));
        if (need(mul.getRhs()))
          addGradient(mul.getRhs(),
                      reduceTo(binary<MulOp>(dy, mul.getLhs()), tensorType(mul.getRhs())));
        return success();
      })
      .Case([&](DivOp div) {
        if (need(div.getLhs()))
          addGradient(div.getLhs(),
                      reduceTo(binary<DivOp>(dy, div.getRhs()), tensorType(div.getLhs())));
        if (need(div.getRhs())) {
          // d(a/b)/db = -(a/b)/b.
          Value g = unary<NegOp>(binary<DivOp>(binary<MulOp>(dy, div.getResult()), div.getRhs()));
          addGradient(div.getRhs(), reduceTo(g, tensorType(div.getRhs())));
        }
        return success();
      })
      .Case([&](PowOp pow) {
        Value a = pow.getLhs(), b = pow.getRhs();
        if (need(a)) {
          Value power = binary<PowOp>(a, binary<SubOp>(b, scalar(elem(b), 1.0)));
          addGradient(a, reduceTo(binary<MulOp>(binary<MulOp>(dy, b), power), tensorType(a)));
        }
        if (need(b)) {
          Value g = binary<MulOp>(binary<MulOp>(dy, pow.getResult()), unary<LogOp>(a));
          addGradient(b, reduceTo(g, tensorType(b)));
        }
        return success();
      })
      .Case<MaxOp, MinOp>([&](auto minmax) {
        Value a = minmax.getLhs(), b = minmax.getRhs();
        // The other operand wins where it is strictly better; ties go to lhs.
        Value otherWins = isa<MaxOp>(op) ? compare<LessOp>(a, b) : compare<LessOp>(b, a);
        Value zero = scalar(elem(dy), 0.0);
        if (need(a))
          addGradient(a, reduceTo(where(otherWins, zero, dy), tensorType(a)));
        if (need(b))
          addGradient(b, reduceTo(where(otherWins, dy, zero), tensorType(b)));
        return success();
      })
      .Case([&](NegOp neg) {
        addGradient(neg.getInput(), unary<NegOp>(dy));
        return success();
      })
      .Case([&](DropoutOp dropout) {
        // The same mask and scale: the same dropout over the gradient.
        addGradient(dropout.getInput(),
                    builder.create<DropoutOp>(loc, dy.getType(), dy, dropout.getState(),
                                              dropout.getRatioAttr(), dropout.getKeyAttr(),
                                              dropout.getSampleElementsAttr()));
        return success();
      })
      .Case([&](ExpOp exp) {
        addGradient(exp.getInput(), binary<MulOp>(dy, exp.getResult()));
        return success();
      })
      .Case([&](SqrtOp sqrt) {
        Value half = binary<MulOp>(dy, scalar(elem(dy), 0.5));
        addGradient(sqrt.getInput(), binary<DivOp>(half, sqrt.getResult()));
        return success();
      })
      .Case([&](TanhOp tanh) {
        Value y = tanh.getResult();
        Value oneMinus = binary<SubOp>(scalar(elem(y), 1.0), binary<MulOp>(y, y));
        addGradient(tanh.getInput(), binary<MulOp>(dy, oneMinus));
        return success();
      })
      .Case([&](SigmoidOp sigmoid) {
        Value y = sigmoid.getResult();
        Value slope = binary<MulOp>(y, binary<SubOp>(scalar(elem(y), 1.0), y));
        addGradient(sigmoid.getInput(), binary<MulOp>(dy, slope));
        return success();
      })
      .Case([&](ReluOp relu) {
        Value zero = scalar(elem(dy), 0.0);
        Value positive = compare<GreaterOp>(relu.getInput(), zero);
        addGradient(relu.getInput(), where(positive, dy, zero));
        return success();
      })
      .Case([&](LogOp log) {
        addGradient(log.getInput(), binary<DivOp>(dy, log.getInput()));
        return success();
      })
      .Case([&](ErfOp erf) {
        // d erf(x)/dx = 2/sqrt(pi) * exp(-x^2).
        Value x = erf.getInput();
        Value gauss = unary<ExpOp>(unary<NegOp>(binary<MulOp>(x, x)));
        Value slope = binary<MulOp>(gauss, scalar(elem(x), 2.0 / std::sqrt(M_PI)));
        addGradient(x, binary<MulOp>(dy, slope));
        return success();
      })
      .Case([&](ReciprocalOp reciprocal) {
        Value y = reciprocal.getResult();
        addGradient(reciprocal.getInput(), unary<NegOp>(binary<MulOp>(dy, binary<MulOp>(y, y))));
        return success();
      })
      .Case([&](GeluOp gelu) {
        addGradient(gelu.getInput(),
                    builder.create<GeluGradOp>(loc, dy.getType(), gelu.getInput(), dy,
                                               gelu.getApproximateAttr()));
        return success();
      })
      .Case([&](CastOp cast) {
        if (isFloatTensor(cast.getInput()))
          addGradient(cast.getInput(),
                      builder.create<CastOp>(loc, cast.getInput().getType(), dy));
        return success();
      })
      .Case([&](WhereOp where_) {
        Value zero = scalar(elem(dy), 0.0);
        if (need(where_.getOnTrue()))
          addGradient(where_.getOnTrue(), reduceTo(where(where_.getCondition(), dy, zero),
                                                   tensorType(where_.getOnTrue())));
        if (need(where_.getOnFalse()))
          addGradient(where_.getOnFalse(), reduceTo(where(where_.getCondition(), zero, dy),
                                                    tensorType(where_.getOnFalse())));
        return success();
      })
      .Case([&](MatMulOp matmul) { return matmulRule(matmul, dy, needed); })
      .Case([&](SoftmaxOp softmax) {
        addGradient(softmax.getInput(),
                    builder.create<SoftmaxGradOp>(loc, dy.getType(), softmax.getResult(), dy,
                                                  softmax.getAxisAttr()));
        return success();
      })
      .Case([&](LogSoftmaxOp logSoftmax) {
        addGradient(logSoftmax.getInput(),
                    builder.create<LogSoftmaxGradOp>(loc, dy.getType(), logSoftmax.getResult(),
                                                     dy, logSoftmax.getAxisAttr()));
        return success();
      })
      .Case<ReduceSumOp, ReduceMeanOp>([&](auto reduce) {
        RankedTensorType input = tensorType(reduce.getInput());
        Value g = restoreReduced(dy, input, reduce.getAxes(), reduce.getKeepdims());
        if (isa<ReduceMeanOp>(op)) {
          int64_t count = 1;
          for (int64_t axis : reduce.getAxes())
            count *= input.getDimSize(axis);
          g = binary<MulOp>(g, scalar(elem(dy), 1.0 / double(count)));
        }
        addGradient(reduce.getInput(), broadcastTo(g, input));
        return success();
      })
      .Case([&](ReduceMaxOp reduce) {
        RankedTensorType input = tensorType(reduce.getInput());
        Value y = restoreReduced(reduce.getResult(), input, reduce.getAxes(), reduce.getKeepdims());
        Value g = restoreReduced(dy, input, reduce.getAxes(), reduce.getKeepdims());
        Value isMax = compare<EqualOp>(reduce.getInput(), y);
        addGradient(reduce.getInput(), where(isMax, g, scalar(elem(dy), 0.0)));
        return success();
      })
      .Case([&](AttentionOp attention) {
        auto grads = builder.create<AttentionGradOp>(
            loc, attention.getQuery().getType(), attention.getKey().getType(),
            attention.getValue().getType(), attention.getQuery(), attention.getKey(),
            attention.getValue(), dy, attention.getScaleAttr(), attention.getCausalAttr());
        if (need(attention.getQuery()))
          addGradient(attention.getQuery(), grads.getQueryGrad());
        if (need(attention.getKey()))
          addGradient(attention.getKey(), grads.getKeyGrad());
        if (need(attention.getValue()))
          addGradient(attention.getValue(), grads.getValueGrad());
        return success();
      })
      .Case([&](LayerNormOp norm) {
        auto grads = builder.create<LayerNormGradOp>(
            loc, norm.getInput().getType(), norm.getScale().getType(), norm.getScale().getType(),
            norm.getInput(), norm.getScale(), dy, /*addend=*/Value(), norm.getAxisAttr(),
            norm.getEpsilonAttr());
        if (need(norm.getInput()))
          addGradient(norm.getInput(), grads.getInputGrad());
        if (need(norm.getScale()))
          addGradient(norm.getScale(), grads.getScaleGrad());
        if (need(norm.getBias()))
          addGradient(norm.getBias(), reduceTo(grads.getBiasGrad(), tensorType(norm.getBias())));
        return success();
      })
      .Case([&](ReshapeOp reshape_) {
        addGradient(reshape_.getInput(), reshape(dy, tensorType(reshape_.getInput()).getShape()));
        return success();
      })
      .Case([&](TransposeOp transpose_) {
        ArrayRef<int64_t> perm = transpose_.getPerm();
        SmallVector<int64_t> inverse(perm.size());
        for (auto [i, p] : llvm::enumerate(perm))
          inverse[p] = i;
        addGradient(transpose_.getInput(), transpose(dy, inverse));
        return success();
      })
      .Case([&](ConcatOp concat) {
        int64_t rank = tensorType(dy).getRank();
        int64_t axis = static_cast<int64_t>(concat.getAxis());
        if (axis < 0)
          axis += rank;
        int64_t offset = 0;
        for (Value input : concat.getInputs()) {
          RankedTensorType type = tensorType(input);
          if (need(input)) {
            SmallVector<int64_t> starts(rank, 0), limits(tensorType(dy).getShape()),
                strides(rank, 1);
            starts[axis] = offset;
            limits[axis] = offset + type.getDimSize(axis);
            addGradient(input, builder.create<SliceOp>(
                                   loc, type, dy, builder.getDenseI64ArrayAttr(starts),
                                   builder.getDenseI64ArrayAttr(limits),
                                   builder.getDenseI64ArrayAttr(strides)));
          }
          offset += type.getDimSize(axis);
        }
        return success();
      })
      .Case([&](SliceOp slice) {
        addGradient(slice.getInput(),
                    builder.create<SliceGradOp>(loc, slice.getInput().getType(), dy,
                                                slice.getStartsAttr(), slice.getLimitsAttr(),
                                                slice.getStridesAttr()));
        return success();
      })
      .Case([&](GatherOp gather) {
        if (need(gather.getData()))
          addGradient(gather.getData(),
                      builder.create<GatherGradOp>(loc, gather.getData().getType(),
                                                   gather.getIndices(), dy, gather.getAxisAttr()));
        return success();
      })
      .Case([&](BroadcastOp broadcast) {
        addGradient(broadcast.getInput(), reduceTo(dy, tensorType(broadcast.getInput())));
        return success();
      })
      .Case([&](TriluOp trilu) {
        addGradient(trilu.getInput(), builder.create<TriluOp>(loc, dy.getType(), dy,
                                                              trilu.getUpperAttr(), trilu.getKAttr()));
        return success();
      })
      .Case([&](MseLossOp mse) {
        Value g = builder.create<MseLossGradOp>(loc, mse.getPrediction().getType(),
                                                mse.getPrediction(), mse.getTarget(), dy);
        if (need(mse.getPrediction()))
          addGradient(mse.getPrediction(), g);
        if (need(mse.getTarget()))
          addGradient(mse.getTarget(), reduceTo(unary<NegOp>(g), tensorType(mse.getTarget())));
        return success();
      })
      .Case([&](CrossEntropyOp loss) {
        addGradient(loss.getInput(),
                    builder.create<CrossEntropyGradOp>(loc, loss.getInput().getType(),
                                                       loss.getInput(), loss.getLabels(), dy,
                                                       loss.getIgnoreIndexAttr(),
                                                       loss.getReductionAttr()));
        return success();
      })
      .Case([&](NllLossOp loss) {
        addGradient(loss.getInput(),
                    builder.create<NllLossGradOp>(loc, loss.getInput().getType(), loss.getInput(),
                                                  loss.getLabels(), dy, loss.getIgnoreIndexAttr(),
                                                  loss.getReductionAttr()));
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitOpError("has no gradient rule; it cannot be trained through");
      });
}

/// The index of the loss among @main's results.
FailureOr<unsigned> findLoss(func::FuncOp main, StringRef lossName) {
  SmallVector<std::string> names;
  for (unsigned i = 0; i < main.getNumResults(); ++i) {
    auto name = main.getResultAttrOfType<StringAttr>(i, "zgraph.name");
    names.push_back(name ? name.str() : "output" + std::to_string(i));
  }
  StringRef wanted = lossName.empty() ? StringRef("loss") : lossName;
  for (auto [i, name] : llvm::enumerate(names))
    if (name == wanted)
      return unsigned(i);
  if (lossName.empty()) {
    // Otherwise the one scalar float output, if there is exactly one.
    SmallVector<unsigned> scalars;
    for (unsigned i = 0; i < main.getNumResults(); ++i) {
      auto type = dyn_cast<RankedTensorType>(main.getResultTypes()[i]);
      if (type && type.getNumElements() == 1 && isa<FloatType>(type.getElementType()))
        scalars.push_back(i);
    }
    if (scalars.size() == 1)
      return scalars.front();
  }
  std::string list;
  for (auto [i, name] : llvm::enumerate(names))
    list += (i ? ", " : "") + ("'" + name + "'");
  main.emitError() << "the model has no loss output"
                   << (lossName.empty() ? "" : (" named '" + lossName + "'").str())
                   << " (its outputs: " << list
                   << "); export the model with its loss, or pass --loss cross-entropy|mse "
                      "to add one on the first output";
  return failure();
}

/// Adds a loss on @main's first output: cross-entropy against integer class
/// labels (classes on the last axis) or mean squared error against a target
/// of the output's shape, as a new argument "labels".
LogicalResult addLoss(func::FuncOp main, StringRef kind) {
  if (main.getNumResults() == 0)
    return main.emitError("the model has no output to add a loss to");
  OpBuilder builder(main.getContext());
  Block &body = main.getBody().front();
  auto returnOp = cast<func::ReturnOp>(body.getTerminator());
  Value output = returnOp.getOperand(0);
  auto type = dyn_cast<RankedTensorType>(output.getType());
  if (!type || !isa<FloatType>(type.getElementType()) || type.getRank() == 0)
    return main.emitError() << "--loss " << kind << " needs a float tensor output, got "
                            << output.getType();
  Location loc = main.getLoc();
  auto scalarType = RankedTensorType::get({}, type.getElementType());
  Type labelsType;
  if (kind == "cross-entropy") {
    SmallVector<int64_t> labelsShape(type.getShape().drop_back());
    if (labelsShape.empty())
      return main.emitError("--loss cross-entropy needs an output of rank 2 or more ([..., C])");
    labelsType = RankedTensorType::get(labelsShape, builder.getI64Type());
  } else if (kind == "mse") {
    labelsType = type;
  } else {
    return main.emitError() << "unknown --loss '" << kind << "'; use cross-entropy or mse";
  }
  for (unsigned i = 0; i < main.getNumArguments(); ++i)
    if (auto name = main.getArgAttrOfType<StringAttr>(i, "zgraph.name"); name && name == "labels")
      return main.emitError("--loss adds an input named 'labels', but the model has one");
  unsigned labelsIndex = main.getNumArguments();
  main.insertArgument(labelsIndex, labelsType,
                      builder.getDictionaryAttr(
                          builder.getNamedAttr("zgraph.name", builder.getStringAttr("labels"))),
                      loc);
  Value labels = body.getArgument(labelsIndex);
  builder.setInsertionPoint(returnOp);
  Value loss;
  if (kind == "cross-entropy") {
    int64_t classes = type.getShape().back();
    int64_t rows = type.getNumElements() / classes;
    Value logits = builder.create<ReshapeOp>(
        loc, RankedTensorType::get({rows, classes}, type.getElementType()), output);
    Value flat = builder.create<ReshapeOp>(
        loc, RankedTensorType::get({rows}, builder.getI64Type()), labels);
    loss = builder.create<CrossEntropyOp>(loc, scalarType, logits, flat, IntegerAttr(),
                                          builder.getStringAttr("mean"));
  } else {
    loss = builder.create<MseLossOp>(loc, scalarType, output, labels);
  }
  SmallVector<Value> results(returnOp.getOperands());
  results.push_back(loss);
  returnOp->setOperands(results);
  SmallVector<Type> resultTypes(main.getResultTypes());
  resultTypes.push_back(scalarType);
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned i = 0; i < main.getNumResults(); ++i)
    resultAttrs.push_back(main.getResultAttrDict(i));
  resultAttrs.push_back(builder.getDictionaryAttr(
      builder.getNamedAttr("zgraph.name", builder.getStringAttr("loss"))));
  main.setType(builder.getFunctionType(main.getArgumentTypes(), resultTypes));
  main.setAllResultAttrs(resultAttrs);
  return success();
}

/// Gives every dropout of the step its key: the step's `zcc.dropout_state`
/// argument (the seed and the micro-batch's first sample, written by the
/// runtime before each micro-batch) and the elements of one sample, the
/// input's over the micro-batch's rows (the first data argument's first
/// dimension).
LogicalResult addDropoutState(func::FuncOp step) {
  SmallVector<DropoutOp> dropouts(step.getOps<DropoutOp>());
  if (dropouts.empty())
    return success();
  int64_t rows = 0;
  for (BlockArgument argument : step.getArguments()) {
    auto name = step.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "zgraph.name");
    auto type = dyn_cast<RankedTensorType>(argument.getType());
    if ((name && name.getValue().starts_with("zcc.")) || !type || type.getRank() == 0)
      continue;
    rows = type.getDimSize(0);
    break;
  }
  if (rows <= 0)
    return dropouts.front().emitError(
        "dropout in training needs the micro-batch's rows, the first dimension of the "
        "model's first input; the model has no input with one");
  OpBuilder builder(step.getContext());
  auto stateType = RankedTensorType::get({2}, builder.getI64Type());
  unsigned index = step.getNumArguments();
  step.insertArgument(index, stateType,
                      builder.getDictionaryAttr(builder.getNamedAttr(
                          "zgraph.name", builder.getStringAttr("zcc.dropout_state"))),
                      step.getLoc());
  Value state = step.getArgument(index);
  for (DropoutOp dropout : dropouts) {
    int64_t elements = dropout.getInput().getType().getNumElements();
    if (elements % rows != 0)
      return dropout.emitError() << "dropout over " << dropout.getInput().getType()
                                 << " is not made of the micro-batch's " << rows
                                 << " samples (its elements are no multiple of the rows)";
    dropout.getStateMutable().assign(state);
    dropout.setSampleElements(elements / rows);
  }
  return success();
}

struct AutodiffPass : impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.getBody().getBlocks().size() != 1) {
      module.emitError("autodiff expects a single-block func.func @main");
      return signalPassFailure();
    }
    if (!addLossKind.empty() && failed(addLoss(main, addLossKind)))
      return signalPassFailure();
    FailureOr<unsigned> lossIndex = findLoss(main, lossName);
    if (failed(lossIndex))
      return signalPassFailure();

    // @micro_step: the forward graph returning only the loss, with the
    // loss scale as one more argument.
    OpBuilder builder(module.getContext());
    builder.setInsertionPoint(main);
    auto step = cast<func::FuncOp>(builder.clone(*main));
    step.setSymName("micro_step");
    main.erase();
    Block &body = step.getBody().front();
    auto returnOp = cast<func::ReturnOp>(body.getTerminator());
    Value loss = returnOp.getOperand(*lossIndex);
    auto lossType = cast<RankedTensorType>(loss.getType());
    if (!isa<FloatType>(lossType.getElementType()) || lossType.getNumElements() != 1) {
      step.emitError() << "the loss must be a float scalar, got " << lossType;
      return signalPassFailure();
    }
    DictionaryAttr lossAttrs = step.getResultAttrDict(*lossIndex);
    auto seedType = RankedTensorType::get({}, lossType.getElementType());
    unsigned seedIndex = step.getNumArguments();
    step.insertArgument(seedIndex, seedType,
                        builder.getDictionaryAttr(builder.getNamedAttr(
                            "zgraph.name", builder.getStringAttr("zcc.loss_scale"))),
                        step.getLoc());
    returnOp->setOperands(loss);
    if (failed(addDropoutState(step)))
      return signalPassFailure();
    step.setType(builder.getFunctionType(step.getArgumentTypes(), {lossType}));
    step.setAllResultAttrs(ArrayRef<DictionaryAttr>{lossAttrs});

    // Which values depend on a trainable parameter.
    llvm::DenseSet<Value> needed;
    SmallVector<Operation *> forward;
    llvm::DenseMap<Operation *, unsigned> pendingUses;
    // A cast of a parameter (mixed precision's 16-bit copy) is
    // differentiated as soon as its result's gradient is complete, not in
    // its place at the top of the step: otherwise every gradient would
    // reach its accumulator only at the end of the backward, each live
    // until then and none communicated while the backward runs.
    llvm::DenseMap<Operation *, unsigned> pendingCastUses;
    for (Operation &op : body.without_terminator()) {
      forward.push_back(&op);
      if (auto param = dyn_cast<ParamOp>(op)) {
        if (param.getTrainable() && isFloatTensor(param)) {
          needed.insert(param);
          pendingUses[param] = std::distance(param->use_begin(), param->use_end());
        }
        continue;
      }
      if (auto cast = dyn_cast<CastOp>(op); cast && isFloatTensor(cast.getResult()))
        if (auto param = cast.getInput().getDefiningOp<ParamOp>(); param && pendingUses.count(param))
          pendingCastUses[cast] = std::distance(cast->use_begin(), cast->use_end());
      bool any = llvm::any_of(op.getOperands(), [&](Value v) { return needed.contains(v); });
      if (any)
        for (Value result : op.getResults())
          if (isFloatTensor(result))
            needed.insert(result);
    }
    if (!needed.contains(loss)) {
      step.emitError("the loss does not depend on any trainable parameter");
      return signalPassFailure();
    }

    builder.setInsertionPoint(returnOp);
    GradientBuilder gradients(builder);
    Value seed = body.getArgument(seedIndex);
    if (lossType.getRank() != 0)
      seed = builder.create<ReshapeOp>(step.getLoc(), lossType, seed);
    gradients.addGradient(loss, seed);

    // A parameter's gradient goes into its accumulator once its last use
    // (its first in program order) has been differentiated.
    auto flush = [&](ParamOp param) {
      Value grad = gradients.gradientOf(param);
      if (!grad)
        return;
      Location loc = param.getLoc();
      auto state = builder.create<StateOp>(loc, param.getType(), param.getNameAttr(),
                                           builder.getStringAttr("grad"));
      builder.create<AccumulateOp>(loc, state, grad);
    };
    // A pipeline stage runs the backward ops of its forward ops: each op
    // made for `op` (its gradient rule, the accumulations it completes)
    // takes op's stage, marked as backward.
    auto tagBackward = [&](Operation *from, Attribute stage) {
      if (!stage)
        return;
      for (Operation *made = from ? from->getNextNode() : &body.front(); made != returnOp;
           made = made->getNextNode()) {
        made->setAttr("zdist.stage", stage);
        made->setAttr("zdist.backward", builder.getUnitAttr());
      }
    };
    llvm::DenseSet<Operation *> differentiated;
    // Differentiates `op` (once) and flushes the parameters whose last
    // pending use it was; a parameter cast whose last use it was follows.
    std::function<LogicalResult(Operation *)> visit = [&](Operation *op) -> LogicalResult {
      if (!differentiated.insert(op).second)
        return success();
      bool hasGradient = llvm::any_of(
          op->getResults(), [&](Value r) { return bool(gradients.gradientOf(r)); });
      if (hasGradient && llvm::any_of(op->getOperands(), [&](Value v) { return needed.contains(v); })) {
        if (op->getNumResults() != 1)
          return op->emitOpError("autodiff handles single-result ops only");
        if (failed(gradients.differentiate(op, needed)))
          return failure();
      }
      for (Value operand : op->getOperands()) {
        if (auto param = operand.getDefiningOp<ParamOp>(); param && pendingUses.count(param))
          if (--pendingUses[param] == 0)
            flush(param);
        if (auto cast = operand.getDefiningOp<CastOp>(); cast && pendingCastUses.count(cast))
          if (--pendingCastUses[cast] == 0 && failed(visit(cast)))
            return failure();
      }
      return success();
    };
    for (Operation *op : llvm::reverse(forward)) {
      if (isa<ParamOp>(op) || differentiated.contains(op))
        continue;
      Operation *last = returnOp->getPrevNode();
      Attribute stage = op->getAttr("zdist.stage");
      if (failed(visit(op)))
        return signalPassFailure();
      tagBackward(last, stage);
    }
    for (auto &[op, uses] : pendingUses)
      if (uses != 0) {
        Operation *last = returnOp->getPrevNode();
        flush(cast<ParamOp>(op));
        tagBackward(last, op->getAttr("zdist.stage"));
      }
  }
};

} // namespace
} // namespace zcc::zgraph
