//===- ShapeOps.cpp - Shape and data-movement ONNX ops --------------------===//
//
// Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat,
// Split, Slice, Gather, Expand, Range, ConstantOfShape, Trilu. Exporters
// compute shapes at run time (Shape -> Gather -> Concat -> Reshape); with
// static input shapes all of that folds to literals here.
//
//===----------------------------------------------------------------------===//

#include "compiler/Import/Onnx/ImporterContext.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <numeric>

using namespace mlir;

namespace zcc::onnx_import {
namespace {

/// An element type as MLIR prints it (f32, i64), for diagnostics.
std::string typeName(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

RankedTensorType i64Vector(MLIRContext *context, int64_t size) {
  return RankedTensorType::get({size}, IntegerType::get(context, 64));
}

/// Output 0 is input 0 under `shape`: folded for literals, a zgraph.reshape
/// otherwise (nothing when the shape is unchanged).
void setReshaped(NodeContext &ctx, ArrayRef<int64_t> shape) {
  RankedTensorType type = ctx.inputType(0);
  if (const Literal *literal = ctx.inputLiteral(0)) {
    ctx.setOutputLiteral(0, literal->reshaped(shape));
    return;
  }
  if (type.getShape() == shape) {
    ctx.setOutput(0, ctx.input(0));
    return;
  }
  ctx.setOutput(0, ctx.create<zgraph::ReshapeOp>(
                       RankedTensorType::get(shape, type.getElementType()), ctx.input(0)));
}

LogicalResult importShape(NodeContext &ctx) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  int64_t rank = shape.size();
  int64_t start = ctx.intAttr("start", 0), end = ctx.intAttr("end", rank);
  auto clampAxis = [&](int64_t axis) {
    if (axis < 0)
      axis += rank;
    return std::clamp<int64_t>(axis, 0, rank);
  };
  start = clampAxis(start);
  end = clampAxis(end);
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d)
    dims.push_back(shape[d]);
  ctx.setOutputLiteral(0, Literal::ofInts(i64Vector(ctx.context(), dims.size()), dims));
  return success();
}

LogicalResult importSize(NodeContext &ctx) {
  ctx.setOutputLiteral(0, Literal::ofInts(RankedTensorType::get({}, ctx.builder().getI64Type()),
                                          {ctx.inputType(0).getNumElements()}));
  return success();
}

LogicalResult importReshape(NodeContext &ctx) {
  FailureOr<std::vector<int64_t>> requested = ctx.constantInts(1, "the target shape");
  if (failed(requested))
    return failure();
  RankedTensorType type = ctx.inputType(0);
  bool allowZero = ctx.intAttr("allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  int64_t inferred = -1, known = 1;
  bool overflow = false;
  for (size_t d = 0; d < requested->size(); ++d) {
    int64_t dim = (*requested)[d];
    if (dim == 0 && !allowZero) {
      if (int64_t(d) >= type.getRank())
        return ctx.error("target dimension " + Twine(d) +
                         " is 0 (copy), but the input has rank " + Twine(type.getRank()));
      dim = type.getDimSize(d);
    }
    if (dim == -1) {
      if (inferred >= 0)
        return ctx.error("the target shape has more than one -1");
      inferred = d;
      shape.push_back(1);
      continue;
    }
    if (dim < 0)
      return ctx.error("target dimension " + Twine(d) + " is " + Twine(dim));
    overflow |= __builtin_mul_overflow(known, dim, &known);
    shape.push_back(dim);
  }
  // A product that wrapped around could equal the input's element count
  // and pass the checks below. A zero dimension makes the count 0 however
  // large the others are.
  if (llvm::is_contained(shape, 0))
    known = 0;
  else if (overflow)
    return ctx.error("the target shape " + shapeText(shape) +
                     " has more elements than int64 counts; the input has " +
                     Twine(type.getNumElements()));
  int64_t total = type.getNumElements();
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return ctx.error("cannot infer the -1 dimension: " + Twine(total) +
                       " elements do not divide by " + Twine(known));
    shape[inferred] = total / known;
    known *= shape[inferred];
  }
  if (known != total)
    return ctx.error("cannot reshape " + Twine(total) + " elements into " + Twine(known));
  setReshaped(ctx, shape);
  return success();
}

LogicalResult importFlatten(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  std::optional<int64_t> axis = ctx.intAttr("axis", 1) == type.getRank()
                                    ? std::optional<int64_t>(type.getRank())
                                    : normalizeAxis(ctx.intAttr("axis", 1), type.getRank());
  if (!axis)
    return ctx.error("axis is out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < type.getRank(); ++d)
    (d < *axis ? outer : inner) *= type.getDimSize(d);
  setReshaped(ctx, {outer, inner});
  return success();
}

/// Squeeze/Unsqueeze axes: an input from opset 13, an attribute before.
FailureOr<std::vector<int64_t>> axesOperand(NodeContext &ctx, int index) {
  if (ctx.hasInput(index))
    return ctx.constantInts(index, "axes");
  return ctx.intsAttr("axes");
}

LogicalResult importSqueeze(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  FailureOr<std::vector<int64_t>> axes = axesOperand(ctx, 1);
  if (failed(axes))
    return failure();
  SmallVector<bool> drop(type.getRank(), false);
  if (axes->empty()) {
    for (int64_t d = 0; d < type.getRank(); ++d)
      drop[d] = type.getDimSize(d) == 1;
  }
  for (int64_t axis : *axes) {
    std::optional<int64_t> d = normalizeAxis(axis, type.getRank());
    if (!d)
      return ctx.error("axis " + Twine(axis) + " is out of range");
    if (type.getDimSize(*d) != 1)
      return ctx.error("cannot squeeze dimension " + Twine(*d) + " of size " +
                       Twine(type.getDimSize(*d)));
    drop[*d] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!drop[d])
      shape.push_back(type.getDimSize(d));
  setReshaped(ctx, shape);
  return success();
}

LogicalResult importUnsqueeze(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  FailureOr<std::vector<int64_t>> axes = axesOperand(ctx, 1);
  if (failed(axes))
    return failure();
  int64_t rank = type.getRank() + axes->size();
  SmallVector<bool> inserted(rank, false);
  for (int64_t axis : *axes) {
    std::optional<int64_t> d = normalizeAxis(axis, rank);
    if (!d || inserted[*d])
      return ctx.error("axis " + Twine(axis) + " is out of range or repeated");
    inserted[*d] = true;
  }
  SmallVector<int64_t> shape;
  int64_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(inserted[d] ? 1 : type.getDimSize(next++));
  setReshaped(ctx, shape);
  return success();
}

LogicalResult importTranspose(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  std::vector<int64_t> perm = ctx.intsAttr("perm");
  if (perm.empty())
    for (int64_t d = type.getRank() - 1; d >= 0; --d)
      perm.push_back(d);
  if (int64_t(perm.size()) != type.getRank())
    return ctx.error("perm has " + Twine(perm.size()) + " entries for rank " +
                     Twine(type.getRank()));
  SmallVector<int64_t> shape;
  SmallVector<bool> seen(type.getRank(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= type.getRank() || seen[p])
      return ctx.error("perm is not a permutation");
    seen[p] = true;
    shape.push_back(type.getDimSize(p));
  }
  auto resultType = RankedTensorType::get(shape, type.getElementType());
  if (const Literal *literal = ctx.inputLiteral(0)) {
    SmallVector<int64_t> zeros(type.getRank(), 0), ones(type.getRank(), 1);
    ctx.setOutputLiteral(0, literal->take(resultType, stridedIndices(type.getShape(), shape,
                                                                     zeros, ones, perm)));
    return success();
  }
  ctx.setOutput(0, ctx.create<zgraph::TransposeOp>(resultType, ctx.input(0),
                                                   ctx.builder().getDenseI64ArrayAttr(perm)));
  return success();
}

LogicalResult importConcat(NodeContext &ctx) {
  if (ctx.numInputs() < 1)
    return ctx.error("expects at least one input");
  RankedTensorType first = ctx.inputType(0);
  std::optional<int64_t> axis = normalizeAxis(ctx.intAttr("axis", 0), first.getRank());
  if (!axis)
    return ctx.error("axis is out of range");
  SmallVector<int64_t> shape(first.getShape());
  shape[*axis] = 0;
  bool allLiteral = true;
  for (int i = 0; i < ctx.numInputs(); ++i) {
    RankedTensorType type = ctx.inputType(i);
    if (type.getRank() != first.getRank() || type.getElementType() != first.getElementType())
      return ctx.error("inputs differ in rank or element type");
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != *axis && type.getDimSize(d) != first.getDimSize(d))
        return ctx.error("inputs differ in dimension " + Twine(d));
    if (__builtin_add_overflow(shape[*axis], type.getDimSize(*axis), &shape[*axis]))
      return ctx.error("the inputs' dimensions " + Twine(*axis) +
                       " add up to more than int64 counts");
    allLiteral &= ctx.inputLiteral(i) != nullptr;
  }
  auto resultType = RankedTensorType::get(shape, first.getElementType());
  if (!fitsTensorBytes(shape, first.getElementType()))
    return ctx.error("the result has shape " + shapeText(shape) + ", larger than " +
                     Twine(kMaxTensorBytes >> 40) + " TiB; check the inputs' shapes");
  // The same literal may be listed many times: bound the folded result.
  if (allLiteral && resultType.getNumElements() <= kMaxFoldElements) {
    // Concatenation of row-major blocks: for each outer index, the inputs'
    // inner blocks one after the other.
    int64_t outer = 1;
    for (int64_t d = 0; d < *axis; ++d)
      outer *= shape[d];
    Literal result = ctx.inputLiteral(0)->isFloat() ? Literal::ofFloats(resultType, {})
                                                    : Literal::ofInts(resultType, {});
    for (int64_t o = 0; o < outer; ++o)
      for (int i = 0; i < ctx.numInputs(); ++i) {
        const Literal &part = *ctx.inputLiteral(i);
        int64_t block = outer ? part.size() / outer : 0;
        for (int64_t e = 0; e < block; ++e) {
          if (part.isFloat())
            result.floats.push_back(part.floats[o * block + e]);
          else
            result.ints.push_back(part.ints[o * block + e]);
        }
      }
    ctx.setOutputLiteral(0, std::move(result));
    return success();
  }
  SmallVector<Value> inputs;
  for (int i = 0; i < ctx.numInputs(); ++i)
    inputs.push_back(ctx.input(i));
  ctx.setOutput(0, ctx.create<zgraph::ConcatOp>(resultType, inputs, *axis));
  return success();
}

/// Output `index` is input 0 restricted to [starts, limits) with `steps`.
void setSlice(NodeContext &ctx, int index, ArrayRef<int64_t> starts, ArrayRef<int64_t> limits,
              ArrayRef<int64_t> steps) {
  RankedTensorType type = ctx.inputType(0);
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d)
    shape.push_back(limits[d] <= starts[d] ? 0 : (limits[d] - starts[d] - 1) / steps[d] + 1);
  auto resultType = RankedTensorType::get(shape, type.getElementType());
  if (const Literal *literal = ctx.inputLiteral(0)) {
    ctx.setOutputLiteral(index, literal->take(resultType, stridedIndices(type.getShape(), shape,
                                                                         starts, steps, {})));
    return;
  }
  if (resultType == type) {
    ctx.setOutput(index, ctx.input(0));
    return;
  }
  Builder &b = ctx.builder();
  ctx.setOutput(index, ctx.create<zgraph::SliceOp>(resultType, ctx.input(0),
                                                   b.getDenseI64ArrayAttr(starts),
                                                   b.getDenseI64ArrayAttr(limits),
                                                   b.getDenseI64ArrayAttr(steps)));
}

