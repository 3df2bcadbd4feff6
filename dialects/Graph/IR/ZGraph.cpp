//===- ZGraph.cpp - zgraph dialect ----------------------------------------===//

#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace zcc::zgraph;

#include "dialects/Graph/IR/ZGraphDialect.cpp.inc"

void ZGraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Graph/IR/ZGraphOps.cpp.inc"
      >();
}

/// adamw's gradient type: printed (after `grad`) only where it is not the
/// parameter's.
static ParseResult parseGradientType(OpAsmParser &parser, Type &grad, Type param) {
  if (succeeded(parser.parseOptionalKeyword("grad")))
    return parser.parseType(grad);
  grad = param;
  return success();
}

static void printGradientType(OpAsmPrinter &printer, Operation *, Type grad, Type param) {
  if (grad != param)
    printer << " grad " << grad;
}

#define GET_OP_CLASSES
#include "dialects/Graph/IR/ZGraphOps.cpp.inc"

std::string zcc::zgraph::configPrecision(ModuleOp module) {
  auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
  auto enabled = [&](StringRef section) {
    auto dict = config ? config.getAs<DictionaryAttr>(section) : DictionaryAttr();
    auto flag = dict ? dict.getAs<BoolAttr>("enabled") : BoolAttr();
    return flag && flag.getValue();
  };
  if (enabled("fp16"))
    return "fp16";
  if (enabled("bf16"))
    return "bf16";
  return "";
}

namespace {
/// Every zgraph value has a static shape: the plan sizes every buffer.
LogicalResult verifyStaticShapes(Operation *op) {
  auto check = [&](Type type) -> LogicalResult {
    if (auto tensor = dyn_cast<RankedTensorType>(type); tensor && !tensor.hasStaticShape())
      return op->emitOpError() << "requires static shapes, but got " << type;
    return success();
  };
  for (Type type : op->getOperandTypes())
    if (failed(check(type)))
      return failure();
  for (Type type : op->getResultTypes())
    if (failed(check(type)))
      return failure();
  return success();
}

/// Checks an axis attribute against a rank (negative axes count from the end).
LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return op->emitOpError() << "axis " << axis << " is out of range for rank " << rank;
  return success();
}

/// The shared verifier of the broadcasting binary ops.
LogicalResult verifyBroadcastBinary(Operation *op) {
  if (failed(verifyStaticShapes(op)))
    return failure();
  auto lhs = cast<RankedTensorType>(op->getOperand(0).getType());
  auto rhs = cast<RankedTensorType>(op->getOperand(1).getType());
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(lhs.getShape(), rhs.getShape(), shape))
    return op->emitOpError() << "operand shapes " << lhs << " and " << rhs
                             << " are not broadcast-compatible";
  if (ArrayRef<int64_t>(shape) != result.getShape())
    return op->emitOpError() << "result type " << result
                             << " does not match the broadcast shape of its operands ("
                             << RankedTensorType::get(shape, result.getElementType()) << ")";
  return success();
}
} // namespace

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("requires a non-empty parameter name");
  return verifyStaticShapes(*this);
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ConstantOp::verify() {
  return verifyStaticShapes(*this);
}

LogicalResult AddOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult SubOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult MulOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult DivOp::verify() { return verifyBroadcastBinary(*this); }

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate must be \"none\" or \"tanh\", got \""
                         << getApproximate() << "\"";
  return success();
}

LogicalResult DropoutOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  double ratio = getRatio().convertToDouble();
  if (!(ratio > 0.0 && ratio < 1.0))
    return emitOpError() << "ratio must be in (0, 1), got " << ratio;
  if (Value state = getState()) {
    auto type = cast<RankedTensorType>(state.getType());
    if (type.getRank() != 1 || type.getDimSize(0) != 2)
      return emitOpError() << "state must be tensor<2xi64> (the seed and the first sample), got "
                           << type;
  }
  if (std::optional<int64_t> elements = getSampleElements()) {
    int64_t count = getInput().getType().getNumElements();
    if (*elements <= 0 || count % *elements != 0)
      return emitOpError() << "sample_elements " << *elements
                           << " must be positive and divide the input's " << count
                           << " elements";
  }
  return success();
}

