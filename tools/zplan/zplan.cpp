//===- zplan.cpp - Inspecting plan files ----------------------------------===//
//
//   zplan dump PLAN.bin      # the plan as text
//   zplan export CHECKPOINT_DIR -o WEIGHTS.safetensors
//   zplan export CHECKPOINT_DIR --onnx MODEL.onnx -o TRAINED.onnx
//
// `dump` prints what the runtime would run, after the same checks zrun makes
// (header, version, checksum, validation), so a plan that dumps is a plan
// zrun accepts. Every failure exits 1 with one message on standard error.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan/PlanLoader.h"
#include "runtime/Plan/PlanPrinter.h"
#include "tools/zplan/Export.h"

#include <cstdio>
#include <string>

using namespace zcc;

static const char kUsage[] =
    "usage: zplan dump PLAN.bin\n"
    "       zplan export CHECKPOINT_DIR -o WEIGHTS.safetensors\n"
    "       zplan export CHECKPOINT_DIR --onnx MODEL.onnx -o TRAINED.onnx\n"
    "\n"
    "  dump PLAN.bin   print the plan as text: header, mesh, arena, buffers,\n"
    "                  weights, inputs, outputs and every program's "
    "instructions\n"
    "  export DIR      the trained parameters of the newest checkpoint in DIR\n"
    "                  (zrun --save), each joined whole from the ranks' rows:\n"
    "                  as safetensors (named as the ONNX initializers), or with\n"
    "                  --onnx as a copy of the model (and its external data)\n"
    "                  whose initializers hold the trained values\n";

static int fail(const std::string &message) {
  std::fprintf(stderr, "zplan: error: %s\n", message.c_str());
  return 1;
}

int main(int argc, char **argv) {
  if (argc == 2 &&
      (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc < 2)
    return fail("no command given: zplan dump PLAN.bin (see zplan --help)");
  std::string command = argv[1];
  if (command == "export") {
    std::string dir, onnx, output;
    for (int i = 2; i < argc; ++i) {
      std::string arg = argv[i];
      if ((arg == "-o" || arg == "--onnx") && i + 1 < argc)
        (arg == "-o" ? output : onnx) = argv[++i];
      else if (!arg.empty() && arg[0] != '-' && dir.empty())
        dir = arg;
      else
        return fail("zplan export: unexpected argument '" + arg + "' (see zplan --help)");
    }
    if (dir.empty() || output.empty())
      return fail("zplan export needs a checkpoint folder and -o OUTPUT (see zplan --help)");
    Status status = onnx.empty() ? exportSafetensors(dir, output) : exportOnnx(dir, onnx, output);
    if (!status.isOk())
      return fail(status.message());
    return 0;
  }
  if (command != "dump")
    return fail("unknown command '" + command +
                "'; the commands are dump and export (see zplan --help)");
  if (argc != 3)
    return fail("zplan dump takes one plan: zplan dump PLAN.bin");

  StatusOr<LoadedPlan> loaded = loadPlan(argv[2]);
  if (!loaded.isOk())
    return fail(loaded.status().message());
  std::string text = printPlan(loaded->header, loaded->plan);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (std::fflush(stdout) != 0)
    return fail("cannot write to standard output");
  return 0;
}
