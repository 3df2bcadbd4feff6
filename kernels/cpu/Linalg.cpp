//===- Linalg.cpp - Matrix products and attention -------------------------===//
//
// Products of f32 and f64 go through OpenBLAS (sgemm and sgemv, dgemm and
// dgemv): the reference must be fast enough to train small models, and a
// hand-written GEMM would be neither fast nor any more trustworthy. f16 and
// bf16 compute in f32: matmul widens tiles of its operands into static
// per-thread buffers for sgemm; attention, whose rows could need buffers as
// large as the head sizes, runs plain loops in f32. matmul's transposed
// operands are BLAS's transpose flags (a 16-bit tile is widened as stored
// and transposed by sgemm too), and its bias and addend are where C starts,
// so they join the sum before the one rounding to the result's type, as
// does the GELU of `activation = "gelu_tanh"` (applied to the f32 sum of a
// 16-bit product, in place after BLAS for f32 and f64) or the derivative of
// "gelu_tanh_grad" (the sum times it at the GELU's input). accumulate_matmul
// adds a product into an f32 (f64) accumulator the same way: BLAS's beta =
// 1 for f32 and f64, and for the 16-bit types C's tiles start as the
// accumulator's values and go back to it unrounded. With `overwrite` the
// product replaces the accumulator (beta = 0; tiles start from zero).
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/FloatDispatch.h"
#include "kernels/cpu/Kernels.h"

#include <cblas.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

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

/// One product C[m, n] = op(A)[m, k] op(B)[k, n] (+ bias), all row-major
/// and contiguous; op swaps the two dimensions of a transposed operand, so
/// A is stored [k, m] where `transposeA`, B [n, k] where `transposeB`.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool transposeA = false, transposeB = false;
};

/// The product of sizes and transposes read by either operand check.
template <typename Operands> GemmShape gemmShape(const Operands &operands) {
  GemmShape g;
  g.m = operands.m;
  g.n = operands.n;
  g.k = operands.k;
  g.transposeA = operands.transposeLhs;
  g.transposeB = operands.transposeRhs;
  return g;
}

/// checkBlasSize for each of a product's sizes.
Status checkBlasSizes(const char *kernel, const GemmShape &g) {
  for (auto [what, value] : {std::pair<const char *, int64_t>{"M", g.m}, {"N", g.n}, {"K", g.k}})
    if (Status s = checkBlasSize(kernel, what, value); !s.isOk())
      return s;
  return Status::ok();
}

CBLAS_TRANSPOSE blasTranspose(bool transposed) {
  return transposed ? CblasTrans : CblasNoTrans;
}

/// Leading dimensions of A and B as stored.
int leadingA(const GemmShape &g) {
  return static_cast<int>(g.transposeA ? g.m : g.k);
}
int leadingB(const GemmShape &g) {
  return static_cast<int>(g.transposeB ? g.k : g.n);
}

/// Every one of the `rows` rows of C[rows, n] set to `bias`.
template <typename T>
void fillRows(T *c, int64_t rows, int64_t n, const T *bias) {
  for (int64_t i = 0; i < rows; ++i)
    std::copy(bias, bias + n, c + i * n);
}

/// What joins one product C[m, n] before it is rounded: `bias` [n] on
/// every row, `addend` [m, n] (which may be C itself), then GELU's tanh
/// form; or, with `geluInput` [m, n], the product times the tanh form's
/// derivative there. Null pointers add nothing.
template <typename T> struct Epilogue {
  const T *bias = nullptr;
  const T *addend = nullptr;
  bool applyGelu = false;
  const T *geluInput = nullptr;
  /// With applyGelu, where the sum before the GELU goes too (matmul's aux),
  /// rounded once; null for none.
  T *preActivation = nullptr;

  /// The same for the product whose result starts `offset` elements on.
  Epilogue at(int64_t offset) const {
    Epilogue e = *this;
    if (addend)
      e.addend += offset;
    if (geluInput)
      e.geluInput += offset;
    if (preActivation)
      e.preActivation += offset;
    return e;
  }

  /// The activation of element `i` (of C's elements) of value `v`, in the
  /// compute type C.
  template <typename C> C activate(C v, int64_t i) const {
    if (applyGelu)
      return static_cast<C>(geluTanh(v));
    if (geluInput)
      return v * geluTanhDerivative(static_cast<C>(load(geluInput[i])));
    return v;
  }
};

