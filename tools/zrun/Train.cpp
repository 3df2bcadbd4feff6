//===- Train.cpp - zrun's training loop -----------------------------------===//

#include "tools/zrun/Train.h"

#include "tools/zrun/Checkpoint.h"
#include "tools/zrun/Profile.h"

#include "kernels/cpu/Float16.h"
#include "runtime/Train/LossScaler.h"
#include "runtime/Train/LrSchedule.h"
#include "runtime/Train/TokenData.h"
#include "runtime/Support/Status.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unistd.h>

namespace zcc {
namespace {

/// `value` as one element of `dtype`, for the scalar inputs.
Status scalarBytes(double value, plan::DType dtype, std::vector<uint8_t> &bytes) {
  auto put = [&](const auto &element) {
    bytes.resize(sizeof element);
    std::memcpy(bytes.data(), &element, sizeof element);
  };
  switch (dtype) {
  case plan::F32:
    put(static_cast<float>(value));
    return Status::ok();
  case plan::F64:
    put(value);
    return Status::ok();
  case plan::F16:
    put(cpu::toHalf(static_cast<float>(value)).bits);
    return Status::ok();
  case plan::BF16:
    put(cpu::toBFloat16(static_cast<float>(value)).bits);
    return Status::ok();
  default:
    return Status(StatusCode::kInvalidArgument,
                  "the plan's loss scale is not a float scalar");
  }
}

double scalarValue(const HostTensor &tensor) {
  switch (tensor.dtype) {
  case plan::F32: {
    float v;
    std::memcpy(&v, tensor.data.data(), sizeof v);
    return v;
  }
  case plan::F64: {
    double v;
    std::memcpy(&v, tensor.data.data(), sizeof v);
    return v;
  }
  case plan::F16: {
    cpu::Half v;
    std::memcpy(&v.bits, tensor.data.data(), sizeof v.bits);
    return cpu::toFloat(v);
  }
  case plan::BF16: {
    cpu::BFloat16 v;
    std::memcpy(&v.bits, tensor.data.data(), sizeof v.bits);
    return cpu::toFloat(v);
  }
  default:
    return std::nan("");
  }
}

std::string bindingName(const plan::Plan &plan, uint32_t buffer) {
  for (const plan::Binding &binding : plan.inputs())
    if (binding.buffer() == buffer)
      return binding.name();
  for (const plan::Binding &binding : plan.outputs())
    if (binding.buffer() == buffer)
      return binding.name();
  return "";
}

int64_t accumulationFor(const TrainOptions &options, int64_t planValue, int64_t step) {
  int64_t count = planValue;
  for (const auto &[from, value] : options.gradAccum)
    if (step >= from)
      count = value;
  return count;
}

/// A terminal progress bar on standard error, redrawn in place.
void drawProgress(int64_t step, int64_t steps, double loss) {
  constexpr int kWidth = 30;
  int filled = static_cast<int>(kWidth * step / std::max<int64_t>(1, steps));
  char bar[kWidth + 1];
  for (int i = 0; i < kWidth; ++i)
    bar[i] = i < filled ? '#' : '.';
  bar[kWidth] = '\0';
  std::fprintf(stderr, "\r[%s] %lld/%lld loss %.4f", bar, static_cast<long long>(step),
               static_cast<long long>(steps), loss);
  if (step == steps)
    std::fputc('\n', stderr);
  std::fflush(stderr);
}

/// Fills the micro-step's data inputs from --data or the synthetic source.
/// The input that keys a plan's dropout masks (plan.proto, Training).
constexpr const char *kDropoutState = "zcc.dropout_state";

struct Feeder {
  std::vector<HostTensor> inputs;
  std::vector<HostTensor *> pointers;
  std::unique_ptr<DataSource> source;
  int64_t rows = 1;
  int64_t tokensPerRow = 1;
  /// Whether the plan has dropout (its `zcc.dropout_state` input), and the
  /// seed of its masks (--seed).
  bool dropout = false;
  int64_t dropoutSeed = 0;

  static StatusOr<Feeder> create(Executor &executor, const TrainOptions &options) {
    const plan::Plan &plan = executor.plan().plan;
    const plan::Training &training = plan.training();
    Feeder feeder;
    feeder.dropout = executor.hasInput(kDropoutState);
    feeder.dropoutSeed = static_cast<int64_t>(options.dataSeed);
    feeder.inputs.resize(training.data_inputs_size());
    feeder.rows = training.micro_batch_size();
    bool tokenModel = false;
    for (int i = 0; i < training.data_inputs_size(); ++i) {
      const plan::Buffer &buffer = plan.buffers(training.data_inputs(i).buffer());
      HostTensor &input = feeder.inputs[i];
      input.dtype = buffer.dtype();
      input.shape.assign(buffer.shape().begin(), buffer.shape().end());
      if (input.shape.empty())
        return Status(StatusCode::kInvalidArgument,
                      "data input '" + training.data_inputs(i).name() +
                          "' is a scalar; training data needs a batch dimension");
      feeder.rows = input.shape[0];
      if ((buffer.dtype() == plan::I64 || buffer.dtype() == plan::I32) && !tokenModel &&
          input.shape.size() >= 2) {
        tokenModel = true;
        feeder.tokensPerRow = input.shape[1];
      }
    }
    for (HostTensor &input : feeder.inputs)
      feeder.pointers.push_back(&input);
    if (!options.data.empty()) {
      StatusOr<TokenFileDType> dtype = parseTokenFileDType(options.dataDType);
      if (!dtype.isOk())
        return dtype.takeStatus();
      if (!tokenModel)
        return Status(StatusCode::kInvalidArgument,
                      "--data " + options.data +
                          ": token data feeds a model whose first integer input is "
                          "[batch, sequence]; this model's inputs are not token ids (drop "
                          "--data to train on the seeded synthetic source)");
      StatusOr<TokenDataset> dataset = TokenDataset::open(options.data, *dtype);
      if (!dataset.isOk())
        return dataset.takeStatus();
      StatusOr<TokenDataSource> tokens = TokenDataSource::create(
          std::move(*dataset), feeder.tokensPerRow, options.shuffleSeed);
      if (!tokens.isOk())
        return tokens.takeStatus();
      feeder.source = std::make_unique<TokenDataSource>(std::move(*tokens));
    } else {
      StatusOr<SyntheticDataSource> synthetic = SyntheticDataSource::create(
          options.dataSeed, std::max<int64_t>(1, training.token_range()));
      if (!synthetic.isOk())
        return synthetic.takeStatus();
      feeder.source = std::make_unique<SyntheticDataSource>(std::move(*synthetic));
    }
    return feeder;
  }

