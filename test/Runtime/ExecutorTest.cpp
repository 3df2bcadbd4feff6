//===- ExecutorTest.cpp - Instantiating and running plans on cpu ----------===//
//
// Runs small hand-built plans end to end on the cpu backend: constants and
// weights reach the arena, inputs are checked against the plan, outputs come
// back, and every failure names what failed and how to fix it.
//
//===----------------------------------------------------------------------===//

#include "PlanTestUtil.h"

#include "kernels/cpu/Float16.h"
#include "runtime/Executor.h"

#include <cmath>
#include <cstring>

namespace zcc {
namespace {

using test::PlanBuilder;
using test::TempDir;

LoadedPlan load(const plan::Plan &plan, const std::string &path = "test.bin") {
  StatusOr<LoadedPlan> loaded = parsePlanFile(encodePlanFile(plan, "t"), path);
  EXPECT_TRUE(loaded.isOk()) << loaded.status().toString();
  return loaded.isOk() ? std::move(*loaded) : LoadedPlan();
}

std::unique_ptr<Executor> instantiate(const plan::Plan &plan,
                                      const ExecutorOptions &options = {}) {
  StatusOr<std::unique_ptr<Executor>> executor =
      Executor::instantiate(load(plan), options);
  EXPECT_TRUE(executor.isOk()) << executor.status().toString();
  return executor.isOk() ? std::move(*executor) : nullptr;
}

Status instantiateError(const plan::Plan &plan,
                        const ExecutorOptions &options = {}) {
  StatusOr<std::unique_ptr<Executor>> executor =
      Executor::instantiate(load(plan), options);
  EXPECT_FALSE(executor.isOk());
  return executor.isOk() ? Status::ok() : executor.status();
}

Status setFloats(Executor &executor, const std::string &name,
                 const std::vector<float> &values,
                 const std::vector<int64_t> &shape) {
  return executor.setInput(name, values.data(), values.size() * sizeof(float),
                           plan::F32, shape);
}

std::vector<float> floats(const HostTensor &tensor) {
  std::vector<float> values(tensor.data.size() / sizeof(float));
  std::memcpy(values.data(), tensor.data.data(), tensor.data.size());
  return values;
}

std::vector<float> runMatmul(Executor &executor) {
  EXPECT_TRUE(setFloats(executor, "x", {1, 2, 3, 4, 5, 6}, {2, 3}).isOk());
  Status status = executor.run("infer");
  EXPECT_TRUE(status.isOk()) << status.toString();
  StatusOr<HostTensor> y = executor.output("y");
  EXPECT_TRUE(y.isOk());
  return y.isOk() ? floats(*y) : std::vector<float>();
}

/// weights.bin: 16 bytes of another tensor, then w = [[1, 2], [3, 4], [5, 6]].
void writeWeightFile(const std::string &path) {
  std::string bytes(16, '\x7f');
  bytes += test::floatBytes({1, 2, 3, 4, 5, 6});
  test::writeBytes(path, bytes);
}

// x @ w for x = [[1, 2, 3], [4, 5, 6]].
const std::vector<float> kMatmulResult = {22, 28, 49, 64};

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

TEST(Executor, AddsAConstant) {
  std::unique_ptr<Executor> executor = instantiate(test::addConstantPlan());
  ASSERT_TRUE(executor);
  ASSERT_TRUE(setFloats(*executor, "x", {1, 2, 3, 4, 5, 6}, {2, 3}).isOk());
  Status status = executor->run("infer");
  ASSERT_TRUE(status.isOk()) << status.toString();
  StatusOr<HostTensor> y = executor->output("y");
  ASSERT_TRUE(y.isOk()) << y.status().toString();
  EXPECT_EQ(y->dtype, plan::F32);
  EXPECT_EQ(y->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(floats(*y), (std::vector<float>{11, 22, 33, 44, 55, 66}));
}

TEST(Executor, RunsAgainWithNewInputs) {
  std::unique_ptr<Executor> executor = instantiate(test::addConstantPlan());
  ASSERT_TRUE(executor);
  for (float base : {0.f, 100.f}) {
    ASSERT_TRUE(
        setFloats(*executor, "x", {base, base, base, base, base, base}, {2, 3})
            .isOk());
    ASSERT_TRUE(executor->run("infer").isOk());
    StatusOr<HostTensor> y = executor->output("y");
    ASSERT_TRUE(y.isOk());
    EXPECT_EQ(floats(*y),
              (std::vector<float>{base + 10, base + 20, base + 30, base + 40,
                                  base + 50, base + 60}));
  }
}

// The cpu backend runs kernels as they are launched: no program becomes a
// graph, and the summary says so for each program that ran.
TEST(Executor, GraphSummaryOnTheCpuBackend) {
  std::unique_ptr<Executor> executor = instantiate(test::addConstantPlan());
  ASSERT_TRUE(executor);
  EXPECT_EQ(executor->graphSummary(), "");
  ASSERT_TRUE(setFloats(*executor, "x", {1, 2, 3, 4, 5, 6}, {2, 3}).isOk());
  for (int run = 0; run < 3; ++run)
    ASSERT_TRUE(executor->run("infer").isOk());
  EXPECT_EQ(executor->graphSummary(),
            "program 'infer': launched instruction by instruction (no graphs)\n");
}

TEST(Executor, KernelFailureNamesTheInstruction) {
  // The plan is valid (validation does not check kernel shapes), but
  // matmul's inner dimensions disagree: the kernel's error gets the
  // instruction as context.
  PlanBuilder builder;
  uint32_t x = builder.addBuffer("x", plan::INPUT, plan::F32, {2, 3});
  uint32_t c = builder.addConstant("c", {2, 3}, {1, 1, 1, 1, 1, 1});
  uint32_t t = builder.addBuffer("t", plan::ACTIVATION, plan::F32, {2, 3});
  uint32_t w = builder.addConstant("w", {2, 2}, {1, 0, 0, 1});
  uint32_t y = builder.addBuffer("y", plan::OUTPUT, plan::F32, {2, 2});
  builder.addInput("x", x);
  builder.addOutput("y", y);
  builder.addInstruction("add", {x, c}, {t}, "/Add");
  builder.addInstruction("matmul", {t, w}, {y}, "/h.0/attn/MatMul");
  std::unique_ptr<Executor> executor = instantiate(builder.plan());
  ASSERT_TRUE(executor);
  ASSERT_TRUE(setFloats(*executor, "x", {1, 2, 3, 4, 5, 6}, {2, 3}).isOk());
  Status status = executor->run("infer");
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(
      status.message().rfind("while running instruction 1 (matmul, from node "
                             "'/h.0/attn/MatMul') of program 'infer': ",
                             0),
      0u)
      << status.message();
}

TEST(Executor, UnknownProgram) {
  std::unique_ptr<Executor> executor = instantiate(test::addConstantPlan());
  ASSERT_TRUE(executor);
  ASSERT_TRUE(setFloats(*executor, "x", {1, 2, 3, 4, 5, 6}, {2, 3}).isOk());
  Status status = executor->run("optimizer_step");
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            "the plan has no program 'optimizer_step' (its programs: 'infer')");
}

TEST(Executor, UnknownBackend) {
  ExecutorOptions options;
  options.backend = "tpu";
  EXPECT_EQ(instantiateError(test::addConstantPlan(), options).message(),
            "while instantiating test.bin: unknown backend 'tpu' (the "
            "backends are cpu and cuda)");
}

// The cuda backend is a plugin loaded on first use: without a GPU (or
// without the plugin) instantiating a plan on it fails with kUnavailable
// and a way out; with a GPU it works.
TEST(Executor, CudaBackendWithoutADevice) {
  ExecutorOptions options;
  options.backend = "cuda";
  StatusOr<std::unique_ptr<Executor>> executor =
      Executor::instantiate(load(test::addConstantPlan()), options);
  if (executor.isOk())
    GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(executor.status().code(), StatusCode::kUnavailable) << executor.status().toString();
  EXPECT_NE(executor.status().message().find("run with --backend cpu"), std::string::npos)
      << executor.status().toString();
}

//===----------------------------------------------------------------------===//
// Inputs and outputs
//===----------------------------------------------------------------------===//

TEST(Executor, InputShapeMismatch) {
  std::unique_ptr<Executor> executor = instantiate(test::addConstantPlan());
  ASSERT_TRUE(executor);
  std::vector<float> values(400);
  Status status = setFloats(*executor, "x", values, {4, 100});
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "input 'x' has shape 4x100 but the plan was compiled for 2x3; "
            "recompile with --input-shape x=4x100 or pass a matching array");
  status = setFloats(*executor, "x", {1}, {});
  EXPECT_EQ(status.message(),
            "input 'x' has shape scalar but the plan was compiled for 2x3; "
            "recompile with --input-shape x=scalar or pass a matching array");
}

TEST(Executor, InputDtypeMismatch) {
  std::unique_ptr<Executor> executor = instantiate(test::addConstantPlan());
  ASSERT_TRUE(executor);
  std::vector<double> values(6);
  Status status = executor->setInput("x", values.data(), 48, plan::F64, {2, 3});
  EXPECT_EQ(status.message(),
            "input 'x' has dtype f64 but the plan was compiled for f32; "
            "convert the array (x.astype(np.float32))");
}

TEST(Executor, InputByteCountMustMatch) {
  std::unique_ptr<Executor> executor = instantiate(test::addConstantPlan());
  ASSERT_TRUE(executor);
  std::vector<float> values(6);
  Status status = executor->setInput("x", values.data(), 20, plan::F32, {2, 3});
  EXPECT_EQ(status.message(),
            "input 'x' has 20 bytes of data, but f32 2x3 holds 24");
}

TEST(Executor, UnknownInputAndOutput) {
  std::unique_ptr<Executor> executor = instantiate(test::addConstantPlan());
  ASSERT_TRUE(executor);
  EXPECT_EQ(setFloats(*executor, "z", {1}, {1}).message(),
            "the plan has no input 'z' (its inputs: 'x')");
  StatusOr<HostTensor> output = executor->output("logits");
  ASSERT_FALSE(output.isOk());
  EXPECT_EQ(output.status().message(),
            "the plan has no output 'logits' (its outputs: 'y')");
}

TEST(Executor, RunNeedsEveryInput) {
  std::unique_ptr<Executor> executor = instantiate(test::addConstantPlan());
  ASSERT_TRUE(executor);
  Status status = executor->run("infer");
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "input 'x' was never written; pass it (zrun --input x=FILE.npy)");
}

