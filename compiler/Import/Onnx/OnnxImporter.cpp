//===- OnnxImporter.cpp - ONNX models into zgraph -------------------------===//

#include "compiler/Import/Onnx/OnnxImporter.h"

#include "compiler/Import/Onnx/ImporterContext.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "runtime/Data/OnnxWeights.h"

#include <map>

using namespace mlir;

namespace zcc::onnx_import {

// Defined in OnnxChecker.cpp, which is built with exceptions because ONNX's
// checker reports through them.
std::string runOnnxChecker(const std::string &modelPath);

namespace {
constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 21;
constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 10;
// Debian's ONNX library knows these; newer models skip its checker.
constexpr int64_t kCheckerMaxOpset = 17;
constexpr int64_t kCheckerMaxIrVersion = 8;

const std::vector<OpImporter> &importerTable() {
  static const std::vector<OpImporter> table = [] {
    std::vector<OpImporter> entries;
    addElementwiseImporters(entries);
    addShapeImporters(entries);
    addNeuralImporters(entries);
    return entries;
  }();
  return table;
}

/// The entry for `opType` with the largest since-version not above `opset`.
const OpImporter *findImporter(const std::string &opType, int64_t opset,
                               int &firstSince) {
  const OpImporter *best = nullptr;
  firstSince = 0;
  for (const OpImporter &entry : importerTable()) {
    if (opType != entry.opType)
      continue;
    if (!firstSince || entry.sinceVersion < firstSince)
      firstSince = entry.sinceVersion;
    if (entry.sinceVersion <= opset && (!best || entry.sinceVersion > best->sinceVersion))
      best = &entry;
  }
  return best;
}
} // namespace

std::vector<std::string> supportedOnnxOps() {
  std::vector<std::string> names;
  for (const OpImporter &entry : importerTable())
    if (std::find(names.begin(), names.end(), entry.opType) == names.end())
      names.push_back(entry.opType);
  std::sort(names.begin(), names.end());
  return names;
}

bool parseInputShape(const std::string &text, OnnxImportOptions &options,
                     std::string &error) {
  size_t equals = text.rfind('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == text.size()) {
    error = "--input-shape expects NAME=D0xD1..., got '" + text + "'";
    return false;
  }
  std::vector<int64_t> dims;
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(text).substr(equals + 1).split(parts, 'x');
  for (llvm::StringRef part : parts) {
    int64_t dim = 0;
    if (part.getAsInteger(10, dim) || dim < 1) {
      error = "--input-shape " + text + ": '" + part.str() +
              "' is not a positive dimension (write e.g. input_ids=4x128)";
      return false;
    }
    dims.push_back(dim);
  }
  options.inputShapes[text.substr(0, equals)] = dims;
  return true;
}

/// Builds the zgraph function from a parsed model.
class OnnxImporter {
public:
  struct Entry {
    Value value;
    std::optional<Literal> literal;
    RankedTensorType type;
  };

  OnnxImporter(ModuleOp module, std::string path, const OnnxImportOptions &options)
      : module_(module), context_(module.getContext()), path_(std::move(path)),
        options_(options), builder_(context_) {}

  LogicalResult run();

  const std::string &path() const { return path_; }
  Entry *lookup(const std::string &name) {
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
  }
  void define(const std::string &name, Entry entry) { values_[name] = std::move(entry); }

  Value materialize(Entry &entry, Location loc) {
    // Created where the builder stands, which is just before the first user.
    if (!entry.value)
      entry.value = builder_.create<zgraph::ConstantOp>(loc, entry.literal->toAttr());
    return entry.value;
  }

  FailureOr<RankedTensorType> failType(const Twine &message) {
    (void)fail(message);
    return failure();
  }

