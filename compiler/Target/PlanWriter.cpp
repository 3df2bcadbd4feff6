//===- PlanWriter.cpp - The zplan module as plan.bin ----------------------===//

#include "compiler/Target/PlanWriter.h"

#include "compiler/Import/Config/ConfigAttr.h"
#include "dialects/Plan/IR/ZPlan.h"
#include "plan.pb.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace zcc {
namespace {

plan::DType convertDType(Type element) {
  if (element.isF32())
    return plan::F32;
  if (element.isF16())
    return plan::F16;
  if (element.isBF16())
    return plan::BF16;
  if (element.isF64())
    return plan::F64;
  if (element.isInteger(64))
    return plan::I64;
  if (element.isInteger(32))
    return plan::I32;
  if (element.isInteger(8))
    return plan::I8;
  if (element.isInteger(1))
    return plan::BOOL;
  return plan::DTYPE_UNSPECIFIED;
}

plan::BufferKind convertKind(StringRef kind) {
  return llvm::StringSwitch<plan::BufferKind>(kind)
      .Case("parameter", plan::PARAMETER)
      .Case("constant", plan::CONSTANT)
      .Case("input", plan::INPUT)
      .Case("output", plan::OUTPUT)
      .Case("activation", plan::ACTIVATION)
      .Case("gradient", plan::GRADIENT)
      .Case("optimizer_state", plan::OPTIMIZER_STATE)
      .Case("scalars", plan::SCALARS)
      .Case("parameter_copy", plan::PARAMETER_COPY)
      .Case("stash", plan::STASH)
      .Default(plan::BUFFER_KIND_UNSPECIFIED);
}

/// Little-endian element bytes of a dense constant, one byte per bool.
std::string constantBytes(DenseElementsAttr value) {
  Type element = value.getElementType();
  std::string bytes;
  if (element.isInteger(1)) {
    for (bool b : value.getValues<bool>())
      bytes.push_back(b ? 1 : 0);
    return bytes;
  }
  unsigned width = element.getIntOrFloatBitWidth() / 8;
  auto append = [&](const APInt &bits) {
    for (unsigned i = 0; i < width; ++i)
      bytes.push_back(char(bits.extractBitsAsZExtValue(8, i * 8)));
  };
  if (isa<FloatType>(element)) {
    for (const APFloat &f : value.getValues<APFloat>())
      append(f.bitcastToAPInt());
  } else {
    for (const APInt &i : value.getValues<APInt>())
      append(i);
  }
  return bytes;
}

bool convertAttribute(Attribute attribute, plan::Attribute &out) {
  if (auto b = dyn_cast<BoolAttr>(attribute))
    out.set_b(b.getValue());
  else if (auto i = dyn_cast<IntegerAttr>(attribute))
    out.set_i(i.getValue().getSExtValue());
  else if (auto f = dyn_cast<FloatAttr>(attribute))
    out.set_f(f.getValueAsDouble());
  else if (auto s = dyn_cast<StringAttr>(attribute))
    out.set_s(s.str());
  else if (auto ints = dyn_cast<DenseI64ArrayAttr>(attribute)) {
    // mutable_ints() marks the oneof even for an empty list.
    plan::Ints *values = out.mutable_ints();
    for (int64_t v : ints.asArrayRef())
      values->add_values(v);
  }
  else if (isa<UnitAttr>(attribute))
    out.set_b(true);
  else
    return false;
  return true;
}

std::string locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  return "";
}

double number(DictionaryAttr dict, StringRef name, double defaultValue) {
  Attribute attr = dict ? dict.get(name) : Attribute();
  if (auto f = dyn_cast_or_null<FloatAttr>(attr))
    return f.getValueAsDouble();
  // Before IntegerAttr: a BoolAttr is an i1 IntegerAttr, whose true reads
  // as -1.
  if (auto b = dyn_cast_or_null<BoolAttr>(attr))
    return b.getValue() ? 1.0 : 0.0;
  if (auto i = dyn_cast_or_null<IntegerAttr>(attr))
    return double(i.getInt());
  return defaultValue;
}

