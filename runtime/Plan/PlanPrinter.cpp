//===- PlanPrinter.cpp - A plan as readable text --------------------------===//

#include "runtime/Plan/PlanPrinter.h"

#include "runtime/Plan/PlanLoader.h"
#include "runtime/Support/Status.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace zcc {

/// A string literal with C escapes, so names with quotes or newlines cannot
/// break the one-item-per-line layout.
static std::string quote(const std::string &text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (std::isprint(c))
        out += static_cast<char>(c);
      else
        out += formatString("\\x%02x", c);
    }
  }
  return out + "\"";
}

/// The shortest text that reads back as the same double, always with a '.'
/// or an exponent so it cannot be mistaken for an integer attribute. Whole
/// numbers print without an exponent ("1000.0", not "1e+03": step counts).
static std::string formatDouble(double value) {
  if (std::isfinite(value) && value == std::trunc(value) &&
      std::fabs(value) < 1e16)
    return formatString("%.1f", value);
  std::string text;
  for (int precision = 1; precision <= 17; ++precision) {
    text = formatString("%.*g", precision, value);
    if (std::strtod(text.c_str(), nullptr) == value)
      break;
  }
  if (text.find_first_of(".eEn") == std::string::npos)
    text += ".0";
  return text;
}

static std::string lowerName(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return name;
}

static std::string kindText(plan::BufferKind kind) {
  if (!plan::BufferKind_IsValid(kind))
    return formatString("kind(%d)", static_cast<int>(kind));
  return lowerName(plan::BufferKind_Name(kind));
}

static std::string backendText(plan::Backend backend) {
  switch (backend) {
  case plan::BACKEND_ANY:
    return "any";
  case plan::BACKEND_CPU:
    return "cpu";
  case plan::BACKEND_CUDA:
    return "cuda";
  default:
    return formatString("backend(%d)", static_cast<int>(backend));
  }
}

static std::string attributeText(const plan::Attribute &attribute) {
  switch (attribute.value_case()) {
  case plan::Attribute::kI:
    return std::to_string(attribute.i());
  case plan::Attribute::kF:
    return formatDouble(attribute.f());
  case plan::Attribute::kS:
    return quote(attribute.s());
  case plan::Attribute::kInts: {
    std::string text = "[";
    for (int i = 0; i < attribute.ints().values_size(); ++i) {
      if (i)
        text += ", ";
      text += std::to_string(attribute.ints().values(i));
    }
    return text + "]";
  }
  case plan::Attribute::kB:
    return attribute.b() ? "true" : "false";
  case plan::Attribute::VALUE_NOT_SET:
    break;
  }
  return "<unset>";
}

static std::string
operandList(const google::protobuf::RepeatedField<uint32_t> &ids) {
  std::string text;
  for (int i = 0; i < ids.size(); ++i) {
    if (i)
      text += ", ";
    text += "%" + std::to_string(ids.Get(i));
  }
  return text;
}

/// The magic's bytes as characters where they are printable ("ZCCPLAN1").
static std::string magicText(uint64_t magic) {
  std::string text;
  for (int i = 0; i < 8; ++i) {
    unsigned char c = static_cast<unsigned char>(magic >> (8 * i));
    text += std::isprint(c) ? static_cast<char>(c) : '.';
  }
  return text;
}

static std::string u64(uint64_t value) { return std::to_string(value); }

static std::string boolText(bool value) { return value ? "true" : "false"; }