/// f32 and f64: C[rows, n] set to what the product adds to (bias rows plus
/// the addend, or zeros); returns whether C holds anything (beta = 1).
template <typename T>
bool startProduct(const Epilogue<T> &e, int64_t rows, int64_t n, T *c) {
  if (e.addend && e.addend != c)
    std::copy(e.addend, e.addend + rows * n, c);
  if (e.bias) {
    if (e.addend)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < n; ++j)
          c[i * n + j] += e.bias[j];
    else
      fillRows(c, rows, n, e.bias);
  }
  return e.bias || e.addend;
}

/// f32 and f64: the activation over the finished C[rows, n].
template <typename T>
void finishProduct(const Epilogue<T> &e, int64_t rows, int64_t n, T *c) {
  if (e.preActivation)
    std::copy(c, c + rows * n, e.preActivation);
  if (e.applyGelu || e.geluInput)
    for (int64_t i = 0; i < rows * n; ++i)
      c[i] = e.activate(c[i], i);
}

void blasGemm(const GemmShape &g, const float *a, const float *b, float beta,
              float *c) {
  cblas_sgemm(CblasRowMajor, blasTranspose(g.transposeA),
              blasTranspose(g.transposeB), static_cast<int>(g.m),
              static_cast<int>(g.n), static_cast<int>(g.k), 1.0f, a,
              leadingA(g), b, leadingB(g), beta, c, static_cast<int>(g.n));
}

void blasGemm(const GemmShape &g, const double *a, const double *b, double beta,
              double *c) {
  cblas_dgemm(CblasRowMajor, blasTranspose(g.transposeA),
              blasTranspose(g.transposeB), static_cast<int>(g.m),
              static_cast<int>(g.n), static_cast<int>(g.k), 1.0, a, leadingA(g),
              b, leadingB(g), beta, c, static_cast<int>(g.n));
}

/// f32 and f64: BLAS adds the product to C, which starts as the bias rows
/// and the addend; k > 0.
template <typename T>
std::enable_if_t<std::is_floating_point_v<T>>
gemm(const GemmShape &g, const T *a, const T *b, const Epilogue<T> &e, T *c) {
  bool started = startProduct(e, g.m, g.n, c);
  blasGemm(g, a, b, started ? T(1) : T(0), c);
  finishProduct(e, g.m, g.n, c);
}

/// The tile of C, and the slice of the contraction, that a 16-bit product
/// widens at a time. The f32 tiles live in static per-thread storage (2.25
/// MiB per thread, never the heap): large enough that sgemm runs at speed
/// and each operand element is widened only a few times.
constexpr int64_t kTileRows = 256, kTileColumns = 1024, kTileDepth = 256;

/// The f32 tiles of one thread. One instance for every instantiation of
/// the 16-bit gemm: static TLS is carved from every thread's stack (the
/// BLAS's own workers' too), so a copy per instantiation would take
/// 2.25 MiB of each stack apiece.
struct GemmTiles {
  float a[kTileRows * kTileDepth];
  float b[kTileDepth * kTileColumns];
  float c[kTileRows * kTileColumns];
};

GemmTiles &gemmTiles() {
  static thread_local GemmTiles tiles;
  return tiles;
}

/// Widens the [rows, columns] block at `source` (row stride `stride`) into
/// the dense f32 tile `out`.
template <typename T>
void widenTile(const T *source, int64_t stride, int64_t rows, int64_t columns, float *out) {
  for (int64_t r = 0; r < rows; ++r, out += columns) {
    const T *row = source + r * stride;
    for (int64_t c = 0; c < columns; ++c)
      out[c] = load(row[c]);
  }
}

