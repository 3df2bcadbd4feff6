//===- Linalg.cpp - Matrix products and attention -------------------------===//
//
// Products of f32 and f64 go through OpenBLAS (sgemm and sgemv, dgemm and
// dgemv): the reference must be fast enough to train small models, and a
// hand-written GEMM would be neither fast nor any more trustworthy. f16 and
// bf16 compute in f32: matmul widens tiles of its operands into static
// per-thread buffers for sgemm; attention, whose rows could need buffers as
// large as the head sizes, runs plain loops in f32.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/Kernels.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <type_traits>

namespace zcc::cpu::kernels {

using namespace detail;

namespace {

/// BLAS takes `int` sizes; larger ones are refused rather than truncated.
Status checkBlasSize(const char *kernel, const char *what, int64_t value) {
  if (value <= INT_MAX)
    return Status::ok();
  return kernelError(StatusCode::kUnimplemented, kernel,
                     "%s %lld exceeds what BLAS addresses (%d)", what,
                     static_cast<long long>(value), INT_MAX);
}

/// C[m, n] = A[m, k] B[k, n], all row-major and contiguous; k > 0.
void gemm(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
          float *c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(k), b, static_cast<int>(n), 0.0f, c,
              static_cast<int>(n));
}

void gemm(int64_t m, int64_t n, int64_t k, const double *a, const double *b,
          double *c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(k), b, static_cast<int>(n), 0.0, c,
              static_cast<int>(n));
}

/// The tile of C, and the slice of the contraction, that a 16-bit product
/// widens at a time. The f32 tiles live in static per-thread storage (2.25
/// MiB per thread, never the heap): large enough that sgemm runs at speed
/// and each operand element is widened only a few times.
constexpr int64_t kTileRows = 256, kTileColumns = 1024, kTileDepth = 256;

/// The same for f16 and bf16: tiles of A and B are widened to f32 for
/// sgemm, and each tile of C is accumulated in f32 over the whole
/// contraction, then rounded once.
template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, const T *a, const T *b, T *c) {
  static thread_local float aTile[kTileRows * kTileDepth];
  static thread_local float bTile[kTileDepth * kTileColumns];
  static thread_local float cTile[kTileRows * kTileColumns];
  for (int64_t i0 = 0; i0 < m; i0 += kTileRows) {
    int64_t rows = std::min(kTileRows, m - i0);
    for (int64_t j0 = 0; j0 < n; j0 += kTileColumns) {
      int64_t columns = std::min(kTileColumns, n - j0);
      std::fill(cTile, cTile + rows * columns, 0.0f);
      for (int64_t p0 = 0; p0 < k; p0 += kTileDepth) {
        int64_t depth = std::min(kTileDepth, k - p0);
        for (int64_t i = 0; i < rows; ++i) {
          const T *row = a + (i0 + i) * k + p0;
          float *out = aTile + i * depth;
          for (int64_t p = 0; p < depth; ++p)
            out[p] = load(row[p]);
        }
        for (int64_t p = 0; p < depth; ++p) {
          const T *row = b + (p0 + p) * n + j0;
          float *out = bTile + p * columns;
          for (int64_t j = 0; j < columns; ++j)
            out[j] = load(row[j]);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
                    static_cast<int>(rows), static_cast<int>(columns),
                    static_cast<int>(depth), 1.0f, aTile,
                    static_cast<int>(depth), bTile, static_cast<int>(columns),
                    1.0f, cTile, static_cast<int>(columns));
      }
      for (int64_t i = 0; i < rows; ++i) {
        T *row = c + (i0 + i) * n + j0;
        const float *in = cTile + i * columns;
        for (int64_t j = 0; j < columns; ++j)
          row[j] = store<T>(in[j]);
      }
    }
  }
}

