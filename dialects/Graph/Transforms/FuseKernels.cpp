//===- FuseKernels.cpp - Fold copies and adds into fewer kernels ----------===//
//
// After autodiff most memory traffic that is not a product's or attention's
// is copies and adds the graph spells out: transposed operands of the
// backward products, bias adds and residual adds after the forward ones, the
// GELU after an inference product and its gradient after a training one,
// the cast of a 16-bit product to f32, the zero-padded pieces of a Split's
// gradient summed back together, and the attention heads' transposes in
// and out of a fused query/key/value projection.
// Each rewrite here
// removes a whole pass over an activation-sized tensor; the attention's
// backward reads the softmax statistics its forward saved instead of a
// forward-sized pass recomputing them.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/MapVector.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace zcc::zgraph {
#define GEN_PASS_DEF_FUSEKERNELSPASS
#include "dialects/Graph/Transforms/Passes.h.inc"
} // namespace zcc::zgraph

using namespace mlir;

namespace zcc::zgraph {
namespace {

/// Whether `perm` swaps the last two dimensions and keeps the others.
bool swapsLastTwo(ArrayRef<int64_t> perm) {
  int64_t rank = static_cast<int64_t>(perm.size());
  if (rank < 2)
    return false;
  for (int64_t i = 0; i < rank - 2; ++i)
    if (perm[i] != i)
      return false;
  return perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 2;
}

/// matmul(transpose(a), b) -> matmul(a, b) {transpose_lhs}, and the same for
/// rhs; a transposed operand that is transposed again loses the flag.
struct FoldTransposeIntoMatMul : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatMulOp op, PatternRewriter &rewriter) const override {
    bool changed = false;
    for (unsigned index : {0u, 1u}) {
      auto transpose = op->getOperand(index).getDefiningOp<TransposeOp>();
      if (!transpose || !swapsLastTwo(transpose.getPerm()))
        continue;
      rewriter.modifyOpInPlace(op, [&] {
        op->setOperand(index, transpose.getInput());
        if (index == 0)
          op.setTransposeLhs(!op.getTransposeLhs());
        else
          op.setTransposeRhs(!op.getTransposeRhs());
      });
      changed = true;
    }
    return success(changed);
  }
};

/// transpose(matmul(a, b)) -> matmul(b, a) with both operands' flags
/// flipped: (op(A) op(B))^T = op(B)^T op(A)^T. This is the gradient of an
/// [out, in] weight (nn.Linear, Gemm with transB).
struct FoldTransposeOfMatMul : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp transpose, PatternRewriter &rewriter) const override {
    auto product = transpose.getInput().getDefiningOp<MatMulOp>();
    if (!product || product.hasEpilogue() || !transpose.getInput().hasOneUse() ||
        !swapsLastTwo(transpose.getPerm()) ||
        cast<RankedTensorType>(product.getLhs().getType()).getRank() < 2 ||
        cast<RankedTensorType>(product.getRhs().getType()).getRank() < 2)
      return failure();
    auto swapped = rewriter.create<MatMulOp>(product.getLoc(), transpose.getType(), Type(),
                                             product.getRhs(), product.getLhs(), Value(),
                                             Value(), Value(), !product.getTransposeRhs(),
                                             !product.getTransposeLhs(), StringAttr());
    for (NamedAttribute attr : product->getDiscardableAttrs())
      swapped->setAttr(attr.getName(), attr.getValue());
    rewriter.replaceOp(transpose, swapped.getResult());
    rewriter.eraseOp(product);
    return success();
  }
};

/// Makes `product` take the place of `replaced` (an add it is the only
/// operand of), with `bias` or `addend` (where not null) joining it. The
/// product moves to the add, after every operand of both, and keeps its
/// marks (pipeline stage, recompute) for later passes.
void absorbAdd(PatternRewriter &rewriter, MatMulOp product, Operation *replaced, Value bias,
               Value addend) {
  rewriter.moveOpBefore(product, replaced);
  rewriter.modifyOpInPlace(product, [&] {
    if (bias)
      product.getBiasMutable().assign(bias);
    if (addend)
      product.getAddendMutable().assign(addend);
  });
  rewriter.replaceOp(replaced, product.getResult());
}

/// add(matmul(a, b), bias) -> matmul(a, b, bias) for a vector bias of the
/// product's last dimension and a product used only by the add (and
/// without an activation, which the bias would have to precede).
struct FoldBiasIntoMatMul : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    for (auto [productValue, bias] :
         {std::pair{add.getLhs(), add.getRhs()}, std::pair{add.getRhs(), add.getLhs()}}) {
      auto product = productValue.getDefiningOp<MatMulOp>();
      if (!product || product.getBias() || product.getActivation() || product.isWidened() ||
          !productValue.hasOneUse() ||
          product.getType() != add.getType())
        continue;
      auto resultType = product.getType();
      auto biasType = cast<RankedTensorType>(bias.getType());
      if (resultType.getRank() < 1 || biasType.getRank() != 1 ||
          biasType.getDimSize(0) != resultType.getShape().back() ||
          biasType.getElementType() != resultType.getElementType())
        continue;
      absorbAdd(rewriter, product, add, bias, Value());
      return success();
    }
    return failure();
  }
};

