//===- Executor.cpp - Running a plan --------------------------------------===//

#include "runtime/Executor.h"

#include "kernels/cpu/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace zcc {

Executor::Executor(LoadedPlan plan) : plan_(std::move(plan)) {}

Executor::~Executor() {
  // Programs still running read the arenas; a dead or hung peer ends the
  // wait (watched as finish() watches). Reached with programs running only
  // after a failure, which the caller reports: this one goes to stderr.
  if (pending_ && backend_)
    if (Status finished = finish(); !finished.isOk())
      std::fprintf(stderr, "zrun: %s\n", finished.toString().c_str());
  if (backend_) {
    backend_->deallocate(arena_);
    backend_->deallocateHost(hostArena_);
  }
}

StatusOr<std::unique_ptr<Executor>>
Executor::instantiate(LoadedPlan plan, const ExecutorOptions &options) {
  std::unique_ptr<Executor> executor(new Executor(std::move(plan)));
  Status status = executor->prepare(options);
  if (!status.isOk())
    return status.addContext("while instantiating " + executor->plan_.path);
  return StatusOr<std::unique_ptr<Executor>>(std::move(executor));
}

uint8_t *Executor::addressOf(uint32_t id) const {
  const plan::Buffer &buffer = plan_.plan.buffers(id);
  return (buffer.space() == plan::HOST ? hostArena_ : arena_) + buffer.offset();
}

TensorView Executor::viewOf(uint32_t bufferId) const {
  const plan::Buffer &buffer = plan_.plan.buffers(bufferId);
  TensorView view;
  view.data = addressOf(bufferId);
  view.dtype = buffer.dtype();
  view.shape.assign(buffer.shape().begin(), buffer.shape().end());
  return view;
}

/// A collective instruction's kind and reduction, checked against the
/// communicator.
Status Executor::prepareCollective(const plan::Instruction &instruction,
                                   PreparedInstruction &step) const {
  const plan::Plan &plan = plan_.plan;
  const std::string &kernel = instruction.kernel();
  if (kernel == "send" || kernel == "recv") {
    if (!pipelineCommunicator_)
      return Status(StatusCode::kFailedPrecondition,
                    "the plan sends between pipeline stages but this run has no pipeline "
                    "communicator (run it with zrun --nproc N)");
    bool send = kernel == "send";
    if (instruction.inputs_size() != (send ? 1 : 0) || instruction.outputs_size() != (send ? 0 : 1))
      return Status(StatusCode::kInvalidArgument,
                    send ? "a send reads one buffer" : "a receive writes one buffer");
    auto peer = instruction.attributes().find("peer");
    if (peer == instruction.attributes().end() || peer->second.i() < 0 ||
        peer->second.i() >= pipelineCommunicator_->size() ||
        peer->second.i() == pipelineCommunicator_->rank())
      return makeStatus(StatusCode::kInvalidArgument,
                        "a %s needs a peer stage other than its own, in [0, %d)",
                        kernel.c_str(), pipelineCommunicator_->size());
    step.collective = send ? Collective::kSend : Collective::kRecv;
    step.peer = static_cast<int>(peer->second.i());
    return Status::ok();
  }
  if (!communicator_)
    return Status(StatusCode::kFailedPrecondition,
                  "the plan has collectives but this run has no communicator (run it "
                  "with zrun --nproc N)");
  if (instruction.inputs_size() != 1 || instruction.outputs_size() != 1)
    return Status(StatusCode::kInvalidArgument,
                  "a collective reads one buffer and writes one");
  const plan::Buffer &in = plan.buffers(instruction.inputs(0));
  const plan::Buffer &out = plan.buffers(instruction.outputs(0));
  if (in.dtype() != out.dtype())
    return Status(StatusCode::kInvalidArgument,
                  "a collective's input and output must have one dtype");
  auto attr = instruction.attributes().find("reduction");
  std::string reduction = attr == instruction.attributes().end() ? "" : attr->second.s();
  uint64_t size = static_cast<uint64_t>(communicator_->size());
  if (kernel == "all_reduce") {
    step.collective = Collective::kAllReduce;
    if (in.bytes() != out.bytes())
      return Status(StatusCode::kInvalidArgument,
                    "all_reduce's input and output must have one size");
  } else if (kernel == "reduce_scatter") {
    step.collective = Collective::kReduceScatter;
    if (in.bytes() != out.bytes() * size)
      return Status(StatusCode::kInvalidArgument,
                    "reduce_scatter's input must be the group size times its output");
  } else if (kernel == "shard") {
    step.collective = Collective::kShard;
    if (in.bytes() != out.bytes() * size)
      return Status(StatusCode::kInvalidArgument,
                    "shard's input must be the group size times its output");
  } else {
    step.collective = Collective::kAllGather;
    if (out.bytes() != in.bytes() * size)
      return Status(StatusCode::kInvalidArgument,
                    "all_gather's output must be the group size times its input");
  }
  if (step.collective == Collective::kAllReduce ||
      step.collective == Collective::kReduceScatter) {
    if (reduction == "avg")
      step.reduction = ReduceOp::kAverage;
    else if (reduction == "sum")
      step.reduction = ReduceOp::kSum;
    else
      return Status(StatusCode::kInvalidArgument,
                    "unknown reduction '" + reduction + "' (the reductions are sum and avg)");
  }
  return Status::ok();
}