  LogicalResult fail(const Twine &message) {
    emitError(FileLineColLoc::get(context_, path_, 0, 0)) << path_ << ": " << message;
    return failure();
  }

private:
  LogicalResult loadModel();
  LogicalResult findInlineRanges(llvm::StringRef bytes);
  LogicalResult importInitializer(const onnx::TensorProto &tensor);
  FailureOr<RankedTensorType> inputType(const onnx::ValueInfoProto &info);
  LogicalResult importNode(const onnx::NodeProto &node, int index);
  LogicalResult checkNodeWellFormed(const onnx::NodeProto &node,
                                    llvm::function_ref<LogicalResult(const Twine &)> nodeError);
  std::string externalDataPath(const std::string &location) const;

  ModuleOp module_;
  MLIRContext *context_;
  std::string path_;
  const OnnxImportOptions &options_;
  OpBuilder builder_;
  onnx::ModelProto model_;
  /// Where each inline initializer's data lies in the model file.
  llvm::StringMap<std::pair<uint64_t, uint64_t>> inlineRanges_;
  int64_t opset_ = 0;
  std::map<std::string, Entry> values_;
};

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

Value NodeContext::input(int index) {
  OnnxImporter::Entry *entry = importer_.lookup(node_.input(index));
  return importer_.materialize(*entry, loc_);
}

RankedTensorType NodeContext::inputType(int index) {
  return importer_.lookup(node_.input(index))->type;
}

const Literal *NodeContext::inputLiteral(int index) {
  if (!hasInput(index))
    return nullptr;
  OnnxImporter::Entry *entry = importer_.lookup(node_.input(index));
  return entry->literal ? &*entry->literal : nullptr;
}

FailureOr<std::vector<int64_t>> NodeContext::constantInts(int index, const char *what) {
  const Literal *literal = inputLiteral(index);
  if (!literal) {
    (void)error(Twine(what) + " (input " + Twine(index) + ", '" + node_.input(index) +
                "') must be a compile-time constant; zcc plans static shapes");
    return failure();
  }
  // Shapes, axes and sizes are integers in ONNX; a float here would have to
  // be truncated, and one beyond int64 has no integer value at all.
  if (literal->isFloat()) {
    std::string element;
    llvm::raw_string_ostream os(element);
    literal->type.getElementType().print(os);
    (void)error(Twine(what) + " (input " + Twine(index) + ", '" + node_.input(index) + "') is " +
                element + "; it must hold integers (int64), as ONNX defines it");
    return failure();
  }
  std::vector<int64_t> values(literal->ints.begin(), literal->ints.end());
  return values;
}

void NodeContext::setOutput(int index, Value value) {
  if (!hasOutput(index))
    return;
  importer_.define(node_.output(index),
                   {value, std::nullopt, cast<RankedTensorType>(value.getType())});
}

void NodeContext::setOutputLiteral(int index, Literal literal) {
  if (!hasOutput(index))
    return;
  RankedTensorType type = literal.type;
  importer_.define(node_.output(index), {Value(), std::move(literal), type});
}

const onnx::AttributeProto *NodeContext::findAttr(const char *name) const {
  for (const onnx::AttributeProto &attr : node_.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

// checkNodeWellFormed rejects an attribute of another type than these read;
// the checks here keep a wrong type from reading as another field's value.
int64_t NodeContext::intAttr(const char *name, int64_t defaultValue) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr && attr->type() == onnx::AttributeProto::INT ? attr->i() : defaultValue;
}

float NodeContext::floatAttr(const char *name, float defaultValue) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr && attr->type() == onnx::AttributeProto::FLOAT ? attr->f() : defaultValue;
}

std::string NodeContext::stringAttr(const char *name, const std::string &defaultValue) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr && attr->type() == onnx::AttributeProto::STRING ? attr->s() : defaultValue;
}

std::vector<int64_t> NodeContext::intsAttr(const char *name) const {
  const onnx::AttributeProto *attr = findAttr(name);
  if (!attr || attr->type() != onnx::AttributeProto::INTS)
    return {};
  return std::vector<int64_t>(attr->ints().begin(), attr->ints().end());
}

const onnx::TensorProto *NodeContext::tensorAttr(const char *name) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr && attr->has_t() ? &attr->t() : nullptr;
}

