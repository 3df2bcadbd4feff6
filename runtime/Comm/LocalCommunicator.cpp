//===- LocalCommunicator.cpp - Collectives between threads ----------------===//

#include "runtime/Comm/LocalCommunicator.h"

#include "kernels/cpu/Float16.h"
#include "schema/DTypes.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>

/// Argument checks already name the call; they need no added context.
#define RETURN_IF_INVALID(expr)                                                \
  do {                                                                         \
    ::zcc::Status status_ = (expr);                                            \
    if (!status_.isOk())                                                       \
      return status_;                                                          \
  } while (false)

namespace zcc {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

enum class Collective : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kBarrier,
};

const char *collectiveName(Collective collective) {
  switch (collective) {
  case Collective::kAllReduce:
    return "all_reduce";
  case Collective::kReduceScatter:
    return "reduce_scatter";
  case Collective::kAllGather:
    return "all_gather";
  case Collective::kBroadcast:
    return "broadcast";
  case Collective::kBarrier:
    return "barrier";
  }
  return "unknown";
}

bool isFloatDType(plan::DType dtype) {
  return dtype == plan::F32 || dtype == plan::F64 || dtype == plan::F16 ||
         dtype == plan::BF16;
}

bool isReducibleDType(plan::DType dtype) {
  return isFloatDType(dtype) || dtype == plan::I64 || dtype == plan::I32;
}

/// Calls `body(T())` with T the storage type of a reducible dtype.
template <typename Body>
void dispatchReducible(plan::DType dtype, Body &&body) {
  switch (dtype) {
  case plan::F32:
    body(float());
    break;
  case plan::F64:
    body(double());
    break;
  case plan::F16:
    body(cpu::Half());
    break;
  case plan::BF16:
    body(cpu::BFloat16());
    break;
  case plan::I64:
    body(int64_t());
    break;
  case plan::I32:
    body(int32_t());
    break;
  default:
    break;
  }
}

/// How elements of storage type T are summed: floats in their compute type
/// (Float16.h) and rounded once at the end; integers in the unsigned type of
/// the same width, which wraps instead of overflowing.
template <typename T> struct Summation {
  using Acc = cpu::Compute<T>;
  static Acc widen(T value) { return cpu::load(value); }
  static T narrow(Acc value) { return cpu::store<T>(value); }
};
template <> struct Summation<int64_t> {
  using Acc = uint64_t;
  static Acc widen(int64_t value) { return static_cast<uint64_t>(value); }
  static int64_t narrow(Acc value) { return static_cast<int64_t>(value); }
};
template <> struct Summation<int32_t> {
  using Acc = uint32_t;
  static Acc widen(int32_t value) { return static_cast<uint32_t>(value); }
  static int32_t narrow(Acc value) { return static_cast<int32_t>(value); }
};

/// Elements reduced per pass over the ranks: the partial sums stay in a
/// small block on the stack (no allocation), and each input is read in long
/// contiguous runs.
constexpr uint64_t kReduceBlock = 256;

} // namespace

/// One rank's current collective call, as the other ranks read it between
/// the two phases.
struct PublishedCall {
  Collective collective = Collective::kBarrier;
  const void *input = nullptr;
  void *output = nullptr;
  uint64_t count = 0;
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
};

/// A call that moves `count` elements of `dtype` from `input` to `output`.
PublishedCall dataCall(Collective collective, const void *input, void *output,
                       uint64_t count, plan::DType dtype) {
  PublishedCall call;
  call.collective = collective;
  call.input = input;
  call.output = output;
  call.count = count;
  call.dtype = dtype;
  return call;
}

/// The message from one rank to another: posted by the sender, claimed by
/// the receiver while it copies, done once copied; the sender then empties
/// it. A send blocks until done, so a mailbox holds one message at most and
/// the k-th send meets the k-th recv.
struct Mailbox {
  enum class State : uint8_t { kEmpty, kPosted, kClaimed, kDone };
  State state = State::kEmpty;
  const void *data = nullptr;
  uint64_t count = 0;
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
};

