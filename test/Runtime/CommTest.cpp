//===- CommTest.cpp - The cpu backend's in-process communicator -----------===//
//
// Every collective on 1 to 4 ranks (threads) against a serial reference
// computed here: reductions add in rank order in the dtype's compute type and
// round once, which hand-picked values prove (a different order or rounding
// gives a different answer). Also: in-place calls, bit-identical repeated
// runs, sub-groups, send/recv ordering, and the failures that must end a job
// instead of hanging it: a rank that never arrives (timeout), abort(),
// mismatched calls, and bad arguments. Groups time out after 30 s and tests
// that wait for a failure run under a watchdog that aborts the job after
// 20 s, so a communicator that fails to give up, by its timeout or by an
// abort, fails the test instead of hanging it. Built a second time
// with ZCC_COUNT_ALLOCATIONS, where collectives that succeed must allocate
// nothing.
//
//===----------------------------------------------------------------------===//

#include "runtime/Comm/LocalCommunicator.h"

#include "kernels/cpu/Float16.h"
#ifdef ZCC_COUNT_ALLOCATIONS
#include "test/Runtime/CountingAllocator.h"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

namespace zcc {
namespace {

using cpu::BFloat16;
using cpu::Half;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> {
  static constexpr plan::DType value = plan::F32;
};
template <> struct DTypeOf<double> {
  static constexpr plan::DType value = plan::F64;
};
template <> struct DTypeOf<Half> {
  static constexpr plan::DType value = plan::F16;
};
template <> struct DTypeOf<BFloat16> {
  static constexpr plan::DType value = plan::BF16;
};
template <> struct DTypeOf<int64_t> {
  static constexpr plan::DType value = plan::I64;
};
template <> struct DTypeOf<int32_t> {
  static constexpr plan::DType value = plan::I32;
};
template <> struct DTypeOf<int8_t> {
  static constexpr plan::DType value = plan::I8;
};

template <typename T> constexpr bool kIsFloat = !std::is_integral_v<T>;

/// Tests use a 30 s timeout rather than the default 300 s: a communicator
/// whose abort fails still ends every test within it, failing instead of
/// hanging.
std::unique_ptr<LocalCommunicatorGroup>
makeGroup(int size, std::chrono::milliseconds timeout = 30s) {
  LocalCommunicatorOptions options;
  options.timeout = timeout;
  auto group = LocalCommunicatorGroup::create(size, options);
  EXPECT_TRUE(group.isOk()) << group.status().toString();
  return std::move(group).value();
}

/// Runs `body` on one thread per rank of `group` and joins them.
void runRanks(LocalCommunicatorGroup &group,
              const std::function<void(Communicator &)> &body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < group.size(); ++rank)
    threads.emplace_back([&, rank] { body(*group.communicator(rank)); });
  for (std::thread &thread : threads)
    thread.join();
}

/// Aborts the job through `communicator` unless dismissed within `limit`: a
/// communicator that never gives up then fails the test's expectations
/// instead of hanging it.
class Watchdog {
public:
  Watchdog(Communicator &communicator, std::chrono::seconds limit = 20s)
      : thread_([this, &communicator, limit] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!dismissed_.wait_for(lock, limit, [this] { return done_; }))
            communicator.abort("test watchdog");
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    dismissed_.notify_all();
    thread_.join();
  }

private:
  std::mutex mutex_;
  std::condition_variable dismissed_;
  bool done_ = false;
  std::thread thread_;
};

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool startsWith(const std::string &text, const std::string &prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

//===----------------------------------------------------------------------===//
// The serial reference
//===----------------------------------------------------------------------===//

/// The reference sum of storage type T: floats widened exactly to float (or
/// double for f64), summed, rounded once; integers wrap.
template <typename T> struct Reference {
  using Acc = cpu::Compute<T>;
  static Acc widen(T value) { return cpu::load(value); }
  static T narrow(Acc value) { return cpu::store<T>(value); }
};
template <> struct Reference<int64_t> {
  using Acc = uint64_t;
  static Acc widen(int64_t value) { return static_cast<uint64_t>(value); }
  static int64_t narrow(Acc value) { return static_cast<int64_t>(value); }
};
template <> struct Reference<int32_t> {
  using Acc = uint32_t;
  static Acc widen(int32_t value) { return static_cast<uint32_t>(value); }
  static int32_t narrow(Acc value) { return static_cast<int32_t>(value); }
};

/// ((x_0 + x_1) + x_2) + ... per element, divided by the number of ranks
/// for an average, then rounded.
template <typename T>
std::vector<T> serialReduce(const std::vector<std::vector<T>> &inputs,
                            ReduceOp op) {
  using Acc = typename Reference<T>::Acc;
  std::vector<T> result(inputs[0].size());
  for (size_t i = 0; i < result.size(); ++i) {
    Acc sum = Reference<T>::widen(inputs[0][i]);
    for (size_t rank = 1; rank < inputs.size(); ++rank)
      sum = sum + Reference<T>::widen(inputs[rank][i]);
    if constexpr (kIsFloat<T>) {
      if (op == ReduceOp::kAverage)
        sum = sum / static_cast<Acc>(inputs.size());
    }
    result[i] = Reference<T>::narrow(sum);
  }
  return result;
}

/// Values of many magnitudes, so that the order of a float sum shows in its
/// low bits; integers over their full range, so that sums wrap.
template <typename T> T randomValue(std::mt19937_64 &random) {
  if constexpr (!kIsFloat<T>) {
    return static_cast<T>(random());
  } else {
    std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
    std::uniform_int_distribution<int> exponent(-30, 6);
    double value = std::ldexp(mantissa(random), exponent(random));
    if constexpr (std::is_same_v<T, double>)
      return value;
    else if constexpr (std::is_same_v<T, float>)
      return static_cast<float>(value);
    else
      return cpu::store<T>(static_cast<float>(value));
  }
}

template <typename T>
std::vector<std::vector<T>> randomInputs(int ranks, uint64_t count,
                                         uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<std::vector<T>> inputs(ranks, std::vector<T>(count));
  for (auto &input : inputs)
    for (T &value : input)
      value = randomValue<T>(random);
  return inputs;
}

template <typename T> uint64_t bitsOf(const T &value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

/// Bit-for-bit equality (so -0 differs from 0 and NaNs compare).
template <typename T>
::testing::AssertionResult sameBits(const T *actual, const T *expected,
                                    uint64_t count) {
  for (uint64_t i = 0; i < count; ++i)
    if (std::memcmp(&actual[i], &expected[i], sizeof(T)) != 0)
      return ::testing::AssertionFailure()
             << "element " << i << " of " << count << " is 0x" << std::hex
             << bitsOf(actual[i]) << ", expected 0x" << bitsOf(expected[i]);
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult sameBits(const std::vector<T> &actual,
                                    const std::vector<T> &expected) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << actual.size() << " elements, expected " << expected.size();
  return sameBits(actual.data(), expected.data(), actual.size());
}

template <typename T> std::vector<ReduceOp> reduceOpsFor() {
  if constexpr (kIsFloat<T>)
    return {ReduceOp::kSum, ReduceOp::kAverage};
  else
    return {ReduceOp::kSum};
}

/// Element counts that leave some ranks' slices empty (1 on 4 ranks), split
/// unevenly (5, 1001) and span several reduction blocks (1001).
const uint64_t kCounts[] = {0, 1, 5, 1001};

void expectOk(const Status &status) {
  EXPECT_TRUE(status.isOk()) << status.toString();
}

//===----------------------------------------------------------------------===//
// Reductions of every reducible dtype against the serial reference
//===----------------------------------------------------------------------===//

template <typename T> class CommReduceTest : public ::testing::Test {};
using ReducibleTypes =
    ::testing::Types<float, double, Half, BFloat16, int64_t, int32_t>;
TYPED_TEST_SUITE(CommReduceTest, ReducibleTypes);

TYPED_TEST(CommReduceTest, AllReduceMatchesSerialReference) {
  using T = TypeParam;
  for (ReduceOp op : reduceOpsFor<T>())
    for (int ranks = 1; ranks <= 4; ++ranks)
      for (uint64_t count : kCounts) {
        SCOPED_TRACE(::testing::Message()
                     << reduceOpName(op) << " on " << ranks << " ranks, "
                     << count << " elements");
        auto inputs = randomInputs<T>(ranks, count, 100 * ranks + count);
        std::vector<T> expected = serialReduce(inputs, op);
        std::vector<std::vector<T>> outputs(ranks, std::vector<T>(count));
        auto group = makeGroup(ranks);
        runRanks(*group, [&](Communicator &comm) {
          int rank = comm.rank();
          expectOk(comm.allReduce(inputs[rank].data(), outputs[rank].data(),
                                  count, DTypeOf<T>::value, op));
        });
        for (int rank = 0; rank < ranks; ++rank)
          EXPECT_TRUE(sameBits(outputs[rank], expected)) << "rank " << rank;
      }
}

TYPED_TEST(CommReduceTest, AllReduceInPlace) {
  using T = TypeParam;
  for (ReduceOp op : reduceOpsFor<T>())
    for (int ranks = 1; ranks <= 4; ++ranks)
      for (uint64_t count : kCounts) {
        SCOPED_TRACE(::testing::Message()
                     << reduceOpName(op) << " on " << ranks << " ranks, "
                     << count << " elements");
        auto inputs = randomInputs<T>(ranks, count, 7 * ranks + count);
        std::vector<T> expected = serialReduce(inputs, op);
        std::vector<std::vector<T>> buffers = inputs;
        auto group = makeGroup(ranks);
        runRanks(*group, [&](Communicator &comm) {
          T *buffer = buffers[comm.rank()].data();
          expectOk(
              comm.allReduce(buffer, buffer, count, DTypeOf<T>::value, op));
        });
        for (int rank = 0; rank < ranks; ++rank)
          EXPECT_TRUE(sameBits(buffers[rank], expected)) << "rank " << rank;
      }
}

TYPED_TEST(CommReduceTest, ReduceScatterGivesEachRankItsChunk) {
  using T = TypeParam;
  for (ReduceOp op : reduceOpsFor<T>())
    for (int ranks = 1; ranks <= 4; ++ranks)
      for (uint64_t chunk : {0, 1, 3, 300}) {
        uint64_t count = chunk * ranks;
        SCOPED_TRACE(::testing::Message()
                     << reduceOpName(op) << " on " << ranks << " ranks, "
                     << count << " elements");
        auto inputs = randomInputs<T>(ranks, count, 31 * ranks + count);
        std::vector<T> expected = serialReduce(inputs, op);
        std::vector<std::vector<T>> outputs(ranks, std::vector<T>(chunk));
        // In place as well: rank r's output is chunk r of its own input.
        std::vector<std::vector<T>> inPlace = inputs;
        auto group = makeGroup(ranks);
        runRanks(*group, [&](Communicator &comm) {
          int rank = comm.rank();
          expectOk(comm.reduceScatter(inputs[rank].data(), outputs[rank].data(),
                                      count, DTypeOf<T>::value, op));
          T *buffer = inPlace[rank].data();
          expectOk(comm.reduceScatter(buffer, buffer + rank * chunk, count,
                                      DTypeOf<T>::value, op));
        });
        for (int rank = 0; rank < ranks; ++rank) {
          EXPECT_TRUE(sameBits(outputs[rank].data(),
                               expected.data() + rank * chunk, chunk))
              << "rank " << rank;
          EXPECT_TRUE(sameBits(inPlace[rank].data() + rank * chunk,
                               expected.data() + rank * chunk, chunk))
              << "rank " << rank << ", in place";
        }
      }
}

//===----------------------------------------------------------------------===//
// Reductions on hand-picked values: the order and the rounding
//===----------------------------------------------------------------------===//

/// Runs an allReduce of one value per rank and returns every rank's result.
template <typename T>
std::vector<T> allReduceOne(const std::vector<T> &values, ReduceOp op) {
  int ranks = static_cast<int>(values.size());
  std::vector<T> results(ranks);
  auto group = makeGroup(ranks);
  runRanks(*group, [&](Communicator &comm) {
    int rank = comm.rank();
    expectOk(comm.allReduce(&values[rank], &results[rank], 1, DTypeOf<T>::value,
                            op));
  });
  return results;
}

TEST(Comm, F32SumsInRankOrder) {
  // ((1 + 1e8) + -1e8) is 0 in f32 (1e8 + 1 rounds to 1e8); any order that
  // adds -1e8 before 1 gives 1.
  for (float result : allReduceOne<float>({1.0f, 1e8f, -1e8f}, ReduceOp::kSum))
    EXPECT_EQ(bitsOf(result), bitsOf(0.0f));
  for (float result : allReduceOne<float>({1e8f, -1e8f, 1.0f}, ReduceOp::kSum))
    EXPECT_EQ(result, 1.0f);
  // With a fourth rank: ((1e8 + 1) + 1) + -1e8 = 0, not 2.
  for (float result :
       allReduceOne<float>({1e8f, 1.0f, 1.0f, -1e8f}, ReduceOp::kSum))
    EXPECT_EQ(result, 0.0f);
}

TEST(Comm, F32AverageDividesTheSum) {
  for (float result :
       allReduceOne<float>({1.0f, 1.0f, 2.0f}, ReduceOp::kAverage))
    EXPECT_EQ(bitsOf(result), bitsOf(4.0f / 3.0f));
}

TEST(Comm, F16SumsInFloatAndRoundsOnce) {
  // 1 + 2^-11 + 2^-11 = 1 + 2^-10, one f16 ulp above 1. Rounding to f16
  // after each addition would tie to even twice and give 1.
  std::vector<Half> values = {Half{0x3c00}, Half{0x1000}, Half{0x1000}};
  for (Half result : allReduceOne(values, ReduceOp::kSum))
    EXPECT_EQ(result.bits, 0x3c01);
  // The average rounds once too: (1 + 1 + 2) / 3 in float, then to f16.
  values = {Half{0x3c00}, Half{0x3c00}, Half{0x4000}};
  for (Half result : allReduceOne(values, ReduceOp::kAverage))
    EXPECT_EQ(result.bits, 0x3d55);
}

TEST(Comm, BF16SumsInFloatAndRoundsOnce) {
  // 1 + 2^-8 + 2^-8 = 1 + 2^-7, one bf16 ulp above 1; per-step rounding
  // gives 1.
  std::vector<BFloat16> values = {BFloat16{0x3f80}, BFloat16{0x3b80},
                                  BFloat16{0x3b80}};
  for (BFloat16 result : allReduceOne(values, ReduceOp::kSum))
    EXPECT_EQ(result.bits, 0x3f81);
}

TEST(Comm, F64SumsInDouble) {
  // (1 + 2^-53) + 2^-53 is 1 in f64 (each addition ties to even), while
  // (2^-53 + 2^-53) + 1 is 1 + 2^-52: the order shows, and a sum in float
  // would give 1 for both.
  std::vector<double> values = {1.0, 0x1p-53, 0x1p-53};
  for (double result : allReduceOne(values, ReduceOp::kSum))
    EXPECT_EQ(result, 1.0);
  values = {0x1p-53, 0x1p-53, 1.0};
  for (double result : allReduceOne(values, ReduceOp::kSum))
    EXPECT_EQ(result, 1.0 + 0x1p-52);
}

TEST(Comm, IntegersSumExactly) {
  // 2^62 + 2^61 - 1 has no double, so no detour through floating point
  // gives it back.
  int64_t big = int64_t(1) << 62;
  for (int64_t result : allReduceOne<int64_t>(
           {big + 1, (int64_t(1) << 61) + 3, -5}, ReduceOp::kSum))
    EXPECT_EQ(result, big + (int64_t(1) << 61) - 1);
  // Overflow wraps as two's complement.
  for (int64_t result : allReduceOne<int64_t>(
           {std::numeric_limits<int64_t>::max(), 1}, ReduceOp::kSum))
    EXPECT_EQ(result, std::numeric_limits<int64_t>::min());
  for (int32_t result :
       allReduceOne<int32_t>({16777217, 1, -3}, ReduceOp::kSum))
    EXPECT_EQ(result, 16777215);
}

TEST(Comm, RepeatedRunsAreBitIdentical) {
  // Many threads, an uneven split, and repeated runs on fresh and reused
  // groups: every rank of every run must produce the same bits.
  const int ranks = 4;
  const uint64_t count = 10007;
  auto inputs = randomInputs<float>(ranks, count, 42);
  std::vector<float> expected = serialReduce(inputs, ReduceOp::kSum);
  auto reused = makeGroup(ranks);
  for (int run = 0; run < 6; ++run) {
    auto fresh = makeGroup(ranks);
    LocalCommunicatorGroup &group = run % 2 ? *reused : *fresh;
    std::vector<std::vector<float>> outputs(ranks, std::vector<float>(count));
    runRanks(group, [&](Communicator &comm) {
      int rank = comm.rank();
      expectOk(comm.allReduce(inputs[rank].data(), outputs[rank].data(), count,
                              plan::F32, ReduceOp::kSum));
    });
    for (int rank = 0; rank < ranks; ++rank)
      EXPECT_TRUE(sameBits(outputs[rank], expected))
          << "run " << run << ", rank " << rank;
  }
  // The values are such that the order matters: summing in reverse rank
  // order gives other bits for some elements.
  std::vector<std::vector<float>> reversed(inputs.rbegin(), inputs.rend());
  EXPECT_FALSE(sameBits(serialReduce(reversed, ReduceOp::kSum), expected));
}

TEST(Comm, BuffersAreFreeOnceACallReturns) {
  // The step loop reuses a buffer as soon as a collective returns: by then
  // no other rank may still read this rank's input or write its output.
  // Each rank copies its result away and scribbles over both buffers at
  // once; a rank that returned early would corrupt the others' sums or miss
  // part of its own result.
  const int ranks = 4;
  const uint64_t count = 1 << 18;
  auto inputs = randomInputs<float>(ranks, count, 3);
  std::vector<float> expected = serialReduce(inputs, ReduceOp::kSum);
  auto group = makeGroup(ranks);
  for (int run = 0; run < 3; ++run) {
    std::vector<std::vector<float>> buffers = inputs;
    std::vector<std::vector<float>> outputs(ranks, std::vector<float>(count));
    std::vector<std::vector<float>> results(ranks);
    runRanks(*group, [&](Communicator &comm) {
      int rank = comm.rank();
      expectOk(comm.allReduce(buffers[rank].data(), outputs[rank].data(), count,
                              plan::F32, ReduceOp::kSum));
      results[rank] = outputs[rank];
      std::fill(buffers[rank].begin(), buffers[rank].end(), NAN);
      std::fill(outputs[rank].begin(), outputs[rank].end(), NAN);
    });
    for (int rank = 0; rank < ranks; ++rank)
      EXPECT_TRUE(sameBits(results[rank], expected))
          << "run " << run << ", rank " << rank;
  }
}

//===----------------------------------------------------------------------===//
// allGather and broadcast
//===----------------------------------------------------------------------===//

template <typename T> void checkAllGather() {
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (uint64_t count : kCounts) {
      SCOPED_TRACE(::testing::Message()
                   << ranks << " ranks, " << count << " elements");
      auto inputs = randomInputs<T>(ranks, count, 5 * ranks + count);
      std::vector<T> expected;
      for (const auto &input : inputs)
        expected.insert(expected.end(), input.begin(), input.end());
      std::vector<std::vector<T>> outputs(ranks, std::vector<T>(ranks * count));
      // In place: each rank's input already sits in its own slot.
      std::vector<std::vector<T>> inPlace(ranks, std::vector<T>(ranks * count));
      for (int rank = 0; rank < ranks; ++rank)
        std::copy(inputs[rank].begin(), inputs[rank].end(),
                  inPlace[rank].begin() + rank * count);
      auto group = makeGroup(ranks);
      runRanks(*group, [&](Communicator &comm) {
        int rank = comm.rank();
        expectOk(comm.allGather(inputs[rank].data(), outputs[rank].data(),
                                count, DTypeOf<T>::value));
        T *buffer = inPlace[rank].data();
        expectOk(comm.allGather(buffer + rank * count, buffer, count,
                                DTypeOf<T>::value));
      });
      for (int rank = 0; rank < ranks; ++rank) {
        EXPECT_TRUE(sameBits(outputs[rank], expected)) << "rank " << rank;
        EXPECT_TRUE(sameBits(inPlace[rank], expected))
            << "rank " << rank << ", in place";
      }
    }
}

TEST(Comm, AllGatherIsRankMajor) {
  checkAllGather<float>();
  checkAllGather<Half>();
  checkAllGather<int64_t>();
  checkAllGather<int8_t>();
}

TEST(Comm, BroadcastFromEveryRoot) {
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (int root = 0; root < ranks; ++root)
      for (uint64_t count : kCounts) {
        SCOPED_TRACE(::testing::Message() << ranks << " ranks, root " << root
                                          << ", " << count << " elements");
        auto inputs = randomInputs<double>(ranks, count, 9 * ranks + root);
        std::vector<std::vector<double>> outputs(
            ranks, std::vector<double>(count, -1.0));
        // In place on the root; the other ranks pass no input.
        std::vector<std::vector<double>> inPlace(
            ranks, std::vector<double>(count, -1.0));
        inPlace[root] = inputs[root];
        auto group = makeGroup(ranks);
        runRanks(*group, [&](Communicator &comm) {
          int rank = comm.rank();
          expectOk(comm.broadcast(inputs[rank].data(), outputs[rank].data(),
                                  count, plan::F64, root));
          const double *input = rank == root ? inPlace[rank].data() : nullptr;
          expectOk(comm.broadcast(input, inPlace[rank].data(), count, plan::F64,
                                  root));
        });
        for (int rank = 0; rank < ranks; ++rank) {
          EXPECT_TRUE(sameBits(outputs[rank], inputs[root])) << "rank " << rank;
          EXPECT_TRUE(sameBits(inPlace[rank], inputs[root]))
              << "rank " << rank << ", in place";
        }
      }
}

TEST(Comm, BarrierWaitsForEveryRank) {
  const int ranks = 4;
  std::atomic<int> arrived{0};
  auto group = makeGroup(ranks);
  runRanks(*group, [&](Communicator &comm) {
    // The last ranks come late; nobody may leave before they arrive.
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * comm.rank()));
    arrived.fetch_add(1);
    expectOk(comm.barrier());
    EXPECT_EQ(arrived.load(), ranks) << "rank " << comm.rank();
  });
}

