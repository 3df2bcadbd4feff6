//===- Backend.cpp - Choosing a backend by name ---------------------------===//

#include "runtime/Backend.h"

#include "runtime/Cpu/CpuBackend.h"
#ifdef ZCC_HAVE_CUDA_BACKEND
#include "runtime/Cuda/CudaBackend.h"
#endif

namespace zcc {

StatusOr<std::unique_ptr<Backend>> createBackend(const std::string &name,
                                                 int deviceOrdinal) {
  if (name == "cpu")
    return std::unique_ptr<Backend>(new CpuBackend());
  if (name == "cuda") {
#ifdef ZCC_HAVE_CUDA_BACKEND
    StatusOr<std::unique_ptr<CudaBackend>> backend =
        CudaBackend::create(deviceOrdinal);
    if (!backend.isOk())
      return backend.takeStatus();
    return std::unique_ptr<Backend>(std::move(*backend));
#else
    (void)deviceOrdinal;
    return Status(StatusCode::kUnavailable,
                  "this zrun was built without CUDA (no toolkit was found at "
                  "build time); rebuild it where /usr/local/cuda exists, or "
                  "run with --backend cpu");
#endif
  }
  return makeStatus(StatusCode::kInvalidArgument,
                    "unknown backend '%s' (the backends are cpu and cuda)",
                    name.c_str());
}

} // namespace zcc