Status Executor::runCollective(const PreparedInstruction &step) {
  if (step.collective == Collective::kSend || step.collective == Collective::kRecv)
    pipelineCommunicator_->setStream(backend_->nativeStream(step.stream));
  if (step.collective == Collective::kSend) {
    const TensorView &in = step.args.inputs[0];
    return pipelineCommunicator_->send(in.data, static_cast<uint64_t>(in.numElements()), in.dtype,
                                       step.peer);
  }
  if (step.collective == Collective::kRecv) {
    const TensorView &out = step.args.outputs[0];
    return pipelineCommunicator_->recv(out.data, static_cast<uint64_t>(out.numElements()),
                                       out.dtype, step.peer);
  }
  communicator_->setStream(backend_->nativeStream(step.stream));
  const TensorView &in = step.args.inputs[0];
  const TensorView &out = step.args.outputs[0];
  uint64_t count = static_cast<uint64_t>(in.numElements());
  switch (step.collective) {
  case Collective::kAllReduce:
    return communicator_->allReduce(in.data, out.data, count, in.dtype, step.reduction);
  case Collective::kReduceScatter:
    return communicator_->reduceScatter(in.data, out.data, count, in.dtype, step.reduction);
  case Collective::kAllGather:
    return communicator_->allGather(in.data, out.data, count, in.dtype);
  case Collective::kShard: {
    uint64_t bytes = static_cast<uint64_t>(out.numElements()) * cpu::dtypeBytes(out.dtype);
    const uint8_t *rows = static_cast<const uint8_t *>(in.data) +
                          bytes * static_cast<uint64_t>(communicator_->rank());
    return backend_->copyOnDevice(out.data, rows, bytes);
  }
  case Collective::kNone:
  case Collective::kSend:
  case Collective::kRecv:
    break;
  }
  return Status(StatusCode::kInternal, "not a collective");
}