/// Whether two ops carry the same marks (pipeline stage, backward,
/// recompute): an op fused into a product runs where the product does, so
/// one that runs elsewhere (the sum of a tied weight's gradients from two
/// pipeline stages) stays apart.
bool sameMarks(Operation *a, Operation *b) {
  return a->getDiscardableAttrDictionary() == b->getDiscardableAttrDictionary();
}

/// cast(matmul(a, b)) to f32 of a 16-bit product without an epilogue,
/// used only by the cast -> the product with an f32 result: cuBLASLt
/// writes its f32 sum as D, so the 16-bit result, its rounding and the
/// cast's pass are gone (the f32 logits of a language model's head). Not
/// for a gradient the step accumulates: zcc-dist-fuse-accumulate decides
/// those once ZeRO and the offloads have placed them (an accumulation or a
/// 16-bit offload reads the 16-bit product; ZeRO's f32 collectives get the
/// product widened there). A cast without marks
/// (mixed precision's, made after the pipeline partition) runs where its
/// product does. A reshape between the two (a language model's logits
/// flattened to [tokens, vocabulary] for its loss) is looked through: it
/// reshapes the f32 product instead.
struct FoldWideningIntoMatMul : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CastOp cast, PatternRewriter &rewriter) const override {
    Value input = cast.getInput();
    auto reshape = input.getDefiningOp<ReshapeOp>();
    if (reshape && input.hasOneUse())
      input = reshape.getInput();
    else
      reshape = ReshapeOp();
    auto product = input.getDefiningOp<MatMulOp>();
    if (!product || product.hasEpilogue() || product.isWidened() || !input.hasOneUse() ||
        !cast.getInput().hasOneUse() ||
        !(sameMarks(product, cast) || cast->getDiscardableAttrDictionary().empty()) ||
        (reshape && !sameMarks(product, reshape)) ||
        !isa<Float16Type, BFloat16Type>(product.getType().getElementType()) ||
        !cast.getType().getElementType().isF32() ||
        llvm::any_of(cast->getUsers(), [](Operation *user) { return isa<AccumulateOp>(user); }))
      return failure();
    Type f32 = cast.getType().getElementType();
    rewriter.modifyOpInPlace(product, [&] {
      product.getResult().setType(product.getType().clone(f32));
    });
    if (reshape) {
      rewriter.modifyOpInPlace(reshape, [&] { reshape.getResult().setType(cast.getType()); });
      rewriter.replaceOp(cast, reshape.getResult());
      return success();
    }
    rewriter.replaceOp(cast, product.getResult());
    return success();
  }
};

/// cast(cross_entropy_grad(x, labels, g)) from f32 to f16 or bf16, the
/// gradient read by nothing else -> the gradient written in 16 bits: the
/// loss's gradient over a language model's vocabulary, which mixed
/// precision narrows for the head's backward products. The kernel rounds
/// each f32 value once, as the cast did, so nothing changes but the f32
/// tensor and the cast's pass, which are gone.
template <typename GradOp> struct FoldNarrowingIntoClassLossGrad : OpRewritePattern<CastOp> {
  using OpRewritePattern<CastOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(CastOp cast, PatternRewriter &rewriter) const override {
    auto grad = cast.getInput().template getDefiningOp<GradOp>();
    if (!grad || !cast.getInput().hasOneUse() ||
        !(sameMarks(grad, cast) || cast->getDiscardableAttrDictionary().empty()) ||
        !grad.getInput().getType().getElementType().isF32() ||
        grad.getResult().getType() != grad.getInput().getType() ||
        !isa<Float16Type, BFloat16Type>(cast.getType().getElementType()))
      return failure();
    rewriter.modifyOpInPlace(grad, [&] { grad.getResult().setType(cast.getType()); });
    rewriter.replaceOp(cast, grad.getResult());
    return success();
  }
};

/// add(matmul(a, b [, bias]), r) -> matmul(a, b [, bias]) addend r for a
/// residual `r` of the product's own type and a product used only by the
/// add: cuBLASLt reads r as its C (beta = 1) and the add's pass over the
/// tensor is gone. A product that already has an addend or an activation,
/// or that runs elsewhere than the add, stays.
struct FoldResidualIntoMatMul : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    for (auto [productValue, residual] :
         {std::pair{add.getLhs(), add.getRhs()}, std::pair{add.getRhs(), add.getLhs()}}) {
      auto product = productValue.getDefiningOp<MatMulOp>();
      if (!product || product.getAddend() || product.getActivation() || product.isWidened() ||
          !productValue.hasOneUse() || residual.getType() != add.getType() ||
          product.getType() != add.getType() || !sameMarks(product, add))
        continue;
      absorbAdd(rewriter, product, add, Value(), residual);
      return success();
    }
    return failure();
  }
};