/// The Training message: the optimizer and its numbers, the schedule, the
/// loss scaler, clipping, the batch sizes, and the buffers the runtime's
/// loop writes and reads, by id.
static std::string trainingText(const plan::Training &training) {
  std::string out = "training:\n";
  out += "  optimizer: " + quote(training.optimizer()) + ", lr " +
         formatDouble(training.lr()) + ", beta1 " +
         formatDouble(training.beta1()) + ", beta2 " +
         formatDouble(training.beta2()) + ", eps " +
         formatDouble(training.eps()) + ", weight_decay " +
         formatDouble(training.weight_decay()) + ", momentum " +
         formatDouble(training.momentum()) + ", dampening " +
         formatDouble(training.dampening()) + ", nesterov " +
         boolText(training.nesterov()) + "\n";

  const plan::Scheduler &scheduler = training.scheduler();
  out += "  scheduler: ";
  if (scheduler.type().empty())
    out += "none (constant lr)";
  else
    out += quote(scheduler.type());
  if (!scheduler.warmup_type().empty())
    out += ", warmup_type " + quote(scheduler.warmup_type());
  if (!scheduler.anneal_strategy().empty())
    out += ", anneal_strategy " + quote(scheduler.anneal_strategy());
  // The params map iterates in hash order; sorting keeps dumps stable.
  std::vector<const std::string *> names;
  for (const auto &entry : scheduler.params())
    names.push_back(&entry.first);
  std::sort(names.begin(), names.end(),
            [](const std::string *a, const std::string *b) { return *a < *b; });
  if (!names.empty()) {
    out += ", params";
    for (const std::string *name : names)
      out +=
          " " + quote(*name) + "=" + formatDouble(scheduler.params().at(*name));
  }
  if (scheduler.milestones_size() > 0) {
    out += ", milestones [";
    for (int i = 0; i < scheduler.milestones_size(); ++i)
      out += (i ? ", " : "") + std::to_string(scheduler.milestones(i));
    out += "]";
  }
  out += "\n";

  const plan::LossScaler &scaler = training.loss_scaler();
  out += "  loss_scaler: ";
  if (!scaler.enabled())
    out += scaler.skip_nonfinite() ? "disabled, steps with inf or NaN gradients skipped"
                                   : "disabled";
  else
    out += std::string(scaler.dynamic() ? "dynamic" : "static") +
           ", static_scale " + formatDouble(scaler.static_scale()) +
           ", initial_scale_power " +
           std::to_string(scaler.initial_scale_power()) + ", scale_window " +
           std::to_string(scaler.scale_window()) + ", hysteresis " +
           std::to_string(scaler.hysteresis()) + ", consecutive_hysteresis " +
           boolText(scaler.consecutive_hysteresis()) + ", min_scale " +
           formatDouble(scaler.min_scale());
  out += "\n";

  out += "  gradient_clipping: " + formatDouble(training.gradient_clipping()) +
         "\n";
  out += "  batch: train_batch_size " +
         std::to_string(training.train_batch_size()) + ", micro_batch_size " +
         std::to_string(training.micro_batch_size()) +
         ", gradient_accumulation_steps " +
         std::to_string(training.gradient_accumulation_steps()) +
         ", data_parallel_size " +
         std::to_string(training.data_parallel_size()) + "\n";
  out += "  precision: " + quote(training.precision()) + "\n";
  out +=
      "  steps_per_print: " + std::to_string(training.steps_per_print()) + "\n";
  out += "  token_range: " + std::to_string(training.token_range()) + "\n";
  out += "  parameter_count: " + u64(training.parameter_count()) + "\n";
  out += "  optimizer_scalars: %" + u64(training.optimizer_scalars()) + "\n";
  out += "  loss_scale: %" + u64(training.loss_scale()) + "\n";
  out += "  grad_norm_sq: %" + u64(training.grad_norm_sq()) + "\n";
  out += "  loss: %" + u64(training.loss()) + "\n";
  out += "  data_inputs: " + std::to_string(training.data_inputs_size()) + "\n";
  for (const plan::Binding &binding : training.data_inputs())
    out +=
        "    " + quote(binding.name()) + " -> %" + u64(binding.buffer()) + "\n";
  return out;
}