LogicalResult MatMulOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  Type element = getLhs().getType().getElementType();
  if (getRhs().getType().getElementType() != element)
    return emitOpError("lhs and rhs must have one element type");
  if (isWidened() &&
      !(isa<Float16Type, BFloat16Type>(element) && getResult().getType().getElementType().isF32()))
    return emitOpError() << "result element type " << getResult().getType().getElementType()
                         << " must be the operands' (" << element
                         << "), or f32 of f16 or bf16 operands";
  if (isWidened() && hasEpilogue())
    return emitOpError("an f32 product of 16-bit operands takes no bias, addend or activation");
  ArrayRef<int64_t> lhs = getLhs().getType().getShape();
  ArrayRef<int64_t> rhs = getRhs().getType().getShape();
  if (lhs.empty() || rhs.empty())
    return emitOpError("operands must have rank at least 1");
  if ((getTransposeLhs() && lhs.size() < 2) || (getTransposeRhs() && rhs.size() < 2))
    return emitOpError("a transposed operand must have rank at least 2");
  // numpy.matmul: promote rank-1 operands, multiply, drop the promoted dims.
  SmallVector<int64_t> lhsMatrix(lhs.begin(), lhs.end());
  SmallVector<int64_t> rhsMatrix(rhs.begin(), rhs.end());
  if (getTransposeLhs())
    std::swap(lhsMatrix[lhs.size() - 1], lhsMatrix[lhs.size() - 2]);
  if (getTransposeRhs())
    std::swap(rhsMatrix[rhs.size() - 1], rhsMatrix[rhs.size() - 2]);
  if (lhs.size() == 1)
    lhsMatrix.insert(lhsMatrix.begin(), 1);
  if (rhs.size() == 1)
    rhsMatrix.push_back(1);
  int64_t k = lhsMatrix.back();
  int64_t rhsK = rhsMatrix[rhsMatrix.size() - 2];
  if (k != rhsK)
    return emitOpError() << "contracting dimensions differ: " << k << " vs " << rhsK;
  SmallVector<int64_t> batch;
  ArrayRef<int64_t> lhsBatch = ArrayRef<int64_t>(lhsMatrix).drop_back(2);
  ArrayRef<int64_t> rhsBatch = ArrayRef<int64_t>(rhsMatrix).drop_back(2);
  if (!OpTrait::util::getBroadcastedShape(lhsBatch, rhsBatch, batch))
    return emitOpError("batch dimensions are not broadcast-compatible");
  SmallVector<int64_t> expected = batch;
  if (lhs.size() != 1)
    expected.push_back(lhsMatrix[lhsMatrix.size() - 2]);
  if (rhs.size() != 1)
    expected.push_back(rhsMatrix.back());
  ArrayRef<int64_t> result = getResult().getType().getShape();
  if (result != ArrayRef<int64_t>(expected))
    return emitOpError() << "result type " << getResult().getType()
                         << " does not match the product shape "
                         << RankedTensorType::get(expected, getResult().getType().getElementType());
  if (Value bias = getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 || result.empty() || biasType.getDimSize(0) != result.back() ||
        biasType.getElementType() != getResult().getType().getElementType())
      return emitOpError() << "bias " << biasType << " must be a vector of the result's last "
                           << "dimension and element type";
  }
  // The addend's type is the result's (the op's type constraint).
  std::optional<StringRef> activation = getActivation();
  if (activation && *activation != "gelu_tanh" && *activation != "gelu_tanh_grad")
    return emitOpError() << "activation must be \"gelu_tanh\" or \"gelu_tanh_grad\", got \""
                         << *activation << "\"";
  bool gradient = activation && *activation == "gelu_tanh_grad";
  if (gradient != static_cast<bool>(getGeluInput()))
    return emitOpError("gelu_input goes with activation \"gelu_tanh_grad\", and it with it");
  if (gradient && (getBias() || getAddend()))
    return emitOpError("activation \"gelu_tanh_grad\" takes no bias or addend");
  if (Value aux = getAux()) {
    auto auxType = cast<RankedTensorType>(aux.getType());
    RankedTensorType resultType = getResult().getType();
    if (!activation)
      return emitOpError("aux goes with an activation: the sum before \"gelu_tanh\" or the "
                         "bias gradient of \"gelu_tanh_grad\"");
    if (!gradient && auxType != resultType)
      return emitOpError() << "aux of \"gelu_tanh\" (the sum before the GELU) must have the "
                           << "result's type " << resultType << ", got " << auxType;
    if (gradient &&
        (auxType.getRank() != 1 || result.empty() || auxType.getDimSize(0) != result.back() ||
         auxType.getElementType() != resultType.getElementType()))
      return emitOpError() << "aux of \"gelu_tanh_grad\" (the bias gradient) must be a vector "
                           << "of the result's last dimension and element type, got " << auxType;
  }
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getInput().getType().getRank());
}

