//===- TokenData.cpp - Where a training step's data comes from ------------===//

#include "runtime/Train/TokenData.h"

#include "runtime/Data/Npy.h"
#include "runtime/Support/File.h"
#include "schema/DTypes.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <sys/mman.h>
#include <unistd.h>

namespace zcc {

static bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

StatusOr<TokenFileDType> parseTokenFileDType(const std::string &name) {
  if (name.empty())
    return TokenFileDType::kAuto;
  if (name == "uint16" || name == "u16")
    return TokenFileDType::kUInt16;
  if (name == "uint32" || name == "u32")
    return TokenFileDType::kUInt32;
  return makeStatus(StatusCode::kInvalidArgument,
                    "unknown token dtype '%s'; use uint16 or uint32",
                    name.c_str());
}

//===----------------------------------------------------------------------===//
// TokenDataset
//===----------------------------------------------------------------------===//

/// Owns the bytes a dataset reads: a read-only mapping of a flat file, or
/// the elements of an .npy array.
struct TokenDataset::Storage {
  void *mapping = nullptr;
  size_t mappingBytes = 0;
  HostTensor array;

  Storage() = default;
  Storage(const Storage &) = delete;
  Storage &operator=(const Storage &) = delete;
  ~Storage() {
    if (mapping)
      ::munmap(mapping, mappingBytes);
  }
};

StatusOr<TokenDataset> TokenDataset::open(const std::string &path,
                                          TokenFileDType dtype) {
  TokenDataset dataset;
  dataset.path_ = path;
  auto storage = std::make_shared<Storage>();

  if (endsWith(path, ".npy")) {
    if (dtype != TokenFileDType::kAuto)
      return makeStatus(StatusCode::kInvalidArgument,
                        "'%s' is an .npy file, whose header gives its dtype; "
                        "a token dtype applies only to flat token files",
                        path.c_str());
    StatusOr<HostTensor> array = readNpy(path);
    if (!array.isOk())
      return array.takeStatus().addContext("while opening token data");
    storage->array = std::move(array).value();
    const HostTensor &tensor = storage->array;
    switch (tensor.dtype) {
    case plan::I64:
      dataset.element_ = Element::kI64;
      break;
    case plan::I32:
      dataset.element_ = Element::kI32;
      break;
    case plan::I8:
      dataset.element_ = Element::kI8;
      break;
    default:
      return makeStatus(StatusCode::kInvalidArgument,
                        "token data '%s' holds %s, not integer token ids",
                        path.c_str(), plan::DType_Name(tensor.dtype).c_str());
    }
    if (tensor.shape.size() != 1)
      return makeStatus(StatusCode::kInvalidArgument,
                        "token data '%s' has %zu dimensions; it must be a 1-D "
                        "array of token ids (numpy: arr.reshape(-1))",
                        path.c_str(), tensor.shape.size());
    dataset.size_ = tensor.shape[0];
    dataset.bytes_ = tensor.data.data();
  } else {
    bool wide = dtype == TokenFileDType::kUInt32 ||
                (dtype == TokenFileDType::kAuto && endsWith(path, ".u32"));
    dataset.element_ = wide ? Element::kU32 : Element::kU16;
    const uint64_t width = wide ? 4 : 2;
    StatusOr<uint64_t> bytes = fileSize(path);
    if (!bytes.isOk())
      return bytes.takeStatus().addContext("while opening token data");
    if (*bytes % width != 0)
      return makeStatus(StatusCode::kInvalidArgument,
                        "token data '%s' has %llu bytes, not a whole number "
                        "of %s token ids",
                        path.c_str(), static_cast<unsigned long long>(*bytes),
                        wide ? "uint32" : "uint16");
    dataset.size_ = static_cast<int64_t>(*bytes / width);
    if (*bytes > 0) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        return makeStatus(StatusCode::kUnavailable, "cannot open '%s': %s",
                          path.c_str(), std::strerror(errno));
      void *mapping = ::mmap(nullptr, static_cast<size_t>(*bytes), PROT_READ,
                             MAP_PRIVATE, fd, 0);
      int mapError = errno;
      ::close(fd);
      if (mapping == MAP_FAILED)
        return makeStatus(StatusCode::kUnavailable, "cannot map '%s': %s",
                          path.c_str(), std::strerror(mapError));
      storage->mapping = mapping;
      storage->mappingBytes = static_cast<size_t>(*bytes);
      dataset.bytes_ = static_cast<const uint8_t *>(mapping);
    }
  }