std::string printPlan(const plan::PlanFile &header, const plan::Plan &plan) {
  std::string out;
  out += formatString("header: magic 0x%016llx %s, format_version %u, "
                      "producer %s, checksum 0x%08x\n",
                      static_cast<unsigned long long>(header.magic()),
                      quote(magicText(header.magic())).c_str(),
                      header.format_version(), quote(header.producer()).c_str(),
                      header.checksum());
  out += "mode: " + quote(plan.mode()) + "\n";
  out += "backend: " + backendText(plan.backend()) + "\n";

  const plan::Mesh &mesh = plan.mesh();
  int64_t worldSize = 1;
  out += "mesh:";
  for (int i = 0; i < std::max(mesh.axis_names_size(), mesh.axis_sizes_size());
       ++i) {
    std::string name = i < mesh.axis_names_size() ? mesh.axis_names(i) : "?";
    int64_t size = i < mesh.axis_sizes_size() ? mesh.axis_sizes(i) : 0;
    worldSize *= size;
    out += " " + quote(name) + "=" + std::to_string(size);
  }
  out += (mesh.axis_names_size() || mesh.axis_sizes_size() ? ", " : " ");
  out += "world size " + std::to_string(worldSize) + "\n";

  out += "model_path: " + quote(plan.model_path()) + "\n";
  out += "arena: " + u64(plan.arena_bytes()) + " bytes, alignment " +
         u64(plan.arena_alignment()) + "\n";
  if (plan.host_arena_bytes())
    out += "host arena: " + u64(plan.host_arena_bytes()) + " bytes\n";
  if (plan.nvme_bytes())
    out += "nvme swap file: " + u64(plan.nvme_bytes()) + " bytes\n";
  out += "memory:";
  for (const plan::MemoryCategory &category : plan.memory())
    out += std::string(" ") + (category.space() == plan::HOST   ? "host:"
                             : category.space() == plan::NVME ? "nvme:"
                                                              : "") +
           quote(category.category()) + "=" + u64(category.bytes());
  out += "\n";

  out += "buffers: " + std::to_string(plan.buffers_size()) + "\n";
  for (const plan::Buffer &buffer : plan.buffers()) {
    std::string shape;
    for (int i = 0; i < buffer.shape_size(); ++i)
      shape += (i ? "x" : "") + std::to_string(buffer.shape(i));
    out += "  %" + u64(buffer.id()) + " " + kindText(buffer.kind()) + " " +
           quote(buffer.name()) + " " + dtypeText(buffer.dtype()) + "[" +
           shape + "] " + (buffer.space() == plan::HOST   ? "host "
                      : buffer.space() == plan::NVME ? "nvme "
                                                     : "") + "offset " +
           u64(buffer.offset()) + " bytes " + u64(buffer.bytes());
    if (!buffer.constant_data().empty())
      out += " data " + u64(buffer.constant_data().size());
    if (plan.has_pipeline())
      out += " stage " + u64(buffer.stage());
    if (buffer.step_local())
      out += " step_local";
    out += "\n";
  }

  out += "weights: " + std::to_string(plan.weights_size()) + "\n";
  for (const plan::Weight &weight : plan.weights()) {
    out += "  " + quote(weight.name()) + " -> %" + u64(weight.buffer());
    if (weight.file().empty())
      out += " file none";
    else
      out += " file " + quote(weight.file()) + " offset " +
             u64(weight.offset()) + " length " + u64(weight.length()) + " " +
             dtypeText(weight.file_dtype());
    const plan::RandomInit &init = weight.random_init();
    switch (init.kind()) {
    case plan::RandomInit::NORMAL:
      out += ", random normal(std " + formatDouble(init.std()) + ")";
      break;
    case plan::RandomInit::ONES:
      out += ", random ones";
      break;
    case plan::RandomInit::ZEROS:
      out += ", random zeros";
      break;
    default:
      out += formatString(", random kind(%d)", static_cast<int>(init.kind()));
    }
    out += "\n";
  }

  auto stageText = [&](uint32_t stage) {
    return plan.has_pipeline() ? " stage " + u64(stage) : std::string();
  };
  out += "inputs: " + std::to_string(plan.inputs_size()) + "\n";
  for (const plan::Binding &binding : plan.inputs())
    out += "  " + quote(binding.name()) + " -> %" + u64(binding.buffer()) +
           stageText(binding.stage()) + "\n";
  out += "outputs: " + std::to_string(plan.outputs_size()) + "\n";
  for (const plan::Binding &binding : plan.outputs())
    out += "  " + quote(binding.name()) + " -> %" + u64(binding.buffer()) +
           stageText(binding.stage()) + "\n";

  if (plan.has_pipeline()) {
    const plan::Pipeline &pipeline = plan.pipeline();
    out += "pipeline: " + quote(pipeline.schedule()) + ", " +
           std::to_string(pipeline.micro_batches()) + " micro-batches, bubble fraction " +
           formatDouble(pipeline.bubble_fraction()) + "\n";
    for (int s = 0; s < pipeline.stages_size(); ++s) {
      const plan::PipelineStage &stage = pipeline.stages(s);
      out += "  stage " + std::to_string(s) + ": arena " + u64(stage.arena_bytes()) +
             " bytes, " + std::to_string(stage.activation_buffers()) +
             " activation buffers, " + std::to_string(stage.steps_size()) + " steps:";
      for (const plan::PipelineStep &step : stage.steps())
        out += " " + step.program() + "@" + std::to_string(step.micro_batch());
      out += "\n";
    }
  }

  if (plan.has_training())
    out += trainingText(plan.training());

  for (const plan::Program &program : plan.programs()) {
    out += "program " + quote(program.name()) + ": " +
           std::to_string(program.instructions_size()) + " instructions" +
           stageText(program.stage()) + "\n";
    for (const plan::Instruction &instruction : program.instructions()) {
      out += "  ";
      if (instruction.outputs_size())
        out += operandList(instruction.outputs()) + " = ";
      out +=
          instruction.kernel() + "(" + operandList(instruction.inputs()) + ")";
      // The attribute map iterates in hash order; sorting keeps dumps stable.
      std::vector<const std::string *> names;
      for (const auto &entry : instruction.attributes())
        names.push_back(&entry.first);
      std::sort(
          names.begin(), names.end(),
          [](const std::string *a, const std::string *b) { return *a < *b; });
      if (!names.empty()) {
        out += " {";
        for (size_t i = 0; i < names.size(); ++i) {
          if (i)
            out += ", ";
          out += *names[i] + " = " +
                 attributeText(instruction.attributes().at(*names[i]));
        }
        out += "}";
      }
      out += " stream " + u64(instruction.stream());
      if (!instruction.location().empty())
        out += " // " + instruction.location();
      out += "\n";
    }
  }
  out += "config_json: " + quote(plan.config_json()) + "\n";
  return out;
}

} // namespace zcc
