//===- Linalg.cpp - Matrix products through cuBLASLt ----------------------===//
//
// matmul with numpy.matmul's semantics, as kernels/cpu/Linalg.cpp: rank-1
// operands, broadcast batch dimensions, transpose_lhs / transpose_rhs and an
// optional bias added to every row (checkMatmulOperands). Operands are
// row-major, so each product is computed as its transpose in cuBLASLt's
// column-major terms, C^T[n, m] = op(B)^T[n, k] op(A)^T[k, m], which reads
// the row-major buffers as they are: cuBLASLt's A is our rhs, its B our lhs,
// and a transposed operand is one cuBLASLt transposes (TRANSA for rhs,
// TRANSB for lhs). The bias, one value per row of that column-major result,
// is cuBLASLt's bias epilogue, added in the compute type before the result
// is rounded; an addend (`residual`) is cuBLASLt's C with beta = 1,
// `activation = "gelu_tanh"` its GELU epilogue (GELU_BIAS with a bias) and
// "gelu_tanh_grad" its DGELU epilogue, the GELU's input as the aux matrix.
// matmul's optional aux output is GELU_AUX's (the sum before the GELU) or
// the bias gradient beside DGELU: the result's sums over its rows, by
// reduce_sum's kernels after the product (cuBLASLt's DGELU_BGRAD took
// 762 us on gpt2-xl's [8192, 1600] x [1600, 6400] backward product where
// DGELU took 265 and the sums 50; bench/NOTES.md).
// Where no algorithm fuses the epilogue, the product runs without it and
// the bias rows, the addend and the GELU are separate launches around it.
// The batch becomes one strided-batched product where the
// operands' batch strides allow it (0 for a broadcast operand), else one
// such product per slice of the outer batch dimensions.
//
// f32 computes in f32 (never TF32: results are held to the cpu's within
// 1e-5), f64 in f64, f16 and bf16 in f32 with their partial sums kept in
// f32. Descriptors live on the stack (cuBLASLt's *Init calls), and the
// algorithm cuBLASLt's heuristic picks for a shape is kept in a fixed table
// (HeuristicCache), so a product allocates nothing of its own and a shape
// seen before skips the heuristic.
//
// accumulate_matmul is the same product with beta = 1 into an accumulator
// of f32 (f64 for f64 operands): a 16-bit weight gradient adds into its
// fp32 accumulator in the epilogue, never rounded to 16 bits. With
// `overwrite` (beta = 0) it writes the product there instead.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Kernels.h"

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/KernelSupport.h"
#include "kernels/cuda/ElementwiseLaunch.h"
#include "kernels/cuda/ReduceLaunch.h"
#include "kernels/cuda/ShapeLaunch.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>