/// The same for f16 and bf16: tiles of A and B are widened to f32 for
/// sgemm, and each tile of C is accumulated in f32 over the whole
/// contraction, starting from the widened bias and addend, then (after the
/// activation) rounded once. A tile
/// of a transposed operand is widened as it is stored (rows of A^T, of
/// B^T), reading its rows contiguously, and sgemm transposes it.
///
/// With `R` = float, C is f32 and each tile is stored unrounded: with
/// `accumulate` an accumulator whose tiles start from C's values (no bias;
/// accumulate_matmul), without it the widened product of a matmul (no
/// epilogue).
template <typename T, typename R = T>
std::enable_if_t<!std::is_floating_point_v<T>>
gemm(const GemmShape &g, const T *a, const T *b, const Epilogue<T> &e, R *c,
     bool accumulate = false) {
  const T *bias = e.bias;
  GemmTiles &tiles = gemmTiles();
  float *aTile = tiles.a, *bTile = tiles.b, *cTile = tiles.c;
  int64_t m = g.m, n = g.n, k = g.k;
  for (int64_t i0 = 0; i0 < m; i0 += kTileRows) {
    int64_t rows = std::min(kTileRows, m - i0);
    for (int64_t j0 = 0; j0 < n; j0 += kTileColumns) {
      int64_t columns = std::min(kTileColumns, n - j0);
      if constexpr (std::is_same_v<R, float>) {
        if (accumulate)
          for (int64_t i = 0; i < rows; ++i)
            std::copy(c + (i0 + i) * n + j0, c + (i0 + i) * n + j0 + columns,
                      cTile + i * columns);
      }
      if (accumulate) {
        // C's own values, copied above.
      } else if (bias) {
        for (int64_t j = 0; j < columns; ++j)
          cTile[j] = load(bias[j0 + j]);
        for (int64_t i = 1; i < rows; ++i)
          std::copy(cTile, cTile + columns, cTile + i * columns);
      } else {
        std::fill(cTile, cTile + rows * columns, 0.0f);
      }
      // The addend's tile is read before C's is written: C may be it.
      if (e.addend && !accumulate)
        for (int64_t i = 0; i < rows; ++i) {
          const T *row = e.addend + (i0 + i) * n + j0;
          for (int64_t j = 0; j < columns; ++j)
            cTile[i * columns + j] += load(row[j]);
        }
      for (int64_t p0 = 0; p0 < k; p0 += kTileDepth) {
        int64_t depth = std::min(kTileDepth, k - p0);
        // aTile is op(A)'s [rows, depth] tile, or A's [depth, rows] one.
        if (g.transposeA)
          widenTile(a + p0 * m + i0, m, depth, rows, aTile);
        else
          widenTile(a + i0 * k + p0, k, rows, depth, aTile);
        // bTile is op(B)'s [depth, columns] tile, or B's [columns, depth].
        if (g.transposeB)
          widenTile(b + j0 * k + p0, k, columns, depth, bTile);
        else
          widenTile(b + p0 * n + j0, n, depth, columns, bTile);
        cblas_sgemm(CblasRowMajor, blasTranspose(g.transposeA),
                    blasTranspose(g.transposeB), static_cast<int>(rows),
                    static_cast<int>(columns), static_cast<int>(depth), 1.0f,
                    aTile, static_cast<int>(g.transposeA ? rows : depth), bTile,
                    static_cast<int>(g.transposeB ? depth : columns), 1.0f,
                    cTile, static_cast<int>(columns));
      }
      for (int64_t i = 0; i < rows; ++i) {
        R *row = c + (i0 + i) * n + j0;
        const float *in = cTile + i * columns;
        if constexpr (!std::is_same_v<R, float>)
          if (e.preActivation) {
            T *pre = e.preActivation + (i0 + i) * n + j0;
            for (int64_t j = 0; j < columns; ++j)
              pre[j] = store<T>(in[j]);
          }
        if constexpr (std::is_same_v<R, float>)
          std::copy(in, in + columns, row);
        else if (e.applyGelu || e.geluInput)
          for (int64_t j = 0; j < columns; ++j)
            row[j] = store<T>(e.activate(in[j], (i0 + i) * n + j0 + j));
        else
          for (int64_t j = 0; j < columns; ++j)
            row[j] = store<T>(in[j]);
      }
    }
  }
}