Status Executor::prepare(const ExecutorOptions &options) {
  const plan::Plan &plan = plan_.plan;
  communicator_ = options.communicator;
  pipelineCommunicator_ = options.pipelineCommunicator;
  StatusOr<std::unique_ptr<Backend>> backend =
      createBackend(options.backend, options.deviceOrdinal);
  if (!backend.isOk())
    return backend.takeStatus();
  backend_ = std::move(*backend);
  // The streams and events the programs use (the loader checked them).
  uint32_t streams = 1, events = 0;
  for (const plan::Program &program : plan.programs())
    for (const plan::Instruction &instruction : program.instructions()) {
      streams = std::max(streams, instruction.stream() + 1);
      if (isEventKernel(instruction.kernel()))
        events = std::max(events, static_cast<uint32_t>(
                                      instruction.attributes().at("event").i() + 1));
    }
  ZCC_RETURN_IF_ERROR(backend_->prepareStreams(streams, events),
                      "cannot create %u streams and %u events", streams, events);
  if (communicator_)
    communicator_->setStream(backend_->nativeStream(0));
  if (pipelineCommunicator_)
    pipelineCommunicator_->setStream(backend_->nativeStream(0));

  void *arena = nullptr;
  ZCC_RETURN_IF_ERROR(
      backend_->allocate(plan.arena_bytes(), plan.arena_alignment(), &arena),
      "cannot allocate the arena");
  arena_ = static_cast<uint8_t *>(arena);
  if (plan.host_arena_bytes() > 0) {
    if (options.hostThreads > 1) {
      StatusOr<std::unique_ptr<HostKernelPool>> pool = HostKernelPool::create(options.hostThreads);
      if (!pool.isOk())
        return pool.takeStatus();
      hostPool_ = std::move(*pool);
    }
    void *host = nullptr;
    ZCC_RETURN_IF_ERROR(
        backend_->allocateHost(plan.host_arena_bytes(), plan.arena_alignment(), &host),
        "cannot allocate the host arena for offloaded state");
    hostArena_ = static_cast<uint8_t *>(host);
  }
  if (plan.nvme_bytes() > 0) {
    if (options.nvmePath.empty())
      return Status(StatusCode::kInvalidArgument,
                    "the plan keeps parameters or optimizer state on NVMe but no swap folder "
                    "was given; pass zrun --nvme-path DIR (or set the nvme_path of "
                    "zero_optimization.offload_optimizer or offload_param)");
    StatusOr<std::unique_ptr<SwapFile>> swap = SwapFile::create(options.nvmePath, plan.nvme_bytes(), options.swapRequests);
    if (!swap.isOk())
      return swap.takeStatus().addContext("while creating the NVMe swap file");
    swapFile_ = std::move(*swap);
  }

  for (const plan::Buffer &buffer : plan.buffers())
    if (buffer.kind() == plan::CONSTANT)
      ZCC_RETURN_IF_ERROR(
          backend_->copyToDevice(arena_ + buffer.offset(),
                                 buffer.constant_data().data(), buffer.bytes()),
          "while copying constant %s", describeBuffer(buffer).c_str());

  ZCC_RETURN_IF_ERROR(loadWeights(plan_, options.weights, *backend_, arena_, hostArena_, swapFile_.get()),
                      "cannot load the weights");

  // Training state starts at zero: gradient accumulators, Adam's moments,
  // SGD's momentum (the swap file's are zeros already).
  std::vector<uint8_t> zeros;
  for (const plan::Buffer &buffer : plan.buffers())
    if ((buffer.kind() == plan::GRADIENT || buffer.kind() == plan::OPTIMIZER_STATE) &&
        buffer.space() != plan::NVME) {
      zeros.assign(static_cast<size_t>(buffer.bytes()), 0);
      ZCC_RETURN_IF_ERROR(
          backend_->copyToDevice(addressOf(buffer.id()), zeros.data(), buffer.bytes()),
          "while clearing %s", describeBuffer(buffer).c_str());
    }
  std::vector<int> inputOfBuffer(plan.buffers_size(), -1);
  for (int i = 0; i < plan.inputs_size(); ++i)
    inputOfBuffer[plan.inputs(i).buffer()] = i;

  // Everything the step loop touches is built here: its views' shape vectors
  // are the only allocations a kernel launch would otherwise need.
  programs_.resize(plan.programs_size());
  for (int p = 0; p < plan.programs_size(); ++p) {
    const plan::Program &program = plan.programs(p);
    PreparedProgram &prepared = programs_[p];
    prepared.source = &program;
    prepared.instructions.resize(program.instructions_size());
    for (int i = 0; i < program.instructions_size(); ++i) {
      const plan::Instruction &instruction = program.instructions(i);
      PreparedInstruction &step = prepared.instructions[i];
      step.stream = instruction.stream();
      if (isEventKernel(instruction.kernel())) {
        step.sync = instruction.kernel() == "record_event" ? PreparedInstruction::Sync::kRecord
                                                           : PreparedInstruction::Sync::kWait;
        step.event = static_cast<uint32_t>(instruction.attributes().at("event").i());
        continue;
      }
      if (isCollectiveKernel(instruction.kernel())) {
        ZCC_RETURN_IF_ERROR(prepareCollective(instruction, step),
                            "while preparing %s of program '%s'",
                            describeInstruction(i, instruction).c_str(), program.name().c_str());
        for (uint32_t id : instruction.inputs())
          step.args.inputs.push_back(viewOf(id));
        for (uint32_t id : instruction.outputs())
          step.args.outputs.push_back(viewOf(id));
        continue;
      }
      bool onHost = false;
      for (uint32_t id : instruction.inputs())
        onHost |= plan.buffers(id).space() == plan::HOST;
      for (uint32_t id : instruction.outputs())
        onHost |= plan.buffers(id).space() == plan::HOST;
      if (isSwapKernel(instruction.kernel())) {
        // The loader checked the spaces: one NVME and one HOST buffer.
        bool in = instruction.kernel() == "swap_in";
        step.swap = in ? PreparedInstruction::Swap::kIn : PreparedInstruction::Swap::kOut;
        uint32_t file = in ? instruction.inputs(0) : instruction.outputs(0);
        uint32_t host = in ? instruction.outputs(0) : instruction.inputs(0);
        step.fileOffset = plan.buffers(file).offset();
        step.args.outputs.push_back(viewOf(host));
        if (in && step.stream != 0) {
          step.hostCall = std::make_unique<HostSwap>();
          step.hostCall->file = swapFile_.get();
          step.hostCall->offset = step.fileOffset;
          step.hostCall->destination = step.args.outputs[0].data;
          step.hostCall->bytes = plan.buffers(host).bytes();
          step.hostCall->what =
              describeInstruction(i, instruction) + " of program '" + program.name() + "'";
          step.hostCall->errorMutex = &hostCallMutex_;
          step.hostCall->error = &hostCallError_;
        }
        continue;
      }
      if (isTransferKernel(instruction.kernel())) {
        step.transfer = true;
      } else if (onHost) {
        // The loader checked that every buffer of it is a host one.
        step.hostKernel = cpu::findKernel(instruction.kernel());
        if (!step.hostKernel)
          return makeStatus(StatusCode::kNotFound,
                            "no host kernel '%s' for %s of program '%s'",
                            instruction.kernel().c_str(),
                            describeInstruction(i, instruction).c_str(),
                            program.name().c_str());
      }
      if (step.transfer || step.hostKernel) {
        for (uint32_t id : instruction.inputs())
          step.args.inputs.push_back(viewOf(id));
        for (uint32_t id : instruction.outputs())
          step.args.outputs.push_back(viewOf(id));
        step.args.attributes = &instruction.attributes();
        if (step.hostKernel && hostPool_ && instruction.kernel() == "sum_squares") {
          for (const cpu::TensorView &input : step.args.inputs)
            step.partialCount += cpu::kernels::sumSquaresBlocks(input.numElements());
          step.partials = std::make_unique<double[]>(static_cast<size_t>(step.partialCount));
          step.chunks = splitSumSquares(step.args, hostPool_->threads(), step.partials.get());
        } else if (step.hostKernel && hostPool_) {
          step.chunks = splitElementwise(instruction.kernel(), step.args, hostPool_->threads());
        }
        continue;
      }
      StatusOr<KernelHandle> kernel =
          backend_->resolveKernel(instruction.kernel());
      if (!kernel.isOk()) {
        Status status = kernel.takeStatus();
        return status.addContext("while preparing " +
                                 describeInstruction(i, instruction) +
                                 " of program '" + program.name() + "'");
      }
      step.kernel = *kernel;
      step.stream = instruction.stream();
      for (uint32_t id : instruction.inputs()) {
        step.args.inputs.push_back(viewOf(id));
        int input = inputOfBuffer[id];
        if (input >= 0 && std::find(prepared.inputsRead.begin(), prepared.inputsRead.end(),
                                    input) == prepared.inputsRead.end())
          prepared.inputsRead.push_back(input);
      }
      for (uint32_t id : instruction.outputs())
        step.args.outputs.push_back(viewOf(id));
      step.args.attributes = &instruction.attributes();
    }
  }
  inputWritten_.assign(plan.inputs_size(), false);
  profiling_ = options.profile;
  graphs_ = options.graphs && !options.profile && backend_->canCapture();
  for (PreparedProgram &prepared : programs_) {
    for (size_t i = 0; i < prepared.instructions.size() && prepared.launchedBecause.empty(); ++i) {
      const PreparedInstruction &step = prepared.instructions[i];
      const plan::Instruction &instruction = prepared.source->instructions(static_cast<int>(i));
      if (step.hostKernel)
        prepared.launchedBecause = "host kernel " + describeInstruction(static_cast<int>(i), instruction);
      // A swap on a copy stream is a host node of the graph.
      if (step.swap != PreparedInstruction::Swap::kNone && !step.hostCall)
        prepared.launchedBecause = "NVMe swap " + describeInstruction(static_cast<int>(i), instruction);
      // A collective on host memory waits for its copy back on the host.
      bool hostOperand = false;
      for (uint32_t id : instruction.inputs())
        hostOperand |= plan.buffers(id).space() == plan::HOST;
      for (uint32_t id : instruction.outputs())
        hostOperand |= plan.buffers(id).space() == plan::HOST;
      if (step.collective != Collective::kNone && hostOperand)
        prepared.launchedBecause =
            "collective on host memory " + describeInstruction(static_cast<int>(i), instruction);
    }
  }
  profile_.resize(programs_.size());
  for (size_t p = 0; p < programs_.size(); ++p) {
    profile_[p].program = programs_[p].source;
    profile_[p].instructions.assign(programs_[p].instructions.size(), InstructionProfile());
  }
  return Status::ok();
}

