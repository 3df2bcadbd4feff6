//===- ExecutorProfileTest.cpp - Timing every instruction -----------------===//
//
// ExecutorOptions::profile on the cpu backend: one counter per instruction
// of every program, counting each run; resetProfile() zeroes them; the
// results are the same with and without profiling. And zrun --profile: the
// tables it prints, and the mistakes it refuses.
//
//===----------------------------------------------------------------------===//

#include "PlanTestUtil.h"
#include "RunTool.h"

#include "runtime/Data/Npy.h"
#include "runtime/Executor.h"


#include <cstring>

namespace zcc {
namespace {

using test::PlanBuilder;
using test::TempDir;

/// Two programs: "infer" is y = (x + c) @ w (c and w constants) with an
/// event between two streams, so that both kinds of sync are timed, and
/// "double" is d = x + x.
plan::Plan twoProgramPlan() {
  PlanBuilder builder;
  uint32_t x = builder.addBuffer("x", plan::INPUT, plan::F32, {2, 3});
  uint32_t c = builder.addConstant("c", {2, 3}, {10, 20, 30, 40, 50, 60});
  uint32_t w = builder.addConstant("w", {3, 2}, {1, 2, 3, 4, 5, 6});
  uint32_t sum = builder.addBuffer("sum", plan::ACTIVATION, plan::F32, {2, 3});
  uint32_t y = builder.addBuffer("y", plan::OUTPUT, plan::F32, {2, 2});
  uint32_t d = builder.addBuffer("d", plan::OUTPUT, plan::F32, {2, 3});
  builder.addInput("x", x);
  builder.addOutput("y", y);
  builder.addOutput("d", d);
  builder.addInstruction("add", {x, c}, {sum}, "/Add");
  plan::Instruction &record = builder.addInstruction("record_event", {}, {}, "");
  (*record.mutable_attributes())["event"].set_i(0);
  plan::Instruction &wait = builder.addInstruction("wait_event", {}, {}, "");
  (*wait.mutable_attributes())["event"].set_i(0);
  wait.set_stream(1);
  builder.addInstruction("matmul", {sum, w}, {y}, "/MatMul").set_stream(1);
  builder.addInstruction("add", {x, x}, {d}, "/Double", "double");
  return builder.plan();
}

std::unique_ptr<Executor> instantiate(const plan::Plan &plan, bool profile) {
  StatusOr<LoadedPlan> loaded = parsePlanFile(encodePlanFile(plan, "t"), "test.bin");
  EXPECT_TRUE(loaded.isOk()) << loaded.status().toString();
  if (!loaded.isOk())
    return nullptr;
  ExecutorOptions options;
  options.profile = profile;
  StatusOr<std::unique_ptr<Executor>> executor = Executor::instantiate(std::move(*loaded), options);
  EXPECT_TRUE(executor.isOk()) << executor.status().toString();
  return executor.isOk() ? std::move(*executor) : nullptr;
}

/// Runs "infer" `runs` times and "double" once on x = [[1, 2, 3], [4, 5,
/// 6]]; returns y and d.
std::pair<HostTensor, HostTensor> runBoth(Executor &executor, int runs) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  EXPECT_TRUE(executor.setInput("x", x.data(), x.size() * sizeof(float), plan::F32, {2, 3}).isOk());
  for (int i = 0; i < runs; ++i) {
    Status status = executor.run("infer");
    EXPECT_TRUE(status.isOk()) << status.toString();
  }
  Status status = executor.run("double");
  EXPECT_TRUE(status.isOk()) << status.toString();
  StatusOr<HostTensor> y = executor.output("y");
  StatusOr<HostTensor> d = executor.output("d");
  EXPECT_TRUE(y.isOk() && d.isOk());
  return {y.isOk() ? *y : HostTensor(), d.isOk() ? *d : HostTensor()};
}

TEST(ExecutorProfile, OneCounterPerInstructionCountingEachRun) {
  plan::Plan plan = twoProgramPlan();
  std::unique_ptr<Executor> executor = instantiate(plan, /*profile=*/true);
  ASSERT_TRUE(executor);
  EXPECT_TRUE(executor->profiling());
  runBoth(*executor, 3);
  const std::vector<ProgramProfile> &profile = executor->profile();
  ASSERT_EQ(profile.size(), 2u);
  const uint64_t expectedCalls[] = {3, 1};
  for (int p = 0; p < 2; ++p) {
    ASSERT_EQ(profile[p].program, &executor->plan().plan.programs(p));
    ASSERT_EQ(profile[p].instructions.size(),
              static_cast<size_t>(plan.programs(p).instructions_size()));
    for (const InstructionProfile &counter : profile[p].instructions) {
      EXPECT_EQ(counter.calls, expectedCalls[p]) << plan.programs(p).name();
      EXPECT_GE(counter.seconds, 0.0);
    }
  }
  // The matmul did take time, so the times are measured, not left at zero.
  double infer = 0;
  for (const InstructionProfile &counter : profile[0].instructions)
    infer += counter.seconds;
  EXPECT_GT(infer, 0.0);
}

TEST(ExecutorProfile, ResetZeroesEveryCounter) {
  std::unique_ptr<Executor> executor = instantiate(twoProgramPlan(), /*profile=*/true);
  ASSERT_TRUE(executor);
  runBoth(*executor, 2);
  executor->resetProfile();
  for (const ProgramProfile &program : executor->profile())
    for (const InstructionProfile &counter : program.instructions) {
      EXPECT_EQ(counter.calls, 0u);
      EXPECT_EQ(counter.seconds, 0.0);
    }
  // And counting starts again from there.
  runBoth(*executor, 1);
  for (const ProgramProfile &program : executor->profile())
    for (const InstructionProfile &counter : program.instructions)
      EXPECT_EQ(counter.calls, 1u);
}

TEST(ExecutorProfile, OffCountsNothing) {
  std::unique_ptr<Executor> executor = instantiate(twoProgramPlan(), /*profile=*/false);
  ASSERT_TRUE(executor);
  EXPECT_FALSE(executor->profiling());
  runBoth(*executor, 2);
  ASSERT_EQ(executor->profile().size(), 2u);
  for (const ProgramProfile &program : executor->profile())
    for (const InstructionProfile &counter : program.instructions)
      EXPECT_EQ(counter.calls, 0u);
}

TEST(ExecutorProfile, ResultsAreTheSameWithAndWithout) {
  std::unique_ptr<Executor> plain = instantiate(twoProgramPlan(), /*profile=*/false);
  std::unique_ptr<Executor> profiled = instantiate(twoProgramPlan(), /*profile=*/true);
  ASSERT_TRUE(plain && profiled);
  auto [plainY, plainD] = runBoth(*plain, 2);
  auto [profiledY, profiledD] = runBoth(*profiled, 2);
  // (x + c) @ w and x + x, so that equal outputs are not equal by accident.
  std::vector<float> y(4);
  ASSERT_EQ(plainY.data.size(), y.size() * sizeof(float));
  std::memcpy(y.data(), plainY.data.data(), plainY.data.size());
  EXPECT_EQ(y, (std::vector<float>{242, 308, 539, 704}));
  EXPECT_EQ(profiledY.shape, plainY.shape);
  EXPECT_EQ(profiledY.data, plainY.data);
  EXPECT_EQ(profiledD.data, plainD.data);
}

//===----------------------------------------------------------------------===//
// zrun --profile
//===----------------------------------------------------------------------===//

using Result = test::ToolResult;

/// Runs zrun with `args`, standard output and error together.
Result zrun(const std::vector<std::string> &args) { return test::runTool(ZCC_ZRUN_PATH, args); }

class ZrunProfileTest : public ::testing::Test {
protected:
  void SetUp() override {
    plan = test::writePlan(dir.file("plan.bin"), twoProgramPlan());
    input = dir.file("x.npy");
    HostTensor x;
    x.dtype = plan::F32;
    x.shape = {2, 3};
    x.data.resize(6 * sizeof(float));
    ASSERT_TRUE(writeNpy(input, x).isOk());
  }

