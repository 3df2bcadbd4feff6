//===- PipelineSplit.cpp - One set of programs per pipeline stage ---------===//
//
// Turns the scheduled step (zdist.pipeline, transfers) into the functions
// each stage runs. Values that cross programs live in named buffers that
// outlive a program: `zdist.store` writes one, `zdist.recv ... into` fills
// one, and a function argument of that name reads it. Names:
//   zcc.pp.t<i>.k<slot>  transfer i (its value on every stage of its path)
//   zcc.pp.a<j>.k<slot>  activation j a stage's backward pass keeps
//   zcc.pp.d<n>.k<slot>  data input n, kept for the backward pass
//   zcc.pp.g<j>.k<slot>  value j of a split backward pass's B that its W
//                        reads (zb-h1)
// A stage holds `buffers` slots; micro-batch k uses slot k mod buffers.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Dist/Transforms/PipelineSupport.h"
#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <memory>
#include <map>
#include <set>

namespace zcc::zdist {
#define GEN_PASS_DEF_PIPELINESPLITPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {
namespace {

/// The passes of a stage's programs: forward, backward (B alone where the
/// schedule split the stage's backward pass) and weights (W).
enum class Phase { Forward, Backward, Weights };

/// The buffer of value `index` of `kind` in slot `slot`; under the
/// interleaved schedule (`chunk` at least 0) each chunk has its own.
std::string slotName(StringRef kind, int64_t index, int64_t slot, int64_t chunk = -1) {
  std::string prefix = chunk >= 0 ? "zcc.pp.c" + std::to_string(chunk) + "." : "zcc.pp.";
  return prefix + kind.str() + std::to_string(index) + ".k" + std::to_string(slot);
}

/// A function being built: arguments are added on first use, by name.
struct FunctionBuilder {
  func::FuncOp func;
  OpBuilder builder;
  llvm::StringMap<Value> arguments;
  SmallVector<std::string> argumentNames;
  SmallVector<Value> results;
  SmallVector<std::string> resultNames;

  FunctionBuilder(ModuleOp module, StringRef name, int64_t stage)
      : builder(module.getContext()) {
    builder.setInsertionPointToEnd(module.getBody());
    func = builder.create<func::FuncOp>(module.getLoc(), name,
                                        builder.getFunctionType({}, {}));
    func->setAttr("zdist.stage", builder.getI64IntegerAttr(stage));
    builder.setInsertionPointToStart(func.addEntryBlock());
  }

  Value argument(StringRef name, Type type, Location loc) {
    Value &value = arguments[name];
    if (!value) {
      value = func.getBody().front().addArgument(type, loc);
      argumentNames.push_back(name.str());
    }
    return value;
  }

  void finish() {
    builder.create<func::ReturnOp>(func.getLoc(), results);
    Block &body = func.getBody().front();
    func.setType(builder.getFunctionType(body.getArgumentTypes(), ValueRange(results).getTypes()));
    for (auto [i, name] : llvm::enumerate(argumentNames))
      func.setArgAttr(i, "zgraph.name", builder.getStringAttr(name));
    for (auto [i, name] : llvm::enumerate(resultNames))
      func.setResultAttr(i, "zgraph.name", builder.getStringAttr(name));
  }
};

struct PipelineSplitPass : impl::PipelineSplitPassBase<PipelineSplitPass> {
  ModuleOp module;
  func::FuncOp step;
  bool training = false;
  /// The pieces of the model (the interleaved schedule's chunks) and the
  /// stages whose ranks run them: piece c on stage c mod `ranks`.
  int64_t stages = 0, ranks = 0;
  SmallVector<TransferOp> transfers;
  llvm::DenseMap<Operation *, int64_t> transferIndex;
  /// Per stage: the forward values its backward pass reads.
  SmallVector<llvm::SetVector<Value>> kept;
  /// Per stage: the step's data arguments its backward pass reads.
  SmallVector<llvm::SetVector<unsigned>> keptData;
  /// Per stage: the values of its B pass its W pass reads.
  SmallVector<llvm::SetVector<Value>> keptGrad;
  /// Parameter name -> the stage that owns its gradient and optimizer state.
  llvm::StringMap<int64_t> owner;
  /// Parameter name -> stages whose programs read its parameter ("param")
  /// or its low-precision copy ("copy").
  std::map<std::string, std::map<int64_t, std::set<std::string>>> readers;