LogicalResult importSlice(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  FailureOr<std::vector<int64_t>> starts = ctx.constantInts(1, "starts");
  FailureOr<std::vector<int64_t>> ends = ctx.constantInts(2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  std::vector<int64_t> allAxes(starts->size());
  std::iota(allAxes.begin(), allAxes.end(), int64_t(0));
  FailureOr<std::vector<int64_t>> givenAxes = ctx.optionalConstantInts(3, "axes", allAxes);
  FailureOr<std::vector<int64_t>> givenSteps =
      ctx.optionalConstantInts(4, "steps", std::vector<int64_t>(starts->size(), 1));
  if (failed(givenAxes) || failed(givenSteps))
    return failure();
  std::vector<int64_t> &axes = *givenAxes, &steps = *givenSteps;
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return ctx.error("starts, ends, axes and steps must have the same length");
  int64_t rank = type.getRank();
  SmallVector<int64_t> lo(rank, 0), hi(type.getShape()), st(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    std::optional<int64_t> d = normalizeAxis(axes[i], rank);
    if (!d)
      return ctx.error("axis " + Twine(axes[i]) + " is out of range");
    if (steps[i] <= 0)
      return ctx.error("steps other than positive are not supported yet");
    int64_t dim = type.getDimSize(*d);
    auto clampIndex = [&](int64_t v) {
      if (v < 0)
        v += dim;
      return std::clamp<int64_t>(v, 0, dim);
    };
    lo[*d] = clampIndex((*starts)[i]);
    hi[*d] = std::max(lo[*d], clampIndex((*ends)[i]));
    st[*d] = steps[i];
  }
  setSlice(ctx, 0, lo, hi, st);
  return success();
}

LogicalResult importSplit(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  std::optional<int64_t> axis = normalizeAxis(ctx.intAttr("axis", 0), type.getRank());
  if (!axis)
    return ctx.error("axis is out of range");
  int64_t dim = type.getDimSize(*axis);
  std::vector<int64_t> sizes;
  if (ctx.hasInput(1)) {
    FailureOr<std::vector<int64_t>> given = ctx.constantInts(1, "split");
    if (failed(given))
      return failure();
    sizes = *given;
  } else if (ctx.hasAttr("split")) {
    sizes = ctx.intsAttr("split");
  } else {
    int64_t parts = ctx.hasAttr("num_outputs") ? ctx.intAttr("num_outputs", 1)
                                               : ctx.numOutputs();
    if (parts < 1)
      return ctx.error("num_outputs must be at least 1");
    // Checked before the sizes are listed: num_outputs is not bounded by
    // anything else in the model.
    if (parts != ctx.numOutputs())
      return ctx.error("num_outputs is " + Twine(parts) + " but the node has " +
                       Twine(ctx.numOutputs()) + " outputs");
    int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t p = 0, left = dim; p < parts; ++p, left -= chunk)
      sizes.push_back(std::min(chunk, std::max<int64_t>(left, 0)));
  }
  if (int64_t(sizes.size()) != ctx.numOutputs())
    return ctx.error("split has " + Twine(sizes.size()) + " sizes for " +
                     Twine(ctx.numOutputs()) + " outputs");
  for (int64_t size : sizes)
    if (size < 0 || size > dim)
      return ctx.error("split size " + Twine(size) + " is outside [0, " + Twine(dim) +
                       "], the size of dimension " + Twine(*axis));
  if (std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != dim)
    return ctx.error("split sizes do not add up to dimension " + Twine(*axis) + " (" +
                     Twine(dim) + ")");
  SmallVector<int64_t> lo(type.getRank(), 0), hi(type.getShape()), st(type.getRank(), 1);
  int64_t offset = 0;
  for (int i = 0; i < ctx.numOutputs(); ++i) {
    lo[*axis] = offset;
    hi[*axis] = offset + sizes[i];
    setSlice(ctx, i, lo, hi, st);
    offset += sizes[i];
  }
  return success();
}

