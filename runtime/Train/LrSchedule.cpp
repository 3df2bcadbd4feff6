//===- LrSchedule.cpp - DeepSpeed's learning-rate schedules ---------------===//
//
// Each formula keeps the order of operations of lr_schedules.py (and Python's
// int/float conversions), and the library builds with -ffp-contract=off, so
// the doubles match DeepSpeed's bit for bit rather than to a tolerance.
//
//===----------------------------------------------------------------------===//

#include "runtime/Train/LrSchedule.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace zcc {

/// Python's math.pi.
static constexpr double kPi = 3.141592653589793;

namespace detail {
/// Reads Scheduler.params by name, remembering which it read so that a param
/// the scheduler does not take is an error rather than silently ignored.
class ParamReader {
public:
  ParamReader(const plan::Scheduler &scheduler) : scheduler_(scheduler) {}

  /// The param's value, or `fallback` when absent. Non-finite values fail.
  Status number(const char *name, double fallback, double &out) {
    read_.insert(name);
    auto it = scheduler_.params().find(name);
    if (it == scheduler_.params().end()) {
      out = fallback;
      return Status::ok();
    }
    if (!std::isfinite(it->second))
      return bad(name, "must be a finite number", it->second);
    out = it->second;
    return Status::ok();
  }

  /// A number that must be present.
  Status required(const char *name, double &out) {
    if (scheduler_.params().find(name) == scheduler_.params().end())
      return makeStatus(StatusCode::kInvalidArgument,
                        "scheduler %s needs param '%s'",
                        scheduler_.type().c_str(), name);
    return number(name, 0, out);
  }

  /// A whole number of at least `minimum`.
  Status integer(const char *name, int64_t fallback, int64_t minimum,
                 int64_t &out) {
    double value;
    ZCC_RETURN_IF_ERROR(number(name, static_cast<double>(fallback), value),
                        "while reading the scheduler");
    return toInteger(name, value, minimum, out);
  }

  Status toInteger(const char *name, double value, int64_t minimum,
                   int64_t &out) {
    if (value != std::floor(value) || std::fabs(value) > 9.0e15)
      return bad(name, "must be a whole number", value);
    if (value < static_cast<double>(minimum)) {
      std::string what = minimum == 1
                             ? std::string("must be a positive integer")
                             : formatString("must be at least %lld",
                                            static_cast<long long>(minimum));
      return bad(name, what.c_str(), value);
    }
    out = static_cast<int64_t>(value);
    return Status::ok();
  }

  /// A number of at least zero.
  Status nonNegative(const char *name, double fallback, double &out) {
    ZCC_RETURN_IF_ERROR(number(name, fallback, out),
                        "while reading the scheduler");
    if (out < 0)
      return bad(name, "must not be negative", out);
    return Status::ok();
  }

  Status boolean(const char *name, bool fallback, bool &out) {
    double value;
    ZCC_RETURN_IF_ERROR(number(name, fallback ? 1.0 : 0.0, value),
                        "while reading the scheduler");
    if (value != 0.0 && value != 1.0)
      return bad(name, "is a boolean and must be 0 or 1", value);
    out = value != 0.0;
    return Status::ok();
  }

  bool has(const char *name) const {
    return scheduler_.params().find(name) != scheduler_.params().end();
  }

  /// Fails on the first param that was never read.
  Status checkAllRead() const {
    // The map's order is unspecified; report the smallest name so that the
    // message does not depend on it.
    std::set<std::string> unread;
    for (const auto &entry : scheduler_.params())
      if (!read_.count(entry.first))
        unread.insert(entry.first);
    if (unread.empty())
      return Status::ok();
    return makeStatus(StatusCode::kInvalidArgument,
                      "scheduler %s does not take param '%s'",
                      typeName().c_str(), unread.begin()->c_str());
  }

  Status bad(const char *name, const char *what, double value) const {
    return makeStatus(StatusCode::kInvalidArgument,
                      "scheduler %s param '%s' %s, got %.17g",
                      typeName().c_str(), name, what, value);
  }

private:
  std::string typeName() const {
    return scheduler_.type().empty() ? std::string("\"\" (constant lr)")
                                     : scheduler_.type();
  }