/// What every group of a job shares: one lock and condition variable (so an
/// abort wakes every waiting rank of every group), the timeout and the abort
/// state.
struct LocalJob {
  int size = 0;
  std::chrono::milliseconds timeout{0};
  std::mutex mutex;
  std::condition_variable changed;
  // Guarded by `mutex`; abortingRank and abortReason are set once, with
  // `aborted`.
  bool aborted = false;
  int abortingRank = -1;
  std::string abortReason;
  /// The job's first group, which owns the sub-groups.
  LocalCommunicatorGroup *world = nullptr;
};

class LocalCommunicator;

struct LocalGroupState {
  LocalJob *job = nullptr;
  std::vector<int> globalRanks;
  /// Appended to the rank in messages: "" for the job's first group, " in
  /// group [1, 3]" for a sub-group.
  std::string label;
  /// How many barrier phases each rank has entered (guarded by the job's
  /// lock). Phase counts only grow, so "everyone has reached phase p" stays
  /// true once it is.
  std::vector<uint64_t> phases;
  /// Each rank's current call, written under the job's lock before it enters
  /// phase 1 of it.
  std::vector<PublishedCall> calls;
  /// mailboxes[sender * size + receiver], guarded by the job's lock.
  std::vector<Mailbox> mailboxes;
  std::vector<std::unique_ptr<LocalCommunicator>> communicators;
};

namespace {

/// Names a call in messages: "all_reduce", "send to rank 2".
struct CallLabel {
  const char *name;
  /// "to"/"from" and the group rank of the peer, for send and recv.
  const char *direction = nullptr;
  int peer = -1;
};

} // namespace

class LocalCommunicator final : public Communicator {
public:
  LocalCommunicator(LocalGroupState &group, int rank)
      : group_(group), job_(*group.job), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(group_.phases.size()); }

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

private:
  int globalRank() const { return group_.globalRanks[rank_]; }

  /// "all_reduce on rank 1", "send to rank 2 on rank 1 in group [1, 2]".
  std::string describe(const CallLabel &label) const;
  Status invalid(const CallLabel &label, const std::string &problem) const;

  Status checkElements(const CallLabel &label, plan::DType dtype,
                       uint64_t count, uint64_t multiple) const;
  Status checkReduction(const CallLabel &label, plan::DType dtype,
                        ReduceOp op) const;
  Status checkBuffer(const CallLabel &label, const char *what,
                     const void *buffer, uint64_t count) const;
  Status checkPeer(const CallLabel &label, const char *what, int peer) const;

  /// Publishes `call`, waits for every rank's (phase 1), checks that they
  /// agree, does this rank's share and waits until every rank has done its
  /// own (phase 2).
  Status runCollective(const CallLabel &label, const PublishedCall &call);
  Status checkSameCall(const CallLabel &label) const;
  void execute(const PublishedCall &call);
  template <typename T> void executeReduction(const PublishedCall &call);

  // With the job's lock held:
  bool everyoneReached(uint64_t phase) const;
  std::string ranksBehind(uint64_t phase) const;
  void abortLocked(const std::string &reason);
  Status abortedStatus(const CallLabel &label) const;
  Status timeoutStatus(const CallLabel &label, const std::string &waitingFor);

  LocalGroupState &group_;
  LocalJob &job_;
  int rank_;
};

std::string LocalCommunicator::describe(const CallLabel &label) const {
  std::string text = label.name;
  if (label.direction)
    text += formatString(" %s rank %d", label.direction,
                         group_.globalRanks[label.peer]);
  text += formatString(" on rank %d", globalRank());
  return text + group_.label;
}

Status LocalCommunicator::invalid(const CallLabel &label,
                                  const std::string &problem) const {
  return Status(StatusCode::kInvalidArgument, describe(label) + ": " + problem);
}