LogicalResult importGather(NodeContext &ctx) {
  RankedTensorType data = ctx.inputType(0), indices = ctx.inputType(1);
  std::optional<int64_t> axis = normalizeAxis(ctx.intAttr("axis", 0), data.getRank());
  if (!axis)
    return ctx.error("axis is out of range");
  if (!isa<IntegerType>(indices.getElementType()) || indices.getElementType().isInteger(1))
    return ctx.error("indices must be int32 or int64");
  SmallVector<int64_t> shape(data.getShape().take_front(*axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, data.getShape().drop_front(*axis + 1));
  if (!fitsTensorBytes(shape, data.getElementType()))
    return ctx.error("the result has shape " + shapeText(shape) + ", larger than " +
                     Twine(kMaxTensorBytes >> 40) + " TiB; check the indices' shape");
  auto resultType = RankedTensorType::get(shape, data.getElementType());
  const Literal *dataLiteral = ctx.inputLiteral(0);
  const Literal *indexLiteral = ctx.inputLiteral(1);
  int64_t dim = data.getDimSize(*axis);
  if (indexLiteral)
    for (int64_t i = 0; i < indexLiteral->size(); ++i)
      if (indexLiteral->ints[i] < -dim || indexLiteral->ints[i] >= dim)
        return ctx.error("index " + Twine(indexLiteral->ints[i]) + " is out of range for " +
                         "dimension " + Twine(*axis) + " of size " + Twine(dim));
  if (dataLiteral && indexLiteral && resultType.getNumElements() <= kMaxFoldElements) {
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < *axis; ++d)
      outer *= data.getDimSize(d);
    for (int64_t d = *axis + 1; d < data.getRank(); ++d)
      inner *= data.getDimSize(d);
    std::vector<int64_t> take;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < indexLiteral->size(); ++i) {
        int64_t index = indexLiteral->ints[i] < 0 ? indexLiteral->ints[i] + dim
                                                  : indexLiteral->ints[i];
        for (int64_t e = 0; e < inner; ++e)
          take.push_back((o * dim + index) * inner + e);
      }
    ctx.setOutputLiteral(0, dataLiteral->take(resultType, take));
    return success();
  }
  ctx.setOutput(0, ctx.create<zgraph::GatherOp>(resultType, ctx.input(0), ctx.input(1), *axis));
  return success();
}