/// add(layer_norm_grad(x, g, dy)#0, r) -> layer_norm_grad(x, g, dy) addend
/// r, for an input gradient used only by the add and an `r` of its type
/// already computed where the gradient is (the residual stream's gradient
/// reaching the normalised value around the layer norm): the row kernel
/// adds r as it writes the input gradient, and the add's pass over the
/// tensor is gone.
struct FoldAddIntoLayerNormGrad : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    for (auto [gradient, addend] :
         {std::pair{add.getLhs(), add.getRhs()}, std::pair{add.getRhs(), add.getLhs()}}) {
      auto norm = gradient.getDefiningOp<LayerNormGradOp>();
      if (!norm || norm.getAddend() || gradient != norm.getInputGrad() || !gradient.hasOneUse() ||
          addend.getType() != add.getType() || gradient.getType() != add.getType() ||
          !sameMarks(norm, add) || addend.getParentBlock() != norm->getBlock())
        continue;
      if (Operation *def = addend.getDefiningOp(); def && !def->isBeforeInBlock(norm))
        continue;
      rewriter.modifyOpInPlace(norm, [&] { norm.getAddendMutable().assign(addend); });
      rewriter.replaceOp(add, norm.getInputGrad());
      return success();
    }
    return failure();
  }
};

/// gelu(matmul(a, b [, bias])) with the tanh form -> the product with
/// `activation = "gelu_tanh"`, where the product is used only by the GELU
/// (inference: in training gelu_grad reads the product too) and its
/// elements are 16-bit. f32 and f64 keep their gelu kernel: the cuda
/// matmul applies cuBLASLt's GELU to 16-bit products only (in f32 it is not
/// held to the cpu's results within 1e-5), so fusing theirs saves nothing.
struct FoldGeluIntoMatMul : OpRewritePattern<GeluOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GeluOp gelu, PatternRewriter &rewriter) const override {
    auto product = gelu.getInput().getDefiningOp<MatMulOp>();
    if (!product || gelu.getApproximate() != "tanh" || !gelu.getInput().hasOneUse() ||
        product.getAddend() || product.getActivation() || !sameMarks(product, gelu) ||
        !isa<Float16Type, BFloat16Type>(product.getType().getElementType()))
      return failure();
    rewriter.modifyOpInPlace(product, [&] { product.setActivation(StringRef("gelu_tanh")); });
    rewriter.replaceOp(gelu, product.getResult());
    return success();
  }
};

/// gelu_grad(u, matmul(a, b)) with the tanh form -> the product with
/// `activation = "gelu_tanh_grad"` and gelu_input u, where the product
/// (the gradient of the GELU's output: dY W^T of the next layer) is used
/// only there and its elements are 16-bit (as FoldGeluIntoMatMul). The
/// product moves to the gelu_grad, after u.
struct FoldGeluGradIntoMatMul : OpRewritePattern<GeluGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GeluGradOp gradient, PatternRewriter &rewriter) const override {
    auto product = gradient.getGrad().getDefiningOp<MatMulOp>();
    if (!product || gradient.getApproximate() != "tanh" || !gradient.getGrad().hasOneUse() ||
        product.hasEpilogue() || !sameMarks(product, gradient) ||
        product.getType() != gradient.getType() ||
        !isa<Float16Type, BFloat16Type>(product.getType().getElementType()))
      return failure();
    rewriter.moveOpBefore(product, gradient);
    rewriter.modifyOpInPlace(product, [&] {
      product.getGeluInputMutable().assign(gradient.getInput());
      product.setActivation(StringRef("gelu_tanh_grad"));
    });
    rewriter.replaceOp(gradient, product.getResult());
    return success();
  }
};

/// The leaves of the tree of single-use adds of `type` under `value`.
void collectSummands(Value value, Type type, SmallVectorImpl<Value> &leaves) {
  auto add = value.getDefiningOp<AddOp>();
  if (add && value.hasOneUse() && add.getLhs().getType() == type &&
      add.getRhs().getType() == type) {
    collectSummands(add.getLhs(), type, leaves);
    collectSummands(add.getRhs(), type, leaves);
    return;
  }
  leaves.push_back(value);
}

/// A sum of slice gradients that tile their tensor along one axis -> the
/// concatenation of the slices' gradients.
struct FoldSliceGradSumIntoConcat : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp root, PatternRewriter &rewriter) const override {
    Type type = root.getType();
    if (root.getLhs().getType() != type || root.getRhs().getType() != type)
      return failure();
    SmallVector<Value, 4> leaves;
    collectSummands(root.getLhs(), type, leaves);
    collectSummands(root.getRhs(), type, leaves);
    ArrayRef<int64_t> shape = cast<RankedTensorType>(type).getShape();
    int64_t rank = static_cast<int64_t>(shape.size());

    struct Piece {
      int64_t start, limit;
      Value grad;
    };
    SmallVector<Piece, 4> pieces;
    std::optional<int64_t> axis;
    for (Value leaf : leaves) {
      auto slice = leaf.getDefiningOp<SliceGradOp>();
      if (!slice || !leaf.hasOneUse())
        return failure();
      ArrayRef<int64_t> starts = slice.getStarts(), limits = slice.getLimits(),
                        strides = slice.getStrides();
      if (static_cast<int64_t>(starts.size()) != rank)
        return failure();
      for (int64_t d = 0; d < rank; ++d) {
        if (strides[d] != 1)
          return failure();
        if (starts[d] == 0 && limits[d] == shape[d])
          continue;
        if (axis && *axis != d)
          return failure();
        axis = d;
      }
      if (!axis)
        return failure();
      pieces.push_back({starts[*axis], limits[*axis], slice.getGrad()});
    }
    llvm::sort(pieces, [](const Piece &a, const Piece &b) { return a.start < b.start; });
    int64_t next = 0;
    for (const Piece &piece : pieces) {
      if (piece.start != next)
        return failure();
      next = piece.limit;
    }
    if (next != shape[*axis])
      return failure();
    SmallVector<Value, 4> inputs;
    for (const Piece &piece : pieces)
      inputs.push_back(piece.grad);
    auto concat = rewriter.create<ConcatOp>(root.getLoc(), type, inputs,
                                            rewriter.getI64IntegerAttr(*axis));
    for (NamedAttribute attr : root->getDiscardableAttrs())
      concat->setAttr(attr.getName(), attr.getValue());
    rewriter.replaceOp(root, concat.getResult());
    return success();
  }
};