Status LocalCommunicator::checkElements(const CallLabel &label,
                                        plan::DType dtype, uint64_t count,
                                        uint64_t multiple) const {
  size_t bytes = plan::dtypeBytes(dtype);
  if (bytes == 0)
    return invalid(label, formatString("unknown dtype %d", int(dtype)));
  if (count > std::numeric_limits<uint64_t>::max() / bytes / multiple)
    return invalid(label, formatString("%llu %s elements do not fit in memory",
                                       static_cast<unsigned long long>(count),
                                       plan::dtypeName(dtype)));
  return Status::ok();
}

Status LocalCommunicator::checkReduction(const CallLabel &label,
                                         plan::DType dtype, ReduceOp op) const {
  if (op != ReduceOp::kSum && op != ReduceOp::kAverage)
    return invalid(label, formatString("unknown reduce op %d", int(op)));
  if (!isReducibleDType(dtype))
    return invalid(label, formatString("cannot reduce %s elements (f32, f64, "
                                       "f16, bf16, i64 and i32 can be)",
                                       plan::dtypeName(dtype)));
  if (op == ReduceOp::kAverage && !isFloatDType(dtype))
    return invalid(label,
                   formatString("an average needs a float dtype (f32, f64, "
                                "f16 or bf16), not %s",
                                plan::dtypeName(dtype)));
  return Status::ok();
}

Status LocalCommunicator::checkBuffer(const CallLabel &label, const char *what,
                                      const void *buffer,
                                      uint64_t count) const {
  if (buffer || count == 0)
    return Status::ok();
  return invalid(label, formatString("%s is null but holds %llu elements", what,
                                     static_cast<unsigned long long>(count)));
}

Status LocalCommunicator::checkPeer(const CallLabel &label, const char *what,
                                    int peer) const {
  if (peer < 0 || peer >= size())
    return invalid(label, formatString("%s %d is not a rank of this "
                                       "communicator of %d ranks",
                                       what, peer, size()));
  return Status::ok();
}

bool LocalCommunicator::everyoneReached(uint64_t phase) const {
  for (uint64_t reached : group_.phases)
    if (reached < phase)
      return false;
  return true;
}

std::string LocalCommunicator::ranksBehind(uint64_t phase) const {
  std::string ranks;
  int behind = 0;
  for (size_t i = 0; i < group_.phases.size(); ++i) {
    if (group_.phases[i] >= phase)
      continue;
    ranks += (behind++ ? ", " : "") + std::to_string(group_.globalRanks[i]);
  }
  return (behind == 1 ? "rank " : "ranks ") + ranks;
}

void LocalCommunicator::abortLocked(const std::string &reason) {
  if (job_.aborted)
    return;
  job_.aborted = true;
  job_.abortingRank = globalRank();
  job_.abortReason = reason;
  job_.changed.notify_all();
}

Status LocalCommunicator::abortedStatus(const CallLabel &label) const {
  return Status(StatusCode::kUnavailable,
                describe(label) +
                    formatString(": aborted by rank %d: ", job_.abortingRank) +
                    job_.abortReason);
}

Status LocalCommunicator::timeoutStatus(const CallLabel &label,
                                        const std::string &waitingFor) {
  std::string message =
      describe(label) +
      formatString(" timed out after %g s waiting for ",
                   std::chrono::duration<double>(job_.timeout).count()) +
      waitingFor;
  abortLocked(message);
  return Status(StatusCode::kDeadlineExceeded, message);
}

void LocalCommunicator::abort(const std::string &reason) {
  std::lock_guard<std::mutex> lock(job_.mutex);
  abortLocked(reason);
}

