//===- Plugin.cpp - The entry point of libzcc_cuda.so ---------------------===//

#include "runtime/CudaPlugin.h"
#include "runtime/Cuda/CudaBackend.h"
#include "runtime/Cuda/NcclCommunicator.h"

#include <cuda_runtime_api.h>

namespace zcc {
namespace {

StatusOr<std::unique_ptr<Backend>> createBackend(int ordinal) {
  StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::create(ordinal);
  if (!backend.isOk())
    return backend.takeStatus();
  return std::unique_ptr<Backend>(std::move(*backend));
}

StatusOr<std::string> makeCommunicatorId() {
  StatusOr<ncclUniqueId> id = makeNcclId();
  if (!id.isOk())
    return id.takeStatus();
  return ncclIdToHex(*id);
}

Status selectDevice(int device, int rank) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return makeStatus(StatusCode::kUnavailable,
                      "rank %d: the cuda backend needs a CUDA device, and there is none "
                      "here; run with --backend cpu",
                      rank);
  }
  if (device >= devices || cudaSetDevice(device) != cudaSuccess)
    return makeStatus(StatusCode::kUnavailable,
                      "rank %d: cannot use CUDA device %d: this node has %d; start at most "
                      "%d ranks per node, or let ranks share a GPU with --ranks-per-gpu",
                      rank, device, devices, devices);
  return Status::ok();
}

StatusOr<std::unique_ptr<Communicator>>
createCommunicator(const std::string &idHex, int rank, int size,
                   std::chrono::milliseconds timeout) {
  ncclUniqueId id;
  ZCC_RETURN_IF_ERROR(ncclIdFromHex(idHex, id), "rank %d", rank);
  StatusOr<std::unique_ptr<NcclCommunicator>> created =
      NcclCommunicator::create(id, rank, size, timeout);
  if (!created.isOk())
    return created.takeStatus();
  return std::unique_ptr<Communicator>(std::move(*created));
}

StatusOr<std::unique_ptr<Communicator>> splitCommunicator(Communicator &parent, int color,
                                                          int key) {
  StatusOr<std::unique_ptr<NcclCommunicator>> split =
      static_cast<NcclCommunicator &>(parent).split(color, key);
  if (!split.isOk())
    return split.takeStatus();
  return std::unique_ptr<Communicator>(std::move(*split));
}

const CudaPlugin kPlugin = {kCudaPluginAbi,     createBackend,      makeCommunicatorId,
                            selectDevice,       createCommunicator, splitCommunicator};

} // namespace
} // namespace zcc

extern "C" __attribute__((visibility("default"))) const zcc::CudaPlugin *zccCudaPlugin() {
  return &zcc::kPlugin;
}
