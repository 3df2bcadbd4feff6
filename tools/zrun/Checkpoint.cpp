//===- Checkpoint.cpp - Saving and resuming a training run ----------------===//

#include "tools/zrun/Checkpoint.h"

#include "runtime/Plan/PlanLoader.h"
#include "runtime/Support/File.h"
#include "runtime/Train/CheckpointFiles.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace zcc {
namespace {

using Json = nlohmann::json;

/// 2: each tensor says which rank file holds each of its parts (a pipeline's
/// stages hold different tensors); 1, still read: every rank file holds
/// every tensor at the same offset.
constexpr int kFormat = 2;

std::string stepName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

std::string rankFileName(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.bin", rank);
  return name;
}

/// The list of a rank file's tensors that rank 0 merges into the manifest
/// (and then removes).
std::string rankIndexName(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.json", rank);
  return name;
}

/// The buffers a checkpoint holds: what a step boundary carries to the next
/// step (gradients are zero there; activations and inputs are rewritten).
bool isSaved(const plan::Buffer &buffer) {
  return buffer.kind() == plan::PARAMETER || buffer.kind() == plan::OPTIMIZER_STATE;
}

/// Makes `path` and its missing parents.
/// A saved buffer as the model sees it: the whole tensor's shape, and in
/// how many blocks of rows the ranks hold it (1: every rank holds it whole).
struct Logical {
  std::vector<int64_t> shape;
  int64_t parts = 1;
};

int64_t elementsOf(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

Logical logicalOf(const plan::Plan &plan, const plan::Buffer &buffer) {
  Logical logical;
  logical.shape.assign(buffer.shape().begin(), buffer.shape().end());
  // A parameter partitioned by ZeRO-3 says so in its weight; an optimizer
  // state "P.kind" is partitioned when it is smaller than parameter P.
  std::string param = buffer.name();
  if (buffer.kind() == plan::OPTIMIZER_STATE)
    param = param.substr(0, param.rfind('.'));
  for (const plan::Weight &weight : plan.weights()) {
    const plan::Buffer &paramBuffer = plan.buffers(weight.buffer());
    if (paramBuffer.name() != param)
      continue;
    std::vector<int64_t> full(paramBuffer.shape().begin(), paramBuffer.shape().end());
    if (weight.shards() > 1 && !full.empty())
      full[0] *= weight.shards();
    int64_t local = elementsOf(logical.shape);
    if (local > 0 && elementsOf(full) > local) {
      logical.parts = elementsOf(full) / local;
      logical.shape = full;
    }
  }
  return logical;
}

/// Makes `path` and its missing parents.
Status makeDirectory(const std::string &path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return makeStatus(StatusCode::kUnavailable, "cannot create '%s': %s", prefix.c_str(),
                        std::strerror(errno));
    if (slash == std::string::npos)
      return Status::ok();
  }
}

/// Makes a rename inside `dir` durable.
void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

/// Fault injection for the crash tests: ZCC_KILL_DURING_SAVE=STEP makes
/// the process kill itself (SIGKILL, as an outside kill would) during the
/// save of step STEP, once every rank has written its file and before the
/// manifest exists: the moment a crash must not turn into a checkpoint.
void killIfInjected(int64_t step) {
  const char *value = std::getenv("ZCC_KILL_DURING_SAVE");
  if (value && *value && std::strtoll(value, nullptr, 10) == step) {
    std::fprintf(stderr, "zrun: ZCC_KILL_DURING_SAVE=%s: killing this process mid-save\n",
                 value);
    std::fflush(stderr);
    ::kill(::getpid(), SIGKILL);
  }
}

} // namespace