namespace zcc::cuda::kernels {

using namespace cpu::detail;

namespace {

/// The cpu kernel's size limit, with its message, so both backends refuse
/// the same products.
Status checkBlasSize(const char *kernel, const char *what, int64_t value) {
  if (value <= INT_MAX)
    return Status::ok();
  return kernelError(StatusCode::kUnimplemented, kernel,
                     "%s %lld exceeds what BLAS addresses (%d)", what,
                     static_cast<long long>(value), INT_MAX);
}

/// checkBlasSize for each of a product's sizes.
Status checkBlasSizes(const char *kernel, int64_t m, int64_t n, int64_t k) {
  for (auto [what, value] : {std::pair<const char *, int64_t>{"M", m}, {"N", n}, {"K", k}})
    if (Status s = checkBlasSize(kernel, what, value); !s.isOk())
      return s;
  return Status::ok();
}

Status blasStatus(const char *kernel, const char *call, cublasStatus_t status) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return kernelError(StatusCode::kInternal, kernel, "%s failed: %s (%s)", call,
                     cublasLtGetStatusName(status),
                     cublasLtGetStatusString(status));
}

#define ZCC_BLAS_RETURN_IF_ERROR(kernel, call)                                 \
  do {                                                                         \
    if (Status blasStatus_ = blasStatus(kernel, #call, call);                  \
        !blasStatus_.isOk())                                                   \
      return blasStatus_;                                                      \
  } while (false)

/// The largest power of two (at most 256) that divides every value.
uint64_t commonAlignment(std::initializer_list<uint64_t> values) {
  uint64_t bits = 256;
  for (uint64_t value : values)
    bits |= value;
  return bits & (~bits + 1);
}

/// The batch of a product after dropping dimensions of size 1: for each
/// dimension its size and the element strides of lhs and rhs (0 where
/// broadcast; the result is contiguous).
struct BatchLayout {
  SmallShape dims, lhsStrides, rhsStrides;
};

BatchLayout batchLayout(const SmallShape &lhsBatch, const SmallShape &rhsBatch,
                        const SmallShape &batch, int64_t lhsMatrix,
                        int64_t rhsMatrix) {
  SmallShape lhsStrides = broadcastStrides(lhsBatch, batch);
  SmallShape rhsStrides = broadcastStrides(rhsBatch, batch);
  BatchLayout layout;
  for (int d = 0; d < batch.rank(); ++d) {
    if (batch[d] == 1)
      continue;
    layout.dims.push_back(batch[d]);
    layout.lhsStrides.push_back(lhsStrides[d] * lhsMatrix);
    layout.rhsStrides.push_back(rhsStrides[d] * rhsMatrix);
  }
  return layout;
}

/// One cuBLASLt product shape (in row-major terms: C[m, n] = op(A)[m, k]
/// op(B)[k, n], `batchCount` of them with the given element strides),
/// planned once and enqueued for each slice of the outer batch.
struct ProductPlan {
  int64_t m = 0, n = 0, k = 0;
  int64_t batchCount = 1, lhsStride = 0, rhsStride = 0, resultStride = 0;
  bool transposeLhs = false, transposeRhs = false;
};

template <typename T> struct BlasTypes;
template <> struct BlasTypes<float> {
  static constexpr ElementType element = ElementType::kF32;
  static constexpr cudaDataType_t data = CUDA_R_32F, scale = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using Scale = float;
};
template <> struct BlasTypes<double> {
  static constexpr ElementType element = ElementType::kF64;
  static constexpr cudaDataType_t data = CUDA_R_64F, scale = CUDA_R_64F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_64F;
  using Scale = double;
};
template <> struct BlasTypes<cpu::Half> {
  static constexpr ElementType element = ElementType::kF16;
  static constexpr cudaDataType_t data = CUDA_R_16F, scale = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using Scale = float;
};
template <> struct BlasTypes<cpu::BFloat16> {
  static constexpr ElementType element = ElementType::kBF16;
  static constexpr cudaDataType_t data = CUDA_R_16BF, scale = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using Scale = float;
};

/// A column-major layout of `rows` x `columns` (leading dimension `ld`),
/// `batchCount` times `stride` elements apart.
cublasStatus_t initLayout(cublasLtMatrixLayoutOpaque_t &layout,
                          cudaDataType_t type, int64_t rows, int64_t columns,
                          int64_t ld, int64_t batchCount, int64_t stride) {
  cublasStatus_t status =
      cublasLtMatrixLayoutInit(&layout, type, static_cast<uint64_t>(rows),
                               static_cast<uint64_t>(columns), ld);
  if (status != CUBLAS_STATUS_SUCCESS || batchCount == 1)
    return status;
  int32_t count = static_cast<int32_t>(batchCount);
  status = cublasLtMatrixLayoutSetAttribute(
      &layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
  if (status != CUBLAS_STATUS_SUCCESS)
    return status;
  return cublasLtMatrixLayoutSetAttribute(
      &layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
      sizeof(stride));
}

/// Everything cublasLtMatmulAlgoGetHeuristic is told about a product: the
/// handle (and so the device), the workspace, the type, the sizes, strides
/// and transposes (which fix every layout), the epilogue and the alignment
/// of every pointer it may assume (the bias's is read from its pointer).
struct HeuristicKey {
  cublasLtHandle_t handle = nullptr;
  size_t workspaceBytes = 0;
  int64_t m = 0, n = 0, k = 0;
  int64_t batchCount = 0, lhsStride = 0, rhsStride = 0, resultStride = 0;
  cudaDataType_t type = CUDA_R_32F, resultType = CUDA_R_32F;
  uint32_t aAlign = 0, bAlign = 0, cAlign = 0, biasAlign = 0, auxAlign = 0;
  bool transposeLhs = false, transposeRhs = false, bias = false, geluTanh = false;
  /// GELU_AUX: the sum before the GELU kept.
  bool geluAux = false;

  bool operator==(const HeuristicKey &o) const {
    return handle == o.handle && workspaceBytes == o.workspaceBytes &&
           m == o.m && n == o.n && k == o.k && batchCount == o.batchCount &&
           lhsStride == o.lhsStride && rhsStride == o.rhsStride &&
           resultStride == o.resultStride && type == o.type && resultType == o.resultType &&
           aAlign == o.aAlign && bAlign == o.bAlign && cAlign == o.cAlign &&
           biasAlign == o.biasAlign && auxAlign == o.auxAlign && transposeLhs == o.transposeLhs &&
           transposeRhs == o.transposeRhs && bias == o.bias && geluTanh == o.geluTanh &&
           geluAux == o.geluAux;
  }

  uint64_t hash() const {
    uint64_t h = 0;
    for (uint64_t v :
         {static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)),
          static_cast<uint64_t>(workspaceBytes), static_cast<uint64_t>(m),
          static_cast<uint64_t>(n), static_cast<uint64_t>(k),
          static_cast<uint64_t>(batchCount), static_cast<uint64_t>(lhsStride),
          static_cast<uint64_t>(rhsStride), static_cast<uint64_t>(resultStride),
          static_cast<uint64_t>(type) << 32 | static_cast<uint64_t>(resultType),
          static_cast<uint64_t>(aAlign) << 32 | bAlign,
          static_cast<uint64_t>(cAlign) << 32 | biasAlign,
          static_cast<uint64_t>(auxAlign),
          static_cast<uint64_t>(geluAux) << 4 |
              static_cast<uint64_t>(geluTanh) << 3 |
              static_cast<uint64_t>(transposeLhs) << 2 |
              static_cast<uint64_t>(transposeRhs) << 1 |
              static_cast<uint64_t>(bias)})
      h = (h ^ v) * 0x100000001b3ull + (h >> 29);
    return h;
  }
};

/// What the heuristic chose: the algorithm, whether the bias and the GELU
/// are its epilogue (false where no algorithm fuses them: they are then
/// launches of their own), and whether that epilogue also writes aux
/// (GELU_AUX's input; without it, GELU_AUX falls back to the bias alone).
struct HeuristicChoice {
  cublasLtMatmulAlgo_t algo = {};
  bool fusedEpilogue = false;
  bool fusedAux = false;
};

/// The heuristic's choices by key: an open-addressed table of fixed size
/// (entries are never removed), shared by every thread of the process
/// (ranks may run as threads of one process, each with its own handle).
/// Once it is full, further shapes go to the heuristic every time.
class HeuristicCache {
public:
  static HeuristicCache &get() {
    static HeuristicCache cache;
    return cache;
  }