  /// Keys the dropout masks of the programs that run next by the seed and
  /// the global index `first` of their micro-batch's first sample.
  Status keyDropout(Executor &executor, int64_t first) {
    if (!dropout)
      return Status::ok();
    const int64_t state[2] = {dropoutSeed, first};
    return executor.setInput(kDropoutState, state, sizeof state, plan::I64, {2});
  }

  /// Writes samples [first, first + rows) into the plan's data inputs (and
  /// keys the dropout masks by them).
  Status feed(Executor &executor, int64_t first) {
    const plan::Training &training = executor.plan().plan.training();
    ZCC_RETURN_IF_ERROR(keyDropout(executor, first), "while keying the dropout masks");
    ZCC_RETURN_IF_ERROR(source->fill(first, rows, pointers), "while reading the data");
    for (int i = 0; i < training.data_inputs_size(); ++i)
      // A pipeline stage reads only the data inputs its programs use.
      if (executor.hasInput(training.data_inputs(i).name()))
        ZCC_RETURN_IF_ERROR(executor.setInput(training.data_inputs(i).name(),
                                            inputs[i].data.data(), inputs[i].data.size(),
                                            inputs[i].dtype, inputs[i].shape),
                          "while writing the data");
    return Status::ok();
  }
};

double elementAt(const HostTensor &tensor, int64_t index) {
  if (tensor.dtype == plan::F64)
    return reinterpret_cast<const double *>(tensor.data.data())[index];
  return reinterpret_cast<const float *>(tensor.data.data())[index];
}

void setElement(HostTensor &tensor, int64_t index, double value) {
  if (tensor.dtype == plan::F64)
    reinterpret_cast<double *>(tensor.data.data())[index] = value;
  else
    reinterpret_cast<float *>(tensor.data.data())[index] = static_cast<float>(value);
}

/// What a training run's profile covers, for its header: the steps after
/// the warm-up one, and whose they are where there are several ranks.
std::string profileScope(const TrainOptions &options, int64_t firstStep, bool pipelined) {
  std::string scope =
      firstStep > options.steps ? std::string("no step")
      : firstStep == options.steps
          ? formatString("step %lld", static_cast<long long>(firstStep))
          : formatString("steps %lld-%lld (step %lld left out as warm-up)",
                         static_cast<long long>(firstStep + 1),
                         static_cast<long long>(options.steps), static_cast<long long>(firstStep));
  if (options.communicator && options.communicator->size() > 1)
    scope += formatString(", rank %d of %d", options.rank, options.communicator->size());
  if (pipelined)
    scope += formatString(", pipeline stage %d", options.stage);
  return scope;
}

/// Leaves the first step of a profiled run out, when more follow: it pays
/// for first touches of memory, caches and the device's lazy setup.
void endProfiledStep(Executor &executor, const TrainOptions &options, int64_t step,
                     int64_t firstStep) {
  if (options.profileRows > 0 && step == firstStep && step < options.steps)
    executor.resetProfile();
}

/// Rank 0's profile of the run: printed, and next to --log-json.
Status reportProfile(const Executor &executor, const TrainOptions &options, int64_t firstStep,
                     bool pipelined) {
  if (options.profileRows <= 0 || options.rank != 0)
    return Status::ok();
  std::string scope = profileScope(options, firstStep, pipelined);
  std::fputs(formatProfile(executor, scope, options.profileRows).c_str(), stdout);
  std::fflush(stdout);
  if (!options.logJson.empty())
    ZCC_RETURN_IF_ERROR(
        writeProfileJson(executor, scope, options.profileRows, profileJsonPath(options.logJson)),
        "--profile");
  return Status::ok();
}

} // namespace

Status checkGradients(Executor &executor, const TrainOptions &options,
                      const GradCheckOptions &check) {
  const plan::Plan &plan = executor.plan().plan;
  const plan::Training &training = plan.training();
  StatusOr<Feeder> feeder = Feeder::create(executor, options);
  if (!feeder.isOk())
    return feeder.takeStatus();
  ZCC_RETURN_IF_ERROR(feeder->feed(executor, 0), "gradient check");
  std::vector<uint8_t> one;
  const plan::DType seedType = plan.buffers(training.loss_scale()).dtype();
  ZCC_RETURN_IF_ERROR(scalarBytes(1.0, seedType, one), "gradient check");
  ZCC_RETURN_IF_ERROR(executor.setInput(bindingName(plan, training.loss_scale()), one.data(),
                                        one.size(), seedType, {}),
                      "gradient check");
  const std::string lossName = bindingName(plan, training.loss());
  // The state derived from the parameters (their 16-bit copies, ZeRO's
  // master rows) follows each value the check writes into a parameter.
  const bool derived = executor.hasProgram("init");
  auto runLoss = [&](double &loss) -> Status {
    if (derived)
      ZCC_RETURN_IF_ERROR(executor.run("init"), "gradient check");
    ZCC_RETURN_IF_ERROR(executor.run("micro_step"), "gradient check");
    StatusOr<HostTensor> out = executor.output(lossName);
    if (!out.isOk())
      return out.takeStatus();
    loss = scalarValue(*out);
    return Status::ok();
  };
  ZCC_RETURN_IF_ERROR(executor.run("zero_grads"), "gradient check");
  double loss0 = 0;
  ZCC_RETURN_IF_ERROR(runLoss(loss0), "gradient check");

  // The analytic gradients first: every later micro-step adds to them.
  struct Checked {
    uint32_t param;
    std::string name;
    HostTensor grad;
  };
  std::vector<Checked> checked;
  for (const plan::Buffer &buffer : plan.buffers()) {
    if (buffer.kind() != plan::GRADIENT)
      continue;
    std::string name = buffer.name().substr(0, buffer.name().rfind(".grad"));
    for (const plan::Buffer &param : plan.buffers())
      if (param.kind() == plan::PARAMETER && param.name() == name) {
        if (param.dtype() != plan::F32 && param.dtype() != plan::F64)
          return Status(StatusCode::kInvalidArgument,
                        "--check-gradients needs f32 or f64 parameters; '" + name + "' is " +
                            dtypeText(param.dtype()));
        StatusOr<HostTensor> grad = executor.readBuffer(buffer.id());
        if (!grad.isOk())
          return grad.takeStatus();
        checked.push_back({param.id(), name, std::move(*grad)});
      }
  }
  if (checked.empty())
    return Status(StatusCode::kInvalidArgument, "the plan has no gradient to check");

  bool f64 = plan.buffers(training.loss()).dtype() == plan::F64;
  double h = check.step > 0 ? check.step : (f64 ? 1e-6 : 1e-3);
  double rtol = check.rtol > 0 ? check.rtol : (f64 ? 1e-6 : 1e-2);
  double atol = check.atol > 0 ? check.atol : (f64 ? 1e-9 : 2e-3);
  std::printf("gradient check: loss %.10g, step %g, rtol %g, atol %g\n", loss0, h, rtol, atol);
  std::printf("  %-32s %8s %14s %14s  %s\n", "parameter", "checked", "max abs error",
              "max rel error", "verdict");
  bool allOk = true;
  std::string firstFailure;
  for (Checked &entry : checked) {
    StatusOr<HostTensor> param = executor.readBuffer(entry.param);
    if (!param.isOk())
      return param.takeStatus();
    HostTensor values = *param;
    int64_t count = values.numElements();
    int64_t samples = std::min<int64_t>(count, check.elements);
    // A check of no element would print "ok" having compared nothing.
    if (samples <= 0 && count > 0)
      return makeStatus(StatusCode::kInvalidArgument,
                        "gradient check: no element of '%s' would be checked "
                        "(--check-elements %lld); pass a positive count",
                        entry.name.c_str(), static_cast<long long>(check.elements));
    double maxAbs = 0, maxRel = 0;
    bool ok = true;
    for (int64_t s = 0; s < samples; ++s) {
      int64_t index = samples == count ? s : s * count / samples;
      double original = elementAt(values, index);
      double plus = 0, minus = 0;
      setElement(values, index, original + h);
      ZCC_RETURN_IF_ERROR(executor.writeBuffer(entry.param, values.data.data(), values.data.size()),
                          "gradient check");
      ZCC_RETURN_IF_ERROR(runLoss(plus), "gradient check");
      setElement(values, index, original - h);
      ZCC_RETURN_IF_ERROR(executor.writeBuffer(entry.param, values.data.data(), values.data.size()),
                          "gradient check");
      ZCC_RETURN_IF_ERROR(runLoss(minus), "gradient check");
      setElement(values, index, original);
      double numeric = (plus - minus) / (2 * h);
      double analytic = elementAt(entry.grad, index);
      double error = std::fabs(analytic - numeric);
      double scale = std::max(std::fabs(analytic), std::fabs(numeric));
      maxAbs = std::max(maxAbs, error);
      if (scale > 0)
        maxRel = std::max(maxRel, error / scale);
      if (!(error <= atol + rtol * scale)) {
        if (ok && firstFailure.empty())
          firstFailure = formatString("'%s' element %lld: analytic %.10g, numeric %.10g",
                                      entry.name.c_str(), static_cast<long long>(index),
                                      analytic, numeric);
        ok = false;
      }
    }
    ZCC_RETURN_IF_ERROR(executor.writeBuffer(entry.param, values.data.data(), values.data.size()),
                        "gradient check");
    std::printf("  %-32s %8lld %14.3e %14.3e  %s\n", entry.name.c_str(),
                static_cast<long long>(samples), maxAbs, maxRel, ok ? "ok" : "MISMATCH");
    allOk &= ok;
  }
  if (!allOk)
    return Status(StatusCode::kFailedPrecondition,
                  "gradient check failed: " + firstFailure);
  std::printf("gradient check: ok\n");
  return Status::ok();
}

Status parseGradAccum(const std::string &text,
                      std::vector<std::pair<int64_t, int64_t>> &schedule) {
  schedule.clear();
  auto bad = [&]() {
    return Status(StatusCode::kInvalidArgument,
                  "--grad-accum " + text +
                      ": expected N (micro-steps per optimizer step) or N,STEP:N,... "
                      "(the count from STEP on), with positive integers and ascending steps");
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos
                                                                     : comma - start);
    int64_t step = 1, count = 0;
    size_t colon = item.find(':');
    char *end = nullptr;
    if (schedule.empty() != (colon == std::string::npos))
      return bad();
    if (colon != std::string::npos) {
      step = std::strtoll(item.c_str(), &end, 10);
      if (end != item.c_str() + colon || step <= schedule.back().first)
        return bad();
      item = item.substr(colon + 1);
    }
    count = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || count <= 0 || count > (1 << 24))
      return bad();
    schedule.push_back({step, count});
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return Status::ok();
}