std::string Executor::graphSummary() const {
  std::string summary;
  for (const PreparedProgram &program : programs_) {
    if (!program.runs)
      continue;
    summary += "program '" + program.source->name() + "': ";
    if (program.graph >= 0)
      summary += "replayed as a graph of " + std::to_string(program.instructions.size()) +
                 " instructions\n";
    else if (!graphs_)
      summary += std::string("launched instruction by instruction (") +
                 (profiling_ ? "profiling" : "no graphs") + ")\n";
    else if (program.launchedBecause.empty())
      summary += "launched instruction by instruction (it ran once)\n";
    else
      summary += "launched instruction by instruction: " + program.launchedBecause + "\n";
  }
  return summary;
}

void Executor::resetProfile() {
  for (ProgramProfile &program : profile_)
    std::fill(program.instructions.begin(), program.instructions.end(), InstructionProfile());
}

/// numpy's name of a dtype, for the conversion a message suggests.
static std::string numpyName(plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return "np.float32";
  case plan::F64:
    return "np.float64";
  case plan::F16:
    return "np.float16";
  case plan::I64:
    return "np.int64";
  case plan::I32:
    return "np.int32";
  case plan::I8:
    return "np.int8";
  case plan::BOOL:
    return "np.bool_";
  default:
    return dtypeText(dtype);
  }
}