Status LocalCommunicator::runCollective(const CallLabel &label,
                                        const PublishedCall &call) {
  Clock::time_point deadline = Clock::now() + job_.timeout;
  std::unique_lock<std::mutex> lock(job_.mutex);
  if (job_.aborted)
    return abortedStatus(label);
  group_.calls[rank_] = call;
  uint64_t phase = ++group_.phases[rank_];
  job_.changed.notify_all();
  // Completion is checked before the abort: once the last rank has arrived
  // some ranks may already be reading this rank's buffers, so every rank
  // must go on to phase 2. A rank that finds the job aborted before it
  // arrives never arrives, so then no rank goes on.
  while (!everyoneReached(phase)) {
    if (job_.aborted)
      return abortedStatus(label);
    if (Clock::now() >= deadline)
      return timeoutStatus(label, ranksBehind(phase));
    job_.changed.wait_until(lock, deadline);
  }
  lock.unlock();

  // Every rank sees the same published calls, so either all ranks find the
  // mismatch and none touches another's buffers, or none finds one.
  Status status = checkSameCall(label);
  if (!status.isOk()) {
    lock.lock();
    abortLocked(status.message());
    return status;
  }
  execute(call);

  // Only bounded local work stands between every rank and phase 2 now, so
  // this wait needs no deadline, and must not give up on an abort: another
  // rank may still be using this rank's buffers.
  lock.lock();
  phase = ++group_.phases[rank_];
  job_.changed.notify_all();
  job_.changed.wait(lock, [&] { return everyoneReached(phase); });
  return Status::ok();
}

namespace {

std::string describeCall(const PublishedCall &call) {
  std::string text = collectiveName(call.collective);
  if (call.collective == Collective::kBarrier)
    return text;
  if (call.collective == Collective::kAllReduce ||
      call.collective == Collective::kReduceScatter)
    text += formatString(" (%s)", reduceOpName(call.op));
  if (call.collective == Collective::kBroadcast)
    text += formatString(" from group rank %d", call.root);
  return text + formatString(" of %llu %s",
                             static_cast<unsigned long long>(call.count),
                             plan::dtypeName(call.dtype));
}

bool sameCall(const PublishedCall &a, const PublishedCall &b) {
  if (a.collective != b.collective)
    return false;
  if (a.collective == Collective::kBarrier)
    return true;
  if (a.count != b.count || a.dtype != b.dtype)
    return false;
  if ((a.collective == Collective::kAllReduce ||
       a.collective == Collective::kReduceScatter) &&
      a.op != b.op)
    return false;
  return a.collective != Collective::kBroadcast || a.root == b.root;
}

} // namespace

Status LocalCommunicator::checkSameCall(const CallLabel &label) const {
  const PublishedCall &first = group_.calls[0];
  for (size_t i = 1; i < group_.calls.size(); ++i) {
    if (sameCall(first, group_.calls[i]))
      continue;
    return invalid(
        label, formatString("the ranks made different calls: rank %d "
                            "called %s, rank %d called %s",
                            group_.globalRanks[0], describeCall(first).c_str(),
                            group_.globalRanks[i],
                            describeCall(group_.calls[i]).c_str()));
  }
  return Status::ok();
}

template <typename T>
void LocalCommunicator::executeReduction(const PublishedCall &call) {
  using Acc = typename Summation<T>::Acc;
  const int ranks = size();
  const PublishedCall *calls = group_.calls.data();

  // allReduce: this rank computes slice rank_ of the elements and stores it
  // into every rank's output. reduceScatter: this rank's own slice, into its
  // own output.
  uint64_t begin, end;
  if (call.collective == Collective::kAllReduce) {
    uint64_t share = call.count / ranks, extra = call.count % ranks;
    begin = share * rank_ + std::min<uint64_t>(rank_, extra);
    end = begin + share + (uint64_t(rank_) < extra ? 1 : 0);
  } else {
    uint64_t share = call.count / ranks;
    begin = share * rank_;
    end = begin + share;
  }

  Acc sums[kReduceBlock];
  T results[kReduceBlock];
  for (uint64_t first = begin; first < end; first += kReduceBlock) {
    uint64_t length = std::min(kReduceBlock, end - first);
    // Rank order, one rank at a time: sums[k] is ((x_0 + x_1) + x_2) + ...
    const T *x = static_cast<const T *>(calls[0].input) + first;
    for (uint64_t k = 0; k < length; ++k)
      sums[k] = Summation<T>::widen(x[k]);
    for (int j = 1; j < ranks; ++j) {
      x = static_cast<const T *>(calls[j].input) + first;
      for (uint64_t k = 0; k < length; ++k)
        sums[k] = sums[k] + Summation<T>::widen(x[k]);
    }
    if constexpr (std::is_floating_point_v<Acc>) {
      if (call.op == ReduceOp::kAverage)
        for (uint64_t k = 0; k < length; ++k)
          sums[k] = sums[k] / static_cast<Acc>(ranks);
    }
    for (uint64_t k = 0; k < length; ++k)
      results[k] = Summation<T>::narrow(sums[k]);

    // The whole block of every input has been read, so storing into an
    // output that is also its rank's input (in place) is safe.
    size_t bytes = static_cast<size_t>(length * sizeof(T));
    if (call.collective == Collective::kAllReduce) {
      for (int j = 0; j < ranks; ++j)
        std::memcpy(static_cast<T *>(calls[j].output) + first, results, bytes);
    } else {
      std::memcpy(static_cast<T *>(call.output) + (first - begin), results,
                  bytes);
    }
  }
}

