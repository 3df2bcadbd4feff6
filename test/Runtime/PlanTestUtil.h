//===- PlanTestUtil.h - Building small plans in tests -----------*- C++ -*-===//
//
// The runtime's tests build their plans in C++ rather than compiling models,
// so each one states exactly the buffers and instructions it exercises and
// does not depend on the compiler.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_TEST_RUNTIME_PLANTESTUTIL_H
#define ZCC_TEST_RUNTIME_PLANTESTUTIL_H

#include "plan.pb.h"
#include "runtime/Plan/PlanLoader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace zcc::test {

/// A fresh folder under the test's temporary directory, removed with it.
class TempDir {
public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "zcc-runtime-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    char *made = ::mkdtemp(buffer.data());
    EXPECT_NE(made, nullptr) << "cannot create " << pattern;
    path_ = made ? made : pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

inline void writeBytes(const std::string &path, const std::string &bytes) {
  std::FILE *file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), file), bytes.size());
  ASSERT_EQ(std::fclose(file), 0);
}

inline std::string floatBytes(const std::vector<float> &values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(float));
}

/// Builds a Plan buffer by buffer, packing offsets at the arena alignment.
class PlanBuilder {
public:
  explicit PlanBuilder(const std::string &mode = "infer") {
    plan_.set_mode(mode);
    plan_.set_arena_alignment(64);
    plan_.set_model_path("model.onnx");
  }

  uint32_t addBuffer(const std::string &name, plan::BufferKind kind,
                     plan::DType dtype, const std::vector<int64_t> &shape) {
    plan::Buffer *buffer = plan_.add_buffers();
    uint32_t id = static_cast<uint32_t>(plan_.buffers_size() - 1);
    buffer->set_id(id);
    buffer->set_name(name);
    buffer->set_kind(kind);
    buffer->set_dtype(dtype);
    uint64_t elements = 1;
    for (int64_t dim : shape) {
      buffer->add_shape(dim);
      elements *= static_cast<uint64_t>(dim);
    }
    uint64_t bytes =
        elements * (dtype == plan::F64 || dtype == plan::I64    ? 8
                    : dtype == plan::F16 || dtype == plan::BF16 ? 2
                    : dtype == plan::I8 || dtype == plan::BOOL  ? 1
                                                                : 4);
    buffer->set_bytes(bytes);
    buffer->set_offset(nextOffset_);
    nextOffset_ += (bytes + 63) / 64 * 64;
    plan_.set_arena_bytes(nextOffset_);
    return id;
  }

  uint32_t addConstant(const std::string &name,
                       const std::vector<int64_t> &shape,
                       const std::vector<float> &values) {
    uint32_t id = addBuffer(name, plan::CONSTANT, plan::F32, shape);
    plan_.mutable_buffers(id)->set_constant_data(floatBytes(values));
    return id;
  }

  plan::Weight &addWeight(const std::string &name, uint32_t buffer,
                          const std::string &file, uint64_t offset) {
    plan::Weight *weight = plan_.add_weights();
    weight->set_name(name);
    weight->set_buffer(buffer);
    weight->set_file(file);
    weight->set_offset(offset);
    weight->set_length(plan_.buffers(buffer).bytes());
    weight->set_file_dtype(plan_.buffers(buffer).dtype());
    weight->mutable_random_init()->set_kind(plan::RandomInit::NORMAL);
    weight->mutable_random_init()->set_std(0.02);
    return *weight;
  }

  void addInput(const std::string &name, uint32_t buffer) {
    plan::Binding *binding = plan_.add_inputs();
    binding->set_name(name);
    binding->set_buffer(buffer);
  }

  void addOutput(const std::string &name, uint32_t buffer) {
    plan::Binding *binding = plan_.add_outputs();
    binding->set_name(name);
    binding->set_buffer(buffer);
  }

  plan::Instruction &addInstruction(const std::string &kernel,
                                    const std::vector<uint32_t> &inputs,
                                    const std::vector<uint32_t> &outputs,
                                    const std::string &location,
                                    const std::string &program = "infer") {
    plan::Program *target = nullptr;
    for (plan::Program &candidate : *plan_.mutable_programs())
      if (candidate.name() == program)
        target = &candidate;
    if (!target) {
      target = plan_.add_programs();
      target->set_name(program);
    }
    plan::Instruction *instruction = target->add_instructions();
    instruction->set_kernel(kernel);
    for (uint32_t id : inputs)
      instruction->add_inputs(id);
    for (uint32_t id : outputs)
      instruction->add_outputs(id);
    instruction->set_location(location);
    return *instruction;
  }

  plan::Plan &plan() { return plan_; }

private:
  plan::Plan plan_;
  uint64_t nextOffset_ = 0;
};

/// Writes `plan` as a plan file (magic, version, checksum) to `path`.
inline std::string writePlan(const std::string &path, const plan::Plan &plan) {
  writeBytes(path, encodePlanFile(plan, "zcc-test"));
  return path;
}

/// y[2x3] = x[2x3] + c, with c = [[10, 20, 30], [40, 50, 60]] a constant.
inline plan::Plan addConstantPlan() {
  PlanBuilder builder;
  uint32_t x = builder.addBuffer("x", plan::INPUT, plan::F32, {2, 3});
  uint32_t c = builder.addConstant("c", {2, 3}, {10, 20, 30, 40, 50, 60});
  uint32_t y = builder.addBuffer("y", plan::OUTPUT, plan::F32, {2, 3});
  builder.addInput("x", x);
  builder.addOutput("y", y);
  builder.addInstruction("add", {x, c}, {y}, "/Add");
  return builder.plan();
}

