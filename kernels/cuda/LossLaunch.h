//===- LossLaunch.h - Launchers of the losses and their gradients -*- C++
//-*-===//
//
// Between Loss.cpp (argument checks) and Loss.cu (device code): mse_loss,
// cross_entropy, nll_loss and their gradients.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_LOSSLAUNCH_H
#define ZCC_KERNELS_CUDA_LOSSLAUNCH_H

#include "kernels/cuda/LaunchTypes.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace zcc::cuda {

/// The most partial results a loss reduction writes (one per block or warp
/// of its first pass); a second pass adds them in order.
constexpr int64_t kMaxLossPartials = 8192;

/// Workspace bytes the loss launchers use at most: a value and a count per
/// partial, and the count of labels that a mean divides by.
constexpr size_t kLossWorkspaceBytes =
    2 * 8 * static_cast<size_t>(kMaxLossPartials) + 8;

/// As kernels/cpu/KernelSupport.h's Reduction.
enum class LossReduction : int { kMean, kSum, kNone };

/// cross_entropy (logSoftmax) or nll_loss of [batch, classes, inner] scores
/// against [batch, inner] labels (i64 or i32). `loss` is a scalar, or has
/// the labels' shape for kNone. Mean and sum use the workspace.
struct ClassLossParams {
  ElementType type = ElementType::kUnspecified;
  ElementType labelType = ElementType::kI64;
  const void *input = nullptr, *labels = nullptr;
  void *loss = nullptr;
  int64_t batch = 0, classes = 0, inner = 1;
  bool logSoftmax = false;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
  LossReduction reduction = LossReduction::kMean;
  void *workspace = nullptr;
};

cudaError_t launchClassLoss(const ClassLossParams &params, cudaStream_t stream);

/// cross_entropy_grad or nll_loss_grad: `grad` is the loss's gradient (a
/// scalar, or the labels' shape for kNone); `result` has the scores' shape
/// and may alias `input`. Mean uses the workspace (the count of labels).
struct ClassLossGradParams {
  ElementType type = ElementType::kUnspecified;
  /// The result's type: `type` (kUnspecified says the same), or f16 or
  /// bf16 for an f32 input (each value rounded once from f32).
  ElementType resultType = ElementType::kUnspecified;
  ElementType labelType = ElementType::kI64;
  const void *input = nullptr, *labels = nullptr, *grad = nullptr;
  void *result = nullptr;
  int64_t batch = 0, classes = 0, inner = 1;
  bool logSoftmax = false;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
  LossReduction reduction = LossReduction::kMean;
  void *workspace = nullptr;
};

cudaError_t launchClassLossGrad(const ClassLossGradParams &params,
                                cudaStream_t stream);

/// mse_loss: the mean of (prediction - target)^2 over `count` elements into
/// the scalar `loss`; uses the workspace.
struct MseLossParams {
  ElementType type = ElementType::kUnspecified;
  const void *prediction = nullptr, *target = nullptr;
  void *loss = nullptr;
  int64_t count = 0;
  void *workspace = nullptr;
};

cudaError_t launchMseLoss(const MseLossParams &params, cudaStream_t stream);

/// mse_loss_grad: result = (prediction - target) * 2 grad / count, grad a
/// scalar.
struct MseLossGradParams {
  ElementType type = ElementType::kUnspecified;
  const void *prediction = nullptr, *target = nullptr, *grad = nullptr;
  void *result = nullptr;
  int64_t count = 0;
};

cudaError_t launchMseLossGrad(const MseLossGradParams &params,
                              cudaStream_t stream);

} // namespace zcc::cuda

#endif // ZCC_KERNELS_CUDA_LOSSLAUNCH_H
