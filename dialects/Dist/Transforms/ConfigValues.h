//===- ConfigValues.h - Reading settings from zcc.config --------*- C++ -*-===//
//
// The dist passes read their settings from the `zcc.config` dictionary the
// config importer attached to the module.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_DIALECTS_DIST_TRANSFORMS_CONFIGVALUES_H
#define ZCC_DIALECTS_DIST_TRANSFORMS_CONFIGVALUES_H

#include "mlir/IR/BuiltinAttributes.h"

namespace zcc::zdist {

/// Integer setting `name` of `dict`, or `defaultValue` when `dict` is null
/// or has none (or a string such as "auto"). JSON writes DeepSpeed's large
/// defaults as 1e9, so a float is read as its integer part.
inline int64_t configInt(mlir::DictionaryAttr dict, llvm::StringRef name, int64_t defaultValue) {
  if (!dict)
    return defaultValue;
  if (auto value = dict.getAs<mlir::IntegerAttr>(name))
    return value.getInt();
  if (auto value = dict.getAs<mlir::FloatAttr>(name))
    return static_cast<int64_t>(value.getValueAsDouble());
  return defaultValue;
}

} // namespace zcc::zdist

#endif // ZCC_DIALECTS_DIST_TRANSFORMS_CONFIGVALUES_H
