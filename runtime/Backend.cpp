//===- Backend.cpp - Choosing a backend by name ---------------------------===//

#include "runtime/Backend.h"

#include "runtime/Cpu/CpuBackend.h"
#include "runtime/CudaPlugin.h"

namespace zcc {

StatusOr<std::unique_ptr<Backend>> createBackend(const std::string &name,
                                                 int deviceOrdinal) {
  if (name == "cpu")
    return std::unique_ptr<Backend>(new CpuBackend());
  if (name == "cuda") {
    StatusOr<const CudaPlugin *> plugin = loadCudaPlugin();
    if (!plugin.isOk())
      return plugin.takeStatus();
    return (*plugin)->createBackend(deviceOrdinal);
  }
  return makeStatus(StatusCode::kInvalidArgument,
                    "unknown backend '%s' (the backends are cpu and cuda)",
                    name.c_str());
}

} // namespace zcc
