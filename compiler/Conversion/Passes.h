//===- Passes.h - Conversions between zcc's dialects ------------*- C++ -*-===//

#ifndef ZCC_COMPILER_CONVERSION_PASSES_H
#define ZCC_COMPILER_CONVERSION_PASSES_H

#include "dialects/Dist/IR/ZDist.h"
#include "dialects/Graph/IR/ZGraph.h"
#include "dialects/Plan/IR/ZPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace zcc {

#define GEN_PASS_DECL
#include "compiler/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Conversion/Passes.h.inc"

} // namespace zcc

#endif // ZCC_COMPILER_CONVERSION_PASSES_H
