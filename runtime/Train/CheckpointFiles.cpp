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
    // Checked before reading: the runtime has no exceptions, so nlohmann's
    // type errors would end the process without a word.
    if (!file.is_object() || !file.contains("name") || !file["name"].is_string() ||
        !file.contains("bytes") || !file["bytes"].is_number_unsigned() ||
        !file.contains("crc32") || !file["crc32"].is_number_unsigned())
      return Status(StatusCode::kInvalidArgument,
                    files.manifestPath + ": 'files' lists " + file.dump().substr(0, 80) +
                        ", not {\"name\": ..., \"bytes\": ..., \"crc32\": ...}; the manifest "
                        "is corrupt: use an earlier checkpoint");
    std::string path = joinPath(files.stepDir, file["name"].get<std::string>());
    StatusOr<std::string> bytes = readFile(path);
    if (!bytes.isOk())
      return bytes.takeStatus();
    if (bytes->size() != file["bytes"].get<uint64_t>() ||
        planChecksum(*bytes) != file["crc32"].get<uint64_t>())
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
  std::string name = entry.is_object() && entry.contains("name") && entry["name"].is_string()
                         ? entry["name"].get<std::string>()
                         : std::string("?");
  auto bad = [&](const std::string &what) {
    return Status(StatusCode::kInvalidArgument,
                  files.manifestPath + ": tensor '" + name + "' " + what);
  };
  if (!entry.is_object())
    return bad("is not an object");
  size_t file = static_cast<size_t>(part);
  uint64_t offset = 0;
  if (entry.contains("offset")) {
    if (!entry["offset"].is_number_unsigned())
      return bad("has offset " + entry["offset"].dump() + ", not a byte offset");
    offset = entry["offset"].get<uint64_t>();
  }
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
  if (offset > files.shards[file].size() || length > files.shards[file].size() - offset)
    return bad("lies outside its rank file");
  return std::make_pair(file, offset);
}

} // namespace zcc
