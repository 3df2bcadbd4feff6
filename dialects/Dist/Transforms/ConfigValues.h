//===- ConfigValues.h - Reading settings from zcc.config --------*- C++ -*-===//
//
// The dist passes read their settings from the `zcc.config` dictionary the
// config importer attached to the module.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_DIALECTS_DIST_TRANSFORMS_CONFIGVALUES_H
#define ZCC_DIALECTS_DIST_TRANSFORMS_CONFIGVALUES_H

#include "mlir/IR/BuiltinAttributes.h"

namespace zcc::zdist {

/// Integer setting `name` of `dict`, or `defaultValue` when `dict` is null
/// or has none (or a string such as "auto"). JSON writes DeepSpeed's large
/// defaults as 1e9, so a float is read as its integer part.
inline int64_t configInt(mlir::DictionaryAttr dict, llvm::StringRef name, int64_t defaultValue) {
  if (!dict)
    return defaultValue;
  if (auto value = dict.getAs<mlir::IntegerAttr>(name))
    return value.getInt();
  if (auto value = dict.getAs<mlir::FloatAttr>(name))
    return static_cast<int64_t>(value.getValueAsDouble());
  return defaultValue;
}

/// Stage 3's fetch schedule knobs, in elements (DeepSpeed's meanings): how
/// ZeRO-3 places its all-gathers, and on one rank how offload_param places
/// its fetches.
struct Stage3Schedule {
  /// Gathered (fetched) parameter elements resident at once, prefetches included.
  int64_t maxLiveParameters = 1000000000;
  /// A parameter used again within this many gathered elements of other
  /// parameters stays resident; otherwise it is released and re-gathered.
  int64_t maxReuseDistance = 1000000000;
  /// The most elements one coalesced all-gather prefetches ahead of use.
  int64_t prefetchBucketSize = 50000000;
  /// overlap_comm: each bucket's all-gather is issued right before the
  /// first use of the bucket before it, so the gather runs on the
  /// communication stream while that bucket computes. (Issued after that
  /// use, the gather would wait for it: the communication stream starts a
  /// run when the compute stream has done everything before the run in
  /// program order.)
  bool gatherAhead = false;
};

/// The schedule `zero_optimization` (may be null) asks for.
inline Stage3Schedule readStage3Schedule(mlir::DictionaryAttr zero) {
  Stage3Schedule schedule;
  schedule.maxLiveParameters =
      configInt(zero, "stage3_max_live_parameters", schedule.maxLiveParameters);
  schedule.maxReuseDistance =
      configInt(zero, "stage3_max_reuse_distance", schedule.maxReuseDistance);
  schedule.prefetchBucketSize =
      configInt(zero, "stage3_prefetch_bucket_size", schedule.prefetchBucketSize);
  if (auto overlap = zero ? zero.getAs<mlir::BoolAttr>("overlap_comm") : mlir::BoolAttr())
    schedule.gatherAhead = overlap.getValue();
  return schedule;
}

} // namespace zcc::zdist

#endif // ZCC_DIALECTS_DIST_TRANSFORMS_CONFIGVALUES_H
