//===- DistToPlan.cpp - Buffers, memory plan and kernels ------------------===//

#include "compiler/Conversion/MemoryPlanner.h"
#include "compiler/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <functional>

namespace zcc {
#define GEN_PASS_DEF_DISTTOPLANPASS
#include "compiler/Conversion/Passes.h.inc"
} // namespace zcc

using namespace mlir;

namespace zcc {
namespace {

enum class Kind {
  Parameter,
  Constant,
  Input,
  Output,
  Activation,
  Gradient,
  OptimizerState,
  Scalars,
  ParameterCopy,
  Stash
};

StringRef kindName(Kind kind) {
  switch (kind) {
  case Kind::Parameter:
    return "parameter";
  case Kind::Constant:
    return "constant";
  case Kind::Input:
    return "input";
  case Kind::Output:
    return "output";
  case Kind::Activation:
    return "activation";
  case Kind::Gradient:
    return "gradient";
  case Kind::OptimizerState:
    return "optimizer_state";
  case Kind::Scalars:
    return "scalars";
  case Kind::ParameterCopy:
    return "parameter_copy";
  case Kind::Stash:
    return "stash";
  }
  return "";
}

/// The report's category of a persistent buffer kind.
StringRef categoryName(Kind kind) {
  switch (kind) {
  case Kind::Parameter:
    return "parameters";
  case Kind::Constant:
    return "constants";
  case Kind::Input:
    return "inputs";
  case Kind::Output:
    return "outputs";
  case Kind::Activation:
    return "activations";
  case Kind::Gradient:
    return "gradients";
  case Kind::OptimizerState:
    return "optimizer_state";
  case Kind::Scalars:
    return "scalars";
  case Kind::ParameterCopy:
    return "parameter_copies";
  case Kind::Stash:
    return "pipeline_buffers";
  }
  return "";
}

struct BufferInfo {
  Kind kind = Kind::Activation;
  RankedTensorType type;
  std::string name;
  Operation *definingOp = nullptr;
  int64_t firstUse = 0;
  int64_t lastUse = 0;
  /// The pipeline stage whose ranks hold it (0 without a pipeline).
  int64_t stage = 0;
};

uint64_t elementBytes(Type element) {
  unsigned bits = element.getIntOrFloatBitWidth();
  return bits <= 8 ? 1 : bits / 8;
}

/// How `zrun --weights random` draws a parameter, GPT-2 style: normal(0,
/// 0.02) for matrices, ones for a layer norm's scale, zeros otherwise.
DictionaryAttr randomInit(OpBuilder &builder, zgraph::ParamOp param) {
  StringRef kind = "zeros";
  if (param.getType().getRank() >= 2)
    kind = "normal";
  for (OpOperand &use : param->getUses())
    if (isa<zgraph::LayerNormOp>(use.getOwner()) && use.getOperandNumber() == 1)
      kind = "ones";
  SmallVector<NamedAttribute> fields{builder.getNamedAttr("kind", builder.getStringAttr(kind))};
  if (kind == "normal")
    fields.push_back(builder.getNamedAttr("std", builder.getF64FloatAttr(0.02)));
  return builder.getDictionaryAttr(fields);
}

std::string locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string name = locationName(inner); !name.empty())
        return name;
  return "";
}

/// The operands an in-place training op writes (its outputs in the plan)
/// and the ones it only reads (its inputs).
bool inPlaceOperands(Operation *op, SmallVectorImpl<Value> &reads, SmallVectorImpl<Value> &writes) {
  if (auto accumulate = dyn_cast<zgraph::AccumulateOp>(op)) {
    reads.push_back(accumulate.getValue());
    writes.push_back(accumulate.getTarget());
    return true;
  }
  if (auto assign = dyn_cast<zgraph::AssignOp>(op)) {
    reads.push_back(assign.getValue());
    writes.push_back(assign.getTarget());
    return true;
  }
  if (auto fill = dyn_cast<zgraph::FillOp>(op)) {
    writes.push_back(fill.getTarget());
    return true;
  }
  if (auto adamw = dyn_cast<zgraph::AdamWOp>(op)) {
    reads.append(op->operand_begin(), op->operand_end());
    writes.append({adamw.getParam(), adamw.getExpAvg(), adamw.getExpAvgSq()});
    return true;
  }
  if (auto sgd = dyn_cast<zgraph::SgdOp>(op)) {
    reads.append(op->operand_begin(), op->operand_end());
    writes.append({sgd.getParam(), sgd.getMomentumBuffer()});
    return true;
  }
  return false;
}

