//===- Executor.h - Running a plan ------------------------------*- C++ -*-===//
//
// instantiate() does everything that can fail or allocate: it allocates the
// arena once, copies constants, loads weights, resolves every kernel and
// builds every instruction's arguments (tensor views into the arena). run()
// then only launches kernels in plan order, so a step allocates nothing and
// fails only when a kernel does.
//
// From a program's second run on, a backend that can (cuda) replays it as
// one graph captured from its launches (ExecutorOptions::graphs).
//
// With ExecutorOptions::profile, run() also times every instruction: it
// waits for the device after each one, so the time is the instruction's own
// (streams no longer overlap, which changes the step's time but not its
// results), and adds it to counters made by instantiate().
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_EXECUTOR_H
#define ZCC_RUNTIME_EXECUTOR_H

#include "runtime/Backend.h"
#include "runtime/Comm/Communicator.h"
#include "runtime/Data/HostTensor.h"
#include "runtime/HostKernels.h"
#include "runtime/Plan/PlanLoader.h"
#include "runtime/Support/SwapFile.h"
#include "runtime/Weights.h"

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace zcc {

struct ExecutorOptions {
  /// "cpu" or "cuda".
  std::string backend = "cpu";
  /// The CUDA device this rank runs on (cuda backend).
  int deviceOrdinal = 0;
  WeightOptions weights;
  /// This rank's communicator over the data-parallel group, for the plan's
  /// collectives; null for a one-rank plan.
  Communicator *communicator = nullptr;
  /// Threads (the calling one included) that run the element-wise host
  /// kernels of a plan with CPU offload, the optimizer above all.
  int hostThreads = 1;
  /// A pipeline stage's communicator over the ranks of its data-parallel
  /// index, one per stage in stage order, for the plan's sends and
  /// receives; null without a pipeline.
  Communicator *pipelineCommunicator = nullptr;
  /// The folder this rank's NVMe swap file goes in, for a plan that keeps
  /// parameters or optimizer state on NVMe (Plan.nvme_bytes): zrun
  /// --nvme-path, or the config's offload_optimizer (else offload_param)
  /// nvme_path.
  std::string nvmePath;
  /// How the swap file's reads and writes are cut and issued (the
  /// config's aio.block_size and aio.queue_depth).
  SwapFile::Requests swapRequests;
  /// Times every instruction of every run (Executor::profile()).
  bool profile = false;
  /// Replays each program as one graph from its second run on, where the
  /// backend can capture it (cuda) and every instruction of it runs on the
  /// device (no host kernels, no collectives on host memory). Off while
  /// profiling, which must see each instruction.
  bool graphs = true;
};

/// What a profiled executor measured of one instruction since the last
/// resetProfile().
struct InstructionProfile {
  uint64_t calls = 0;
  /// Wall time from launch until the device finished it, summed over calls.
  double seconds = 0;
};

/// A program's instructions' profiles, in plan order.
struct ProgramProfile {
  const plan::Program *program = nullptr;
  std::vector<InstructionProfile> instructions;
};

/// A swap_in run as a host call on a copy stream: what it reads into
/// where, and where a failure goes.
struct HostSwap {
  SwapFile *file = nullptr;
  uint64_t offset = 0;
  void *destination = nullptr;
  uint64_t bytes = 0;
  /// "instruction N (swap_in, ...) of program 'P'", for its error.
  std::string what;
  std::mutex *errorMutex = nullptr;
  Status *error = nullptr;

  /// Reads the bytes; a failure is kept in *error (the first one).
  static void run(void *self);
};

class Executor {
public:
  /// Takes the plan: the prepared kernel arguments point into it.
  static StatusOr<std::unique_ptr<Executor>>
  instantiate(LoadedPlan plan, const ExecutorOptions &options);

  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  const LoadedPlan &plan() const { return plan_; }
  Backend &backend() { return *backend_; }
  const Backend &backend() const { return *backend_; }

  /// Copies `bytes` of host data into input `name`'s buffer after checking
  /// that `dtype` and `shape` are the ones the plan was compiled for.
  Status setInput(const std::string &name, const void *data, uint64_t bytes,
                  plan::DType dtype, const std::vector<int64_t> &shape);

  /// A copy of output `name` as it is now.
  StatusOr<HostTensor> output(const std::string &name);

  /// Runs program `programName` ("infer", "micro_step", ...) to
  /// completion. Every input the program reads must have been written.
  Status run(const std::string &programName);

  /// Starts program `programName` and returns without waiting for it where
  /// the device runs it on its own (a replayed graph); otherwise as run().
  /// Programs started one after another run in that order on the device
  /// (each replay follows the one before it on stream 0, and a graph joins
  /// its streams back into stream 0), so a pipeline's steps need no host
  /// wait between them. finish() waits for what was started; run() waits
  /// for it too, and setInput(), output(), readBuffer() and writeBuffer()
  /// finish first.
  Status start(const std::string &programName);

  /// Waits for the programs start() left running, watching the peers as
  /// run() does (a dead or hung peer ends the wait with its error); their
  /// failures are reported here. The communicators' timeout holds from the
  /// first program started to the end of the last. Does nothing when none
  /// is running.
  Status finish();

  /// A copy of buffer `id` (any kind) as it is now.
  StatusOr<HostTensor> readBuffer(uint32_t id);

  /// Overwrites buffer `id` with `bytes` of host data (exactly its size).
  Status writeBuffer(uint32_t id, const void *data, uint64_t bytes);

  /// Whether the plan has program `programName`.
  bool hasProgram(const std::string &programName) const;

  /// Whether the plan has input `name`.
  bool hasInput(const std::string &name) const;

  /// Whether run() times each instruction (ExecutorOptions::profile).
  bool profiling() const { return profiling_; }
  /// One entry per plan program, in plan order, each with one counter per
  /// instruction; all zero unless profiling.
  const std::vector<ProgramProfile> &profile() const { return profile_; }
  /// Zeroes every counter, e.g. to leave warm-up runs out.
  void resetProfile();

  /// How each program runs, for a run's log: "replayed as a graph" or why
  /// it is launched instruction by instruction. One line per program that
  /// has run, in plan order.
  std::string graphSummary() const;

private:
  enum class Collective { kNone, kAllReduce, kReduceScatter, kAllGather, kShard, kSend, kRecv };
  struct PreparedInstruction {
    KernelHandle kernel;
    KernelArgs args;
    uint32_t stream = 0;
    /// A collective runs through the communicator instead of a kernel.
    Collective collective = Collective::kNone;
    /// An instruction on host buffers runs this cpu kernel on the calling
    /// thread, once the device has finished what came before it.
    cpu::KernelFn hostKernel = nullptr;
    /// The host kernel's arguments cut for the thread pool; empty when it
    /// runs whole on the calling thread.
    std::vector<KernelArgs> chunks;
    /// sum_squares on the pool: the chunks run sum_squares_blocks into
    /// these per-block sums, which are then added in order.
    std::unique_ptr<double[]> partials;
    int64_t partialCount = 0;
    /// "offload" / "fetch": a copy between the arenas, in launch order.
    bool transfer = false;
    /// "swap_in" / "swap_out": between the swap file at `fileOffset` and
    /// host memory: on stream 0 on the calling thread once the device has
    /// finished what came before it; on another stream (a swap_in for a
    /// fetch) as a host call in that stream's order, through `hostCall`.
    enum class Swap { kNone, kIn, kOut } swap = Swap::kNone;
    uint64_t fileOffset = 0;
    std::unique_ptr<HostSwap> hostCall;
    /// "record_event" / "wait_event": orders `stream` against another.
    enum class Sync { kNone, kRecord, kWait } sync = Sync::kNone;
    uint32_t event = 0;
    ReduceOp reduction = ReduceOp::kSum;
    /// The stage a send goes to or a receive comes from.
    int peer = 0;
  };
  Status prepareCollective(const plan::Instruction &instruction,
                           PreparedInstruction &step) const;
  Status runCollective(const PreparedInstruction &step);
  struct PreparedProgram {
    const plan::Program *source = nullptr;
    std::vector<PreparedInstruction> instructions;
    /// The plan inputs (indices into Plan.inputs) the program reads.
    std::vector<int> inputsRead;
    /// Why the program is never captured as a graph; empty when it can be.
    std::string launchedBecause;
    uint64_t runs = 0;
    /// The backend's graph of it, once captured (its second run).
    int graph = -1;
  };

  explicit Executor(LoadedPlan plan);
  Status prepare(const ExecutorOptions &options);
  TensorView viewOf(uint32_t bufferId) const;
  /// Where buffer `id` starts: in the device arena or the host arena.
  uint8_t *addressOf(uint32_t id) const;
  Status kernelFailed(Status status, const PreparedProgram &program,
                      size_t index) const;
  /// The step loop, instantiated twice so that a run without profiling
  /// pays no branch per instruction for it.
  template <bool kProfile>
  Status runInstructions(size_t programIndex, const std::function<Status()> &watchPeers);
  /// run() (`wait`) and start().
  Status launchProgram(const std::string &programName, bool wait);
  /// What a wait for the programs started polls: each communicator's
  /// health, the time waited since the first started held to its timeout;
  /// empty without communicators. Allocates nothing.
  std::function<Status()> peerWatch() const;
  /// The pipeline's communicator where it is not the stage's, else null.
  Communicator *separatePipelineCommunicator() const {
    return pipelineCommunicator_ != communicator_ ? pipelineCommunicator_ : nullptr;
  }

  LoadedPlan plan_;
  std::unique_ptr<Backend> backend_;
  Communicator *communicator_ = nullptr;
  Communicator *pipelineCommunicator_ = nullptr;
  uint8_t *arena_ = nullptr;
  /// Pinned host memory for the plan's HOST buffers (CPU offload); null
  /// when it has none.
  uint8_t *hostArena_ = nullptr;
  /// The swap file of the plan's NVME buffers; null when it has none.
  std::unique_ptr<SwapFile> swapFile_;
  /// The first failure of a swap run as a host call on a stream, which
  /// the end of the program reports.
  std::mutex hostCallMutex_;
  Status hostCallError_ = Status::ok();
  /// Runs the host kernels' chunks; null with one host thread.
  std::unique_ptr<HostKernelPool> hostPool_;
  std::vector<PreparedProgram> programs_;
  /// Whether each plan input has been written, so a run never reads an
  /// input the caller forgot.
  std::vector<bool> inputWritten_;
  bool profiling_ = false;
  bool graphs_ = true;
  /// Programs started and not yet finished (start()): the first and the
  /// last (indices into programs_), since when, and the communicators'
  /// watchdogs watching them until finish().
  struct Pending {
    size_t first = 0, last = 0, count = 0;
    std::chrono::steady_clock::time_point since;
    std::optional<WatchedRun> watched[2];
  };
  std::optional<Pending> pending_;
  /// Indexed like programs_; made by prepare() so that a profiled step
  /// allocates nothing either.
  std::vector<ProgramProfile> profile_;
};

} // namespace zcc

#endif // ZCC_RUNTIME_EXECUTOR_H
