//===- Export.cpp - Trained weights out of a checkpoint -------------------===//

#include "tools/zplan/Export.h"

#include "plan.pb.h"
#include "runtime/Data/OnnxWeights.h"
#include "runtime/Support/File.h"
#include "runtime/Train/CheckpointFiles.h"

#include <nlohmann/json.hpp>

#include <map>
#include <vector>

namespace zcc {
namespace {

using Json = nlohmann::json;

/// One parameter of the checkpoint, whole.
struct Tensor {
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  std::string bytes;
};

/// The parameters of the newest whole checkpoint in `dir`, by name, each
/// joined from the ranks that held its rows.
StatusOr<std::map<std::string, Tensor>> readParameters(const std::string &dir) {
  StatusOr<CheckpointFiles> read = readCheckpoint(dir);
  if (!read.isOk())
    return read.takeStatus();
  const Json &manifest = read->manifest;
  const std::string &manifestPath = read->manifestPath;
  const std::vector<std::string> &shards = read->shards;
  std::map<std::string, Tensor> parameters;
  for (const Json &entry : manifest["buffers"]) {
    if (entry.value("kind", std::string()) != "parameter")
      continue;
    Tensor tensor;
    tensor.dtype = static_cast<plan::DType>(entry.value("dtype", 0));
    tensor.shape = entry.value("shape", std::vector<int64_t>());
    int64_t parts = entry.value("parts", int64_t(1));
    uint64_t bytes = entry.value("bytes", uint64_t(0));
    for (int64_t part = 0; part < parts; ++part) {
      StatusOr<std::pair<size_t, uint64_t>> location = partLocation(*read, entry, part, bytes);
      if (!location.isOk())
        return location.takeStatus();
      tensor.bytes.append(shards[location->first], location->second, bytes);
    }
    parameters[entry.value("name", std::string())] = std::move(tensor);
  }
  if (parameters.empty())
    return Status(StatusCode::kInvalidArgument, manifestPath + ": the checkpoint holds no parameter");
  return parameters;
}

const char *safetensorsName(plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return "F32";
  case plan::F16:
    return "F16";
  case plan::BF16:
    return "BF16";
  case plan::F64:
    return "F64";
  case plan::I64:
    return "I64";
  case plan::I32:
    return "I32";
  case plan::I8:
    return "I8";
  case plan::BOOL:
    return "BOOL";
  default:
    return "";
  }
}

int32_t onnxType(plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return kOnnxFloat;
  case plan::F16:
    return kOnnxFloat16;
  case plan::BF16:
    return kOnnxBFloat16;
  case plan::F64:
    return kOnnxDouble;
  default:
    return kOnnxUndefined;
  }
}

} // namespace

Status exportSafetensors(const std::string &checkpointDir, const std::string &output) {
  StatusOr<std::map<std::string, Tensor>> parameters = readParameters(checkpointDir);
  if (!parameters.isOk())
    return parameters.takeStatus();
  Json header = Json::object();
  header["__metadata__"] = {{"format", "pt"}, {"producer", "zplan export"}};
  uint64_t offset = 0;
  for (const auto &[name, tensor] : *parameters) {
    header[name] = {{"dtype", safetensorsName(tensor.dtype)},
                    {"shape", tensor.shape},
                    {"data_offsets", {offset, offset + tensor.bytes.size()}}};
    offset += tensor.bytes.size();
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0)
    text.push_back(' ');
  std::string bytes(8, '\0');
  uint64_t length = text.size();
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  bytes += text;
  for (const auto &[name, tensor] : *parameters)
    bytes += tensor.bytes;
  return writeFile(output, bytes);
}

Status exportOnnx(const std::string &checkpointDir, const std::string &model,
                  const std::string &output) {
  StatusOr<std::map<std::string, Tensor>> parameters = readParameters(checkpointDir);
  if (!parameters.isOk())
    return parameters.takeStatus();
  StatusOr<OnnxInitializers> initializers = findOnnxInitializers(model);
  if (!initializers.isOk())
    return initializers.takeStatus();
  // The model's files as they are, then every trained parameter written
  // over its initializer's bytes.
  std::map<std::string, std::string> files;
  StatusOr<std::string> modelBytes = readFile(model);
  if (!modelBytes.isOk())
    return modelBytes.takeStatus();
  files[model] = std::move(*modelBytes);
  std::string modelDir = parentPath(model), outputDir = parentPath(output);
  for (const auto &[name, tensor] : *parameters) {
    auto found = initializers->find(name);
    if (found == initializers->end())
      return Status(StatusCode::kInvalidArgument,
                    model + " has no initializer '" + name +
                        "' of the checkpoint: export with the model the plan was compiled from");
    const InitializerLocation &location = found->second;
    if (location.dtype != onnxType(tensor.dtype) || location.dims != tensor.shape ||
        location.length != tensor.bytes.size())
      return Status(StatusCode::kInvalidArgument,
                    model + ": initializer '" + name +
                        "' has another type, shape or size than the checkpoint's tensor");
    std::string file = location.external ? joinPath(modelDir, location.file) : model;
    if (location.external && modelDir == outputDir)
      return Status(StatusCode::kInvalidArgument,
                    "--onnx " + model +
                        " keeps its weights in external data, which the export rewrites: write "
                        "the trained model into another folder than the model's");
    if (!files.count(file)) {
      StatusOr<std::string> bytes = readFile(file);
      if (!bytes.isOk())
        return bytes.takeStatus();
      files[file] = std::move(*bytes);
    }
    std::string &bytes = files[file];
    if (location.offset + location.length > bytes.size())
      return Status(StatusCode::kOutOfRange, file + ": initializer '" + name + "' lies past its end");
    bytes.replace(location.offset, location.length, tensor.bytes);
  }
  for (const auto &[file, bytes] : files) {
    std::string target =
        file == model ? output : joinPath(outputDir, file.substr(modelDir.empty() ? 0 : modelDir.size() + 1));
    ZCC_RETURN_IF_ERROR(writeFile(target, bytes), "zplan export");
  }
  return Status::ok();
}

} // namespace zcc