bool flag(DictionaryAttr dict, StringRef name, bool defaultValue) {
  auto attr = dict ? dict.getAs<BoolAttr>(name) : BoolAttr();
  return attr ? attr.getValue() : defaultValue;
}

DictionaryAttr section(DictionaryAttr dict, StringRef name) {
  return dict ? dict.getAs<DictionaryAttr>(name) : DictionaryAttr();
}

/// The runtime's loop settings of a training plan, from the resolved
/// config and the programs' scalar bindings.
LogicalResult buildTraining(ModuleOp module, DictionaryAttr config, plan::Plan &result) {
  plan::Training *training = result.mutable_training();
  DictionaryAttr optimizer = section(config, "optimizer");
  DictionaryAttr params = section(optimizer, "params");
  auto typeAttr = optimizer ? optimizer.getAs<StringAttr>("type") : StringAttr();
  if (!typeAttr)
    return module.emitError("a training plan needs the config's optimizer"), failure();
  std::string type = typeAttr.getValue().lower();
  if (type == "adam")
    type = flag(params, "adam_w_mode", true) ? "adamw" : "adam";
  training->set_optimizer(type);
  training->set_lr(number(params, "lr", 1e-3));
  double beta1 = 0.9, beta2 = 0.999;
  if (auto betas = params ? params.getAs<ArrayAttr>("betas") : ArrayAttr()) {
    if (betas.size() != 2 || !isa<FloatAttr>(betas[0]) || !isa<FloatAttr>(betas[1]))
      return module.emitError("optimizer.params.betas must hold two numbers"), failure();
    beta1 = cast<FloatAttr>(betas[0]).getValueAsDouble();
    beta2 = cast<FloatAttr>(betas[1]).getValueAsDouble();
  }
  training->set_beta1(beta1);
  training->set_beta2(beta2);
  training->set_eps(number(params, "eps", 1e-8));
  training->set_weight_decay(number(params, "weight_decay", 0.0));
  training->set_momentum(number(params, "momentum", 0.0));
  training->set_dampening(number(params, "dampening", 0.0));
  training->set_nesterov(flag(params, "nesterov", false));

  DictionaryAttr scheduler = section(config, "scheduler");
  if (auto schedulerType = scheduler ? scheduler.getAs<StringAttr>("type") : StringAttr()) {
    plan::Scheduler *out = training->mutable_scheduler();
    out->set_type(schedulerType.str());
    if (DictionaryAttr schedulerParams = section(scheduler, "params"))
      for (NamedAttribute param : schedulerParams) {
        if (auto s = dyn_cast<StringAttr>(param.getValue())) {
          if (param.getName() == "warmup_type")
            out->set_warmup_type(s.str());
          else if (param.getName() == "anneal_strategy")
            out->set_anneal_strategy(s.str());
          else
            return module.emitError("scheduler.params.")
                       << param.getName().str() << " is a string, which the plan cannot carry",
                   failure();
          continue;
        }
        // MultiStepLR's milestones.
        if (auto list = dyn_cast<ArrayAttr>(param.getValue())) {
          if (param.getName() != "milestones")
            return module.emitError("scheduler.params.")
                       << param.getName().str() << " is a list; only milestones is", failure();
          for (Attribute element : list) {
            auto integer = dyn_cast<IntegerAttr>(element);
            if (!integer)
              return module.emitError("scheduler.params.milestones must hold integers"), failure();
            out->add_milestones(integer.getInt());
          }
          continue;
        }
        if (isa<FloatAttr, IntegerAttr, BoolAttr>(param.getValue()))
          (*out->mutable_params())[param.getName().str()] =
              number(schedulerParams, param.getName(), 0.0);
      }
  }

  DictionaryAttr fp16 = section(config, "fp16");
  DictionaryAttr bf16 = section(config, "bf16");
  bool halfPrecision = flag(fp16, "enabled", false);
  training->set_precision(halfPrecision ? "fp16" : flag(bf16, "enabled", false) ? "bf16" : "fp32");
  plan::LossScaler *scaler = training->mutable_loss_scaler();
  scaler->set_enabled(halfPrecision);
  // DeepSpeed's bf16 optimizers check the gradients for inf and NaN and
  // skip such a step (bf16.check_grad_overflow, default true).
  scaler->set_skip_nonfinite(!halfPrecision && flag(bf16, "enabled", false) &&
                             flag(bf16, "check_grad_overflow", true));
  if (halfPrecision) {
    double staticScale = number(fp16, "loss_scale", 0.0);
    scaler->set_dynamic(staticScale == 0.0);
    scaler->set_static_scale(staticScale);
    scaler->set_initial_scale_power(int64_t(number(fp16, "initial_scale_power", 16)));
    scaler->set_scale_window(int64_t(number(fp16, "loss_scale_window", 1000)));
    scaler->set_hysteresis(int64_t(number(fp16, "hysteresis", 2)));
    scaler->set_consecutive_hysteresis(flag(fp16, "consecutive_hysteresis", false));
    scaler->set_min_scale(number(fp16, "min_loss_scale", 1.0));
  }
  training->set_gradient_clipping(number(config, "gradient_clipping", 0.0));
  training->set_gradient_accumulation_steps(
      int64_t(number(config, "gradient_accumulation_steps", 1)));
  training->set_micro_batch_size(int64_t(number(config, "train_micro_batch_size_per_gpu", 1)));
  training->set_train_batch_size(int64_t(number(config, "train_batch_size", 1)));
  training->set_steps_per_print(int64_t(number(config, "steps_per_print", 10)));
  training->set_data_parallel_size(int64_t(number(config, "data_parallel_size", 1)));
  if (auto range = module->getAttrOfType<IntegerAttr>("zplan.token_range"))
    training->set_token_range(range.getInt());

  // The scalar and output bindings the loop reads and writes.
  bool haveScalars = false, haveSeed = false, haveNorm = false, haveLoss = false;
  for (const plan::Binding &input : result.inputs()) {
    if (input.name() == "zcc.optimizer_scalars") {
      training->set_optimizer_scalars(input.buffer());
      haveScalars = true;
    } else if (input.name() == "zcc.loss_scale") {
      training->set_loss_scale(input.buffer());
      haveSeed = true;
    } else if (!StringRef(input.name()).starts_with("zcc.") &&
               llvm::none_of(training->data_inputs(), [&](const plan::Binding &seen) {
                 return seen.name() == input.name();
               })) {
      // A pipeline's stages each bind the data inputs they read.
      *training->add_data_inputs() = input;
    }
  }
  for (const plan::Binding &output : result.outputs()) {
    if (output.name() == "zcc.grad_norm_sq") {
      training->set_grad_norm_sq(output.buffer());
      haveNorm = true;
    } else if (!StringRef(output.name()).starts_with("zcc.")) {
      training->set_loss(output.buffer());
      haveLoss = true;
    }
  }
  // Each micro-step feeds one micro-batch: the rows of every data input.
  for (const plan::Binding &input : training->data_inputs()) {
    const plan::Buffer &buffer = result.buffers(input.buffer());
    if (buffer.shape_size() == 0 || buffer.shape(0) != training->micro_batch_size())
      return emitError(module.getLoc())
                 << "input '" << input.name() << "' has "
                 << (buffer.shape_size() == 0 ? std::string("no batch dimension")
                                              : "batch " + std::to_string(buffer.shape(0)))
                 << " but train_micro_batch_size_per_gpu is "
                 << training->micro_batch_size()
                 << "; export the model with that batch (or a dynamic one), or set "
                    "train_micro_batch_size_per_gpu (and the batch triple) to match",
             failure();
  }
  if (!haveScalars || !haveSeed || !haveNorm || !haveLoss)
    return module.emitError("a training plan needs the loss, the loss scale, the optimizer "
                            "scalars and the gradient norm bindings"),
           failure();
  uint64_t parameters = 0;
  for (const plan::Buffer &buffer : result.buffers())
    if (buffer.kind() == plan::PARAMETER) {
      uint64_t count = 1;
      for (int64_t d : buffer.shape())
        count *= d;
      parameters += count;
    }
  training->set_parameter_count(parameters);
  return success();
}

