//===- Zero.cpp - ZeRO partitioning of a training step --------------------===//
//
// Places the training step on the data-parallel axis of the mesh according
// to the config's ZeRO stage, deciding at compile time what DeepSpeed decides
// with hooks at run time:
//   stage 0  every rank holds everything; at the accumulation boundary (the
//            start of @grad_norm) each gradient is averaged over the group
//            (summed with gradient_allreduce_op "sum");
//   stage 1  optimizer state partitioned: each rank keeps its rows of Adam's
//            moments and an fp32 master copy of its rows, updates them, and
//            all-gathers the updated rows into the whole parameters, in
//            buckets of allgather_bucket_size elements;
//   stage 2  gradients partitioned too: every micro-step reduce-scatters its
//            gradients, coalesced in buckets of reduce_bucket_size elements,
//            into the rank's shard accumulators;
//   stage 3  parameters partitioned too: the parameter is stored as a shard
//            and updated in place; scheduleGathers places its coalesced,
//            prefetching all-gathers and releases from the whole micro-step
//            by stage3_max_live_parameters, stage3_max_reuse_distance and
//            stage3_prefetch_bucket_size.
// A parameter is partitioned by rows, so collectives move contiguous bytes;
// one whose first dimension the data-parallel size does not divide (or, in
// stage 3, one at or below stage3_param_persistence_threshold elements) stays
// whole on every rank and is treated as in stage 0.
// An inference plan on several ranks splits the batch: each rank runs @main
// on its rows and the outputs are all-gathered (a scalar loss averaged); stage 3 partitions and
// gathers its parameters by the same schedule (runInference).
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/Transforms/ConfigValues.h"
#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace zcc::zdist {
#define GEN_PASS_DEF_ZEROPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {
namespace {

/// Gradients of at least this many elements (16 MiB in f32) are reduced on
/// their own rather than in a bucket: NCCL moves such a message at close to
/// its bandwidth, and the bucket's copy in and out would cost more.
constexpr int64_t kDirectReductionElements = int64_t(1) << 22;


/// The rewrite of one training step for one stage.
class ZeroPartitioner {
public:
  ZeroPartitioner(ModuleOp module, MeshOp mesh, int64_t dataParallel, int64_t stage,
                  int64_t persistenceThreshold, int64_t reduceBucketSize,
                  int64_t allgatherBucketSize, Stage3Schedule schedule, bool reduceInStep,
                  ReductionKind gradientReduction)
      : module(module), builder(module.getContext()), dataParallel(dataParallel), stage(stage),
        reduceInStep(reduceInStep), gradientReduction(gradientReduction),
        persistenceThreshold(persistenceThreshold), reduceBucketSize(reduceBucketSize),
        allgatherBucketSize(allgatherBucketSize), schedule(schedule),
        meshRef(FlatSymbolRefAttr::get(mesh.getSymNameAttr())),
        axes(builder.getStrArrayAttr({"dp"})) {}

  LogicalResult run();
  /// An inference plan (@main) on the data-parallel ranks.
  LogicalResult runInference(func::FuncOp main, int64_t microBatch);

private:
  /// The pipeline stage that owns parameter `name` (-1 without a pipeline):
  /// a bucket never mixes stages, whose ranks run different programs.
  int64_t pipelineStage(StringRef name) const {
    auto it = stageOfParam.find(name);
    return it == stageOfParam.end() ? -1 : it->second;
  }
  static int64_t pipelineStage(Operation *op) {
    auto stage = op ? op->getAttrOfType<IntegerAttr>("zdist.stage") : IntegerAttr();
    return stage ? stage.getInt() : -1;
  }

  /// Whether parameter `name` of type `type` is partitioned: from stage 1,
  /// a parameter whose first dimension the data-parallel size divides (the
  /// shard is a block of rows, so collectives move contiguous bytes); in
  /// stage 3 not one of at most stage3_param_persistence_threshold
  /// elements, which stays whole as in DeepSpeed.
  bool partitioned(RankedTensorType type) const {
    if (stage == 0 || type.getRank() == 0 || type.getDimSize(0) % dataParallel != 0)
      return false;
    return !(stage == 3 && type.getNumElements() <= persistenceThreshold);
  }

  RankedTensorType shardType(RankedTensorType type) const {
    SmallVector<int64_t> shape(type.getShape());
    shape[0] /= dataParallel;
    return RankedTensorType::get(shape, type.getElementType());
  }

  ShardingAttr rowSharding(RankedTensorType type) {
    SmallVector<ArrayAttr> split(type.getRank(), builder.getArrayAttr({}));
    split[0] = axes;
    return ShardingAttr::get(builder.getContext(), meshRef, split);
  }

  Value allGather(Location loc, Value shard, RankedTensorType full) {
    return builder.create<AllGatherOp>(loc, full, shard, meshRef, axes,
                                       builder.getI64IntegerAttr(0));
  }

  Value reduceScatter(Location loc, Value full) {
    auto type = cast<RankedTensorType>(full.getType());
    return builder.create<ReduceScatterOp>(
        loc, shardType(type), full, meshRef, axes, builder.getI64IntegerAttr(0),
        ReductionKindAttr::get(builder.getContext(), gradientReduction));
  }

  Value allReduce(Location loc, Value value, ReductionKind kind) {
    return builder.create<AllReduceOp>(loc, value.getType(), value, meshRef, axes,
                                       ReductionKindAttr::get(builder.getContext(), kind));
  }

  SmallVector<Value> gatherCoalesced(Location loc, ArrayRef<Value> shards,
                                     ArrayRef<RankedTensorType> fulls, bool flattenVectors,
                                     llvm::function_ref<void(size_t, Value)> onWhole = {});
  void partitionMicroStep(func::FuncOp step);
  void scheduleGathers(func::FuncOp step);
  void reduceScatterBucket(ArrayRef<zgraph::AccumulateOp> bucket);
  void allReduceBucket(ArrayRef<zgraph::AccumulateOp> bucket);
  void partitionGradNorm(func::FuncOp gradNorm);
  void partitionOptimizerStep(func::FuncOp update);
  void allReduceLambSquares(ArrayRef<zgraph::LambStepOp> steps);
  void addInit(func::FuncOp update);

