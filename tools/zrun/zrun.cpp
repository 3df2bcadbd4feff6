//===- zrun.cpp - The zcc runtime launcher --------------------------------===//
//
//   zrun PLAN.bin [--backend cpu|cuda] [--input NAME=FILE.npy ...]
//       [--output-dir DIR] [--weights random|DIR|MODEL.onnx|FILE.safetensors]
//       [--seed S] [--nproc N] [--profile[=N]]
//
// Runs a plan written by zcc. On an inference plan it reads each graph input
// from --input, runs program "infer" once and writes each graph output to
// DIR/<output name>.npy. Every failure exits 1 with one message on standard
// error. Options of the full command line (DESIGN.md) that are not
// implemented yet fail with "not supported yet" rather than being ignored.
//
//===----------------------------------------------------------------------===//

#include "runtime/Data/Npy.h"
#include "runtime/Executor.h"
#include "runtime/Plan/PlanLoader.h"
#include "runtime/Support/File.h"
#include "runtime/Support/OutOfMemory.h"
#include "runtime/Support/Thread.h"
#include "runtime/Comm/LocalCommunicator.h"
#include "tools/zrun/Launch.h"
#include "tools/zrun/Profile.h"
#include "tools/zrun/Train.h"
#include "runtime/CudaPlugin.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace zcc;

namespace {

const char kUsage[] =
    "usage: zrun PLAN.bin [--backend cpu|cuda] [--input NAME=FILE.npy ...]\n"
    "            [--output-dir DIR]\n"
    "            [--weights random|DIR|MODEL.onnx|FILE.safetensors]\n"
    "            [--seed S] [--nproc N] [--profile[=N]] [--repeat N]\n"
    "\n"
    "Runs a plan compiled by zcc. On an inference plan, reads every graph\n"
    "input from --input, runs it once and writes every graph output to\n"
    "DIR/<output name>.npy (DIR: --output-dir, default the current folder;\n"
    "a '/' in an output name becomes '_'). A plan compiled for N data-\n"
    "parallel ranks takes the whole batch (N x micro-batch rows), gives\n"
    "rank r its rows and writes the outputs of the whole batch.\n"
    "\n"
    "  --backend cpu|cuda     the backend (default cpu)\n"
    "  --input NAME=FILE.npy  a graph input, once per input\n"
    "  --output-dir DIR       where outputs are written (created if missing)\n"
    "  --repeat N             inference: run the batch N times (default 1) and\n"
    "                         print the mean latency of runs 2..N (the first\n"
    "                         warms up); the outputs are the last run's\n"
    "  --no-outputs           inference: leave the outputs on the device (no\n"
    "                         copy back, no files), for timing\n"
    "  --weights SOURCE       where the weights come from (default: the byte\n"
    "                         ranges the plan records, in the model's folder):\n"
    "                           random             drawn from --seed\n"
    "                           DIR                the plan's weight files, from\n"
    "                                              DIR instead of the model's\n"
    "                                              folder\n"
    "                           MODEL.onnx         every weight by name from the\n"
    "                                              initializers of that model\n"
    "                                              (e.g. a trained copy)\n"
    "                           FILE.safetensors   every weight by name from\n"
    "                                              that safetensors file\n"
    "                         a named weight must have the plan's dtype and\n"
    "                         shape\n"
    "  --seed S               the seed of --weights random (default 0)\n"
    "  --memory-report        print the device memory the run allocated, and\n"
    "                         how each program ran (replayed as a CUDA graph,\n"
    "                         or why not)\n"
    "  --no-graphs            cuda: launch every instruction of every run, no\n"
    "                         CUDA graphs (by default a program that runs on\n"
    "                         the device alone is captured on its second run\n"
    "                         and replayed from then on)\n"
    "  --profile[=N]          time every instruction, each one finished before\n"
    "                         the next starts (streams do not overlap), and\n"
    "                         print after the run the time per program and\n"
    "                         the N kernels and N instructions that took\n"
    "                         longest (default 25; --profile N works too);\n"
    "                         training leaves step 1 out as warm-up; with\n"
    "                         --log-json FILE the profile is also written to\n"
    "                         FILE with the extension .profile.json; with\n"
    "                         --nproc, rank 0's is printed\n"
    "  --nproc N              ranks; must equal the plan's world size (cpu:\n"
    "                         threads; cuda: one process per GPU)\n"
    "  --comm-timeout S       seconds a rank waits for the others before it\n"
    "                         gives the job up (default 30; an inference\n"
    "                         pipeline's batch is one wait)\n"
    "  --host-threads N       threads each rank gives the host kernels of a\n"
    "                         plan with CPU offload (default: the config's\n"
    "                         offload_optimizer.cpuadam_cores_perc of the\n"
    "                         cores, shared by the ranks on this machine);\n"
    "                         the results do not depend on it\n"
    "  --nvme-path DIR        the folder each rank creates its swap file in,\n"
    "                         for a plan that keeps parameters or optimizer\n"
    "                         state on NVMe (default: the config's\n"
    "                         offload_optimizer, else offload_param,\n"
    "                         nvme_path); the file is removed when the rank\n"
    "                         exits\n"
    "  --ranks-per-gpu N      cuda: N ranks share each GPU (local rank r uses\n"
    "                         device r / N; default 1). For running a plan of\n"
    "                         more ranks than there are GPUs, e.g. to check it:\n"
    "                         NCCL takes every rank for a node of its own\n"
    "                         (NCCL_HOSTID) and moves collectives through its\n"
    "                         socket transport (over the loopback interface\n"
    "                         unless NCCL_SOCKET_IFNAME and NCCL_IB_DISABLE\n"
    "                         say otherwise), so they are slow\n"
    "\n"
    "On a training plan, runs --steps optimizer steps:\n"
    "  --steps N              optimizer steps to run\n"
    "  --grad-accum N[,STEP:N...]\n"
    "                         micro-steps per optimizer step (default: the\n"
    "                         config's gradient_accumulation_steps); STEP:N\n"
    "                         changes it from that step on\n"
    "  --data TOKENS          token ids: flat uint16 (uint32 for .u32 or\n"
    "                         --data-dtype uint32) or a 1-D .npy; default: a\n"
    "                         synthetic source drawn from --seed\n"
    "  --data-dtype T         uint16 or uint32\n"
    "  --shuffle SEED         permute the samples\n"
    "  --log-json FILE        one JSON object per optimizer step\n"
    "  --print-every K        a log line every K steps (default: the config's\n"
    "                         steps_per_print)\n"
    "  --save DIR             write a checkpoint into DIR when the run ends\n"
    "  --save-every K         and every K steps\n"
    "  --resume DIR           start from the newest whole checkpoint in DIR and\n"
    "                         continue up to --steps\n"
    "  --check-gradients      instead of training, compare every parameter's\n"
    "                         gradient with central finite differences of the\n"
    "                         loss on one micro-batch (--check-elements N per\n"
    "                         parameter, default 16; --check-step, --check-rtol,\n"
    "                         --check-atol; defaults by the loss's dtype)\n";

struct Options {
  std::string planPath;
  std::string backend = "cpu";
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string outputDir = ".";
  std::string weights;
  uint64_t seed = 0;
  bool memoryReport = false;
  /// --no-graphs clears it.
  bool graphs = true;
  /// --profile: rows of each table; 0: no profile.
  int profileRows = 0;
  /// --repeat: runs of an inference batch.
  int64_t repeat = 1;
  /// --no-outputs: inference outputs are neither read back nor written.
  bool noOutputs = false;
  int64_t nproc = 0;
  /// --host-threads; 0: from the config and the machine.
  int64_t hostThreads = 0;
  /// --nvme-path; empty: the config's offload_optimizer.nvme_path.
  std::string nvmePath;
  /// --ranks-per-gpu: local ranks that share one CUDA device.
  int64_t ranksPerGpu = 1;
  TrainOptions train;
  bool checkGradients = false;
  GradCheckOptions gradCheck;
  bool haveSteps = false;
  bool haveTrainOptions = false;
  /// How long a rank waits for its peers before it gives the job up.
  int64_t commTimeoutSeconds = 30;
  /// The command line, for the ranks the launcher starts.
  char **argv = nullptr;
};

/// Parses a whole non-negative decimal integer: digits only (strtoull
/// alone would skip leading spaces and read " -1" as 2^64 - 1).
bool parseInteger(const std::string &text, uint64_t &value) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
    return false;
  errno = 0;
  char *end = nullptr;
  unsigned long long parsed = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  value = parsed;
  return true;
}

Status usageError(const std::string &message) {
  return Status(StatusCode::kInvalidArgument, message + " (see zrun --help)");
}