/// The pipeline's schedule: each instruction ("F3", "sa3", ...) as the
/// program of its slot that the stage runs for it.
LogicalResult buildPipeline(ModuleOp module, DictionaryAttr pipeline, plan::Plan &result) {
  plan::Pipeline *out = result.mutable_pipeline();
  out->set_schedule(pipeline.getAs<StringAttr>("schedule").str());
  out->set_micro_batches(pipeline.getAs<IntegerAttr>("micro_batches").getInt());
  out->set_bubble_fraction(pipeline.getAs<FloatAttr>("bubble_fraction").getValueAsDouble());
  auto chunkBuffers = pipeline.getAs<DenseI64ArrayAttr>("chunk_buffers");
  int64_t stages = static_cast<int64_t>(pipeline.getAs<ArrayAttr>("stages").size());
  for (auto [s, entry] : llvm::enumerate(pipeline.getAs<ArrayAttr>("stages"))) {
    auto stage = cast<DictionaryAttr>(entry);
    plan::PipelineStage *stageOut = out->add_stages();
    stageOut->set_arena_bytes(stage.getAs<IntegerAttr>("arena_bytes").getInt());
    int64_t buffers = stage.getAs<IntegerAttr>("buffers").getInt();
    stageOut->set_activation_buffers(buffers);
    for (NamedAttribute category : stage.getAs<DictionaryAttr>("memory")) {
      plan::MemoryCategory *memory = stageOut->add_memory();
      memory->set_category(category.getName().str());
      memory->set_bytes(cast<IntegerAttr>(category.getValue()).getInt());
    }
    if (auto host = stage.getAs<IntegerAttr>("host_arena_bytes"))
      stageOut->set_host_arena_bytes(host.getInt());
    if (auto hostMemory = stage.getAs<DictionaryAttr>("host_memory"))
      for (NamedAttribute category : hostMemory) {
        plan::MemoryCategory *memory = stageOut->add_memory();
        memory->set_category(category.getName().str());
        memory->set_bytes(cast<IntegerAttr>(category.getValue()).getInt());
        memory->set_space(plan::HOST);
      }
    if (auto nvme = stage.getAs<IntegerAttr>("nvme_bytes"))
      stageOut->set_nvme_bytes(nvme.getInt());
    if (auto nvmeMemory = stage.getAs<DictionaryAttr>("nvme_memory"))
      for (NamedAttribute category : nvmeMemory) {
        plan::MemoryCategory *memory = stageOut->add_memory();
        memory->set_category(category.getName().str());
        memory->set_bytes(cast<IntegerAttr>(category.getValue()).getInt());
        memory->set_space(plan::NVME);
      }
    SmallVector<StringRef> words;
    stage.getAs<StringAttr>("instructions").getValue().split(words, ' ', -1, false);
    for (StringRef word : words) {
      // "F3", or "F3@2" under the interleaved schedule: chunk 2's.
      auto [instruction, chunkText] = word.split('@');
      int64_t chunk = -1;
      if (!chunkText.empty() &&
          (chunkText.getAsInteger(10, chunk) || !chunkBuffers ||
           chunk >= static_cast<int64_t>(chunkBuffers.size()) || chunk % stages != int64_t(s)))
        return module.emitError() << "bad pipeline instruction '" << word << "'", failure();
      size_t digits = instruction.find_first_of("0123456789");
      StringRef kind = instruction.take_front(digits);
      int64_t microBatch = 0;
      if (digits == StringRef::npos ||
          instruction.drop_front(digits).getAsInteger(10, microBatch))
        return module.emitError() << "bad pipeline instruction '" << word << "'", failure();
      auto [stepKind, program] =
          llvm::StringSwitch<std::pair<plan::PipelineStep::Kind, StringRef>>(kind)
              .Case("F", {plan::PipelineStep::FORWARD, "forward"})
              .Case("B", {plan::PipelineStep::BACKWARD, "backward"})
              .Case("sa", {plan::PipelineStep::SEND_ACTIVATIONS, "send_activations"})
              .Case("ra", {plan::PipelineStep::RECV_ACTIVATIONS, "recv_activations"})
              .Case("sg", {plan::PipelineStep::SEND_GRADIENTS, "send_gradients"})
              .Case("rg", {plan::PipelineStep::RECV_GRADIENTS, "recv_gradients"})
              .Case("W", {plan::PipelineStep::BACKWARD_WEIGHTS, "weights"})
              .Default({plan::PipelineStep::FORWARD, ""});
      if (program.empty())
        return module.emitError() << "bad pipeline instruction '" << word << "'", failure();
      plan::PipelineStep *step = stageOut->add_steps();
      step->set_kind(stepKind);
      step->set_micro_batch(microBatch);
      int64_t slots = chunk >= 0 ? chunkBuffers.asArrayRef()[chunk] : buffers;
      step->set_program("s" + std::to_string(s) + "." +
                        (chunk >= 0 ? "c" + std::to_string(chunk) + "." : std::string()) +
                        program.str() + "." +
                        std::to_string(microBatch % std::max<int64_t>(1, slots)));
    }
  }
  return success();
}

} // namespace