//===----------------------------------------------------------------------===//
// Weights from files
//===----------------------------------------------------------------------===//

TEST(Weights, ReadFromTheModelsFolder) {
  TempDir dir;
  writeWeightFile(dir.file("weights.bin"));
  plan::Plan plan = test::matmulWeightPlan();
  plan.set_model_path(dir.file("model.onnx"));
  std::unique_ptr<Executor> executor = instantiate(plan);
  ASSERT_TRUE(executor);
  EXPECT_EQ(runMatmul(*executor), kMatmulResult);
}

TEST(Weights, WeightsDirReplacesTheModelsFolder) {
  TempDir dir;
  writeWeightFile(dir.file("weights.bin"));
  plan::Plan plan = test::matmulWeightPlan();
  plan.set_model_path("/nonexistent/model.onnx");
  ExecutorOptions options;
  options.weights.dir = dir.path();
  std::unique_ptr<Executor> executor = instantiate(plan, options);
  ASSERT_TRUE(executor);
  EXPECT_EQ(runMatmul(*executor), kMatmulResult);
}

TEST(Weights, AbsoluteFileIgnoresTheFolder) {
  TempDir dir;
  writeWeightFile(dir.file("weights.bin"));
  plan::Plan plan = test::matmulWeightPlan();
  plan.mutable_weights(0)->set_file(dir.file("weights.bin"));
  std::unique_ptr<Executor> executor = instantiate(plan);
  ASSERT_TRUE(executor);
  EXPECT_EQ(runMatmul(*executor), kMatmulResult);
}

