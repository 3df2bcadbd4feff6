//===- CudnnAttention.cpp - Attention through cuDNN's fused graphs --------===//
//
// The graphs are cuDNN's "scaled dot product flash attention" patterns in
// backend operations (matmul, pointwise, reduction, reshape), with the
// softmax spelled out and the causal mask as generated row and column
// indices compared. Four-dimensional tensors [batch, heads, rows, width]
// take the AttentionShape's strides, so the packed projection's heads are
// read in place.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CudnnAttention.h"

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace zcc::cuda {

namespace {

using Dims = std::array<int64_t, 4>;

/// One backend descriptor, destroyed with its owner.
class Descriptor {
public:
  Descriptor() = default;
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    status_ = cudnnBackendCreateDescriptor(type, &descriptor_);
    if (status_ != CUDNN_STATUS_SUCCESS)
      descriptor_ = nullptr;
  }
  ~Descriptor() {
    if (descriptor_)
      cudnnBackendDestroyDescriptor(descriptor_);
  }
  Descriptor(Descriptor &&other) noexcept
      : descriptor_(other.descriptor_), status_(other.status_) {
    other.descriptor_ = nullptr;
  }
  Descriptor &operator=(Descriptor &&other) noexcept {
    std::swap(descriptor_, other.descriptor_);
    std::swap(status_, other.status_);
    return *this;
  }
  Descriptor(const Descriptor &) = delete;
  Descriptor &operator=(const Descriptor &) = delete;

  cudnnBackendDescriptor_t get() const { return descriptor_; }
  cudnnStatus_t status() const { return status_; }

private:
  cudnnBackendDescriptor_t descriptor_ = nullptr;
  cudnnStatus_t status_ = CUDNN_STATUS_NOT_INITIALIZED;
};

/// Builds an operation graph op by op; the first failing call is kept
/// (`failure`), and every later call does nothing.
class GraphBuilder {
public:
  explicit GraphBuilder(cudnnHandle_t handle) : handle_(handle) {}

  bool ok() const { return failure.empty(); }
  std::string failure;

  /// A tensor with `uid` (non-virtual) or a fresh one (virtual).
  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t type,
                                  Dims dims, Dims strides,
                                  bool byValue = false) {
    return makeTensor(uid, type, dims, strides, false, byValue);
  }
  cudnnBackendDescriptor_t virtualTensor(cudnnDataType_t type, Dims dims,
                                         Dims strides) {
    return makeTensor(nextVirtual_++, type, dims, strides, true, false);
  }

  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y,
                 cudnnBackendDescriptor_t t = nullptr,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT,
                 int64_t axis = -1) {
    cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1,
        &precision);
    if (axis >= 0)
      set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    finalize(pw, "pointwise descriptor");
    cudnnBackendDescriptor_t op =
        make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    link(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    link(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b)
      link(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    if (t)
      link(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
    link(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    float one = 1.0f;
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
    addOp(op, "pointwise operation");
  }

  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    finalize(mm, "matmul descriptor");
    cudnnBackendDescriptor_t op =
        make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    link(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    link(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    link(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    link(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    addOp(op, "matmul operation");
  }

  /// Reduces `x` over the dimensions where `y` has extent 1.
  void reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1,
        &mode);
    set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    finalize(r, "reduction descriptor");
    cudnnBackendDescriptor_t op =
        make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    link(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    link(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    link(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
    addOp(op, "reduction operation");
  }

  /// `x` seen with `y`'s dimensions, strides and type.
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t op =
        make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    link(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
    link(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    addOp(op, "reshape operation");
  }

  /// The graph of the ops so far, and the plan of the first engine
  /// configuration cuDNN's heuristics (mode A) give that finalizes.
  void build(Descriptor &plan, int64_t &workspaceBytes) {
    cudnnBackendDescriptor_t graph =
        make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
        static_cast<int64_t>(ops_.size()), ops_.data());
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
        &handle_);
    finalize(graph, "operation graph");
    cudnnBackendDescriptor_t heuristics =
        make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    link(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
        &mode);
    finalize(heuristics, "engine heuristics");
    if (!ok())
      return;
    int64_t count = 0;
    check(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                   nullptr),
          "engine heuristics' result count");
    if (!ok())
      return;
    if (count == 0) {
      failure = "cuDNN's heuristics give no engine for this graph";
      return;
    }
    std::vector<cudnnBackendDescriptor_t> handles;
    for (int64_t i = 0; i < count; ++i)
      handles.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    int64_t returned = 0;
    check(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                   &returned, handles.data()),
          "engine heuristics' results");
    std::string firstRefusal;
    for (int64_t i = 0; ok() && i < returned; ++i) {
      Descriptor candidate(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      cudnnBackendDescriptor_t p = candidate.get();
      cudnnHandle_t handle = handle_;
      cudnnBackendDescriptor_t config = handles[i];
      cudnnStatus_t status = candidate.status();
      if (status == CUDNN_STATUS_SUCCESS)
        status = cudnnBackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                          CUDNN_TYPE_HANDLE, 1, &handle);
      if (status == CUDNN_STATUS_SUCCESS)
        status = cudnnBackendSetAttribute(
            p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config);
      if (status == CUDNN_STATUS_SUCCESS)
        status = cudnnBackendFinalize(p);
      if (status != CUDNN_STATUS_SUCCESS) {
        if (firstRefusal.empty())
          firstRefusal = cudnnGetErrorString(status);
        continue;
      }
      int64_t sizes = 0;
      check(cudnnBackendGetAttribute(
                p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                1, &sizes, &workspaceBytes),
            "execution plan's workspace size");
      plan = std::move(candidate);
      return;
    }
    if (ok())
      failure = "none of the " + std::to_string(returned) +
                " engine configurations cuDNN's heuristics give builds a "
                "plan (the first: " + firstRefusal + ")";
  }

  /// Every descriptor made, which the plan built from them keeps alive.
  std::vector<Descriptor> release() { return std::move(owned_); }

private:
  cudnnBackendDescriptor_t makeTensor(int64_t uid, cudnnDataType_t type,
                                      Dims dims, Dims strides, bool isVirtual,
                                      bool byValue) {
    cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t alignment = 16;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    if (isVirtual) {
      bool yes = true;
      set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes);
    }
    if (byValue) {
      bool yes = true;
      set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
    }
    finalize(t, "tensor descriptor");
    return t;
  }

  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
    owned_.emplace_back(type);
    if (ok() && owned_.back().status() != CUDNN_STATUS_SUCCESS)
      failure = std::string("creating a descriptor: ") +
                cudnnGetErrorString(owned_.back().status());
    return owned_.back().get();
  }
  /// Sets attribute `name` of `d` to the descriptor `value`.
  void link(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
            cudnnBackendDescriptor_t value) {
    set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
  }
  void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
           cudnnBackendAttributeType_t type, int64_t count, const void *value) {
    if (ok())
      check(cudnnBackendSetAttribute(d, name, type, count, value),
            "setting an attribute");
  }
  void finalize(cudnnBackendDescriptor_t d, const char *what) {
    if (ok())
      check(cudnnBackendFinalize(d), what);
  }
  void addOp(cudnnBackendDescriptor_t op, const char *what) {
    finalize(op, what);
    ops_.push_back(op);
  }
  void check(cudnnStatus_t status, const char *what) {
    if (status != CUDNN_STATUS_SUCCESS && ok())
      failure = std::string(what) + " (op " + std::to_string(ops_.size()) +
                "): " + cudnnGetErrorString(status);
  }

  cudnnHandle_t handle_;
  std::vector<Descriptor> owned_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t nextVirtual_ = 1000;
};