  bool find(const HeuristicKey &key, HeuristicChoice &choice) {
    std::lock_guard<std::mutex> lock(mutex_);
    Slot *slot = probe(key);
    if (!slot || !slot->used)
      return false;
    choice = slot->choice;
    return true;
  }

  void insert(const HeuristicKey &key, const HeuristicChoice &choice) {
    std::lock_guard<std::mutex> lock(mutex_);
    Slot *slot = probe(key);
    if (!slot || slot->used)
      return; // Full, or another thread got there first.
    slot->used = true;
    slot->key = key;
    slot->choice = choice;
  }

private:
  static constexpr size_t kSlots = 256;
  struct Slot {
    bool used = false;
    HeuristicKey key;
    HeuristicChoice choice;
  };

  /// The slot holding `key`, or the free one where it would go; null when
  /// the table is full without it.
  Slot *probe(const HeuristicKey &key) {
    size_t start = static_cast<size_t>(key.hash() % kSlots);
    for (size_t i = 0; i < kSlots; ++i) {
      Slot &slot = slots_[(start + i) % kSlots];
      if (!slot.used || slot.key == key)
        return &slot;
    }
    return nullptr;
  }

  std::mutex mutex_;
  Slot slots_[kSlots];
};

/// What cuBLASLt's epilogue does to a product: the bias (null for none),
/// then GELU's tanh form, writing the sum before it to `preActivation`
/// where that is set (GELU_AUX); or, with `geluInput`, the product times
/// GELU's derivative at that aux matrix (DGELU). The aux matrix has
/// leading dimension `auxLd` and batch stride `auxStride` elements.
struct EpilogueDesc {
  const void *bias = nullptr;
  bool gelu = false;
  void *preActivation = nullptr;
  const void *geluInput = nullptr;
  int64_t auxLd = 0, auxStride = 0;
};

/// The operation C = op(A) op(B) with `epilogue`, column-major, of the
/// types of T.
template <typename T>
cublasStatus_t initOperation(cublasLtMatmulDescOpaque_t &operation,
                             bool transposeA, bool transposeB,
                             const EpilogueDesc &epilogue = {}) {
  using Types = BlasTypes<T>;
  cublasStatus_t status =
      cublasLtMatmulDescInit(&operation, Types::compute, Types::scale);
  int32_t transpose = CUBLAS_OP_T;
  if (status == CUBLAS_STATUS_SUCCESS && transposeA)
    status = cublasLtMatmulDescSetAttribute(
        &operation, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose));
  if (status == CUBLAS_STATUS_SUCCESS && transposeB)
    status = cublasLtMatmulDescSetAttribute(
        &operation, CUBLASLT_MATMUL_DESC_TRANSB, &transpose, sizeof(transpose));
  const void *bias = epilogue.geluInput ? nullptr : epilogue.bias;
  const void *aux = epilogue.geluInput ? epilogue.geluInput : epilogue.preActivation;
  if (status != CUBLAS_STATUS_SUCCESS || (!bias && !epilogue.gelu && !aux))
    return status;
  // The bias has D's type (the default for these types) and, with a
  // strided batch, serves every product (a batch stride of 0, the
  // default). The aux matrix has D's type and layout.
  uint32_t mode = epilogue.geluInput ? CUBLASLT_EPILOGUE_DGELU
                  : !epilogue.gelu   ? CUBLASLT_EPILOGUE_BIAS
                  : aux              ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                             : CUBLASLT_EPILOGUE_GELU_AUX)
                  : bias             ? CUBLASLT_EPILOGUE_GELU_BIAS
                                     : CUBLASLT_EPILOGUE_GELU;
  status = cublasLtMatmulDescSetAttribute(&operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &mode,
                                          sizeof(mode));
  if (status == CUBLAS_STATUS_SUCCESS && bias)
    status = cublasLtMatmulDescSetAttribute(&operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                            sizeof(bias));
  if (status == CUBLAS_STATUS_SUCCESS && aux)
    status = cublasLtMatmulDescSetAttribute(&operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                            &aux, sizeof(aux));
  if (status == CUBLAS_STATUS_SUCCESS && aux)
    status = cublasLtMatmulDescSetAttribute(&operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                            &epilogue.auxLd, sizeof(epilogue.auxLd));
  if (status == CUBLAS_STATUS_SUCCESS && aux && epilogue.auxStride)
    status = cublasLtMatmulDescSetAttribute(
        &operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &epilogue.auxStride,
        sizeof(epilogue.auxStride));
  return status;
}

/// Sets every one of the `rows` rows of the contiguous `result` [rows, n]
/// to `bias` [n]: a broadcast copy.
Status fillBiasRows(const char *kernel, const LaunchContext &context,
                    const void *bias, void *result, int elementBytes,
                    int64_t rows, int64_t n) {
  StridedView view;
  view.elementBytes = elementBytes;
  view.shape.rank = view.strides.rank = 2;
  view.shape.dims[0] = rows;
  view.shape.dims[1] = n;
  view.strides.dims[0] = 0;
  view.strides.dims[1] = 1;
  return launchStatus(kernel, launchStridedCopy(result, bias, view, context.stream));
}