LogicalResult LayerNormOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  RankedTensorType input = getInput().getType();
  if (failed(verifyAxis(*this, getAxis(), input.getRank())))
    return failure();
  // I64Attr reads back as uint64_t: convert before testing the sign.
  auto axis = static_cast<int64_t>(getAxis());
  if (axis < 0)
    axis += input.getRank();
  ArrayRef<int64_t> normalized = input.getShape().drop_front(axis);
  for (Value operand : {getScale(), getBias()}) {
    auto type = cast<RankedTensorType>(operand.getType());
    if (type.getShape() != normalized)
      return emitOpError() << "scale and bias must have the normalised shape "
                           << RankedTensorType::get(normalized, input.getElementType())
                           << ", got " << type;
  }
  if (getResult().getType() != input)
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal the input type " << input;
  if (getEpsilon().convertToDouble() <= 0.0)
    return emitOpError("epsilon must be positive");
  return success();
}

LogicalResult ReshapeOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  int64_t in = getInput().getType().getNumElements();
  int64_t out = getResult().getType().getNumElements();
  if (in != out)
    return emitOpError() << "cannot reshape " << in << " elements into " << out;
  return success();
}

LogicalResult TransposeOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  ArrayRef<int64_t> perm = getPerm();
  ArrayRef<int64_t> in = getInput().getType().getShape();
  if (perm.size() != in.size())
    return emitOpError() << "perm has " << perm.size() << " entries for rank " << in.size();
  SmallVector<bool> seen(in.size(), false);
  SmallVector<int64_t> expected;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p])
      return emitOpError("perm must be a permutation of 0..rank-1");
    seen[p] = true;
    expected.push_back(in[p]);
  }
  if (getResult().getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "result type " << getResult().getType()
                         << " does not match the permuted shape "
                         << RankedTensorType::get(expected, getInput().getType().getElementType());
  return success();
}

LogicalResult MseLossOp::verify() {
  if (getPrediction().getType().getShape() != getTarget().getType().getShape())
    return emitOpError() << "prediction " << getPrediction().getType()
                         << " and target " << getTarget().getType()
                         << " must have the same shape";
  return verifyStaticShapes(*this);
}

LogicalResult PowOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult MaxOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult MinOp::verify() { return verifyBroadcastBinary(*this); }

namespace {
/// The broadcast shape of `types`, or failure with a diagnostic.
FailureOr<SmallVector<int64_t>> broadcastShapes(Operation *op, TypeRange types) {
  SmallVector<int64_t> shape;
  for (Type type : types) {
    SmallVector<int64_t> next;
    if (!OpTrait::util::getBroadcastedShape(shape, cast<RankedTensorType>(type).getShape(),
                                            next)) {
      op->emitOpError() << "operand shapes are not broadcast-compatible";
      return failure();
    }
    shape = std::move(next);
  }
  return shape;
}

LogicalResult verifyResultShape(Operation *op, ArrayRef<int64_t> expected) {
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  if (result.getShape() != expected)
    return op->emitOpError() << "result type " << result << " does not have the expected shape "
                             << RankedTensorType::get(expected, result.getElementType());
  return success();
}

LogicalResult verifyCompare(Operation *op) {
  if (failed(verifyStaticShapes(op)))
    return failure();
  if (getElementTypeOrSelf(op->getOperand(0)) != getElementTypeOrSelf(op->getOperand(1)))
    return op->emitOpError("operands must have the same element type");
  FailureOr<SmallVector<int64_t>> shape = broadcastShapes(op, op->getOperandTypes());
  if (failed(shape))
    return failure();
  return verifyResultShape(op, *shape);
}

/// Normalises a possibly negative axis; assumes verifyAxis passed.
int64_t normalizeAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }
} // namespace

LogicalResult EqualOp::verify() { return verifyCompare(*this); }
LogicalResult LessOp::verify() { return verifyCompare(*this); }
LogicalResult GreaterOp::verify() { return verifyCompare(*this); }