//===----------------------------------------------------------------------===//
// Sub-groups
//===----------------------------------------------------------------------===//

TEST(Comm, SubgroupsRunIndependentlyWithTheirOwnRankOrder) {
  // Two data-parallel groups of a 2 x 2 mesh, the second listed in reverse:
  // its rank 0 is global rank 3.
  auto world = makeGroup(4);
  auto even = world->createSubgroup({0, 2});
  auto odd = world->createSubgroup({3, 1});
  ASSERT_TRUE(even.isOk()) << even.status().toString();
  ASSERT_TRUE(odd.isOk()) << odd.status().toString();
  LocalCommunicatorGroup &evenGroup = **even, &oddGroup = **odd;
  EXPECT_EQ(oddGroup.size(), 2);
  EXPECT_EQ(oddGroup.globalRank(0), 3);
  EXPECT_EQ(oddGroup.globalRank(1), 1);
  EXPECT_EQ(oddGroup.globalRank(2), -1);

  const uint64_t count = 3;
  std::vector<std::vector<float>> inputs = {
      {1, 2, 3}, {10, 20, 30}, {100, 200, 300}, {1000, 2000, 3000}};
  std::vector<std::vector<float>> sums(4, std::vector<float>(count));
  std::vector<std::vector<float>> gathered(4, std::vector<float>(2 * count));
  std::vector<std::vector<float>> worldSums(4, std::vector<float>(count));
  runRanks(*world, [&](Communicator &worldComm) {
    int global = worldComm.rank();
    LocalCommunicatorGroup &mine = global % 2 ? oddGroup : evenGroup;
    int local = global == 3 ? 0 : global == 1 ? 1 : global / 2;
    Communicator &comm = *mine.communicator(local);
    EXPECT_EQ(comm.rank(), local);
    EXPECT_EQ(comm.size(), 2);
    expectOk(comm.allReduce(inputs[global].data(), sums[global].data(), count,
                            plan::F32, ReduceOp::kSum));
    expectOk(comm.allGather(inputs[global].data(), gathered[global].data(),
                            count, plan::F32));
    expectOk(worldComm.allReduce(inputs[global].data(),
                                 worldSums[global].data(), count, plan::F32,
                                 ReduceOp::kSum));
  });
  std::vector<float> evenSum = {101, 202, 303}, oddSum = {1010, 2020, 3030};
  std::vector<float> oddGathered = {1000, 2000, 3000, 10, 20, 30};
  std::vector<float> evenGathered = {1, 2, 3, 100, 200, 300};
  for (int global = 0; global < 4; ++global) {
    SCOPED_TRACE(::testing::Message() << "rank " << global);
    EXPECT_EQ(sums[global], global % 2 ? oddSum : evenSum);
    EXPECT_EQ(gathered[global], global % 2 ? oddGathered : evenGathered);
    EXPECT_EQ(worldSums[global], (std::vector<float>{1111, 2222, 3333}));
  }
}