Status Executor::setInput(const std::string &name, const void *data,
                          uint64_t bytes, plan::DType dtype,
                          const std::vector<int64_t> &shape) {
  // The programs still running may read or write it.
  if (Status finished = finish(); !finished.isOk())
    return finished;
  const plan::Plan &plan = plan_.plan;
  int index = -1;
  std::string known;
  for (int i = 0; i < plan.inputs_size(); ++i) {
    if (plan.inputs(i).name() == name)
      index = i;
    known += (i ? ", '" : "'") + plan.inputs(i).name() + "'";
  }
  if (index < 0)
    return Status(StatusCode::kNotFound,
                  "the plan has no input '" + name + "' (its inputs: " +
                      (known.empty() ? std::string("none") : known) + ")");
  const plan::Buffer &buffer = plan.buffers(plan.inputs(index).buffer());
  if (dtype != buffer.dtype())
    return Status(StatusCode::kInvalidArgument,
                  "input '" + name + "' has dtype " + dtypeText(dtype) +
                      " but the plan was compiled for " +
                      dtypeText(buffer.dtype()) + "; convert the array (" +
                      "x.astype(" + numpyName(buffer.dtype()) + "))");
  if (!std::equal(shape.begin(), shape.end(), buffer.shape().begin(),
                  buffer.shape().end()))
    return Status(StatusCode::kInvalidArgument,
                  "input '" + name + "' has shape " + shapeText(shape) +
                      " but the plan was compiled for " +
                      shapeText(buffer.shape()) + "; recompile with " +
                      "--input-shape " + name + "=" + shapeText(shape) +
                      " or pass a matching array");
  if (bytes != buffer.bytes())
    return makeStatus(StatusCode::kInvalidArgument,
                      "input '%s' has %llu bytes of data, but %s %s holds "
                      "%llu",
                      name.c_str(), static_cast<unsigned long long>(bytes),
                      dtypeText(dtype).c_str(), shapeText(shape).c_str(),
                      static_cast<unsigned long long>(buffer.bytes()));
  ZCC_RETURN_IF_ERROR(
      backend_->copyToDevice(addressOf(buffer.id()), data, bytes),
      "while writing input '%s'", name.c_str());
  inputWritten_[index] = true;
  return Status::ok();
}

