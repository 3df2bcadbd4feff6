//===- PlanLoader.h - Reading and validating plan files ---------*- C++ -*-===//
//
// A plan file is a PlanFile (schema/plan.proto): magic, format version,
// producer, a CRC-32 of the serialized Plan, and the Plan. loadPlan checks the
// header and the checksum before it parses the Plan, then validates every id,
// shape, offset and kernel name, so that the executor can index into the plan
// without checks and nothing fails halfway through a step because of the file.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_PLAN_PLANLOADER_H
#define ZCC_RUNTIME_PLAN_PLANLOADER_H

#include "plan.pb.h"
#include "runtime/Support/Status.h"

#include <cstdint>
#include <string>

namespace zcc {

/// "ZCCPLAN1" read as a little-endian 64-bit integer.
inline constexpr uint64_t kPlanMagic = 0x314e414c5043435aULL;

/// The one layout of Plan this runtime reads.
inline constexpr uint32_t kPlanFormatVersion = 1;

/// The most ranks a plan's mesh may have: zrun runs a thread (cpu) or a
/// process (cuda) per rank, and --nproc takes at most this many.
inline constexpr int64_t kMaxWorldSize = int64_t(1) << 20;

/// The most micro-steps an optimizer step may accumulate (zrun --grad-accum
/// takes at most this many as well).
inline constexpr int64_t kMaxGradientAccumulationSteps = int64_t(1) << 24;

/// A plan that passed every check of loadPlan.
struct LoadedPlan {
  /// The file it came from, for messages.
  std::string path;
  /// The file's header; its `plan` bytes are dropped once parsed.
  plan::PlanFile header;
  plan::Plan plan;

  /// The number of ranks the plan was compiled for (the product of the mesh;
  /// validation bounds it by kMaxWorldSize, and a pipeline's stages divide it).
  int64_t worldSize() const;
};

/// Reads, checks and validates the plan file at `path`. Every failure is a
/// Status whose message starts with the path, names the offending item and
/// says how to fix it.
StatusOr<LoadedPlan> loadPlan(const std::string &path);

/// As loadPlan, on the file's bytes; `path` only names them in messages.
StatusOr<LoadedPlan> parsePlanFile(const std::string &bytes,
                                   const std::string &path);

/// The checks loadPlan runs on a parsed Plan.
Status validatePlan(const plan::Plan &plan, const std::string &path);

/// The bytes of a plan file holding `plan`: magic, format version,
/// `producer`, checksum. The Plan is serialized deterministically, so one
/// plan always gives the same file.
std::string encodePlanFile(const plan::Plan &plan, const std::string &producer);

/// zlib's CRC-32 of `bytes`, as PlanFile.checksum holds it.
uint32_t planChecksum(const std::string &bytes);

/// "instruction 12 (matmul, from node '/h.0/attn/MatMul')": how messages name
/// an instruction.
std::string describeInstruction(int index,
                                const plan::Instruction &instruction);

/// "buffer 3 ('h.0.attn.w')".
std::string describeBuffer(const plan::Buffer &buffer);

/// "f32", "bf16", ...: the lower-case enum name.
std::string dtypeText(plan::DType dtype);

/// "4x100"; "scalar" for a 0-d shape.
std::string shapeText(const int64_t *dims, int rank);
template <typename Shape> std::string shapeText(const Shape &shape) {
  return shapeText(shape.data(), static_cast<int>(shape.size()));
}

/// The plan as the ranks of pipeline stage `stage` run it: only that
/// stage's programs (named without their "s<stage>." prefix, as are its
/// schedule's steps), bindings and weights, and its arena; the other
/// stages' buffers stay (ids are kept) as plain activations nothing uses.
StatusOr<LoadedPlan> projectStage(const LoadedPlan &loaded, int stage);

/// Whether `kernel` names a collective ("all_reduce", "reduce_scatter",
/// "all_gather"), "shard" (this rank's block of rows of a value every
/// rank holds) or a pipeline's "send"/"recv" (to or from the rank of stage
/// "peer"), which the executor runs with the rank's communicator over the
/// group of the mesh axes in its "axes" attribute.
bool isCollectiveKernel(const std::string &kernel);

/// Whether `kernel` orders streams: "record_event" (marks a point of its
/// stream) or "wait_event" (its stream waits for that point); the event is
/// the instruction's integer attribute "event", numbered per program.
bool isEventKernel(const std::string &kernel);

/// Whether `kernel` copies between host and device memory: "offload"
/// (device to host) or "fetch" (host to device).
bool isTransferKernel(const std::string &kernel);

/// Whether `kernel` moves bytes between the NVMe swap file and host memory:
/// "swap_in" (swap file to host) or "swap_out" (host to swap file).
bool isSwapKernel(const std::string &kernel);

/// Offsets into the NVMe swap file are multiples of this (direct I/O).
constexpr uint64_t kNvmeAlignment = 4096;

} // namespace zcc

#endif // ZCC_RUNTIME_PLAN_PLANLOADER_H
