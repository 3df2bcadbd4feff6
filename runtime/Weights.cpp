//===- Weights.cpp - Filling parameter buffers ----------------------------===//

#include "runtime/Weights.h"

#include "runtime/Data/OnnxWeights.h"
#include "runtime/Data/Safetensors.h"
#include "runtime/Support/File.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace zcc {

// Weights move through a host buffer of at most this size, so loading a
// model needs host memory for one slice, not for the whole model.
static const uint64_t kStagingBytes = 64ull << 20;

std::string weightFilePath(const plan::Plan &plan, const plan::Weight &weight,
                           const WeightOptions &options) {
  std::string base =
      options.dir.empty() ? parentPath(plan.model_path()) : options.dir;
  return joinPath(base, weight.file());
}

static std::string describeWeight(const plan::Weight &weight) {
  return formatString("weight '%s' (buffer %u)", weight.name().c_str(),
                      weight.buffer());
}

//===----------------------------------------------------------------------===//
// Random weights
//===----------------------------------------------------------------------===//

static const double kTwoPi = 6.283185307179586476925286766559;

namespace {
/// Standard normal draws: Box-Muller on a Mersenne twister. Both are fully
/// specified (unlike std::normal_distribution, which differs between
/// standard libraries), so a seed means the same weights everywhere libm
/// agrees.
class NormalSource {
public:
  NormalSource(uint64_t seed, uint32_t weightIndex) {
    std::seed_seq sequence{static_cast<uint32_t>(seed),
                           static_cast<uint32_t>(seed >> 32), weightIndex};
    engine_.seed(sequence);
  }

  double next() {
    if (haveSpare_) {
      haveSpare_ = false;
      return spare_;
    }
    // (0, 1]: log(0) must not happen.
    double u1 = (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53;
    double u2 = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
    double radius = std::sqrt(-2.0 * std::log(u1));
    double angle = kTwoPi * u2;
    spare_ = radius * std::sin(angle);
    haveSpare_ = true;
    return radius * std::cos(angle);
  }

private:
  std::mt19937_64 engine_;
  bool haveSpare_ = false;
  double spare_ = 0.0;
};
} // namespace

/// IEEE half precision, rounded to nearest even.
static uint16_t toHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000)
    return sign | 0x7e00; // NaN
  if (magnitude >= 0x477ff000)
    return sign | 0x7c00; // 65520 and above round to infinity.
  if (magnitude < 0x38800000) {
    // Below 2^-14 halves are subnormal: multiples of 2^-24.
    float scaled = std::fabs(value) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  uint32_t half =
      ((((magnitude >> 23) - 127 + 15) << 10) | ((magnitude & 0x7fffff) >> 13));
  uint32_t rest = magnitude & 0x1fff;
  // A carry out of the mantissa correctly bumps the exponent.
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half;
  return sign | static_cast<uint16_t>(half);
}

/// bfloat16: the top half of a float, rounded to nearest even.
static uint16_t toBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffff) > 0x7f800000)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

/// Writes `count` values starting at `host`, each `value()` converted to
/// `dtype`.
template <typename Draw>
static Status fillValues(plan::DType dtype, uint64_t count, void *host,
                         Draw value) {
  switch (dtype) {
  case plan::F32: {
    float *out = static_cast<float *>(host);
    for (uint64_t i = 0; i < count; ++i)
      out[i] = static_cast<float>(value());
    return Status::ok();
  }
  case plan::F64: {
    double *out = static_cast<double *>(host);
    for (uint64_t i = 0; i < count; ++i)
      out[i] = value();
    return Status::ok();
  }
  case plan::F16:
  case plan::BF16: {
    uint16_t *out = static_cast<uint16_t *>(host);
    for (uint64_t i = 0; i < count; ++i) {
      float v = static_cast<float>(value());
      out[i] = dtype == plan::F16 ? toHalf(v) : toBFloat16(v);
    }
    return Status::ok();
  }
  default:
    return makeStatus(StatusCode::kUnimplemented,
                      "normal random values for %s buffers are not supported "
                      "yet",
                      dtypeText(dtype).c_str());
  }
}