// The unique ids of the graphs' non-virtual tensors.
enum Uid : int64_t {
  kQuery = 1,
  kKey,
  kValue,
  kOutput,
  kStats,
  kScale,
  kNegativeInfinity,
  kOutputGrad,
  kQueryGrad,
  kKeyGrad,
  kValueGrad,
  kOne,
  kSoftmaxSum,
  kQueryGradSum,
};

/// [batch, heads, rows, width] strides of `rows`; a single batch gets the
/// stride past its heads (cuDNN takes no zero strides).
Dims stridesOf(const AttentionRows &rows, int64_t groupHeads) {
  int64_t batch = rows.batch ? rows.batch : rows.head * groupHeads;
  return {batch, rows.head, rows.row, 1};
}

/// The same operand seen transposed ([batch, heads, width, rows]).
Dims transposed(Dims strides) { return {strides[0], strides[1], 1, strides[2]}; }

Dims packedStrides(Dims dims) {
  return {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
}

constexpr int64_t kAlign = 256;
int64_t alignUp(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

/// What cuDNN's flash engines take, before any graph is built; "" when
/// nothing rules the call out.
std::string precheck(const AttentionShape &shape, bool backward,
                     size_t version) {
  if (shape.headSize % 8 || shape.valueSize % 8 || shape.headSize == 0 ||
      shape.valueSize == 0 || shape.headSize > 256 || shape.valueSize > 256)
    return "cuDNN's flash engines take head sizes that are multiples of 8 "
           "up to 256";
  if (shape.causal && shape.queries != shape.keys)
    return "the graph's causal mask compares query and key indices, which "
           "takes as many queries as keys";
  if (shape.queries == 0 || shape.keys == 0 || shape.heads == 0)
    return "an empty attention";
  for (const AttentionRows *rows :
       {&shape.query, &shape.key, &shape.value, &shape.output})
    if (rows->row % 8 || rows->head % 8 || rows->batch % 8)
      return "cuDNN's engines read 16-byte aligned rows";
  if (backward && version < 91600 && shape.keys % 128)
    return "cuDNN before 9.16 needs a padding mask for keys not a multiple "
           "of 128";
  if (backward && shape.queries == 1 && shape.keys == 1)
    return "cuDNN's backward takes no single-query, single-key attention";
  return "";
}

bool aligned(const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

cudnnDataType_t dataTypeOf(ElementType type) {
  return type == ElementType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

} // namespace

struct CudnnAttention::Plan {
  std::vector<Descriptor> graph;
  Descriptor plan;
  int64_t workspaceBytes = 0;
  /// Bytes of the graph's own buffers ahead of the plan's workspace: the
  /// backward's f32 query gradient it sums into, then each query's softmax
  /// sum; an inference forward's log-sum-exp (softmaxSumBytes).
  int64_t queryGradSumBytes = 0, softmaxSumBytes = 0;
  std::string declined;
  /// Whether a workspace too small for it was noted.
  bool workspaceNoted = false;
  // The by-value scalars; cuDNN reads them through these addresses.
  float scale = 1, negativeInfinity = -INFINITY, one = 1;
};

Status CudnnAttention::create(std::unique_ptr<CudnnAttention> &result) {
  size_t version = cudnnGetVersion();
  if (version < 90000)
    return makeStatus(StatusCode::kUnavailable,
                      "the cuda backend's attention needs cuDNN 9 or newer; "
                      "this machine loads cuDNN %zu",
                      version);
  cudnnHandle_t handle = nullptr;
  cudnnStatus_t status = cudnnCreate(&handle);
  if (status != CUDNN_STATUS_SUCCESS)
    return makeStatus(StatusCode::kUnavailable, "cudnnCreate failed: %s",
                      cudnnGetErrorString(status));
  result.reset(new CudnnAttention());
  result->handle_ = handle;
  result->version_ = version;
  return Status::ok();
}

CudnnAttention::~CudnnAttention() {
  plans_.clear();
  if (handle_)
    cudnnDestroy(static_cast<cudnnHandle_t>(handle_));
}

CudnnAttention::Plan *CudnnAttention::planFor(bool backward,
                                              const AttentionShape &shape,
                                              ElementType type, bool lse) {
  uint64_t scaleBits = 0;
  float scale = static_cast<float>(shape.scale);
  std::memcpy(&scaleBits, &scale, sizeof(scale));
  std::vector<int64_t> key = {backward,
                              static_cast<int64_t>(type),
                              lse,
                              shape.heads,
                              shape.groupHeads,
                              shape.queries,
                              shape.keys,
                              shape.headSize,
                              shape.valueSize,
                              shape.causal,
                              static_cast<int64_t>(scaleBits)};
  for (const AttentionRows *rows :
       {&shape.query, &shape.key, &shape.value, &shape.output})
    key.insert(key.end(), {rows->batch, rows->head, rows->row});
  std::unique_ptr<Plan> &slot = plans_[key];
  if (slot)
    return slot.get();
  slot = std::make_unique<Plan>();
  Plan &plan = *slot;
  plan.scale = scale;
  plan.declined = precheck(shape, backward, version_);
  if (!plan.declined.empty())
    return &plan;

  int64_t h = shape.groupHeads, b = shape.heads / h, sq = shape.queries,
          skv = shape.keys, d = shape.headSize, dv = shape.valueSize;
  cudnnDataType_t io = dataTypeOf(type), f32 = CUDNN_DATA_FLOAT;
  Dims qStrides = stridesOf(shape.query, h), kStrides = stridesOf(shape.key, h),
       vStrides = stridesOf(shape.value, h),
       oStrides = stridesOf(shape.output, h);
  Dims scores = {b, h, sq, skv}, scoreStrides = packedStrides(scores);
  Dims perRow = {b, h, sq, 1}, perRowStrides = packedStrides(perRow);
  Dims scalar = {1, 1, 1, 1};

  GraphBuilder g(static_cast<cudnnHandle_t>(handle_));
  auto q = g.tensor(kQuery, io, {b, h, sq, d}, qStrides);
  auto kT = g.tensor(kKey, io, {b, h, d, skv}, transposed(kStrides));
  auto scaleT = g.tensor(kScale, f32, scalar, scalar, true);
  auto negInf = shape.causal
                    ? g.tensor(kNegativeInfinity, f32, scalar, scalar, true)
                    : nullptr;
  // The causal mask: scores where key <= query, -inf elsewhere.
  auto mask = [&](cudnnBackendDescriptor_t x) {
    if (!shape.causal)
      return x;
    auto row = g.virtualTensor(CUDNN_DATA_INT32, scores, scoreStrides);
    auto column = g.virtualTensor(CUDNN_DATA_INT32, scores, scoreStrides);
    auto keep = g.virtualTensor(CUDNN_DATA_BOOLEAN, scores, scoreStrides);
    auto masked = g.virtualTensor(f32, scores, scoreStrides);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, row, nullptr,
                CUDNN_DATA_INT32, 2);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, column, nullptr,
                CUDNN_DATA_INT32, 3);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, row, column, keep, nullptr,
                CUDNN_DATA_BOOLEAN);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, negInf, masked, keep);
    return masked;
  };

  if (!backward) {
    auto v = g.tensor(kValue, io, {b, h, skv, dv}, vStrides);
    auto o = g.tensor(kOutput, io, {b, h, sq, dv}, oStrides);
    auto product = g.virtualTensor(f32, scores, scoreStrides);
    auto scaled = g.virtualTensor(f32, scores, scoreStrides);
    g.matmul(q, kT, product);
    g.pointwise(CUDNN_POINTWISE_MUL, product, scaleT, scaled);
    auto masked = mask(scaled);
    auto rowMax = g.virtualTensor(f32, perRow, perRowStrides);
    auto shifted = g.virtualTensor(f32, scores, scoreStrides);
    auto exponent = g.virtualTensor(f32, scores, scoreStrides);
    auto rowSum = g.virtualTensor(f32, perRow, perRowStrides);
    g.reduction(CUDNN_REDUCE_TENSOR_MAX, masked, rowMax);
    g.pointwise(CUDNN_POINTWISE_SUB, masked, rowMax, shifted);
    g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, exponent);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, exponent, rowSum);
    // cuDNN's heuristics find no engine for the graph without the
    // log-sum-exp: inference writes it to the workspace.
    auto logSum = g.virtualTensor(f32, perRow, perRowStrides);
    auto stats = g.tensor(kStats, f32, perRow, perRowStrides);
    g.pointwise(CUDNN_POINTWISE_LOG, rowSum, nullptr, logSum);
    g.pointwise(CUDNN_POINTWISE_ADD, rowMax, logSum, stats);
    if (!lse)
      plan.softmaxSumBytes = alignUp(b * h * sq * 4);
    // The probabilities enter the second product in 16 bits.
    auto probabilities = g.virtualTensor(io, scores, scoreStrides);
    g.pointwise(CUDNN_POINTWISE_DIV, exponent, rowSum, probabilities);
    g.matmul(probabilities, v, o);
  } else {
    Dims transposedScores = {b, h, skv, sq};
    Dims transposedScoreStrides = {h * sq * skv, sq * skv, 1, skv};
    auto vT = g.tensor(kValue, io, {b, h, dv, skv}, transposed(vStrides));
    auto o = g.tensor(kOutput, io, {b, h, sq, dv}, oStrides);
    auto dO = g.tensor(kOutputGrad, io, {b, h, sq, dv}, oStrides);
    auto stats = g.tensor(kStats, f32, perRow, perRowStrides);
    auto one = g.tensor(kOne, f32, scalar, scalar, true);
    auto softmaxSum = g.tensor(kSoftmaxSum, f32, perRow, perRowStrides);
    auto dQSum = g.tensor(kQueryGradSum, f32, {b, h, sq, d},
                          packedStrides({b, h, sq, d}));
    auto dQ = g.tensor(kQueryGrad, io, {b, h, sq, d}, qStrides);
    auto dK = g.tensor(kKeyGrad, io, {b, h, skv, d}, kStrides);
    auto dV = g.tensor(kValueGrad, io, {b, h, skv, dv}, vStrides);

    // softmax_sum = rowsum(dO * O).
    auto outputProduct = g.virtualTensor(f32, {b, h, sq, dv}, oStrides);
    auto rowDot = g.virtualTensor(f32, perRow, perRowStrides);
    g.pointwise(CUDNN_POINTWISE_MUL, dO, o, outputProduct);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, outputProduct, rowDot);
    g.pointwise(CUDNN_POINTWISE_MUL, rowDot, one, softmaxSum);
    // P = exp(scale Q K^T - lse), masked.
    auto product = g.virtualTensor(f32, scores, scoreStrides);
    auto scaled = g.virtualTensor(f32, scores, scoreStrides);
    auto centred = g.virtualTensor(f32, scores, scoreStrides);
    g.matmul(q, kT, product);
    g.pointwise(CUDNN_POINTWISE_MUL, product, scaleT, scaled);
    g.pointwise(CUDNN_POINTWISE_SUB, scaled, stats, centred);
    auto masked = mask(centred);
    auto probabilities = g.virtualTensor(f32, scores, scoreStrides);
    g.pointwise(CUDNN_POINTWISE_EXP, masked, nullptr, probabilities);
    // dV = P^T dO.
    auto probabilitiesT =
        g.virtualTensor(io, transposedScores, transposedScoreStrides);
    g.reshape(probabilities, probabilitiesT);
    g.matmul(probabilitiesT, dO, dV);
    // dS = P (dO V^T - softmax_sum) scale.
    auto dP = g.virtualTensor(f32, scores, scoreStrides);
    auto dPCentred = g.virtualTensor(f32, scores, scoreStrides);
    auto dPWeighted = g.virtualTensor(f32, scores, scoreStrides);
    auto dS = g.virtualTensor(f32, scores, scoreStrides);
    g.matmul(dO, vT, dP);
    g.pointwise(CUDNN_POINTWISE_SUB, dP, softmaxSum, dPCentred);
    g.pointwise(CUDNN_POINTWISE_MUL, dPCentred, probabilities, dPWeighted);
    g.pointwise(CUDNN_POINTWISE_MUL, dPWeighted, scaleT, dS);
    // dK = dS^T Q.
    auto dST = g.virtualTensor(io, transposedScores, transposedScoreStrides);
    g.reshape(dS, dST);
    g.matmul(dST, q, dK);
    // dQ = dS K, summed in f32, then rounded.
    auto k = g.virtualTensor(f32, {b, h, skv, d}, kStrides);
    g.reshape(kT, k);
    g.matmul(dS, k, dQSum);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, dQSum, nullptr, dQ);
    plan.queryGradSumBytes = alignUp(b * h * sq * d * 4);
    plan.softmaxSumBytes = alignUp(b * h * sq * 4);
  }
  g.build(plan.plan, plan.workspaceBytes);
  if (g.ok())
    plan.graph = g.release();
  else {
    // A shape the prechecks let through: say so once, as it costs speed.
    plan.declined = g.failure;
    std::fprintf(stderr,
                 "zcc: note: cuDNN declines the %s of %lld heads of %lld x "
                 "%lld queries and keys (head size %lld): %s; zcc's own "
                 "kernels run it\n",
                 backward ? "attention gradient" : "attention",
                 static_cast<long long>(shape.heads),
                 static_cast<long long>(sq), static_cast<long long>(skv),
                 static_cast<long long>(d), g.failure.c_str());
  }
  return &plan;
}