LogicalResult NodeContext::error(const Twine &message) {
  return importer_.fail("node '" + name_ + "' (" + node_.op_type() + ", opset " +
                        Twine(opset_) + "): " + message);
}

//===----------------------------------------------------------------------===//
// Model
//===----------------------------------------------------------------------===//

LogicalResult OnnxImporter::loadModel() {
  uint64_t size = 0;
  if (std::error_code error = llvm::sys::fs::file_size(path_, size))
    return fail("cannot read the model: " + error.message());
  if (size >= (uint64_t(1) << 31))
    return fail("the model file is " + Twine(size >> 20) +
                " MiB, above protobuf's 2 GiB limit; save it with external data "
                "(onnx.save_model(..., save_as_external_data=True))");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path_, /*IsText=*/false);
  if (std::error_code error = buffer.getError())
    return fail("cannot read the model: " + error.message());
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (!model_.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return fail("not an ONNX model: the file does not parse as an ONNX ModelProto "
                "(truncated or not ONNX)");
  if (failed(findInlineRanges(bytes)))
    return failure();
  if (!model_.has_graph() || model_.ir_version() == 0)
    return fail("not an ONNX model: it has no " +
                Twine(model_.has_graph() ? "IR version" : "graph"));
  if (model_.ir_version() < kMinIrVersion || model_.ir_version() > kMaxIrVersion)
    return fail("unsupported ONNX IR version " + Twine(model_.ir_version()) +
                "; zcc reads IR versions " + Twine(kMinIrVersion) + " to " +
                Twine(kMaxIrVersion));
  for (const onnx::OperatorSetIdProto &opset : model_.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx")
      opset_ = opset.version();
  if (opset_ == 0)
    return fail("the model imports no default-domain opset");
  if (opset_ < kMinOpset || opset_ > kMaxOpset)
    return fail("opset " + Twine(opset_) + " is not supported; zcc imports opsets " +
                Twine(kMinOpset) + " to " + Twine(kMaxOpset) +
                " (re-export with torch.onnx.export(..., opset_version=17))");
  if (opset_ <= kCheckerMaxOpset && model_.ir_version() <= kCheckerMaxIrVersion) {
    std::string problem = runOnnxChecker(path_);
    if (!problem.empty())
      return fail("the ONNX checker rejects the model: " + problem);
  }
  return success();
}

Type convertElementType(MLIRContext *context, int32_t onnxType) {
  Builder b(context);
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
    return b.getIntegerType(8);
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  default:
    return Type();
  }
}

/// The runtime reads weights as byte ranges of files and never parses ONNX:
/// the runtime's own wire-format walk (shared with zrun --weights
/// MODEL.onnx) finds where each inline initializer's little-endian data
/// (raw_data or packed float_data) lies in the model file.
LogicalResult OnnxImporter::findInlineRanges(llvm::StringRef bytes) {
  StatusOr<OnnxInitializers> found =
      findOnnxInitializers(path_, bytes.data(), bytes.size());
  // Only reachable for a model that protobuf parsed but whose external_data
  // entries are not numbers: the walk's message says which.
  if (!found.isOk())
    return fail(found.status().message());
  for (const auto &[name, location] : *found)
    if (!location.external && location.length > 0)
      inlineRanges_[name] = {location.offset, location.length};
  return success();
}

/// Every element 0 or at most -1e4 (HF writes the float minimum), and at
/// least one of each: an additive attention mask, not a weight.
static bool isAdditiveMask(const Literal &literal) {
  bool sawZero = false, sawMasked = false;
  for (double value : literal.floats) {
    if (value == 0.0)
      sawZero = true;
    else if (value <= -1e4)
      sawMasked = true;
    else
      return false;
  }
  return sawZero && sawMasked;
}

std::string OnnxImporter::externalDataPath(const std::string &location) const {
  llvm::SmallString<256> full(llvm::sys::path::parent_path(path_));
  llvm::sys::path::append(full, location);
  return std::string(full);
}