  ModuleOp module;
  OpBuilder builder;
  int64_t dataParallel, stage;
  /// Stages 0 and 1: the gradients are averaged in the micro-step, bucket
  /// by bucket as the backward pass completes them, not in @grad_norm.
  bool reduceInStep;
  /// How the gradients combine over the group: Avg, or Sum with
  /// gradient_allreduce_op "sum" (stages 0 to 2, as DeepSpeed allows).
  ReductionKind gradientReduction;
  int64_t persistenceThreshold, reduceBucketSize, allgatherBucketSize;
  Stage3Schedule schedule;
  FlatSymbolRefAttr meshRef;
  ArrayAttr axes;
  /// The full type of every partitioned parameter, by name.
  llvm::StringMap<RankedTensorType> sharded;
  llvm::StringMap<int64_t> stageOfParam;
};

LogicalResult ZeroPartitioner::run() {
  auto step = module.lookupSymbol<func::FuncOp>("micro_step");
  auto gradNorm = module.lookupSymbol<func::FuncOp>("grad_norm");
  auto update = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (stage >= 1 && (!step || !update))
    return module.emitError() << "ZeRO stage " << stage
                              << " needs @micro_step, @grad_norm and @optimizer_step";
  if (step)
    step.walk([&](zgraph::ParamOp param) {
      if (auto owner = param->getAttrOfType<IntegerAttr>("zdist.stage"))
        stageOfParam[param.getName()] = owner.getInt();
    });
  gradNorm.walk([&](zgraph::StateOp state) {
    if (state.getKind() == "grad" && partitioned(state.getType()))
      sharded[state.getName()] = state.getType();
  });
  // States of partitioned parameters hold only this rank's rows: the
  // optimizer's from stage 1, the gradients' from stage 2.
  module.walk([&](zgraph::StateOp state) {
    auto it = sharded.find(state.getName());
    if (it == sharded.end() || state.getKind() == "copy")
      return;
    if (state.getKind() != "grad" || stage >= 2)
      state.getResult().setType(shardType(it->second));
  });
  // Without a pipeline (whose micro-steps are split per stage later).
  reduceInStep = reduceInStep && stage <= 1 && stageOfParam.empty();
  if (stage >= 2 || reduceInStep)
    partitionMicroStep(step);
  partitionGradNorm(gradNorm);
  if (stage == 0)
    return success();
  partitionOptimizerStep(update);
  if (stage == 1 || stage == 2)
    addInit(update);
  return success();
}

/// Data-parallel inference: every rank runs @main on its own rows of the
/// batch (its inputs are those rows), and each output is all-gathered along
/// its first dimension into the whole batch's rows, rank-major, so every
/// rank ends with the outputs of the whole batch. In stage 3 the parameters
/// are partitioned as in training and gathered ahead of their uses by the
/// stage-3 schedule (ZeRO-Inference): each rank stores 1/dp of the model.
/// A scalar output (the loss) is the mean of the ranks' values.
/// Stages 1 and 2 partition what inference does not have (optimizer state,
/// gradients): every rank holds the whole parameters, as in stage 0.
LogicalResult ZeroPartitioner::runInference(func::FuncOp main, int64_t microBatch) {
  FunctionType type = main.getFunctionType();
  // Without a config's micro-batch, the first input's rows.
  if (microBatch <= 0 && type.getNumInputs() > 0)
    if (auto first = dyn_cast<RankedTensorType>(type.getInput(0)); first && first.getRank() >= 1)
      microBatch = first.getDimSize(0);
  auto checkRows = [&](Type value, StringAttr name, StringRef what) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(value);
    if (tensor && tensor.getRank() >= 1 && tensor.getDimSize(0) == microBatch)
      return success();
    InFlightDiagnostic diag = main.emitError()
                              << "data-parallel inference splits the batch over the "
                              << dataParallel << " ranks by the first dimension, but " << what
                              << " '" << (name ? name.getValue() : StringRef("?")) << "' is "
                              << value << ", whose first dimension is not the micro-batch ("
                              << microBatch << " rows, train_micro_batch_size_per_gpu)";
    diag << "; compile with --world-size 1, or export the model with the batch as the first "
            "dimension of each input and output (a loss may be a scalar, averaged over the ranks)";
    return failure();
  };
  for (unsigned i = 0; i < type.getNumInputs(); ++i)
    if (failed(checkRows(type.getInput(i), main.getArgAttrOfType<StringAttr>(i, "zgraph.name"),
                         "input")))
      return failure();
  // A floating-point scalar output (a loss) is averaged over the ranks, as
  // DeepSpeed's eval_batch reduces the loss over the data-parallel group.
  auto isScalar = [](Type value) {
    auto tensor = dyn_cast<RankedTensorType>(value);
    return tensor && tensor.getRank() == 0 && isa<FloatType>(tensor.getElementType());
  };
  for (unsigned i = 0; i < type.getNumResults(); ++i)
    if (!isScalar(type.getResult(i)) &&
        failed(checkRows(type.getResult(i),
                         main.getResultAttrOfType<StringAttr>(i, "zgraph.name"), "output")))
      return failure();
  if (stage == 3) {
    main.walk([&](zgraph::ParamOp param) {
      if (partitioned(param.getType()))
        sharded[param.getName()] = param.getType();
    });
    scheduleGathers(main);
  }
  auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
  builder.setInsertionPoint(ret);
  SmallVector<Type> results;
  for (OpOperand &operand : ret->getOpOperands()) {
    auto rows = cast<RankedTensorType>(operand.get().getType());
    if (isScalar(rows)) {
      operand.set(allReduce(ret.getLoc(), operand.get(), ReductionKind::Avg));
      results.push_back(rows);
      continue;
    }
    SmallVector<int64_t> shape(rows.getShape());
    shape[0] *= dataParallel;
    auto whole = RankedTensorType::get(shape, rows.getElementType());
    operand.set(allGather(ret.getLoc(), operand.get(), whole));
    results.push_back(whole);
  }
  main.setFunctionType(FunctionType::get(main.getContext(), type.getInputs(), results));
  return success();
}