/// The attributes of a collective instruction: the mesh axes its group
/// spans (comma-separated) and how it reduces.
DictionaryAttr collectiveParams(OpBuilder &builder, ArrayAttr axes, StringRef reduction) {
  std::string names;
  for (Attribute axis : axes)
    names += (names.empty() ? "" : ",") + cast<StringAttr>(axis).str();
  SmallVector<NamedAttribute> params{builder.getNamedAttr("axes", builder.getStringAttr(names))};
  if (!reduction.empty())
    params.push_back(builder.getNamedAttr("reduction", builder.getStringAttr(reduction)));
  return builder.getDictionaryAttr(params);
}

/// The attributes of a send or receive: the peer's stage, over the
/// pipeline axis of the mesh.
DictionaryAttr peerParams(OpBuilder &builder, int64_t peer) {
  return builder.getDictionaryAttr({builder.getNamedAttr("axes", builder.getStringAttr("pp")),
                                    builder.getNamedAttr("peer", builder.getI64IntegerAttr(peer))});
}

/// The kernel that runs a zgraph op: the op's name, but `assign` is a cast.
std::string kernelName(Operation *op) {
  if (isa<zgraph::AssignOp>(op))
    return "cast";
  return op->getName().stripDialect().str();
}

/// The exclusive bound of the token ids the functions' integer arguments
/// take: the rows of the table they index, the classes of a loss they label
/// (through reshapes).
int64_t tokenRange(ArrayRef<std::pair<func::FuncOp, std::string>> functions) {
  int64_t range = 0;
  std::function<void(Value)> visit = [&](Value value) {
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (auto reshape = dyn_cast<zgraph::ReshapeOp>(user))
        visit(reshape.getResult());
      else if (auto gather = dyn_cast<zgraph::GatherOp>(user); gather && use.getOperandNumber() == 1)
      {
        int64_t axis = static_cast<int64_t>(gather.getAxis());
        if (axis < 0)
          axis += gather.getData().getType().getRank();
        range = std::max(range, gather.getData().getType().getDimSize(axis));
      }
      else if (isa<zgraph::CrossEntropyOp, zgraph::NllLossOp>(user) && use.getOperandNumber() == 1)
        range = std::max(range,
                         cast<RankedTensorType>(user->getOperand(0).getType()).getDimSize(1));
    }
  };
  for (auto [func, name] : functions)
    for (BlockArgument argument : func.getArguments())
      if (auto type = dyn_cast<RankedTensorType>(argument.getType());
          type && isa<IntegerType>(type.getElementType()))
        visit(argument);
  return range;
}

