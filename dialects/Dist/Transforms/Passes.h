//===- Passes.h - zdist passes ----------------------------------*- C++ -*-===//

#ifndef ZCC_DIALECTS_DIST_TRANSFORMS_PASSES_H
#define ZCC_DIALECTS_DIST_TRANSFORMS_PASSES_H

#include "dialects/Dist/IR/ZDist.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace zcc::zdist {

#define GEN_PASS_DECL
#include "dialects/Dist/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/Dist/Transforms/Passes.h.inc"

} // namespace zcc::zdist

#endif // ZCC_DIALECTS_DIST_TRANSFORMS_PASSES_H