void LocalCommunicator::execute(const PublishedCall &call) {
  const PublishedCall *calls = group_.calls.data();
  size_t bytes = static_cast<size_t>(call.count * plan::dtypeBytes(call.dtype));
  switch (call.collective) {
  case Collective::kAllReduce:
  case Collective::kReduceScatter:
    dispatchReducible(
        call.dtype, [&](auto zero) { executeReduction<decltype(zero)>(call); });
    return;
  case Collective::kAllGather:
    // Each rank fills its own output; a rank's in-place input is its own
    // slot of its output, which no other rank writes.
    for (int j = 0; j < size(); ++j) {
      char *slot = static_cast<char *>(call.output) + j * bytes;
      if (bytes && calls[j].input != slot)
        std::memcpy(slot, calls[j].input, bytes);
    }
    return;
  case Collective::kBroadcast:
    if (bytes && calls[call.root].input != call.output)
      std::memcpy(call.output, calls[call.root].input, bytes);
    return;
  case Collective::kBarrier:
    return;
  }
}

Status LocalCommunicator::allReduce(const void *input, void *output,
                                    uint64_t count, plan::DType dtype,
                                    ReduceOp op) {
  CallLabel label{"all_reduce"};
  RETURN_IF_INVALID(checkElements(label, dtype, count, 1));
  RETURN_IF_INVALID(checkReduction(label, dtype, op));
  RETURN_IF_INVALID(checkBuffer(label, "input", input, count));
  RETURN_IF_INVALID(checkBuffer(label, "output", output, count));
  PublishedCall call =
      dataCall(Collective::kAllReduce, input, output, count, dtype);
  call.op = op;
  return runCollective(label, call);
}

Status LocalCommunicator::reduceScatter(const void *input, void *output,
                                        uint64_t count, plan::DType dtype,
                                        ReduceOp op) {
  CallLabel label{"reduce_scatter"};
  RETURN_IF_INVALID(checkElements(label, dtype, count, 1));
  RETURN_IF_INVALID(checkReduction(label, dtype, op));
  if (count % size() != 0)
    return invalid(label, formatString("count %llu is not divisible by the "
                                       "number of ranks (%d)",
                                       static_cast<unsigned long long>(count),
                                       size()));
  RETURN_IF_INVALID(checkBuffer(label, "input", input, count));
  RETURN_IF_INVALID(checkBuffer(label, "output", output, count / size()));
  PublishedCall call =
      dataCall(Collective::kReduceScatter, input, output, count, dtype);
  call.op = op;
  return runCollective(label, call);
}

Status LocalCommunicator::allGather(const void *input, void *output,
                                    uint64_t count, plan::DType dtype) {
  CallLabel label{"all_gather"};
  RETURN_IF_INVALID(checkElements(label, dtype, count, size()));
  RETURN_IF_INVALID(checkBuffer(label, "input", input, count));
  RETURN_IF_INVALID(checkBuffer(label, "output", output, count));
  PublishedCall call =
      dataCall(Collective::kAllGather, input, output, count, dtype);
  return runCollective(label, call);
}