Status saveCheckpoint(Executor &executor, const std::string &dir, const TrainState &state,
                      int rank, int shardIndex, Communicator *communicator) {
  const plan::Plan &plan = executor.plan().plan;
  std::string partial = joinPath(dir, "." + stepName(state.step) + ".partial");
  std::string final = joinPath(dir, stepName(state.step));
  if (rank == 0) {
    ZCC_RETURN_IF_ERROR(makeDirectory(partial), "--save %s", dir.c_str());
  }
  if (communicator)
    ZCC_RETURN_IF_ERROR(communicator->barrier(), "while saving a checkpoint");

  // This rank's buffers, one after the other, and what they are: rank 0
  // cannot tell, since a pipeline's stages hold different buffers.
  std::string bytes;
  Json index = Json::array();
  for (const plan::Buffer &buffer : plan.buffers()) {
    if (!isSaved(buffer))
      continue;
    StatusOr<HostTensor> tensor = executor.readBuffer(buffer.id());
    if (!tensor.isOk())
      return tensor.takeStatus();
    Logical logical = logicalOf(plan, buffer);
    index.push_back({{"name", buffer.name()},
                     {"kind", buffer.kind() == plan::PARAMETER ? "parameter" : "optimizer_state"},
                     {"dtype", buffer.dtype()},
                     {"bytes", buffer.bytes()},
                     {"offset", bytes.size()},
                     {"shape", logical.shape},
                     {"parts", logical.parts},
                     {"part", logical.parts > 1 ? shardIndex : 0}});
    bytes.append(reinterpret_cast<const char *>(tensor->data.data()), tensor->data.size());
  }
  ZCC_RETURN_IF_ERROR(writeFile(joinPath(partial, rankFileName(rank)), bytes),
                      "while saving a checkpoint");
  ZCC_RETURN_IF_ERROR(writeFile(joinPath(partial, rankIndexName(rank)), index.dump()),
                      "while saving a checkpoint");
  if (communicator)
    ZCC_RETURN_IF_ERROR(communicator->barrier(), "while saving a checkpoint");

  if (rank == 0) {
    killIfInjected(state.step);
    int world = communicator ? communicator->size() : 1;
    Json files = Json::array();
    // Each tensor once, with the rank file and offset of each of its parts
    // (the first rank that holds a part gives it).
    Json buffers = Json::array();
    std::map<std::string, size_t> entryOf;
    for (int r = 0; r < world; ++r) {
      std::string path = joinPath(partial, rankFileName(r));
      StatusOr<std::string> written = readFile(path);
      if (!written.isOk())
        return written.takeStatus().addContext("while saving a checkpoint");
      files.push_back({{"name", rankFileName(r)},
                       {"bytes", written->size()},
                       {"crc32", planChecksum(*written)}});
      std::string indexPath = joinPath(partial, rankIndexName(r));
      StatusOr<std::string> listed = readFile(indexPath);
      if (!listed.isOk())
        return listed.takeStatus().addContext("while saving a checkpoint");
      Json held = Json::parse(*listed, nullptr, /*allow_exceptions=*/false);
      if (!held.is_array())
        return makeStatus(StatusCode::kInternal, "%s is not a tensor list", indexPath.c_str());
      for (const Json &tensor : held) {
        std::string name = tensor.value("name", std::string());
        int64_t parts = tensor.value("parts", int64_t(1)), part = tensor.value("part", int64_t(0));
        auto [it, inserted] = entryOf.try_emplace(name, buffers.size());
        if (inserted) {
          Json entry = tensor;
          entry.erase("part");
          entry["locations"] = Json::array();
          for (int64_t p = 0; p < parts; ++p)
            entry["locations"].push_back(nullptr);
          buffers.push_back(std::move(entry));
        }
        Json &entry = buffers[it->second];
        if (entry["shape"] != tensor["shape"] || entry["dtype"] != tensor["dtype"] ||
            entry["parts"] != tensor["parts"] || part < 0 || part >= parts)
          return makeStatus(StatusCode::kInternal,
                            "rank %d holds tensor '%s' in another shape, type or partition "
                            "than an earlier rank",
                            r, name.c_str());
        if (entry["locations"][part].is_null())
          entry["locations"][part] = {r, tensor.value("offset", uint64_t(0))};
      }
      ::unlink(indexPath.c_str());
    }
    for (Json &entry : buffers) {
      for (const Json &location : entry["locations"])
        if (location.is_null())
          return makeStatus(StatusCode::kInternal,
                            "no rank holds every part of tensor '%s'",
                            entry.value("name", std::string()).c_str());
      entry["offset"] = entry["locations"][0][1];
    }
    Json manifest = {
        {"format", kFormat},
        {"plan_checksum", executor.plan().header.checksum()},
        {"world_size", world},
        {"step", state.step},
        {"applied", state.applied},
        {"samples", state.samples},
        {"loss_scaler",
         {{"scale", state.scaler.scale},
          {"cur_iter", state.scaler.curIter},
          {"last_overflow_iter", state.scaler.lastOverflowIter},
          {"cur_hysteresis", state.scaler.curHysteresis}}},
        {"files", files},
        {"buffers", buffers}};
    ZCC_RETURN_IF_ERROR(writeFile(joinPath(partial, "manifest.json"), manifest.dump(1) + "\n"),
                        "while saving a checkpoint");
    struct stat existing;
    if (::stat(final.c_str(), &existing) == 0)
      return makeStatus(StatusCode::kAlreadyExists,
                        "--save %s: a checkpoint of step %lld is already there; save into "
                        "another folder or remove it",
                        dir.c_str(), static_cast<long long>(state.step));
    if (::rename(partial.c_str(), final.c_str()) != 0)
      return makeStatus(StatusCode::kUnavailable, "cannot rename '%s' to '%s': %s",
                        partial.c_str(), final.c_str(), std::strerror(errno));
    syncDirectory(dir);
    ZCC_RETURN_IF_ERROR(writeFile(joinPath(dir, "latest"), stepName(state.step) + "\n"),
                        "while saving a checkpoint");
    syncDirectory(dir);
  }
  if (communicator)
    ZCC_RETURN_IF_ERROR(communicator->barrier(), "while saving a checkpoint");
  return Status::ok();
}

