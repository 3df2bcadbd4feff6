//===- CheckpointFiles.cpp - Reading a saved checkpoint -------------------===//

#include "runtime/Train/CheckpointFiles.h"

#include "runtime/Plan/PlanLoader.h"
#include "runtime/Support/File.h"

namespace zcc {

StatusOr<CheckpointFiles> readCheckpoint(const std::string &dir) {
  using Json = nlohmann::json;
  StatusOr<std::string> latest = readFile(joinPath(dir, "latest"));
  if (!latest.isOk())
    return Status(StatusCode::kNotFound, dir + ": no checkpoint there (no 'latest' file); "
                                               "pass the folder a run saved into with --save");
  std::string name = *latest;
  while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
    name.pop_back();
  CheckpointFiles files;
  files.stepDir = joinPath(dir, name);
  files.manifestPath = joinPath(files.stepDir, "manifest.json");
  StatusOr<std::string> text = readFile(files.manifestPath);
  if (!text.isOk())
    return Status(StatusCode::kNotFound,
                  dir + ": '" + files.manifestPath + "' is missing: the checkpoint is not whole");
  files.manifest = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (files.manifest.is_discarded() || !files.manifest.is_object())
    return Status(StatusCode::kInvalidArgument,
                  files.manifestPath + ": not a checkpoint manifest (not JSON)");
  for (const char *key : {"files", "buffers"})
    if (!files.manifest.contains(key) || !files.manifest[key].is_array())
      return Status(StatusCode::kInvalidArgument,
                    files.manifestPath + ": has no '" + key + "'");
  if (files.manifest["files"].empty())
    return Status(StatusCode::kInvalidArgument, files.manifestPath + ": lists no rank files");
  for (const Json &file : files.manifest["files"]) {
    std::string path = joinPath(files.stepDir, file.value("name", ""));
    StatusOr<std::string> bytes = readFile(path);
    if (!bytes.isOk())
      return bytes.takeStatus();
    if (bytes->size() != file.value("bytes", uint64_t(0)) ||
        planChecksum(*bytes) != file.value("crc32", uint32_t(0)))
      return Status(StatusCode::kDataLoss,
                    path + ": the shard is corrupt (its size or CRC-32 does not match the "
                           "manifest); use an earlier checkpoint");
    files.shards.push_back(std::move(*bytes));
  }
  return files;
}

} // namespace zcc