LogicalResult WhereOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  Type element = getOnTrue().getType().getElementType();
  if (getOnFalse().getType().getElementType() != element ||
      getResult().getType().getElementType() != element)
    return emitOpError("both branches and the result must have the same element type");
  FailureOr<SmallVector<int64_t>> shape = broadcastShapes(*this, getOperandTypes());
  if (failed(shape))
    return failure();
  return verifyResultShape(*this, *shape);
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getResult().getType().getShape())
    return emitOpError("input and result must have the same shape");
  return verifyStaticShapes(*this);
}

LogicalResult LogSoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getInput().getType().getRank());
}

namespace {
template <typename ReduceOp> LogicalResult verifyReduce(ReduceOp op) {
  if (failed(verifyStaticShapes(op)))
    return failure();
  RankedTensorType input = op.getInput().getType();
  if (input.getElementType() != op.getResult().getType().getElementType())
    return op.emitOpError("result must have the input's element type");
  ArrayRef<int64_t> axes = op.getAxes();
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= input.getRank() || (i && axes[i] <= axes[i - 1]))
      return op.emitOpError() << "axes must be ascending, distinct and in [0, "
                              << input.getRank() << ")";
  SmallVector<int64_t> expected;
  for (int64_t d = 0; d < input.getRank(); ++d) {
    bool reduced = llvm::is_contained(axes, d);
    if (!reduced)
      expected.push_back(input.getDimSize(d));
    else if (op.getKeepdims())
      expected.push_back(1);
  }
  return verifyResultShape(op, expected);
}
} // namespace

LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }

namespace {
std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (auto [index, dim] : llvm::enumerate(shape))
    text += (index ? ", " : "") + std::to_string(dim);
  return text + "]";
}
} // namespace

LogicalResult AttentionOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  ArrayRef<int64_t> q = getQuery().getType().getShape();
  ArrayRef<int64_t> k = getKey().getType().getShape();
  ArrayRef<int64_t> v = getValue().getType().getShape();
  if (q.size() < 2 || k.size() != q.size() || v.size() != q.size())
    return emitOpError("query, key and value must have the same rank, at least 2");
  if (q.drop_back(2) != k.drop_back(2) || q.drop_back(2) != v.drop_back(2))
    return emitOpError("query, key and value must have the same leading dimensions");
  if (q.back() != k.back())
    return emitOpError() << "query and key head sizes differ: " << q.back() << " vs "
                         << k.back();
  if (k[k.size() - 2] != v[v.size() - 2])
    return emitOpError("key and value must have the same sequence length");
  if (getCausal() && q[q.size() - 2] > k[k.size() - 2])
    return emitOpError("a causal attention needs at least as many keys as queries");
  SmallVector<int64_t> expected(q.begin(), q.end());
  expected.back() = v.back();
  if (failed(verifyResultShape(*this, expected)))
    return failure();
  if (Value lse = getLse()) {
    auto type = cast<RankedTensorType>(lse.getType());
    if (type.getShape() != q.drop_back())
      return emitOpError() << "lse " << type << " must have the query's shape without its "
                           << "last dimension, " << shapeString(q.drop_back());
  }
  return success();
}

namespace {
/// A packed [B, T, 3, H, d] qkv of `op`, its [B, T, H, d] per-head rows
/// (`what`: the result or the gradient), and an optional [B, H, T] lse.
LogicalResult verifyQkvAttention(Operation *op, RankedTensorType qkv, Type rows,
                                 StringRef what, Value lse) {
  ArrayRef<int64_t> shape = qkv.getShape();
  if (shape.size() != 5 || shape[2] != 3)
    return op->emitOpError() << "qkv must be [B, T, 3, H, d] (the query, key and value heads "
                             << "of one projection), got " << shapeString(shape);
  auto expected = RankedTensorType::get({shape[0], shape[1], shape[3], shape[4]},
                                        qkv.getElementType());
  if (rows != expected)
    return op->emitOpError() << what << " " << rows << " must be " << expected;
  if (lse) {
    SmallVector<int64_t> lseShape = {shape[0], shape[3], shape[1]};
    if (cast<RankedTensorType>(lse.getType()).getShape() != ArrayRef<int64_t>(lseShape))
      return op->emitOpError() << "lse " << lse.getType() << " must be [B, H, T], "
                               << shapeString(lseShape);
  }
  return success();
}
} // namespace

LogicalResult QkvAttentionOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  return verifyQkvAttention(*this, getQkv().getType(), getResult().getType(), "result",
                            getLse());
}