/// Every batch of C[batch..., m, n] = op(A)[batch..., m, k]
/// op(B)[batch..., k, n] (+ bias + addend, then the activation), the batch
/// dimensions of A and B broadcast to `batch`. R is f32 for the widened
/// product of 16-bit operands (no epilogue), else T.
template <typename T, typename R = T>
void matmulLoop(const GemmShape &g, const T *a, const T *b, const Epilogue<T> &e, R *c,
                const SmallShape &lhsBatch, const SmallShape &rhsBatch,
                const SmallShape &batch) {
  int64_t batchCount = batch.numElements();
  int64_t m = g.m, n = g.n, k = g.k;
  if (k == 0) {
    // An empty sum (BLAS would reject lda = 0): the epilogue alone, in the
    // compute type, rounded once.
    for (int64_t i = 0; i < batchCount * m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        Compute<T> v = 0;
        if (e.bias)
          v += load(e.bias[j]);
        if (e.addend)
          v += load(e.addend[i * n + j]);
        if (e.preActivation)
          e.preActivation[i * n + j] = store<T>(v);
        if constexpr (std::is_same_v<R, T>)
          c[i * n + j] = store<T>(e.activate(v, i * n + j));
        else
          c[i * n + j] = static_cast<R>(v);
      }
    return;
  }
  // A shared rhs (a weight): the batch folds into the rows of one product,
  // where those rows lie one after another (lhs not transposed).
  if (!g.transposeA && rhsBatch.numElements() == 1 &&
      lhsBatch.numElements() == batchCount && batchCount * m <= INT_MAX) {
    GemmShape folded = g;
    folded.m = batchCount * m;
    gemm(folded, a, b, e, c);
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
    gemm(g, a + walker.offset(0), b + walker.offset(1), e.at(i * m * n), c + i * m * n);
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
  int64_t tq = dims.queries, headDim = dims.headSize, valueDim = dims.valueSize;
  int64_t qRow = dims.query.row, kRow = dims.key.row, vRow = dims.value.row,
          oRow = dims.output.row;
  int ldk = static_cast<int>(std::max<int64_t>(kRow, 1));
  int ldv = static_cast<int>(std::max<int64_t>(vRow, 1));
  // Zeroed once so BLAS never sees stack garbage, even where beta = 0 would
  // let a stale NaN through.
  C scores[kKeyBlock] = {};
  for (int64_t h = 0; h < dims.heads; ++h) {
    const C *qh = q + dims.query.rowStart(h, dims.groupHeads);
    const C *kh = k + dims.key.rowStart(h, dims.groupHeads);
    const C *vh = v + dims.value.rowStart(h, dims.groupHeads);
    C *oh = out + dims.output.rowStart(h, dims.groupHeads);
    for (int64_t i = 0; i < tq; ++i) {
      int64_t visible = dims.visibleKeys(i);
      C *row = oh + i * oRow;
      std::fill(row, row + valueDim, C(0));
      C runningMax = -std::numeric_limits<C>::infinity();
      double denominator = 0;
      for (int64_t start = 0; start < visible; start += kKeyBlock) {
        int len = static_cast<int>(std::min(kKeyBlock, visible - start));
        if (headDim == 0)
          std::fill(scores, scores + len, C(0));
        else
          gemv(CblasNoTrans, len, static_cast<int>(headDim),
               static_cast<C>(scale), kh + start * kRow, ldk, qh + i * qRow,
               C(0), scores);
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
        gemv(CblasTrans, len, static_cast<int>(valueDim), C(1),
             vh + start * vRow, ldv, scores, correction, row);
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
  int64_t tq = dims.queries, headDim = dims.headSize, valueDim = dims.valueSize;
  int64_t kRow = dims.key.row, vRow = dims.value.row;
  float scores[kKeyBlock] = {};
  float accumulator[kValueBlock] = {};
  for (int64_t h = 0; h < dims.heads; ++h) {
    const T *qh = q + dims.query.rowStart(h, dims.groupHeads);
    const T *kh = k + dims.key.rowStart(h, dims.groupHeads);
    const T *vh = v + dims.value.rowStart(h, dims.groupHeads);
    T *oh = out + dims.output.rowStart(h, dims.groupHeads);
    for (int64_t i = 0; i < tq; ++i) {
      int64_t visible = dims.visibleKeys(i);
      const T *query = qh + i * dims.query.row;
      for (int64_t d0 = 0; d0 < valueDim; d0 += kValueBlock) {
        int64_t width = std::min(kValueBlock, valueDim - d0);
        std::fill(accumulator, accumulator + width, 0.0f);
        float runningMax = -std::numeric_limits<float>::infinity();
        double denominator = 0;
        for (int64_t start = 0; start < visible; start += kKeyBlock) {
          int64_t len = std::min(kKeyBlock, visible - start);
          for (int64_t j = 0; j < len; ++j) {
            const T *key = kh + (start + j) * kRow;
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
            const T *value = vh + (start + j) * vRow + d0;
            for (int64_t d = 0; d < width; ++d)
              accumulator[d] += scores[j] * load(value[d]);
          }
          runningMax = newMax;
        }
        T *row = oh + i * dims.output.row + d0;
        for (int64_t d = 0; d < width; ++d)
          row[d] = store<T>(static_cast<float>(accumulator[d] / denominator));
      }
    }
  }
}

/// The bias gradient beside a DGELU product: sums[j] = the sum over the
/// rows of x[rows, n]'s column j, in double in row order and rounded once,
/// as reduce_sum over every dimension but the last gives it. Blocks of
/// columns keep the reads along rows without a heap buffer.
template <typename T>
void sumRows(const T *x, int64_t rows, int64_t n, T *sums) {
  constexpr int64_t kBlock = 64;
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    int64_t columns = std::min(kBlock, n - j0);
    double acc[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T *row = x + r * n + j0;
      for (int64_t j = 0; j < columns; ++j)
        acc[j] += load(row[j]);
    }
    for (int64_t j = 0; j < columns; ++j)
      sums[j0 + j] = store<T>(static_cast<Compute<T>>(acc[j]));
  }
}

} // namespace

Status matmul(const KernelArgs &args) {
  const char *kernel = "matmul";
  MatmulOperands operands;
  if (Status s = checkMatmulOperands(args, kernel, operands); !s.isOk())
    return s;
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1],
                   &out = args.outputs[0];
  GemmShape g = gemmShape(operands);

  // The bias gradient of no rows is zeros, as reduce_sum's.
  if (operands.aux && operands.geluInput && (operands.batch.numElements() == 0 || g.m == 0))
    std::memset(operands.aux->data, 0,
                static_cast<size_t>(operands.aux->numElements()) * dtypeBytes(operands.aux->dtype));
  if (operands.batch.numElements() == 0 || g.m == 0 || g.n == 0)
    return Status::ok();
  // An empty contraction (k = 0) writes the epilogue alone and calls no
  // BLAS.
  if (g.k > 0)
    if (Status s = checkBlasSizes(kernel, g); !s.isOk())
      return s;
  return dispatchFloat(kernel, "lhs", lhs, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_floating_point_v<T>)
      if (operands.widened) {
        matmulLoop(g, lhs.as<const T>(), rhs.as<const T>(), Epilogue<T>{}, out.as<float>(),
                   operands.lhsBatch, operands.rhsBatch, operands.batch);
        return;
      }
    Epilogue<T> e;
    e.bias = operands.bias ? operands.bias->as<const T>() : nullptr;
    e.addend = operands.addend ? operands.addend->as<const T>() : nullptr;
    e.applyGelu = operands.geluTanh;
    e.geluInput = operands.geluInput ? operands.geluInput->as<const T>() : nullptr;
    if (operands.aux && operands.geluTanh)
      e.preActivation = operands.aux->as<T>();
    matmulLoop(g, lhs.as<const T>(), rhs.as<const T>(), e, out.as<T>(), operands.lhsBatch,
               operands.rhsBatch, operands.batch);
    if (operands.aux && operands.geluInput) {
      int64_t n = out.shape.back();
      sumRows(out.as<const T>(), out.numElements() / n, n, operands.aux->as<T>());
    }
  });
}

