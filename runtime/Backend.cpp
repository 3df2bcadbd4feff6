//===- Backend.cpp - Choosing a backend by name ---------------------------===//

#include "runtime/Backend.h"

#include "runtime/Cpu/CpuBackend.h"

namespace zcc {

StatusOr<std::unique_ptr<Backend>> createBackend(const std::string &name) {
  if (name == "cpu")
    return std::unique_ptr<Backend>(new CpuBackend());
  if (name == "cuda")
    return Status(StatusCode::kUnimplemented,
                  "the cuda backend is not supported yet; run with --backend "
                  "cpu");
  return makeStatus(StatusCode::kInvalidArgument,
                    "unknown backend '%s' (the backends are cpu and cuda)",
                    name.c_str());
}

} // namespace zcc