LogicalResult importExpand(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  FailureOr<std::vector<int64_t>> target = ctx.constantInts(1, "the target shape");
  if (failed(target))
    return failure();
  // Checked before broadcasting: a negative dimension would read as
  // dynamic (or as nothing at all) in a tensor type.
  for (auto [index, dim] : llvm::enumerate(*target))
    if (dim < 0)
      return ctx.error("dimension " + Twine(index) + " of the target shape is " + Twine(dim) +
                       "; dimensions must be at least 0");
  FailureOr<SmallVector<int64_t>> shape = broadcastShape(type.getShape(), *target);
  if (failed(shape))
    return ctx.error("the input does not broadcast to the target shape");
  if (!fitsTensorBytes(*shape, type.getElementType()))
    return ctx.error("expands to shape " + shapeText(*shape) + ", larger than " +
                     Twine(kMaxTensorBytes >> 40) + " TiB; check the target shape (input 1, '" +
                     ctx.node().input(1) + "')");
  auto resultType = RankedTensorType::get(*shape, type.getElementType());
  if (const Literal *literal = ctx.inputLiteral(0)) {
    if (resultType.getNumElements() <= kMaxFoldElements) {
      ctx.setOutputLiteral(0, literal->take(resultType,
                                            broadcastIndices(*shape, type.getShape())));
      return success();
    }
  }
  if (resultType == type) {
    ctx.setOutput(0, ctx.input(0));
    return success();
  }
  Value input = ctx.input(0);
  if (type.getRank() < resultType.getRank()) {
    SmallVector<int64_t> padded(resultType.getRank() - type.getRank(), 1);
    llvm::append_range(padded, type.getShape());
    input = ctx.create<zgraph::ReshapeOp>(RankedTensorType::get(padded, type.getElementType()),
                                          input);
  }
  ctx.setOutput(0, ctx.create<zgraph::BroadcastOp>(resultType, input));
  return success();
}

