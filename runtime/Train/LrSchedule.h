//===- LrSchedule.h - DeepSpeed's learning-rate schedules -------*- C++ -*-===//
//
// The learning rate (and, for OneCycle, Adam's betas) that each optimizer step
// uses, computed the way DeepSpeed's deepspeed/runtime/lr_schedules.py does,
// operation for operation, so that a zcc run and a DeepSpeed run of the same
// config log the same lr sequence to the last bit.
//
// DeepSpeed's schedulers are stateful objects; this one is a pure function of
// t, DeepSpeed's `last_batch_iteration`:
//   - lr(t) is the lr the optimizer holds once the scheduler's
//     last_batch_iteration is t. t = -1 is the value the constructor writes
//     into the optimizer (a scheduler built with the default
//     last_batch_iteration = -1), which is not always the formula at -1:
//       WarmupLR, WarmupDecayLR  warmup_min_lr
//       WarmupCosineLR           0 (get_lr() returns 0.0 before the start)
//       OneCycle                 cycle_min_lr, beta1 = cycle_min_mom (the
//                                formula at -1 would give cycle_max_mom)
//       LRRangeTest              lr_range_test_min_lr
//   - The engine steps the scheduler after every optimizer step that was not
//     skipped for an fp16 overflow (engine.py: _take_model_step), so the
//     k-th applied optimizer step (1-based, counting only applied steps)
//     runs with t = k - 2. lrForStep(k) and the other *ForStep helpers say
//     this once for every caller.
//   - A config whose params give last_batch_iteration = L != -1 starts there:
//     the constructor then leaves the optimizer alone (step 1 runs with the
//     optimizer's own lr and betas) and step k > 1 runs with t = L + k - 1.
//
// The plan's Scheduler carries DeepSpeed's param names with double values;
// integers (step counts) must be whole numbers, booleans (cycle_momentum,
// lr_range_test_staircase) are 0 or 1. Missing params take DeepSpeed's
// defaults; WarmupLR's warmup_max_lr falls back to the optimizer's lr.
// create() rejects what DeepSpeed would reject or divide by zero on, and any
// param the scheduler does not take, naming the param.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_TRAIN_LRSCHEDULE_H
#define ZCC_RUNTIME_TRAIN_LRSCHEDULE_H

#include "plan.pb.h"
#include "runtime/Support/Status.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace zcc {

namespace detail {
class ParamReader;
} // namespace detail

class LrSchedule {
public:
  enum class Kind {
    kConstant, // type "": the optimizer's lr throughout
    kWarmupLR,
    kWarmupDecayLR,
    kWarmupCosineLR,
    kOneCycle,
    kLRRangeTest,
    // torch.optim.lr_scheduler's classes, which DeepSpeed builds for a name
    // it does not define: their chainable get_lr(), step by step from the
    // optimizer's lr, with last_epoch = t + 1 (torch's constructor steps
    // once, so the first optimizer step runs at last_epoch 0).
    kStepLR,
    kMultiStepLR,
    kExponentialLR,
    kConstantLR,
    kLinearLR,
    kPolynomialLR,
    kCosineAnnealingLR,
    kCosineAnnealingWarmRestarts,
    kOneCycleLR,
  };

  /// The schedule `scheduler` describes for an optimizer whose configured lr
  /// and beta1 (Adam's first beta, the "momentum" OneCycle cycles) are
  /// `baseLr` and `baseBeta1`.
  static StatusOr<LrSchedule> create(const plan::Scheduler &scheduler,
                                     double baseLr, double baseBeta1);

  Kind kind() const { return kind_; }

  /// The lr once last_batch_iteration is `t` (t >= -1; smaller t reads as
  /// -1).
  double lr(int64_t t) const;

  /// Adam's beta1 once last_batch_iteration is `t`: OneCycle (and torch's
  /// OneCycleLR) with cycle_momentum cycles it inversely to the lr;
  /// otherwise baseBeta1.
  /// DeepSpeed turns cycle_momentum off for an optimizer without betas
  /// (torch SGD), whose momentum is therefore never cycled: for "sgd" the
  /// caller ignores this value.
  double beta1(int64_t t) const;

  /// True when OneCycle cycles momentum. It then also writes betas =
  /// (momentum, 0.99) into the optimizer: DeepSpeed replaces Adam's beta2
  /// with 0.99 for as long as it drives the betas.
  bool cyclesMomentum() const { return cycleMomentum_; }