/// Whether `value` is still read at or after `point`, or is small next to
/// `result` (a layer norm's scale and bias):
/// recomputing from it at `point` then holds no large value longer.
bool liveAtOrSmall(Value value, Operation *point, Value result) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getNumElements() * 64 <= cast<RankedTensorType>(result.getType()).getNumElements())
    return true;
  return llvm::any_of(value.getUsers(), [&](Operation *user) {
    return user->getBlock() == point->getBlock() && !user->isBeforeInBlock(point);
  });
}

/// What recomputeForBackward did: the outputs it recomputed and their
/// bytes, of those it could have.
struct Recomputed {
  int64_t outputs = 0, bytes = 0, candidates = 0, candidateBytes = 0;
};

int64_t tensorBytes(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getNumElements() *
         static_cast<int64_t>(llvm::divideCeil(type.getElementTypeBitWidth(), 8));
}

/// A GELU's or a layer norm's output is read again in the backward pass by
/// a weight gradient (the next product's dW = x^T dY), while its inputs stay
/// live there anyway (gelu_grad and layer_norm_grad read them): recomputing
/// it right before its first backward use (one element-wise or row kernel)
/// frees an activation-sized buffer between the forward and the backward
/// pass. The backward pass starts at the block's first gradient op; every
/// backward use reads one clone. The clone gives the same bits. Outputs are
/// taken in forward order until `byteCap` bytes are recomputed (0: all).
void recomputeForBackward(Block &block, int64_t byteCap, Recomputed &done) {
  Operation *firstGrad = nullptr;
  for (Operation &op : block)
    if (op.getName().stripDialect().ends_with("_grad")) {
      firstGrad = &op;
      break;
    }
  if (!firstGrad)
    return;
  SmallVector<Operation *> candidates;
  for (Operation &op : block) {
    if (&op == firstGrad)
      break;
    if (isa<GeluOp, LayerNormOp>(op) && op.getNumResults() == 1)
      candidates.push_back(&op);
  }
  for (Operation *op : candidates) {
    Value result = op->getResult(0);
    SmallVector<OpOperand *> late;
    for (OpOperand &use : result.getUses())
      if (firstGrad->isBeforeInBlock(use.getOwner()))
        late.push_back(&use);
    if (late.empty())
      continue;
    Operation *earliest = late.front()->getOwner();
    for (OpOperand *use : late)
      if (use->getOwner()->isBeforeInBlock(earliest))
        earliest = use->getOwner();
    if (!llvm::all_of(op->getOperands(),
                      [&](Value operand) { return liveAtOrSmall(operand, earliest, result); }))
      continue;
    ++done.candidates;
    done.candidateBytes += tensorBytes(result);
    if (byteCap > 0 && done.bytes >= byteCap)
      continue;
    ++done.outputs;
    done.bytes += tensorBytes(result);
    OpBuilder builder(earliest);
    Operation *clone = builder.clone(*op);
    // A pipeline stage recomputes in its backward program.
    if (clone->hasAttr("zdist.stage"))
      clone->setAttr("zdist.backward", builder.getUnitAttr());
    for (OpOperand *use : late)
      use->set(clone->getResult(0));
  }
}

/// A copy of `product` with an `aux` result of `auxType` and `activation`,
/// placed where it is; the caller moves the uses and erases the original.
MatMulOp withAux(MatMulOp product, Type auxType, StringRef activation) {
  OpBuilder builder(product);
  auto fused = builder.create<MatMulOp>(
      product.getLoc(), product.getType(), auxType, product.getLhs(), product.getRhs(),
      product.getBias(), product.getAddend(), product.getGeluInput(), product.getTransposeLhs(),
      product.getTransposeRhs(), builder.getStringAttr(activation));
  fused->setDiscardableAttrs(product->getDiscardableAttrDictionary());
  return fused;
}

bool isSixteenBit(Type type) {
  return isa<Float16Type, BFloat16Type>(cast<RankedTensorType>(type).getElementType());
}