TEST(Comm, SubgroupsNeedDistinctRanksOfTheJob) {
  auto world = makeGroup(3);
  auto empty = world->createSubgroup({});
  ASSERT_FALSE(empty.isOk());
  EXPECT_EQ(empty.status().message(),
            "a communicator sub-group needs at least one rank");
  auto outside = world->createSubgroup({0, 3});
  ASSERT_FALSE(outside.isOk());
  EXPECT_EQ(outside.status().message(),
            "rank 3 of a sub-group is not a rank of the job of 3 ranks");
  auto twice = world->createSubgroup({1, 1});
  ASSERT_FALSE(twice.isOk());
  EXPECT_EQ(twice.status().message(), "rank 1 appears twice in a sub-group");
  // A sub-group can make sub-groups of the job too.
  auto pair = world->createSubgroup({2, 0});
  ASSERT_TRUE(pair.isOk());
  auto single = (*pair)->createSubgroup({1});
  ASSERT_TRUE(single.isOk());
  EXPECT_EQ((*single)->globalRank(0), 1);
}

TEST(Comm, AbortReachesEveryGroupOfTheJob) {
  // Rank 3 waits in its data-parallel group for rank 1, which never comes;
  // rank 0 aborts the job through the world communicator. Messages name
  // global ranks and the group.
  auto world = makeGroup(4);
  auto odd = world->createSubgroup({3, 1});
  ASSERT_TRUE(odd.isOk());
  Watchdog watchdog(*world->communicator(0));
  Status waiting;
  Clock::time_point start = Clock::now();
  std::thread rank3([&] {
    float value = 1;
    waiting = (*odd)->communicator(0)->allReduce(&value, &value, 1, plan::F32,
                                                 ReduceOp::kSum);
  });
  std::this_thread::sleep_for(50ms);
  world->communicator(0)->abort("stage 0 failed");
  rank3.join();
  EXPECT_LT(secondsSince(start), 10.0);
  EXPECT_EQ(waiting.code(), StatusCode::kUnavailable);
  EXPECT_EQ(waiting.message(),
            "all_reduce on rank 3 in group [3, 1]: aborted by rank 0: stage 0 "
            "failed");
  EXPECT_TRUE(world->isAborted());
  EXPECT_TRUE((*odd)->isAborted());
}