  void runOnOperation() override {
    module = getOperation();
    auto pipelines = llvm::to_vector(module.getOps<PipelineOp>());
    if (pipelines.empty())
      return;
    PipelineOp pipeline = pipelines.front();
    ranks = static_cast<int64_t>(pipeline.getStages().size());
    stages = static_cast<int64_t>(pipeline.getBuffers().size());
    step = module.lookupSymbol<func::FuncOp>("micro_step");
    training = bool(step);
    if (!step)
      step = module.lookupSymbol<func::FuncOp>("main");
    if (!step) {
      module.emitError("pipeline splitting expects @micro_step or @main");
      return signalPassFailure();
    }
    Block &body = step.getBody().front();

    // Ops added since scheduling (ZeRO's) take their operands' stage; the
    // ones of parameters alone (gathers) are made again where used.
    for (Operation &op : body.without_terminator())
      if (!stageOf(&op) && !isa<ReleaseOp>(op))
        inheritOperandStage(op);
    for (auto transfer : body.getOps<TransferOp>()) {
      transferIndex[transfer] = transfers.size();
      transfers.push_back(transfer);
    }
    for (auto param : body.getOps<zgraph::ParamOp>())
      if (auto stage = param->getAttrOfType<IntegerAttr>("zdist.stage"))
        owner[param.getName()] = stage.getInt();

    ArrayRef<int64_t> buffers = pipeline.getBuffers();
    kept.resize(stages);
    keptData.resize(stages);
    keptGrad.resize(stages);
    SmallVector<bool> split(stages, false);
    for (Operation &op : body.without_terminator())
      if (std::optional<int64_t> stage = stageOf(&op); stage && isWeightPass(&op))
        split[*stage] = true;
    for (int64_t s = 0; s < stages; ++s) {
      for (int64_t slot = 0; slot < buffers[s]; ++slot) {
        // The later passes first: each says what the one before keeps.
        func::FuncOp weights, backward, forward;
        if (split[s] && failed(buildPhase(s, slot, Phase::Weights, weights)))
          return signalPassFailure();
        if (training && failed(buildPhase(s, slot, Phase::Backward, backward)))
          return signalPassFailure();
        if (failed(buildPhase(s, slot, Phase::Forward, forward)))
          return signalPassFailure();
        // Keep the functions in the order they run: forward first.
        if (backward)
          backward->moveAfter(forward);
        if (weights)
          weights->moveAfter(backward);
      }
    }
    for (int64_t s = 0; s < stages; ++s)
      for (int64_t slot = 0; slot < buffers[s]; ++slot)
        buildTransfers(s, slot);
    if (training)
      for (StringRef name : {"grad_norm", "optimizer_step", "zero_grads", "init"})
        if (auto func = module.lookupSymbol<func::FuncOp>(name)) {
          for (int64_t s = 0; s < ranks; ++s)
            if (failed(buildStepFunction(func, s)))
              return signalPassFailure();
          func.erase();
        }
    buildSync();
    step.erase();
  }

  bool interleaved() const { return stages != ranks; }
  /// The stage whose ranks run piece `s`.
  int64_t rankOf(int64_t s) const { return s % ranks; }
  /// The name of piece `s`'s program `what` of slot `slot`.
  std::string programName(int64_t s, StringRef what, int64_t slot) const {
    std::string chunk = interleaved() ? "c" + std::to_string(s) + "." : "";
    return "s" + std::to_string(rankOf(s)) + "." + chunk + what.str() + "." +
           std::to_string(slot);
  }
  /// Piece `s`'s buffer of value `index` of `kind` in slot `slot`.
  std::string slotOf(int64_t s, StringRef kind, int64_t index, int64_t slot) const {
    return slotName(kind, index, slot, interleaved() ? s : -1);
  }

