//===- CudaGraphTest.cpp - Programs replayed as CUDA graphs ---------------===//
//
// From a program's second run on, the cuda backend replays it as a graph
// captured from its launches. A replay must compute what launching the
// instructions one by one computes, bit for bit: with the inputs of that
// run (the graph reads the same arena addresses), across the plan's
// streams and events, and on state the program updates in place. Runs
// only where a GPU is present.
//
//===----------------------------------------------------------------------===//

#include "runtime/Executor.h"
#include "test/Runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <cstring>

namespace zcc {
namespace {

using test::PlanBuilder;

/// Whether the cuda backend loads and finds a device here (the executor
/// loads it as zrun does, ZCC_CUDA_PLUGIN naming the plugin).
bool haveDevice() {
  StatusOr<std::unique_ptr<Backend>> backend = createBackend("cuda");
  return backend.isOk();
}

/// A record_event or wait_event of `event` on `stream`.
void addEvent(PlanBuilder &builder, const char *kernel, int64_t event, uint32_t stream) {
  plan::Instruction &instruction = builder.addInstruction(kernel, {}, {}, "");
  (*instruction.mutable_attributes())["event"].set_i(event);
  instruction.set_stream(stream);
}

/// y = (x + c) * (x + c) + (x + c), the product on stream 1 between two
/// events, so that the graph holds a fork and a join.
plan::Plan twoStreamPlan() {
  PlanBuilder builder;
  std::vector<float> c(256);
  for (size_t i = 0; i < c.size(); ++i)
    c[i] = 0.25f * static_cast<float>(i) - 7.f;
  uint32_t x = builder.addBuffer("x", plan::INPUT, plan::F32, {256});
  uint32_t constant = builder.addConstant("c", {256}, c);
  uint32_t sum = builder.addBuffer("sum", plan::ACTIVATION, plan::F32, {256});
  uint32_t square = builder.addBuffer("square", plan::ACTIVATION, plan::F32, {256});
  uint32_t y = builder.addBuffer("y", plan::OUTPUT, plan::F32, {256});
  builder.addInput("x", x);
  builder.addOutput("y", y);
  builder.addInstruction("add", {x, constant}, {sum}, "/Add");
  addEvent(builder, "record_event", 0, 0);
  addEvent(builder, "wait_event", 0, 1);
  builder.addInstruction("mul", {sum, sum}, {square}, "/Mul").set_stream(1);
  addEvent(builder, "record_event", 1, 1);
  addEvent(builder, "wait_event", 1, 0);
  builder.addInstruction("add", {square, sum}, {y}, "/Add2");
  return builder.plan();
}

/// y = x + w, where w lives in the NVMe swap file (offload_param "nvme"):
/// stream 1 swaps it into a host staging buffer (a host call in the
/// stream's order) and fetches it to the device; stream 0 adds.
plan::Plan swappedFetchPlan() {
  PlanBuilder builder;
  uint32_t x = builder.addBuffer("x", plan::INPUT, plan::F32, {256});
  uint32_t fetched = builder.addBuffer("w.fetched", plan::ACTIVATION, plan::F32, {256});
  uint32_t y = builder.addBuffer("y", plan::OUTPUT, plan::F32, {256});
  uint32_t staged = builder.addBuffer("w.staged", plan::ACTIVATION, plan::F32, {256});
  uint32_t file = builder.addBuffer("w", plan::OPTIMIZER_STATE, plan::F32, {256});
  builder.addInput("x", x);
  builder.addOutput("y", y);
  addEvent(builder, "record_event", 0, 0);
  addEvent(builder, "wait_event", 0, 1);
  builder.addInstruction("swap_in", {file}, {staged}, "w").set_stream(1);
  builder.addInstruction("fetch", {staged}, {fetched}, "w").set_stream(1);
  addEvent(builder, "record_event", 1, 1);
  addEvent(builder, "wait_event", 1, 0);
  builder.addInstruction("add", {x, fetched}, {y}, "/Add");
  plan::Plan plan = builder.plan();
  // The staging buffer in the host arena, w in the swap file.
  plan.mutable_buffers(static_cast<int>(staged))->set_space(plan::HOST);
  plan.mutable_buffers(static_cast<int>(staged))->set_offset(0);
  plan.mutable_buffers(static_cast<int>(file))->set_space(plan::NVME);
  plan.mutable_buffers(static_cast<int>(file))->set_offset(0);
  plan.set_host_arena_bytes(1024);
  plan.set_nvme_bytes(4096);
  plan.set_arena_bytes(3 * 1024);
  return plan;
}

std::unique_ptr<Executor> instantiate(const plan::Plan &plan, bool graphs,
                                      const std::string &backend = "cuda") {
  StatusOr<LoadedPlan> loaded = parsePlanFile(encodePlanFile(plan, "t"), "test.bin");
  EXPECT_TRUE(loaded.isOk()) << loaded.status().toString();
  if (!loaded.isOk())
    return nullptr;
  ExecutorOptions options;
  options.backend = backend;
  options.graphs = graphs;
  options.nvmePath = ::testing::TempDir();
  options.weights.source = WeightSource::kRandom;
  StatusOr<std::unique_ptr<Executor>> executor = Executor::instantiate(std::move(*loaded), options);
  EXPECT_TRUE(executor.isOk()) << executor.status().toString();
  return executor.isOk() ? std::move(*executor) : nullptr;
}

std::vector<float> floats(const HostTensor &tensor) {
  std::vector<float> values(tensor.data.size() / sizeof(float));
  std::memcpy(values.data(), tensor.data.data(), tensor.data.size());
  return values;
}

Status setFloats(Executor &executor, const std::string &name, const std::vector<float> &values) {
  return executor.setInput(name, values.data(), values.size() * sizeof(float), plan::F32,
                           {static_cast<int64_t>(values.size())});
}

TEST(CudaGraphs, ReplayReadsEachRunsInputsAcrossStreams) {
  if (!haveDevice())
    GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<Executor> replayed = instantiate(twoStreamPlan(), /*graphs=*/true);
  std::unique_ptr<Executor> launched = instantiate(twoStreamPlan(), /*graphs=*/false);
  ASSERT_TRUE(replayed && launched);
  for (int run = 0; run < 4; ++run) {
    std::vector<float> x(256);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(run * 3 + 1) * 0.5f - static_cast<float>(i % 17);
    std::vector<float> expected(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      volatile float sum = x[i] + (0.25f * static_cast<float>(i) - 7.f);
      volatile float square = sum * sum;
      expected[i] = square + sum;
    }
    for (Executor *executor : {replayed.get(), launched.get()}) {
      ASSERT_TRUE(setFloats(*executor, "x", x).isOk());
      Status status = executor->run("infer");
      ASSERT_TRUE(status.isOk()) << "run " << run << ": " << status.toString();
      StatusOr<HostTensor> y = executor->output("y");
      ASSERT_TRUE(y.isOk()) << y.status().toString();
      EXPECT_EQ(floats(*y), expected) << "run " << run << ", graphs "
                                      << (executor == replayed.get() ? "on" : "off");
    }
  }
  EXPECT_EQ(replayed->graphSummary(), "program 'infer': replayed as a graph of 7 instructions\n");
  EXPECT_EQ(launched->graphSummary(),
            "program 'infer': launched instruction by instruction (no graphs)\n");
}

/// Runs swappedFetchPlan four times with new contents of w in the swap file
/// each time: each run must read the file as it is then (on cuda, from the
/// second run on, through the graph's host node).
void checkSwappedFetch(Executor &executor) {
  const uint32_t file = 4; // "w" (swappedFetchPlan)
  for (int run = 0; run < 4; ++run) {
    std::vector<float> x(256), w(256), expected(256);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(i % 13) - 6.f;
      w[i] = static_cast<float>(run * 100) + 0.5f * static_cast<float>(i);
      expected[i] = x[i] + w[i];
    }
    ASSERT_TRUE(executor.writeBuffer(file, w.data(), w.size() * sizeof(float)).isOk());
    ASSERT_TRUE(setFloats(executor, "x", x).isOk());
    Status status = executor.run("infer");
    ASSERT_TRUE(status.isOk()) << "run " << run << ": " << status.toString();
    StatusOr<HostTensor> y = executor.output("y");
    ASSERT_TRUE(y.isOk()) << y.status().toString();
    EXPECT_EQ(floats(*y), expected) << "run " << run;
  }
}

TEST(SwappedFetch, ReadsTheFileAtEachRunOnTheCpu) {
  std::unique_ptr<Executor> executor = instantiate(swappedFetchPlan(), /*graphs=*/true, "cpu");
  ASSERT_TRUE(executor);
  checkSwappedFetch(*executor);
}

TEST(CudaGraphs, SwapInOnACopyStreamIsAHostNodeOfTheGraph) {
  if (!haveDevice())
    GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<Executor> replayed = instantiate(swappedFetchPlan(), /*graphs=*/true);
  ASSERT_TRUE(replayed);
  checkSwappedFetch(*replayed);
  EXPECT_EQ(replayed->graphSummary(), "program 'infer': replayed as a graph of 7 instructions\n");
}

/// acc += x in place: each run depends on the one before it.
plan::Plan accumulatePlan() {
  PlanBuilder builder;
  uint32_t x = builder.addBuffer("x", plan::INPUT, plan::F32, {256});
  uint32_t acc = builder.addBuffer("acc", plan::OPTIMIZER_STATE, plan::F32, {256});
  builder.addInput("x", x);
  builder.addInstruction("add", {acc, x}, {acc}, "/Add");
  return builder.plan();
}

/// Starts accumulatePlan's program `runs` times without waiting (as a
/// pipeline's steps are started), then reads acc: the read must wait for
/// every run, and the runs must have added x in order, each to the sum
/// of those before it.
void checkStartedRuns(Executor &executor, int runs) {
  const uint32_t acc = 1; // accumulatePlan
  std::vector<float> zeros(256, 0.f), x(256), expected(256, 0.f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.5f * static_cast<float>(i % 7) - 1.25f;
  ASSERT_TRUE(executor.writeBuffer(acc, zeros.data(), zeros.size() * sizeof(float)).isOk());
  ASSERT_TRUE(setFloats(executor, "x", x).isOk());
  for (int run = 0; run < runs; ++run) {
    Status status = executor.start("infer");
    ASSERT_TRUE(status.isOk()) << "run " << run << ": " << status.toString();
    for (size_t i = 0; i < x.size(); ++i)
      expected[i] += x[i];
  }
  StatusOr<HostTensor> sum = executor.readBuffer(acc);
  ASSERT_TRUE(sum.isOk()) << sum.status().toString();
  EXPECT_EQ(floats(*sum), expected);
  // Nothing is left running; finish() again is a no-op.
  EXPECT_TRUE(executor.finish().isOk());
  EXPECT_TRUE(executor.finish().isOk());
}

TEST(StartedPrograms, RunInOrderOnTheCpu) {
  std::unique_ptr<Executor> executor = instantiate(accumulatePlan(), /*graphs=*/true, "cpu");
  ASSERT_TRUE(executor);
  checkStartedRuns(*executor, 5);
}

TEST(CudaGraphs, StartedReplaysRunInOrderAndReadsWaitForThem) {
  if (!haveDevice())
    GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<Executor> executor = instantiate(accumulatePlan(), /*graphs=*/true);
  ASSERT_TRUE(executor);
  // The first run launches, the second captures, the rest replay unwaited.
  checkStartedRuns(*executor, 200);
  EXPECT_EQ(executor->graphSummary(), "program 'infer': replayed as a graph of 1 instructions\n");
}

/// PlanTestUtil's training plan, its fills given the value the kernel needs
/// (the loader does not check attributes, the kernels do).
plan::Plan runnableTrainingPlan() {
  plan::Plan plan = test::trainingPlan();
  for (plan::Program &program : *plan.mutable_programs())
    for (plan::Instruction &instruction : *program.mutable_instructions())
      if (instruction.kernel() == "fill")
        (*instruction.mutable_attributes())["value"].set_f(0.0);
  return plan;
}

TEST(CudaGraphs, TrainingStateUpdatedInPlaceMatchesLaunches) {
  if (!haveDevice())
    GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<Executor> replayed = instantiate(runnableTrainingPlan(), /*graphs=*/true);
  std::unique_ptr<Executor> launched = instantiate(runnableTrainingPlan(), /*graphs=*/false);
  ASSERT_TRUE(replayed && launched);
  const uint32_t parameter = 3, gradient = 8; // w and w.grad (PlanTestUtil.h)
  float lossScale = 1.f;
  for (Executor *executor : {replayed.get(), launched.get()})
    ASSERT_TRUE(executor->setInput("zcc.loss_scale", &lossScale, sizeof(float), plan::F32, {})
                    .isOk());
  // Three optimizer steps of two micro-steps: the gradient accumulates in
  // place and the weights move, so each replay starts from new state.
  for (int step = 0; step < 3; ++step) {
    for (int micro = 0; micro < 2; ++micro) {
      float base = static_cast<float>(step * 2 + micro);
      for (Executor *executor : {replayed.get(), launched.get()}) {
        ASSERT_TRUE(setFloats(*executor, "x", {1 + base, 2 - base, 0.5f * base}).isOk());
        ASSERT_TRUE(setFloats(*executor, "y", {base, -1, 2}).isOk());
        Status status = executor->run("micro_step");
        ASSERT_TRUE(status.isOk()) << status.toString();
      }
      StatusOr<HostTensor> mine = replayed->readBuffer(gradient);
      StatusOr<HostTensor> reference = launched->readBuffer(gradient);
      ASSERT_TRUE(mine.isOk() && reference.isOk());
      EXPECT_EQ(floats(*mine), floats(*reference)) << "step " << step << " micro " << micro;
    }
    // lr, beta1, beta2, eps, weight_decay, step (1-based), grad_scale,
    // momentum: written each step, as zrun writes them, so each replay of
    // the optimizer step must read the new ones.
    std::vector<double> scalars = {1e-3 * (step + 1), 0.9, 0.999, 1e-8, 0.01,
                                   static_cast<double>(step + 1), 1.0, 0.0};
    for (Executor *executor : {replayed.get(), launched.get()}) {
      ASSERT_TRUE(executor
                      ->setInput("zcc.optimizer_scalars", scalars.data(),
                                 scalars.size() * sizeof(double), plan::F64, {8})
                      .isOk());
      for (const char *program : {"grad_norm", "optimizer_step"}) {
        Status status = executor->run(program);
        ASSERT_TRUE(status.isOk()) << program << ": " << status.toString();
      }
    }
    StatusOr<HostTensor> mine = replayed->readBuffer(parameter);
    StatusOr<HostTensor> reference = launched->readBuffer(parameter);
    ASSERT_TRUE(mine.isOk() && reference.isOk());
    EXPECT_EQ(floats(*mine), floats(*reference)) << "step " << step;
  }
  std::string summary = replayed->graphSummary();
  for (const char *program : {"micro_step", "grad_norm", "optimizer_step"})
    EXPECT_NE(summary.find(std::string("program '") + program + "': replayed as a graph"),
              std::string::npos)
        << summary;
}

} // namespace
} // namespace zcc
