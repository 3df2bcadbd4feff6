//===- Offload.cpp - CPU offload of optimizer state and parameters --------===//
//
// ZeRO-Offload and ZeRO-Infinity's CPU tier, decided at compile time:
//   offload_optimizer  every optimizer update runs on the host: Adam's
//                      moments (SGD's momentum) and an fp32 master copy of
//                      what the rank updates live in host memory; the
//                      gradient is offloaded after the accumulation
//                      boundary, the host updates the master, and the
//                      updated master is fetched back into the device
//                      parameter (or all-gathered into it, stages 1 and 2);
//   offload_param      (stage 3) the partitioned parameter shards live in
//                      host memory; each gather fetches them to the device
//                      first, and the host optimizer updates them in place.
//                      With 16-bit compute, the host also keeps each
//                      shard's 16-bit copy (`zgraph.state kind = "copy"`),
//                      refreshed by @init and after each update, as
//                      DeepSpeed's CPU Adam writes its fp16 params: the
//                      micro-steps fetch the copy, so they run no host
//                      kernel (no cast of the whole model on the host twice
//                      a micro-step, no device synchronisation for one) and
//                      move half the bytes.
// Placement is then one forward walk over each function: an op runs where
// its in-place targets live, otherwise on the host only when every tensor
// it reads is there; an operand on the other side is copied across right
// before the op (`zdist.offload`, `zdist.fetch`): a state or parameter once
// per op, never reused across ops, since it is mutable; any other value
// (the optimizer's scalars, an argument of the function) once per function,
// by its first reader on the other side, and read from there by the rest.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/Transforms/ComputeCopies.h"
#include "dialects/Dist/Transforms/ConfigValues.h"
#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <cstdio>

namespace zcc::zdist {
#define GEN_PASS_DEF_OFFLOADPASS
#define GEN_PASS_DEF_OFFLOADGRADIENTSPASS
#define GEN_PASS_DEF_OFFLOADCHECKPOINTSPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {
namespace {

constexpr StringLiteral kMemory = "zdist.memory";

bool onHost(Operation *op) {
  auto memory = op ? op->getAttrOfType<StringAttr>(kMemory) : StringAttr();
  return memory && memory.getValue() == "host";
}

void markHost(Operation *op) { op->setAttr(kMemory, StringAttr::get(op->getContext(), "host")); }

bool onHost(Value value) { return onHost(value.getDefiningOp()) || value.getDefiningOp<OffloadOp>(); }

/// `value` as printf's %g writes it ("0.5").
std::string shortNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

StringRef offloadDevice(DictionaryAttr zero, StringRef section) {
  auto offload = zero ? zero.getAs<DictionaryAttr>(section) : DictionaryAttr();
  auto device = offload ? offload.getAs<StringAttr>("device") : StringAttr();
  return device ? device.getValue() : "none";
}

/// The name of the host value `value` stands for, when it is one a function
/// reads as a whole: "param:NAME" or "state:NAME.KIND"; empty otherwise.
std::string hostValueKey(Value value) {
  if (auto param = value.getDefiningOp<zgraph::ParamOp>())
    return ("param:" + param.getName()).str();
  if (auto state = value.getDefiningOp<zgraph::StateOp>())
    return ("state:" + state.getName() + "." + state.getKind()).str();
  return "";
}

class Offloader {
public:
  Offloader(ModuleOp module, bool optimizer, bool params, int64_t persistenceThreshold,
            Stage3Schedule schedule, double ratio)
      : module(module), builder(module.getContext()), optimizer(optimizer), params(params),
        persistenceThreshold(persistenceThreshold), schedule(schedule), ratio(ratio) {}

  LogicalResult run();

private:
  void chooseHostParams();
  LogicalResult moveOptimizer(func::FuncOp update);
  LogicalResult place(func::FuncOp func);
  void scheduleFetches(func::FuncOp func);

