//===- Communicator.h - Collectives between the ranks of a job --*- C++ -*-===//
//
// What the executor needs to move data between ranks: the NCCL collectives on
// raw device pointers, with a plan dtype and an element count. The cpu
// backend implements it in-process (LocalCommunicator.h, ranks are threads);
// the cuda backend will implement it with NCCL.
//
// Every call is made by every rank of the communicator in the same order
// with matching arguments (send/recv: by the two peers), as with NCCL. A call
// returns once this rank's part is complete: its output is written and its
// input may be reused. Errors are values: bad arguments come back as
// kInvalidArgument; a call that waits longer than the communicator's timeout
// fails with kDeadlineExceeded and aborts the communicator; once aborted
// (abort(), a timeout, ranks that called different collectives), every
// pending and later call on every rank fails, naming the rank that aborted
// and why. No call waits forever.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_COMM_COMMUNICATOR_H
#define ZCC_RUNTIME_COMM_COMMUNICATOR_H

#include "plan.pb.h"
#include "runtime/Support/Status.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace zcc {

/// How allReduce and reduceScatter combine the ranks' elements.
enum class ReduceOp {
  /// x_0 + x_1 + ... + x_{n-1}.
  kSum,
  /// The sum divided by the number of ranks (float dtypes only).
  kAverage,
};

/// "sum", "average": for messages.
const char *reduceOpName(ReduceOp op);

class Communicator {
public:
  virtual ~Communicator() = default;

  /// This rank's index in the communicator, in [0, size()).
  virtual int rank() const = 0;
  /// The number of ranks in the communicator.
  virtual int size() const = 0;

  /// Every rank's `output` receives the reduction over all ranks of their
  /// `input`, `count` elements each. `input == output` reduces in place;
  /// otherwise the two must not overlap.
  virtual Status allReduce(const void *input, void *output, uint64_t count,
                           plan::DType dtype, ReduceOp op) = 0;

  /// Reduces `count` elements of every rank's `input` (count must be a
  /// multiple of size()) and gives rank r elements [r * count / size(),
  /// (r + 1) * count / size()) of the result in its `output` (count / size()
  /// elements). In place when `output` is input + rank() * count / size()
  /// elements.
  virtual Status reduceScatter(const void *input, void *output, uint64_t count,
                               plan::DType dtype, ReduceOp op) = 0;

  /// Every rank contributes `count` elements; every rank's `output` (size() *
  /// count elements) receives them rank-major: rank j's at [j * count, (j +
  /// 1) * count). In place when `input` is output + rank() * count elements.
  virtual Status allGather(const void *input, void *output, uint64_t count,
                           plan::DType dtype) = 0;

  /// Every rank's `output` receives `count` elements of `root`'s `input`.
  /// Only the root's `input` is read (other ranks may pass null); in place on
  /// the root when its `input == output`.
  virtual Status broadcast(const void *input, void *output, uint64_t count,
                           plan::DType dtype, int root) = 0;

  /// Sends `count` elements to rank `peer`, whose matching recv receives
  /// them: the k-th send from a to b pairs with b's k-th recv from a, and
  /// both must name the same count and dtype. A send returns once the
  /// receiver has the data (no buffering), so two ranks that both send to
  /// each other first wait for each other until the timeout: order the calls
  /// (e.g. even ranks send first).
  virtual Status send(const void *input, uint64_t count, plan::DType dtype,
                      int peer) = 0;
  /// Receives the next message from rank `peer` into `output`.
  virtual Status recv(void *output, uint64_t count, plan::DType dtype,
                      int peer) = 0;

  /// Returns once every rank has called it.
  virtual Status barrier() = 0;

  /// Gives up on the job, from any thread (e.g. a kernel of this rank
  /// failed): every pending and later call on every rank fails promptly with
  /// "aborted by rank R: <reason>" instead of waiting for this rank. The
  /// first abort's reason is the one reported.
  virtual void abort(const std::string &reason) = 0;

  /// Device communicators (NCCL) enqueue their collectives on `stream`, a
  /// backend's native stream, and a call then returns once the collective is
  /// enqueued: it is complete, in stream order, before anything launched
  /// after it runs. Host communicators ignore it.
  virtual void setStream(void * /*stream*/) {}

  /// Called while a rank has waited `waited` for its device: an error once a
  /// collective has failed or the wait has outlived the communicator's
  /// timeout (which also aborts the communicator). Host communicators time
  /// out inside each call and have nothing to add.
  virtual Status checkHealth(std::chrono::milliseconds /*waited*/) {
    return Status::ok();
  }

  /// Brackets a program's run on this rank (true when it starts, false once
  /// the device has finished it). A device communicator's watchdog aborts
  /// a run that outlives the timeout even while the rank's thread is stuck
  /// where it cannot call checkHealth (inside a CUDA or NCCL call). Host
  /// communicators ignore it.
  virtual void watchRun(bool /*running*/) {}
};

/// Brackets a run for `communicator`'s watchdog: watchRun(true) now,
/// watchRun(false) at the end of the scope. Null watches nothing.
class WatchedRun {
public:
  explicit WatchedRun(Communicator *communicator) : communicator(communicator) {
    if (communicator)
      communicator->watchRun(true);
  }
  ~WatchedRun() {
    if (communicator)
      communicator->watchRun(false);
  }
  WatchedRun(const WatchedRun &) = delete;
  WatchedRun &operator=(const WatchedRun &) = delete;

private:
  Communicator *communicator;
};

} // namespace zcc

#endif // ZCC_RUNTIME_COMM_COMMUNICATOR_H
