//===- ConstantScalar.h - The value of a scalar constant --------*- C++ -*-===//
//
// Pattern rewrites that recognise exported subgraphs (attention, GELU) read
// the constants of the chain: scale factors, 0.5, 1, sqrt(2).
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_DIALECTS_GRAPH_TRANSFORMS_CONSTANTSCALAR_H
#define ZCC_DIALECTS_GRAPH_TRANSFORMS_CONSTANTSCALAR_H

#include "dialects/Graph/IR/ZGraph.h"

#include <cmath>
#include <optional>

namespace zcc::zgraph {

/// The single value of a constant float scalar (or splat) operand.
inline std::optional<double> constantScalar(mlir::Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = mlir::dyn_cast<mlir::DenseElementsAttr>(constant.getValue());
  if (!dense || !mlir::isa<mlir::FloatType>(dense.getElementType()))
    return std::nullopt;
  if (!dense.isSplat() && dense.getNumElements() != 1)
    return std::nullopt;
  return dense.getSplatValue<mlir::APFloat>().convertToDouble();
}

/// Whether `value` is a constant scalar within 1e-6 relative of `expected`
/// (exported constants are rounded to their element type).
inline bool isConstantNear(mlir::Value value, double expected) {
  std::optional<double> actual = constantScalar(value);
  return actual && std::abs(*actual - expected) <= 1e-6 * std::abs(expected);
}

} // namespace zcc::zgraph

#endif // ZCC_DIALECTS_GRAPH_TRANSFORMS_CONSTANTSCALAR_H
