//===- ToolsTest.cpp - zrun and zplan from the command line ---------------===//
//
// The command-line contract (DESIGN.md): a run writes each output to
// DIR/<name>.npy and exits 0; every failure exits 1 with exactly one line
// "zrun: error: ..." on standard error; options that are not implemented
// yet say so instead of being ignored.
//
//===----------------------------------------------------------------------===//

#include "PlanTestUtil.h"
#include "RunTool.h"

#include "runtime/Data/Npy.h"

#include <algorithm>
#include <cstring>
#include <sys/stat.h>

namespace zcc {
namespace {

using test::TempDir;

using Result = test::ToolResult;
using test::runTool;

Result zrun(const std::vector<std::string> &args) {
  return runTool(ZCC_ZRUN_PATH, args);
}

Result zplan(const std::vector<std::string> &args) {
  return runTool(ZCC_ZPLAN_PATH, args);
}

void writeFloats(const std::string &path, const std::vector<int64_t> &shape,
                 const std::vector<float> &values) {
  HostTensor tensor;
  tensor.dtype = plan::F32;
  tensor.shape = shape;
  tensor.data.resize(values.size() * sizeof(float));
  std::memcpy(tensor.data.data(), values.data(), tensor.data.size());
  ASSERT_TRUE(writeNpy(path, tensor).isOk());
}

std::vector<float> readFloats(const std::string &path) {
  StatusOr<HostTensor> tensor = readNpy(path);
  EXPECT_TRUE(tensor.isOk()) << tensor.status().toString();
  if (!tensor.isOk())
    return {};
  std::vector<float> values(tensor->data.size() / sizeof(float));
  std::memcpy(values.data(), tensor->data.data(), tensor->data.size());
  return values;
}

/// A plan y = x + c and its input x.npy in a fresh folder.
class ZrunTest : public ::testing::Test {
protected:
  void SetUp() override {
    plan = test::writePlan(dir.file("plan.bin"), test::addConstantPlan());
    input = dir.file("x.npy");
    writeFloats(input, {2, 3}, {1, 2, 3, 4, 5, 6});
  }

  /// Expects exit status 1 and exactly "zrun: error: <message>\n".
  void expectError(const std::vector<std::string> &args,
                   const std::string &message) {
    Result result = zrun(args);
    EXPECT_EQ(result.exitCode, 1) << result.output;
    EXPECT_EQ(result.output, "zrun: error: " + message + "\n");
  }