//===----------------------------------------------------------------------===//
// send and recv
//===----------------------------------------------------------------------===//

TEST(Comm, SendRecvMatchInOrderPerPair) {
  // Rank 0 sends three messages and rank 1 two to rank 2, which takes all of
  // rank 0's first: each pair's messages arrive in the order sent, and
  // another pair's do not interfere.
  auto group = makeGroup(3);
  std::vector<std::vector<int32_t>> fromZero = {{1}, {2, 3, 4, 5}, {}};
  fromZero[2].resize(1000);
  for (int i = 0; i < 1000; ++i)
    fromZero[2][i] = 1000 + i;
  std::vector<std::vector<int32_t>> fromOne = {{-1, -2}, {-3}};
  std::vector<std::vector<int32_t>> received(5);
  runRanks(*group, [&](Communicator &comm) {
    if (comm.rank() == 0)
      for (const auto &message : fromZero)
        expectOk(comm.send(message.data(), message.size(), plan::I32, 2));
    if (comm.rank() == 1)
      for (const auto &message : fromOne)
        expectOk(comm.send(message.data(), message.size(), plan::I32, 2));
    if (comm.rank() == 2) {
      for (int i = 0; i < 3; ++i) {
        received[i].resize(fromZero[i].size());
        expectOk(
            comm.recv(received[i].data(), received[i].size(), plan::I32, 0));
      }
      for (int i = 0; i < 2; ++i) {
        received[3 + i].resize(fromOne[i].size());
        expectOk(comm.recv(received[3 + i].data(), received[3 + i].size(),
                           plan::I32, 1));
      }
    }
  });
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(received[i], fromZero[i]) << "message " << i << " from rank 0";
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(received[3 + i], fromOne[i]) << "message " << i << " from rank 1";
}

