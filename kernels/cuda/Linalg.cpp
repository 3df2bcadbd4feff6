//===- Linalg.cpp - Matrix products through cuBLASLt ----------------------===//
//
// matmul with numpy.matmul's semantics, as kernels/cpu/Linalg.cpp: rank-1
// operands, broadcast batch dimensions. Operands are row-major, so each
// product is computed as its transpose in cuBLASLt's column-major terms,
// C^T[n, m] = B^T[n, k] A^T[k, m], which reads the row-major buffers as they
// are. The batch becomes one strided-batched product where the operands'
// batch strides allow it (0 for a broadcast operand), else one such product
// per slice of the outer batch dimensions.
//
// f32 computes in f32 (never TF32: results are held to the cpu's within
// 1e-5), f64 in f64, f16 and bf16 in f32 with their partial sums kept in
// f32. Descriptors live on the stack (cuBLASLt's *Init calls), so a product
// allocates nothing of its own.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Kernels.h"

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/KernelSupport.h"

#include <climits>
#include <cstdint>
#include <tuple>
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

/// One cuBLASLt product shape (in row-major terms: C[m, n] = A[m, k] B[k,
/// n], `batchCount` of them with the given element strides), planned once
/// and enqueued for each slice of the outer batch.
struct ProductPlan {
  int64_t m = 0, n = 0, k = 0;
  int64_t batchCount = 1, lhsStride = 0, rhsStride = 0, resultStride = 0;
};

template <typename T> struct BlasTypes;
template <> struct BlasTypes<float> {
  static constexpr cudaDataType_t data = CUDA_R_32F, scale = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using Scale = float;
};
template <> struct BlasTypes<double> {
  static constexpr cudaDataType_t data = CUDA_R_64F, scale = CUDA_R_64F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_64F;
  using Scale = double;
};
template <> struct BlasTypes<cpu::Half> {
  static constexpr cudaDataType_t data = CUDA_R_16F, scale = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using Scale = float;
};
template <> struct BlasTypes<cpu::BFloat16> {
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

/// Runs `plan` once for each of the `sliceCount` slices that `nextSlice`
/// yields (element offsets of lhs, rhs and the result); every offset, in
/// bytes, is a multiple of `outerAlignment` (0 when there is one slice).
template <typename T, typename NextSlice>
Status runProducts(const char *kernel, const LaunchContext &context,
                   const ProductPlan &plan, const T *lhs, const T *rhs,
                   T *result, int64_t sliceCount, uint64_t outerAlignment,
                   NextSlice &&nextSlice) {
  using Types = BlasTypes<T>;
  constexpr uint64_t kElement = sizeof(T);
  // Column-major: cuBLASLt's A is rhs^T [n, k], its B lhs^T [k, m], its C
  // and D result^T [n, m].
  cublasLtMatrixLayoutOpaque_t aLayout, bLayout, cLayout;
  ZCC_BLAS_RETURN_IF_ERROR(kernel,
                           initLayout(aLayout, Types::data, plan.n, plan.k,
                                      plan.n, plan.batchCount, plan.rhsStride));
  ZCC_BLAS_RETURN_IF_ERROR(kernel,
                           initLayout(bLayout, Types::data, plan.k, plan.m,
                                      plan.k, plan.batchCount, plan.lhsStride));
  ZCC_BLAS_RETURN_IF_ERROR(kernel, initLayout(cLayout, Types::data, plan.n,
                                              plan.m, plan.n, plan.batchCount,
                                              plan.resultStride));
  cublasLtMatmulDescOpaque_t operation;
  ZCC_BLAS_RETURN_IF_ERROR(
      kernel, cublasLtMatmulDescInit(&operation, Types::compute, Types::scale));

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
  // assumption): tell it the alignment every slice really has.
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
      commonAlignment({address(result), outerAlignment,
                       static_cast<uint64_t>(plan.resultStride) * kElement}));
  for (auto [attribute, value] :
       {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aAlign},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &bAlign},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &cAlign},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &cAlign}})
    ZCC_BLAS_RETURN_IF_ERROR(
        kernel, cublasLtMatmulPreferenceSetAttribute(&preference, attribute,
                                                     value, sizeof(*value)));

  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  ZCC_BLAS_RETURN_IF_ERROR(kernel, cublasLtMatmulAlgoGetHeuristic(
                                       context.blasLt, &operation, &aLayout,
                                       &bLayout, &cLayout, &cLayout,
                                       &preference, 1, &heuristic, &found));
  if (found == 0)
    return blasStatus(kernel, "cublasLtMatmulAlgoGetHeuristic",
                      CUBLAS_STATUS_NOT_SUPPORTED);

  typename Types::Scale alpha = 1, beta = 0;
  for (int64_t slice = 0; slice < sliceCount; ++slice) {
    auto [lhsOffset, rhsOffset, resultOffset] = nextSlice();
    T *out = result + resultOffset;
    ZCC_BLAS_RETURN_IF_ERROR(
        kernel, cublasLtMatmul(context.blasLt, &operation, &alpha,
                               rhs + rhsOffset, &aLayout, lhs + lhsOffset,
                               &bLayout, &beta, out, &cLayout, out, &cLayout,
                               &heuristic.algo, context.workspace,
                               context.workspaceBytes, context.stream));
  }
  return Status::ok();
}

