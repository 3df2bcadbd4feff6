//===- ComputeCopies.cpp - 16-bit copies of parameters as state -----------===//
//
// With fp16 or bf16 enabled, every micro-step cast each f32 parameter to
// 16 bits before using it: a pass over the whole model (read 4 bytes,
// write 2 a parameter) and a kernel a parameter, each micro-step, for a
// value that changes only at the optimizer step. DeepSpeed keeps its
// 16-bit parameters instead and writes them after each update. Here the
// cast becomes state (`zgraph.state kind = "copy"`, a `parameter_copies`
// buffer): `@init` sets it, `@optimizer_step` refreshes it right after the
// parameter's last write (zcc-dist-to-plan fuses that cast into the adamw
// that wrote the parameter, so the updated values are cast while the
// update still holds them), and the micro-steps read it. This pass does so
// for the f32 parameters the device keeps whole (ZeRO stages 0 to 2, and
// stage 3's persistent ones); the partitions of stage 3 keep their casts,
// so a rank holds no 16-bit copy of its shards, as FSDP2 holds none.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/Transforms/ComputeCopies.h"
#include "dialects/Dist/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace zcc::zdist {
#define GEN_PASS_DEF_COMPUTECOPIESPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {

func::FuncOp getOrCreateInit(ModuleOp module, func::FuncOp update) {
  if (auto init = module.lookupSymbol<func::FuncOp>("init"))
    return init;
  OpBuilder builder(update);
  auto init = builder.create<func::FuncOp>(update.getLoc(), "init",
                                           builder.getFunctionType({}, {}));
  builder.setInsertionPointToStart(init.addEntryBlock());
  builder.create<func::ReturnOp>(update.getLoc());
  return init;
}

llvm::StringSet<> keepComputeCopies(ModuleOp module,
                                    function_ref<bool(zgraph::ParamOp)> eligible) {
  llvm::StringSet<> copied;
  auto update = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (!update)
    return copied;
  auto isStep = [&](func::FuncOp func) {
    return func != update && func.getSymName() != "init";
  };
  // Parameter name -> the 16-bit type its step functions' casts give;
  // refused: some read there is not such a cast, the casts disagree, or
  // something but @optimizer_step writes it.
  llvm::StringMap<RankedTensorType> copyType;
  llvm::StringSet<> refused;
  for (auto func : module.getOps<func::FuncOp>()) {
    bool step = isStep(func);
    func.walk([&](zgraph::ParamOp param) {
      StringRef name = param.getName();
      if (refused.contains(name))
        return;
      if (!eligible(param) || !param.getType().getElementType().isF32()) {
        refused.insert(name);
        return;
      }
      for (Operation *user : param->getUsers()) {
        if (func != update && llvm::is_contained(inPlaceTargets(user), param.getResult())) {
          refused.insert(name);
          return;
        }
        if (!step)
          continue;
        auto cast = dyn_cast<zgraph::CastOp>(user);
        auto type = cast ? dyn_cast<RankedTensorType>(cast.getType()) : RankedTensorType();
        RankedTensorType &known = copyType[name];
        bool sixteen = type && (type.getElementType().isF16() || type.getElementType().isBF16());
        if (!sixteen || (known && known != type)) {
          refused.insert(name);
          return;
        }
        known = type;
      }
    });
  }
  for (auto &entry : copyType)
    if (entry.second && !refused.contains(entry.first()))
      copied.insert(entry.first());
  if (copied.empty())
    return copied;

  OpBuilder builder(module.getContext());
  auto refresh = [&](Value param, StringAttr name, Location loc) {
    RankedTensorType type = copyType.lookup(name.getValue());
    auto copy = builder.create<zgraph::StateOp>(loc, type, name, builder.getStringAttr("copy"));
    auto cast = builder.create<zgraph::CastOp>(loc, type, param);
    builder.create<zgraph::AssignOp>(loc, copy.getResult(), cast.getResult());
  };
  // @init sets every copy once (a frozen parameter's too); the step
  // functions read the copies instead of casting.
  func::FuncOp init = getOrCreateInit(module, update);
  llvm::StringSet<> initialised;
  for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
    if (!isStep(func))
      continue;
    SmallVector<zgraph::ParamOp> params;
    func.walk([&](zgraph::ParamOp param) {
      if (copied.contains(param.getName()))
        params.push_back(param);
    });
    for (zgraph::ParamOp param : params) {
      if (initialised.insert(param.getName()).second) {
        builder.setInsertionPoint(init.getBody().front().getTerminator());
        auto clone = cast<zgraph::ParamOp>(builder.clone(*param));
        refresh(clone.getResult(), clone.getNameAttr(), param.getLoc());
      }
      for (Operation *user : llvm::make_early_inc_range(param->getUsers())) {
        builder.setInsertionPoint(user);
        auto copy = builder.create<zgraph::StateOp>(user->getLoc(), user->getResult(0).getType(),
                                                    param.getNameAttr(),
                                                    builder.getStringAttr("copy"));
        user->getResult(0).replaceAllUsesWith(copy.getResult());
        user->erase();
      }
      // A pipelined step's parameter names the stage that owns its
      // gradient and optimizer state (`zdist.stage`, which zcc-dist-
      // pipeline-split reads); it stays, unused, until the split.
      if (!param->hasAttr("zdist.stage"))
        param->erase();
    }
  }
  // And @optimizer_step after the last op that writes the parameter (its
  // update, or the assign of its gathered rows).
  // Parameter name -> its last writer and the parameter it writes.
  llvm::StringMap<std::pair<Operation *, zgraph::ParamOp>> lastWrite;
  for (Operation &op : update.getBody().front())
    for (Value target : inPlaceTargets(&op))
      if (auto param = target.getDefiningOp<zgraph::ParamOp>();
          param && copied.contains(param.getName()))
        lastWrite[param.getName()] = {&op, param};
  for (auto &entry : lastWrite) {
    auto [writer, param] = entry.second;
    builder.setInsertionPointAfter(writer);
    refresh(param.getResult(), param.getNameAttr(), writer->getLoc());
  }
  return copied;
}

namespace {

bool onHost(Operation *op) {
  auto memory = op->getAttrOfType<StringAttr>("zdist.memory");
  return memory && memory.getValue() == "host";
}

struct ComputeCopiesPass : impl::ComputeCopiesPassBase<ComputeCopiesPass> {
  void runOnOperation() override {
    // The device's whole parameters: not offloaded (zcc-dist-offload keeps
    // the host ones' copies) and not partitioned by ZeRO-3.
    keepComputeCopies(getOperation(), [](zgraph::ParamOp param) {
      return !onHost(param) && !param->hasAttr("zdist.shards");
    });
  }
};

} // namespace
} // namespace zcc::zdist