  const plan::Scheduler &scheduler_;
  std::set<std::string> read_;
};
} // namespace detail

using detail::ParamReader;

namespace {
/// torch.optim.lr_scheduler's classes by name.
std::optional<LrSchedule::Kind> torchKind(const std::string &type) {
  using Kind = LrSchedule::Kind;
  static const std::pair<const char *, Kind> kKinds[] = {
      {"StepLR", Kind::kStepLR},
      {"MultiStepLR", Kind::kMultiStepLR},
      {"ExponentialLR", Kind::kExponentialLR},
      {"ConstantLR", Kind::kConstantLR},
      {"LinearLR", Kind::kLinearLR},
      {"PolynomialLR", Kind::kPolynomialLR},
      {"CosineAnnealingLR", Kind::kCosineAnnealingLR},
      {"CosineAnnealingWarmRestarts", Kind::kCosineAnnealingWarmRestarts},
      {"OneCycleLR", Kind::kOneCycleLR}};
  for (const auto &[name, kind] : kKinds)
    if (type == name)
      return kind;
  return std::nullopt;
}
} // namespace

Status LrSchedule::readTorchScheduler(const plan::Scheduler &scheduler, ParamReader &params,
                                      LrSchedule &schedule) {
  // torch needs 'initial_lr' in the param groups to start elsewhere, and
  // verbose only printed the lr.
  int64_t lastEpoch;
  ZCC_RETURN_IF_FAILED(params.integer("last_epoch", -1, -1, lastEpoch));
  if (lastEpoch != -1)
    return params.bad("last_epoch", "must be -1 (torch builds the scheduler there)",
                      static_cast<double>(lastEpoch));
  bool verbose;
  ZCC_RETURN_IF_FAILED(params.boolean("verbose", false, verbose));
  switch (schedule.kind_) {
  case Kind::kStepLR: {
    double stepSize;
    ZCC_RETURN_IF_FAILED(params.required("step_size", stepSize));
    ZCC_RETURN_IF_FAILED(params.toInteger("step_size", stepSize, 1, schedule.stepSize_));
    ZCC_RETURN_IF_FAILED(params.nonNegative("gamma", 0.1, schedule.gamma_));
    break;
  }
  case Kind::kMultiStepLR:
    if (scheduler.milestones_size() == 0)
      return makeStatus(StatusCode::kInvalidArgument, "scheduler MultiStepLR needs param "
                                                      "'milestones'");
    schedule.milestones_.assign(scheduler.milestones().begin(), scheduler.milestones().end());
    ZCC_RETURN_IF_FAILED(params.nonNegative("gamma", 0.1, schedule.gamma_));
    break;
  case Kind::kExponentialLR:
    ZCC_RETURN_IF_FAILED(params.required("gamma", schedule.gamma_));
    if (schedule.gamma_ < 0)
      return params.bad("gamma", "must not be negative", schedule.gamma_);
    break;
  case Kind::kConstantLR:
  case Kind::kLinearLR: {
    // torch: "... factor expected to be between 0 and 1" (ValueError).
    auto factor = [&](const char *name, double fallback, bool zeroAllowed, double &out) {
      ZCC_RETURN_IF_FAILED(params.number(name, fallback, out));
      if (out > 1 || out < 0 || (out == 0 && !zeroAllowed))
        return params.bad(name, zeroAllowed ? "must be in [0, 1]" : "must be in (0, 1]", out);
      return Status::ok();
    };
    if (schedule.kind_ == Kind::kConstantLR) {
      ZCC_RETURN_IF_FAILED(factor("factor", 1.0 / 3, false, schedule.factor_));
    } else {
      ZCC_RETURN_IF_FAILED(factor("start_factor", 1.0 / 3, false, schedule.startFactor_));
      ZCC_RETURN_IF_FAILED(factor("end_factor", 1.0, true, schedule.endFactor_));
    }
    ZCC_RETURN_IF_FAILED(params.integer("total_iters", 5, 0, schedule.totalIters_));
    break;
  }
  case Kind::kPolynomialLR:
    ZCC_RETURN_IF_FAILED(params.integer("total_iters", 5, 0, schedule.totalIters_));
    ZCC_RETURN_IF_FAILED(params.number("power", 1.0, schedule.power_));
    break;
  case Kind::kCosineAnnealingWarmRestarts: {
    double t0;
    ZCC_RETURN_IF_FAILED(params.required("T_0", t0));
    ZCC_RETURN_IF_FAILED(params.toInteger("T_0", t0, 1, schedule.t0_));
    ZCC_RETURN_IF_FAILED(params.integer("T_mult", 1, 1, schedule.tMult_));
    ZCC_RETURN_IF_FAILED(params.number("eta_min", 0.0, schedule.etaMin_));
    break;
  }
  case Kind::kOneCycleLR: {
    // torch's __init__: the group's initial_lr, max_lr and min_lr, and the
    // phases' end steps (floats) and bounds.
    double maxLr, total, pctStart, divFactor, finalDivFactor, baseMomentum, maxMomentum,
        unused;
    bool threePhase;
    ZCC_RETURN_IF_FAILED(params.required("max_lr", maxLr));
    ZCC_RETURN_IF_FAILED(params.required("total_steps", total));
    ZCC_RETURN_IF_FAILED(params.toInteger("total_steps", total, 1, schedule.oneCycleTotal_));
    // The compiler derived total_steps from them.
    ZCC_RETURN_IF_FAILED(params.number("epochs", 0, unused));
    ZCC_RETURN_IF_FAILED(params.number("steps_per_epoch", 0, unused));
    ZCC_RETURN_IF_FAILED(params.number("pct_start", 0.3, pctStart));
    if (pctStart < 0 || pctStart > 1)
      return params.bad("pct_start", "must be in [0, 1]", pctStart);
    ZCC_RETURN_IF_FAILED(params.boolean("cycle_momentum", true, schedule.cycleMomentum_));
    ZCC_RETURN_IF_FAILED(params.number("base_momentum", 0.85, baseMomentum));
    ZCC_RETURN_IF_FAILED(params.number("max_momentum", 0.95, maxMomentum));
    ZCC_RETURN_IF_FAILED(params.number("div_factor", 25.0, divFactor));
    ZCC_RETURN_IF_FAILED(params.number("final_div_factor", 1e4, finalDivFactor));
    ZCC_RETURN_IF_FAILED(params.boolean("three_phase", false, threePhase));
    const std::string &strategy = scheduler.anneal_strategy();
    if (!strategy.empty() && strategy != "cos" && strategy != "linear")
      return makeStatus(StatusCode::kInvalidArgument,
                        "scheduler OneCycleLR param 'anneal_strategy' must be 'cos' or "
                        "'linear', got '%s'",
                        strategy.c_str());
    schedule.cosineAnneal_ = strategy != "linear";
    double initialLr = maxLr / divFactor;
    double minLr = initialLr / finalDivFactor;
    double steps = static_cast<double>(schedule.oneCycleTotal_);
    if (threePhase)
      schedule.phases_ = {
          {pctStart * steps - 1, initialLr, maxLr, maxMomentum, baseMomentum},
          {2 * pctStart * steps - 2, maxLr, initialLr, baseMomentum, maxMomentum},
          {steps - 1, initialLr, minLr, maxMomentum, maxMomentum}};
    else
      schedule.phases_ = {{pctStart * steps - 1, initialLr, maxLr, maxMomentum, baseMomentum},
                          {steps - 1, maxLr, minLr, baseMomentum, maxMomentum}};
    // A phase that ends where it starts divides by zero in get_lr.
    double start = 0;
    for (const Phase &phase : schedule.phases_) {
      if (phase.endStep == start)
        return makeStatus(StatusCode::kInvalidArgument,
                          "scheduler OneCycleLR: a phase of total_steps %lld and pct_start "
                          "%g ends at step %g, where it starts (torch divides by zero); "
                          "change pct_start or total_steps",
                          static_cast<long long>(schedule.oneCycleTotal_), pctStart, start);
      start = phase.endStep;
    }
    break;
  }
  case Kind::kCosineAnnealingLR: {
    double tMax;
    ZCC_RETURN_IF_FAILED(params.required("T_max", tMax));
    // T_max = 0 divides by zero in get_lr.
    ZCC_RETURN_IF_FAILED(params.toInteger("T_max", tMax, 1, schedule.tMax_));
    ZCC_RETURN_IF_FAILED(params.number("eta_min", 0.0, schedule.etaMin_));
    break;
  }
  default:
    break;
  }
  return Status::ok();
}

