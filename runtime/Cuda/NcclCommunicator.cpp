//===- NcclCommunicator.cpp - Collectives between GPUs through NCCL -------===//

#include "runtime/Cuda/NcclCommunicator.h"

#include "runtime/Cuda/CudaStatus.h"
#include "schema/DTypes.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace zcc {

namespace {

Status ncclError(ncclResult_t result, const char *what, ncclComm_t comm) {
  std::string detail = comm ? ncclGetLastError(comm) : "";
  return makeStatus(StatusCode::kInternal, "NCCL %s failed: %s%s%s", what,
                    ncclGetErrorString(result), detail.empty() ? "" : ": ",
                    detail.c_str());
}

StatusOr<ncclDataType_t> ncclType(plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return ncclFloat32;
  case plan::F16:
    return ncclFloat16;
  case plan::BF16:
    return ncclBfloat16;
  case plan::F64:
    return ncclFloat64;
  case plan::I64:
    return ncclInt64;
  case plan::I32:
    return ncclInt32;
  case plan::I8:
    return ncclInt8;
  case plan::BOOL:
    return ncclUint8;
  default:
    return makeStatus(StatusCode::kInvalidArgument,
                      "NCCL cannot move elements of type %s",
                      plan::dtypeName(dtype));
  }
}

ncclRedOp_t ncclOp(ReduceOp op) { return op == ReduceOp::kAverage ? ncclAvg : ncclSum; }

bool isDevicePointer(const void *pointer) {
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice ||
         attributes.type == cudaMemoryTypeManaged;
}

} // namespace

std::string ncclIdToHex(const ncclUniqueId &id) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    unsigned char byte = static_cast<unsigned char>(id.internal[i]);
    hex += kDigits[byte >> 4];
    hex += kDigits[byte & 15];
  }
  return hex;
}

Status ncclIdFromHex(const std::string &hex, ncclUniqueId &id) {
  if (hex.size() != 2 * sizeof(id.internal))
    return Status(StatusCode::kInvalidArgument,
                  "a NCCL id is " + std::to_string(2 * sizeof(id.internal)) +
                      " hex digits, not " + std::to_string(hex.size()));
  auto digit = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    int high = digit(hex[2 * i]), low = digit(hex[2 * i + 1]);
    if (high < 0 || low < 0)
      return Status(StatusCode::kInvalidArgument, "a NCCL id is hex digits only");
    id.internal[i] = static_cast<char>(high * 16 + low);
  }
  return Status::ok();
}

StatusOr<ncclUniqueId> makeNcclId() {
  ncclUniqueId id;
  ncclResult_t result = ncclGetUniqueId(&id);
  if (result != ncclSuccess)
    return ncclError(result, "ncclGetUniqueId", nullptr);
  return id;
}

StatusOr<std::unique_ptr<NcclCommunicator>>
NcclCommunicator::create(const ncclUniqueId &id, int rank, int size,
                         std::chrono::milliseconds timeout) {
  std::unique_ptr<NcclCommunicator> communicator(new NcclCommunicator());
  communicator->rank_ = rank;
  communicator->jobRank_ = rank;
  communicator->size_ = size;
  communicator->timeoutMs_.store(timeout.count());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t result =
      ncclCommInitRankConfig(&communicator->comm_, size, id, rank, &config);
  if (result != ncclSuccess && result != ncclInProgress)
    return ncclError(result, "communicator creation", communicator->comm_);
  ZCC_RETURN_IF_ERROR(communicator->awaitReady(nullptr, "communicator creation"),
                      "rank %d: the NCCL group of %d ranks", rank, size);
  ZCC_RETURN_IF_ERROR(communicator->start(), "rank %d", rank);
  return communicator;
}

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::split(int color, int key) {
  std::lock_guard<std::timed_mutex> call(callMutex_);
  if (aborted_.load())
    return abortedStatus();
  std::unique_ptr<NcclCommunicator> child(new NcclCommunicator());
  child->timeoutMs_.store(timeoutMs_.load());
  child->jobRank_ = jobRank_;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t result = ncclCommSplit(comm_, color, key, &child->comm_, &config);
  if (result != ncclSuccess && result != ncclInProgress)
    return ncclError(result, "communicator split", comm_);
  ZCC_RETURN_IF_ERROR(child->awaitReady(comm_, "communicator split"),
                      "rank %d: splitting its NCCL group (color %d, key %d)", jobRank_, color, key);
  if (!child->comm_)
    return makeStatus(StatusCode::kInternal, "rank %d: NCCL gave no communicator for color %d",
                      jobRank_, color);
  if (ncclCommCount(child->comm_, &child->size_) != ncclSuccess ||
      ncclCommUserRank(child->comm_, &child->rank_) != ncclSuccess)
    return makeStatus(StatusCode::kInternal, "rank %d: a split NCCL communicator has no rank",
                      jobRank_);
  ZCC_RETURN_IF_ERROR(child->start(), "rank %d", jobRank_);
  return child;
}