TEST(Comm, SendRecvAroundARing) {
  // A pipeline pattern: each rank passes a value to the next, even ranks
  // sending first so that no two ranks wait for each other.
  for (int ranks = 2; ranks <= 4; ++ranks) {
    auto group = makeGroup(ranks);
    std::vector<double> received(ranks, -1);
    runRanks(*group, [&](Communicator &comm) {
      int rank = comm.rank(), next = (rank + 1) % ranks,
          previous = (rank + ranks - 1) % ranks;
      double value = 10.0 * rank;
      for (int turn = 0; turn < 2; ++turn) {
        if ((turn == 0) == (rank % 2 == 0))
          expectOk(comm.send(&value, 1, plan::F64, next));
        else
          expectOk(comm.recv(&received[rank], 1, plan::F64, previous));
      }
    });
    for (int rank = 0; rank < ranks; ++rank)
      EXPECT_EQ(received[rank], 10.0 * ((rank + ranks - 1) % ranks))
          << ranks << " ranks, rank " << rank;
  }
}

TEST(Comm, MismatchedSendAndRecvFailBothSides) {
  auto group = makeGroup(2);
  Watchdog watchdog(*group->communicator(0));
  std::vector<float> data(8, 1.0f);
  Status sent, received;
  runRanks(*group, [&](Communicator &comm) {
    if (comm.rank() == 0)
      sent = comm.send(data.data(), 4, plan::F32, 1);
    else
      received = comm.recv(data.data(), 8, plan::F32, 0);
  });
  EXPECT_EQ(received.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(received.message(), "recv from rank 0 on rank 1: expects 8 f32 "
                                "elements but rank 0 sends 4 f32 elements");
  EXPECT_EQ(sent.code(), StatusCode::kUnavailable);
  EXPECT_EQ(sent.message(), "send to rank 1 on rank 0: aborted by rank 1: " +
                                received.message());
}

TEST(Comm, SendAndRecvTimeOut) {
  {
    auto group = makeGroup(2, 200ms);
    Watchdog watchdog(*group->communicator(0));
    float value = 0;
    Clock::time_point start = Clock::now();
    Status status = group->communicator(1)->recv(&value, 1, plan::F32, 0);
    double elapsed = secondsSince(start);
    EXPECT_GE(elapsed, 0.2);
    EXPECT_LT(elapsed, 10.0);
    EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded);
    EXPECT_EQ(status.message(),
              "recv from rank 0 on rank 1 timed out after 0.2 s waiting for "
              "rank 0");
    // The job is aborted: rank 0's send now fails at once.
    status = group->communicator(0)->send(&value, 1, plan::F32, 1);
    EXPECT_EQ(status.message(),
              "send to rank 1 on rank 0: aborted by rank 1: recv from rank 0 "
              "on rank 1 timed out after 0.2 s waiting for rank 0");
  }
  {
    auto group = makeGroup(2, 200ms);
    Watchdog watchdog(*group->communicator(0));
    float value = 0;
    Status status = group->communicator(0)->send(&value, 1, plan::F32, 1);
    EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded);
    EXPECT_EQ(status.message(),
              "send to rank 1 on rank 0 timed out after 0.2 s waiting for "
              "rank 1");
  }
}