StatusOr<HostTensor> Executor::output(const std::string &name) {
  // The programs still running may read or write it.
  if (Status finished = finish(); !finished.isOk())
    return finished;
  const plan::Plan &plan = plan_.plan;
  std::string known;
  for (const plan::Binding &binding : plan.outputs()) {
    known += (known.empty() ? "'" : ", '") + binding.name() + "'";
    if (binding.name() != name)
      continue;
    const plan::Buffer &buffer = plan.buffers(binding.buffer());
    HostTensor tensor;
    tensor.dtype = buffer.dtype();
    tensor.shape.assign(buffer.shape().begin(), buffer.shape().end());
    tensor.data.resize(static_cast<size_t>(buffer.bytes()));
    ZCC_RETURN_IF_ERROR(backend_->copyToHost(tensor.data.data(),
                                             addressOf(buffer.id()),
                                             buffer.bytes()),
                        "while reading output '%s'", name.c_str());
    return tensor;
  }
  return Status(StatusCode::kNotFound,
                "the plan has no output '" + name + "' (its outputs: " +
                    (known.empty() ? std::string("none") : known) + ")");
}

Status Executor::kernelFailed(Status status, const PreparedProgram &program,
                              size_t index) const {
  const plan::Program &source = *program.source;
  return status.addContext(
      "while running " +
      describeInstruction(static_cast<int>(index),
                          source.instructions(static_cast<int>(index))) +
      " of program '" + source.name() + "'");
}

StatusOr<HostTensor> Executor::readBuffer(uint32_t id) {
  // The programs still running may read or write it.
  if (Status finished = finish(); !finished.isOk())
    return finished;
  const plan::Plan &plan = plan_.plan;
  if (id >= static_cast<uint32_t>(plan.buffers_size()))
    return makeStatus(StatusCode::kOutOfRange, "the plan has no buffer %u", id);
  const plan::Buffer &buffer = plan.buffers(id);
  HostTensor tensor;
  tensor.dtype = buffer.dtype();
  tensor.shape.assign(buffer.shape().begin(), buffer.shape().end());
  tensor.data.resize(static_cast<size_t>(buffer.bytes()));
  if (buffer.space() == plan::NVME) {
    ZCC_RETURN_IF_ERROR(swapFile_->read(buffer.offset(), tensor.data.data(), buffer.bytes()),
                        "while reading %s", describeBuffer(buffer).c_str());
    return tensor;
  }
  ZCC_RETURN_IF_ERROR(
      backend_->copyToHost(tensor.data.data(), addressOf(id), buffer.bytes()),
      "while reading %s", describeBuffer(buffer).c_str());
  return tensor;
}

Status Executor::writeBuffer(uint32_t id, const void *data, uint64_t bytes) {
  // The programs still running may read or write it.
  if (Status finished = finish(); !finished.isOk())
    return finished;
  const plan::Plan &plan = plan_.plan;
  if (id >= static_cast<uint32_t>(plan.buffers_size()))
    return makeStatus(StatusCode::kOutOfRange, "the plan has no buffer %u", id);
  const plan::Buffer &buffer = plan.buffers(id);
  if (bytes != buffer.bytes())
    return makeStatus(StatusCode::kInvalidArgument, "%s holds %llu bytes, not %llu",
                      describeBuffer(buffer).c_str(),
                      static_cast<unsigned long long>(buffer.bytes()),
                      static_cast<unsigned long long>(bytes));
  if (buffer.space() == plan::NVME) {
    ZCC_RETURN_IF_ERROR(swapFile_->write(buffer.offset(), data, bytes), "while writing %s",
                        describeBuffer(buffer).c_str());
    return Status::ok();
  }
  ZCC_RETURN_IF_ERROR(backend_->copyToDevice(addressOf(id), data, bytes),
                      "while writing %s", describeBuffer(buffer).c_str());
  return Status::ok();
}

bool Executor::hasInput(const std::string &name) const {
  for (const plan::Binding &binding : plan_.plan.inputs())
    if (binding.name() == name)
      return true;
  return false;
}

bool Executor::hasProgram(const std::string &programName) const {
  for (const PreparedProgram &candidate : programs_)
    if (candidate.source->name() == programName)
      return true;
  return false;
}

void HostSwap::run(void *self) {
  auto *swap = static_cast<HostSwap *>(self);
  Status status = swap->file->read(swap->offset, swap->destination, swap->bytes);
  if (status.isOk())
    return;
  std::lock_guard<std::mutex> lock(*swap->errorMutex);
  if (swap->error->isOk())
    *swap->error = std::move(status.addContext("while running " + swap->what));
}