Status accumulateMatmul(const KernelArgs &args) {
  const char *kernel = "accumulate_matmul";
  AccumulateMatmulOperands operands;
  if (Status s = checkAccumulateMatmulOperands(args, kernel, operands); !s.isOk())
    return s;
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1], &target = args.outputs[0];
  GemmShape g = gemmShape(operands);
  if (g.m == 0 || g.n == 0)
    return Status::ok();
  // An empty product adds nothing, or overwrites with zeros (all bits zero
  // in f32 and f64).
  if (g.k == 0) {
    if (operands.overwrite)
      std::memset(target.data, 0,
                  static_cast<size_t>(target.numElements()) * dtypeBytes(target.dtype));
    return Status::ok();
  }
  if (Status s = checkBlasSizes(kernel, g); !s.isOk())
    return s;
  // The check leaves f32 and f64 with their own type as the target's, and
  // the 16-bit types with f32.
  return dispatchFloat(kernel, "lhs", lhs, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>)
      blasGemm(g, lhs.as<const T>(), rhs.as<const T>(), T(operands.overwrite ? 0 : 1),
               target.as<T>());
    else
      gemm<T, float>(g, lhs.as<const T>(), rhs.as<const T>(), Epilogue<T>{}, target.as<float>(),
                     /*accumulate=*/!operands.overwrite);
  });
}