  TempDir dir;
  std::string plan;
  std::string input;
};

TEST_F(ZrunTest, WritesEachOutputAsNpy) {
  std::string out = dir.file("out/nested");
  Result result = zrun({plan, "--input", "x=" + input, "--output-dir", out});
  ASSERT_EQ(result.exitCode, 0) << result.output;
  EXPECT_EQ(result.output, "");
  EXPECT_EQ(readFloats(out + "/y.npy"),
            (std::vector<float>{11, 22, 33, 44, 55, 66}));
}

TEST_F(ZrunTest, EqualsFormAndBackendCpu) {
  Result result = zrun({plan, "--backend=cpu", "--input=x=" + input,
                        "--output-dir=" + dir.path(), "--nproc", "1"});
  ASSERT_EQ(result.exitCode, 0) << result.output;
  EXPECT_EQ(readFloats(dir.file("y.npy")),
            (std::vector<float>{11, 22, 33, 44, 55, 66}));
}

TEST_F(ZrunTest, Help) {
  Result result = zrun({"--help"});
  EXPECT_EQ(result.exitCode, 0);
  EXPECT_EQ(result.output.rfind("usage: zrun PLAN.bin", 0), 0u);
}

TEST_F(ZrunTest, WeightsFolderAndRandom) {
  plan::Plan matmul = test::matmulWeightPlan();
  matmul.set_model_path("/nonexistent/model.onnx");
  std::string matmulPlan = test::writePlan(dir.file("matmul.bin"), matmul);
  std::string weights = dir.file("weights");
  ASSERT_EQ(::mkdir(weights.c_str(), 0755), 0);
  std::string bytes(16, '\0');
  bytes += test::floatBytes({1, 2, 3, 4, 5, 6});
  test::writeBytes(weights + "/weights.bin", bytes);

  Result result = zrun({matmulPlan, "--input", "x=" + input, "--weights",
                        weights, "--output-dir", dir.file("a")});
  ASSERT_EQ(result.exitCode, 0) << result.output;
  EXPECT_EQ(readFloats(dir.file("a/y.npy")),
            (std::vector<float>{22, 28, 49, 64}));

  for (const char *out : {"r1", "r2"}) {
    result = zrun({matmulPlan, "--input", "x=" + input, "--weights", "random",
                   "--seed", "9", "--output-dir", dir.file(out)});
    ASSERT_EQ(result.exitCode, 0) << result.output;
  }
  EXPECT_EQ(readFloats(dir.file("r1/y.npy")), readFloats(dir.file("r2/y.npy")));

  expectError({matmulPlan, "--input", "x=" + input},
              "while instantiating " + matmulPlan +
                  ": cannot load the weights: weight 'w' (buffer 1) is read "
                  "from '/nonexistent/weights.bin', which does not exist; "
                  "pass --weights DIR with the folder that holds "
                  "'weights.bin', or --weights random");
  expectError(
      {matmulPlan, "--input", "x=" + input, "--weights", dir.file("absent")},
      "--weights " + dir.file("absent") +
          ": no such folder; pass the folder that holds the plan's "
          "weight files, or random");
  expectError({matmulPlan, "--input", "x=" + input, "--weights", input},
              "--weights " + input +
                  ": not a folder, and zrun reads weights by name only from "
                  "files ending in .onnx or .safetensors; rename the file, or "
                  "pass random or the folder that holds the plan's weight "
                  "files");
}

// Where there is no GPU (or zrun was built without CUDA), --backend cuda
// says why it cannot run and what to do instead, in one line; where there
// is one, the plan runs.
TEST_F(ZrunTest, CudaWithoutADeviceSaysWhy) {
  Result result = zrun({plan, "--input", "x=" + input, "--backend", "cuda",
                        "--output-dir", dir.file("cuda-out")});
  if (result.exitCode == 0)
    GTEST_SKIP() << "a CUDA device is present: the plan ran";
  EXPECT_EQ(result.exitCode, 1) << result.output;
  EXPECT_EQ(result.output.rfind("zrun: error: ", 0), 0u) << result.output;
  EXPECT_NE(result.output.find("run with --backend cpu\n"), std::string::npos) << result.output;
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
}

TEST_F(ZrunTest, WorldSizeMustMatch) {
  expectError({plan, "--input", "x=" + input, "--nproc", "2"},
              plan + ": plan was compiled for world size 1, but --nproc is 2; "
                     "run it with --nproc 1 or recompile with --world-size 2");
  plan::Plan twoRanks = test::addConstantPlan();
  twoRanks.mutable_mesh()->add_axis_names("dp");
  twoRanks.mutable_mesh()->add_axis_sizes(2);
  std::string path = test::writePlan(dir.file("dp2.bin"), twoRanks);
  // Its ranks split the batch by rows: the input must hold both ranks'.
  expectError({path, "--input", "x=" + input},
              input + ": input 'x' is f32 2x3, but a batch of this plan is f32 4x3 "
                      "(2 ranks x 2 rows, train_micro_batch_size_per_gpu)");
}

TEST_F(ZrunTest, BackendMustMatch) {
  plan::Plan cudaOnly = test::addConstantPlan();
  cudaOnly.set_backend(plan::BACKEND_CUDA);
  std::string path = test::writePlan(dir.file("cuda.bin"), cudaOnly);
  expectError({path, "--input", "x=" + input},
              path + ": plan was compiled for the cuda backend; run it with "
                     "--backend cuda or recompile it for any backend");
}

TEST_F(ZrunTest, TrainingOptionsNeedATrainingPlan) {
  for (const char *option : {"--steps", "--grad-accum", "--data", "--log-json", "--save",
                             "--resume", "--save-every"})
    expectError({plan, "--input", "x=" + input, option, "1"},
                plan + ": --steps, --data, --grad-accum, --log-json and the other "
                       "training options need a training plan, and this is an "
                       "inference plan (compile a model with its loss and a config "
                       "with an optimizer)");
  expectError({plan, "--grad-accum", "4,1:8"},
              "--grad-accum 4,1:8: expected N (micro-steps per optimizer step) or "
              "N,STEP:N,... (the count from STEP on), with positive integers and "
              "ascending steps");
  expectError({plan, "--steps", "0"},
              "--steps 0: expected a positive integer (see zrun --help)");
}

TEST_F(ZrunTest, TrainingPlansNeedSteps) {
  plan::Plan train = test::trainingPlan();
  std::string path = test::writePlan(dir.file("train.bin"), train);
  expectError({path}, path + ": a training plan runs --steps N optimizer steps; "
                             "pass --steps");
}

TEST_F(ZrunTest, InputMistakes) {
  expectError({plan}, "the plan's input 'x' has no array; pass --input "
                      "x=FILE.npy");
  expectError({plan, "--input", "z=" + input},
              "--input z=" + input +
                  ": the plan has no input 'z' (its inputs: 'x')");
  expectError({plan, "--input", "x=" + input, "--input", "x=" + input},
              "--input x is given twice");
  expectError({plan, "--input", "x"},
              "--input x: expected NAME=FILE.npy (see zrun --help)");
  std::string wide = dir.file("wide.npy");
  writeFloats(wide, {4, 100}, std::vector<float>(400));
  expectError({plan, "--input", "x=" + wide},
              wide + ": input 'x' has shape 4x100 but the plan was compiled "
                     "for 2x3; recompile with --input-shape x=4x100 or pass "
                     "a matching array");
  expectError({plan, "--input", "x=" + dir.file("absent.npy")},
              "cannot read input 'x': cannot open '" + dir.file("absent.npy") +
                  "': No such file or directory");
}

TEST_F(ZrunTest, CommandLineMistakes) {
  expectError({}, "no plan given: zrun PLAN.bin (see zrun --help)");
  expectError({plan, "--frobnicate"},
              "unknown option '--frobnicate' (see zrun --help)");
  expectError({plan, "other.bin"}, "more than one plan given: '" + plan +
                                       "' and 'other.bin' (see zrun --help)");
  expectError({plan, "--seed"}, "--seed needs a value (see zrun --help)");
  expectError({plan, "--seed", "-1"},
              "--seed -1: expected a non-negative integer (see zrun --help)");
  expectError({plan, "--nproc", "0"},
              "--nproc 0: expected a positive integer (see zrun --help)");
}

// strtoull skips leading spaces, so " -1" read as 2^64 - 1; an unbounded
// --check-elements wrapped to -1 and the gradient check compared nothing
// and said "ok"; strtod takes "inf".
TEST_F(ZrunTest, NumericFlagsAreStrict) {
  expectError({plan, "--seed", " 1"},
              "--seed  1: expected a non-negative integer (see zrun --help)");
  expectError({plan, "--steps", " -1"},
              "--steps  -1: expected a positive integer (see zrun --help)");
  expectError({plan, "--check-elements", "18446744073709551615"},
              "--check-elements 18446744073709551615: expected a positive integer (see zrun "
              "--help)");
  expectError({plan, "--check-step", "inf"},
              "--check-step inf: expected a positive number (see zrun --help)");
  expectError({plan, "--check-rtol", "nan"},
              "--check-rtol nan: expected a positive number (see zrun --help)");
}

// outputFileName turns '/' into '_': outputs "a/b" and "a_b" both went to
// a_b.npy, the second silently overwriting the first.
TEST_F(ZrunTest, OutputFileNamesMustNotCollide) {
  plan::Plan colliding = test::addConstantPlan();
  colliding.mutable_outputs(0)->set_name("a/b");
  plan::Binding *second = colliding.add_outputs();
  second->set_name("a_b");
  second->set_buffer(colliding.outputs(0).buffer());
  std::string path = test::writePlan(dir.file("collide.bin"), colliding);
  std::string out = dir.file("out");
  expectError({path, "--input", "x=" + input, "--output-dir", out},
              path + ": outputs 'a/b' and 'a_b' would both be written to " + out +
                  "/a_b.npy; rename one of them in the model, or run with --no-outputs");
  Result result = zrun({path, "--input", "x=" + input, "--output-dir", out, "--no-outputs"});
  EXPECT_EQ(result.exitCode, 0) << result.output;
}

TEST_F(ZrunTest, CorruptPlan) {
  std::string planBytes = encodePlanFile(test::addConstantPlan(), "zcc-test");
  planBytes[planBytes.size() - 3] ^= 0x10;
  test::writeBytes(plan, planBytes);
  Result result = zrun({plan, "--input", "x=" + input});
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.output.rfind("zrun: error: " + plan +
                                    ": checksum mismatch: the header says 0x",
                                0),
            0u)
      << result.output;
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1);
}