LogicalResult importRange(NodeContext &ctx) {
  const Literal *start = ctx.inputLiteral(0), *limit = ctx.inputLiteral(1),
                *delta = ctx.inputLiteral(2);
  if (!start || !limit || !delta)
    return ctx.error("start, limit and delta must be compile-time constants");
  // Range's operands are scalars of one type (ONNX's T); the folding below
  // reads element 0 of each and computes in start's type.
  const std::pair<const char *, const Literal *> operands[] = {
      {"start", start}, {"limit", limit}, {"delta", delta}};
  for (auto [name, literal] : operands) {
    if (literal->size() != 1)
      return ctx.error(Twine(name) + " has " + Twine(literal->size()) +
                       " elements; start, limit and delta must be scalars");
    if (literal->type.getElementType() != start->type.getElementType())
      return ctx.error(Twine(name) + " is " + typeName(literal->type.getElementType()) +
                       " but start is " + typeName(start->type.getElementType()) +
                       "; start, limit and delta must have the same element type");
  }
  double first = start->asDouble(0), last = limit->asDouble(0), step = delta->asDouble(0);
  if (!std::isfinite(first) || !std::isfinite(last) || !std::isfinite(step))
    return ctx.error("start, limit and delta must be finite");
  if (step == 0)
    return ctx.error("delta is 0");
  // The element count is checked as a double: (limit - start) / delta can
  // be far beyond int64.
  double span = std::max(0.0, std::ceil((last - first) / step));
  if (span > double(kMaxFoldElements))
    return ctx.error("the range has " + Twine(std::string(llvm::formatv("{0:F0}", span))) +
                     " elements");
  int64_t count = int64_t(span);
  auto type = RankedTensorType::get({count}, start->type.getElementType());
  if (start->isFloat()) {
    std::vector<double> values;
    for (int64_t i = 0; i < count; ++i)
      values.push_back(first + i * step);
    ctx.setOutputLiteral(0, Literal::ofFloats(type, values));
  } else {
    std::vector<int64_t> values;
    for (int64_t i = 0; i < count; ++i)
      values.push_back(int64_t(uint64_t(start->ints[0]) + uint64_t(i) * uint64_t(delta->ints[0])));
    ctx.setOutputLiteral(0, Literal::ofInts(type, values));
  }
  return success();
}