/// gelu(u) of the tanh form, where u = matmul(a, b [, bias]) is read by
/// more than the GELU (training: gelu_grad, or the product that took its
/// place, reads u in the backward pass) -> one product writing both, as
/// cuBLASLt's GELU_AUX epilogue does: the GELU's output as the result and u
/// as aux. The GELU's pass over u goes. 16-bit products only, as
/// FoldGeluIntoMatMul. Run after recomputeForBackward: a GELU output the
/// backward pass recomputes (a second gelu of u) keeps its kernel, so that
/// the clone gives the forward GELU's bits.
void foldGeluKeepingItsInput(Block &block) {
  // Collected first: the loop erases the ops it folds.
  for (GeluOp gelu : llvm::to_vector(block.getOps<GeluOp>())) {
    Value u = gelu.getInput();
    auto product = u.getDefiningOp<MatMulOp>();
    if (!product || gelu.getApproximate() != "tanh" || product.getAddend() ||
        product.getActivation() || product.isWidened() || !sameMarks(product, gelu) ||
        !isSixteenBit(product.getType()) ||
        llvm::any_of(u.getUsers(), [&](Operation *user) {
          return user != gelu.getOperation() && isa<GeluOp>(user);
        }))
      continue;
    MatMulOp fused = withAux(product, product.getType(), "gelu_tanh");
    gelu.getResult().replaceAllUsesWith(fused.getResult());
    gelu.erase();
    u.replaceAllUsesWith(fused.getAux());
    product.erase();
  }
}

/// reduce_sum(matmul(dy, w) gelu_input u {gelu_tanh_grad}) over every
/// dimension but the last (the gradient of the bias before the GELU: its
/// rows' sums) -> the product's aux: one instruction gives the gradient
/// and its bias's. (The cuda kernel sums the rows with reduce_sum's
/// kernels after the product: cuBLASLt's DGELU_BGRAD epilogue, which would
/// sum them in registers, measured 2.5 times the product's time on an
/// H100; bench/NOTES.md.)
void foldBiasGradIntoGeluGrad(Block &block) {
  for (ReduceSumOp sum : llvm::to_vector(block.getOps<ReduceSumOp>())) {
    auto product = sum.getInput().getDefiningOp<MatMulOp>();
    if (!product || product.getAux() || product.getActivation() != "gelu_tanh_grad" ||
        !sameMarks(product, sum))
      continue;
    int64_t rank = product.getType().getRank();
    RankedTensorType summed = sum.getResult().getType();
    if (sum.getKeepdims() || rank < 2 || summed.getRank() != 1 ||
        sum.getAxes() != ArrayRef<int64_t>(llvm::to_vector(llvm::seq<int64_t>(0, rank - 1))))
      continue;
    MatMulOp fused = withAux(product, summed, "gelu_tanh_grad");
    sum.getResult().replaceAllUsesWith(fused.getAux());
    sum.erase();
    product.getResult().replaceAllUsesWith(fused.getResult());
    product.erase();
  }
}

/// An attention whose backward is in the same function keeps its softmax
/// statistics for it, as FlashAttention-2 does: the forward also returns
/// each query row's log-sum-exp, and the attention_grad reads that and the
/// forward's result instead of recomputing them (a forward-sized pass of
/// the backward). Each gradient pairs with the nearest attention before it
/// with the same operands and attributes: under activation checkpointing,
/// the recomputed one.
void saveAttentionStatistics(Block &block) {
  for (AttentionGradOp grad : llvm::to_vector(block.getOps<AttentionGradOp>())) {
    if (grad.getOutput())
      continue;
    AttentionOp forward;
    for (Operation *op = grad->getPrevNode(); op && !forward; op = op->getPrevNode())
      if (auto attention = dyn_cast<AttentionOp>(op))
        if (attention.getQuery() == grad.getQuery() && attention.getKey() == grad.getKey() &&
            attention.getValue() == grad.getValue() &&
            attention.getScaleAttr() == grad.getScaleAttr() &&
            attention.getCausal() == grad.getCausal() &&
            attention.getResult().getType() == grad.getGrad().getType())
          forward = attention;
    if (!forward)
      continue;
    if (!forward.getLse()) {
      OpBuilder builder(forward);
      auto lseType = RankedTensorType::get(forward.getQuery().getType().getShape().drop_back(),
                                           builder.getF32Type());
      auto withLse = builder.create<AttentionOp>(
          forward.getLoc(), forward.getResult().getType(), lseType, forward.getQuery(),
          forward.getKey(), forward.getValue(), forward.getScaleAttr(), forward.getCausalAttr());
      // Marks later passes read (pipeline stage, recompute) stay with it.
      withLse->setDiscardableAttrs(forward->getDiscardableAttrDictionary());
      forward.getResult().replaceAllUsesWith(withLse.getResult());
      forward.erase();
      forward = withLse;
    }
    grad.getOutputMutable().assign(forward.getResult());
    grad.getLseMutable().assign(forward.getLse());
  }
}