template <bool kProfile>
Status Executor::runInstructions(size_t programIndex, const std::function<Status()> &watchPeers) {
  const PreparedProgram &program = programs_[programIndex];
  [[maybe_unused]] InstructionProfile *counters =
      kProfile ? profile_[programIndex].instructions.data() : nullptr;
  // The step loop: launches only. Everything it reads was built by
  // instantiate(). A host kernel first waits for the device work before it
  // (the offloads it reads, the fetches still reading host buffers it may
  // overwrite).
  bool devicePending = false;
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const PreparedInstruction &step = program.instructions[i];
    [[maybe_unused]] std::chrono::steady_clock::time_point started;
    if constexpr (kProfile)
      started = std::chrono::steady_clock::now();
    Status status = Status::ok();
    if (step.hostKernel) {
      if (devicePending)
        status = backend_->synchronize(watchPeers);
      devicePending = false;
      if (status.isOk() && step.partials && !step.chunks.empty()) {
        status = hostPool_->run(cpu::kernels::sumSquaresBlocks, step.chunks);
        double sum = 0;
        for (int64_t k = 0; k < step.partialCount; ++k)
          sum += step.partials[k];
        if (status.isOk())
          step.args.outputs[0].as<double>()[0] = sum;
      } else if (status.isOk()) {
        status = step.chunks.empty() ? step.hostKernel(step.args)
                                     : hostPool_->run(step.hostKernel, step.chunks);
      }
    } else if (step.hostCall) {
      status = backend_->enqueueHostCall(step.stream, &HostSwap::run, step.hostCall.get());
      devicePending = true;
    } else if (step.swap != PreparedInstruction::Swap::kNone) {
      // Its host buffer may still be read by a fetch, or written by an
      // offload, on the device.
      if (devicePending)
        status = backend_->synchronize(watchPeers);
      devicePending = false;
      const TensorView &host = step.args.outputs[0];
      uint64_t bytes = static_cast<uint64_t>(host.numElements()) * cpu::dtypeBytes(host.dtype);
      if (status.isOk())
        status = step.swap == PreparedInstruction::Swap::kIn
                     ? swapFile_->read(step.fileOffset, host.data, bytes)
                     : swapFile_->write(step.fileOffset, host.data, bytes);
    } else if (step.transfer) {
      const TensorView &in = step.args.inputs[0];
      status = backend_->copyAsync(
          step.args.outputs[0].data, in.data,
          static_cast<uint64_t>(in.numElements()) * cpu::dtypeBytes(in.dtype), step.stream);
      devicePending = true;
    } else if (step.sync != PreparedInstruction::Sync::kNone) {
      status = step.sync == PreparedInstruction::Sync::kRecord
                   ? backend_->recordEvent(step.event, step.stream)
                   : backend_->waitEvent(step.event, step.stream);
    } else {
      status = step.collective != Collective::kNone
                   ? runCollective(step)
                   : backend_->launch(step.kernel, step.args, step.stream);
      devicePending = true;
    }
    if constexpr (kProfile) {
      // Everything before this instruction has finished, so only a
      // collective can wait on a peer: the others wait without polling,
      // whose sleeps would round their times up.
      if (status.isOk() && !step.hostKernel)
        status = step.collective != Collective::kNone ? backend_->synchronize(watchPeers)
                                                      : backend_->synchronize();
      devicePending = false;
      InstructionProfile &counter = counters[i];
      counter.calls += 1;
      counter.seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }
    if (!status.isOk())
      return kernelFailed(std::move(status), program, i);
  }
  return Status::ok();
}

Status Executor::run(const std::string &programName) {
  return launchProgram(programName, /*wait=*/true);
}

Status Executor::start(const std::string &programName) {
  return launchProgram(programName, /*wait=*/false);
}

std::function<Status()> Executor::peerWatch() const {
  if (!communicator_ && !pipelineCommunicator_)
    return {};
  // Captures `this` alone, which std::function holds without allocating.
  return [this]() -> Status {
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - pending_->since);
    for (Communicator *communicator : {communicator_, separatePipelineCommunicator()})
      if (communicator)
        if (Status health = communicator->checkHealth(waited); !health.isOk())
          return health;
    return Status::ok();
  };
}

