//===- PlanWriter.h - The zplan module as plan.bin --------------*- C++ -*-===//

#ifndef ZCC_COMPILER_TARGET_PLANWRITER_H
#define ZCC_COMPILER_TARGET_PLANWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace zcc::plan {
class PlanFile;
} // namespace zcc::plan

namespace zcc {

/// The format version this compiler writes (PlanFile.format_version).
constexpr uint32_t kPlanFormatVersion = 1;
/// "ZCCPLAN1" as a little-endian 64-bit integer.
constexpr uint64_t kPlanMagic = 0x314e414c5043435aULL;

/// Serialises a module that went through zcc-dist-to-plan. Errors are
/// emitted on the module.
mlir::FailureOr<plan::PlanFile> buildPlanFile(mlir::ModuleOp module,
                                              const std::string &producer);

/// Writes `file` to `path` atomically (a temporary file, then a rename), so a
/// failed write never leaves half a plan behind.
mlir::LogicalResult writePlanFile(const plan::PlanFile &file, const std::string &path,
                                  std::string &error);

} // namespace zcc

#endif // ZCC_COMPILER_TARGET_PLANWRITER_H