/// result[rows, n] = the bias rows + the addend, either of which may be
/// null (zeros for neither); the addend may be the result itself. The
/// elements are of `type`.
Status startWithBiasAndAddend(const char *kernel, const LaunchContext &context, ElementType type,
                              const void *bias, const void *addend, void *result, int64_t rows,
                              int64_t n) {
  int bytes = elementBytes(type);
  if (bias && addend) {
    BroadcastOperands sum;
    sum.outShape.rank = sum.inShapes[0].rank = 2;
    sum.outShape.dims[0] = sum.inShapes[0].dims[0] = rows;
    sum.outShape.dims[1] = sum.inShapes[0].dims[1] = n;
    sum.inShapes[1].rank = 1;
    sum.inShapes[1].dims[0] = n;
    sum.inputs[0] = addend;
    sum.inputs[1] = bias;
    sum.output = result;
    return launchStatus(kernel, launchBinary(BinaryOp::kAdd, type, sum, context.stream));
  }
  if (bias)
    return fillBiasRows(kernel, context, bias, result, bytes, rows, n);
  size_t total = static_cast<size_t>(rows * n) * static_cast<size_t>(bytes);
  cudaError_t error = addend ? (addend == result ? cudaSuccess
                                                 : cudaMemcpyAsync(result, addend, total,
                                                                   cudaMemcpyDeviceToDevice,
                                                                   context.stream))
                             : cudaMemsetAsync(result, 0, total, context.stream);
  if (error != cudaSuccess)
    return kernelError(StatusCode::kInternal, kernel, "%s failed: %s (%s)",
                       addend ? "cudaMemcpyAsync" : "cudaMemsetAsync", cudaGetErrorName(error),
                       cudaGetErrorString(error));
  return Status::ok();
}

/// sums[n] = the sums over the rows of the contiguous x[rows, n]: the bias
/// gradient beside a DGELU product that no epilogue wrote (reduce_sum's
/// kernels, with the cuBLASLt workspace, idle after the product on this
/// stream, for their partial sums).
Status sumRows(const char *kernel, const LaunchContext &context, ElementType type, const void *x,
               void *sums, int64_t rows, int64_t n) {
  ReduceParams params;
  params.type = type;
  params.kind = ReduceKind::kSum;
  params.input = x;
  params.result = sums;
  params.outputs = n;
  params.count = rows;
  params.keptShape.rank = params.keptStrides.rank = 1;
  params.keptShape.dims[0] = n;
  params.keptStrides.dims[0] = 1;
  params.reducedShape.rank = params.reducedStrides.rank = 1;
  params.reducedShape.dims[0] = rows;
  params.reducedStrides.dims[0] = n;
  params.workspace = context.workspace;
  params.workspaceBytes = context.workspace ? context.workspaceBytes : 0;
  return launchStatus(kernel, launchReduce(params, context.stream));
}

/// What joins a product before it is rounded (matmul's operands): `bias`
/// on every row, `addend` of the result's layout (which may be the result
/// itself), then GELU's tanh form, the sum before it kept in
/// `preActivation`; or the product times GELU's derivative at `geluInput`
/// (of the result's layout), its sums over the rows written to `biasGrad`.
/// Null pointers add or write nothing.
template <typename T> struct ProductEpilogue {
  const T *bias = nullptr;
  const T *addend = nullptr;
  bool geluTanh = false;
  T *preActivation = nullptr;
  const T *geluInput = nullptr;
  T *biasGrad = nullptr;
};

/// The index of the fastest of `count` candidates, each run by
/// `launch(i)` on `stream` (false: the candidate cannot run this product):
/// one warm-up launch, then the mean of three timed by events. Leaves the
/// stream idle. Candidate 0 when none ran.
template <typename Launch>
StatusOr<int> fastestCandidate(const char *kernel, cudaStream_t stream, int count,
                               Launch &&launch) {
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaError_t error = cudaEventCreate(&start);
  if (error == cudaSuccess)
    error = cudaEventCreate(&stop);
  int best = 0;
  float bestMs = 0;
  bool any = false;
  for (int i = 0; i < count && error == cudaSuccess; ++i) {
    if (!launch(i))
      continue;
    error = cudaEventRecord(start, stream);
    bool ran = error == cudaSuccess;
    for (int repeat = 0; repeat < 3 && ran; ++repeat)
      ran = launch(i);
    if (error == cudaSuccess)
      error = cudaEventRecord(stop, stream);
    if (error == cudaSuccess)
      error = cudaEventSynchronize(stop);
    float ms = 0;
    if (error == cudaSuccess)
      error = cudaEventElapsedTime(&ms, start, stop);
    if (error == cudaSuccess && ran && (!any || ms < bestMs)) {
      best = i;
      bestMs = ms;
      any = true;
    }
  }
  if (start)
    cudaEventDestroy(start);
  if (stop)
    cudaEventDestroy(stop);
  if (Status status = launchStatus(kernel, error); !status.isOk())
    return status;
  return best;
}

