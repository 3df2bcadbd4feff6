//===- PlanLoader.cpp - Reading and validating plan files -----------------===//

#include "runtime/Plan/PlanLoader.h"

#include "kernels/cpu/CpuKernels.h"
#include "runtime/Support/File.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

namespace zcc {

// Every inconsistency inside a plan that passed its checksum is the
// compiler's doing (or another tool's), never the user's: the fix is a plan
// from a zcc that agrees with this runtime.
static const char kRecompile[] =
    "recompile the plan with a zcc that matches this zrun";

static Status invalid(const std::string &path, const std::string &item,
                      const std::string &problem) {
  return Status(StatusCode::kInvalidArgument,
                path + ": " + item + ": " + problem + "; " + kRecompile);
}

static std::string quoted(const std::string &text) { return "'" + text + "'"; }

static std::string hex(uint64_t value) {
  return formatString("0x%llx", static_cast<unsigned long long>(value));
}

//===----------------------------------------------------------------------===//
// Names for messages
//===----------------------------------------------------------------------===//

std::string dtypeText(plan::DType dtype) {
  if (!plan::DType_IsValid(dtype))
    return formatString("dtype %d", static_cast<int>(dtype));
  std::string name = plan::DType_Name(dtype);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return name;
}

std::string shapeText(const int64_t *dims, int rank) {
  if (rank == 0)
    return "scalar";
  std::string text;
  for (int i = 0; i < rank; ++i) {
    if (i)
      text += 'x';
    text += std::to_string(dims[i]);
  }
  return text;
}

std::string describeInstruction(int index,
                                const plan::Instruction &instruction) {
  std::string text =
      "instruction " + std::to_string(index) + " (" + instruction.kernel();
  if (!instruction.location().empty())
    text += ", from node " + quoted(instruction.location());
  return text + ")";
}

std::string describeBuffer(const plan::Buffer &buffer) {
  return "buffer " + std::to_string(buffer.id()) + " (" +
         quoted(buffer.name()) + ")";
}

int64_t LoadedPlan::worldSize() const {
  // validatePlan bounds the product by kMaxWorldSize; saturate all the same,
  // so a plan that skipped validation cannot wrap to a small world.
  int64_t size = 1;
  for (int64_t axis : plan.mesh().axis_sizes())
    if (__builtin_mul_overflow(size, axis, &size))
      return INT64_MAX;
  return size;
}

//===----------------------------------------------------------------------===//
// The file
//===----------------------------------------------------------------------===//

uint32_t planChecksum(const std::string &bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const Bytef *data = reinterpret_cast<const Bytef *>(bytes.data());
  size_t left = bytes.size();
  // crc32() takes a uInt length; feed plans over 4 GiB in slices.
  while (left > 0) {
    uInt chunk = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, data, chunk);
    data += chunk;
    left -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

std::string encodePlanFile(const plan::Plan &plan,
                           const std::string &producer) {
  std::string planBytes;
  {
    // Attribute maps serialize in hash order unless asked otherwise; a plan
    // file must not change between two compilations of the same model.
    google::protobuf::io::StringOutputStream stream(&planBytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    plan.SerializeToCodedStream(&coded);
  }
  plan::PlanFile file;
  file.set_magic(kPlanMagic);
  file.set_format_version(kPlanFormatVersion);
  file.set_producer(producer);
  file.set_checksum(planChecksum(planBytes));
  file.set_plan(std::move(planBytes));
  return file.SerializeAsString();
}

StatusOr<LoadedPlan> parsePlanFile(const std::string &bytes,
                                   const std::string &path) {
  static const char kNotAPlan[] = "; pass a plan written by zcc (zcc "
                                  "MODEL.onnx -c CONFIG.json -o PLAN.bin)";
  if (bytes.empty())
    return Status(StatusCode::kInvalidArgument,
                  path + " is empty, not a zcc plan" + kNotAPlan);
  // Protobuf logs a line to standard error for some malformed input (a
  // string field that is not UTF-8) before failing; the Status below is the
  // one message the user gets.
  google::protobuf::LogSilencer silencer;
  plan::PlanFile file;
  if (!file.ParseFromString(bytes))
    return Status(StatusCode::kInvalidArgument,
                  path +
                      " is not a zcc plan: it does not parse as a plan file "
                      "(another kind of file, or a plan cut short or "
                      "corrupted)" +
                      kNotAPlan);
  if (file.magic() != kPlanMagic)
    return Status(StatusCode::kInvalidArgument,
                  path + " is not a zcc plan: its magic number is " +
                      hex(file.magic()) + ", a plan's is " + hex(kPlanMagic) +
                      " (\"ZCCPLAN1\")" + kNotAPlan);
  if (file.format_version() != kPlanFormatVersion)
    return makeStatus(StatusCode::kFailedPrecondition,
                      "%s: plan format version %u is not supported by this "
                      "zrun (it reads version %u); recompile with a matching "
                      "zcc",
                      path.c_str(), file.format_version(), kPlanFormatVersion);
  if (file.plan().empty())
    return Status(StatusCode::kDataLoss,
                  path + ": the file holds no plan after its header: it was "
                         "cut short; copy it again or recompile it");
  uint32_t actual = planChecksum(file.plan());
  if (actual != file.checksum())
    return Status(StatusCode::kDataLoss,
                  path + ": checksum mismatch: the header says " +
                      hex(file.checksum()) + " but the plan's bytes give " +
                      hex(actual) +
                      "; the file is corrupt or was cut short: copy it again "
                      "or recompile it");
  LoadedPlan loaded;
  loaded.path = path;
  if (!loaded.plan.ParseFromString(file.plan()))
    return Status(StatusCode::kInvalidArgument,
                  path +
                      ": the plan does not parse although its checksum "
                      "matches, so another program wrote it; " +
                      kRecompile);
  file.clear_plan();
  loaded.header = std::move(file);
  Status valid = validatePlan(loaded.plan, path);
  if (!valid.isOk())
    return valid;
  return loaded;
}

StatusOr<LoadedPlan> loadPlan(const std::string &path) {
  StatusOr<std::string> bytes = readFile(path);
  if (!bytes.isOk()) {
    Status status = bytes.takeStatus();
    return status.addContext("cannot read the plan");
  }
  return parsePlanFile(*bytes, path);
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

/// Levenshtein distance, for "did you mean" on kernel names.
static size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

static std::string unknownKernelProblem(const std::string &name) {
  std::string problem =
      "kernel " + quoted(name) + " is not one this runtime has";
  std::string best;
  size_t bestDistance = 3; // Farther than two edits is not a typo.
  for (const std::string &known : cpu::kernelNames()) {
    size_t distance = editDistance(name, known);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = known;
    }
  }
  if (!best.empty())
    problem += " (did you mean " + quoted(best) + "?)";
  return problem;
}

static bool isPowerOfTwo(uint64_t value) {
  return value != 0 && (value & (value - 1)) == 0;
}

namespace {
/// Checks one plan; each check returns the first problem it finds.
class PlanValidator {
public:
  PlanValidator(const plan::Plan &plan, const std::string &path)
      : plan_(plan), path_(path) {}

  Status validate() {
    // Later checks index buffers, so buffers are checked first.
    Status status = validateHeader();
    for (int i = 0; status.isOk() && i < plan_.buffers_size(); ++i)
      status = validateBuffer(i);
    if (status.isOk())
      status = validateWeights();
    if (status.isOk())
      status = validateBindings(plan_.inputs(), "input");
    if (status.isOk())
      status = validateBindings(plan_.outputs(), "output");
    if (status.isOk())
      status = validatePrograms();
    if (status.isOk())
      status = validateTraining();
    return status;
  }

private:
  bool isBuffer(uint32_t id) const {
    return id < static_cast<uint32_t>(plan_.buffers_size());
  }

  std::string missingBuffer(const char *verb, uint32_t id) const {
    return formatString("%s buffer %u, but the plan has only %d buffers", verb,
                        id, plan_.buffers_size());
  }

  Status validateHeader() {
    if (plan_.mode() != "infer" && plan_.mode() != "train")
      return invalid(path_, "plan",
                     "mode " + quoted(plan_.mode()) +
                         " is neither 'infer' nor 'train'");
    if (!plan::Backend_IsValid(plan_.backend()))
      return invalid(path_, "plan",
                     formatString("backend %d is unknown",
                                  static_cast<int>(plan_.backend())));
    const plan::Mesh &mesh = plan_.mesh();
    if (mesh.axis_names_size() != mesh.axis_sizes_size())
      return invalid(path_, "mesh",
                     formatString("has %d axis names but %d axis sizes",
                                  mesh.axis_names_size(),
                                  mesh.axis_sizes_size()));
    for (int i = 0; i < mesh.axis_sizes_size(); ++i)
      if (mesh.axis_sizes(i) < 1)
        return invalid(
            path_, "mesh",
            formatString("axis '%s' has size %lld", mesh.axis_names(i).c_str(),
                         static_cast<long long>(mesh.axis_sizes(i))));
    // The runtime runs a thread (cpu) or a process (cuda) per rank and
    // numbers ranks with int; a product that overflowed would wrap to a
    // small world and run as that many ranks.
    world_ = 1;
    for (int64_t axis : mesh.axis_sizes())
      if (__builtin_mul_overflow(world_, axis, &world_) || world_ > kMaxWorldSize)
        return invalid(path_, "mesh",
                       formatString("axis sizes %s give more than %lld ranks, the most a "
                                    "job can have",
                                    shapeText(mesh.axis_sizes()).c_str(),
                                    static_cast<long long>(kMaxWorldSize)));
    int ppAxis = -1;
    for (int i = 0; i < mesh.axis_names_size(); ++i)
      if (mesh.axis_names(i) == "pp")
        ppAxis = i;
    // Rank r runs stage r / (world / stages): the stages must split the
    // world evenly, and the mesh's 'pp' axis (zcc writes one for more than
    // one stage) must count the stages.
    int64_t stages = 1;
    if (plan_.has_pipeline()) {
      stages = plan_.pipeline().stages_size();
      if (stages < 1)
        return invalid(path_, "pipeline", "has no stages");
      if (world_ % stages != 0)
        return invalid(path_, "pipeline",
                       formatString("has %lld stages, which do not divide the mesh's world "
                                    "size %lld",
                                    static_cast<long long>(stages),
                                    static_cast<long long>(world_)));
      if (stages > 1 && ppAxis < 0)
        return invalid(path_, "mesh",
                       formatString("has no 'pp' axis for the pipeline's %lld stages",
                                    static_cast<long long>(stages)));
    }
    if (ppAxis >= 0 && mesh.axis_sizes(ppAxis) != stages) {
      std::string pipeline = plan_.has_pipeline()
                                 ? formatString("%lld pipeline stages",
                                                static_cast<long long>(stages))
                                 : std::string("no pipeline");
      return invalid(path_, "mesh",
                     formatString("axis 'pp' has size %lld, but the plan has %s",
                                  static_cast<long long>(mesh.axis_sizes(ppAxis)),
                                  pipeline.c_str()));
    }
    dataParallel_ = world_ / stages;
    if (!isPowerOfTwo(plan_.arena_alignment()))
      return invalid(path_, "plan",
                     formatString("arena_alignment %u is not a power of two",
                                  plan_.arena_alignment()));
    return Status::ok();
  }

  Status validateBuffer(int index) {
    const plan::Buffer &buffer = plan_.buffers(index);
    std::string item = describeBuffer(buffer);
    if (buffer.id() != static_cast<uint32_t>(index))
      return invalid(
          path_,
          formatString("buffer %d (%s)", index, quoted(buffer.name()).c_str()),
          formatString("has id %u; a buffer's id must be its index",
                       buffer.id()));
    if (!plan::BufferKind_IsValid(buffer.kind()) ||
        buffer.kind() == plan::BUFFER_KIND_UNSPECIFIED)
      return invalid(path_, item,
                     formatString("has no known kind (%d)",
                                  static_cast<int>(buffer.kind())));
    if (buffer.step_local() && buffer.kind() != plan::GRADIENT)
      return invalid(path_, item,
                     "is marked step_local, which only a gradient can be");
    if (buffer.step_local() && plan_.training().gradient_accumulation_steps() != 1)
      return invalid(path_, item,
                     formatString("is a step_local gradient (overwritten by every micro-step) "
                                  "in a plan of %lld micro-steps a step; such gradients need "
                                  "gradient_accumulation_steps 1",
                                  static_cast<long long>(
                                      plan_.training().gradient_accumulation_steps())));
    size_t elementBytes = plan::DType_IsValid(buffer.dtype())
                              ? cpu::dtypeBytes(buffer.dtype())
                              : 0;
    if (elementBytes == 0)
      return invalid(path_, item,
                     "has no known dtype (" + dtypeText(buffer.dtype()) + ")");
    // A 0-d tensor is one element: the empty product.
    uint64_t elements = 1;
    for (int64_t dim : buffer.shape()) {
      if (dim < 0)
        return invalid(path_, item,
                       "has a negative dimension in shape " +
                           shapeText(buffer.shape()));
      if (__builtin_mul_overflow(elements, static_cast<uint64_t>(dim),
                                 &elements))
        return invalid(path_, item,
                       "has shape " + shapeText(buffer.shape()) +
                           ", too many elements to address");
    }
    uint64_t expectedBytes = 0;
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(elementBytes),
                               &expectedBytes) ||
        buffer.bytes() != expectedBytes)
      return invalid(
          path_, item,
          formatString("has %llu bytes, but %s %s holds %llu",
                       static_cast<unsigned long long>(buffer.bytes()),
                       dtypeText(buffer.dtype()).c_str(),
                       shapeText(buffer.shape()).c_str(),
                       static_cast<unsigned long long>(expectedBytes)));
    if (buffer.offset() % plan_.arena_alignment() != 0)
      return invalid(
          path_, item,
          formatString("offset %llu is not a multiple of the arena "
                       "alignment %u",
                       static_cast<unsigned long long>(buffer.offset()),
                       plan_.arena_alignment()));
    if (!plan::MemorySpace_IsValid(buffer.space()))
      return invalid(path_, item,
                     formatString("has no known memory space (%d)",
                                  static_cast<int>(buffer.space())));
    bool host = buffer.space() == plan::HOST;
    bool nvme = buffer.space() == plan::NVME;
    auto arenaOf = [&](uint64_t device, uint64_t hostBytes, uint64_t nvmeBytes) {
      return nvme ? nvmeBytes : host ? hostBytes : device;
    };
    uint64_t arenaBytes =
        arenaOf(plan_.arena_bytes(), plan_.host_arena_bytes(), plan_.nvme_bytes());
    if (plan_.has_pipeline()) {
      if (buffer.stage() >= static_cast<uint32_t>(plan_.pipeline().stages_size()))
        return invalid(path_, item,
                       formatString("belongs to stage %u, but the pipeline has %d stages",
                                    buffer.stage(), plan_.pipeline().stages_size()));
      // Each stage's ranks allocate the stage's arenas.
      const plan::PipelineStage &stage = plan_.pipeline().stages(buffer.stage());
      arenaBytes = arenaOf(stage.arena_bytes(), stage.host_arena_bytes(), stage.nvme_bytes());
    }
    if (buffer.offset() > arenaBytes || buffer.bytes() > arenaBytes - buffer.offset())
      return invalid(
          path_, item,
          formatString(
              "bytes [%llu, %llu) lie outside the %s of %llu bytes",
              static_cast<unsigned long long>(buffer.offset()),
              static_cast<unsigned long long>(buffer.offset() + buffer.bytes()),
              nvme ? "NVMe swap file" : host ? "host arena" : "device arena",
              static_cast<unsigned long long>(arenaBytes)));
    if (nvme && buffer.offset() % kNvmeAlignment != 0)
      return invalid(path_, item,
                     formatString("is in the NVMe swap file at offset %llu, which is not a "
                                  "multiple of %llu (direct I/O)",
                                  static_cast<unsigned long long>(buffer.offset()),
                                  static_cast<unsigned long long>(kNvmeAlignment)));
    if (nvme && buffer.kind() != plan::OPTIMIZER_STATE && buffer.kind() != plan::PARAMETER &&
        buffer.kind() != plan::PARAMETER_COPY)
      return invalid(path_, item,
                     "is in the NVMe swap file, but only parameters, their 16-bit copies "
                     "and optimizer state live there (it is " +
                         kindPhrase(buffer.kind()) + ")");
    if (host && (buffer.kind() == plan::INPUT || buffer.kind() == plan::OUTPUT ||
                 buffer.kind() == plan::SCALARS || buffer.kind() == plan::CONSTANT))
      return invalid(path_, item,
                     "is in host memory, but inputs, outputs, scalars and "
                     "constants live on the device");
    if (buffer.kind() == plan::CONSTANT &&
        buffer.constant_data().size() != buffer.bytes())
      return invalid(
          path_, item,
          formatString("is a constant of %llu bytes but carries %zu bytes of "
                       "constant_data",
                       static_cast<unsigned long long>(buffer.bytes()),
                       buffer.constant_data().size()));
    return Status::ok();
  }

  Status validateWeights() {
    std::vector<int> weightOfBuffer(plan_.buffers_size(), -1);
    for (int i = 0; i < plan_.weights_size(); ++i) {
      const plan::Weight &weight = plan_.weights(i);
      std::string item =
          "weight " + std::to_string(i) + " (" + quoted(weight.name()) + ")";
      if (!isBuffer(weight.buffer()))
        return invalid(path_, item, missingBuffer("fills", weight.buffer()));
      const plan::Buffer &buffer = plan_.buffers(weight.buffer());
      if (buffer.kind() != plan::PARAMETER)
        return invalid(path_, item,
                       "fills " + describeBuffer(buffer) +
                           ", which is not a parameter buffer");
      if (weightOfBuffer[weight.buffer()] >= 0)
        return invalid(path_, item,
                       "fills " + describeBuffer(buffer) +
                           formatString(", which weight %d fills already",
                                        weightOfBuffer[weight.buffer()]));
      weightOfBuffer[weight.buffer()] = i;
      if (!plan::RandomInit::Kind_IsValid(weight.random_init().kind()))
        return invalid(
            path_, item,
            formatString("has an unknown random init kind %d",
                         static_cast<int>(weight.random_init().kind())));
      double std = weight.random_init().std();
      if (!std::isfinite(std) || std < 0)
        return invalid(path_, item,
                       formatString("has random init std %g; it must be a finite number, "
                                    "0 or more",
                                    std));
      // ZeRO-3 partitions a weight over the data-parallel ranks of its
      // stage; any other count draws or reads parts no rank holds (and
      // --weights random draws shards x the buffer's elements).
      if (weight.shards() > 1 && static_cast<int64_t>(weight.shards()) != dataParallel_)
        return invalid(path_, item,
                       formatString("is split into %u shards, but the mesh has %lld "
                                    "data-parallel ranks to hold them",
                                    weight.shards(), static_cast<long long>(dataParallel_)));
      // The file range holds exactly the buffer's elements, in the file's
      // dtype (f32 weights of a 16-bit buffer are narrowed as they load;
      // the loader refuses other conversions with its own message).
      bool narrowed = weight.file_dtype() == plan::F32 &&
                      (buffer.dtype() == plan::F16 || buffer.dtype() == plan::BF16);
      uint64_t fileBytes = narrowed ? 2 * buffer.bytes() : buffer.bytes();
      if ((narrowed || weight.file_dtype() == buffer.dtype()) &&
          weight.length() != fileBytes * std::max<uint32_t>(1, weight.shards()))
        return invalid(
            path_, item,
            formatString("reads %llu bytes of '%s' into %s, which needs %llu",
                         static_cast<unsigned long long>(weight.length()),
                         weight.file().c_str(), describeBuffer(buffer).c_str(),
                         static_cast<unsigned long long>(fileBytes)));
    }
    for (const plan::Buffer &buffer : plan_.buffers())
      if (buffer.kind() == plan::PARAMETER && weightOfBuffer[buffer.id()] < 0)
        return invalid(path_, describeBuffer(buffer),
                       "is a parameter that no weight fills");
    return Status::ok();
  }

  Status validateBindings(
      const google::protobuf::RepeatedPtrField<plan::Binding> &bindings,
      const char *what) {
    std::set<std::string> names;
    for (int i = 0; i < bindings.size(); ++i) {
      const plan::Binding &binding = bindings.Get(i);
      std::string item =
          formatString("%s %d (%s)", what, i, quoted(binding.name()).c_str());
      if (binding.name().empty())
        return invalid(path_, item, "has no name");
      if (!names.insert(std::to_string(binding.stage()) + "/" + binding.name()).second)
        return invalid(path_, item,
                       std::string("repeats the name of another ") + what);
      if (!isBuffer(binding.buffer()))
        return invalid(path_, item, missingBuffer("names", binding.buffer()));
    }
    return Status::ok();
  }

  static constexpr uint32_t kMaxStreams = 16;
  static constexpr int64_t kMaxEvents = 1 << 20;

  /// A record or wait names an event by number, touches no buffer, and a
  /// wait follows a record of its event on another stream in its program.
  std::string eventProblem(const plan::Instruction &instruction,
                           std::map<int64_t, std::set<uint32_t>> &recordedOn) {
    if (instruction.inputs_size() || instruction.outputs_size())
      return instruction.kernel() + " reads and writes no buffer";
    auto event = instruction.attributes().find("event");
    if (event == instruction.attributes().end() ||
        event->second.value_case() != plan::Attribute::kI || event->second.i() < 0 ||
        event->second.i() >= kMaxEvents)
      return instruction.kernel() + " needs an \"event\" attribute: an integer from 0 to " +
             std::to_string(kMaxEvents - 1);
    int64_t id = event->second.i();
    if (instruction.kernel() == "record_event") {
      recordedOn[id].insert(instruction.stream());
      return "";
    }
    const std::set<uint32_t> &streams = recordedOn[id];
    if (std::none_of(streams.begin(), streams.end(),
                     [&](uint32_t stream) { return stream != instruction.stream(); }))
      return formatString("waits on stream %u for event %lld, which no earlier "
                          "instruction records on another stream",
                          instruction.stream(), static_cast<long long>(id));
    return "";
  }

  Status validatePrograms() {
    std::set<std::string> names;
    for (const plan::Program &program : plan_.programs()) {
      std::map<int64_t, std::set<uint32_t>> recordedOn;
      std::string programItem = "program " + quoted(program.name());
      if (program.name().empty())
        return invalid(path_, "a program", "has no name");
      if (!names.insert(program.name()).second)
        return invalid(path_, programItem, "appears twice");
      for (int i = 0; i < program.instructions_size(); ++i) {
        const plan::Instruction &instruction = program.instructions(i);
        std::string item =
            programItem + ", " + describeInstruction(i, instruction);
        const std::string &kernel = instruction.kernel();
        if (!cpu::isKernel(kernel) && !isCollectiveKernel(kernel) &&
            !isTransferKernel(kernel) && !isEventKernel(kernel) && !isSwapKernel(kernel))
          return invalid(path_, item, unknownKernelProblem(kernel));
        if (instruction.stream() >= kMaxStreams)
          return invalid(path_, item,
                         formatString("runs on stream %u; plans use at most %u streams",
                                      instruction.stream(), kMaxStreams));
        if (isEventKernel(kernel)) {
          if (std::string problem = eventProblem(instruction, recordedOn); !problem.empty())
            return invalid(path_, item, problem);
          continue;
        }
        for (uint32_t id : instruction.inputs())
          if (!isBuffer(id))
            return invalid(path_, item, missingBuffer("reads", id));
        for (uint32_t id : instruction.outputs())
          if (!isBuffer(id))
            return invalid(path_, item, missingBuffer("writes", id));
        if (std::string problem = spaceProblem(instruction); !problem.empty())
          return invalid(path_, item, problem);
      }
    }
    return Status::ok();
  }

  /// Host and device memory meet only in "offload" (device to host) and
  /// "fetch" (host to device), each one buffer to one of its size; a
  /// collective's buffers are on the device; any other kernel's buffers
  /// are all in one memory, where it runs.
  std::string spaceProblem(const plan::Instruction &instruction) {
    auto onHost = [&](uint32_t id) { return plan_.buffers(id).space() == plan::HOST; };
    auto onNvme = [&](uint32_t id) { return plan_.buffers(id).space() == plan::NVME; };
    const std::string &kernel = instruction.kernel();
    if (isSwapKernel(kernel)) {
      bool in = kernel == "swap_in";
      if (instruction.inputs_size() != 1 || instruction.outputs_size() != 1)
        return kernel + " copies one buffer into one";
      const plan::Buffer &from = plan_.buffers(instruction.inputs(0));
      const plan::Buffer &to = plan_.buffers(instruction.outputs(0));
      if (in ? !(onNvme(from.id()) && onHost(to.id())) : !(onHost(from.id()) && onNvme(to.id())))
        return kernel + (in ? " reads an NVMe buffer into a host one" :
                              " writes a host buffer into an NVMe one") +
               ", not " + describeBuffer(from) + " into " + describeBuffer(to);
      if (from.bytes() != to.bytes() || from.dtype() != to.dtype())
        return kernel + " needs buffers of one dtype and size, not " + describeBuffer(from) +
               " and " + describeBuffer(to);
      return "";
    }
    for (const auto *ids : {&instruction.inputs(), &instruction.outputs()})
      for (uint32_t id : *ids)
        if (onNvme(id))
          return "uses " + describeBuffer(plan_.buffers(id)) +
                 ", which is in the NVMe swap file; only swap_in and swap_out touch it";
    if (isTransferKernel(kernel)) {
      bool offload = kernel == "offload";
      if (instruction.inputs_size() != 1 || instruction.outputs_size() != 1)
        return (kernel + " copies one buffer into one");
      const plan::Buffer &in = plan_.buffers(instruction.inputs(0));
      const plan::Buffer &out = plan_.buffers(instruction.outputs(0));
      if (onHost(in.id()) == offload || onHost(out.id()) != offload)
        return (kernel + (offload ? " copies a device buffer into a host one"
                                        : " copies a host buffer into a device one") +
                          ", not " + describeBuffer(in) + " into " + describeBuffer(out));
      if (in.bytes() != out.bytes() || in.dtype() != out.dtype())
        return (kernel + " needs buffers of one dtype and size, not " +
                          describeBuffer(in) + " and " + describeBuffer(out));
      return "";
    }
    std::vector<uint32_t> ids(instruction.inputs().begin(), instruction.inputs().end());
    ids.insert(ids.end(), instruction.outputs().begin(), instruction.outputs().end());
    if (ids.empty())
      return "";
    bool host = onHost(ids.front());
    for (uint32_t id : ids)
      if (onHost(id) != host || (host && isCollectiveKernel(kernel)))
        return ("mixes host and device buffers (" + describeBuffer(plan_.buffers(id)) +
                          " is in " + (onHost(id) ? "host" : "device") +
                          " memory); only offload and fetch cross between them, and "
                          "collectives run on the device");
    return "";
  }

  /// "an output buffer": how messages name a buffer kind.
  static std::string kindPhrase(plan::BufferKind kind) {
    std::string name = plan::BufferKind_IsValid(kind)
                           ? plan::BufferKind_Name(kind)
                           : "UNKNOWN";
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    std::replace(name.begin(), name.end(), '_', ' ');
    bool vowel = std::string("aeiou").find(name[0]) != std::string::npos;
    return std::string(vowel ? "an " : "a ") + name + " buffer";
  }

  /// One buffer the training loop reads or writes: it exists, has `kind`,
  /// and holds `elements` elements of `dtype` (of any float type when
  /// DTYPE_UNSPECIFIED).
  Status validateTrainingBuffer(const char *field, uint32_t id,
                                plan::BufferKind kind, uint64_t elements,
                                plan::DType dtype) {
    std::string item = std::string("training ") + field;
    if (!isBuffer(id))
      return invalid(path_, item, missingBuffer("names", id));
    const plan::Buffer &buffer = plan_.buffers(id);
    if (buffer.kind() != kind)
      return invalid(path_, item,
                     "names " + describeBuffer(buffer) + ", which is " +
                         kindPhrase(buffer.kind()) + ", not " +
                         kindPhrase(kind));
    uint64_t count = 1;
    for (int64_t dim : buffer.shape())
      count *= static_cast<uint64_t>(dim);
    bool isFloat = buffer.dtype() == plan::F32 || buffer.dtype() == plan::F64 ||
                   buffer.dtype() == plan::F16 || buffer.dtype() == plan::BF16;
    bool dtypeOk =
        dtype == plan::DTYPE_UNSPECIFIED ? isFloat : buffer.dtype() == dtype;
    if (count != elements || !dtypeOk) {
      std::string expected =
          dtype == plan::DTYPE_UNSPECIFIED ? "a float" : dtypeText(dtype);
      expected += elements == 1 ? " scalar" : " " + std::to_string(elements);
      return invalid(path_, item,
                     "names " + describeBuffer(buffer) + ", which holds " +
                         dtypeText(buffer.dtype()) + " " +
                         shapeText(buffer.shape()) + "; it must hold " +
                         expected);
    }
    return Status::ok();
  }

  /// A training plan carries the loop's settings (Training), whose buffers
  /// the runtime writes and reads by id, and the programs the loop runs; an
  /// inference plan carries none.
  Status validateTraining() {
    bool training = plan_.mode() == "train";
    if (!training) {
      if (plan_.has_training())
        return invalid(path_, "plan",
                       "mode 'infer' carries training settings, which only a "
                       "'train' plan may have");
      return Status::ok();
    }
    if (!plan_.has_training())
      return invalid(path_, "plan",
                     "mode 'train' has no training settings (the optimizer, "
                     "batch sizes and loop buffers)");
    const plan::Training &settings = plan_.training();
    const std::string &optimizer = settings.optimizer();
    if (optimizer != "adamw" && optimizer != "adam" && optimizer != "adagrad" &&
        optimizer != "lamb" && optimizer != "lion" && optimizer != "sgd")
      return invalid(path_, "training",
                     "optimizer " + quoted(optimizer) +
                         " is not one this runtime has ('adamw', 'adam', 'adagrad', 'lamb', "
                         "'lion' or 'sgd')");
    struct Count {
      const char *name;
      int64_t value;
    };
    for (Count count :
         {Count{"gradient_accumulation_steps",
                settings.gradient_accumulation_steps()},
          Count{"micro_batch_size", settings.micro_batch_size()},
          Count{"data_parallel_size", settings.data_parallel_size()}})
      if (count.value < 1)
        return invalid(path_, "training",
                       formatString("%s is %lld; it must be at least 1",
                                    count.name,
                                    static_cast<long long>(count.value)));
    if (settings.gradient_accumulation_steps() > kMaxGradientAccumulationSteps)
      return invalid(path_, "training",
                     formatString("gradient_accumulation_steps is %lld; it must be at most "
                                  "%lld",
                                  static_cast<long long>(settings.gradient_accumulation_steps()),
                                  static_cast<long long>(kMaxGradientAccumulationSteps)));
    // The loop splits batches and shards by data_parallel_size; the ranks
    // that run are the mesh's.
    std::string overStages =
        plan_.has_pipeline()
            ? formatString(" over %d pipeline stages", plan_.pipeline().stages_size())
            : std::string();
    if (settings.data_parallel_size() != dataParallel_)
      return invalid(path_, "training",
                     formatString("data_parallel_size is %lld, but the mesh has %lld "
                                  "data-parallel ranks (world size %lld%s)",
                                  static_cast<long long>(settings.data_parallel_size()),
                                  static_cast<long long>(dataParallel_),
                                  static_cast<long long>(world_), overStages.c_str()));
    // A NaN or infinite rate turns every weight into NaN at the first step.
    if (!std::isfinite(settings.lr()))
      return invalid(path_, "training",
                     formatString("lr is %g; it must be a finite number", settings.lr()));
    Status status = validateTrainingBuffer("optimizer_scalars",
                                           settings.optimizer_scalars(),
                                           plan::SCALARS, 8, plan::F64);
    if (status.isOk())
      status =
          validateTrainingBuffer("loss_scale", settings.loss_scale(),
                                 plan::SCALARS, 1, plan::DTYPE_UNSPECIFIED);
    if (status.isOk())
      status = validateTrainingBuffer("grad_norm_sq", settings.grad_norm_sq(),
                                      plan::OUTPUT, 1, plan::F64);
    if (status.isOk())
      status = validateTrainingBuffer("loss", settings.loss(), plan::OUTPUT, 1,
                                      plan::DTYPE_UNSPECIFIED);
    for (int i = 0; status.isOk() && i < settings.data_inputs_size(); ++i) {
      const plan::Binding &input = settings.data_inputs(i);
      std::string item = formatString("training data input %d (%s)", i,
                                      quoted(input.name()).c_str());
      if (!isBuffer(input.buffer()))
        return invalid(path_, item, missingBuffer("names", input.buffer()));
      const plan::Buffer &buffer = plan_.buffers(input.buffer());
      if (buffer.kind() != plan::INPUT)
        return invalid(path_, item,
                       "names " + describeBuffer(buffer) + ", which is " +
                           kindPhrase(buffer.kind()) + ", not " +
                           kindPhrase(plan::INPUT));
    }
    if (!status.isOk())
      return status;
    // A pipeline's stages each have the step programs (forward and
    // backward passes instead of micro_step).
    int stages = plan_.has_pipeline() ? plan_.pipeline().stages_size() : 1;
    for (int stage = 0; stage < stages; ++stage) {
      for (const char *step : {"micro_step", "grad_norm", "optimizer_step", "zero_grads"}) {
        std::string name = step;
        if (plan_.has_pipeline()) {
          if (name == "micro_step")
            continue;
          name = "s" + std::to_string(stage) + "." + name;
        }
        bool found = false;
        for (const plan::Program &program : plan_.programs())
          found |= program.name() == name;
        if (!found)
          return invalid(path_, "plan",
                         std::string("mode 'train' has no program '") + name +
                             "' (a training plan runs micro_step, grad_norm, "
                             "optimizer_step and zero_grads)");
      }
    }
    return Status::ok();
  }

  const plan::Plan &plan_;
  const std::string &path_;
  /// The mesh's world size and the ranks of each pipeline stage (all ranks
  /// without a pipeline), once validateHeader has checked the mesh.
  int64_t world_ = 1;
  int64_t dataParallel_ = 1;
};
} // namespace

Status validatePlan(const plan::Plan &plan, const std::string &path) {
  return PlanValidator(plan, path).validate();
}

bool isEventKernel(const std::string &kernel) {
  return kernel == "record_event" || kernel == "wait_event";
}

bool isTransferKernel(const std::string &kernel) {
  return kernel == "offload" || kernel == "fetch";
}

bool isSwapKernel(const std::string &kernel) {
  return kernel == "swap_in" || kernel == "swap_out";
}

StatusOr<LoadedPlan> projectStage(const LoadedPlan &loaded, int stage) {
  const plan::Plan &plan = loaded.plan;
  if (!plan.has_pipeline())
    return Status(StatusCode::kInvalidArgument,
                  loaded.path + ": not a pipeline plan, it has no stages to take one of");
  if (stage < 0 || stage >= plan.pipeline().stages_size())
    return makeStatus(StatusCode::kInvalidArgument, "%s: the pipeline has no stage %d",
                      loaded.path.c_str(), stage);
  LoadedPlan projected;
  projected.path = loaded.path;
  projected.header = loaded.header;
  plan::Plan &out = projected.plan;
  out = plan;
  out.set_arena_bytes(plan.pipeline().stages(stage).arena_bytes());
  out.set_host_arena_bytes(plan.pipeline().stages(stage).host_arena_bytes());
  out.set_nvme_bytes(plan.pipeline().stages(stage).nvme_bytes());
  const std::string prefix = "s" + std::to_string(stage) + ".";
  // Other stages' buffers are left as plain activations: nothing fills,
  // clears or reads them here, and their offsets are not in this arena.
  for (plan::Buffer &buffer : *out.mutable_buffers())
    if (static_cast<int>(buffer.stage()) != stage) {
      buffer.set_kind(plan::ACTIVATION);
      buffer.clear_constant_data();
      buffer.set_offset(0);
    }
  auto keep = [&](auto *list, auto belongs) {
    auto *items = list;
    int kept = 0;
    for (int i = 0; i < items->size(); ++i)
      if (belongs(items->Get(i)))
        items->SwapElements(i, kept++);
    while (items->size() > kept)
      items->RemoveLast();
  };
  keep(out.mutable_weights(), [&](const plan::Weight &weight) {
    return static_cast<int>(plan.buffers(weight.buffer()).stage()) == stage;
  });
  keep(out.mutable_inputs(),
       [&](const plan::Binding &binding) { return static_cast<int>(binding.stage()) == stage; });
  keep(out.mutable_outputs(),
       [&](const plan::Binding &binding) { return static_cast<int>(binding.stage()) == stage; });
  keep(out.mutable_programs(),
       [&](const plan::Program &program) { return static_cast<int>(program.stage()) == stage; });
  for (plan::Program &program : *out.mutable_programs())
    if (program.name().rfind(prefix, 0) == 0)
      program.set_name(program.name().substr(prefix.size()));
  for (plan::PipelineStage &each : *out.mutable_pipeline()->mutable_stages())
    for (plan::PipelineStep &step : *each.mutable_steps())
      if (step.program().rfind(prefix, 0) == 0)
        step.set_program(step.program().substr(prefix.size()));
  return projected;
}

bool isCollectiveKernel(const std::string &kernel) {
  return kernel == "all_reduce" || kernel == "reduce_scatter" || kernel == "all_gather" ||
         kernel == "shard" || kernel == "send" || kernel == "recv";
}

} // namespace zcc
