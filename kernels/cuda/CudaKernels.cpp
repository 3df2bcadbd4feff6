//===- CudaKernels.cpp - The cuda kernel registry -------------------------===//

#include "kernels/cuda/CudaKernels.h"

#include "kernels/cuda/Kernels.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace zcc::cuda {

namespace {
struct KernelEntry {
  const char *name;
  KernelFn fn;
};

// Sorted by name, with the cpu registry's names: findKernel bisects it.
constexpr KernelEntry kKernels[] = {
    {"accumulate", kernels::accumulate},
    {"adamw", kernels::adamw},
    {"add", kernels::add},
    {"attention", kernels::attention},
    {"attention_grad", kernels::attentionGrad},
    {"broadcast", kernels::broadcast},
    {"cast", kernels::cast},
    {"concat", kernels::concat},
    {"copy", kernels::copy},
    {"cross_entropy", kernels::crossEntropy},
    {"cross_entropy_grad", kernels::crossEntropyGrad},
    {"div", kernels::div},
    {"equal", kernels::equal},
    {"erf", kernels::erf},
    {"exp", kernels::exp},
    {"fill", kernels::fill},
    {"gather", kernels::gather},
    {"gather_grad", kernels::gatherGrad},
    {"gelu", kernels::gelu},
    {"gelu_grad", kernels::geluGrad},
    {"greater", kernels::greater},
    {"is_nan", kernels::isNan},
    {"layer_norm", kernels::layerNorm},
    {"layer_norm_grad", kernels::layerNormGrad},
    {"less", kernels::less},
    {"log", kernels::log},
    {"log_softmax", kernels::logSoftmax},
    {"log_softmax_grad", kernels::logSoftmaxGrad},
    {"matmul", kernels::matmul},
    {"max", kernels::max},
    {"min", kernels::min},
    {"mse_loss", kernels::mseLoss},
    {"mse_loss_grad", kernels::mseLossGrad},
    {"mul", kernels::mul},
    {"neg", kernels::neg},
    {"nll_loss", kernels::nllLoss},
    {"nll_loss_grad", kernels::nllLossGrad},
    {"pow", kernels::pow},
    {"reciprocal", kernels::reciprocal},
    {"reduce_max", kernels::reduceMax},
    {"reduce_mean", kernels::reduceMean},
    {"reduce_sum", kernels::reduceSum},
    {"relu", kernels::relu},
    {"reshape", kernels::reshape},
    {"sgd", kernels::sgd},
    {"sigmoid", kernels::sigmoid},
    {"slice", kernels::slice},
    {"slice_grad", kernels::sliceGrad},
    {"softmax", kernels::softmax},
    {"softmax_grad", kernels::softmaxGrad},
    {"sqrt", kernels::sqrt},
    {"sub", kernels::sub},
    {"sum_squares", kernels::sumSquares},
    {"tanh", kernels::tanh},
    {"transpose", kernels::transpose},
    {"trilu", kernels::trilu},
    {"where", kernels::where},
};

bool entryLess(const KernelEntry &a, const KernelEntry &b) {
  return std::strcmp(a.name, b.name) < 0;
}
} // namespace

KernelFn findKernel(const std::string &name) {
  const KernelEntry key{name.c_str(), nullptr};
  const KernelEntry *end = std::end(kKernels);
  const KernelEntry *it =
      std::lower_bound(std::begin(kKernels), end, key, entryLess);
  if (it == end || name != it->name)
    return nullptr;
  return it->fn;
}

std::vector<std::string> kernelNames() {
  std::vector<std::string> names;
  for (const KernelEntry &entry : kKernels)
    names.push_back(entry.name);
  return names;
}

} // namespace zcc::cuda
