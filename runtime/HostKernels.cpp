//===- HostKernels.cpp - Host kernels on a pool of threads ----------------===//

#include "runtime/HostKernels.h"

#include "kernels/cpu/Kernels.h"

#include <algorithm>

namespace zcc {

std::vector<cpu::KernelArgs> splitElementwise(const std::string &kernel,
                                              const cpu::KernelArgs &args, int parts,
                                              int64_t minChunk) {
  static const char *const kElementwise[] = {"adamw", "adagrad",    "lion", "sgd",
                                             "cast",  "accumulate", "fill", "copy"};
  if (parts < 2 || args.outputs.empty() ||
      std::none_of(std::begin(kElementwise), std::end(kElementwise),
                   [&](const char *name) { return kernel == name; }))
    return {};
  // A multi-tensor adamw or fill (several tensors' operands) runs whole.
  if ((kernel == "adamw" && args.inputs.size() != 5) ||
      (kernel == "fill" && args.outputs.size() != 1))
    return {};
  int64_t elements = args.outputs[0].numElements();
  // Chunks of whole cache lines (16 f32 elements), at least minChunk each.
  int64_t chunk = std::max<int64_t>(minChunk, (elements + parts - 1) / parts);
  chunk = (chunk + 15) / 16 * 16;
  if (chunk >= elements)
    return {};
  std::vector<cpu::KernelArgs> chunks;
  auto cut = [&](const cpu::TensorView &view, int64_t begin, int64_t count) {
    if (view.numElements() != elements)
      return view;
    cpu::TensorView piece;
    piece.data = static_cast<uint8_t *>(view.data) +
                 static_cast<size_t>(begin) * cpu::dtypeBytes(view.dtype);
    piece.dtype = view.dtype;
    piece.shape = {count};
    return piece;
  };
  for (int64_t begin = 0; begin < elements; begin += chunk) {
    int64_t count = std::min(chunk, elements - begin);
    cpu::KernelArgs piece;
    piece.attributes = args.attributes;
    for (const cpu::TensorView &view : args.inputs)
      piece.inputs.push_back(cut(view, begin, count));
    for (const cpu::TensorView &view : args.outputs)
      piece.outputs.push_back(cut(view, begin, count));
    chunks.push_back(std::move(piece));
  }
  return chunks;
}

std::vector<cpu::KernelArgs> splitSumSquares(const cpu::KernelArgs &args, int parts,
                                             double *partials) {
  namespace kernels = cpu::kernels;
  // Every block as a view, in order.
  std::vector<cpu::TensorView> blocks;
  for (const cpu::TensorView &input : args.inputs) {
    int64_t elements = input.numElements();
    for (int64_t begin = 0; begin < elements; begin += kernels::kSumSquaresBlock) {
      cpu::TensorView block;
      block.data = static_cast<uint8_t *>(input.data) +
                   static_cast<size_t>(begin) * cpu::dtypeBytes(input.dtype);
      block.dtype = input.dtype;
      block.shape.push_back(std::min(kernels::kSumSquaresBlock, elements - begin));
      blocks.push_back(block);
    }
  }
  int64_t count = static_cast<int64_t>(blocks.size());
  if (parts < 2 || count < 2)
    return {};
  int64_t perChunk = (count + parts - 1) / parts;
  std::vector<cpu::KernelArgs> chunks;
  for (int64_t first = 0; first < count; first += perChunk) {
    int64_t last = std::min(count, first + perChunk);
    cpu::KernelArgs chunk;
    chunk.attributes = args.attributes;
    chunk.inputs.assign(blocks.begin() + first, blocks.begin() + last);
    cpu::TensorView out;
    out.data = partials + first;
    out.dtype = plan::F64;
    out.shape.push_back(last - first);
    chunk.outputs.push_back(out);
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

StatusOr<std::unique_ptr<HostKernelPool>> HostKernelPool::create(int threads) {
  return create(threads, Thread::Options());
}

StatusOr<std::unique_ptr<HostKernelPool>> HostKernelPool::create(int threads,
                                                                 const Thread::Options &options) {
  std::unique_ptr<HostKernelPool> pool(new HostKernelPool());
  pool->results_.resize(static_cast<size_t>(std::max(threads, 1)));
  pool->workers_.reserve(static_cast<size_t>(std::max(threads - 1, 0)));
  for (int i = 1; i < threads; ++i) {
    StatusOr<Thread> worker = Thread::start(
        [raw = pool.get(), i] { raw->work(static_cast<size_t>(i - 1)); },
        formatString("host kernel thread %d of %d", i, threads),
        "lower --host-threads or raise the process's limits (ulimit -u / -v)", options);
    // The destructor stops and joins the workers started so far.
    if (!worker.isOk())
      return worker.takeStatus();
    pool->workers_.push_back(std::move(*worker));
  }
  return StatusOr<std::unique_ptr<HostKernelPool>>(std::move(pool));
}

HostKernelPool::~HostKernelPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (Thread &worker : workers_)
    worker.join();
}

void HostKernelPool::work(size_t index) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_)
      return;
    seen = generation_;
    size_t chunk = index + 1;
    if (chunk >= chunks_->size())
      continue;
    cpu::KernelFn kernel = kernel_;
    const cpu::KernelArgs &args = (*chunks_)[chunk];
    lock.unlock();
    Status status = kernel(args);
    lock.lock();
    results_[chunk] = std::move(status);
    if (--pending_ == 0)
      done_.notify_one();
  }
}

Status HostKernelPool::run(cpu::KernelFn kernel, const std::vector<cpu::KernelArgs> &chunks) {
  if (chunks.empty())
    return Status::ok();
  if (chunks.size() > results_.size())
    return makeStatus(StatusCode::kInternal, "%zu chunks for a pool of %d threads",
                      chunks.size(), threads());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kernel_ = kernel;
    chunks_ = &chunks;
    pending_ = chunks.size() - 1;
    ++generation_;
  }
  if (chunks.size() > 1)
    wake_.notify_all();
  results_[0] = kernel(chunks[0]);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  for (size_t i = 0; i < chunks.size(); ++i)
    if (!results_[i].isOk())
      return results_[i];
  return Status::ok();
}

} // namespace zcc
