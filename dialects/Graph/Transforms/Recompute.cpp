//===- Recompute.cpp - Activation checkpointing by recomputation ----------===//
//
// Groups the forward ops of @micro_step into segments of `interval`
// consecutive blocks (a block is the repeated layer an op's ONNX node name
// places it in: "/h.3/attn/..." is block 3 of "h"), of one pipeline stage
// each. A value computed inside
// a segment and read by the backward pass is not kept from the forward pass:
// the ops that compute it are cloned right before the segment's backward
// starts, from the segment's inputs (the checkpoints) and the parameters;
// the clones carry `zgraph.recompute`.
// The memory planner then sees the segment's activations die in the forward
// pass, so at most one segment's activations are live at once in the
// backward pass, at the cost of a second forward pass of every segment.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/Transforms/NodeName.h"
#include "dialects/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <map>
#include <optional>
#include <tuple>

namespace zcc::zgraph {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "dialects/Graph/Transforms/Passes.h.inc"
} // namespace zcc::zgraph

using namespace mlir;

namespace zcc::zgraph {
namespace {

constexpr llvm::StringLiteral kRecomputeAttr = "zgraph.recompute";

/// The repeated block an ONNX node name places an op in: ("h", 3) for
/// "/h.3/attn/c_attn/MatMul" or "layers.3/Gemm".
std::optional<std::pair<std::string, int64_t>> blockOf(Operation *op) {
  std::string name = nodeName(op->getLoc());
  size_t start = 0;
  while (start < name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos)
      end = name.size();
    StringRef part = StringRef(name).substr(start, end - start);
    auto [prefix, index] = part.rsplit('.');
    int64_t value;
    if (!index.empty() && !prefix.empty() && !index.getAsInteger(10, value) && value >= 0)
      return std::make_pair(prefix.str(), value);
    start = end + 1;
  }
  return std::nullopt;
}

/// The interval from the config: pipeline.activation_checkpoint_interval,
/// else one segment per activation_checkpointing.number_checkpoints of the
/// blocks; 0 when checkpointing is off.
int64_t configInterval(ModuleOp module, int64_t blocks) {
  auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
  auto section = [&](StringRef name) {
    return config ? config.getAs<DictionaryAttr>(name) : DictionaryAttr();
  };
  if (auto pipeline = section("pipeline"))
    if (auto interval = pipeline.getAs<IntegerAttr>("activation_checkpoint_interval");
        interval && interval.getInt() > 0)
      return interval.getInt();
  if (auto checkpointing = section("activation_checkpointing"))
    if (auto number = checkpointing.getAs<IntegerAttr>("number_checkpoints");
        number && number.getInt() > 0)
      return (blocks + number.getInt() - 1) / number.getInt();
  return 0;
}

struct RecomputePass : impl::RecomputePassBase<RecomputePass> {
  using RecomputePassBase::RecomputePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!step)
      return;
    Block &body = step.getBody().front();
    // The backward pass starts at the first use of the loss-scale seed.
    Value seed;
    for (BlockArgument argument : body.getArguments())
      if (auto name = step.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "zgraph.name");
          name && name.getValue() == "zcc.loss_scale")
        seed = argument;
    if (!seed)
      return;
    Operation *backwardStart = nullptr;
    for (Operation &op : body)
      if (llvm::is_contained(op.getOperands(), seed)) {
        backwardStart = &op;
        break;
      }
    if (!backwardStart)
      return;
    llvm::DenseMap<Operation *, int64_t> position;
    int64_t index = 0;
    for (Operation &op : body)
      position[&op] = index++;
    int64_t backwardAt = position[backwardStart];

    // Blocks of the forward ops, then segments of `interval` blocks.
    std::map<std::pair<std::string, int64_t>, SmallVector<Operation *>> blocks;
    for (Operation &op : body) {
      if (position[&op] >= backwardAt)
        break;
      if (isa<ParamOp, ConstantOp, StateOp>(op) || op.getNumResults() == 0)
        continue;
      if (auto block = blockOf(&op))
        blocks[*block].push_back(&op);
    }
    if (blocks.empty())
      return;
    int64_t every = interval > 0 ? int64_t(interval) : configInterval(module, blocks.size());
    if (every <= 0)
      return;
    // A segment never spans pipeline stages (DeepSpeed checkpoints each
    // stage's own layers): all of a segment's clones go before its first
    // backward use, on the later stage's backward, so a stage-0 clone fed a
    // stage-1 one, a backward value going forward, which
    // zcc-dist-pipeline-schedule rejects ("uses a backward value of pipeline
    // stage 0 on stage 1"). Keyed by stage (-1 outside a pipeline), then by
    // group of blocks.
    std::map<std::tuple<int64_t, std::string, int64_t>, SmallVector<Operation *>> segments;
    for (auto &[block, ops] : blocks)
      for (Operation *op : ops) {
        auto stage = op->getAttrOfType<IntegerAttr>("zdist.stage");
        segments[{stage ? stage.getInt() : -1, block.first, block.second / every}].push_back(op);
      }

    OpBuilder builder(module.getContext());
    for (auto &[segment, ops] : segments) {
      llvm::DenseSet<Operation *> inSegment(ops.begin(), ops.end());
      // Values of the segment the backward pass reads; values read by later
      // forward ops outside the segment are its outputs and stay.
      llvm::SetVector<Value> needed;
      Operation *firstBackwardUse = nullptr;
      for (Operation *op : ops)
        for (Value result : op->getResults()) {
          bool output = false;
          SmallVector<Operation *> backwardUsers;
          for (Operation *user : result.getUsers()) {
            if (position.lookup(user) >= backwardAt)
              backwardUsers.push_back(user);
            else if (!inSegment.contains(user))
              output = true;
          }
          if (output || backwardUsers.empty())
            continue;
          needed.insert(result);
          for (Operation *user : backwardUsers)
            if (!firstBackwardUse || position[user] < position[firstBackwardUse])
              firstBackwardUse = user;
        }
      if (needed.empty())
        continue;
      // Everything inside the segment that the needed values depend on,
      // cloned in forward order before the segment's backward begins.
      llvm::DenseSet<Operation *> toClone;
      SmallVector<Value> worklist(needed.begin(), needed.end());
      while (!worklist.empty()) {
        Operation *def = worklist.pop_back_val().getDefiningOp();
        if (!def || !inSegment.contains(def) || !toClone.insert(def).second)
          continue;
        for (Value operand : def->getOperands())
          worklist.push_back(operand);
      }
      IRMapping mapping;
      builder.setInsertionPoint(firstBackwardUse);
      // Marked, so that cpu_checkpointing can tell the recomputation's
      // reads of the checkpoints (zcc-dist-offload-checkpoints).
      // A pipeline stage recomputes in its backward program (marked as
      // autodiff marks that program's ops), or the segment's values would
      // still cross from its forward program to its backward one.
      for (Operation *op : ops)
        if (toClone.contains(op)) {
          Operation *clone = builder.clone(*op, mapping);
          clone->setAttr(kRecomputeAttr, builder.getUnitAttr());
          if (clone->hasAttr("zdist.stage"))
            clone->setAttr("zdist.backward", builder.getUnitAttr());
        }
      for (Value value : needed) {
        Value clone = mapping.lookup(value);
        value.replaceUsesWithIf(clone, [&](OpOperand &use) {
          return position.lookup(use.getOwner()) >= backwardAt;
        });
      }
    }
  }
};

} // namespace
} // namespace zcc::zgraph
