//===- ConfigImportTest.cpp - DeepSpeed config resolution -----------------===//
//
// The numbers a config resolves to (batch arithmetic, defaults, aliases) and
// the attribute round trip; the wording of error messages is checked by the
// lit tests in test/Import/Config.
//
//===----------------------------------------------------------------------===//

#include "compiler/Import/Config/ConfigAttr.h"
#include "compiler/Import/Config/DeepSpeedConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

namespace zcc::config {
namespace {

ConfigImportResult import(const std::string &text, int64_t worldSize = 1) {
  ConfigImportOptions options;
  options.worldSize = worldSize;
  return importDeepSpeedConfig(text, options);
}

std::string firstError(const ConfigImportResult &result) {
  for (const ConfigDiagnostic &diagnostic : result.diagnostics)
    if (diagnostic.severity == ConfigDiagnostic::Severity::Error)
      return diagnostic.message;
  return "";
}

struct BatchCase {
  const char *name;
  const char *json;
  int64_t worldSize;
  int64_t trainBatch, microBatch, accumulation; // 0: expect an error
};

void PrintTo(const BatchCase &c, std::ostream *out) { *out << c.name; }

class BatchReconciliation : public testing::TestWithParam<BatchCase> {};

// DeepSpeed's _set_batch_related_parameters, case by case, with its integer
// division.
TEST_P(BatchReconciliation, MatchesDeepSpeed) {
  const BatchCase &c = GetParam();
  ConfigImportResult result = import(c.json, c.worldSize);
  if (c.trainBatch == 0) {
    EXPECT_FALSE(result.succeeded()) << c.json;
    return;
  }
  ASSERT_TRUE(result.succeeded()) << c.json << ": " << firstError(result);
  const Json &config = *result.config;
  EXPECT_EQ(config["train_batch_size"], c.trainBatch) << c.json;
  EXPECT_EQ(config["train_micro_batch_size_per_gpu"], c.microBatch) << c.json;
  EXPECT_EQ(config["gradient_accumulation_steps"], c.accumulation) << c.json;
}

INSTANTIATE_TEST_SUITE_P(
    Triples, BatchReconciliation,
    testing::Values(
        BatchCase{"AllThreeOneRank", R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
                     "gradient_accumulation_steps": 8})", 1, 32, 4, 8},
        BatchCase{"AllThreeTwoRanksMismatch", R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
                     "gradient_accumulation_steps": 8})", 2, 0, 0, 0},
        BatchCase{"TrainAndMicro", R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})", 2, 32, 4, 4},
        BatchCase{"TrainAndAccumulation", R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})", 4, 32, 4, 2},
        BatchCase{"MicroAndAccumulation", R"({"train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 5})", 2,
                  30, 3, 5},
        BatchCase{"TrainOnly", R"({"train_batch_size": 24})", 3, 24, 8, 1},
        BatchCase{"MicroOnly", R"({"train_micro_batch_size_per_gpu": 6})", 4, 24, 6, 1},
        // 30 / 4 / 2 = 3 by integer division, and 30 != 4 * 3 * 2.
        BatchCase{"TrainAndMicroNotDivisible", R"({"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4})", 2, 0, 0, 0},
        // 8 / 4 / 4 = 0 accumulation steps.
        BatchCase{"DerivedZeroAccumulation", R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4})", 4, 0, 0, 0},
        // "auto" counts as not given.
        BatchCase{"AutoMeansNotGiven", R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 2,
                     "gradient_accumulation_steps": "auto"})", 2, 4, 2, 1},
        BatchCase{"NoBatchSize", R"({"steps_per_print": 5})", 1, 0, 0, 0},
        // A pipeline divides the world: data-parallel size 4 / 2 = 2.
        BatchCase{"PipelineDividesWorld", R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2,
                     "pipeline": {"enabled": true, "num_stages": 2}})", 4, 16, 2, 4},
        // pipeline.micro_batches stands for the accumulation count.
        BatchCase{"PipelineMicroBatches", R"({"train_micro_batch_size_per_gpu": 2,
                     "pipeline": {"enabled": true, "num_stages": 2, "micro_batches": 8}})", 2,
                  16, 2, 8}),
    [](const testing::TestParamInfo<BatchCase> &info) { return std::string(info.param.name); });