LogicalResult OnnxImporter::importInitializer(const onnx::TensorProto &tensor) {
  Type element = convertElementType(context_, tensor.data_type());
  if (!element)
    return fail("initializer '" + tensor.name() + "' has ONNX data type " +
                Twine(tensor.data_type()) + ", which zcc does not support");
  auto type = RankedTensorType::get(
      SmallVector<int64_t>(tensor.dims().begin(), tensor.dims().end()), element);
  bool external = tensor.data_location() == onnx::TensorProto::EXTERNAL;
  // Integer, boolean and scalar initializers are shape data, masks and
  // constants: the importer folds them. Other floating-point ones are the
  // model's parameters, whose data is never read at compile time, except
  // additive attention masks that exporters fold into float initializers
  // (every element 0 or "minus infinity"), which are constants too.
  bool isLiteral = !isa<FloatType>(element) || type.getRank() == 0;
  if (isLiteral && !external) {
    std::string error;
    FailureOr<Literal> literal = readTensorLiteral(context_, tensor, error);
    if (failed(literal))
      return fail("initializer '" + tensor.name() + "': " + error);
    define(tensor.name(), {Value(), std::move(*literal), type});
    return success();
  }
  if (!external && type.getNumElements() <= kMaxFoldElements) {
    std::string error;
    FailureOr<Literal> literal = readTensorLiteral(context_, tensor, error);
    if (succeeded(literal) && isAdditiveMask(*literal)) {
      define(tensor.name(), {Value(), std::move(*literal), type});
      return success();
    }
  }
  int64_t bytes = type.getNumElements() * std::max<int64_t>(1, element.getIntOrFloatBitWidth() / 8);
  SmallVector<NamedAttribute> source;
  if (external) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
      if (entry.key() == "location")
        location = entry.value();
      else if (entry.key() == "offset")
        llvm::StringRef(entry.value()).getAsInteger(10, offset);
      else if (entry.key() == "length")
        llvm::StringRef(entry.value()).getAsInteger(10, length);
    }
    if (location.empty())
      return fail("initializer '" + tensor.name() + "' is external but names no location");
    if (length < 0)
      length = bytes;
    std::string file = externalDataPath(location);
    uint64_t fileSize = 0;
    if (std::error_code error = llvm::sys::fs::file_size(file, fileSize))
      return fail("initializer '" + tensor.name() + "': external data file '" + file +
                  "' cannot be read: " + error.message() +
                  " (keep it next to the model, as it was saved)");
    if (uint64_t(offset + length) > fileSize)
      return fail("initializer '" + tensor.name() + "': external data file '" + file +
                  "' has " + Twine(fileSize) + " bytes, but the tensor needs bytes " +
                  Twine(offset) + " to " + Twine(offset + length) + " (truncated file?)");
    if (length != bytes)
      return fail("initializer '" + tensor.name() + "' has " + Twine(length) +
                  " bytes of external data, but its shape and type need " + Twine(bytes));
    if (isLiteral)
      return fail("initializer '" + tensor.name() +
                  "' is integer or scalar data stored externally; zcc needs such "
                  "constants inside the model");
    source.push_back(builder_.getNamedAttr("kind", builder_.getStringAttr("external")));
    source.push_back(builder_.getNamedAttr("file", builder_.getStringAttr(location)));
    source.push_back(builder_.getNamedAttr("offset", builder_.getI64IntegerAttr(offset)));
    source.push_back(builder_.getNamedAttr("length", builder_.getI64IntegerAttr(length)));
  } else {
    int64_t stored = tensor.has_raw_data() ? int64_t(tensor.raw_data().size()) : -1;
    if (stored >= 0 && stored != bytes)
      return fail("initializer '" + tensor.name() + "' holds " + Twine(stored) +
                  " bytes, but its shape and type need " + Twine(bytes));
    auto range = inlineRanges_.find(tensor.name());
    if (range == inlineRanges_.end() || int64_t(range->second.second) != bytes)
      return fail("initializer '" + tensor.name() +
                  "' stores its data in a form zcc cannot read in place (use raw_data, "
                  "as onnx.numpy_helper.from_array and torch.onnx.export write)");
    source.push_back(builder_.getNamedAttr("kind", builder_.getStringAttr("initializer")));
    source.push_back(builder_.getNamedAttr(
        "file", builder_.getStringAttr(llvm::sys::path::filename(path_))));
    source.push_back(builder_.getNamedAttr("offset",
                                           builder_.getI64IntegerAttr(range->second.first)));
    source.push_back(builder_.getNamedAttr("length", builder_.getI64IntegerAttr(bytes)));
  }
  Location loc = NameLoc::get(builder_.getStringAttr(tensor.name()),
                              FileLineColLoc::get(context_, path_, 0, 0));
  auto param = builder_.create<zgraph::ParamOp>(loc, type, tensor.name(),
                                                /*trainable=*/true);
  param->setAttr("source", builder_.getDictionaryAttr(source));
  define(tensor.name(), {param.getResult(), std::nullopt, type});
  return success();
}

