//===- OptimizerLaunch.h - Launchers of the optimizer kernels ---*- C++ -*-===//
//
// Between Optimizer.cpp (argument checks, as the cpu kernels) and
// Optimizer.cu (the device code): accumulate, fill, sum_squares and the adamw
// and sgd steps. Every launcher enqueues on `stream` and returns the launch's
// error; none waits.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CUDA_OPTIMIZERLAUNCH_H
#define ZCC_KERNELS_CUDA_OPTIMIZERLAUNCH_H

#include "kernels/cuda/LaunchTypes.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace zcc::cuda {

/// target[i] = target[i] + T(value[i]): `target` f32 or f64, `value` any
/// float type, one rounding per element.
struct AccumulateParams {
  ElementType targetType = ElementType::kUnspecified;
  ElementType valueType = ElementType::kUnspecified;
  void *target = nullptr;
  const void *value = nullptr;
  int64_t count = 0;
};
cudaError_t launchAccumulate(const AccumulateParams &params,
                             cudaStream_t stream);

/// Sets each of the `count` elements of `elementBytes` (2, 4 or 8) bytes at
/// `target` to the low `elementBytes` bytes of `pattern`.
cudaError_t launchFillPattern(void *target, int elementBytes, uint64_t pattern,
                              int64_t count, cudaStream_t stream);

/// One operand of sum_squares.
struct SumSquaresInput {
  const void *data = nullptr;
  int64_t count = 0;
  ElementType type = ElementType::kUnspecified;
};

/// Operands a single partial-sums launch takes (its parameter block holds
/// them by value).
constexpr int kSumSquaresInputsPerLaunch = 32;

/// Partial sums one operand of `count` elements contributes (0 for an empty
/// one). The host lays the partials out operand after operand.
int64_t sumSquaresPartialCount(int64_t count);

/// Writes the partial sums of squares (in double) of `inputCount` <=
/// kSumSquaresInputsPerLaunch operands to partials[first...], operand after
/// operand, sumSquaresPartialCount(count) for each.
cudaError_t launchSumSquaresPartials(const SumSquaresInput *inputs,
                                     int inputCount, double *partials,
                                     int64_t first, cudaStream_t stream);

/// result[0] = the sum of partials[0, count), in a fixed order.
cudaError_t launchSumSquaresFinal(const double *partials, int64_t count,
                                  double *result, cudaStream_t stream);

/// torch.optim.Adam(W)'s single-tensor step (kernels/cpu/Optimizer.cpp);
/// `scalars` is the device f64[8] (lr, beta1, beta2, eps, weight_decay,
/// step, grad_scale, momentum).
struct AdamwParams {
  ElementType type = ElementType::kUnspecified; // f32 or f64
  const void *param = nullptr, *grad = nullptr, *expAvg = nullptr,
             *expAvgSq = nullptr;
  void *paramOut = nullptr, *expAvgOut = nullptr, *expAvgSqOut = nullptr;
  const double *scalars = nullptr;
  int64_t count = 0;
  bool decoupled = true;
  /// FusedAdam's bias_correction: false steps without the 1 - beta^step
  /// factors.
  bool biasCorrection = true;
};
cudaError_t launchAdamw(const AdamwParams &params, cudaStream_t stream);

/// One tensor of a multi-tensor adamw: AdamwParams' pointers and count.
struct AdamwTensor {
  const void *param = nullptr, *grad = nullptr, *expAvg = nullptr,
             *expAvgSq = nullptr;
  void *paramOut = nullptr, *expAvgOut = nullptr, *expAvgSqOut = nullptr;
  int64_t count = 0;
  /// The updated parameter's 16-bit copy (of launchMultiAdamw's
  /// `copyType`), or null.
  void *copy = nullptr;
};

/// Tensors one multi-tensor adamw launch takes (its parameter block holds
/// them by value).
constexpr int kAdamwTensorsPerLaunch = 40;

