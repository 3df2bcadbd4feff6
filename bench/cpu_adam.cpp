//===- cpu_adam.cpp - The host optimizer's speed --------------------------===//
//
//   zcc-bench-cpu-adam ELEMENTS THREADS STEPS
//
// Times the AdamW step a plan with CPU offload runs on the host (the cpu
// kernel, vectorised, split over a pool of THREADS threads) on ELEMENTS fp32
// parameters, and prints one JSON line: seconds per step and elements per
// second. bench/cpu_adam.py runs it beside torch.optim.AdamW.
//
//===----------------------------------------------------------------------===//

#include "runtime/HostKernels.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: zcc-bench-cpu-adam ELEMENTS THREADS STEPS\n");
    return 2;
  }
  int64_t elements = std::atoll(argv[1]);
  int threads = std::atoi(argv[2]);
  int steps = std::atoi(argv[3]);
  if (elements <= 0 || threads <= 0 || steps <= 0) {
    std::fprintf(stderr, "zcc-bench-cpu-adam: ELEMENTS, THREADS and STEPS must be positive\n");
    return 2;
  }
  std::vector<float> param(elements, 0.5f), grad(elements), m(elements), v(elements);
  for (int64_t i = 0; i < elements; ++i)
    grad[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
  std::vector<double> scalars = {1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1, 0};
  auto view = [&](std::vector<float> &data) {
    zcc::cpu::TensorView t;
    t.data = data.data();
    t.dtype = zcc::plan::F32;
    t.shape = {elements};
    return t;
  };
  zcc::cpu::TensorView scalarView;
  scalarView.data = scalars.data();
  scalarView.dtype = zcc::plan::F64;
  scalarView.shape = {8};
  zcc::cpu::KernelArgs args;
  args.inputs = {view(param), view(grad), view(m), view(v), scalarView};
  args.outputs = {view(param), view(m), view(v)};
  zcc::cpu::KernelFn adamw = zcc::cpu::findKernel("adamw");
  zcc::HostKernelPool pool(threads);
  std::vector<zcc::cpu::KernelArgs> chunks = zcc::splitElementwise("adamw", args, threads);
  auto step = [&] {
    zcc::Status status = chunks.empty() ? adamw(args) : pool.run(adamw, chunks);
    if (!status.isOk()) {
      std::fprintf(stderr, "zcc-bench-cpu-adam: %s\n", status.message().c_str());
      std::exit(1);
    }
  };
  step(); // warm: pages touched, threads started
  auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    scalars[5] = s + 2;
    step();
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
  std::printf("{\"elements\": %lld, \"threads\": %d, \"seconds_per_step\": %.6f, "
              "\"elements_per_second\": %.4g}\n",
              static_cast<long long>(elements), threads, seconds, elements / seconds);
  return 0;
}
