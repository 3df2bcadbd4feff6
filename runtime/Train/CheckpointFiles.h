//===- CheckpointFiles.h - Reading a saved checkpoint ------------*- C++ -*-===//
//
// The read side shared by `zrun --resume` and `zplan export`: the newest
// whole checkpoint of a folder (DIR/latest names it), its manifest, and every
// rank file, each checked against the manifest's size and CRC-32 before
// anything reads it. The layout is written by tools/zrun/Checkpoint.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_TRAIN_CHECKPOINTFILES_H
#define ZCC_RUNTIME_TRAIN_CHECKPOINTFILES_H

#include "runtime/Support/Status.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace zcc {

struct CheckpointFiles {
  /// DIR/step-NNNNNNNN and its manifest.json.
  std::string stepDir;
  std::string manifestPath;
  nlohmann::json manifest;
  /// The rank files' bytes, in rank order.
  std::vector<std::string> shards;
};

/// Reads the newest whole checkpoint in `dir`. Errors: no DIR/latest
/// (kNotFound, "DIR: no checkpoint there ..."), a missing manifest
/// (kNotFound, "DIR: 'PATH' is missing ..."), a manifest that is not one
/// (kInvalidArgument), a rank file that does not match it (kDataLoss, naming
/// the file).
StatusOr<CheckpointFiles> readCheckpoint(const std::string &dir);

/// Where part `part` (a block of rows, in rank order of the data-parallel
/// group that held the tensor) of the manifest's tensor `entry` lies: the
/// index of its rank file in `files.shards` and the offset there, checked
/// to hold `length` bytes. A tensor's "locations" say it; a checkpoint
/// without them (every rank holding the same buffers) has part p in rank
/// file p at the tensor's "offset".
StatusOr<std::pair<size_t, uint64_t>> partLocation(const CheckpointFiles &files,
                                                   const nlohmann::json &entry, int64_t part,
                                                   uint64_t length);

} // namespace zcc

#endif // ZCC_RUNTIME_TRAIN_CHECKPOINTFILES_H
