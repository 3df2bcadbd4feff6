//===- LossScaler.cpp - fp16 loss scaling, as DeepSpeed does it -----------===//

#include "runtime/Train/LossScaler.h"

#include <algorithm>
#include <cmath>

namespace zcc {

/// DynamicLossScaler.scale_factor: halve on overflow, double when stable.
static constexpr double kScaleFactor = 2.0;

StatusOr<LossScaler> LossScaler::create(const plan::LossScaler &config) {
  LossScaler scaler;
  scaler.skipNonfinite_ = config.skip_nonfinite();
  if (!config.enabled())
    return scaler;
  scaler.enabled_ = true;
  if (!config.dynamic()) {
    if (!std::isfinite(config.static_scale()) || config.static_scale() <= 0)
      return makeStatus(StatusCode::kInvalidArgument,
                        "fp16.loss_scale must be finite and greater than 0, "
                        "got %g",
                        config.static_scale());
    scaler.scale_ = config.static_scale();
    return scaler;
  }
  scaler.dynamic_ = true;
  double initialScale =
      std::ldexp(1.0, static_cast<int>(std::clamp<int64_t>(
                          config.initial_scale_power(), -2000, 2000)));
  if (!std::isfinite(initialScale) || initialScale <= 0)
    return makeStatus(StatusCode::kInvalidArgument,
                      "fp16.initial_scale_power %lld gives a loss scale that "
                      "is not a finite number greater than 0",
                      static_cast<long long>(config.initial_scale_power()));
  if (config.scale_window() <= 0)
    return makeStatus(StatusCode::kInvalidArgument,
                      "fp16.loss_scale_window must be greater than 0, got %lld",
                      static_cast<long long>(config.scale_window()));
  if (config.hysteresis() <= 0)
    return makeStatus(StatusCode::kInvalidArgument,
                      "fp16.hysteresis must be greater than 0, got %lld",
                      static_cast<long long>(config.hysteresis()));
  if (!std::isfinite(config.min_scale()) || config.min_scale() <= 0)
    return makeStatus(StatusCode::kInvalidArgument,
                      "fp16.min_loss_scale must be finite and greater than 0, "
                      "got %g",
                      config.min_scale());
  scaler.scale_ = initialScale;
  scaler.scaleWindow_ = config.scale_window();
  scaler.minScale_ = config.min_scale();
  scaler.hysteresis_ = config.hysteresis();
  scaler.curHysteresis_ = config.hysteresis();
  scaler.consecutiveHysteresis_ = config.consecutive_hysteresis();
  return scaler;
}

Status LossScaler::update(bool overflow) {
  if (!dynamic_)
    return Status::ok();
  if (overflow) {
    if (hysteresis_ == 1 || curHysteresis_ == 1) {
      // The exact comparison is DeepSpeed's: a scale that started below
      // min_scale is raised to it rather than refused.
      if (scale_ == minScale_)
        return makeStatus(StatusCode::kFailedPrecondition,
                          "Current loss scale already at minimum - cannot "
                          "decrease scale anymore. Exiting run. (loss scale "
                          "%g = fp16.min_loss_scale, overflow at iteration "
                          "%lld)",
                          scale_, static_cast<long long>(curIter_));
      scale_ = std::max(scale_ / kScaleFactor, minScale_);
    } else {
      curHysteresis_ -= 1;
    }
    lastOverflowIter_ = curIter_;
  } else {
    if (consecutiveHysteresis_)
      curHysteresis_ = hysteresis_;
    int64_t stableInterval = (curIter_ - lastOverflowIter_) - 1;
    if (stableInterval > 0 && stableInterval % scaleWindow_ == 0) {
      if (!consecutiveHysteresis_)
        curHysteresis_ = hysteresis_;
      scale_ *= kScaleFactor;
    }
  }
  curIter_ += 1;
  return Status::ok();
}

LossScalerState LossScaler::state() const {
  LossScalerState state;
  state.scale = scale_;
  state.curIter = curIter_;
  state.lastOverflowIter = lastOverflowIter_;
  state.curHysteresis = curHysteresis_;
  return state;
}

Status LossScaler::restore(const LossScalerState &state) {
  if (!dynamic_) {
    LossScalerState own = this->state();
    if (state.scale != own.scale || state.curIter != own.curIter ||
        state.lastOverflowIter != own.lastOverflowIter ||
        state.curHysteresis != own.curHysteresis)
      return makeStatus(StatusCode::kFailedPrecondition,
                        "the checkpoint's loss scaler (scale %g, iteration "
                        "%lld) is not this run's %s scale %g",
                        state.scale, static_cast<long long>(state.curIter),
                        enabled_ ? "static" : "disabled", scale_);
    return Status::ok();
  }
  if (!std::isfinite(state.scale) || state.scale <= 0)
    return makeStatus(StatusCode::kDataLoss,
                      "checkpoint loss scale %g is not finite and > 0",
                      state.scale);
  if (state.curHysteresis < 1 || state.curHysteresis > hysteresis_)
    return makeStatus(StatusCode::kDataLoss,
                      "checkpoint cur_hysteresis %lld is outside [1, %lld]",
                      static_cast<long long>(state.curHysteresis),
                      static_cast<long long>(hysteresis_));
  if (state.curIter < 0 || state.lastOverflowIter < -1 ||
      state.lastOverflowIter >= state.curIter)
    return makeStatus(StatusCode::kDataLoss,
                      "checkpoint loss-scaler iterations are inconsistent: "
                      "cur_iter %lld, last_overflow_iter %lld",
                      static_cast<long long>(state.curIter),
                      static_cast<long long>(state.lastOverflowIter));
  scale_ = state.scale;
  curIter_ = state.curIter;
  lastOverflowIter_ = state.lastOverflowIter;
  curHysteresis_ = state.curHysteresis;
  return Status::ok();
}

} // namespace zcc