LogicalResult QkvAttentionGradOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (getQkvGrad().getType() != getQkv().getType())
    return emitOpError("qkv_grad must have the qkv's type");
  if (static_cast<bool>(getOutput()) != static_cast<bool>(getLse()))
    return emitOpError("saved output and lse go together");
  if (Value output = getOutput(); output && output.getType() != getGrad().getType())
    return emitOpError() << "saved output " << output.getType()
                         << " must have the gradient's type " << getGrad().getType();
  return verifyQkvAttention(*this, getQkv().getType(), getGrad().getType(), "grad", getLse());
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  if (failed(verifyStaticShapes(*this)))
    return failure();
  auto first = cast<RankedTensorType>(getInputs().front().getType());
  if (failed(verifyAxis(*this, getAxis(), first.getRank())))
    return failure();
  int64_t axis = normalizeAxis(getAxis(), first.getRank());
  SmallVector<int64_t> expected(first.getShape());
  expected[axis] = 0;
  for (Value input : getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getRank() != first.getRank())
      return emitOpError("inputs must have the same rank");
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != axis && type.getDimSize(d) != first.getDimSize(d))
        return emitOpError() << "inputs differ in dimension " << d
                             << ", which is not the concatenation axis";
    expected[axis] += type.getDimSize(axis);
  }
  return verifyResultShape(*this, expected);
}

LogicalResult SliceOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  ArrayRef<int64_t> shape = getInput().getType().getShape();
  ArrayRef<int64_t> starts = getStarts(), limits = getLimits(), strides = getStrides();
  if (starts.size() != shape.size() || limits.size() != shape.size() ||
      strides.size() != shape.size())
    return emitOpError() << "starts, limits and strides need one entry per dimension ("
                         << shape.size() << ")";
  SmallVector<int64_t> expected;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (strides[d] <= 0)
      return emitOpError("strides must be positive");
    if (starts[d] < 0 || limits[d] < starts[d] || limits[d] > shape[d])
      return emitOpError() << "dimension " << d << ": need 0 <= start <= limit <= "
                           << shape[d] << ", got [" << starts[d] << ", " << limits[d] << ")";
    // Not (limit - start + stride - 1) / stride: that overflows for
    // strides near INT64_MAX, which ONNX Slice steps may be.
    expected.push_back(limits[d] == starts[d] ? 0 : (limits[d] - starts[d] - 1) / strides[d] + 1);
  }
  return verifyResultShape(*this, expected);
}

LogicalResult GatherOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  RankedTensorType data = getData().getType();
  if (failed(verifyAxis(*this, getAxis(), data.getRank())))
    return failure();
  if (data.getElementType() != getResult().getType().getElementType())
    return emitOpError("result must have the data's element type");
  int64_t axis = normalizeAxis(getAxis(), data.getRank());
  SmallVector<int64_t> expected(data.getShape().take_front(axis));
  llvm::append_range(expected, getIndices().getType().getShape());
  llvm::append_range(expected, data.getShape().drop_front(axis + 1));
  return verifyResultShape(*this, expected);
}

LogicalResult BroadcastOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  ArrayRef<int64_t> in = getInput().getType().getShape();
  ArrayRef<int64_t> out = getResult().getType().getShape();
  SmallVector<int64_t> shape;
  if (in.size() > out.size() || !OpTrait::util::getBroadcastedShape(in, out, shape) ||
      ArrayRef<int64_t>(shape) != out)
    return emitOpError() << getInput().getType() << " does not broadcast to "
                         << getResult().getType();
  return success();
}

LogicalResult TriluOp::verify() {
  if (getInput().getType().getRank() < 2)
    return emitOpError("needs a tensor of rank at least 2");
  return verifyStaticShapes(*this);
}

namespace {
template <typename LossOp> LogicalResult verifyClassLoss(LossOp op) {
  if (failed(verifyStaticShapes(op)))
    return failure();
  ArrayRef<int64_t> input = op.getInput().getType().getShape();
  ArrayRef<int64_t> labels = op.getLabels().getType().getShape();
  if (input.size() < 2)
    return op.emitOpError("input must be [N, C] or [N, C, d1, ...]");
  SmallVector<int64_t> expectedLabels{input[0]};
  llvm::append_range(expectedLabels, input.drop_front(2));
  if (labels != ArrayRef<int64_t>(expectedLabels))
    return op.emitOpError() << "labels must have shape "
                            << RankedTensorType::get(expectedLabels,
                                                     op.getLabels().getType().getElementType())
                            << " for input " << op.getInput().getType();
  StringRef reduction = op.getReduction();
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return op.emitOpError() << "reduction must be \"mean\", \"sum\" or \"none\", got \""
                            << reduction << "\"";
  if (op.getLoss().getType().getElementType() != op.getInput().getType().getElementType())
    return op.emitOpError("loss must have the input's element type");
  return verifyResultShape(op, reduction == "none" ? labels : ArrayRef<int64_t>());
}
} // namespace

