//===- DistToPlan.cpp - Buffers, memory plan and kernels ------------------===//

#include "compiler/Conversion/MemoryPlanner.h"
#include "compiler/Conversion/Passes.h"
#include "dialects/Graph/Transforms/NodeName.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <array>
#include <functional>
#include <limits>
#include <optional>
#include <tuple>

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
  /// In the host arena (CPU offload) rather than the device arena.
  bool host = false;
  /// In the rank's swap file (NVMe offload of the optimizer state): only
  /// swap_in and swap_out touch it.
  bool nvme = false;
  /// The buffer whose bytes this one shares (a reshape's result viewing its
  /// input, a contiguous slice's its range of them), or -1, and where in
  /// them it starts.
  int64_t aliasOf = -1;
  uint64_t aliasOffset = 0;
  /// A gradient that lives for one step (zdist.step_local): planned from
  /// its first use to its last, in the activations' region.
  bool stepLocal = false;
};

/// Whether the offload pass placed `op` (or the value it defines) in host
/// memory.
bool onHost(Operation *op) {
  if (isa_and_nonnull<zdist::OffloadOp>(op))
    return true;
  auto memory = op ? op->getAttrOfType<StringAttr>("zdist.memory") : StringAttr();
  return memory && memory.getValue() == "host";
}

/// Whether zcc-dist-nvme-swap placed `op`'s value in the swap file.
bool onNvme(Operation *op) {
  auto memory = op ? op->getAttrOfType<StringAttr>("zdist.memory") : StringAttr();
  return memory && memory.getValue() == "nvme";
}

/// Where a value of each memory is, for messages.
StringRef memoryName(const BufferInfo &info) {
  return info.nvme ? "NVMe" : info.host ? "host" : "device";
}

/// Swap file offsets are aligned for direct I/O.
constexpr uint64_t kNvmeAlignment = 4096;

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

using zgraph::nodeName;

