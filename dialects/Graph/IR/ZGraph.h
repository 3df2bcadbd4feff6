//===- ZGraph.h - zgraph dialect --------------------------------*- C++ -*-===//

#ifndef ZCC_DIALECTS_GRAPH_IR_ZGRAPH_H
#define ZCC_DIALECTS_GRAPH_IR_ZGRAPH_H

#include "dialects/Graph/IR/StagedState.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Graph/IR/ZGraphDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/Graph/IR/ZGraphOps.h.inc"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace zcc::zgraph {

/// The training precision `module`'s `zcc.config` asks for: "fp16", "bf16"
/// or "" (fp32).
std::string configPrecision(mlir::ModuleOp module);

} // namespace zcc::zgraph

#endif // ZCC_DIALECTS_GRAPH_IR_ZGRAPH_H