namespace {

/// Sets scalar input `name` to `value` as one element of `dtype`; `bytes`
/// is scratch space kept between steps.
Status setScalarInput(Executor &executor, const std::string &name, double value,
                      plan::DType dtype, std::vector<uint8_t> &bytes) {
  Status status = scalarBytes(value, dtype, bytes);
  if (!status.isOk())
    return status;
  return executor.setInput(name, bytes.data(), bytes.size(), dtype, {});
}

/// The value of scalar output `name`.
StatusOr<double> scalarOutput(Executor &executor, const std::string &name) {
  StatusOr<HostTensor> tensor = executor.output(name);
  if (!tensor.isOk())
    return tensor.takeStatus();
  return scalarValue(*tensor);
}

/// One optimizer step as the log and the progress lines show it.
struct StepReport {
  int64_t step;
  double loss;
  double lr;
  double lossScale;
  double gradNorm;
  bool overflow;
  int64_t accumulation;
  double tokensPerSecond;
};

struct FileCloser {
  void operator()(std::FILE *file) const { std::fclose(file); }
};

/// What a training loop holds for the whole run: the schedules, the data,
/// and rank 0's --log-json file and progress output.
struct TrainRun {
  LrSchedule schedule;
  LossScaler scaler;
  Feeder feeder;
  std::unique_ptr<std::FILE, FileCloser> log;
  bool leader;
  /// Whether a progress bar is drawn, and the steps between log lines (0:
  /// none).
  bool progress;
  int64_t printEvery;