  /// Pass `phase` of stage `s` for the micro-batch in slot `slot`.
  LogicalResult buildPhase(int64_t s, int64_t slot, Phase phase, func::FuncOp &result) {
    Block &body = step.getBody().front();
    bool backwardPhase = phase != Phase::Forward;
    StringRef passName = phase == Phase::Forward    ? "forward"
                         : phase == Phase::Backward ? "backward"
                                                    : "weights";
    FunctionBuilder fb(module, programName(s, passName, slot), rankOf(s));
    IRMapping mapping;
    LogicalResult status = success();
    std::function<Value(Value, Operation *)> lookup = [&](Value value, Operation *user) -> Value {
      if (Value mapped = mapping.lookupOrNull(value))
        return mapped;
      Location loc = user->getLoc();
      if (auto argument = dyn_cast<BlockArgument>(value)) {
        auto nameAttr =
            step.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "zgraph.name");
        std::string argName = nameAttr ? nameAttr.str() : "arg" + std::to_string(argument.getArgNumber());
        if (backwardPhase && !StringRef(argName).starts_with("zcc.")) {
          keptData[s].insert(argument.getArgNumber());
          argName = slotOf(s, "d", argument.getArgNumber(), slot);
        }
        Value arg = fb.argument(argName, value.getType(), loc);
        mapping.map(value, arg);
        return arg;
      }
      Operation *producer = value.getDefiningOp();
      if (auto transfer = dyn_cast<TransferOp>(producer)) {
        if (static_cast<int64_t>(transfer.getTarget()) != s) {
          status = user->emitError() << "reads a transfer to stage " << transfer.getTarget()
                                     << " on stage " << s;
          return value;
        }
        Value arg = fb.argument(slotOf(s, "t", transferIndex[transfer], slot), value.getType(),
                                loc);
        mapping.map(value, arg);
        return arg;
      }
      std::optional<int64_t> stage = stageOf(producer);
      if (!stage) {
        // Parameters, state, constants and what is made of them alone:
        // made again in this function.
        for (Value operand : producer->getOperands())
          lookup(operand, producer);
        Operation *clone = fb.builder.clone(*producer, mapping);
        recordReader(clone, rankOf(s));
        return clone->getResult(cast<OpResult>(value).getResultNumber());
      }
      if (*stage == s && backwardPhase && !isBackward(producer)) {
        kept[s].insert(value);
        size_t index = llvm::find(kept[s], value) - kept[s].begin();
        Value arg = fb.argument(slotOf(s, "a", index, slot), value.getType(), loc);
        mapping.map(value, arg);
        return arg;
      }
      if (*stage == s && phase == Phase::Weights && !isWeightPass(producer)) {
        keptGrad[s].insert(value);
        size_t index = llvm::find(keptGrad[s], value) - keptGrad[s].begin();
        Value arg = fb.argument(slotOf(s, "g", index, slot), value.getType(), loc);
        mapping.map(value, arg);
        return arg;
      }
      status = user->emitError() << "reads a value of pipeline stage " << *stage
                                 << " on stage " << s << " without a transfer";
      return value;
    };

    auto inPhase = [&](Operation *op) {
      return isBackward(op) == backwardPhase && isWeightPass(op) == (phase == Phase::Weights);
    };
    for (Operation &op : body.without_terminator()) {
      if (stageOf(&op) != s || !inPhase(&op) || isa<TransferOp>(op))
        continue;
      for (Value operand : op.getOperands())
        lookup(operand, &op);
      if (failed(status))
        return failure();
      fb.builder.clone(op, mapping);
    }
    if (phase == Phase::Backward) {
      // What the W pass reads later.
      for (auto [j, value] : llvm::enumerate(keptGrad[s])) {
        Value local = lookup(value, value.getDefiningOp());
        fb.builder.create<StoreOp>(value.getLoc(), local,
                                   fb.builder.getStringAttr("input:" + slotOf(s, "g", j, slot)));
      }
    }
    if (!backwardPhase) {
      // What the backward pass and the sends read later.
      for (auto [j, value] : llvm::enumerate(kept[s])) {
        Value local = lookup(value, value.getDefiningOp());
        fb.builder.create<StoreOp>(value.getLoc(), local,
                                   fb.builder.getStringAttr("input:" + slotOf(s, "a", j, slot)));
      }
      for (unsigned argNumber : keptData[s]) {
        Value local = lookup(step.getArgument(argNumber), step);
        fb.builder.create<StoreOp>(
            step.getLoc(), local, fb.builder.getStringAttr("input:" + slotOf(s, "d", argNumber, slot)));
      }
    }
    for (auto [i, transfer] : llvm::enumerate(transfers)) {
      Operation *producer = transfer.getInput().getDefiningOp();
      if (static_cast<int64_t>(transfer.getSource()) != s || !inPhase(producer))
        continue;
      Value local = lookup(transfer.getInput(), transfer);
      fb.builder.create<StoreOp>(transfer.getLoc(), local,
                                 fb.builder.getStringAttr("input:" + slotOf(s, "t", i, slot)));
    }
    if (failed(status))
      return failure();
    // The step's results (the loss, an inference output) where they are
    // computed.
    if (!backwardPhase) {
      auto returnOp = cast<func::ReturnOp>(body.getTerminator());
      for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
        Operation *producer = value.getDefiningOp();
        std::optional<int64_t> stage = stageOf(producer);
        if (isa<TransferOp>(producer))
          stage = cast<TransferOp>(producer).getTarget();
        if (stage != s)
          continue;
        auto nameAttr = step.getResultAttrOfType<StringAttr>(index, "zgraph.name");
        fb.results.push_back(lookup(value, returnOp));
        fb.resultNames.push_back(nameAttr ? nameAttr.str() : "output" + std::to_string(index));
      }
    }
    fb.finish();
    result = fb.func;
    return success();
  }