TEST_F(ZrunTest, ZplanDump) {
  Result result = zplan({"dump", plan});
  ASSERT_EQ(result.exitCode, 0) << result.output;
  EXPECT_EQ(result.output.rfind("header: magic 0x314e414c5043435a "
                                "\"ZCCPLAN1\", format_version 1, producer "
                                "\"zcc-test\", checksum 0x",
                                0),
            0u)
      << result.output;
  EXPECT_NE(result.output.find("\nprogram \"infer\": 1 instructions\n"
                               "  %2 = add(%0, %1) stream 0 // /Add\n"),
            std::string::npos)
      << result.output;
}

TEST_F(ZrunTest, ZplanErrors) {
  Result result = zplan({});
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.output, "zplan: error: no command given: zplan dump "
                           "PLAN.bin (see zplan --help)\n");
  result = zplan({"dump", dir.file("absent.bin")});
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.output, "zplan: error: cannot read the plan: cannot open '" +
                               dir.file("absent.bin") +
                               "': No such file or directory\n");
  result = zplan({"export", dir.path()});
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.output, "zplan: error: zplan export needs a checkpoint folder and -o "
                           "OUTPUT (see zplan --help)\n");
  result = zplan({"export", dir.path(), "-o", dir.file("w.safetensors")});
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.output, "zplan: error: " + dir.path() +
                               ": no checkpoint there (no 'latest' file); pass the folder a "
                               "run saved into with --save\n");
  result = zplan({"show", plan});
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.output, "zplan: error: unknown command 'show'; the "
                           "commands are dump and export (see zplan --help)\n");
}

} // namespace
} // namespace zcc
