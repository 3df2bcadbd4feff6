//===- OnnxImporter.h - ONNX models into zgraph -----------------*- C++ -*-===//
//
// Reads an ONNX model with ONNX's own protobuf classes and builds one
// `func.func @main` of zgraph ops with static shapes. Initializers become
// named `zgraph.param` ops whose data stays where it is (inside the model
// file or in ONNX external data); shape computations are folded at import.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_COMPILER_IMPORT_ONNX_ONNXIMPORTER_H
#define ZCC_COMPILER_IMPORT_ONNX_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zcc::onnx_import {

struct OnnxImportOptions {
  /// Shapes given with --input-shape NAME=D0xD1..., by input name.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Binds a dynamic leading (batch) dimension; 0 when unknown.
  int64_t microBatchSize = 0;
};

/// Parses "NAME=D0xD1x..." into `options`; false with `error` set otherwise.
bool parseInputShape(const std::string &text, OnnxImportOptions &options,
                     std::string &error);

/// Imports the model at `path` into `module` as `func.func @main`. Errors are
/// emitted as MLIR diagnostics that name the file, the node and its op.
mlir::LogicalResult importOnnxModel(mlir::ModuleOp module, const std::string &path,
                                   const OnnxImportOptions &options);

/// The op types the importer supports, for messages and documentation.
std::vector<std::string> supportedOnnxOps();

} // namespace zcc::onnx_import

#endif // ZCC_COMPILER_IMPORT_ONNX_ONNXIMPORTER_H