  void recordReader(Operation *op, int64_t s) {
    if (auto param = dyn_cast<zgraph::ParamOp>(op))
      readers[param.getName().str()][s].insert("param");
    else if (auto state = dyn_cast<zgraph::StateOp>(op); state && state.getKind() == "copy")
      readers[state.getName().str()][s].insert("copy");
  }

  /// The sends and receives of stage `s` for slot `slot`: a transfer from
  /// stage a to stage b goes one stage at a time, relayed by the stages
  /// between them.
  void buildTransfers(int64_t s, int64_t slot) {
    auto make = [&](StringRef what, bool gradients, bool receive) {
      FunctionBuilder fb(module, programName(s, what, slot), rankOf(s));
      for (auto [i, transfer] : llvm::enumerate(transfers)) {
        int64_t source = transfer.getSource(), target = transfer.getTarget();
        bool backward = source > target;
        if (backward != gradients)
          continue;
        int64_t low = std::min(source, target), high = std::max(source, target);
        std::string name = slotOf(s, "t", i, slot);
        Location loc = transfer.getLoc();
        if (receive) {
          // This stage is on the path and not its start.
          int64_t from = backward ? s + 1 : s - 1;
          bool onPath = backward ? (s >= low && s < high) : (s > low && s <= high);
          if (onPath)
            fb.builder.create<RecvOp>(loc, transfer.getType(),
                                      fb.builder.getI64IntegerAttr(rankOf(from)),
                                      fb.builder.getStringAttr("input:" + name));
        } else {
          int64_t to = backward ? s - 1 : s + 1;
          bool onPath = backward ? (s > low && s <= high) : (s >= low && s < high);
          if (onPath)
            fb.builder.create<SendOp>(loc, fb.argument(name, transfer.getType(), loc),
                                      fb.builder.getI64IntegerAttr(rankOf(to)));
        }
      }
      fb.finish();
    };
    make("recv_activations", false, true);
    make("send_activations", false, false);
    if (training) {
      make("recv_gradients", true, true);
      make("send_gradients", true, false);
    }
  }

  /// Stage `s`'s copy of a per-step function: the ops of the parameters
  /// it owns. A sum of squares keeps the stage's operands.
  LogicalResult buildStepFunction(func::FuncOp func, int64_t s) {
    OpBuilder builder(module.getContext());
    builder.setInsertionPointToEnd(module.getBody());
    auto clone = cast<func::FuncOp>(builder.clone(*func));
    clone.setSymName(("s" + std::to_string(s) + "." + func.getSymName()).str());
    clone->setAttr("zdist.stage", builder.getI64IntegerAttr(s));
    llvm::DenseSet<Operation *> foreign;
    SmallVector<Operation *> erase;
    auto isForeign = [&](Value value) {
      Operation *producer = value.getDefiningOp();
      return producer && foreign.contains(producer);
    };
    for (Operation &op : llvm::make_early_inc_range(clone.getBody().front())) {
      std::optional<StringRef> name;
      if (auto param = dyn_cast<zgraph::ParamOp>(op))
        name = param.getName();
      else if (auto state = dyn_cast<zgraph::StateOp>(op))
        name = state.getName();
      if (name) {
        auto it = owner.find(*name);
        if (it != owner.end() && rankOf(it->second) != s)
          foreign.insert(&op);
        continue;
      }
      if (auto sum = dyn_cast<zgraph::SumSquaresOp>(op)) {
        SmallVector<Value> mine;
        for (Value operand : sum->getOperands())
          if (!isForeign(operand))
            mine.push_back(operand);
        if (mine.size() == sum->getNumOperands())
          continue;
        builder.setInsertionPoint(sum);
        Value replacement;
        auto type = cast<RankedTensorType>(sum.getType());
        if (mine.empty())
          replacement = builder.create<zgraph::ConstantOp>(
              sum.getLoc(), type, DenseElementsAttr::get(type, builder.getZeroAttr(type.getElementType())));
        else
          replacement = builder.create<zgraph::SumSquaresOp>(sum.getLoc(), type, mine);
        sum.getResult().replaceAllUsesWith(replacement);
        sum.erase();
        continue;
      }
      if (isa<func::ReturnOp>(op))
        continue;
      if (llvm::any_of(op.getOperands(), isForeign))
        foreign.insert(&op);
    }
    for (Operation &op : llvm::reverse(clone.getBody().front()))
      if (foreign.contains(&op))
        erase.push_back(&op);
    for (Operation *op : erase) {
      if (!op->use_empty()) {
        return op->emitError() << "is needed by stage " << s
                               << " but belongs to another pipeline stage";
      }
      op->erase();
    }
    return success();
  }