/// A slice of a [B, T, 3 C] projection's columns [i C, (i + 1) C) viewed as
/// [B, T, H, d] heads and transposed to [B, H, T, d] (the exported
/// attention's query, key or value): the transpose, and i; null where
/// `slice` is not one.
TransposeOp headsOfThird(SliceOp slice, int64_t &index) {
  auto input = cast<RankedTensorType>(slice.getInput().getType());
  ArrayRef<int64_t> shape = input.getShape();
  if (input.getRank() != 3 || shape[2] % 3 != 0 || !slice->hasOneUse())
    return {};
  int64_t third = shape[2] / 3;
  ArrayRef<int64_t> starts = slice.getStarts(), limits = slice.getLimits();
  if (starts[0] != 0 || starts[1] != 0 || limits[0] != shape[0] || limits[1] != shape[1] ||
      starts[2] % third != 0 || limits[2] != starts[2] + third ||
      llvm::any_of(slice.getStrides(), [](int64_t s) { return s != 1; }))
    return {};
  auto reshape = dyn_cast<ReshapeOp>(*slice->user_begin());
  if (!reshape || !reshape->hasOneUse())
    return {};
  ArrayRef<int64_t> heads = reshape.getType().getShape();
  if (heads.size() != 4 || heads[0] != shape[0] || heads[1] != shape[1] ||
      heads[2] * heads[3] != third)
    return {};
  auto transpose = dyn_cast<TransposeOp>(*reshape->user_begin());
  if (!transpose || transpose.getPerm() != ArrayRef<int64_t>{0, 2, 1, 3})
    return {};
  index = starts[2] / third;
  return transpose;
}

/// The head transposes of one fused projection's three slices, in query,
/// key, value order; false where the slices are not those three.
bool headsOfProjection(ArrayRef<SliceOp> slices, TransposeOp (&heads)[3]) {
  if (slices.size() != 3)
    return false;
  for (TransposeOp &head : heads)
    head = {};
  for (SliceOp slice : slices) {
    int64_t index = -1;
    TransposeOp transpose = headsOfThird(slice, index);
    if (!transpose || heads[index])
      return false;
    heads[index] = transpose;
  }
  return true;
}

/// The three head splits of one fused query/key/value projection become
/// one transpose of the projection viewed [B, T, 3, H, d] into
/// [3, B, H, T, d], whose leading slices are the query, key and value:
/// contiguous thirds, which the plan makes views, so one copy moves the
/// bytes where three slices and three transposes moved them twice.
void splitHeadsOnce(Block &block) {
  llvm::MapVector<Value, SmallVector<SliceOp>> byInput;
  for (Operation &op : block)
    if (auto slice = dyn_cast<SliceOp>(op))
      byInput[slice.getInput()].push_back(slice);
  for (auto &[input, slices] : byInput) {
    TransposeOp heads[3];
    if (!headsOfProjection(slices, heads))
      continue;
    ArrayRef<int64_t> shape = cast<RankedTensorType>(input.getType()).getShape();
    ArrayRef<int64_t> split = cast<RankedTensorType>(heads[0].getType()).getShape();
    int64_t batch = shape[0], length = shape[1], count = split[1], size = split[3];
    Type element = cast<RankedTensorType>(input.getType()).getElementType();
    Operation *first = slices.front();
    for (SliceOp slice : slices)
      if (slice->isBeforeInBlock(first))
        first = slice;
    OpBuilder builder(first);
    Location loc = heads[0].getLoc();
    SmallVector<NamedAttribute> marks;
    for (NamedAttribute attr : first->getAttrs())
      if (attr.getName().getValue().starts_with("zdist."))
        marks.push_back(attr);
    auto mark = [&](Operation *op) {
      for (NamedAttribute attr : marks)
        op->setAttr(attr.getName(), attr.getValue());
      return op;
    };
    auto viewed = builder.create<ReshapeOp>(
        loc, RankedTensorType::get({batch, length, 3, count, size}, element), input);
    auto moved = builder.create<TransposeOp>(
        loc, RankedTensorType::get({3, batch, count, length, size}, element), viewed,
        builder.getDenseI64ArrayAttr({2, 0, 3, 1, 4}));
    mark(viewed);
    mark(moved);
    for (int64_t i = 0; i < 3; ++i) {
      auto third = builder.create<SliceOp>(
          heads[i].getLoc(), RankedTensorType::get({1, batch, count, length, size}, element),
          moved, builder.getDenseI64ArrayAttr({i, 0, 0, 0, 0}),
          builder.getDenseI64ArrayAttr({i + 1, batch, count, length, size}),
          builder.getDenseI64ArrayAttr({1, 1, 1, 1, 1}));
      auto head = builder.create<ReshapeOp>(heads[i].getLoc(), heads[i].getType(), third);
      mark(third);
      mark(head);
      Operation *reshape = heads[i].getInput().getDefiningOp();
      heads[i].getResult().replaceAllUsesWith(head.getResult());
      heads[i].erase();
      reshape->erase();
    }
    for (SliceOp slice : slices)
      slice.erase();
  }
}

/// Whether `op` is an attention or an attention gradient with `heads` as
/// its query, key and value, and nowhere else.
bool attendsTo(Operation *op, TransposeOp (&heads)[3]) {
  if (!isa<AttentionOp, AttentionGradOp>(op))
    return false;
  for (OpOperand &operand : op->getOpOperands()) {
    unsigned index = operand.getOperandNumber();
    bool head = llvm::any_of(heads, [&](TransposeOp h) { return operand.get() == h.getResult(); });
    if (index < 3 ? operand.get() != heads[index].getResult() : head)
      return false;
  }
  return true;
}

