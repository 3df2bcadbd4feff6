//===- DistToPlan.cpp - Buffers, memory plan and kernels ------------------===//

#include "compiler/Conversion/MemoryPlanner.h"
#include "compiler/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace zcc {
#define GEN_PASS_DEF_DISTTOPLANPASS
#include "compiler/Conversion/Passes.h.inc"
} // namespace zcc

using namespace mlir;

namespace zcc {
namespace {

enum class Kind { Parameter, Constant, Input, Output, Activation };

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

struct DistToPlanPass : impl::DistToPlanPassBase<DistToPlanPass> {
  using DistToPlanPassBase::DistToPlanPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (alignment <= 0 || (alignment & (alignment - 1)) != 0) {
      module.emitError() << "alignment must be a power of two, got " << alignment;
      return signalPassFailure();
    }
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.getBody().getBlocks().size() != 1) {
      module.emitError("expects a single-block func.func @main");
      return signalPassFailure();
    }
    Block &body = main.getBody().front();
    OpBuilder builder(module.getContext());

    std::vector<BufferInfo> buffers;
    llvm::DenseMap<Value, unsigned> bufferOf;
    auto addBuffer = [&](Value value, Kind kind, std::string name, Operation *op,
                         int64_t index) {
      bufferOf[value] = buffers.size();
      buffers.push_back({kind, cast<RankedTensorType>(value.getType()), std::move(name), op,
                         index, index});
      return buffers.size() - 1;
    };
    for (BlockArgument argument : body.getArguments()) {
      auto name = main.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "zgraph.name");
      addBuffer(argument, Kind::Input,
                name ? name.str() : "arg" + std::to_string(argument.getArgNumber()), nullptr, 0);
    }

    // Instructions in program order: one per zgraph op that computes.
    struct Instruction {
      Operation *op;
      std::string kernel;
      SmallVector<unsigned> inputs;
      SmallVector<unsigned> outputs;
      DictionaryAttr params;
    };
    std::vector<Instruction> instructions;
    for (Operation &op : body) {
      if (auto param = dyn_cast<zgraph::ParamOp>(op)) {
        addBuffer(param, Kind::Parameter, param.getName().str(), &op, 0);
        continue;
      }
      if (auto constant = dyn_cast<zgraph::ConstantOp>(op)) {
        addBuffer(constant, Kind::Constant, "constant" + std::to_string(buffers.size()), &op, 0);
        continue;
      }
      if (isa<func::ReturnOp>(op))
        continue;
      if (!isa_and_nonnull<zgraph::ZGraphDialect>(op.getDialect())) {
        op.emitError() << "'" << op.getName() << "' cannot be lowered to a kernel";
        return signalPassFailure();
      }
      int64_t index = instructions.size();
      Instruction instruction{&op, op.getName().stripDialect().str(), {}, {}, op.getAttrDictionary()};
      for (Value operand : op.getOperands()) {
        unsigned id = bufferOf.lookup(operand);
        buffers[id].lastUse = std::max(buffers[id].lastUse, index);
        instruction.inputs.push_back(id);
      }
      for (Value result : op.getResults())
        instruction.outputs.push_back(
            addBuffer(result, Kind::Activation, locationName(op.getLoc()), &op, index));
      instructions.push_back(std::move(instruction));
    }

    // Outputs: an activation becomes the output buffer itself; anything
    // else (an input, a parameter, a value returned twice) is copied.
    auto returnOp = cast<func::ReturnOp>(body.getTerminator());
    SmallVector<std::pair<std::string, unsigned>> outputs;
    for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
      auto nameAttr = main.getResultAttrOfType<StringAttr>(index, "zgraph.name");
      std::string name = nameAttr ? nameAttr.str() : "output" + std::to_string(index);
      unsigned id = bufferOf.lookup(value);
      if (buffers[id].kind != Kind::Activation) {
        int64_t at = instructions.size();
        buffers[id].lastUse = std::max(buffers[id].lastUse, at);
        unsigned copy = buffers.size();
        buffers.push_back({Kind::Output, buffers[id].type, name, nullptr, at, at});
        instructions.push_back({returnOp, "copy", {id}, {copy}, builder.getDictionaryAttr({})});
        id = copy;
      } else {
        buffers[id].kind = Kind::Output;
        buffers[id].name = name;
      }
      outputs.push_back({name, id});
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

    // The plan module: arena, program, and the bindings as attributes.
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
      }
      if (auto constant = dyn_cast_or_null<zgraph::ConstantOp>(info.definingOp))
        buffer->setAttr("value", constant.getValue());
      std::string category = kindName(info.kind).str() + "s";
      if (info.kind != Kind::Activation)
        categoryBytes[category] += planned[id].bytes;
    }
    categoryBytes["activations"] = memory.arenaBytes - memory.persistentBytes;

    builder.setInsertionPointToEnd(module.getBody());
    auto program = builder.create<zplan::ProgramOp>(loc, "infer");
    builder.setInsertionPointToStart(&program.getBodyRegion().emplaceBlock());
    for (const Instruction &instruction : instructions) {
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

    auto bindings = [&](ArrayRef<std::pair<std::string, unsigned>> list) {
      SmallVector<Attribute> entries;
      for (const auto &[name, id] : list)
        entries.push_back(builder.getArrayAttr({builder.getStringAttr(name), symbol(id)}));
      return builder.getArrayAttr(entries);
    };
    SmallVector<std::pair<std::string, unsigned>> inputs;
    for (BlockArgument argument : body.getArguments())
      inputs.push_back({buffers[bufferOf.lookup(argument)].name, bufferOf.lookup(argument)});
    module->setAttr("zplan.inputs", bindings(inputs));
    module->setAttr("zplan.outputs", bindings(outputs));
    module->setAttr("zplan.mode", builder.getStringAttr("infer"));
    SmallVector<NamedAttribute> memoryAttrs;
    for (const auto &[category, bytes] : categoryBytes)
      memoryAttrs.push_back(builder.getNamedAttr(category, builder.getI64IntegerAttr(bytes)));
    memoryAttrs.push_back(
        builder.getNamedAttr("peak_live_activations", builder.getI64IntegerAttr(memory.peakLiveBytes)));
    module->setAttr("zplan.memory", builder.getDictionaryAttr(memoryAttrs));

    // The mesh becomes an attribute; the graph is gone.
    SmallVector<Operation *> erase{main};
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