FailureOr<RankedTensorType> OnnxImporter::inputType(const onnx::ValueInfoProto &info) {
  const std::string &name = info.name();
  if (!info.type().has_tensor_type())
    return failType("graph input '" + name + "' is not a tensor");
  const onnx::TypeProto::Tensor &tensorType = info.type().tensor_type();
  Type element = convertElementType(context_, tensorType.elem_type());
  if (!element)
    return fail("graph input '" + name + "' has ONNX data type " +
                Twine(tensorType.elem_type()) + ", which zcc does not support");
  auto given = options_.inputShapes.find(name);
  if (!tensorType.has_shape()) {
    if (given != options_.inputShapes.end())
      return RankedTensorType::get(given->second, element);
    return failType("graph input '" + name + "' has no shape; give one with --input-shape " +
                    name + "=D0xD1...");
  }
  const onnx::TensorShapeProto &shape = tensorType.shape();
  if (given != options_.inputShapes.end() &&
      int64_t(given->second.size()) != shape.dim_size())
    return failType("--input-shape " + name + " has " + Twine(given->second.size()) +
                " dimensions, but the input has rank " + Twine(shape.dim_size()));
  SmallVector<int64_t> dims;
  for (int d = 0; d < shape.dim_size(); ++d) {
    const onnx::TensorShapeProto::Dimension &dim = shape.dim(d);
    if (dim.has_dim_value() && dim.dim_value() <= 0)
      return failType("graph input '" + name + "' has dimension " + Twine(d) + " of size " +
                      Twine(dim.dim_value()) + "; zcc plans tensors with at least one element");
    bool isStatic = dim.has_dim_value();
    if (given != options_.inputShapes.end()) {
      int64_t bound = given->second[d];
      if (isStatic && dim.dim_value() != bound)
        return failType("--input-shape " + name + " sets dimension " + Twine(d) + " to " +
                    Twine(bound) + ", but the model fixes it at " + Twine(dim.dim_value()));
      dims.push_back(bound);
      continue;
    }
    if (isStatic) {
      dims.push_back(dim.dim_value());
      continue;
    }
    std::string label = dim.has_dim_param() ? "'" + dim.dim_param() + "'" : "unnamed";
    if (d == 0 && options_.microBatchSize > 0) {
      dims.push_back(options_.microBatchSize);
      continue;
    }
    std::string example;
    for (int e = 0; e < shape.dim_size(); ++e) {
      const auto &other = shape.dim(e);
      int64_t value = other.has_dim_value() && other.dim_value() > 0 ? other.dim_value()
                      : e == 0 && options_.microBatchSize > 0 ? options_.microBatchSize
                                                              : (e == 0 ? 4 : 128);
      example += (e ? "x" : "") + std::to_string(value);
    }
    return failType("graph input '" + name + "' has a dynamic dimension " + Twine(d) + " (" +
                label + ")" +
                (d == 0 ? "; the config's train_micro_batch_size_per_gpu binds the "
                          "batch dimension, or"
                        : ";") +
                " bind it with --input-shape " + name + "=" + example);
  }
  // A batch bound from the config (or --input-shape) must leave every
  // byte count representable: later passes size buffers in int64.
  int64_t bytes = std::max<int64_t>(1, element.getIntOrFloatBitWidth() / 8);
  for (int64_t dim : dims)
    if (__builtin_mul_overflow(bytes, dim, &bytes) || bytes > kMaxTensorBytes)
      return failType(
          "graph input '" + name + "' of shape " +
          llvm::join(llvm::map_range(dims, [](int64_t d) { return std::to_string(d); }), "x") +
          " is larger than 256 TiB; lower train_micro_batch_size_per_gpu or the "
          "--input-shape dimensions");
  return RankedTensorType::get(dims, element);
}