LogicalResult importConstantOfShape(NodeContext &ctx) {
  FailureOr<std::vector<int64_t>> shape = ctx.constantInts(0, "the shape");
  if (failed(shape))
    return failure();
  Literal fill = Literal::ofFloats(RankedTensorType::get({}, ctx.builder().getF32Type()), {0.0});
  if (const onnx::TensorProto *value = ctx.tensorAttr("value")) {
    std::string error;
    FailureOr<Literal> given = readTensorLiteral(ctx.context(), *value, error);
    if (failed(given) || given->size() != 1)
      return ctx.error("value must be a one-element tensor" + (error.empty() ? "" : ": " + error));
    fill = *given;
  }
  // Checked before the shape becomes a tensor type: a negative dimension
  // would read as dynamic, and the element count may not fit in int64.
  for (auto [index, dim] : llvm::enumerate(*shape))
    if (dim < 0)
      return ctx.error("dimension " + Twine(index) + " of the shape is " + Twine(dim) +
                       "; dimensions must be at least 0");
  int64_t elements = 1;
  for (int64_t dim : *shape)
    if (__builtin_mul_overflow(elements, dim, &elements))
      return ctx.error("the constant has more elements than int64 counts");
  if (elements > kMaxFoldElements)
    return ctx.error("the constant has " + Twine(elements) + " elements");
  auto type = RankedTensorType::get(*shape, fill.type.getElementType());
  ctx.setOutputLiteral(0, fill.take(type, std::vector<int64_t>(type.getNumElements(), 0)));
  return success();
}