Status NcclCommunicator::awaitReady(ncclComm_t parent, const char *what) {
  auto deadline = std::chrono::steady_clock::now() + timeout();
  for (;;) {
    ncclResult_t state = ncclSuccess, parentState = ncclSuccess;
    if (comm_)
      ncclCommGetAsyncError(comm_, &state);
    if (parent)
      ncclCommGetAsyncError(parent, &parentState);
    if (state == ncclSuccess && parentState == ncclSuccess)
      return Status::ok();
    Status failed = Status::ok();
    if (state != ncclSuccess && state != ncclInProgress)
      failed = ncclError(state, what, comm_);
    else if (parentState != ncclSuccess && parentState != ncclInProgress)
      failed = ncclError(parentState, what, parent);
    else if (std::chrono::steady_clock::now() > deadline)
      failed = makeStatus(StatusCode::kDeadlineExceeded,
                          "the other ranks did not join within %lld s (--comm-timeout)",
                          static_cast<long long>(timeout().count() / 1000));
    if (!failed.isOk()) {
      // Never destroyed as if it were whole.
      if (comm_)
        ncclCommAbort(comm_);
      comm_ = nullptr;
      return failed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status NcclCommunicator::start() {
  ZCC_CUDA_RETURN_IF_ERROR(cudaMalloc(&staging_, kStagingBytes));
  StatusOr<Thread> watchdog =
      Thread::start([this] { watch(); }, "the NCCL communicator's watchdog thread",
                    "raise the process's limits (ulimit -u / -v)");
  if (!watchdog.isOk())
    return watchdog.takeStatus();
  watchdog_ = std::move(*watchdog);
  return Status::ok();
}

NcclCommunicator::~NcclCommunicator() {
  if (watchdog_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(watchMutex_);
      stopping_ = true;
    }
    watchWake_.notify_all();
    watchdog_.join();
  }
  if (abortThread_.joinable()) {
    // NCCL's abort runs on a thread of its own (it may wait on kernels
    // that never finish): give it the grace, then leave without it.
    auto deadline = std::chrono::steady_clock::now() + kExitGrace;
    while (!abortDone_.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!abortDone_.load())
      exitStuck("NCCL's abort of its communicator did not finish");
    abortThread_.join();
  } else if (comm_ && !aborted_.load()) {
    ncclCommDestroy(comm_);
  }
  if (staging_)
    cudaFree(staging_);
}

void NcclCommunicator::setStream(void *stream) { stream_ = stream; }

Status NcclCommunicator::asyncState(const char *what, bool &inProgress) {
  // Under the abort lock: an abort (the watchdog's) frees the communicator.
  std::lock_guard<std::mutex> lock(abortMutex_);
  inProgress = false;
  if (aborted_.load())
    return abortedStatus();
  ncclResult_t state = ncclSuccess;
  ncclCommGetAsyncError(comm_, &state);
  inProgress = state == ncclInProgress;
  if (state == ncclSuccess || state == ncclInProgress)
    return Status::ok();
  return ncclError(state, what, comm_);
}

std::string NcclCommunicator::timeoutReason(std::chrono::milliseconds waited) const {
  return formatString("rank %d waited %.1f s for its collectives: another rank died or hangs "
                      "(raise --comm-timeout if steps are this slow)",
                      jobRank_, static_cast<double>(waited.count()) / 1000);
}

void NcclCommunicator::exitStuck(const char *what) const {
  std::fprintf(stderr, "zrun: error: rank %d: %s (%lld s; %s); exiting\n", jobRank_, what,
               static_cast<long long>(kExitGrace.count()), abortReason_.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

void NcclCommunicator::watchRun(bool running) {
  if (running) {
    if (runDepth_++ == 0)
      runSince_.store(std::chrono::steady_clock::now().time_since_epoch().count());
  } else if (runDepth_ > 0 && --runDepth_ == 0) {
    runSince_.store(0);
  }
}

void NcclCommunicator::watch() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(watchMutex_);
  Clock::time_point stuckSince{};
  while (!watchWake_.wait_for(lock, kWatchPeriod, [&] { return stopping_; })) {
    int64_t since = runSince_.load();
    if (since == 0) {
      stuckSince = {};
      continue;
    }
    Clock::time_point now = Clock::now();
    if (!aborted_.load()) {
      bool inProgress = false;
      Status state = asyncState("collective", inProgress);
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
          now - Clock::time_point(Clock::duration(since)));
      if (!state.isOk())
        abort(state.message());
      else if (waited > timeout())
        abort(timeoutReason(waited));
      continue;
    }
    // Aborted, and the rank's thread has not come back from its run.
    if (stuckSince == Clock::time_point{})
      stuckSince = now;
    else if (now - stuckSince > kExitGrace)
      exitStuck("the rank is still stuck in a CUDA or NCCL call after the abort");
  }
}

Status NcclCommunicator::abortedStatus() const {
  return makeStatus(StatusCode::kUnavailable, "the NCCL communicator of rank %d was aborted: %s",
                    jobRank_, abortReason_.c_str());
}

Status NcclCommunicator::enqueue(const char *what,
                                 const std::function<ncclResult_t(ncclComm_t)> &call) {
  ncclResult_t result = ncclSuccess;
  {
    // An abort waits (a moment) for a call being enqueued, so that it never
    // frees the communicator under the call.
    std::lock_guard<std::timed_mutex> lock(callMutex_);
    if (aborted_.load())
      return abortedStatus();
    result = call(comm_);
    if (result != ncclSuccess && result != ncclInProgress)
      return ncclError(result, what, comm_);
  }
  if (result == ncclSuccess)
    return Status::ok();
  auto deadline = std::chrono::steady_clock::now() + timeout();
  for (;;) {
    bool inProgress = false;
    Status state = asyncState(what, inProgress);
    if (!state.isOk())
      return state;
    if (!inProgress)
      return Status::ok();
    if (std::chrono::steady_clock::now() > deadline) {
      abort(std::string("NCCL ") + what + " did not complete within the timeout");
      return abortedStatus();
    }
    std::this_thread::yield();
  }
}

Status NcclCommunicator::staged(const void *input, void *output, uint64_t bytes,
                                const std::function<Status(const void *, void *)> &body) {
  if (isDevicePointer(output))
    return body(input, output);
  if (bytes > kStagingBytes)
    return makeStatus(StatusCode::kInvalidArgument,
                      "a collective on host memory moves at most %llu bytes "
                      "(it has %llu); pass device memory",
                      static_cast<unsigned long long>(kStagingBytes),
                      static_cast<unsigned long long>(bytes));
  cudaStream_t stream = static_cast<cudaStream_t>(stream_);
  ZCC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging_, input, bytes,
                                           cudaMemcpyHostToDevice, stream));
  ZCC_RETURN_IF_ERROR(body(staging_, staging_), "on rank %d", jobRank_);
  ZCC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(output, staging_, bytes,
                                           cudaMemcpyDeviceToHost, stream));
  // Host data must be there on return: wait, watching for a failed peer.
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    cudaError_t result = cudaStreamQuery(stream);
    if (result == cudaSuccess)
      break;
    if (result != cudaErrorNotReady)
      ZCC_CUDA_RETURN_IF_ERROR(result);
    ZCC_RETURN_IF_ERROR(checkHealth(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - start)),
                        "while reducing host values");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return Status::ok();
}

