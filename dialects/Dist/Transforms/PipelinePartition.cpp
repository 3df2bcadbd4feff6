//===- PipelinePartition.cpp - Assign the forward graph to pipeline stages ===//
//
// The forward graph is cut into `pipeline.num_stages` contiguous pieces of
// its op order (num_stages x `chunks` under the interleaved schedule, whose
// stage s holds pieces s, s + num_stages, ...). The pieces are made of units: the ops that depend on the
// data (an op computed from parameters and constants alone belongs to the
// unit that first uses it). Each unit weighs what `partition_method` counts
// (the parameter elements it uses, its flops, 1 if it uses a parameter, or
// 1 if its name matches a regular expression), and the cuts
// minimise the heaviest stage, as DeepSpeed's partition_balanced does.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Dist/Transforms/PipelineCost.h"
#include "dialects/Graph/Transforms/NodeName.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Regex.h"

#include <limits>
#include <vector>

namespace zcc::zdist {
#define GEN_PASS_DEF_PIPELINEPARTITIONPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {
namespace {

/// Cuts `weights` into `parts` contiguous pieces, each with at least one
/// unit of positive weight. The heaviest piece is kept within 5% of the
/// smallest possible one (DeepSpeed's partition_balanced), and among those
/// cuts the ones that move the fewest bytes between pieces win, then the
/// ones with the lightest heaviest piece:
/// `crossing[i]` is what a cut before unit i moves. Returns the first unit
/// of each piece. Needs at least `parts` units of positive weight.
SmallVector<size_t> partitionBalanced(ArrayRef<int64_t> weights, ArrayRef<int64_t> crossing,
                                      int64_t parts) {
  size_t n = weights.size();
  SmallVector<int64_t> prefix(n + 1, 0), positive(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    prefix[i + 1] = prefix[i] + weights[i];
    positive[i + 1] = positive[i] + (weights[i] > 0 ? 1 : 0);
  }
  // The smallest bound under which greedy pieces number at most `parts`.
  auto piecesUnder = [&](int64_t bound) {
    int64_t pieces = 1, sum = 0;
    for (int64_t weight : weights) {
      if (sum > 0 && sum + weight > bound) {
        ++pieces;
        sum = 0;
      }
      sum += weight;
    }
    return pieces;
  };
  int64_t low = 0, high = prefix[n];
  for (int64_t weight : weights)
    low = std::max(low, weight);
  while (low < high) {
    int64_t middle = low + (high - low) / 2;
    if (piecesUnder(middle) <= parts)
      high = middle;
    else
      low = middle + 1;
  }
  int64_t bound = low + low / 20;
  // cost[k][i]: the fewest bytes moved by cutting units [0, i) into k
  // pieces within the bound, then the lightest heaviest piece; from[k][i]
  // the start of the k-th piece.
  using Cost = std::pair<int64_t, int64_t>;
  const Cost none{std::numeric_limits<int64_t>::max(), 0};
  std::vector<std::vector<Cost>> cost(parts + 1, std::vector<Cost>(n + 1, none));
  std::vector<std::vector<size_t>> from(parts + 1, std::vector<size_t>(n + 1, 0));
  cost[0][0] = {0, 0};
  for (int64_t k = 1; k <= parts; ++k)
    for (size_t i = 1; i <= n; ++i)
      for (size_t j = i; j-- > 0;) {
        int64_t piece = prefix[i] - prefix[j];
        if (piece > bound)
          break;
        if (cost[k - 1][j] == none || positive[i] == positive[j])
          continue;
        Cost candidate{cost[k - 1][j].first + (j > 0 ? crossing[j] : 0),
                       std::max(cost[k - 1][j].second, piece)};
        if (candidate < cost[k][i]) {
          cost[k][i] = candidate;
          from[k][i] = j;
        }
      }
  SmallVector<size_t> starts(parts, 0);
  size_t end = n;
  for (int64_t k = parts; k >= 1; --k) {
    starts[k - 1] = from[k][end];
    end = from[k][end];
  }
  return starts;
}

struct PipelinePartitionPass : impl::PipelinePartitionPassBase<PipelinePartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
    auto pipeline = config ? config.getAs<DictionaryAttr>("pipeline") : DictionaryAttr();
    auto stagesAttr = pipeline ? pipeline.getAs<IntegerAttr>("num_stages") : IntegerAttr();
    int64_t stages = stagesAttr ? stagesAttr.getInt() : 1;
    auto enabled = pipeline ? pipeline.getAs<BoolAttr>("enabled") : BoolAttr();
    if (stages <= 1 || (enabled && !enabled.getValue()))
      return;
    // The interleaved schedule cuts num_stages x chunks pieces (stage s
    // holds pieces s, s + num_stages, ...).
    auto chunksAttr = pipeline.getAs<IntegerAttr>("chunks");
    auto scheduleAttr = pipeline.getAs<StringAttr>("schedule");
    int64_t chunks = scheduleAttr && scheduleAttr.getValue() == "interleaved" && chunksAttr
                         ? chunksAttr.getInt()
                         : 1;
    const int64_t physicalStages = stages;
    stages *= chunks;
    auto methodAttr = pipeline.getAs<StringAttr>("partition_method");
    std::string method = methodAttr ? methodAttr.str() : "parameters";
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.getBody().getBlocks().size() != 1) {
      module.emitError("pipeline partitioning expects the forward graph as a single-block "
                       "func.func @main");
      return signalPassFailure();
    }
    Block &body = main.getBody().front();