/// What the ONNX checker verifies up to opset 17 (kCheckerMaxOpset, IR
/// version 8) and the op importers rely on, checked for every opset: the
/// inputs they read are given, the attributes they read have the type they
/// read, and every value is defined once (SSA).
LogicalResult
OnnxImporter::checkNodeWellFormed(const onnx::NodeProto &node,
                                  llvm::function_ref<LogicalResult(const Twine &)> nodeError) {
  // The inputs each op requires (ONNX's schemas); an optional input may be
  // absent or given as "". Other supported ops require one. Concat, Max and
  // Min are variadic: their importers check the count, and every input they
  // list is required.
  int required =
      llvm::StringSwitch<int>(node.op_type())
          .Cases("Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", 2)
          .Cases("MatMul", "Gemm", "Gather", "Reshape", "Expand", "Pad", "CastLike", 2)
          .Cases("LayerNormalization", "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss", 2)
          .Cases("Where", "Range", "Slice", 3)
          .Cases("Constant", "Concat", "Max", "Min", 0)
          .Default(1);
  bool variadic = node.op_type() == "Concat" || node.op_type() == "Max" || node.op_type() == "Min";
  for (int i = 0; i < node.input_size(); ++i)
    if (node.input(i).empty() && (i < required || variadic))
      return nodeError("input " + Twine(i) + " is empty, but " + node.op_type() + " requires it");
  if (node.input_size() < required)
    return nodeError("has " + Twine(node.input_size()) + " input" +
                     (node.input_size() == 1 ? "" : "s") + ", but " + node.op_type() +
                     " requires " + Twine(required));

  // Attribute names the importers read, with the one type each has in the
  // ops zcc imports; a wrong type read as 0 or "" (a float axis was axis 0).
  static const std::map<std::string, onnx::AttributeProto::AttributeType> kAttrTypes = {
      {"axis", onnx::AttributeProto::INT},
      {"axes", onnx::AttributeProto::INTS},
      {"allowzero", onnx::AttributeProto::INT},
      {"alpha", onnx::AttributeProto::FLOAT},
      {"approximate", onnx::AttributeProto::STRING},
      {"beta", onnx::AttributeProto::FLOAT},
      {"end", onnx::AttributeProto::INT},
      {"epsilon", onnx::AttributeProto::FLOAT},
      {"ignore_index", onnx::AttributeProto::INT},
      {"keepdims", onnx::AttributeProto::INT},
      {"mode", onnx::AttributeProto::STRING},
      {"noop_with_empty_axes", onnx::AttributeProto::INT},
      {"num_outputs", onnx::AttributeProto::INT},
      {"perm", onnx::AttributeProto::INTS},
      {"reduction", onnx::AttributeProto::STRING},
      {"seed", onnx::AttributeProto::INT},
      {"split", onnx::AttributeProto::INTS},
      {"start", onnx::AttributeProto::INT},
      {"to", onnx::AttributeProto::INT},
      {"transA", onnx::AttributeProto::INT},
      {"transB", onnx::AttributeProto::INT},
      {"upper", onnx::AttributeProto::INT},
      {"value", onnx::AttributeProto::TENSOR},
      {"value_float", onnx::AttributeProto::FLOAT},
      {"value_int", onnx::AttributeProto::INT},
      {"value_ints", onnx::AttributeProto::INTS}};
  for (const onnx::AttributeProto &attr : node.attribute()) {
    auto expected = kAttrTypes.find(attr.name());
    if (expected != kAttrTypes.end() && attr.type() != expected->second)
      return nodeError("attribute '" + attr.name() + "' has type " +
                       onnx::AttributeProto::AttributeType_Name(attr.type()) + ", but " +
                       node.op_type() + " reads it as " +
                       onnx::AttributeProto::AttributeType_Name(expected->second) +
                       "; fix the exporter or the attribute");
  }

  // A name defined twice would silently replace the earlier value (the
  // first node's result was dropped).
  if (node.output_size() == 0)
    return nodeError("has no outputs; " + node.op_type() + " defines at least one");
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string &output = node.output(i);
    if (output.empty())
      continue;
    if (llvm::is_contained(llvm::make_range(node.output().begin(), node.output().begin() + i),
                           output))
      return nodeError("lists output '" + output + "' twice");
    if (lookup(output))
      return nodeError("output '" + output +
                       "' is already defined by an earlier node, a graph input or an "
                       "initializer; an ONNX graph defines each value once");
  }
  return success();
}

