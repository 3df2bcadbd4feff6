//===- matmul.cpp - Times the cuda matmul kernel on one shape -------------===//
//
//   zcc-bench-matmul M N K DTYPE(bf16|f16) EPILOGUE CANDIDATES REPEATS [transpose_rhs]
//
// Runs zrun's `matmul` kernel (cuBLASLt, kernels/cuda/Linalg.cpp) on
// lhs[M, K] x rhs[K, N] (rhs stored [N, K] with transpose_rhs, as a tied
// output layer reads the embedding) with EPILOGUE none, bias, bias_gelu (the tanh
// GELU fused after the bias) or bias_residual (plus an addend of the
// result's shape), as a GPT-2 block's products run, choosing the algorithm
// as the backend does with LaunchContext::matmulCandidates = CANDIDATES
// (1: the heuristic's first; more: that many timed on the first run).
// Then REPEATS runs between cuda events, rotating over three sets of
// operands so that the L2 cache does not hold them, and prints one JSON
// object with the median milliseconds and TFLOP/s (2 M N K). The heuristic
// choice is process-wide, so each candidate count is its own process;
// bench/matmul.py runs it beside torch's products of the same shapes.
//
//===----------------------------------------------------------------------===//

#include "bench/Upload16.h"
#include "kernels/cuda/CudaKernels.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

bool check(cudaError_t error, const char *what) {
  if (error == cudaSuccess)
    return true;
  std::fprintf(stderr, "zcc-bench-matmul: %s: %s\n", what, cudaGetErrorString(error));
  return false;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 8 && !(argc == 9 && std::strcmp(argv[8], "transpose_rhs") == 0)) {
    std::fprintf(stderr, "usage: zcc-bench-matmul M N K DTYPE(bf16|f16) "
                         "EPILOGUE(none|bias|bias_gelu|bias_residual) CANDIDATES REPEATS "
                         "[transpose_rhs]\n");
    return 2;
  }
  bool transposeRhs = argc == 9;
  int64_t m = std::atoll(argv[1]), n = std::atoll(argv[2]), k = std::atoll(argv[3]);
  std::string dtype = argv[4], epilogue = argv[5];
  int candidates = std::atoi(argv[6]);
  int repeats = std::max(1, std::atoi(argv[7]));
  bool bf16 = dtype == "bf16";
  if ((!bf16 && dtype != "f16") || m <= 0 || n <= 0 || k <= 0 || candidates < 1 ||
      candidates > zcc::cuda::kMaxMatmulCandidates) {
    std::fprintf(stderr, "zcc-bench-matmul: bad arguments (dtype bf16 or f16, positive "
                         "sizes, 1 to %d candidates)\n",
                 zcc::cuda::kMaxMatmulCandidates);
    return 2;
  }
  bool bias = epilogue != "none", gelu = epilogue == "bias_gelu",
       residual = epilogue == "bias_residual";
  if (bias && !gelu && !residual && epilogue != "bias") {
    std::fprintf(stderr, "zcc-bench-matmul: epilogue '%s' is not none, bias, bias_gelu "
                         "or bias_residual\n",
                 epilogue.c_str());
    return 2;
  }

  // Seeded uniform values in [-0.05, 0.05) (a 64-bit LCG: the operands
  // are hundreds of millions of values, which a normal distribution would
  // take seconds to draw).
  uint64_t state = 42;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (static_cast<float>(state >> 40) / 16777216.0f - 0.5f) * 0.1f;
  };
  auto upload = [&](size_t count, void **device) {
    return check(zcc::bench::upload16(count, bf16, next, device), "upload");
  };
  constexpr int kSets = 3;
  void *lhs[kSets], *rhs[kSets], *biasData[kSets], *addend[kSets], *out[kSets];
  for (int set = 0; set < kSets; ++set)
    if (!upload(m * k, &lhs[set]) || !upload(k * n, &rhs[set]) || !upload(n, &biasData[set]) ||
        !upload(m * n, &addend[set]) || !check(cudaMalloc(&out[set], m * n * 2), "cudaMalloc"))
      return 1;

  zcc::cuda::LaunchContext context;
  if (!check(cudaStreamCreateWithFlags(&context.stream, cudaStreamNonBlocking),
             "cudaStreamCreate"))
    return 1;
  if (cublasLtCreate(&context.blasLt) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "zcc-bench-matmul: cublasLtCreate failed\n");
    return 1;
  }
  if (!check(cudaMalloc(&context.workspace, zcc::cuda::kWorkspaceBytes), "cudaMalloc"))
    return 1;
  context.workspaceBytes = zcc::cuda::kWorkspaceBytes;
  context.matmulCandidates = candidates;

  zcc::cpu::AttributeMap attributes;
  if (gelu)
    attributes["activation"].set_s("gelu_tanh");
  if (residual)
    attributes["residual"].set_b(true);
  if (transposeRhs)
    attributes["transpose_rhs"].set_b(true);
  zcc::cuda::KernelFn matmul = zcc::cuda::findKernel("matmul");
  auto plan = bf16 ? zcc::plan::BF16 : zcc::plan::F16;
  auto run = [&](int set) {
    zcc::cuda::KernelArgs args;
    args.attributes = &attributes;
    args.inputs.push_back({lhs[set], plan, {m, k}});
    args.inputs.push_back({rhs[set], plan, transposeRhs ? std::vector<int64_t>{n, k}
                                                         : std::vector<int64_t>{k, n}});
    if (bias)
      args.inputs.push_back({biasData[set], plan, {n}});
    if (residual)
      args.inputs.push_back({addend[set], plan, {m, n}});
    args.outputs.push_back({out[set], plan, {m, n}});
    zcc::Status status = matmul(args, context);
    if (!status.isOk())
      std::fprintf(stderr, "zcc-bench-matmul: %s\n", status.message().c_str());
    return status.isOk();
  };

  // The first run chooses the algorithm (timing the candidates).
  if (!run(0) || !check(cudaStreamSynchronize(context.stream), "first run"))
    return 1;
  for (int set = 0; set < kSets; ++set)
    if (!run(set))
      return 1;
  cudaEvent_t start, stop;
  if (!check(cudaEventCreate(&start), "cudaEventCreate") ||
      !check(cudaEventCreate(&stop), "cudaEventCreate"))
    return 1;
  std::vector<float> times;
  for (int r = 0; r < repeats; ++r) {
    cudaEventRecord(start, context.stream);
    if (!run(r % kSets))
      return 1;
    cudaEventRecord(stop, context.stream);
    if (!check(cudaEventSynchronize(stop), "run"))
      return 1;
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  float ms = times[times.size() / 2];
  std::printf("{\"m\": %lld, \"n\": %lld, \"k\": %lld, \"dtype\": \"%s\", \"epilogue\": "
              "\"%s\", \"transpose_rhs\": %s, \"candidates\": %d, \"ms\": %.4f, \"tflops\": %.1f}\n",
              static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
              dtype.c_str(), epilogue.c_str(), transposeRhs ? "true" : "false", candidates, ms,
              2.0 * m * n * k / (ms * 1e-3) / 1e12);
  return 0;
}