/// Each query row's log-sum-exp of its scaled, masked scores (attention's
/// optional second result), in double from the operands' values, in one
/// pass with a running maximum (no scratch: kernels do not allocate); a row
/// without keys gets -inf.
template <typename T>
void attentionLse(const AttentionDims &dims, const T *q, const T *k, float *lse,
                  double scale) {
  int64_t tq = dims.queries, headDim = dims.headSize;
  int64_t qRow = dims.query.row, kRow = dims.key.row;
  for (int64_t h = 0; h < dims.heads; ++h) {
    const T *qh = q + dims.query.rowStart(h, dims.groupHeads);
    const T *kh = k + dims.key.rowStart(h, dims.groupHeads);
    for (int64_t i = 0; i < tq; ++i) {
      int64_t visible = dims.visibleKeys(i);
      double max = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < visible; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < headDim; ++c)
          dot += static_cast<double>(load(qh[i * qRow + c])) *
                 static_cast<double>(load(kh[j * kRow + c]));
        double score = scale * dot;
        if (score > max) {
          sum = sum * std::exp(max - score) + 1;
          max = score;
        } else {
          sum += std::exp(score - max);
        }
      }
      lse[h * tq + i] =
          visible == 0 ? -std::numeric_limits<float>::infinity()
                       : static_cast<float>(max + std::log(sum));
    }
  }
}