StatusOr<LrSchedule> LrSchedule::create(const plan::Scheduler &scheduler,
                                        double baseLr, double baseBeta1) {
  if (!std::isfinite(baseLr) || !std::isfinite(baseBeta1))
    return makeStatus(StatusCode::kInvalidArgument,
                      "the optimizer's lr (%g) and beta1 (%g) must be finite",
                      baseLr, baseBeta1);
  LrSchedule schedule;
  schedule.baseLr_ = baseLr;
  schedule.baseBeta1_ = baseBeta1;
  const std::string &type = scheduler.type();
  ParamReader params(scheduler);

  const bool takesWarmupType =
      type == "WarmupLR" || type == "WarmupDecayLR" || type == "WarmupCosineLR";
  if (takesWarmupType) {
    // The compiler already replaced an unknown warmup_type by DeepSpeed's
    // fallback, "log"; anything else here is a plan the compiler did not
    // write.
    const std::string &warmupType = scheduler.warmup_type();
    if (warmupType != "" && warmupType != "log" && warmupType != "linear")
      return makeStatus(StatusCode::kInvalidArgument,
                        "scheduler %s param 'warmup_type' must be 'log' or "
                        "'linear', got '%s'",
                        type.c_str(), warmupType.c_str());
    schedule.linearWarmup_ = warmupType == "linear";
  } else if (!scheduler.warmup_type().empty()) {
    return makeStatus(StatusCode::kInvalidArgument,
                      "scheduler %s does not take param 'warmup_type'",
                      type.empty() ? "\"\" (constant lr)" : type.c_str());
  }

  if (type.empty()) {
    schedule.kind_ = Kind::kConstant;
  } else if (takesWarmupType) {
    // WarmupLR.__init__ raises ValueError("warmup_num_steps must be a
    // positive integer") before clamping it to at least 2.
    int64_t warmupSteps;
    ZCC_RETURN_IF_ERROR(
        params.integer("warmup_num_steps", 1000, 1, warmupSteps),
        "while reading scheduler %s", type.c_str());
    schedule.warmupSteps_ = std::max<int64_t>(2, warmupSteps);
    schedule.inverseLogWarmup_ =
        1.0 / std::log(static_cast<double>(schedule.warmupSteps_));
    if (type != "WarmupLR") {
      double total;
      ZCC_RETURN_IF_ERROR(params.required("total_num_steps", total),
                          "while reading scheduler %s", type.c_str());
      // DeepSpeed does not check it; the compiler asks for at least 1.
      ZCC_RETURN_IF_ERROR(
          params.toInteger("total_num_steps", total, 0, schedule.totalSteps_),
          "while reading scheduler %s", type.c_str());
    }
    if (type == "WarmupCosineLR") {
      schedule.kind_ = Kind::kWarmupCosineLR;
      ZCC_RETURN_IF_ERROR(
          params.number("warmup_min_ratio", 0.0, schedule.warmupMinRatio_),
          "while reading scheduler %s", type.c_str());
      ZCC_RETURN_IF_ERROR(
          params.number("cos_min_ratio", 0.0001, schedule.cosMinRatio_),
          "while reading scheduler %s", type.c_str());
    } else {
      schedule.kind_ =
          type == "WarmupLR" ? Kind::kWarmupLR : Kind::kWarmupDecayLR;
      // WarmupLR's warmup_max_lr defaults to None, meaning the optimizer's
      // lr (#7360); WarmupDecayLR's signature still defaults it to 0.001.
      ZCC_RETURN_IF_ERROR(params.number("warmup_min_lr", 0.0, schedule.minLr_),
                          "while reading scheduler %s", type.c_str());
      ZCC_RETURN_IF_ERROR(params.number("warmup_max_lr",
                                        type == "WarmupLR" ? baseLr : 0.001,
                                        schedule.maxLr_),
                          "while reading scheduler %s", type.c_str());
    }
  } else if (type == "OneCycle") {
    schedule.kind_ = Kind::kOneCycle;
    ZCC_RETURN_IF_ERROR(params.required("cycle_min_lr", schedule.cycleMinLr_),
                        "while reading scheduler OneCycle");
    ZCC_RETURN_IF_ERROR(params.required("cycle_max_lr", schedule.cycleMaxLr_),
                        "while reading scheduler OneCycle");
    // A negative rate could make the decay factor 0 and divide by it.
    ZCC_RETURN_IF_ERROR(
        params.nonNegative("decay_lr_rate", 0.0, schedule.decayLrRate_),
        "while reading scheduler OneCycle");
    // Step sizes of 0 divide by zero in _get_scale_factor.
    int64_t first, second, decayStepSize;
    ZCC_RETURN_IF_ERROR(params.integer("cycle_first_step_size", 2000, 1, first),
                        "while reading scheduler OneCycle");
    ZCC_RETURN_IF_ERROR(
        params.integer("cycle_second_step_size", first, 1, second),
        "while reading scheduler OneCycle");
    ZCC_RETURN_IF_ERROR(params.integer("cycle_first_stair_count", 0, 0,
                                       schedule.firstStairCount_),
                        "while reading scheduler OneCycle");
    ZCC_RETURN_IF_ERROR(params.integer("cycle_second_stair_count",
                                       schedule.firstStairCount_, 0,
                                       schedule.secondStairCount_),
                        "while reading scheduler OneCycle");
    ZCC_RETURN_IF_ERROR(params.integer("decay_step_size", 0, 0, decayStepSize),
                        "while reading scheduler OneCycle");
    ZCC_RETURN_IF_ERROR(
        params.boolean("cycle_momentum", true, schedule.cycleMomentum_),
        "while reading scheduler OneCycle");
    ZCC_RETURN_IF_ERROR(
        params.number("cycle_min_mom", 0.8, schedule.cycleMinMom_),
        "while reading scheduler OneCycle");
    ZCC_RETURN_IF_ERROR(
        params.number("cycle_max_mom", 0.9, schedule.cycleMaxMom_),
        "while reading scheduler OneCycle");
    ZCC_RETURN_IF_ERROR(
        params.nonNegative("decay_mom_rate", 0.0, schedule.decayMomRate_),
        "while reading scheduler OneCycle");
    // _initialize_cycle: the sizes become floats.
    schedule.firstStepSize_ = static_cast<double>(first);
    schedule.secondStepSize_ = static_cast<double>(second);
    schedule.totalSize_ = schedule.firstStepSize_ + schedule.secondStepSize_;
    schedule.stepRatio_ = schedule.firstStepSize_ / schedule.totalSize_;
    schedule.decayStepSize_ = static_cast<double>(decayStepSize);
    // math.isclose(x, 0) holds only for x == 0. Decay is skipped without a
    // decay step size, and for the lr (momentum) without its rate.
    schedule.skipLrDecay_ = decayStepSize == 0 || schedule.decayLrRate_ == 0.0;
    schedule.skipMomDecay_ =
        decayStepSize == 0 || schedule.decayMomRate_ == 0.0;
  } else if (type == "LRRangeTest") {
    schedule.kind_ = Kind::kLRRangeTest;
    ZCC_RETURN_IF_ERROR(
        params.number("lr_range_test_min_lr", 1e-3, schedule.rangeMinLr_),
        "while reading scheduler LRRangeTest");
    // _continuous_interval divides by the step size.
    ZCC_RETURN_IF_ERROR(
        params.number("lr_range_test_step_size", 2000, schedule.rangeStepSize_),
        "while reading scheduler LRRangeTest");
    if (!(schedule.rangeStepSize_ > 0))
      return params.bad("lr_range_test_step_size", "must be positive",
                        schedule.rangeStepSize_);
    ZCC_RETURN_IF_ERROR(
        params.number("lr_range_test_step_rate", 1.0, schedule.rangeStepRate_),
        "while reading scheduler LRRangeTest");
    ZCC_RETURN_IF_ERROR(params.boolean("lr_range_test_staircase", false,
                                       schedule.rangeStaircase_),
                        "while reading scheduler LRRangeTest");
  } else if (std::optional<Kind> kind = torchKind(type)) {
    schedule.kind_ = *kind;
    ZCC_RETURN_IF_ERROR(readTorchScheduler(scheduler, params, schedule),
                        "while reading scheduler %s", type.c_str());
  } else {
    return makeStatus(StatusCode::kInvalidArgument,
                      "unknown scheduler type '%s'; zrun knows WarmupLR, "
                      "WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest, "
                      "torch's StepLR, MultiStepLR, ExponentialLR, ConstantLR, "
                      "LinearLR, PolynomialLR, CosineAnnealingLR, "
                      "CosineAnnealingWarmRestarts, OneCycleLR and \"\" (constant lr)",
                      type.c_str());
  }
  if (schedule.kind_ != Kind::kOneCycleLR && !scheduler.anneal_strategy().empty())
    return makeStatus(StatusCode::kInvalidArgument,
                      "scheduler %s does not take param 'anneal_strategy'",
                      type.empty() ? "\"\" (constant lr)" : type.c_str());
  if (schedule.kind_ != Kind::kMultiStepLR && scheduler.milestones_size() > 0)
    return makeStatus(StatusCode::kInvalidArgument,
                      "scheduler %s does not take param 'milestones'",
                      type.empty() ? "\"\" (constant lr)" : type.c_str());

  if (!type.empty() && !schedule.isTorch())
    ZCC_RETURN_IF_ERROR(params.integer("last_batch_iteration", -1, -1,
                                       schedule.firstIteration_),
                        "while reading scheduler %s", type.c_str());
  ZCC_RETURN_IF_ERROR(params.checkAllRead(), "while reading the scheduler");
  return schedule;
}

