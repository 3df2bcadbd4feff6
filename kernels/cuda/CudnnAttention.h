//===- CudnnAttention.h - Attention through cuDNN's fused graphs -*- C++ -*-===//
//
// The 16-bit attention and its gradient on cuDNN's flash-attention engines
// (on Hopper, its wgmma and TMA kernels). The scaled product, causal mask and
// softmax are described to cuDNN as a backend operation graph, the graph
// cuDNN's heuristics map onto one fused kernel; its execution plan is built
// on a shape's first call and kept. A shape or layout cuDNN's engines do not
// take is declined, and the caller runs its own kernels (Attention.cu).
//
// A shape's first call builds its plan on the host, so it must not be the
// one a CUDA graph captures (the executor runs a program once before
// capturing it). One thread launches at a time: the plan cache and the
// handle's stream are not guarded.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_CUDNNATTENTION_H
#define ZCC_KERNELS_CUDA_CUDNNATTENTION_H

#include "kernels/cuda/AttentionLaunch.h"
#include "runtime/Support/Status.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace zcc::cuda {

class CudnnAttention {
public:
  /// A cuDNN handle and an empty plan cache; an error when the handle
  /// cannot be made or the loaded cuDNN is older than 9.
  static Status create(std::unique_ptr<CudnnAttention> &result);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention &) = delete;
  CudnnAttention &operator=(const CudnnAttention &) = delete;

  /// Enqueues `params` on `stream` through cuDNN and sets `ran`. Leaves
  /// `ran` false, with nothing enqueued, where cuDNN's engines do not take
  /// the shape, the layout or the element type. Uses up to `workspaceBytes`
  /// of `workspace`.
  Status forward(const AttentionParams &params, cudaStream_t stream,
                 void *workspace, size_t workspaceBytes, bool &ran);
  /// The same for the gradient, which needs the forward's saved output and
  /// log-sum-exp (a gradient that recomputes its statistics is declined).
  Status backward(const AttentionGradParams &params, cudaStream_t stream,
                  void *workspace, size_t workspaceBytes, bool &ran);

  /// How many calls ran on cuDNN.
  int64_t runs() const { return runs_; }
  /// Why the last call was declined ("" when it ran on cuDNN).
  const std::string &lastDeclined() const { return lastDeclined_; }
  /// cudnnGetVersion() of the library loaded (e.g. 91400).
  size_t version() const { return version_; }

private:
  /// One shape's execution plan (or the reason it has none).
  struct Plan;

  CudnnAttention() = default;
  Plan *planFor(bool backward, const AttentionShape &shape, ElementType type,
                bool lse);
  /// Starts a call: clears `ran` and the last decline; false (declined)
  /// unless `type` is 16-bit.
  bool takesType(ElementType type, bool &ran);
  /// Whether `plan` runs with this much workspace and these operands'
  /// alignment; else says why not in lastDeclined().
  bool usable(Plan &plan, size_t workspaceBytes,
              std::initializer_list<const void *> operands);

  void *handle_ = nullptr; // cudnnHandle_t
  size_t version_ = 0;
  int64_t runs_ = 0;
  std::string lastDeclined_;
  std::map<std::vector<int64_t>, std::unique_ptr<Plan>> plans_;
};

} // namespace zcc::cuda

#endif // ZCC_KERNELS_CUDA_CUDNNATTENTION_H