Status parseArguments(int argc, char **argv, Options &options, bool &help) {
  help = false;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "-h" || arg == "--help") {
      help = true;
      return Status::ok();
    }
    if (arg == "--no-outputs") {
      options.noOutputs = true;
      continue;
    }
    if (arg == "--memory-report") {
      options.memoryReport = true;
      continue;
    }
    if (arg == "--no-graphs") {
      options.graphs = false;
      continue;
    }
    if (arg == "--profile" || arg.rfind("--profile=", 0) == 0) {
      // The count is optional: "--profile", "--profile=N", or "--profile N"
      // when the next argument is a number (a plan is not).
      std::string given = arg, rows = std::to_string(kDefaultProfileRows);
      if (arg != "--profile") {
        rows = arg.substr(std::strlen("--profile="));
      } else if (i + 1 < args.size() && !args[i + 1].empty() &&
                 std::all_of(args[i + 1].begin(), args[i + 1].end(),
                             [](unsigned char c) { return std::isdigit(c); })) {
        rows = args[++i];
        given += " " + rows;
      }
      uint64_t count = 0;
      if (!parseInteger(rows, count) || count == 0 || count > 1000000)
        return usageError(given + ": expected the rows of each table, 1 to 1000000");
      options.profileRows = static_cast<int>(count);
      continue;
    }
    if (arg == "--check-gradients") {
      options.checkGradients = true;
      options.haveTrainOptions = true;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      if (!options.planPath.empty())
        return usageError("more than one plan given: '" + options.planPath +
                          "' and '" + arg + "'");
      options.planPath = arg;
      continue;
    }
    // Both "--flag value" and "--flag=value".
    std::string name = arg, value;
    bool hasValue = false;
    size_t equals = arg.find('=');
    if (arg.rfind("--", 0) == 0 && equals != std::string::npos) {
      name = arg.substr(0, equals);
      value = arg.substr(equals + 1);
      hasValue = true;
    }
    bool isTrainOption = name == "--steps" || name == "--grad-accum" || name == "--data" ||
                         name == "--data-dtype" || name == "--shuffle" ||
                         name == "--log-json" || name == "--print-every" ||
                         name == "--check-elements" || name == "--check-rtol" ||
                         name == "--check-atol" || name == "--check-step" ||
                         name == "--save" || name == "--save-every" || name == "--resume";
    bool isKnown = name == "--backend" || name == "--input" ||
                   name == "--output-dir" || name == "--weights" ||
                   name == "--seed" || name == "--nproc" || name == "--comm-timeout" ||
                   name == "--repeat" || name == "--host-threads" || name == "--nvme-path" ||
                   name == "--ranks-per-gpu" || isTrainOption;
    options.haveTrainOptions |= isTrainOption;
    if (!isKnown)
      return usageError("unknown option '" + name + "'");
    if (!hasValue) {
      if (i + 1 >= args.size())
        return usageError(name + " needs a value");
      value = args[++i];
    }
    if (name == "--backend") {
      options.backend = value;
    } else if (name == "--input") {
      size_t split = value.find('=');
      if (split == std::string::npos || split == 0 || split + 1 == value.size())
        return usageError("--input " + value + ": expected NAME=FILE.npy");
      options.inputs.emplace_back(value.substr(0, split),
                                  value.substr(split + 1));
    } else if (name == "--output-dir") {
      if (value.empty())
        return usageError("--output-dir needs a folder");
      options.outputDir = value;
    } else if (name == "--weights") {
      if (value.empty())
        return usageError("--weights needs 'random', a folder, a .onnx or "
                          "a .safetensors file");
      options.weights = value;
    } else if (name == "--seed") {
      if (!parseInteger(value, options.seed))
        return usageError("--seed " + value +
                          ": expected a non-negative integer");
    } else if (name == "--host-threads") {
      uint64_t count = 0;
      if (!parseInteger(value, count) || count == 0 || count > 1024)
        return usageError("--host-threads " + value + ": expected a thread count, 1 to 1024");
      options.hostThreads = static_cast<int64_t>(count);
    } else if (name == "--nvme-path") {
      if (value.empty())
        return usageError("--nvme-path needs a folder");
      options.nvmePath = value;
    } else if (name == "--ranks-per-gpu") {
      uint64_t count = 0;
      if (!parseInteger(value, count) || count == 0 || count > 64)
        return usageError("--ranks-per-gpu " + value + ": expected a count, 1 to 64");
      options.ranksPerGpu = static_cast<int64_t>(count);
    } else if (name == "--steps" || name == "--print-every") {
      uint64_t count = 0;
      if (!parseInteger(value, count) || count == 0 || count > (1ull << 40))
        return usageError(name + " " + value + ": expected a positive integer");
      if (name == "--steps") {
        options.train.steps = static_cast<int64_t>(count);
        options.haveSteps = true;
      } else {
        options.train.printEvery = static_cast<int64_t>(count);
      }
    } else if (name == "--check-elements") {
      uint64_t count = 0;
      // Bounded like --steps, so that it stays positive as an int64_t.
      if (!parseInteger(value, count) || count == 0 || count > (1ull << 40))
        return usageError(name + " " + value + ": expected a positive integer");
      options.gradCheck.elements = static_cast<int64_t>(count);
    } else if (name == "--check-rtol" || name == "--check-atol" || name == "--check-step") {
      char *end = nullptr;
      double number = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(number > 0) || !std::isfinite(number))
        return usageError(name + " " + value + ": expected a positive number");
      (name == "--check-rtol"   ? options.gradCheck.rtol
       : name == "--check-atol" ? options.gradCheck.atol
                                : options.gradCheck.step) = number;
    } else if (name == "--save" || name == "--resume") {
      if (value.empty())
        return usageError(name + " needs a folder");
      (name == "--save" ? options.train.saveDir : options.train.resumeDir) = value;
    } else if (name == "--save-every") {
      uint64_t every = 0;
      if (!parseInteger(value, every) || every == 0)
        return usageError("--save-every " + value + ": expected a positive integer");
      options.train.saveEvery = static_cast<int64_t>(every);
    } else if (name == "--grad-accum") {
      Status parsed = parseGradAccum(value, options.train.gradAccum);
      if (!parsed.isOk())
        return parsed;
    } else if (name == "--data") {
      if (value.empty())
        return usageError("--data needs a token file");
      options.train.data = value;
    } else if (name == "--data-dtype") {
      options.train.dataDType = value;
    } else if (name == "--shuffle") {
      uint64_t seed = 0;
      if (!parseInteger(value, seed))
        return usageError("--shuffle " + value + ": expected a non-negative integer seed");
      options.train.shuffleSeed = seed;
    } else if (name == "--log-json") {
      if (value.empty())
        return usageError("--log-json needs a file");
      options.train.logJson = value;
    } else if (name == "--comm-timeout") {
      uint64_t seconds = 0;
      if (!parseInteger(value, seconds) || seconds == 0 || seconds > 86400)
        return usageError("--comm-timeout " + value + ": expected seconds, 1 to 86400");
      options.commTimeoutSeconds = static_cast<int64_t>(seconds);
    } else if (name == "--repeat") {
      uint64_t repeat = 0;
      if (!parseInteger(value, repeat) || repeat == 0 || repeat > 1000000)
        return usageError("--repeat " + value + ": expected a positive integer");
      options.repeat = static_cast<int64_t>(repeat);
    } else if (name == "--nproc") {
      uint64_t nproc = 0;
      if (!parseInteger(value, nproc) || nproc == 0 || nproc > (1u << 20))
        return usageError("--nproc " + value + ": expected a positive integer");
      options.nproc = static_cast<int64_t>(nproc);
    }
  }
  if (options.planPath.empty())
    return usageError("no plan given: zrun PLAN.bin");
  return Status::ok();
}

bool isDirectory(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// `--weights` into the executor's terms. The kind of source follows from
/// the value alone (a folder, or the file's extension) so that a file of
/// another kind is refused here rather than misread later.
Status weightOptions(const Options &options, WeightOptions &weights) {
  weights.seed = options.seed;
  const std::string &value = options.weights;
  if (value.empty())
    return Status::ok();
  if (value == "random") {
    weights.source = WeightSource::kRandom;
    return Status::ok();
  }
  if (isDirectory(value)) {
    weights.dir = value;
    return Status::ok();
  }
  bool isOnnx = endsWith(value, ".onnx");
  bool isSafetensors = endsWith(value, ".safetensors");
  struct stat info;
  bool exists = ::stat(value.c_str(), &info) == 0;
  if (!exists && (isOnnx || isSafetensors))
    return Status(StatusCode::kNotFound,
                  "--weights " + value +
                      ": no such file; pass an existing model or "
                      "safetensors file, the folder that holds the plan's "
                      "weight files, or random");
  if (!exists)
    return Status(StatusCode::kNotFound,
                  "--weights " + value +
                      ": no such folder; pass the folder that holds the "
                      "plan's weight files, or random");
  if (isOnnx) {
    weights.source = WeightSource::kOnnxFile;
    weights.file = value;
    return Status::ok();
  }
  if (isSafetensors) {
    weights.source = WeightSource::kSafetensorsFile;
    weights.file = value;
    return Status::ok();
  }
  return Status(StatusCode::kInvalidArgument,
                "--weights " + value +
                    ": not a folder, and zrun reads weights by name only "
                    "from files ending in .onnx or .safetensors; rename the "
                    "file, or pass random or the folder that holds the "
                    "plan's weight files");
}

/// Makes `path` and its missing parents.
Status makeDirectories(const std::string &path) {
  std::string partial;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos)
      slash = path.size();
    partial = path.substr(0, slash);
    start = slash + 1;
    if (partial.empty() || isDirectory(partial))
      continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
      return makeStatus(StatusCode::kUnavailable,
                        "cannot create the output folder '%s': %s",
                        partial.c_str(), std::strerror(errno));
  }
  if (!isDirectory(path))
    return makeStatus(StatusCode::kInvalidArgument,
                      "--output-dir %s is not a folder", path.c_str());
  return Status::ok();
}