// WarmupLR._get_gamma below warmup; WarmupCosineLR.get_lr_ratio uses the same
// expressions before mixing in warmup_min_ratio.
double LrSchedule::warmupGamma(int64_t t) const {
  if (linearWarmup_)
    return static_cast<double>(t) / static_cast<double>(warmupSteps_);
  return inverseLogWarmup_ * std::log(static_cast<double>(t + 1));
}

double LrSchedule::cosineRatio(int64_t t) const {
  if (t < warmupSteps_) {
    double ratio = warmupGamma(t);
    double ratioDelta = 1. - warmupMinRatio_;
    return warmupMinRatio_ + ratio * ratioDelta;
  }
  int64_t realLastStep = t - warmupSteps_ + 1;
  int64_t realTotalSteps = std::max<int64_t>(1, totalSteps_ - warmupSteps_);
  double progress = std::min(1.0, static_cast<double>(realLastStep) /
                                      static_cast<double>(realTotalSteps));
  double ratioDelta = 1. - cosMinRatio_;
  double ratio = (1 + std::cos(kPi * progress)) / 2;
  return std::max(0.0, cosMinRatio_ + ratioDelta * ratio);
}

// OneCycle._get_scale_factor.
double LrSchedule::oneCycleScale(int64_t t) const {
  int64_t batchIteration = t + 1;
  double position = static_cast<double>(batchIteration) / totalSize_;
  double cycle = std::floor(1 + position);
  double x = 1. + position - cycle;
  double scale;
  int64_t stairCount;
  if (x <= stepRatio_) {
    scale = x / stepRatio_;
    stairCount = firstStairCount_;
  } else {
    scale = (x - 1) / (stepRatio_ - 1);
    stairCount = secondStairCount_;
  }
  // Stairs are counted from the integer offset into the cycle, not from the
  // float scale, which can land a hair under a stair at the peak.
  if (stairCount > 0) {
    double cycleIteration =
        std::fmod(static_cast<double>(batchIteration), totalSize_);
    double count = static_cast<double>(stairCount);
    double stairPosition =
        cycleIteration <= firstStepSize_
            ? cycleIteration * count / firstStepSize_
            : (totalSize_ - cycleIteration) * count / secondStepSize_;
    scale = std::floor(stairPosition) / count;
  }
  return scale;
}