TEST(Weights, MissingFile) {
  TempDir dir;
  plan::Plan plan = test::matmulWeightPlan();
  plan.set_model_path(dir.file("model.onnx"));
  Status status = instantiateError(plan);
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            "while instantiating test.bin: cannot load the weights: weight "
            "'w' (buffer 1) is read from '" +
                dir.file("weights.bin") +
                "', which does not exist; pass --weights DIR with the folder "
                "that holds 'weights.bin', or --weights random");
}

TEST(Weights, ShortFile) {
  TempDir dir;
  test::writeBytes(dir.file("weights.bin"), std::string(30, '\0'));
  plan::Plan plan = test::matmulWeightPlan();
  plan.set_model_path(dir.file("model.onnx"));
  Status status = instantiateError(plan);
  EXPECT_EQ(status.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(status.message(),
            "while instantiating test.bin: cannot load the weights: weight "
            "'w' (buffer 1) needs bytes [16, 40) of '" +
                dir.file("weights.bin") +
                "', but the file has only 30 bytes; the weight file does not "
                "match the plan (recompile, or pass --weights random)");
}

TEST(Weights, FileIsAFolder) {
  TempDir dir;
  plan::Plan plan = test::matmulWeightPlan();
  plan.mutable_weights(0)->set_file(dir.path());
  Status status = instantiateError(plan);
  EXPECT_NE(status.message().find("weight 'w' (buffer 1)"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("is a folder, not a file"), std::string::npos)
      << status.message();
}

TEST(Weights, OnlyF32ConvertsToAnotherDtype) {
  TempDir dir;
  writeWeightFile(dir.file("weights.bin"));
  plan::Plan plan = test::matmulWeightPlan();
  plan.set_model_path(dir.file("model.onnx"));
  plan.mutable_weights(0)->set_file_dtype(plan::F16);
  plan.mutable_weights(0)->set_length(12);
  Status status = instantiateError(plan);
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(status.message(),
            "while instantiating test.bin: cannot load the weights: weight "
            "'w' (buffer 1) is stored as f16 in 'weights.bin' but its buffer "
            "is f32; only f32 weights convert (to f16 or bf16); recompile the "
            "plan or run with --weights random");
}

// An inference plan that computes in 16 bits keeps its weights in 16 bits:
// the f32 file range is narrowed as it loads, rounded to nearest even (the
// cast kernels' rounding), to f16 and to bf16.
TEST(Weights, F32FileNarrowsIntoA16BitBuffer) {
  TempDir dir;
  // 16 bytes of another tensor, then six f32 values, two of them ties.
  std::vector<float> values = {1.0f, -2.5f, 3.14159f, 1.0f + 1.0f / 256, 65504.0f, 1e-3f};
  test::writeBytes(dir.file("weights.bin"), std::string(16, '\x7f') + test::floatBytes(values));
  for (plan::DType dtype : {plan::BF16, plan::F16}) {
    plan::Plan plan = test::matmulWeightPlan();
    plan.set_model_path(dir.file("model.onnx"));
    plan::Buffer &w = *plan.mutable_buffers(1);
    w.set_dtype(dtype);
    w.set_bytes(12);
    plan.mutable_weights(0)->set_file_dtype(plan::F32);
    plan.mutable_weights(0)->set_length(24);
    std::unique_ptr<Executor> executor = instantiate(plan);
    ASSERT_TRUE(executor);
    StatusOr<HostTensor> loaded = executor->readBuffer(1);
    ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
    ASSERT_EQ(loaded->data.size(), 12u);
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, loaded->data.data() + 2 * i, 2);
      uint16_t expected = dtype == plan::BF16 ? cpu::toBFloat16(values[i]).bits
                                              : cpu::toHalf(values[i]).bits;
      EXPECT_EQ(bits, expected) << cpu::dtypeName(dtype) << " element " << i;
    }
  }
}