  static StatusOr<TrainRun> create(Executor &executor, const TrainOptions &options) {
    const plan::Training &training = executor.plan().plan.training();
    StatusOr<LrSchedule> schedule =
        LrSchedule::create(training.scheduler(), training.lr(), training.beta1());
    if (!schedule.isOk())
      return schedule.takeStatus();
    StatusOr<LossScaler> scaler = LossScaler::create(training.loss_scaler());
    if (!scaler.isOk())
      return scaler.takeStatus();
    StatusOr<Feeder> feeder = Feeder::create(executor, options);
    if (!feeder.isOk())
      return feeder.takeStatus();
    const bool leader = options.rank == 0;
    std::unique_ptr<std::FILE, FileCloser> log;
    if (leader && !options.logJson.empty()) {
      log.reset(std::fopen(options.logJson.c_str(), "w"));
      if (!log)
        return makeStatus(StatusCode::kUnavailable, "cannot write --log-json %s: %s",
                          options.logJson.c_str(), std::strerror(errno));
    }
    int64_t printEvery =
        options.printEvery > 0 ? options.printEvery : training.steps_per_print();
    return TrainRun{std::move(*schedule),
                    std::move(*scaler),
                    std::move(*feeder),
                    std::move(log),
                    leader,
                    leader && ::isatty(STDERR_FILENO) != 0,
                    leader ? printEvery : 0};
  }

