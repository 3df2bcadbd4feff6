//===- NodeName.h - The ONNX node an op was imported from -------*- C++ -*-===//
//
// The importer names each op's location after its ONNX node; passes that
// group ops by the model's structure (blocks, layers) read it back.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_DIALECTS_GRAPH_TRANSFORMS_NODENAME_H
#define ZCC_DIALECTS_GRAPH_TRANSFORMS_NODENAME_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"

#include <string>

namespace zcc::zgraph {

/// The ONNX node name an op was imported from, or "".
inline std::string nodeName(mlir::Location loc) {
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc))
    return name.getName().str();
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc))
    for (mlir::Location inner : fused.getLocations())
      if (std::string name = nodeName(inner); !name.empty())
        return name;
  return "";
}

} // namespace zcc::zgraph

#endif // ZCC_DIALECTS_GRAPH_TRANSFORMS_NODENAME_H