TEST(Weights, NoFileNeedsRandom) {
  plan::Plan plan = test::matmulWeightPlan();
  plan.mutable_weights(0)->clear_file();
  EXPECT_EQ(instantiateError(plan).message(),
            "while instantiating test.bin: cannot load the weights: weight "
            "'w' (buffer 1) has no file in the plan to read it from; run with "
            "--weights random");
}

//===----------------------------------------------------------------------===//
// Random weights
//===----------------------------------------------------------------------===//

ExecutorOptions randomWeights(uint64_t seed) {
  ExecutorOptions options;
  options.weights.source = WeightSource::kRandom;
  options.weights.seed = seed;
  return options;
}

TEST(Weights, RandomNeedsNoFile) {
  plan::Plan plan = test::matmulWeightPlan();
  plan.set_model_path("/nonexistent/model.onnx");
  std::unique_ptr<Executor> first = instantiate(plan, randomWeights(1));
  std::unique_ptr<Executor> again = instantiate(plan, randomWeights(1));
  std::unique_ptr<Executor> other = instantiate(plan, randomWeights(2));
  ASSERT_TRUE(first && again && other);
  std::vector<float> result = runMatmul(*first);
  EXPECT_EQ(result, runMatmul(*again)) << "a seed gives the same weights";
  EXPECT_NE(result, runMatmul(*other)) << "another seed, other weights";
  EXPECT_NE(result, std::vector<float>(4, 0.f));
}

