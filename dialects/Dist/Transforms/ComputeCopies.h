//===- ComputeCopies.h - 16-bit copies of parameters ------------*- C++ -*-===//
//
// With 16-bit compute, the step functions read each f32 parameter through
// a cast. A parameter they read only that way can keep its cast as state
// instead (`zgraph.state kind = "copy"`): `@init` sets it and
// `@optimizer_step` refreshes it right after the parameter's last write,
// so a micro-step casts nothing. zcc-dist-offload keeps such copies of the
// parameters it moves to host memory, zcc-dist-compute-copies of those
// the device keeps whole.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_DIALECTS_DIST_TRANSFORMS_COMPUTECOPIES_H
#define ZCC_DIALECTS_DIST_TRANSFORMS_COMPUTECOPIES_H

#include "dialects/Dist/Transforms/InPlace.h"
#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringSet.h"

namespace zcc::zdist {

/// The module's `@init` (derived training state, run once after the
/// weights load or resume), made empty right before `update` when there is
/// none.
mlir::func::FuncOp getOrCreateInit(mlir::ModuleOp module, mlir::func::FuncOp update);

/// Gives each f32 parameter that `eligible` accepts, that the step
/// functions (all but `@optimizer_step` and `@init`) read only through
/// casts to one 16-bit type and that nothing but `@optimizer_step` writes,
/// a `zgraph.state kind = "copy"` of that type: the casts become reads of
/// the copy, `@init` sets it from the parameter and `@optimizer_step`
/// refreshes it right after the parameter's last write there. Returns the
/// names of the parameters given a copy. Without `@optimizer_step` (an
/// inference module) it changes nothing.
llvm::StringSet<> keepComputeCopies(mlir::ModuleOp module,
                                    llvm::function_ref<bool(zgraph::ParamOp)> eligible);

} // namespace zcc::zdist

#endif // ZCC_DIALECTS_DIST_TRANSFORMS_COMPUTECOPIES_H
