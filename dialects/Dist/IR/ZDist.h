//===- ZDist.h - zdist dialect ----------------------------------*- C++ -*-===//

#ifndef ZCC_DIALECTS_DIST_IR_ZDIST_H
#define ZCC_DIALECTS_DIST_IR_ZDIST_H

#include "dialects/Graph/IR/StagedState.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Dist/IR/ZDistDialect.h.inc"

#include "dialects/Dist/IR/ZDistEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Dist/IR/ZDistAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/Dist/IR/ZDistOps.h.inc"

#endif // ZCC_DIALECTS_DIST_IR_ZDIST_H