namespace {
/// attention and qkv_attention, once their operands are checked: `q`, `k`
/// and `v` are the buffers the layouts in `dims` index.
Status runAttention(const char *kernel, const AttentionDims &dims,
                    double scale, const TensorView &q, const TensorView &k,
                    const TensorView &v, const TensorView &out,
                    const TensorView *lse) {
  for (auto [what, value] :
       {std::pair<const char *, int64_t>{"head size", dims.headSize},
        {"value head size", dims.valueSize},
        {"key row stride", dims.key.row},
        {"value row stride", dims.value.row}})
    if (Status s = checkBlasSize(kernel, what, value); !s.isOk())
      return s;

  if (dims.queries == 0 || dims.heads == 0)
    return Status::ok();
  return dispatchFloat(kernel, "query", q, [&](auto tag) {
    using T = decltype(tag);
    if (lse)
      attentionLse(dims, q.as<const T>(), k.as<const T>(), lse->as<float>(),
                   scale);
    if (dims.valueSize == 0)
      return;
    if constexpr (std::is_floating_point_v<T>)
      attentionBlas(dims, q.as<const T>(), k.as<const T>(), v.as<const T>(),
                    out.as<T>(), scale);
    else
      attentionHalfWidth(dims, q.as<const T>(), k.as<const T>(),
                         v.as<const T>(), out.as<T>(), scale);
  });
}
} // namespace

Status attention(const KernelArgs &args) {
  const char *kernel = "attention";
  AttentionDims dims;
  double scale = 0;
  const TensorView *lse = nullptr;
  if (Status s = checkAttentionForward(args, kernel, dims, scale, lse);
      !s.isOk())
    return s;
  return runAttention(kernel, dims, scale, args.inputs[0], args.inputs[1],
                      args.inputs[2], args.outputs[0], lse);
}

Status qkvAttention(const KernelArgs &args) {
  const char *kernel = "qkv_attention";
  AttentionDims dims;
  double scale = 0;
  const TensorView *lse = nullptr;
  if (Status s = checkQkvAttentionForward(args, kernel, dims, scale, lse);
      !s.isOk())
    return s;
  const TensorView &qkv = args.inputs[0];
  return runAttention(kernel, dims, scale, qkv, qkv, qkv, args.outputs[0],
                      lse);
}

} // namespace zcc::cpu::kernels

// OpenBLAS's own workspace allocator (common.h; not in cblas.h).
extern "C" {
void *blas_memory_alloc(int procpos);
void blas_memory_free(void *buffer);
}

namespace zcc::cpu {

namespace {
/// The workspace OpenBLAS maps for a product (its BUFFER_SIZE plus a page).
constexpr uint64_t kBlasWorkspaceBytes = (128ull << 20) + 4096;
} // namespace

Status reserveBlasWorkspaces(int callers) {
  if (callers <= 0)
    return Status::ok();
  // OpenBLAS would spin in its allocator rather than fail: map the room
  // first, untouched (neither resident nor, with overcommit, committed).
  uint64_t bytes = static_cast<uint64_t>(callers) * kBlasWorkspaceBytes;
  void *room = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (room == MAP_FAILED) {
    int error = errno;
    std::string limit = "no address-space limit";
    rlimit rl{};
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      limit = formatString("an address-space limit (ulimit -v) of %llu KiB",
                           static_cast<unsigned long long>(rl.rlim_cur >> 10));
    return makeStatus(StatusCode::kResourceExhausted,
                      "the cpu backend's BLAS (OpenBLAS) needs a %llu MiB workspace for each of "
                      "the job's %d rank threads, and the process cannot map their %llu MiB "
                      "(%s; %s): raise the limit (ulimit -v) or free host memory, or compile "
                      "the plan for fewer ranks (zcc --world-size)",
                      static_cast<unsigned long long>(kBlasWorkspaceBytes >> 20), callers,
                      static_cast<unsigned long long>(bytes >> 20), std::strerror(error),
                      limit.c_str());
  }
  munmap(room, static_cast<size_t>(bytes));
  // Held all at once, each is a workspace of its own; freed, OpenBLAS keeps
  // them mapped for the products to come.
  std::vector<void *> held(static_cast<size_t>(callers));
  for (void *&workspace : held)
    workspace = blas_memory_alloc(0);
  for (void *workspace : held)
    blas_memory_free(workspace);
  return Status::ok();
}

} // namespace zcc::cpu
