//===- DistToPlan.cpp - Buffers, memory plan and kernels ------------------===//

#include "compiler/Conversion/MemoryPlanner.h"
#include "compiler/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

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
  ParameterCopy
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
    if (auto pipelines = module.getOps<zdist::PipelineOp>(); !pipelines.empty()) {
      zdist::PipelineOp pipeline = *pipelines.begin();
      pipeline.emitError() << "a pipeline of " << pipeline.getStages().size()
                           << " stages does not lower to a plan yet: its stage programs and "
                              "their sends and receives are not built; inspect it with zcc "
                              "--emit dist or --report, or disable the pipeline section";
      return signalPassFailure();
    }
    // An inference plan is @main as the program "infer"; a training plan is
    // every function of the training step, each a program of its name.
    SmallVector<std::pair<func::FuncOp, std::string>> functions;
    bool training = false;
    if (auto main = module.lookupSymbol<func::FuncOp>("main")) {
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
    // Buffers that outlive one program, by name: parameters, training
    // states, inputs (and runtime scalars), outputs.
    llvm::StringMap<unsigned> shared;
    auto addBuffer = [&](Value value, Kind kind, std::string name, Operation *op,
                         int64_t index) {
      bufferOf[value] = buffers.size();
      buffers.push_back({kind, cast<RankedTensorType>(value.getType()), std::move(name), op,
                         index, index});
      return buffers.size() - 1;
    };
    auto addShared = [&](Value value, Kind kind, const std::string &key, std::string name,
                         Operation *op) -> FailureOr<unsigned> {
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
    };
    std::vector<Program> programs;
    SmallVector<std::pair<std::string, unsigned>> inputs, outputs;
    int64_t clock = 0; // one timeline over all programs, which run in turn

    for (auto &[func, programName] : functions) {
      Block &body = func.getBody().front();
      Program &program = programs.emplace_back();
      program.name = programName;
      for (BlockArgument argument : body.getArguments()) {
        auto nameAttr = func.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "zgraph.name");
        std::string name =
            nameAttr ? nameAttr.str() : "arg" + std::to_string(argument.getArgNumber());
        Kind kind = StringRef(name).starts_with("zcc.") ? Kind::Scalars : Kind::Input;
        bool fresh = !shared.count("input:" + name);
        FailureOr<unsigned> id = addShared(argument, kind, "input:" + name, name, nullptr);
        if (failed(id))
          return signalPassFailure();
        if (fresh)
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
        DictionaryAttr params = op.getAttrDictionary();
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
    MemoryPlan memory = planMemory(planned, alignment);

    // The plan module: arena, programs, and the bindings as attributes.
    builder.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    auto arena = builder.create<zplan::ArenaOp>(loc, "device", zplan::MemorySpace::Device,
                                                int64_t(memory.arenaBytes), int64_t(alignment));
    builder.setInsertionPointToStart(&arena.getBodyRegion().emplaceBlock());
    std::map<std::string, uint64_t> categoryBytes;
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
        categoryBytes[categoryName(info.kind).str()] += planned[id].bytes;
    }
    categoryBytes["activations"] = memory.arenaBytes - memory.persistentBytes;

    for (const Program &program : programs) {
      builder.setInsertionPointToEnd(module.getBody());
      auto programOp = builder.create<zplan::ProgramOp>(loc, program.name);
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
      for (const auto &[name, id] : list)
        entries.push_back(builder.getArrayAttr({builder.getStringAttr(name), symbol(id)}));
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
    for (Operation *op : erase)
      op->erase();
  }
};

} // namespace
} // namespace zcc