LogicalResult CrossEntropyOp::verify() { return verifyClassLoss(*this); }
LogicalResult NllLossOp::verify() { return verifyClassLoss(*this); }

LogicalResult IsNanOp::verify() {
  if (getInput().getType().getShape() != getResult().getType().getShape())
    return emitOpError("result must have the input's shape");
  return verifyStaticShapes(*this);
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxGradOp::verify() {
  return verifyAxis(*this, getAxis(), getResult().getType().getRank());
}

LogicalResult LogSoftmaxGradOp::verify() {
  return verifyAxis(*this, getAxis(), getResult().getType().getRank());
}

LogicalResult GeluGradOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate must be \"none\" or \"tanh\", got \""
                         << getApproximate() << "\"";
  return verifyStaticShapes(*this);
}

LogicalResult MseLossGradOp::verify() {
  if (getPrediction().getType().getShape() != getTarget().getType().getShape())
    return emitOpError() << "prediction " << getPrediction().getType() << " and target "
                         << getTarget().getType() << " must have the same shape";
  return verifyStaticShapes(*this);
}

LogicalResult LayerNormGradOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError("epsilon must be positive");
  if (getInput().getType() != getGrad().getType() ||
      getInputGrad().getType() != getInput().getType())
    return emitOpError("input, grad and input_grad must have one type");
  if (getScaleGrad().getType() != getScale().getType() ||
      getBiasGrad().getType() != getScale().getType())
    return emitOpError("scale_grad and bias_grad must have the scale's type");
  return verifyAxis(*this, getAxis(), getInput().getType().getRank());
}

LogicalResult AttentionGradOp::verify() {
  if (static_cast<bool>(getOutput()) != static_cast<bool>(getLse()))
    return emitOpError("saved output and lse go together");
  if (getQueryGrad().getType() != getQuery().getType() ||
      getKeyGrad().getType() != getKey().getType() ||
      getValueGrad().getType() != getValue().getType())
    return emitOpError("each gradient must have its operand's type");
  if (getGrad().getType().getRank() != getQuery().getType().getRank())
    return emitOpError("grad must have the query's rank");
  if (Value output = getOutput()) {
    if (output.getType() != getGrad().getType())
      return emitOpError() << "saved output " << output.getType()
                           << " must have the gradient's type " << getGrad().getType();
    ArrayRef<int64_t> q = getQuery().getType().getShape();
    auto lse = cast<RankedTensorType>(getLse().getType());
    if (lse.getShape() != q.drop_back())
      return emitOpError() << "saved lse " << lse << " must have the query's shape without "
                           << "its last dimension, " << shapeString(q.drop_back());
  }
  return verifyStaticShapes(*this);
}

namespace {

template <typename GradOp> LogicalResult verifyClassLossGrad(GradOp op) {
  // An f32 input's gradient may be written in 16 bits (rounded once from
  // f32, as a cast after it would round it).
  RankedTensorType input = op.getInput().getType(), result = op.getResult().getType();
  bool narrowed = input.getElementType().isF32() &&
                  isa<Float16Type, BFloat16Type>(result.getElementType()) &&
                  result.getShape() == input.getShape();
  if (result != input && !narrowed)
    return op.emitOpError("result must have the input's type (or its shape in f16 or bf16 "
                          "for an f32 input)");
  StringRef reduction = op.getReduction();
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return op.emitOpError() << "reduction must be \"mean\", \"sum\" or \"none\", got \""
                            << reduction << "\"";
  ArrayRef<int64_t> expected =
      reduction == "none" ? op.getLabels().getType().getShape() : ArrayRef<int64_t>();
  if (op.getGrad().getType().getShape() != expected)
    return op.emitOpError() << "grad must have shape " << shapeString(expected)
                            << " for reduction \""
                            << reduction << "\"";
  return verifyStaticShapes(op);
}
} // namespace