/// Every batch of C[batch..., m, n] = A[batch..., m, k] B[batch..., k, n],
/// the batch dimensions of A and B broadcast to `batch`.
template <typename T>
void matmulLoop(const T *a, const T *b, T *c, const SmallShape &lhsBatch,
                const SmallShape &rhsBatch, const SmallShape &batch, int64_t m,
                int64_t n, int64_t k) {
  int64_t batchCount = batch.numElements();
  if (k == 0) {
    // An empty sum; BLAS would reject lda = 0.
    std::fill(c, c + batchCount * m * n, store<T>(Compute<T>(0)));
    return;
  }
  // A shared rhs (a weight): the batch folds into the rows of one product.
  if (rhsBatch.numElements() == 1 && lhsBatch.numElements() == batchCount &&
      batchCount * m <= INT_MAX) {
    gemm(batchCount * m, n, k, a, b, c);
    return;
  }
  SmallShape strides[2] = {broadcastStrides(lhsBatch, batch),
                           broadcastStrides(rhsBatch, batch)};
  for (int d = 0; d < batch.rank(); ++d) {
    strides[0][d] *= m * k;
    strides[1][d] *= k * n;
  }
  IndexWalker<2> walker(batch, strides);
  for (int64_t i = 0; i < batchCount; ++i, walker.next())
    gemm(m, n, k, a + walker.offset(0), b + walker.offset(1), c + i * m * n);
}

/// Scores above this many keys are processed in blocks, so a row of scores
/// needs no heap buffer (kernels never allocate).
constexpr int64_t kKeyBlock = 1024;

void gemv(CBLAS_TRANSPOSE trans, int rows, int columns, float alpha,
          const float *a, int lda, const float *x, float beta, float *y) {
  cblas_sgemv(CblasRowMajor, trans, rows, columns, alpha, a, lda, x, 1, beta, y,
              1);
}

void gemv(CBLAS_TRANSPOSE trans, int rows, int columns, double alpha,
          const double *a, int lda, const double *x, double beta, double *y) {
  cblas_dgemv(CblasRowMajor, trans, rows, columns, alpha, a, lda, x, 1, beta, y,
              1);
}

/// Attention in f32 or f64 (C), one query row at a time: a softmax over
/// blocks of keys, rescaling the partial output when a later block raises
/// the maximum (one block when tk <= kKeyBlock, then exactly
/// softmax(scores) . v). The row accumulates in the output itself.
template <typename C>
void attentionBlas(const AttentionDims &dims, const C *q, const C *k,
                   const C *v, C *out, double scale) {
  int64_t tq = dims.queries, tk = dims.keys, headDim = dims.headSize,
          valueDim = dims.valueSize;
  int ldk = static_cast<int>(std::max<int64_t>(headDim, 1));
  int ldv = static_cast<int>(valueDim);
  // Zeroed once so BLAS never sees stack garbage, even where beta = 0 would
  // let a stale NaN through.
  C scores[kKeyBlock] = {};
  for (int64_t h = 0; h < dims.heads; ++h) {
    const C *qh = q + h * tq * headDim;
    const C *kh = k + h * tk * headDim;
    const C *vh = v + h * tk * valueDim;
    C *oh = out + h * tq * valueDim;
    for (int64_t i = 0; i < tq; ++i) {
      int64_t visible = dims.visibleKeys(i);
      C *row = oh + i * valueDim;
      std::fill(row, row + valueDim, C(0));
      C runningMax = -std::numeric_limits<C>::infinity();
      double denominator = 0;
      for (int64_t start = 0; start < visible; start += kKeyBlock) {
        int len = static_cast<int>(std::min(kKeyBlock, visible - start));
        if (headDim == 0)
          std::fill(scores, scores + len, C(0));
        else
          gemv(CblasNoTrans, len, static_cast<int>(headDim),
               static_cast<C>(scale), kh + start * headDim, ldk,
               qh + i * headDim, C(0), scores);
        C blockMax = *std::max_element(scores, scores + len);
        C newMax = std::max(runningMax, blockMax);
        C correction = start == 0
                           ? C(0)
                           : static_cast<C>(std::exp(
                                 static_cast<double>(runningMax) - newMax));
        denominator *= correction;
        for (int j = 0; j < len; ++j) {
          scores[j] =
              static_cast<C>(std::exp(static_cast<double>(scores[j]) - newMax));
          denominator += scores[j];
        }
        gemv(CblasTrans, len, ldv, C(1), vh + start * valueDim, ldv, scores,
             correction, row);
        runningMax = newMax;
      }
      for (int64_t d = 0; d < valueDim; ++d)
        row[d] = static_cast<C>(row[d] / denominator);
    }
  }
}

/// Output dimensions a 16-bit attention accumulates at a time.
constexpr int64_t kValueBlock = 256;