// OneCycleLR.get_lr (and the momentum it writes) at last_epoch `epoch`.
double LrSchedule::oneCycleLr(int64_t epoch, bool momentum) const {
  const double step = static_cast<double>(epoch);
  double start = 0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase &phase = phases_[i];
    if (step <= phase.endStep || i + 1 == phases_.size()) {
      double pct = (step - start) / (phase.endStep - start);
      double from = momentum ? phase.startMomentum : phase.startLr;
      double to = momentum ? phase.endMomentum : phase.endLr;
      if (!cosineAnneal_)
        return (to - from) * pct + from;
      double cosOut = std::cos(kPi * pct) + 1;
      return to + (from - to) / 2.0 * cosOut;
    }
    start = phase.endStep;
  }
  return baseLr_;
}

double LrSchedule::torchStep(int64_t epoch, double lr) const {
  const double e = static_cast<double>(epoch);
  switch (kind_) {
  case Kind::kOneCycleLR: // not chainable: get_lr is a closed form
    return oneCycleLr(epoch, false);
  case Kind::kStepLR:
    if (epoch == 0 || epoch % stepSize_ != 0)
      return lr;
    return lr * gamma_;
  case Kind::kMultiStepLR: {
    // A milestone listed twice multiplies by gamma twice (a Counter).
    auto count = std::count(milestones_.begin(), milestones_.end(), epoch);
    if (count == 0)
      return lr;
    return lr * std::pow(gamma_, static_cast<double>(count));
  }
  case Kind::kExponentialLR:
    return epoch == 0 ? lr : lr * gamma_;
  case Kind::kConstantLR:
    if (epoch == 0)
      return lr * factor_;
    if (epoch != totalIters_)
      return lr;
    return lr * (1.0 / factor_);
  case Kind::kLinearLR:
    if (epoch == 0)
      return lr * startFactor_;
    if (epoch > totalIters_)
      return lr;
    return lr * (1.0 + (endFactor_ - startFactor_) /
                           (static_cast<double>(totalIters_) * startFactor_ +
                            (e - 1) * (endFactor_ - startFactor_)));
  case Kind::kPolynomialLR: {
    if (epoch == 0 || epoch > totalIters_)
      return lr;
    double total = static_cast<double>(totalIters_);
    double decay = std::pow((1.0 - e / total) / (1.0 - (e - 1) / total), power_);
    return lr * decay;
  }
  case Kind::kCosineAnnealingLR: {
    if (epoch == 0)
      return lr;
    double tMax = static_cast<double>(tMax_);
    // Python's % is a floor modulo: negative before the first trough.
    int64_t period = 2 * tMax_;
    int64_t phase = ((epoch - 1 - tMax_) % period + period) % period;
    if (phase == 0)
      return lr + (baseLr_ - etaMin_) * (1 - std::cos(kPi / tMax)) / 2;
    return (1 + std::cos(kPi * e / tMax)) / (1 + std::cos(kPi * (e - 1) / tMax)) *
               (lr - etaMin_) +
           etaMin_;
  }
  case Kind::kCosineAnnealingWarmRestarts:
    // A closed form of T_cur and T_i (torchLr keeps them).
    return etaMin_ + (baseLr_ - etaMin_) *
                         (1 + std::cos(kPi * static_cast<double>(cachedTCur_) /
                                       static_cast<double>(cachedTI_))) /
                         2;
  default:
    return lr;
  }
}