/// Runs `plan` once for each of the `sliceCount` slices that `nextSlice`
/// yields (element offsets of lhs, rhs and the result); every offset, in
/// bytes, is a multiple of `outerAlignment` (0 when there is one slice).
/// `epilogue` applies to the result, which has `resultRows` rows of plan.n
/// elements in all. With `accumulate` the products add into the result
/// (beta = 1), whose type R may be wider than the operands' (f32 for
/// 16-bit ones), and the epilogue is empty.
template <typename T, typename R, typename NextSlice>
Status runProducts(const char *kernel, const LaunchContext &context,
                   const ProductPlan &plan, const T *lhs, const T *rhs,
                   const ProductEpilogue<T> &epilogue, R *result, int64_t resultRows,
                   int64_t sliceCount, uint64_t outerAlignment,
                   NextSlice &&nextSlice, bool accumulate = false) {
  const T *bias = epilogue.bias;
  // The addend is C (beta = 1); with R wider than T there is none.
  const R *addend = nullptr;
  if constexpr (std::is_same_v<T, R>)
    addend = epilogue.addend;
  using Types = BlasTypes<T>;
  constexpr uint64_t kElement = sizeof(T);
  // Column-major: cuBLASLt's A is rhs as stored ([n, k] read as k x n
  // where transposed, else [k, n] read as n x k), its B lhs as stored
  // ([k, m] read as m x k where transposed, else [m, k] read as k x m),
  // its C and D result^T [n, m].
  cublasLtMatrixLayoutOpaque_t aLayout, bLayout, cLayout;
  ZCC_BLAS_RETURN_IF_ERROR(kernel,
                           initLayout(aLayout, Types::data,
                                      plan.transposeRhs ? plan.k : plan.n,
                                      plan.transposeRhs ? plan.n : plan.k,
                                      plan.transposeRhs ? plan.k : plan.n,
                                      plan.batchCount, plan.rhsStride));
  ZCC_BLAS_RETURN_IF_ERROR(kernel,
                           initLayout(bLayout, Types::data,
                                      plan.transposeLhs ? plan.m : plan.k,
                                      plan.transposeLhs ? plan.k : plan.m,
                                      plan.transposeLhs ? plan.m : plan.k,
                                      plan.batchCount, plan.lhsStride));
  ZCC_BLAS_RETURN_IF_ERROR(kernel, initLayout(cLayout, BlasTypes<R>::data, plan.n,
                                              plan.m, plan.n, plan.batchCount,
                                              plan.resultStride));

  cublasLtMatmulPreferenceOpaque_t preference;
  ZCC_BLAS_RETURN_IF_ERROR(kernel, cublasLtMatmulPreferenceInit(&preference));
  uint64_t workspaceBytes = context.workspaceBytes;
  ZCC_BLAS_RETURN_IF_ERROR(
      kernel, cublasLtMatmulPreferenceSetAttribute(
                  &preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                  &workspaceBytes, sizeof(workspaceBytes)));
  // Split-K partial sums only in the compute type (f32 for the 16-bit
  // types), never rounded to the output type on the way.
  uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  ZCC_BLAS_RETURN_IF_ERROR(
      kernel, cublasLtMatmulPreferenceSetAttribute(
                  &preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                  &reductions, sizeof(reductions)));
  // The operands need not start on 256 bytes (cuBLASLt's default
  // assumption): tell it the alignment every slice really has. The bias
  // has no such preference: the heuristic reads its alignment from the
  // bias pointer itself, which every slice shares.
  auto address = [](const void *p) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
  };
  uint32_t aAlign = static_cast<uint32_t>(
      commonAlignment({address(rhs), outerAlignment,
                       static_cast<uint64_t>(plan.rhsStride) * kElement}));
  uint32_t bAlign = static_cast<uint32_t>(
      commonAlignment({address(lhs), outerAlignment,
                       static_cast<uint64_t>(plan.lhsStride) * kElement}));
  uint32_t cAlign = static_cast<uint32_t>(
      commonAlignment({address(result), addend ? address(addend) : 0, outerAlignment,
                       static_cast<uint64_t>(plan.resultStride) * sizeof(R)}));
  for (auto [attribute, value] :
       {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aAlign},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &bAlign},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &cAlign},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &cAlign}})
    ZCC_BLAS_RETURN_IF_ERROR(
        kernel, cublasLtMatmulPreferenceSetAttribute(&preference, attribute,
                                                     value, sizeof(*value)));

  HeuristicKey key;
  key.handle = context.blasLt;
  key.workspaceBytes = context.workspaceBytes;
  key.m = plan.m;
  key.n = plan.n;
  key.k = plan.k;
  key.batchCount = plan.batchCount;
  key.lhsStride = plan.lhsStride;
  key.rhsStride = plan.rhsStride;
  key.resultStride = plan.resultStride;
  key.type = Types::data;
  key.resultType = BlasTypes<R>::data;
  key.aAlign = aAlign;
  key.bAlign = bAlign;
  key.cAlign = cAlign;
  key.biasAlign =
      bias ? static_cast<uint32_t>(commonAlignment({address(bias)})) : 0;
  key.transposeLhs = plan.transposeLhs;
  key.transposeRhs = plan.transposeRhs;
  key.bias = bias != nullptr;
  // cuBLASLt's GELU and DGELU serve 16-bit products only: its f64 GELU
  // measured ~3e-10 off the cpu, where f64 is held to 1e-12, and f32 gains
  // nothing from an epilogue the compiler never asks for there, so both
  // take the element-wise launches (held to the plain products). DGELU
  // reads its aux matrix by one pointer: one product (or one strided
  // batch) only; outer slices take the gelu_grad launch too.
  // GELU_AUX writes by one pointer too. Where the GELU's input is kept but
  // cannot be written by the epilogue, the GELU is a launch of its own
  // (after a copy of the sum).
  constexpr bool kFusesActivations = sizeof(T) == 2;
  T *preActivation = kFusesActivations && sliceCount == 1 && epilogue.geluTanh
                         ? epilogue.preActivation
                         : nullptr;
  key.geluTanh = kFusesActivations && epilogue.geluTanh &&
                 (!epilogue.preActivation || preActivation);
  key.geluAux = preActivation != nullptr;
  const T *geluInput = kFusesActivations && sliceCount == 1 ? epilogue.geluInput : nullptr;
  const void *aux = geluInput ? static_cast<const void *>(geluInput) : preActivation;
  key.auxAlign = aux ? static_cast<uint32_t>(commonAlignment({address(aux)})) : 0;

  // cuBLASLt's A is rhs and its B lhs, so rhs's transpose is TRANSA.
  cublasLtMatmulDescOpaque_t operation;
  HeuristicChoice choice;
  HeuristicCache &cache = HeuristicCache::get();
  bool fuse = bias || key.geluTanh || geluInput;
  bool cached = cache.find(key, choice);
  if (!cached) {
    choice.fusedEpilogue = fuse;
    choice.fusedAux = preActivation != nullptr;
  }
  EpilogueDesc fused;
  fused.bias = bias;
  fused.gelu = key.geluTanh;
  fused.preActivation = preActivation;
  fused.geluInput = geluInput;
  fused.auxLd = plan.n;
  fused.auxStride = plan.batchCount > 1 ? plan.resultStride : 0;
  // The epilogue `choice` fuses: all of it, all but aux (a GELU whose input
  // must be kept then leaves the epilogue too), or none.
  auto epilogueOf = [&](const HeuristicChoice &chosen) {
    if (!chosen.fusedEpilogue)
      return EpilogueDesc{};
    EpilogueDesc described = fused;
    if (!chosen.fusedAux) {
      if (described.preActivation)
        described.gelu = false;
      described.preActivation = nullptr;
    }
    return described;
  };
  ZCC_BLAS_RETURN_IF_ERROR(kernel, initOperation<T>(operation, plan.transposeRhs,
                                                    plan.transposeLhs, epilogueOf(choice)));
  // The product's operands as the launches below pass them (before an
  // unfused bias, which starts the result).
  typename Types::Scale alpha = 1, beta = accumulate || addend ? 1 : 0;
  const R *c = addend ? addend : result;
  if (!cached) {
    // With measuring on, the heuristic's first candidates are each timed
    // on this product and the fastest is kept; otherwise its first.
    const int wanted = std::clamp(context.matmulCandidates, 1, kMaxMatmulCandidates);
    cublasLtMatmulHeuristicResult_t heuristics[kMaxMatmulCandidates] = {};
    cublasLtMatmulHeuristicResult_t &heuristic = heuristics[0];
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        context.blasLt, &operation, &aLayout, &bLayout, &cLayout, &cLayout,
        &preference, wanted, heuristics, &found);
    // Where no algorithm fuses this epilogue (its type, the bias's or
    // aux's alignment, aux's leading dimension), first aux, then the rest
    // become launches of their own (below). A failure of another cause
    // fails again below and is reported.
    while (fuse && choice.fusedEpilogue && (status != CUBLAS_STATUS_SUCCESS || found == 0)) {
      if (choice.fusedAux)
        choice.fusedAux = false;
      else
        choice.fusedEpilogue = false;
      ZCC_BLAS_RETURN_IF_ERROR(kernel, initOperation<T>(operation, plan.transposeRhs,
                                                        plan.transposeLhs, epilogueOf(choice)));
      found = 0;
      status = cublasLtMatmulAlgoGetHeuristic(
          context.blasLt, &operation, &aLayout, &bLayout, &cLayout, &cLayout,
          &preference, wanted, heuristics, &found);
    }
    if (Status s = blasStatus(kernel, "cublasLtMatmulAlgoGetHeuristic", status);
        !s.isOk())
      return s;
    if (found == 0)
      return blasStatus(kernel, "cublasLtMatmulAlgoGetHeuristic",
                        CUBLAS_STATUS_NOT_SUPPORTED);
    choice.algo = heuristic.algo;
    // Timed only where running the product again changes nothing the plan
    // reads: the result is not accumulated into (C is not D), and the
    // stream is not being captured into a graph.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    bool measurable = found > 1 && !(beta != 0 && c == result) &&
                      cudaStreamIsCapturing(context.stream, &capturing) == cudaSuccess &&
                      capturing == cudaStreamCaptureStatusNone;
    if (measurable) {
      // The first slice (every offset 0) stands for all of them.
      auto launch = [&](const cublasLtMatmulAlgo_t &algo) {
        return cublasLtMatmul(context.blasLt, &operation, &alpha, rhs, &aLayout, lhs, &bLayout,
                              &beta, c, &cLayout, result, &cLayout, &algo, context.workspace,
                              context.workspaceBytes, context.stream);
      };
      StatusOr<int> fastest = fastestCandidate(kernel, context.stream, found, [&](int i) {
        return heuristics[i].state == CUBLAS_STATUS_SUCCESS &&
               launch(heuristics[i].algo) == CUBLAS_STATUS_SUCCESS;
      });
      if (!fastest.isOk())
        return fastest.takeStatus();
      choice.algo = heuristics[*fastest].algo;
    }
    cache.insert(key, choice);
  }

  bool geluFused = key.geluTanh && choice.fusedEpilogue && (!preActivation || choice.fusedAux);
  // D: the result, or, where the GELU is a launch of its own but its input
  // is kept, that input (the GELU then reads it into the result).
  R *d = result;
  if constexpr (std::is_same_v<T, R>)
    if (epilogue.geluTanh && epilogue.preActivation && !geluFused)
      d = epilogue.preActivation;
  // C: the accumulator itself, the addend, or (an unfused bias) D started
  // as the bias rows (plus the addend).
  if (bias && !choice.fusedEpilogue) {
    if (Status s = startWithBiasAndAddend(kernel, context, Types::element, bias, addend, d,
                                          resultRows, plan.n);
        !s.isOk())
      return s;
    beta = 1;
    c = d;
  }
  for (int64_t slice = 0; slice < sliceCount; ++slice) {
    auto [lhsOffset, rhsOffset, resultOffset] = nextSlice();
    R *out = d + resultOffset;
    ZCC_BLAS_RETURN_IF_ERROR(
        kernel,
        cublasLtMatmul(context.blasLt, &operation, &alpha, rhs + rhsOffset,
                       &aLayout, lhs + lhsOffset, &bLayout, &beta, c + resultOffset,
                       &cLayout, out, &cLayout, &choice.algo, context.workspace,
                       context.workspaceBytes, context.stream));
  }
  int64_t elements = resultRows * plan.n;
  if (epilogue.geluTanh && !geluFused)
    return launchStatus(kernel, launchUnary(UnaryOp::kGeluTanh, Types::element, d, result,
                                            elements, context.stream));
  if (epilogue.geluInput && !(geluInput && choice.fusedEpilogue))
    if (Status s = launchStatus(kernel, launchGeluGrad(/*tanhForm=*/true, Types::element,
                                                       epilogue.geluInput, result, result,
                                                       elements, context.stream));
        !s.isOk())
      return s;
  if (epilogue.biasGrad)
    return sumRows(kernel, context, Types::element, result, epilogue.biasGrad, resultRows,
                   plan.n);
  return Status::ok();
}