  ModuleOp module;
  OpBuilder builder;
  bool optimizer, params;
  int64_t persistenceThreshold;
  Stage3Schedule schedule;
  /// offload_optimizer.ratio: the share of the optimizer's elements whose
  /// updates move to the host (the rest stay on the device).
  double ratio;
  /// Parameters whose storage is host memory (offload_param).
  llvm::StringSet<> hostParams;
  /// Training states in host memory, by "name.kind".
  llvm::StringSet<> hostStates;
};

LogicalResult Offloader::run() {
  auto update = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (params)
    chooseHostParams();
  if (optimizer && update && failed(moveOptimizer(update)))
    return failure();
  // A host parameter the micro-steps read only through casts to one 16-bit
  // type keeps that copy in host memory. The copies are derived state:
  // checkpoints do not hold them, and @init rebuilds them.
  if (params && update)
    for (auto &name : keepComputeCopies(module, [&](zgraph::ParamOp param) {
           return hostParams.contains(param.getName());
         }))
      hostStates.insert((name.getKey() + ".copy").str());
  module.walk([&](Operation *op) {
    if (auto param = dyn_cast<zgraph::ParamOp>(op); param && hostParams.contains(param.getName()))
      markHost(param);
    if (auto state = dyn_cast<zgraph::StateOp>(op);
        state && hostStates.contains((state.getName() + "." + state.getKind()).str()))
      markHost(state);
  });
  for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
    if (failed(place(func)))
      return failure();
    scheduleFetches(func);
  }
  return success();
}

/// The fetches of host values that `func` only reads (offload_param's
/// parameters and their 16-bit copies in a micro-step) and that feed the
/// device's own ops (not an all-gather: ZeRO-3 scheduled those, and each
/// fetch sits right before its gather), scheduled the way ZeRO-3 schedules
/// its gathers on more ranks:
///  - reuse: a value fetched again while at most stage3_max_reuse_distance
///    elements of other fetched values were used in between keeps its first
///    fetch (the backward's recompute and its product read one copy);
///  - ahead (overlap_comm): each fetch is issued before the previous one's
///    first use, when both fit stage3_max_live_parameters with what is
///    resident then, so the copy engine moves the next weight while the
///    compute stream uses this one.
void Offloader::scheduleFetches(func::FuncOp func) {
  Block &body = func.getBody().front();
  llvm::StringSet<> written;
  for (Operation &op : body)
    for (Value target : inPlaceTargets(&op))
      if (std::string key = hostValueKey(target); !key.empty())
        written.insert(key);
  struct Fetch {
    FetchOp op;
    std::string key;
    int64_t elements;
    /// Its uses' first and last positions in the block.
    int64_t first = 0, last = 0;
  };
  SmallVector<Fetch> fetches;
  for (auto fetch : body.getOps<FetchOp>()) {
    std::string key = hostValueKey(fetch.getInput());
    bool feedsCompute = llvm::all_of(fetch->getUsers(), [](Operation *user) {
      return isa<zgraph::ZGraphDialect>(user->getDialect());
    });
    if (key.empty() || written.contains(key) || !feedsCompute || fetch->use_empty())
      continue;
    fetches.push_back({fetch, key, cast<RankedTensorType>(fetch.getType()).getNumElements()});
  }
  if (fetches.empty())
    return;
  llvm::DenseMap<Operation *, int64_t> position;
  int64_t index = 0;
  for (Operation &op : body)
    position[&op] = index++;
  auto firstUse = [&](FetchOp fetch) {
    Operation *first = nullptr;
    for (Operation *user : fetch->getUsers())
      if (!first || position.lookup(user) < position.lookup(first))
        first = user;
    return first;
  };
  for (Fetch &fetch : fetches) {
    fetch.first = position.lookup(firstUse(fetch.op));
    for (Operation *user : fetch.op->getUsers())
      fetch.last = std::max(fetch.last, position.lookup(user));
  }
  // Elements of other values fetched for uses strictly between two points.
  auto distance = [&](StringRef self, int64_t from, int64_t to) {
    llvm::StringSet<> seen;
    int64_t elements = 0;
    for (const Fetch &other : fetches)
      if (other.key != self && other.first > from && other.first < to &&
          seen.insert(other.key).second)
        elements += other.elements;
    return elements;
  };

  // Segments: one fetch each, serving the uses of the fetches it absorbed.
  struct Segment {
    FetchOp op;
    int64_t elements, first, last;
  };
  SmallVector<Segment> segments;
  llvm::StringMap<unsigned> open;
  SmallVector<FetchOp> absorbed;
  llvm::stable_sort(fetches, [](const Fetch &a, const Fetch &b) { return a.first < b.first; });
  for (Fetch &fetch : fetches) {
    auto it = open.find(fetch.key);
    if (it != open.end()) {
      Segment &segment = segments[it->second];
      if (segment.op.getType() == fetch.op.getType() &&
          distance(fetch.key, segment.last, fetch.first) <= schedule.maxReuseDistance) {
        segment.last = std::max(segment.last, fetch.last);
        fetch.op.getResult().replaceAllUsesWith(segment.op.getResult());
        absorbed.push_back(fetch.op);
        continue;
      }
    }
    open[fetch.key] = segments.size();
    segments.push_back({fetch.op, fetch.elements, fetch.first, fetch.last});
  }
  for (FetchOp fetch : absorbed) {
    Operation *source = fetch.getInput().getDefiningOp();
    fetch->erase();
    if (source && source->use_empty())
      source->erase();
  }
  if (!schedule.gatherAhead)
    return;
  for (size_t k = 1; k < segments.size(); ++k) {
    Segment previous = segments[k - 1], segment = segments[k];
    int64_t resident = 0;
    for (size_t j = 0; j + 1 < k; ++j)
      if (segments[j].last >= previous.first)
        resident += segments[j].elements;
    if (resident + previous.elements + segment.elements > schedule.maxLiveParameters)
      continue;
    Operation *before = firstUse(previous.op);
    // The host value it reads has no operands: it moves along.
    Operation *source = segment.op.getInput().getDefiningOp();
    if (source && source->getBlock() == &body && !source->isBeforeInBlock(before)) {
      if (!source->hasOneUse())
        continue;
      source->moveBefore(before);
    }
    segment.op->moveBefore(before);
  }
}

/// offload_param: the parameters ZeRO-3 partitioned (`zdist.shards`), or on
/// one rank every parameter above stage3_param_persistence_threshold
/// elements; small ones stay on the device, as in DeepSpeed.
void Offloader::chooseHostParams() {
  module.walk([&](zgraph::ParamOp param) {
    bool partitioned = param->hasAttr("zdist.shards");
    bool alone = !llvm::any_of(module.getOps<MeshOp>(), [](MeshOp mesh) {
      return mesh.getNumDevices() > 1;
    });
    if (partitioned || (alone && param.getType().getNumElements() > persistenceThreshold))
      hostParams.insert(param.getName());
  });
}

/// Every update of @optimizer_step moves to the host with its state. One
/// that updates a device parameter (stage 0/3 without offload_param, or a
/// parameter ZeRO left whole) gets a host master copy, set from the
/// parameter by @init and fetched back into it after each update.
LogicalResult Offloader::moveOptimizer(func::FuncOp update) {
  // Lamb has no host kernels yet (DeepSpeed has no CPU Lamb either); the
  // config import refuses it with offload_optimizer first.
  for (Operation &op : update.getBody().front())
    if (isa<zgraph::LambMomentsOp, zgraph::LambStepOp>(op))
      return op.emitError("Lamb does not run on the host yet: remove offload_optimizer");
  auto isUpdate = [](Operation &op) {
    return isa<zgraph::AdamWOp, zgraph::AdagradOp, zgraph::LionOp, zgraph::SgdOp>(op);
  };
  auto elementsOf = [](Operation &op) {
    return cast<RankedTensorType>(op.getOperand(0).getType()).getNumElements();
  };
  // A ratio below 1 (ZeRO-Offload++'s partial offload) keeps the updates
  // of the first parameters, in update order, on the device, up to
  // about 1 - ratio of the elements, as DeepSpeed keeps its first
  // sub-groups.
  int64_t total = 0;
  for (Operation &op : update.getBody().front())
    if (isUpdate(op))
      total += elementsOf(op);
  double onDevice = (1.0 - ratio) * static_cast<double>(total);
  int64_t seen = 0;
  for (Operation &op : llvm::make_early_inc_range(update.getBody().front())) {
    if (!isUpdate(op))
      continue;
    int64_t before = seen;
    seen += elementsOf(op);
    // On the device when most of its elements fall in the device's share.
    if (static_cast<double>(before + seen) / 2.0 < onDevice)
      continue;
    SmallVector<Value> targets = inPlaceTargets(&op);
    for (Value state : ArrayRef<Value>(targets).drop_front()) {
      auto stateOp = state.getDefiningOp<zgraph::StateOp>();
      if (!stateOp)
        return op.emitError("the optimizer's state must be zgraph.state ops to be offloaded");
      hostStates.insert((stateOp.getName() + "." + stateOp.getKind()).str());
    }
    Value target = op.getOperand(0);
    if (auto master = target.getDefiningOp<zgraph::StateOp>()) {
      hostStates.insert((master.getName() + "." + master.getKind()).str());
      continue;
    }
    auto param = target.getDefiningOp<zgraph::ParamOp>();
    if (!param)
      return op.emitError("the optimizer must update a zgraph.param or its master state");
    if (hostParams.contains(param.getName()))
      continue;
    Location loc = op.getLoc();
    builder.setInsertionPoint(&op);
    auto master = builder.create<zgraph::StateOp>(loc, param.getType(), param.getNameAttr(),
                                                  builder.getStringAttr("master"));
    op.setOperand(0, master);
    hostStates.insert((param.getName() + ".master").str());
    builder.setInsertionPointAfter(&op);
    builder.create<zgraph::AssignOp>(loc, param, master);

    func::FuncOp init = getOrCreateInit(module, update);
    builder.setInsertionPoint(init.getBody().front().getTerminator());
    auto whole = cast<zgraph::ParamOp>(builder.clone(*param));
    auto initMaster = builder.create<zgraph::StateOp>(loc, param.getType(), param.getNameAttr(),
                                                      builder.getStringAttr("master"));
    builder.create<zgraph::AssignOp>(loc, initMaster, whole);
  }
  return success();
}

/// Decides where each op of `func` runs and copies operands across.
LogicalResult Offloader::place(func::FuncOp func) {
  // Copies of values nothing writes: fetched ones ([0]) and offloaded ones
  // ([1]).
  llvm::DenseMap<Value, Value> immutableCopies[2];
  auto isMutable = [](Value value) {
    return isa_and_nonnull<zgraph::StateOp, zgraph::ParamOp>(value.getDefiningOp());
  };
  for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
    if (isa<zgraph::ParamOp, zgraph::StateOp, OffloadOp, FetchOp>(op))
      continue;
    bool host = false;
    SmallVector<Value> targets = inPlaceTargets(&op);
    if (!targets.empty()) {
      host = onHost(targets.front());
      for (Value target : targets)
        if (onHost(target) != host)
          return op.emitError("updates values in both host and device memory; offload all of "
                              "its state or none (offload_param needs offload_optimizer)");
    } else if (isa_and_nonnull<zgraph::ZGraphDialect>(op.getDialect()) && op.getNumOperands()) {
      host = llvm::all_of(op.getOperands(), [](Value operand) { return onHost(operand); });
    }
    builder.setInsertionPoint(&op);
    llvm::DenseMap<Value, Value> copied;
    for (OpOperand &operand : op.getOpOperands()) {
      Value value = operand.get();
      if (!isa<RankedTensorType>(value.getType()) || onHost(value) == host)
        continue;
      Value &copy = isMutable(value) ? copied[value] : immutableCopies[host][value];
      if (!copy)
        copy = host ? Value(builder.create<OffloadOp>(op.getLoc(), value))
                    : Value(builder.create<FetchOp>(op.getLoc(), value));
      operand.set(copy);
    }
    if (host)
      markHost(&op);
  }
  return success();
}