/// y[2x2] = x[2x3] @ w[3x2], w read from bytes [16, 40) of "weights.bin" next
/// to the model (the first 16 bytes belong to some other tensor).
inline plan::Plan matmulWeightPlan() {
  PlanBuilder builder;
  uint32_t x = builder.addBuffer("x", plan::INPUT, plan::F32, {2, 3});
  uint32_t w = builder.addBuffer("w", plan::PARAMETER, plan::F32, {3, 2});
  uint32_t y = builder.addBuffer("y", plan::OUTPUT, plan::F32, {2, 2});
  builder.addWeight("w", w, "weights.bin", 16);
  builder.addInput("x", x);
  builder.addOutput("y", y);
  builder.addInstruction("matmul", {x, w}, {y}, "/MatMul");
  return builder.plan();
}

/// The smallest valid training plan: loss = mse(x * w, y) with w[3] trained
/// by AdamW, the four programs of the step and the Training settings that
/// name its loss, loss scale, optimizer scalars and gradient norm buffers.
/// Buffers: %0 x, %1 y, %2 zcc.loss_scale, %3 w, %4 xw, %5 loss, %6 dxw,
/// %7 dw, %8 w.grad, %9 zcc.grad_norm_sq, %10 zcc.optimizer_scalars,
/// %11 w.exp_avg, %12 w.exp_avg_sq.
inline plan::Plan trainingPlan() {
  PlanBuilder builder("train");
  uint32_t x = builder.addBuffer("x", plan::INPUT, plan::F32, {3});
  uint32_t y = builder.addBuffer("y", plan::INPUT, plan::F32, {3});
  uint32_t seed =
      builder.addBuffer("zcc.loss_scale", plan::SCALARS, plan::F32, {});
  uint32_t w = builder.addBuffer("w", plan::PARAMETER, plan::F32, {3});
  uint32_t xw = builder.addBuffer("xw", plan::ACTIVATION, plan::F32, {3});
  uint32_t loss = builder.addBuffer("loss", plan::OUTPUT, plan::F32, {});
  uint32_t dxw = builder.addBuffer("dxw", plan::ACTIVATION, plan::F32, {3});
  uint32_t dw = builder.addBuffer("dw", plan::ACTIVATION, plan::F32, {3});
  uint32_t grad = builder.addBuffer("w.grad", plan::GRADIENT, plan::F32, {3});
  uint32_t norm =
      builder.addBuffer("zcc.grad_norm_sq", plan::OUTPUT, plan::F64, {});
  uint32_t scalars =
      builder.addBuffer("zcc.optimizer_scalars", plan::SCALARS, plan::F64, {8});
  uint32_t expAvg =
      builder.addBuffer("w.exp_avg", plan::OPTIMIZER_STATE, plan::F32, {3});
  uint32_t expAvgSq =
      builder.addBuffer("w.exp_avg_sq", plan::OPTIMIZER_STATE, plan::F32, {3});
  builder.addWeight("w", w, "weights.bin", 0);
  builder.addInput("x", x);
  builder.addInput("y", y);
  builder.addInput("zcc.loss_scale", seed);
  builder.addInput("zcc.optimizer_scalars", scalars);
  builder.addOutput("loss", loss);
  builder.addOutput("zcc.grad_norm_sq", norm);
  builder.addInstruction("mul", {x, w}, {xw}, "/Mul", "micro_step");
  builder.addInstruction("mse_loss", {xw, y}, {loss}, "/Loss", "micro_step");
  builder.addInstruction("mse_loss_grad", {xw, y, seed}, {dxw}, "/Loss",
                         "micro_step");
  builder.addInstruction("mul", {dxw, x}, {dw}, "/Mul", "micro_step");
  builder.addInstruction("accumulate", {dw}, {grad}, "w", "micro_step");
  builder.addInstruction("sum_squares", {grad}, {norm}, "", "grad_norm");
  builder.addInstruction("adamw", {w, grad, expAvg, expAvgSq, scalars},
                         {w, expAvg, expAvgSq}, "", "optimizer_step");
  builder.addInstruction("fill", {}, {grad}, "", "optimizer_step");
  builder.addInstruction("fill", {}, {grad}, "", "zero_grads");
  plan::Training &training = *builder.plan().mutable_training();
  training.set_optimizer("adamw");
  training.set_lr(1e-3);
  training.set_beta1(0.9);
  training.set_beta2(0.999);
  training.set_eps(1e-8);
  training.set_weight_decay(0.01);
  training.set_gradient_accumulation_steps(2);
  training.set_micro_batch_size(1);
  training.set_train_batch_size(2);
  training.set_steps_per_print(10);
  training.set_precision("fp32");
  training.set_data_parallel_size(1);
  training.set_optimizer_scalars(scalars);
  training.set_loss_scale(seed);
  training.set_grad_norm_sq(norm);
  training.set_loss(loss);
  for (uint32_t input : {x, y}) {
    plan::Binding *binding = training.add_data_inputs();
    binding->set_name(builder.plan().buffers(input).name());
    binding->set_buffer(input);
  }
  training.set_parameter_count(3);
  return builder.plan();
}

} // namespace zcc::test

#endif // ZCC_TEST_RUNTIME_PLANTESTUTIL_H