/// Fills a run of `count` elements; `normal` continues where the previous
/// run of the same weight stopped.
static Status drawSlice(const plan::RandomInit &init, plan::DType dtype,
                        NormalSource &normal, uint64_t count, void *host) {
  size_t elementBytes = cpu::dtypeBytes(dtype);
  switch (init.kind()) {
  case plan::RandomInit::ZEROS:
    std::memset(host, 0, static_cast<size_t>(count * elementBytes));
    return Status::ok();
  case plan::RandomInit::ONES:
    switch (dtype) {
    case plan::I64:
      std::fill_n(static_cast<int64_t *>(host), count, 1);
      return Status::ok();
    case plan::I32:
      std::fill_n(static_cast<int32_t *>(host), count, 1);
      return Status::ok();
    case plan::I8:
    case plan::BOOL:
      std::fill_n(static_cast<uint8_t *>(host), count, 1);
      return Status::ok();
    default:
      return fillValues(dtype, count, host, [] { return 1.0; });
    }
  case plan::RandomInit::NORMAL: {
    double std = init.std();
    return fillValues(dtype, count, host, [&] { return std * normal.next(); });
  }
  default:
    return makeStatus(StatusCode::kInvalidArgument,
                      "random init kind %d is unknown",
                      static_cast<int>(init.kind()));
  }
}

uint32_t randomStreamOf(const std::string &name) {
  // FNV-1a: fixed across builds and platforms, unlike std::hash.
  uint32_t hash = 2166136261u;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash;
}