    std::optional<llvm::Regex> pattern;
    if (StringRef(method).starts_with("type:")) {
      pattern.emplace(StringRef(method).drop_front(5), llvm::Regex::IgnoreCase);
      std::string error;
      if (!pattern->isValid(error)) {
        module.emitError() << "pipeline.partition_method: '" << method.substr(5)
                           << "' is not a valid regular expression: " << error;
        return signalPassFailure();
      }
    } else if (method != "parameters" && method != "uniform" && method != "flops") {
      module.emitError() << "pipeline.partition_method: '" << method
                         << "' is not a partition method; expected 'parameters', 'uniform', "
                            "'flops' or 'type:REGEX'";
      return signalPassFailure();
    }

    // Values computed from parameters and constants alone have no stage of
    // their own; the float parameters (weights) each one is made from.
    llvm::DenseMap<Value, SmallVector<zgraph::ParamOp>> paramSources;
    llvm::DenseSet<Operation *> stageless;
    SmallVector<Operation *> units;
    for (Operation &op : body.without_terminator()) {
      if (auto param = dyn_cast<zgraph::ParamOp>(op)) {
        stageless.insert(&op);
        if (isa<FloatType>(param.getType().getElementType()))
          paramSources[param].push_back(param);
        continue;
      }
      bool dataDependent = false;
      SmallVector<zgraph::ParamOp> sources;
      for (Value operand : op.getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (!producer || !stageless.contains(producer)) {
          dataDependent = true;
          continue;
        }
        auto it = paramSources.find(operand);
        if (it != paramSources.end())
          for (zgraph::ParamOp param : it->second)
            if (!llvm::is_contained(sources, param))
              sources.push_back(param);
      }
      if (dataDependent || (op.getNumOperands() == 0 && !isa<zgraph::ConstantOp>(op))) {
        units.push_back(&op);
        continue;
      }
      stageless.insert(&op);
      for (Value result : op.getResults())
        paramSources[result] = sources;
    }

    // Each unit's weight. A parameter counts at every unit that uses it:
    // DeepSpeed builds each layer spec to count its parameters, so a tied
    // layer (GPT-2's embedding, reused by the output layer) counts on both
    // ends of the pipeline, where each stage holds a copy.
    SmallVector<int64_t> weights, paramWeights, flopWeights;
    for (Operation *unit : units) {
      int64_t params = 0;
      bool usesParam = false;
      llvm::SmallPtrSet<Operation *, 4> counted;
      for (Value operand : unit->getOperands()) {
        auto it = paramSources.find(operand);
        if (it == paramSources.end() || !operand.getDefiningOp() ||
            !stageless.contains(operand.getDefiningOp()))
          continue;
        for (zgraph::ParamOp param : it->second) {
          usesParam = true;
          if (counted.insert(param).second)
            params += param.getType().getNumElements();
        }
      }
      int64_t flops = estimateFlops(unit);
      paramWeights.push_back(params);
      flopWeights.push_back(flops);
      if (method == "parameters")
        weights.push_back(params);
      else if (method == "flops")
        weights.push_back(flops);
      else if (method == "uniform")
        weights.push_back(usesParam ? 1 : 0);
      else
        weights.push_back(pattern->match(zgraph::nodeName(unit->getLoc())) ||
                                  pattern->match(unit->getName().getStringRef())
                              ? 1
                              : 0);
    }
    int64_t weighted = llvm::count_if(weights, [](int64_t w) { return w > 0; });
    if (weighted < stages) {
      StringRef what = method == "parameters" ? "ops that use a parameter"
                       : method == "flops"    ? "ops with work"
                       : method == "uniform"  ? "ops that use a parameter"
                                              : "ops whose name matches the regular expression";
      if (chunks > 1) {
        InFlightDiagnostic diagnostic =
            module.emitError() << "pipeline.chunks: " << physicalStages << " stages x " << chunks
                               << " chunks need at least one layer each, but partition_method '"
                               << method << "' finds " << weighted << " (" << what << "); ";
        if (weighted >= 2 * physicalStages)
          diagnostic << "set chunks to at most " << weighted / physicalStages;
        else
          diagnostic << "that is too few for 2 chunks a stage: use the '1f1b' schedule";
        if (pattern)
          diagnostic << " or match more ops";
        return signalPassFailure();
      }
      module.emitError() << "pipeline.num_stages: " << stages
                         << " stages need at least one layer each, but partition_method '"
                         << method << "' finds " << weighted << " (" << what
                         << "); set num_stages to at most " << std::max<int64_t>(1, weighted)
                         << (pattern ? " or match more ops" : "");
      return signalPassFailure();
    }

