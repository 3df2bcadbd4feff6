//===- KernelSupport.h - Shared helpers of the cpu kernels ------*- C++ -*-===//
//
// Argument checks, strict attribute readers, small fixed-capacity shapes and
// strided index walkers shared by the kernel files. Kernels must not touch the
// heap on their success path (a step allocates nothing), so everything here
// lives on the stack: shapes are capped at kMaxRank dimensions, attribute
// lists are read in place from the plan's protobuf, and only error paths
// build strings.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CPU_KERNELSUPPORT_H
#define ZCC_KERNELS_CPU_KERNELSUPPORT_H

#include "kernels/cpu/CpuKernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

namespace zcc::cpu::detail {

/// The most dimensions a kernel handles; ONNX models stay far below it.
constexpr int kMaxRank = 16;

/// A shape (or a set of strides) of at most kMaxRank dimensions, kept on the
/// stack.
class SmallShape {
public:
  SmallShape() = default;
  /// Leaves the shape empty when `dims` has more than kMaxRank entries;
  /// checkOperands has already refused such tensors.
  explicit SmallShape(const std::vector<int64_t> &dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t &operator[](int i) { return dims_[i]; }
  int64_t back() const { return dims_[rank_ - 1]; }
  const int64_t *begin() const { return dims_; }
  const int64_t *end() const { return dims_ + rank_; }

  /// Returns false (and changes nothing) when the shape is full.
  bool push_back(int64_t dim);
  void resize(int rank, int64_t fill = 0);

  /// Product of the dimensions (1 for rank 0).
  int64_t numElements() const;
  bool operator==(const SmallShape &other) const;
  bool operator!=(const SmallShape &other) const { return !(*this == other); }
  bool equals(const std::vector<int64_t> &dims) const;

private:
  int64_t dims_[kMaxRank] = {};
  int rank_ = 0;
};

/// "[2, 3, 4]" for messages.
std::string shapeString(const SmallShape &shape);
std::string shapeString(const std::vector<int64_t> &shape);

/// Row-major strides of a contiguous tensor, in elements.
SmallShape contiguousStrides(const SmallShape &shape);

/// The NumPy broadcast of `a` and `b` (trailing dimensions matched, 1
/// stretches); false when they are incompatible.
bool broadcastShapes(const SmallShape &a, const SmallShape &b,
                     SmallShape &result);

/// Strides (in elements) that read a contiguous tensor of `shape` as if it
/// were broadcast to `target`: 0 along stretched and missing dimensions.
/// `shape` must broadcast to `target`.
SmallShape broadcastStrides(const SmallShape &shape, const SmallShape &target);

/// Walks a row-major index space of `shape` and keeps, for each of N strided
/// operands, the element offset of the current index.
template <int N> class IndexWalker {
public:
  IndexWalker(const SmallShape &shape, const SmallShape (&strides)[N])
      : shape_(shape) {
    for (int op = 0; op < N; ++op) {
      strides_[op] = strides[op];
      offsets_[op] = 0;
    }
    index_.resize(shape.rank(), 0);
  }

  int64_t offset(int op) const { return offsets_[op]; }
  void setBase(int op, int64_t base) { offsets_[op] = base; }

  /// Advances to the next index; the offsets wrap back once past the end.
  void next() {
    for (int d = shape_.rank() - 1; d >= 0; --d) {
      ++index_[d];
      for (int op = 0; op < N; ++op)
        offsets_[op] += strides_[op][d];
      if (index_[d] < shape_[d])
        return;
      for (int op = 0; op < N; ++op)
        offsets_[op] -= strides_[op][d] * shape_[d];
      index_[d] = 0;
    }
  }

private:
  SmallShape shape_;
  SmallShape index_;
  SmallShape strides_[N];
  int64_t offsets_[N];
};

/// Calls `fn(i, offsets)` for every element i of `outShape` in row-major
/// order, where offsets[op] is the element of operand `op` (of shape
/// `inShapes[op]`, contiguous) that NumPy broadcasting reads for it.
template <int N, typename Fn>
void forEachBroadcast(const SmallShape &outShape,
                      const SmallShape (&inShapes)[N], Fn &&fn) {
  int64_t total = outShape.numElements();
  int64_t offsets[N];
  bool flat = true;
  for (int op = 0; op < N; ++op)
    flat &= inShapes[op] == outShape;
  if (flat) {
    for (int64_t i = 0; i < total; ++i) {
      for (int op = 0; op < N; ++op)
        offsets[op] = i;
      fn(i, offsets);
    }
    return;
  }
  SmallShape strides[N];
  for (int op = 0; op < N; ++op)
    strides[op] = broadcastStrides(inShapes[op], outShape);
  IndexWalker<N> walker(outShape, strides);
  for (int64_t i = 0; i < total; ++i) {
    for (int op = 0; op < N; ++op)
      offsets[op] = walker.offset(op);
    fn(i, offsets);
    walker.next();
  }
}

/// Fills the contiguous `dst` of `shape` from a strided view of `src`: the
/// element at index (i0, i1, ...) is read from element offset srcBase +
/// i0 * srcStrides[0] + i1 * srcStrides[1] + ... (elements of `elementBytes`
/// bytes). Transpose, slice and broadcast are all such views.
void stridedCopy(void *dst, const void *src, size_t elementBytes,
                 const SmallShape &shape, const SmallShape &srcStrides,
                 int64_t srcBase);

/// Copies one element of `bytes` bytes; constant sizes let the compiler emit
/// a plain load and store.
/// GELU's tanh form, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), in
/// double: the gelu kernel's and matmul's `activation = "gelu_tanh"`.
inline double geluTanh(double x) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
}

/// The tanh form's derivative in the compute type C (float or double), as
/// gelu_grad and matmul's `activation = "gelu_tanh_grad"` take it:
/// d/dx 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
template <typename C> C geluTanhDerivative(C v) {
  const C sqrt2OverPi = static_cast<C>(0.7978845608028654);
  const C cubic = static_cast<C>(0.044715);
  const C half = static_cast<C>(0.5), one = 1, three = 3;
  C t = std::tanh(sqrt2OverPi * (v + cubic * v * v * v));
  return half * (one + t) + half * v * (one - t * t) * sqrt2OverPi * (one + three * cubic * v * v);
}

inline void copyElement(void *dst, const void *src, size_t bytes) {
  switch (bytes) {
  case 1:
    std::memcpy(dst, src, 1);
    return;
  case 2:
    std::memcpy(dst, src, 2);
    return;
  case 4:
    std::memcpy(dst, src, 4);
    return;
  case 8:
    std::memcpy(dst, src, 8);
    return;
  default:
    std::memcpy(dst, src, bytes);
  }
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// A Status whose message starts with the kernel name: "<kernel>: <message>".
Status kernelError(StatusCode code, const char *kernel, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/// Checks the operand counts and that every view is usable: a known element
/// type, non-negative dimensions, at most kMaxRank of them, and data for
/// every non-empty tensor. The names are used in messages.
Status checkOperands(const KernelArgs &args, const char *kernel,
                     std::initializer_list<const char *> inputs,
                     std::initializer_list<const char *> outputs);

/// The same for a kernel with at least `minInputs` inputs, all called
/// `inputName` (numbered in messages), and one output.
Status checkVariadicOperands(const KernelArgs &args, const char *kernel,
                             size_t minInputs, const char *inputName,
                             const char *outputName);

Status expectDType(const char *kernel, const char *operand,
                   const TensorView &view, plan::DType expected);
Status expectSameDType(const char *kernel, const char *operand,
                       const TensorView &view, const char *otherOperand,
                       const TensorView &other);
Status expectShape(const char *kernel, const char *operand,
                   const TensorView &view, const SmallShape &expected);
Status expectSameShape(const char *kernel, const char *operand,
                       const TensorView &view, const char *otherOperand,
                       const TensorView &other);
/// Checks that `view` has the element type and the shape of `like`.
Status expectLike(const char *kernel, const char *operand,
                  const TensorView &view, const char *likeName,
                  const TensorView &like);
Status unsupportedDType(const char *kernel, const char *operand,
                        const TensorView &view, const char *supported);

/// Normalises `axis` (negative counts from the end) into [0, rank).
Status normalizeAxis(const char *kernel, const char *attr, int64_t axis,
                     int64_t rank, int64_t &result);

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//
//
// Unlike KernelArgs' lenient accessors these refuse an attribute of the wrong
// kind instead of quietly using the default, so a plan that spells an
// attribute wrongly fails loudly.

Status requiredInt(const KernelArgs &args, const char *kernel, const char *name,
                   int64_t &value);
Status optionalInt(const KernelArgs &args, const char *kernel, const char *name,
                   int64_t defaultValue, int64_t &value);
Status requiredFloat(const KernelArgs &args, const char *kernel,
                     const char *name, double &value);
/// Checks concat's operands: one element type, shapes equal outside the
/// `axis` attribute's dimension; gives the result's shape and the axis.
Status checkConcatOperands(const KernelArgs &args, const char *kernel,
                           SmallShape &expected, int &axis);

/// Checks where's operands: a bool condition, branches and result of one
/// element type, the result shaped as the three operands' broadcast.
Status checkWhereOperands(const KernelArgs &args, const char *kernel);

/// What matmul computes (both backends): numpy.matmul of lhs and rhs, each
/// with its last two dimensions swapped where `transpose_lhs` /
/// `transpose_rhs` says so, plus the optional third input `bias` [n] added
/// to every row of the product. lhs is read as [lhsBatch..., m, k] (stored
/// [lhsBatch..., k, m] when transposed), rhs as [rhsBatch..., k, n] (stored
/// [rhsBatch..., n, k]); a rank-1 lhs is one row (m = 1), a rank-1 rhs one
/// column (n = 1). The result is [batch..., m, n] without the dimensions a
/// rank-1 operand dropped.
struct MatmulOperands {
  SmallShape lhsBatch, rhsBatch, batch;
  int64_t m = 0, n = 0, k = 0;
  bool transposeLhs = false, transposeRhs = false;
  /// Null without a bias.
  const TensorView *bias = nullptr;
  /// `residual`: the last input, of the result's shape, added to the
  /// product (null without one).
  const TensorView *addend = nullptr;
  /// `activation = "gelu_tanh"`: GELU's tanh form applied last.
  bool geluTanh = false;
  /// `activation = "gelu_tanh_grad"`: the product times the tanh form's
  /// derivative at this input, of the result's shape (null otherwise).
  const TensorView *geluInput = nullptr;
  /// The optional second output: with "gelu_tanh" the sum before the GELU
  /// (of the result's type and shape), with "gelu_tanh_grad" the bias
  /// gradient (the result's sums over every row, a vector of its last
  /// dimension and element type); null without one.
  const TensorView *aux = nullptr;
  /// An f32 result of f16 or bf16 operands: the f32 sum itself, never
  /// rounded to the operands' type (a product whose only reader was a cast
  /// to f32); such a product has no epilogue.
  bool widened = false;
};

/// Checks matmul's operands and attributes and reads its sizes. The inputs
/// are lhs, rhs, then the bias where there is one, then the addend where
/// `residual` is set; with `activation = "gelu_tanh_grad"`, lhs, rhs and
/// the GELU's input. The outputs are the result and, with an activation,
/// optionally aux.
Status checkMatmulOperands(const KernelArgs &args, const char *kernel,
                           MatmulOperands &operands);

/// Checks layer_norm_grad's operand counts and names: input, scale, grad
/// and optionally an addend (set, else null); input_grad, scale_grad and
/// bias_grad.
Status checkLayerNormGradOperands(const KernelArgs &args, const char *kernel,
                                  const TensorView *&addend);

/// accumulate_matmul's sizes: target[m, n] += op(lhs)[m, k] op(rhs)[k, n].
struct AccumulateMatmulOperands {
  int64_t m = 0, n = 0, k = 0;
  bool transposeLhs = false, transposeRhs = false;
  /// `overwrite`: target = op(lhs) op(rhs) instead of +=.
  bool overwrite = false;
};

/// Checks accumulate_matmul's operands (matrices lhs and rhs of one float
/// type; the target, its only output, f32 for 16-bit and f32 operands, f64
/// for f64 ones) and reads its sizes.
Status checkAccumulateMatmulOperands(const KernelArgs &args, const char *kernel,
                                     AccumulateMatmulOperands &operands);

/// Checks an in-place optimizer's operands (adamw, sgd): every tensor but
/// `scalars` (input `scalarsIndex`) has the parameter's dtype (f32 or f64)
/// and shape. The outputs are the updated param and state, normally in the
/// inputs' own buffers; distinct ones work too, since every element is read
/// before it is written.
/// `optionalOutputs` more outputs may follow (the kernel checks them).
/// With `halfGradient`, input 1 (the gradient) of an f32 parameter may also
/// be f16 or bf16 of its shape.
Status checkOptimizerOperands(const KernelArgs &args, const char *kernel,
                              std::initializer_list<const char *> inputs,
                              std::initializer_list<const char *> outputs,
                              size_t scalarsIndex, size_t optionalOutputs = 0,
                              bool halfGradient = false);

/// A multi-tensor instruction (the compiler fuses the optimizer step's
/// adamw and fill instructions): members of `inputsPerMember` inputs each,
/// then `sharedInputs` inputs every member reads (the optimizer's scalars),
/// and of `outputsPerMember` outputs each. Sets `members` to their number,
/// or says which layout the operands miss. Member m's operands start at
/// inputs[m * inputsPerMember] and outputs[m * outputsPerMember].
Status countMembers(const KernelArgs &args, const char *kernel,
                    size_t inputsPerMember, size_t sharedInputs,
                    size_t outputsPerMember, size_t &members);

/// checkOptimizerOperands on one member of a multi-tensor step (the shared
/// scalars are checked once, apart): `inputs` and `outputs` point to the
/// member's first input (its param) and first output, named `inputNames`
/// and `outputNames`.
Status checkOptimizerMember(const char *kernel, const TensorView *inputs,
                            std::initializer_list<const char *> inputNames,
                            const TensorView *outputs,
                            std::initializer_list<const char *> outputNames);

/// Checks a multi-tensor adamw's operands (countMembers' layout with 4
/// inputs, 1 shared input and 3 outputs a tensor, or 4 when every tensor
/// also writes its updated parameter's 16-bit copy): each tensor as
/// checkOptimizerOperands checks a single one, all of the first tensor's
/// element type, the copies f16 or bf16, all of one type, each with its
/// parameter's elements. Sets `members` to the number of tensors and
/// `copies` to whether they write copies. The shared scalars are the
/// caller's to check.
Status checkMultiAdamwOperands(const KernelArgs &args, const char *kernel,
                               size_t &members, bool &copies);

/// A lamb_moments' or lamb_step's attributes (the zgraph ops').
struct LambOptions {
  double maxCoeff = 10.0, minCoeff = 0.01;
  bool biasCorrection = true, epsInsideSqrt = false;
};

/// Checks a lamb_moments' operands: (param, grad, exp_avg, exp_avg_sq,
/// scalars) in, (new_exp_avg, new_exp_avg_sq, squares) out, the tensors as
/// checkOptimizerOperands checks them, squares f64[2]. The scalars are the
/// caller's to check.
Status checkLambMomentsOperands(const KernelArgs &args, const char *kernel);

/// Checks a lamb_step's operands: (param, exp_avg, exp_avg_sq, scalars,
/// squares) in, new_param out, likewise.
Status checkLambStepOperands(const KernelArgs &args, const char *kernel);

/// Reads max_coeff, min_coeff, bias_correction and eps_inside_sqrt (each
/// optional, defaults as LambOptions) and checks 0 <= min_coeff <=
/// max_coeff, max_coeff > 0.
Status readLambOptions(const KernelArgs &args, const char *kernel, LambOptions &options);

/// Checks a class loss gradient's result: the input's shape, in its type or
/// (for an f32 input) in f16 or bf16, then in a buffer of its own.
Status checkClassLossGradResult(const char *kernel, const TensorView &result,
                                const TensorView &input);

/// Checks an adamw's `new_param_copy` result: f16 or bf16, with as many
/// elements as `param`, which is f32.
Status checkAdamwCopy(const char *kernel, const TensorView &copy,
                      const TensorView &param);

/// Checks fill's operands, one target or several (a multi-tensor fill: no
/// inputs, one output a target), each a float tensor, and reads `value`.
Status checkFillOperands(const KernelArgs &args, const char *kernel,
                         double &value);

/// What a dropout kernel reads besides its tensors (the attributes).
struct DropoutAttributes {
  double ratio = 0;
  uint64_t key = 0;
  int64_t sampleElements = 1;
};

/// Checks dropout's operands (a float input, the i64[2] state: the seed
/// and the micro-batch's first sample; a result like the input) and reads
/// its attributes: `ratio` in (0, 1), `key`, and `sample_elements`
/// dividing the input's elements.
Status checkDropoutOperands(const KernelArgs &args, const char *kernel,
                            DropoutAttributes &attributes);

/// Checks that `view` can be read or written at all: a known element type,
/// a supported rank, no negative dimension, data behind a non-empty view.
/// `role` is "operand" or "result", `index` (when not negative) numbers a
/// variadic one.
Status checkView(const char *kernel, const char *role, const char *name,
                 int index, const TensorView &view);

Status optionalBool(const KernelArgs &args, const char *kernel,
                    const char *name, bool defaultValue, bool &value);
/// `value` points into the attribute map: valid as long as the map is.
Status optionalString(const KernelArgs &args, const char *kernel,
                      const char *name, const char *defaultValue,
                      const char *&value);
/// Reads the int `axis` and normalises it into [0, rank).
Status requiredAxis(const KernelArgs &args, const char *kernel, int64_t rank,
                    int64_t &axis);
/// Reads an int list into `values` (at most kMaxRank entries).
Status requiredInts(const KernelArgs &args, const char *kernel,
                    const char *name, SmallShape &values);
/// The attribute `name`, or null when absent.
const plan::Attribute *findAttr(const KernelArgs &args, const char *name);

//===----------------------------------------------------------------------===//
// Checks a forward kernel shares with its gradient
//===----------------------------------------------------------------------===//

/// The part of a contiguous tensor that slice's `starts`, `limits` and
/// `strides` select: the window's shape, its strides and the offset of its
/// first element, both in elements of the tensor.
struct SliceWindow {
  SmallShape shape, strides;
  int64_t base = 0;
};

/// Reads and checks the slice attributes against `shape`, the shape of the
/// sliced tensor (named `operand` in messages).
Status readSliceWindow(const KernelArgs &args, const char *kernel,
                       const char *operand, const SmallShape &shape,
                       SliceWindow &window);

/// Whether `out` already is the window's elements of `in`: the window is
/// one contiguous range of `in` and `out` starts where it does (a slice
/// the plan made a view of its input). The slice kernels then move nothing.
bool sliceIsView(const SliceWindow &window, const TensorView &in, const TensorView &out);

/// A tensor seen as [outer, length, inner] around one axis.
struct AxisLayout {
  int64_t outer = 0, length = 0, inner = 1;
};

/// Reads the `axis` attribute for a tensor of `shape` (softmax and its
/// gradient) and the layout around that axis.
Status readAxisLayout(const KernelArgs &args, const char *kernel,
                      const SmallShape &shape, AxisLayout &layout);

/// gather's view of its data around `axis`: `outer` blocks of `extent`
/// slices of `sliceSize` elements each.
struct GatherLayout {
  int axis = 0;
  int64_t outer = 1, extent = 0, sliceSize = 1;
};

/// Reads gather's `axis` for data of `dataShape` and checks that its result
/// shape, dataShape[:axis] + indices.shape + dataShape[axis+1:], fits in
/// kMaxRank dimensions (`what` names that result in messages: "result" or
/// "gradient"); `gathered` gets that shape.
Status readGatherLayout(const KernelArgs &args, const char *kernel,
                        const std::vector<int64_t> &dataShape,
                        const TensorView &indices, const char *what,
                        GatherLayout &layout, SmallShape &gathered);

/// Checks every element of the i64 or i32 `indices` against [-extent,
/// extent).
Status checkIndices(const char *kernel, const TensorView &indices,
                    int64_t extent);

/// Reads layer_norm's `axis` and `epsilon` for an input of `shape`;
/// `normalized` gets the normalised (trailing) shape, that of the scale.
Status readLayerNormAttributes(const KernelArgs &args, const char *kernel,
                               const SmallShape &shape, double &epsilon,
                               SmallShape &normalized);

/// Where the rows of one attention operand lie, in elements from its
/// buffer's start: row i of head h (heads numbered batch-major, `groupHeads`
/// to a batch) starts at `rowStart(h, groupHeads) + i * row`. Contiguous
/// [heads, rows, width] operands have one group, head = rows * width and
/// row = width; a qkv_attention's operands are rows of the packed
/// [B, T, 3, H, d] projection.
struct AttentionRows {
  int64_t offset = 0, batch = 0, head = 0, row = 0;

  static AttentionRows contiguous(int64_t rows, int64_t width) {
    return {0, 0, rows * width, width};
  }
  int64_t rowStart(int64_t h, int64_t groupHeads) const {
    return offset + h / groupHeads * batch + h % groupHeads * head;
  }
};

/// The sizes of an attention: `heads` independent [queries, headSize] query
/// rows against [keys, headSize] keys and [keys, valueSize] values, laid
/// out as `query`, `key` and `value` say (each gradient as its operand),
/// with the result, its gradient and the saved output as `output` says.
struct AttentionDims {
  int64_t heads = 0, queries = 0, keys = 0, headSize = 0, valueSize = 0;
  int64_t groupHeads = 1;
  bool causal = false;
  AttentionRows query, key, value, output;

  /// Keys are aligned at the end: key j is visible to query i iff
  /// j <= i + keys - queries.
  int64_t visibleKeys(int64_t i) const {
    return causal ? std::min(keys, i + keys - queries + 1) : keys;
  }
};

/// Checks that query, key and value agree ([..., queries, headSize],
/// [..., keys, headSize], [..., keys, valueSize], one float type) and reads
/// their sizes; also checks `like`, called `likeName` (the attention's
/// result, or its gradient), against the result's type and shape [...,
/// queries, valueSize].
Status checkAttentionOperands(const char *kernel, const TensorView &query,
                              const TensorView &key, const TensorView &value,
                              const char *likeName, const TensorView &like,
                              AttentionDims &dims);

/// Reads attention's `scale` and `causal` (into `dims`); a causal attention
/// needs at least as many keys as queries.
Status readAttentionAttributes(const KernelArgs &args, const char *kernel,
                               AttentionDims &dims, double &scale);

/// attention's operands: query, key and value, the result, and optionally
/// a second result `lse` (f32, the query's shape without its last
/// dimension: each row's log-sum-exp of its scaled, masked scores), which
/// `lse` then points to (else null); also reads the attributes.
Status checkAttentionForward(const KernelArgs &args, const char *kernel,
                             AttentionDims &dims, double &scale,
                             const TensorView *&lse);

/// attention_grad's operands: query, key, value and the result's gradient,
/// optionally followed by the forward's saved result and lse (`output` and
/// `lse` then point to them, else null), and the three gradients; also
/// reads the attributes.
Status checkAttentionBackward(const KernelArgs &args, const char *kernel,
                              AttentionDims &dims, double &scale,
                              const TensorView *&output,
                              const TensorView *&lse);

/// The largest head size attention_grad takes (the cpu kernel keeps a
/// query row's output and gradient in stack arrays of this many doubles;
/// the cuda one refuses what the cpu would).
constexpr int64_t kAttentionGradMaxHeadSize = 1024;

/// Refuses head sizes above kAttentionGradMaxHeadSize.
Status checkAttentionGradHeadSizes(const char *kernel, const AttentionDims &dims);

/// qkv_attention's operands: the packed [B, T, 3, H, d] projection `qkv`
/// (query, key and value along its third dimension), the [B, T, H, d]
/// result and optionally `lse` ([B, H, T], f32); also reads the
/// attributes. `dims` gets B H heads of H to a group, laid out in place.
Status checkQkvAttentionForward(const KernelArgs &args, const char *kernel,
                                AttentionDims &dims, double &scale,
                                const TensorView *&lse);

/// qkv_attention_grad's operands: `qkv`, the [B, T, H, d] result's `grad`,
/// optionally the forward's saved `output` and `lse`, and `qkv_grad`,
/// shaped as `qkv`; also reads the attributes.
Status checkQkvAttentionBackward(const KernelArgs &args, const char *kernel,
                                 AttentionDims &dims, double &scale,
                                 const TensorView *&output,
                                 const TensorView *&lse);

/// How a class loss reduces over the label positions.
enum class Reduction { Mean, Sum, None };

/// Checks that `input` is [N, C] or [N, C, d1, ...] and `labels` [N] or
/// [N, d1, ...]; `labelShape` gets the latter.
Status checkClassLossShapes(const char *kernel, const TensorView &input,
                            const TensorView &labels, SmallShape &labelShape);

/// Reads a class loss's `reduction` ("mean" when absent) and
/// `ignore_index` (`hasIgnore` says whether it is there).
Status readClassLossAttributes(const KernelArgs &args, const char *kernel,
                               Reduction &reduction, bool &hasIgnore,
                               int64_t &ignoreIndex);

/// Checks every label of the i64 or i32 `labels` but `ignoreIndex` (where
/// `hasIgnore`) against [0, classes).
Status checkLabels(const char *kernel, const TensorView &labels,
                   int64_t classes, bool hasIgnore, int64_t ignoreIndex);

//===----------------------------------------------------------------------===//
// Element conversions
//===----------------------------------------------------------------------===//

/// IEEE binary16 and bfloat16 from and to f32, rounding to nearest even: the
/// conversions of Float16.h on raw bits.
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBFloat16(float value);
float bfloat16ToFloat(uint16_t bits);

} // namespace zcc::cpu::detail

#endif // ZCC_KERNELS_CPU_KERNELSUPPORT_H
