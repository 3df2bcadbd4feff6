//===- PipelineSchedule.cpp - Stage transfers and pipeline schedules ------===//
//
// Makes the stage boundaries explicit (zdist.transfer) and writes each
// stage's instruction list for GPipe or 1F1B, checked and timed by running
// it on a model of the stages: compute takes the stage's estimated flops,
// a send meets its receive (neither returns before the other arrives, as
// with the runtime's communicators).
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Dist/Transforms/PipelineCost.h"
#include "dialects/Dist/Transforms/PipelineSupport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <set>

namespace zcc::zdist {
#define GEN_PASS_DEF_PIPELINESCHEDULEPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {

namespace {

enum class Step { Forward, Backward, SendActivation, RecvActivation, SendGrad, RecvGrad };

struct Instruction {
  Step step;
  int64_t microBatch;
};

std::string instructionText(const Instruction &instruction) {
  static const char *const kNames[] = {"F", "B", "sa", "ra", "sg", "rg"};
  return kNames[static_cast<int>(instruction.step)] + std::to_string(instruction.microBatch);
}

/// Each stage's instructions. A stage that both sends to and receives from
/// one neighbour in a row does it in the order its parity says (even
/// stages send first), so the two neighbours never both wait in a send.
std::vector<std::vector<Instruction>> buildSchedule(StringRef kind, bool training,
                                                    int64_t stages, int64_t microBatches) {
  std::vector<std::vector<Instruction>> schedule(stages);
  for (int64_t s = 0; s < stages; ++s) {
    std::vector<Instruction> &list = schedule[s];
    bool first = s == 0, last = s == stages - 1;
    auto add = [&](Step step, int64_t k) { list.push_back({step, k}); };
    auto pair = [&](Step send, int64_t sendK, Step recv, int64_t recvK) {
      if (s % 2 == 0) {
        add(send, sendK);
        add(recv, recvK);
      } else {
        add(recv, recvK);
        add(send, sendK);
      }
    };
    auto forward = [&](int64_t k) {
      if (!first)
        add(Step::RecvActivation, k);
      add(Step::Forward, k);
      if (!last)
        add(Step::SendActivation, k);
    };
    auto backward = [&](int64_t k) {
      if (!last)
        add(Step::RecvGrad, k);
      add(Step::Backward, k);
      if (!first)
        add(Step::SendGrad, k);
    };
    if (!training || kind == "gpipe") {
      for (int64_t k = 0; k < microBatches; ++k)
        forward(k);
      if (training)
        for (int64_t k = 0; k < microBatches; ++k)
          backward(k);
      continue;
    }
    int64_t warmup = std::min(stages - s - 1, microBatches);
    int64_t steady = microBatches - warmup;
    for (int64_t k = 0; k < warmup; ++k)
      forward(k);
    if (steady > 0 && !first)
      add(Step::RecvActivation, warmup);
    for (int64_t j = 0; j < steady; ++j) {
      add(Step::Forward, warmup + j);
      if (!last)
        pair(Step::SendActivation, warmup + j, Step::RecvGrad, j);
      add(Step::Backward, j);
      if (first)
        continue;
      if (j + 1 < steady)
        pair(Step::SendGrad, j, Step::RecvActivation, warmup + j + 1);
      else
        add(Step::SendGrad, j);
    }
    for (int64_t j = steady; j < microBatches; ++j)
      backward(j);
  }
  return schedule;
}

/// Runs the schedule on the model of the stages; the step's length, or
/// nothing if the stages wait on each other forever.
std::optional<double> simulate(const std::vector<std::vector<Instruction>> &schedule,
                               ArrayRef<double> forwardCost, ArrayRef<double> backwardCost,
                               SmallVectorImpl<double> &busy) {
  int64_t stages = static_cast<int64_t>(schedule.size());
  std::vector<size_t> next(stages, 0);
  std::vector<double> clock(stages, 0);
  busy.assign(stages, 0);
  auto current = [&](int64_t s) -> const Instruction * {
    return next[s] < schedule[s].size() ? &schedule[s][next[s]] : nullptr;
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t s = 0; s < stages; ++s) {
      const Instruction *instruction = current(s);
      if (!instruction)
        continue;
      if (instruction->step == Step::Forward || instruction->step == Step::Backward) {
        double cost = instruction->step == Step::Forward ? forwardCost[s] : backwardCost[s];
        clock[s] += cost;
        busy[s] += cost;
        ++next[s];
        progress = true;
        continue;
      }
      bool sendsForward = instruction->step == Step::SendActivation;
      bool sendsBackward = instruction->step == Step::SendGrad;
      if (!sendsForward && !sendsBackward)
        continue; // a receive completes with its send
      int64_t peer = sendsForward ? s + 1 : s - 1;
      Step match = sendsForward ? Step::RecvActivation : Step::RecvGrad;
      const Instruction *other = peer >= 0 && peer < stages ? current(peer) : nullptr;
      if (!other || other->step != match || other->microBatch != instruction->microBatch)
        continue;
      double meet = std::max(clock[s], clock[peer]);
      clock[s] = clock[peer] = meet;
      ++next[s];
      ++next[peer];
      progress = true;
    }
  }
  for (int64_t s = 0; s < stages; ++s)
    if (current(s))
      return std::nullopt;
  return *std::max_element(clock.begin(), clock.end());
}

uint64_t byteSize(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  unsigned bits = tensor.getElementType().getIntOrFloatBitWidth();
  return static_cast<uint64_t>(std::max<int64_t>(1, tensor.getNumElements())) *
         (bits <= 8 ? 1 : bits / 8);
}

struct PipelineSchedulePass : impl::PipelineSchedulePassBase<PipelineSchedulePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto meshes = llvm::to_vector(module.getOps<MeshOp>());
    if (meshes.size() != 1)
      return;
    std::optional<int64_t> pp = meshes.front().getAxisSize("pp");
    if (!pp || *pp <= 1)
      return;
    int64_t stages = *pp;
    auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
    auto pipeline = config ? config.getAs<DictionaryAttr>("pipeline") : DictionaryAttr();
    auto kindAttr = pipeline ? pipeline.getAs<StringAttr>("schedule") : StringAttr();
    std::string kind = kindAttr ? kindAttr.str() : "1f1b";
    if (kind != "gpipe" && kind != "1f1b") {
      module.emitError() << "pipeline.schedule: '" << kind
                         << "' is not built yet; use 'gpipe' or '1f1b'";
      return signalPassFailure();
    }
    int64_t microBatches = 1;
    if (auto attr = pipeline ? pipeline.getAs<IntegerAttr>("micro_batches") : IntegerAttr())
      microBatches = attr.getInt();
    else if (auto gas = config ? config.getAs<IntegerAttr>("gradient_accumulation_steps")
                               : IntegerAttr())
      microBatches = gas.getInt();
    if (microBatches < 1) {
      module.emitError() << "pipeline.micro_batches must be at least 1, got " << microBatches;
      return signalPassFailure();
    }

    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    bool training = bool(step);
    if (!step)
      step = module.lookupSymbol<func::FuncOp>("main");
    if (!step || step.getBody().getBlocks().size() != 1) {
      module.emitError("pipeline scheduling expects a single-block @micro_step (training) or "
                       "@main (inference)");
      return signalPassFailure();
    }
    Block &body = step.getBody().front();
    OpBuilder builder(module.getContext());