  /// last_batch_iteration at construction (-1 unless the config sets it).
  int64_t firstIteration() const { return firstIteration_; }

  /// The t that the k-th applied optimizer step (k >= 1) runs with, or
  /// nothing when that step runs with the optimizer's own settings (k = 1
  /// after a construction at L != -1).
  std::optional<int64_t> iterationForStep(int64_t k) const;

  /// Whether the k-th applied optimizer step may run: torch's OneCycleLR
  /// raises ValueError once it is stepped past total_steps, which
  /// DeepSpeed does after step total_steps + 1.
  Status checkStep(int64_t k) const;

  /// The lr, beta1 and beta2 of the k-th applied optimizer step (k >= 1).
  double lrForStep(int64_t k) const;
  double beta1ForStep(int64_t k) const;
  double beta2ForStep(int64_t k, double baseBeta2) const;

private:
  LrSchedule() = default;

  /// Reads the params of a torch scheduler, whose kind `schedule` has.
  static Status readTorchScheduler(const plan::Scheduler &scheduler, detail::ParamReader &params,
                                   LrSchedule &schedule);
  bool isTorch() const { return kind_ >= Kind::kStepLR; }
  /// torch's lr at last_epoch `epoch` (>= 0): get_lr() applied from epoch 0
  /// on, as torch does, so that the doubles are torch's; sequential calls
  /// continue from the last one.
  double torchLr(int64_t epoch) const;
  /// torch's get_lr() at last_epoch `epoch` for a group whose lr is `lr`.
  double torchStep(int64_t epoch, double lr) const;
  double warmupGamma(int64_t t) const;
  double cosineRatio(int64_t t) const;
  double oneCycleScale(int64_t t) const;
  /// OneCycleLR's lr (momentum: false) or momentum at last_epoch `epoch`.
  double oneCycleLr(int64_t epoch, bool momentum) const;

  Kind kind_ = Kind::kConstant;
  double baseLr_ = 0;
  double baseBeta1_ = 0;
  int64_t firstIteration_ = -1;

  // WarmupLR, WarmupDecayLR, WarmupCosineLR.
  double minLr_ = 0, maxLr_ = 0;
  int64_t warmupSteps_ = 2; // max(2, warmup_num_steps)
  bool linearWarmup_ = false;
  double inverseLogWarmup_ = 0;
  int64_t totalSteps_ = 0;
  double warmupMinRatio_ = 0, cosMinRatio_ = 0;

  // OneCycle.
  double cycleMinLr_ = 0, cycleMaxLr_ = 0, decayLrRate_ = 0;
  double firstStepSize_ = 0, secondStepSize_ = 0, totalSize_ = 0,
         stepRatio_ = 0;
  int64_t firstStairCount_ = 0, secondStairCount_ = 0;
  double decayStepSize_ = 0;
  bool cycleMomentum_ = false;
  double cycleMinMom_ = 0, cycleMaxMom_ = 0, decayMomRate_ = 0;
  bool skipLrDecay_ = true, skipMomDecay_ = true;

  // LRRangeTest.
  double rangeMinLr_ = 0, rangeStepSize_ = 0, rangeStepRate_ = 0;
  bool rangeStaircase_ = false;

  // torch's schedulers.
  double gamma_ = 0.1;
  int64_t stepSize_ = 1;
  std::vector<int64_t> milestones_;
  double factor_ = 0, startFactor_ = 0, endFactor_ = 0, power_ = 1, etaMin_ = 0;
  int64_t totalIters_ = 0, tMax_ = 1;
  /// CosineAnnealingWarmRestarts: T_0 and T_mult, and the cached epoch's
  /// T_cur and T_i (its lr is a closed form of them).
  int64_t t0_ = 1, tMult_ = 1;
  /// OneCycleLR: its phases (each ends at a step, annealing the lr and the
  /// momentum from one value to another) and its total_steps.
  struct Phase {
    double endStep, startLr, endLr, startMomentum, endMomentum;
  };
  std::vector<Phase> phases_;
  int64_t oneCycleTotal_ = 0;
  bool cosineAnneal_ = true;
  mutable int64_t cachedTCur_ = 0, cachedTI_ = 1;
  /// The last epoch torchLr computed and its lr (-1: none yet). Each rank
  /// owns its schedule, so no lock.
  mutable int64_t cachedEpoch_ = -1;
  mutable double cachedLr_ = 0;
};

} // namespace zcc

#endif // ZCC_RUNTIME_TRAIN_LRSCHEDULE_H
