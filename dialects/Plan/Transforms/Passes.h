//===- Passes.h - zplan passes ----------------------------------*- C++ -*-===//

#ifndef ZCC_DIALECTS_PLAN_TRANSFORMS_PASSES_H
#define ZCC_DIALECTS_PLAN_TRANSFORMS_PASSES_H

#include "dialects/Plan/IR/ZPlan.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace zcc::zplan {

#define GEN_PASS_DECL
#include "dialects/Plan/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/Plan/Transforms/Passes.h.inc"

} // namespace zcc::zplan

#endif // ZCC_DIALECTS_PLAN_TRANSFORMS_PASSES_H
