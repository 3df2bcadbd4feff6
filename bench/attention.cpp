//===- attention.cpp - Times the cuda attention kernels on one shape ------===//
//
//   zcc-bench-attention HEADS QUERIES KEYS HEAD_SIZE CAUSAL(0|1) DTYPE(bf16|f16) REPEATS
//
// Fills query, key, value and the result's gradient with seeded normal
// values, runs the forward (attention, also saving each row's log-sum-exp)
// and the backward (attention_grad) once each to warm up, then REPEATS
// times each between cuda events, rotating over three sets of operands so
// that the L2 cache does not hold them, and prints one JSON object: the
// median milliseconds of the forward, of the backward reading the
// forward's saved result and log-sum-exp (what a training plan runs), and
// of the backward that recomputes the softmax statistics itself; then the
// forward and the saved-statistics backward through cuDNN's fused graphs
// (CudnnAttention.h, what zrun's cuda backend runs where cuDNN takes the
// shape), or why cuDNN declined them. bench/attention.py runs it beside
// torch's scaled_dot_product_attention on the same shapes.
//
//===----------------------------------------------------------------------===//

#include "bench/Upload16.h"
#include "kernels/cuda/AttentionLaunch.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/CudnnAttention.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

bool check(cudaError_t error, const char *what) {
  if (error == cudaSuccess)
    return true;
  std::fprintf(stderr, "zcc-bench-attention: %s: %s\n", what,
               cudaGetErrorString(error));
  return false;
}

