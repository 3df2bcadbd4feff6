//===- HostKernels.h - Host kernels on a pool of threads --------*- C++ -*-===//
//
// The instructions of a plan that run on the host (CPU offload: the
// optimizer over state in the host arena) use the cpu kernels. The
// element-wise ones, the optimizer steps above all, are split into
// contiguous chunks that a pool of threads runs at once; each element is
// computed by the same code whatever the split, so the result does not
// depend on the number of threads.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_HOSTKERNELS_H
#define ZCC_RUNTIME_HOSTKERNELS_H

#include "kernels/cpu/CpuKernels.h"
#include "runtime/Support/Status.h"
#include "runtime/Support/Thread.h"

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zcc {

/// Splits `args` of the element-wise kernel `kernel` ("adamw", "adagrad", "lion", "sgd",
/// "cast", "accumulate", "fill", "copy") into at most `parts` chunks of
/// contiguous elements (at least `minChunk` each): every view with as many
/// elements as the first output is cut, the others (the optimizer's
/// scalars) are passed whole. Returns no chunks for another kernel, for a
/// multi-tensor adamw or fill, or when one chunk would do.
std::vector<cpu::KernelArgs> splitElementwise(const std::string &kernel,
                                              const cpu::KernelArgs &args, int parts,
                                              int64_t minChunk = 1 << 15);

/// sum_squares cut for a pool of `parts` threads: each chunk runs
/// cpu::kernels::sumSquaresBlocks over a run of the inputs' blocks (views of
/// whole blocks, in order) into its range of `partials`, which has room for
/// every block (cpu::kernels::sumSquaresBlocks of each input's size, added
/// up); adding `partials` in order then gives sum_squares bit for bit.
/// Returns no chunks when one would do.
std::vector<cpu::KernelArgs> splitSumSquares(const cpu::KernelArgs &args, int parts,
                                             double *partials);

/// Worker threads that run the chunks of one kernel together with the
/// calling thread. run() neither allocates nor returns before every chunk
/// has finished.
class HostKernelPool {
public:
  /// `threads` in all, the caller included; fewer than 2 runs everything on
  /// the caller. Fails (kResourceExhausted, "could not start host kernel
  /// thread 37 of 300: ...") when a worker cannot be started; the workers
  /// started before it are stopped and joined.
  static StatusOr<std::unique_ptr<HostKernelPool>> create(int threads);
  static StatusOr<std::unique_ptr<HostKernelPool>> create(int threads,
                                                         const Thread::Options &options);
  ~HostKernelPool();
  HostKernelPool(const HostKernelPool &) = delete;
  HostKernelPool &operator=(const HostKernelPool &) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  /// Runs `kernel` on each of `chunks` (at most threads() of them); the
  /// first failure, in chunk order, is the result.
  Status run(cpu::KernelFn kernel, const std::vector<cpu::KernelArgs> &chunks);

private:
  HostKernelPool() = default;
  void work(size_t index);

  std::vector<Thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  /// The job: a generation number the workers wait for, the kernel and its
  /// chunks (chunk i + 1 goes to worker i), one status per chunk.
  uint64_t generation_ = 0;
  cpu::KernelFn kernel_ = nullptr;
  const std::vector<cpu::KernelArgs> *chunks_ = nullptr;
  std::vector<Status> results_;
  size_t pending_ = 0;
  bool stopping_ = false;
};

} // namespace zcc

#endif // ZCC_RUNTIME_HOSTKERNELS_H
