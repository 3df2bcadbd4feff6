//===- TrainTest.cpp - The host side of the training loop -----------------===//
//
// zrun's training loop must give the numbers DeepSpeed gives for the same
// config: the lr of every step (each scheduler, at t = -1 and across every
// phase boundary), the fp16 loss-scale sequence for any overflow pattern, and
// the samples each rank reads. Expected values are written here from the
// formulas (DEEPSPEED.md, DeepSpeed's lr_schedules.py and loss_scaler.py),
// not from the code under test; a few sequences are DeepSpeed's own numbers,
// computed with Python from lr_schedules.py's expressions, and must match to
// the last bit.
//
//===----------------------------------------------------------------------===//

#include "PlanTestUtil.h"

#include "runtime/Data/Npy.h"
#include "runtime/Train/LossScaler.h"
#include "runtime/Train/LrSchedule.h"
#include "runtime/Train/TokenData.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace zcc {
namespace {

using test::TempDir;
using test::writeBytes;

constexpr double kBaseLr = 0.003;
constexpr double kBaseBeta1 = 0.85;

plan::Scheduler scheduler(const std::string &type,
                          const std::map<std::string, double> &params,
                          const std::string &warmupType = "") {
  plan::Scheduler result;
  result.set_type(type);
  result.set_warmup_type(warmupType);
  for (const auto &[name, value] : params)
    (*result.mutable_params())[name] = value;
  return result;
}

LrSchedule makeSchedule(const plan::Scheduler &config) {
  StatusOr<LrSchedule> schedule =
      LrSchedule::create(config, kBaseLr, kBaseBeta1);
  EXPECT_TRUE(schedule.isOk()) << schedule.status().toString();
  return std::move(schedule).value();
}

std::string createError(const plan::Scheduler &config) {
  StatusOr<LrSchedule> schedule =
      LrSchedule::create(config, kBaseLr, kBaseBeta1);
  EXPECT_FALSE(schedule.isOk());
  return schedule.isOk() ? std::string() : schedule.status().message();
}

//===----------------------------------------------------------------------===//
// Learning-rate schedules
//===----------------------------------------------------------------------===//

// Type "" is the optimizer's own lr and beta1 at every step.
TEST(LrScheduleTest, EmptyTypeIsConstant) {
  LrSchedule schedule = makeSchedule(scheduler("", {}));
  for (int64_t t = -1; t < 5; ++t) {
    EXPECT_EQ(schedule.lr(t), kBaseLr);
    EXPECT_EQ(schedule.beta1(t), kBaseBeta1);
  }
  EXPECT_EQ(schedule.lrForStep(1), kBaseLr);
  EXPECT_EQ(schedule.beta2ForStep(1, 0.999), 0.999);
}

// WarmupLR, log: lr = min + (max-min) ln(t+1)/ln(W) below W, max from W on;
// min before the first step.
TEST(LrScheduleTest, WarmupLRLog) {
  const double minLr = 1e-4, maxLr = 1e-2;
  const int64_t warmup = 5;
  LrSchedule schedule = makeSchedule(scheduler("WarmupLR",
                                               {{"warmup_min_lr", minLr},
                                                {"warmup_max_lr", maxLr},
                                                {"warmup_num_steps", warmup}},
                                               "log"));
  EXPECT_EQ(schedule.lr(-1), minLr);
  EXPECT_EQ(schedule.lr(0), minLr);
  for (int64_t t = 1; t < warmup; ++t)
    EXPECT_DOUBLE_EQ(schedule.lr(t),
                     minLr + (maxLr - minLr) * std::log(t + 1.0) /
                                 std::log(static_cast<double>(warmup)))
        << "t=" << t;
  for (int64_t t = warmup; t < 12; ++t)
    EXPECT_DOUBLE_EQ(schedule.lr(t), maxLr) << "t=" << t;
  // The log warmup reaches the maximum at t = W - 1 (ln W / ln W) and
  // rises strictly until then.
  for (int64_t t = 0; t < warmup - 1; ++t)
    EXPECT_LT(schedule.lr(t), schedule.lr(t + 1)) << "t=" << t;
  EXPECT_DOUBLE_EQ(schedule.lr(warmup - 1), maxLr);
  // DeepSpeed's own sequence of the lr of optimizer steps 1..7.
  const double deepspeed[] = {0.0001,
                              0.0001,
                              0.004363697924926592,
                              0.006857801325411256,
                              0.008627395849853182,
                              0.01,
                              0.01};
  for (int k = 1; k <= 7; ++k)
    EXPECT_EQ(schedule.lrForStep(k), deepspeed[k - 1]) << "step " << k;
  EXPECT_EQ(schedule.beta1ForStep(3), kBaseBeta1);
}

// WarmupLR, linear: gamma = t/W; warmup_max_lr falls back to the
// optimizer's lr.
TEST(LrScheduleTest, WarmupLRLinearFallsBackToOptimizerLr) {
  LrSchedule schedule =
      makeSchedule(scheduler("WarmupLR", {{"warmup_num_steps", 4}}, "linear"));
  const double expected[] = {
      0.0,     0.0,     kBaseLr / 4, kBaseLr / 2, kBaseLr * 3 / 4,
      kBaseLr, kBaseLr, kBaseLr};
  for (int64_t t = -1; t <= 6; ++t)
    EXPECT_DOUBLE_EQ(schedule.lr(t), expected[t + 1]) << "t=" << t;
}

// warmup_num_steps = 1 is raised to W = 2: t = 0 is still the minimum and
// t = 1 reaches the maximum (ln 2 / ln 2).
TEST(LrScheduleTest, WarmupLRClampsWarmupToTwoSteps) {
  LrSchedule schedule = makeSchedule(scheduler("WarmupLR",
                                               {{"warmup_min_lr", 0.001},
                                                {"warmup_max_lr", 0.005},
                                                {"warmup_num_steps", 1}},
                                               "log"));
  EXPECT_EQ(schedule.lr(-1), 0.001);
  EXPECT_EQ(schedule.lr(0), 0.001);
  EXPECT_DOUBLE_EQ(schedule.lr(1), 0.005);
  EXPECT_DOUBLE_EQ(schedule.lr(2), 0.005);
  // Without the clamp, W = 1 would divide by ln(1) = 0.
  EXPECT_TRUE(std::isfinite(schedule.lr(1)));
}

// WarmupDecayLR: the same warmup, then max * (T - t) / (T - W), reaching 0
// at t = T and staying there. warmup_max_lr defaults to 1e-3, not the
// optimizer's lr.
TEST(LrScheduleTest, WarmupDecayLR) {
  const int64_t warmup = 4, total = 10;
  LrSchedule schedule = makeSchedule(scheduler(
      "WarmupDecayLR",
      {{"warmup_num_steps", warmup}, {"total_num_steps", total}}, "linear"));
  const double maxLr = 1e-3;
  EXPECT_EQ(schedule.lr(-1), 0.0);
  for (int64_t t = 0; t < warmup; ++t)
    EXPECT_DOUBLE_EQ(schedule.lr(t), maxLr * t / warmup) << "t=" << t;
  EXPECT_DOUBLE_EQ(schedule.lr(warmup), maxLr);
  for (int64_t t = warmup; t <= total; ++t)
    EXPECT_DOUBLE_EQ(schedule.lr(t),
                     maxLr * static_cast<double>(total - t) / (total - warmup))
        << "t=" << t;
  EXPECT_EQ(schedule.lr(total), 0.0);
  EXPECT_EQ(schedule.lr(total + 1), 0.0);
  EXPECT_EQ(schedule.lr(total + 50), 0.0);
}

// total_num_steps < W: the decay divides by max(1, T - W) = 1 and is already
// 0 past T.
TEST(LrScheduleTest, WarmupDecayLRShorterThanWarmup) {
  LrSchedule schedule = makeSchedule(scheduler("WarmupDecayLR",
                                               {{"warmup_min_lr", 0.0},
                                                {"warmup_max_lr", 0.02},
                                                {"warmup_num_steps", 5},
                                                {"total_num_steps", 3}},
                                               "log"));
  EXPECT_DOUBLE_EQ(schedule.lr(4), 0.02 * std::log(5.0) / std::log(5.0));
  EXPECT_EQ(schedule.lr(5), 0.0);
  EXPECT_EQ(schedule.lr(9), 0.0);
}

// WarmupCosineLR: lr = base * ratio; 0 before the first step; the warmup
// rises from warmup_min_ratio to 1; then the cosine falls to cos_min_ratio
// at t = T - 1 and stays there (the progress is clamped to 1).
TEST(LrScheduleTest, WarmupCosineLR) {
  const int64_t warmup = 3, total = 10;
  const double warmupMin = 0.1, cosMin = 0.01;
  LrSchedule schedule = makeSchedule(scheduler("WarmupCosineLR",
                                               {{"warmup_min_ratio", warmupMin},
                                                {"cos_min_ratio", cosMin},
                                                {"warmup_num_steps", warmup},
                                                {"total_num_steps", total}},
                                               "log"));
  EXPECT_EQ(schedule.lr(-1), 0.0);
  for (int64_t t = 0; t < warmup; ++t) {
    double gamma = std::log(t + 1.0) / std::log(3.0);
    EXPECT_DOUBLE_EQ(schedule.lr(t),
                     kBaseLr * (warmupMin + (1 - warmupMin) * gamma))
        << "t=" << t;
  }
  EXPECT_DOUBLE_EQ(schedule.lr(0), kBaseLr * warmupMin);
  const double pi = std::acos(-1.0);
  for (int64_t t = warmup; t < 20; ++t) {
    double progress = std::min(1.0, (t - warmup + 1.0) / (total - warmup));
    double ratio = cosMin + (1 - cosMin) * (1 + std::cos(pi * progress)) / 2;
    EXPECT_DOUBLE_EQ(schedule.lr(t), kBaseLr * ratio) << "t=" << t;
  }
  EXPECT_DOUBLE_EQ(schedule.lr(total - 1), kBaseLr * cosMin);
  EXPECT_EQ(schedule.lr(total + 5), schedule.lr(total - 1));
  // DeepSpeed's own sequence of the lr of optimizer steps 1..13.
  const double deepspeed[] = {0.0,
                              0.00030000000000000003,
                              0.0020035103346429345,
                              0.003,
                              0.002852938768835092,
                              0.0024408823557602196,
                              0.0018454435869251268,
                              0.0011845564130748734,
                              0.0005891176442397808,
                              0.00017706123116490775,
                              3e-05,
                              3e-05,
                              3e-05};
  for (int k = 1; k <= 13; ++k)
    EXPECT_EQ(schedule.lrForStep(k), deepspeed[k - 1]) << "step " << k;
}

// With total_num_steps <= W there is no decay window: every step after the
// warmup sits at cos_min_ratio.
TEST(LrScheduleTest, WarmupCosineLRWithoutDecayWindow) {
  LrSchedule schedule = makeSchedule(
      scheduler("WarmupCosineLR",
                {{"warmup_num_steps", 5}, {"total_num_steps", 2}}, "linear"));
  EXPECT_DOUBLE_EQ(schedule.lr(4), kBaseLr * 4 / 5);
  for (int64_t t = 5; t < 10; ++t)
    EXPECT_DOUBLE_EQ(schedule.lr(t), kBaseLr * 1e-4) << "t=" << t;
}

// OneCycle, continuous: the lr rises from min to max over the first
// cycle_first_step_size iterations (of t + 1), falls back over the second,
// then decays as min / (1 + rate * (t - S + 1) / decay_step_size). Momentum
// mirrors it between max_mom and min_mom and, past the cycle, grows as
// max_mom * (1 + decay_mom_rate * ...). Construction writes min_mom and
// betas (min_mom, 0.99).
TEST(LrScheduleTest, OneCycleBothPhasesDecayAndMomentum) {
  const double minLr = 0.001, maxLr = 0.01, minMom = 0.8, maxMom = 0.9;
  const int64_t first = 4, second = 6, cycle = first + second;
  LrSchedule schedule =
      makeSchedule(scheduler("OneCycle", {{"cycle_min_lr", minLr},
                                          {"cycle_max_lr", maxLr},
                                          {"cycle_first_step_size", first},
                                          {"cycle_second_step_size", second},
                                          {"decay_lr_rate", 0.5},
                                          {"decay_step_size", 2},
                                          {"decay_mom_rate", 0.1}}));
  ASSERT_TRUE(schedule.cyclesMomentum());
  EXPECT_EQ(schedule.lr(-1), minLr);
  EXPECT_EQ(schedule.beta1(-1), minMom);
  for (int64_t t = 0; t < cycle; ++t) {
    int64_t iteration = t + 1;
    double scale = iteration <= first
                       ? static_cast<double>(iteration) / first
                       : static_cast<double>(cycle - iteration) / second;
    EXPECT_NEAR(schedule.lr(t), minLr + (maxLr - minLr) * scale, 1e-17)
        << "t=" << t;
    EXPECT_NEAR(schedule.beta1(t), maxMom - (maxMom - minMom) * scale, 1e-15)
        << "t=" << t;
  }
  EXPECT_NEAR(schedule.lr(first - 1), maxLr, 1e-17);
  EXPECT_EQ(schedule.lr(cycle - 1), minLr);
  for (int64_t t = cycle; t < cycle + 8; ++t) {
    double interval = (t - cycle + 1) / 2.0;
    EXPECT_DOUBLE_EQ(schedule.lr(t), minLr / (1 + 0.5 * interval)) << "t=" << t;
    EXPECT_DOUBLE_EQ(schedule.beta1(t), maxMom * (1 + 0.1 * interval))
        << "t=" << t;
  }
  // DeepSpeed's own lr and beta1 of optimizer steps 1..16.
  const double deepspeedLr[] = {0.001,
                                0.0032500000000000025,
                                0.0055,
                                0.007750000000000002,
                                0.009999999999999998,
                                0.0085,
                                0.006999999999999999,
                                0.005500000000000001,
                                0.004,
                                0.0025000000000000014,
                                0.001,
                                0.0008,
                                0.0006666666666666666,
                                0.0005714285714285715,
                                0.0005,
                                0.00044444444444444447};
  const double deepspeedBeta1[] = {0.8,
                                   0.875,
                                   0.8500000000000001,
                                   0.8250000000000001,
                                   0.8,
                                   0.8166666666666667,
                                   0.8333333333333334,
                                   0.85,
                                   0.8666666666666667,
                                   0.8833333333333333,
                                   0.9,
                                   0.9450000000000001,
                                   0.9900000000000001,
                                   1.035,
                                   1.08,
                                   1.125};
  for (int k = 1; k <= 16; ++k) {
    EXPECT_EQ(schedule.lrForStep(k), deepspeedLr[k - 1]) << "step " << k;
    EXPECT_EQ(schedule.beta1ForStep(k), deepspeedBeta1[k - 1]) << "step " << k;
    EXPECT_EQ(schedule.beta2ForStep(k, 0.95), 0.99) << "step " << k;
  }
}

// OneCycle with stairs: each half moves in floor(position * count / size)
// steps of 1/count. An asymmetric cycle (3 up, 4 down) reaches the peak
// exactly: the stairs come from the integer offset, not the float scale.
TEST(LrScheduleTest, OneCycleStairs) {
  const double minLr = 0.002, maxLr = 0.009;
  LrSchedule schedule =
      makeSchedule(scheduler("OneCycle", {{"cycle_min_lr", minLr},
                                          {"cycle_max_lr", maxLr},
                                          {"cycle_first_step_size", 3},
                                          {"cycle_second_step_size", 4},
                                          {"cycle_first_stair_count", 3},
                                          {"cycle_second_stair_count", 2}}));
  // Scale of t = -1..6: up 0, 1/3, 2/3, 1; down floor((7-i)*2/4)/2.
  const double scales[] = {0, 1.0 / 3, 2.0 / 3, 1, 0.5, 0.5, 0, 0};
  for (int64_t t = -1; t <= 6; ++t)
    EXPECT_DOUBLE_EQ(schedule.lr(t), minLr + (maxLr - minLr) * scales[t + 1])
        << "t=" << t;
  EXPECT_EQ(schedule.lr(2), maxLr);
  // No decay_step_size: past the cycle lr stays at min, beta1 at max_mom.
  EXPECT_EQ(schedule.lr(7), minLr);
  EXPECT_EQ(schedule.lr(40), minLr);
  EXPECT_EQ(schedule.beta1(40), 0.9);
  // DeepSpeed's own sequence for optimizer steps 1..8.
  const double deepspeedLr[] = {0.002,
                                0.004333333333333333,
                                0.006666666666666666,
                                0.009,
                                0.0055,
                                0.0055,
                                0.002,
                                0.002};
  const double deepspeedBeta1[] = {0.8,
                                   0.8666666666666667,
                                   0.8333333333333334,
                                   0.8,
                                   0.8500000000000001,
                                   0.8500000000000001,
                                   0.9,
                                   0.9};
  for (int k = 1; k <= 8; ++k) {
    EXPECT_EQ(schedule.lrForStep(k), deepspeedLr[k - 1]) << "step " << k;
    EXPECT_EQ(schedule.beta1ForStep(k), deepspeedBeta1[k - 1]) << "step " << k;
  }
}

// cycle_momentum = 0 leaves beta1 and beta2 alone; the second stair count
// defaults to the first.
TEST(LrScheduleTest, OneCycleWithoutMomentum) {
  LrSchedule schedule =
      makeSchedule(scheduler("OneCycle", {{"cycle_min_lr", 0.001},
                                          {"cycle_max_lr", 0.005},
                                          {"cycle_first_step_size", 4},
                                          {"cycle_first_stair_count", 2},
                                          {"cycle_momentum", 0}}));
  EXPECT_FALSE(schedule.cyclesMomentum());
  for (int64_t t = -1; t < 12; ++t)
    EXPECT_EQ(schedule.beta1(t), kBaseBeta1) << "t=" << t;
  EXPECT_EQ(schedule.beta2ForStep(1, 0.95), 0.95);
  // Down half of 4 iterations in 2 stairs: iterations 5..8 give scale
  // floor((8-i)*2/4)/2 = 1/2, 1/2, 0, 0.
  EXPECT_DOUBLE_EQ(schedule.lr(4), 0.003);
  EXPECT_DOUBLE_EQ(schedule.lr(5), 0.003);
  EXPECT_EQ(schedule.lr(6), 0.001);
}

// LRRangeTest: min * (1 + rate * (t+1)/size), or with the staircase
// floor((t+1)/size).
TEST(LrScheduleTest, LRRangeTestContinuousAndStaircase) {
  std::map<std::string, double> params = {{"lr_range_test_min_lr", 0.002},
                                          {"lr_range_test_step_size", 3},
                                          {"lr_range_test_step_rate", 0.5}};
  LrSchedule continuous = makeSchedule(scheduler("LRRangeTest", params));
  params["lr_range_test_staircase"] = 1;
  LrSchedule staircase = makeSchedule(scheduler("LRRangeTest", params));
  for (int64_t t = -1; t < 12; ++t) {
    EXPECT_DOUBLE_EQ(continuous.lr(t), 0.002 * (1 + 0.5 * (t + 1) / 3.0))
        << "t=" << t;
    EXPECT_DOUBLE_EQ(staircase.lr(t), 0.002 * (1 + 0.5 * ((t + 1) / 3)))
        << "t=" << t;
  }
  // The staircase holds for step_size iterations: t = 1 and t = 2..4.
  EXPECT_EQ(staircase.lr(-1), 0.002);
  EXPECT_EQ(staircase.lr(1), 0.002);
  EXPECT_EQ(staircase.lr(2), staircase.lr(4));
  EXPECT_LT(staircase.lr(4), staircase.lr(5));
}

// The engine builds the scheduler at t = -1 and steps it after each applied
// optimizer step, so step k runs with t = k - 2.
TEST(LrScheduleTest, StepKRunsWithIterationKMinusTwo) {
  LrSchedule schedule = makeSchedule(
      scheduler("WarmupLR", {{"warmup_max_lr", 0.01}, {"warmup_num_steps", 6}},
                "linear"));
  EXPECT_EQ(schedule.firstIteration(), -1);
  for (int64_t k = 1; k < 10; ++k) {
    ASSERT_TRUE(schedule.iterationForStep(k).has_value());
    EXPECT_EQ(*schedule.iterationForStep(k), k - 2);
    EXPECT_EQ(schedule.lrForStep(k), schedule.lr(k - 2));
  }
  EXPECT_EQ(schedule.lrForStep(1), 0.0);
  EXPECT_EQ(schedule.lrForStep(2), 0.0);
  EXPECT_DOUBLE_EQ(schedule.lrForStep(3), 0.01 / 6);
}

// last_batch_iteration = L: the constructor leaves the optimizer's lr and
// betas, so step 1 uses them; step k > 1 runs with t = L + k - 1.
TEST(LrScheduleTest, LastBatchIterationResumesTheSchedule) {
  LrSchedule schedule =
      makeSchedule(scheduler("OneCycle", {{"cycle_min_lr", 0.001},
                                          {"cycle_max_lr", 0.005},
                                          {"cycle_first_step_size", 3},
                                          {"last_batch_iteration", 2}}));
  EXPECT_EQ(schedule.firstIteration(), 2);
  EXPECT_FALSE(schedule.iterationForStep(1).has_value());
  EXPECT_EQ(*schedule.iterationForStep(2), 3);
  // DeepSpeed's own sequence for steps 1..5.
  const double deepspeedLr[] = {0.003, 0.003666666666666668,
                                0.0023333333333333322, 0.001, 0.001};
  const double deepspeedBeta1[] = {0.85, 0.8333333333333334, 0.8666666666666667,
                                   0.9, 0.9};
  for (int k = 1; k <= 5; ++k) {
    EXPECT_EQ(schedule.lrForStep(k), deepspeedLr[k - 1]) << "step " << k;
    EXPECT_EQ(schedule.beta1ForStep(k), deepspeedBeta1[k - 1]) << "step " << k;
  }
  EXPECT_EQ(schedule.beta2ForStep(1, 0.95), 0.95);
  EXPECT_EQ(schedule.beta2ForStep(2, 0.95), 0.99);
}

// Anything DeepSpeed rejects, would divide by zero on, or does not take is
// an error that names the param.
TEST(LrScheduleTest, BadConfigsNameTheParam) {
  EXPECT_NE(createError(scheduler("Cosine", {}))
                .find("unknown scheduler "
                      "type 'Cosine'"),
            std::string::npos);
  EXPECT_NE(createError(scheduler("WarmupLR", {{"warmup_num_steps", 0}}))
                .find("'warmup_num_steps' must be a positive integer"),
            std::string::npos);
  EXPECT_NE(createError(scheduler("WarmupLR", {{"warmup_num_steps", 2.5}}))
                .find("'warmup_num_steps' must be a whole number"),
            std::string::npos);
  EXPECT_NE(createError(scheduler("WarmupDecayLR", {{"warmup_num_steps", 5}}))
                .find("'total_num_steps'"),
            std::string::npos);
  EXPECT_NE(createError(scheduler("WarmupLR", {{"total_num_steps", 5}}))
                .find("does not take param 'total_num_steps'"),
            std::string::npos);
  EXPECT_NE(
      createError(scheduler("WarmupLR", {}, "cosine")).find("'warmup_type'"),
      std::string::npos);
  EXPECT_NE(createError(scheduler("OneCycle", {{"cycle_max_lr", 0.1}}))
                .find("'cycle_min_lr'"),
            std::string::npos);
  EXPECT_NE(createError(scheduler("OneCycle", {{"cycle_min_lr", 0.01},
                                               {"cycle_max_lr", 0.1},
                                               {"cycle_first_step_size", 0}}))
                .find("'cycle_first_step_size'"),
            std::string::npos);
  EXPECT_NE(createError(scheduler("OneCycle", {{"cycle_min_lr", 0.01},
                                               {"cycle_max_lr", 0.1},
                                               {"cycle_momentum", 2}}))
                .find("'cycle_momentum'"),
            std::string::npos);
  EXPECT_NE(
      createError(scheduler("OneCycle",
                            {{"cycle_min_lr", 0.01}, {"cycle_max_lr", 0.1}},
                            "log"))
          .find("does not take param 'warmup_type'"),
      std::string::npos);
  EXPECT_NE(
      createError(scheduler("LRRangeTest", {{"lr_range_test_step_size", 0}}))
          .find("'lr_range_test_step_size'"),
      std::string::npos);
  EXPECT_NE(
      createError(scheduler("LRRangeTest", {{"lr_range_test_min_lr", NAN}}))
          .find("'lr_range_test_min_lr' must be a finite number"),
      std::string::npos);
  EXPECT_NE(createError(scheduler("", {{"warmup_num_steps", 3}}))
                .find("does not take param 'warmup_num_steps'"),
            std::string::npos);
}

// torch's schedulers run from last_epoch 0 at the first step: the k-th
// applied step has last_epoch k - 1. StepLR(step_size 3, gamma 0.5) from
// 0.003: steps 1-3 at 0.003, 4-6 at 0.0015, 7 at 0.00075.
TEST(LrScheduleTest, TorchStepLRStepKRunsWithLastEpochKMinusOne) {
  LrSchedule schedule = makeSchedule(scheduler("StepLR", {{"step_size", 3}, {"gamma", 0.5}}));
  EXPECT_EQ(schedule.kind(), LrSchedule::Kind::kStepLR);
  const double expected[] = {0.003, 0.003, 0.003, 0.0015, 0.0015, 0.0015, 0.00075};
  for (int k = 1; k <= 7; ++k)
    EXPECT_EQ(schedule.lrForStep(k), expected[k - 1]) << "step " << k;
  EXPECT_EQ(schedule.beta1ForStep(5), kBaseBeta1);
}

// The chainable form is computed step by step from the optimizer's lr;
// asking out of order (a resumed run) gives what a run in order gives.
TEST(LrScheduleTest, TorchScheduleOutOfOrderMatchesInOrder) {
  for (const plan::Scheduler &config :
       {scheduler("CosineAnnealingLR", {{"T_max", 7}, {"eta_min", 1e-4}}),
        scheduler("CosineAnnealingWarmRestarts", {{"T_0", 3}, {"T_mult", 2}, {"eta_min", 1e-4}})}) {
    LrSchedule inOrder = makeSchedule(config);
    std::vector<double> lrs;
    for (int k = 1; k <= 40; ++k)
      lrs.push_back(inOrder.lrForStep(k));
    LrSchedule outOfOrder = makeSchedule(config);
    for (int k : {30, 5, 40, 1, 17, 16, 17, 9})
      EXPECT_EQ(outOfOrder.lrForStep(k), lrs[k - 1]) << config.type() << ", step " << k;
    if (config.type() == "CosineAnnealingLR") {
      // The troughs: last_epoch 7 and 21, eta_min up to the chain's rounding.
      EXPECT_NEAR(lrs[7], 1e-4, 1e-15);
      EXPECT_NEAR(lrs[21], 1e-4, 1e-15);
    } else {
      // Restarts at last_epoch 3, 9 and 21 (periods of 3, 6, 12): the base lr.
      for (int epoch : {0, 3, 9, 21})
        EXPECT_EQ(lrs[epoch], kBaseLr) << "last_epoch " << epoch;
      EXPECT_LT(lrs[20], lrs[8]);
    }
  }
}

TEST(LrScheduleTest, TorchMultiStepLRCountsARepeatedMilestoneTwice) {
  plan::Scheduler config = scheduler("MultiStepLR", {{"gamma", 0.5}});
  for (int64_t milestone : {2, 4, 4})
    config.add_milestones(milestone);
  LrSchedule schedule = makeSchedule(config);
  // last_epoch 2 (step 3) halves, 4 (step 5) quarters.
  EXPECT_EQ(schedule.lrForStep(2), 0.003);
  EXPECT_EQ(schedule.lrForStep(3), 0.0015);
  EXPECT_EQ(schedule.lrForStep(5), 0.0015 * std::pow(0.5, 2.0));
}

TEST(LrScheduleTest, TorchBadConfigsNameTheParam) {
  EXPECT_NE(createError(scheduler("StepLR", {})).find("needs param 'step_size'"),
            std::string::npos);
  EXPECT_NE(createError(scheduler("ExponentialLR", {{"gamma", 0.9}, {"last_epoch", 4}}))
                .find("'last_epoch' must be -1"),
            std::string::npos);
  EXPECT_NE(createError(scheduler("ConstantLR", {{"factor", 0}})).find("'factor' must be in (0, 1]"),
            std::string::npos);
  EXPECT_NE(createError(scheduler("LinearLR", {{"end_factor", 1.5}}))
                .find("'end_factor' must be in [0, 1]"),
            std::string::npos);
  EXPECT_NE(createError(scheduler("CosineAnnealingLR", {{"T_max", 0}}))
                .find("'T_max' must be a positive integer"),
            std::string::npos);
  EXPECT_NE(createError(scheduler("MultiStepLR", {})).find("needs param 'milestones'"),
            std::string::npos);
  plan::Scheduler stray = scheduler("StepLR", {{"step_size", 2}});
  stray.add_milestones(3);
  EXPECT_NE(createError(stray).find("StepLR does not take param 'milestones'"), std::string::npos);
  EXPECT_NE(createError(scheduler("PolynomialLR", {{"warmup_num_steps", 3}}))
                .find("does not take param 'warmup_num_steps'"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Loss scaler
//===----------------------------------------------------------------------===//

plan::LossScaler dynamicConfig(int64_t power, int64_t window,
                               int64_t hysteresis, double minScale,
                               bool consecutive = false) {
  plan::LossScaler config;
  config.set_enabled(true);
  config.set_dynamic(true);
  config.set_initial_scale_power(power);
  config.set_scale_window(window);
  config.set_hysteresis(hysteresis);
  config.set_min_scale(minScale);
  config.set_consecutive_hysteresis(consecutive);
  return config;
}

LossScaler makeScaler(const plan::LossScaler &config) {
  StatusOr<LossScaler> scaler = LossScaler::create(config);
  EXPECT_TRUE(scaler.isOk()) << scaler.status().toString();
  return std::move(scaler).value();
}

/// The scale after each update of `overflows` ('x' overflow, '.' clean).
std::vector<double> scales(LossScaler &scaler, const std::string &overflows) {
  std::vector<double> result;
  for (char c : overflows) {
    Status status = scaler.update(c == 'x');
    EXPECT_TRUE(status.isOk()) << status.toString();
    result.push_back(scaler.scale());
  }
  return result;
}

// fp32/bf16: no scaling, whatever happens.
TEST(LossScalerTest, DisabledScaleIsOne) {
  LossScaler scaler = makeScaler(plan::LossScaler());
  EXPECT_FALSE(scaler.enabled());
  EXPECT_EQ(scaler.scale(), 1.0);
  EXPECT_EQ(scales(scaler, "xx.x"), (std::vector<double>{1, 1, 1, 1}));
}

// fp16.loss_scale > 0: that scale forever, overflow or not.
TEST(LossScalerTest, StaticScaleNeverMoves) {
  plan::LossScaler config;
  config.set_enabled(true);
  config.set_static_scale(128);
  LossScaler scaler = makeScaler(config);
  EXPECT_FALSE(scaler.dynamic());
  EXPECT_EQ(scales(scaler, "x.x...xx"), (std::vector<double>(8, 128.0)));
}

// hysteresis 2: the first overflow only consumes hysteresis, the second
// halves; with cur_hysteresis now 1, every further overflow halves.
TEST(LossScalerTest, HysteresisDelaysTheFirstHalving) {
  LossScaler scaler = makeScaler(dynamicConfig(16, 1000, 2, 1));
  EXPECT_EQ(scaler.scale(), 65536.0);
  ASSERT_TRUE(scaler.update(true).isOk());
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_EQ(scaler.curHysteresis(), 1);
  EXPECT_EQ(scaler.lastOverflowIter(), 0);
  EXPECT_EQ(scaler.curIter(), 1);
  EXPECT_EQ(scales(scaler, "x.x"), (std::vector<double>{32768, 32768, 16384}));
  EXPECT_EQ(scaler.curHysteresis(), 1);
  EXPECT_EQ(scaler.lastOverflowIter(), 3);
  EXPECT_EQ(scaler.curIter(), 4);
}

// The scale doubles when (cur_iter - last_overflow_iter - 1) is a positive
// multiple of the window: from the start (last_overflow_iter = -1) at the
// 4th clean update with window 3, then every 3; after an overflow at
// iteration c, at c + 4.
TEST(LossScalerTest, DoublesAfterWindowOfCleanSteps) {
  LossScaler scaler = makeScaler(dynamicConfig(4, 3, 1, 1));
  EXPECT_EQ(scales(scaler, "...."
                           "..."
                           ".x"
                           "..."
                           "."),
            (std::vector<double>{16, 16, 16, 32, 32, 32, 64, 64, 32, 32, 32, 32,
                                 64}));
}

// Without consecutive_hysteresis a clean step does not refill hysteresis
// (only a doubling does); with it, every clean step does, so only
// `hysteresis` overflows in a row halve the scale.
TEST(LossScalerTest, ConsecutiveHysteresis) {
  LossScaler plain = makeScaler(dynamicConfig(10, 1000, 3, 1, false));
  EXPECT_EQ(scales(plain, "x.xx"),
            (std::vector<double>{1024, 1024, 1024, 512}));
  EXPECT_EQ(plain.curHysteresis(), 1);

  LossScaler consecutive = makeScaler(dynamicConfig(10, 1000, 3, 1, true));
  EXPECT_EQ(scales(consecutive, "x.xx"),
            (std::vector<double>{1024, 1024, 1024, 1024}));
  EXPECT_EQ(consecutive.curHysteresis(), 1);
  EXPECT_EQ(scales(consecutive, "x"), (std::vector<double>{512}));
  EXPECT_EQ(scales(consecutive, "."), (std::vector<double>{512}));
  EXPECT_EQ(consecutive.curHysteresis(), 3);
}

// Without consecutive_hysteresis, the doubling refills the hysteresis.
TEST(LossScalerTest, DoublingRefillsHysteresis) {
  LossScaler scaler = makeScaler(dynamicConfig(8, 2, 2, 1));
  // Overflow at iteration 0; doubling at stable = 3 - 0 - 1 = 2.
  EXPECT_EQ(scales(scaler, "x..."), (std::vector<double>{256, 256, 256, 512}));
  EXPECT_EQ(scaler.curHysteresis(), 2);
  EXPECT_EQ(scales(scaler, "x"), (std::vector<double>{512}));
}

// Halving stops at min_scale; an overflow at min_scale is DeepSpeed's fatal
// error, and the scaler is left as it was.
TEST(LossScalerTest, MinScaleClampAndErrorAtMinimum) {
  LossScaler scaler = makeScaler(dynamicConfig(2, 1000, 1, 3));
  EXPECT_EQ(scales(scaler, "x"), (std::vector<double>{3}));
  LossScalerState before = scaler.state();
  Status status = scaler.update(true);
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.message().rfind("Current loss scale already at minimum - "
                                   "cannot decrease scale anymore. Exiting "
                                   "run.",
                                   0),
            0u)
      << status.message();
  EXPECT_EQ(scaler.scale(), 3.0);
  EXPECT_EQ(scaler.curIter(), before.curIter);
  EXPECT_EQ(scaler.lastOverflowIter(), before.lastOverflowIter);
}

// At min_scale with hysteresis left, the first overflow only consumes it;
// the error comes when the scale would have to drop.
TEST(LossScalerTest, HysteresisAtMinimumDefersTheError) {
  LossScaler scaler = makeScaler(dynamicConfig(0, 1000, 2, 1));
  EXPECT_TRUE(scaler.update(true).isOk());
  EXPECT_EQ(scaler.scale(), 1.0);
  EXPECT_FALSE(scaler.update(true).isOk());
}

// A scale that starts below min_scale is raised to it by an overflow, not
// refused (DeepSpeed compares with ==).
TEST(LossScalerTest, ScaleBelowMinimumIsRaisedByOverflow) {
  LossScaler scaler = makeScaler(dynamicConfig(0, 1000, 1, 4));
  EXPECT_EQ(scales(scaler, "x"), (std::vector<double>{4}));
}

// A checkpoint's state resumes the sequence exactly.
TEST(LossScalerTest, StateRestoresTheSequence) {
  plan::LossScaler config = dynamicConfig(6, 3, 2, 1);
  LossScaler original = makeScaler(config);
  scales(original, "x..x.x..");
  LossScalerState saved = original.state();
  EXPECT_EQ(saved.scale, original.scale());
  EXPECT_EQ(saved.curIter, 8);
  EXPECT_EQ(saved.lastOverflowIter, 5);
  EXPECT_EQ(saved.curHysteresis, original.curHysteresis());

  LossScaler resumed = makeScaler(config);
  ASSERT_TRUE(resumed.restore(saved).isOk());
  const std::string rest = "..x.xx....";
  EXPECT_EQ(scales(resumed, rest), scales(original, rest));

  LossScalerState bad = saved;
  bad.curHysteresis = 3;
  EXPECT_FALSE(resumed.restore(bad).isOk());
  bad = saved;
  bad.lastOverflowIter = bad.curIter;
  EXPECT_FALSE(resumed.restore(bad).isOk());
  bad = saved;
  bad.scale = INFINITY;
  EXPECT_FALSE(resumed.restore(bad).isOk());
}

// The dynamic settings DeepSpeed validates as > 0, and a static scale.
TEST(LossScalerTest, BadConfigsAreRefused) {
  EXPECT_FALSE(LossScaler::create(dynamicConfig(16, 0, 2, 1)).isOk());
  EXPECT_FALSE(LossScaler::create(dynamicConfig(16, 1000, 0, 1)).isOk());
  EXPECT_FALSE(LossScaler::create(dynamicConfig(16, 1000, 2, 0)).isOk());
  EXPECT_FALSE(LossScaler::create(dynamicConfig(5000, 1000, 2, 1)).isOk());
  plan::LossScaler config;
  config.set_enabled(true);
  config.set_static_scale(0);
  EXPECT_FALSE(LossScaler::create(config).isOk());
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

std::string u16File(const std::vector<uint16_t> &tokens) {
  return std::string(reinterpret_cast<const char *>(tokens.data()),
                     tokens.size() * 2);
}

std::vector<uint16_t> iota16(int n) {
  std::vector<uint16_t> tokens(n);
  for (int i = 0; i < n; ++i)
    tokens[i] = static_cast<uint16_t>(i);
  return tokens;
}

HostTensor tokenTensor(plan::DType dtype, int64_t rows, int64_t seq) {
  HostTensor tensor;
  tensor.dtype = dtype;
  tensor.shape = {rows, seq};
  return tensor;
}

std::vector<int64_t> values(const HostTensor &tensor) {
  std::vector<int64_t> result;
  for (int64_t i = 0; i < tensor.numElements(); ++i) {
    if (tensor.dtype == plan::I64) {
      int64_t v;
      std::memcpy(&v, tensor.data.data() + i * 8, 8);
      result.push_back(v);
    } else {
      int32_t v;
      std::memcpy(&v, tensor.data.data() + i * 4, 4);
      result.push_back(v);
    }
  }
  return result;
}

TokenDataset openDataset(const std::string &path,
                         TokenFileDType dtype = TokenFileDType::kAuto) {
  StatusOr<TokenDataset> dataset = TokenDataset::open(path, dtype);
  EXPECT_TRUE(dataset.isOk()) << dataset.status().toString();
  return std::move(dataset).value();
}

TokenDataSource makeSource(TokenDataset dataset, int64_t seq,
                           std::optional<uint64_t> seed = std::nullopt) {
  StatusOr<TokenDataSource> source =
      TokenDataSource::create(std::move(dataset), seq, seed);
  EXPECT_TRUE(source.isOk()) << source.status().toString();
  return std::move(source).value();
}

// uint16 tokens 0..22 with T = 4: (23-1)/4 = 5 samples; sample i is tokens
// [4i, 4i+5); the ids are its first 4, the labels the same shifted by one.
TEST(TokenDataTest, FlatUInt16SamplesAndShift) {
  TempDir dir;
  std::string path = dir.file("tokens.bin");
  writeBytes(path, u16File(iota16(23)));
  TokenDataSource source = makeSource(openDataset(path), 4);
  EXPECT_EQ(source.numSamples(), 5);
  HostTensor ids = tokenTensor(plan::I64, 2, 4);
  HostTensor labels = tokenTensor(plan::I64, 2, 4);
  ASSERT_TRUE(source.fill(1, 2, {&ids, &labels}).isOk());
  EXPECT_EQ(values(ids), (std::vector<int64_t>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(values(labels), (std::vector<int64_t>{5, 6, 7, 8, 9, 10, 11, 12}));
  // The last sample ends at token 20; tokens 21 and 22 are never read.
  ids = tokenTensor(plan::I64, 1, 4);
  labels = tokenTensor(plan::I64, 1, 4);
  ASSERT_TRUE(source.fill(4, 1, {&ids, &labels}).isOk());
  EXPECT_EQ(values(ids), (std::vector<int64_t>{16, 17, 18, 19}));
  EXPECT_EQ(values(labels), (std::vector<int64_t>{17, 18, 19, 20}));
}

// Sample indices wrap modulo numSamples: samples 5 and 12 are samples 0
// and 2.
TEST(TokenDataTest, SampleIndicesWrapAround) {
  TempDir dir;
  std::string path = dir.file("tokens.bin");
  writeBytes(path, u16File(iota16(21)));
  TokenDataSource source = makeSource(openDataset(path), 4);
  ASSERT_EQ(source.numSamples(), 5);
  EXPECT_EQ(source.datasetSample(5), 0);
  EXPECT_EQ(source.datasetSample(12), 2);
  HostTensor ids = tokenTensor(plan::I64, 3, 4);
  HostTensor labels = tokenTensor(plan::I64, 3, 4);
  ASSERT_TRUE(source.fill(4, 3, {&ids, &labels}).isOk());
  EXPECT_EQ(values(ids),
            (std::vector<int64_t>{16, 17, 18, 19, 0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(values(labels),
            (std::vector<int64_t>{17, 18, 19, 20, 1, 2, 3, 4, 5, 6, 7, 8}));
}

// uint32 ids by the ".u32" suffix or by the dtype; ids above 65535 survive.
TEST(TokenDataTest, FlatUInt32BySuffixOrDType) {
  TempDir dir;
  std::vector<uint32_t> tokens = {70000, 1, 100000, 2, 65536};
  std::string bytes(reinterpret_cast<const char *>(tokens.data()),
                    tokens.size() * 4);
  writeBytes(dir.file("tokens.u32"), bytes);
  writeBytes(dir.file("tokens.bin"), bytes);
  TokenDataset bySuffix = openDataset(dir.file("tokens.u32"));
  TokenDataset byDType =
      openDataset(dir.file("tokens.bin"), TokenFileDType::kUInt32);
  for (const TokenDataset *dataset : {&bySuffix, &byDType}) {
    ASSERT_EQ(dataset->size(), 5);
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(dataset->token(i), tokens[i]);
  }
  // Read as uint16, the same bytes are ten ids.
  EXPECT_EQ(openDataset(dir.file("tokens.bin")).size(), 10);
  TokenDataSource source = makeSource(bySuffix, 2);
  HostTensor ids = tokenTensor(plan::I32, 2, 2);
  HostTensor labels = tokenTensor(plan::I32, 2, 2);
  ASSERT_TRUE(source.fill(0, 2, {&ids, &labels}).isOk());
  EXPECT_EQ(values(ids), (std::vector<int64_t>{70000, 1, 100000, 2}));
  EXPECT_EQ(values(labels), (std::vector<int64_t>{1, 100000, 2, 65536}));
}

// A 1-D integer .npy (int64 or int32) reads as the same token sequence.
TEST(TokenDataTest, NpyArrays) {
  TempDir dir;
  for (plan::DType dtype : {plan::I64, plan::I32}) {
    HostTensor array;
    array.dtype = dtype;
    array.shape = {9};
    size_t width = dtype == plan::I64 ? 8 : 4;
    array.data.resize(9 * width);
    for (int64_t i = 0; i < 9; ++i) {
      int64_t v64 = 1000 + i;
      int32_t v32 = static_cast<int32_t>(v64);
      std::memcpy(array.data.data() + i * width,
                  dtype == plan::I64 ? static_cast<void *>(&v64) : &v32, width);
    }
    std::string path = dir.file("tokens.npy");
    ASSERT_TRUE(writeNpy(path, array).isOk());
    TokenDataSource source = makeSource(openDataset(path), 4);
    EXPECT_EQ(source.numSamples(), 2);
    HostTensor ids = tokenTensor(plan::I64, 1, 4);
    HostTensor labels = tokenTensor(plan::I64, 1, 4);
    ASSERT_TRUE(source.fill(1, 1, {&ids, &labels}).isOk());
    EXPECT_EQ(values(ids), (std::vector<int64_t>{1004, 1005, 1006, 1007}));
    EXPECT_EQ(values(labels), (std::vector<int64_t>{1005, 1006, 1007, 1008}));
  }
}

// A model that takes only the ids (labels computed in the graph) gets the
// first T tokens.
TEST(TokenDataTest, IdsOnly) {
  TempDir dir;
  writeBytes(dir.file("t.bin"), u16File(iota16(9)));
  TokenDataSource source = makeSource(openDataset(dir.file("t.bin")), 4);
  HostTensor ids = tokenTensor(plan::I64, 1, 4);
  ASSERT_TRUE(source.fill(1, 1, {&ids}).isOk());
  EXPECT_EQ(values(ids), (std::vector<int64_t>{4, 5, 6, 7}));
}

// --shuffle: the Fisher-Yates permutation from std::mt19937_64 (reference
// values from an independent MT19937-64 implementation); the same on every
// pass and every platform, and different for another seed.
TEST(TokenDataTest, ShuffleIsAFixedPermutation) {
  TempDir dir;
  std::string path = dir.file("tokens.bin");
  writeBytes(path, u16File(iota16(11)));
  TokenDataSource shuffled = makeSource(openDataset(path), 1, 1234);
  ASSERT_EQ(shuffled.numSamples(), 10);
  const int64_t expected[] = {0, 3, 4, 7, 9, 8, 5, 6, 1, 2};
  std::set<int64_t> seen;
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(shuffled.datasetSample(i), expected[i]) << "sample " << i;
    EXPECT_EQ(shuffled.datasetSample(i + 10), expected[i]) << "sample " << i;
    seen.insert(shuffled.datasetSample(i));
  }
  EXPECT_EQ(seen.size(), 10u);

  TokenDataSource again = makeSource(openDataset(path), 1, 1234);
  TokenDataSource other = makeSource(openDataset(path), 1, 99);
  bool differs = false;
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(again.datasetSample(i), shuffled.datasetSample(i));
    differs |= other.datasetSample(i) != shuffled.datasetSample(i);
  }
  EXPECT_TRUE(differs);

  // Filled samples follow the permutation: sample 1 is dataset sample 3.
  HostTensor ids = tokenTensor(plan::I64, 2, 1);
  HostTensor labels = tokenTensor(plan::I64, 2, 1);
  ASSERT_TRUE(shuffled.fill(1, 2, {&ids, &labels}).isOk());
  EXPECT_EQ(values(ids), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(values(labels), (std::vector<int64_t>{4, 5}));
}

std::string openError(const std::string &path,
                      TokenFileDType dtype = TokenFileDType::kAuto) {
  StatusOr<TokenDataset> dataset = TokenDataset::open(path, dtype);
  EXPECT_FALSE(dataset.isOk()) << path;
  return dataset.isOk() ? std::string() : dataset.status().message();
}

// Files that cannot be token data, and token data too short for one sample.
TEST(TokenDataTest, BadFilesAreErrors) {
  TempDir dir;
  StatusOr<TokenDataset> missing = TokenDataset::open(dir.file("none.bin"));
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  writeBytes(dir.file("odd.bin"), std::string("\x01\x02\x03", 3));
  EXPECT_NE(openError(dir.file("odd.bin")).find("not a whole number of uint16"),
            std::string::npos);
  writeBytes(dir.file("six.u32"), std::string(6, '\0'));
  EXPECT_NE(openError(dir.file("six.u32")).find("not a whole number of uint32"),
            std::string::npos);
  writeBytes(dir.file("empty.bin"), "");
  EXPECT_NE(openError(dir.file("empty.bin")).find("holds no tokens"),
            std::string::npos);

  HostTensor floats;
  floats.dtype = plan::F32;
  floats.shape = {4};
  floats.data.resize(16);
  ASSERT_TRUE(writeNpy(dir.file("f.npy"), floats).isOk());
  EXPECT_NE(openError(dir.file("f.npy")).find("not integer token ids"),
            std::string::npos);
  HostTensor matrix;
  matrix.dtype = plan::I64;
  matrix.shape = {2, 3};
  matrix.data.resize(48);
  ASSERT_TRUE(writeNpy(dir.file("m.npy"), matrix).isOk());
  EXPECT_NE(openError(dir.file("m.npy")).find("1-D"), std::string::npos);
  HostTensor negative;
  negative.dtype = plan::I32;
  negative.shape = {3};
  int32_t negatives[] = {1, -5, 2};
  negative.data.assign(reinterpret_cast<uint8_t *>(negatives),
                       reinterpret_cast<uint8_t *>(negatives) + 12);
  ASSERT_TRUE(writeNpy(dir.file("n.npy"), negative).isOk());
  EXPECT_NE(openError(dir.file("n.npy")).find("negative id -5"),
            std::string::npos);
  EXPECT_NE(openError(dir.file("n.npy"), TokenFileDType::kUInt32)
                .find("header gives its dtype"),
            std::string::npos);

  writeBytes(dir.file("four.bin"), u16File(iota16(4)));
  StatusOr<TokenDataSource> tooShort =
      TokenDataSource::create(openDataset(dir.file("four.bin")), 4);
  ASSERT_FALSE(tooShort.isOk());
  EXPECT_NE(tooShort.status().message().find("has 4 tokens"),
            std::string::npos);
  EXPECT_TRUE(
      TokenDataSource::create(openDataset(dir.file("four.bin")), 3).isOk());

  EXPECT_TRUE(parseTokenFileDType("u32").isOk());
  EXPECT_EQ(*parseTokenFileDType("uint16"), TokenFileDType::kUInt16);
  EXPECT_FALSE(parseTokenFileDType("int8").isOk());
}

// fill() refuses inputs it cannot fill rather than writing past them.
TEST(TokenDataTest, BadInputsAreErrors) {
  TempDir dir;
  writeBytes(dir.file("t.bin"), u16File(iota16(40)));
  TokenDataSource source = makeSource(openDataset(dir.file("t.bin")), 4);
  HostTensor ids = tokenTensor(plan::I64, 2, 4);
  HostTensor labels = tokenTensor(plan::I64, 2, 4);
  HostTensor extra = tokenTensor(plan::I64, 2, 4);
  HostTensor shortSeq = tokenTensor(plan::I64, 2, 3);
  HostTensor floats = tokenTensor(plan::F32, 2, 4);
  EXPECT_FALSE(source.fill(0, 2, {&ids, &labels, &extra}).isOk());
  EXPECT_FALSE(source.fill(0, 2, {&shortSeq}).isOk());
  EXPECT_FALSE(source.fill(0, 2, {&ids, &floats}).isOk());
  EXPECT_FALSE(source.fill(0, 3, {&ids, &labels}).isOk());
  EXPECT_FALSE(source.fill(-1, 2, {&ids, &labels}).isOk());
  EXPECT_FALSE(source.fill(0, 2, {}).isOk());
  EXPECT_FALSE(source.fill(0, 2, {&ids, nullptr}).isOk());
}

// DESIGN's rule: sample stepStart + g*(dp*mb) + r*mb + b; a step's
// micro-batches cover its samples exactly once, in order of (g, r, b).
TEST(TokenDataTest, SampleIndexRule) {
  BatchLayout layout{/*dataParallelSize=*/2, /*microBatchSize=*/3};
  EXPECT_EQ(layout.sampleIndex(12, 1, 1, 2), 12 + 6 + 3 + 2);
  EXPECT_EQ(layout.sampleIndex(0, 0, 0, 0), 0);
  EXPECT_EQ(layout.samplesPerStep(4), 24);
  // Steps of 2, then 3, then 1 micro-steps follow one another.
  int64_t stepStart = 0, next = 0;
  for (int64_t accumulation : {2, 3, 1}) {
    for (int64_t g = 0; g < accumulation; ++g)
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t b = 0; b < 3; ++b)
          EXPECT_EQ(layout.sampleIndex(stepStart, g, r, b), next++);
    stepStart += layout.samplesPerStep(accumulation);
  }
  EXPECT_EQ(stepStart, 36);
}

/// The rows of samples [0, total) as one data-parallel layout reads them,
/// each row keyed by its sample: ids, labels and a [rows, 3] float input.
std::map<int64_t, std::vector<double>> readAll(const DataSource &source,
                                               BatchLayout layout,
                                               int64_t accumulation,
                                               int64_t steps) {
  std::map<int64_t, std::vector<double>> rows;
  const int64_t mb = layout.microBatchSize;
  HostTensor ids = tokenTensor(plan::I64, mb, 5);
  HostTensor features;
  features.dtype = plan::F32;
  features.shape = {mb, 3};
  HostTensor labels = tokenTensor(plan::I32, mb, 5);
  for (int64_t s = 0; s < steps; ++s) {
    int64_t stepStart = s * layout.samplesPerStep(accumulation);
    for (int64_t g = 0; g < accumulation; ++g)
      for (int64_t r = 0; r < layout.dataParallelSize; ++r) {
        int64_t first = layout.sampleIndex(stepStart, g, r, 0);
        Status status = source.fill(first, mb, {&ids, &features, &labels});
        EXPECT_TRUE(status.isOk()) << status.toString();
        std::vector<int64_t> idValues = values(ids);
        std::vector<int64_t> labelValues = values(labels);
        for (int64_t b = 0; b < mb; ++b) {
          std::vector<double> &row = rows[first + b];
          EXPECT_TRUE(row.empty()) << "sample " << first + b << " read twice";
          for (int p = 0; p < 5; ++p)
            row.push_back(static_cast<double>(idValues[b * 5 + p]));
          for (int p = 0; p < 5; ++p)
            row.push_back(static_cast<double>(labelValues[b * 5 + p]));
          for (int e = 0; e < 3; ++e) {
            float value;
            std::memcpy(&value, features.data.data() + (b * 3 + e) * 4, 4);
            row.push_back(value);
          }
        }
      }
  }
  return rows;
}

// Synthetic data depends only on (seed, sample): 24 samples read by 1 rank
// in micro-batches of 8, by 2 ranks of 3 x 4, or by 4 ranks of 2 x 3 are
// the same rows; labels are the ids shifted by one; tokens lie in [0, range).
TEST(SyntheticDataTest, SameSamplesForEveryLayout) {
  StatusOr<SyntheticDataSource> source = SyntheticDataSource::create(7, 50257);
  ASSERT_TRUE(source.isOk());
  auto one = readAll(*source, {1, 8}, 1, 3);
  auto two = readAll(*source, {2, 3}, 4, 1);
  auto four = readAll(*source, {4, 2}, 3, 1);
  ASSERT_EQ(one.size(), 24u);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, four);
  std::set<double> distinct;
  for (const auto &[sample, row] : one) {
    for (int p = 0; p < 4; ++p)
      EXPECT_EQ(row[5 + p], row[p + 1]) << "sample " << sample;
    EXPECT_EQ(row[9], SyntheticDataSource::token(7, sample, 5, 50257));
    for (int p = 0; p < 10; ++p) {
      EXPECT_GE(row[p], 0);
      EXPECT_LT(row[p], 50257);
    }
    distinct.insert(row[10]);
  }
  EXPECT_EQ(distinct.size(), 24u);
  // Another seed, other data.
  StatusOr<SyntheticDataSource> reseeded =
      SyntheticDataSource::create(8, 50257);
  EXPECT_NE(readAll(*reseeded, {1, 8}, 1, 3), one);
}

// The documented generator, against values from an independent
// implementation of splitmix64 and Box-Muller.
TEST(SyntheticDataTest, DocumentedGenerator) {
  const int64_t tokens[] = {23582, 45794, 35665, 16123, 39350};
  for (int p = 0; p < 5; ++p)
    EXPECT_EQ(SyntheticDataSource::token(7, 3, p, 50257), tokens[p]);
  EXPECT_DOUBLE_EQ(SyntheticDataSource::normal(7, 3, 1, 0), 0.0770681810510926);
  EXPECT_DOUBLE_EQ(SyntheticDataSource::normal(7, 3, 1, 1),
                   -1.0953459996355983);
  EXPECT_DOUBLE_EQ(SyntheticDataSource::normal(7, 3, 1, 2),
                   0.14994352856551338);
  // Standard normal: over 20000 draws the mean is near 0, the variance
  // near 1.
  double sum = 0, squares = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    double v = SyntheticDataSource::normal(1, i / 4, 0, i % 4);
    sum += v;
    squares += v * v;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.03);
  EXPECT_NEAR(squares / n, 1.0, 0.05);
}

// Float inputs of a Linear model (x, y) are filled per input: the same
// sample gives different x and y, and f64 inputs get the unrounded values.
TEST(SyntheticDataTest, FloatInputs) {
  StatusOr<SyntheticDataSource> source = SyntheticDataSource::create(3, 1);
  ASSERT_TRUE(source.isOk());
  HostTensor x;
  x.dtype = plan::F32;
  x.shape = {2, 4};
  HostTensor y;
  y.dtype = plan::F64;
  y.shape = {2, 1};
  ASSERT_TRUE(source->fill(10, 2, {&x, &y}).isOk());
  ASSERT_EQ(x.data.size(), 32u);
  ASSERT_EQ(y.data.size(), 16u);
  float x11;
  std::memcpy(&x11, x.data.data() + 5 * 4, 4);
  EXPECT_EQ(x11, static_cast<float>(SyntheticDataSource::normal(3, 11, 0, 1)));
  double y1;
  std::memcpy(&y1, y.data.data() + 8, 8);
  EXPECT_EQ(y1, SyntheticDataSource::normal(3, 11, 1, 0));
  EXPECT_NE(static_cast<float>(y1),
            static_cast<float>(SyntheticDataSource::normal(3, 11, 0, 0)));

  HostTensor half;
  half.dtype = plan::F16;
  half.shape = {2, 4};
  EXPECT_FALSE(source->fill(0, 2, {&half}).isOk());
  EXPECT_FALSE(SyntheticDataSource::create(3, 0).isOk());
}

} // namespace
} // namespace zcc
