//===- ZPlan.cpp - zplan dialect ------------------------------------------===//

#include "dialects/Plan/IR/ZPlan.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace zcc::zplan;

#include "dialects/Plan/IR/ZPlanDialect.cpp.inc"
#include "dialects/Plan/IR/ZPlanEnums.cpp.inc"

void ZPlanDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Plan/IR/ZPlanOps.cpp.inc"
      >();
}

// `(@arena::@a, @arena::@b)`: an instruction's operand list reads like a
// call's, not like an array attribute.
static ParseResult parseSymbolRefList(OpAsmParser &parser, ArrayAttr &refs) {
  SmallVector<Attribute> list;
  auto parseRef = [&]() -> ParseResult {
    SymbolRefAttr ref;
    if (parser.parseAttribute(ref))
      return failure();
    list.push_back(ref);
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, parseRef))
    return failure();
  refs = parser.getBuilder().getArrayAttr(list);
  return success();
}

static void printSymbolRefList(OpAsmPrinter &printer, Operation *,
                               ArrayAttr refs) {
  printer << "(";
  llvm::interleaveComma(refs, printer,
                        [&](Attribute ref) { printer.printAttribute(ref); });
  printer << ")";
}

#define GET_OP_CLASSES
#include "dialects/Plan/IR/ZPlanOps.cpp.inc"

Operation *zcc::zplan::lookupVisibleSymbol(Operation *from, SymbolRefAttr ref,
                                           SymbolTableCollection &symbolTable) {
  Operation *scope = SymbolTable::getNearestSymbolTable(from);
  while (scope) {
    if (Operation *symbol = symbolTable.lookupSymbolIn(scope, ref))
      return symbol;
    Operation *parent = scope->getParentOp();
    scope = parent ? SymbolTable::getNearestSymbolTable(parent) : nullptr;
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// ArenaOp
//===----------------------------------------------------------------------===//

LogicalResult ArenaOp::verify() {
  // The runtime rounds allocations and offsets with masks.
  if (!llvm::isPowerOf2_64(getAlignment()))
    return emitOpError() << "alignment " << getAlignment()
                         << " is not a power of two";
  return success();
}

LogicalResult ArenaOp::verifyRegions() {
  auto arenaSize = static_cast<int64_t>(getSize());
  auto alignment = static_cast<int64_t>(getAlignment());
  for (Operation &op : *getBody()) {
    auto buffer = dyn_cast<BufferOp>(op);
    if (!buffer)
      return emitOpError() << "holds '" << op.getName()
                           << "'; an arena holds only zplan.buffer ops";
    auto offset = static_cast<int64_t>(buffer.getOffset());
    auto size = static_cast<int64_t>(buffer.getSize());
    // Every buffer offset is aligned, so every buffer is as aligned as its
    // arena and kernels may use vector loads.
    if (offset % alignment != 0)
      return buffer.emitOpError()
             << "offset " << offset
             << " is not a multiple of the arena alignment " << alignment;
    // Written so as not to overflow: all three are non-negative.
    if (offset > arenaSize || size > arenaSize - offset)
      return buffer.emitOpError() << "at offset " << offset << " with size "
                                  << size << " does not fit in arena @"
                                  << getSymName() << " of size " << arenaSize;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

namespace {
template <typename SymbolOp>
LogicalResult verifyReference(Operation *op, SymbolRefAttr ref,
                              SymbolTableCollection &symbolTable) {
  if (!isa_and_nonnull<SymbolOp>(lookupVisibleSymbol(op, ref, symbolTable)))
    return op->emitOpError() << "refers to " << ref << ", which is not a "
                             << SymbolOp::getOperationName();
  return success();
}
} // namespace

LogicalResult KernelOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  for (ArrayAttr refs : {getIns(), getOuts()})
    for (SymbolRefAttr ref : refs.getAsRange<SymbolRefAttr>())
      if (failed(verifyReference<BufferOp>(*this, ref, symbolTable)))
        return failure();
  return success();
}

LogicalResult RecordOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyReference<EventOp>(*this, getEventAttr(), symbolTable);
}

LogicalResult WaitOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyReference<EventOp>(*this, getEventAttr(), symbolTable);
}