  /// Ends optimizer step `k` of `accumulation` micro-batches at
  /// `lossScale`: runs `grad_norm` (its output `normName` summed over the
  /// pipeline's stages through `stages`, when there is one), then drops the
  /// gradients when they overflowed (fp16) or are not finite (bf16), or else runs
  /// `optimizer_step` with the gradients unscaled, averaged and clipped.
  Status endStep(Executor &executor, const std::string &normName,
                 const std::string &scalarsName, Communicator *stages, int64_t step, int64_t k,
                 int64_t accumulation, double lossScale, StepReport &report) const {
    ZCC_RETURN_IF_ERROR(executor.run("grad_norm"), "step %lld", static_cast<long long>(step));
    StatusOr<double> normSq = scalarOutput(executor, normName);
    if (!normSq.isOk())
      return normSq.takeStatus();
    double sumSquares = *normSq;
    if (stages)
      ZCC_RETURN_IF_ERROR(
          stages->allReduce(&sumSquares, &sumSquares, 1, plan::F64, ReduceOp::kSum),
          "step %lld: summing the gradient norm over the stages", static_cast<long long>(step));
    double unscale = 1.0 / (static_cast<double>(accumulation) * lossScale);
    report.step = step;
    report.lossScale = lossScale;
    report.accumulation = accumulation;
    report.gradNorm = std::sqrt(sumSquares) * unscale;
    report.overflow = scaler.skipsNonfinite() && !std::isfinite(report.gradNorm);
    if (!report.overflow)
      ZCC_RETURN_IF_FAILED(schedule.checkStep(k));
    report.lr = schedule.lrForStep(k);
    if (report.overflow) {
      ZCC_RETURN_IF_ERROR(executor.run("zero_grads"), "step %lld", static_cast<long long>(step));
      return Status::ok();
    }
    const plan::Training &training = executor.plan().plan.training();
    double factor = unscale;
    if (training.gradient_clipping() > 0) {
      double coefficient = training.gradient_clipping() / (report.gradNorm + 1e-6);
      if (coefficient < 1)
        factor *= coefficient;
    }
    bool sgd = training.optimizer() == "sgd";
    double scalars[8] = {report.lr,
                         sgd ? training.beta1() : schedule.beta1ForStep(k),
                         schedule.beta2ForStep(k, training.beta2()),
                         training.eps(),
                         training.weight_decay(),
                         static_cast<double>(k),
                         factor,
                         training.momentum()};
    ZCC_RETURN_IF_ERROR(executor.setInput(scalarsName, scalars, sizeof scalars, plan::F64, {8}),
                        "step %lld", static_cast<long long>(step));
    ZCC_RETURN_IF_ERROR(executor.run("optimizer_step"), "step %lld",
                        static_cast<long long>(step));
    return Status::ok();
  }

  /// Writes the step's --log-json line, progress bar and log line.
  void report(const StepReport &step, int64_t steps) {
    if (log) {
      // JSON has no inf or NaN: a non-finite value is null.
      auto number = [](double value) {
        return std::isfinite(value) ? formatString("%.9g", value) : std::string("null");
      };
      std::fprintf(log.get(),
                   "{\"step\": %lld, \"loss\": %s, \"lr\": %.17g, \"loss_scale\": %.17g, "
                   "\"grad_norm\": %s, \"skipped\": %s, \"accumulation\": %lld, "
                   "\"tokens_per_s\": %.6g}\n",
                   static_cast<long long>(step.step), number(step.loss).c_str(), step.lr,
                   step.lossScale, number(step.gradNorm).c_str(),
                   step.overflow ? "true" : "false", static_cast<long long>(step.accumulation),
                   step.tokensPerSecond);
    }
    if (progress)
      drawProgress(step.step, steps, step.loss);
    if (printEvery > 0 && (step.step % printEvery == 0 || step.step == steps)) {
      if (progress)
        std::fputc('\n', stderr);
      std::printf("step %lld/%lld | loss %.6f | lr %.4e | loss scale %g | grad norm %.4f%s | "
                  "%.0f tokens/s\n",
                  static_cast<long long>(step.step), static_cast<long long>(steps), step.loss,
                  step.lr, step.lossScale, step.gradNorm,
                  step.overflow ? " | skipped (overflow)" : "", step.tokensPerSecond);
      std::fflush(stdout);
    }
  }

  /// Flushes the --log-json file, which is closed with the run.
  Status flushLog(const TrainOptions &options) {
    if (log && std::fflush(log.get()) != 0)
      return makeStatus(StatusCode::kUnavailable, "cannot write --log-json %s: %s",
                        options.logJson.c_str(), std::strerror(errno));
    return Status::ok();
  }
};

/// --save-every's checkpoints after the steps it names, and --save's at the
/// end of the run unless the last step's was just written.
struct Saver {
  const TrainOptions &options;
  std::function<Status(int64_t)> save;
  int64_t lastSaved = -1;