StatusOr<TrainState> resumeCheckpoint(Executor &executor, const std::string &dir,
                                      int shardIndex) {
  const plan::Plan &plan = executor.plan().plan;
  // Every rank file is checked whole before anything is read from it.
  StatusOr<CheckpointFiles> read = readCheckpoint(dir);
  if (!read.isOk()) {
    Status status = read.takeStatus();
    if (status.code() == StatusCode::kNotFound)
      return Status(StatusCode::kNotFound, "--resume " + status.message());
    return status;
  }
  const Json &manifest = read->manifest;
  const std::string &manifestPath = read->manifestPath;
  const std::vector<std::string> &shards = read->shards;
  auto bad = [&](const std::string &what) {
    return Status(StatusCode::kInvalidArgument, manifestPath + ": " + what);
  };
  for (const char *key : {"format", "plan_checksum", "world_size", "step", "applied", "samples",
                          "loss_scaler"})
    if (!manifest.contains(key))
      return bad(std::string("has no '") + key + "'");
  if (manifest["format"] != kFormat && manifest["format"] != 1)
    return bad("has format " + manifest["format"].dump() + "; this zrun reads formats 1 to " +
               std::to_string(kFormat));
  // Every value is checked for its type before it is read: the runtime has
  // no exceptions, so a type error of nlohmann's would abort without a word.
  // The counts are bounded as --steps is, so that a resumed run neither
  // wraps nor loops (nearly) forever.
  constexpr int64_t kMaxCount = int64_t(1) << 62;
  struct Count {
    const char *key;
    int64_t max;
  };
  for (Count count : {Count{"step", int64_t(1) << 40}, Count{"applied", kMaxCount},
                      Count{"samples", kMaxCount}}) {
    const Json &value = manifest[count.key];
    if (!value.is_number_integer() ||
        (value.is_number_unsigned() ? value.get<uint64_t>() > uint64_t(count.max)
                                    : value.get<int64_t>() < 0))
      return bad(std::string("has '") + count.key + "' " + value.dump() +
                 formatString(", not a whole number from 0 to %lld; the manifest is corrupt: "
                              "use an earlier checkpoint",
                              static_cast<long long>(count.max)));
  }
  const Json &scalerJson = manifest["loss_scaler"];
  bool scalerOk = scalerJson.is_object() &&
                  (!scalerJson.contains("scale") || scalerJson["scale"].is_number());
  for (const char *key : {"cur_iter", "last_overflow_iter", "cur_hysteresis"})
    scalerOk = scalerOk && (!scalerJson.contains(key) || scalerJson[key].is_number_integer());
  if (!scalerOk)
    return bad("has 'loss_scaler' " + scalerJson.dump().substr(0, 120) +
               ", not {\"scale\": NUMBER, \"cur_iter\": INT, \"last_overflow_iter\": INT, "
               "\"cur_hysteresis\": INT}; the manifest is corrupt: use an earlier checkpoint");
  std::map<std::string, const Json *> saved;
  for (const Json &entry : manifest["buffers"]) {
    auto isIntArray = [](const Json &value) {
      return value.is_array() && std::all_of(value.begin(), value.end(), [](const Json &dim) {
               return dim.is_number_integer();
             });
    };
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        (entry.contains("shape") && !isIntArray(entry["shape"])) ||
        (entry.contains("parts") && !entry["parts"].is_number_integer()) ||
        (entry.contains("dtype") && !entry["dtype"].is_number_integer()))
      return bad("lists the tensor " + entry.dump().substr(0, 120) +
                 ", not {\"name\": STRING, \"dtype\": INT, \"shape\": [INT, ...], \"parts\": "
                 "INT, ...}; the manifest is corrupt: use an earlier checkpoint");
    saved[entry["name"].get<std::string>()] = &entry;
  }

  // Each of this rank's buffers from the saved whole tensor: its own rows
  // when this plan partitions it, all of it otherwise, read from whichever
  // saved ranks hold those rows. The same plan on the same ranks reads
  // exactly what it wrote; another world size or ZeRO stage reshards.
  for (const plan::Buffer &buffer : plan.buffers()) {
    if (!isSaved(buffer))
      continue;
    auto found = saved.find(buffer.name());
    if (found == saved.end()) {
      // ZeRO's master rows are derived from the parameters by @init.
      if (buffer.kind() == plan::OPTIMIZER_STATE &&
          buffer.name().size() > 7 && buffer.name().rfind(".master") == buffer.name().size() - 7)
        continue;
      return bad("has no tensor '" + buffer.name() +
                 "', which this plan needs: it was saved from another model");
    }
    const Json &entry = *found->second;
    Logical mine = logicalOf(plan, buffer);
    std::vector<int64_t> shape = entry.value("shape", std::vector<int64_t>());
    int64_t parts = entry.value("parts", int64_t(1));
    if (shape != mine.shape || entry.value("dtype", int(0)) != static_cast<int>(buffer.dtype()))
      return bad("tensor '" + buffer.name() + "' has another shape or dtype than this plan's");
    int64_t rows = shape.empty() ? 1 : shape[0];
    // Parts are blocks of whole rows; any other count would read rows no
    // part holds (or divide by zero rows a part).
    if (parts < 1 || parts > std::max<int64_t>(1, rows) || std::max<int64_t>(1, rows) % parts != 0)
      return bad("tensor '" + buffer.name() + "' has " + std::to_string(parts) +
                 " parts, which do not split its " + std::to_string(rows) +
                 " rows evenly; the manifest is corrupt: use an earlier checkpoint");
    uint64_t rowBytes = buffer.bytes() * static_cast<uint64_t>(mine.parts) /
                        static_cast<uint64_t>(std::max<int64_t>(1, rows));
    // Rows [first, first + count) of the whole tensor are this rank's.
    int64_t count = rows / mine.parts;
    int64_t first = mine.parts > 1 ? count * shardIndex : 0;
    int64_t savedRows = rows / std::max<int64_t>(1, parts);
    std::string data;
    data.reserve(buffer.bytes());
    for (int64_t row = first; row < first + count;) {
      // The saved part that holds `row`, and how many rows from there on.
      int64_t part = parts > 1 ? row / savedRows : 0;
      int64_t within = parts > 1 ? row - part * savedRows : row;
      int64_t take = std::min(first + count - row, (parts > 1 ? savedRows : rows) - within);
      uint64_t skip = static_cast<uint64_t>(within) * rowBytes;
      uint64_t length = static_cast<uint64_t>(take) * rowBytes;
      StatusOr<std::pair<size_t, uint64_t>> location = partLocation(*read, entry, part, skip + length);
      if (!location.isOk())
        return location.takeStatus();
      data.append(shards[location->first], location->second + skip, length);
      row += take;
    }
    ZCC_RETURN_IF_ERROR(executor.writeBuffer(buffer.id(), data.data(), data.size()),
                        "--resume %s", dir.c_str());
  }
  TrainState state;
  state.step = manifest["step"].get<int64_t>();
  state.applied = manifest["applied"].get<int64_t>();
  state.samples = manifest["samples"].get<int64_t>();
  const Json &scaler = manifest["loss_scaler"];
  state.scaler.scale = scaler.value("scale", 1.0);
  state.scaler.curIter = scaler.value("cur_iter", int64_t(0));
  state.scaler.lastOverflowIter = scaler.value("last_overflow_iter", int64_t(-1));
  state.scaler.curHysteresis = scaler.value("cur_hysteresis", int64_t(1));
  return state;
}

} // namespace zcc
