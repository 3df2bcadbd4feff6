//===- TokenData.h - Where a training step's data comes from ----*- C++ -*-===//
//
// A training plan's micro-step reads its data inputs (Training.data_inputs,
// in the ONNX graph's order, the row dimension first) from a DataSource:
//   - TokenDataSource: zrun --data, a token file. With sequence length T,
//     sample i is tokens[i*T, i*T+T+1): its first T tokens feed the first
//     integer input, its last T (the same tokens shifted by one) the second,
//     the labels. Sample indices wrap around the file's (n-1)/T samples, and
//     --shuffle SEED permutes them.
//   - SyntheticDataSource: seeded data for benchmarks and tests, a pure
//     function of (seed, sample index), so that every world size and every
//     split of a step into micro-batches sees the same samples.
// Which samples a micro-batch holds is DESIGN.md's rule (BatchLayout): the
// step's samples go micro-step by micro-step, rank by rank, row by row, so
// a loss trajectory can be compared across data-parallel sizes.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_TRAIN_TOKENDATA_H
#define ZCC_RUNTIME_TRAIN_TOKENDATA_H

#include "runtime/Data/HostTensor.h"
#include "runtime/Support/Status.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zcc {

/// Which samples a micro-batch holds (DESIGN.md, "Token data").
struct BatchLayout {
  int64_t dataParallelSize = 1;
  int64_t microBatchSize = 1;

  /// The samples of a step of `accumulationSteps` micro-steps.
  int64_t samplesPerStep(int64_t accumulationSteps) const {
    return accumulationSteps * dataParallelSize * microBatchSize;
  }

  /// The global index of row `row` of micro-step `microStep` on
  /// data-parallel rank `dpRank`, in the step whose first sample is
  /// `stepStart` (the samples of all earlier steps: the accumulation count
  /// may change between steps, so the caller keeps the sum):
  ///   stepStart + microStep*(dp*mb) + dpRank*mb + row.
  /// A micro-batch's rows are consecutive samples from row 0's index.
  int64_t sampleIndex(int64_t stepStart, int64_t microStep, int64_t dpRank,
                      int64_t row) const {
    return stepStart + microStep * (dataParallelSize * microBatchSize) +
           dpRank * microBatchSize + row;
  }
};

/// Fills one micro-batch's data inputs.
class DataSource {
public:
  virtual ~DataSource() = default;

  /// Writes samples [firstSample, firstSample + rows) into `inputs`, the
  /// micro-step's data inputs in ONNX order. Each input's dtype and shape
  /// are set by the caller, with `rows` as the first dimension; its data is
  /// resized to fit (so a caller that keeps its tensors between steps
  /// allocates only once).
  virtual Status fill(int64_t firstSample, int64_t rows,
                      const std::vector<HostTensor *> &inputs) const = 0;
};

/// The element type of a flat token file.
enum class TokenFileDType {
  kAuto, // uint32 when the path ends in ".u32", otherwise uint16
  kUInt16,
  kUInt32,
};

/// Parses --data-dtype: "uint16" or "u16", "uint32" or "u32"; "" is kAuto.
StatusOr<TokenFileDType> parseTokenFileDType(const std::string &name);

/// The token ids of a --data file: a flat little-endian array of uint16 (or
/// uint32) ids, mapped rather than read (token files are often many GiB), or
/// a 1-D .npy array of int8/int32/int64 ids (read whole, through readNpy;
/// its header says the dtype, so `dtype` must be kAuto for it). Cheap to
/// copy: copies share the tokens.
class TokenDataset {
public:
  /// Fails for a missing or empty file, a flat file whose length is not a
  /// whole number of ids, an .npy that is not a 1-D integer array, and a
  /// negative id.
  static StatusOr<TokenDataset>
  open(const std::string &path, TokenFileDType dtype = TokenFileDType::kAuto);

  const std::string &path() const { return path_; }
  int64_t size() const { return size_; }
  /// Token `index`, 0 <= index < size().
  int64_t token(int64_t index) const;

private:
  enum class Element { kU16, kU32, kI8, kI32, kI64 };
  struct Storage;