struct DistToPlanPass : impl::DistToPlanPassBase<DistToPlanPass> {
  using DistToPlanPassBase::DistToPlanPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (alignment <= 0 || (alignment & (alignment - 1)) != 0) {
      module.emitError() << "alignment must be a power of two, got " << alignment;
      return signalPassFailure();
    }
    // An inference plan is @main as the program "infer"; a training plan is
    // every function of the training step, each a program of its name.
    SmallVector<std::pair<func::FuncOp, std::string>> functions;
    bool training = false;
    // A pipeline: each stage's functions, each a program of its name whose
    // buffers only that stage's ranks hold.
    zdist::PipelineOp pipeline;
    if (auto pipelines = module.getOps<zdist::PipelineOp>(); !pipelines.empty())
      pipeline = *pipelines.begin();
    if (pipeline) {
      for (auto func : module.getOps<func::FuncOp>()) {
        if (!func->hasAttr("zdist.stage")) {
          func.emitError("a pipeline's functions each belong to a stage (run "
                         "zcc-dist-pipeline-split first)");
          return signalPassFailure();
        }
        functions.push_back({func, func.getSymName().str()});
      }
      training = bool(module.lookupSymbol<func::FuncOp>("s0.optimizer_step"));
    } else if (auto main = module.lookupSymbol<func::FuncOp>("main")) {
      functions.push_back({main, "infer"});
    } else {
      for (auto func : module.getOps<func::FuncOp>())
        functions.push_back({func, func.getSymName().str()});
      training = true;
    }
    if (functions.empty()) {
      module.emitError("expects func.func @main (inference) or the training step functions");
      return signalPassFailure();
    }
    for (auto &[func, name] : functions)
      if (func.getBody().getBlocks().size() != 1) {
        func.emitError("expects a single-block function");
        return signalPassFailure();
      }
    OpBuilder builder(module.getContext());

    std::vector<BufferInfo> buffers;
    llvm::DenseMap<Value, unsigned> bufferOf;
    int64_t stage = 0;
    // Buffers are shared by name within a stage.
    auto keyOf = [&](const std::string &key) {
      return pipeline ? "s" + std::to_string(stage) + "/" + key : key;
    };
    // Buffers that outlive one program, by name: parameters, training
    // states, inputs (and runtime scalars), outputs.
    llvm::StringMap<unsigned> shared;
    auto addBuffer = [&](Value value, Kind kind, std::string name, Operation *op,
                         int64_t index) {
      bufferOf[value] = buffers.size();
      buffers.push_back({kind, cast<RankedTensorType>(value.getType()), std::move(name), op,
                         index, index, stage});
      return buffers.size() - 1;
    };
    auto addShared = [&](Value value, Kind kind, const std::string &localKey, std::string name,
                         Operation *op) -> FailureOr<unsigned> {
      std::string key = keyOf(localKey);
      auto it = shared.find(key);
      if (it == shared.end()) {
        unsigned id = addBuffer(value, kind, std::move(name), op, 0);
        shared[key] = id;
        return id;
      }
      if (buffers[it->second].type != value.getType()) {
        (op ? op->emitError() : module.emitError())
            << "'" << key << "' has type " << value.getType() << " here but "
            << buffers[it->second].type << " elsewhere";
        return failure();
      }
      bufferOf[value] = it->second;
      return it->second;
    };

    struct Instruction {
      Operation *op;
      std::string kernel;
      SmallVector<unsigned> inputs;
      SmallVector<unsigned> outputs;
      DictionaryAttr params;
    };
    struct Program {
      std::string name;
      std::vector<Instruction> instructions;
      int64_t stage = 0;
    };
    std::vector<Program> programs;
    SmallVector<std::pair<std::string, unsigned>> inputs, outputs;
    // The kind of a buffer shared under `key` ("input:NAME", "param:NAME",
    // "state:NAME.KIND").
    auto kindOfKey = [](StringRef key) {
      if (key.starts_with("input:zcc.pp."))
        return Kind::Stash;
      if (key.starts_with("input:zcc."))
        return Kind::Scalars;
      if (key.starts_with("param:"))
        return Kind::Parameter;
      if (key.starts_with("state:"))
        return key.ends_with(".grad")   ? Kind::Gradient
               : key.ends_with(".copy") ? Kind::ParameterCopy
                                        : Kind::OptimizerState;
      return Kind::Input;
    };
    int64_t clock = 0; // one timeline over all programs, which run in turn