Status NcclCommunicator::allReduce(const void *input, void *output, uint64_t count,
                                   plan::DType dtype, ReduceOp op) {
  // A run of its own for the watchdog (or part of the program's run).
  WatchedRun watched(this);
  StatusOr<ncclDataType_t> type = ncclType(dtype);
  if (!type.isOk())
    return type.takeStatus();
  return staged(input, output, count * plan::dtypeBytes(dtype),
                [&](const void *in, void *out) {
                  return enqueue("all-reduce", [&](ncclComm_t comm) {
                    return ncclAllReduce(in, out, count, *type, ncclOp(op), comm,
                                         static_cast<cudaStream_t>(stream_));
                  });
                });
}

Status NcclCommunicator::reduceScatter(const void *input, void *output, uint64_t count,
                                       plan::DType dtype, ReduceOp op) {
  // A run of its own for the watchdog (or part of the program's run).
  WatchedRun watched(this);
  if (count % static_cast<uint64_t>(size_) != 0)
    return makeStatus(StatusCode::kInvalidArgument,
                      "reduce-scatter of %llu elements over %d ranks: not a multiple",
                      static_cast<unsigned long long>(count), size_);
  StatusOr<ncclDataType_t> type = ncclType(dtype);
  if (!type.isOk())
    return type.takeStatus();
  return enqueue("reduce-scatter", [&](ncclComm_t comm) {
    return ncclReduceScatter(input, output, count / size_, *type, ncclOp(op), comm,
                             static_cast<cudaStream_t>(stream_));
  });
}

