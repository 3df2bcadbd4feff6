//===- LossScaler.h - fp16 loss scaling, as DeepSpeed does it ---*- C++ -*-===//
//
// The scale the loss is multiplied by before the backward pass, and how it
// moves after each optimizer step, following DeepSpeed's
// deepspeed/runtime/fp16/loss_scaler.py:
//   - not enabled (fp32, bf16): the scale is 1 and update() changes nothing;
//   - static (fp16.loss_scale > 0): that scale forever (LossScaler);
//   - dynamic (fp16.loss_scale == 0): DynamicLossScaler.update_scale, factor
//     2, starting at 2^initial_scale_power:
//       overflow, and hysteresis == 1 or cur_hysteresis == 1:
//         at min_scale already: the error "Current loss scale already at
//         minimum - cannot decrease scale anymore. Exiting run." and nothing
//         changes (raise_error_at_min_scale defaults to True);
//         otherwise scale = max(scale / 2, min_scale);
//       overflow otherwise: cur_hysteresis -= 1, the scale stays;
//       either way last_overflow_iter = cur_iter (the step is skipped);
//       no overflow: with consecutive_hysteresis cur_hysteresis is refilled;
//         stable = cur_iter - last_overflow_iter - 1; when stable > 0 and
//         stable % scale_window == 0 the scale doubles (and cur_hysteresis is
//         refilled when consecutive_hysteresis is off);
//       cur_iter += 1 after every update that did not fail.
// The caller calls update() once per optimizer step, with whether any rank
// saw an inf/nan gradient; an overflow step is skipped and does not step the
// lr schedule.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_TRAIN_LOSSSCALER_H
#define ZCC_RUNTIME_TRAIN_LOSSSCALER_H

#include "plan.pb.h"
#include "runtime/Support/Status.h"

#include <cstdint>

namespace zcc {

/// What a checkpoint saves of a loss scaler to resume it exactly (the fields
/// of DeepSpeed's DynamicLossScaler that change).
struct LossScalerState {
  double scale = 1.0;
  int64_t curIter = 0;
  int64_t lastOverflowIter = -1;
  int64_t curHysteresis = 1;
};

class LossScaler {
public:
  /// Checks `config` as DeepSpeed's loss-scale validation does: a dynamic
  /// scaler needs scale_window, hysteresis and min_scale > 0 and a finite
  /// initial scale; a static one a finite scale > 0.
  static StatusOr<LossScaler> create(const plan::LossScaler &config);

  /// The scale of the next backward pass.
  double scale() const { return scale_; }
  bool enabled() const { return enabled_; }
  /// Whether a step with inf or NaN gradients is skipped: always with
  /// scaling (fp16), and without it where the plan asks (bf16's
  /// check_grad_overflow).
  bool skipsNonfinite() const { return enabled_ || skipNonfinite_; }
  bool dynamic() const { return dynamic_; }

  /// Moves the scale after a step; `overflow` says whether its gradients
  /// held an inf or a nan. Fails, changing nothing, when an overflow would
  /// have to lower a scale that is already at min_scale. Static and disabled
  /// scalers ignore it.
  Status update(bool overflow);

  int64_t curIter() const { return curIter_; }
  int64_t lastOverflowIter() const { return lastOverflowIter_; }
  int64_t curHysteresis() const { return curHysteresis_; }

  LossScalerState state() const;
  /// Resumes from a checkpoint's state. A dynamic scaler checks that the
  /// state is one it could have reached (scale finite and > 0, 1 <=
  /// cur_hysteresis <= hysteresis, -1 <= last_overflow_iter < cur_iter); a
  /// static or disabled one accepts only its own state.
  Status restore(const LossScalerState &state);

private:
  LossScaler() = default;

  bool enabled_ = false;
  bool skipNonfinite_ = false;
  bool dynamic_ = false;
  double scale_ = 1.0;
  // DynamicLossScaler's fields (DeepSpeed calls hysteresis delayed_shift).
  int64_t scaleWindow_ = 1000;
  double minScale_ = 1.0;
  int64_t hysteresis_ = 1;
  bool consecutiveHysteresis_ = false;
  int64_t curIter_ = 0;
  int64_t lastOverflowIter_ = -1;
  int64_t curHysteresis_ = 1;
};

} // namespace zcc

#endif // ZCC_RUNTIME_TRAIN_LOSSSCALER_H