/// One all-gather for a bucket of row shards of one element type: the shards
/// are flattened into one buffer, gathered rank-major ([ranks, elements])
/// and each whole tensor cut back out of it (rows are blocks, so a tensor's
/// column range over all ranks is its whole row-major data).
/// `flattenVectors` reshapes 1-d shards too (they already are flat);
/// `onWhole`, when given, is called with each whole as soon as it is cut.
SmallVector<Value> ZeroPartitioner::gatherCoalesced(
    Location loc, ArrayRef<Value> shards, ArrayRef<RankedTensorType> fulls, bool flattenVectors,
    llvm::function_ref<void(size_t, Value)> onWhole) {
  Type element = fulls.front().getElementType();
  SmallVector<Value> flats;
  int64_t total = 0;
  for (auto [shard, full] : llvm::zip(shards, fulls)) {
    int64_t part = full.getNumElements() / dataParallel;
    flats.push_back(full.getRank() == 1 && !flattenVectors
                        ? shard
                        : Value(builder.create<zgraph::ReshapeOp>(
                              loc, RankedTensorType::get({part}, element), shard)));
    total += part;
  }
  Value flat = builder.create<zgraph::ConcatOp>(loc, RankedTensorType::get({total}, element),
                                                flats, builder.getI64IntegerAttr(0));
  Value gathered = allGather(loc, flat, RankedTensorType::get({dataParallel * total}, element));
  Value byRank = builder.create<zgraph::ReshapeOp>(
      loc, RankedTensorType::get({dataParallel, total}, element), gathered);
  SmallVector<Value> wholes;
  int64_t offset = 0;
  for (RankedTensorType full : fulls) {
    int64_t part = full.getNumElements() / dataParallel;
    Value columns = builder.create<zgraph::SliceOp>(
        loc, RankedTensorType::get({dataParallel, part}, element), byRank,
        builder.getDenseI64ArrayAttr({0, offset}),
        builder.getDenseI64ArrayAttr({dataParallel, offset + part}),
        builder.getDenseI64ArrayAttr({1, 1}));
    wholes.push_back(builder.create<zgraph::ReshapeOp>(loc, full, columns));
    if (onWhole)
      onWhole(wholes.size() - 1, wholes.back());
    offset += part;
  }
  return wholes;
}

/// Stage 2: each micro-step's gradient is reduce-scattered into the shard
/// accumulator. Stage 3 also: the parameter itself is a shard, gathered
/// whole before its forward uses and again before its backward uses.
void ZeroPartitioner::partitionMicroStep(func::FuncOp step) {
  // Gradients in the order the backward pass produces them, coalesced into
  // buckets of at most reduce_bucket_size elements of one element type.
  SmallVector<SmallVector<zgraph::AccumulateOp>> buckets;
  int64_t filled = 0;
  bool lastAlone = false;
  for (auto accumulate : llvm::to_vector(step.getOps<zgraph::AccumulateOp>())) {
    auto state = accumulate.getTarget().getDefiningOp<zgraph::StateOp>();
    // Stages 2 and 3 reduce-scatter the partitioned gradients; stages 0
    // and 1 with reduceInStep all-reduce every gradient.
    if (!state || state.getKind() != "grad" || (stage >= 2 && !sharded.count(state.getName())))
      continue;
    auto type = cast<RankedTensorType>(accumulate.getValue().getType());
    // A large gradient is reduced on its own (kDirectReductionElements).
    bool alone = type.getNumElements() >= kDirectReductionElements;
    bool fits =
        !alone && !lastAlone && !buckets.empty() &&
        filled + type.getNumElements() <= reduceBucketSize &&
        cast<RankedTensorType>(buckets.back().front().getValue().getType()).getElementType() ==
            type.getElementType() &&
        pipelineStage(buckets.back().front().getTarget().getDefiningOp<zgraph::StateOp>().getName()) ==
            pipelineStage(state.getName());
    if (!fits) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(accumulate);
    filled += type.getNumElements();
    lastAlone = alone;
  }
  for (SmallVector<zgraph::AccumulateOp> &bucket : buckets)
    if (stage >= 2)
      reduceScatterBucket(bucket);
    else
      allReduceBucket(bucket);
  if (stage == 3)
    scheduleGathers(step);
}

/// Stages 0 and 1 with overlap_comm and one micro-step per step: one
/// all-reduce (average) per bucket of gradients, at the last one's
/// accumulation, as DDP does during the backward pass. The gradients are
/// flattened into one buffer and cut back out of the averaged one.
void ZeroPartitioner::allReduceBucket(ArrayRef<zgraph::AccumulateOp> bucket) {
  zgraph::AccumulateOp last = bucket.back();
  builder.setInsertionPoint(last);
  Location loc = last.getLoc();
  if (bucket.size() == 1) {
    last.getValueMutable().assign(allReduce(loc, last.getValue(), gradientReduction));
    return;
  }
  Type element = cast<RankedTensorType>(last.getValue().getType()).getElementType();
  SmallVector<Value> flats;
  int64_t total = 0;
  for (zgraph::AccumulateOp accumulate : bucket) {
    int64_t size = cast<RankedTensorType>(accumulate.getValue().getType()).getNumElements();
    flats.push_back(builder.create<zgraph::ReshapeOp>(
        loc, RankedTensorType::get({size}, element), accumulate.getValue()));
    total += size;
  }
  Value flat = builder.create<zgraph::ConcatOp>(loc, RankedTensorType::get({total}, element),
                                                flats, builder.getI64IntegerAttr(0));
  Value averaged = allReduce(loc, flat, gradientReduction);
  int64_t offset = 0;
  for (zgraph::AccumulateOp accumulate : bucket) {
    auto type = cast<RankedTensorType>(accumulate.getValue().getType());
    int64_t size = type.getNumElements();
    Value piece = builder.create<zgraph::SliceOp>(
        loc, RankedTensorType::get({size}, element), averaged,
        builder.getDenseI64ArrayAttr({offset}), builder.getDenseI64ArrayAttr({offset + size}),
        builder.getDenseI64ArrayAttr({1}));
    accumulate.getValueMutable().assign(builder.create<zgraph::ReshapeOp>(loc, type, piece));
    if (accumulate != last)
      accumulate->moveBefore(last);
    offset += size;
  }
}

