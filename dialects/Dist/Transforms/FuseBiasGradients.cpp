//===- FuseBiasGradients.cpp - Bias gradients from the weights' products --===//
//
// A linear layer y = x W + b has two parameter gradients that read the same
// output gradient dY: W's, x^T dY (a zgraph.accumulate_matmul by now), and
// b's, the column sums of dY (a zgraph.reduce_sum over every axis but the
// last). The product reads every element of dY already, so cuBLASLt sums
// the columns in the same pass (its BGRADA epilogue) and the separate
// reduction, which reads dY once more, goes.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/Transforms/Passes.h"
#include "dialects/Graph/IR/ZGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace zcc::zdist {
#define GEN_PASS_DEF_FUSEBIASGRADIENTSPASS
#include "dialects/Dist/Transforms/Passes.h.inc"
} // namespace zcc::zdist

using namespace mlir;

namespace zcc::zdist {
namespace {

/// The accumulator a value is (its state's name and kind), or none: only
/// zgraph.state targets take part, since several state ops of one name may
/// stand for the same bytes.
std::optional<std::pair<StringRef, StringRef>> stateKey(Value value) {
  auto state = value.getDefiningOp<zgraph::StateOp>();
  if (!state)
    return std::nullopt;
  return std::make_pair(state.getName(), state.getKind());
}

/// Whether `op` uses the accumulator `key` through any of its operands.
bool usesState(Operation *op, std::pair<StringRef, StringRef> key) {
  return llvm::any_of(op->getOperands(), [&](Value operand) { return stateKey(operand) == key; });
}

/// A bias gradient's write: `target (+)= reduce_sum(dY)` over every axis of
/// dY but the last, the sum read by nothing else.
struct BiasWrite {
  Operation *op = nullptr; // The zgraph.accumulate or zgraph.assign.
  zgraph::ReduceSumOp sum;
  Value target;
  bool overwrite = false;
};

std::optional<BiasWrite> matchBiasWrite(Operation *op) {
  BiasWrite write;
  Value value;
  if (auto accumulate = dyn_cast<zgraph::AccumulateOp>(op)) {
    value = accumulate.getValue();
    write.target = accumulate.getTarget();
  } else if (auto assign = dyn_cast<zgraph::AssignOp>(op)) {
    value = assign.getValue();
    write.target = assign.getTarget();
    write.overwrite = true;
  } else {
    return std::nullopt;
  }
  write.op = op;
  write.sum = value.getDefiningOp<zgraph::ReduceSumOp>();
  if (!write.sum || !value.hasOneUse() || write.sum.getKeepdims() || !stateKey(write.target))
    return std::nullopt;
  auto input = cast<RankedTensorType>(write.sum.getInput().getType());
  int64_t rank = input.getRank();
  if (rank < 2 || !llvm::equal(write.sum.getAxes(), llvm::seq<int64_t>(0, rank - 1)))
    return std::nullopt;
  return write;
}

/// Whether the product's rhs is dY itself or dY viewed as the matrix of
/// its rows.
bool readsRowsOf(Value rhs, Value dy) {
  if (rhs == dy)
    return true;
  auto reshape = rhs.getDefiningOp<zgraph::ReshapeOp>();
  if (!reshape || reshape.getInput() != dy)
    return false;
  auto from = cast<RankedTensorType>(dy.getType());
  auto to = cast<RankedTensorType>(rhs.getType());
  return to.getRank() == 2 && to.getDimSize(1) == from.getShape().back();
}

/// Fuses `write` into a product of its block, if one fits.
void fuse(BiasWrite write, ArrayRef<zgraph::AccumulateMatMulOp> products) {
  Value dy = write.sum.getInput();
  auto biasKey = *stateKey(write.target);
  for (zgraph::AccumulateMatMulOp product : products) {
    if (product.getBiasTarget() || !product.getTransposeLhs() || product.getTransposeRhs() ||
        product.getOverwrite() != write.overwrite || !readsRowsOf(product.getRhs(), dy) ||
        product.getTarget().getType().getElementType() !=
            cast<RankedTensorType>(write.target.getType()).getElementType() ||
        product->getDiscardableAttrDictionary() != write.op->getDiscardableAttrDictionary())
      continue;
    auto weightKey = stateKey(product.getTarget());
    if (!weightKey)
      continue;
    // Nothing between the two may touch either accumulator: the fused op
    // writes both where the later one ran.
    Operation *first = write.op, *last = product;
    if (last->isBeforeInBlock(first))
      std::swap(first, last);
    bool touched = false;
    for (Operation *op = first->getNextNode(); op != last && !touched; op = op->getNextNode())
      touched = usesState(op, biasKey) || usesState(op, *weightKey);
    if (touched)
      continue;
    OpBuilder builder(last);
    auto fused = builder.create<zgraph::AccumulateMatMulOp>(
        product.getLoc(), product.getTarget(), product.getLhs(), product.getRhs(), write.target,
        /*transpose_lhs=*/true, /*transpose_rhs=*/false, product.getOverwrite());
    for (NamedAttribute attr : product->getAttrs())
      fused->setAttr(attr.getName(), attr.getValue());
    zgraph::ReduceSumOp sum = write.sum;
    write.op->erase();
    sum.erase();
    product.erase();
    return;
  }
}

struct FuseBiasGradientsPass : impl::FuseBiasGradientsPassBase<FuseBiasGradientsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp func) {
      for (Block &block : func.getBody()) {
        SmallVector<BiasWrite> writes;
        for (Operation &op : block)
          if (std::optional<BiasWrite> write = matchBiasWrite(&op))
            writes.push_back(*write);
        for (BiasWrite write : writes) {
          // The block's products as they are now (an earlier fusion
          // replaced its own).
          SmallVector<zgraph::AccumulateMatMulOp> products(
              block.getOps<zgraph::AccumulateMatMulOp>());
          fuse(write, products);
        }
      }
    });
  }
};

} // namespace
} // namespace zcc::zdist
