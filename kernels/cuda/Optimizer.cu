//===- Optimizer.cu - Accumulation, fill, norms and optimizer steps -------===//
//
// Element-wise kernels over flat tensors (grid-stride loops), and
// sum_squares as two deterministic passes: fixed per-block partial sums in
// the workspace, then one block that adds them up in a fixed order.
//
// The optimizer steps follow kernels/cpu/Optimizer.cpp operation by
// operation, in the parameter's type, with the rounding intrinsics
// (__fmul_rn, __dadd_rn, ...) so that nvcc does not contract a product and
// a sum into one fused multiply-add the cpu does not make: an f32 step then
// rounds exactly as the cpu's.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/DeviceSupport.cuh"
#include "kernels/cuda/OptimizerLaunch.h"

#include <initializer_list>
#include <type_traits>

namespace zcc::cuda {

namespace {

constexpr unsigned kThreads = 256;
/// The optimizer steps derive their constants once per block (a double
/// pow, on one thread): enough blocks to fill the device, and no more.
constexpr int64_t kStepMaxBlocks = 2048;

unsigned stepBlocks(int64_t count) {
  unsigned blocks = gridFor(count, kThreads);
  return blocks < kStepMaxBlocks ? blocks
                                 : static_cast<unsigned>(kStepMaxBlocks);
}

/// Calls `launch(float{})` or `launch(double{})` for an optimizer step's
/// parameter type (f32 or f64); any other type is invalid.
template <typename Fn> cudaError_t withStepType(ElementType type, Fn &&launch) {
  switch (type) {
  case ElementType::kF32:
    return launch(float{});
  case ElementType::kF64:
    return launch(double{});
  default:
    return cudaErrorInvalidValue;
  }
}

//===----------------------------------------------------------------------===//
// Arithmetic rounded operation by operation
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float addRn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ double addRn(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ __forceinline__ float subRn(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ __forceinline__ double subRn(double a, double b) {
  return __dsub_rn(a, b);
}
__device__ __forceinline__ float mulRn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ __forceinline__ double mulRn(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ __forceinline__ float divRn(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ __forceinline__ double divRn(double a, double b) {
  return __ddiv_rn(a, b);
}
__device__ __forceinline__ float sqrtRn(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double sqrtRn(double a) { return __dsqrt_rn(a); }

//===----------------------------------------------------------------------===//
// accumulate
//===----------------------------------------------------------------------===//

/// target[i] += value[i]; with `kWide` (both pointers 16-byte aligned)
/// each thread moves 16 bytes of the narrower operand at a time (8 bf16
/// values and 32 bytes of f32 accumulators), the elements past the last
/// whole group one by one.
template <typename T, typename V, bool kWide>
__global__ void accumulateKernel(T *target, const V *value, int64_t count) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if constexpr (kWide) {
    constexpr int kGroup = 16 / (sizeof(V) < sizeof(T) ? sizeof(V) : sizeof(T));
    struct alignas(sizeof(T) * kGroup) Targets { T v[kGroup]; };
    struct alignas(sizeof(V) * kGroup) Values { V v[kGroup]; };
    int64_t groups = count / kGroup;
    for (int64_t i = first; i < groups; i += stride) {
      Targets t = reinterpret_cast<const Targets *>(target)[i];
      Values v = reinterpret_cast<const Values *>(value)[i];
#pragma unroll
      for (int k = 0; k < kGroup; ++k)
        t.v[k] = t.v[k] + static_cast<T>(load(&v.v[k]));
      reinterpret_cast<Targets *>(target)[i] = t;
    }
    done = groups * kGroup;
  }
  for (int64_t i = done + first; i < count; i += stride)
    target[i] = target[i] + static_cast<T>(load(value + i));
}

template <typename T>
cudaError_t launchAccumulateInto(const AccumulateParams &params,
                                 cudaStream_t stream) {
  cudaError_t error = cudaErrorInvalidValue;
  bool wide = reinterpret_cast<uintptr_t>(params.target) % 16 == 0 &&
              reinterpret_cast<uintptr_t>(params.value) % 16 == 0;
  dispatchFloat(params.valueType, [&](auto tag) {
    using V = decltype(tag);
    auto *target = static_cast<T *>(params.target);
    auto *value = static_cast<const V *>(params.value);
    if (wide) {
      constexpr int64_t kGroup =
          16 / (sizeof(V) < sizeof(T) ? sizeof(V) : sizeof(T));
      int64_t work = params.count / kGroup > 0 ? params.count / kGroup : 1;
      accumulateKernel<T, V, true>
          <<<gridFor(work, kThreads), kThreads, 0, stream>>>(target, value,
                                                             params.count);
    } else {
      accumulateKernel<T, V, false>
          <<<gridFor(params.count, kThreads), kThreads, 0, stream>>>(
              target, value, params.count);
    }
    error = cudaGetLastError();
  });
  return error;
}

//===----------------------------------------------------------------------===//
// fill
//===----------------------------------------------------------------------===//

/// Writes 16 bytes at a time where `target` is 16-byte aligned; the
/// elements past the last whole 16 bytes (and an unaligned target) are
/// written one by one.
template <typename U>
__global__ void fillKernel(U *target, U element, uint4 wide, int64_t count,
                           bool aligned) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  constexpr int64_t kPerWide = 16 / sizeof(U);
  int64_t wideCount = aligned ? count / kPerWide : 0;
  uint4 *wideTarget = reinterpret_cast<uint4 *>(target);
  for (int64_t i = first; i < wideCount; i += stride)
    wideTarget[i] = wide;
  for (int64_t i = wideCount * kPerWide + first; i < count; i += stride)
    target[i] = element;
}

template <typename U>
cudaError_t launchFillAs(void *target, uint64_t pattern, int64_t count,
                         cudaStream_t stream) {
  U element = static_cast<U>(pattern);
  uint64_t replicated = 0;
  for (size_t i = 0; i < 8 / sizeof(U); ++i)
    replicated |= static_cast<uint64_t>(element) << (8 * sizeof(U) * i);
  uint4 wide;
  wide.x = wide.z = static_cast<unsigned>(replicated);
  wide.y = wide.w = static_cast<unsigned>(replicated >> 32);
  bool aligned = reinterpret_cast<uintptr_t>(target) % 16 == 0;
  int64_t work = aligned ? count / (16 / sizeof(U)) : count;
  fillKernel<U>
      <<<gridFor(work > 0 ? work : 1, kThreads), kThreads, 0, stream>>>(
          static_cast<U *>(target), element, wide, count, aligned);
  return cudaGetLastError();
}

//===----------------------------------------------------------------------===//
// sum_squares
//===----------------------------------------------------------------------===//

/// Elements each thread adds at least, before more blocks are used.
constexpr int64_t kSumSquaresPerThread = 8;
/// The most partial sums (blocks) one operand gets.
constexpr int64_t kSumSquaresMaxBlocks = 1024;

struct SumSquaresBatch {
  SumSquaresInput inputs[kSumSquaresInputsPerLaunch];
  int64_t firstPartial[kSumSquaresInputsPerLaunch];
  int64_t blocks[kSumSquaresInputsPerLaunch];
};

template <typename T>
__device__ double sumSquaresOf(const T *data, int64_t count, int64_t blocks) {
  double sum = 0;
  int64_t stride = blocks * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    double x = static_cast<double>(load(data + i));
    sum += x * x;
  }
  return sum;
}

/// Block (x, y) adds up its share of operand y; blocks past the operand's
/// partial count leave at once. Infinities and NaNs propagate.
__global__ void sumSquaresPartialsKernel(SumSquaresBatch batch,
                                         double *partials) {
  int which = blockIdx.y;
  int64_t blocks = batch.blocks[which];
  if (blockIdx.x >= blocks)
    return;
  const SumSquaresInput &input = batch.inputs[which];
  double sum = 0;
  switch (input.type) {
  case ElementType::kF32:
    sum = sumSquaresOf(static_cast<const float *>(input.data), input.count,
                       blocks);
    break;
  case ElementType::kF64:
    sum = sumSquaresOf(static_cast<const double *>(input.data), input.count,
                       blocks);
    break;
  case ElementType::kF16:
    sum = sumSquaresOf(static_cast<const __half *>(input.data), input.count,
                       blocks);
    break;
  case ElementType::kBF16:
    sum = sumSquaresOf(static_cast<const __nv_bfloat16 *>(input.data),
                       input.count, blocks);
    break;
  default:
    break;
  }
  __shared__ double scratch[32];
  sum = blockSum(sum, scratch);
  if (threadIdx.x == 0)
    partials[batch.firstPartial[which] + blockIdx.x] = sum;
}

constexpr unsigned kFinalThreads = 1024;

__global__ void sumSquaresFinalKernel(const double *partials, int64_t count,
                                      double *result) {
  double sum = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
    sum += partials[i];
  __shared__ double scratch[32];
  sum = blockSum(sum, scratch);
  if (threadIdx.x == 0)
    result[0] = sum;
}

//===----------------------------------------------------------------------===//
// adamw
//===----------------------------------------------------------------------===//

/// The step's scalars as the cpu kernel derives them: Python-float
/// arithmetic in double, each operand then rounded once to T.
template <typename T> struct AdamConstants {
  T gradScale, decay, l2, avgWeight, beta2, squareWeight, correction2Sqrt, eps,
      negativeStepSize;
  bool weightDecay;
  bool valid;
};

template <typename T>
__device__ void readAdamConstants(const double *scalars, bool biasCorrection,
                                  AdamConstants<T> &c) {
  double lr = scalars[0], beta1 = scalars[1], beta2 = scalars[2],
         eps = scalars[3], weightDecay = scalars[4], step = scalars[5],
         gradScale = scalars[6];
  double biasCorrection1 = biasCorrection ? __dsub_rn(1.0, pow(beta1, step)) : 1.0;
  double biasCorrection2 = biasCorrection ? __dsub_rn(1.0, pow(beta2, step)) : 1.0;
  double stepSize = __ddiv_rn(lr, biasCorrection1);
  c.weightDecay = weightDecay != 0;
  c.gradScale = static_cast<T>(gradScale);
  c.decay = static_cast<T>(__dsub_rn(1.0, __dmul_rn(lr, weightDecay)));
  c.l2 = static_cast<T>(weightDecay);
  c.avgWeight = static_cast<T>(__dsub_rn(1.0, beta1));
  c.beta2 = static_cast<T>(beta2);
  c.squareWeight = static_cast<T>(__dsub_rn(1.0, beta2));
  // The cpu's std::pow(x, 0.5) is the correctly rounded square root.
  c.correction2Sqrt = static_cast<T>(__dsqrt_rn(biasCorrection2));
  c.eps = static_cast<T>(eps);
  c.negativeStepSize = static_cast<T>(-stepSize);
  c.valid = step >= 1;
}

/// torch.lerp(self, end, weight) (aten/src/ATen/native/Lerp.h).
template <typename T>
__device__ __forceinline__ T lerp(T self, T end, T weight) {
  return fabs(weight) < T(0.5)
             ? addRn(self, mulRn(weight, subRn(end, self)))
             : subRn(end, mulRn(subRn(end, self), subRn(T(1), weight)));
}

/// One element's step, operation by operation as the cpu kernel rounds.
template <typename T>
__device__ __forceinline__ void adamStep(const AdamConstants<T> &c,
                                         bool decoupled, T &value, T grad,
                                         T &m, T &v) {
  T g = mulRn(grad, c.gradScale);
  if (c.weightDecay) {
    if (decoupled)
      value = mulRn(value, c.decay); // param.mul_(1 - lr * weight_decay)
    else
      g = addRn(g, mulRn(c.l2, value)); // grad.add(param, alpha=wd)
  }
  m = lerp(m, g, c.avgWeight); // exp_avg.lerp_(grad, 1 - beta1)
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
  v = mulRn(v, c.beta2);
  v = addRn(v, mulRn(mulRn(c.squareWeight, g), g));
  // (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
  T denom = addRn(divRn(sqrtRn(v), c.correction2Sqrt), c.eps);
  // param.addcdiv_(exp_avg, denom, value=-step_size)
  value = addRn(value, divRn(mulRn(c.negativeStepSize, m), denom));
}

/// The step over one tensor's elements, by `blocks` blocks of which this is
/// block `block`. The cpu kernel refuses a step below 1 (scalars[5]), which
/// the host cannot read from device memory: here such a step leaves the
/// parameter and the state as they are (copied to distinct outputs). With
/// `kWide` (the seven tensors' pointers 16-byte aligned, a copy's 8-byte)
/// each thread moves 16 bytes of each of the seven tensors at a time (and 8
/// of the copy), which keeps enough loads in flight to run at memory
/// bandwidth; the elements past the last whole group one by one. With `C` a
/// 16-bit type (not void), `t.copy` receives each updated parameter value
/// rounded to C.
template <typename T, bool kWide, typename C = void>
__device__ __forceinline__ void adamwTensor(const AdamConstants<T> &c,
                                            bool decoupled,
                                            const AdamwTensor &t,
                                            int64_t block, int64_t blocks) {
  constexpr bool kCopy = !std::is_void_v<C>;
  const T *param = static_cast<const T *>(t.param);
  const T *grad = static_cast<const T *>(t.grad);
  const T *expAvg = static_cast<const T *>(t.expAvg);
  const T *expAvgSq = static_cast<const T *>(t.expAvgSq);
  T *paramOut = static_cast<T *>(t.paramOut);
  T *expAvgOut = static_cast<T *>(t.expAvgOut);
  T *expAvgSqOut = static_cast<T *>(t.expAvgSqOut);
  int64_t stride = blocks * blockDim.x;
  int64_t first = block * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if constexpr (kWide) {
    constexpr int kGroup = 16 / sizeof(T);
    struct alignas(16) Group { T v[kGroup]; };
    int64_t groups = t.count / kGroup;
    for (int64_t i = first; i < groups; i += stride) {
      Group value = reinterpret_cast<const Group *>(param)[i];
      Group g = reinterpret_cast<const Group *>(grad)[i];
      Group m = reinterpret_cast<const Group *>(expAvg)[i];
      Group v = reinterpret_cast<const Group *>(expAvgSq)[i];
      if (c.valid) {
#pragma unroll
        for (int k = 0; k < kGroup; ++k)
          adamStep(c, decoupled, value.v[k], g.v[k], m.v[k], v.v[k]);
      }
      reinterpret_cast<Group *>(paramOut)[i] = value;
      reinterpret_cast<Group *>(expAvgOut)[i] = m;
      reinterpret_cast<Group *>(expAvgSqOut)[i] = v;
      if constexpr (kCopy) {
        struct alignas(sizeof(C) * kGroup) CopyGroup { C v[kGroup]; };
        CopyGroup rounded;
#pragma unroll
        for (int k = 0; k < kGroup; ++k)
          store(&rounded.v[k], value.v[k]);
        reinterpret_cast<CopyGroup *>(t.copy)[i] = rounded;
      }
    }
    done = groups * kGroup;
  }
  for (int64_t i = done + first; i < t.count; i += stride) {
    T value = param[i], m = expAvg[i], v = expAvgSq[i];
    if (c.valid)
      adamStep(c, decoupled, value, grad[i], m, v);
    paramOut[i] = value;
    expAvgOut[i] = m;
    expAvgSqOut[i] = v;
    if constexpr (kCopy)
      store(static_cast<C *>(t.copy) + i, value);
  }
}

template <typename T>
__device__ __forceinline__ AdamConstants<T>
sharedAdamConstants(const double *scalars, bool biasCorrection) {
  __shared__ AdamConstants<T> shared;
  if (threadIdx.x == 0)
    readAdamConstants(scalars, biasCorrection, shared);
  __syncthreads();
  return shared;
}

template <typename T, bool kWide> __global__ void adamwKernel(AdamwParams p) {
  const AdamConstants<T> c = sharedAdamConstants<T>(p.scalars, p.biasCorrection);
  AdamwTensor t{p.param,    p.grad,      p.expAvg,      p.expAvgSq,
                p.paramOut, p.expAvgOut, p.expAvgSqOut, p.count, nullptr};
  adamwTensor<T, kWide>(c, p.decoupled, t, blockIdx.x, gridDim.x);
}

/// A multi-tensor launch's parameter block: tensor i takes the blocks
/// [firstBlock[i], firstBlock[i + 1]).
struct MultiAdamwBatch {
  AdamwTensor tensors[kAdamwTensorsPerLaunch];
  int64_t firstBlock[kAdamwTensorsPerLaunch + 1];
  bool wide[kAdamwTensorsPerLaunch];
  const double *scalars;
  int count;
  bool decoupled;
  bool biasCorrection;
};
static_assert(sizeof(MultiAdamwBatch) <= 4096,
              "a kernel's parameters must fit in 4 KiB");

/// Each element is computed by adamStep as in adamwKernel, so a fused step
/// rounds exactly as the single-tensor one; with `C` not void each tensor
/// also writes its copy.
template <typename T, typename C = void>
__global__ void multiAdamwKernel(MultiAdamwBatch batch) {
  const AdamConstants<T> c = sharedAdamConstants<T>(batch.scalars, batch.biasCorrection);
  int which = 0;
  while (which + 1 < batch.count && blockIdx.x >= batch.firstBlock[which + 1])
    ++which;
  int64_t block = blockIdx.x - batch.firstBlock[which];
  int64_t blocks = batch.firstBlock[which + 1] - batch.firstBlock[which];
  if (batch.wide[which])
    adamwTensor<T, true, C>(c, batch.decoupled, batch.tensors[which], block,
                            blocks);
  else
    adamwTensor<T, false, C>(c, batch.decoupled, batch.tensors[which], block,
                             blocks);
}

//===----------------------------------------------------------------------===//
// Multi-tensor fill
//===----------------------------------------------------------------------===//

struct MultiFillBatch {
  FillTensor tensors[kFillTensorsPerLaunch];
  int64_t firstBlock[kFillTensorsPerLaunch + 1];
  int count;
};
static_assert(sizeof(MultiFillBatch) <= 4096,
              "a kernel's parameters must fit in 4 KiB");

template <typename U>
__device__ __forceinline__ void fillTail(void *target, uint64_t pattern,
                                         int64_t begin, int64_t count,
                                         int64_t first, int64_t stride) {
  U element = static_cast<U>(pattern);
  for (int64_t i = begin + first; i < count; i += stride)
    static_cast<U *>(target)[i] = element;
}

/// As fillKernel, each tensor by its own blocks: 16 bytes at a time where
/// the target is 16-byte aligned, the rest element by element.
__global__ void multiFillKernel(MultiFillBatch batch) {
  int which = 0;
  while (which + 1 < batch.count && blockIdx.x >= batch.firstBlock[which + 1])
    ++which;
  const FillTensor &t = batch.tensors[which];
  int64_t blocks = batch.firstBlock[which + 1] - batch.firstBlock[which];
  int64_t stride = blocks * blockDim.x;
  int64_t first = (blockIdx.x - batch.firstBlock[which]) * blockDim.x +
                  threadIdx.x;
  bool aligned = reinterpret_cast<uintptr_t>(t.target) % 16 == 0;
  int64_t perWide = 16 / t.elementBytes;
  int64_t wideCount = aligned ? t.count / perWide : 0;
  uint64_t replicated = t.pattern;
  for (int bits = 8 * t.elementBytes; bits < 64; bits *= 2)
    replicated |= replicated << bits;
  uint4 wide;
  wide.x = wide.z = static_cast<unsigned>(replicated);
  wide.y = wide.w = static_cast<unsigned>(replicated >> 32);
  uint4 *wideTarget = static_cast<uint4 *>(t.target);
  for (int64_t i = first; i < wideCount; i += stride)
    wideTarget[i] = wide;
  int64_t begin = wideCount * perWide;
  switch (t.elementBytes) {
  case 2:
    fillTail<uint16_t>(t.target, t.pattern, begin, t.count, first, stride);
    break;
  case 4:
    fillTail<uint32_t>(t.target, t.pattern, begin, t.count, first, stride);
    break;
  default:
    fillTail<uint64_t>(t.target, t.pattern, begin, t.count, first, stride);
    break;
  }
}

//===----------------------------------------------------------------------===//
// sgd
//===----------------------------------------------------------------------===//

template <typename T> struct SgdConstants {
  T gradScale, l2, momentum, undamped, negativeLr;
  bool weightDecay, useMomentum, firstStep, valid;
};

/// As adamwKernel, a step below 1 leaves everything as it is.
template <typename T> __global__ void sgdKernel(SgdParams p) {
  __shared__ SgdConstants<T> shared;
  if (threadIdx.x == 0) {
    const double *s = p.scalars;
    double lr = s[0], weightDecay = s[4], step = s[5], gradScale = s[6],
           momentum = s[7];
    shared.weightDecay = weightDecay != 0;
    shared.useMomentum = momentum != 0;
    shared.firstStep = step == 1;
    shared.valid = step >= 1;
    shared.gradScale = static_cast<T>(gradScale);
    shared.l2 = static_cast<T>(weightDecay);
    shared.momentum = static_cast<T>(momentum);
    shared.undamped = static_cast<T>(__dsub_rn(1.0, p.dampening));
    shared.negativeLr = static_cast<T>(-lr);
  }
  __syncthreads();
  const SgdConstants<T> c = shared;
  const T *param = static_cast<const T *>(p.param);
  const T *grad = static_cast<const T *>(p.grad);
  const T *buffer = static_cast<const T *>(p.buffer);
  T *paramOut = static_cast<T *>(p.paramOut);
  T *bufferOut = static_cast<T *>(p.bufferOut);
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < p.count; i += stride) {
    T value = param[i], b = buffer[i];
    if (c.valid) {
      T g = mulRn(grad[i], c.gradScale);
      if (c.weightDecay)
        g = addRn(g, mulRn(c.l2, value)); // grad.add(param, alpha=wd)
      if (c.useMomentum) {
        // buf = clone(grad), or buf.mul_(momentum).add_(grad, alpha=1-damp)
        b = c.firstStep ? g : addRn(mulRn(b, c.momentum), mulRn(c.undamped, g));
        // grad.add(buf, alpha=momentum), or buf
        g = p.nesterov ? addRn(g, mulRn(c.momentum, b)) : b;
      }
      value = addRn(value, mulRn(c.negativeLr, g)); // param.add_(g, -lr)
    }
    paramOut[i] = value;
    bufferOut[i] = b;
  }
}

//===----------------------------------------------------------------------===//
// adagrad
//===----------------------------------------------------------------------===//

template <typename T> struct AdagradConstants {
  T gradScale, l2, eps, negativeLr;
  bool weightDecay, valid;
};

/// As adamwKernel, a step below 1 leaves everything as it is.
template <typename T> __global__ void adagradKernel(AdagradParams p) {
  __shared__ AdagradConstants<T> shared;
  if (threadIdx.x == 0) {
    const double *s = p.scalars;
    double lr = s[0], eps = s[3], weightDecay = s[4], step = s[5], gradScale = s[6];
    shared.valid = step >= 1;
    shared.weightDecay = weightDecay != 0;
    shared.gradScale = static_cast<T>(gradScale);
    shared.l2 = static_cast<T>(weightDecay);
    shared.eps = static_cast<T>(eps);
    // lr / (1 + (step - 1) * lr_decay), in double as the cpu computes it.
    shared.negativeLr = static_cast<T>(
        -__ddiv_rn(lr, __dadd_rn(1.0, __dmul_rn(__dsub_rn(step, 1.0), p.lrDecay))));
  }
  __syncthreads();
  const AdagradConstants<T> c = shared;
  const T *param = static_cast<const T *>(p.param);
  const T *grad = static_cast<const T *>(p.grad);
  const T *sum = static_cast<const T *>(p.sum);
  T *paramOut = static_cast<T *>(p.paramOut);
  T *sumOut = static_cast<T *>(p.sumOut);
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < p.count; i += stride) {
    T value = param[i], s = sum[i];
    if (c.valid) {
      T g = mulRn(grad[i], c.gradScale);
      if (c.weightDecay)
        g = addRn(g, mulRn(c.l2, value));
      s = addRn(s, mulRn(g, g));
      value = addRn(value, mulRn(c.negativeLr, divRn(g, addRn(sqrtRn(s), c.eps))));
    }
    paramOut[i] = value;
    sumOut[i] = s;
  }
}

//===----------------------------------------------------------------------===//
// lion
//===----------------------------------------------------------------------===//

template <typename T> struct LionConstants {
  T gradScale, decay, beta1, beta2, rest1, rest2, negativeLr;
  bool valid;
};

/// As adamwKernel, a step below 1 leaves everything as it is.
template <typename T> __global__ void lionKernel(LionParams p) {
  __shared__ LionConstants<T> shared;
  if (threadIdx.x == 0) {
    const double *s = p.scalars;
    double lr = s[0], beta1 = s[1], beta2 = s[2], weightDecay = s[4], step = s[5],
           gradScale = s[6];
    shared.valid = step >= 1;
    shared.gradScale = static_cast<T>(gradScale);
    shared.decay = static_cast<T>(__dsub_rn(1.0, __dmul_rn(lr, weightDecay)));
    shared.beta1 = static_cast<T>(beta1);
    shared.beta2 = static_cast<T>(beta2);
    shared.rest1 = static_cast<T>(__dsub_rn(1.0, beta1));
    shared.rest2 = static_cast<T>(__dsub_rn(1.0, beta2));
    shared.negativeLr = static_cast<T>(-lr);
  }
  __syncthreads();
  const LionConstants<T> c = shared;
  const T *param = static_cast<const T *>(p.param);
  const T *grad = static_cast<const T *>(p.grad);
  const T *avg = static_cast<const T *>(p.expAvg);
  T *paramOut = static_cast<T *>(p.paramOut);
  T *avgOut = static_cast<T *>(p.expAvgOut);
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < p.count; i += stride) {
    T value = param[i], m = avg[i];
    if (c.valid) {
      T g = mulRn(grad[i], c.gradScale);
      T mix = addRn(mulRn(m, c.beta1), mulRn(c.rest1, g));
      T sign = mix > T(0) ? T(1) : mix < T(0) ? T(-1) : T(0);
      value = addRn(mulRn(value, c.decay), mulRn(c.negativeLr, sign));
      m = addRn(mulRn(m, c.beta2), mulRn(c.rest2, g));
    }
    paramOut[i] = value;
    avgOut[i] = m;
  }
}

//===----------------------------------------------------------------------===//
// lamb
//===----------------------------------------------------------------------===//

template <typename T> struct LambConstants {
  T gradScale, beta1, beta2, rest1, rest2, eps, decay;
  bool valid;
};

template <typename T>
__device__ __forceinline__ LambConstants<T> sharedLambConstants(const double *s) {
  __shared__ LambConstants<T> shared;
  if (threadIdx.x == 0) {
    shared.gradScale = static_cast<T>(s[6]);
    shared.beta1 = static_cast<T>(s[1]);
    shared.beta2 = static_cast<T>(s[2]);
    shared.rest1 = static_cast<T>(__dsub_rn(1.0, s[1]));
    shared.rest2 = static_cast<T>(__dsub_rn(1.0, s[2]));
    shared.eps = static_cast<T>(s[3]);
    shared.decay = static_cast<T>(s[4]);
    shared.valid = s[5] >= 1;
  }
  __syncthreads();
  return shared;
}

/// u = m / (sqrt(v) + eps) + weight_decay p, or sqrt(v + eps).
template <typename T>
__device__ __forceinline__ T lambUpdate(const LambConstants<T> &c, bool inside, T p, T m, T v) {
  T denom = inside ? sqrtRn(addRn(v, c.eps)) : addRn(sqrtRn(v), c.eps);
  return addRn(divRn(m, denom), mulRn(c.decay, p));
}

/// The moments, and this block's sums of p^2 and u^2 into partials[block]
/// and partials[kLambBlocks + block]. A step below 1 keeps the moments.
template <typename T> __global__ void lambMomentsKernel(LambParams p, double *partials) {
  const LambConstants<T> c = sharedLambConstants<T>(p.scalars);
  const T *param = static_cast<const T *>(p.param);
  const T *grad = static_cast<const T *>(p.grad);
  const T *avg = static_cast<const T *>(p.expAvg);
  const T *avgSq = static_cast<const T *>(p.expAvgSq);
  T *avgOut = static_cast<T *>(p.expAvgOut);
  T *avgSqOut = static_cast<T *>(p.expAvgSqOut);
  double paramSquares = 0, updateSquares = 0;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count;
       i += stride) {
    T m = avg[i], v = avgSq[i], value = param[i];
    if (c.valid) {
      T g = mulRn(grad[i], c.gradScale);
      m = addRn(mulRn(m, c.beta1), mulRn(c.rest1, g));
      v = addRn(mulRn(v, c.beta2), mulRn(mulRn(c.rest2, g), g));
    }
    avgOut[i] = m;
    avgSqOut[i] = v;
    double u = static_cast<double>(lambUpdate(c, p.epsInsideSqrt, value, m, v));
    paramSquares = __dadd_rn(paramSquares, __dmul_rn(double(value), double(value)));
    updateSquares = __dadd_rn(updateSquares, __dmul_rn(u, u));
  }
  __shared__ double scratch[32];
  paramSquares = blockSum(paramSquares, scratch);
  updateSquares = blockSum(updateSquares, scratch);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = paramSquares;
    partials[kLambBlocks + blockIdx.x] = updateSquares;
  }
}

