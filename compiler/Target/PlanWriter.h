//===- PlanWriter.h - The zplan module as plan.bin --------------*- C++ -*-===//

#ifndef ZCC_COMPILER_TARGET_PLANWRITER_H
#define ZCC_COMPILER_TARGET_PLANWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace zcc::plan {
class Plan;
} // namespace zcc::plan

namespace zcc {

/// The Plan of a module that went through zcc-dist-to-plan. Errors are
/// emitted on the module. The runtime's plan library encodes, validates and
/// prints it (runtime/Plan/PlanLoader.h): compiler and runtime share one
/// reading of the format.
mlir::FailureOr<plan::Plan> buildPlan(mlir::ModuleOp module);

} // namespace zcc

#endif // ZCC_COMPILER_TARGET_PLANWRITER_H