/// Attention in f16 or bf16 (T): attentionBlas's blocked softmax in f32,
/// with loops in place of BLAS (widening blocks of keys and values would
/// need buffers as large as the head sizes). The output row accumulates in
/// an f32 buffer, kValueBlock dimensions at a time (the scores are computed
/// again for each further block), and is rounded once.
template <typename T>
void attentionHalfWidth(const AttentionDims &dims, const T *q, const T *k,
                        const T *v, T *out, double scale) {
  int64_t tq = dims.queries, tk = dims.keys, headDim = dims.headSize,
          valueDim = dims.valueSize;
  float scores[kKeyBlock] = {};
  float accumulator[kValueBlock] = {};
  for (int64_t h = 0; h < dims.heads; ++h) {
    const T *qh = q + h * tq * headDim;
    const T *kh = k + h * tk * headDim;
    const T *vh = v + h * tk * valueDim;
    T *oh = out + h * tq * valueDim;
    for (int64_t i = 0; i < tq; ++i) {
      int64_t visible = dims.visibleKeys(i);
      const T *query = qh + i * headDim;
      for (int64_t d0 = 0; d0 < valueDim; d0 += kValueBlock) {
        int64_t width = std::min(kValueBlock, valueDim - d0);
        std::fill(accumulator, accumulator + width, 0.0f);
        float runningMax = -std::numeric_limits<float>::infinity();
        double denominator = 0;
        for (int64_t start = 0; start < visible; start += kKeyBlock) {
          int64_t len = std::min(kKeyBlock, visible - start);
          for (int64_t j = 0; j < len; ++j) {
            const T *key = kh + (start + j) * headDim;
            float dot = 0;
            for (int64_t c = 0; c < headDim; ++c)
              dot += load(query[c]) * load(key[c]);
            scores[j] = static_cast<float>(scale) * dot;
          }
          float blockMax = *std::max_element(scores, scores + len);
          float newMax = std::max(runningMax, blockMax);
          float correction =
              start == 0 ? 0.0f
                         : static_cast<float>(std::exp(
                               static_cast<double>(runningMax) - newMax));
          denominator *= correction;
          for (int64_t j = 0; j < len; ++j) {
            scores[j] = static_cast<float>(
                std::exp(static_cast<double>(scores[j]) - newMax));
            denominator += scores[j];
          }
          for (int64_t d = 0; d < width; ++d)
            accumulator[d] *= correction;
          for (int64_t j = 0; j < len; ++j) {
            const T *value = vh + (start + j) * valueDim + d0;
            for (int64_t d = 0; d < width; ++d)
              accumulator[d] += scores[j] * load(value[d]);
          }
          runningMax = newMax;
        }
        T *row = oh + i * valueDim + d0;
        for (int64_t d = 0; d < width; ++d)
          row[d] = store<T>(static_cast<float>(accumulator[d] / denominator));
      }
    }
  }
}

} // namespace

Status matmul(const KernelArgs &args) {
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
  // An empty contraction (k = 0) fills zeros and calls no BLAS.
  if (k > 0)
    for (auto [what, value] :
         {std::pair<const char *, int64_t>{"M", m}, {"N", n}, {"K", k}})
      if (Status s = checkBlasSize(kernel, what, value); !s.isOk())
        return s;
  return dispatchFloat(kernel, "lhs", lhs, [&](auto tag) {
    using T = decltype(tag);
    matmulLoop(lhs.as<const T>(), rhs.as<const T>(), out.as<T>(), lhsBatch,
               rhsBatch, batch, m, n, k);
  });
}

Status attention(const KernelArgs &args) {
  const char *kernel = "attention";
  if (Status s =
          checkOperands(args, kernel, {"query", "key", "value"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &q = args.inputs[0], &k = args.inputs[1],
                   &v = args.inputs[2], &out = args.outputs[0];
  AttentionDims dims;
  if (Status s = checkAttentionOperands(kernel, q, k, v, "result", out, dims);
      !s.isOk())
    return s;
  double scale = 0;
  if (Status s = readAttentionAttributes(args, kernel, dims, scale); !s.isOk())
    return s;
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"head size", dims.headSize},
        {"value head size", dims.valueSize}})
    if (Status s = checkBlasSize(kernel, what, value); !s.isOk())
      return s;

  if (dims.queries == 0 || dims.valueSize == 0 || dims.heads == 0)
    return Status::ok();
  return dispatchFloat(kernel, "query", q, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>)
      attentionBlas(dims, q.as<const T>(), k.as<const T>(), v.as<const T>(),
                    out.as<T>(), scale);
    else
      attentionHalfWidth(dims, q.as<const T>(), k.as<const T>(),
                         v.as<const T>(), out.as<T>(), scale);
  });
}

} // namespace zcc::cpu::kernels
