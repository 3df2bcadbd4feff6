//===- MemoryPlanner.cpp - Static offsets for buffers ---------------------===//

#include "compiler/Conversion/MemoryPlanner.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace zcc {

namespace {
uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}
} // namespace

MemoryPlan planMemory(std::vector<PlannedBuffer> &buffers, uint64_t alignment) {
  MemoryPlan plan;
  uint64_t cursor = 0;
  for (PlannedBuffer &buffer : buffers) {
    if (!buffer.persistent)
      continue;
    buffer.offset = cursor;
    cursor = alignUp(cursor + buffer.bytes, alignment);
  }
  plan.persistentBytes = cursor;

  // Largest first, then earliest: big buffers placed first leave fewer holes.
  std::vector<size_t> order;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (!buffers[i].persistent)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].firstUse < buffers[b].firstUse;
  });
  std::vector<size_t> placed;
  uint64_t end = cursor;
  for (size_t index : order) {
    PlannedBuffer &buffer = buffers[index];
    // Byte ranges (relative to the shared region) taken by placed buffers
    // whose live ranges overlap this one's, sorted by start.
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (size_t other : placed) {
      const PlannedBuffer &o = buffers[other];
      if (o.lastUse < buffer.firstUse || buffer.lastUse < o.firstUse)
        continue;
      taken.push_back({o.offset, o.offset + o.bytes});
    }
    std::sort(taken.begin(), taken.end());
    uint64_t candidate = cursor;
    for (const auto &[start, stop] : taken) {
      if (candidate + buffer.bytes <= start)
        break;
      candidate = std::max(candidate, alignUp(stop, alignment));
    }
    buffer.offset = candidate;
    end = std::max(end, alignUp(candidate + buffer.bytes, alignment));
    placed.push_back(index);
  }
  plan.arenaBytes = std::max<uint64_t>(end, alignment);

  // Peak live bytes: a sweep over instruction indices.
  std::map<int64_t, int64_t> delta;
  for (const PlannedBuffer &buffer : buffers)
    if (!buffer.persistent) {
      delta[buffer.firstUse] += int64_t(buffer.bytes);
      delta[buffer.lastUse + 1] -= int64_t(buffer.bytes);
    }
  int64_t live = 0;
  for (const auto &[index, change] : delta) {
    live += change;
    plan.peakLiveBytes = std::max<uint64_t>(plan.peakLiveBytes, uint64_t(std::max<int64_t>(live, 0)));
  }
  return plan;
}

} // namespace zcc
