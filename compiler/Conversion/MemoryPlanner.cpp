//===- MemoryPlanner.cpp - Static offsets for buffers ---------------------===//

#include "compiler/Conversion/MemoryPlanner.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>

namespace zcc {

namespace {
uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

/// Places the shared buffers `order` names, in that order, each at an
/// offset (from `base`) whose bytes no buffer placed before it and live at
/// the same time holds: the lowest such offset, or with `bestFit` the one
/// in the smallest hole it fits. Writes `offsets` and returns the region's
/// end.
uint64_t placeShared(const std::vector<PlannedBuffer> &buffers, const std::vector<size_t> &order,
                     bool bestFit, uint64_t base, uint64_t alignment,
                     std::vector<uint64_t> &offsets) {
  std::vector<size_t> placed;
  uint64_t end = base;
  std::vector<std::pair<uint64_t, uint64_t>> taken;
  for (size_t index : order) {
    const PlannedBuffer &buffer = buffers[index];
    // Byte ranges taken by placed buffers whose live ranges overlap this
    // one's, sorted by start.
    taken.clear();
    for (size_t other : placed) {
      const PlannedBuffer &o = buffers[other];
      if (o.lastUse < buffer.firstUse || buffer.lastUse < o.firstUse)
        continue;
      taken.push_back({offsets[other], offsets[other] + o.bytes});
    }
    std::sort(taken.begin(), taken.end());
    uint64_t candidate = base;
    uint64_t chosen = UINT64_MAX, chosenHole = UINT64_MAX;
    for (const auto &[start, stop] : taken) {
      if (candidate + buffer.bytes <= start) {
        if (!bestFit) {
          chosen = candidate;
          break;
        }
        if (start - candidate < chosenHole) {
          chosenHole = start - candidate;
          chosen = candidate;
        }
      }
      candidate = std::max(candidate, alignUp(stop, alignment));
    }
    // Above everything it overlaps.
    if (chosen == UINT64_MAX)
      chosen = candidate;
    offsets[index] = chosen;
    end = std::max(end, alignUp(chosen + buffer.bytes, alignment));
    placed.push_back(index);
  }
  return end;
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

  // Offsets for the shared region under each of a few orders and placement
  // rules; the plan keeps the smallest region (the first on a tie).
  std::vector<size_t> shared;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (!buffers[i].persistent)
      shared.push_back(i);
  auto length = [&](size_t i) { return buffers[i].lastUse - buffers[i].firstUse + 1; };
  using Less = std::function<bool(size_t, size_t)>;
  std::vector<Less> orders{
      // Largest first, then earliest: big buffers placed first leave fewer
      // holes.
      [&](size_t a, size_t b) {
        if (buffers[a].bytes != buffers[b].bytes)
          return buffers[a].bytes > buffers[b].bytes;
        return buffers[a].firstUse < buffers[b].firstUse;
      },
      // Longest-lived first: what spans the step sits at the bottom and
      // short-lived buffers stack above it.
      [&](size_t a, size_t b) {
        if (length(a) != length(b))
          return length(a) > length(b);
        return buffers[a].bytes > buffers[b].bytes;
      },
      // Largest area of bytes times instructions first.
      [&](size_t a, size_t b) {
        double areaA = double(buffers[a].bytes) * double(length(a));
        double areaB = double(buffers[b].bytes) * double(length(b));
        if (areaA != areaB)
          return areaA > areaB;
        return buffers[a].firstUse < buffers[b].firstUse;
      },
  };
  // Breadth first: each buffer by the most bytes live at once during its
  // life (the congested stretches must stack, so their buffers go first),
  // then largest first.
  std::vector<uint64_t> breadth(buffers.size(), 0);
  {
    std::map<int64_t, int64_t> delta;
    for (size_t i : shared) {
      delta[buffers[i].firstUse] += int64_t(buffers[i].bytes);
      delta[buffers[i].lastUse + 1] -= int64_t(buffers[i].bytes);
    }
    // Live bytes from each change point on, and a sparse table of maxima.
    std::vector<int64_t> points;
    std::vector<std::vector<int64_t>> most(1);
    int64_t live = 0;
    for (const auto &[index, change] : delta) {
      live += change;
      points.push_back(index);
      most[0].push_back(live);
    }
    for (size_t width = 1; 2 * width <= points.size(); width *= 2) {
      const std::vector<int64_t> &row = most.back();
      std::vector<int64_t> next(row.size() - width);
      for (size_t k = 0; k < next.size(); ++k)
        next[k] = std::max(row[k], row[k + width]);
      most.push_back(std::move(next));
    }
    for (size_t i : shared) {
      // Change points within [firstUse, lastUse]: first is one of them.
      size_t from = std::lower_bound(points.begin(), points.end(), buffers[i].firstUse) - points.begin();
      size_t to = std::upper_bound(points.begin(), points.end(), buffers[i].lastUse) - points.begin();
      size_t level = 0;
      while ((size_t(2) << level) <= to - from)
        ++level;
      breadth[i] = uint64_t(std::max(most[level][from], most[level][to - (size_t(1) << level)]));
    }
  }
  orders.push_back([&](size_t a, size_t b) {
    if (breadth[a] != breadth[b])
      return breadth[a] > breadth[b];
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].firstUse < buffers[b].firstUse;
  });
  std::vector<uint64_t> best;
  uint64_t bestEnd = 0;
  std::vector<uint64_t> offsets(buffers.size());
  for (const Less &less : orders)
    for (bool bestFit : {false, true}) {
      std::vector<size_t> order = shared;
      std::stable_sort(order.begin(), order.end(), less);
      uint64_t end = placeShared(buffers, order, bestFit, cursor, alignment, offsets);
      if (best.empty() || end < bestEnd) {
        best = offsets;
        bestEnd = end;
      }
    }
  for (size_t index : shared)
    buffers[index].offset = best[index];
  plan.arenaBytes = std::max<uint64_t>(std::max(bestEnd, cursor), alignment);

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
