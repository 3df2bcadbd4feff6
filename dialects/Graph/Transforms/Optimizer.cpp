//===- Optimizer.cpp - Optimizer step, gradient norm, gradient reset ------===//

#include "dialects/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace zcc::zgraph {
#define GEN_PASS_DEF_OPTIMIZERPASS
#include "dialects/Graph/Transforms/Passes.h.inc"
} // namespace zcc::zgraph

using namespace mlir;

namespace zcc::zgraph {
namespace {

struct TrainedParam {
  ParamOp param;
  RankedTensorType gradType;
};

func::FuncOp createFunction(OpBuilder &builder, Location loc, StringRef name,
                            ArrayRef<std::pair<std::string, Type>> arguments,
                            ArrayRef<std::pair<std::string, Type>> results) {
  SmallVector<Type> argTypes, resultTypes;
  for (const auto &[argName, type] : arguments)
    argTypes.push_back(type);
  for (const auto &[resultName, type] : results)
    resultTypes.push_back(type);
  auto func = builder.create<func::FuncOp>(loc, name,
                                           builder.getFunctionType(argTypes, resultTypes));
  for (auto [i, argument] : llvm::enumerate(arguments))
    func.setArgAttr(i, "zgraph.name", builder.getStringAttr(argument.first));
  for (auto [i, result] : llvm::enumerate(results))
    func.setResultAttr(i, "zgraph.name", builder.getStringAttr(result.first));
  func.addEntryBlock();
  return func;
}

struct OptimizerPass : impl::OptimizerPassBase<OptimizerPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!step) {
      module.emitError("the optimizer pass needs @micro_step (run zcc-graph-autodiff first)");
      return signalPassFailure();
    }
    auto config = module->getAttrOfType<DictionaryAttr>("zcc.config");
    auto optimizer = config ? config.getAs<DictionaryAttr>("optimizer") : DictionaryAttr();
    auto typeAttr = optimizer ? optimizer.getAs<StringAttr>("type") : StringAttr();
    if (!typeAttr) {
      module.emitError("a training plan needs an optimizer: add an \"optimizer\" section to the "
                       "config (for example {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4}})");
      return signalPassFailure();
    }
    std::string type = typeAttr.getValue().lower();
    auto params = optimizer.getAs<DictionaryAttr>("params");
    auto boolParam = [&](StringRef name, bool defaultValue) {
      auto attr = params ? params.getAs<BoolAttr>(name) : BoolAttr();
      return attr ? attr.getValue() : defaultValue;
    };
    auto floatParam = [&](StringRef name, double defaultValue) {
      Attribute attr = params ? params.get(name) : Attribute();
      if (auto f = dyn_cast_or_null<FloatAttr>(attr))
        return f.getValueAsDouble();
      if (auto i = dyn_cast_or_null<IntegerAttr>(attr))
        return double(i.getInt());
      return defaultValue;
    };
    if (type != "adam" && type != "adamw" && type != "adagrad" && type != "lamb" &&
        type != "lion" && type != "sgd") {
      module.emitError() << "optimizer '" << typeAttr.getValue()
                         << "' is not supported yet; zcc implements Adam, AdamW, Adagrad, Lamb, Lion "
                            "and SGD";
      return signalPassFailure();
    }
    if (boolParam("amsgrad", false)) {
      module.emitError("optimizer.params.amsgrad: AMSGrad is not supported yet; remove it");
      return signalPassFailure();
    }

    // Every gradient accumulator, in the order the backward fills them.
    llvm::StringMap<ParamOp> paramsByName;
    step.walk([&](ParamOp param) { paramsByName.try_emplace(param.getName(), param); });
    SmallVector<TrainedParam> trained;
    llvm::StringSet<> seen;
    step.walk([&](StateOp state) {
      if (state.getKind() == "grad" && seen.insert(state.getName()).second)
        trained.push_back({paramsByName.lookup(state.getName()), state.getType()});
    });
    if (trained.empty()) {
      step.emitError("the model has no trainable parameter that the loss depends on");
      return signalPassFailure();
    }

    OpBuilder builder(module.getContext());
    Location loc = step.getLoc();
    builder.setInsertionPointAfter(step);
    auto gradState = [&](TrainedParam p, StringRef kind) {
      return builder.create<StateOp>(loc, p.gradType, p.param.getNameAttr(),
                                     builder.getStringAttr(kind));
    };