struct OffloadPass : impl::OffloadPassBase<OffloadPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
    auto zero = config ? config.getAs<DictionaryAttr>("zero_optimization") : DictionaryAttr();
    // "nvme" places the optimizer (the parameters) in host memory as "cpu"
    // does; then zcc-dist-nvme-swap moves its state (the parameters the
    // micro-steps fetch) into the swap file.
    StringRef optimizerDevice = offloadDevice(zero, "offload_optimizer");
    StringRef paramDevice = offloadDevice(zero, "offload_param");
    bool optimizer = optimizerDevice == "cpu" || optimizerDevice == "nvme";
    bool params = paramDevice == "cpu" || paramDevice == "nvme";
    if (optimizerDevice == "none" && paramDevice == "none")
      return;
    if (!params && paramDevice != "none") {
      module.emitError() << "zero_optimization.offload_param.device '" << paramDevice
                         << "' is not supported: parameters offload to \"cpu\" or \"nvme\"";
      return signalPassFailure();
    }
    if (!optimizer && optimizerDevice != "none") {
      module.emitError() << "zero_optimization.offload_optimizer.device '" << optimizerDevice
                         << "' is not supported: the optimizer offloads to \"cpu\" or \"nvme\"";
      return signalPassFailure();
    }
    bool training = static_cast<bool>(module.lookupSymbol<func::FuncOp>("optimizer_step"));
    if (params && training && !optimizer) {
      module.emitError("zero_optimization.offload_param needs offload_optimizer.device \"cpu\" "
                       "(or \"nvme\") too: the host updates the offloaded shards in place");
      return signalPassFailure();
    }
    int64_t threshold = configInt(zero, "stage3_param_persistence_threshold", 100000);
    auto offloadOptimizer =
        zero ? zero.getAs<DictionaryAttr>("offload_optimizer") : DictionaryAttr();
    auto ratioAttr =
        offloadOptimizer ? offloadOptimizer.getAs<FloatAttr>("ratio") : FloatAttr();
    double ratio = ratioAttr ? ratioAttr.getValueAsDouble() : 1.0;
    if (ratio < 1.0 && params) {
      module.emitError() << "zero_optimization.offload_optimizer.ratio " << shortNumber(ratio)
                         << " keeps part of the optimizer on the device, but offload_param "
                            "keeps every partitioned parameter in host memory, where only "
                            "the host can update it; set ratio to 1 or remove offload_param";
      return signalPassFailure();
    }
    if (failed(Offloader(module, optimizer, params, threshold, readStage3Schedule(zero), ratio)
                   .run()))
      signalPassFailure();
  }
};