/// One reduce-scatter for a bucket of gradients, at the last one's
/// accumulation (the others wait there). Each gradient is viewed as
/// [ranks, its shard's elements] (its rows are blocks), the views are
/// concatenated along their second dimension, so the flat buffer holds every
/// rank's part contiguously, and each rank cuts its shards out of its part.
void ZeroPartitioner::reduceScatterBucket(ArrayRef<zgraph::AccumulateOp> bucket) {
  zgraph::AccumulateOp last = bucket.back();
  builder.setInsertionPoint(last);
  Location loc = last.getLoc();
  if (bucket.size() == 1) {
    last.getValueMutable().assign(reduceScatter(loc, last.getValue()));
    return;
  }
  Type element = cast<RankedTensorType>(last.getValue().getType()).getElementType();
  SmallVector<Value> views;
  int64_t total = 0;
  for (zgraph::AccumulateOp accumulate : bucket) {
    int64_t part = cast<RankedTensorType>(accumulate.getValue().getType()).getNumElements() /
                   dataParallel;
    views.push_back(builder.create<zgraph::ReshapeOp>(
        loc, RankedTensorType::get({dataParallel, part}, element), accumulate.getValue()));
    total += part;
  }
  Value byRank = builder.create<zgraph::ConcatOp>(
      loc, RankedTensorType::get({dataParallel, total}, element), views,
      builder.getI64IntegerAttr(1));
  Value flat = builder.create<zgraph::ReshapeOp>(
      loc, RankedTensorType::get({dataParallel * total}, element), byRank);
  Value mine = reduceScatter(loc, flat);
  int64_t offset = 0;
  for (zgraph::AccumulateOp accumulate : bucket) {
    auto full = cast<RankedTensorType>(accumulate.getValue().getType());
    int64_t part = full.getNumElements() / dataParallel;
    Value piece = builder.create<zgraph::SliceOp>(
        loc, RankedTensorType::get({part}, element), mine, builder.getDenseI64ArrayAttr({offset}),
        builder.getDenseI64ArrayAttr({offset + part}), builder.getDenseI64ArrayAttr({1}));
    Value shard = full.getRank() == 1
                      ? piece
                      : Value(builder.create<zgraph::ReshapeOp>(loc, shardType(full), piece));
    accumulate.getValueMutable().assign(shard);
    if (accumulate != last)
      accumulate->moveBefore(last);
    offset += part;
  }
}