/// Plans the batch as an outer walk (on the host) over strided-batched
/// products: the innermost batch dimensions that merge into one stride for
/// both operands form the strided batch.
template <typename T>
Status matmulBatches(const char *kernel, const LaunchContext &context,
                     const T *lhs, const T *rhs, T *result,
                     const SmallShape &lhsBatch, const SmallShape &rhsBatch,
                     const SmallShape &batch, int64_t m, int64_t n, int64_t k) {
  BatchLayout layout = batchLayout(lhsBatch, rhsBatch, batch, m * k, k * n);
  ProductPlan plan;
  plan.m = m;
  plan.n = n;
  plan.k = k;
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
  // A shared rhs (a weight) under a contiguous lhs: the batch folds into
  // the rows of one product.
  if (plan.batchCount > 1 && plan.rhsStride == 0 && plan.lhsStride == m * k &&
      plan.batchCount * m <= INT_MAX) {
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
    outerAlignment |= static_cast<uint64_t>(sliceSize) * sizeof(T);
  return runProducts(kernel, context, plan, lhs, rhs, result, sliceCount,
                     outerAlignment, nextSlice);
}

} // namespace

Status matmul(const KernelArgs &args, const LaunchContext &context) {
  const char *kernel = "matmul";
  if (Status s = checkOperands(args, kernel, {"lhs", "rhs"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1],
                   &out = args.outputs[0];
  if (Status s = expectFloatDType(kernel, "lhs", lhs); !s.isOk())
    return s;
  if (Status s = expectSameDType(kernel, "rhs", rhs, "lhs", lhs); !s.isOk())
    return s;
  if (Status s = expectSameDType(kernel, "result", out, "lhs", lhs); !s.isOk())
    return s;
  if (lhs.shape.empty() || rhs.shape.empty())
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "operands must have rank at least 1, got %s and %s",
                       shapeString(lhs.shape).c_str(),
                       shapeString(rhs.shape).c_str());

  // numpy.matmul: a rank-1 lhs is a row [1, K], a rank-1 rhs a column
  // [K, 1]; the added dimension is dropped from the result.
  bool lhsVector = lhs.shape.size() == 1, rhsVector = rhs.shape.size() == 1;
  SmallShape lhsBatch(lhs.shape), rhsBatch(rhs.shape);
  int64_t m = lhsVector ? 1 : lhs.shape[lhs.shape.size() - 2];
  int64_t k = lhs.shape.back();
  int64_t rhsK = rhsVector ? rhs.shape[0] : rhs.shape[rhs.shape.size() - 2];
  int64_t n = rhsVector ? 1 : rhs.shape.back();
  lhsBatch.resize(lhsVector ? 0 : lhsBatch.rank() - 2);
  rhsBatch.resize(rhsVector ? 0 : rhsBatch.rank() - 2);
  if (k != rhsK)
    return kernelError(
        StatusCode::kInvalidArgument, kernel,
        "contracting dimensions differ: lhs %s has %lld, rhs "
        "%s has %lld",
        shapeString(lhs.shape).c_str(), static_cast<long long>(k),
        shapeString(rhs.shape).c_str(), static_cast<long long>(rhsK));
  SmallShape batch;
  if (!broadcastShapes(lhsBatch, rhsBatch, batch))
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "batch dimensions of lhs %s and rhs %s are not "
                       "broadcast-compatible",
                       shapeString(lhs.shape).c_str(),
                       shapeString(rhs.shape).c_str());
  SmallShape expected = batch;
  if (!lhsVector)
    expected.push_back(m);
  if (!rhsVector)
    expected.push_back(n);
  if (Status s = expectShape(kernel, "result", out, expected); !s.isOk())
    return s;

  if (batch.numElements() == 0 || m == 0 || n == 0)
    return Status::ok();
  if (k == 0) {
    // An empty sum: zeros (all bits zero in every float type).
    size_t bytes = static_cast<size_t>(out.numElements()) *
                   static_cast<size_t>(dtypeBytes(out.dtype));
    cudaError_t error = cudaMemsetAsync(out.data, 0, bytes, context.stream);
    if (error != cudaSuccess)
      return kernelError(StatusCode::kInternal, kernel,
                         "cudaMemsetAsync failed: %s (%s)",
                         cudaGetErrorName(error), cudaGetErrorString(error));
    return Status::ok();
  }
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"M", m}, {"N", n}, {"K", k}})
    if (Status s = checkBlasSize(kernel, what, value); !s.isOk())
      return s;
  Status status;
  Status dispatched = dispatchFloat(kernel, "lhs", lhs, [&](auto tag) {
    using T = decltype(tag);
    status =
        matmulBatches(kernel, context, lhs.as<const T>(), rhs.as<const T>(),
                      out.as<T>(), lhsBatch, rhsBatch, batch, m, n, k);
  });
  return dispatched.isOk() ? status : dispatched;
}

} // namespace zcc::cuda::kernels
