//===- LocalCommunicator.h - Collectives between threads --------*- C++ -*-===//
//
// The cpu backend runs the ranks of a job as threads of one process, so a
// collective needs no staging copies: all buffers live in one address space.
// Each call is two barrier phases:
//   1. every rank publishes its call (pointers, count, dtype, op) and waits
//      until all ranks of the communicator have;
//   2. each rank checks that all ranks made the same call, does its share of
//      the work reading the other ranks' buffers directly, and waits until
//      all ranks are done with each other's buffers before returning.
// For allReduce rank r computes the slice r of the element range (elements
// [r * count / n, (r + 1) * count / n)) and stores it into every rank's
// output, which makes in-place calls safe: only rank r touches slice r of any
// buffer. reduceScatter computes a rank's own slice, allGather and broadcast
// copy into the rank's own output.
//
// Results are bit-identical from run to run and on every rank: element i of
// a reduction is ((x_0[i] + x_1[i]) + x_2[i]) + ... in rank order, whichever
// thread computes it, in the dtype's compute type (float for f32, f16 and
// bf16: 16-bit values are widened exactly and the result is rounded once;
// double for f64); an average divides that sum by the number of ranks before
// the one rounding. i64 and i32 sum exactly (wrapping on overflow, as two's
// complement does); average takes float dtypes only.
//
// Nothing is allocated after construction: the published calls and the
// send/recv mailboxes are sized for the group up front, the reduction
// accumulates in a block on the stack, and strings are built only for
// errors. A step therefore allocates nothing here.
//
// Sub-groups (the data-parallel or pipeline groups of a mesh) are made from
// the job's group with createSubgroup(globalRanks), before the rank threads
// start. All groups of a job share one lock, one timeout and one abort state:
// an abort or a timeout in any group fails every call of the job, so a rank
// waiting in its data-parallel group is not left waiting for a pipeline peer
// that already failed. Messages name global ranks.
//
// Timeouts: a call that has not completed within the timeout (default 300 s)
// of its start aborts the job. After phase 1 has completed, every rank only
// has bounded local work left, so phase 2 waits without a deadline: a rank
// never returns (and lets its caller free a buffer) while another rank may
// still read or write it. A send the receiver is already copying likewise
// waits for the copy.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_COMM_LOCALCOMMUNICATOR_H
#define ZCC_RUNTIME_COMM_LOCALCOMMUNICATOR_H

#include "runtime/Comm/Communicator.h"

#include <chrono>
#include <memory>
#include <vector>

namespace zcc {

namespace detail {
struct LocalJob;
struct LocalGroupState;
} // namespace detail

struct LocalCommunicatorOptions {
  /// How long a call may take, counted from its start, before it gives up
  /// and aborts the job. Must be positive.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

/// The communicators of the ranks of one job (or of a sub-group of it), each
/// used by one thread. The group owns them: join the rank threads before
/// destroying it.
class LocalCommunicatorGroup {
public:
  /// A job of `size` ranks; communicator(r) is rank r's.
  static StatusOr<std::unique_ptr<LocalCommunicatorGroup>>
  create(int size, LocalCommunicatorOptions options = {});

  ~LocalCommunicatorGroup();
  LocalCommunicatorGroup(const LocalCommunicatorGroup &) = delete;
  LocalCommunicatorGroup &operator=(const LocalCommunicatorGroup &) = delete;

  /// The number of ranks of this group.
  int size() const;
  /// Group rank `rank`'s communicator; null when `rank` is not in [0,
  /// size()).
  Communicator *communicator(int rank);
  /// The job rank of this group's rank `rank`.
  int globalRank(int rank) const;

  /// A group of the job's ranks `globalRanks` (distinct, in [0, job size));
  /// globalRanks[i] is its rank i. Call it on any group of the job before the
  /// rank threads use the new group; the job's first group owns it (the
  /// pointer stays valid as long as that group lives).
  StatusOr<LocalCommunicatorGroup *>
  createSubgroup(const std::vector<int> &globalRanks);

  /// Whether the job has been aborted (by abort(), a timeout or mismatched
  /// calls).
  bool isAborted() const;

private:
  LocalCommunicatorGroup(std::shared_ptr<detail::LocalJob> job,
                         std::vector<int> globalRanks);

  std::shared_ptr<detail::LocalJob> job_;
  std::unique_ptr<detail::LocalGroupState> state_;
  /// Sub-groups, owned by the job's first group only (guarded by the job's
  /// lock).
  std::vector<std::unique_ptr<LocalCommunicatorGroup>> subgroups_;
};

} // namespace zcc

#endif // ZCC_RUNTIME_COMM_LOCALCOMMUNICATOR_H