/// `value`, [B, H, T, d] or [B, T, H, d], with its middle dimensions
/// swapped: the input of the transpose that made it where there is one.
Value swapMiddle(OpBuilder &builder, Operation *owner, Value value) {
  if (auto transpose = value.getDefiningOp<TransposeOp>())
    if (transpose.getPerm() == ArrayRef<int64_t>{0, 2, 1, 3})
      return transpose.getInput();
  auto type = cast<RankedTensorType>(value.getType());
  ArrayRef<int64_t> shape = type.getShape();
  auto swapped = builder.create<TransposeOp>(
      owner->getLoc(),
      RankedTensorType::get({shape[0], shape[2], shape[1], shape[3]}, type.getElementType()),
      value, builder.getDenseI64ArrayAttr({0, 2, 1, 3}));
  swapped->setDiscardableAttrs(owner->getDiscardableAttrDictionary());
  return swapped.getResult();
}

/// The concatenation that joins an attention gradient's three results,
/// each transposed to [B, T, H, d] and viewed [B, T, H d], in query, key,
/// value order, into the projection's [B, T, 3 H d] gradient (the
/// backward of the exported Split); null where there is none. `chain`
/// gets the transposes and views between.
ConcatOp concatOfHeadGrads(AttentionGradOp grad, SmallVectorImpl<Operation *> &chain) {
  ConcatOp concat;
  for (auto [index, result] : llvm::enumerate(grad->getResults())) {
    if (!result.hasOneUse())
      return {};
    auto transpose = dyn_cast<TransposeOp>(*result.user_begin());
    if (!transpose || transpose.getPerm() != ArrayRef<int64_t>{0, 2, 1, 3} ||
        !transpose->hasOneUse())
      return {};
    ArrayRef<int64_t> rows = transpose.getType().getShape();
    auto reshape = dyn_cast<ReshapeOp>(*transpose->user_begin());
    if (!reshape || !reshape->hasOneUse() ||
        reshape.getType().getShape() != ArrayRef<int64_t>{rows[0], rows[1], rows[2] * rows[3]})
      return {};
    auto user = dyn_cast<ConcatOp>(*reshape->user_begin());
    if (!user || (concat && user != concat) || user.getInputs().size() != 3 ||
        user.getInputs()[index] != reshape.getResult() || user.getAxis() != 2)
      return {};
    concat = user;
    chain.push_back(reshape);
    chain.push_back(transpose);
  }
  return concat;
}