LogicalResult CrossEntropyGradOp::verify() { return verifyClassLossGrad(*this); }
LogicalResult NllLossGradOp::verify() { return verifyClassLossGrad(*this); }

LogicalResult GatherGradOp::verify() {
  int64_t rank = getResult().getType().getRank();
  if (failed(verifyAxis(*this, getAxis(), rank)))
    return failure();
  int64_t axis = normalizeAxis(getAxis(), rank);
  ArrayRef<int64_t> data = getResult().getType().getShape();
  SmallVector<int64_t> expected(data.take_front(axis));
  llvm::append_range(expected, getIndices().getType().getShape());
  llvm::append_range(expected, data.drop_front(axis + 1));
  if (getGrad().getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "grad must have the gathered shape " << shapeString(expected);
  return verifyStaticShapes(*this);
}

LogicalResult SliceGradOp::verify() {
  int64_t rank = getResult().getType().getRank();
  if (int64_t(getStarts().size()) != rank || int64_t(getLimits().size()) != rank ||
      int64_t(getStrides().size()) != rank)
    return emitOpError("needs one start, limit and stride per dimension");
  ArrayRef<int64_t> shape = getResult().getType().getShape();
  ArrayRef<int64_t> grad = getGrad().getType().getShape();
  if (int64_t(grad.size()) != rank)
    return emitOpError("grad must have the result's rank");
  for (int64_t i = 0; i < rank; ++i) {
    int64_t start = getStarts()[i], limit = getLimits()[i], stride = getStrides()[i];
    if (start < 0 || limit > shape[i] || stride <= 0 ||
        grad[i] != (limit <= start ? 0 : (limit - start - 1) / stride + 1))
      return emitOpError() << "window of dimension " << i << " does not match grad "
                           << getGrad().getType();
  }
  return verifyStaticShapes(*this);
}

//===----------------------------------------------------------------------===//
// Training state and optimizer updates
//===----------------------------------------------------------------------===//

namespace {
bool isStateKind(StringRef kind) {
  return kind == "grad" || kind == "exp_avg" || kind == "exp_avg_sq" || kind == "momentum" ||
         kind == "sum" || kind == "copy" || kind == "master" || kind == "host_grad" || kind == "norm_sq";
}

/// In-place updates write into a parameter or a state (or a staged copy of
/// one, see StagedState.h), never a computed value.
LogicalResult verifyInPlaceTarget(Operation *op, Value target, StringRef what) {
  Operation *def = target.getDefiningOp();
  if (!isa_and_nonnull<StateOp, ParamOp>(def) && !(def && def->hasTrait<StagedState>()))
    return op->emitOpError() << what << " must be a zgraph.state or zgraph.param";
  return success();
}
} // namespace

LogicalResult StateOp::verify() {
  if (getName().empty())
    return emitOpError("requires a non-empty parameter name");
  if (!isStateKind(getKind()))
    return emitOpError() << "kind must be \"grad\", \"exp_avg\", \"exp_avg_sq\", "
                            "\"momentum\", \"sum\", \"master\", \"copy\", \"host_grad\" or "
                            "\"norm_sq\", got \""
                         << getKind() << "\"";
  return verifyStaticShapes(*this);
}

LogicalResult AccumulateOp::verify() {
  if (getTarget().getType().getShape() != getValue().getType().getShape())
    return emitOpError() << "value " << getValue().getType() << " and target "
                         << getTarget().getType() << " differ in shape";
  return verifyInPlaceTarget(*this, getTarget(), "target");
}

LogicalResult AccumulateMatMulOp::verify() {
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType();
  RankedTensorType target = getTarget().getType();
  if (lhs.getRank() != 2 || rhs.getRank() != 2 || target.getRank() != 2)
    return emitOpError() << "operands and target must be matrices, got " << lhs << ", " << rhs
                         << " into " << target;
  if (lhs.getElementType() != rhs.getElementType())
    return emitOpError() << "operands must have one element type, got " << lhs.getElementType()
                         << " and " << rhs.getElementType();
  if (cast<FloatType>(target.getElementType()).getWidth() <
      cast<FloatType>(lhs.getElementType()).getWidth())
    return emitOpError() << "target " << target.getElementType()
                         << " is narrower than the operands' " << lhs.getElementType();
  int64_t m = lhs.getDimSize(getTransposeLhs() ? 1 : 0), k = lhs.getDimSize(getTransposeLhs() ? 0 : 1);
  int64_t rhsK = rhs.getDimSize(getTransposeRhs() ? 1 : 0), n = rhs.getDimSize(getTransposeRhs() ? 0 : 1);
  if (k != rhsK)
    return emitOpError() << "contracting dimensions differ: " << k << " vs " << rhsK;
  if (target.getShape() != ArrayRef<int64_t>{m, n})
    return emitOpError() << "the product is " << m << "x" << n << " but the target is " << target;
  return verifyInPlaceTarget(*this, getTarget(), "target");
}

LogicalResult FillOp::verify() { return verifyInPlaceTarget(*this, getTarget(), "target"); }

LogicalResult AssignOp::verify() {
  if (getTarget().getType().getShape() != getValue().getType().getShape())
    return emitOpError() << "value " << getValue().getType() << " and target "
                         << getTarget().getType() << " differ in shape";
  return verifyInPlaceTarget(*this, getTarget(), "target");
}

LogicalResult SumSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  return success();
}