/// --save DIR, checked before the first step: created where missing and
/// proven to take a file. Otherwise a bad DIR shows only when the first
/// checkpoint is written, after the training it was to keep.
Status checkSaveFolder(const std::string &dir) {
  struct stat info;
  if (::stat(dir.c_str(), &info) == 0 && !S_ISDIR(info.st_mode))
    return Status(StatusCode::kInvalidArgument,
                  "--save " + dir +
                      ": not a folder (a file of that name exists); pass a folder to save "
                      "the checkpoints into");
  Status status = makeDirectories(dir);
  if (!status.isOk())
    return Status(status.code(), "--save " + dir + ": " + status.message());
  std::string probe = joinPath(dir, ".zrun-write-test." + std::to_string(::getpid()));
  status = writeFile(probe, "");
  if (!status.isOk())
    return Status(status.code(), "--save " + dir + ": the folder takes no checkpoint: " +
                                     status.message());
  ::unlink(probe.c_str());
  return Status::ok();
}

/// Makes an inference run's output folder and its executor options.
/// --memory-report's line for one rank: what the plan's allocations took,
/// and, on a device backend, what the whole device has in use (the driver's
/// context, the libraries' handles and the communicators' buffers besides),
/// which is what a card of a given size must hold.
void printDeviceMemory(uint64_t allocated, uint64_t inUse, const char *backend,
                       const std::string &rank) {
  std::printf("device memory: %llu bytes allocated on %s%s", static_cast<unsigned long long>(allocated),
              backend, rank.c_str());
  if (inUse != allocated)
    std::printf("; %llu bytes of the device in use", static_cast<unsigned long long>(inUse));
  std::printf("\n");
}

/// An output name as a file name: ONNX names may hold '/', which would
/// otherwise point into folders that do not exist, and NUL, which would end
/// the path early.
std::string outputFileName(const std::string &name) {
  std::string file = name;
  for (char &c : file)
    if (c == '/' || c == '\0')
      c = '_';
  if (file.empty() || file == "." || file == "..")
    file = "_" + file;
  return file + ".npy";
}

/// The folder of the ranks' NVMe swap files: --nvme-path, else the plan's
/// config's offload_optimizer.nvme_path, else its offload_param.nvme_path
/// (empty when none is set; the compiler made them agree where both are).
std::string nvmePathFor(const Options &options, const plan::Plan &plan) {
  if (!options.nvmePath.empty() || plan.nvme_bytes() == 0)
    return options.nvmePath;
  auto config = nlohmann::json::parse(plan.config_json(), nullptr, false);
  for (const char *section : {"offload_optimizer", "offload_param"}) {
    const nlohmann::json *path = &config;
    for (const char *key : {"zero_optimization", section, "nvme_path"}) {
      if (!path->is_object() || !path->contains(key)) {
        path = nullptr;
        break;
      }
      path = &(*path)[key];
    }
    if (path && path->is_string() && !path->get<std::string>().empty())
      return path->get<std::string>();
  }
  return "";
}

/// How the ranks cut and issue their swap file I/O: the config's
/// aio.block_size (default 1 MiB) and aio.queue_depth (default 8).
SwapFile::Requests swapRequestsFor(const plan::Plan &plan) {
  SwapFile::Requests requests;
  auto config = nlohmann::json::parse(plan.config_json(), nullptr, false);
  if (!config.is_object() || !config.contains("aio") || !config["aio"].is_object())
    return requests;
  const nlohmann::json &aio = config["aio"];
  if (aio.contains("block_size") && aio["block_size"].is_number())
    requests.blockSize = static_cast<uint64_t>(aio["block_size"].get<double>());
  if (aio.contains("queue_depth") && aio["queue_depth"].is_number())
    requests.queueDepth = static_cast<int>(aio["queue_depth"].get<double>());
  return requests;
}

/// Two outputs whose names map to one file (outputFileName makes "a/b" and
/// "a_b" both a_b.npy) would silently overwrite each other: refuse them
/// before anything runs. A pipeline's stages may bind one name each.
Status checkOutputFileNames(const Options &options, const plan::Plan &plan) {
  std::map<std::string, std::string> outputOfFile;
  for (const plan::Binding &output : plan.outputs()) {
    std::string file = outputFileName(output.name());
    auto [it, fresh] = outputOfFile.emplace(file, output.name());
    if (!fresh && it->second != output.name())
      return Status(StatusCode::kInvalidArgument,
                    options.planPath + ": outputs '" + it->second + "' and '" + output.name() +
                        "' would both be written to " + joinPath(options.outputDir, file) +
                        "; rename one of them in the model, or run with --no-outputs");
  }
  return Status::ok();
}

Status prepareInference(const Options &options, const plan::Plan &plan,
                        ExecutorOptions &executorOptions) {
  Status status = options.noOutputs ? Status::ok() : checkOutputFileNames(options, plan);
  if (!status.isOk())
    return status;
  status = makeDirectories(options.outputDir);
  if (!status.isOk())
    return status;
  executorOptions.backend = options.backend;
  // ZeRO-Inference with offload_param "nvme": the weights' swap file.
  executorOptions.nvmePath = nvmePathFor(options, plan);
  executorOptions.swapRequests = swapRequestsFor(plan);
  executorOptions.profile = options.profileRows > 0;
  executorOptions.graphs = options.graphs;
  return weightOptions(options, executorOptions.weights);
}

/// Threads each rank gives the host kernels of a plan with CPU offload:
/// DeepSpeed's offload_optimizer.cpuadam_cores_perc (0.8) of this machine's
/// cores, shared by the ranks on it (the launcher's local world size, else
/// every rank of the job), at least one.
int hostThreadsPerRank(const plan::Plan &plan, int world) {
  if (plan.host_arena_bytes() == 0)
    return 1;
  double share = 0.8;
  auto config = nlohmann::json::parse(plan.config_json(), nullptr, false);
  if (config.is_object()) {
    auto zero = config.find("zero_optimization");
    if (zero != config.end() && zero->is_object()) {
      auto offload = zero->find("offload_optimizer");
      // value() would abort (no exceptions) on a value that is not a
      // number; DeepSpeed's share is a fraction of the cores.
      if (offload != zero->end() && offload->is_object())
        if (auto perc = offload->find("cpuadam_cores_perc");
            perc != offload->end() && perc->is_number() && perc->get<double>() > 0 &&
            perc->get<double>() <= 1)
          share = perc->get<double>();
    }
  }
  int localRanks = world;
  for (const char *name : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"})
    if (const char *value = std::getenv(name); value && std::atoi(value) > 0) {
      localRanks = std::atoi(value);
      break;
    }
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, static_cast<int>(cores * share) / std::max(1, localRanks));
}

/// The subgroups of a pipeline job whose rank r runs stage r / dataParallel
/// with data-parallel index r % dataParallel: with `perStage`, one per stage
/// over its data-parallel ranks; otherwise one per data-parallel index over
/// the stages, in stage order.
StatusOr<std::vector<LocalCommunicatorGroup *>>
pipelineSubgroups(LocalCommunicatorGroup &group, int stages, int dataParallel, bool perStage) {
  std::vector<LocalCommunicatorGroup *> subgroups;
  const int count = perStage ? stages : dataParallel, size = perStage ? dataParallel : stages;
  for (int i = 0; i < count; ++i) {
    std::vector<int> ranks;
    for (int j = 0; j < size; ++j)
      ranks.push_back(perStage ? i * dataParallel + j : j * dataParallel + i);
    StatusOr<LocalCommunicatorGroup *> subgroup = group.createSubgroup(ranks);
    if (!subgroup.isOk())
      return subgroup.takeStatus();
    subgroups.push_back(*subgroup);
  }
  return subgroups;
}