double LrSchedule::torchLr(int64_t epoch) const {
  if (epoch < cachedEpoch_ || cachedEpoch_ < 0) {
    cachedEpoch_ = 0;
    cachedTCur_ = 0;
    cachedTI_ = t0_;
    cachedLr_ = torchStep(0, baseLr_);
  }
  while (cachedEpoch_ < epoch) {
    ++cachedEpoch_;
    if (kind_ == Kind::kCosineAnnealingWarmRestarts) {
      // step(): T_cur advances, and a restart begins a period T_mult times
      // as long.
      cachedTCur_ += 1;
      if (cachedTCur_ >= cachedTI_) {
        cachedTCur_ -= cachedTI_;
        cachedTI_ *= tMult_;
      }
    }
    cachedLr_ = torchStep(cachedEpoch_, cachedLr_);
  }
  return cachedLr_;
}

double LrSchedule::lr(int64_t t) const {
  t = std::max<int64_t>(t, -1);
  switch (kind_) {
  case Kind::kConstant:
    return baseLr_;
  case Kind::kWarmupLR:
  case Kind::kWarmupDecayLR: {
    // get_lr() returns the minimum before the first step.
    if (t < 0)
      return minLr_;
    double gamma;
    if (t < warmupSteps_)
      gamma = warmupGamma(t);
    else if (kind_ == Kind::kWarmupLR)
      gamma = 1.0;
    else
      gamma = std::max(0.0, static_cast<double>(totalSteps_ - t) /
                                std::max(1.0, static_cast<double>(
                                                  totalSteps_ - warmupSteps_)));
    double delta = maxLr_ - minLr_;
    return minLr_ + (delta * gamma);
  }
  case Kind::kWarmupCosineLR:
    if (t < 0)
      return 0.0;
    return baseLr_ * cosineRatio(t);
  case Kind::kOneCycle: {
    if (static_cast<double>(t) < totalSize_) {
      double baseHeight = (cycleMaxLr_ - cycleMinLr_) * oneCycleScale(t);
      return cycleMinLr_ + baseHeight;
    }
    if (skipLrDecay_)
      return cycleMinLr_;
    double decayIteration = static_cast<double>(t) - totalSize_ + 1;
    double decayInterval = decayIteration / decayStepSize_;
    double decayFactor = (1 + decayLrRate_ * decayInterval);
    return cycleMinLr_ / decayFactor;
  }
  case Kind::kLRRangeTest: {
    double interval = static_cast<double>(t + 1) / rangeStepSize_;
    if (rangeStaircase_)
      interval = std::floor(interval);
    return rangeMinLr_ * (1 + rangeStepRate_ * interval);
  }
  default: // torch's schedulers: last_epoch is t + 1.
    return torchLr(t + 1);
  }
}

