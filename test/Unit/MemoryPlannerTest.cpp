//===- MemoryPlannerTest.cpp - Static offsets for buffers -----------------===//

#include "compiler/Conversion/MemoryPlanner.h"

#include <gtest/gtest.h>

namespace zcc {
namespace {

PlannedBuffer live(uint64_t bytes, int64_t first, int64_t last) {
  PlannedBuffer buffer;
  buffer.bytes = bytes;
  buffer.firstUse = first;
  buffer.lastUse = last;
  return buffer;
}

PlannedBuffer persistent(uint64_t bytes) {
  PlannedBuffer buffer;
  buffer.bytes = bytes;
  buffer.persistent = true;
  return buffer;
}

bool overlaps(const PlannedBuffer &a, const PlannedBuffer &b) {
  bool inTime = !(a.lastUse < b.firstUse || b.lastUse < a.firstUse);
  bool inSpace = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
  return inTime && inSpace;
}

TEST(MemoryPlanner, PersistentBuffersComeFirstAndAligned) {
  std::vector<PlannedBuffer> buffers{persistent(10), persistent(300), live(8, 0, 1)};
  MemoryPlan plan = planMemory(buffers, 256);
  EXPECT_EQ(buffers[0].offset, 0u);
  EXPECT_EQ(buffers[1].offset, 256u);
  EXPECT_EQ(plan.persistentBytes, 768u);
  EXPECT_EQ(buffers[2].offset, 768u);
  EXPECT_EQ(plan.arenaBytes, 1024u);
}

TEST(MemoryPlanner, DeadBuffersShareBytes) {
  // a [0,1], b [1,2], c [2,3]: a and c never live together.
  std::vector<PlannedBuffer> buffers{live(100, 0, 1), live(100, 1, 2), live(100, 2, 3)};
  MemoryPlan plan = planMemory(buffers, 64);
  EXPECT_EQ(buffers[0].offset, buffers[2].offset);
  EXPECT_NE(buffers[0].offset, buffers[1].offset);
  EXPECT_EQ(plan.arenaBytes, 256u);
  EXPECT_EQ(plan.peakLiveBytes, 200u);
}

TEST(MemoryPlanner, NoTwoLiveBuffersOverlapOnARandomProgram) {
  std::vector<PlannedBuffer> buffers;
  uint64_t seed = 12345;
  auto next = [&] {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return seed >> 33;
  };
  for (int i = 0; i < 300; ++i) {
    int64_t first = next() % 200;
    buffers.push_back(live(1 + next() % 5000, first, first + next() % 40));
  }
  for (int i = 0; i < 5; ++i)
    buffers.push_back(persistent(1 + next() % 1000));
  MemoryPlan plan = planMemory(buffers, 128);
  for (size_t i = 0; i < buffers.size(); ++i) {
    EXPECT_EQ(buffers[i].offset % 128, 0u);
    EXPECT_LE(buffers[i].offset + buffers[i].bytes, plan.arenaBytes);
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      bool bothPersistent = buffers[i].persistent && buffers[j].persistent;
      bool mixed = buffers[i].persistent != buffers[j].persistent;
      bool spaceOverlap = buffers[i].offset < buffers[j].offset + buffers[j].bytes &&
                          buffers[j].offset < buffers[i].offset + buffers[i].bytes;
      if (bothPersistent || mixed)
        EXPECT_FALSE(spaceOverlap) << i << " and " << j;
      else
        EXPECT_FALSE(overlaps(buffers[i], buffers[j])) << i << " and " << j;
    }
  }
  // Reuse must pay off: the shared region is far below the sum of sizes.
  uint64_t sum = 0;
  for (const PlannedBuffer &buffer : buffers)
    sum += buffer.persistent ? 0 : buffer.bytes;
  EXPECT_LT(plan.arenaBytes - plan.persistentBytes, sum / 2);
  EXPECT_GE(plan.arenaBytes - plan.persistentBytes, plan.peakLiveBytes);
}

} // namespace
} // namespace zcc
