//===- ConfigSchema.cpp - The DeepSpeed config schema as data -------------===//
//
// Defaults follow DeepSpeed's source (runtime/config.py, zero/config.py,
// zero/offload_config.py, precision_config.py, lr_schedules.py); see
// ../shared/DEEPSPEED.md. Where zcc differs, the row says why.
//
//===----------------------------------------------------------------------===//

#include "compiler/Import/Config/ConfigSchema.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>

namespace zcc::config {

const KeySpec *SectionSpec::find(const std::string &key) const {
  for (const KeySpec &spec : keys) {
    if (spec.name == key)
      return &spec;
    for (const std::string &alias : spec.aliases)
      if (alias == key)
        return &spec;
  }
  return nullptr;
}

const DeprecatedKey *SectionSpec::findDeprecated(const std::string &key) const {
  for (const DeprecatedKey &entry : deprecated)
    if (entry.name == key)
      return &entry;
  return nullptr;
}

std::vector<std::string> SectionSpec::spellings() const {
  std::vector<std::string> result;
  for (const KeySpec &spec : keys) {
    result.push_back(spec.name);
    result.insert(result.end(), spec.aliases.begin(), spec.aliases.end());
  }
  for (const DeprecatedKey &entry : deprecated)
    result.push_back(entry.name);
  return result;
}

namespace {

KeySpec key(std::string name, ValueKind kind, Json defaultValue) {
  KeySpec spec;
  spec.name = std::move(name);
  spec.kind = kind;
  spec.defaultValue = std::move(defaultValue);
  spec.nullable = spec.defaultValue.is_null();
  return spec;
}
KeySpec boolKey(std::string name, bool value) {
  return key(std::move(name), ValueKind::Bool, value);
}
KeySpec intKey(std::string name, Json value) {
  return key(std::move(name), ValueKind::Int, std::move(value));
}
KeySpec numberKey(std::string name, Json value) {
  return key(std::move(name), ValueKind::Number, std::move(value));
}
KeySpec stringKey(std::string name, Json value) {
  return key(std::move(name), ValueKind::String, std::move(value));
}
KeySpec enumKey(std::string name, Json value, std::vector<std::string> choices) {
  KeySpec spec = key(std::move(name), ValueKind::Enum, std::move(value));
  spec.choices = std::move(choices);
  return spec;
}
KeySpec sectionKey(std::string name, const SectionSpec &section) {
  KeySpec spec = key(std::move(name), ValueKind::Section, Json::object());
  spec.section = &section;
  return spec;
}
KeySpec opaqueKey(std::string name) {
  return key(std::move(name), ValueKind::Opaque, Json::object());
}

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

const SectionSpec &offloadParamSchema() {
  static const SectionSpec section{
      "offload_param",
      {
          enumKey("device", "none", {"none", "cpu", "nvme"}),
          stringKey("nvme_path", nullptr),
          // With device "nvme": zcc plans each swapped-in parameter's
          // staging buffer in host memory, sized to that parameter, so
          // there is no pool of buffers to size.
          intKey("buffer_count", 5)
              .atLeast(0)
              .noEffect("zcc plans a host staging buffer of each swapped-in parameter's "
                        "own size (zcc --report shows the host memory)"),
          intKey("buffer_size", int64_t(100000000))
              .atLeast(0)
              .noEffect("zcc plans a host staging buffer of each swapped-in parameter's "
                        "own size (zcc --report shows the host memory)"),
          // With device "nvme": the first max_in_cpu elements of the
          // swappable partitions, in the order the step reads them, stay
          // in host memory (zcc-dist-nvme-swap).
          intKey("max_in_cpu", int64_t(1000000000)).atLeast(0),
          boolKey("pin_memory", true)
              .noEffect("zcc pins every host buffer the device copies to or from"),
      },
      {}};
  return section;
}

const SectionSpec &offloadOptimizerSchema() {
  static const SectionSpec section{
      "offload_optimizer",
      {
          enumKey("device", "none", {"none", "cpu", "nvme"}),
          stringKey("nvme_path", nullptr),
          intKey("buffer_count", 4).atLeast(0),
          boolKey("pin_memory", true)
              .noEffect("zcc pins every host buffer the device copies to or from"),
          boolKey("pipeline_read", false)
              .noEffect("zcc places every swap of the optimizer state in the plan"),
          boolKey("pipeline_write", false)
              .noEffect("zcc places every swap of the optimizer state in the plan"),
          boolKey("fast_init", false).noEffect("the swap file starts as zeros"),
          numberKey("ratio", 1.0).atLeast(0.0).atMost(1.0),
          boolKey("super_offload", false).unsupported(
              "SuperOffload is not supported yet; remove super_offload"),
          numberKey("cpuadam_cores_perc", 0.8).above(0.0).atMost(1.0),
      },
      {}};
  return section;
}

const SectionSpec &zeroSchema() {
  static const char *kNoHooks =
      "zcc plans parameter gathering at compile time; there are no module hooks";
  static const char *kZeroPlusPlus = "ZeRO++ is not supported yet";
  static const char *kMics = "MiCS is not supported yet";
  static const SectionSpec section{
      "zero_optimization",
      {
          intKey("stage", 0).atLeast(0).atMost(3),
          boolKey("contiguous_gradients", true)
              .noEffect("zcc plans every gradient's bytes before the run: nothing fragments"),
          boolKey("reduce_scatter", true)
              .noEffect("an all-reduce and a reduce-scatter average the same gradients; zcc "
                        "reduce-scatters the partitioned ones"),
          intKey("reduce_bucket_size", int64_t(500000000)).atLeast(0).autoTuned(),
          boolKey("use_multi_rank_bucket_allreduce", true)
              .noEffect("zcc sizes its reduction buckets from reduce_bucket_size"),
          boolKey("allgather_partitions", true)
              .noEffect("zcc gathers the updated partitions with all-gathers"),
          intKey("allgather_bucket_size", int64_t(500000000)).atLeast(0).autoTuned(),
          // None resolves to stage == 3 after the section is read.
          key("overlap_comm", ValueKind::Bool, nullptr),
          boolKey("load_from_fp32_weights", true)
              .unsupported("zcc restores the fp32 master weights its checkpoints hold; remove "
                           "load_from_fp32_weights"),
          boolKey("elastic_checkpoint", false)
              .unsupported("elastic checkpoints (resuming at another data-parallel size) are "
                           "not supported yet; remove elastic_checkpoint"),
          sectionKey("offload_param", offloadParamSchema()).orNull(),
          sectionKey("offload_optimizer", offloadOptimizerSchema()).orNull(),
          key("zenflow", ValueKind::Opaque, nullptr)
              .unsupported("ZenFlow is not supported yet; remove zenflow"),
          intKey("sub_group_size", int64_t(1000000000))
              .atLeast(1)
              .autoTuned()
              .noEffect("zcc's optimizer updates each parameter whole, in no groups"),
          intKey("stage3_prefetch_bucket_size", int64_t(50000000))
              .atLeast(0)
              .autoTuned()
              .alias("prefetch_bucket_size"),
          intKey("stage3_param_persistence_threshold", int64_t(100000))
              .atLeast(0)
              .autoTuned()
              .alias("param_persistence_threshold"),
          intKey("stage3_model_persistence_threshold", kMaxInt64)
              .atLeast(0)
              .alias("model_persistence_threshold"),
          intKey("stage3_max_live_parameters", int64_t(1000000000))
              .atLeast(0)
              .autoTuned()
              .alias("max_live_parameters"),
          intKey("stage3_max_reuse_distance", int64_t(1000000000))
              .atLeast(0)
              .autoTuned()
              .alias("max_reuse_distance"),
          boolKey("stage3_gather_16bit_weights_on_model_save", false)
              .alias("gather_16bit_weights_on_model_save"),
          intKey("stage3_module_granularity_threshold", 0)
              .atLeast(0)
              .alias("module_granularity_threshold")
              .noEffect(kNoHooks),
          boolKey("stage3_use_all_reduce_for_fetch_params", false)
              .alias("use_all_reduce_for_fetch_params"),
          boolKey("stage3_allgather_sequential", false).alias("allgather_sequential"),
          boolKey("ignore_unused_parameters", true),
          boolKey("legacy_stage1", false).noEffect("zcc has one stage-1 implementation"),
          boolKey("round_robin_gradients", false),
          intKey("zero_hpz_partition_size", 1).atLeast(1).atMost(1).unsupported(
              kZeroPlusPlus),
          boolKey("zero_quantized_weights", false).unsupported(kZeroPlusPlus),
          boolKey("zero_quantized_nontrainable_weights", false).unsupported(kZeroPlusPlus),
          boolKey("zero_quantized_gradients", false).unsupported(kZeroPlusPlus),
          key("zeropp_loco_param", ValueKind::Opaque, nullptr).unsupported(kZeroPlusPlus),
          intKey("mics_shard_size", -1).unsupported(kMics),
          boolKey("mics_hierarchical_params_gather", false).unsupported(kMics),
          boolKey("memory_efficient_linear", true).noEffect(kNoHooks),
          boolKey("pipeline_loading_checkpoint", false),
          boolKey("override_module_apply", true).noEffect(kNoHooks),
          boolKey("log_trace_cache_warnings", false)
              .noEffect("zcc's schedule is static: there is no trace cache"),
          boolKey("enable_sanity_checks", false),
          boolKey("save_muon_momentum_buffer_in_memory", false),
          key("leaf_module", ValueKind::Opaque, Json::object()).noEffect(kNoHooks),
      },
      {
          {"overlap_reduce", "overlap_comm", DeprecatedKey::Action::Rename,
           "'overlap_reduce' is not a DeepSpeed key; it is read as 'overlap_comm'"},
          {"cpu_offload", "offload_optimizer", DeprecatedKey::Action::OffloadToCpu,
           "'cpu_offload' is deprecated; use \"offload_optimizer\": {\"device\": \"cpu\"}"},
          {"cpu_offload_param", "offload_param", DeprecatedKey::Action::OffloadToCpu,
           "'cpu_offload_param' is deprecated; use \"offload_param\": {\"device\": \"cpu\"}"},
          {"cpu_offload_use_pin_memory", "", DeprecatedKey::Action::Drop,
           "'cpu_offload_use_pin_memory' is deprecated and ignored; use pin_memory "
           "inside offload_param / offload_optimizer"},
          {"stage3_gather_fp16_weights_on_model_save",
           "stage3_gather_16bit_weights_on_model_save", DeprecatedKey::Action::Rename,
           "'stage3_gather_fp16_weights_on_model_save' is deprecated; use "
           "'stage3_gather_16bit_weights_on_model_save'"},
      }};
  return section;
}

const SectionSpec &fp16Schema() {
  static const SectionSpec section{
      "fp16",
      {
          boolKey("enabled", false),
          boolKey("auto_cast", false)
              .noEffect("zcc casts the model's fp32 inputs to fp16 at the entry already"),
          numberKey("loss_scale", 0.0).atLeast(0.0),
          intKey("initial_scale_power", 16).atLeast(0).atMost(127),
          intKey("loss_scale_window", 1000),
          intKey("hysteresis", 2).atLeast(1),
          boolKey("consecutive_hysteresis", false),
          numberKey("min_loss_scale", 1.0),
          boolKey("fp16_master_weights_and_grads", false).unsupported(
              "fp16 master weights are not supported yet: zcc keeps fp32 master "
              "weights; remove fp16_master_weights_and_grads"),
      },
      {}};
  return section;
}

const SectionSpec &bf16Schema() {
  static const SectionSpec section{
      "bf16",
      {
          boolKey("enabled", false),
          boolKey("immediate_grad_update", false)
              .noEffect("zcc adds each gradient into its fp32 accumulator as the backward "
                        "computes it"),
          boolKey("check_grad_overflow", true),
          boolKey("bf16_master_weights_and_grads", false),
          boolKey("bf16_optimizer_states", false),
      },
      {}};
  return section;
}

const SectionSpec &activationCheckpointingSchema() {
  static const SectionSpec section{
      "activation_checkpointing",
      {
          boolKey("partition_activations", false),
          boolKey("contiguous_memory_optimization", false)
              .noEffect("zcc plans the checkpoints' bytes with every other buffer"),
          boolKey("cpu_checkpointing", false),
          intKey("number_checkpoints", nullptr).atLeast(1),
          boolKey("synchronize_checkpoint_boundary", false),
          boolKey("profile", false).noEffect("use zcc --report for the memory saved"),
      },
      {}};
  return section;
}

const SectionSpec &pipelineSchema() {
  static const SectionSpec section{
      "pipeline",
      {
          boolKey("enabled", false),
          intKey("num_stages", 1).atLeast(1),
          stringKey("partition_method", "parameters"),
          enumKey("schedule", "1f1b", {"gpipe", "1f1b", "interleaved", "zb-h1"}),
          intKey("micro_batches", nullptr).atLeast(1),
          intKey("chunks", nullptr).atLeast(1),
          intKey("activation_checkpoint_interval", 0).atLeast(0),
          boolKey("pipe_partitioned", true),
          boolKey("grad_partitioned", true),
          boolKey("use_reentrant", true).noEffect(
              "zcc's recomputation is planned at compile time, not by torch.utils.checkpoint"),
          boolKey("seed_layers", false).noEffect("DeepSpeed does not read it either"),
      },
      {
          {"stage_id", "", DeprecatedKey::Action::Drop,
           "'stage_id' is ignored: the plan holds every stage and each rank takes its "
           "own from its rank"},
          {"stages", "num_stages", DeprecatedKey::Action::Rename,
           "'stages' is read as 'num_stages'"},
          {"partition", "partition_method", DeprecatedKey::Action::Rename,
           "'partition' is read as 'partition_method'"},
      }};
  return section;
}

const SectionSpec &dataTypesSchema() {
  static const SectionSpec section{
      "data_types",
      {enumKey("grad_accum_dtype", nullptr, {"fp32", "fp16", "bf16"}).orNull()},
      {}};
  return section;
}

SectionSpec makeTopLevelSchema() {
  static const char *kMonitor =
      "zcc writes metrics with zrun --log-json; monitor back ends are not used";
  static const char *kFp32Reduction =
      "zcc averages the gradients in fp32, where dividing before or after the sum "
      "changes only the rounding";
  KeySpec tensorboard = opaqueKey("tensorboard").noEffect(kMonitor);
  KeySpec wandb = opaqueKey("wandb").noEffect(kMonitor);
  KeySpec csvMonitor = opaqueKey("csv_monitor").noEffect(kMonitor);
  KeySpec comet = opaqueKey("comet").noEffect(kMonitor);
  return SectionSpec{
      "",
      {
          intKey("train_batch_size", nullptr).atLeast(1),
          intKey("train_micro_batch_size_per_gpu", nullptr).atLeast(1),
          intKey("gradient_accumulation_steps", nullptr).atLeast(1),
          intKey("steps_per_print", 10).atLeast(1),
          numberKey("gradient_clipping", 1.0).atLeast(0.0),
          boolKey("prescale_gradients", false)
              .noEffect(kFp32Reduction),
          numberKey("gradient_predivide_factor", 1.0).above(0.0).noEffect(kFp32Reduction),
          enumKey("gradient_allreduce_op", "avg", {"avg", "sum"}),
          enumKey("communication_data_type", nullptr, {"fp32", "fp16", "bf16"}).orNull(),
          enumKey("seq_parallel_communication_data_type", "fp32", {"fp32", "fp16", "bf16"}),
          boolKey("sparse_gradients", false)
              .unsupported("sparse gradients are not supported yet"),
          boolKey("zero_allow_untested_optimizer", false)
              .noEffect("zcc runs only its own optimizers"),
          boolKey("zero_force_ds_cpu_optimizer", true)
              .noEffect("an offloaded optimizer always runs on zcc's own host kernels"),
          boolKey("disable_allgather", false)
              .noEffect("zcc gathers the updated partitions with all-gathers"),
          boolKey("dataloader_drop_last", false),
          boolKey("wall_clock_breakdown", false)
              .noEffect("zrun --log-json records step times"),
          boolKey("memory_breakdown", false)
              .noEffect("zcc --report gives the memory plan before the run"),
          boolKey("dump_state", false).noEffect("zplan dump prints the plan"),
          boolKey("load_universal_checkpoint", false)
              .unsupported("universal checkpoints are not supported; zrun --resume reads the "
                           "checkpoints zrun --save writes"),
          boolKey("use_node_local_storage", false)
              .noEffect("each rank writes its own files under zrun --save's folder"),
          sectionKey("zero_optimization", zeroSchema()),
          sectionKey("fp16", fp16Schema()),
          sectionKey("bf16", bf16Schema()),
          // optimizer and scheduler have type-dependent params: the importer
          // resolves them itself.
          key("optimizer", ValueKind::Opaque, nullptr),
          key("scheduler", ValueKind::Opaque, nullptr),
          sectionKey("activation_checkpointing", activationCheckpointingSchema()),
          sectionKey("pipeline", pipelineSchema()),
          sectionKey("data_types", dataTypesSchema()),
          tensorboard,
          wandb,
          csvMonitor,
          comet,
          opaqueKey("comms_logger").noEffect("zrun --log-json records communication"),
          opaqueKey("flops_profiler").noEffect("zcc --report predicts FLOPs per step"),
          opaqueKey("timers").noEffect("zrun --log-json records step times"),
          // block_size and queue_depth cut and issue zrun's swap file I/O
          // (NVMe offload); the others are libaio's.
          opaqueKey("aio"),
          opaqueKey("checkpoint"),
          opaqueKey("compile").noEffect("zcc compiles the whole step already"),
          opaqueKey("amp").unsupported("apex AMP is not supported; use fp16 or bf16"),
          opaqueKey("elasticity").unsupported("elastic training is not supported yet"),
          opaqueKey("autotuning").unsupported(
              "the autotuner is not supported; zcc --report shows the memory and "
              "time of a configuration without running it"),
          opaqueKey("nebula").unsupported("Nebula checkpointing is not supported"),
          opaqueKey("data_efficiency").unsupported("data efficiency is not supported yet"),
          opaqueKey("curriculum_learning")
              .unsupported("curriculum learning is not supported yet"),
          opaqueKey("compression_training").unsupported("compression is not supported"),
          opaqueKey("eigenvalue").unsupported("eigenvalue computation is not supported"),
          opaqueKey("progressive_layer_drop")
              .unsupported("progressive layer drop is not supported yet"),
          opaqueKey("quantize_training").unsupported("MoQ quantization is not supported"),
          opaqueKey("sparse_attention").unsupported("sparse attention is not supported"),
          opaqueKey("hybrid_engine").unsupported("the hybrid engine is not supported"),
          opaqueKey("weight_quantization").unsupported("weight quantization is not supported"),
          opaqueKey("torch_autocast").unsupported("torch autocast is not supported; use bf16"),
          opaqueKey("graph_harvesting").noEffect("zcc replays whole steps as CUDA graphs"),
      },
      {
          {"bfloat16", "bf16", DeprecatedKey::Action::Rename,
           "'bfloat16' is the legacy name of 'bf16'"},
          {"allgather_size", "", DeprecatedKey::Action::Drop,
           "'allgather_size' is only read by the legacy \"zero_optimization\": true form"},
      }};
}

} // namespace

const SectionSpec &topLevelSchema() {
  static const SectionSpec section = makeTopLevelSchema();
  return section;
}

const SectionSpec &optimizerParamsSchema(const std::string &canonicalType) {
  // FusedAdam / DeepSpeedCPUAdam defaults (ops/adam/fused_adam.py).
  static const SectionSpec adam{
      "params",
      {
          numberKey("lr", 1e-3).atLeast(0.0).autoRejected(),
          key("betas", ValueKind::NumberList, Json::array({0.9, 0.999})).autoRejected(),
          numberKey("eps", 1e-8).above(0.0).autoRejected(),
          numberKey("weight_decay", 0.0).atLeast(0.0).autoRejected(),
          boolKey("bias_correction", true),
          boolKey("adam_w_mode", true),
          boolKey("amsgrad", false).unsupported(
              "AMSGrad is not supported (DeepSpeed's FusedAdam rejects it too)"),
          boolKey("torch_adam", false).noEffect("zcc always uses its own fused Adam"),
          boolKey("set_grad_none", true).noEffect("zcc's gradient buffers are planned"),
      },
      {}};
  // torch.optim.SGD.
  static const SectionSpec sgd{
      "params",
      {
          numberKey("lr", 1e-3).atLeast(0.0).autoRejected(),
          numberKey("momentum", 0.0).atLeast(0.0).autoRejected(),
          numberKey("dampening", 0.0).autoRejected(),
          numberKey("weight_decay", 0.0).atLeast(0.0).autoRejected(),
          boolKey("nesterov", false),
          boolKey("maximize", false).unsupported("maximize is not supported"),
          boolKey("foreach", false).noEffect("zcc's update is one fused kernel"),
          boolKey("differentiable", false).unsupported("differentiable SGD is not supported"),
          boolKey("fused", false).noEffect("zcc's update is one fused kernel"),
      },
      {}};
  // DeepSpeed's FusedLion / DeepSpeedCPULion (ops/lion): decoupled weight
  // decay, no eps, no bias correction.
  static const SectionSpec lion{
      "params",
      {
          numberKey("lr", 1e-3).atLeast(0.0).autoRejected(),
          key("betas", ValueKind::NumberList, Json::array({0.9, 0.999})).autoRejected(),
          numberKey("weight_decay", 0.0).atLeast(0.0).autoRejected(),
          boolKey("set_grad_none", true).noEffect("zcc's gradient buffers are planned"),
      },
      {}};
  // torch.optim.Adagrad (DeepSpeed's choice without offload) and
  // DeepSpeedCPUAdagrad (with it): L2 weight decay added to the gradient.
  static const SectionSpec adagrad{
      "params",
      {
          numberKey("lr", 1e-2).atLeast(0.0).autoRejected(),
          numberKey("lr_decay", 0.0).atLeast(0.0).autoRejected(),
          numberKey("weight_decay", 0.0).atLeast(0.0).autoRejected(),
          numberKey("initial_accumulator_value", 0.0)
              .atLeast(0.0)
              .autoRejected(),
          numberKey("eps", 1e-10).above(0.0).autoRejected(),
          boolKey("maximize", false).unsupported("maximize is not supported"),
          boolKey("differentiable", false).unsupported("differentiable Adagrad is not supported"),
          boolKey("foreach", false).noEffect("zcc's update is one fused kernel"),
          boolKey("fused", false).noEffect("zcc's update is one fused kernel"),
      },
      {}};
  // DeepSpeed's FusedLamb (ops/lamb/fused_lamb.py): Adam's moments, the
  // update scaled per parameter by the trust ratio ||p|| / ||update||.
  static const SectionSpec lamb{
      "params",
      {
          numberKey("lr", 1e-3).atLeast(0.0).autoRejected(),
          boolKey("bias_correction", true),
          key("betas", ValueKind::NumberList, Json::array({0.9, 0.999})).autoRejected(),
          numberKey("eps", 1e-8).above(0.0).autoRejected(),
          boolKey("eps_inside_sqrt", false),
          numberKey("weight_decay", 0.0).atLeast(0.0).autoRejected(),
          numberKey("max_grad_norm", 0.0).atLeast(0.0).autoRejected(),
          numberKey("max_coeff", 10.0).above(0.0).autoRejected(),
          numberKey("min_coeff", 0.01).atLeast(0.0).autoRejected(),
          boolKey("amsgrad", false).unsupported(
              "AMSGrad is not supported (DeepSpeed's FusedLamb rejects it too)"),
      },
      {}};
  return canonicalType == "sgd"       ? sgd
         : canonicalType == "lion"    ? lion
         : canonicalType == "adagrad" ? adagrad
         : canonicalType == "lamb"    ? lamb
                                      : adam;
}

namespace {
// torch.optim.lr_scheduler's classes zcc runs, DeepSpeed's fallback for a
// name it does not define.
const char *const kTorchSchedulers[] = {"StepLR",        "MultiStepLR",  "ExponentialLR",
                                        "ConstantLR",    "LinearLR",     "PolynomialLR",
                                        "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
                                        "OneCycleLR"};
} // namespace

const std::vector<std::string> &schedulerNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> result = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR",
                                       "OneCycle", "LRRangeTest"};
    result.insert(result.end(), std::begin(kTorchSchedulers), std::end(kTorchSchedulers));
    return result;
  }();
  return names;
}