/// Whether `value` is the result of `zgraph.state name kind = "grad"` that
/// lives for one step.
bool isStepGradient(Value value, StringRef name) {
  auto state = value.getDefiningOp<zgraph::StateOp>();
  return state && state.getKind() == "grad" && state.getName() == name &&
         state->hasAttr("zdist.step_local");
}

/// Streams the one-step gradients of host updates to host memory during the
/// backward pass (see OffloadGradientsPass in Passes.td).
class GradientStreamer {
public:
  explicit GradientStreamer(ModuleOp module) : module(module), builder(module.getContext()) {}

  void run();

private:
  /// The gradients that qualify, by name.
  llvm::SetVector<StringRef> chooseGradients(func::FuncOp microStep, func::FuncOp norm,
                                             func::FuncOp update);
  void eraseUnusedGradients(func::FuncOp func);

  /// The 16-bit element type the host gradients of a mixed-precision
  /// config travel in (f16 or bf16), or null for fp32 training.
  Type sixteenBitType();
  /// The streamed gradients every host reader of which is an adamw that
  /// takes it as its gradient: they travel in 16 bits.
  llvm::StringSet<> sixteenBitGradients(func::FuncOp update);

  ModuleOp module;
  OpBuilder builder;
  llvm::StringSet<> streamed;
};