/// Stage 3: every partitioned parameter is a shard, and this decides, from
/// the whole micro-step, where its whole copy is all-gathered and how long
/// it stays, as DeepSpeed's coordinator does at run time from its trace:
///  - release: after a use, a parameter stays resident up to its next use
///    when the other parameters used in between hold at most
///    stage3_max_reuse_distance elements; otherwise it is released after
///    the use (its whole copy's last use) and gathered again. Each run of
///    uses kept resident is a segment, with one whole copy.
///  - fetch and prefetch: at the first use of a segment not yet gathered,
///    one coalesced all-gather fetches it together with the next segments
///    in use order, as long as they add at most min(stage3_max_live_
///    parameters - resident elements, stage3_prefetch_bucket_size)
///    elements (of the same element type).
/// The memory planner then sees each whole copy live from its gather to
/// its segment's last use, so the knobs move the planned peak.
void ZeroPartitioner::scheduleGathers(func::FuncOp step) {
  Block &body = step.getBody().front();
  // What is gathered: the parameter's shard, or (when every use of the
  // parameter is a cast to one narrower float type, as mixed precision
  // writes it) the shard cast to that type, so the all-gather moves 16 bits
  // per element instead of 32 and the whole fp32 copy never exists. Each
  // all-gather casts its own copy of the shard right before it (as FSDP
  // does): one cast for the whole step would keep every layer's 16-bit
  // shard live from the forward pass to the backward pass's gathers.
  struct Param {
    zgraph::ParamOp op;
    /// The value the uses to gather read: the parameter, or a cast of it
    /// that only stands for the uses (each gather casts anew).
    Value source;
    RankedTensorType full;
    int64_t elements;
    zgraph::CastOp narrowed;
  };
  SmallVector<Param> params;
  Operation *lastMoved = nullptr;
  for (auto param : llvm::to_vector(step.getOps<zgraph::ParamOp>())) {
    auto it = sharded.find(param.getName());
    if (it == sharded.end())
      continue;
    // Sources without operands: at the top (in their order), every gather
    // may use them.
    if (lastMoved)
      param->moveAfter(lastMoved);
    else
      param->moveBefore(&body.front());
    lastMoved = param;
    params.push_back({param, param.getResult(), it->second, it->second.getNumElements(), {}});
    param.getResult().setType(shardType(it->second));
    param->setAttr("zdist.shards", builder.getI64IntegerAttr(dataParallel));
  }
  for (Param &param : params) {
    SmallVector<zgraph::CastOp> casts;
    Type narrow;
    for (Operation *user : param.op->getUsers()) {
      auto cast = dyn_cast<zgraph::CastOp>(user);
      Type element = cast ? cast.getType().getElementType() : Type();
      // Casts on different pipeline stages (a tied parameter) stay apart.
      if (!cast || (narrow && element != narrow) ||
          (!casts.empty() && cast->getDiscardableAttrDictionary() !=
                                 casts.front()->getDiscardableAttrDictionary())) {
        casts.clear();
        break;
      }
      narrow = element;
      casts.push_back(cast);
    }
    if (casts.empty() || !isa<FloatType>(narrow) ||
        narrow.getIntOrFloatBitWidth() >= param.full.getElementTypeBitWidth())
      continue;
    builder.setInsertionPointAfter(lastMoved);
    RankedTensorType full = RankedTensorType::get(param.full.getShape(), narrow);
    auto shardCast =
        builder.create<zgraph::CastOp>(param.op.getLoc(), shardType(full), param.op.getResult());
    shardCast->setDiscardableAttrs(casts.front()->getDiscardableAttrDictionary());
    lastMoved = shardCast;
    for (zgraph::CastOp cast : casts) {
      cast.getResult().replaceAllUsesWith(shardCast.getResult());
      cast->erase();
    }
    param.source = shardCast.getResult();
    param.full = full;
    param.narrowed = shardCast;
  }
  llvm::DenseMap<Operation *, int64_t> position;
  int64_t index = 0;
  for (Operation &op : body)
    position[&op] = index++;

  // The trace: which parameter each op uses, in op order.
  SmallVector<std::pair<int64_t, unsigned>> trace;
  SmallVector<SmallVector<OpOperand *>> usesOf(params.size());
  for (auto [i, param] : llvm::enumerate(params)) {
    for (OpOperand &use : param.source.getUses())
      usesOf[i].push_back(&use);
    llvm::stable_sort(usesOf[i], [&](OpOperand *a, OpOperand *b) {
      return position.lookup(a->getOwner()) < position.lookup(b->getOwner());
    });
    int64_t last = -1;
    for (OpOperand *use : usesOf[i]) {
      int64_t at = position.lookup(use->getOwner());
      if (at != last)
        trace.push_back({at, static_cast<unsigned>(i)});
      last = at;
    }
  }
  llvm::sort(trace);
  // Elements of the other parameters used strictly between two positions.
  auto distance = [&](unsigned self, int64_t from, int64_t to) {
    llvm::SmallDenseSet<unsigned> seen;
    int64_t elements = 0;
    auto it = llvm::upper_bound(trace, std::make_pair(from, ~0u));
    for (; it != trace.end() && it->first < to; ++it)
      if (it->second != self && seen.insert(it->second).second)
        elements += params[it->second].elements;
    return elements;
  };

  struct Segment {
    unsigned param;
    SmallVector<OpOperand *> uses;
    int64_t first = 0, last = 0;
  };
  SmallVector<Segment> segments;
  for (unsigned i = 0; i < params.size(); ++i) {
    for (OpOperand *use : usesOf[i]) {
      int64_t at = position.lookup(use->getOwner());
      // A parameter used on two pipeline stages (a tied one) is gathered
      // by each stage on its own: one gather cannot serve both.
      bool startNew = segments.empty() || segments.back().param != i ||
                      pipelineStage(use->getOwner()) !=
                          pipelineStage(segments.back().uses.back()->getOwner()) ||
                      (at != segments.back().last &&
                       distance(i, segments.back().last, at) > schedule.maxReuseDistance);
      if (startNew)
        segments.push_back({i, {}, at, at});
      segments.back().uses.push_back(use);
      segments.back().last = at;
    }
  }
  llvm::stable_sort(segments, [](const Segment &a, const Segment &b) { return a.first < b.first; });

  // One all-gather per bucket: a bucket of several shards is flattened into
  // one buffer, gathered rank-major ([ranks, elements]) and each whole
  // parameter cut back out of it (rows are blocks, so a parameter's column
  // range over all ranks is its whole row-major data).
  // The shard a gather reads: the parameter, or its cast made here.
  auto shardToGather = [&](Param &param) -> Value {
    if (!param.narrowed)
      return param.source;
    Operation *cast = builder.clone(*param.narrowed);
    return cast->getResult(0);
  };
  auto gatherBucket = [&](ArrayRef<unsigned> bucket) {
    SmallVector<Value> wholes;
    Location loc = params[segments[bucket.front()].param].op.getLoc();
    if (bucket.size() == 1) {
      Param &param = params[segments[bucket.front()].param];
      wholes.push_back(allGather(loc, shardToGather(param), param.full));
      return wholes;
    }
    SmallVector<Value> shards;
    SmallVector<RankedTensorType> fulls;
    for (unsigned m : bucket) {
      shards.push_back(shardToGather(params[segments[m].param]));
      fulls.push_back(params[segments[m].param].full);
    }
    return gatherCoalesced(loc, shards, fulls, /*flattenVectors=*/true);
  };

  SmallVector<bool> fetched(segments.size(), false);
  Operation *previousFirstUse = nullptr;
  int64_t previousElements = 0;
  for (unsigned k = 0; k < segments.size(); ++k) {
    if (fetched[k])
      continue;
    int64_t at = segments[k].first;
    Type element = params[segments[k].param].full.getElementType();
    int64_t resident = 0;
    for (unsigned j = 0; j < k; ++j)
      if (fetched[j] && segments[j].last >= at)
        resident += params[segments[j].param].elements;
    int64_t budget = std::min(schedule.maxLiveParameters - resident - params[segments[k].param].elements,
                              schedule.prefetchBucketSize);
    SmallVector<unsigned> bucket = {k};
    fetched[k] = true;
    int64_t prefetched = 0;
    for (unsigned m = k + 1; m < segments.size() && budget > 0; ++m) {
      const Param &candidate = params[segments[m].param];
      if (fetched[m] || candidate.full.getElementType() != element ||
          pipelineStage(segments[m].uses.front()->getOwner()) !=
              pipelineStage(segments[k].uses.front()->getOwner()))
        continue;
      if (prefetched + candidate.elements > budget)
        break;
      bucket.push_back(m);
      fetched[m] = true;
      prefetched += candidate.elements;
    }
    Operation *firstUse = segments[k].uses.front()->getOwner();
    int64_t elements = params[segments[k].param].elements + prefetched;
    // Ahead of use when the previous bucket and this one fit the live
    // budget together, and the previous bucket's first use comes before.
    bool ahead = schedule.gatherAhead && previousFirstUse &&
                 previousFirstUse->isBeforeInBlock(firstUse) &&
                 pipelineStage(previousFirstUse) == pipelineStage(firstUse) &&
                 resident + previousElements + elements <= schedule.maxLiveParameters;
    builder.setInsertionPoint(ahead ? previousFirstUse : firstUse);
    previousFirstUse = firstUse;
    previousElements = elements;
    SmallVector<Value> wholes = gatherBucket(bucket);
    for (auto [m, whole] : llvm::zip(bucket, wholes))
      for (OpOperand *use : segments[m].uses)
        use->set(whole);
  }
  for (Param &param : params) {
    param.source.setType(shardType(param.full));
    param.op->setAttr("zdist.shards", builder.getI64IntegerAttr(dataParallel));
    // Every use now reads a gather of its own cast.
    if (param.narrowed && param.narrowed->use_empty())
      param.narrowed->erase();
  }
}

