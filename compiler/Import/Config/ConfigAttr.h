//===- ConfigAttr.h - The resolved config as module attributes --*- C++ -*-===//
//
// The resolved config lives in the IR as one `zcc.config` dictionary on the
// module, so every pass reads only the IR and every lit test is
// self-contained. JSON maps one to one: objects to dictionaries, arrays to
// arrays, integers to i64, numbers to f64, null to unit.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_COMPILER_IMPORT_CONFIG_CONFIGATTR_H
#define ZCC_COMPILER_IMPORT_CONFIG_CONFIGATTR_H

#include "compiler/Import/Config/JsonDocument.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinOps.h"

namespace zcc::config {

/// The module attribute that holds the resolved DeepSpeed config.
inline constexpr const char kConfigAttrName[] = "zcc.config";

mlir::Attribute jsonToAttribute(mlir::MLIRContext *context, const Json &value);

/// The inverse of jsonToAttribute; fails on attributes it never produces.
std::optional<Json> attributeToJson(mlir::Attribute attribute);

/// Sets `zcc.config` on `module`.
void attachConfig(mlir::ModuleOp module, const Json &config);

/// The `zcc.config` of `module`, or null if there is none.
mlir::DictionaryAttr getConfig(mlir::ModuleOp module);

} // namespace zcc::config

#endif // ZCC_COMPILER_IMPORT_CONFIG_CONFIGATTR_H
