//===- Checkpoint.h - Saving and resuming a training run ---------*- C++ -*-===//
//
// A checkpoint is a folder DIR/step-NNNNNNNN holding one file per rank
// (rank-RRRRR.bin: the rank's parameter and optimizer-state buffers, in
// buffer order, as the plan lays them out) and manifest.json (the plan's
// checksum, the world size, the loop's state: steps done, steps applied,
// samples consumed, the loss scaler; each rank file's size and CRC-32; each
// saved buffer's name and place). Ranks write into DIR/.step-NNNNNNNN.partial;
// once every rank file is on disk, rank 0 writes the manifest, renames the
// folder into place and points DIR/latest at it, each step atomic (temporary
// file, fsync, rename). A crash mid-save leaves the previous checkpoint whole
// and `latest` pointing at it; a partial folder is never resumed.
//
// The manifest also says, for each saved tensor, its whole shape and in how
// many blocks of rows the ranks held it; a resuming rank reads its own rows
// of each whole tensor from whichever saved ranks hold them. So a checkpoint
// resumes under a plan for another world size or ZeRO stage of the same
// model (the tensors are matched by name, shape and dtype), without a
// conversion step; ZeRO's fp32 master rows, when the checkpoint has none,
// are derived from the parameters by the plan's @init.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_TOOLS_ZRUN_CHECKPOINT_H
#define ZCC_TOOLS_ZRUN_CHECKPOINT_H

#include "runtime/Executor.h"
#include "runtime/Train/LossScaler.h"

#include <cstdint>
#include <string>

namespace zcc {

/// The loop's state at a step boundary.
struct TrainState {
  /// Optimizer steps done (skipped ones included) and applied.
  int64_t step = 0;
  int64_t applied = 0;
  /// Samples the data source has handed out.
  int64_t samples = 0;
  LossScalerState scaler;
};

/// Writes rank `rank`'s part of the checkpoint at `state.step` into `dir`:
/// its buffers, the partitioned ones as block `shardIndex` of their rows
/// (its rank within its data-parallel group: `rank` without a pipeline).
/// Every rank of the job calls it; `communicator` (null on one rank, the
/// whole job's otherwise) lines them up before rank 0 completes the
/// checkpoint.
Status saveCheckpoint(Executor &executor, const std::string &dir, const TrainState &state,
                      int rank, int shardIndex, Communicator *communicator);

/// Restores a rank's buffers from the newest whole checkpoint in `dir`
/// (checking every rank file's CRC-32 first), the partitioned ones as block
/// `shardIndex` of their rows, and returns the loop's state there. The
/// checkpoint may come from another world size, ZeRO stage or pipeline.
StatusOr<TrainState> resumeCheckpoint(Executor &executor, const std::string &dir,
                                      int shardIndex);

} // namespace zcc

#endif // ZCC_TOOLS_ZRUN_CHECKPOINT_H