/// The gradient norm: whole gradients are averaged over the group first;
/// shard gradients (stage 2, 3) are already averaged, their sum of squares
/// is summed over the group.
void ZeroPartitioner::partitionGradNorm(func::FuncOp gradNorm) {
  Block &body = gradNorm.getBody().front();
  auto sum = cast<zgraph::SumSquaresOp>(*body.getOps<zgraph::SumSquaresOp>().begin());
  SmallVector<Value> whole, shards;
  SmallVector<zgraph::StateOp> wholeStates;
  for (auto state : llvm::to_vector(body.getOps<zgraph::StateOp>())) {
    if (state.getKind() != "grad")
      continue;
    if (stage >= 2 && sharded.count(state.getName()))
      shards.push_back(state);
    else if (!reduceInStep)
      wholeStates.push_back(state);
  }
  // Gradients averaged in the micro-step are the same on every rank: their
  // local sum of squares is the norm.
  if (reduceInStep)
    return;
  // Whole gradients are averaged in buckets of at most reduce_bucket_size
  // elements (consecutive gradients of one element type): a bucket of
  // several is flattened into one buffer, all-reduced once and split back.
  SmallVector<SmallVector<zgraph::StateOp>> buckets;
  int64_t filled = 0;
  for (zgraph::StateOp state : wholeStates) {
    int64_t size = state.getType().getNumElements();
    bool fits = !buckets.empty() && filled + size <= reduceBucketSize &&
                buckets.back().front().getType().getElementType() ==
                    state.getType().getElementType() &&
                pipelineStage(buckets.back().front().getName()) ==
                    pipelineStage(state.getName());
    if (!fits) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(state);
    filled += size;
  }
  builder.setInsertionPoint(sum);
  for (SmallVector<zgraph::StateOp> &bucket : buckets) {
    Location loc = bucket.front().getLoc();
    SmallVector<Value> reducedValues;
    if (bucket.size() == 1) {
      reducedValues.push_back(allReduce(loc, bucket.front(), gradientReduction));
    } else {
      Type element = bucket.front().getType().getElementType();
      SmallVector<Value> flats;
      int64_t total = 0;
      for (zgraph::StateOp &state : bucket) {
        int64_t size = state.getType().getNumElements();
        flats.push_back(state.getType().getRank() == 1
                            ? Value(state)
                            : builder.create<zgraph::ReshapeOp>(
                                  loc, RankedTensorType::get({size}, element), state));
        total += size;
      }
      Value flat = builder.create<zgraph::ConcatOp>(loc, RankedTensorType::get({total}, element),
                                                    flats, builder.getI64IntegerAttr(0));
      Value reduced = allReduce(loc, flat, gradientReduction);
      int64_t offset = 0;
      for (zgraph::StateOp &state : bucket) {
        int64_t size = state.getType().getNumElements();
        Value piece = builder.create<zgraph::SliceOp>(
            loc, RankedTensorType::get({size}, element), reduced,
            builder.getDenseI64ArrayAttr({offset}), builder.getDenseI64ArrayAttr({offset + size}),
            builder.getDenseI64ArrayAttr({1}));
        reducedValues.push_back(state.getType().getRank() == 1
                                    ? piece
                                    : builder.create<zgraph::ReshapeOp>(loc, state.getType(),
                                                                        piece));
        offset += size;
      }
    }
    for (auto [state, reduced] : llvm::zip(bucket, reducedValues)) {
      zgraph::StateOp target = state;
      target.getResult().replaceUsesWithIf(reduced, [&](OpOperand &use) {
        return use.getOwner() == sum.getOperation();
      });
      builder.create<zgraph::AssignOp>(target.getLoc(), target, reduced);
      whole.push_back(reduced);
    }
  }
  if (shards.empty())
    return;
  Location loc = sum.getLoc();
  builder.setInsertionPoint(sum);
  Value shardSum = builder.create<zgraph::SumSquaresOp>(loc, sum.getType(), shards);
  Value total = allReduce(loc, shardSum, ReductionKind::Sum);
  if (!whole.empty()) {
    Value wholeSum = builder.create<zgraph::SumSquaresOp>(loc, sum.getType(), whole);
    total = builder.create<zgraph::AddOp>(loc, sum.getType(), total, wholeSum);
  }
  sum.getResult().replaceAllUsesWith(total);
  sum.erase();
}