LogicalResult OnnxImporter::importNode(const onnx::NodeProto &node, int index) {
  std::string name = node.name().empty() ? "#" + std::to_string(index) : node.name();
  Location loc = NameLoc::get(builder_.getStringAttr(name),
                              FileLineColLoc::get(context_, path_, 0, 0));
  auto nodeError = [&](const Twine &message) {
    return fail("node '" + name + "' (" + node.op_type() + ", opset " + Twine(opset_) +
                "): " + message);
  };
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return nodeError("ops of domain '" + node.domain() +
                     "' are not supported; zcc imports the default ONNX domain");
  for (const std::string &input : node.input())
    if (!input.empty() && !lookup(input))
      return nodeError("input '" + input +
                       "' is not produced by any earlier node, graph input or initializer");
  int firstSince = 0;
  const OpImporter *entry = findImporter(node.op_type(), opset_, firstSince);
  if (!entry) {
    if (firstSince)
      return nodeError("zcc supports " + node.op_type() + " from opset " +
                       Twine(firstSince) + " on");
    return nodeError("unsupported op; zcc supports " +
                     llvm::join(supportedOnnxOps(), ", "));
  }
  if (failed(checkNodeWellFormed(node, nodeError)))
    return failure();
  NodeContext context(*this, node, name, opset_, builder_, loc);
  if (failed(entry->import(context)))
    return failure();
  for (const std::string &output : node.output())
    if (!output.empty() && !lookup(output))
      return nodeError("internal error: output '" + output + "' was not defined");
  return success();
}