Status drawRandomWeight(const plan::RandomInit &init, plan::DType dtype,
                        uint64_t seed, uint32_t weightIndex, uint64_t count,
                        void *host) {
  NormalSource normal(seed, weightIndex);
  return drawSlice(init, dtype, normal, count, host);
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

static Status loadRandomWeight(const plan::Weight &weight, uint32_t index,
                               const plan::Buffer &buffer, uint64_t seed,
                               int shardIndex, std::vector<uint8_t> &staging,
                               Backend &backend, uint8_t *destination) {
  size_t elementBytes = cpu::dtypeBytes(buffer.dtype());
  // A partitioned weight draws the whole weight's sequence and keeps this
  // rank's part, so every world size starts from the same values. Every
  // rank draws all of it, so the ranks finish loading together and none
  // waits at its first collective for longer than the others took.
  uint64_t part = buffer.bytes() / elementBytes;
  uint64_t shards = std::max<uint64_t>(1, weight.shards());
  uint64_t first = shards > 1 ? part * static_cast<uint64_t>(shardIndex) : 0;
  uint64_t total = part * shards;
  uint64_t perSlice = std::max<uint64_t>(1, kStagingBytes / elementBytes);
  NormalSource normal(seed, index);
  for (uint64_t done = 0; done < total;) {
    uint64_t count = std::min(perSlice, total - done);
    staging.resize(static_cast<size_t>(count * elementBytes));
    Status status = drawSlice(weight.random_init(), buffer.dtype(), normal,
                              count, staging.data());
    if (!status.isOk())
      return status.addContext("cannot draw " + describeWeight(weight));
    // Keep the drawn elements that fall in [first, first + part).
    uint64_t keepFrom = std::max(done, first);
    uint64_t keepTo = std::min(done + count, first + part);
    if (keepFrom < keepTo)
      ZCC_RETURN_IF_ERROR(
          backend.copyToDevice(destination + (keepFrom - first) * elementBytes,
                               staging.data() + (keepFrom - done) * elementBytes,
                               (keepTo - keepFrom) * elementBytes),
          "while copying %s to the device", describeWeight(weight).c_str());
    done += count;
  }
  return Status::ok();
}

/// Copies bytes [offset, offset + length) of `path` to `destination`
/// through `staging`, a slice at a time.
static Status copyFileRange(const std::string &path, uint64_t offset,
                            uint64_t length, const std::string &item,
                            std::vector<uint8_t> &staging, Backend &backend,
                            uint8_t *destination) {
  for (uint64_t done = 0; done < length;) {
    uint64_t count = std::min(kStagingBytes, length - done);
    staging.resize(static_cast<size_t>(count));
    ZCC_RETURN_IF_ERROR(
        readFileRange(path, offset + done, count, staging.data()),
        "cannot read %s", item.c_str());
    ZCC_RETURN_IF_ERROR(
        backend.copyToDevice(destination + done, staging.data(), count),
        "while copying %s to the device", item.c_str());
    done += count;
  }
  return Status::ok();
}

/// Whether a tensor stored as `file` can fill a buffer of `buffer`: the
/// same dtype, or f32 narrowed to f16 or bf16 (rounded to nearest even, as
/// the cast kernels round), which an inference plan that computes in 16
/// bits keeps its weights in.
static bool convertibleDType(plan::DType file, plan::DType buffer) {
  return file == buffer || (file == plan::F32 && (buffer == plan::F16 || buffer == plan::BF16));
}

/// The bytes a buffer of `buffer` dtype and `bufferBytes` needs from a file
/// that stores it as `file`.
static uint64_t fileBytesFor(plan::DType file, plan::DType buffer, uint64_t bufferBytes) {
  return bufferBytes / cpu::dtypeBytes(buffer) * cpu::dtypeBytes(file);
}

/// copyFileRange, converting from the file's dtype to the buffer's
/// (convertibleDType): f32 slices are narrowed in place in `staging`.
static Status copyFileRangeAs(const std::string &path, uint64_t offset, uint64_t length,
                              plan::DType fileDType, plan::DType bufferDType,
                              const std::string &item, std::vector<uint8_t> &staging,
                              Backend &backend, uint8_t *destination) {
  if (fileDType == bufferDType)
    return copyFileRange(path, offset, length, item, staging, backend, destination);
  for (uint64_t done = 0; done < length;) {
    uint64_t count = std::min(kStagingBytes, length - done);
    staging.resize(static_cast<size_t>(count));
    ZCC_RETURN_IF_ERROR(readFileRange(path, offset + done, count, staging.data()),
                        "cannot read %s", item.c_str());
    // Element i moves from byte 4 i to byte 2 i: left to right, nothing is
    // overwritten before it is read.
    uint64_t elements = count / sizeof(float);
    for (uint64_t e = 0; e < elements; ++e) {
      float value;
      std::memcpy(&value, staging.data() + e * sizeof(float), sizeof(float));
      uint16_t narrow = bufferDType == plan::F16 ? toHalf(value) : toBFloat16(value);
      std::memcpy(staging.data() + e * sizeof(uint16_t), &narrow, sizeof(narrow));
    }
    ZCC_RETURN_IF_ERROR(backend.copyToDevice(destination + done / 2, staging.data(),
                                             elements * sizeof(uint16_t)),
                        "while copying %s to the device", item.c_str());
    done += count;
  }
  return Status::ok();
}

static Status loadFileWeight(const plan::Plan &plan, const plan::Weight &weight,
                             const plan::Buffer &buffer,
                             const WeightOptions &options,
                             std::vector<uint8_t> &staging, Backend &backend,
                             uint8_t *destination) {
  std::string item = describeWeight(weight);
  if (weight.file().empty())
    return Status(StatusCode::kFailedPrecondition,
                  item + " has no file in the plan to read it from; run with "
                         "--weights random");
  if (!convertibleDType(weight.file_dtype(), buffer.dtype()))
    return Status(StatusCode::kUnimplemented,
                  item + " is stored as " + dtypeText(weight.file_dtype()) +
                      " in '" + weight.file() + "' but its buffer is " +
                      dtypeText(buffer.dtype()) +
                      "; only f32 weights convert (to f16 or bf16); recompile the plan "
                      "or run with --weights random");
  uint64_t shards = std::max<uint32_t>(1, weight.shards());
  uint64_t fileBytes = fileBytesFor(weight.file_dtype(), buffer.dtype(), buffer.bytes());
  if (weight.length() != fileBytes * shards)
    return Status(
        StatusCode::kInvalidArgument,
        item + formatString(" reads %llu bytes but its buffer has "
                            "%llu; recompile the plan",
                            static_cast<unsigned long long>(weight.length()),
                            static_cast<unsigned long long>(fileBytes * shards)));
  std::string path = weightFilePath(plan, weight, options);
  StatusOr<uint64_t> size = fileSize(path);
  if (!size.isOk()) {
    if (size.status().code() == StatusCode::kNotFound)
      return Status(StatusCode::kNotFound,
                    item + " is read from '" + path +
                        "', which does not exist; pass --weights DIR with "
                        "the folder that holds '" +
                        weight.file() + "', or --weights random");
    Status status = size.takeStatus();
    return status.addContext("cannot read " + item);
  }
  uint64_t end = weight.offset() + weight.length();
  if (end < weight.offset() || end > *size)
    return Status(
        StatusCode::kOutOfRange,
        item + formatString(" needs bytes [%llu, %llu) of '%s', but "
                            "the file has only %llu bytes; the "
                            "weight file does not match the plan "
                            "(recompile, or pass --weights random)",
                            static_cast<unsigned long long>(weight.offset()),
                            static_cast<unsigned long long>(end), path.c_str(),
                            static_cast<unsigned long long>(*size)));
  // A partitioned weight: this rank's block of rows.
  uint64_t part = weight.length() / shards;
  uint64_t first = shards > 1 ? part * static_cast<uint64_t>(options.shardIndex) : 0;
  return copyFileRangeAs(path, weight.offset() + first, part, weight.file_dtype(), buffer.dtype(),
                         item, staging, backend, destination);
}

//===----------------------------------------------------------------------===//
// Weights by name: --weights MODEL.onnx and --weights FILE.safetensors (a
// partitioned weight reads its rows of the whole tensor)
//===----------------------------------------------------------------------===//

static std::vector<int64_t> bufferShape(const plan::Buffer &buffer) {
  return std::vector<int64_t>(buffer.shape().begin(), buffer.shape().end());
}

/// The plan dtype of an ONNX data type, as the compiler maps them (uint8
/// buffers are I8); DTYPE_UNSPECIFIED for types without buffers.
static plan::DType planDType(int32_t onnxType) {
  switch (onnxType) {
  case kOnnxFloat:
    return plan::F32;
  case kOnnxFloat16:
    return plan::F16;
  case kOnnxBFloat16:
    return plan::BF16;
  case kOnnxDouble:
    return plan::F64;
  case kOnnxInt64:
    return plan::I64;
  case kOnnxInt32:
    return plan::I32;
  case kOnnxInt8:
  case kOnnxUint8:
    return plan::I8;
  case kOnnxBool:
    return plan::BOOL;
  default:
    return plan::DTYPE_UNSPECIFIED;
  }
}

/// The part of a named tensor that fills `buffer`: all of it, or for a
/// weight partitioned over `shards` ranks (ZeRO-3) the block of rows of
/// rank `shardIndex`, as the plan's own files are read (Weight.shards).
struct NamedPart {
  /// The whole tensor's shape, as the file must hold it.
  std::vector<int64_t> shape;
  uint64_t shards = 1;
  uint64_t shardIndex = 0;
};

static NamedPart namedPartOf(const plan::Weight &weight, const plan::Buffer &buffer,
                             int shardIndex) {
  NamedPart part;
  part.shape = bufferShape(buffer);
  part.shards = std::max<uint32_t>(1, weight.shards());
  if (part.shards > 1 && !part.shape.empty()) {
    part.shape[0] *= static_cast<int64_t>(part.shards);
    part.shardIndex = static_cast<uint64_t>(shardIndex);
  }
  return part;
}

/// The checks every named source shares: the file's tensor has the whole
/// weight's dtype, shape and byte count. `fileDtype` is the file's own
/// spelling.
static Status checkNamedWeight(const std::string &item, const std::string &file,
                               const std::string &fileDtype,
                               plan::DType dtype,
                               const std::vector<int64_t> &shape,
                               uint64_t length, const plan::Buffer &buffer,
                               const NamedPart &part) {
  if (!convertibleDType(dtype, buffer.dtype()) || shape != part.shape)
    return Status(StatusCode::kInvalidArgument,
                  item + " is " + fileDtype + " of shape " + shapeText(shape) +
                      " in '" + file + "', but the plan's buffer is " +
                      dtypeText(buffer.dtype()) + " of shape " +
                      shapeText(part.shape) +
                      (part.shards > 1 ? formatString(" (the whole weight's, partitioned over %llu ranks)",
                                                      static_cast<unsigned long long>(part.shards))
                                       : std::string()) +
                      "; pass weights of the model the plan was compiled "
                      "from (or recompile the plan for this one)");
  uint64_t needed = fileBytesFor(dtype, buffer.dtype(), buffer.bytes()) * part.shards;
  if (length != needed)
    return Status(StatusCode::kDataLoss,
                  item +
                      formatString(" has %llu bytes of data in '%s', but its "
                                   "dtype and shape need %llu; the file is "
                                   "damaged",
                                   static_cast<unsigned long long>(length),
                                   file.c_str(),
                                   static_cast<unsigned long long>(needed)));
  return Status::ok();
}

/// Copies the part of a named tensor at [offset, offset + length) of `path`
/// that fills the buffer (checkNamedWeight has checked the length).
static Status copyNamedPart(const std::string &path, uint64_t offset, uint64_t length,
                            plan::DType fileDType, const plan::Buffer &buffer,
                            const NamedPart &part, const std::string &item,
                            std::vector<uint8_t> &staging, Backend &backend,
                            uint8_t *destination) {
  uint64_t partBytes = length / part.shards;
  return copyFileRangeAs(path, offset + partBytes * part.shardIndex, partBytes, fileDType,
                         buffer.dtype(), item, staging, backend, destination);
}

static Status missingWeight(const std::string &item, const std::string &file,
                            size_t count, const char *what) {
  return Status(StatusCode::kNotFound,
                item + formatString(" is not in '%s' (it has %zu %s); pass a "
                                    "file with the plan's weight names, such "
                                    "as a copy of the model it was compiled "
                                    "from",
                                    file.c_str(), count, what));
}

static const char *onnxTypeName(int32_t dtype) {
  switch (dtype) {
  case kOnnxFloat:
    return "FLOAT";
  case kOnnxUint8:
    return "UINT8";
  case kOnnxInt8:
    return "INT8";
  case kOnnxUint16:
    return "UINT16";
  case kOnnxInt16:
    return "INT16";
  case kOnnxInt32:
    return "INT32";
  case kOnnxInt64:
    return "INT64";
  case kOnnxString:
    return "STRING";
  case kOnnxBool:
    return "BOOL";
  case kOnnxFloat16:
    return "FLOAT16";
  case kOnnxDouble:
    return "DOUBLE";
  case kOnnxUint32:
    return "UINT32";
  case kOnnxUint64:
    return "UINT64";
  case kOnnxBFloat16:
    return "BFLOAT16";
  default:
    return nullptr;
  }
}

static Status loadOnnxWeight(const plan::Weight &weight,
                             const plan::Buffer &buffer, int shardIndex,
                             const std::string &model,
                             const OnnxInitializers &initializers,
                             std::vector<uint8_t> &staging, Backend &backend,
                             uint8_t *destination) {
  std::string item = describeWeight(weight);
  NamedPart part = namedPartOf(weight, buffer, shardIndex);
  auto found = initializers.find(weight.name());
  if (found == initializers.end())
    return missingWeight(item, model, initializers.size(), "initializers");
  const InitializerLocation &tensor = found->second;
  const char *typeName = onnxTypeName(tensor.dtype);
  std::string fileDtype = typeName ? std::string("ONNX ") + typeName
                                   : "ONNX data type " +
                                         std::to_string(tensor.dtype);
  // A tensor without raw_data (int64_data and the like) has no range: its
  // dtype and shape are still checked first, the more likely mistake.
  bool inPlace =
      tensor.external || tensor.length != 0 || buffer.bytes() == 0;
  Status status = checkNamedWeight(item, model, fileDtype,
                                   planDType(tensor.dtype), tensor.dims,
                                   inPlace ? tensor.length
                                           : fileBytesFor(planDType(tensor.dtype), buffer.dtype(),
                                                          buffer.bytes()) *
                                                 part.shards,
                                   buffer, part);
  if (!status.isOk())
    return status;
  if (!inPlace)
    return Status(StatusCode::kUnimplemented,
                  item + " stores its data in '" + model +
                      "' in a form zrun cannot read in place; save it as "
                      "raw_data (as onnx.numpy_helper.from_array and "
                      "torch.onnx.export do)");
  std::string path = model;
  if (tensor.external) {
    if (tensor.file.empty())
      return Status(StatusCode::kDataLoss,
                    item + " is external data in '" + model +
                        "' but names no location; re-save the model with "
                        "onnx.save_model(..., save_as_external_data=True)");
    path = joinPath(parentPath(model), tensor.file);
  }
  StatusOr<uint64_t> size = fileSize(path);
  if (!size.isOk()) {
    Status error = size.takeStatus();
    return error.addContext("cannot read " + item + " (data of '" + model +
                            "'; keep external data next to the model, as "
                            "it was saved)");
  }
  uint64_t end = tensor.offset + tensor.length;
  if (end < tensor.offset || end > *size)
    return Status(StatusCode::kOutOfRange,
                  item + formatString(" needs bytes [%llu, %llu) of '%s', "
                                      "but the file has only %llu bytes "
                                      "(truncated?)",
                                      static_cast<unsigned long long>(
                                          tensor.offset),
                                      static_cast<unsigned long long>(end),
                                      path.c_str(),
                                      static_cast<unsigned long long>(*size)));
  return copyNamedPart(path, tensor.offset, tensor.length, planDType(tensor.dtype), buffer, part,
                       item, staging, backend, destination);
}

static Status loadSafetensorsWeight(const plan::Weight &weight,
                                    const plan::Buffer &buffer, int shardIndex,
                                    const std::string &file,
                                    const SafetensorsIndex &index,
                                    std::vector<uint8_t> &staging,
                                    Backend &backend, uint8_t *destination) {
  std::string item = describeWeight(weight);
  auto found = index.find(weight.name());
  if (found == index.end())
    return missingWeight(item, file, index.size(), "tensors");
  const SafetensorsTensor &tensor = found->second;
  plan::DType dtype = safetensorsDType(tensor.dtype);
  NamedPart part = namedPartOf(weight, buffer, shardIndex);
  Status status = checkNamedWeight(item, file, tensor.dtype, dtype,
                                   tensor.shape, tensor.length, buffer, part);
  if (!status.isOk())
    return status;
  return copyNamedPart(file, tensor.offset, tensor.length, dtype, buffer, part, item, staging,
                       backend, destination);
}

Status loadWeights(const LoadedPlan &loaded, const WeightOptions &options,
                   Backend &backend, uint8_t *arena, uint8_t *hostArena, SwapFile *swapFile) {
  const plan::Plan &plan = loaded.plan;
  // A named source is indexed once, then every weight looked up in it.
  OnnxInitializers initializers;
  SafetensorsIndex tensors;
  if (options.source == WeightSource::kOnnxFile) {
    StatusOr<OnnxInitializers> found = findOnnxInitializers(options.file);
    if (!found.isOk())
      return found.takeStatus();
    initializers = std::move(*found);
  } else if (options.source == WeightSource::kSafetensorsFile) {
    StatusOr<SafetensorsIndex> found = readSafetensorsIndex(options.file);
    if (!found.isOk())
      return found.takeStatus();
    tensors = std::move(*found);
  }
  std::vector<uint8_t> staging;
  for (int i = 0; i < plan.weights_size(); ++i) {
    const plan::Weight &weight = plan.weights(i);
    const plan::Buffer &buffer = plan.buffers(weight.buffer());
    // A weight in the swap file (offload_param to NVMe) loads into host
    // memory of the backend's and is written there.
    void *swapStaging = nullptr;
    if (buffer.space() == plan::NVME) {
      if (!swapFile)
        return Status(StatusCode::kFailedPrecondition,
                      describeWeight(weight) + " lives in the NVMe swap file, which this rank "
                                               "has not created");
      ZCC_RETURN_IF_ERROR(backend.allocateHost(buffer.bytes(), SwapFile::kBlock, &swapStaging),
                          "cannot allocate host memory to load %s into the swap file",
                          describeWeight(weight).c_str());
    }
    uint8_t *destination =
        swapStaging ? static_cast<uint8_t *>(swapStaging)
                    : (buffer.space() == plan::HOST ? hostArena : arena) + buffer.offset();
    Status status = Status::ok();
    switch (options.source) {
    case WeightSource::kRandom:
      status = loadRandomWeight(weight, randomStreamOf(weight.name()), buffer,
                                options.seed, options.shardIndex, staging, backend,
                                destination);
      break;
    case WeightSource::kPlanFiles:
      status = loadFileWeight(plan, weight, buffer, options, staging, backend,
                              destination);
      break;
    case WeightSource::kOnnxFile:
      status = loadOnnxWeight(weight, buffer, options.shardIndex, options.file, initializers,
                              staging, backend, destination);
      break;
    case WeightSource::kSafetensorsFile:
      status = loadSafetensorsWeight(weight, buffer, options.shardIndex, options.file, tensors,
                                     staging, backend, destination);
      break;
    }
    if (swapStaging) {
      if (status.isOk())
        status = swapFile->write(buffer.offset(), swapStaging, buffer.bytes())
                     .addContext("while writing " + describeWeight(weight) +
                                 " into the NVMe swap file");
      backend.deallocateHost(swapStaging);
    }
    if (!status.isOk())
      return status;
  }
  return Status::ok();
}

} // namespace zcc
