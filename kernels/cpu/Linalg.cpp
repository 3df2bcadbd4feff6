//===- Linalg.cpp - Matrix products and attention -------------------------===//
//
// Every product goes through OpenBLAS (cblas_sgemm, cblas_sgemv): the
// reference must be fast enough to train small models, and a hand-written
// GEMM would be neither fast nor any more trustworthy.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/KernelSupport.h"
#include "kernels/cpu/Kernels.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

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

/// Scores above this many keys are processed in blocks, so a row of scores
/// needs no heap buffer (kernels never allocate).
constexpr int64_t kKeyBlock = 1024;

} // namespace

Status matmul(const KernelArgs &args) {
  const char *kernel = "matmul";
  if (Status s = checkOperands(args, kernel, {"lhs", "rhs"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1],
                   &out = args.outputs[0];
  if (lhs.dtype != plan::F32)
    return unsupportedDType(kernel, "lhs", lhs, "f32");
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

  int64_t batchCount = batch.numElements();
  float *c = out.as<float>();
  if (batchCount == 0 || m == 0 || n == 0)
    return Status::ok();
  if (k == 0) {
    // An empty sum; BLAS would reject lda = 0.
    std::fill(c, c + batchCount * m * n, 0.0f);
    return Status::ok();
  }
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"M", m}, {"N", n}, {"K", k}})
    if (Status s = checkBlasSize(kernel, what, value); !s.isOk())
      return s;

  const float *a = lhs.as<const float>();
  const float *b = rhs.as<const float>();
  // A shared rhs (a weight): the batch folds into the rows of one product.
  if (rhsBatch.numElements() == 1 && lhsBatch.numElements() == batchCount &&
      batchCount * m <= INT_MAX) {
    gemm(batchCount * m, n, k, a, b, c);
    return Status::ok();
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
  return Status::ok();
}

Status attention(const KernelArgs &args) {
  const char *kernel = "attention";
  if (Status s =
          checkOperands(args, kernel, {"query", "key", "value"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &q = args.inputs[0], &k = args.inputs[1],
                   &v = args.inputs[2], &out = args.outputs[0];
  if (q.dtype != plan::F32)
    return unsupportedDType(kernel, "query", q, "f32");
  for (auto [name, view] :
       {std::pair<const char *, const TensorView *>{"key", &k},
        {"value", &v},
        {"result", &out}})
    if (Status s = expectSameDType(kernel, name, *view, "query", q); !s.isOk())
      return s;
  size_t rank = q.shape.size();
  if (rank < 2 || k.shape.size() != rank || v.shape.size() != rank)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "query %s, key %s and value %s must have the same "
                       "rank, at least 2",
                       shapeString(q.shape).c_str(),
                       shapeString(k.shape).c_str(),
                       shapeString(v.shape).c_str());
  for (size_t d = 0; d + 2 < rank; ++d)
    if (k.shape[d] != q.shape[d] || v.shape[d] != q.shape[d])
      return kernelError(StatusCode::kInvalidArgument, kernel,
                         "query %s, key %s and value %s must have the same "
                         "leading dimensions",
                         shapeString(q.shape).c_str(),
                         shapeString(k.shape).c_str(),
                         shapeString(v.shape).c_str());
  int64_t tq = q.shape[rank - 2], headDim = q.shape[rank - 1];
  int64_t tk = k.shape[rank - 2], valueDim = v.shape[rank - 1];
  if (k.shape[rank - 1] != headDim)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "query and key head sizes differ: %lld vs %lld",
                       static_cast<long long>(headDim),
                       static_cast<long long>(k.shape[rank - 1]));
  if (v.shape[rank - 2] != tk)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "key and value sequence lengths differ: %lld vs %lld",
                       static_cast<long long>(tk),
                       static_cast<long long>(v.shape[rank - 2]));
  SmallShape expected(q.shape);
  expected[static_cast<int>(rank) - 1] = valueDim;
  if (Status s = expectShape(kernel, "result", out, expected); !s.isOk())
    return s;
  double scale = 0;
  if (Status s = requiredFloat(args, kernel, "scale", scale); !s.isOk())
    return s;
  bool causal = false;
  if (Status s = optionalBool(args, kernel, "causal", false, causal); !s.isOk())
    return s;
  if (causal && tq > tk)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "a causal attention needs at least as many keys as "
                       "queries, got %lld queries and %lld keys",
                       static_cast<long long>(tq), static_cast<long long>(tk));
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"head size", headDim},
        {"value head size", valueDim}})
    if (Status s = checkBlasSize(kernel, what, value); !s.isOk())
      return s;

  int64_t heads = 1;
  for (size_t d = 0; d + 2 < rank; ++d)
    heads *= q.shape[d];
  if (tq == 0 || valueDim == 0 || heads == 0)
    return Status::ok();
  int ldk = static_cast<int>(std::max<int64_t>(headDim, 1));
  int ldv = static_cast<int>(valueDim);
  // Zeroed once so BLAS never sees stack garbage, even where beta = 0 would
  // let a stale NaN through.
  float scores[kKeyBlock] = {};
  for (int64_t h = 0; h < heads; ++h) {
    const float *qh = q.as<const float>() + h * tq * headDim;
    const float *kh = k.as<const float>() + h * tk * headDim;
    const float *vh = v.as<const float>() + h * tk * valueDim;
    float *oh = out.as<float>() + h * tq * valueDim;
    for (int64_t i = 0; i < tq; ++i) {
      // Keys are aligned at the end: key j is visible to query i iff
      // j <= i + tk - tq.
      int64_t visible = causal ? std::min(tk, i + tk - tq + 1) : tk;
      float *row = oh + i * valueDim;
      std::fill(row, row + valueDim, 0.0f);
      // A softmax over blocks of keys, rescaling the partial output when a
      // later block raises the maximum (one block when tk <= kKeyBlock, then
      // exactly softmax(scores) . v).
      float runningMax = -std::numeric_limits<float>::infinity();
      double denominator = 0;
      for (int64_t start = 0; start < visible; start += kKeyBlock) {
        int len = static_cast<int>(std::min(kKeyBlock, visible - start));
        if (headDim == 0)
          std::fill(scores, scores + len, 0.0f);
        else
          cblas_sgemv(CblasRowMajor, CblasNoTrans, len,
                      static_cast<int>(headDim), static_cast<float>(scale),
                      kh + start * headDim, ldk, qh + i * headDim, 1, 0.0f,
                      scores, 1);
        float blockMax = *std::max_element(scores, scores + len);
        float newMax = std::max(runningMax, blockMax);
        float correction = start == 0
                               ? 0.0f
                               : static_cast<float>(std::exp(
                                     static_cast<double>(runningMax) - newMax));
        denominator *= correction;
        for (int j = 0; j < len; ++j) {
          scores[j] = static_cast<float>(
              std::exp(static_cast<double>(scores[j]) - newMax));
          denominator += scores[j];
        }
        cblas_sgemv(CblasRowMajor, CblasTrans, len, ldv, 1.0f,
                    vh + start * valueDim, ldv, scores, 1, correction, row, 1);
        runningMax = newMax;
      }
      for (int64_t d = 0; d < valueDim; ++d)
        row[d] = static_cast<float>(row[d] / denominator);
    }
  }
  return Status::ok();
}

} // namespace zcc::cpu::kernels