    // The bytes a cut before each unit moves: the unit results made
    // before it and used from it on.
    llvm::DenseMap<Operation *, size_t> unitIndex;
    for (auto [index, unit] : llvm::enumerate(units))
      unitIndex[unit] = index;
    SmallVector<int64_t> crossing(units.size() + 1, 0);
    for (auto [index, unit] : llvm::enumerate(units))
      for (Value result : unit->getResults()) {
        size_t lastUse = index;
        for (Operation *user : result.getUsers())
          if (auto it = unitIndex.find(user); it != unitIndex.end())
            lastUse = std::max(lastUse, it->second);
        auto type = dyn_cast<RankedTensorType>(result.getType());
        int64_t bytes = type && type.hasStaticShape()
                            ? std::max<int64_t>(1, type.getNumElements()) *
                                  std::max<int64_t>(1, type.getElementTypeBitWidth() / 8)
                            : 0;
        for (size_t cut = index + 1; cut <= lastUse; ++cut)
          crossing[cut] += bytes;
      }
    SmallVector<size_t> starts = partitionBalanced(weights, crossing, stages);
    OpBuilder builder(module.getContext());
    SmallVector<int64_t> stageWeights(stages, 0), stageParams(stages, 0), stageFlops(stages, 0);
    llvm::DenseMap<Operation *, int64_t> stageOf;
    size_t next = 1;
    int64_t stage = 0;
    for (auto [index, unit] : llvm::enumerate(units)) {
      if (next < starts.size() && index == starts[next]) {
        ++stage;
        ++next;
      }
      stageOf[unit] = stage;
      unit->setAttr("zdist.stage", builder.getI64IntegerAttr(stage));
      stageWeights[stage] += weights[index];
      stageParams[stage] += paramWeights[index];
      stageFlops[stage] += flopWeights[index];
    }
    // A value made from parameters goes with its first user; a parameter
    // records that stage (later users on other stages hold copies).
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      if (!stageless.contains(&op) || op.getNumResults() != 1)
        continue;
      std::optional<int64_t> first;
      for (Operation &later : llvm::make_range(std::next(op.getIterator()), body.end())) {
        if (!llvm::is_contained(later.getOperands(), op.getResult(0)))
          continue;
        if (auto it = later.getAttrOfType<IntegerAttr>("zdist.stage")) {
          first = it.getInt();
          break;
        }
      }
      bool derived = isa<zgraph::ParamOp>(op) || !paramSources.lookup(op.getResult(0)).empty();
      if (first && derived)
        op.setAttr("zdist.stage", builder.getI64IntegerAttr(*first));
    }

    module->setAttr("zdist.partition",
                    builder.getDictionaryAttr({
                        builder.getNamedAttr("method", builder.getStringAttr(method)),
                        builder.getNamedAttr("weights", builder.getDenseI64ArrayAttr(stageWeights)),
                        builder.getNamedAttr("parameters",
                                             builder.getDenseI64ArrayAttr(stageParams)),
                        builder.getNamedAttr("flops", builder.getDenseI64ArrayAttr(stageFlops)),
                    }));
  }
};

} // namespace
} // namespace zcc::zdist