namespace {

/// The addresses of a graph's non-virtual tensors, by unique id.
struct Bindings {
  static constexpr int kMax = 16;
  int64_t uids[kMax];
  void *pointers[kMax];
  int count = 0;

  void add(int64_t uid, const void *pointer) {
    uids[count] = uid;
    pointers[count++] = const_cast<void *>(pointer);
  }
};

/// Runs `plan` on `stream` with `bindings` and the by-value scalars every
/// graph reads (the causal ones' -inf too).
Status execute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
               Bindings &bindings, float *scale, float *negativeInfinity,
               bool causal, void *workspace, cudaStream_t stream) {
  bindings.add(kScale, scale);
  if (causal)
    bindings.add(kNegativeInfinity, negativeInfinity);
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  cudnnBackendDescriptor_t p = pack.get();
  cudnnStatus_t status = pack.status();
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnBackendSetAttribute(p, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                      CUDNN_TYPE_INT64, bindings.count,
                                      bindings.uids);
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnBackendSetAttribute(p, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                      CUDNN_TYPE_VOID_PTR, bindings.count,
                                      bindings.pointers);
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnBackendSetAttribute(p, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                      CUDNN_TYPE_VOID_PTR, 1, &workspace);
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnBackendFinalize(p);
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnSetStream(handle, stream);
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnBackendExecute(handle, plan, p);
  if (status != CUDNN_STATUS_SUCCESS)
    return makeStatus(StatusCode::kInternal,
                      "cuDNN's attention failed to run: %s",
                      cudnnGetErrorString(status));
  return Status::ok();
}

} // namespace

