//===- Train.h - zrun's training loop ---------------------------*- C++ -*-===//
//
// Drives a training plan's programs (schema/plan.proto, Training): for each
// optimizer step, `micro_step` once per micro-batch of the accumulation
// count, then `grad_norm`; the loss scaler decides whether the step
// overflowed (then `zero_grads`, and the learning rate is not stepped), and
// otherwise `optimizer_step` runs with the step's learning rate, betas and
// the one gradient factor that unscales, averages over micro-steps and
// clips. The accumulation count is a run-time choice, so the effective
// batch changes without recompiling.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_TOOLS_ZRUN_TRAIN_H
#define ZCC_TOOLS_ZRUN_TRAIN_H

#include "runtime/Executor.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace zcc {

struct TrainOptions {
  /// Optimizer steps to run.
  int64_t steps = 0;
  /// The accumulation count from a given step on (1-based steps, ascending;
  /// the first entry is step 1). Empty: the plan's gradient_accumulation_steps.
  std::vector<std::pair<int64_t, int64_t>> gradAccum;
  /// Token file (or .npy); empty: the seeded synthetic source.
  std::string data;
  std::string dataDType;
  std::optional<uint64_t> shuffleSeed;
  /// Seed of the synthetic data.
  uint64_t dataSeed = 0;
  /// One JSON object per optimizer step; empty: none.
  std::string logJson;
  /// Log lines every steps_per_print steps (0: the plan's).
  int64_t printEvery = 0;
  /// This rank (its data-parallel coordinate) and its communicator (null on
  /// one rank). Rank 0 prints and logs; the logged loss is the mean over the
  /// ranks.
  int rank = 0;
  Communicator *communicator = nullptr;
  /// A pipeline plan's stage on this rank, and the communicator over the
  /// ranks of this rank's data-parallel index (one per stage) through
  /// which the stages' gradient norms are summed; `communicator` is then
  /// the whole job's.
  int stage = 0;
  Communicator *pipelineCommunicator = nullptr;
  /// Checkpoints (tools/zrun/Checkpoint.h): saved into `saveDir` when the
  /// run ends and every `saveEvery` steps; the run starts from the newest
  /// whole one in `resumeDir` and continues up to `steps`.
  std::string saveDir;
  int64_t saveEvery = 0;
  std::string resumeDir;
  /// --profile: with the executor profiling, the first step is left out as
  /// warm-up (when more follow) and rank 0 prints this many rows of each
  /// table at the end (tools/zrun/Profile.h), and writes the profile next
  /// to --log-json; 0: no profile.
  int profileRows = 0;
};

struct GradCheckOptions {
  /// Elements checked per parameter (spread evenly over it).
  int64_t elements = 16;
  /// Central-difference step and tolerances; 0 picks them by the loss's
  /// dtype (f64: 1e-6, rtol 1e-6, atol 1e-9; f32: 1e-3, 1e-2, 2e-3).
  double step = 0;
  double rtol = 0;
  double atol = 0;
};

/// Compares every parameter's gradient from `micro_step` (loss scale 1, one
/// micro-batch of the data) with central finite differences of the loss:
/// |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|). Prints
/// a table; fails naming the first element that does not match.
Status checkGradients(Executor &executor, const TrainOptions &options,
                      const GradCheckOptions &check);

/// Parses --grad-accum: "N" or "N,STEP:N,...", steps ascending and > 1.
Status parseGradAccum(const std::string &text,
                      std::vector<std::pair<int64_t, int64_t>> &schedule);

/// Runs `options.steps` optimizer steps of the executor's training plan.
Status train(Executor &executor, const TrainOptions &options);

/// The programs of `plan` with an instruction that writes (`writes`) or
/// reads one of buffers `ids`: the forward passes of a pipeline stage
/// that read its data, or compute its loss or outputs.
std::set<std::string> programsUsing(const plan::Plan &plan, const std::set<uint32_t> &ids,
                                    bool writes);

} // namespace zcc

#endif // ZCC_TOOLS_ZRUN_TRAIN_H