/// A rank of a job on the cuda backend: a process of its own, with its GPU
/// and the job's NCCL communicator.
/// With more than one rank on the cuda backend, each rank is a process: the
/// process the user started (`launcher` set) starts them, waits for them and
/// returns their status; a rank joins the job: its GPU (`device`: local
/// rank / --ranks-per-gpu, selected), the NCCL id and its communicator.
Status joinCudaJob(const Options &options, const std::string &path, int world, bool &launcher,
                   std::unique_ptr<Communicator> &communicator, int &device) {
  StatusOr<ProcessRole> role = processRole();
  if (!role.isOk())
    return role.takeStatus();
  StatusOr<const CudaPlugin *> plugin = loadCudaPlugin();
  if (!plugin.isOk())
    return plugin.takeStatus();
  std::chrono::seconds timeout(options.commTimeoutSeconds);
  if (!role->isRank) {
    launcher = true;
    // Ranks that share a GPU are separate NCCL nodes on this machine: their
    // bootstrap and their collectives go over the loopback interface.
    if (options.ranksPerGpu > 1) {
      ::setenv("NCCL_SOCKET_IFNAME", "lo", /*overwrite=*/0);
      ::setenv("NCCL_IB_DISABLE", "1", /*overwrite=*/0);
    }
    StatusOr<std::string> id = (*plugin)->makeCommunicatorId();
    if (!id.isOk())
      return id.takeStatus();
    return launchRanks(options.argv, world, *id, timeout + std::chrono::seconds(15))
        .addContext(path);
  }
  if (role->worldSize != world)
    return makeStatus(StatusCode::kInvalidArgument,
                      "%s: plan was compiled for world size %d, but this job has %d ranks; "
                      "recompile with --world-size %d",
                      path.c_str(), world, role->worldSize, role->worldSize);
  if (options.ranksPerGpu > 1) {
    // NCCL refuses two ranks of one host on one GPU; a host id of its own
    // makes each rank a node of its own. Set before NCCL starts (rank 0
    // may make the id below).
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    ::setenv("NCCL_HOSTID", formatString("%s/zcc-rank-%d", host, role->rank).c_str(),
             /*overwrite=*/1);
  }
  std::string idHex = role->ncclIdHex;
  if (idHex.empty()) {
    if (role->rank == 0) {
      StatusOr<std::string> id = (*plugin)->makeCommunicatorId();
      if (!id.isOk())
        return id.takeStatus();
      idHex = *id;
    }
    ZCC_RETURN_IF_ERROR(exchangeNcclId(*role, idHex, timeout), "rank %d", role->rank);
  }
  device = role->localRank / static_cast<int>(options.ranksPerGpu);
  ZCC_RETURN_IF_ERROR((*plugin)->selectDevice(device, role->rank), "%s", path.c_str());
  StatusOr<std::unique_ptr<Communicator>> created =
      (*plugin)->createCommunicator(idHex, role->rank, world, timeout);
  if (!created.isOk())
    return created.takeStatus().addContext(formatString("rank %d", role->rank));
  communicator = std::move(*created);
  return Status::ok();
}

/// An inference plan on `world` ranks (data-parallel; a pipeline's run by
/// runPipelineInference): each input holds the whole batch, world times
/// the plan's rows, and rank r runs "infer" on rows [r * rows, r * rows +
/// rows) of it; the plan all-gathers each output over the ranks, so rank 0
/// holds the whole batch's outputs and writes them. The cpu backend runs
/// the ranks as threads, the cuda backend as processes with a GPU each.
/// Runs `runRank(rank)` for each rank of the cpu job `group` on a thread of
/// its own and waits for them all. When a rank's thread cannot be started,
/// the ranks started already would wait for it in their first collective:
/// the job is aborted in its name (their calls fail, "aborted by rank R"),
/// they are joined, and the failure to start it is the result.
Status runRankThreads(LocalCommunicatorGroup &group, const std::function<void(int)> &runRank) {
  const int world = group.size();
  std::vector<Thread> threads;
  threads.reserve(static_cast<size_t>(world));
  for (int rank = 0; rank < world; ++rank) {
    StatusOr<Thread> thread =
        Thread::start([&runRank, rank] { runRank(rank); },
                      formatString("the thread of rank %d of %d", rank, world),
                      "raise the process's limits (ulimit -u / -v), or compile the plan for "
                      "fewer ranks (zcc --world-size)");
    if (!thread.isOk()) {
      Status failed = thread.takeStatus();
      group.communicator(rank)->abort(failed.message());
      for (Thread &started : threads)
        started.join();
      return failed;
    }
    threads.push_back(std::move(*thread));
  }
  for (Thread &thread : threads)
    thread.join();
  return Status::ok();
}

/// runRankThreads for `runRank(rank, plan)`, each rank with its own copy of
/// the plan.
template <typename RunRank>
Status runRankThreads(LocalCommunicatorGroup &group, RunRank &runRank, const LoadedPlan &loaded) {
  std::vector<LoadedPlan> copies(static_cast<size_t>(group.size()), loaded);
  return runRankThreads(group, [&](int rank) { runRank(rank, std::move(copies[rank])); });
}

/// The first rank of a job whose run failed for its own reason, not because
/// another rank aborted the job (a job of more than one rank names it); ok
/// when every rank succeeded.
Status firstRankFailure(std::vector<Status> &results) {
  for (int pass = 0; pass < 2; ++pass)
    for (size_t rank = 0; rank < results.size(); ++rank) {
      Status &result = results[rank];
      if (result.isOk() ||
          (pass == 0 && result.message().find("aborted by rank") != std::string::npos))
        continue;
      Status failed = std::move(result);
      if (results.size() > 1)
        failed.addContext(formatString("rank %zu", rank));
      return failed;
    }
  return Status::ok();
}