  Status afterStep(int64_t step) {
    if (options.saveDir.empty() || options.saveEvery <= 0 || step % options.saveEvery != 0)
      return Status::ok();
    lastSaved = step;
    return save(step).addContext(
        formatString("--save-every %lld", static_cast<long long>(options.saveEvery)));
  }
  Status atEnd(int64_t firstStep) {
    if (options.saveDir.empty() || lastSaved == options.steps || firstStep > options.steps)
      return Status::ok();
    return save(options.steps);
  }
};

/// Where a run starts: step 1, or the step after --resume's checkpoint.
struct RunStart {
  int64_t stepStart = 0, applied = 0, firstStep = 1;
};

/// --resume: the rank's buffers (its rows, block `shardIndex`, of the
/// partitioned ones), the loss scaler and the loop's position.
StatusOr<RunStart> resumeRun(Executor &executor, const TrainOptions &options, TrainRun &run,
                             int shardIndex) {
  RunStart start;
  if (options.resumeDir.empty())
    return start;
  StatusOr<TrainState> resumed = resumeCheckpoint(executor, options.resumeDir, shardIndex);
  if (!resumed.isOk())
    return resumed.takeStatus();
  ZCC_RETURN_IF_ERROR(run.scaler.restore(resumed->scaler), "--resume %s",
                      options.resumeDir.c_str());
  start.stepStart = resumed->samples;
  start.applied = resumed->applied;
  start.firstStep = resumed->step + 1;
  if (run.leader)
    std::printf("resumed from step %lld of %s\n", static_cast<long long>(resumed->step),
                options.resumeDir.c_str());
  return start;
}

/// --save: the checkpoint of `step`, every rank its part.
Status saveRun(Executor &executor, const TrainOptions &options, TrainRun &run, int shardIndex,
               int64_t step, int64_t applied, int64_t stepStart) {
  TrainState state;
  state.step = step;
  state.applied = applied;
  state.samples = stepStart;
  state.scaler = run.scaler.state();
  ZCC_RETURN_IF_ERROR(saveCheckpoint(executor, options.saveDir, state, options.rank, shardIndex,
                                     options.communicator),
                      "step %lld", static_cast<long long>(step));
  if (run.leader)
    std::printf("saved step %lld to %s\n", static_cast<long long>(step),
                options.saveDir.c_str());
  return Status::ok();
}

/// The training loop of one rank of a pipeline plan: each step runs the
/// stage's schedule (its forward and backward passes, sends and receives,
/// in the compiled order), then the stage's gradient norm, summed over the
/// stages, and its optimizer step. The loss is the last stage's.
Status trainPipeline(Executor &executor, const TrainOptions &options) {
  const plan::Plan &plan = executor.plan().plan;
  const plan::Training &training = plan.training();
  const plan::Pipeline &pipeline = plan.pipeline();
  if (options.stage < 0 || options.stage >= pipeline.stages_size())
    return makeStatus(StatusCode::kInvalidArgument, "the pipeline has no stage %d",
                      options.stage);
  if (!options.gradAccum.empty())
    return makeStatus(StatusCode::kInvalidArgument,
                      "--grad-accum: a pipeline's micro-batch count is its compiled schedule's "
                      "(pipeline.micro_batches = %lld); recompile to change it",
                      static_cast<long long>(pipeline.micro_batches()));
  for (const char *program : {"grad_norm", "optimizer_step", "zero_grads"})
    if (!executor.hasProgram(program))
      return Status(StatusCode::kInvalidArgument,
                    std::string("the pipeline stage has no program '") + program +
                        "'; recompile the plan with this zcc");
  StatusOr<TrainRun> run = TrainRun::create(executor, options);
  if (!run.isOk())
    return run.takeStatus();

  const int64_t dataParallel = std::max<int64_t>(1, training.data_parallel_size());
  const int dataRank = static_cast<int>(options.rank % dataParallel);
  const std::string lossName = bindingName(plan, training.loss());
  const bool hasLoss = !lossName.empty();
  // The forward passes that compute the loss (under the interleaved
  // schedule the last stage also runs earlier chunks' passes).
  const std::set<std::string> lossWriters = programsUsing(plan, {training.loss()}, /*writes=*/true);
  bool hasData = false;
  std::set<uint32_t> dataBuffers;
  for (const plan::Binding &input : training.data_inputs()) {
    hasData |= executor.hasInput(input.name());
    dataBuffers.insert(input.buffer());
  }
  // The forward passes that read the data (under the interleaved schedule
  // the first stage also runs later chunks' passes, which do not).
  const std::set<std::string> dataReaders = programsUsing(plan, dataBuffers, /*writes=*/false);
  const bool hasSeed = executor.hasInput("zcc.loss_scale");
  const plan::DType lossScaleDType = plan.buffers(training.loss_scale()).dtype();
  BatchLayout layout;
  layout.dataParallelSize = dataParallel;
  layout.microBatchSize = run->feeder.rows;
  const int64_t accumulation = pipeline.micro_batches();
  const auto &steps = pipeline.stages(options.stage).steps();

  // Each rank holds its stage's tensors, the partitioned ones as block
  // `dataRank` of their rows; a checkpoint names the rank file of each.
  StatusOr<RunStart> start = resumeRun(executor, options, *run, dataRank);
  if (!start.isOk())
    return start.takeStatus();
  int64_t stepStart = start->stepStart, applied = start->applied, firstStep = start->firstStep;
  if (executor.hasProgram("init"))
    ZCC_RETURN_IF_ERROR(executor.run("init"), "while initialising the training state");
  // Parameters read on other stages than their owner's (tied weights)
  // start from the owner's.
  const bool sync = executor.hasProgram("sync");
  if (sync)
    ZCC_RETURN_IF_ERROR(executor.run("sync"), "while sending tied parameters");
  Saver saver{options, [&](int64_t step) {
                return saveRun(executor, options, *run, dataRank, step, applied, stepStart);
              }};
  std::vector<uint8_t> scalarBuffer;
  // The schedule's measured bubble: over the steps after the first (its
  // warm-up), the share of the schedule's wall time this rank spent
  // outside its forward, backward and weight passes, waiting on its
  // neighbours in its sends and receives.
  double scheduleSeconds = 0, passSeconds = 0;
  auto started = std::chrono::steady_clock::now();
  for (int64_t step = firstStep; step <= options.steps; ++step) {
    auto stepBegin = std::chrono::steady_clock::now();
    const bool measured = step > firstStep || firstStep == options.steps;
    double lossScale = run->scaler.scale();
    if (hasSeed)
      ZCC_RETURN_IF_ERROR(
          setScalarInput(executor, "zcc.loss_scale", lossScale, lossScaleDType, scalarBuffer),
          "step %lld", static_cast<long long>(step));
    double lossSum = 0;
    for (const plan::PipelineStep &instruction : steps) {
      bool forward = instruction.kind() == plan::PipelineStep::FORWARD;
      int64_t first = layout.sampleIndex(stepStart, instruction.micro_batch(), dataRank, 0);
      if (forward && hasData &&
          (dataReaders.empty() || dataReaders.count(instruction.program())))
        ZCC_RETURN_IF_ERROR(run->feeder.feed(executor, first), "step %lld",
                            static_cast<long long>(step));
      else
        // A backward program applies its micro-batch's masks again.
        ZCC_RETURN_IF_ERROR(run->feeder.keyDropout(executor, first), "step %lld",
                            static_cast<long long>(step));
      auto passBegin = std::chrono::steady_clock::now();
      ZCC_RETURN_IF_ERROR(executor.run(instruction.program()), "step %lld, micro-batch %lld",
                          static_cast<long long>(step),
                          static_cast<long long>(instruction.micro_batch()));
      if (measured && (forward || instruction.kind() == plan::PipelineStep::BACKWARD ||
                       instruction.kind() == plan::PipelineStep::BACKWARD_WEIGHTS))
        passSeconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - passBegin).count();
      if (forward && hasLoss &&
          (lossWriters.empty() || lossWriters.count(instruction.program()))) {
        StatusOr<double> loss = scalarOutput(executor, lossName);
        if (!loss.isOk())
          return loss.takeStatus();
        lossSum += *loss;
      }
    }
    if (measured)
      scheduleSeconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - stepBegin).count();
    // The global norm: each stage's sum of squares, summed over the stages.
    StepReport report{};
    Status ended = run->endStep(executor, "zcc.grad_norm_sq", "zcc.optimizer_scalars",
                                options.pipelineCommunicator, step, applied + 1, accumulation,
                                lossScale, report);
    if (!ended.isOk())
      return ended;
    if (!report.overflow) {
      if (sync)
        ZCC_RETURN_IF_ERROR(executor.run("sync"), "step %lld: sending tied parameters",
                            static_cast<long long>(step));
      ++applied;
    }
    Status updated = run->scaler.update(report.overflow);
    if (!updated.isOk())
      return updated.addContext(formatString("at step %lld", static_cast<long long>(step)));
    stepStart += layout.samplesPerStep(accumulation);

