//===- ImporterContext.h - What op importers see ----------------*- C++ -*-===//
//
// Internal to compiler/Import/Onnx. The importer table maps (op type,
// since-opset) to a function that receives a NodeContext: the node, its
// operands as values or folded literals, and a builder.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_COMPILER_IMPORT_ONNX_IMPORTERCONTEXT_H
#define ZCC_COMPILER_IMPORT_ONNX_IMPORTERCONTEXT_H

#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LogicalResult.h"

#include "onnx/onnx_pb.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zcc::onnx_import {

/// `value` truncated toward zero, clamped to int64's range; NaN gives 0.
int64_t saturateToInt64(double value);
/// Whether an element of the integer type of `width` bits holds `value`:
/// i64, i32, i8 (which holds ONNX int8 and uint8 alike, so -128 to 255) or
/// i1 (0 or 1).
bool fitsInteger(int64_t value, unsigned width);
/// `value` truncated toward zero as an element of the integer type of
/// `width` bits, or nullopt when it is NaN or that type does not hold it.
std::optional<int64_t> truncateToInteger(double value, unsigned width);

/// A constant tensor the importer can compute with: shape computations,
/// masks and small constants. Integer and boolean elements live in `ints`,
/// floating-point ones in `floats`.
struct Literal {
  mlir::RankedTensorType type;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  bool isFloat() const { return mlir::isa<mlir::FloatType>(type.getElementType()); }
  int64_t size() const { return type.getNumElements(); }
  /// Element i as a double / an integer, whatever the element type.
  double asDouble(int64_t i) const { return isFloat() ? floats[i] : double(ints[i]); }
  /// A float element saturates to int64's range (NaN reads as 0): plain
  /// conversion of an out-of-range double is undefined behaviour.
  int64_t asInt(int64_t i) const { return isFloat() ? saturateToInt64(floats[i]) : ints[i]; }

  static Literal ofInts(mlir::RankedTensorType type, std::vector<int64_t> values);
  static Literal ofFloats(mlir::RankedTensorType type, std::vector<double> values);
  static std::optional<Literal> fromAttr(mlir::DenseElementsAttr attr);
  mlir::DenseElementsAttr toAttr() const;
  /// The same elements converted to another element type (ONNX Cast).
  Literal castTo(mlir::Type elementType) const;
  /// The same elements under another shape of equal size.
  Literal reshaped(llvm::ArrayRef<int64_t> shape) const;
  /// A literal of `resultType` whose element i is this one's `indices[i]`.
  Literal take(mlir::RankedTensorType resultType, const std::vector<int64_t> &indices) const;
};

class OnnxImporter;

/// One node being imported.
class NodeContext {
public:
  NodeContext(OnnxImporter &importer, const onnx::NodeProto &node, std::string name,
              int64_t opset, mlir::OpBuilder &builder, mlir::Location loc)
      : importer_(importer), node_(node), name_(std::move(name)), opset_(opset),
        builder_(builder), loc_(loc) {}

  const onnx::NodeProto &node() const { return node_; }
  int64_t opset() const { return opset_; }
  mlir::OpBuilder &builder() { return builder_; }
  mlir::Location loc() const { return loc_; }
  mlir::MLIRContext *context() { return builder_.getContext(); }

  /// Number of inputs, counting trailing optional ones given as "".
  int numInputs() const { return node_.input_size(); }
  bool hasInput(int index) const {
    return index < node_.input_size() && !node_.input(index).empty();
  }
  /// The input as an SSA value (a literal is materialised as zgraph.constant).
  mlir::Value input(int index);
  mlir::RankedTensorType inputType(int index);
  /// The input's value when it is known at compile time.
  const Literal *inputLiteral(int index);
  /// The input as a list of integers, which it must be a compile-time
  /// constant for (shapes, axes, split sizes).
  mlir::FailureOr<std::vector<int64_t>> constantInts(int index, const char *what);
  /// As constantInts for an optional input; `absent` when it is not given.
  mlir::FailureOr<std::vector<int64_t>> optionalConstantInts(int index, const char *what,
                                                             std::vector<int64_t> absent) {
    if (!hasInput(index))
      return absent;
    return constantInts(index, what);
  }