bool isTorchScheduler(const std::string &type) {
  return std::find(std::begin(kTorchSchedulers), std::end(kTorchSchedulers), type) !=
         std::end(kTorchSchedulers);
}

const SectionSpec *schedulerParamsSchema(const std::string &type) {
  static const std::vector<std::string> kWarmupTypes = {"log", "linear"};
  auto warmup = [&](Json maxDefault) {
    return std::vector<KeySpec>{
        numberKey("warmup_min_lr", 0.0).atLeast(0.0).autoRejected(),
        numberKey("warmup_max_lr", std::move(maxDefault)).atLeast(0.0).autoRejected(),
        intKey("warmup_num_steps", 1000).atLeast(0).autoRejected(),
        stringKey("warmup_type", "log"),
        intKey("last_batch_iteration", -1).atLeast(-1),
    };
  };
  static const SectionSpec warmupLR{"params", warmup(nullptr), {}};
  static const SectionSpec warmupDecayLR = [&] {
    SectionSpec section{"params", warmup(1e-3), {}};
    section.keys.push_back(intKey("total_num_steps", nullptr).atLeast(1).autoRejected());
    return section;
  }();
  static const SectionSpec warmupCosineLR{
      "params",
      {
          intKey("total_num_steps", nullptr).atLeast(1).autoRejected(),
          numberKey("warmup_min_ratio", 0.0).atLeast(0.0).atMost(1.0),
          intKey("warmup_num_steps", 1000).atLeast(0).autoRejected(),
          numberKey("cos_min_ratio", 1e-4).atLeast(0.0).atMost(1.0),
          stringKey("warmup_type", "log"),
          intKey("last_batch_iteration", -1).atLeast(-1),
      },
      {}};
  static const SectionSpec oneCycle{
      "params",
      {
          numberKey("cycle_min_lr", nullptr).atLeast(0.0).autoRejected(),
          numberKey("cycle_max_lr", nullptr).atLeast(0.0).autoRejected(),
          numberKey("decay_lr_rate", 0.0).atLeast(0.0),
          intKey("cycle_first_step_size", 2000).atLeast(1),
          intKey("cycle_second_step_size", nullptr).atLeast(1),
          intKey("cycle_first_stair_count", 0).atLeast(0),
          intKey("cycle_second_stair_count", nullptr).atLeast(0),
          intKey("decay_step_size", 0).atLeast(0),
          boolKey("cycle_momentum", true),
          numberKey("cycle_min_mom", 0.8).atLeast(0.0).below(1.0),
          numberKey("cycle_max_mom", 0.9).atLeast(0.0).below(1.0),
          numberKey("decay_mom_rate", 0.0).atLeast(0.0),
          intKey("last_batch_iteration", -1).atLeast(-1),
      },
      {}};
  static const SectionSpec lrRangeTest{
      "params",
      {
          numberKey("lr_range_test_min_lr", 1e-3).atLeast(0.0),
          intKey("lr_range_test_step_size", 2000).atLeast(1),
          numberKey("lr_range_test_step_rate", 1.0).atLeast(0.0),
          boolKey("lr_range_test_staircase", false),
          intKey("last_batch_iteration", -1).atLeast(-1),
      },
      {}};
  // torch.optim.lr_scheduler's classes with numeric arguments, which
  // DeepSpeed builds as Class(optimizer, **params) (engine.py's fallback).
  // last_epoch must stay -1 (resolveScheduler says why); verbose only
  // printed the lr.
  auto torchKeys = [](std::vector<KeySpec> keys) {
    keys.push_back(intKey("last_epoch", -1).atLeast(-1));
    keys.push_back(boolKey("verbose", false).noEffect("zrun logs the lr of every step"));
    return keys;
  };
  static const SectionSpec stepLR{
      "params",
      torchKeys({intKey("step_size", nullptr).atLeast(1).autoRejected(),
                 numberKey("gamma", 0.1).atLeast(0.0).autoRejected()}),
      {}};
  static const SectionSpec multiStepLR{
      "params",
      torchKeys({key("milestones", ValueKind::IntList, nullptr).atLeast(0),
                 numberKey("gamma", 0.1).atLeast(0.0).autoRejected()}),
      {}};
  static const SectionSpec exponentialLR{
      "params", torchKeys({numberKey("gamma", nullptr).atLeast(0.0).autoRejected()}), {}};
  // torch raises ValueError for a factor outside (0, 1].
  static const SectionSpec constantLR{
      "params",
      torchKeys({numberKey("factor", 1.0 / 3).above(0.0).atMost(1.0),
                 intKey("total_iters", 5).atLeast(0).autoRejected()}),
      {}};
  static const SectionSpec linearLR{
      "params",
      torchKeys({numberKey("start_factor", 1.0 / 3).above(0.0).atMost(1.0),
                 numberKey("end_factor", 1.0).atLeast(0.0).atMost(1.0),
                 intKey("total_iters", 5).atLeast(0).autoRejected()}),
      {}};
  static const SectionSpec polynomialLR{
      "params",
      torchKeys({intKey("total_iters", 5).atLeast(0).autoRejected(),
                 numberKey("power", 1.0).atLeast(0.0)}),
      {}};
  static const SectionSpec cosineAnnealingLR{
      "params",
      torchKeys({intKey("T_max", nullptr).atLeast(1).autoRejected(),
                 numberKey("eta_min", 0.0).atLeast(0.0).autoRejected()}),
      {}};
  static const SectionSpec cosineAnnealingWarmRestarts{
      "params",
      torchKeys({intKey("T_0", nullptr).atLeast(1).autoRejected(),
                 intKey("T_mult", 1).atLeast(1).autoRejected(),
                 numberKey("eta_min", 0.0).atLeast(0.0).autoRejected()}),
      {}};
  // One param group: max_lr is one number (torch also takes a list).
  static const SectionSpec oneCycleLR{
      "params",
      torchKeys({numberKey("max_lr", nullptr).above(0.0).autoRejected(),
                 intKey("total_steps", nullptr).atLeast(1).autoRejected(),
                 intKey("epochs", nullptr).atLeast(1),
                 intKey("steps_per_epoch", nullptr).atLeast(1),
                 numberKey("pct_start", 0.3).atLeast(0.0).atMost(1.0),
                 stringKey("anneal_strategy", "cos"),
                 boolKey("cycle_momentum", true),
                 numberKey("base_momentum", 0.85).atLeast(0.0),
                 numberKey("max_momentum", 0.95).atLeast(0.0),
                 numberKey("div_factor", 25.0).above(0.0),
                 numberKey("final_div_factor", 1e4).above(0.0),
                 boolKey("three_phase", false)}),
      {}};
  static const std::pair<const char *, const SectionSpec *> kSchemas[] = {
      {"WarmupLR", &warmupLR},
      {"WarmupDecayLR", &warmupDecayLR},
      {"WarmupCosineLR", &warmupCosineLR},
      {"OneCycle", &oneCycle},
      {"LRRangeTest", &lrRangeTest},
      {"StepLR", &stepLR},
      {"MultiStepLR", &multiStepLR},
      {"ExponentialLR", &exponentialLR},
      {"ConstantLR", &constantLR},
      {"LinearLR", &linearLR},
      {"PolynomialLR", &polynomialLR},
      {"CosineAnnealingLR", &cosineAnnealingLR},
      {"CosineAnnealingWarmRestarts", &cosineAnnealingWarmRestarts},
      {"OneCycleLR", &oneCycleLR}};
  for (const auto &[name, schema] : kSchemas)
    if (type == name)
      return schema;
  return nullptr;
}

