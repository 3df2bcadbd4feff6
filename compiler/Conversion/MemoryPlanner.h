//===- MemoryPlanner.h - Static offsets for buffers -------------*- C++ -*-===//
//
// Assigns every buffer an offset in one arena. Persistent buffers (weights,
// constants, inputs, outputs) get their own bytes; buffers with a live range
// share bytes with buffers whose ranges do not overlap. This is the memory
// plan: its arena size is what the runtime allocates.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_COMPILER_CONVERSION_MEMORYPLANNER_H
#define ZCC_COMPILER_CONVERSION_MEMORYPLANNER_H

#include <cstdint>
#include <vector>

namespace zcc {

struct PlannedBuffer {
  uint64_t bytes = 0;
  /// Persistent buffers live for the whole plan; the others from the
  /// instruction that writes them to the last that reads them (inclusive).
  bool persistent = false;
  int64_t firstUse = 0;
  int64_t lastUse = 0;
  /// Output of the planner.
  uint64_t offset = 0;
};

struct MemoryPlan {
  uint64_t arenaBytes = 0;
  /// Bytes of the persistent region, at the start of the arena.
  uint64_t persistentBytes = 0;
  /// The largest number of non-persistent bytes live at one instruction:
  /// a lower bound for any offset assignment of the shared region.
  uint64_t peakLiveBytes = 0;
};

/// Assigns offsets (multiples of `alignment`, a power of two) to `buffers`:
/// persistent ones in order, then the others so that no two live at the
/// same time share a byte. Each of a few orders (largest first,
/// longest-lived first, largest bytes x lifetime first) places them one by
/// one, at the lowest free offset or in the smallest free hole; the
/// smallest arena wins.
MemoryPlan planMemory(std::vector<PlannedBuffer> &buffers, uint64_t alignment);

} // namespace zcc

#endif // ZCC_COMPILER_CONVERSION_MEMORYPLANNER_H