/// Plans the batch as an outer walk (on the host) over strided-batched
/// products: the innermost batch dimensions that merge into one stride for
/// both operands form the strided batch.
template <typename T, typename R>
Status matmulBatches(const char *kernel, const LaunchContext &context,
                     const MatmulOperands &operands, const T *lhs, const T *rhs,
                     const ProductEpilogue<T> &epilogue, R *result) {
  int64_t m = operands.m, n = operands.n, k = operands.k;
  const SmallShape &batch = operands.batch;
  BatchLayout layout =
      batchLayout(operands.lhsBatch, operands.rhsBatch, batch, m * k, k * n);
  ProductPlan plan;
  plan.m = m;
  plan.n = n;
  plan.k = k;
  plan.transposeLhs = operands.transposeLhs;
  plan.transposeRhs = operands.transposeRhs;
  int rank = layout.dims.rank();
  int inner = rank; // layout.dims[inner, rank) form the strided batch.
  if (rank > 0) {
    inner = rank - 1;
    plan.batchCount = layout.dims[inner];
    plan.lhsStride = layout.lhsStrides[inner];
    plan.rhsStride = layout.rhsStrides[inner];
    while (inner > 0 &&
           layout.lhsStrides[inner - 1] == plan.lhsStride * plan.batchCount &&
           layout.rhsStrides[inner - 1] == plan.rhsStride * plan.batchCount &&
           plan.batchCount * layout.dims[inner - 1] <= INT_MAX) {
      --inner;
      plan.batchCount *= layout.dims[inner];
    }
    if (plan.batchCount > INT_MAX)
      return kernelError(StatusCode::kUnimplemented, kernel,
                         "a batch dimension of %lld exceeds what cuBLASLt "
                         "batches (%d)",
                         static_cast<long long>(plan.batchCount), INT_MAX);
  }
  plan.resultStride = m * n;
  // A shared rhs (a weight) under a contiguous lhs whose rows lie one
  // after another (not transposed): the batch folds into the rows of one
  // product.
  if (plan.batchCount > 1 && plan.rhsStride == 0 && plan.lhsStride == m * k &&
      !plan.transposeLhs && plan.batchCount * m <= INT_MAX) {
    plan.m *= plan.batchCount;
    plan.batchCount = 1;
    plan.lhsStride = plan.resultStride = 0;
  }
  if (plan.batchCount == 1)
    plan.lhsStride = plan.rhsStride = plan.resultStride = 0;

  // The outer dimensions [0, inner), walked on the host.
  SmallShape outer;
  SmallShape outerStrides[2];
  uint64_t outerAlignment = 0;
  for (int d = 0; d < inner; ++d) {
    outer.push_back(layout.dims[d]);
    outerStrides[0].push_back(layout.lhsStrides[d]);
    outerStrides[1].push_back(layout.rhsStrides[d]);
    outerAlignment |=
        static_cast<uint64_t>(layout.lhsStrides[d] | layout.rhsStrides[d]) *
        sizeof(T);
  }
  int64_t sliceCount = outer.numElements();
  int64_t sliceSize = batch.numElements() / sliceCount * m * n;
  IndexWalker<2> walker(outer, outerStrides);
  int64_t slice = 0;
  auto nextSlice = [&] {
    std::tuple<int64_t, int64_t, int64_t> offsets{
        walker.offset(0), walker.offset(1), slice * sliceSize};
    walker.next();
    ++slice;
    return offsets;
  };
  if (sliceCount > 1)
    outerAlignment |= static_cast<uint64_t>(sliceSize) * sizeof(R);
  return runProducts(kernel, context, plan, lhs, rhs, epilogue, result,
                     batch.numElements() * m, sliceCount, outerAlignment,
                     nextSlice);
}

} // namespace