//===----------------------------------------------------------------------===//
// Failures end the job; none hangs it
//===----------------------------------------------------------------------===//

TEST(Comm, CollectiveTimesOutNamingTheMissingRank) {
  // Rank 3 never arrives; the others give up after 0.2 s, and rank 3's late
  // call fails at once.
  const int ranks = 4;
  auto group = makeGroup(ranks, 200ms);
  Watchdog watchdog(*group->communicator(0));
  std::vector<Status> statuses(ranks);
  std::vector<float> values(ranks, 1.0f);
  Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank)
    threads.emplace_back([&, rank] {
      statuses[rank] = group->communicator(rank)->allReduce(
          &values[rank], &values[rank], 1, plan::F32, ReduceOp::kSum);
    });
  for (std::thread &thread : threads)
    thread.join();
  double elapsed = secondsSince(start);
  EXPECT_GE(elapsed, 0.2);
  EXPECT_LT(elapsed, 10.0);
  int timedOut = 0;
  for (int rank = 0; rank < 3; ++rank) {
    const Status &status = statuses[rank];
    SCOPED_TRACE(status.toString());
    std::string self = formatString("all_reduce on rank %d", rank);
    if (status.code() == StatusCode::kDeadlineExceeded) {
      ++timedOut;
      EXPECT_EQ(status.message(),
                self + " timed out after 0.2 s waiting for rank 3");
    } else {
      // A rank that had not timed out yet learns of the abort.
      EXPECT_EQ(status.code(), StatusCode::kUnavailable);
      EXPECT_TRUE(startsWith(status.message(), self + ": aborted by rank "));
      EXPECT_TRUE(endsWith(status.message(),
                           " timed out after 0.2 s waiting for rank 3"));
    }
  }
  EXPECT_GE(timedOut, 1);
  EXPECT_TRUE(group->isAborted());

  Status late = group->communicator(3)->allReduce(&values[3], &values[3], 1,
                                                  plan::F32, ReduceOp::kSum);
  EXPECT_EQ(late.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(startsWith(late.message(), "all_reduce on rank 3: aborted by "))
      << late.message();
  EXPECT_EQ(values[3], 1.0f);
}