LogicalResult OnnxImporter::run() {
  if (failed(loadModel()))
    return failure();
  const onnx::GraphProto &graph = model_.graph();

  llvm::SmallString<256> absolute(path_);
  llvm::sys::fs::make_absolute(absolute);
  module_->setAttr("zcc.model_path", builder_.getStringAttr(absolute));
  builder_.setInsertionPointToEnd(module_.getBody());
  auto func = builder_.create<func::FuncOp>(FileLineColLoc::get(context_, path_, 0, 0),
                                            "main", builder_.getFunctionType({}, {}));
  Block *body = func.addEntryBlock();
  builder_.setInsertionPointToStart(body);

  llvm::StringMap<bool> initializerNames;
  for (const onnx::TensorProto &tensor : graph.initializer()) {
    if (initializerNames.count(tensor.name()))
      return fail("initializer '" + tensor.name() + "' is given twice; keep one");
    initializerNames[tensor.name()] = true;
    if (failed(importInitializer(tensor)))
      return failure();
  }
  SmallVector<Type> argumentTypes;
  SmallVector<std::string> argumentNames;
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializerNames.count(input.name()))
      continue;
    FailureOr<RankedTensorType> type = inputType(input);
    if (failed(type))
      return failure();
    BlockArgument argument = body->addArgument(*type, func.getLoc());
    argumentTypes.push_back(*type);
    argumentNames.push_back(input.name());
    define(input.name(), {argument, std::nullopt, *type});
  }
  for (const auto &[name, dims] : options_.inputShapes)
    if (!llvm::is_contained(argumentNames, name))
      return fail("--input-shape names '" + name + "', which is not a graph input; the inputs are " +
                  (argumentNames.empty() ? std::string("none")
                                         : "'" + llvm::join(argumentNames, "', '") + "'"));
  for (int i = 0; i < graph.node_size(); ++i)
    if (failed(importNode(graph.node(i), i)))
      return failure();

  SmallVector<Value> results;
  SmallVector<std::string> resultNames;
  if (graph.output_size() == 0)
    return fail("the graph has no outputs, so a plan of it would compute nothing; export the "
                "model with the values it computes as outputs");
  for (const onnx::ValueInfoProto &output : graph.output()) {
    if (llvm::is_contained(resultNames, output.name()))
      return fail("graph output '" + output.name() + "' is listed twice; keep one");
    Entry *entry = lookup(output.name());
    if (!entry)
      return fail("graph output '" + output.name() + "' is not produced by any node");
    Value value = materialize(*entry, func.getLoc());
    if (output.type().has_tensor_type()) {
      const auto &declared = output.type().tensor_type();
      Type element = convertElementType(context_, declared.elem_type());
      if (element && element != entry->type.getElementType())
        return fail("graph output '" + output.name() + "' is declared with another element "
                    "type than the graph computes");
      if (declared.has_shape()) {
        if (declared.shape().dim_size() != entry->type.getRank())
          return fail("graph output '" + output.name() + "' is declared with rank " +
                      Twine(declared.shape().dim_size()) + " but has rank " +
                      Twine(entry->type.getRank()));
        for (int d = 0; d < declared.shape().dim_size(); ++d) {
          const auto &dim = declared.shape().dim(d);
          if (dim.has_dim_value() && dim.dim_value() > 0 &&
              dim.dim_value() != entry->type.getDimSize(d))
            return fail("graph output '" + output.name() + "' is declared with dimension " +
                        Twine(d) + " = " + Twine(dim.dim_value()) + " but computes " +
                        Twine(entry->type.getDimSize(d)));
        }
      }
    }
    results.push_back(value);
    resultNames.push_back(output.name());
  }
  builder_.setInsertionPointToEnd(body);
  builder_.create<func::ReturnOp>(func.getLoc(), results);
  SmallVector<Type> resultTypes;
  for (Value value : results)
    resultTypes.push_back(value.getType());
  func.setFunctionType(builder_.getFunctionType(argumentTypes, resultTypes));
  for (auto [index, name] : llvm::enumerate(argumentNames))
    func.setArgAttr(index, "zgraph.name", builder_.getStringAttr(name));
  for (auto [index, name] : llvm::enumerate(resultNames))
    func.setResultAttr(index, "zgraph.name", builder_.getStringAttr(name));

  // Parameters nothing reads (folded away or unused by the model) and
  // constants materialised but not used are dropped.
  SmallVector<Operation *> dead;
  for (Operation &op : *body)
    if (isa<zgraph::ParamOp, zgraph::ConstantOp>(op) && op.use_empty())
      dead.push_back(&op);
  for (Operation *op : dead)
    op->erase();
  return success();
}

LogicalResult importOnnxModel(ModuleOp module, const std::string &path,
                              const OnnxImportOptions &options) {
  OnnxImporter importer(module, path, options);
  return importer.run();
}

} // namespace zcc::onnx_import