Status LocalCommunicator::broadcast(const void *input, void *output,
                                    uint64_t count, plan::DType dtype,
                                    int root) {
  CallLabel label{"broadcast"};
  RETURN_IF_INVALID(checkElements(label, dtype, count, 1));
  RETURN_IF_INVALID(checkPeer(label, "root", root));
  if (root == rank_)
    RETURN_IF_INVALID(checkBuffer(label, "input", input, count));
  RETURN_IF_INVALID(checkBuffer(label, "output", output, count));
  PublishedCall call =
      dataCall(Collective::kBroadcast, input, output, count, dtype);
  call.root = root;
  return runCollective(label, call);
}

Status LocalCommunicator::barrier() {
  return runCollective(CallLabel{"barrier"}, PublishedCall());
}

Status LocalCommunicator::send(const void *input, uint64_t count,
                               plan::DType dtype, int peer) {
  CallLabel label{"send"};
  RETURN_IF_INVALID(checkPeer(label, "peer", peer));
  if (peer == rank_)
    return invalid(label, "a rank cannot send to itself");
  label = CallLabel{"send", "to", peer};
  RETURN_IF_INVALID(checkElements(label, dtype, count, 1));
  RETURN_IF_INVALID(checkBuffer(label, "input", input, count));

  Clock::time_point deadline = Clock::now() + job_.timeout;
  std::unique_lock<std::mutex> lock(job_.mutex);
  if (job_.aborted)
    return abortedStatus(label);
  Mailbox &mailbox = group_.mailboxes[rank_ * size() + peer];
  mailbox.state = Mailbox::State::kPosted;
  mailbox.data = input;
  mailbox.count = count;
  mailbox.dtype = dtype;
  job_.changed.notify_all();
  while (mailbox.state != Mailbox::State::kDone) {
    if (mailbox.state == Mailbox::State::kClaimed) {
      // The receiver is copying from `input`: wait for it (bounded work),
      // whatever happens to the job meanwhile.
      job_.changed.wait(lock);
      continue;
    }
    if (job_.aborted) {
      mailbox.state = Mailbox::State::kEmpty;
      return abortedStatus(label);
    }
    if (Clock::now() >= deadline) {
      mailbox.state = Mailbox::State::kEmpty;
      return timeoutStatus(label,
                           formatString("rank %d", group_.globalRanks[peer]));
    }
    job_.changed.wait_until(lock, deadline);
  }
  mailbox.state = Mailbox::State::kEmpty;
  return Status::ok();
}

Status LocalCommunicator::recv(void *output, uint64_t count, plan::DType dtype,
                               int peer) {
  CallLabel label{"recv"};
  RETURN_IF_INVALID(checkPeer(label, "peer", peer));
  if (peer == rank_)
    return invalid(label, "a rank cannot receive from itself");
  label = CallLabel{"recv", "from", peer};
  RETURN_IF_INVALID(checkElements(label, dtype, count, 1));
  RETURN_IF_INVALID(checkBuffer(label, "output", output, count));

  Clock::time_point deadline = Clock::now() + job_.timeout;
  std::unique_lock<std::mutex> lock(job_.mutex);
  Mailbox &mailbox = group_.mailboxes[peer * size() + rank_];
  while (true) {
    if (job_.aborted)
      return abortedStatus(label);
    if (mailbox.state == Mailbox::State::kPosted)
      break;
    if (Clock::now() >= deadline)
      return timeoutStatus(label,
                           formatString("rank %d", group_.globalRanks[peer]));
    job_.changed.wait_until(lock, deadline);
  }
  if (mailbox.count != count || mailbox.dtype != dtype) {
    Status status = invalid(
        label, formatString("expects %llu %s elements but rank %d sends %llu "
                            "%s elements",
                            static_cast<unsigned long long>(count),
                            plan::dtypeName(dtype), group_.globalRanks[peer],
                            static_cast<unsigned long long>(mailbox.count),
                            plan::dtypeName(mailbox.dtype)));
    abortLocked(status.message());
    return status;
  }
  mailbox.state = Mailbox::State::kClaimed;
  const void *data = mailbox.data;
  lock.unlock();
  if (count)
    std::memcpy(output, data,
                static_cast<size_t>(count * plan::dtypeBytes(dtype)));
  lock.lock();
  mailbox.state = Mailbox::State::kDone;
  job_.changed.notify_all();
  return Status::ok();
}

} // namespace detail