double LrSchedule::beta1(int64_t t) const {
  // OneCycleLR writes the momentum of last_epoch t + 1 into betas[0].
  if (kind_ == Kind::kOneCycleLR && cycleMomentum_)
    return oneCycleLr(std::max<int64_t>(t, -1) + 1, true);
  if (kind_ != Kind::kOneCycle || !cycleMomentum_)
    return baseBeta1_;
  // _initialize_momentum writes the lower bound, not the formula at -1.
  if (t < 0)
    return cycleMinMom_;
  if (static_cast<double>(t) < totalSize_) {
    double baseHeight = (cycleMaxMom_ - cycleMinMom_) * oneCycleScale(t);
    return cycleMaxMom_ - baseHeight;
  }
  if (skipMomDecay_)
    return cycleMaxMom_;
  double decayIteration = static_cast<double>(t) - totalSize_ + 1;
  double decayInterval = decayIteration / decayStepSize_;
  double decayFactor = (1 + decayMomRate_ * decayInterval);
  return cycleMaxMom_ * decayFactor;
}

std::optional<int64_t> LrSchedule::iterationForStep(int64_t k) const {
  k = std::max<int64_t>(k, 1);
  if (firstIteration_ == -1)
    return k - 2;
  if (k == 1)
    return std::nullopt;
  return firstIteration_ + k - 1;
}