/// Each rank updates its rows: stage 1 and 2 through an fp32 master shard
/// whose update is all-gathered back into the whole parameter; stage 3
/// updates the parameter shard itself.
void ZeroPartitioner::partitionOptimizerStep(func::FuncOp update) {
  struct Updated {
    Operation *op;
    Value master;
    zgraph::ParamOp param;
    RankedTensorType full;
  };
  SmallVector<Updated> updated;
  SmallVector<zgraph::LambStepOp> lambSteps;
  for (Operation &op : llvm::make_early_inc_range(update.getBody().front())) {
    Value param, grad;
    // Lamb's step: the partition's sums of squares, all-reduced into the
    // whole parameter's before the trust ratio is taken from them (below).
    if (auto lamb = dyn_cast<zgraph::LambStepOp>(op)) {
      auto paramOp = lamb.getParam().getDefiningOp<zgraph::ParamOp>();
      if (!paramOp || !sharded.count(paramOp.getName()))
        continue;
      RankedTensorType full = sharded[paramOp.getName()];
      lambSteps.push_back(lamb);
      if (stage == 3)
        continue;
      builder.setInsertionPoint(&op);
      auto master = builder.create<zgraph::StateOp>(op.getLoc(), shardType(full),
                                                    paramOp.getNameAttr(),
                                                    builder.getStringAttr("master"));
      op.setOperand(0, master);
      updated.push_back({&op, master, paramOp, full});
      continue;
    }
    // Its moments: as another update's, without the parameter's gather,
    // which follows the step.
    bool moments = isa<zgraph::LambMomentsOp>(op);
    if (auto lamb = dyn_cast<zgraph::LambMomentsOp>(op)) {
      param = lamb.getParam();
      grad = lamb.getGrad();
    } else if (auto adamw = dyn_cast<zgraph::AdamWOp>(op)) {
      param = adamw.getParam();
      grad = adamw.getGrad();
    } else if (auto sgd = dyn_cast<zgraph::SgdOp>(op)) {
      param = sgd.getParam();
      grad = sgd.getGrad();
    } else if (auto lion = dyn_cast<zgraph::LionOp>(op)) {
      param = lion.getParam();
      grad = lion.getGrad();
    } else if (auto adagrad = dyn_cast<zgraph::AdagradOp>(op)) {
      param = adagrad.getParam();
      grad = adagrad.getGrad();
    } else {
      continue;
    }
    auto paramOp = param.getDefiningOp<zgraph::ParamOp>();
    if (!paramOp || !sharded.count(paramOp.getName()))
      continue;
    RankedTensorType full = sharded[paramOp.getName()];
    Location loc = op.getLoc();
    builder.setInsertionPoint(&op);
    if (stage == 1)
      op.setOperand(1, builder.create<ShardOp>(loc, shardType(full), grad, rowSharding(full)));
    if (stage == 3) {
      paramOp.getResult().setType(shardType(full));
      paramOp->setAttr("zdist.shards", builder.getI64IntegerAttr(dataParallel));
      continue;
    }
    auto master = builder.create<zgraph::StateOp>(loc, shardType(full), paramOp.getNameAttr(),
                                                  builder.getStringAttr("master"));
    op.setOperand(0, master);
    if (!moments)
      updated.push_back({&op, master, paramOp, full});
  }
  allReduceLambSquares(lambSteps);
  // The updated rows go back into the whole parameters in all-gathers of at
  // most allgather_bucket_size elements (one element type each), each after
  // the last update of its bucket.
  SmallVector<SmallVector<Updated>> buckets;
  int64_t filled = 0;
  for (Updated &update : updated) {
    bool fits = !buckets.empty() && filled + update.full.getNumElements() <= allgatherBucketSize &&
                buckets.back().front().full.getElementType() == update.full.getElementType() &&
                pipelineStage(buckets.back().front().param.getName()) ==
                    pipelineStage(update.param.getName());
    if (!fits) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(update);
    filled += update.full.getNumElements();
  }
  for (SmallVector<Updated> &bucket : buckets) {
    builder.setInsertionPointAfter(bucket.back().op);
    Location loc = bucket.back().op->getLoc();
    if (bucket.size() == 1) {
      Value whole = allGather(loc, bucket.front().master, bucket.front().full);
      builder.create<zgraph::AssignOp>(loc, bucket.front().param, whole);
      continue;
    }
    SmallVector<Value> shards;
    SmallVector<RankedTensorType> fulls;
    for (Updated &update : bucket) {
      shards.push_back(update.master);
      fulls.push_back(update.full);
    }
    gatherCoalesced(loc, shards, fulls, /*flattenVectors=*/false, [&](size_t i, Value whole) {
      builder.create<zgraph::AssignOp>(loc, bucket[i].param, whole);
    });
  }
}

/// Lamb's partitioned steps of one pipeline stage take their sums of
/// squares from one all-reduce: the steps move after the stage's last
/// moments (a step reads its own moments and writes only its parameter or
/// master shard),
/// and the sums, two per parameter, are concatenated, all-reduced and
/// sliced back, one collective per step rather than one per parameter.
void ZeroPartitioner::allReduceLambSquares(ArrayRef<zgraph::LambStepOp> steps) {
  llvm::MapVector<int64_t, SmallVector<zgraph::LambStepOp>> byStage;
  for (zgraph::LambStepOp step : steps) {
    // The parameter, or (stages 1 and 2) its master shard.
    Operation *target = step.getParam().getDefiningOp();
    StringRef name = isa<zgraph::ParamOp>(target) ? cast<zgraph::ParamOp>(target).getName()
                                                  : cast<zgraph::StateOp>(target).getName();
    byStage[pipelineStage(name)].push_back(step);
  }
  for (auto &[stageIndex, group] : byStage) {
    Operation *last = group.front().getSquares().getDefiningOp();
    for (zgraph::LambStepOp step : group) {
      Operation *moments = step.getSquares().getDefiningOp();
      if (last->isBeforeInBlock(moments))
        last = moments;
    }
    Location loc = group.front().getLoc();
    builder.setInsertionPointAfter(last);
    Type f64 = builder.getF64Type();
    int64_t total = 2 * static_cast<int64_t>(group.size());
    SmallVector<Value> parts;
    for (zgraph::LambStepOp step : group)
      parts.push_back(step.getSquares());
    Value flat = parts.size() == 1 ? parts.front()
                                   : builder.create<zgraph::ConcatOp>(
                                         loc, RankedTensorType::get({total}, f64), parts,
                                         builder.getI64IntegerAttr(0));
    Value reduced = allReduce(loc, flat, ReductionKind::Sum);
    Operation *anchor = reduced.getDefiningOp();
    for (auto [index, step] : llvm::enumerate(group)) {
      Value squares = reduced;
      if (group.size() > 1) {
        int64_t offset = 2 * static_cast<int64_t>(index);
        squares = builder.create<zgraph::SliceOp>(
            loc, RankedTensorType::get({2}, f64), reduced, builder.getDenseI64ArrayAttr({offset}),
            builder.getDenseI64ArrayAttr({offset + 2}), builder.getDenseI64ArrayAttr({1}));
        anchor = squares.getDefiningOp();
      }
      step.getOperation()->moveAfter(anchor);
      // Its master shard's state op (stages 1 and 2) was made where the
      // step was; it takes no operands and moves with it.
      if (Operation *master = step.getParam().getDefiningOp();
          master->getBlock() == step->getBlock() && step->isBeforeInBlock(master))
        master->moveBefore(step);
      anchor = step.getOperation();
      builder.setInsertionPointAfter(anchor);
      step->setOperand(step.getSquaresMutable().getOperandNumber(), squares);
    }
  }
}