Status NcclCommunicator::allGather(const void *input, void *output, uint64_t count,
                                   plan::DType dtype) {
  // A run of its own for the watchdog (or part of the program's run).
  WatchedRun watched(this);
  StatusOr<ncclDataType_t> type = ncclType(dtype);
  if (!type.isOk())
    return type.takeStatus();
  return enqueue("all-gather", [&](ncclComm_t comm) {
    return ncclAllGather(input, output, count, *type, comm, static_cast<cudaStream_t>(stream_));
  });
}

Status NcclCommunicator::broadcast(const void *input, void *output, uint64_t count,
                                   plan::DType dtype, int root) {
  // A run of its own for the watchdog (or part of the program's run).
  WatchedRun watched(this);
  StatusOr<ncclDataType_t> type = ncclType(dtype);
  if (!type.isOk())
    return type.takeStatus();
  return enqueue("broadcast", [&](ncclComm_t comm) {
    return ncclBroadcast(input, output, count, *type, root, comm,
                         static_cast<cudaStream_t>(stream_));
  });
}

Status NcclCommunicator::send(const void *input, uint64_t count, plan::DType dtype,
                              int peer) {
  // A run of its own for the watchdog (or part of the program's run).
  WatchedRun watched(this);
  StatusOr<ncclDataType_t> type = ncclType(dtype);
  if (!type.isOk())
    return type.takeStatus();
  return enqueue("send", [&](ncclComm_t comm) {
    return ncclSend(input, count, *type, peer, comm, static_cast<cudaStream_t>(stream_));
  });
}

Status NcclCommunicator::recv(void *output, uint64_t count, plan::DType dtype, int peer) {
  // A run of its own for the watchdog (or part of the program's run).
  WatchedRun watched(this);
  StatusOr<ncclDataType_t> type = ncclType(dtype);
  if (!type.isOk())
    return type.takeStatus();
  return enqueue("recv", [&](ncclComm_t comm) {
    return ncclRecv(output, count, *type, peer, comm, static_cast<cudaStream_t>(stream_));
  });
}

Status NcclCommunicator::barrier() {
  int32_t token = 0;
  return allReduce(&token, &token, 1, plan::I32, ReduceOp::kSum);
}

void NcclCommunicator::abort(const std::string &reason) {
  // A call being enqueued finishes first; one stuck inside NCCL for a
  // second is what the abort must free, so it goes on without the lock.
  std::unique_lock<std::timed_mutex> call(callMutex_, std::defer_lock);
  (void)call.try_lock_for(std::chrono::seconds(1));
  {
    std::lock_guard<std::mutex> lock(abortMutex_);
    if (aborted_.load())
      return;
    abortReason_ = reason;
    aborted_.store(true);
  }
  // Said at once: the abort itself may take a while (NCCL stops its
  // kernels and proxy threads), and the rank's error comes after it. Once
  // per reason: a process aborts all its communicators (a pipeline's
  // groups) for the same one.
  static std::mutex saidMutex;
  static std::string said;
  {
    std::lock_guard<std::mutex> saidLock(saidMutex);
    if (said != reason)
      std::fprintf(stderr, "zrun: rank %d: %s; aborting its NCCL communicators\n", jobRank_,
                   reason.c_str());
    std::fflush(stderr);
    said = reason;
  }
  // NCCL's abort on a thread of its own: it may wait on kernels that never
  // finish, and the watchdog must go on watching (the destructor waits for
  // it, within the grace).
  if (comm_) {
    ncclComm_t comm = comm_;
    StatusOr<Thread> aborter = Thread::start(
        [this, comm] {
          ncclCommAbort(comm);
          abortDone_.store(true);
        },
        "the thread of NCCL's abort", "raise the process's limits (ulimit -u / -v)");
    if (aborter.isOk()) {
      abortThread_ = std::move(*aborter);
    } else {
      // Aborted here, then: left unaborted, the communicator would keep
      // the other ranks waiting until their timeout.
      std::fprintf(stderr, "zrun: rank %d: %s; aborting on this thread\n", jobRank_,
                   aborter.status().message().c_str());
      ncclCommAbort(comm);
      abortDone_.store(true);
    }
  }
}

Status NcclCommunicator::checkHealth(std::chrono::milliseconds waited) {
  bool inProgress = false;
  Status failed = asyncState("collective", inProgress);
  if (!failed.isOk()) {
    if (!aborted_.load())
      abort(failed.message());
    return failed;
  }
  if (waited > timeout()) {
    abort(timeoutReason(waited));
    return makeStatus(StatusCode::kDeadlineExceeded, "%s", abortReason_.c_str());
  }
  return Status::ok();
}

} // namespace zcc