namespace {
/// `gradientMayBeHalf`: the gradient (tensors[1]) may also be the f32
/// parameter's shape in f16 or bf16 (a mixed-precision gradient copied to
/// the host in 16 bits, which the update widens as it reads).
LogicalResult verifyOptimizerOperands(Operation *op, ValueRange tensors,
                                      TypedValue<RankedTensorType> scalars,
                                      bool gradientMayBeHalf = false) {
  auto type = cast<RankedTensorType>(tensors.front().getType());
  for (auto [index, tensor] : llvm::enumerate(tensors)) {
    auto other = cast<RankedTensorType>(tensor.getType());
    if (other == type)
      continue;
    if (index == 1 && gradientMayBeHalf && type.getElementType().isF32() &&
        other.getShape() == type.getShape() &&
        (other.getElementType().isF16() || other.getElementType().isBF16()))
      continue;
    return op->emitOpError() << "param, grad and state must have one type"
                             << (gradientMayBeHalf ? " (or an f32 param a 16-bit grad)" : "")
                             << ", got " << other << " and " << type;
  }
  if (scalars.getType().getNumElements() != 8)
    return op->emitOpError("scalars must be tensor<8xf64>");
  for (auto [index, tensor] : llvm::enumerate(tensors))
    if (index != 1 && failed(verifyInPlaceTarget(op, tensor, "updated operand")))
      return failure();
  return success();
}
} // namespace

LogicalResult AdamWOp::verify() {
  return verifyOptimizerOperands(*this, {getParam(), getGrad(), getExpAvg(), getExpAvgSq()},
                                 getScalars(), /*gradientMayBeHalf=*/true);
}

LogicalResult AdagradOp::verify() {
  if (getLrDecay().convertToDouble() < 0)
    return emitOpError("lr_decay must not be negative");
  return verifyOptimizerOperands(*this, {getParam(), getGrad(), getSum()}, getScalars());
}

namespace {
LogicalResult verifyLambSquares(Operation *op, TypedValue<RankedTensorType> squares) {
  if (squares.getType().getNumElements() != 2)
    return op->emitOpError("squares must be tensor<2xf64>");
  return success();
}
} // namespace

LogicalResult LambMomentsOp::verify() {
  if (failed(verifyLambSquares(*this, getSquares())))
    return failure();
  return verifyOptimizerOperands(*this, {getParam(), getGrad(), getExpAvg(), getExpAvgSq()},
                                 getScalars());
}

LogicalResult LambStepOp::verify() {
  double minCoeff = getMinCoeff().convertToDouble(), maxCoeff = getMaxCoeff().convertToDouble();
  if (!(minCoeff >= 0) || !(maxCoeff > 0) || minCoeff > maxCoeff)
    return emitOpError() << "needs 0 <= min_coeff <= max_coeff and max_coeff > 0, got ["
                         << minCoeff << ", " << maxCoeff << "]";
  if (failed(verifyLambSquares(*this, getSquares())))
    return failure();
  return verifyOptimizerOperands(*this, {getParam(), getExpAvg(), getExpAvgSq()}, getScalars());
}

LogicalResult LionOp::verify() {
  return verifyOptimizerOperands(*this, {getParam(), getGrad(), getExpAvg()}, getScalars());
}

LogicalResult SgdOp::verify() {
  return verifyOptimizerOperands(*this, {getParam(), getGrad(), getMomentumBuffer()},
                                 getScalars());
}
