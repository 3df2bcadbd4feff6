//===- CudaPlugin.h - The cuda backend, loaded on first use -----*- C++ -*-===//
//
// The cuda backend (CudaBackend, the NCCL communicator, the cuda kernels and
// the CUDA, cuBLASLt and NCCL libraries under them) lives in a plugin,
// lib/libzcc_cuda.so, that zrun loads the first time a run asks for
// `--backend cuda`. A cpu run never maps the GPU libraries (cuBLASLt alone is
// half a gigabyte), so it starts in milliseconds, and a zrun built with CUDA
// still runs where no CUDA library is installed.
//
// The plugin is built from the same sources as the program that loads it
// and takes the program's own copies of the runtime (Status, the plan's
// protobuf classes, the cpu kernels' checks): programs that load it export
// their symbols (ENABLE_EXPORTS).
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_CUDAPLUGIN_H
#define ZCC_RUNTIME_CUDAPLUGIN_H

#include "runtime/Backend.h"
#include "runtime/Comm/Communicator.h"

#include <chrono>
#include <memory>
#include <string>

namespace zcc {

/// What the plugin provides. Bump kCudaPluginAbi when this changes.
struct CudaPlugin {
  uint32_t abi = 0;
  /// A backend on CUDA device `ordinal`.
  StatusOr<std::unique_ptr<Backend>> (*createBackend)(int ordinal) = nullptr;
  /// A fresh NCCL unique id, as hex text (made by the process that hosts
  /// NCCL's bootstrap: the launcher, or rank 0).
  StatusOr<std::string> (*makeCommunicatorId)() = nullptr;
  /// Makes local CUDA device `device` this thread's device; explains a
  /// missing device or a node with fewer GPUs than ranks.
  Status (*selectDevice)(int device, int rank) = nullptr;
  /// Joins the group `idHex` names as `rank` of `size`, on the current
  /// device.
  StatusOr<std::unique_ptr<Communicator>> (*createCommunicator)(
      const std::string &idHex, int rank, int size,
      std::chrono::milliseconds timeout) = nullptr;
  /// The communicator of the ranks of `parent` (one createCommunicator
  /// made) that pass the same `color`, ranked by `key`; every rank of
  /// `parent` calls it.
  StatusOr<std::unique_ptr<Communicator>> (*splitCommunicator)(Communicator &parent, int color,
                                                               int key) = nullptr;
};

constexpr uint32_t kCudaPluginAbi = 3;

/// The plugin, loaded once (later calls return the same one or the same
/// error): lib/libzcc_cuda.so beside the program's bin/ folder, or
/// $ZCC_CUDA_PLUGIN.
StatusOr<const CudaPlugin *> loadCudaPlugin();

} // namespace zcc

/// The plugin's one entry point.
extern "C" const zcc::CudaPlugin *zccCudaPlugin();

#endif // ZCC_RUNTIME_CUDAPLUGIN_H
