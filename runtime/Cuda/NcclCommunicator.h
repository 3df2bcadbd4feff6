//===- NcclCommunicator.h - Collectives between GPUs through NCCL -*- C++ -*-===//
//
// The Communicator of the cuda backend: one NCCL communicator per rank,
// created from a unique id every rank of the group shares (zrun passes it to
// the ranks it starts, or exchanges it over TCP under a torchrun-style
// launch). Collectives are enqueued on the stream setStream() names (the
// backend's stream), so they run in plan order with the kernels.
//
// Failure never hangs a rank: the communicator is non-blocking, so creation
// is polled against the timeout; while the backend waits for its stream it
// calls checkHealth(), which reports NCCL's asynchronous errors and, once a
// wait has outlived the timeout (a peer died or hangs), aborts the
// communicator and says so. A watchdog thread does the same from outside
// while a program or a collective runs (watchRun), for a rank whose thread
// is stuck inside a CUDA or NCCL call (a host function of NCCL's in a CUDA
// graph that waits on a dead peer); a rank still stuck a few seconds after
// the abort exits the process with the reason, so that no rank hangs.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define ZCC_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "runtime/Comm/Communicator.h"
#include "runtime/Support/Thread.h"

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace zcc {

/// NCCL's 128-byte unique id as text (hex), for environment variables.
std::string ncclIdToHex(const ncclUniqueId &id);
Status ncclIdFromHex(const std::string &hex, ncclUniqueId &id);

/// A fresh unique id (made by the process that will host NCCL's bootstrap).
StatusOr<ncclUniqueId> makeNcclId();

class NcclCommunicator final : public Communicator {
public:
  /// Joins the group of `size` ranks identified by `id` as `rank`, on the
  /// calling thread's current CUDA device. Fails after `timeout` if the
  /// other ranks do not join.
  static StatusOr<std::unique_ptr<NcclCommunicator>>
  create(const ncclUniqueId &id, int rank, int size,
         std::chrono::milliseconds timeout);
  ~NcclCommunicator() override;

  /// The communicator of the ranks that pass the same `color`, ordered by
  /// `key` (ncclCommSplit): every rank of this one calls it, in the same
  /// order as its other calls.
  StatusOr<std::unique_ptr<NcclCommunicator>> split(int color, int key);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status allReduce(const void *input, void *output, uint64_t count,
                   plan::DType dtype, ReduceOp op) override;
  Status reduceScatter(const void *input, void *output, uint64_t count,
                       plan::DType dtype, ReduceOp op) override;
  Status allGather(const void *input, void *output, uint64_t count,
                   plan::DType dtype) override;
  Status broadcast(const void *input, void *output, uint64_t count,
                   plan::DType dtype, int root) override;
  Status send(const void *input, uint64_t count, plan::DType dtype,
              int peer) override;
  Status recv(void *output, uint64_t count, plan::DType dtype,
              int peer) override;
  Status barrier() override;
  void abort(const std::string &reason) override;
  void setStream(void *stream) override;
  Status checkHealth(std::chrono::milliseconds waited) override;
  void watchRun(bool running) override;
  /// How long a run or a collective may take from now on (creation waited
  /// for the other ranks with the timeout create() was given).
  void setTimeout(std::chrono::milliseconds timeout) { timeoutMs_.store(timeout.count()); }

private:
  NcclCommunicator() = default;
  /// Polls a non-blocking creation (of this communicator, and the split
  /// `parent` when there is one) until it is ready, failing after the
  /// timeout.
  Status awaitReady(ncclComm_t parent, const char *what);
  /// The staging buffer and the watchdog of a ready communicator.
  Status start();
  /// Enqueues `call` on the communicator (unless it was aborted) and waits
  /// for a non-blocking call's ncclInProgress to settle; the error names
  /// `what`.
  Status enqueue(const char *what, const std::function<ncclResult_t(ncclComm_t)> &call);
  Status abortedStatus() const;
  /// NCCL's asynchronous error as a status (what: the call, for the
  /// message); `inProgress` when a non-blocking call has not settled yet.
  Status asyncState(const char *what, bool &inProgress);
  /// Ends the process after an abort that could not end the rank's wait
  /// within kExitGrace: says `what` and why the communicator was aborted.
  [[noreturn]] void exitStuck(const char *what) const;
  /// The abort reason of a run that has waited `waited`, past the timeout.
  std::string timeoutReason(std::chrono::milliseconds waited) const;
  /// Runs `body` on device memory: host pointers (the training loop's
  /// scalars) are staged through the communicator's own device buffer.
  Status staged(const void *input, void *output, uint64_t bytes,
                const std::function<Status(const void *, void *)> &body);

  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
  /// This process's rank in the job (of the communicator split() started
  /// from), for messages.
  int jobRank_ = 0;
  void *stream_ = nullptr;
  /// How long a run or a call may wait (milliseconds; the watchdog reads
  /// it while the rank's thread may set it).
  std::atomic<int64_t> timeoutMs_{0};
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeoutMs_.load()); }
  /// A device buffer for host operands (small: loss values, flags).
  void *staging_ = nullptr;
  static constexpr uint64_t kStagingBytes = 4096;
  std::mutex abortMutex_;
  std::atomic<bool> aborted_{false};
  std::string abortReason_;
  /// Held while a call is enqueued; an abort waits for it a moment.
  std::timed_mutex callMutex_;
  /// ncclCommAbort's thread, and whether it has returned.
  Thread abortThread_;
  std::atomic<bool> abortDone_{false};

  /// The watchdog: polls NCCL's asynchronous error and the current run's
  /// age every kWatchPeriod.
  void watch();
  static constexpr std::chrono::milliseconds kWatchPeriod{50};
  /// How long a rank may stay stuck after an abort before its process
  /// exits.
  static constexpr std::chrono::seconds kExitGrace{5};
  Thread watchdog_;
  std::mutex watchMutex_;
  std::condition_variable watchWake_;
  bool stopping_ = false;
  /// Nested watchRun(true) calls (a run, collectives inside it) and the
  /// outermost one's start, in steady_clock ticks; 0 when idle.
  int runDepth_ = 0;
  std::atomic<int64_t> runSince_{0};
};

} // namespace zcc

#endif // ZCC_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
