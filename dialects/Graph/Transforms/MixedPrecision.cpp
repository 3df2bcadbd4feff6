//===- MixedPrecision.cpp - fp16/bf16 compute over fp32 master weights ----===//
//
// Rewrites @main to compute in a 16-bit float type: every fp32 parameter
// stays fp32 (the master weights the optimizer updates) and is cast to the
// compute type where it is used; fp32 inputs and constants become 16-bit;
// every op then computes in 16-bit, except the losses, which take fp32
// operands and give an fp32 loss (as autocast keeps softmax and
// cross-entropy in fp32). Outputs keep their declared types. Autodiff then
// differentiates through the casts, so gradients come back to fp32 before
// they are accumulated.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace zcc::zgraph {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "dialects/Graph/Transforms/Passes.h.inc"
} // namespace zcc::zgraph

using namespace mlir;

namespace zcc::zgraph {
namespace {

bool isF32Tensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getElementType().isF32();
}

RankedTensorType withElement(Type type, Type element) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(), element);
}

struct MixedPrecisionPass : impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  using MixedPrecisionPassBase::MixedPrecisionPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string mode = precision.empty() ? configPrecision(module) : precision.getValue();
    if (mode.empty() || mode == "fp32")
      return;
    OpBuilder builder(module.getContext());
    Type low;
    if (mode == "fp16")
      low = builder.getF16Type();
    else if (mode == "bf16")
      low = builder.getBF16Type();
    else {
      module.emitError() << "unknown precision '" << mode << "'; use fp32, fp16 or bf16";
      return signalPassFailure();
    }
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.getBody().getBlocks().size() != 1) {
      module.emitError("mixed precision expects a single-block func.func @main");
      return signalPassFailure();
    }
    Block &body = main.getBody().front();
    auto castTo = [&](Location loc, Value value, Type element) -> Value {
      return builder.create<CastOp>(loc, withElement(value.getType(), element), value);
    };

    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    // Inputs: cast once at the entry.
    builder.setInsertionPointToStart(&body);
    for (BlockArgument argument : body.getArguments()) {
      if (!isF32Tensor(argument.getType()) || argument.use_empty())
        continue;
      Value cast = castTo(main.getLoc(), argument, low);
      argument.replaceAllUsesExcept(cast, cast.getDefiningOp());
    }

    for (Operation *op : ops) {
      Location loc = op->getLoc();
      if (auto param = dyn_cast<ParamOp>(op)) {
        if (!isF32Tensor(param.getType()))
          continue;
        if (lowPrecisionWeights) {
          // No master copy to keep: the parameter itself is 16-bit, and its
          // weight record says the file holds f32 (the loader narrows it).
          param.getResult().setType(cast<RankedTensorType>(withElement(param.getType(), low)));
          if (auto source = param->getAttrOfType<DictionaryAttr>("source")) {
            NamedAttrList fields(source);
            fields.set("dtype", TypeAttr::get(builder.getF32Type()));
            param->setAttr("source", fields.getDictionary(module.getContext()));
          }
          continue;
        }
        builder.setInsertionPointAfter(param);
        Value cast = castTo(loc, param, low);
        param.getResult().replaceAllUsesExcept(cast, cast.getDefiningOp());
        continue;
      }
      if (auto constant = dyn_cast<ConstantOp>(op)) {
        auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
        if (!dense || !dense.getElementType().isF32())
          continue;
        const llvm::fltSemantics &semantics = cast<FloatType>(low).getFloatSemantics();
        auto converted = dense.mapValues(low, [&](const APFloat &value) {
          APFloat result = value;
          bool lost = false;
          result.convert(semantics, APFloat::rmNearestTiesToEven, &lost);
          return result.bitcastToAPInt();
        });
        builder.setInsertionPoint(constant);
        auto replacement = builder.create<ConstantOp>(loc, converted);
        constant.getResult().replaceAllUsesWith(replacement);
        constant.erase();
        continue;
      }
      if (isa<func::ReturnOp>(op)) {
        builder.setInsertionPoint(op);
        for (OpOperand &operand : op->getOpOperands()) {
          Type declared = main.getResultTypes()[operand.getOperandNumber()];
          if (operand.get().getType() != declared && isF32Tensor(declared))
            operand.set(castTo(loc, operand.get(), builder.getF32Type()));
        }
        continue;
      }
      if (auto cast = dyn_cast<CastOp>(op)) {
        // An explicit conversion to fp32 now converts to the compute type.
        if (isF32Tensor(cast.getType()))
          cast.getResult().setType(withElement(cast.getType(), low));
        continue;
      }
      // Losses run in fp32; everything else in the low type.
      bool loss = isa<CrossEntropyOp, NllLossOp, MseLossOp>(op);
      Type operandElement = loss ? Type(builder.getF32Type()) : low;
      builder.setInsertionPoint(op);
      for (OpOperand &operand : op->getOpOperands()) {
        auto type = dyn_cast<RankedTensorType>(operand.get().getType());
        if (!type || !isa<FloatType>(type.getElementType()) ||
            type.getElementType() == operandElement)
          continue;
        if (!type.getElementType().isF32() && type.getElementType() != low)
          continue; // f64 and other float types are left alone
        operand.set(castTo(loc, operand.get(), operandElement));
      }
      if (!loss)
        for (Value result : op->getResults())
          if (isF32Tensor(result.getType()))
            result.setType(withElement(result.getType(), low));
    }
  }
};

} // namespace
} // namespace zcc::zgraph
