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

StatusOr<std::pair<size_t, uint64_t>> partLocation(const CheckpointFiles &files,
                                                   const nlohmann::json &entry, int64_t part,
                                                   uint64_t length) {
  std::string name = entry.value("name", std::string());
  auto bad = [&](const std::string &what) {
    return Status(StatusCode::kInvalidArgument,
                  files.manifestPath + ": tensor '" + name + "' " + what);
  };
  size_t file = static_cast<size_t>(part);
  uint64_t offset = entry.value("offset", uint64_t(0));
  if (entry.contains("locations")) {
    const nlohmann::json &locations = entry["locations"];
    if (!locations.is_array() || part < 0 || static_cast<size_t>(part) >= locations.size() ||
        !locations[part].is_array() || locations[part].size() != 2 ||
        !locations[part][0].is_number_unsigned() || !locations[part][1].is_number_unsigned())
      return bad("has no location for its part " + std::to_string(part));
    file = locations[part][0].get<size_t>();
    offset = locations[part][1].get<uint64_t>();
  }
  if (file >= files.shards.size())
    return bad("is missing rows: part " + std::to_string(part) + " names rank file " +
               std::to_string(file) + " of " + std::to_string(files.shards.size()));
  if (offset + length > files.shards[file].size())
    return bad("lies outside its rank file");
  return std::make_pair(file, offset);
}

} // namespace zcc