/// The operands an in-place training op writes (its outputs in the plan)
/// and the ones it only reads (its inputs).
bool inPlaceOperands(Operation *op, SmallVectorImpl<Value> &reads, SmallVectorImpl<Value> &writes) {
  if (auto accumulate = dyn_cast<zgraph::AccumulateOp>(op)) {
    reads.push_back(accumulate.getValue());
    writes.push_back(accumulate.getTarget());
    return true;
  }
  if (auto fused = dyn_cast<zgraph::AccumulateMatMulOp>(op)) {
    reads.append({fused.getLhs(), fused.getRhs()});
    writes.push_back(fused.getTarget());
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
  // lamb_moments' result (the sums of squares) follows its moments.
  if (auto moments = dyn_cast<zgraph::LambMomentsOp>(op)) {
    reads.append(op->operand_begin(), op->operand_end());
    writes.append({moments.getExpAvg(), moments.getExpAvgSq()});
    return true;
  }
  if (auto lamb = dyn_cast<zgraph::LambStepOp>(op)) {
    reads.append(op->operand_begin(), op->operand_end());
    writes.push_back(lamb.getParam());
    return true;
  }
  if (auto lion = dyn_cast<zgraph::LionOp>(op)) {
    reads.append(op->operand_begin(), op->operand_end());
    writes.append({lion.getParam(), lion.getExpAvg()});
    return true;
  }
  if (auto adagrad = dyn_cast<zgraph::AdagradOp>(op)) {
    reads.append(op->operand_begin(), op->operand_end());
    writes.append({adagrad.getParam(), adagrad.getSum()});
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

/// Where `slice`'s result starts in its input's bytes when it is one
/// contiguous range of them (every result dimension after the first one
/// that is longer than 1 whole, unit steps where it matters); none
/// otherwise.
std::optional<uint64_t> contiguousSliceOffset(zgraph::SliceOp slice) {
  auto input = cast<RankedTensorType>(slice.getInput().getType());
  auto result = cast<RankedTensorType>(slice.getType());
  ArrayRef<int64_t> shape = input.getShape(), starts = slice.getStarts(),
                    steps = slice.getStrides(), extents = result.getShape();
  int64_t rank = input.getRank();
  // The input's row-major strides, the window's and its start.
  SmallVector<int64_t> strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  int64_t base = 0, expected = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    base += starts[d] * strides[d];
    if (extents[d] != 1 && strides[d] * steps[d] != expected)
      return std::nullopt;
    expected *= extents[d];
  }
  return static_cast<uint64_t>(base) * elementBytes(input.getElementType());
}

/// The state that `result` of `op` only overwrites (its one use is an
/// assign of the same type into it), where `op` can write it there itself
/// and the assign moves nothing, or null:
/// - a device collective's result and a gradient that lives for one step
///   (zdist.step_local);
/// - a cast right before its assign and the 16-bit copy of a parameter
///   ("copy", refreshed after the parameter's last write in the optimizer
///   step; in host memory for an offloaded parameter);
/// - a copy to the host and a one-step gradient streamed there
///   ("host_grad").
Value resultIntoState(Operation *op, Value result) {
  bool collective = isa<zdist::AllReduceOp, zdist::ReduceScatterOp>(op) && !onHost(op);
  bool copyCast = isa<zgraph::CastOp>(op);
  bool offload = isa<zdist::OffloadOp>(op);
  if ((!collective && !copyCast && !offload) || !result.hasOneUse())
    return {};
  bool toHost = (copyCast && onHost(op)) || offload;
  auto assign = dyn_cast<zgraph::AssignOp>(*result.getUsers().begin());
  if (!assign || assign.getValue() != result || onHost(assign) != toHost ||
      assign.getTarget().getType() != result.getType())
    return {};
  auto state = assign.getTarget().getDefiningOp<zgraph::StateOp>();
  if (!state || onHost(state) != toHost)
    return {};
  if ((collective || offload) && !state->hasAttr("zdist.step_local"))
    return {};
  if (offload && state.getKind() != "host_grad")
    return {};
  // Nothing may read the copy's old value between the cast and the assign.
  if (copyCast && (state.getKind() != "copy" || op->getNextNode() != assign.getOperation()))
    return {};
  return assign.getTarget();
}

/// The kernel that runs a zgraph op: the op's name, but `assign` is a cast.
std::string kernelName(Operation *op) {
  if (isa<zgraph::AssignOp>(op))
    return "cast";
  if (isa<zdist::OffloadOp, zdist::FetchOp>(op))
    return op->getName().stripDialect().str();
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

enum class SyncKind { None, Record, Wait };

/// One instruction of a program as it is being planned: a kernel with its
/// buffers and `index` on the timeline the memory plan uses, or an event's
/// record or wait.
struct PlanInstruction {
  Operation *op = nullptr;
  std::string kernel;
  SmallVector<unsigned> inputs;
  SmallVector<unsigned> outputs;
  DictionaryAttr params;
  int64_t index = 0;
  int64_t stream = 0;
  SyncKind sync = SyncKind::None;
  int event = 0;
};

struct PlanProgram {
  std::string name;
  std::vector<PlanInstruction> instructions;
  /// The pipeline stage whose ranks run it (0 without a pipeline).
  int64_t stage = 0;
  /// Events the program declares: e0 ... e(events - 1).
  int events = 0;
};

/// zero_optimization.overlap_comm of the module's config (the config
/// importer resolves DeepSpeed's default: on for stage 3).
bool overlapComm(ModuleOp module) {
  auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
  auto zero = config ? config.getAs<DictionaryAttr>("zero_optimization") : DictionaryAttr();
  auto overlap = zero ? zero.getAs<BoolAttr>("overlap_comm") : BoolAttr();
  return overlap && overlap.getValue();
}

/// An adamw followed by the cast of its updated f32 parameter into that
/// parameter's 16-bit copy (the refresh of zcc-dist-compute-copies, or of
/// CPU offload on the host) becomes one adamw with the copy as its fourth
/// result: the kernel casts the parameter's values as it writes them (on
/// the host, each block while it is still in cache), instead of a second
/// pass over the whole model.
void fuseCopyRefresh(PlanProgram &program, std::vector<BufferInfo> &buffers) {
  std::vector<PlanInstruction> &list = program.instructions;
  for (size_t i = 0; i + 1 < list.size(); ++i) {
    PlanInstruction &update = list[i];
    // Swaps of the update's moments back to NVMe may sit in between; they
    // only read what the update wrote.
    size_t next = i + 1;
    while (next + 1 < list.size() && list[next].kernel == "swap_out")
      ++next;
    const PlanInstruction &cast = list[next];
    if (update.kernel != "adamw" || update.outputs.size() != 3 || cast.kernel != "cast" ||
        cast.inputs.size() != 1 || cast.outputs.size() != 1 ||
        cast.inputs.front() != update.outputs.front())
      continue;
    const BufferInfo &param = buffers[update.outputs.front()];
    const BufferInfo &copy = buffers[cast.outputs.front()];
    Type element = copy.type.getElementType();
    // A copy on NVMe (offload_param "nvme"): the cast writes a host value
    // that a swap_out right after (past the master's own) writes to it.
    bool swappedOut = false;
    for (size_t k = next + 1; k < list.size() && list[k].kernel == "swap_out" && !swappedOut;
         ++k)
      swappedOut = list[k].inputs.size() == 1 && list[k].inputs.front() == cast.outputs.front() &&
                   buffers[list[k].outputs.front()].kind == Kind::ParameterCopy;
    if (param.host != copy.host || (copy.kind != Kind::ParameterCopy && !swappedOut) ||
        !param.type.getElementType().isF32() || !(element.isF16() || element.isBF16()))
      continue;
    // The copy is now written by the update, which may come before the
    // cast by swaps of the moments: its bytes are live from there.
    BufferInfo &written = buffers[cast.outputs.front()];
    written.firstUse = std::min(written.firstUse, update.index);
    update.outputs.push_back(cast.outputs.front());
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(next));
  }
}

/// Whether `instruction` is a single-tensor device adamw or fill, the
/// instructions fuseMultiTensor groups (a host one runs on the pool of
/// threads, chunk by chunk, and keeps its own instruction).
bool isMultiTensorCandidate(const PlanInstruction &instruction,
                            const std::vector<BufferInfo> &buffers) {
  if (instruction.sync != SyncKind::None)
    return false;
  // An adamw's fourth result is its parameter's 16-bit copy (fuseCopyRefresh).
  bool shape = (instruction.kernel == "adamw" && instruction.inputs.size() == 5 &&
                (instruction.outputs.size() == 3 ||
                 (instruction.outputs.size() == 4 &&
                  buffers[instruction.outputs[3]].kind == Kind::ParameterCopy))) ||
               (instruction.kernel == "fill" && instruction.inputs.empty() &&
                instruction.outputs.size() == 1);
  if (!shape)
    return false;
  // A 16-bit gradient (one crossed to the host) is a host adamw's alone.
  if (instruction.kernel == "adamw" &&
      buffers[instruction.inputs[1]].type.getElementType() !=
          buffers[instruction.inputs[0]].type.getElementType())
    return false;
  for (const auto *ids : {&instruction.inputs, &instruction.outputs})
    for (unsigned id : *ids)
      if (buffers[id].host)
        return false;
  return true;
}

/// The device optimizer step's adamw instructions (one a parameter) become
/// multi-tensor adamws, and the fills that zero the gradients multi-tensor
/// fills: an adamw's operands are its members' (param, grad, exp_avg,
/// exp_avg_sq) in order, then the scalars they share; its results their
/// (param, exp_avg, exp_avg_sq), each followed by the member's 16-bit copy
/// when every member writes one; a fill's results its members' targets. The
/// runtime then launches a few kernels over lists of tensors instead of one
/// (mostly small) kernel a parameter.
///
/// A group starts at its first member and takes the later instructions of
/// the same kernel, stream, attributes and element type (and, for adamw,
/// scalars) up to the first instruction that is neither an adamw nor a fill.
/// A member is hoisted over the instructions it passes only when none of
/// them writes what it reads or touches what it writes; the passed ones
/// keep their order. Buffers that share bytes with others (views) stay out.
void fuseMultiTensor(PlanProgram &program, const std::vector<BufferInfo> &buffers,
                     const llvm::DenseSet<unsigned> &viewed) {
  std::vector<PlanInstruction> &list = program.instructions;
  auto touchesView = [&](const PlanInstruction &instruction) {
    return llvm::any_of(instruction.inputs, [&](unsigned id) { return viewed.contains(id); }) ||
           llvm::any_of(instruction.outputs, [&](unsigned id) { return viewed.contains(id); });
  };
  auto elementOf = [&](const PlanInstruction &instruction) {
    return buffers[instruction.outputs.front()].type.getElementType();
  };
  // The members of a multi-tensor adamw all write a 16-bit copy of one
  // type, or none does.
  auto copyElementOf = [&](const PlanInstruction &instruction) {
    return instruction.kernel == "adamw" && instruction.outputs.size() == 4
               ? buffers[instruction.outputs[3]].type.getElementType()
               : Type();
  };
  std::vector<PlanInstruction> out;
  out.reserve(list.size());
  std::vector<bool> taken(list.size(), false);
  for (size_t i = 0; i < list.size(); ++i) {
    if (taken[i])
      continue;
    PlanInstruction head = list[i];
    if (!isMultiTensorCandidate(head, buffers) || touchesView(head)) {
      out.push_back(std::move(head));
      continue;
    }
    bool adamw = head.kernel == "adamw";
    // What the group reads and writes, and what the instructions it passes
    // read and write. A member writes nothing another member reads: the
    // cuda kernel runs the members at once.
    llvm::DenseSet<unsigned> groupWrites(head.outputs.begin(), head.outputs.end());
    llvm::DenseSet<unsigned> groupReads(head.inputs.begin(), head.inputs.end());
    llvm::DenseSet<unsigned> passedReads, passedWrites;
    SmallVector<size_t> members{i};
    for (size_t j = i + 1; j < list.size(); ++j) {
      const PlanInstruction &next = list[j];
      if (taken[j])
        continue;
      if (next.sync != SyncKind::None || (next.kernel != "adamw" && next.kernel != "fill"))
        break;
      bool joins = isMultiTensorCandidate(next, buffers) && !touchesView(next) &&
                   next.kernel == head.kernel && next.stream == head.stream &&
                   next.params == head.params && elementOf(next) == elementOf(head) &&
                   copyElementOf(next) == copyElementOf(head) &&
                   (!adamw || next.inputs.back() == head.inputs.back());
      if (joins) {
        ArrayRef<unsigned> reads = next.inputs;
        if (adamw)
          reads = reads.drop_back(); // the shared scalars
        joins = llvm::none_of(reads, [&](unsigned id) {
                  return passedWrites.contains(id) || groupWrites.contains(id);
                }) &&
                llvm::none_of(next.outputs, [&](unsigned id) {
                  return passedReads.contains(id) || passedWrites.contains(id) ||
                         groupWrites.contains(id) || groupReads.contains(id);
                });
      }
      if (joins) {
        members.push_back(j);
        groupWrites.insert(next.outputs.begin(), next.outputs.end());
        groupReads.insert(next.inputs.begin(), next.inputs.end());
        continue;
      }
      passedReads.insert(next.inputs.begin(), next.inputs.end());
      passedWrites.insert(next.outputs.begin(), next.outputs.end());
    }
    if (members.size() > 1) {
      PlanInstruction fused = head;
      fused.inputs.clear();
      fused.outputs.clear();
      for (size_t member : members) {
        const PlanInstruction &one = list[member];
        fused.inputs.append(one.inputs.begin(), adamw ? one.inputs.end() - 1 : one.inputs.end());
        fused.outputs.append(one.outputs.begin(), one.outputs.end());
        taken[member] = true;
      }
      if (adamw)
        fused.inputs.push_back(head.inputs.back());
      out.push_back(std::move(fused));
    } else {
      out.push_back(std::move(head));
    }
  }
  list = std::move(out);
}

/// Stream 1 carries the program's communication: collectives, copies
/// from host to device memory (and the swap_ins from NVMe that only they
/// read), and the data movement that only feeds or
/// splits them (a bucket's flattening and slicing, the accumulation or
/// assignment of a reduce-scattered gradient, a shard's cast for its
/// all-gather); stream 2 carries the copies from device to host memory
/// (CPU offload's gradients), so that they use the other copy engine while
/// stream 1 fetches; stream 0 computes. Before a run of stream-1 (or
/// stream-2) work that follows compute, that stream waits for an event
/// recorded on stream 0, so it sees everything computed before it in
/// program order; an instruction that touches a buffer the other side
/// stream's earlier instructions touch waits for their run to end. After
/// each run of a side stream's instructions an event is recorded, and
/// stream 0 waits for it right before its first instruction that touches a
/// buffer an instruction of the run (or of one before it) touches. Each
/// buffer a side stream touches stays live (in the memory plan) until that
/// wait, or to the end of the program, so compute never reuses bytes
/// communication still reads.
void assignStreams(PlanProgram &program, std::vector<BufferInfo> &buffers) {
  auto communicates = [](StringRef kernel) {
    return kernel == "all_reduce" || kernel == "reduce_scatter" || kernel == "all_gather" ||
           kernel == "offload" || kernel == "fetch";
  };
  auto movesData = [](StringRef kernel) {
    return kernel == "reshape" || kernel == "slice" || kernel == "concat" ||
           kernel == "accumulate";
  };
  llvm::DenseSet<unsigned> onComm; // activations a side stream produced
  // Buffers something other than communication and its data movement
  // reads.
  llvm::DenseSet<unsigned> readByCompute;
  // Buffers something other than a fetch reads.
  llvm::DenseSet<unsigned> readButFetched;
  for (const PlanInstruction &instruction : program.instructions) {
    if (!communicates(instruction.kernel) && !movesData(instruction.kernel))
      readByCompute.insert(instruction.inputs.begin(), instruction.inputs.end());
    if (instruction.kernel != "fetch")
      readButFetched.insert(instruction.inputs.begin(), instruction.inputs.end());
  }
  // A swap_in whose staging buffer only fetches read (offload_param
  // "nvme") goes with them on stream 1, as a host call in its order: the
  // file's read overlaps compute as the copy to the device does.
  auto swapsForFetch = [&](const PlanInstruction &instruction) {
    return instruction.kernel == "swap_in" &&
           llvm::none_of(instruction.outputs,
                         [&](unsigned id) { return readButFetched.contains(id); });
  };
  // A cast moves data too when it writes a collective's result somewhere
  // (a reduce-scattered gradient into its accumulator: zgraph.assign) or
  // makes what only communication reads (a ZeRO-3 shard in 16 bits for
  // its all-gather). The refresh of a device parameter's 16-bit copy (read
  // by later programs, not this one) computes.
  auto castMovesData = [&](const PlanInstruction &instruction) {
    if (instruction.kernel != "cast")
      return false;
    if (llvm::any_of(instruction.outputs, [&](unsigned id) {
          return buffers[id].kind == Kind::ParameterCopy && !buffers[id].host;
        }))
      return false;
    return llvm::any_of(instruction.inputs, [&](unsigned id) { return onComm.contains(id); }) ||
           llvm::none_of(instruction.outputs,
                         [&](unsigned id) { return readByCompute.contains(id); });
  };
  struct Pending {
    int event;
    SmallVector<unsigned> touched;
  };
  // A side stream: its runs in flight and the one being issued.
  struct Lane {
    int64_t stream;
    std::vector<Pending> pending;
    bool computedSinceEntry = true;
    int runEvent = -1;
  };
  std::array<Lane, 2> lanes = {Lane{1}, Lane{2}};
  std::vector<PlanInstruction> out;
  int64_t end = program.instructions.empty() ? 0 : program.instructions.back().index;
  auto sync = [&](SyncKind kind, int event, int64_t stream) {
    PlanInstruction instruction;
    instruction.sync = kind;
    instruction.event = event;
    instruction.stream = stream;
    out.push_back(instruction);
  };
  auto closeRun = [&](Lane &lane) {
    if (lane.runEvent >= 0)
      sync(SyncKind::Record, lane.runEvent, lane.stream);
    lane.runEvent = -1;
  };
  auto conflicts = [](ArrayRef<unsigned> touched, const Pending &waiting) {
    return llvm::any_of(touched,
                        [&](unsigned id) { return llvm::is_contained(waiting.touched, id); });
  };
  // Stream 0 waits for `lane`'s runs up to and including pending[last];
  // their buffers stay live until `index`.
  auto join = [&](Lane &lane, size_t last, int64_t index) {
    sync(SyncKind::Wait, lane.pending[last].event, 0);
    for (size_t k = 0; k <= last; ++k)
      for (unsigned id : lane.pending[k].touched)
        buffers[id].lastUse = std::max(buffers[id].lastUse, index);
    lane.pending.erase(lane.pending.begin(), lane.pending.begin() + last + 1);
  };
  for (PlanInstruction &instruction : program.instructions) {
    SmallVector<unsigned> touched(instruction.inputs);
    touched.append(instruction.outputs);
    // A data movement goes with communication when every activation it
    // reads came from communication (or it reads none).
    bool feedsOrSplits =
        (movesData(instruction.kernel) || castMovesData(instruction)) &&
        llvm::all_of(instruction.inputs, [&](unsigned id) {
          return buffers[id].kind != Kind::Activation || onComm.contains(id);
        });
    bool swap = swapsForFetch(instruction);
    bool hostKernel = !communicates(instruction.kernel) && !swap &&
                      llvm::any_of(touched, [&](unsigned id) { return buffers[id].host; });
    if ((communicates(instruction.kernel) || feedsOrSplits || swap) && !hostKernel) {
      Lane &lane = lanes[instruction.kernel == "offload" ? 1 : 0];
      Lane &other = lanes[instruction.kernel == "offload" ? 0 : 1];
      if (lane.computedSinceEntry) {
        // At most one earlier run stays in flight: compute waits for the
        // runs before the previous one, so their buffers (whole gradient
        // buckets, say) are free again instead of live to the program's
        // end. By now they have long finished.
        size_t older = 0;
        while (older < lane.pending.size() &&
               lane.pending[older].event != lane.pending.back().event)
          ++older;
        if (older > 0) {
          join(lane, older - 1, instruction.index);
          // Their bytes may be reused from here on: the other side stream
          // too waits for stream 0 (past this wait) before its next run.
          other.computedSinceEntry = true;
        }
        int event = program.events++;
        sync(SyncKind::Record, event, 0);
        sync(SyncKind::Wait, event, lane.stream);
        lane.computedSinceEntry = false;
      }
      // What the other side stream touched first: wait for the end of its
      // latest such run (ending the run being issued there).
      int cross = -1;
      for (auto [k, waiting] : llvm::enumerate(other.pending))
        if (conflicts(touched, waiting))
          cross = static_cast<int>(k);
      if (cross >= 0) {
        if (other.pending[cross].event == other.runEvent)
          closeRun(other);
        sync(SyncKind::Wait, other.pending[cross].event, lane.stream);
      }
      instruction.stream = lane.stream;
      for (unsigned id : instruction.outputs)
        if (buffers[id].kind == Kind::Activation)
          onComm.insert(id);
      out.push_back(instruction);
      // One event marks the end of a run of a side stream's instructions:
      // compute after the run in program order may wait for all of it.
      if (lane.runEvent < 0)
        lane.runEvent = program.events++;
      lane.pending.push_back({lane.runEvent, touched});
      continue;
    }
    for (Lane &lane : lanes) {
      closeRun(lane);
      // Compute: wait for the latest communication it conflicts with (a
      // stream runs in order, so the ones before it are done too).
      int last = -1;
      for (auto [k, waiting] : llvm::enumerate(lane.pending))
        if (conflicts(touched, waiting))
          last = static_cast<int>(k);
      if (last >= 0)
        join(lane, last, instruction.index);
      lane.computedSinceEntry = true;
    }
    out.push_back(instruction);
  }
  // The executor waits for every stream at the end of a program.
  for (Lane &lane : lanes) {
    closeRun(lane);
    for (const Pending &waiting : lane.pending)
      for (unsigned id : waiting.touched)
        buffers[id].lastUse = std::max(buffers[id].lastUse, end);
  }
  program.instructions = std::move(out);
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
    // (result, input) of every reshape, in program order.
    /// Results that may view their input's bytes: (result, input, byte
    /// offset), in program order.
    SmallVector<std::tuple<unsigned, unsigned, uint64_t>> views;
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
                         index, index, stage, onHost(op)});
      buffers.back().nvme = onNvme(op);
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
      if (buffers[it->second].host != onHost(op) || buffers[it->second].nvme != onNvme(op)) {
        BufferInfo here;
        here.host = onHost(op);
        here.nvme = onNvme(op);
        (op ? op->emitError() : module.emitError())
            << "'" << key << "' is in " << memoryName(buffers[it->second])
            << " memory in one function and in " << memoryName(here) << " memory in another";
        return failure();
      }
      bufferOf[value] = it->second;
      return it->second;
    };

    using Instruction = PlanInstruction;
    using Program = PlanProgram;
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
          Kind kind = state.getKind() == "grad" || state.getKind() == "host_grad" ||
                              state.getKind() == "norm_sq"
                          ? Kind::Gradient
                      : state.getKind() == "copy" ? Kind::ParameterCopy
                                                  : Kind::OptimizerState;
          std::string name = state.getName().str() + "." + state.getKind().str();
          FailureOr<unsigned> id = addShared(state, kind, "state:" + name, name, &op);
          if (failed(id))
            return signalPassFailure();
          if (state->hasAttr("zdist.step_local"))
            buffers[*id].stepLocal = true;
          continue;
        }
        if (auto constant = dyn_cast<zgraph::ConstantOp>(op)) {
          addBuffer(constant, Kind::Constant, "constant" + std::to_string(buffers.size()), &op, 0);
          continue;
        }
        if (isa<func::ReturnOp>(op))
          continue;
        // The kernel's attributes: the op's, less the compiler's marks
        // (pipeline stages, where the op runs: the buffers say that) and
        // the sizes of optional operand groups (the operands say that; a
        // product's optional ones are told apart by `residual`, set where
        // the last input is its addend, and by `activation`
        // "gelu_tanh_grad", where it is the GELU's input).
        SmallVector<NamedAttribute> kernelAttrs;
        for (NamedAttribute attr : op.getAttrs())
          if (!attr.getName().getValue().starts_with("zdist.") &&
              attr.getName() != "operandSegmentSizes" && attr.getName() != "zgraph.recompute")
            kernelAttrs.push_back(attr);
        if (auto product = dyn_cast<zgraph::MatMulOp>(op); product && product.getAddend())
          kernelAttrs.push_back(builder.getNamedAttr("residual", builder.getUnitAttr()));
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
        } else if (isa<zdist::OffloadOp, zdist::FetchOp>(op)) {
          params = builder.getDictionaryAttr({});
        } else if (auto store = dyn_cast<zdist::StoreOp>(op)) {
          // A copy into the named buffer another program of the stage reads.
          int64_t index = clock++;
          unsigned from = bufferOf.lookup(store.getInput());
          buffers[from].lastUse = std::max(buffers[from].lastUse, index);
          std::string key = store.getInto().str();
          // Into host memory where the store is placed there (a pipeline
          // stage's copy of an offloaded parameter).
          FailureOr<unsigned> to =
              addShared(store.getInput(), kindOfKey(key), key, key.substr(key.find(':') + 1),
                        onHost(store) ? store.getOperation() : nullptr);
          if (failed(to))
            return signalPassFailure();
          program.instructions.push_back(
              {&op, "copy", {from}, {*to}, builder.getDictionaryAttr({}), index});
          continue;
        } else if (isa<zdist::SwapInOp, zdist::SwapOutOp>(op)) {
          // Between the swap file and a host buffer of its size.
          int64_t index = clock++;
          bool in = isa<zdist::SwapInOp>(op);
          unsigned from = bufferOf.lookup(op.getOperand(0));
          buffers[from].lastUse = std::max(buffers[from].lastUse, index);
          unsigned to = in ? addBuffer(op.getResult(0), Kind::Activation,
                                       buffers[from].name + ".staged", &op, index)
                           : bufferOf.lookup(op.getOperand(1));
          auto isNvme = [&](unsigned id) { return buffers[id].nvme && !buffers[id].host; };
          auto isHost = [&](unsigned id) { return buffers[id].host && !buffers[id].nvme; };
          if (in ? !(isNvme(from) && isHost(to)) : !(isHost(from) && isNvme(to))) {
            op.emitError() << (in ? "swaps in '" : "swaps out '") << buffers[from].name
                           << "' from " << memoryName(buffers[from]) << " memory into '"
                           << buffers[to].name << "' in " << memoryName(buffers[to])
                           << " memory; swap_in reads NVMe into host memory and swap_out "
                              "writes host memory to NVMe";
            return signalPassFailure();
          }
          program.instructions.push_back({&op, in ? "swap_in" : "swap_out", {from}, {to},
                                          builder.getDictionaryAttr({}), index});
          continue;
        } else if (auto send = dyn_cast<zdist::SendOp>(op)) {
          int64_t index = clock++;
          unsigned from = bufferOf.lookup(send.getInput());
          buffers[from].lastUse = std::max(buffers[from].lastUse, index);
          program.instructions.push_back(
              {&op, "send", {from}, {}, peerParams(builder, send.getPeer()), index});
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
            to = addBuffer(recv.getResult(), Kind::Activation, nodeName(op.getLoc()), &op,
                           index);
          }
          program.instructions.push_back(
              {&op, "recv", {}, {to}, peerParams(builder, recv.getPeer()), index});
          continue;
        } else if (!isa_and_nonnull<zgraph::ZGraphDialect>(op.getDialect())) {
          op.emitError() << "'" << op.getName() << "' cannot be lowered to a kernel";
          return signalPassFailure();
        } else if (auto dropout = dyn_cast<zgraph::DropoutOp>(op);
                   dropout && (!dropout.getState() || !dropout.getSampleElements())) {
          op.emitError("a dropout runs in a training step, keyed by its zcc.dropout_state "
                       "(zcc-graph-autodiff); an inference plan drops it "
                       "(zcc-graph-strip-dropout)");
          return signalPassFailure();
        }
        // An assign whose value the op before it already wrote into the
        // state (below) moves nothing.
        if (auto assign = dyn_cast<zgraph::AssignOp>(op);
            assign && bufferOf.count(assign.getValue()) && bufferOf.count(assign.getTarget()) &&
            bufferOf.lookup(assign.getValue()) == bufferOf.lookup(assign.getTarget()))
          continue;
        int64_t index = clock++;
        Instruction instruction{&op, kernelName(&op), {}, {}, params, index};
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
        for (Value result : op.getResults()) {
          // A result that only overwrites a state is written there.
          if (Value state = resultIntoState(&op, result); state && bufferOf.count(state)) {
            bufferOf[result] = bufferOf.lookup(state);
            instruction.outputs.push_back(bufferOf.lookup(state));
            continue;
          }
          instruction.outputs.push_back(
              addBuffer(result, Kind::Activation, nodeName(op.getLoc()), &op, index));
        }
        if (isa<zgraph::ReshapeOp>(op))
          views.push_back({instruction.outputs.front(), instruction.inputs.front(), 0});
        if (auto slice = dyn_cast<zgraph::SliceOp>(op))
          if (std::optional<uint64_t> offset = contiguousSliceOffset(slice))
            views.push_back({instruction.outputs.front(), instruction.inputs.front(), *offset});
        // Host ops read and write host buffers; offload and fetch cross;
        // everything else stays on the device.
        bool hostOp = onHost(&op) && !isa<zdist::OffloadOp>(op);
        bool readsHost = isa<zdist::FetchOp>(op) || hostOp;
        bool writesHost = isa<zdist::OffloadOp>(op) || hostOp;
        for (const auto *ids : {&instruction.inputs, &instruction.outputs})
          for (unsigned id : *ids)
            if (buffers[id].nvme) {
              op.emitError() << "uses '" << buffers[id].name
                             << "', which is in the NVMe swap file; read it through "
                                "zdist.swap_in and write it through zdist.swap_out";
              return signalPassFailure();
            }
        for (unsigned id : instruction.inputs)
          if (buffers[id].host != readsHost) {
            op.emitError() << "reads '" << buffers[id].name << "' from "
                           << (buffers[id].host ? "host" : "device") << " memory but runs on the "
                           << (readsHost ? "host" : "device")
                           << "; copy it across with zdist.offload or zdist.fetch";
            return signalPassFailure();
          }
        for (unsigned id : instruction.outputs)
          if (buffers[id].host != writesHost) {
            op.emitError() << "writes '" << buffers[id].name << "' in "
                           << (buffers[id].host ? "host" : "device") << " memory but runs on the "
                           << (writesHost ? "host" : "device");
            return signalPassFailure();
          }
        program.instructions.push_back(std::move(instruction));
      }

      // Outputs: an activation becomes the output buffer itself; anything
      // else (an input, a parameter, a value returned twice) is copied.
      auto returnOp = cast<func::ReturnOp>(body.getTerminator());
      for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
        auto nameAttr = func.getResultAttrOfType<StringAttr>(index, "zgraph.name");
        std::string name = nameAttr ? nameAttr.str() : "output" + std::to_string(index);
        unsigned id = bufferOf.lookup(value);
        if (buffers[id].host) {
          returnOp.emitError("returns a value in host memory; fetch it to the device first");
          return signalPassFailure();
        }
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
            buffers.push_back({Kind::Output, buffers[id].type, name, nullptr, at, at, stage, false});
            shared[key] = copy;
            outputs.push_back({name, copy});
          } else {
            copy = it->second;
          }
          program.instructions.push_back(
              {returnOp, "copy", {id}, {copy}, builder.getDictionaryAttr({}), at});
          continue;
        }
        if (buffers[id].kind != Kind::Activation) {
          int64_t at = clock++;
          buffers[id].lastUse = std::max(buffers[id].lastUse, at);
          unsigned copy = buffers.size();
          buffers.push_back({Kind::Output, buffers[id].type, name, nullptr, at, at, stage, false});
          program.instructions.push_back(
              {returnOp, "copy", {id}, {copy}, builder.getDictionaryAttr({}), at});
          id = copy;
        } else {
          buffers[id].kind = Kind::Output;
          buffers[id].name = name;
        }
        outputs.push_back({name, id});
      }
    }

    llvm::DenseSet<unsigned> viewed;
    for (auto [result, input, offset] : views) {
      viewed.insert(result);
      viewed.insert(input);
    }
    for (Program &program : programs) {
      fuseCopyRefresh(program, buffers);
      fuseMultiTensor(program, buffers, viewed);
    }

    // A gradient that lives for one step: from the first instruction of
    // the step's timeline that touches it to the last.
    for (BufferInfo &info : buffers)
      if (info.stepLocal) {
        info.firstUse = std::numeric_limits<int64_t>::max();
        info.lastUse = 0;
      }
    for (const Program &program : programs)
      for (const Instruction &instruction : program.instructions)
        for (const auto *ids : {&instruction.inputs, &instruction.outputs})
          for (unsigned id : *ids)
            if (buffers[id].stepLocal) {
              buffers[id].firstUse = std::min(buffers[id].firstUse, instruction.index);
              buffers[id].lastUse = std::max(buffers[id].lastUse, instruction.index);
            }
    for (BufferInfo &info : buffers)
      if (info.stepLocal && info.firstUse > info.lastUse)
        info.firstUse = info.lastUse = 0;

    // overlap_comm: communication on its own stream, ordered by events; the
    // buffers it touches stay live until the compute stream has waited for
    // it.
    if (overlapComm(module))
      for (Program &program : programs)
        assignStreams(program, buffers);

    // A reshape's result is a view of its input when both are activations
    // of the same arena, and so is a slice's that is one contiguous range of
    // its input: one set of bytes, live as long as either is read. The
    // instruction then runs in place (a no-op).
    for (auto [result, input, offset] : views) {
      bool aliased = buffers[input].aliasOf >= 0;
      unsigned root = aliased ? buffers[input].aliasOf : input;
      const BufferInfo &from = buffers[root];
      BufferInfo &view = buffers[result];
      uint64_t start = (aliased ? buffers[input].aliasOffset : 0) + offset;
      // Every buffer starts on the arena's alignment, views too.
      if (view.kind != Kind::Activation || from.kind != Kind::Activation ||
          view.host != from.host || view.stage != from.stage ||
          start % static_cast<uint64_t>(alignment) != 0)
        continue;
      view.aliasOf = root;
      view.aliasOffset = start;
      buffers[root].lastUse = std::max(buffers[root].lastUse, view.lastUse);
    }

    // The memory plans: each pipeline stage's ranks hold only its device
    // buffers (one plan per stage, the device arena as large as the largest
    // stage's), and the host arena holds what the offload pass placed there.
    std::vector<PlannedBuffer> planned;
    for (const BufferInfo &info : buffers) {
      PlannedBuffer buffer;
      buffer.bytes = std::max<uint64_t>(1, info.type.getNumElements()) *
                     elementBytes(info.type.getElementType());
      buffer.persistent = info.kind != Kind::Activation && !info.stepLocal;
      buffer.firstUse = info.firstUse;
      buffer.lastUse = info.lastUse;
      planned.push_back(buffer);
    }
    auto planSubset = [&](llvm::function_ref<bool(const BufferInfo &)> belongs,
                          uint64_t subsetAlignment = 0) {
      std::vector<PlannedBuffer> mine;
      std::vector<size_t> ids;
      for (auto [id, info] : llvm::enumerate(buffers))
        if (belongs(info) && info.aliasOf < 0) {
          mine.push_back(planned[id]);
          ids.push_back(id);
        }
      MemoryPlan subsetPlan = planMemory(mine, subsetAlignment ? subsetAlignment : alignment);
      for (auto [i, id] : llvm::enumerate(ids))
        planned[id].offset = mine[i].offset;
      for (auto [id, info] : llvm::enumerate(buffers))
        if (belongs(info) && info.aliasOf >= 0)
          planned[id].offset = planned[info.aliasOf].offset + info.aliasOffset;
      return subsetPlan;
    };
    int64_t stages = pipeline ? static_cast<int64_t>(pipeline.getStages().size()) : 1;
    std::vector<MemoryPlan> stagePlans;
    for (int64_t s = 0; s < stages; ++s)
      stagePlans.push_back(
          planSubset([&](const BufferInfo &info) {
            return !info.host && !info.nvme && info.stage == s;
          }));
    // The plan-wide figures are the largest stage's.
    int64_t largest = 0;
    for (int64_t s = 0; s < stages; ++s)
      if (stagePlans[s].arenaBytes > stagePlans[largest].arenaBytes)
        largest = s;
    MemoryPlan memory = stagePlans[largest];
    // Host memory likewise: each stage's ranks hold only its offloaded
    // state (a host arena per stage); the plan-wide arena is the largest.
    std::vector<MemoryPlan> hostStagePlans;
    for (int64_t s = 0; s < stages; ++s)
      hostStagePlans.push_back(
          planSubset([&](const BufferInfo &info) { return info.host && info.stage == s; }));
    int64_t largestHost = 0;
    for (int64_t s = 0; s < stages; ++s)
      if (hostStagePlans[s].arenaBytes > hostStagePlans[largestHost].arenaBytes)
        largestHost = s;
    MemoryPlan hostMemory = hostStagePlans[largestHost];
    bool haveHost = llvm::any_of(buffers, [](const BufferInfo &info) { return info.host; });
    // And the swap file: each stage's ranks keep their own stage's state.
    std::vector<MemoryPlan> nvmeStagePlans;
    for (int64_t s = 0; s < stages; ++s)
      nvmeStagePlans.push_back(planSubset(
          [&](const BufferInfo &info) { return info.nvme && info.stage == s; }, kNvmeAlignment));
    int64_t largestNvme = 0;
    for (int64_t s = 0; s < stages; ++s)
      if (nvmeStagePlans[s].arenaBytes > nvmeStagePlans[largestNvme].arenaBytes)
        largestNvme = s;
    bool haveNvme = llvm::any_of(buffers, [](const BufferInfo &info) { return info.nvme; });

    // The plan module: arena, programs, and the bindings as attributes.
    builder.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    auto arena = builder.create<zplan::ArenaOp>(loc, "device", zplan::MemorySpace::Device,
                                                int64_t(memory.arenaBytes), int64_t(alignment));
    Block &deviceBody = arena.getBodyRegion().emplaceBlock();
    Block *hostBody = nullptr;
    if (haveHost) {
      builder.setInsertionPointToEnd(module.getBody());
      auto hostArena = builder.create<zplan::ArenaOp>(loc, "host", zplan::MemorySpace::Host,
                                                      int64_t(hostMemory.arenaBytes),
                                                      int64_t(alignment));
      hostBody = &hostArena.getBodyRegion().emplaceBlock();
    }
    Block *nvmeBody = nullptr;
    if (haveNvme) {
      builder.setInsertionPointToEnd(module.getBody());
      auto nvmeArena = builder.create<zplan::ArenaOp>(
          loc, "nvme", zplan::MemorySpace::Nvme,
          int64_t(nvmeStagePlans[largestNvme].arenaBytes), int64_t(kNvmeAlignment));
      nvmeBody = &nvmeArena.getBodyRegion().emplaceBlock();
    }
    std::vector<std::map<std::string, uint64_t>> stageCategoryBytes(stages),
        hostStageCategoryBytes(stages), nvmeStageCategoryBytes(stages);
    auto arenaOf = [&](const BufferInfo &info) -> StringRef {
      return info.nvme ? "nvme" : info.host ? "host" : "device";
    };
    auto symbol = [&](unsigned id) {
      return SymbolRefAttr::get(builder.getStringAttr(arenaOf(buffers[id])),
                                {FlatSymbolRefAttr::get(builder.getContext(),
                                                        "b" + std::to_string(id))});
    };
    for (auto [id, info] : llvm::enumerate(buffers)) {
      builder.setInsertionPointToEnd(info.nvme ? nvmeBody : info.host ? hostBody : &deviceBody);
      auto buffer = builder.create<zplan::BufferOp>(
          info.definingOp ? info.definingOp->getLoc() : loc, "b" + std::to_string(id),
          int64_t(planned[id].offset), int64_t(planned[id].bytes));
      buffer->setAttr("kind", builder.getStringAttr(kindName(info.kind)));
      buffer->setAttr("type", TypeAttr::get(info.type));
      buffer->setAttr("name", builder.getStringAttr(info.name));
      if (pipeline)
        buffer->setAttr("stage", builder.getI64IntegerAttr(info.stage));
      if (info.stepLocal)
        buffer->setAttr("step_local", builder.getUnitAttr());
      if (auto param = dyn_cast_or_null<zgraph::ParamOp>(info.definingOp)) {
        if (auto source = param->getAttrOfType<DictionaryAttr>("source"))
          buffer->setAttr("weight", source);
        buffer->setAttr("random_init", randomInit(builder, param));
        if (auto shards = param->getAttrOfType<IntegerAttr>("zdist.shards"))
          buffer->setAttr("shards", shards);
      }
      if (auto constant = dyn_cast_or_null<zgraph::ConstantOp>(info.definingOp))
        buffer->setAttr("value", constant.getValue());
      auto &categories = (info.nvme   ? nvmeStageCategoryBytes
                          : info.host ? hostStageCategoryBytes
                                      : stageCategoryBytes)[info.stage];
      if (info.kind != Kind::Activation)
        categories[categoryName(info.kind).str()] += planned[id].bytes;
      // Also counted in "gradients"; their bytes are the activations'.
      if (info.stepLocal)
        categories["step_gradients"] += planned[id].bytes;
    }
    for (int64_t s = 0; s < stages; ++s) {
      stageCategoryBytes[s]["activations"] =
          stagePlans[s].arenaBytes - stagePlans[s].persistentBytes;
      if (hostStagePlans[s].arenaBytes > 0)
        hostStageCategoryBytes[s]["activations"] =
            hostStagePlans[s].arenaBytes - hostStagePlans[s].persistentBytes;
    }
    std::map<std::string, uint64_t> &categoryBytes = stageCategoryBytes[largest];
    std::map<std::string, uint64_t> &hostCategoryBytes = hostStageCategoryBytes[largestHost];
    std::map<std::string, uint64_t> &nvmeCategoryBytes = nvmeStageCategoryBytes[largestNvme];

    for (const Program &program : programs) {
      builder.setInsertionPointToEnd(module.getBody());
      auto programOp = builder.create<zplan::ProgramOp>(loc, program.name);
      if (pipeline)
        programOp->setAttr("stage", builder.getI64IntegerAttr(program.stage));
      builder.setInsertionPointToStart(&programOp.getBodyRegion().emplaceBlock());
      for (int event = 0; event < program.events; ++event)
        builder.create<zplan::EventOp>(loc, "e" + std::to_string(event));
      for (const Instruction &instruction : program.instructions) {
        auto event = FlatSymbolRefAttr::get(builder.getContext(),
                                            "e" + std::to_string(instruction.event));
        if (instruction.sync == SyncKind::Record) {
          builder.create<zplan::RecordOp>(loc, event, builder.getI64IntegerAttr(instruction.stream));
          continue;
        }
        if (instruction.sync == SyncKind::Wait) {
          builder.create<zplan::WaitOp>(loc, event, builder.getI64IntegerAttr(instruction.stream));
          continue;
        }
        SmallVector<Attribute> ins, outs;
        for (unsigned id : instruction.inputs)
          ins.push_back(symbol(id));
        for (unsigned id : instruction.outputs)
          outs.push_back(symbol(id));
        builder.create<zplan::KernelOp>(instruction.op->getLoc(), instruction.kernel,
                                        builder.getArrayAttr(ins), builder.getArrayAttr(outs),
                                        instruction.stream,
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
    if (haveHost) {
      SmallVector<NamedAttribute> hostAttrs;
      for (const auto &[category, bytes] : hostCategoryBytes)
        hostAttrs.push_back(builder.getNamedAttr(category, builder.getI64IntegerAttr(bytes)));
      module->setAttr("zplan.host_memory", builder.getDictionaryAttr(hostAttrs));
    }
    if (haveNvme) {
      SmallVector<NamedAttribute> nvmeAttrs;
      for (const auto &[category, bytes] : nvmeCategoryBytes)
        nvmeAttrs.push_back(builder.getNamedAttr(category, builder.getI64IntegerAttr(bytes)));
      module->setAttr("zplan.nvme_memory", builder.getDictionaryAttr(nvmeAttrs));
    }
    if (pipeline) {
      // The schedule and each stage's arena, as the plan's pipeline.
      SmallVector<Attribute> stageAttrs;
      // Under the interleaved schedule `buffers` counts each chunk's slots
      // (chunk c on stage c mod stages); a stage holds its chunks' slots.
      ArrayRef<int64_t> chunkBuffers = pipeline.getBuffers();
      for (int64_t s = 0; s < stages; ++s) {
        int64_t slots = 0;
        for (size_t c = s; c < chunkBuffers.size(); c += stages)
          slots += chunkBuffers[c];
        auto dictionary = [&](const std::map<std::string, uint64_t> &categories) {
          SmallVector<NamedAttribute> bytes;
          for (const auto &[category, value] : categories)
            bytes.push_back(builder.getNamedAttr(category, builder.getI64IntegerAttr(value)));
          return builder.getDictionaryAttr(bytes);
        };
        stageAttrs.push_back(builder.getDictionaryAttr({
            builder.getNamedAttr("arena_bytes",
                                 builder.getI64IntegerAttr(stagePlans[s].arenaBytes)),
            builder.getNamedAttr("buffers", builder.getI64IntegerAttr(slots)),
            builder.getNamedAttr("host_arena_bytes",
                                 builder.getI64IntegerAttr(hostStagePlans[s].arenaBytes)),
            builder.getNamedAttr("host_memory", dictionary(hostStageCategoryBytes[s])),
            builder.getNamedAttr("nvme_bytes", builder.getI64IntegerAttr(
                                                   haveNvme ? nvmeStagePlans[s].arenaBytes : 0)),
            builder.getNamedAttr("nvme_memory", dictionary(nvmeStageCategoryBytes[s])),
            builder.getNamedAttr("instructions", pipeline.getStages()[s]),
            builder.getNamedAttr("memory", dictionary(stageCategoryBytes[s])),
        }));
      }
      module->setAttr("zplan.pipeline",
                      builder.getDictionaryAttr({
                          builder.getNamedAttr("schedule", pipeline.getScheduleAttr()),
                          builder.getNamedAttr("micro_batches", pipeline.getMicroBatchesAttr()),
                          builder.getNamedAttr("bubble_fraction",
                                               pipeline.getBubbleFractionAttr()),
                          builder.getNamedAttr("stages", builder.getArrayAttr(stageAttrs)),
                          builder.getNamedAttr("chunk_buffers",
                                               builder.getDenseI64ArrayAttr(chunkBuffers)),
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