    // @grad_norm
    auto f64 = RankedTensorType::get({}, builder.getF64Type());
    auto gradNorm = createFunction(builder, loc, "grad_norm", {}, {{"zcc.grad_norm_sq", f64}});
    builder.setInsertionPointToStart(&gradNorm.getBody().front());
    SmallVector<Value> grads;
    for (TrainedParam p : trained)
      grads.push_back(gradState(p, "grad"));
    Value sum = builder.create<SumSquaresOp>(loc, f64, grads);
    builder.create<func::ReturnOp>(loc, sum);

    // @optimizer_step
    builder.setInsertionPointAfter(gradNorm);
    auto scalarsType = RankedTensorType::get({8}, builder.getF64Type());
    auto update = createFunction(builder, loc, "optimizer_step",
                                 {{"zcc.optimizer_scalars", scalarsType}}, {});
    Block &updateBody = update.getBody().front();
    builder.setInsertionPointToStart(&updateBody);
    for (TrainedParam p : trained) {
      auto param = cast<ParamOp>(builder.clone(*p.param));
      Value grad = gradState(p, "grad");
      if (type == "sgd") {
        Value momentum = gradState(p, "momentum");
        builder.create<SgdOp>(loc, param, grad, momentum, updateBody.getArgument(0),
                              builder.getF64FloatAttr(floatParam("dampening", 0.0)),
                              boolParam("nesterov", false) ? builder.getUnitAttr() : UnitAttr());
      } else if (type == "adagrad") {
        builder.create<AdagradOp>(loc, param, grad, gradState(p, "sum"), updateBody.getArgument(0),
                                  builder.getF64FloatAttr(floatParam("lr_decay", 0.0)));
      } else if (type == "lamb") {
        // Two halves, so that a partitioned parameter's sums of squares can
        // be all-reduced between them (zcc-dist-zero).
        Value expAvg = gradState(p, "exp_avg");
        Value expAvgSq = gradState(p, "exp_avg_sq");
        BoolAttr epsInsideSqrt = builder.getBoolAttr(boolParam("eps_inside_sqrt", false));
        auto squaresType = RankedTensorType::get({2}, builder.getF64Type());
        Value squares =
            builder.create<LambMomentsOp>(loc, squaresType, param, grad, expAvg, expAvgSq,
                                          updateBody.getArgument(0), epsInsideSqrt);
        builder.create<LambStepOp>(loc, param, expAvg, expAvgSq, updateBody.getArgument(0), squares,
                                   builder.getF64FloatAttr(floatParam("max_coeff", 10.0)),
                                   builder.getF64FloatAttr(floatParam("min_coeff", 0.01)),
                                   builder.getBoolAttr(boolParam("bias_correction", true)),
                                   epsInsideSqrt);
      } else if (type == "lion") {
        builder.create<LionOp>(loc, param, grad, gradState(p, "exp_avg"),
                               updateBody.getArgument(0));
      } else {
        Value expAvg = gradState(p, "exp_avg");
        Value expAvgSq = gradState(p, "exp_avg_sq");
        // DeepSpeed: "Adam" is AdamW unless adam_w_mode is switched off;
        // "AdamW" always decouples the weight decay.
        bool decoupled = type == "adamw" || boolParam("adam_w_mode", true);
        builder.create<AdamWOp>(loc, param, grad, expAvg, expAvgSq, updateBody.getArgument(0),
                                builder.getBoolAttr(decoupled),
                                builder.getBoolAttr(boolParam("bias_correction", true)));
      }
      builder.create<FillOp>(loc, grad, builder.getF64FloatAttr(0.0));
    }
    builder.create<func::ReturnOp>(loc);

    // @zero_grads
    builder.setInsertionPointAfter(update);
    auto zero = createFunction(builder, loc, "zero_grads", {}, {});
    builder.setInsertionPointToStart(&zero.getBody().front());
    for (TrainedParam p : trained)
      builder.create<FillOp>(loc, gradState(p, "grad"), builder.getF64FloatAttr(0.0));
    builder.create<func::ReturnOp>(loc);
  }
};

} // namespace
} // namespace zcc::zgraph