/// Pad in constant mode: concatenates blocks of the pad value before and
/// after each padded axis (and slices for negative pads).
LogicalResult importPad(NodeContext &ctx) {
  std::string mode = ctx.stringAttr("mode", "constant");
  if (mode != "constant")
    return ctx.error("mode '" + mode + "' is not supported yet; only 'constant'");
  RankedTensorType type = ctx.inputType(0);
  FailureOr<std::vector<int64_t>> pads = ctx.constantInts(1, "pads");
  if (failed(pads))
    return failure();
  std::vector<int64_t> allAxes(type.getRank());
  std::iota(allAxes.begin(), allAxes.end(), int64_t(0));
  FailureOr<std::vector<int64_t>> givenAxes = ctx.optionalConstantInts(3, "axes", allAxes);
  if (failed(givenAxes))
    return failure();
  const std::vector<int64_t> &axes = *givenAxes;
  if (pads->size() != 2 * axes.size())
    return ctx.error("pads must have two entries per padded axis");
  Literal fill = isa<FloatType>(type.getElementType())
                     ? Literal::ofFloats(RankedTensorType::get({}, type.getElementType()), {0.0})
                     : Literal::ofInts(RankedTensorType::get({}, type.getElementType()), {0});
  if (ctx.hasInput(2)) {
    const Literal *value = ctx.inputLiteral(2);
    if (!value)
      return ctx.error("the pad value must be a compile-time constant");
    fill = value->castTo(type.getElementType()).reshaped({});
  }
  if (ctx.inputLiteral(0))
    return ctx.error("padding a constant is not supported yet");
  Value current = ctx.input(0);
  for (size_t i = 0; i < axes.size(); ++i) {
    std::optional<int64_t> axis = normalizeAxis(axes[i], type.getRank());
    if (!axis)
      return ctx.error("axis " + Twine(axes[i]) + " is out of range");
    int64_t before = (*pads)[i], after = (*pads)[i + axes.size()];
    auto currentType = cast<RankedTensorType>(current.getType());
    if (before < -currentType.getDimSize(*axis) || after < -currentType.getDimSize(*axis))
      return ctx.error("negative pads remove more than the dimension holds");
    // The padding is materialised as constant blocks: bound them like
    // folded constants, before anything is allocated.
    int64_t rest = 1, added = 0;
    for (int64_t d = 0; d < currentType.getRank(); ++d)
      if (d != *axis && __builtin_mul_overflow(rest, currentType.getDimSize(d), &rest))
        rest = INT64_MAX;
    if (__builtin_add_overflow(std::max<int64_t>(0, before), std::max<int64_t>(0, after), &added) ||
        __builtin_mul_overflow(added, rest, &added) || added > kMaxFoldElements)
      return ctx.error("pads " + Twine(before) + " and " + Twine(after) + " on axis " +
                       Twine(*axis) + " add more than " + Twine(kMaxFoldElements) +
                       " elements of pad value, which zcc materialises as constants");
    if (before < 0 || after < 0) {
      SmallVector<int64_t> lo(currentType.getRank(), 0), hi(currentType.getShape()),
          st(currentType.getRank(), 1);
      lo[*axis] = std::max<int64_t>(0, -before);
      hi[*axis] = currentType.getDimSize(*axis) - std::max<int64_t>(0, -after);
      if (hi[*axis] < lo[*axis])
        return ctx.error("negative pads remove more than the dimension holds");
      SmallVector<int64_t> shape(currentType.getShape());
      shape[*axis] = hi[*axis] - lo[*axis];
      Builder &b = ctx.builder();
      current = ctx.create<zgraph::SliceOp>(
          RankedTensorType::get(shape, type.getElementType()), current,
          b.getDenseI64ArrayAttr(lo), b.getDenseI64ArrayAttr(hi), b.getDenseI64ArrayAttr(st));
      currentType = cast<RankedTensorType>(current.getType());
      before = std::max<int64_t>(0, before);
      after = std::max<int64_t>(0, after);
    }
    SmallVector<Value> parts;
    auto block = [&](int64_t size) {
      SmallVector<int64_t> shape(currentType.getShape());
      shape[*axis] = size;
      auto blockType = RankedTensorType::get(shape, type.getElementType());
      return ctx.builder()
          .create<zgraph::ConstantOp>(
              ctx.loc(), fill.take(blockType, std::vector<int64_t>(blockType.getNumElements(), 0))
                             .toAttr())
          .getResult();
    };
    if (before > 0)
      parts.push_back(block(before));
    parts.push_back(current);
    if (after > 0)
      parts.push_back(block(after));
    if (parts.size() == 1)
      continue;
    SmallVector<int64_t> shape(currentType.getShape());
    shape[*axis] += before + after;
    current = ctx.create<zgraph::ConcatOp>(RankedTensorType::get(shape, type.getElementType()),
                                           parts, *axis);
  }
  ctx.setOutput(0, current);
  return success();
}