TEST(Comm, TimeoutListsEveryMissingRank) {
  auto group = makeGroup(4, 100ms);
  Watchdog watchdog(*group->communicator(0));
  Status status = group->communicator(1)->barrier();
  EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(
      status.message(),
      "barrier on rank 1 timed out after 0.1 s waiting for ranks 0, 2, 3");
}

TEST(Comm, AbortFailsTheOtherRanksPromptly) {
  // Only the abort can end these waits within the 10 s allowed.
  const int ranks = 3;
  auto group = makeGroup(ranks);
  Watchdog watchdog(*group->communicator(0));
  std::vector<Status> statuses(ranks);
  Clock::time_point start = Clock::now();
  runRanks(*group, [&](Communicator &comm) {
    float value = 1.0f;
    switch (comm.rank()) {
    case 0:
      statuses[0] =
          comm.allReduce(&value, &value, 1, plan::F32, ReduceOp::kSum);
      break;
    case 1:
      statuses[1] = comm.recv(&value, 1, plan::F32, 2);
      break;
    case 2:
      std::this_thread::sleep_for(50ms);
      comm.abort("kernel matmul failed");
      statuses[2] = comm.barrier();
      break;
    }
  });
  EXPECT_LT(secondsSince(start), 10.0);
  EXPECT_EQ(statuses[0].code(), StatusCode::kUnavailable);
  EXPECT_EQ(statuses[0].message(),
            "all_reduce on rank 0: aborted by rank 2: kernel matmul failed");
  EXPECT_EQ(statuses[1].message(),
            "recv from rank 2 on rank 1: aborted by rank 2: kernel matmul "
            "failed");
  EXPECT_EQ(statuses[2].message(),
            "barrier on rank 2: aborted by rank 2: kernel matmul failed");
  // Only the first abort's reason is kept.
  group->communicator(1)->abort("later");
  Status later = group->communicator(1)->barrier();
  EXPECT_EQ(later.message(),
            "barrier on rank 1: aborted by rank 2: kernel matmul failed");
}