  TokenDataset() = default;

  std::shared_ptr<const Storage> storage_;
  const uint8_t *bytes_ = nullptr;
  Element element_ = Element::kU16;
  int64_t size_ = 0;
  std::string path_;
};

/// Samples of length T + 1 cut from a TokenDataset:
///   sample i = tokens[j*T, j*T + T + 1), j = order[i mod numSamples()],
/// where numSamples() = (n - 1) / T and `order` is the identity, or with a
/// shuffle seed the Fisher-Yates permutation
///   for m = N-1 down to 1: swap(order[m], order[uniform(m + 1)])
/// with uniform(b) drawn from std::mt19937_64(seed) (whose output the C++
/// standard fixes) by rejection: take the first draw r >= 2^64 mod b, use
/// r mod b. Every pass over the data uses the same order.
///
/// fill() takes one or two integer inputs (int64 or int32) of shape
/// [rows, T]: the first gets each sample's first T tokens, the second its
/// last T (the labels). Other inputs are an error.
class TokenDataSource : public DataSource {
public:
  /// Fails when the dataset has fewer than T + 1 tokens.
  static StatusOr<TokenDataSource>
  create(TokenDataset dataset, int64_t sequenceLength,
         std::optional<uint64_t> shuffleSeed = std::nullopt);

  int64_t sequenceLength() const { return sequenceLength_; }
  int64_t numSamples() const { return numSamples_; }
  /// The dataset sample j that global sample `sample` (>= 0) reads.
  int64_t datasetSample(int64_t sample) const;

  Status fill(int64_t firstSample, int64_t rows,
              const std::vector<HostTensor *> &inputs) const override;

private:
  explicit TokenDataSource(TokenDataset dataset)
      : dataset_(std::move(dataset)) {}

  TokenDataset dataset_;
  int64_t sequenceLength_ = 0;
  int64_t numSamples_ = 0;
  std::vector<int64_t> order_; // empty without a shuffle seed
};

/// Seeded data that depends only on (seed, global sample index, input,
/// position), never on how a step is split into micro-batches or ranks:
///   - integer inputs (int64, int32; one or two, [rows, T]): sample i's T + 1
///     tokens are token(seed, i, p), p = 0..T, split into inputs and labels
///     as TokenDataSource does;
///   - float inputs (f32, f64; [rows, ...]): element e of sample i's row of
///     input k (k counts all data inputs in ONNX order) is
///     normal(seed, i, k, e).
/// Both come from a counter-based hash, so no generator state is carried:
///   h(seed, stream, a, b) = s(s(s(s(seed) ^ stream) ^ a) ^ b), where s is
///   splitmix64's step (add 0x9e3779b97f4a7c15, then its finalizer);
///   token(seed, i, p) = (h(seed, 0, i, p) * range) >> 64 (128-bit product);
///   normal(seed, i, k, e) = sqrt(-2 ln u1) cos(2 pi u2) (Box-Muller, in
///   double), u1 = ((h(seed, 1 + k, i, 2e) >> 11) + 1) / 2^53 in (0, 1],
///   u2 = (h(seed, 1 + k, i, 2e + 1) >> 11) / 2^53 in [0, 1).
/// f32 inputs take the double rounded to float.
class SyntheticDataSource : public DataSource {
public:
  /// `tokenRange` (the vocabulary size) must be positive.
  static StatusOr<SyntheticDataSource> create(uint64_t seed,
                                              int64_t tokenRange);

  static int64_t token(uint64_t seed, int64_t sample, int64_t position,
                       int64_t range);
  static double normal(uint64_t seed, int64_t sample, int64_t input,
                       int64_t element);

  Status fill(int64_t firstSample, int64_t rows,
              const std::vector<HostTensor *> &inputs) const override;

private:
  SyntheticDataSource() = default;

  uint64_t seed_ = 0;
  int64_t tokenRange_ = 1;
};

} // namespace zcc

#endif // ZCC_RUNTIME_TRAIN_TOKENDATA_H
