//===- ZGraph.cpp - zgraph dialect ----------------------------------------===//

#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
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

#define GET_OP_CLASSES
#include "dialects/Graph/IR/ZGraphOps.cpp.inc"

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

LogicalResult MatMulOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  ArrayRef<int64_t> lhs = getLhs().getType().getShape();
  ArrayRef<int64_t> rhs = getRhs().getType().getShape();
  if (lhs.empty() || rhs.empty())
    return emitOpError("operands must have rank at least 1");
  // numpy.matmul: promote rank-1 operands, multiply, drop the promoted dims.
  SmallVector<int64_t> lhsMatrix(lhs.begin(), lhs.end());
  SmallVector<int64_t> rhsMatrix(rhs.begin(), rhs.end());
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