/// launchAdamw's step over `tensorCount` (1 to kAdamwTensorsPerLaunch)
/// tensors of `type` (f32 or f64) in one launch: each tensor gets the
/// blocks launchAdamw would give it, and every element is computed by the
/// same code. With `copyType` f16 or bf16 (`type` f32), every tensor's
/// `copy` also receives its updated parameter rounded to nearest even, as
/// the cast kernel rounds; kUnspecified: no tensor has a copy.
cudaError_t launchMultiAdamw(const AdamwTensor *tensors, int tensorCount,
                             ElementType type, ElementType copyType,
                             const double *scalars, bool decoupled,
                             bool biasCorrection, cudaStream_t stream);

/// One target of a multi-tensor fill: as launchFillPattern's arguments.
struct FillTensor {
  void *target = nullptr;
  int64_t count = 0;
  uint64_t pattern = 0;
  int elementBytes = 0; // 2, 4 or 8
};

/// Targets one multi-tensor fill launch takes.
constexpr int kFillTensorsPerLaunch = 64;

/// Fills `tensorCount` (1 to kFillTensorsPerLaunch) targets in one launch.
cudaError_t launchMultiFill(const FillTensor *tensors, int tensorCount,
                            cudaStream_t stream);

/// torch.optim.SGD's single-tensor step, as AdamwParams.
struct SgdParams {
  ElementType type = ElementType::kUnspecified; // f32 or f64
  const void *param = nullptr, *grad = nullptr, *buffer = nullptr;
  void *paramOut = nullptr, *bufferOut = nullptr;
  const double *scalars = nullptr;
  int64_t count = 0;
  double dampening = 0;
  bool nesterov = false;
};
cudaError_t launchSgd(const SgdParams &params, cudaStream_t stream);

/// torch.optim.Adagrad's single-tensor step, as AdamwParams.
struct AdagradParams {
  ElementType type = ElementType::kUnspecified; // f32 or f64
  const void *param = nullptr, *grad = nullptr, *sum = nullptr;
  void *paramOut = nullptr, *sumOut = nullptr;
  const double *scalars = nullptr;
  int64_t count = 0;
  double lrDecay = 0;
};
cudaError_t launchAdagrad(const AdagradParams &params, cudaStream_t stream);

/// The cpu's lion step, operation by operation, as AdamwParams.
struct LionParams {
  ElementType type = ElementType::kUnspecified; // f32 or f64
  const void *param = nullptr, *grad = nullptr, *expAvg = nullptr;
  void *paramOut = nullptr, *expAvgOut = nullptr;
  const double *scalars = nullptr;
  int64_t count = 0;
};
cudaError_t launchLion(const LionParams &params, cudaStream_t stream);

/// The cpu's lamb_moments and lamb_step (kernels/cpu/Optimizer.cpp),
/// operation by operation, as AdamwParams with the instructions'
/// attributes; `squares` is the f64[2] of sums of squares lamb_moments
/// writes and lamb_step reads (param and grad unused by lamb_step, and
/// paramOut by lamb_moments).
struct LambParams {
  ElementType type = ElementType::kUnspecified; // f32 or f64
  const void *param = nullptr, *grad = nullptr, *expAvg = nullptr, *expAvgSq = nullptr;
  void *paramOut = nullptr, *expAvgOut = nullptr, *expAvgSqOut = nullptr;
  const double *scalars = nullptr;
  double *squares = nullptr;
  int64_t count = 0;
  double maxCoeff = 10.0, minCoeff = 0.01;
  bool biasCorrection = true, epsInsideSqrt = false;
};

/// Blocks of lamb_moments' pass: a fixed number, so that its partial sums
/// add up in one order whatever the tensor's size.
constexpr int kLambBlocks = 256;
/// Workspace bytes lamb_moments needs (its partial sums of squares).
constexpr size_t kLambWorkspaceBytes = 2 * kLambBlocks * sizeof(double);

/// The moments and per-block sums of param^2 and update^2 into `workspace`
/// (kLambWorkspaceBytes), then their totals, in a fixed order, into
/// `params.squares`.
cudaError_t launchLambMoments(const LambParams &params, void *workspace, cudaStream_t stream);

/// The trust ratio from `params.squares` and the parameter's step.
cudaError_t launchLambStep(const LambParams &params, cudaStream_t stream);

} // namespace zcc::cuda

#endif // ZCC_KERNELS_CUDA_OPTIMIZERLAUNCH_H