    // The step's loss: the last stage's mean over its micro-batches,
    // averaged over the data-parallel ranks (the other stages add 0).
    double loss = hasLoss ? lossSum / static_cast<double>(accumulation) : 0.0;
    if (options.communicator) {
      ZCC_RETURN_IF_ERROR(
          options.communicator->allReduce(&loss, &loss, 1, plan::F64, ReduceOp::kSum),
          "step %lld: gathering the loss", static_cast<long long>(step));
      loss /= static_cast<double>(dataParallel);
    }
    auto now = std::chrono::steady_clock::now();
    double seconds = std::chrono::duration<double>(now - stepBegin).count();
    double tokens = static_cast<double>(accumulation * run->feeder.rows *
                                        run->feeder.tokensPerRow * dataParallel);
    report.loss = loss;
    report.tokensPerSecond = seconds > 0 ? tokens / seconds : 0;
    run->report(report, options.steps);
    ZCC_RETURN_IF_ERROR(saver.afterStep(step), "step %lld", static_cast<long long>(step));
    endProfiledStep(executor, options, step, firstStep);
  }
  ZCC_RETURN_IF_ERROR(saver.atEnd(firstStep), "at the end of the run");
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // Each stage's idle share (its data-parallel ranks' mean) and the
  // stages' mean, next to the compiler's prediction.
  const int world = options.communicator ? options.communicator->size() : 1;
  std::vector<double> idle(static_cast<size_t>(world), 0.0);
  if (scheduleSeconds > 0)
    idle[static_cast<size_t>(options.rank)] = std::max(0.0, 1 - passSeconds / scheduleSeconds);
  if (options.communicator)
    ZCC_RETURN_IF_ERROR(options.communicator->allReduce(idle.data(), idle.data(), world,
                                                        plan::F64, ReduceOp::kSum),
                        "gathering the stages' idle shares");
  if (run->leader)
    std::printf("trained %lld steps (%lld applied in all) in %.2f s on %d pipeline stages\n",
                static_cast<long long>(std::max<int64_t>(0, options.steps - firstStep + 1)),
                static_cast<long long>(applied), total, pipeline.stages_size());
  if (run->leader && scheduleSeconds > 0) {
    std::string stages;
    double mean = 0;
    for (int s = 0; s < pipeline.stages_size(); ++s) {
      double share = 0;
      for (int64_t d = 0; d < dataParallel; ++d)
        share += idle[static_cast<size_t>(s * dataParallel + d)];
      share /= static_cast<double>(dataParallel);
      mean += share / pipeline.stages_size();
      stages += formatString("%s%.3f", s ? " " : "", share);
    }
    std::printf("measured bubble fraction %.3f (the stages' mean share of the schedule outside "
                "their passes: %s; predicted %.3f)\n",
                mean, stages.c_str(), pipeline.bubble_fraction());
  }
  Status flushed = run->flushLog(options);
  if (!flushed.isOk())
    return flushed;
  return reportProfile(executor, options, firstStep, /*pipelined=*/true);
}

} // namespace

