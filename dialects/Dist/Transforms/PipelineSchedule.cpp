//===- PipelineSchedule.cpp - Stage transfers and pipeline schedules ------===//
//
// Makes the stage boundaries explicit (zdist.transfer) and writes each
// stage's instruction list for GPipe, 1F1B, interleaved 1F1B or ZB-H1,
// checked and timed by running it on a model of the stages: compute takes
// the stage's estimated flops, a send meets its receive (neither returns
// before the other arrives, as with the runtime's communicators).
//
// ZB-H1 (zero bubble, Qi et al. 2024) splits a stage's backward pass into
// B, what the gradient sent to the previous stage needs, and W, the rest
// (the weight gradients). It keeps 1F1B's order of passes and messages, so
// it cannot deadlock where 1F1B does not, and places each W where the
// stage would otherwise wait: on the model, a stage at a send or receive
// its neighbour cannot meet before a W would end runs its oldest pending
// W first, and one about to hold more micro-batches than the 1F1B
// schedule's first stage does runs one before its forward pass.
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

#include <deque>
#include <map>
#include <set>
#include <tuple>

namespace zcc::zdist {
#define GEN_PASS_DEF_PIPELINESCHEDULEPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {

namespace {

enum class Step {
  Forward,
  Backward,
  SendActivation,
  RecvActivation,
  SendGrad,
  RecvGrad,
  Weights
};

struct Instruction {
  Step step;
  int64_t microBatch;
  /// The model chunk it belongs to (interleaved); -1 where a stage holds
  /// one piece of the model.
  int64_t chunk = -1;
};

std::string instructionText(const Instruction &instruction) {
  static const char *const kNames[] = {"F", "B", "sa", "ra", "sg", "rg", "W"};
  return kNames[static_cast<int>(instruction.step)] + std::to_string(instruction.microBatch) +
         (instruction.chunk >= 0 ? "@" + std::to_string(instruction.chunk) : "");
}

/// Each stage's instructions. A stage that both sends to and receives from
/// one neighbour in a row does it in the order its parity says (even
/// stages send first), so the two neighbours never both wait in a send.
std::vector<std::vector<Instruction>> buildSchedule(bool gpipe, bool training, int64_t stages,
                                                    int64_t microBatches) {
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
    if (!training || gpipe) {
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
/// Each stage's estimated cost of its forward pass, its backward pass (B
/// alone where the stage's weight pass is split off) and its weight pass.
struct StageCosts {
  SmallVector<double> forward, backward, weights;

  double of(Step step, int64_t stage) const {
    switch (step) {
    case Step::Forward:
      return forward[stage];
    case Step::Backward:
      return backward[stage];
    case Step::Weights:
      return weights[stage];
    default:
      return 0;
    }
  }
};

bool isCompute(Step step) {
  return step == Step::Forward || step == Step::Backward || step == Step::Weights;
}

/// The instruction a send or receive meets on the neighbour.
Instruction counterpart(const Instruction &instruction) {
  switch (instruction.step) {
  case Step::SendActivation:
    return {Step::RecvActivation, instruction.microBatch};
  case Step::RecvActivation:
    return {Step::SendActivation, instruction.microBatch};
  case Step::SendGrad:
    return {Step::RecvGrad, instruction.microBatch};
  default:
    return {Step::SendGrad, instruction.microBatch};
  }
}

/// The neighbour a send or receive of stage `s` talks to.
int64_t peerOf(const Instruction &instruction, int64_t s) {
  bool next = instruction.step == Step::SendActivation || instruction.step == Step::RecvGrad;
  return next ? s + 1 : s - 1;
}

bool operator==(const Instruction &a, const Instruction &b) {
  return a.step == b.step && a.microBatch == b.microBatch && a.chunk == b.chunk;
}

/// The interleaved schedule (Megatron's interleaved 1F1B, Narayanan et al.
/// 2021) of p stages holding v chunks each, chunk c on stage c mod p.
/// Each stage runs its chunks' passes in Megatron's order: micro-batches
/// in groups of p, each group through chunk 0, 1, ... of the stage
/// forwards and in reverse backwards; (p - s - 1) x 2 + (v - 1) x p
/// forward passes of warm-up (all of them when m = p), then one forward
/// and one backward pass in turn. The sends and receives are placed by
/// running the passes on the model of the stages, where a send waits for
/// its receive: a stage receives what a pass needs right before the pass.
/// A stage holding a value its receiver needs next (after the passes the
/// receiver can run first) sends it when it waits itself, or when its own
/// wait for the receiver would be no longer than the receiver's wait for
/// its next pass; otherwise it runs that pass first. Every send meets its
/// receive in one global order, so the lists cannot deadlock. `busy` gets
/// each stage's compute and `length` the step's length on the model;
/// nothing if the stages wait on each other forever.
struct InterleavedSchedule {
  std::vector<std::vector<Instruction>> lists;
  SmallVector<double> busy;
  double length = 0;
};

std::optional<InterleavedSchedule> buildInterleaved(bool training, int64_t stages,
                                                    int64_t chunks, int64_t microBatches,
                                                    ArrayRef<double> forwardCost,
                                                    ArrayRef<double> backwardCost) {
  const int64_t p = stages, v = chunks, m = microBatches, total = m * v, last = p * v - 1;
  // A message: activations into chunk `chunk` (gradient false) or
  // gradients into it (true), of micro-batch `microBatch`.
  using Message = std::tuple<bool, int64_t, int64_t>;
  struct Pass {
    bool forward;
    int64_t chunk, microBatch;
  };
  std::vector<std::vector<Pass>> passes(p);
  for (int64_t s = 0; s < p; ++s) {
    auto pass = [&](int64_t i, bool forward) {
      int64_t local = (i / p) % v;
      if (!forward)
        local = v - 1 - local;
      return Pass{forward, local * p + s, (i / (p * v)) * p + i % p};
    };
    std::vector<Pass> &list = passes[s];
    if (!training) {
      for (int64_t i = 0; i < total; ++i)
        list.push_back(pass(i, true));
      continue;
    }
    int64_t warmup = m == p ? total : std::min(total, (p - s - 1) * 2 + (v - 1) * p);
    for (int64_t i = 0; i < warmup; ++i)
      list.push_back(pass(i, true));
    for (int64_t j = 0; j < total - warmup; ++j) {
      list.push_back(pass(warmup + j, true));
      list.push_back(pass(j, false));
    }
    for (int64_t j = total - warmup; j < total; ++j)
      list.push_back(pass(j, false));
  }

  InterleavedSchedule result;
  result.lists.resize(p);
  result.busy.assign(p, 0);
  std::vector<double> clock(p, 0);
  std::vector<size_t> next(p, 0);
  // A stage waits for a value its next pass needs (`waiting`), or in a
  // send for its receiver to arrive (`sending`).
  std::vector<std::optional<Message>> waiting(p), sending(p);
  std::vector<double> waitBegan(p, 0);
  std::vector<std::deque<Message>> pending(p);
  std::vector<std::set<Message>> received(p);
  auto receiverOf = [&](const Message &message) { return std::get<1>(message) % p; };
  auto senderOf = [&](const Message &message) {
    return (std::get<1>(message) + (std::get<0>(message) ? 1 : p - 1)) % p;
  };
  auto meet = [&](int64_t sender, int64_t receiver, const Message &message) {
    auto [gradient, chunk, k] = message;
    double time = std::max(clock[sender], clock[receiver]);
    clock[sender] = clock[receiver] = time;
    result.lists[sender].push_back({gradient ? Step::SendGrad : Step::SendActivation, k,
                                    gradient ? chunk + 1 : chunk - 1});
    result.lists[receiver].push_back(
        {gradient ? Step::RecvGrad : Step::RecvActivation, k, chunk});
    pending[sender].erase(llvm::find(pending[sender], message));
    received[receiver].insert(message);
    waiting[receiver].reset();
    if (sending[sender] == message)
      sending[sender].reset();
  };
  auto computed = [&](int64_t s) { return next[s] == passes[s].size(); };
  // A stage is blocked when it waits, or when it has only sends left.
  auto blocked = [&](int64_t s) {
    return waiting[s] || sending[s] || (computed(s) && !pending[s].empty());
  };
  auto needOf = [&](int64_t s, const Pass &pass) -> std::optional<Message> {
    std::optional<Message> need;
    if (pass.forward && pass.chunk > 0)
      need = Message{false, pass.chunk, pass.microBatch};
    if (!pass.forward && pass.chunk < last)
      need = Message{true, pass.chunk, pass.microBatch};
    if (need && received[s].count(*need))
      need.reset();
    return need;
  };
  auto costOf = [&](const Pass &pass) {
    return (pass.forward ? forwardCost : backwardCost)[pass.chunk];
  };
  // The first value stage r needs and has not received, and when it will
  // need it (after the passes it can run first).
  auto firstNeed = [&](int64_t r) -> std::optional<std::pair<Message, double>> {
    if (waiting[r])
      return std::make_pair(*waiting[r], waitBegan[r]);
    double time = clock[r];
    for (size_t i = next[r]; i < passes[r].size(); ++i) {
      if (std::optional<Message> need = needOf(r, passes[r][i]))
        return std::make_pair(*need, time);
      time += costOf(passes[r][i]);
    }
    return std::nullopt;
  };
  while (true) {
    bool met = false;
    // A waiting receiver and a blocked sender holding its value meet.
    for (int64_t r = 0; r < p && !met; ++r) {
      if (!waiting[r])
        continue;
      int64_t sender = senderOf(*waiting[r]);
      if (blocked(sender) && llvm::is_contained(pending[sender], *waiting[r])) {
        meet(sender, r, *waiting[r]);
        met = true;
      }
    }
    if (met)
      continue;
    // The stage furthest behind that can go on decides next.
    int64_t s = -1;
    for (int64_t c = 0; c < p; ++c)
      if (!blocked(c) && !computed(c) && (s < 0 || clock[c] < clock[s]))
        s = c;
    if (s < 0)
      break;
    const Pass &pass = passes[s][next[s]];
    std::optional<Message> need = needOf(s, pass);
    double cost = costOf(pass);
    // It sends a value its receiver needs next, or runs its pass first,
    // whichever leaves the shorter wait.
    bool sends = false;
    if (!need)
      for (const Message &message : pending[s]) {
        // (Not to a stage blocked in a send itself: the two sends could
        // wait on each other.)
        int64_t r = receiverOf(message);
        auto first = firstNeed(r);
        if (!first || first->first != message || sending[r])
          continue;
        double arrival = first->second;
        if (std::max(0.0, arrival - clock[s]) <= std::max(0.0, clock[s] + cost - arrival)) {
          if (waiting[r] && *waiting[r] == message)
            meet(s, r, message);
          else
            sending[s] = message;
          sends = true;
          break;
        }
      }
    if (sends)
      continue;
    if (need) {
      waiting[s] = need;
      waitBegan[s] = clock[s];
      continue;
    }
    clock[s] += cost;
    result.busy[s] += cost;
    result.lists[s].push_back(
        {pass.forward ? Step::Forward : Step::Backward, pass.microBatch, pass.chunk});
    ++next[s];
    if (pass.forward && pass.chunk < last)
      pending[s].push_back(Message{false, pass.chunk + 1, pass.microBatch});
    if (!pass.forward && pass.chunk > 0)
      pending[s].push_back(Message{true, pass.chunk - 1, pass.microBatch});
  }
  for (int64_t s = 0; s < p; ++s)
    if (!computed(s) || !pending[s].empty() || waiting[s] || sending[s])
      return std::nullopt;
  result.length = *std::max_element(clock.begin(), clock.end());
  return result;
}

/// The most micro-batches each chunk holds at once under the interleaved
/// schedule: from the chunk's first instruction for a micro-batch (its
/// receive, or its forward pass) to its last (its backward pass, or the
/// send after it).
SmallVector<int64_t> chunkHeldCounts(const std::vector<std::vector<Instruction>> &lists,
                                     int64_t chunks) {
  SmallVector<int64_t> most(chunks, 0);
  for (const std::vector<Instruction> &list : lists) {
    std::map<std::pair<int64_t, int64_t>, size_t> first, lastSeen;
    for (auto [i, instruction] : llvm::enumerate(list)) {
      std::pair<int64_t, int64_t> key{instruction.chunk, instruction.microBatch};
      first.try_emplace(key, i);
      lastSeen[key] = i;
    }
    for (const auto &[key, begin] : first) {
      int64_t held = 0;
      for (const auto &[other, otherBegin] : first)
        if (other.first == key.first && otherBegin <= begin && lastSeen[other] >= begin)
          ++held;
      most[key.first] = std::max(most[key.first], held);
    }
  }
  return most;
}

std::optional<double> simulate(const std::vector<std::vector<Instruction>> &schedule,
                               const StageCosts &costs, SmallVectorImpl<double> &busy) {
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
      if (isCompute(instruction->step)) {
        double cost = costs.of(instruction->step, s);
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

/// The instruction lists with each split stage's W pass of micro-batch k
/// right after its B pass: 1F1B's timing.
std::vector<std::vector<Instruction>>
weightsAfterBackward(const std::vector<std::vector<Instruction>> &skeleton, ArrayRef<bool> split) {
  std::vector<std::vector<Instruction>> lists(skeleton.size());
  for (auto [s, list] : llvm::enumerate(skeleton))
    for (const Instruction &instruction : list) {
      lists[s].push_back(instruction);
      if (instruction.step == Step::Backward && split[s])
        lists[s].push_back({Step::Weights, instruction.microBatch});
    }
  return lists;
}

/// Whether `instruction` is the first of its micro-batch on a stage that
/// has seen `acquired` micro-batches (they come in order): the receive of
/// its activations, or on the first stage its forward pass. From there to
/// the micro-batch's last pass the stage holds its buffers (the slot the
/// receive fills is the one the forward, B and W passes read).
bool acquires(const Instruction &instruction, int64_t acquired) {
  return (instruction.step == Step::RecvActivation || instruction.step == Step::Forward) &&
         instruction.microBatch == acquired;
}

/// The most micro-batches each stage holds at once: from its first
/// instruction (acquires) to its backward pass, or its W pass where the
/// stage's backward pass is split.
SmallVector<int64_t> heldCounts(const std::vector<std::vector<Instruction>> &lists,
                                ArrayRef<bool> split) {
  SmallVector<int64_t> most(lists.size(), 0);
  for (auto [s, list] : llvm::enumerate(lists)) {
    Step last = split[s] ? Step::Weights : Step::Backward;
    int64_t acquired = 0, held = 0;
    for (const Instruction &instruction : list) {
      if (acquires(instruction, acquired)) {
        ++acquired;
        most[s] = std::max(most[s], ++held);
      } else if (instruction.step == last) {
        --held;
      }
    }
  }
  return most;
}

/// ZB-H1's instruction lists: `skeleton` (1F1B's) run on the model of the
/// stages, each split stage keeping its W passes pending (oldest first)
/// and running one
///  - before taking a micro-batch (acquires) that would make it hold more
///    than its `limits`;
///  - at a send or receive the neighbour reaches no sooner than `fill`
///    W passes from now (the neighbour's compute up to its counterpart,
///    waits not counted);
///  - after its last skeleton instruction.
/// Nothing if the model's stages wait on each other forever.
std::optional<std::vector<std::vector<Instruction>>>
placeWeights(const std::vector<std::vector<Instruction>> &skeleton, const StageCosts &costs,
             ArrayRef<bool> split, ArrayRef<int64_t> limits, double fill) {
  int64_t stages = static_cast<int64_t>(skeleton.size());
  std::vector<size_t> next(stages, 0);
  std::vector<double> clock(stages, 0);
  // The time a stage arrived at a send or receive its neighbour has not.
  std::vector<std::optional<double>> waiting(stages);
  std::vector<std::deque<int64_t>> pending(stages);
  std::vector<int64_t> held(stages, 0), acquired(stages, 0);
  std::vector<std::vector<Instruction>> lists(stages);
  auto emit = [&](int64_t s, const Instruction &instruction) {
    if (acquires(instruction, acquired[s])) {
      ++acquired[s];
      ++held[s];
    }
    if (instruction.step == Step::Backward && !split[s])
      --held[s];
    lists[s].push_back(instruction);
    ++next[s];
  };
  auto runWeights = [&](int64_t s) {
    lists[s].push_back({Step::Weights, pending[s].front()});
    pending[s].pop_front();
    clock[s] += costs.weights[s];
    --held[s];
  };
  auto earliest = [&](int64_t q, const Instruction &target) {
    double time = waiting[q].value_or(clock[q]);
    for (size_t i = next[q]; i < skeleton[q].size() && !(skeleton[q][i] == target); ++i)
      time += costs.of(skeleton[q][i].step, q);
    return time;
  };
  auto unfinished = [&](int64_t s) {
    return next[s] < skeleton[s].size() || !pending[s].empty();
  };
  while (true) {
    // The stage furthest behind that is not waiting decides next.
    int64_t s = -1;
    for (int64_t c = 0; c < stages; ++c)
      if (!waiting[c] && unfinished(c) && (s < 0 || clock[c] < clock[s]))
        s = c;
    if (s < 0)
      break;
    if (next[s] == skeleton[s].size()) {
      runWeights(s);
      continue;
    }
    const Instruction &instruction = skeleton[s][next[s]];
    if (acquires(instruction, acquired[s]) && held[s] >= limits[s] && !pending[s].empty()) {
      runWeights(s);
      continue;
    }
    if (isCompute(instruction.step)) {
      clock[s] += costs.of(instruction.step, s);
      if (instruction.step == Step::Backward && split[s])
        pending[s].push_back(instruction.microBatch);
      emit(s, instruction);
      continue;
    }
    int64_t peer = peerOf(instruction, s);
    Instruction match = counterpart(instruction);
    if (waiting[peer] && skeleton[peer][next[peer]] == match) {
      clock[s] = clock[peer] = std::max(clock[s], *waiting[peer]);
      waiting[peer].reset();
      emit(s, instruction);
      emit(peer, match);
      continue;
    }
    if (!pending[s].empty() && earliest(peer, match) >= clock[s] + fill * costs.weights[s]) {
      runWeights(s);
      continue;
    }
    waiting[s] = clock[s];
  }
  for (int64_t s = 0; s < stages; ++s)
    if (unfinished(s))
      return std::nullopt;
  return lists;
}

/// zb-h1: marks the backward ops of each stage that no gradient it sends
/// to an earlier stage depends on (`zdist.weights`: its W pass). A stage
/// splits when it sends gradients and some of its backward ops are left
/// for W; the others keep one backward pass.
SmallVector<bool> markWeightPasses(Block &body, int64_t stages) {
  SmallVector<bool> sends(stages, false), split(stages, false);
  llvm::DenseSet<Operation *> needed;
  SmallVector<Operation *> worklist;
  for (auto transfer : body.getOps<TransferOp>())
    if (transfer.getSource() > transfer.getTarget()) {
      sends[transfer.getSource()] = true;
      worklist.push_back(transfer);
    }
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (producer && !isa<TransferOp>(producer) && isBackward(producer) && stageOf(producer) &&
          needed.insert(producer).second)
        worklist.push_back(producer);
    }
  }
  Builder builder(body.getParentOp()->getContext());
  for (Operation &op : body.without_terminator()) {
    std::optional<int64_t> stage = stageOf(&op);
    if (!stage || !sends[*stage] || !isBackward(&op) || isa<TransferOp>(op) ||
        needed.contains(&op))
      continue;
    op.setAttr("zdist.weights", builder.getUnitAttr());
    split[*stage] = true;
  }
  return split;
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
    if (kind != "gpipe" && kind != "1f1b" && kind != "zb-h1" && kind != "interleaved") {
      module.emitError() << "pipeline.schedule: '" << kind
                         << "' is not a schedule; use 'gpipe', '1f1b', 'interleaved' or 'zb-h1'";
      return signalPassFailure();
    }
    // Under the interleaved schedule each of the mesh's stages holds
    // `chunks` pieces of the model; from here on `stages` counts the
    // pieces (chunk c on stage c mod physicalStages).
    int64_t chunks = 1;
    if (kind == "interleaved") {
      auto chunksAttr = pipeline.getAs<IntegerAttr>("chunks");
      chunks = chunksAttr ? chunksAttr.getInt() : 2;
      if (chunks < 2) {
        module.emitError() << "pipeline.chunks: the 'interleaved' schedule needs at least 2 "
                              "chunks per stage, got "
                           << chunks;
        return signalPassFailure();
      }
    }
    const int64_t physicalStages = stages;
    stages *= chunks;
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
    if (chunks > 1 && microBatches % physicalStages != 0) {
      module.emitError() << "pipeline.micro_batches: the 'interleaved' schedule runs the "
                            "micro-batches in groups of num_stages ("
                         << physicalStages << "), but there are " << microBatches;
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
                       << stages << (chunks > 1 ? " chunks" : " stages");
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

    // zb-h1 splits each stage's backward pass where it can.
    SmallVector<bool> split(stages, false);
    if (training && kind == "zb-h1")
      split = markWeightPasses(body, stages);

    // Each stage's work, and the values its backward pass keeps from its
    // forward pass (its activations of one micro-batch), and a split W
    // pass from B.
    StageCosts costs;
    costs.forward.assign(stages, 0);
    costs.backward.assign(stages, 0);
    costs.weights.assign(stages, 0);
    SmallVector<uint64_t> kept(stages, 0), keptActivations(stages, 0);
    SmallVector<llvm::SetVector<Value>> keptValues(stages);
    for (Operation &op : body.without_terminator()) {
      std::optional<int64_t> stage = stageOf(&op);
      if (!stage)
        continue;
      bool backward = isBackward(&op), weights = isWeightPass(&op);
      if (!isa<TransferOp, zgraph::ParamOp, zgraph::StateOp>(op))
        (weights ? costs.weights : backward ? costs.backward : costs.forward)[*stage] +=
            estimateFlops(&op);
      if (!backward)
        continue;
      for (Value operand : op.getOperands()) {
        Operation *producer = operand.getDefiningOp();
        bool activation = producer ? stageOf(producer) == stage && !isBackward(producer) &&
                                         !isa<zgraph::ParamOp, zgraph::StateOp>(producer)
                                   : true; // a data input
        bool fromB = weights && producer && stageOf(producer) == stage &&
                     isBackward(producer) && !isWeightPass(producer) &&
                     !isa<TransferOp>(producer);
        if ((activation || fromB) && keptValues[*stage].insert(operand)) {
          kept[*stage] += byteSize(operand.getType());
          if (activation)
            keptActivations[*stage] += byteSize(operand.getType());
        }
      }
    }
    for (int64_t s = 0; s < stages; ++s) {
      costs.forward[s] = std::max(costs.forward[s], 1.0);
      if (training)
        costs.backward[s] = std::max(costs.backward[s], 1.0);
      if (split[s])
        costs.weights[s] = std::max(costs.weights[s], 1.0);
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
    SmallVector<uint64_t> paramBytes(stages, 0), gradBytes(stages, 0), stateBytes(stages, 0),
        fixedBytes(stages, 0);
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
    for (int64_t s = 0; s < stages; ++s)
      fixedBytes[s] = paramBytes[s] + gradBytes[s] + stateBytes[s];
    std::vector<std::vector<Instruction>> schedule;
    SmallVector<double> busy;
    std::optional<double> length;
    if (chunks > 1) {
      if (std::optional<InterleavedSchedule> built =
              buildInterleaved(training, physicalStages, chunks, microBatches, costs.forward,
                               costs.backward)) {
        schedule = std::move(built->lists);
        busy = std::move(built->busy);
        length = built->length;
      }
    } else {
      schedule = buildSchedule(kind == "gpipe", training, stages, microBatches);
      length = simulate(schedule, costs, busy);
    }
    if (length && llvm::is_contained(split, true)) {
      // ZB-H1: of W placed right after B (1F1B's timing) and the placements
      // that fill waits with whole, half or any W passes, the shortest on
      // the model. A stage may hold more micro-batches than under 1F1B, up
      // to min(p, m), as long as its bytes stay within the 1F1B schedule's
      // heaviest stage's.
      std::vector<std::vector<Instruction>> skeleton = std::move(schedule);
      // A slot also holds the transfers on the stage's paths (received,
      // sent or relayed).
      SmallVector<uint64_t> slotBytes(stages, 0);
      for (auto transfer : body.getOps<TransferOp>()) {
        auto source = static_cast<int64_t>(transfer.getSource());
        auto target = static_cast<int64_t>(transfer.getTarget());
        for (int64_t s = std::min(source, target); s <= std::max(source, target); ++s)
          slotBytes[s] += byteSize(transfer.getType());
      }
      SmallVector<int64_t> oneFOneB = heldCounts(skeleton, SmallVector<bool>(stages, false));
      uint64_t cap = 0;
      for (int64_t s = 0; s < stages; ++s)
        cap = std::max(cap, fixedBytes[s] + (keptActivations[s] + slotBytes[s]) * oneFOneB[s]);
      SmallVector<int64_t> limits(stages);
      for (int64_t s = 0; s < stages; ++s) {
        limits[s] = oneFOneB[s];
        while (limits[s] < std::min(stages, microBatches) &&
               fixedBytes[s] + (kept[s] + slotBytes[s]) * (limits[s] + 1) <= cap)
          ++limits[s];
      }
      schedule = weightsAfterBackward(skeleton, split);
      length = simulate(schedule, costs, busy);
      for (double fill : {1.0, 0.5, 0.0}) {
        auto placed = placeWeights(skeleton, costs, split, limits, fill);
        SmallVector<double> placedBusy;
        std::optional<double> placedLength =
            placed ? simulate(*placed, costs, placedBusy) : std::nullopt;
        if (length && placedLength && *placedLength < *length) {
          schedule = std::move(*placed);
          length = placedLength;
          busy = std::move(placedBusy);
        }
      }
    }
    if (!length) {
      module.emitError() << "internal error: the " << kind << " schedule of " << physicalStages
                         << " stages and " << microBatches << " micro-batches deadlocks";
      return signalPassFailure();
    }
    double work = 0;
    for (double b : busy)
      work += b;
    double bubble = 1.0 - work / (static_cast<double>(physicalStages) * *length);
    if (bubble < 0)
      bubble = 0;

    SmallVector<int64_t> buffers(stages, 1);
    if (chunks > 1)
      buffers = chunkHeldCounts(schedule, stages);
    else if (training)
      buffers = heldCounts(schedule, split);
    SmallVector<Attribute> lists;
    for (int64_t s = 0; s < physicalStages; ++s) {
      std::string text;
      for (const Instruction &instruction : schedule[s])
        text += (text.empty() ? "" : " ") + instructionText(instruction);
      lists.push_back(builder.getStringAttr(text));
    }

    // Each stage's figures, the sums of its chunks' under the interleaved
    // schedule.
    SmallVector<Attribute> memory, flopsPerStage;
    for (int64_t s = 0; s < physicalStages; ++s) {
      auto bytes = [&](uint64_t value) { return builder.getI64IntegerAttr(int64_t(value)); };
      uint64_t params = 0, grads = 0, state = 0, buffer = 0, activations = 0;
      double forward = 0, backward = 0, weights = 0;
      for (int64_t c = s; c < stages; c += physicalStages) {
        params += paramBytes[c];
        grads += gradBytes[c];
        state += stateBytes[c];
        buffer += kept[c];
        activations += kept[c] * buffers[c];
        forward += costs.forward[c];
        backward += costs.backward[c];
        weights += costs.weights[c];
      }
      memory.push_back(builder.getDictionaryAttr({
          builder.getNamedAttr("parameters", bytes(params)),
          builder.getNamedAttr("gradients", bytes(grads)),
          builder.getNamedAttr("optimizer_state", bytes(state)),
          builder.getNamedAttr("activation_buffer", bytes(buffer)),
          builder.getNamedAttr("activations", bytes(activations)),
      }));
      SmallVector<Attribute> flops = {builder.getI64IntegerAttr(int64_t(forward)),
                                      builder.getI64IntegerAttr(training ? int64_t(backward) : 0)};
      if (split[s])
        flops.push_back(builder.getI64IntegerAttr(int64_t(weights)));
      flopsPerStage.push_back(builder.getArrayAttr(flops));
    }
    builder.setInsertionPointToEnd(module.getBody());
    auto op = builder.create<PipelineOp>(
        module.getLoc(), builder.getStringAttr(kind), builder.getI64IntegerAttr(microBatches),
        builder.getDenseI64ArrayAttr(buffers), builder.getF64FloatAttr(bubble),
        builder.getArrayAttr(lists));
    op->setAttr("flops", builder.getArrayAttr(flopsPerStage));
    op->setAttr("memory", builder.getArrayAttr(memory));
  }
};

} // namespace
} // namespace zcc::zdist