  /// A parameter read on stages other than its owner's is kept equal to
  /// the owner's: after each optimizer step (and after init) the owner
  /// sends it, and its low-precision copy, to each reader. Every stage
  /// walks one list in one order, so the pairs never wait on each other.
  void buildSync() {
    OpBuilder builder(module.getContext());
    std::vector<std::unique_ptr<FunctionBuilder>> functions;
    for (int64_t s = 0; s < ranks; ++s)
      functions.push_back(
          std::make_unique<FunctionBuilder>(module, "s" + std::to_string(s) + ".sync", s));
    for (const auto &[name, byStage] : readers) {
      auto it = owner.find(name);
      if (it == owner.end())
        continue;
      int64_t from = rankOf(it->second);
      for (const auto &[stage, kinds] : byStage) {
        if (stage == from)
          continue;
        for (const std::string &kind : kinds) {
          // The owner's op for the buffer, as the step's functions use it.
          Operation *source = nullptr;
          module.walk([&](Operation *op) {
            auto func = op->getParentOfType<func::FuncOp>();
            auto funcStage =
                func ? func->getAttrOfType<IntegerAttr>("zdist.stage") : IntegerAttr();
            if (source || !funcStage || funcStage.getInt() != from)
              return;
            if (auto param = dyn_cast<zgraph::ParamOp>(op); param && kind == "param" &&
                                                             param.getName() == name)
              source = op;
            if (auto state = dyn_cast<zgraph::StateOp>(op);
                state && kind == "copy" && state.getKind() == "copy" && state.getName() == name)
              source = op;
          });
          if (!source)
            continue;
          OpBuilder &send = functions[from]->builder;
          Operation *clone = send.clone(*source);
          // Offloaded state (zdist.memory "host") travels through device
          // memory: fetched before the send, received into a device buffer
          // and offloaded into the reader's host copy.
          auto memory = source->getAttrOfType<StringAttr>("zdist.memory");
          bool host = memory && memory.getValue() == "host";
          Value sent = clone->getResult(0);
          if (host)
            sent = send.create<FetchOp>(source->getLoc(), sent);
          send.create<SendOp>(source->getLoc(), sent, send.getI64IntegerAttr(stage));
          std::string key = kind == "param" ? "param:" + name : "state:" + name + ".copy";
          OpBuilder &receive = functions[stage]->builder;
          if (!host) {
            receive.create<RecvOp>(source->getLoc(), sent.getType(),
                                   receive.getI64IntegerAttr(from), receive.getStringAttr(key));
            continue;
          }
          Value received = receive.create<RecvOp>(source->getLoc(), sent.getType(),
                                                  receive.getI64IntegerAttr(from), StringAttr());
          Value offloaded = receive.create<OffloadOp>(source->getLoc(), received);
          auto store = receive.create<StoreOp>(source->getLoc(), offloaded,
                                               receive.getStringAttr(key));
          store->setAttr("zdist.memory", memory);
        }
      }
    }
    for (auto &fb : functions)
      fb->finish();
  }
};

} // namespace
} // namespace zcc::zdist