LogicalResult importTrilu(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  if (type.getRank() < 2)
    return ctx.error("expects a tensor of rank at least 2");
  bool upper = ctx.intAttr("upper", 1) != 0;
  FailureOr<std::vector<int64_t>> givenK = ctx.optionalConstantInts(1, "k", {0});
  if (failed(givenK))
    return failure();
  int64_t k = givenK->empty() ? 0 : givenK->front();
  if (const Literal *literal = ctx.inputLiteral(0)) {
    Literal result = *literal;
    int64_t rows = type.getDimSize(type.getRank() - 2), cols = type.getDimSize(type.getRank() - 1);
    for (int64_t e = 0; e < result.size(); ++e) {
      int64_t i = (e / cols) % rows, j = e % cols;
      bool keep = upper ? j - i >= k : j - i <= k;
      if (!keep) {
        if (result.isFloat())
          result.floats[e] = 0;
        else
          result.ints[e] = 0;
      }
    }
    ctx.setOutputLiteral(0, std::move(result));
    return success();
  }
  ctx.setOutput(0, ctx.create<zgraph::TriluOp>(type, ctx.input(0),
                                               ctx.builder().getBoolAttr(upper),
                                               ctx.builder().getI64IntegerAttr(k)));
  return success();
}

} // namespace

void addShapeImporters(std::vector<OpImporter> &table) {
  table.push_back({"Shape", 13, importShape});
  table.push_back({"Size", 13, importSize});
  table.push_back({"Reshape", 13, importReshape});
  table.push_back({"Flatten", 13, importFlatten});
  table.push_back({"Squeeze", 13, importSqueeze});
  table.push_back({"Unsqueeze", 13, importUnsqueeze});
  table.push_back({"Transpose", 13, importTranspose});
  table.push_back({"Concat", 13, importConcat});
  table.push_back({"Split", 13, importSplit});
  table.push_back({"Slice", 13, importSlice});
  table.push_back({"Gather", 13, importGather});
  table.push_back({"Expand", 13, importExpand});
  table.push_back({"Range", 11, importRange});
  table.push_back({"ConstantOfShape", 9, importConstantOfShape});
  table.push_back({"Trilu", 14, importTrilu});
  table.push_back({"Pad", 13, importPad});
}

} // namespace zcc::onnx_import
