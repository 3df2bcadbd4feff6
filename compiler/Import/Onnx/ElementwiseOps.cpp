//===- ElementwiseOps.cpp - Element-wise ONNX ops -------------------------===//
//
// Add, Sub, Mul, Div, Pow, Max, Min, comparisons, Where, unary math,
// activations, Cast, CastLike, Constant, Identity, Dropout. With literal
// operands (shape computations, masks) the result is folded at import.
//
//===----------------------------------------------------------------------===//

#include "compiler/Import/Onnx/ImporterContext.h"

#include "llvm/Support/xxhash.h"

#include <cmath>
#include <cstdio>

using namespace mlir;

namespace zcc::onnx_import {
namespace {

enum class Binary { Add, Sub, Mul, Div, Pow, Max, Min, Equal, Less, Greater };

bool isComparison(Binary kind) {
  return kind == Binary::Equal || kind == Binary::Less || kind == Binary::Greater;
}

/// An element type as MLIR prints it (f32, i64), for diagnostics.
std::string typeName(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

/// A double as diagnostics show it: 1e+30, nan, -inf.
std::string numberText(double value) {
  // The sign of a NaN depends on how it was computed: leave it out.
  if (std::isnan(value))
    return "nan";
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// ONNX Pow of an integer base: exact for an integer exponent (a negative
/// one truncates 1/base^n toward zero), the real power truncated toward zero
/// for a floating-point one. nullopt when the result is not an integer
/// that an element of `width` bits holds (overflow, 0 to a negative power,
/// a negative base to a fractional power).
std::optional<int64_t> integerPow(int64_t base, const Literal &exponent, int64_t index,
                                  unsigned width) {
  if (exponent.isFloat())
    return truncateToInteger(std::pow(double(base), exponent.floats[index]), width);
  int64_t power = exponent.ints[index];
  if (power < 0) {
    if (base == 0)
      return std::nullopt;
    if (base == 1 || base == -1)
      return base == -1 && power % 2 != 0 ? -1 : 1;
    return 0;
  }
  int64_t result = 1, factor = base;
  for (; power > 0; power >>= 1) {
    if ((power & 1) && __builtin_mul_overflow(result, factor, &result))
      return std::nullopt;
    if (power > 1 && __builtin_mul_overflow(factor, factor, &factor))
      return std::nullopt;
  }
  return fitsInteger(result, width) ? std::optional<int64_t>(result) : std::nullopt;
}

FailureOr<Literal> foldBinary(NodeContext &ctx, Binary kind, const Literal &lhs, const Literal &rhs,
                              RankedTensorType resultType) {
  std::vector<int64_t> li = broadcastIndices(resultType.getShape(), lhs.type.getShape());
  std::vector<int64_t> ri = broadcastIndices(resultType.getShape(), rhs.type.getShape());
  int64_t count = resultType.getNumElements();
  if (!lhs.isFloat() || isComparison(kind)) {
    std::vector<int64_t> out(count);
    for (int64_t i = 0; i < count; ++i) {
      double a = lhs.asDouble(li[i]), b = rhs.asDouble(ri[i]);
      bool isFloat = lhs.isFloat();
      // Only read as integers when they are: a float comparison's operands
      // may lie beyond int64.
      int64_t x = isFloat ? 0 : lhs.ints[li[i]], y = isFloat ? 0 : rhs.asInt(ri[i]);
      switch (kind) {
      // Two's-complement wrap-around, as the runtime's integer kernels do:
      // signed overflow is undefined in C++, and INT64_MIN / -1 traps (SIGFPE).
      case Binary::Add: out[i] = int64_t(uint64_t(x) + uint64_t(y)); break;
      case Binary::Sub: out[i] = int64_t(uint64_t(x) - uint64_t(y)); break;
      case Binary::Mul: out[i] = int64_t(uint64_t(x) * uint64_t(y)); break;
      case Binary::Div:
        out[i] = y == 0 ? 0 : y == -1 ? int64_t(0 - uint64_t(x)) : x / y;
        break;
      case Binary::Pow: {
        unsigned width = resultType.getElementType().getIntOrFloatBitWidth();
        std::optional<int64_t> power = integerPow(x, rhs, ri[i], width);
        if (!power)
          return ctx.error(Twine(x) + " to the power " + numberText(b) + " is not a value of " +
                           typeName(resultType.getElementType()) +
                           "; Cast the base to a floating-point type to compute it");
        out[i] = *power;
        break;
      }
      case Binary::Max: out[i] = std::max(x, y); break;
      case Binary::Min: out[i] = std::min(x, y); break;
      case Binary::Equal: out[i] = isFloat ? a == b : x == y; break;
      case Binary::Less: out[i] = isFloat ? a < b : x < y; break;
      case Binary::Greater: out[i] = isFloat ? a > b : x > y; break;
      }
    }
    return Literal::ofInts(resultType, std::move(out));
  }
  std::vector<double> out(count);
  for (int64_t i = 0; i < count; ++i) {
    double a = lhs.floats[li[i]], b = rhs.asDouble(ri[i]);
    switch (kind) {
    case Binary::Add: out[i] = a + b; break;
    case Binary::Sub: out[i] = a - b; break;
    case Binary::Mul: out[i] = a * b; break;
    case Binary::Div: out[i] = a / b; break;
    case Binary::Pow: out[i] = std::pow(a, b); break;
    case Binary::Max: out[i] = std::max(a, b); break;
    case Binary::Min: out[i] = std::min(a, b); break;
    default: break;
    }
  }
  return Literal::ofFloats(resultType, std::move(out));
}

/// Imports one broadcasting binary op over inputs `a` and `b` of the node;
/// returns the result or failure.
FailureOr<std::pair<Value, std::optional<Literal>>>
importBinary(NodeContext &ctx, Binary kind, int a, int b) {
  RankedTensorType lhsType = ctx.inputType(a), rhsType = ctx.inputType(b);
  if (kind != Binary::Pow && lhsType.getElementType() != rhsType.getElementType()) {
    (void)ctx.error("operands have different element types");
    return failure();
  }
  FailureOr<SmallVector<int64_t>> shape = broadcastShape(lhsType.getShape(), rhsType.getShape());
  if (failed(shape)) {
    (void)ctx.error("operand shapes are not broadcast-compatible");
    return failure();
  }
  Type element = isComparison(kind) ? ctx.builder().getI1Type() : lhsType.getElementType();
  auto resultType = RankedTensorType::get(*shape, element);
  const Literal *lhs = ctx.inputLiteral(a);
  const Literal *rhs = ctx.inputLiteral(b);
  if (!fitsTensorBytes(*shape, element)) {
    (void)ctx.error("operand shapes " + shapeText(lhsType.getShape()) + " and " +
                    shapeText(rhsType.getShape()) + " broadcast to " + shapeText(*shape) +
                    ", larger than " + Twine(kMaxTensorBytes >> 40) + " TiB");
    return failure();
  }
  if (lhs && rhs && resultType.getNumElements() <= kMaxFoldElements) {
    FailureOr<Literal> folded = foldBinary(ctx, kind, *lhs, *rhs, resultType);
    if (failed(folded))
      return failure();
    return std::make_pair(Value(), std::optional<Literal>(std::move(*folded)));
  }
  Value left = ctx.input(a);
  Value right = ctx.input(b);
  // ONNX Pow allows an exponent of another type; zgraph.pow wants one type.
  // Casting a float exponent to an integer base's type would truncate it.
  if (kind == Binary::Pow && !isa<FloatType>(lhsType.getElementType())) {
    (void)ctx.error("Pow of an integer base computed at run time is not supported yet");
    return failure();
  }
  if (kind == Binary::Pow && rhsType.getElementType() != lhsType.getElementType())
    right = ctx.create<zgraph::CastOp>(
        RankedTensorType::get(rhsType.getShape(), lhsType.getElementType()), right);
  Value result;
  switch (kind) {
  case Binary::Add: result = ctx.create<zgraph::AddOp>(resultType, left, right); break;
  case Binary::Sub: result = ctx.create<zgraph::SubOp>(resultType, left, right); break;
  case Binary::Mul: result = ctx.create<zgraph::MulOp>(resultType, left, right); break;
  case Binary::Div: result = ctx.create<zgraph::DivOp>(resultType, left, right); break;
  case Binary::Pow: result = ctx.create<zgraph::PowOp>(resultType, left, right); break;
  case Binary::Max: result = ctx.create<zgraph::MaxOp>(resultType, left, right); break;
  case Binary::Min: result = ctx.create<zgraph::MinOp>(resultType, left, right); break;
  case Binary::Equal: result = ctx.create<zgraph::EqualOp>(resultType, left, right); break;
  case Binary::Less: result = ctx.create<zgraph::LessOp>(resultType, left, right); break;
  case Binary::Greater: result = ctx.create<zgraph::GreaterOp>(resultType, left, right); break;
  }
  return std::make_pair(result, std::optional<Literal>());
}

OpImporterFn binary(Binary kind) {
  return [kind](NodeContext &ctx) -> LogicalResult {
    if (ctx.numInputs() != 2)
      return ctx.error("expects 2 inputs");
    auto result = importBinary(ctx, kind, 0, 1);
    if (failed(result))
      return failure();
    if (result->second)
      ctx.setOutputLiteral(0, std::move(*result->second));
    else
      ctx.setOutput(0, result->first);
    return success();
  };
}

/// Max and Min take any number of inputs: fold them pairwise.
OpImporterFn variadic(Binary kind) {
  return [kind](NodeContext &ctx) -> LogicalResult {
    if (ctx.numInputs() < 1)
      return ctx.error("expects at least one input");
    if (ctx.numInputs() == 1) {
      if (const Literal *literal = ctx.inputLiteral(0))
        ctx.setOutputLiteral(0, *literal);
      else
        ctx.setOutput(0, ctx.input(0));
      return success();
    }
    if (ctx.numInputs() > 2)
      return ctx.error("more than two inputs are not supported yet; chain the op");
    return binary(kind)(ctx);
  };
}

enum class Unary { Neg, Sqrt, Reciprocal, Exp, Log, Tanh, Erf, Relu, Sigmoid, Not };

double applyUnary(Unary kind, double x) {
  switch (kind) {
  case Unary::Neg: return -x;
  case Unary::Sqrt: return std::sqrt(x);
  case Unary::Reciprocal: return 1.0 / x;
  case Unary::Exp: return std::exp(x);
  case Unary::Log: return std::log(x);
  case Unary::Tanh: return std::tanh(x);
  case Unary::Erf: return std::erf(x);
  case Unary::Relu: return x > 0 ? x : 0;
  case Unary::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
  case Unary::Not: return x == 0 ? 1 : 0;
  }
  return x;
}

OpImporterFn unary(Unary kind) {
  return [kind](NodeContext &ctx) -> LogicalResult {
    RankedTensorType type = ctx.inputType(0);
    if (const Literal *literal = ctx.inputLiteral(0)) {
      Literal result = *literal;
      for (int64_t i = 0; i < result.size(); ++i) {
        if (result.isFloat()) {
          result.floats[i] = applyUnary(kind, result.floats[i]);
          continue;
        }
        int64_t x = result.ints[i];
        // Neg wraps around like the other integer folds (-INT64_MIN has
        // no int64 value); Relu and Not stay exact; the others go through
        // double and must give back an integer of the element type.
        if (kind == Unary::Neg || kind == Unary::Relu || kind == Unary::Not) {
          result.ints[i] = kind == Unary::Neg    ? int64_t(0 - uint64_t(x))
                           : kind == Unary::Relu ? std::max<int64_t>(x, 0)
                                                 : int64_t(x == 0);
          continue;
        }
        double value = applyUnary(kind, double(x));
        std::optional<int64_t> integer =
            truncateToInteger(value, type.getElementType().getIntOrFloatBitWidth());
        if (!integer)
          return ctx.error("the integer " + Twine(x) + " gives " + numberText(value) +
                           ", which is not a value of " + typeName(type.getElementType()) +
                           "; Cast the input to a floating-point type first");
        result.ints[i] = *integer;
      }
      ctx.setOutputLiteral(0, std::move(result));
      return success();
    }
    if (kind == Unary::Not)
      return ctx.error("Not of a run-time value is not supported yet");
    if (kind == Unary::Neg && !isa<FloatType>(type.getElementType()))
      return ctx.error("Neg of an integer run-time value is not supported yet");
    if (!isa<FloatType>(type.getElementType()))
      return ctx.error("expects a floating-point input");
    Value input = ctx.input(0);
    Value result;
    switch (kind) {
    case Unary::Neg: result = ctx.create<zgraph::NegOp>(type, input); break;
    case Unary::Sqrt: result = ctx.create<zgraph::SqrtOp>(type, input); break;
    case Unary::Reciprocal: result = ctx.create<zgraph::ReciprocalOp>(type, input); break;
    case Unary::Exp: result = ctx.create<zgraph::ExpOp>(type, input); break;
    case Unary::Log: result = ctx.create<zgraph::LogOp>(type, input); break;
    case Unary::Tanh: result = ctx.create<zgraph::TanhOp>(type, input); break;
    case Unary::Erf: result = ctx.create<zgraph::ErfOp>(type, input); break;
    case Unary::Relu: result = ctx.create<zgraph::ReluOp>(type, input); break;
    case Unary::Sigmoid: result = ctx.create<zgraph::SigmoidOp>(type, input); break;
    case Unary::Not: break;
    }
    ctx.setOutput(0, result);
    return success();
  };
}

LogicalResult importGelu(NodeContext &ctx) {
  if (!isa<FloatType>(ctx.inputType(0).getElementType()))
    return ctx.error("expects a floating-point input");
  std::string approximate = ctx.stringAttr("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return ctx.error("approximate must be \"none\" or \"tanh\", got \"" + approximate + "\"");
  Value result = ctx.create<zgraph::GeluOp>(ctx.inputType(0), ctx.input(0),
                                            ctx.builder().getStringAttr(approximate));
  ctx.setOutput(0, result);
  return success();
}

LogicalResult importIsNaN(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  auto resultType = RankedTensorType::get(type.getShape(), ctx.builder().getI1Type());
  if (const Literal *literal = ctx.inputLiteral(0)) {
    std::vector<int64_t> values;
    for (int64_t i = 0; i < literal->size(); ++i)
      values.push_back(literal->isFloat() && std::isnan(literal->floats[i]));
    ctx.setOutputLiteral(0, Literal::ofInts(resultType, std::move(values)));
    return success();
  }
  if (!isa<FloatType>(type.getElementType()))
    return ctx.error("expects a floating-point input");
  ctx.setOutput(0, ctx.create<zgraph::IsNanOp>(resultType, ctx.input(0)));
  return success();
}

LogicalResult importWhere(NodeContext &ctx) {
  RankedTensorType condition = ctx.inputType(0), x = ctx.inputType(1), y = ctx.inputType(2);
  if (!condition.getElementType().isInteger(1))
    return ctx.error("the condition must be a bool tensor");
  if (x.getElementType() != y.getElementType())
    return ctx.error("both branches must have the same element type");
  FailureOr<SmallVector<int64_t>> shape = broadcastShape(condition.getShape(), x.getShape());
  if (succeeded(shape))
    shape = broadcastShape(*shape, y.getShape());
  if (failed(shape))
    return ctx.error("operand shapes are not broadcast-compatible");
  if (!fitsTensorBytes(*shape, x.getElementType()))
    return ctx.error("operand shapes broadcast to " + shapeText(*shape) + ", larger than " +
                     Twine(kMaxTensorBytes >> 40) + " TiB");
  auto resultType = RankedTensorType::get(*shape, x.getElementType());
  const Literal *c = ctx.inputLiteral(0), *a = ctx.inputLiteral(1), *b = ctx.inputLiteral(2);
  if (c && a && b && resultType.getNumElements() <= kMaxFoldElements) {
    std::vector<int64_t> ci = broadcastIndices(*shape, condition.getShape());
    std::vector<int64_t> ai = broadcastIndices(*shape, x.getShape());
    std::vector<int64_t> bi = broadcastIndices(*shape, y.getShape());
    Literal result = a->isFloat() ? Literal::ofFloats(resultType, {})
                                  : Literal::ofInts(resultType, {});
    for (int64_t i = 0; i < resultType.getNumElements(); ++i) {
      bool pick = c->ints[ci[i]] != 0;
      if (a->isFloat())
        result.floats.push_back(pick ? a->floats[ai[i]] : b->floats[bi[i]]);
      else
        result.ints.push_back(pick ? a->ints[ai[i]] : b->ints[bi[i]]);
    }
    ctx.setOutputLiteral(0, std::move(result));
    return success();
  }
  ctx.setOutput(0, ctx.create<zgraph::WhereOp>(resultType, ctx.input(0), ctx.input(1),
                                               ctx.input(2)));
  return success();
}

LogicalResult castTo(NodeContext &ctx, Type element) {
  RankedTensorType type = ctx.inputType(0);
  if (const Literal *literal = ctx.inputLiteral(0)) {
    // ONNX leaves a float outside the target integer range undefined, and
    // so does C++: refuse to fold it rather than pick a value.
    if (literal->isFloat() && isa<IntegerType>(element) && !element.isInteger(1))
      for (int64_t i = 0; i < literal->size(); ++i)
        if (!truncateToInteger(literal->floats[i], element.getIntOrFloatBitWidth()))
          return ctx.error("element " + Twine(i) + " of the constant input is " +
                           numberText(literal->floats[i]) + ", outside the range of " +
                           typeName(element) + "; clamp or replace it before the Cast");
    ctx.setOutputLiteral(0, literal->castTo(element));
    return success();
  }
  if (type.getElementType() == element) {
    ctx.setOutput(0, ctx.input(0));
    return success();
  }
  ctx.setOutput(0, ctx.create<zgraph::CastOp>(RankedTensorType::get(type.getShape(), element),
                                              ctx.input(0)));
  return success();
}

LogicalResult importCast(NodeContext &ctx) {
  int64_t to = ctx.intAttr("to", 0);
  Type element = convertElementType(ctx.context(), static_cast<int32_t>(to));
  if (!element)
    return ctx.error("casting to ONNX data type " + Twine(to) + " is not supported");
  return castTo(ctx, element);
}

LogicalResult importCastLike(NodeContext &ctx) {
  return castTo(ctx, ctx.inputType(1).getElementType());
}

LogicalResult importIdentity(NodeContext &ctx) {
  if (const Literal *literal = ctx.inputLiteral(0))
    ctx.setOutputLiteral(0, *literal);
  else
    ctx.setOutput(0, ctx.input(0));
  return success();
}

LogicalResult importDropout(NodeContext &ctx) {
  // Inference mode (training_mode absent or false) is the identity. In
  // training mode a ratio above zero gives zgraph.dropout, keyed by the
  // node's output name (and its seed attribute) so that its mask does not
  // depend on the order of the graph.
  bool training = false;
  if (ctx.hasInput(2)) {
    const Literal *mode = ctx.inputLiteral(2);
    if (!mode)
      return ctx.error("training_mode must be a constant (an initializer or a Constant); "
                       "export the model with the mode fixed");
    if (mode->size() != 1)
      return ctx.error("training_mode has " + llvm::Twine(mode->size()) +
                       " elements; it must be a scalar (true or false)");
    training = mode->asInt(0) != 0;
  }
  if (ctx.hasOutput(1))
    return ctx.error("Dropout's mask output is not supported; export the model without "
                     "reading the mask");
  double ratio = 0.5;
  if (ctx.hasInput(1)) {
    const Literal *value = ctx.inputLiteral(1);
    if (!value || value->size() != 1)
      return ctx.error("ratio must be a constant scalar (an initializer or a Constant)");
    ratio = value->asDouble(0);
  }
  if (!(ratio >= 0.0 && ratio < 1.0))
    return ctx.error("ratio must be in [0, 1), got " + llvm::Twine(std::to_string(ratio)));
  if (!training || ratio == 0.0)
    return importIdentity(ctx);
  mlir::OpBuilder &builder = ctx.builder();
  std::string keyText = ctx.node().output(0);
  if (ctx.hasAttr("seed"))
    keyText += "#" + std::to_string(ctx.intAttr("seed", 0));
  auto key = static_cast<int64_t>(llvm::xxh3_64bits(keyText));
  auto dropout = builder.create<zgraph::DropoutOp>(
      ctx.loc(), ctx.inputType(0), ctx.input(0), /*state=*/mlir::Value(),
      builder.getF64FloatAttr(ratio), builder.getI64IntegerAttr(key),
      /*sample_elements=*/mlir::IntegerAttr());
  ctx.setOutput(0, dropout.getResult());
  return success();
}

LogicalResult importConstant(NodeContext &ctx) {
  MLIRContext *context = ctx.context();
  Builder b(context);
  if (const onnx::TensorProto *tensor = ctx.tensorAttr("value")) {
    std::string error;
    FailureOr<Literal> literal = readTensorLiteral(context, *tensor, error);
    if (failed(literal))
      return ctx.error("value: " + error);
    ctx.setOutputLiteral(0, std::move(*literal));
    return success();
  }
  if (ctx.hasAttr("value_float")) {
    ctx.setOutputLiteral(0, Literal::ofFloats(RankedTensorType::get({}, b.getF32Type()),
                                              {ctx.floatAttr("value_float", 0)}));
    return success();
  }
  if (ctx.hasAttr("value_int")) {
    ctx.setOutputLiteral(0, Literal::ofInts(RankedTensorType::get({}, b.getI64Type()),
                                            {ctx.intAttr("value_int", 0)}));
    return success();
  }
  if (ctx.hasAttr("value_ints")) {
    std::vector<int64_t> values = ctx.intsAttr("value_ints");
    ctx.setOutputLiteral(0, Literal::ofInts(
                                RankedTensorType::get({int64_t(values.size())}, b.getI64Type()),
                                values));
    return success();
  }
  return ctx.error("only the value, value_float, value_int and value_ints forms are supported");
}

} // namespace

void addElementwiseImporters(std::vector<OpImporter> &table) {
  table.push_back({"Add", 13, binary(Binary::Add)});
  table.push_back({"Sub", 13, binary(Binary::Sub)});
  table.push_back({"Mul", 13, binary(Binary::Mul)});
  table.push_back({"Div", 13, binary(Binary::Div)});
  table.push_back({"Pow", 13, binary(Binary::Pow)});
  table.push_back({"Max", 13, variadic(Binary::Max)});
  table.push_back({"Min", 13, variadic(Binary::Min)});
  table.push_back({"Equal", 13, binary(Binary::Equal)});
  table.push_back({"Less", 13, binary(Binary::Less)});
  table.push_back({"Greater", 13, binary(Binary::Greater)});
  table.push_back({"Neg", 13, unary(Unary::Neg)});
  table.push_back({"Sqrt", 13, unary(Unary::Sqrt)});
  table.push_back({"Reciprocal", 13, unary(Unary::Reciprocal)});
  table.push_back({"Exp", 13, unary(Unary::Exp)});
  table.push_back({"Log", 13, unary(Unary::Log)});
  table.push_back({"Tanh", 13, unary(Unary::Tanh)});
  table.push_back({"Erf", 13, unary(Unary::Erf)});
  table.push_back({"Relu", 13, unary(Unary::Relu)});
  table.push_back({"Sigmoid", 13, unary(Unary::Sigmoid)});
  table.push_back({"Not", 1, unary(Unary::Not)});
  table.push_back({"Gelu", 20, importGelu});
  table.push_back({"IsNaN", 13, importIsNaN});
  table.push_back({"Where", 9, importWhere});
  table.push_back({"Cast", 13, importCast});
  table.push_back({"CastLike", 15, importCastLike});
  table.push_back({"Identity", 13, importIdentity});
  table.push_back({"Dropout", 13, importDropout});
  table.push_back({"Constant", 13, importConstant});
}

} // namespace zcc::onnx_import