Status accumulateMatmul(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "accumulate_matmul";
  AccumulateMatmulOperands operands;
  if (Status s = checkAccumulateMatmulOperands(args, kernel, operands); !s.isOk())
    return s;
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1], &target = args.outputs[0];
  if (operands.m == 0 || operands.n == 0)
    return Status::ok();
  // An empty product adds nothing, or overwrites with zeros (all bits zero
  // in f32 and f64).
  if (operands.k == 0) {
    if (!operands.overwrite)
      return Status::ok();
    size_t bytes = static_cast<size_t>(target.numElements()) *
                   static_cast<size_t>(dtypeBytes(target.dtype));
    cudaError_t error = cudaMemsetAsync(target.data, 0, bytes, context.stream);
    if (error != cudaSuccess)
      return kernelError(StatusCode::kInternal, kernel, "cudaMemsetAsync failed: %s (%s)",
                         cudaGetErrorName(error), cudaGetErrorString(error));
    return Status::ok();
  }
  if (Status s = checkBlasSizes(kernel, operands.m, operands.n, operands.k); !s.isOk())
    return s;
  ProductPlan plan;
  plan.m = operands.m;
  plan.n = operands.n;
  plan.k = operands.k;
  plan.transposeLhs = operands.transposeLhs;
  plan.transposeRhs = operands.transposeRhs;
  auto oneSlice = [] { return std::tuple<int64_t, int64_t, int64_t>{0, 0, 0}; };
  Status status;
  // The check leaves f64 operands with an f64 target, the others with f32.
  Status dispatched = dispatchFloat(kernel, "lhs", lhs, [&](auto tag) {
    using T = decltype(tag);
    using R = std::conditional_t<std::is_same_v<T, double>, double, float>;
    status = runProducts(kernel, context, plan, lhs.as<const T>(), rhs.as<const T>(),
                         ProductEpilogue<T>{}, target.as<R>(), plan.m, 1, 0, oneSlice,
                         /*accumulate=*/!operands.overwrite);
  });
  return dispatched.isOk() ? status : dispatched;
}