Type GradientStreamer::sixteenBitType() {
  std::string precision = zgraph::configPrecision(module);
  if (precision == "fp16")
    return builder.getF16Type();
  if (precision == "bf16")
    return builder.getBF16Type();
  return {};
}

llvm::StringSet<> GradientStreamer::sixteenBitGradients(func::FuncOp update) {
  llvm::StringSet<> names;
  if (!sixteenBitType())
    return names;
  llvm::StringSet<> refused;
  for (auto offload : update.getOps<OffloadOp>()) {
    auto state = offload.getOperand().getDefiningOp<zgraph::StateOp>();
    if (!state || state.getKind() != "grad" || !streamed.contains(state.getName()))
      continue;
    bool ok = cast<RankedTensorType>(state.getType()).getElementType().isF32() &&
              llvm::all_of(offload->getUses(), [](OpOperand &use) {
                auto adamw = dyn_cast<zgraph::AdamWOp>(use.getOwner());
                return adamw && use.get() == adamw.getGrad() &&
                       use.getOperandNumber() == 1;
              });
    (ok ? names : refused).insert(state.getName());
  }
  for (const auto &name : refused)
    names.erase(name.getKey());
  return names;
}

llvm::SetVector<StringRef> GradientStreamer::chooseGradients(func::FuncOp microStep,
                                                            func::FuncOp norm,
                                                            func::FuncOp update) {
  // A gradient qualifies when @micro_step only writes it in place,
  // @optimizer_step only offloads it to host ops, @grad_norm only sums its
  // squares, and no other function touches it.
  llvm::SetVector<StringRef> candidates;
  llvm::StringSet<> refused;
  for (auto func : module.getOps<func::FuncOp>())
    func.walk([&](zgraph::StateOp state) {
      if (state.getKind() != "grad")
        return;
      StringRef name = state.getName();
      bool ok = state->hasAttr("zdist.step_local") && !onHost(state.getOperation());
      for (OpOperand &use : state->getUses()) {
        Operation *user = use.getOwner();
        if (func == microStep) {
          SmallVector<Value> targets = inPlaceTargets(user);
          ok &= llvm::is_contained(targets, state.getResult()) &&
                !isa<zgraph::AdamWOp, zgraph::AdagradOp, zgraph::LambMomentsOp,
                     zgraph::LambStepOp, zgraph::LionOp, zgraph::SgdOp>(user);
        } else if (func == update) {
          auto offload = dyn_cast<OffloadOp>(user);
          ok &= offload && llvm::all_of(offload->getUsers(), [](Operation *reader) {
                  return onHost(reader);
                });
        } else if (func == norm) {
          ok &= isa<zgraph::SumSquaresOp>(user) && state->hasOneUse();
        } else {
          ok = false;
        }
      }
      if (ok && func == microStep && !state->use_empty())
        candidates.insert(name);
      if (!ok)
        refused.insert(name);
    });
  llvm::SetVector<StringRef> chosen;
  for (StringRef name : candidates)
    if (!refused.contains(name))
      chosen.insert(name);
  return chosen;
}

