//===- Passes.h - zgraph passes ---------------------------------*- C++ -*-===//

#ifndef ZCC_DIALECTS_GRAPH_TRANSFORMS_PASSES_H
#define ZCC_DIALECTS_GRAPH_TRANSFORMS_PASSES_H

#include "dialects/Graph/IR/ZGraph.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace zcc::zgraph {

#define GEN_PASS_DECL
#include "dialects/Graph/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/Graph/Transforms/Passes.h.inc"

} // namespace zcc::zgraph

#endif // ZCC_DIALECTS_GRAPH_TRANSFORMS_PASSES_H