FailureOr<plan::Plan> buildPlan(ModuleOp module) {
  plan::Plan result;
  // The device arena, a host arena where the plan offloads, and the swap
  // file where it offloads to NVMe.
  auto arenas = llvm::to_vector(module.getOps<zplan::ArenaOp>());
  auto isDevice = [](zplan::ArenaOp arena) {
    return arena.getSymName() == "device" && arena.getMemorySpace() == zplan::MemorySpace::Device;
  };
  auto isHost = [](zplan::ArenaOp arena) {
    return arena.getSymName() == "host" && arena.getMemorySpace() == zplan::MemorySpace::Host;
  };
  auto isNvme = [](zplan::ArenaOp arena) {
    return arena.getSymName() == "nvme" && arena.getMemorySpace() == zplan::MemorySpace::Nvme;
  };
  bool valid = !arenas.empty() && arenas.size() <= 3 && isDevice(arenas[0]);
  for (size_t i = 1; i < arenas.size(); ++i)
    valid &= (isHost(arenas[i]) && i == 1) || (isNvme(arenas[i]) && i == arenas.size() - 1);
  if (!valid)
    return module.emitError("expects an arena @device, optionally an arena @host in host "
                            "memory and then an arena @nvme in nvme (run zcc-dist-to-plan "
                            "first)"),
           failure();
  result.set_arena_bytes(arenas[0].getSize());
  result.set_arena_alignment(arenas[0].getAlignment());
  for (zplan::ArenaOp arena : ArrayRef(arenas).drop_front()) {
    if (isHost(arena))
      result.set_host_arena_bytes(arena.getSize());
    if (isNvme(arena))
      result.set_nvme_bytes(arena.getSize());
  }

  llvm::StringMap<uint32_t> ids;
  for (zplan::ArenaOp arena : arenas)
  for (zplan::BufferOp buffer : arena.getOps<zplan::BufferOp>()) {
    uint32_t id = result.buffers_size();
    if (!ids.try_emplace(buffer.getSymName(), id).second)
      return buffer.emitError("buffer name used in both arenas"), failure();
    plan::Buffer *out = result.add_buffers();
    out->set_id(id);
    if (isHost(arena))
      out->set_space(plan::HOST);
    if (isNvme(arena))
      out->set_space(plan::NVME);
    auto type = buffer->getAttrOfType<TypeAttr>("type");
    auto kind = buffer->getAttrOfType<StringAttr>("kind");
    if (!type || !kind)
      return buffer.emitError("buffer without a type and kind"), failure();
    auto tensor = cast<RankedTensorType>(type.getValue());
    out->set_kind(convertKind(kind.getValue()));
    out->set_dtype(convertDType(tensor.getElementType()));
    if (out->dtype() == plan::DTYPE_UNSPECIFIED)
      return buffer.emitError() << "element type " << tensor.getElementType()
                                << " has no plan dtype",
             failure();
    for (int64_t d : tensor.getShape())
      out->add_shape(d);
    out->set_offset(buffer.getOffset());
    out->set_bytes(buffer.getSize());
    if (auto name = buffer->getAttrOfType<StringAttr>("name"))
      out->set_name(name.str());
    if (buffer->hasAttr("step_local"))
      out->set_step_local(true);
    if (auto stage = buffer->getAttrOfType<IntegerAttr>("stage"))
      out->set_stage(stage.getInt());
    if (auto value = buffer->getAttrOfType<DenseElementsAttr>("value"))
      out->set_constant_data(constantBytes(value));
    if (auto weight = buffer->getAttrOfType<DictionaryAttr>("weight")) {
      plan::Weight *w = result.add_weights();
      w->set_name(out->name());
      w->set_buffer(id);
      if (auto file = weight.getAs<StringAttr>("file"))
        w->set_file(file.str());
      if (auto offset = weight.getAs<IntegerAttr>("offset"))
        w->set_offset(offset.getInt());
      if (auto length = weight.getAs<IntegerAttr>("length"))
        w->set_length(length.getInt());
      // The file's dtype where it differs from the buffer's (a 16-bit
      // inference weight read from f32).
      auto fileType = weight.getAs<TypeAttr>("dtype");
      w->set_file_dtype(fileType ? convertDType(fileType.getValue()) : out->dtype());
      if (auto shards = buffer->getAttrOfType<IntegerAttr>("shards"))
        w->set_shards(shards.getInt());
      if (auto init = buffer->getAttrOfType<DictionaryAttr>("random_init")) {
        StringRef kindName = init.getAs<StringAttr>("kind").getValue();
        w->mutable_random_init()->set_kind(kindName == "ones"    ? plan::RandomInit::ONES
                                           : kindName == "zeros" ? plan::RandomInit::ZEROS
                                                                 : plan::RandomInit::NORMAL);
        if (auto std = init.getAs<FloatAttr>("std"))
          w->mutable_random_init()->set_std(std.getValueAsDouble());
      }
    }
  }

  auto bufferId = [&](Attribute ref) -> std::optional<uint32_t> {
    auto symbol = dyn_cast<SymbolRefAttr>(ref);
    if (!symbol || symbol.getNestedReferences().size() != 1)
      return std::nullopt;
    auto it = ids.find(symbol.getLeafReference().getValue());
    if (it == ids.end())
      return std::nullopt;
    return it->second;
  };

  for (zplan::ProgramOp program : module.getOps<zplan::ProgramOp>()) {
    plan::Program *out = result.add_programs();
    out->set_name(program.getSymName().str());
    if (auto stage = program->getAttrOfType<IntegerAttr>("stage"))
      out->set_stage(stage.getInt());
    // A program's events are numbered in the order it declares them.
    llvm::StringMap<int64_t> events;
    for (auto event : program.getOps<zplan::EventOp>())
      events.try_emplace(event.getSymName(), static_cast<int64_t>(events.size()));
    for (Operation &op : program.getBodyRegion().front()) {
      if (isa<zplan::EventOp>(op))
        continue;
      if (isa<zplan::RecordOp, zplan::WaitOp>(op)) {
        bool record = isa<zplan::RecordOp>(op);
        StringRef name = record ? cast<zplan::RecordOp>(op).getEvent()
                                : cast<zplan::WaitOp>(op).getEvent();
        auto it = events.find(name);
        if (it == events.end())
          return op.emitError() << "event @" << name
                                << " is not declared in its program; module events "
                                   "cannot be serialised",
                 failure();
        plan::Instruction *instruction = out->add_instructions();
        instruction->set_kernel(record ? "record_event" : "wait_event");
        instruction->set_stream(record ? cast<zplan::RecordOp>(op).getStream()
                                       : cast<zplan::WaitOp>(op).getStream());
        (*instruction->mutable_attributes())["event"].set_i(it->second);
        continue;
      }
      auto kernel = dyn_cast<zplan::KernelOp>(op);
      if (!kernel)
        return op.emitError("only kernels, events, records and waits can be serialised"),
               failure();
      plan::Instruction *instruction = out->add_instructions();
      instruction->set_kernel(kernel.getName().str());
      instruction->set_stream(kernel.getStream());
      instruction->set_location(locationName(kernel.getLoc()));
      for (Attribute ref : kernel.getIns()) {
        std::optional<uint32_t> id = bufferId(ref);
        if (!id)
          return kernel.emitError() << "unknown buffer " << ref, failure();
        instruction->add_inputs(*id);
      }
      for (Attribute ref : kernel.getOuts()) {
        std::optional<uint32_t> id = bufferId(ref);
        if (!id)
          return kernel.emitError() << "unknown buffer " << ref, failure();
        instruction->add_outputs(*id);
      }
      if (DictionaryAttr params = kernel.getParamsAttr())
        for (NamedAttribute param : params) {
          plan::Attribute attribute;
          if (!convertAttribute(param.getValue(), attribute))
            return kernel.emitError() << "attribute '" << param.getName().getValue()
                                      << "' has no plan form",
                   failure();
          (*instruction->mutable_attributes())[param.getName().str()] = attribute;
        }
    }
  }

  auto addBindings = [&](StringRef attrName,
                         google::protobuf::RepeatedPtrField<plan::Binding> *out) -> LogicalResult {
    auto list = module->getAttrOfType<ArrayAttr>(attrName);
    if (!list)
      return module.emitError() << "missing " << attrName, failure();
    for (Attribute entry : list) {
      auto pair = cast<ArrayAttr>(entry);
      plan::Binding *binding = out->Add();
      binding->set_name(cast<StringAttr>(pair[0]).str());
      std::optional<uint32_t> id = bufferId(pair[1]);
      if (!id)
        return module.emitError() << "binding to an unknown buffer", failure();
      binding->set_buffer(*id);
      if (pair.size() > 2)
        binding->set_stage(cast<IntegerAttr>(pair[2]).getInt());
    }
    return success();
  };
  if (failed(addBindings("zplan.inputs", result.mutable_inputs())) ||
      failed(addBindings("zplan.outputs", result.mutable_outputs())))
    return failure();

  if (auto mesh = module->getAttrOfType<DictionaryAttr>("zplan.mesh")) {
    for (Attribute name : mesh.getAs<ArrayAttr>("axis_names"))
      result.mutable_mesh()->add_axis_names(cast<StringAttr>(name).str());
    for (int64_t size : mesh.getAs<DenseI64ArrayAttr>("axis_sizes").asArrayRef())
      result.mutable_mesh()->add_axis_sizes(size);
  }
  if (auto mode = module->getAttrOfType<StringAttr>("zplan.mode"))
    result.set_mode(mode.str());
  if (auto model = module->getAttrOfType<StringAttr>("zcc.model_path"))
    result.set_model_path(model.str());
  for (StringRef space : {"zplan.memory", "zplan.host_memory", "zplan.nvme_memory"})
    if (auto memory = module->getAttrOfType<DictionaryAttr>(space))
      for (NamedAttribute category : memory) {
        plan::MemoryCategory *out = result.add_memory();
        out->set_category(category.getName().str());
        out->set_bytes(cast<IntegerAttr>(category.getValue()).getInt());
        if (space == "zplan.host_memory")
          out->set_space(plan::HOST);
        if (space == "zplan.nvme_memory")
          out->set_space(plan::NVME);
      }
  if (auto pipeline = module->getAttrOfType<DictionaryAttr>("zplan.pipeline"))
    if (failed(buildPipeline(module, pipeline, result)))
      return failure();
  if (auto tuned = module->getAttrOfType<DictionaryAttr>("zcc.auto_tuned"))
    for (NamedAttribute choice : tuned)
      if (auto text = dyn_cast<StringAttr>(choice.getValue()))
        (*result.mutable_auto_tuned())[choice.getName().str()] = text.str();
  DictionaryAttr config = config::getConfig(module);
  if (config)
    if (std::optional<config::Json> json = config::attributeToJson(config))
      result.set_config_json(json->dump());
  if (result.mode() == "train" && failed(buildTraining(module, config, result)))
    return failure();
  return result;
}

} // namespace zcc