Status Executor::launchProgram(const std::string &programName, bool wait) {
  size_t index = programs_.size();
  for (size_t p = 0; p < programs_.size(); ++p)
    if (programs_[p].source->name() == programName)
      index = p;
  if (index == programs_.size()) {
    std::string known;
    for (const PreparedProgram &candidate : programs_)
      known += (known.empty() ? "'" : ", '") + candidate.source->name() + "'";
    return Status(StatusCode::kNotFound,
                  "the plan has no program '" + programName +
                      "' (its programs: " + (known.empty() ? std::string("none") : known) + ")");
  }
  const PreparedProgram *program = &programs_[index];
  for (int i : program->inputsRead)
    if (!inputWritten_[i])
      return Status(StatusCode::kFailedPrecondition,
                    "input '" + plan_.plan.inputs(i).name() +
                        "' was never written; pass it (zrun --input " +
                        plan_.plan.inputs(i).name() + "=FILE.npy)");

  // The first run launches the instructions one by one (kernels load,
  // cuBLASLt picks its algorithms); the second captures them and replays
  // the graph, as does every run after it. Capturing runs nothing, so it
  // waits on no peer.
  PreparedProgram &prepared = programs_[index];
  bool replay = false;
  if (graphs_ && prepared.launchedBecause.empty() && prepared.runs > 0) {
    if (prepared.graph < 0) {
      StatusOr<uint32_t> graph =
          backend_->capture([&] { return runInstructions<false>(index, {}); });
      if (graph.isOk())
        prepared.graph = static_cast<int>(*graph);
      else
        prepared.launchedBecause = graph.status().message();
    }
    replay = prepared.graph >= 0;
  }
  // Launched one by one, a program starts on an idle device, as its host
  // kernels and swaps and its other streams expect: what was started
  // before it finishes first.
  if (!replay)
    if (Status finished = finish(); !finished.isOk())
      return finished;

  // A rank with peers watches them while it waits: a dead or hung peer ends
  // the wait with the communicator's error instead of blocking forever.
  // And the communicators' watchdogs watch the run until it is finished,
  // in case this thread gets stuck where it cannot look. The run joins
  // those started before it, and the wait for all of them is held to the
  // communicators' timeout.
  if (!pending_) {
    pending_.emplace();
    pending_->first = index;
    pending_->since = std::chrono::steady_clock::now();
    pending_->watched[0].emplace(communicator_);
    pending_->watched[1].emplace(separatePipelineCommunicator());
  }
  pending_->last = index;
  ++pending_->count;
  std::function<Status()> watchPeers = peerWatch();

  ++prepared.runs;
  Status status = replay       ? backend_->replay(static_cast<uint32_t>(prepared.graph))
                  : profiling_ ? runInstructions<true>(index, watchPeers)
                               : runInstructions<false>(index, watchPeers);
  if (!status.isOk()) {
    // What was started before it still runs: wait for it (its own error,
    // if any, follows from this one) before reporting this one.
    (void)finish();
    return replay ? status.addContext("while replaying program '" + programName + "'") : status;
  }
  // A replayed graph runs on its own; anything else was waited for as it
  // launched (host kernels, profiling) or is waited for now.
  if (!wait && replay)
    return Status::ok();
  return finish();
}

Status Executor::finish() {
  if (!pending_)
    return Status::ok();
  std::function<Status()> watchPeers = peerWatch();
  Status status = backend_->synchronize(watchPeers);
  // A swap run as a host call on a stream failed; reported once, by the
  // wait it belongs to.
  {
    std::lock_guard<std::mutex> lock(hostCallMutex_);
    if (!hostCallError_.isOk()) {
      if (status.isOk())
        status = std::move(hostCallError_);
      hostCallError_ = Status::ok();
    }
  }
  // Once more after the device is done: a communicator aborted during the
  // run (its watchdog) fails the run even when nothing polled it since.
  if (status.isOk() && watchPeers)
    status = watchPeers();
  const size_t first = pending_->first, last = pending_->last, count = pending_->count;
  pending_.reset();
  if (status.isOk())
    return Status::ok();
  const std::string &firstName = programs_[first].source->name();
  const std::string &lastName = programs_[last].source->name();
  return status.addContext(count == 1 ? "while finishing program '" + firstName + "'"
                                      : formatString("while finishing the %zu programs started "
                                                     "from '%s' to '%s'",
                                                     count, firstName.c_str(),
                                                     lastName.c_str()));
}

} // namespace zcc