TEST(ConfigImport, SeedZero3OffloadConfig) {
  const char *text = R"({
    "train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 8,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.0001, "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0,
                  "warmup_max_lr": 0.0001, "warmup_num_steps": 1000}},
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
      "offload_param": {"device": "cpu", "pin_memory": true}, "overlap_reduce": true,
      "contiguous_gradients": true, "reduce_bucket_size": 5e8,
      "stage3_prefetch_bucket_size": 5e8, "stage3_param_persistence_threshold": 1e4,
      "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9},
    "gradient_clipping": 1.0,
    "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000,
             "initial_scale_power": 32, "hysteresis": 2, "min_loss_scale": 1},
    "wall_clock_breakdown": false})";
  ConfigImportResult result = import(text);
  ASSERT_TRUE(result.succeeded()) << firstError(result);
  const Json &config = *result.config;
  const Json &zero = config["zero_optimization"];
  EXPECT_EQ(zero["stage"], 3);
  EXPECT_EQ(zero["overlap_comm"], true);
  EXPECT_EQ(zero["reduce_bucket_size"], 500000000);
  EXPECT_EQ(zero["stage3_param_persistence_threshold"], 10000);
  EXPECT_EQ(zero["offload_param"]["device"], "cpu");
  EXPECT_EQ(zero["offload_param"]["buffer_count"], 5);
  EXPECT_EQ(zero["offload_optimizer"]["buffer_count"], 4);
  EXPECT_EQ(zero["allgather_bucket_size"], 500000000);
  EXPECT_EQ(config["fp16"]["initial_scale_power"], 32);
  EXPECT_EQ(config["bf16"]["enabled"], false);
  EXPECT_EQ(config["optimizer"]["type"], "adamw");
  EXPECT_EQ(config["optimizer"]["params"]["adam_w_mode"], true);
  EXPECT_DOUBLE_EQ(config["optimizer"]["params"]["betas"][1].get<double>(), 0.999);
  EXPECT_EQ(config["scheduler"]["params"]["warmup_type"], "log");
  EXPECT_EQ(config["steps_per_print"], 10);
  // overlap_reduce is accepted, with a warning naming it.
  ASSERT_FALSE(result.diagnostics.empty());
  EXPECT_EQ(result.diagnostics[0].severity, ConfigDiagnostic::Severity::Warning);
  EXPECT_EQ(result.diagnostics[0].path, "zero_optimization.overlap_reduce");

  ConfigImportResult twoRanks = import(text, 2);
  EXPECT_FALSE(twoRanks.succeeded());
  EXPECT_NE(firstError(twoRanks).find("32 != 4 * 8 * 2"), std::string::npos);
}

TEST(ConfigImport, OverlapCommDefaultsToStageThree) {
  for (int stage = 0; stage <= 3; ++stage) {
    ConfigImportResult result = import(R"({"train_batch_size": 1,
        "zero_optimization": {"stage": )" + std::to_string(stage) + "}}");
    ASSERT_TRUE(result.succeeded());
    EXPECT_EQ((*result.config)["zero_optimization"]["overlap_comm"], stage == 3);
  }
}

TEST(ConfigImport, AutoIsKeptWhereTheCostModelChooses) {
  ConfigImportResult result = import(R"({"train_batch_size": 1, "zero_optimization":
      {"stage": 3, "reduce_bucket_size": "auto", "contiguous_gradients": "auto"}})");
  ASSERT_TRUE(result.succeeded()) << firstError(result);
  EXPECT_EQ((*result.config)["zero_optimization"]["reduce_bucket_size"], "auto");
  EXPECT_EQ((*result.config)["zero_optimization"]["contiguous_gradients"], true);
}

TEST(ConfigImport, LionTakesFusedLionsDefaults) {
  ConfigImportResult result = import(R"({"train_batch_size": 1,
      "optimizer": {"type": "LION", "params": {"weight_decay": 0.1}}})");
  ASSERT_TRUE(result.succeeded()) << firstError(result);
  const Json &optimizer = (*result.config)["optimizer"];
  EXPECT_EQ(optimizer["type"], "lion");
  EXPECT_DOUBLE_EQ(optimizer["params"]["lr"].get<double>(), 1e-3);
  EXPECT_DOUBLE_EQ(optimizer["params"]["betas"][0].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(optimizer["params"]["betas"][1].get<double>(), 0.999);
  EXPECT_DOUBLE_EQ(optimizer["params"]["weight_decay"].get<double>(), 0.1);
  EXPECT_FALSE(optimizer["params"].contains("eps"));
}