void GradientStreamer::run() {
  auto microStep = module.lookupSymbol<func::FuncOp>("micro_step");
  auto norm = module.lookupSymbol<func::FuncOp>("grad_norm");
  auto update = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (!microStep || !update)
    return;
  llvm::SetVector<StringRef> chosen = chooseGradients(microStep, norm, update);
  if (chosen.empty())
    return;
  for (StringRef name : chosen)
    streamed.insert(name);
  llvm::StringSet<> halves = sixteenBitGradients(update);
  Type half = sixteenBitType();
  auto hostType = [&](StringRef name, Type type) -> Type {
    if (!halves.contains(name))
      return type;
    return RankedTensorType::get(cast<RankedTensorType>(type).getShape(), half);
  };
  MLIRContext *context = module.getContext();
  auto stepState = [&](Location loc, StringRef name, StringRef kind, Type type) {
    auto state = builder.create<zgraph::StateOp>(loc, type, builder.getStringAttr(name),
                                                 builder.getStringAttr(kind));
    state->setAttr("zdist.step_local", UnitAttr::get(context));
    return state;
  };
  auto hostState = [&](Location loc, StringRef name, Type type) {
    auto state = stepState(loc, name, "host_grad", type);
    markHost(state);
    return state;
  };
  // Each sum of squares of @grad_norm over streamed gradients gets a
  // device accumulator of their squares, which @micro_step zeroes first and
  // adds each gradient's sum into before it is copied out.
  auto scalar = RankedTensorType::get({}, builder.getF64Type());
  llvm::StringMap<unsigned> sumOf;
  SmallVector<zgraph::SumSquaresOp> sums;
  if (norm)
    for (auto sum : norm.getOps<zgraph::SumSquaresOp>()) {
      bool any = false;
      for (Value input : sum.getInputs())
        if (auto state = input.getDefiningOp<zgraph::StateOp>();
            state && state.getKind() == "grad" && streamed.contains(state.getName())) {
          sumOf[state.getName()] = sums.size();
          any = true;
        }
      if (any)
        sums.push_back(sum);
    }
  auto accumulatorName = [](unsigned index) {
    return "zcc.streamed_gradients." + std::to_string(index);
  };
  SmallVector<Value> accumulators;
  builder.setInsertionPointToStart(&microStep.getBody().front());
  for (unsigned index = 0; index < sums.size(); ++index) {
    Location loc = sums[index].getLoc();
    auto accumulator = stepState(loc, accumulatorName(index), "norm_sq", scalar);
    builder.create<zgraph::FillOp>(loc, accumulator.getResult(), builder.getF64FloatAttr(0));
    accumulators.push_back(accumulator.getResult());
  }

  // @micro_step: right after each gradient's last write, its sum of
  // squares on the device and one copy to the host.
  llvm::StringSet<> bypassed;
  llvm::StringMap<Operation *> lastWrite;
  for (Operation &op : microStep.getBody().front())
    for (Value target : inPlaceTargets(&op))
      if (auto state = target.getDefiningOp<zgraph::StateOp>();
          state && state.getKind() == "grad" && streamed.contains(state.getName()))
        lastWrite[state.getName()] = &op;
  for (StringRef name : chosen) {
    Operation *write = lastWrite.lookup(name);
    SmallVector<Value> targets = inPlaceTargets(write);
    Value gradient = *llvm::find_if(targets, [&](Value target) {
      return isStepGradient(target, name);
    });
    builder.setInsertionPointAfter(write);
    Location loc = write->getLoc();
    // In a mixed-precision step the gradient crosses in 16 bits (half the
    // bytes, as DeepSpeed's offload moves the 16-bit gradients), and the
    // norm is the 16-bit gradient's, so an fp16 overflow of the cast shows
    // in it and the loss scaler skips the step.
    // A gradient last assigned from a value already in those 16 bits (a
    // layer norm's, a bias's: the assignment, or a cast before it, widens
    // it) crosses as that value: the round trip through f32 is exact.
    Value crossing = gradient;
    if (Type type = hostType(name, gradient.getType()); type != gradient.getType()) {
      auto assign = dyn_cast<zgraph::AssignOp>(write);
      Value source = assign ? assign.getValue() : Value();
      if (auto widen = source ? source.getDefiningOp<zgraph::CastOp>() : zgraph::CastOp();
          widen && widen.getInput().getType() == type)
        source = widen.getInput();
      if (source && source.getType() == type) {
        crossing = source;
        bypassed.insert(name);
      } else {
        crossing = builder.create<zgraph::CastOp>(loc, type, gradient).getResult();
      }
    }
    if (auto found = sumOf.find(name); found != sumOf.end()) {
      auto squares = builder.create<zgraph::SumSquaresOp>(loc, scalar, ValueRange{crossing});
      builder.create<zgraph::AccumulateOp>(loc, accumulators[found->second],
                                           squares.getResult());
    }
    auto host = hostState(loc, name, crossing.getType());
    auto copy = builder.create<OffloadOp>(loc, crossing);
    auto assign = builder.create<zgraph::AssignOp>(loc, host.getResult(), copy.getResult());
    markHost(assign);
  }

  // The f32 gradients a 16-bit value crossed in place of are written and
  // no longer read: their writes go, and the widening casts they read.
  for (auto state : llvm::to_vector(microStep.getOps<zgraph::StateOp>())) {
    if (state.getKind() != "grad" || !bypassed.contains(state.getName()))
      continue;
    bool onlyWritten = llvm::all_of(state->getUses(), [](OpOperand &use) {
      Operation *user = use.getOwner();
      return isa<zgraph::AssignOp, zgraph::AccumulateOp, zgraph::AccumulateMatMulOp,
                 zgraph::FillOp>(user) &&
             llvm::is_contained(inPlaceTargets(user), use.get());
    });
    if (!onlyWritten)
      continue;
    for (Operation *user : llvm::to_vector(state->getUsers())) {
      SmallVector<Value> operands(user->getOperands());
      user->erase();
      for (Value operand : operands)
        if (auto cast = operand.getDefiningOp<zgraph::CastOp>(); cast && cast->use_empty())
          cast.erase();
    }
    state.erase();
  }

  // @optimizer_step: the host updates read the host gradient.
  for (auto offload : llvm::to_vector(update.getOps<OffloadOp>())) {
    auto state = offload.getOperand().getDefiningOp<zgraph::StateOp>();
    if (!state || state.getKind() != "grad" || !streamed.contains(state.getName()))
      continue;
    builder.setInsertionPoint(offload);
    auto host = hostState(offload.getLoc(), state.getName(),
                          hostType(state.getName(), state.getType()));
    offload.getResult().replaceAllUsesWith(host.getResult());
    offload.erase();
  }
  eraseUnusedGradients(update);

  // @grad_norm: each such sum reads its accumulator instead of the
  // streamed gradients (and still sums the squares of the others).
  for (auto [index, sum] : llvm::enumerate(sums)) {
    SmallVector<Value> rest;
    for (Value input : sum.getInputs())
      if (auto state = input.getDefiningOp<zgraph::StateOp>();
          !state || state.getKind() != "grad" || !streamed.contains(state.getName()))
        rest.push_back(input);
    builder.setInsertionPoint(sum);
    Location loc = sum.getLoc();
    Value result = stepState(loc, accumulatorName(index), "norm_sq", scalar).getResult();
    if (!rest.empty())
      result = builder.create<zgraph::AddOp>(
          loc, scalar, builder.create<zgraph::SumSquaresOp>(loc, scalar, rest).getResult(),
          result);
    sum.getResult().replaceAllUsesWith(result);
    sum.erase();
  }
  if (norm)
    eraseUnusedGradients(norm);
}

