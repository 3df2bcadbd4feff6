//===- Registration.cpp - zcc's dialects, passes and pipelines ------------===//

#include "compiler/Pipelines/Registration.h"

#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Graph/Transforms/Passes.h"
#include "dialects/Plan/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"

void zcc::registerZccDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::func::FuncDialect, zgraph::ZGraphDialect,
                  zdist::ZDistDialect, zplan::ZPlanDialect>();
}

void zcc::registerZccPasses() {
  zgraph::registerZGraphPasses();
  zdist::registerZDistPasses();
  zplan::registerZPlanPasses();
}