Status LrSchedule::checkStep(int64_t k) const {
  if (kind_ != Kind::kOneCycleLR)
    return Status::ok();
  std::optional<int64_t> t = iterationForStep(k);
  int64_t epoch = t ? *t + 1 : 0;
  if (epoch <= oneCycleTotal_)
    return Status::ok();
  return makeStatus(StatusCode::kOutOfRange,
                    "optimizer step %lld: OneCycleLR's total_steps (%lld) ran out after step "
                    "%lld (torch raises ValueError \"Tried to step %lld times\"); raise "
                    "total_steps (or epochs * steps_per_epoch) to the run's optimizer steps",
                    static_cast<long long>(k), static_cast<long long>(oneCycleTotal_),
                    static_cast<long long>(oneCycleTotal_ + 1),
                    static_cast<long long>(oneCycleTotal_ + 1));
}

double LrSchedule::lrForStep(int64_t k) const {
  std::optional<int64_t> t = iterationForStep(k);
  return t ? lr(*t) : baseLr_;
}

double LrSchedule::beta1ForStep(int64_t k) const {
  std::optional<int64_t> t = iterationForStep(k);
  return t ? beta1(*t) : baseBeta1_;
}

double LrSchedule::beta2ForStep(int64_t k, double baseBeta2) const {
  std::optional<int64_t> t = iterationForStep(k);
  return t && kind_ == Kind::kOneCycle && cycleMomentum_ ? 0.99 : baseBeta2;
}

} // namespace zcc