bool CudnnAttention::usable(Plan &plan, size_t workspaceBytes,
                            std::initializer_list<const void *> operands) {
  int64_t needed =
      plan.queryGradSumBytes + plan.softmaxSumBytes + plan.workspaceBytes;
  if (!plan.declined.empty()) {
    lastDeclined_ = plan.declined;
  } else if (needed > static_cast<int64_t>(workspaceBytes)) {
    lastDeclined_ = "cuDNN's plan needs " + std::to_string(needed) +
                    " bytes of workspace, more than the backend's " +
                    std::to_string(workspaceBytes);
    if (!plan.workspaceNoted)
      std::fprintf(stderr, "zcc: note: %s; zcc's own kernels run it\n",
                   lastDeclined_.c_str());
    plan.workspaceNoted = true;
  } else if (!std::all_of(operands.begin(), operands.end(), aligned)) {
    lastDeclined_ = "an operand is not 16-byte aligned";
  } else {
    return true;
  }
  return false;
}

bool CudnnAttention::takesType(ElementType type, bool &ran) {
  ran = false;
  lastDeclined_.clear();
  if (type == ElementType::kBF16 || type == ElementType::kF16)
    return true;
  lastDeclined_ = "only 16-bit attention runs on cuDNN";
  return false;
}

Status CudnnAttention::forward(const AttentionParams &params,
                               cudaStream_t stream, void *workspace,
                               size_t workspaceBytes, bool &ran) {
  if (!takesType(params.type, ran))
    return Status::ok();
  Plan *plan = planFor(false, params.shape, params.type, params.lse);
  if (!usable(*plan, workspaceBytes,
              {params.query, params.key, params.value, params.result,
               params.lse}))
    return Status::ok();
  // Inference writes the log-sum-exp at the workspace's start.
  auto *base = static_cast<unsigned char *>(workspace);
  Bindings bindings;
  bindings.add(kQuery, params.query);
  bindings.add(kKey, params.key);
  bindings.add(kValue, params.value);
  bindings.add(kOutput, params.result);
  bindings.add(kStats, params.lse ? params.lse : base);
  if (Status s = execute(static_cast<cudnnHandle_t>(handle_), plan->plan.get(),
                         bindings, &plan->scale, &plan->negativeInfinity,
                         params.shape.causal, base + plan->softmaxSumBytes,
                         stream);
      !s.isOk())
    return s;
  ++runs_;
  ran = true;
  return Status::ok();
}