/// @init: each rank's master shard starts as its rows of the parameter.
void ZeroPartitioner::addInit(func::FuncOp update) {
  Location loc = update.getLoc();
  builder.setInsertionPoint(update);
  auto init = builder.create<func::FuncOp>(loc, "init", builder.getFunctionType({}, {}));
  builder.setInsertionPointToStart(init.addEntryBlock());
  llvm::StringSet<> done;
  update.walk([&](zgraph::ParamOp param) {
    auto it = sharded.find(param.getName());
    if (it == sharded.end() || !done.insert(param.getName()).second)
      return;
    auto whole = cast<zgraph::ParamOp>(builder.clone(*param));
    Value rows = builder.create<ShardOp>(loc, shardType(it->second), whole,
                                         rowSharding(it->second));
    auto master = builder.create<zgraph::StateOp>(loc, shardType(it->second),
                                                  param.getNameAttr(),
                                                  builder.getStringAttr("master"));
    builder.create<zgraph::AssignOp>(loc, master, rows);
  });
  builder.create<func::ReturnOp>(loc);
}

struct ZeroPass : impl::ZeroPassBase<ZeroPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
    auto zero = config ? config.getAs<DictionaryAttr>("zero_optimization") : DictionaryAttr();
    auto gradNorm = module.lookupSymbol<func::FuncOp>("grad_norm");
    auto meshes = llvm::to_vector(module.getOps<MeshOp>());
    // An inference plan without a mesh runs on one rank; a pipeline's
    // stages split the batch themselves (zcc-dist-pipeline-split).
    if (!gradNorm && (meshes.empty() || !module.getOps<PipelineOp>().empty()))
      return;
    if (meshes.size() != 1) {
      module.emitError("ZeRO partitioning needs exactly one zdist.mesh (run zcc-graph-to-dist)");
      return signalPassFailure();
    }
    MeshOp mesh = meshes.front();
    int64_t dataParallel = 1;
    for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getShape()))
      if (cast<StringAttr>(name).getValue() == "dp")
        dataParallel = size;
    if (dataParallel == 1)
      return;
    int64_t stage = configInt(zero, "stage", 0);
    int64_t threshold = configInt(zero, "stage3_param_persistence_threshold", 100000);
    if (stage < 0 || stage > 3) {
      module.emitError() << "zero_optimization.stage must be 0 to 3, got " << stage;
      return signalPassFailure();
    }
    // "auto" (a string) leaves DeepSpeed's default.
    int64_t bucket = configInt(zero, "reduce_bucket_size", 500000000);
    Stage3Schedule schedule = readStage3Schedule(zero);
    int64_t gatherBucket = configInt(zero, "allgather_bucket_size", 500000000);
    // With overlap_comm and one micro-step per step, stages 0 and 1
    // average each bucket of gradients as soon as the backward pass has it,
    // on the communication stream (DDP's overlap). With accumulation the
    // average waits for the last micro-step, in @grad_norm.
    auto gradientAccumulation = config ? config.getAs<IntegerAttr>("gradient_accumulation_steps")
                                       : IntegerAttr();
    bool reduceInStep =
        schedule.gatherAhead && gradientAccumulation && gradientAccumulation.getInt() == 1;
    // gradient_allreduce_op "sum" adds the ranks' gradients instead of
    // averaging them (the config importer rejects it with stage 3).
    auto allreduceOp = config ? config.getAs<StringAttr>("gradient_allreduce_op") : StringAttr();
    ReductionKind gradientReduction =
        allreduceOp && allreduceOp.getValue() == "sum" ? ReductionKind::Sum : ReductionKind::Avg;
    if (gradientReduction == ReductionKind::Sum && stage == 3) {
      module.emitError("gradient_allreduce_op 'sum' is not supported with ZeRO stage 3; use 'avg'");
      return signalPassFailure();
    }
    ZeroPartitioner partitioner(module, mesh, dataParallel, stage, threshold,
                                std::max<int64_t>(1, bucket), std::max<int64_t>(1, gatherBucket),
                                schedule, reduceInStep, gradientReduction);
    if (!gradNorm) {
      auto main = module.lookupSymbol<func::FuncOp>("main");
      if (!main) {
        module.emitError("an inference plan on " + Twine(dataParallel) +
                         " data-parallel ranks needs func.func @main");
        return signalPassFailure();
      }
      if (failed(partitioner.runInference(main, configInt(config, "train_micro_batch_size_per_gpu",
                                                          -1))))
        return signalPassFailure();
      return;
    }
    if (failed(partitioner.run()))
      return signalPassFailure();
  }
};

} // namespace
} // namespace zcc::zdist