  if (dataset.size_ == 0)
    return makeStatus(StatusCode::kInvalidArgument,
                      "token data '%s' holds no tokens", path.c_str());
  dataset.storage_ = std::move(storage);
  if (dataset.element_ != Element::kU16 && dataset.element_ != Element::kU32)
    for (int64_t i = 0; i < dataset.size_; ++i)
      if (dataset.token(i) < 0)
        return makeStatus(StatusCode::kInvalidArgument,
                          "token data '%s' holds the negative id %lld at "
                          "index %lld",
                          path.c_str(),
                          static_cast<long long>(dataset.token(i)),
                          static_cast<long long>(i));
  return dataset;
}

int64_t TokenDataset::token(int64_t index) const {
  const uint8_t *at = bytes_;
  switch (element_) {
  case Element::kU16: {
    uint16_t value;
    std::memcpy(&value, at + index * 2, sizeof(value));
    return value;
  }
  case Element::kU32: {
    uint32_t value;
    std::memcpy(&value, at + index * 4, sizeof(value));
    return value;
  }
  case Element::kI8:
    return static_cast<int8_t>(at[index]);
  case Element::kI32: {
    int32_t value;
    std::memcpy(&value, at + index * 4, sizeof(value));
    return value;
  }
  case Element::kI64: {
    int64_t value;
    std::memcpy(&value, at + index * 8, sizeof(value));
    return value;
  }
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Filling inputs
//===----------------------------------------------------------------------===//

static bool isTokenDType(plan::DType dtype) {
  return dtype == plan::I64 || dtype == plan::I32;
}

namespace {
/// The token inputs of a micro-batch: where the ids and the labels go.
struct TokenInputs {
  HostTensor *ids = nullptr;
  HostTensor *labels = nullptr; // null when the model takes only ids
  int64_t sequenceLength = 0;
};
} // namespace

/// Checks every input's row dimension and sizes its data; finds the integer
/// inputs (at most two, [rows, T] each). `floatsAllowed`: whether other
/// inputs may be f32/f64 (the synthetic source fills them).
static Status prepareInputs(int64_t firstSample, int64_t rows,
                            const std::vector<HostTensor *> &inputs,
                            bool floatsAllowed, TokenInputs &tokens) {
  if (firstSample < 0 || rows < 0)
    return makeStatus(StatusCode::kInvalidArgument,
                      "a micro-batch needs first sample >= 0 and rows >= 0, "
                      "got %lld and %lld",
                      static_cast<long long>(firstSample),
                      static_cast<long long>(rows));
  for (size_t k = 0; k < inputs.size(); ++k) {
    HostTensor *input = inputs[k];
    if (!input)
      return makeStatus(StatusCode::kInvalidArgument, "data input %zu is null",
                        k);
    if (input->shape.empty() || input->shape[0] != rows)
      return makeStatus(StatusCode::kInvalidArgument,
                        "data input %zu must have %lld rows as its first "
                        "dimension",
                        k, static_cast<long long>(rows));
    for (int64_t dim : input->shape)
      if (dim < 0)
        return makeStatus(StatusCode::kInvalidArgument,
                          "data input %zu has a negative dimension", k);
    if (isTokenDType(input->dtype)) {
      if (input->shape.size() != 2)
        return makeStatus(StatusCode::kInvalidArgument,
                          "integer data input %zu must be [rows, sequence "
                          "length], it has %zu dimensions",
                          k, input->shape.size());
      if (tokens.labels)
        return makeStatus(StatusCode::kInvalidArgument,
                          "data input %zu is a third integer input; token "
                          "data feeds two (the ids and the labels)",
                          k);
      if (tokens.ids && input->shape[1] != tokens.sequenceLength)
        return makeStatus(StatusCode::kInvalidArgument,
                          "the labels (data input %zu) have sequence length "
                          "%lld, the ids %lld",
                          k, static_cast<long long>(input->shape[1]),
                          static_cast<long long>(tokens.sequenceLength));
      (tokens.ids ? tokens.labels : tokens.ids) = input;
      tokens.sequenceLength = input->shape[1];
    } else if (!floatsAllowed ||
               (input->dtype != plan::F32 && input->dtype != plan::F64)) {
      return makeStatus(StatusCode::kUnimplemented,
                        "%s cannot fill data input %zu of dtype %s",
                        floatsAllowed ? "synthetic data" : "token data", k,
                        plan::DType_Name(input->dtype).c_str());
    }
    size_t bytes = static_cast<size_t>(input->numElements()) *
                   plan::dtypeBytes(input->dtype);
    if (input->data.size() != bytes)
      input->data.resize(bytes);
  }
  return Status::ok();
}

/// Writes `value` as element `index` of an int64 or int32 tensor.
static Status storeToken(HostTensor &tensor, int64_t index, int64_t value) {
  if (tensor.dtype == plan::I64) {
    std::memcpy(tensor.data.data() + index * 8, &value, 8);
    return Status::ok();
  }
  if (value > INT32_MAX)
    return makeStatus(StatusCode::kOutOfRange,
                      "token id %lld does not fit the model's int32 input",
                      static_cast<long long>(value));
  int32_t narrow = static_cast<int32_t>(value);
  std::memcpy(tensor.data.data() + index * 4, &narrow, 4);
  return Status::ok();
}

/// Fills the ids and labels of `rows` samples: position p of sample
/// firstSample + b is tokenAt(b, p), p = 0..T.
template <typename TokenAt>
static Status fillTokens(const TokenInputs &tokens, int64_t rows,
                         TokenAt tokenAt) {
  const int64_t seq = tokens.sequenceLength;
  for (int64_t b = 0; b < rows; ++b) {
    for (int64_t p = 0; p <= seq; ++p) {
      int64_t value = tokenAt(b, p);
      if (p < seq)
        ZCC_RETURN_IF_ERROR(storeToken(*tokens.ids, b * seq + p, value),
                            "while filling the ids");
      if (p > 0 && tokens.labels)
        ZCC_RETURN_IF_ERROR(storeToken(*tokens.labels, b * seq + p - 1, value),
                            "while filling the labels");
    }
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// TokenDataSource
//===----------------------------------------------------------------------===//

/// A uniform draw from [0, bound) by rejection, from raw generator output
/// only (std::uniform_int_distribution's algorithm is the library's choice).
static uint64_t uniformBelow(std::mt19937_64 &engine, uint64_t bound) {
  // 2^64 mod bound: the draws below it would favour small results.
  uint64_t threshold = (0 - bound) % bound;
  while (true) {
    uint64_t draw = engine();
    if (draw >= threshold)
      return draw % bound;
  }
}

StatusOr<TokenDataSource>
TokenDataSource::create(TokenDataset dataset, int64_t sequenceLength,
                        std::optional<uint64_t> shuffleSeed) {
  if (sequenceLength < 1)
    return makeStatus(StatusCode::kInvalidArgument,
                      "sequence length must be positive, got %lld",
                      static_cast<long long>(sequenceLength));
  if (dataset.size() < sequenceLength + 1)
    return makeStatus(StatusCode::kInvalidArgument,
                      "token data '%s' has %lld tokens, fewer than one "
                      "sample of sequence length %lld needs (%lld)",
                      dataset.path().c_str(),
                      static_cast<long long>(dataset.size()),
                      static_cast<long long>(sequenceLength),
                      static_cast<long long>(sequenceLength + 1));
  const int64_t numSamples = (dataset.size() - 1) / sequenceLength;
  TokenDataSource source(std::move(dataset));
  source.numSamples_ = numSamples;
  source.sequenceLength_ = sequenceLength;
  if (shuffleSeed) {
    source.order_.resize(static_cast<size_t>(source.numSamples_));
    for (int64_t i = 0; i < source.numSamples_; ++i)
      source.order_[i] = i;
    std::mt19937_64 engine(*shuffleSeed);
    for (int64_t m = source.numSamples_ - 1; m > 0; --m) {
      uint64_t j = uniformBelow(engine, static_cast<uint64_t>(m) + 1);
      std::swap(source.order_[m], source.order_[j]);
    }
  }
  return source;
}

int64_t TokenDataSource::datasetSample(int64_t sample) const {
  int64_t wrapped = sample % numSamples_;
  return order_.empty() ? wrapped : order_[static_cast<size_t>(wrapped)];
}

Status TokenDataSource::fill(int64_t firstSample, int64_t rows,
                             const std::vector<HostTensor *> &inputs) const {
  TokenInputs tokens;
  ZCC_RETURN_IF_ERROR(
      prepareInputs(firstSample, rows, inputs, /*floatsAllowed=*/false, tokens),
      "while reading samples %lld.. of '%s'",
      static_cast<long long>(firstSample), dataset_.path().c_str());
  if (!tokens.ids)
    return makeStatus(StatusCode::kInvalidArgument,
                      "token data needs an integer data input (the ids)");
  if (tokens.sequenceLength != sequenceLength_)
    return makeStatus(StatusCode::kInvalidArgument,
                      "the model's sequence length is %lld, the token data "
                      "was cut for %lld",
                      static_cast<long long>(tokens.sequenceLength),
                      static_cast<long long>(sequenceLength_));
  const int64_t seq = sequenceLength_;
  return fillTokens(tokens, rows, [&](int64_t b, int64_t p) {
    return dataset_.token(datasetSample(firstSample + b) * seq + p);
  });
}

//===----------------------------------------------------------------------===//
// SyntheticDataSource
//===----------------------------------------------------------------------===//

/// One step of splitmix64: the increment, then the finalizer.
static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t counterHash(uint64_t seed, uint64_t stream, uint64_t a,
                            uint64_t b) {
  return splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ a) ^ b);
}

StatusOr<SyntheticDataSource> SyntheticDataSource::create(uint64_t seed,
                                                          int64_t tokenRange) {
  if (tokenRange < 1)
    return makeStatus(StatusCode::kInvalidArgument,
                      "synthetic token range must be positive, got %lld",
                      static_cast<long long>(tokenRange));
  SyntheticDataSource source;
  source.seed_ = seed;
  source.tokenRange_ = tokenRange;
  return source;
}

int64_t SyntheticDataSource::token(uint64_t seed, int64_t sample,
                                   int64_t position, int64_t range) {
  uint64_t hash = counterHash(seed, 0, static_cast<uint64_t>(sample),
                              static_cast<uint64_t>(position));
  // Lemire's multiply-shift: the high word of hash * range.
  __extension__ typedef unsigned __int128 Wide;
  return static_cast<int64_t>(
      (static_cast<Wide>(hash) * static_cast<uint64_t>(range)) >> 64);
}

double SyntheticDataSource::normal(uint64_t seed, int64_t sample, int64_t input,
                                   int64_t element) {
  uint64_t stream = 1 + static_cast<uint64_t>(input);
  uint64_t first = counterHash(seed, stream, static_cast<uint64_t>(sample),
                               2 * static_cast<uint64_t>(element));
  uint64_t second = counterHash(seed, stream, static_cast<uint64_t>(sample),
                                2 * static_cast<uint64_t>(element) + 1);
  double u1 = static_cast<double>((first >> 11) + 1) * 0x1p-53;
  double u2 = static_cast<double>(second >> 11) * 0x1p-53;
  const double twoPi = 6.283185307179586;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(twoPi * u2);
}

Status
SyntheticDataSource::fill(int64_t firstSample, int64_t rows,
                          const std::vector<HostTensor *> &inputs) const {
  TokenInputs tokens;
  ZCC_RETURN_IF_ERROR(prepareInputs(firstSample, rows, inputs,
                                    /*floatsAllowed=*/true, tokens),
                      "while drawing synthetic samples %lld..",
                      static_cast<long long>(firstSample));
  if (tokens.ids)
    ZCC_RETURN_IF_ERROR(fillTokens(tokens, rows,
                                   [&](int64_t b, int64_t p) {
                                     return token(seed_, firstSample + b, p,
                                                  tokenRange_);
                                   }),
                        "while drawing synthetic tokens");
  for (size_t k = 0; k < inputs.size(); ++k) {
    HostTensor &input = *inputs[k];
    if (isTokenDType(input.dtype))
      continue;
    int64_t perRow = rows == 0 ? 0 : input.numElements() / rows;
    for (int64_t b = 0; b < rows; ++b)
      for (int64_t e = 0; e < perRow; ++e) {
        double value =
            normal(seed_, firstSample + b, static_cast<int64_t>(k), e);
        int64_t index = b * perRow + e;
        if (input.dtype == plan::F64) {
          std::memcpy(input.data.data() + index * 8, &value, 8);
        } else {
          float narrow = static_cast<float>(value);
          std::memcpy(input.data.data() + index * 4, &narrow, 4);
        }
      }
  }
  return Status::ok();
}

} // namespace zcc