float median(std::vector<float> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: zcc-bench-attention HEADS QUERIES KEYS "
                         "HEAD_SIZE CAUSAL(0|1) DTYPE(bf16|f16) REPEATS\n");
    return 2;
  }
  zcc::cuda::AttentionShape shape;
  shape.heads = std::atoll(argv[1]);
  shape.queries = std::atoll(argv[2]);
  shape.keys = std::atoll(argv[3]);
  shape.headSize = shape.valueSize = std::atoll(argv[4]);
  shape.causal = std::atoi(argv[5]) != 0;
  shape.scale = 1.0 / std::sqrt(static_cast<double>(shape.headSize));
  shape.setContiguous();
  std::string dtype = argv[6];
  int repeats = std::max(1, std::atoi(argv[7]));
  bool bf16 = dtype == "bf16";
  if (!bf16 && dtype != "f16") {
    std::fprintf(stderr, "zcc-bench-attention: dtype '%s' is not bf16 or f16\n",
                 dtype.c_str());
    return 2;
  }
  if (shape.heads <= 0 || shape.queries <= 0 || shape.keys <= 0 ||
      shape.headSize <= 0 || (shape.causal && shape.queries > shape.keys)) {
    std::fprintf(stderr, "zcc-bench-attention: bad shape\n");
    return 2;
  }
  auto type = bf16 ? zcc::cuda::ElementType::kBF16 : zcc::cuda::ElementType::kF16;

  size_t qElements = shape.heads * shape.queries * shape.headSize;
  size_t kElements = shape.heads * shape.keys * shape.headSize;
  std::mt19937 random(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto upload = [&](size_t count, void **device) {
    return check(zcc::bench::upload16(count, bf16, [&] { return normal(random); }, device),
                 "upload");
  };
  constexpr int kSets = 3;
  void *q[kSets], *k[kSets], *v[kSets], *grad[kSets], *out[kSets], *dq[kSets],
      *dk[kSets], *dv[kSets], *lse[kSets];
  for (int set = 0; set < kSets; ++set)
    if (!upload(qElements, &q[set]) || !upload(kElements, &k[set]) ||
        !upload(kElements, &v[set]) || !upload(qElements, &grad[set]) ||
        !check(cudaMalloc(&out[set], qElements * 2), "cudaMalloc") ||
        !check(cudaMalloc(&dq[set], qElements * 2), "cudaMalloc") ||
        !check(cudaMalloc(&dk[set], kElements * 2), "cudaMalloc") ||
        !check(cudaMalloc(&dv[set], kElements * 2), "cudaMalloc") ||
        !check(cudaMalloc(&lse[set], shape.heads * shape.queries * 4),
               "cudaMalloc"))
      return 1;
  void *workspace = nullptr;
  size_t workspaceBytes =
      std::max(zcc::cuda::attentionGradWorkspaceBytes(type, shape),
               zcc::cuda::kWorkspaceBytes);
  if (!check(cudaMalloc(&workspace, workspaceBytes), "cudaMalloc"))
    return 1;

  auto forwardParams = [&](int set) {
    zcc::cuda::AttentionParams p;
    p.type = type;
    p.shape = shape;
    p.query = q[set];
    p.key = k[set];
    p.value = v[set];
    p.result = out[set];
    p.lse = lse[set];
    return p;
  };
  auto backwardParams = [&](int set, bool saved) {
    zcc::cuda::AttentionGradParams p;
    p.type = type;
    p.shape = shape;
    p.query = q[set];
    p.key = k[set];
    p.value = v[set];
    p.grad = grad[set];
    if (saved) {
      p.output = out[set];
      p.lse = lse[set];
    }
    p.queryGrad = dq[set];
    p.keyGrad = dk[set];
    p.valueGrad = dv[set];
    p.workspace = workspace;
    return p;
  };
  auto forward = [&](int set) {
    return zcc::cuda::launchAttention(forwardParams(set), nullptr);
  };
  auto backward = [&](int set, bool saved) {
    return zcc::cuda::launchAttentionGrad(backwardParams(set, saved), nullptr);
  };
  cudaEvent_t start, stop;
  if (!check(cudaEventCreate(&start), "cudaEventCreate") ||
      !check(cudaEventCreate(&stop), "cudaEventCreate"))
    return 1;
  auto time = [&](auto &&run, std::vector<float> &times) {
    if (!check(run(0), "warm-up launch") ||
        !check(cudaDeviceSynchronize(), "warm-up"))
      return false;
    for (int r = 0; r < repeats; ++r) {
      cudaEventRecord(start);
      if (!check(run(r % kSets), "launch"))
        return false;
      cudaEventRecord(stop);
      if (!check(cudaEventSynchronize(stop), "run"))
        return false;
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      times.push_back(ms);
    }
    return true;
  };
  // Every set's saved result and log-sum-exp, for the backward.
  for (int set = 0; set < kSets; ++set)
    if (!check(forward(set), "forward"))
      return 1;
  std::vector<float> forwardMs, backwardMs, recomputeMs;
  if (!time(forward, forwardMs) ||
      !time([&](int set) { return backward(set, true); }, backwardMs) ||
      !time([&](int set) { return backward(set, false); }, recomputeMs))
    return 1;
  std::printf("{\"heads\": %lld, \"queries\": %lld, \"keys\": %lld, "
              "\"head_size\": %lld, \"causal\": %s, \"dtype\": \"%s\", "
              "\"forward_ms\": %.4f, \"backward_ms\": %.4f, "
              "\"backward_recompute_ms\": %.4f",
              static_cast<long long>(shape.heads),
              static_cast<long long>(shape.queries),
              static_cast<long long>(shape.keys),
              static_cast<long long>(shape.headSize),
              shape.causal ? "true" : "false", dtype.c_str(),
              median(forwardMs), median(backwardMs), median(recomputeMs));

  // The same through cuDNN; a run it declines ends the timing with why.
  std::unique_ptr<zcc::cuda::CudnnAttention> cudnn;
  zcc::Status created = zcc::cuda::CudnnAttention::create(cudnn);
  std::string declined = created.isOk() ? "" : created.message();
  auto onCudnn = [&](zcc::Status status, bool ran) {
    if (!status.isOk())
      declined = status.message();
    else if (!ran)
      declined = cudnn->lastDeclined();
    return declined.empty() ? cudaSuccess : cudaErrorNotSupported;
  };
  auto cudnnForward = [&](int set) {
    bool ran = false;
    zcc::Status status = cudnn->forward(forwardParams(set), nullptr, workspace,
                                        workspaceBytes, ran);
    return onCudnn(status, ran);
  };
  auto cudnnBackward = [&](int set) {
    bool ran = false;
    zcc::Status status = cudnn->backward(backwardParams(set, true), nullptr,
                                         workspace, workspaceBytes, ran);
    return onCudnn(status, ran);
  };
  std::vector<float> cudnnForwardMs, cudnnBackwardMs;
  if (declined.empty() && time(cudnnForward, cudnnForwardMs) && declined.empty())
    time(cudnnBackward, cudnnBackwardMs);
  auto field = [](const std::vector<float> &times) {
    return times.empty() ? std::string("null") : std::to_string(median(times));
  };
  std::printf(", \"cudnn_forward_ms\": %s, \"cudnn_backward_ms\": %s",
              field(cudnnForwardMs).c_str(), field(cudnnBackwardMs).c_str());
  if (!declined.empty()) {
    std::string escaped;
    for (char c : declined)
      escaped += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
    std::printf(", \"cudnn_declined\": \"%s\"", escaped.c_str());
  }
  std::printf("}\n");
  return 0;
}