    for (auto &[func, programName] : functions) {
      Block &body = func.getBody().front();
      Program &program = programs.emplace_back();
      program.name = programName;
      if (auto stageAttr = func->getAttrOfType<IntegerAttr>("zdist.stage"))
        stage = stageAttr.getInt();
      program.stage = stage;
      for (BlockArgument argument : body.getArguments()) {
        auto nameAttr = func.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "zgraph.name");
        std::string name =
            nameAttr ? nameAttr.str() : "arg" + std::to_string(argument.getArgNumber());
        Kind kind = kindOfKey("input:" + name);
        bool fresh = !shared.count(keyOf("input:" + name));
        FailureOr<unsigned> id = addShared(argument, kind, "input:" + name, name, nullptr);
        if (failed(id))
          return signalPassFailure();
        // A stage's own buffers between its programs are no inputs.
        if (fresh && kind != Kind::Stash)
          inputs.push_back({name, *id});
      }
      for (Operation &op : body) {
        if (auto param = dyn_cast<zgraph::ParamOp>(op)) {
          if (failed(addShared(param, Kind::Parameter, "param:" + param.getName().str(),
                               param.getName().str(), &op)))
            return signalPassFailure();
          continue;
        }
        if (auto state = dyn_cast<zgraph::StateOp>(op)) {
          Kind kind = state.getKind() == "grad"   ? Kind::Gradient
                      : state.getKind() == "copy" ? Kind::ParameterCopy
                                                  : Kind::OptimizerState;
          std::string name = state.getName().str() + "." + state.getKind().str();
          if (failed(addShared(state, kind, "state:" + name, name, &op)))
            return signalPassFailure();
          continue;
        }
        if (auto constant = dyn_cast<zgraph::ConstantOp>(op)) {
          addBuffer(constant, Kind::Constant, "constant" + std::to_string(buffers.size()), &op, 0);
          continue;
        }
        if (isa<func::ReturnOp>(op))
          continue;
        // The pipeline's stage marks are the compiler's, not the kernel's.
        SmallVector<NamedAttribute> kernelAttrs;
        for (NamedAttribute attr : op.getAttrs())
          if (!attr.getName().getValue().starts_with("zdist."))
            kernelAttrs.push_back(attr);
        DictionaryAttr params = builder.getDictionaryAttr(kernelAttrs);
        if (auto allReduce = dyn_cast<zdist::AllReduceOp>(op)) {
          // A collective over the group of the named mesh axes.
          params = collectiveParams(builder, allReduce.getMeshAxes(),
                                    zdist::stringifyReductionKind(allReduce.getReduction()));
        } else if (auto reduceScatter = dyn_cast<zdist::ReduceScatterOp>(op)) {
          if (reduceScatter.getScatterAxis() != 0) {
            op.emitError("only reduce_scatter along dimension 0 lowers to the plan");
            return signalPassFailure();
          }
          params = collectiveParams(builder, reduceScatter.getMeshAxes(),
                                    zdist::stringifyReductionKind(reduceScatter.getReduction()));
        } else if (auto allGather = dyn_cast<zdist::AllGatherOp>(op)) {
          if (allGather.getGatherAxis() != 0) {
            op.emitError("only all_gather along dimension 0 lowers to the plan");
            return signalPassFailure();
          }
          params = collectiveParams(builder, allGather.getMeshAxes(), "");
        } else if (auto shard = dyn_cast<zdist::ShardOp>(op)) {
          // This rank's block of rows of a value every rank holds.
          ArrayRef<ArrayAttr> split = shard.getSharding().getSplitAxes();
          bool rows = !split.empty() && llvm::all_of(split.drop_front(), [](ArrayAttr axes) {
            return axes.empty();
          });
          if (!rows) {
            op.emitError("only shardings of dimension 0 lower to the plan");
            return signalPassFailure();
          }
          params = collectiveParams(builder, split.front(), "");
        } else if (auto store = dyn_cast<zdist::StoreOp>(op)) {
          // A copy into the named buffer another program of the stage reads.
          int64_t index = clock++;
          unsigned from = bufferOf.lookup(store.getInput());
          buffers[from].lastUse = std::max(buffers[from].lastUse, index);
          std::string key = store.getInto().str();
          FailureOr<unsigned> to =
              addShared(store.getInput(), kindOfKey(key), key,
                        key.substr(key.find(':') + 1), nullptr);
          if (failed(to))
            return signalPassFailure();
          program.instructions.push_back(
              {&op, "copy", {from}, {*to}, builder.getDictionaryAttr({})});
          continue;
        } else if (auto send = dyn_cast<zdist::SendOp>(op)) {
          int64_t index = clock++;
          unsigned from = bufferOf.lookup(send.getInput());
          buffers[from].lastUse = std::max(buffers[from].lastUse, index);
          program.instructions.push_back(
              {&op, "send", {from}, {}, peerParams(builder, send.getPeer())});
          continue;
        } else if (auto recv = dyn_cast<zdist::RecvOp>(op)) {
          int64_t index = clock++;
          unsigned to = 0;
          if (recv.getInto()) {
            std::string key = recv.getInto()->str();
            FailureOr<unsigned> id = addShared(recv.getResult(), kindOfKey(key), key,
                                               key.substr(key.find(':') + 1), nullptr);
            if (failed(id))
              return signalPassFailure();
            to = *id;
          } else {
            to = addBuffer(recv.getResult(), Kind::Activation, locationName(op.getLoc()), &op,
                           index);
          }
          program.instructions.push_back(
              {&op, "recv", {}, {to}, peerParams(builder, recv.getPeer())});
          continue;
        } else if (!isa_and_nonnull<zgraph::ZGraphDialect>(op.getDialect())) {
          op.emitError() << "'" << op.getName() << "' cannot be lowered to a kernel";
          return signalPassFailure();
        }
        int64_t index = clock++;
        Instruction instruction{&op, kernelName(&op), {}, {}, params};
        SmallVector<Value> reads, writes;
        if (!inPlaceOperands(&op, reads, writes))
          reads.append(op.operand_begin(), op.operand_end());
        for (Value operand : reads) {
          unsigned id = bufferOf.lookup(operand);
          buffers[id].lastUse = std::max(buffers[id].lastUse, index);
          instruction.inputs.push_back(id);
        }
        for (Value target : writes)
          instruction.outputs.push_back(bufferOf.lookup(target));
        for (Value result : op.getResults())
          instruction.outputs.push_back(
              addBuffer(result, Kind::Activation, locationName(op.getLoc()), &op, index));
        program.instructions.push_back(std::move(instruction));
      }

