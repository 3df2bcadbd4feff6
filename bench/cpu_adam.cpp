//===- cpu_adam.cpp - The host optimizer's speed --------------------------===//
//
//   zcc-bench-cpu-adam ELEMENTS THREADS STEPS [f16|bf16]
//
// Times the AdamW step a plan with CPU offload runs on the host (the cpu
// kernel, vectorised, split over a pool of THREADS threads) on ELEMENTS fp32
// parameters, and prints one JSON line: seconds per step and elements per
// second. bench/cpu_adam.py runs it beside torch.optim.AdamW. With a 16-bit
// type, the step also refreshes the parameters' 16-bit copy (offload_param),
// timed both ways: adamw then a cast pass, and adamw writing the copy
// itself (its fourth result, as zcc's plans run it).
//
//===----------------------------------------------------------------------===//

#include "runtime/HostKernels.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: zcc-bench-cpu-adam ELEMENTS THREADS STEPS [f16|bf16]\n");
    return 2;
  }
  std::string copyType = argc == 5 ? argv[4] : "";
  if (!copyType.empty() && copyType != "f16" && copyType != "bf16") {
    std::fprintf(stderr, "zcc-bench-cpu-adam: the copy type is f16 or bf16, not %s\n",
                 copyType.c_str());
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
  zcc::StatusOr<std::unique_ptr<zcc::HostKernelPool>> created =
      zcc::HostKernelPool::create(threads);
  if (!created.isOk()) {
    std::fprintf(stderr, "zcc-bench-cpu-adam: %s\n", created.status().message().c_str());
    return 1;
  }
  zcc::HostKernelPool &pool = **created;
  auto runner = [&](const char *kernel, const zcc::cpu::KernelArgs &whole) {
    zcc::cpu::KernelFn fn = zcc::cpu::findKernel(kernel);
    std::vector<zcc::cpu::KernelArgs> chunks = zcc::splitElementwise(kernel, whole, threads);
    return [fn, chunks, whole, &pool] {
      zcc::Status status = chunks.empty() ? fn(whole) : pool.run(fn, chunks);
      if (!status.isOk()) {
        std::fprintf(stderr, "zcc-bench-cpu-adam: %s\n", status.message().c_str());
        std::exit(1);
      }
    };
  };
  auto secondsPerStep = [&](const std::vector<std::function<void()>> &kernels) {
    for (const auto &kernel : kernels) // warm: pages touched, threads started
      kernel();
    auto start = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) {
      scalars[5] = s + 2;
      for (const auto &kernel : kernels)
        kernel();
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
           steps;
  };
  double seconds = secondsPerStep({runner("adamw", args)});
  std::printf("{\"elements\": %lld, \"threads\": %d, \"seconds_per_step\": %.6f, "
              "\"elements_per_second\": %.4g",
              static_cast<long long>(elements), threads, seconds, elements / seconds);
  if (!copyType.empty()) {
    std::vector<uint16_t> copy(elements);
    zcc::cpu::TensorView copyView;
    copyView.data = copy.data();
    copyView.dtype = copyType == "f16" ? zcc::plan::F16 : zcc::plan::BF16;
    copyView.shape = {elements};
    zcc::cpu::KernelArgs cast;
    cast.inputs = {view(param)};
    cast.outputs = {copyView};
    zcc::cpu::KernelArgs fused = args;
    fused.outputs.push_back(copyView);
    double separate = secondsPerStep({runner("adamw", args), runner("cast", cast)});
    double together = secondsPerStep({runner("adamw", fused)});
    std::printf(", \"copy\": \"%s\", \"adamw_then_cast_seconds\": %.6f, "
                "\"adamw_with_copy_seconds\": %.6f",
                copyType.c_str(), separate, together);
  }
  std::printf("}\n");
  return 0;
}