/// The trust ratio and the step p -= (step_size * ratio) u, as the cpu's
/// lambStepLoop. A step below 1 leaves the parameter as it is.
template <typename T> __global__ void lambStepKernel(LambParams p) {
  const LambConstants<T> c = sharedLambConstants<T>(p.scalars);
  __shared__ T factor;
  if (threadIdx.x == 0) {
    double paramNorm = __dsqrt_rn(p.squares[0]), updateNorm = __dsqrt_rn(p.squares[1]);
    double ratio = 1.0;
    // std::clamp's comparisons, as the cpu's: a NaN ratio stays NaN.
    if (paramNorm != 0 && updateNorm != 0) {
      ratio = __ddiv_rn(paramNorm, updateNorm);
      ratio = ratio < p.minCoeff ? p.minCoeff : p.maxCoeff < ratio ? p.maxCoeff : ratio;
    }
    const double *s = p.scalars;
    double stepSize = s[0];
    if (p.biasCorrection)
      stepSize = __dmul_rn(stepSize, __ddiv_rn(__dsqrt_rn(__dsub_rn(1.0, pow(s[2], s[5]))),
                                               __dsub_rn(1.0, pow(s[1], s[5]))));
    factor = mulRn(static_cast<T>(stepSize), static_cast<T>(ratio));
  }
  __syncthreads();
  const T *param = static_cast<const T *>(p.param);
  const T *avg = static_cast<const T *>(p.expAvg);
  const T *avgSq = static_cast<const T *>(p.expAvgSq);
  T *paramOut = static_cast<T *>(p.paramOut);
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count;
       i += stride) {
    T value = param[i];
    if (c.valid)
      value = subRn(value, mulRn(factor, lambUpdate(c, p.epsInsideSqrt, value, avg[i], avgSq[i])));
    paramOut[i] = value;
  }
}

} // namespace