void GradientStreamer::eraseUnusedGradients(func::FuncOp func) {
  for (auto state : llvm::to_vector(func.getOps<zgraph::StateOp>()))
    if (state.getKind() == "grad" && streamed.contains(state.getName()) && state->use_empty())
      state.erase();
}

struct OffloadGradientsPass : impl::OffloadGradientsPassBase<OffloadGradientsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
    auto zero = config ? config.getAs<DictionaryAttr>("zero_optimization") : DictionaryAttr();
    StringRef device = offloadDevice(zero, "offload_optimizer");
    if (device != "cpu" && device != "nvme")
      return;
    GradientStreamer(module).run();
  }
};

/// cpu_checkpointing: each checkpoint the recomputation reads (a forward
/// value read by an op zcc-graph-recompute cloned) is copied to host memory
/// right after the forward computes it, and back right before the
/// recomputation first reads it; the recomputation and the backward after
/// it read that copy.
struct OffloadCheckpointsPass : impl::OffloadCheckpointsPassBase<OffloadCheckpointsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
    auto checkpointing =
        config ? config.getAs<DictionaryAttr>("activation_checkpointing") : DictionaryAttr();
    auto flag = [&](StringRef name) {
      auto value = checkpointing ? checkpointing.getAs<BoolAttr>(name) : BoolAttr();
      return value && value.getValue();
    };
    if (!flag("cpu_checkpointing") || !flag("partition_activations"))
      return;
    if (llvm::any_of(module.getOps<func::FuncOp>(), [](func::FuncOp func) {
          return func->hasAttr("zdist.stage");
        })) {
      module.emitError("activation_checkpointing.cpu_checkpointing with pipeline stages is not "
                       "supported yet: set cpu_checkpointing to false (the stages keep their "
                       "checkpoints on the device)");
      return signalPassFailure();
    }
    OpBuilder builder(module.getContext());
    for (auto func : module.getOps<func::FuncOp>()) {
      Block &body = func.getBody().front();
      // Each checkpoint and its first read by the recomputation.
      llvm::MapVector<Value, Operation *> checkpoints;
      for (Operation &op : body) {
        if (!op.hasAttr("zgraph.recompute"))
          continue;
        for (Value operand : op.getOperands()) {
          Operation *def = operand.getDefiningOp();
          if (!def || def->hasAttr("zgraph.recompute") ||
              isa<zgraph::ParamOp, zgraph::StateOp, zgraph::ConstantOp, FetchOp>(def) ||
              def->hasAttr(kMemory) || !isa<RankedTensorType>(operand.getType()))
            continue;
          checkpoints.insert({operand, &op});
        }
      }
      for (auto [value, firstRead] : checkpoints) {
        builder.setInsertionPointAfterValue(value);
        auto offload = builder.create<OffloadOp>(value.getLoc(), value);
        builder.setInsertionPoint(firstRead);
        auto fetch = builder.create<FetchOp>(value.getLoc(), offload.getResult());
        // The recomputation and the backward after it read the copy.
        value.replaceUsesWithIf(fetch.getResult(), [&](OpOperand &use) {
          Operation *user = use.getOwner();
          return user != fetch && !user->isBeforeInBlock(fetch);
        });
      }
    }
  }
};

} // namespace
} // namespace zcc::zdist