namespace {
struct KnownOptimizer {
  const char *name;
  bool supported;
};
// DeepSpeed's own names (config.py DEEPSPEED_OPTIMIZERS), then the
// torch.optim classes it falls back to, all lower-cased as DeepSpeed compares.
const KnownOptimizer kOptimizers[] = {
    {"adam", true},       {"adamw", true},      {"sgd", true},
    {"lamb", true},      {"onebitadam", false}, {"zerooneadam", false},
    {"onebitlamb", false}, {"adagrad", true},  {"lion", true},
    {"muon", false},      {"muadam", false},    {"muadamw", false},
    {"musgd", false},     {"adadelta", false},  {"adamax", false},
    {"asgd", false},      {"lbfgs", false},     {"nadam", false},
    {"radam", false},     {"rmsprop", false},   {"rprop", false},
    {"sparseadam", false},
};
} // namespace

std::optional<OptimizerName> lookupOptimizer(const std::string &type) {
  std::string lower = llvm::StringRef(type).lower();
  for (const KnownOptimizer &known : kOptimizers)
    if (lower == known.name)
      return OptimizerName{known.name, known.supported};
  return std::nullopt;
}

std::vector<std::string> optimizerSpellings() {
  return {"Adam", "AdamW", "SGD", "Lamb", "OneBitAdam", "ZeroOneAdam", "OneBitLamb",
          "Adagrad", "Lion", "Muon", "Adadelta", "Adamax", "NAdam", "RAdam", "RMSprop"};
}

} // namespace zcc::config