      // Outputs: an activation becomes the output buffer itself; anything
      // else (an input, a parameter, a value returned twice) is copied.
      auto returnOp = cast<func::ReturnOp>(body.getTerminator());
      for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
        auto nameAttr = func.getResultAttrOfType<StringAttr>(index, "zgraph.name");
        std::string name = nameAttr ? nameAttr.str() : "output" + std::to_string(index);
        unsigned id = bufferOf.lookup(value);
        if (pipeline) {
          // Each forward program of a stage writes the stage's one output
          // buffer of the name.
          int64_t at = clock++;
          buffers[id].lastUse = std::max(buffers[id].lastUse, at);
          std::string key = keyOf("output:" + name);
          auto it = shared.find(key);
          unsigned copy = 0;
          if (it == shared.end()) {
            copy = buffers.size();
            buffers.push_back({Kind::Output, buffers[id].type, name, nullptr, at, at, stage});
            shared[key] = copy;
            outputs.push_back({name, copy});
          } else {
            copy = it->second;
          }
          program.instructions.push_back(
              {returnOp, "copy", {id}, {copy}, builder.getDictionaryAttr({})});
          continue;
        }
        if (buffers[id].kind != Kind::Activation) {
          int64_t at = clock++;
          buffers[id].lastUse = std::max(buffers[id].lastUse, at);
          unsigned copy = buffers.size();
          buffers.push_back({Kind::Output, buffers[id].type, name, nullptr, at, at});
          program.instructions.push_back(
              {returnOp, "copy", {id}, {copy}, builder.getDictionaryAttr({})});
          id = copy;
        } else {
          buffers[id].kind = Kind::Output;
          buffers[id].name = name;
        }
        outputs.push_back({name, id});
      }
    }

    std::vector<PlannedBuffer> planned;
    for (const BufferInfo &info : buffers) {
      PlannedBuffer buffer;
      buffer.bytes = std::max<uint64_t>(1, info.type.getNumElements()) *
                     elementBytes(info.type.getElementType());
      buffer.persistent = info.kind != Kind::Activation;
      buffer.firstUse = info.firstUse;
      buffer.lastUse = info.lastUse;
      planned.push_back(buffer);
    }
    // Each stage's ranks hold only its buffers: one memory plan per stage,
    // the arena as large as the largest.
    int64_t stages = pipeline ? static_cast<int64_t>(pipeline.getStages().size()) : 1;
    std::vector<MemoryPlan> stagePlans;
    for (int64_t s = 0; s < stages; ++s) {
      std::vector<PlannedBuffer> mine;
      std::vector<size_t> ids;
      for (auto [id, info] : llvm::enumerate(buffers))
        if (info.stage == s) {
          mine.push_back(planned[id]);
          ids.push_back(id);
        }
      MemoryPlan stagePlan = planMemory(mine, alignment);
      for (auto [i, id] : llvm::enumerate(ids))
        planned[id].offset = mine[i].offset;
      stagePlans.push_back(stagePlan);
    }
    // The plan-wide figures are the largest stage's.
    int64_t largest = 0;
    for (int64_t s = 0; s < stages; ++s)
      if (stagePlans[s].arenaBytes > stagePlans[largest].arenaBytes)
        largest = s;
    MemoryPlan memory = stagePlans[largest];

    // The plan module: arena, programs, and the bindings as attributes.
    builder.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    auto arena = builder.create<zplan::ArenaOp>(loc, "device", zplan::MemorySpace::Device,
                                                int64_t(memory.arenaBytes), int64_t(alignment));
    builder.setInsertionPointToStart(&arena.getBodyRegion().emplaceBlock());
    std::vector<std::map<std::string, uint64_t>> stageCategoryBytes(stages);
    auto symbol = [&](unsigned id) {
      return SymbolRefAttr::get(builder.getStringAttr("device"),
                                {FlatSymbolRefAttr::get(builder.getContext(),
                                                        "b" + std::to_string(id))});
    };
    for (auto [id, info] : llvm::enumerate(buffers)) {
      auto buffer = builder.create<zplan::BufferOp>(
          info.definingOp ? info.definingOp->getLoc() : loc, "b" + std::to_string(id),
          int64_t(planned[id].offset), int64_t(planned[id].bytes));
      buffer->setAttr("kind", builder.getStringAttr(kindName(info.kind)));
      buffer->setAttr("type", TypeAttr::get(info.type));
      buffer->setAttr("name", builder.getStringAttr(info.name));
      if (pipeline)
        buffer->setAttr("stage", builder.getI64IntegerAttr(info.stage));
      if (auto param = dyn_cast_or_null<zgraph::ParamOp>(info.definingOp)) {
        if (auto source = param->getAttrOfType<DictionaryAttr>("source"))
          buffer->setAttr("weight", source);
        buffer->setAttr("random_init", randomInit(builder, param));
        if (auto shards = param->getAttrOfType<IntegerAttr>("zdist.shards"))
          buffer->setAttr("shards", shards);
      }
      if (auto constant = dyn_cast_or_null<zgraph::ConstantOp>(info.definingOp))
        buffer->setAttr("value", constant.getValue());
      if (info.kind != Kind::Activation)
        stageCategoryBytes[info.stage][categoryName(info.kind).str()] += planned[id].bytes;
    }
    for (int64_t s = 0; s < stages; ++s)
      stageCategoryBytes[s]["activations"] =
          stagePlans[s].arenaBytes - stagePlans[s].persistentBytes;
    std::map<std::string, uint64_t> &categoryBytes = stageCategoryBytes[largest];

    for (const Program &program : programs) {
      builder.setInsertionPointToEnd(module.getBody());
      auto programOp = builder.create<zplan::ProgramOp>(loc, program.name);
      if (pipeline)
        programOp->setAttr("stage", builder.getI64IntegerAttr(program.stage));
      builder.setInsertionPointToStart(&programOp.getBodyRegion().emplaceBlock());
      for (const Instruction &instruction : program.instructions) {
        SmallVector<Attribute> ins, outs;
        for (unsigned id : instruction.inputs)
          ins.push_back(symbol(id));
        for (unsigned id : instruction.outputs)
          outs.push_back(symbol(id));
        builder.create<zplan::KernelOp>(instruction.op->getLoc(), instruction.kernel,
                                        builder.getArrayAttr(ins), builder.getArrayAttr(outs),
                                        int64_t(0),
                                        instruction.params.empty() ? DictionaryAttr()
                                                                   : instruction.params);
      }
    }

    auto bindings = [&](ArrayRef<std::pair<std::string, unsigned>> list) {
      SmallVector<Attribute> entries;
      for (const auto &[name, id] : list) {
        SmallVector<Attribute> entry{builder.getStringAttr(name), symbol(id)};
        if (pipeline)
          entry.push_back(builder.getI64IntegerAttr(buffers[id].stage));
        entries.push_back(builder.getArrayAttr(entry));
      }
      return builder.getArrayAttr(entries);
    };
    module->setAttr("zplan.inputs", bindings(inputs));
    module->setAttr("zplan.outputs", bindings(outputs));
    module->setAttr("zplan.mode", builder.getStringAttr(training ? "train" : "infer"));
    if (training)
      module->setAttr("zplan.token_range", builder.getI64IntegerAttr(tokenRange(functions)));
    SmallVector<NamedAttribute> memoryAttrs;
    for (const auto &[category, bytes] : categoryBytes)
      memoryAttrs.push_back(builder.getNamedAttr(category, builder.getI64IntegerAttr(bytes)));
    memoryAttrs.push_back(
        builder.getNamedAttr("peak_live_activations", builder.getI64IntegerAttr(memory.peakLiveBytes)));
    module->setAttr("zplan.memory", builder.getDictionaryAttr(memoryAttrs));
    if (pipeline) {
      // The schedule and each stage's arena, as the plan's pipeline.
      SmallVector<Attribute> stageAttrs;
      for (int64_t s = 0; s < stages; ++s) {
        SmallVector<NamedAttribute> bytes;
        for (const auto &[category, value] : stageCategoryBytes[s])
          bytes.push_back(builder.getNamedAttr(category, builder.getI64IntegerAttr(value)));
        stageAttrs.push_back(builder.getDictionaryAttr({
            builder.getNamedAttr("arena_bytes",
                                 builder.getI64IntegerAttr(stagePlans[s].arenaBytes)),
            builder.getNamedAttr("buffers",
                                 builder.getI64IntegerAttr(pipeline.getBuffers()[s])),
            builder.getNamedAttr("instructions", pipeline.getStages()[s]),
            builder.getNamedAttr("memory", builder.getDictionaryAttr(bytes)),
        }));
      }
      module->setAttr("zplan.pipeline",
                      builder.getDictionaryAttr({
                          builder.getNamedAttr("schedule", pipeline.getScheduleAttr()),
                          builder.getNamedAttr("micro_batches", pipeline.getMicroBatchesAttr()),
                          builder.getNamedAttr("bubble_fraction",
                                               pipeline.getBubbleFractionAttr()),
                          builder.getNamedAttr("stages", builder.getArrayAttr(stageAttrs)),
                      }));
    }

    // The mesh becomes an attribute; the graph is gone.
    SmallVector<Operation *> erase;
    for (auto &[func, name] : functions)
      erase.push_back(func);
    for (auto mesh : module.getOps<zdist::MeshOp>()) {
      module->setAttr("zplan.mesh", builder.getDictionaryAttr(
                                        {builder.getNamedAttr("axis_names", mesh.getAxisNamesAttr()),
                                         builder.getNamedAttr("axis_sizes", mesh.getShapeAttr())}));
      erase.push_back(mesh);
    }
    if (pipeline)
      erase.push_back(pipeline);
    for (Operation *op : erase)
      op->erase();
  }
};

} // namespace
} // namespace zcc
