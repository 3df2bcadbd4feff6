//===- ZDist.cpp - zdist dialect ------------------------------------------===//

#include "dialects/Dist/IR/ZDist.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace zcc::zdist;

#include "dialects/Dist/IR/ZDistDialect.cpp.inc"
#include "dialects/Dist/IR/ZDistEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Dist/IR/ZDistAttrs.cpp.inc"

void ZDistDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Dist/IR/ZDistAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/Dist/IR/ZDistOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ShardingAttr
//===----------------------------------------------------------------------===//

// `<@m, [{"dp"}, {}]>`: braces, not brackets, for a dimension's axes so that a
// sharding reads apart from the array of dimensions holding it.
Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  MLIRContext *context = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  FlatSymbolRefAttr mesh;
  SmallVector<ArrayAttr> splitAxes;
  auto parseDimension = [&]() -> ParseResult {
    SmallVector<Attribute> axes;
    auto parseAxis = [&]() -> ParseResult {
      std::string axis;
      if (parser.parseString(&axis))
        return failure();
      axes.push_back(StringAttr::get(context, axis));
      return success();
    };
    if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, parseAxis))
      return failure();
    splitAxes.push_back(ArrayAttr::get(context, axes));
    return success();
  };
  if (parser.parseLess() || parser.parseAttribute(mesh) ||
      parser.parseComma() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                     parseDimension) ||
      parser.parseGreater())
    return {};
  return parser.getChecked<ShardingAttr>(loc, context, mesh, splitAxes);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<" << getMesh() << ", [";
  llvm::interleaveComma(getSplitAxes(), printer, [&](ArrayAttr axes) {
    printer << "{";
    llvm::interleaveComma(
        axes, printer, [&](Attribute axis) { printer.printAttribute(axis); });
    printer << "}";
  });
  printer << "]>";
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh,
                                   ArrayRef<ArrayAttr> splitAxes) {
  // A device holds one shard: an axis used twice would have to split the
  // tensor twice by the same coordinate.
  llvm::StringSet<> seen;
  for (auto [dim, axes] : llvm::enumerate(splitAxes)) {
    for (Attribute axis : axes) {
      auto name = llvm::dyn_cast<StringAttr>(axis);
      if (!name || name.getValue().empty())
        return emitError() << "dimension " << dim << " names mesh axis " << axis
                           << "; axis names are non-empty strings";
      if (!seen.insert(name.getValue()).second)
        return emitError() << "mesh axis \"" << name.getValue()
                           << "\" is used more than once; an axis splits at "
                              "most one dimension, once";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

// `["pp" = 2, "dp" = 4]`: each axis next to its size, unlike the two parallel
// arrays that store them.
static ParseResult parseMeshAxes(OpAsmParser &parser, ArrayAttr &axisNames,
                                 DenseI64ArrayAttr &shape) {
  SmallVector<Attribute> names;
  SmallVector<int64_t> sizes;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size = 0;
    if (parser.parseString(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    names.push_back(parser.getBuilder().getStringAttr(name));
    sizes.push_back(size);
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, parseAxis))
    return failure();
  axisNames = parser.getBuilder().getArrayAttr(names);
  shape = parser.getBuilder().getDenseI64ArrayAttr(sizes);
  return success();
}

static void printMeshAxes(OpAsmPrinter &printer, Operation *,
                          ArrayAttr axisNames, DenseI64ArrayAttr shape) {
  printer << "[";
  llvm::interleaveComma(llvm::zip(axisNames, shape.asArrayRef()), printer,
                        [&](auto axis) {
                          printer.printAttribute(std::get<0>(axis));
                          printer << " = " << std::get<1>(axis);
                        });
  printer << "]";
}

std::optional<int64_t> MeshOp::getAxisSize(StringRef axis) {
  for (auto [name, size] :
       llvm::zip(getAxisNames().getAsValueRange<StringAttr>(), getShape()))
    if (name == axis)
      return size;
  return std::nullopt;
}

int64_t MeshOp::getNumDevices() {
  int64_t devices = 1;
  for (int64_t size : getShape())
    devices *= size;
  return devices;
}

LogicalResult MeshOp::verify() {
  ArrayRef<int64_t> shape = getShape();
  if (getAxisNames().size() != shape.size())
    return emitOpError() << "axis_names and shape differ in length ("
                         << getAxisNames().size() << " vs " << shape.size()
                         << ")";
  if (shape.empty())
    return emitOpError("requires at least one axis");
  llvm::StringSet<> seen;
  for (auto [name, size] :
       llvm::zip(getAxisNames().getAsValueRange<StringAttr>(), shape)) {
    if (name.empty())
      return emitOpError("requires non-empty axis names");
    if (!seen.insert(name).second)
      return emitOpError() << "declares axis \"" << name << "\" twice";
    if (size < 1)
      return emitOpError() << "axis \"" << name << "\" has size " << size
                           << "; an axis has at least one device";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Shared verification
//===----------------------------------------------------------------------===//

namespace {
FailureOr<MeshOp> lookupMesh(Operation *op, FlatSymbolRefAttr meshRef,
                             SymbolTableCollection &symbolTable) {
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(op, meshRef);
  if (!mesh)
    return op->emitOpError()
           << "refers to " << meshRef << ", which is not a zdist.mesh";
  return mesh;
}

/// The number of devices that differ only along `axes` of `mesh`: the number
/// of parts a dimension split over `axes` has, or a collective's group size.
FailureOr<int64_t> getGroupSize(Operation *op, MeshOp mesh, ArrayAttr axes) {
  int64_t size = 1;
  for (StringRef axis : axes.getAsValueRange<StringAttr>()) {
    std::optional<int64_t> axisSize = mesh.getAxisSize(axis);
    if (!axisSize)
      return op->emitOpError() << "mesh @" << mesh.getSymName()
                               << " has no axis \"" << axis << "\"";
    size *= *axisSize;
  }
  return size;
}

/// Checks that `local` is the shard of `global` under `sharding`.
LogicalResult verifyShardedTypes(Operation *op, ShardingAttr sharding,
                                 RankedTensorType global,
                                 RankedTensorType local,
                                 SymbolTableCollection &symbolTable) {
  FailureOr<MeshOp> mesh = lookupMesh(op, sharding.getMesh(), symbolTable);
  if (failed(mesh))
    return failure();
  ArrayRef<ArrayAttr> splitAxes = sharding.getSplitAxes();
  if (static_cast<int64_t>(splitAxes.size()) != global.getRank())
    return op->emitOpError() << "sharding is for rank " << splitAxes.size()
                             << " but the global type " << global
                             << " has rank " << global.getRank();
  SmallVector<int64_t> expected;
  for (auto [dim, axes] : llvm::enumerate(splitAxes)) {
    FailureOr<int64_t> parts = getGroupSize(op, *mesh, axes);
    if (failed(parts))
      return failure();
    int64_t size = global.getDimSize(dim);
    if (size % *parts != 0)
      return op->emitOpError()
             << "global dimension " << dim << " of size " << size
             << " does not split evenly into " << *parts << " shards";
    expected.push_back(size / *parts);
  }
  if (local.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError()
           << "local type " << local << " is not the shard of " << global
           << " under the sharding, which is "
           << RankedTensorType::get(expected, global.getElementType());
  return success();
}

/// A collective's group: at least one mesh axis, none twice.
LogicalResult verifyGroupAxes(Operation *op, ArrayAttr axes) {
  if (axes.empty())
    return op->emitOpError("requires at least one mesh axis");
  llvm::StringSet<> seen;
  for (StringRef axis : axes.getAsValueRange<StringAttr>())
    if (!seen.insert(axis).second)
      return op->emitOpError() << "names mesh axis \"" << axis << "\" twice";
  return success();
}

LogicalResult verifyTensorAxis(Operation *op, StringRef what, int64_t axis,
                               RankedTensorType type) {
  if (axis >= type.getRank())
    return op->emitOpError() << what << " " << axis
                             << " is out of range for rank " << type.getRank();
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// ShardOp and UnshardOp
//===----------------------------------------------------------------------===//

LogicalResult ShardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyShardedTypes(*this, getSharding(), getInput().getType(),
                            getResult().getType(), symbolTable);
}

LogicalResult UnshardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyShardedTypes(*this, getSharding(), getResult().getType(),
                            getInput().getType(), symbolTable);
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

LogicalResult AllGatherOp::verify() {
  if (failed(verifyGroupAxes(*this, getMeshAxes())))
    return failure();
  return verifyTensorAxis(*this, "gather_axis", getGatherAxis(),
                          getInput().getType());
}

LogicalResult
AllGatherOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<MeshOp> mesh = lookupMesh(*this, getMeshAttr(), symbolTable);
  if (failed(mesh))
    return failure();
  FailureOr<int64_t> groupSize = getGroupSize(*this, *mesh, getMeshAxes());
  if (failed(groupSize))
    return failure();
  RankedTensorType input = getInput().getType();
  SmallVector<int64_t> expected(input.getShape());
  expected[getGatherAxis()] *= *groupSize;
  if (getResult().getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "result type " << getResult().getType()
                         << " does not match "
                         << RankedTensorType::get(expected,
                                                  input.getElementType())
                         << ", the operand gathered from " << *groupSize
                         << " devices along dimension " << getGatherAxis();
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyGroupAxes(*this, getMeshAxes())))
    return failure();
  return verifyTensorAxis(*this, "scatter_axis", getScatterAxis(),
                          getInput().getType());
}

LogicalResult
ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<MeshOp> mesh = lookupMesh(*this, getMeshAttr(), symbolTable);
  if (failed(mesh))
    return failure();
  FailureOr<int64_t> groupSize = getGroupSize(*this, *mesh, getMeshAxes());
  if (failed(groupSize))
    return failure();
  RankedTensorType input = getInput().getType();
  int64_t axis = getScatterAxis();
  if (input.getDimSize(axis) % *groupSize != 0)
    return emitOpError() << "scatter dimension " << axis << " of size "
                         << input.getDimSize(axis)
                         << " does not split evenly over " << *groupSize
                         << " devices";
  SmallVector<int64_t> expected(input.getShape());
  expected[axis] /= *groupSize;
  if (getResult().getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "result type " << getResult().getType()
                         << " does not match "
                         << RankedTensorType::get(expected,
                                                  input.getElementType())
                         << ", the operand scattered over " << *groupSize
                         << " devices along dimension " << axis;
  return success();
}

LogicalResult AllReduceOp::verify() {
  return verifyGroupAxes(*this, getMeshAxes());
}

LogicalResult
AllReduceOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<MeshOp> mesh = lookupMesh(*this, getMeshAttr(), symbolTable);
  if (failed(mesh))
    return failure();
  return failure(failed(getGroupSize(*this, *mesh, getMeshAxes())));
}

//===----------------------------------------------------------------------===//
// Pipeline stages
//===----------------------------------------------------------------------===//

LogicalResult TransferOp::verify() {
  if (getSource() == getTarget())
    return emitOpError() << "moves a value from stage " << getSource()
                         << " to itself; a transfer crosses stages";
  return success();
}

LogicalResult PipelineOp::verify() {
  bool interleaved = getSchedule() == "interleaved";
  if (getSchedule() != "gpipe" && getSchedule() != "1f1b" && getSchedule() != "zb-h1" &&
      !interleaved)
    return emitOpError() << "schedule must be \"gpipe\", \"1f1b\", \"interleaved\" or "
                            "\"zb-h1\", got \""
                         << getSchedule() << "\"";
  if (getStages().empty())
    return emitOpError("requires at least one stage");
  size_t stages = getStages().size(), chunks = getBuffers().size();
  if (interleaved ? chunks < 2 * stages || chunks % stages != 0 : chunks != stages)
    return emitOpError() << "has " << stages << " stages but buffer counts for " << chunks
                         << (interleaved ? " chunks (interleaved: a multiple of the stages, "
                                           "at least 2 each)"
                                         : "");
  double bubble = getBubbleFraction().convertToDouble();
  if (!(bubble >= 0 && bubble < 1))
    return emitOpError() << "bubble_fraction must be in [0, 1), got " << bubble;
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Dist/IR/ZDistOps.cpp.inc"
