//===- CpuKernels.h - Reference kernels of the cpu backend ------*- C++ -*-===//
//
// One kernel per zgraph op, named as the op without its dialect ("matmul",
// "layer_norm", ...), with that op's semantics (dialects/Graph/IR/ZGraphOps.td)
// and the op's attributes under the same names. Kernels read shapes and
// element types from their tensor views, never allocate, and report bad
// arguments as a Status. They are the reference every other backend is
// checked against: deterministic, fp32 accumulation, no threads of their own.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CPU_CPUKERNELS_H
#define ZCC_KERNELS_CPU_CPUKERNELS_H

#include "plan.pb.h"
#include "runtime/Support/Status.h"
#include "schema/DTypes.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zcc::cpu {

/// A tensor in the arena: its bytes, element type and shape.
struct TensorView {
  void *data = nullptr;
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;

  int64_t numElements() const;
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

using plan::dtypeBytes;
using plan::dtypeName;

using AttributeMap = google::protobuf::Map<std::string, plan::Attribute>;

struct KernelArgs {
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  const AttributeMap *attributes = nullptr;

  bool hasAttr(const std::string &name) const;
  int64_t intAttr(const std::string &name, int64_t defaultValue) const;
  double floatAttr(const std::string &name, double defaultValue) const;
  std::string stringAttr(const std::string &name,
                         const std::string &defaultValue) const;
  std::vector<int64_t> intsAttr(const std::string &name) const;
  /// Unit attributes (e.g. attention's `causal`) are bools that are present.
  bool boolAttr(const std::string &name, bool defaultValue) const;
};

using KernelFn = Status (*)(const KernelArgs &args);

/// The kernel of this name, or null.
KernelFn findKernel(const std::string &name);

/// Every kernel name, sorted (for messages and the plan validator), and
/// whether `name` is one: ZccKernelNames, which links no kernel.
std::vector<std::string> kernelNames();
bool isKernel(const std::string &name);

/// OpenBLAS gives each product in flight a workspace of its own (128 MiB
/// in Debian's build), maps one the first time that many products overlap,
/// keeps it for the process's life, and retries forever when it cannot map
/// one: a job whose arenas left it no room would
/// hang in its first product. Maps `callers` workspaces now (one for each
/// rank thread of the job), before any arena is allocated, so that a job
/// that does not fit fails in its arena's allocation with a message; fails
/// itself, saying how much it needed, when the process cannot map them.
Status reserveBlasWorkspaces(int callers);

} // namespace zcc::cpu

#endif // ZCC_KERNELS_CPU_CPUKERNELS_H