Status runInference(const Options &options, LoadedPlan loaded) {
  const plan::Plan &plan = loaded.plan;
  const std::string path = loaded.path;
  const int world = static_cast<int>(loaded.worldSize());
  // Every input must come from exactly one --input, before any weight is
  // loaded: a typo should not cost a model load.
  std::map<std::string, std::string> files;
  for (const auto &[name, file] : options.inputs) {
    bool known = false;
    std::string names;
    for (const plan::Binding &binding : plan.inputs()) {
      known |= binding.name() == name;
      names += (names.empty() ? "'" : ", '") + binding.name() + "'";
    }
    if (!known)
      return Status(StatusCode::kInvalidArgument,
                    "--input " + name + "=" + file +
                        ": the plan has no input '" + name + "' (its inputs: " +
                        (names.empty() ? std::string("none") : names) + ")");
    if (!files.emplace(name, file).second)
      return Status(StatusCode::kInvalidArgument,
                    "--input " + name + " is given twice");
  }
  for (const plan::Binding &binding : plan.inputs())
    if (!files.count(binding.name()))
      return Status(StatusCode::kInvalidArgument,
                    "the plan's input '" + binding.name() +
                        "' has no array; pass --input " + binding.name() +
                        "=FILE.npy");
  std::vector<std::pair<std::string, HostTensor>> arrays;
  for (const plan::Binding &binding : plan.inputs()) {
    StatusOr<HostTensor> array = readNpy(files[binding.name()]);
    if (!array.isOk()) {
      Status status = array.takeStatus();
      return status.addContext("cannot read input '" + binding.name() + "'");
    }
    // One rank checks the array against the plan when it is set; more
    // split it by rows, so it must be the whole batch.
    const plan::Buffer &buffer = plan.buffers(binding.buffer());
    std::vector<int64_t> expected(buffer.shape().begin(), buffer.shape().end());
    if (world > 1 && !expected.empty())
      expected[0] *= world;
    if (world > 1 && (array->dtype != buffer.dtype() || array->shape != expected))
      return Status(StatusCode::kInvalidArgument,
                    files[binding.name()] + ": input '" + binding.name() + "' is " +
                        dtypeText(array->dtype) + " " + shapeText(array->shape) +
                        ", but a batch of this plan is " + dtypeText(buffer.dtype()) + " " +
                        shapeText(expected) + " (" + std::to_string(world) + " ranks x " +
                        std::to_string(buffer.shape_size() ? buffer.shape(0) : 1) +
                        " rows, train_micro_batch_size_per_gpu)");
    arrays.emplace_back(binding.name(), std::move(*array));
  }
  ExecutorOptions executorOptions;
  Status status = prepareInference(options, loaded.plan, executorOptions);
  if (!status.isOk())
    return status;

  // More than one rank: on the cuda backend this process is one of them
  // (the launcher starts them and returns their status); on the cpu
  // backend they are threads of this process.
  std::unique_ptr<Communicator> nccl;
  std::unique_ptr<LocalCommunicatorGroup> group;
  if (world > 1 && options.backend == "cuda") {
    bool launcher = false;
    Status joined =
        joinCudaJob(options, path, world, launcher, nccl, executorOptions.deviceOrdinal);
    if (launcher || !joined.isOk())
      return joined;
  } else if (world > 1) {
    StatusOr<std::unique_ptr<LocalCommunicatorGroup>> created = LocalCommunicatorGroup::create(
        world, {std::chrono::seconds(options.commTimeoutSeconds)});
    if (!created.isOk())
      return created.takeStatus();
    group = std::move(*created);
  }
  executorOptions.hostThreads = options.hostThreads > 0 ? static_cast<int>(options.hostThreads)
                                                       : hostThreadsPerRank(plan, world);
  const int64_t samples =
      world * (!arrays.empty() && !arrays.front().second.shape.empty()
                   ? arrays.front().second.shape[0] / world
                   : 0);

  std::vector<Status> results(world, Status::ok());
  std::vector<uint64_t> allocated(world, 0), inUse(world, 0);
  std::string backendName, graphs, profile;
  double latency = 0;
  std::vector<std::pair<std::string, HostTensor>> outputs;
  auto runRank = [&](int rank, LoadedPlan mine) -> Status {
    ExecutorOptions rankOptions = executorOptions;
    rankOptions.communicator = nccl ? nccl.get() : group ? group->communicator(rank) : nullptr;
    rankOptions.weights.shardIndex = rank;
    StatusOr<std::unique_ptr<Executor>> instantiated =
        Executor::instantiate(std::move(mine), rankOptions);
    if (!instantiated.isOk())
      return instantiated.takeStatus();
    Executor &executor = **instantiated;
    const plan::Plan &own = executor.plan().plan;
    for (const auto &[name, array] : arrays) {
      const plan::Buffer *buffer = nullptr;
      for (const plan::Binding &binding : own.inputs())
        if (binding.name() == name)
          buffer = &own.buffers(binding.buffer());
      if (world == 1)
        ZCC_RETURN_IF_ERROR(executor.setInput(name, array.data.data(), array.data.size(),
                                              array.dtype, array.shape),
                            "%s", files[name].c_str());
      else
        ZCC_RETURN_IF_ERROR(executor.setInput(name, array.data.data() + rank * buffer->bytes(),
                                              buffer->bytes(), buffer->dtype(),
                                              {buffer->shape().begin(), buffer->shape().end()}),
                            "%s", files[name].c_str());
    }
    // Run 1 warms up (kernel selection, first touches); with --repeat the
    // later runs are timed.
    double timed = 0;
    for (int64_t run = 0; run < options.repeat; ++run) {
      if (run == 1 && options.profileRows > 0)
        executor.resetProfile();
      if (rankOptions.communicator)
        ZCC_RETURN_IF_ERROR(rankOptions.communicator->barrier(), "before run %lld",
                            static_cast<long long>(run));
      auto start = std::chrono::steady_clock::now();
      ZCC_RETURN_IF_ERROR(executor.run("infer"), "%s", executor.plan().path.c_str());
      if (rankOptions.communicator)
        ZCC_RETURN_IF_ERROR(rankOptions.communicator->barrier(), "after run %lld",
                            static_cast<long long>(run));
      if (run > 0)
        timed += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    allocated[rank] = executor.backend().allocatedBytes();
    inUse[rank] = executor.backend().deviceBytesInUse();
    if (rank != 0)
      return Status::ok();
    latency = options.repeat > 1 ? timed / static_cast<double>(options.repeat - 1) : 0;
    backendName = executor.backend().name();
    graphs = executor.graphSummary();
    if (options.profileRows > 0)
      profile = formatProfile(executor,
                              world == 1 ? std::string("one run of 'infer'")
                                         : formatString("one run of 'infer', rank 0 of %d", world),
                              options.profileRows);
    // The outputs are the whole batch's on every rank (the plan gathers
    // them); rank 0's are written.
    for (const plan::Binding &binding : own.outputs()) {
      if (options.noOutputs)
        break;
      StatusOr<HostTensor> output = executor.output(binding.name());
      if (!output.isOk())
        return output.takeStatus();
      outputs.emplace_back(binding.name(), std::move(*output));
    }
    return Status::ok();
  };
  auto runAndAbort = [&](int rank, LoadedPlan mine) {
    results[rank] = runRank(rank, std::move(mine));
    if (!results[rank].isOk() && nccl)
      nccl->abort(results[rank].message());
    else if (!results[rank].isOk() && group)
      group->communicator(rank)->abort(results[rank].message());
  };
  const int ownRank = nccl ? nccl->rank() : -1;
  if (world == 1 || nccl) {
    runAndAbort(std::max(ownRank, 0), std::move(loaded));
  } else if (Status started = runRankThreads(*group, runAndAbort, loaded); !started.isOk()) {
    return started.addContext(path);
  }
  if (Status failed = firstRankFailure(results); !failed.isOk())
    return world > 1 ? failed.addContext(path) : failed;
  if (options.memoryReport)
    for (int rank = 0; rank < world; ++rank)
      if (ownRank < 0 || rank == ownRank)
        printDeviceMemory(allocated[rank], inUse[rank],
                          backendName.empty() ? options.backend.c_str() : backendName.c_str(),
                          world > 1 ? formatString(" (rank %d)", rank) : std::string());
  if (ownRank > 0)
    return Status::ok();
  if (options.repeat > 1)
    std::printf("inference: batch of %lld samples%s in %.3f ms (mean latency of %lld runs after "
                "the first), %.1f samples/s\n",
                static_cast<long long>(samples),
                world > 1 ? formatString(" over %d data-parallel ranks", world).c_str() : "",
                latency * 1e3, static_cast<long long>(options.repeat - 1),
                latency > 0 ? static_cast<double>(samples) / latency : 0.0);
  if (options.memoryReport)
    std::fputs(graphs.c_str(), stdout);
  for (const auto &[name, output] : outputs)
    ZCC_RETURN_IF_ERROR(writeNpy(options.outputDir + "/" + outputFileName(name), output),
                        "cannot write output '%s'", name.c_str());
  std::fputs(profile.c_str(), stdout);
  return Status::ok();
}

/// An output of an inference pipeline's last stages, block by block: this
/// rank (index `group.rank()` of the stage's data-parallel group) holds
/// blocks k * dp + rank of `whole` (one block: `buffer`'s bytes, one per
/// micro-batch); after the call every rank of the group holds all of them.
Status gatherOutputBlocks(Backend &backend, Communicator &group, const plan::Buffer &buffer,
                          int64_t microBatches, HostTensor &whole) {
  const int dataParallel = group.size();
  const uint64_t bytes = buffer.bytes();
  uint64_t elements = 1;
  for (int64_t d : buffer.shape())
    elements *= static_cast<uint64_t>(d);
  void *staging = nullptr;
  ZCC_RETURN_IF_ERROR(backend.allocate(bytes * (1 + dataParallel), 256, &staging),
                      "staging for the gather");
  auto *own = static_cast<uint8_t *>(staging);
  uint8_t *all = own + bytes;
  group.setStream(backend.nativeStream(0));
  Status status = Status::ok();
  for (int64_t k = 0; k < microBatches && status.isOk(); ++k) {
    uint8_t *blocks = whole.data.data() + k * dataParallel * bytes;
    status = backend.copyToDevice(own, blocks + group.rank() * bytes, bytes);
    if (status.isOk()) {
      group.watchRun(true);
      status = group.allGather(own, all, elements, buffer.dtype());
      if (status.isOk())
        status = backend.synchronize();
      group.watchRun(false);
    }
    if (status.isOk())
      status = backend.copyToHost(blocks, all, bytes * dataParallel);
  }
  backend.deallocate(staging);
  return status;
}

/// A pipeline's groups out of the job's NCCL communicator (rank r runs
/// stage r / dp with data-parallel index r % dp): `byStage`, the stage's
/// data-parallel ranks; `pipe`, the stages of the rank's data-parallel
/// index.
Status splitPipelineCommunicators(Communicator &nccl, int dataParallel,
                                  std::unique_ptr<Communicator> &byStage,
                                  std::unique_ptr<Communicator> &pipe) {
  StatusOr<const CudaPlugin *> plugin = loadCudaPlugin();
  if (!plugin.isOk())
    return plugin.takeStatus();
  const int rank = nccl.rank();
  StatusOr<std::unique_ptr<Communicator>> stage =
      (*plugin)->splitCommunicator(nccl, rank / dataParallel, rank % dataParallel);
  StatusOr<std::unique_ptr<Communicator>> stages =
      stage.isOk() ? (*plugin)->splitCommunicator(nccl, rank % dataParallel, rank / dataParallel)
                   : StatusOr<std::unique_ptr<Communicator>>(stage.status());
  if (!stages.isOk()) {
    // Aborted, not destroyed: the other ranks may never finish the split.
    Status failed = stages.takeStatus();
    nccl.abort(failed.message());
    if (stage.isOk())
      (*stage)->abort(failed.message());
    return failed;
  }
  byStage = std::move(*stage);
  pipe = std::move(*stages);
  return Status::ok();
}

/// An inference pipeline: ranks as threads, rank r running stage r / dp
/// with data-parallel index r % dp. One batch of dp x micro_batches
/// micro-batches goes through the pipeline: rank d of stage 0 reads rows
/// [(k * dp + d) * mb, ... + mb) of each input for micro-batch k, and the
/// stage that computes an output writes the same rows of it.
Status runPipelineInference(const Options &options, LoadedPlan loaded) {
  const plan::Plan &plan = loaded.plan;
  const std::string path = loaded.path;
  const int world = static_cast<int>(loaded.worldSize());
  const int stages = plan.pipeline().stages_size();
  const int dataParallel = world / stages;
  const int64_t microBatches = plan.pipeline().micro_batches();
  // On the cuda backend each rank is a process with its GPU; the stages
  // pass activations over the job's NCCL communicator, or with data
  // parallelism over the group of the rank's data-parallel index, and the
  // ranks of the stage that computes an output gather it in theirs.
  std::unique_ptr<Communicator> nccl, ncclStage, ncclPipe;
  int ownRank = -1, deviceOrdinal = 0;
  if (options.backend == "cuda") {
    if (world > 1) {
      bool launcher = false;
      Status joined = joinCudaJob(options, path, world, launcher, nccl, deviceOrdinal);
      if (launcher || !joined.isOk())
        return joined;
      ownRank = nccl->rank();
      if (dataParallel > 1)
        if (Status split = splitPipelineCommunicators(*nccl, dataParallel, ncclStage, ncclPipe);
            !split.isOk())
          return split.addContext(path);
    } else {
      ownRank = 0;
    }
  } else if (options.backend != "cpu") {
    return Status(StatusCode::kInvalidArgument,
                  "--backend " + options.backend + ": expected cpu or cuda");
  }
  // The whole batch of each input and output, by name.
  std::map<std::string, std::string> files(options.inputs.begin(), options.inputs.end());
  std::map<std::string, HostTensor> inputs, outputs;
  auto rowsOf = [&](const plan::Buffer &buffer) -> int64_t {
    return buffer.shape_size() ? buffer.shape(0) : 1;
  };
  for (const plan::Binding &binding : plan.inputs()) {
    if (inputs.count(binding.name()))
      continue;
    auto file = files.find(binding.name());
    if (file == files.end())
      return Status(StatusCode::kInvalidArgument,
                    "the plan's input '" + binding.name() + "' has no array; pass --input " +
                        binding.name() + "=FILE.npy");
    StatusOr<HostTensor> array = readNpy(file->second);
    if (!array.isOk())
      return array.takeStatus().addContext("cannot read input '" + binding.name() + "'");
    const plan::Buffer &buffer = plan.buffers(binding.buffer());
    int64_t rows = rowsOf(buffer) * microBatches * dataParallel;
    std::vector<int64_t> expected(buffer.shape().begin(), buffer.shape().end());
    if (!expected.empty())
      expected[0] = rows;
    if (array->dtype != buffer.dtype() || array->shape != expected)
      return Status(StatusCode::kInvalidArgument,
                    "input '" + binding.name() + "' is " + dtypeText(array->dtype) + " " +
                        shapeText(array->shape) + ", but a batch of this pipeline is " +
                        dtypeText(buffer.dtype()) + " " + shapeText(expected) + " (" +
                        std::to_string(dataParallel) + " data-parallel x " +
                        std::to_string(microBatches) + " micro-batches (pipeline.micro_batches) x " +
                        std::to_string(rowsOf(buffer)) + " rows)");
    inputs[binding.name()] = std::move(*array);
  }
  for (const auto &[name, file] : files)
    if (!inputs.count(name))
      return Status(StatusCode::kInvalidArgument,
                    "--input " + name + "=" + file + ": the plan has no input '" + name + "'");
  for (const plan::Binding &binding : plan.outputs()) {
    const plan::Buffer &buffer = plan.buffers(binding.buffer());
    HostTensor &output = outputs[binding.name()];
    output.dtype = buffer.dtype();
    output.shape.assign(buffer.shape().begin(), buffer.shape().end());
    if (!output.shape.empty())
      output.shape[0] *= microBatches * dataParallel;
    output.data.assign(static_cast<size_t>(buffer.bytes() * microBatches * dataParallel), 0);
  }
  ExecutorOptions executorOptions;
  Status status = prepareInference(options, loaded.plan, executorOptions);
  if (!status.isOk())
    return status;
  executorOptions.deviceOrdinal = deviceOrdinal;

  // The cpu backend: the ranks as threads of this process.
  std::unique_ptr<LocalCommunicatorGroup> group;
  std::vector<LocalCommunicatorGroup *> pipeGroups;
  if (ownRank < 0) {
    StatusOr<std::unique_ptr<LocalCommunicatorGroup>> created = LocalCommunicatorGroup::create(
        world, {std::chrono::seconds(options.commTimeoutSeconds)});
    if (!created.isOk())
      return created.takeStatus();
    group = std::move(*created);
    StatusOr<std::vector<LocalCommunicatorGroup *>> pipes =
        pipelineSubgroups(*group, stages, dataParallel, /*perStage=*/false);
    if (!pipes.isOk())
      return pipes.takeStatus();
    pipeGroups = std::move(*pipes);
  }
  std::vector<Status> results(world, Status::ok());
  // With --profile: each rank's seconds computing (every instruction but the
  // sends and receives) and in all, over the timed runs.
  std::vector<double> computing(world, -1), elapsed(world, 0);
  double seconds = 0;
  std::string profile;
  std::set<std::string> computed; // the outputs this process's ranks wrote
  std::mutex computedMutex;
  const std::string profileScope = formatString("one batch, rank 0 of %d, pipeline stage 0", world);
  auto runRank = [&](int rank) -> Status {
    const int stage = rank / dataParallel, dataRank = rank % dataParallel;
    Communicator *world = nccl ? nccl.get() : group ? group->communicator(rank) : nullptr;
    StatusOr<LoadedPlan> stagePlan = projectStage(loaded, stage);
    if (!stagePlan.isOk())
      return stagePlan.takeStatus();
    ExecutorOptions rankOptions = executorOptions;
    rankOptions.pipelineCommunicator = ncclPipe ? ncclPipe.get()
                                       : nccl   ? nccl.get()
                                       : group  ? pipeGroups[dataRank]->communicator(stage)
                                                : nullptr;
    StatusOr<std::unique_ptr<Executor>> executor =
        Executor::instantiate(std::move(*stagePlan), rankOptions);
    if (!executor.isOk())
      return executor.takeStatus();
    const plan::Plan &mine = (*executor)->plan().plan;
    {
      std::lock_guard<std::mutex> lock(computedMutex);
      for (const plan::Binding &binding : mine.outputs())
        computed.insert(binding.name());
    }
    // The forward passes that read the inputs and write each output (under
    // the interleaved schedule a stage's other chunks do neither).
    std::map<std::string, std::set<std::string>> outputWriters;
    for (const plan::Binding &binding : mine.outputs())
      outputWriters[binding.name()] = programsUsing(mine, {binding.buffer()}, /*writes=*/true);
    std::set<uint32_t> inputBuffers;
    for (const plan::Binding &binding : mine.inputs())
      inputBuffers.insert(binding.buffer());
    const std::set<std::string> inputReaders = programsUsing(mine, inputBuffers, /*writes=*/false);
    double timed = 0;
    for (int64_t run = 0; run < options.repeat; ++run) {
      if (run == 1 && options.profileRows > 0)
        (*executor)->resetProfile();
      if (world)
        ZCC_RETURN_IF_ERROR(world->barrier(), "before the batch");
      auto start = std::chrono::steady_clock::now();
      for (const plan::PipelineStep &step : mine.pipeline().stages(stage).steps()) {
        bool forward = step.kind() == plan::PipelineStep::FORWARD;
        int64_t block = step.micro_batch() * dataParallel + dataRank;
        if (forward && (inputReaders.empty() || inputReaders.count(step.program())))
          for (const plan::Binding &binding : mine.inputs()) {
            const plan::Buffer &buffer = mine.buffers(binding.buffer());
            const HostTensor &whole = inputs[binding.name()];
            ZCC_RETURN_IF_ERROR((*executor)->setInput(binding.name(),
                                                      whole.data.data() + block * buffer.bytes(),
                                                      buffer.bytes(), buffer.dtype(),
                                                      {buffer.shape().begin(), buffer.shape().end()}),
                                "micro-batch %lld", static_cast<long long>(step.micro_batch()));
          }
        // Started, not waited for: the steps follow one another on the
        // device (a receive waits there for its send), and the host waits
        // only where it reads or writes the stage's buffers and at the end
        // of the batch.
        ZCC_RETURN_IF_ERROR((*executor)->start(step.program()), "micro-batch %lld",
                            static_cast<long long>(step.micro_batch()));
        if (forward && !options.noOutputs)
          for (const plan::Binding &binding : mine.outputs()) {
            const std::set<std::string> &writers = outputWriters[binding.name()];
            if (!writers.empty() && !writers.count(step.program()))
              continue;
            StatusOr<HostTensor> part = (*executor)->output(binding.name());
            if (!part.isOk())
              return part.takeStatus();
            HostTensor &whole = outputs[binding.name()];
            std::copy(part->data.begin(), part->data.end(),
                      whole.data.begin() + block * static_cast<int64_t>(part->data.size()));
          }
      }
      ZCC_RETURN_IF_ERROR((*executor)->finish(), "at the end of the batch");
      if (world)
        ZCC_RETURN_IF_ERROR(world->barrier(), "after the batch");
      if (run > 0 || options.repeat == 1)
        timed += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    // A cuda process holds only its own blocks of an output its stage
    // computes: the stage's data-parallel ranks all-gather them, micro-batch
    // by micro-batch (rank d's block of micro-batch k is block k * dp + d
    // of the whole), through device memory; the stage's first writes them.
    if (ncclStage && !options.noOutputs)
      for (const plan::Binding &binding : mine.outputs())
        ZCC_RETURN_IF_ERROR(gatherOutputBlocks((*executor)->backend(), *ncclStage,
                                               mine.buffers(binding.buffer()), microBatches,
                                               outputs[binding.name()]),
                            "gathering output '%s' over stage %d's data-parallel ranks",
                            binding.name().c_str(), stage);
    if (rank == 0)
      seconds = timed / static_cast<double>(std::max<int64_t>(1, options.repeat - 1));
    if (options.profileRows > 0) {
      computing[rank] = 0;
      elapsed[rank] = timed;
      for (const ProgramProfile &program : (*executor)->profile())
        for (size_t i = 0; i < program.instructions.size(); ++i) {
          const std::string &kernel = program.program->instructions(static_cast<int>(i)).kernel();
          if (kernel != "send" && kernel != "recv")
            computing[rank] += program.instructions[i].seconds;
        }
    }
    if (rank == 0 && options.profileRows > 0)
      profile = formatProfile(**executor, profileScope, options.profileRows);
    return Status::ok();
  };
  if (ownRank >= 0) {
    results[ownRank] = runRank(ownRank);
    if (!results[ownRank].isOk() && nccl)
      nccl->abort(results[ownRank].message());
  } else {
    Status started = runRankThreads(*group, [&](int rank) {
      results[rank] = runRank(rank);
      if (!results[rank].isOk())
        group->communicator(rank)->abort(results[rank].message());
    });
    if (!started.isOk())
      return started.addContext(path);
  }
  if (Status failed = firstRankFailure(results); !failed.isOk())
    return failed.addContext(path);
  // A scalar output (a loss) holds one value per micro-batch and data-
  // parallel rank: the batch's is their mean, as DeepSpeed's eval_batch
  // averages the loss over micro-batches and the data-parallel group.
  auto averageInPlace = [](HostTensor &tensor, auto zero) {
    using Value = decltype(zero);
    const size_t count = tensor.data.size() / sizeof(Value);
    double sum = 0;
    for (size_t i = 0; i < count; ++i) {
      Value value;
      std::memcpy(&value, tensor.data.data() + i * sizeof(Value), sizeof(Value));
      sum += static_cast<double>(value);
    }
    const Value mean = static_cast<Value>(count ? sum / static_cast<double>(count) : 0);
    tensor.data.resize(sizeof(Value));
    std::memcpy(tensor.data.data(), &mean, sizeof(Value));
  };
  for (auto &[name, tensor] : outputs)
    if (tensor.shape.empty() && tensor.dtype == plan::F32)
      averageInPlace(tensor, 0.0f);
    else if (tensor.shape.empty() && tensor.dtype == plan::F64)
      averageInPlace(tensor, 0.0);
  // Each output is written by the process whose stage computes it (the
  // first of the stage's data-parallel ranks).
  for (const auto &[name, tensor] : outputs)
    if (computed.count(name) && !options.noOutputs &&
        (ownRank < 0 || ownRank % dataParallel == 0))
      ZCC_RETURN_IF_ERROR(writeNpy(options.outputDir + "/" + outputFileName(name), tensor),
                          "cannot write output '%s'", name.c_str());
  // Each stage's idle share of the batch (waiting on the stages before and
  // after it, and its host work); their mean is the pipeline's measured
  // bubble, next to the compiler's prediction. Measured over the profiled
  // runs, whose instructions each run to completion (no CUDA graphs). A
  // cuda rank knows only its own stage: each prints its line.
  const int64_t runs = std::max<int64_t>(1, options.repeat - 1);
  double idleSum = 0;
  int measured = 0;
  for (int rank = 0; rank < world; ++rank) {
    if (computing[rank] < 0 || elapsed[rank] <= 0)
      continue;
    double idle = std::max(0.0, 1 - computing[rank] / elapsed[rank]);
    std::printf("stage %d (rank %d): computing %.3f ms of each batch's %.3f ms, idle %.1f%%\n",
                rank / dataParallel, rank, computing[rank] / runs * 1e3, elapsed[rank] / runs * 1e3,
                idle * 100);
    idleSum += idle;
    ++measured;
  }
  if (measured == world)
    std::printf("measured bubble fraction %.3f (the stages' mean idle share; predicted %.3f)\n",
                idleSum / world, plan.pipeline().bubble_fraction());
  if (ownRank > 0)
    return Status::ok();
  int64_t samples = 0;
  if (!inputs.empty() && !inputs.begin()->second.shape.empty())
    samples = inputs.begin()->second.shape[0];
  std::printf("pipeline: %d stages x %d data-parallel, %lld micro-batches: batch of %lld "
              "samples in %.3f ms (latency), %.1f samples/s\n",
              stages, dataParallel, static_cast<long long>(microBatches),
              static_cast<long long>(samples), seconds * 1e3,
              seconds > 0 ? static_cast<double>(samples) / seconds : 0.0);
  std::fputs(profile.c_str(), stdout);
  return Status::ok();
}

Status runTraining(const Options &options, LoadedPlan loaded) {
  const std::string path = loaded.path;
  if (!options.haveSteps && !options.checkGradients)
    return Status(StatusCode::kInvalidArgument,
                  path + ": a training plan runs --steps N optimizer steps; pass --steps");
  if (!options.inputs.empty())
    return Status(StatusCode::kInvalidArgument,
                  "--input feeds an inference plan; a training plan reads --data (or the "
                  "seeded synthetic source)");
  if (options.repeat != 1 || options.noOutputs)
    return Status(StatusCode::kInvalidArgument,
                  path + ": --repeat and --no-outputs time an inference plan; a training plan "
                         "runs --steps and writes no outputs");
  if (!options.train.saveDir.empty())
    ZCC_RETURN_IF_ERROR(checkSaveFolder(options.train.saveDir), "%s", path.c_str());
  ExecutorOptions executorOptions;
  executorOptions.backend = options.backend;
  Status status = weightOptions(options, executorOptions.weights);
  if (!status.isOk())
    return status;
  TrainOptions train = options.train;
  train.dataSeed = options.seed;
  train.profileRows = options.profileRows;
  executorOptions.profile = options.profileRows > 0;
  executorOptions.graphs = options.graphs;
  if (options.checkGradients && options.profileRows > 0)
    return Status(StatusCode::kInvalidArgument,
                  "--profile times training steps or an inference run, and --check-gradients "
                  "runs neither; drop one of them");
  int world = static_cast<int>(loaded.worldSize());
  if (world > 1 && options.checkGradients)
    return Status(StatusCode::kInvalidArgument,
                  path + ": --check-gradients checks a one-rank plan; recompile with "
                         "--world-size 1");

  // One rank: this thread. More: the ranks of the job as threads, each with
  // its own executor (its own arena) and its communicator of one group.
  // On the cuda backend each rank is a process of its own, with its GPU.
  std::unique_ptr<Communicator> nccl;
  if (options.backend == "cuda" && world > 1) {
    bool launcher = false;
    Status joined =
        joinCudaJob(options, path, world, launcher, nccl, executorOptions.deviceOrdinal);
    if (launcher || !joined.isOk())
      return joined;
  }
  executorOptions.hostThreads = options.hostThreads > 0 ? static_cast<int>(options.hostThreads)
                                                       : hostThreadsPerRank(loaded.plan, world);
  executorOptions.nvmePath = nvmePathFor(options, loaded.plan);
  executorOptions.swapRequests = swapRequestsFor(loaded.plan);
  // A pipeline plan: rank r runs stage r / dp with data-parallel index
  // r % dp; collectives run in the stage's data-parallel group, sends and
  // receives in the group of the rank's data-parallel index.
  const bool pipelined = loaded.plan.has_pipeline();
  const int stages = pipelined ? loaded.plan.pipeline().stages_size() : 1;
  const int dataParallel = world / stages;
  // On the cuda backend the job's NCCL communicator splits into the same
  // groups: a stage's data-parallel ranks, and each data-parallel index's
  // stages.
  std::unique_ptr<Communicator> ncclStage, ncclPipe;
  if (pipelined && nccl)
    if (Status split = splitPipelineCommunicators(*nccl, dataParallel, ncclStage, ncclPipe);
        !split.isOk())
      return split.addContext(path);
  if (pipelined && options.checkGradients)
    return Status(StatusCode::kInvalidArgument,
                  path + ": --check-gradients checks a one-rank plan; recompile without the "
                         "pipeline");
  std::unique_ptr<LocalCommunicatorGroup> group;
  std::vector<LocalCommunicatorGroup *> stageGroups, pipeGroups;
  if (world > 1 && options.backend == "cpu") {
    StatusOr<std::unique_ptr<LocalCommunicatorGroup>> created = LocalCommunicatorGroup::create(
        world, {std::chrono::seconds(options.commTimeoutSeconds)});
    if (!created.isOk())
      return created.takeStatus();
    group = std::move(*created);
    if (pipelined) {
      StatusOr<std::vector<LocalCommunicatorGroup *>> byStage =
          pipelineSubgroups(*group, stages, dataParallel, /*perStage=*/true);
      if (!byStage.isOk())
        return byStage.takeStatus();
      stageGroups = std::move(*byStage);
      StatusOr<std::vector<LocalCommunicatorGroup *>> pipes =
          pipelineSubgroups(*group, stages, dataParallel, /*perStage=*/false);
      if (!pipes.isOk())
        return pipes.takeStatus();
      pipeGroups = std::move(*pipes);
    }
  }
  std::vector<Status> results(world, Status::ok());
  std::vector<uint64_t> allocated(world, 0), inUse(world, 0);
  std::vector<std::string> graphs(world);
  std::string backendName;
  auto communicatorOf = [&](int rank) -> Communicator * {
    if (nccl)
      return pipelined ? ncclStage.get() : nccl.get();
    if (pipelined && group)
      return stageGroups[rank / dataParallel]->communicator(rank % dataParallel);
    return group ? group->communicator(rank) : nullptr;
  };
  auto runRank = [&](int rank, LoadedPlan plan) {
    ExecutorOptions rankOptions = executorOptions;
    rankOptions.communicator = communicatorOf(rank);
    rankOptions.weights.shardIndex = pipelined ? rank % dataParallel : rank;
    Status status = Status::ok();
    if (pipelined) {
      rankOptions.pipelineCommunicator =
          nccl ? ncclPipe.get() : pipeGroups[rank % dataParallel]->communicator(rank / dataParallel);
      StatusOr<LoadedPlan> stagePlan = projectStage(plan, rank / dataParallel);
      if (stagePlan.isOk())
        plan = std::move(*stagePlan);
      else
        status = stagePlan.takeStatus();
    }
    StatusOr<std::unique_ptr<Executor>> executor =
        status.isOk() ? Executor::instantiate(std::move(plan), rankOptions)
                      : StatusOr<std::unique_ptr<Executor>>(status);
    status = executor.isOk() ? Status::ok() : executor.takeStatus();
    if (status.isOk()) {
      TrainOptions rankTrain = train;
      rankTrain.rank = rank;
      rankTrain.communicator = rankOptions.communicator;
      if (pipelined) {
        rankTrain.communicator = nccl ? nccl.get() : group->communicator(rank);
        rankTrain.pipelineCommunicator = rankOptions.pipelineCommunicator;
        rankTrain.stage = rank / dataParallel;
      }
      status = options.checkGradients ? checkGradients(**executor, rankTrain, options.gradCheck)
                                      : zcc::train(**executor, rankTrain);
      allocated[rank] = (*executor)->backend().allocatedBytes();
      inUse[rank] = (*executor)->backend().deviceBytesInUse();
      graphs[rank] = (*executor)->graphSummary();
      if (rank == 0)
        backendName = (*executor)->backend().name();
    }
    if (!status.isOk() && rankOptions.communicator)
      rankOptions.communicator->abort(status.message());
    // A process's NCCL communicators go down together (a live one would
    // keep its peers waiting until their timeout).
    if (!status.isOk() && nccl)
      for (Communicator *communicator : {nccl.get(), ncclStage.get(), ncclPipe.get()})
        if (communicator)
          communicator->abort(status.message());
    results[rank] = std::move(status);
  };
  if (world == 1) {
    runRank(0, std::move(loaded));
  } else if (!group) {
    // This process is one rank of a job of processes.
    int rank = nccl->rank();
    runRank(rank, std::move(loaded));
    if (!results[rank].isOk())
      return results[rank].addContext(formatString("rank %d", rank)).addContext(path);
    if (options.memoryReport) {
      printDeviceMemory(allocated[rank], inUse[rank], options.backend.c_str(),
                        formatString(" (rank %d)", rank));
      std::fputs(graphs[rank].c_str(), stdout);
    }
    return Status::ok();
  } else if (Status started = runRankThreads(*group, runRank, loaded); !started.isOk()) {
    return started.addContext(path);
  }
  if (Status failed = firstRankFailure(results); !failed.isOk())
    return failed.addContext(path);
  if (options.memoryReport) {
    for (int rank = 0; rank < world; ++rank)
      printDeviceMemory(allocated[rank], inUse[rank], backendName.c_str(),
                        world > 1 ? formatString(" (rank %d)", rank) : std::string());
    std::fputs(graphs[0].c_str(), stdout);
  }
  return Status::ok();
}

Status runZrun(const Options &options) {
  StatusOr<LoadedPlan> loaded = loadPlan(options.planPath);
  if (!loaded.isOk())
    return loaded.takeStatus();
  const plan::Plan &plan = loaded->plan;
  const std::string &path = loaded->path;

  int64_t worldSize = loaded->worldSize();
  if (options.nproc != 0 && options.nproc != worldSize)
    return Status(StatusCode::kInvalidArgument,
                  formatString("%s: plan was compiled for world size %lld, "
                               "but --nproc is %lld; run it with --nproc "
                               "%lld or recompile with --world-size %lld",
                               path.c_str(), static_cast<long long>(worldSize),
                               static_cast<long long>(options.nproc),
                               static_cast<long long>(worldSize),
                               static_cast<long long>(options.nproc)));
  // Before any arena: the BLAS's workspaces for the cpu job's rank threads.
  if (options.backend == "cpu")
    ZCC_RETURN_IF_ERROR(cpu::reserveBlasWorkspaces(static_cast<int>(worldSize)),
                        "%s", path.c_str());
  if (plan.has_pipeline() && plan.mode() != "train") {
    if (options.haveTrainOptions)
      return Status(StatusCode::kInvalidArgument,
                    path + ": --steps, --data and the other training options need a training "
                           "plan, and this is an inference plan");
    return runPipelineInference(options, std::move(*loaded));
  }
  if (plan.backend() == plan::BACKEND_CUDA && options.backend != "cuda")
    return Status(StatusCode::kInvalidArgument,
                  path + ": plan was compiled for the cuda backend; run it "
                         "with --backend cuda or recompile it for any "
                         "backend");
  if (options.backend != "cpu" && options.backend != "cuda")
    return Status(StatusCode::kInvalidArgument,
                  "--backend " + options.backend +
                      ": unknown backend (the backends are cpu and cuda)");
  if (options.ranksPerGpu > 1 && options.backend != "cuda")
    return Status(StatusCode::kInvalidArgument,
                  "--ranks-per-gpu shares GPUs between the ranks of the cuda backend; the " +
                      options.backend + " backend runs its ranks as threads (drop it)");
  if (plan.mode() == "train")
    return runTraining(options, std::move(*loaded));
  if (options.haveTrainOptions)
    return Status(StatusCode::kInvalidArgument,
                  path + ": --steps, --data, --grad-accum, --log-json and the other training "
                         "options need a training plan, and this is an inference plan (compile "
                         "a model with its loss and a config with an optimizer)");
  return runInference(options, std::move(*loaded));
}

} // namespace

int main(int argc, char **argv) {
  installOutOfMemoryHandler("zrun", "raise the limit or free host memory, or run fewer ranks on "
                                    "this host (zcc --report gives the host memory a rank needs)");
  Options options;
  options.argv = argv;
  bool help = false;
  Status status = parseArguments(argc, argv, options, help);
  if (status.isOk() && help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (status.isOk())
    status = runZrun(options);
  if (!status.isOk()) {
    std::fprintf(stderr, "zrun: error: %s\n", status.message().c_str());
    // Without the exit handlers: a job that failed may leave a thread in a
    // library for good (OpenBLAS's workers spin when they cannot map their
    // workspaces), and OpenBLAS's handler would join it forever.
    std::fflush(nullptr);
    std::_Exit(1);
  }
  return 0;
}