TEST(Weights, RandomOnesAndZeros) {
  plan::Plan plan = test::matmulWeightPlan();
  plan.mutable_weights(0)->mutable_random_init()->set_kind(
      plan::RandomInit::ONES);
  std::unique_ptr<Executor> ones = instantiate(plan, randomWeights(5));
  ASSERT_TRUE(ones);
  EXPECT_EQ(runMatmul(*ones), (std::vector<float>{6, 6, 15, 15}));
  plan.mutable_weights(0)->mutable_random_init()->set_kind(
      plan::RandomInit::ZEROS);
  std::unique_ptr<Executor> zeros = instantiate(plan, randomWeights(5));
  ASSERT_TRUE(zeros);
  EXPECT_EQ(runMatmul(*zeros), (std::vector<float>{0, 0, 0, 0}));
}

TEST(Weights, NormalHasTheRequestedSpread) {
  plan::RandomInit init;
  init.set_kind(plan::RandomInit::NORMAL);
  init.set_std(0.02);
  std::vector<float> values(100000);
  ASSERT_TRUE(
      drawRandomWeight(init, plan::F32, 42, 0, values.size(), values.data())
          .isOk());
  double sum = 0, squares = 0;
  for (float value : values) {
    sum += value;
    squares += static_cast<double>(value) * value;
  }
  double mean = sum / values.size();
  double std = std::sqrt(squares / values.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.0005);
  EXPECT_NEAR(std, 0.02, 0.0005);
}

TEST(Weights, EachWeightDrawsItsOwnValues) {
  plan::RandomInit init;
  init.set_kind(plan::RandomInit::NORMAL);
  init.set_std(1.0);
  std::vector<double> first(8), second(8), firstAgain(8);
  ASSERT_TRUE(drawRandomWeight(init, plan::F64, 3, 0, 8, first.data()).isOk());
  ASSERT_TRUE(drawRandomWeight(init, plan::F64, 3, 1, 8, second.data()).isOk());
  ASSERT_TRUE(
      drawRandomWeight(init, plan::F64, 3, 0, 8, firstAgain.data()).isOk());
  EXPECT_NE(first, second);
  EXPECT_EQ(first, firstAgain);
}

TEST(Weights, HalfPrecisionEncodings) {
  plan::RandomInit ones;
  ones.set_kind(plan::RandomInit::ONES);
  uint16_t half = 0, bfloat = 0;
  ASSERT_TRUE(drawRandomWeight(ones, plan::F16, 0, 0, 1, &half).isOk());
  ASSERT_TRUE(drawRandomWeight(ones, plan::BF16, 0, 0, 1, &bfloat).isOk());
  EXPECT_EQ(half, 0x3c00);
  EXPECT_EQ(bfloat, 0x3f80);
  int64_t integer = 0;
  ASSERT_TRUE(drawRandomWeight(ones, plan::I64, 0, 0, 1, &integer).isOk());
  EXPECT_EQ(integer, 1);
}

TEST(Weights, NormalIntegersAreRefused) {
  plan::RandomInit normal;
  normal.set_kind(plan::RandomInit::NORMAL);
  int32_t value = 0;
  Status status = drawRandomWeight(normal, plan::I32, 0, 0, 1, &value);
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(status.message(),
            "normal random values for i32 buffers are not supported yet");
}

} // namespace
} // namespace zcc
