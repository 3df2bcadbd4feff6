//===- zcc-opt.cpp - Run zcc's passes on MLIR files -----------------------===//
//
// mlir-opt with zcc's dialects and passes: every phase of the compiler can be
// run alone on a textual module, which is how the lit tests drive it.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  zcc::registerZccDialects(registry);
  zcc::registerZccPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "zcc modular optimizer driver\n", registry));
}