TEST(ConfigImport, LambTakesFusedLambsDefaults) {
  ConfigImportResult result = import(R"({"train_batch_size": 1,
      "optimizer": {"type": "Lamb", "params": {"lr": 0.002}}})");
  ASSERT_TRUE(result.succeeded()) << firstError(result);
  const Json &params = (*result.config)["optimizer"]["params"];
  EXPECT_EQ((*result.config)["optimizer"]["type"], "lamb");
  EXPECT_DOUBLE_EQ(params["lr"].get<double>(), 0.002);
  EXPECT_DOUBLE_EQ(params["eps"].get<double>(), 1e-8);
  EXPECT_DOUBLE_EQ(params["max_coeff"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(params["min_coeff"].get<double>(), 0.01);
  EXPECT_EQ(params["bias_correction"], true);
  EXPECT_EQ(params["eps_inside_sqrt"], false);
  EXPECT_DOUBLE_EQ(params["weight_decay"].get<double>(), 0.0);

  // Partitioned (the sums of squares are all-reduced), but not on the host.
  ConfigImportResult zero = import(R"({"train_batch_size": 2, "zero_optimization": {"stage": 2},
      "optimizer": {"type": "Lamb"}})",
                                   /*worldSize=*/2);
  EXPECT_TRUE(zero.succeeded()) << firstError(zero);
  ConfigImportResult offload = import(R"({"train_batch_size": 2, "zero_optimization":
      {"stage": 2, "offload_optimizer": {"device": "cpu"}}, "optimizer": {"type": "Lamb"}})",
                                      /*worldSize=*/2);
  ASSERT_FALSE(offload.succeeded());
  EXPECT_NE(firstError(offload).find("Lamb with offload_optimizer is not supported yet"),
            std::string::npos)
      << firstError(offload);
}

TEST(ConfigImport, SchedulerDefaultsFollowDeepSpeed) {
  ConfigImportResult warmup = import(R"({"train_batch_size": 1,
      "optimizer": {"type": "Adam", "params": {"lr": 0.02}},
      "scheduler": {"type": "WarmupLR"}})");
  ASSERT_TRUE(warmup.succeeded()) << firstError(warmup);
  // warmup_max_lr falls back to the optimizer's lr.
  EXPECT_DOUBLE_EQ((*warmup.config)["scheduler"]["params"]["warmup_max_lr"].get<double>(), 0.02);
  EXPECT_EQ((*warmup.config)["scheduler"]["params"]["warmup_num_steps"], 1000);

  ConfigImportResult cycle = import(R"({"train_batch_size": 1,
      "optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}},
      "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.01,
                    "cycle_max_lr": 0.1, "cycle_first_step_size": 300}}})");
  ASSERT_TRUE(cycle.succeeded()) << firstError(cycle);
  const Json &params = (*cycle.config)["scheduler"]["params"];
  EXPECT_EQ(params["cycle_second_step_size"], 300);
  EXPECT_DOUBLE_EQ(params["cycle_min_mom"].get<double>(), 0.8);

  ConfigImportResult decay = import(R"({"train_batch_size": 1,
      "optimizer": {"type": "Adam"}, "scheduler": {"type": "WarmupDecayLR"}})");
  EXPECT_FALSE(decay.succeeded());
  EXPECT_NE(firstError(decay).find("total_num_steps"), std::string::npos);
}

TEST(ConfigImport, PositionsPointAtTheKey) {
  ConfigImportResult result = import("{\n  \"train_batch_size\": 4,\n"
                                     "  \"fp16\": {\n    \"enabled\": true,\n"
                                     "    \"enabled\": false\n  }\n}");
  ASSERT_FALSE(result.succeeded());
  const ConfigDiagnostic &diagnostic = result.diagnostics.back();
  EXPECT_EQ(diagnostic.pos.line, 5u);
  EXPECT_EQ(diagnostic.pos.column, 5u);
  EXPECT_NE(diagnostic.message.find("first given at line 4, column 5"), std::string::npos);
}

TEST(ConfigImport, DeepNestingIsAnErrorNotACrash) {
  std::string text = "{\"checkpoint\": ";
  for (int i = 0; i < 100000; ++i)
    text += "[";
  ConfigImportResult result = import(text);
  ASSERT_FALSE(result.succeeded());
  EXPECT_NE(firstError(result).find("nested deeper"), std::string::npos);
}

TEST(ConfigAttr, RoundTripsTheResolvedConfig) {
  ConfigImportResult result = import(R"({"train_batch_size": 8,
      "optimizer": {"type": "AdamW"}, "scheduler": {"type": "WarmupCosineLR",
      "params": {"total_num_steps": 100}}, "zero_optimization": {"stage": 2}})", 2);
  ASSERT_TRUE(result.succeeded()) << firstError(result);
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(&context));
  attachConfig(*module, *result.config);
  std::optional<Json> back = attributeToJson(getConfig(*module));
  ASSERT_TRUE(back.has_value());
  // Dictionaries sort their keys; compare as unordered JSON.
  EXPECT_EQ(nlohmann::json::parse(back->dump()), nlohmann::json::parse(result.config->dump()));
  EXPECT_EQ((*back)["data_parallel_size"], 2);
}

} // namespace
} // namespace zcc::config