LocalCommunicatorGroup::LocalCommunicatorGroup(
    std::shared_ptr<detail::LocalJob> job, std::vector<int> globalRanks)
    : job_(std::move(job)),
      state_(std::make_unique<detail::LocalGroupState>()) {
  detail::LocalGroupState &state = *state_;
  size_t size = globalRanks.size();
  state.job = job_.get();
  // The job's first group is made before job->world is set; it needs no
  // name in messages.
  if (job_->world) {
    state.label = " in group [";
    for (size_t i = 0; i < size; ++i)
      state.label += (i ? ", " : "") + std::to_string(globalRanks[i]);
    state.label += "]";
  }
  state.globalRanks = std::move(globalRanks);
  state.phases.assign(size, 0);
  state.calls.resize(size);
  state.mailboxes.resize(size * size);
  for (size_t rank = 0; rank < size; ++rank)
    state.communicators.push_back(std::make_unique<detail::LocalCommunicator>(
        state, static_cast<int>(rank)));
}

LocalCommunicatorGroup::~LocalCommunicatorGroup() = default;

StatusOr<std::unique_ptr<LocalCommunicatorGroup>>
LocalCommunicatorGroup::create(int size, LocalCommunicatorOptions options) {
  if (size < 1)
    return makeStatus(StatusCode::kInvalidArgument,
                      "a communicator group needs at least one rank, not %d",
                      size);
  if (options.timeout.count() <= 0)
    return makeStatus(StatusCode::kInvalidArgument,
                      "the communicator timeout must be positive, not %lld ms",
                      static_cast<long long>(options.timeout.count()));
  auto job = std::make_shared<detail::LocalJob>();
  job->size = size;
  job->timeout = options.timeout;
  std::vector<int> ranks(static_cast<size_t>(size));
  for (int rank = 0; rank < size; ++rank)
    ranks[rank] = rank;
  std::unique_ptr<LocalCommunicatorGroup> group(
      new LocalCommunicatorGroup(job, std::move(ranks)));
  job->world = group.get();
  return group;
}

int LocalCommunicatorGroup::size() const {
  return static_cast<int>(state_->globalRanks.size());
}

Communicator *LocalCommunicatorGroup::communicator(int rank) {
  if (rank < 0 || rank >= size())
    return nullptr;
  return state_->communicators[rank].get();
}

int LocalCommunicatorGroup::globalRank(int rank) const {
  if (rank < 0 || rank >= size())
    return -1;
  return state_->globalRanks[rank];
}

StatusOr<LocalCommunicatorGroup *>
LocalCommunicatorGroup::createSubgroup(const std::vector<int> &globalRanks) {
  if (globalRanks.empty())
    return Status(StatusCode::kInvalidArgument,
                  "a communicator sub-group needs at least one rank");
  std::vector<bool> seen(static_cast<size_t>(job_->size), false);
  for (int rank : globalRanks) {
    if (rank < 0 || rank >= job_->size)
      return makeStatus(StatusCode::kInvalidArgument,
                        "rank %d of a sub-group is not a rank of the job of "
                        "%d ranks",
                        rank, job_->size);
    if (seen[rank])
      return makeStatus(StatusCode::kInvalidArgument,
                        "rank %d appears twice in a sub-group", rank);
    seen[rank] = true;
  }
  std::unique_ptr<LocalCommunicatorGroup> subgroup(
      new LocalCommunicatorGroup(job_, globalRanks));
  LocalCommunicatorGroup *result = subgroup.get();
  std::lock_guard<std::mutex> lock(job_->mutex);
  job_->world->subgroups_.push_back(std::move(subgroup));
  return result;
}

bool LocalCommunicatorGroup::isAborted() const {
  std::lock_guard<std::mutex> lock(job_->mutex);
  return job_->aborted;
}

} // namespace zcc