Status CudnnAttention::backward(const AttentionGradParams &params,
                                cudaStream_t stream, void *workspace,
                                size_t workspaceBytes, bool &ran) {
  if (!takesType(params.type, ran))
    return Status::ok();
  if (!params.output || !params.lse) {
    lastDeclined_ = "the gradient recomputes its statistics";
    return Status::ok();
  }
  Plan *plan = planFor(true, params.shape, params.type, true);
  if (!usable(*plan, workspaceBytes,
              {params.query, params.key, params.value, params.grad,
               params.output, params.lse, params.queryGrad, params.keyGrad,
               params.valueGrad}))
    return Status::ok();
  // The f32 query gradient, summed from zero, then the softmax sums, then
  // the plan's own workspace.
  auto *base = static_cast<unsigned char *>(workspace);
  void *queryGradSum = base, *softmaxSum = base + plan->queryGradSumBytes;
  void *planWorkspace = base + plan->queryGradSumBytes + plan->softmaxSumBytes;
  cudaError_t cleared =
      cudaMemsetAsync(queryGradSum, 0, plan->queryGradSumBytes, stream);
  if (cleared != cudaSuccess)
    return makeStatus(StatusCode::kInternal,
                      "clearing cuDNN's query gradient sum failed: %s",
                      cudaGetErrorString(cleared));
  Bindings bindings;
  bindings.add(kQuery, params.query);
  bindings.add(kKey, params.key);
  bindings.add(kValue, params.value);
  bindings.add(kOutput, params.output);
  bindings.add(kOutputGrad, params.grad);
  bindings.add(kStats, params.lse);
  bindings.add(kQueryGrad, params.queryGrad);
  bindings.add(kKeyGrad, params.keyGrad);
  bindings.add(kValueGrad, params.valueGrad);
  bindings.add(kOne, &plan->one);
  bindings.add(kSoftmaxSum, softmaxSum);
  bindings.add(kQueryGradSum, queryGradSum);
  if (Status s = execute(static_cast<cudnnHandle_t>(handle_), plan->plan.get(),
                         bindings, &plan->scale, &plan->negativeInfinity,
                         params.shape.causal, planWorkspace, stream);
      !s.isOk())
    return s;
  ++runs_;
  ran = true;
  return Status::ok();
}

} // namespace zcc::cuda
