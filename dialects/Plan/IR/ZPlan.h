//===- ZPlan.h - zplan dialect ----------------------------------*- C++ -*-===//

#ifndef ZCC_DIALECTS_PLAN_IR_ZPLAN_H
#define ZCC_DIALECTS_PLAN_IR_ZPLAN_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"

#include "dialects/Plan/IR/ZPlanDialect.h.inc"

#include "dialects/Plan/IR/ZPlanEnums.h.inc"

#define GET_OP_CLASSES
#include "dialects/Plan/IR/ZPlanOps.h.inc"

namespace zcc::zplan {

/// Resolves `ref` as an instruction at `from` sees it: in the enclosing
/// program first, then in the module, so that a program's own events shadow
/// the module's while its arenas stay visible. Returns null if not found.
mlir::Operation *lookupVisibleSymbol(mlir::Operation *from,
                                     mlir::SymbolRefAttr ref,
                                     mlir::SymbolTableCollection &symbolTable);

} // namespace zcc::zplan

#endif // ZCC_DIALECTS_PLAN_IR_ZPLAN_H