  TempDir dir;
  std::string plan;
  std::string input;
};

TEST_F(ZrunProfileTest, InferencePrintsTheTables) {
  Result result =
      zrun({plan, "--input", "x=" + input, "--output-dir", dir.file("out"), "--profile=2"});
  ASSERT_EQ(result.exitCode, 0) << result.output;
  const std::string &out = result.output;
  EXPECT_NE(out.find("profile of one run of 'infer', cpu backend\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\nprogram     runs     total ms       %\ninfer          1 "),
            std::string::npos)
      << out;
  // Two rows of each table: of four kernels (add, matmul and the two
  // events' kernels), and of the four instructions that ran.
  EXPECT_NE(out.find(" calls     total ms       avg us       %\n"), std::string::npos) << out;
  EXPECT_NE(out.find("(2 more kernels: "), std::string::npos) << out;
  EXPECT_NE(out.find("\ntop 2 of 4 instructions\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  location\n"), std::string::npos) << out;
}

TEST_F(ZrunProfileTest, DefaultRowsShowEveryKernel) {
  Result result = zrun({"--profile", plan, "--input=x=" + input, "--output-dir", dir.file("out")});
  ASSERT_EQ(result.exitCode, 0) << result.output;
  for (const char *row : {"\nmatmul ", "\nadd ", "\nrecord_event ", "\nwait_event "})
    EXPECT_NE(result.output.find(row), std::string::npos) << row << "\n" << result.output;
  EXPECT_EQ(result.output.find("more kernels"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("/MatMul\n"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("2x2xf32"), std::string::npos) << result.output;
}

TEST_F(ZrunProfileTest, CountMistakes) {
  for (const char *bad : {"--profile=abc", "--profile=0", "--profile=", "--profile=-1"}) {
    Result result = zrun({plan, "--input", "x=" + input, bad});
    EXPECT_EQ(result.exitCode, 1) << bad;
    EXPECT_EQ(result.output, std::string("zrun: error: ") + bad +
                                 ": expected the rows of each table, 1 to 1000000 (see zrun "
                                 "--help)\n");
  }
  Result result = zrun({plan, "--input", "x=" + input, "--profile", "0"});
  EXPECT_EQ(result.output, "zrun: error: --profile 0: expected the rows of each table, 1 to "
                           "1000000 (see zrun --help)\n");
}

} // namespace
} // namespace zcc