    // Ops made after partitioning take the latest stage among their
    // operands; ops of constants alone keep none.
    for (Operation &op : body.without_terminator())
      if (!stageOf(&op))
        inheritOperandStage(op);
    bool partitioned = false;
    for (Operation &op : body.without_terminator()) {
      std::optional<int64_t> stage = stageOf(&op);
      partitioned |= stage.has_value();
      if (stage && (*stage < 0 || *stage >= stages)) {
        op.emitError() << "is assigned to pipeline stage " << *stage << ", but the mesh has "
                       << stages << " stages";
        return signalPassFailure();
      }
    }
    if (!partitioned) {
      module.emitError() << "the mesh has " << stages
                         << " pipeline stages but no op is assigned to one (run "
                            "zcc-dist-pipeline-partition on the forward graph first)";
      return signalPassFailure();
    }

    // Transfers: one per value and stage that uses it.
    llvm::DenseMap<std::pair<Value, int64_t>, Value> transferred;
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
      std::optional<int64_t> target = stageOf(&op);
      if (!target || isa<TransferOp>(op))
        continue;
      for (OpOperand &use : op.getOpOperands()) {
        Operation *producer = use.get().getDefiningOp();
        std::optional<int64_t> source = stageOf(producer);
        if (!source || *source == *target)
          continue;
        bool gradient = isBackward(producer);
        if (gradient != (*source > *target)) {
          op.emitError() << "uses a " << (gradient ? "backward" : "forward")
                         << " value of pipeline stage " << *source << " on stage " << *target
                         << "; forward values only go to later stages and gradients to "
                            "earlier ones";
          return signalPassFailure();
        }
        Value &moved = transferred[{use.get(), *target}];
        if (!moved) {
          builder.setInsertionPointAfter(producer);
          auto transfer = builder.create<TransferOp>(
              producer->getLoc(), use.get().getType(), use.get(),
              builder.getI64IntegerAttr(*source), builder.getI64IntegerAttr(*target));
          transfer->setAttr("zdist.stage", builder.getI64IntegerAttr(*target));
          if (gradient)
            transfer->setAttr("zdist.backward", builder.getUnitAttr());
          moved = transfer;
        }
        use.set(moved);
      }
    }

    // Each stage's work, and the values its backward pass keeps from its
    // forward pass (its activations of one micro-batch).
    SmallVector<double> forwardCost(stages, 0), backwardCost(stages, 0);
    SmallVector<uint64_t> kept(stages, 0);
    SmallVector<llvm::SetVector<Value>> keptValues(stages);
    for (Operation &op : body.without_terminator()) {
      std::optional<int64_t> stage = stageOf(&op);
      if (!stage)
        continue;
      bool backward = isBackward(&op);
      if (!isa<TransferOp, zgraph::ParamOp, zgraph::StateOp>(op))
        (backward ? backwardCost : forwardCost)[*stage] += estimateFlops(&op);
      if (!backward)
        continue;
      for (Value operand : op.getOperands()) {
        Operation *producer = operand.getDefiningOp();
        bool activation = producer ? stageOf(producer) == stage && !isBackward(producer) &&
                                         !isa<zgraph::ParamOp, zgraph::StateOp>(producer)
                                   : true; // a data input
        if (activation && keptValues[*stage].insert(operand))
          kept[*stage] += byteSize(operand.getType());
      }
    }
    for (int64_t s = 0; s < stages; ++s) {
      forwardCost[s] = std::max(forwardCost[s], 1.0);
      if (training)
        backwardCost[s] = std::max(backwardCost[s], 1.0);
    }

    std::vector<std::vector<Instruction>> schedule =
        buildSchedule(kind, training, stages, microBatches);
    SmallVector<double> busy;
    std::optional<double> length = simulate(schedule, forwardCost, backwardCost, busy);
    if (!length) {
      module.emitError() << "internal error: the " << kind << " schedule of " << stages
                         << " stages and " << microBatches << " micro-batches deadlocks";
      return signalPassFailure();
    }
    double work = 0;
    for (double b : busy)
      work += b;
    double bubble = 1.0 - work / (static_cast<double>(stages) * *length);
    if (bubble < 0)
      bubble = 0;

    SmallVector<int64_t> buffers(stages, 1);
    SmallVector<Attribute> lists;
    for (int64_t s = 0; s < stages; ++s) {
      int64_t inFlight = 0, most = training ? 0 : 1;
      std::string text;
      for (const Instruction &instruction : schedule[s]) {
        text += (text.empty() ? "" : " ") + instructionText(instruction);
        if (!training)
          continue;
        if (instruction.step == Step::Forward)
          most = std::max(most, ++inFlight);
        else if (instruction.step == Step::Backward)
          --inFlight;
      }
      buffers[s] = most;
      lists.push_back(builder.getStringAttr(text));
    }

    // Bytes each stage holds: the parameters it uses (a parameter used on
    // several stages is held by each), the training state of the
    // parameters it owns, and its activation buffers.
    llvm::StringMap<int64_t> owner;
    llvm::StringMap<std::set<int64_t>> holders;
    for (auto param : body.getOps<zgraph::ParamOp>()) {
      if (auto stage = param->getAttrOfType<IntegerAttr>("zdist.stage"))
        owner[param.getName()] = stage.getInt();
      for (Operation *user : param->getUsers())
        if (std::optional<int64_t> stage = stageOf(user))
          holders[param.getName()].insert(*stage);
    }
    SmallVector<uint64_t> paramBytes(stages, 0), gradBytes(stages, 0), stateBytes(stages, 0);
    llvm::StringSet<> seen;
    module.walk([&](Operation *op) {
      if (auto param = dyn_cast<zgraph::ParamOp>(op)) {
        if (!seen.insert("param:" + param.getName().str()).second)
          return;
        for (int64_t stage : holders.lookup(param.getName()))
          paramBytes[stage] += byteSize(param.getType());
        return;
      }
      auto state = dyn_cast<zgraph::StateOp>(op);
      if (!state || !seen.insert((state.getKind() + ":" + state.getName()).str()).second)
        return;
      auto it = owner.find(state.getName());
      if (it == owner.end())
        return;
      if (state.getKind() == "grad")
        gradBytes[it->second] += byteSize(state.getType());
      else if (state.getKind() == "copy")
        for (int64_t stage : holders.lookup(state.getName()))
          paramBytes[stage] += byteSize(state.getType());
      else
        stateBytes[it->second] += byteSize(state.getType());
    });
    SmallVector<Attribute> memory, costs;
    for (int64_t s = 0; s < stages; ++s) {
      auto bytes = [&](uint64_t value) { return builder.getI64IntegerAttr(int64_t(value)); };
      memory.push_back(builder.getDictionaryAttr({
          builder.getNamedAttr("parameters", bytes(paramBytes[s])),
          builder.getNamedAttr("gradients", bytes(gradBytes[s])),
          builder.getNamedAttr("optimizer_state", bytes(stateBytes[s])),
          builder.getNamedAttr("activation_buffer", bytes(kept[s])),
          builder.getNamedAttr("activations", bytes(kept[s] * buffers[s])),
      }));
      costs.push_back(builder.getArrayAttr(
          {builder.getI64IntegerAttr(int64_t(forwardCost[s])),
           builder.getI64IntegerAttr(training ? int64_t(backwardCost[s]) : 0)}));
    }
    builder.setInsertionPointToEnd(module.getBody());
    auto op = builder.create<PipelineOp>(
        module.getLoc(), builder.getStringAttr(kind), builder.getI64IntegerAttr(microBatches),
        builder.getDenseI64ArrayAttr(buffers), builder.getF64FloatAttr(bubble),
        builder.getArrayAttr(lists));
    op->setAttr("flops", builder.getArrayAttr(costs));
    op->setAttr("memory", builder.getArrayAttr(memory));
  }
};

} // namespace
} // namespace zcc::zdist