cudaError_t launchLambMoments(const LambParams &params, void *workspace, cudaStream_t stream) {
  auto *partials = static_cast<double *>(workspace);
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    // An empty tensor still writes its (zero) sums.
    lambMomentsKernel<T><<<kLambBlocks, kThreads, 0, stream>>>(params, partials);
    sumSquaresFinalKernel<<<1, kFinalThreads, 0, stream>>>(partials, kLambBlocks,
                                                           params.squares);
    sumSquaresFinalKernel<<<1, kFinalThreads, 0, stream>>>(partials + kLambBlocks, kLambBlocks,
                                                           params.squares + 1);
    return cudaGetLastError();
  };
  return withStepType(params.type, launch);
}

cudaError_t launchAccumulate(const AccumulateParams &params,
                             cudaStream_t stream) {
  if (params.count == 0)
    return cudaSuccess;
  switch (params.targetType) {
  case ElementType::kF32:
    return launchAccumulateInto<float>(params, stream);
  case ElementType::kF64:
    return launchAccumulateInto<double>(params, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t launchFillPattern(void *target, int elementBytes, uint64_t pattern,
                              int64_t count, cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  switch (elementBytes) {
  case 2:
    return launchFillAs<uint16_t>(target, pattern, count, stream);
  case 4:
    return launchFillAs<uint32_t>(target, pattern, count, stream);
  case 8:
    return launchFillAs<uint64_t>(target, pattern, count, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

int64_t sumSquaresPartialCount(int64_t count) {
  int64_t perBlock = static_cast<int64_t>(kThreads) * kSumSquaresPerThread;
  int64_t blocks = (count + perBlock - 1) / perBlock;
  return blocks < kSumSquaresMaxBlocks ? blocks : kSumSquaresMaxBlocks;
}

cudaError_t launchSumSquaresPartials(const SumSquaresInput *inputs,
                                     int inputCount, double *partials,
                                     int64_t first, cudaStream_t stream) {
  if (inputCount <= 0 || inputCount > kSumSquaresInputsPerLaunch)
    return cudaErrorInvalidValue;
  SumSquaresBatch batch{};
  int64_t widest = 0;
  for (int i = 0; i < inputCount; ++i) {
    batch.inputs[i] = inputs[i];
    batch.firstPartial[i] = first;
    batch.blocks[i] = sumSquaresPartialCount(inputs[i].count);
    first += batch.blocks[i];
    if (batch.blocks[i] > widest)
      widest = batch.blocks[i];
  }
  if (widest == 0)
    return cudaSuccess;
  dim3 grid(static_cast<unsigned>(widest), static_cast<unsigned>(inputCount));
  sumSquaresPartialsKernel<<<grid, kThreads, 0, stream>>>(batch, partials);
  return cudaGetLastError();
}

cudaError_t launchSumSquaresFinal(const double *partials, int64_t count,
                                  double *result, cudaStream_t stream) {
  sumSquaresFinalKernel<<<1, kFinalThreads, 0, stream>>>(partials, count,
                                                         result);
  return cudaGetLastError();
}

cudaError_t launchAdamw(const AdamwParams &params, cudaStream_t stream) {
  if (params.count == 0)
    return cudaSuccess;
  bool wide = true;
  for (const void *p : {params.param, params.grad, params.expAvg,
                        params.expAvgSq,
                        static_cast<const void *>(params.paramOut),
                        static_cast<const void *>(params.expAvgOut),
                        static_cast<const void *>(params.expAvgSqOut)})
    wide &= reinterpret_cast<uintptr_t>(p) % 16 == 0;
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    int64_t work = wide ? params.count / (16 / sizeof(T)) : params.count;
    unsigned blocks = stepBlocks(work > 0 ? work : 1);
    if (wide)
      adamwKernel<T, true><<<blocks, kThreads, 0, stream>>>(params);
    else
      adamwKernel<T, false><<<blocks, kThreads, 0, stream>>>(params);
    return cudaGetLastError();
  };
  return withStepType(params.type, launch);
}

cudaError_t launchMultiAdamw(const AdamwTensor *tensors, int tensorCount,
                             ElementType type, ElementType copyType,
                             const double *scalars, bool decoupled,
                             bool biasCorrection, cudaStream_t stream) {
  if (tensorCount <= 0 || tensorCount > kAdamwTensorsPerLaunch)
    return cudaErrorInvalidValue;
  int size = elementBytes(type);
  if (type != ElementType::kF32 && type != ElementType::kF64)
    return cudaErrorInvalidValue;
  const bool copies = copyType != ElementType::kUnspecified;
  if (copies && (type != ElementType::kF32 ||
                 (copyType != ElementType::kF16 && copyType != ElementType::kBF16)))
    return cudaErrorInvalidValue;
  MultiAdamwBatch batch{};
  batch.scalars = scalars;
  batch.decoupled = decoupled;
  batch.biasCorrection = biasCorrection;
  int64_t blocks = 0;
  for (int i = 0; i < tensorCount; ++i) {
    const AdamwTensor &t = tensors[i];
    bool wide = true;
    for (const void *p : {t.param, t.grad, t.expAvg, t.expAvgSq,
                          static_cast<const void *>(t.paramOut),
                          static_cast<const void *>(t.expAvgOut),
                          static_cast<const void *>(t.expAvgSqOut)})
      wide &= reinterpret_cast<uintptr_t>(p) % 16 == 0;
    // A group's copy is half its 16 bytes.
    if (copies)
      wide &= reinterpret_cast<uintptr_t>(t.copy) % 8 == 0;
    int64_t work = wide ? t.count / (16 / size) : t.count;
    // An empty tensor still gets a block, which finds nothing to do.
    batch.tensors[i] = t;
    batch.wide[i] = wide;
    batch.firstBlock[i] = blocks;
    blocks += stepBlocks(work > 0 ? work : 1);
  }
  batch.firstBlock[tensorCount] = blocks;
  batch.count = tensorCount;
  unsigned grid = static_cast<unsigned>(blocks);
  if (copyType == ElementType::kBF16)
    multiAdamwKernel<float, __nv_bfloat16><<<grid, kThreads, 0, stream>>>(batch);
  else if (copyType == ElementType::kF16)
    multiAdamwKernel<float, __half><<<grid, kThreads, 0, stream>>>(batch);
  else if (type == ElementType::kF32)
    multiAdamwKernel<float><<<grid, kThreads, 0, stream>>>(batch);
  else
    multiAdamwKernel<double><<<grid, kThreads, 0, stream>>>(batch);
  return cudaGetLastError();
}

cudaError_t launchMultiFill(const FillTensor *tensors, int tensorCount,
                            cudaStream_t stream) {
  if (tensorCount <= 0 || tensorCount > kFillTensorsPerLaunch)
    return cudaErrorInvalidValue;
  MultiFillBatch batch{};
  int64_t blocks = 0;
  for (int i = 0; i < tensorCount; ++i) {
    const FillTensor &t = tensors[i];
    if (t.elementBytes != 2 && t.elementBytes != 4 && t.elementBytes != 8)
      return cudaErrorInvalidValue;
    bool aligned = reinterpret_cast<uintptr_t>(t.target) % 16 == 0;
    int64_t work = aligned ? t.count / (16 / t.elementBytes) : t.count;
    batch.tensors[i] = t;
    batch.firstBlock[i] = blocks;
    blocks += gridFor(work > 0 ? work : 1, kThreads);
  }
  batch.firstBlock[tensorCount] = blocks;
  batch.count = tensorCount;
  multiFillKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      batch);
  return cudaGetLastError();
}

namespace {

/// Launches a single-tensor step over `params.count` elements of f32
/// (`f32`) or f64 (`f64`).
template <typename Params>
cudaError_t launchStep(void (*f32)(Params), void (*f64)(Params), const Params &params,
                       cudaStream_t stream) {
  if (params.count == 0)
    return cudaSuccess;
  unsigned blocks = stepBlocks(params.count);
  return withStepType(params.type, [&](auto tag) {
    (std::is_same_v<decltype(tag), float> ? f32 : f64)<<<blocks, kThreads, 0, stream>>>(params);
    return cudaGetLastError();
  });
}

} // namespace

cudaError_t launchAdagrad(const AdagradParams &params, cudaStream_t stream) {
  return launchStep(adagradKernel<float>, adagradKernel<double>, params, stream);
}

cudaError_t launchLion(const LionParams &params, cudaStream_t stream) {
  return launchStep(lionKernel<float>, lionKernel<double>, params, stream);
}

cudaError_t launchLambStep(const LambParams &params, cudaStream_t stream) {
  return launchStep(lambStepKernel<float>, lambStepKernel<double>, params, stream);
}

cudaError_t launchSgd(const SgdParams &params, cudaStream_t stream) {
  return launchStep(sgdKernel<float>, sgdKernel<double>, params, stream);
}

} // namespace zcc::cuda