  int numOutputs() const { return node_.output_size(); }
  bool hasOutput(int index) const {
    return index < node_.output_size() && !node_.output(index).empty();
  }
  void setOutput(int index, mlir::Value value);
  void setOutputLiteral(int index, Literal literal);

  // Attributes, with ONNX defaults.
  bool hasAttr(const char *name) const { return findAttr(name) != nullptr; }
  int64_t intAttr(const char *name, int64_t defaultValue) const;
  float floatAttr(const char *name, float defaultValue) const;
  std::string stringAttr(const char *name, const std::string &defaultValue) const;
  std::vector<int64_t> intsAttr(const char *name) const;
  const onnx::TensorProto *tensorAttr(const char *name) const;

  /// Emits "<file>: node '<name>' (<op>): <message>" and returns failure.
  mlir::LogicalResult error(const llvm::Twine &message);

  /// Builds a zgraph op of result type `type` at this node's location.
  template <typename OpTy, typename... Args>
  mlir::Value create(mlir::Type type, Args &&...args) {
    return builder_.create<OpTy>(loc_, type, std::forward<Args>(args)...).getResult();
  }

  OnnxImporter &importer() { return importer_; }

private:
  const onnx::AttributeProto *findAttr(const char *name) const;

  OnnxImporter &importer_;
  const onnx::NodeProto &node_;
  /// The node's name, or "#<index>" for an unnamed node.
  std::string name_;
  int64_t opset_;
  mlir::OpBuilder &builder_;
  mlir::Location loc_;
};

using OpImporterFn = std::function<mlir::LogicalResult(NodeContext &)>;

struct OpImporter {
  const char *opType;
  /// The first opset whose semantics this entry implements.
  int sinceVersion;
  OpImporterFn import;
};

// The importer table, one part per file.
void addElementwiseImporters(std::vector<OpImporter> &table);
void addShapeImporters(std::vector<OpImporter> &table);
void addNeuralImporters(std::vector<OpImporter> &table);

/// The ONNX element type as an MLIR type, or null if zcc does not support it.
mlir::Type convertElementType(mlir::MLIRContext *context, int32_t onnxType);
/// Reads a TensorProto held in the model (not external data) as a literal.
mlir::FailureOr<Literal> readTensorLiteral(mlir::MLIRContext *context,
                                           const onnx::TensorProto &tensor,
                                           std::string &error);

// Shared shape helpers.
mlir::FailureOr<llvm::SmallVector<int64_t>> broadcastShape(llvm::ArrayRef<int64_t> a,
                                                           llvm::ArrayRef<int64_t> b);
/// For each element of a tensor of `outShape`, the linear index of the
/// element of a tensor of `inShape` that broadcasts to it.
std::vector<int64_t> broadcastIndices(llvm::ArrayRef<int64_t> outShape,
                                      llvm::ArrayRef<int64_t> inShape);
/// For each element of `outShape`, the linear index into `inShape` of
/// element `starts + index * steps`, with output dimension d reading input
/// dimension `permutation[d]` (identity when empty).
std::vector<int64_t> stridedIndices(llvm::ArrayRef<int64_t> inShape,
                                    llvm::ArrayRef<int64_t> outShape,
                                    llvm::ArrayRef<int64_t> starts,
                                    llvm::ArrayRef<int64_t> steps,
                                    llvm::ArrayRef<int64_t> permutation);
/// Literals above this many elements are not folded: they would only be
/// materialised again as large constants.
constexpr int64_t kMaxFoldElements = int64_t(1) << 22;
/// The largest tensor the importer creates, as graph inputs are bounded:
/// later passes compute byte counts and offsets in int64.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;
/// Whether a tensor of `shape` and `element` holds at most kMaxTensorBytes
/// (false when its element count overflows int64).
bool fitsTensorBytes(llvm::ArrayRef<int64_t> shape, mlir::Type element);
/// A shape as "2x3" for diagnostics ("scalar" for rank 0).
std::string shapeText(llvm::ArrayRef<int64_t> shape);
/// Normalises an axis against a rank; nullopt when out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

} // namespace zcc::onnx_import

#endif // ZCC_COMPILER_IMPORT_ONNX_IMPORTERCONTEXT_H