Status train(Executor &executor, const TrainOptions &options) {
  const plan::Plan &plan = executor.plan().plan;
  const plan::Training &training = plan.training();
  if (plan.has_pipeline())
    return trainPipeline(executor, options);
  for (const char *program : {"micro_step", "grad_norm", "optimizer_step", "zero_grads"})
    if (!executor.hasProgram(program))
      return Status(StatusCode::kInvalidArgument,
                    std::string("the training plan has no program '") + program +
                        "'; recompile it with this zcc");
  // Gradients that live for one step are overwritten by every micro-step:
  // such a plan cannot accumulate.
  if (!options.gradAccum.empty())
    for (const plan::Buffer &buffer : plan.buffers())
      if (buffer.step_local())
        for (const auto &[from, count] : options.gradAccum)
          if (count != 1)
            return makeStatus(
                StatusCode::kInvalidArgument,
                "--grad-accum %lld: this plan was compiled with gradient_accumulation_steps 1, "
                "so each micro-step overwrites its gradients ('%s', ...) instead of adding to "
                "them; recompile with zcc --accumulating-gradients (or with "
                "gradient_accumulation_steps %lld) to accumulate",
                static_cast<long long>(count), buffer.name().c_str(),
                static_cast<long long>(count));
  StatusOr<TrainRun> run = TrainRun::create(executor, options);
  if (!run.isOk())
    return run.takeStatus();

  const std::string lossScaleName = bindingName(plan, training.loss_scale());
  const std::string scalarsName = bindingName(plan, training.optimizer_scalars());
  const std::string lossName = bindingName(plan, training.loss());
  const std::string normName = bindingName(plan, training.grad_norm_sq());
  const plan::DType lossScaleDType = plan.buffers(training.loss_scale()).dtype();
  BatchLayout layout;
  layout.dataParallelSize = training.data_parallel_size();
  layout.microBatchSize = run->feeder.rows;

  StatusOr<RunStart> start = resumeRun(executor, options, *run, /*shardIndex=*/options.rank);
  if (!start.isOk())
    return start.takeStatus();
  int64_t stepStart = start->stepStart, applied = start->applied, firstStep = start->firstStep;
  // Derived state (ZeRO's master rows) from the loaded or resumed weights.
  if (executor.hasProgram("init"))
    ZCC_RETURN_IF_ERROR(executor.run("init"), "while initialising the training state");
  Saver saver{options, [&](int64_t step) {
                return saveRun(executor, options, *run, /*shardIndex=*/options.rank, step,
                               applied, stepStart);
              }};
  std::vector<uint8_t> scalarBuffer;
  auto started = std::chrono::steady_clock::now();
  for (int64_t step = firstStep; step <= options.steps; ++step) {
    auto stepBegin = std::chrono::steady_clock::now();
    int64_t accumulation = accumulationFor(options, training.gradient_accumulation_steps(), step);
    double lossScale = run->scaler.scale();
    ZCC_RETURN_IF_ERROR(
        setScalarInput(executor, lossScaleName, lossScale, lossScaleDType, scalarBuffer),
        "step %lld", static_cast<long long>(step));
    double lossSum = 0;
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      int64_t first = layout.sampleIndex(stepStart, micro, options.rank, 0);
      ZCC_RETURN_IF_ERROR(run->feeder.feed(executor, first), "step %lld",
                          static_cast<long long>(step));
      ZCC_RETURN_IF_ERROR(executor.run("micro_step"), "step %lld",
                          static_cast<long long>(step));
      StatusOr<double> loss = scalarOutput(executor, lossName);
      if (!loss.isOk())
        return loss.takeStatus();
      lossSum += *loss;
    }
    StepReport report{};
    Status ended = run->endStep(executor, normName, scalarsName, /*stages=*/nullptr, step,
                                applied + 1, accumulation, lossScale, report);
    if (!ended.isOk())
      return ended;
    if (!report.overflow)
      ++applied;
    Status updated = run->scaler.update(report.overflow);
    if (!updated.isOk())
      return updated.addContext(formatString("at step %lld", static_cast<long long>(step)));
    stepStart += layout.samplesPerStep(accumulation);

    auto now = std::chrono::steady_clock::now();
    double seconds = std::chrono::duration<double>(now - stepBegin).count();
    double tokens =
        static_cast<double>(accumulation * run->feeder.rows * run->feeder.tokensPerRow *
                            std::max<int64_t>(1, training.data_parallel_size()));
    double loss = lossSum / static_cast<double>(accumulation);
    if (options.communicator) {
      // The step's loss is the mean over the ranks as well.
      ZCC_RETURN_IF_ERROR(
          options.communicator->allReduce(&loss, &loss, 1, plan::F64, ReduceOp::kAverage),
          "step %lld: averaging the loss over the ranks", static_cast<long long>(step));
    }
    report.loss = loss;
    report.tokensPerSecond = seconds > 0 ? tokens / seconds : 0;
    run->report(report, options.steps);
    ZCC_RETURN_IF_ERROR(saver.afterStep(step), "step %lld", static_cast<long long>(step));
    endProfiledStep(executor, options, step, firstStep);
  }
  ZCC_RETURN_IF_ERROR(saver.atEnd(firstStep), "at the end of the run");
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (run->leader)
    std::printf("trained %lld steps (%lld applied in all) in %.2f s\n",
                static_cast<long long>(std::max<int64_t>(0, options.steps - firstStep + 1)),
                static_cast<long long>(applied), total);
  Status flushed = run->flushLog(options);
  if (!flushed.isOk())
    return flushed;
  return reportProfile(executor, options, firstStep, /*pipelined=*/false);
}

std::set<std::string> programsUsing(const plan::Plan &plan, const std::set<uint32_t> &ids,
                                    bool writes) {
  std::set<std::string> programs;
  for (const plan::Program &program : plan.programs())
    for (const plan::Instruction &instruction : program.instructions())
      for (uint32_t id : writes ? instruction.outputs() : instruction.inputs())
        if (ids.count(id))
          programs.insert(program.name());
  return programs;
}

} // namespace zcc