TEST(Comm, MismatchedCollectivesFailEveryRank) {
  auto group = makeGroup(2);
  Watchdog watchdog(*group->communicator(0));
  std::vector<float> data(8, 1.0f);
  std::vector<Status> statuses(2);
  runRanks(*group, [&](Communicator &comm) {
    int rank = comm.rank();
    statuses[rank] = comm.allReduce(data.data(), data.data(), rank ? 4 : 8,
                                    plan::F32, ReduceOp::kSum);
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(statuses[rank].code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(statuses[rank].message(),
              formatString("all_reduce on rank %d: the ranks made different "
                           "calls: rank 0 called all_reduce (sum) of 8 f32, "
                           "rank 1 called all_reduce (sum) of 4 f32",
                           rank));
  }
  EXPECT_EQ(data, std::vector<float>(8, 1.0f)) << "no rank may have reduced";
  EXPECT_TRUE(group->isAborted());

  // A barrier against a broadcast is a mismatch too, not a deadlock.
  auto second = makeGroup(2);
  Watchdog secondWatchdog(*second->communicator(0));
  runRanks(*second, [&](Communicator &comm) {
    int rank = comm.rank();
    statuses[rank] =
        rank ? comm.barrier()
             : comm.broadcast(data.data(), data.data(), 8, plan::F32, 0);
  });
  EXPECT_EQ(statuses[1].message(),
            "barrier on rank 1: the ranks made different calls: rank 0 called "
            "broadcast from group rank 0 of 8 f32, rank 1 called barrier");
}

TEST(Comm, BadArgumentsAreErrors) {
  // Argument errors come back at once, before the call waits for anyone,
  // and leave the group usable.
  auto group = makeGroup(3);
  Communicator &comm = *group->communicator(1);
  std::vector<float> data(30);
  auto expectInvalid = [](const Status &status, const std::string &message) {
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << message;
    EXPECT_EQ(status.message(), message);
  };
  expectInvalid(comm.reduceScatter(data.data(), data.data(), 10, plan::F32,
                                   ReduceOp::kSum),
                "reduce_scatter on rank 1: count 10 is not divisible by the "
                "number of ranks (3)");
  expectInvalid(comm.allReduce(data.data(), data.data(), 4,
                               static_cast<plan::DType>(99), ReduceOp::kSum),
                "all_reduce on rank 1: unknown dtype 99");
  expectInvalid(
      comm.allGather(data.data(), data.data(), 4, plan::DTYPE_UNSPECIFIED),
      "all_gather on rank 1: unknown dtype 0");
  expectInvalid(
      comm.allReduce(data.data(), data.data(), 4, plan::I8, ReduceOp::kSum),
      "all_reduce on rank 1: cannot reduce i8 elements (f32, f64, f16, bf16, "
      "i64 and i32 can be)");
  expectInvalid(comm.reduceScatter(data.data(), data.data(), 6, plan::I64,
                                   ReduceOp::kAverage),
                "reduce_scatter on rank 1: an average needs a float dtype "
                "(f32, f64, f16 or bf16), not i64");
  expectInvalid(comm.allReduce(data.data(), data.data(), 4, plan::F32,
                               static_cast<ReduceOp>(7)),
                "all_reduce on rank 1: unknown reduce op 7");
  expectInvalid(
      comm.allReduce(nullptr, data.data(), 4, plan::F32, ReduceOp::kSum),
      "all_reduce on rank 1: input is null but holds 4 elements");
  expectInvalid(comm.allGather(data.data(), data.data(),
                               std::numeric_limits<uint64_t>::max() / 8,
                               plan::F32),
                "all_gather on rank 1: 2305843009213693951 f32 elements do "
                "not fit in memory");
  expectInvalid(comm.broadcast(data.data(), data.data(), 4, plan::F32, 3),
                "broadcast on rank 1: root 3 is not a rank of this "
                "communicator of 3 ranks");
  expectInvalid(comm.send(data.data(), 4, plan::F32, 1),
                "send on rank 1: a rank cannot send to itself");
  expectInvalid(comm.recv(data.data(), 4, plan::F32, -1),
                "recv on rank 1: peer -1 is not a rank of this communicator "
                "of 3 ranks");
  EXPECT_FALSE(group->isAborted());

  std::vector<float> values = {1.0f, 2.0f, 3.0f};
  std::vector<float> chunks(3);
  runRanks(*group, [&](Communicator &rankComm) {
    int rank = rankComm.rank();
    expectOk(rankComm.reduceScatter(values.data(), &chunks[rank], 3, plan::F32,
                                    ReduceOp::kSum));
  });
  EXPECT_EQ(chunks, (std::vector<float>{3.0f, 6.0f, 9.0f}));
}

TEST(Comm, GroupCreationChecksItsArguments) {
  EXPECT_EQ(LocalCommunicatorOptions().timeout, 300s);
  auto none = LocalCommunicatorGroup::create(0);
  ASSERT_FALSE(none.isOk());
  EXPECT_EQ(none.status().message(),
            "a communicator group needs at least one rank, not 0");
  LocalCommunicatorOptions options;
  options.timeout = 0ms;
  auto noTimeout = LocalCommunicatorGroup::create(2, options);
  ASSERT_FALSE(noTimeout.isOk());
  EXPECT_EQ(noTimeout.status().message(),
            "the communicator timeout must be positive, not 0 ms");
  auto group = makeGroup(2);
  EXPECT_EQ(group->communicator(-1), nullptr);
  EXPECT_EQ(group->communicator(2), nullptr);
  ASSERT_NE(group->communicator(1), nullptr);
  EXPECT_EQ(group->communicator(1)->rank(), 1);
  EXPECT_EQ(group->communicator(1)->size(), 2);
}

#ifdef ZCC_COUNT_ALLOCATIONS
// The no-allocation check below is only as good as the counter behind it.
TEST(Comm, AllocationCounterSeesAllocations) {
  test::AllocationCounter counter;
  std::vector<int> *vector = new std::vector<int>(3);
  delete vector;
  EXPECT_EQ(counter.count(), 2);
}

TEST(Comm, CollectivesThatSucceedAllocateNothing) {
  // Buffers, groups and threads exist before the counted part, as they do
  // before an executor's first step; the threads then run every collective
  // a few times while every operator new is counted.
  const int ranks = 4;
  const uint64_t count = 1000;
  auto group = makeGroup(ranks);
  std::vector<std::vector<float>> floats(ranks, std::vector<float>(count));
  std::vector<std::vector<Half>> halves(ranks, std::vector<Half>(count));
  std::vector<std::vector<float>> gathered(ranks,
                                           std::vector<float>(ranks * count));
  std::atomic<int> ready{0}, finished{0}, failures{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank)
    threads.emplace_back([&, rank] {
      Communicator &comm = *group->communicator(rank);
      ready.fetch_add(1);
      while (!go.load())
        std::this_thread::yield();
      float *mine = floats[rank].data();
      for (int round = 0; round < 3; ++round) {
        Status statuses[] = {
            comm.allReduce(mine, mine, count, plan::F32, ReduceOp::kAverage),
            comm.allReduce(halves[rank].data(), halves[rank].data(), count,
                           plan::F16, ReduceOp::kSum),
            comm.reduceScatter(mine, mine + rank * (count / ranks), count,
                               plan::F32, ReduceOp::kSum),
            comm.allGather(mine, gathered[rank].data(), count, plan::F32),
            comm.broadcast(mine, mine, count, plan::F32, round),
            rank % 2 ? comm.recv(mine, count, plan::F32, rank - 1)
                     : comm.send(mine, count, plan::F32, rank + 1),
            comm.barrier(),
        };
        for (const Status &status : statuses)
          if (!status.isOk())
            failures.fetch_add(1);
      }
      finished.fetch_add(1);
    });
  while (ready.load() < ranks)
    std::this_thread::yield();
  long allocations = 0;
  {
    test::AllocationCounter counter;
    go.store(true);
    while (finished.load() < ranks)
      std::this_thread::yield();
    allocations = counter.count();
  }
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(allocations, 0) << "collectives allocated on their success path";
}
#endif

} // namespace
} // namespace zcc