/// The attentions and attention gradients over the three heads of one
/// fused query/key/value projection become qkv_attention and
/// qkv_attention_grad over the projection viewed [B, T, 3, H, d]. Their
/// kernels read each head's rows in place and write the result as [B, T,
/// H, d] and the gradient as [B, T, 3, H, d], so neither the heads'
/// transposes in and out nor the gradients' transposes back and their
/// concatenation are left: four activation-sized copies of the forward and
/// seven of the backward. A projection whose heads have other readers keeps
/// its slices (splitHeadsOnce then takes them).
void packAttentionHeads(Block &block) {
  llvm::MapVector<Value, SmallVector<SliceOp>> byInput;
  for (Operation &op : block)
    if (auto slice = dyn_cast<SliceOp>(op))
      byInput[slice.getInput()].push_back(slice);
  for (auto &[input, slices] : byInput) {
    TransposeOp heads[3];
    if (!headsOfProjection(slices, heads))
      continue;
    SmallVector<Operation *> users;
    bool packable = true;
    for (TransposeOp head : heads)
      for (Operation *user : head->getUsers()) {
        packable &= attendsTo(user, heads);
        if (!llvm::is_contained(users, user))
          users.push_back(user);
      }
    if (!packable || users.empty())
      continue;

    ArrayRef<int64_t> shape = cast<RankedTensorType>(input.getType()).getShape();
    ArrayRef<int64_t> split = cast<RankedTensorType>(heads[0].getType()).getShape();
    Type element = cast<RankedTensorType>(input.getType()).getElementType();
    int64_t batch = shape[0], length = shape[1], count = split[1], size = split[3];
    Operation *first = slices.front();
    for (SliceOp slice : slices)
      if (slice->isBeforeInBlock(first))
        first = slice;
    OpBuilder builder(first);
    auto packed = builder.create<ReshapeOp>(
        heads[0].getLoc(), RankedTensorType::get({batch, length, 3, count, size}, element),
        input);
    packed->setDiscardableAttrs(first->getDiscardableAttrDictionary());
    auto rowsType = RankedTensorType::get({batch, length, count, size}, element);

    // The forwards first: a gradient's saved output is a forward's result.
    llvm::stable_sort(users, [](Operation *a, Operation *b) {
      return isa<AttentionOp>(a) && !isa<AttentionOp>(b);
    });
    DenseMap<Value, Value> packedResults;
    SmallVector<Operation *> dead;
    for (Operation *user : users) {
      builder.setInsertionPoint(user);
      if (auto forward = dyn_cast<AttentionOp>(user)) {
        Value lse = forward.getLse();
        auto attention = builder.create<QkvAttentionOp>(
            forward.getLoc(), rowsType, lse ? lse.getType() : Type(), packed,
            forward.getScaleAttr(), forward.getCausalAttr());
        attention->setDiscardableAttrs(forward->getDiscardableAttrDictionary());
        if (lse)
          lse.replaceAllUsesWith(attention.getLse());
        packedResults[forward.getResult()] = attention.getResult();
        // The transpose back to [B, T, H, d] is the new result; a gradient
        // saving it is rebuilt below; any other reader gets [B, H, T, d]
        // through one transpose.
        Value headsFirst;
        for (OpOperand &use : llvm::make_early_inc_range(forward.getResult().getUses())) {
          Operation *reader = use.getOwner();
          auto transpose = dyn_cast<TransposeOp>(reader);
          if (transpose && transpose.getPerm() == ArrayRef<int64_t>{0, 2, 1, 3}) {
            transpose.getResult().replaceAllUsesWith(attention.getResult());
            transpose.erase();
            continue;
          }
          // A gradient rebuilt below that saves this result as its output.
          if (auto gradient = dyn_cast<AttentionGradOp>(reader);
              gradient && llvm::is_contained(users, reader) &&
              gradient.getOutput() && &use == &gradient.getOutputMutable()[0])
            continue;
          if (!headsFirst) {
            builder.setInsertionPointAfter(attention);
            headsFirst = swapMiddle(builder, forward, attention.getResult());
          }
          use.set(headsFirst);
        }
        dead.push_back(forward);
        continue;
      }
      auto gradient = cast<AttentionGradOp>(user);
      Value grad = swapMiddle(builder, gradient, gradient.getGrad());
      Value output = gradient.getOutput();
      if (output)
        output = packedResults.count(output) ? packedResults[output]
                                             : swapMiddle(builder, gradient, output);
      auto packedGrad = builder.create<QkvAttentionGradOp>(
          gradient.getLoc(), packed.getType(), packed, grad, output, gradient.getLse(),
          gradient.getScaleAttr(), gradient.getCausalAttr());
      packedGrad->setDiscardableAttrs(gradient->getDiscardableAttrDictionary());
      Operation *gradSource = gradient.getGrad().getDefiningOp();
      SmallVector<Operation *> chain;
      if (ConcatOp concat = concatOfHeadGrads(gradient, chain)) {
        builder.setInsertionPoint(concat);
        auto joined = builder.create<ReshapeOp>(concat.getLoc(), concat.getType(),
                                                packedGrad.getResult());
        joined->setDiscardableAttrs(concat->getDiscardableAttrDictionary());
        concat.getResult().replaceAllUsesWith(joined.getResult());
        concat.erase();
        for (Operation *op : chain)
          op->erase();
      } else {
        // Each head's gradient as [B, H, T, d]: a slice of the packed one,
        // viewed and transposed.
        builder.setInsertionPointAfter(packedGrad);
        for (auto [index, result] : llvm::enumerate(gradient->getResults())) {
          int64_t i = static_cast<int64_t>(index);
          auto third = builder.create<SliceOp>(
              gradient.getLoc(), RankedTensorType::get({batch, length, 1, count, size}, element),
              packedGrad.getResult(), builder.getDenseI64ArrayAttr({0, 0, i, 0, 0}),
              builder.getDenseI64ArrayAttr({batch, length, i + 1, count, size}),
              builder.getDenseI64ArrayAttr({1, 1, 1, 1, 1}));
          auto rows = builder.create<ReshapeOp>(gradient.getLoc(), rowsType, third);
          for (Operation *op : {third.getOperation(), rows.getOperation()})
            op->setDiscardableAttrs(gradient->getDiscardableAttrDictionary());
          result.replaceAllUsesWith(swapMiddle(builder, gradient, rows));
        }
      }
      gradient.erase();
      if (gradSource && isa<TransposeOp>(gradSource) && gradSource->use_empty())
        gradSource->erase();
    }
    for (Operation *op : dead)
      op->erase();
    for (int i = 0; i < 3; ++i) {
      Operation *reshape = heads[i].getInput().getDefiningOp();
      heads[i].erase();
      reshape->erase();
    }
    for (SliceOp slice : slices)
      slice.erase();
  }
}

struct FuseKernelsPass : impl::FuseKernelsPassBase<FuseKernelsPass> {
  using FuseKernelsPassBase::FuseKernelsPassBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldTransposeIntoMatMul, FoldTransposeOfMatMul, FoldBiasIntoMatMul,
                 FoldResidualIntoMatMul, FoldGeluIntoMatMul, FoldGeluGradIntoMatMul,
                 FoldSliceGradSumIntoConcat, FoldWideningIntoMatMul, FoldAddIntoLayerNormGrad,
                 FoldNarrowingIntoClassLossGrad<CrossEntropyGradOp>,
                 FoldNarrowingIntoClassLossGrad<NllLossGradOp>>(
        &getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    Recomputed recomputed;
    getOperation().walk([&](func::FuncOp func) {
      if (func.getBody().empty())
        return;
      Block &body = func.getBody().front();
      if (recompute)
        recomputeForBackward(body, recomputeBytes, recomputed);
      foldGeluKeepingItsInput(body);
      foldBiasGradIntoGeluGrad(body);
      saveAttentionStatistics(body);
      packAttentionHeads(body);
      splitHeadsOnce(body);
    });
    // For zcc's report: [outputs recomputed, their bytes, outputs that could
    // be, their bytes].
    if (recompute)
      getOperation()->setAttr(
          "zgraph.recomputed",
          DenseI64ArrayAttr::get(&getContext(),
                                 {recomputed.outputs, recomputed.bytes, recomputed.candidates,
                                  recomputed.candidateBytes}));
  }
};

} // namespace
} // namespace zcc::zgraph