Status matmul(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "matmul";
  MatmulOperands operands;
  if (Status s = checkMatmulOperands(args, kernel, operands); !s.isOk())
    return s;
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1],
                   &out = args.outputs[0];
  int64_t m = operands.m, n = operands.n, k = operands.k;

  // The bias gradient of no rows, or of an empty contraction (whose
  // product, and so its gradient, is zeros), is zeros.
  bool zeroSums = operands.aux && operands.geluInput &&
                  (operands.batch.numElements() == 0 || m == 0 || k == 0);
  if (zeroSums)
    if (Status s = launchStatus(
            kernel, cudaMemsetAsync(operands.aux->data, 0,
                                    static_cast<size_t>(operands.aux->numElements()) *
                                        dtypeBytes(operands.aux->dtype),
                                    context.stream));
        !s.isOk())
      return s;
  if (operands.batch.numElements() == 0 || m == 0 || n == 0)
    return Status::ok();
  if (k == 0) {
    // An empty sum: the epilogue alone (zeros are all bits zero in every
    // float type). A GELU whose input is kept starts that input and reads
    // it into the result.
    int64_t rows = operands.batch.numElements() * m;
    void *start = operands.aux && operands.geluTanh ? operands.aux->data : out.data;
    if (Status s = startWithBiasAndAddend(kernel, context, elementType(out),
                                          operands.bias ? operands.bias->data : nullptr,
                                          operands.addend ? operands.addend->data : nullptr,
                                          start, rows, n);
        !s.isOk())
      return s;
    if (operands.geluInput)
      return launchStatus(kernel, launchGeluGrad(/*tanhForm=*/true, elementType(out),
                                                 operands.geluInput->data, out.data, out.data,
                                                 rows * n, context.stream));
    if (!operands.geluTanh)
      return Status::ok();
    return launchStatus(kernel, launchUnary(UnaryOp::kGeluTanh, elementType(out), start,
                                            out.data, rows * n, context.stream));
  }
  if (Status s = checkBlasSizes(kernel, m, n, k); !s.isOk())
    return s;
  Status status;
  Status dispatched = dispatchFloat(kernel, "lhs", lhs, [&](auto tag) {
    using T = decltype(tag);
    // The widened product: f32 D of 16-bit A and B, without an epilogue.
    if constexpr (!std::is_floating_point_v<T>)
      if (operands.widened) {
        status = matmulBatches(kernel, context, operands, lhs.as<const T>(), rhs.as<const T>(),
                               ProductEpilogue<T>{}, out.as<float>());
        return;
      }
    ProductEpilogue<T> epilogue;
    epilogue.bias = operands.bias ? operands.bias->as<const T>() : nullptr;
    epilogue.addend = operands.addend ? operands.addend->as<const T>() : nullptr;
    epilogue.geluTanh = operands.geluTanh;
    epilogue.geluInput = operands.geluInput ? operands.geluInput->as<const T>() : nullptr;
    if (operands.aux)
      (operands.geluTanh ? epilogue.preActivation : epilogue.biasGrad) = operands.aux->as<T>();
    status = matmulBatches(kernel, context, operands, lhs.as<const T>(), rhs.as<const T>(),
                           epilogue, out.as<T>());
  });
  return dispatched.isOk() ? status : dispatched;
}

} // namespace zcc::cuda::kernels
