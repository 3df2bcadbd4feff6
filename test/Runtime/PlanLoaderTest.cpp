//===- PlanLoaderTest.cpp - Plan file checks and validation ---------------===//
//
// Every way a plan file can be wrong must end in one clear Status naming the
// file, the item and the fix, and never in a crash: these tests break valid
// plans one rule at a time.
//
//===----------------------------------------------------------------------===//

#include "PlanTestUtil.h"

#include "runtime/Plan/PlanLoader.h"
#include "runtime/Plan/PlanPrinter.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <random>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace zcc {
namespace {

using test::PlanBuilder;
using test::TempDir;

const char kFix[] = "; recompile the plan with a zcc that matches this zrun";

/// x[2x3] + c -> t; t @ w[3x2] -> y: every buffer kind, a weight and two
/// kernels, so each validation rule has something to break.
plan::Plan basePlan() {
  PlanBuilder builder;
  uint32_t x = builder.addBuffer("x", plan::INPUT, plan::F32, {2, 3});
  uint32_t c = builder.addConstant("c", {2, 3}, {1, 2, 3, 4, 5, 6});
  uint32_t t = builder.addBuffer("t", plan::ACTIVATION, plan::F32, {2, 3});
  uint32_t w = builder.addBuffer("w", plan::PARAMETER, plan::F32, {3, 2});
  uint32_t y = builder.addBuffer("y", plan::OUTPUT, plan::F32, {2, 2});
  builder.addWeight("w", w, "weights.bin", 0);
  builder.addInput("x", x);
  builder.addOutput("y", y);
  builder.addInstruction("add", {x, c}, {t}, "/Add");
  builder.addInstruction("matmul", {t, w}, {y}, "/h.0/attn/MatMul");
  return builder.plan();
}

std::string validationError(const std::function<void(plan::Plan &)> &breakIt) {
  plan::Plan plan = basePlan();
  breakIt(plan);
  Status status = validatePlan(plan, "p.bin");
  EXPECT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  return status.message();
}

//===----------------------------------------------------------------------===//
// The file: header, version, checksum
//===----------------------------------------------------------------------===//

TEST(PlanLoader, LoadsAValidPlan) {
  TempDir dir;
  std::string path = test::writePlan(dir.file("plan.bin"), basePlan());
  StatusOr<LoadedPlan> loaded = loadPlan(path);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  EXPECT_EQ(loaded->path, path);
  EXPECT_EQ(loaded->header.magic(), kPlanMagic);
  EXPECT_EQ(loaded->header.format_version(), 1u);
  EXPECT_EQ(loaded->header.producer(), "zcc-test");
  EXPECT_TRUE(loaded->header.plan().empty()) << "the parsed bytes are dropped";
  EXPECT_EQ(loaded->plan.buffers_size(), 5);
  EXPECT_EQ(loaded->worldSize(), 1);
}

TEST(PlanLoader, MagicSpellsZccPlan1) {
  uint64_t magic = kPlanMagic;
  EXPECT_EQ(std::string(reinterpret_cast<const char *>(&magic), 8), "ZCCPLAN1");
}

TEST(PlanLoader, EncodingIsDeterministic) {
  plan::Plan plan = basePlan();
  plan::Instruction *add = plan.mutable_programs(0)->mutable_instructions(0);
  for (const char *name : {"zeta", "alpha", "mid", "beta", "omega"})
    (*add->mutable_attributes())[name].set_i(1);
  EXPECT_EQ(encodePlanFile(plan, "zcc"), encodePlanFile(plan, "zcc"));
}

TEST(PlanLoader, MissingFile) {
  TempDir dir;
  StatusOr<LoadedPlan> loaded = loadPlan(dir.file("absent.bin"));
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(loaded.status().message(), "cannot read the plan: cannot open '" +
                                           dir.file("absent.bin") +
                                           "': No such file or directory");
}

TEST(PlanLoader, EmptyFile) {
  StatusOr<LoadedPlan> loaded = parsePlanFile("", "p.bin");
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().message(),
            "p.bin is empty, not a zcc plan; pass a plan written by zcc (zcc "
            "MODEL.onnx -c CONFIG.json -o PLAN.bin)");
}

TEST(PlanLoader, FolderInsteadOfFile) {
  TempDir dir;
  StatusOr<LoadedPlan> loaded = loadPlan(dir.path());
  ASSERT_FALSE(loaded.isOk());
  EXPECT_NE(loaded.status().message().find("is a folder, not a file"),
            std::string::npos)
      << loaded.status().message();
}

// `zrun <(cat plan.bin)` and /dev/stdin fed by a pipe: a pipe's stat size
// is 0, so trusting it read every piped plan as an empty file.
TEST(PlanLoader, PipeIsReadToItsEnd) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string bytes = encodePlanFile(basePlan(), "zcc-test");
  ASSERT_LT(bytes.size(), 65536u) << "must fit the pipe's buffer";
  ASSERT_EQ(::write(fds[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::close(fds[1]);
  StatusOr<LoadedPlan> loaded = loadPlan("/dev/fd/" + std::to_string(fds[0]));
  ::close(fds[0]);
  EXPECT_TRUE(loaded.isOk()) << loaded.status().toString();
}

// A named pipe nothing writes to must not block open() forever.
TEST(PlanLoader, NamedPipeWithoutAWriterDoesNotHang) {
  TempDir dir;
  std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  StatusOr<LoadedPlan> loaded = loadPlan(fifo);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().message(),
            "cannot read the plan: '" + fifo +
                "' is a pipe and nothing was written to it; pass a file, or a pipe that a "
                "program writes into");
}

// A device has no size to read (and /dev/zero no end): refused by name,
// not read as "empty".
TEST(PlanLoader, DeviceIsNotAFile) {
  StatusOr<LoadedPlan> loaded = loadPlan("/dev/zero");
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().message(),
            "cannot read the plan: '/dev/zero' is a character device, not a regular file; "
            "save its content to a file and pass that");
}

TEST(PlanLoader, RandomBytesAreRejected) {
  std::mt19937 engine(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(1 + engine() % 512, '\0');
    for (char &byte : bytes)
      byte = static_cast<char>(engine());
    StatusOr<LoadedPlan> loaded = parsePlanFile(bytes, "noise.bin");
    ASSERT_FALSE(loaded.isOk()) << "trial " << trial;
    EXPECT_EQ(loaded.status().message().rfind("noise.bin", 0), 0u)
        << loaded.status().message();
  }
}

TEST(PlanLoader, NotAPlanFile) {
  StatusOr<LoadedPlan> loaded =
      parsePlanFile("{\"train_batch_size\": 8}\n", "ds.json");
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().message(),
            "ds.json is not a zcc plan: it does not parse as a plan file "
            "(another kind of file, or a plan cut short or corrupted); pass "
            "a plan written by zcc (zcc MODEL.onnx -c CONFIG.json -o "
            "PLAN.bin)");
}

TEST(PlanLoader, EveryTruncationIsAnError) {
  std::string bytes = encodePlanFile(basePlan(), "zcc-test");
  for (size_t length = 0; length < bytes.size(); ++length) {
    StatusOr<LoadedPlan> loaded =
        parsePlanFile(bytes.substr(0, length), "cut.bin");
    ASSERT_FALSE(loaded.isOk()) << "cut to " << length << " bytes";
    EXPECT_EQ(loaded.status().message().rfind("cut.bin", 0), 0u);
  }
}

TEST(PlanLoader, TruncatedFileOnDisk) {
  TempDir dir;
  std::string bytes = encodePlanFile(basePlan(), "zcc-test");
  test::writeBytes(dir.file("cut.bin"), bytes.substr(0, bytes.size() - 10));
  StatusOr<LoadedPlan> loaded = loadPlan(dir.file("cut.bin"));
  ASSERT_FALSE(loaded.isOk());
  EXPECT_NE(loaded.status().message().find("cut short"), std::string::npos)
      << loaded.status().message();
}

TEST(PlanLoader, FlippedPlanByteFailsTheChecksum) {
  std::string bytes = encodePlanFile(basePlan(), "zcc-test");
  plan::PlanFile file;
  ASSERT_TRUE(file.ParseFromString(bytes));
  // The serialized Plan is the file's last field.
  size_t planStart = bytes.size() - file.plan().size();
  for (size_t i = planStart; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ 0xff);
    StatusOr<LoadedPlan> loaded = parsePlanFile(flipped, "flip.bin");
    ASSERT_FALSE(loaded.isOk()) << "byte " << i;
    EXPECT_EQ(loaded.status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(loaded.status().message().rfind("flip.bin: checksum mismatch: "
                                              "the header says 0x",
                                              0),
              0u)
        << loaded.status().message();
  }
}

TEST(PlanLoader, FlippedByteAnywhereNeverCrashes) {
  std::string bytes = encodePlanFile(basePlan(), "zcc-test");
  for (size_t i = 0; i < bytes.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      StatusOr<LoadedPlan> loaded = parsePlanFile(flipped, "flip.bin");
      // Only the producer string lies outside the checksum.
      if (loaded.isOk()) {
        EXPECT_NE(loaded->header.producer(), "zcc-test") << "byte " << i;
      }
    }
}

TEST(PlanLoader, WrongMagic) {
  plan::PlanFile file;
  ASSERT_TRUE(file.ParseFromString(encodePlanFile(basePlan(), "zcc")));
  file.set_magic(0x0123456789abcdefULL);
  StatusOr<LoadedPlan> loaded =
      parsePlanFile(file.SerializeAsString(), "p.bin");
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().message(),
            "p.bin is not a zcc plan: its magic number is 0x123456789abcdef, "
            "a plan's is 0x314e414c5043435a (\"ZCCPLAN1\"); pass a plan "
            "written by zcc (zcc MODEL.onnx -c CONFIG.json -o PLAN.bin)");
}

TEST(PlanLoader, WrongVersion) {
  plan::PlanFile file;
  ASSERT_TRUE(file.ParseFromString(encodePlanFile(basePlan(), "zcc")));
  for (uint32_t version : {0u, 2u, 7u}) {
    file.set_format_version(version);
    StatusOr<LoadedPlan> loaded =
        parsePlanFile(file.SerializeAsString(), "p.bin");
    ASSERT_FALSE(loaded.isOk());
    EXPECT_EQ(loaded.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(loaded.status().message(),
              "p.bin: plan format version " + std::to_string(version) +
                  " is not supported by this zrun (it reads version 1); "
                  "recompile with a matching zcc");
  }
}

TEST(PlanLoader, ChecksummedGarbageIsNotAPlan) {
  plan::PlanFile file;
  file.set_magic(kPlanMagic);
  file.set_format_version(kPlanFormatVersion);
  file.set_plan(std::string("\xff\xff\xff", 3));
  file.set_checksum(planChecksum(file.plan()));
  StatusOr<LoadedPlan> loaded =
      parsePlanFile(file.SerializeAsString(), "p.bin");
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().message(),
            std::string("p.bin: the plan does not parse although its checksum "
                        "matches, so another program wrote it; recompile the "
                        "plan with a zcc that matches this zrun"));
}

TEST(PlanLoader, ValidationRunsOnLoad) {
  plan::Plan plan = basePlan();
  plan.mutable_programs(0)->mutable_instructions(1)->set_kernel("matmull");
  StatusOr<LoadedPlan> loaded =
      parsePlanFile(encodePlanFile(plan, "zcc"), "p.bin");
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().message(),
            std::string("p.bin: program 'infer', instruction 1 (matmull, from "
                        "node '/h.0/attn/MatMul'): kernel 'matmull' is not "
                        "one this runtime has (did you mean 'matmul'?)") +
                kFix);
}

//===----------------------------------------------------------------------===//
// Validation, one rule at a time
//===----------------------------------------------------------------------===//

TEST(PlanValidation, BasePlanIsValid) {
  Status status = validatePlan(basePlan(), "p.bin");
  EXPECT_TRUE(status.isOk()) << status.toString();
}

TEST(PlanValidation, Mode) {
  EXPECT_EQ(validationError([](plan::Plan &p) { p.set_mode("serve"); }),
            std::string("p.bin: plan: mode 'serve' is neither 'infer' nor "
                        "'train'") +
                kFix);
}

TEST(PlanValidation, Mesh) {
  EXPECT_EQ(validationError(
                [](plan::Plan &p) { p.mutable_mesh()->add_axis_names("dp"); }),
            std::string("p.bin: mesh: has 1 axis names but 0 axis sizes") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_mesh()->add_axis_names("dp");
              p.mutable_mesh()->add_axis_sizes(0);
            }),
            std::string("p.bin: mesh: axis 'dp' has size 0") + kFix);
}

// The runtime runs a thread or process per rank, numbered by int: a mesh
// product over kMaxWorldSize (or one that overflows int64 and would wrap
// to a small world) is refused, not run.
TEST(PlanValidation, MeshWorldSizeIsBounded) {
  auto meshOf = [](std::vector<int64_t> sizes) {
    return [sizes](plan::Plan &p) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        p.mutable_mesh()->add_axis_names(i == 0 ? "dp" : "tp");
        p.mutable_mesh()->add_axis_sizes(sizes[i]);
      }
    };
  };
  EXPECT_EQ(validationError(meshOf({int64_t(1) << 16, int64_t(1) << 16})),
            std::string("p.bin: mesh: axis sizes 65536x65536 give more than 1048576 ranks, "
                        "the most a job can have") +
                kFix);
  EXPECT_EQ(validationError(meshOf({int64_t(1) << 32, int64_t(1) << 32})),
            std::string("p.bin: mesh: axis sizes 4294967296x4294967296 give more than "
                        "1048576 ranks, the most a job can have") +
                kFix);
  plan::Plan largest = basePlan();
  meshOf({int64_t(1) << 20})(largest);
  Status status = validatePlan(largest, "p.bin");
  EXPECT_TRUE(status.isOk()) << status.toString();
}

/// basePlan as a pipeline of `stages` stages (every buffer on stage 0) on
/// a mesh of the given axes.
plan::Plan pipelinePlan(int stages, const std::vector<std::pair<std::string, int64_t>> &axes) {
  plan::Plan plan = basePlan();
  for (const auto &[name, size] : axes) {
    plan.mutable_mesh()->add_axis_names(name);
    plan.mutable_mesh()->add_axis_sizes(size);
  }
  plan::Pipeline *pipeline = plan.mutable_pipeline();
  pipeline->set_schedule("gpipe");
  pipeline->set_micro_batches(2);
  for (int s = 0; s < stages; ++s)
    pipeline->add_stages()->set_arena_bytes(plan.arena_bytes());
  return plan;
}

// Rank r runs stage r / (world / stages): stages that do not divide the
// world, or a 'pp' axis that does not count them, crashed zrun (SIGFPE,
// SIGSEGV) instead of failing here.
TEST(PlanValidation, PipelineStagesFitTheMesh) {
  auto error = [](const plan::Plan &plan) {
    Status status = validatePlan(plan, "p.bin");
    EXPECT_FALSE(status.isOk());
    return status.message();
  };
  Status valid = validatePlan(pipelinePlan(2, {{"pp", 2}, {"dp", 2}}), "p.bin");
  EXPECT_TRUE(valid.isOk()) << valid.toString();
  // One stage: zcc writes no 'pp' axis.
  valid = validatePlan(pipelinePlan(1, {{"dp", 2}}), "p.bin");
  EXPECT_TRUE(valid.isOk()) << valid.toString();
  EXPECT_EQ(error(pipelinePlan(2, {})),
            std::string("p.bin: pipeline: has 2 stages, which do not divide the mesh's world "
                        "size 1") +
                kFix);
  EXPECT_EQ(error(pipelinePlan(2, {{"pp", 3}})),
            std::string("p.bin: pipeline: has 2 stages, which do not divide the mesh's world "
                        "size 3") +
                kFix);
  EXPECT_EQ(error(pipelinePlan(0, {})), std::string("p.bin: pipeline: has no stages") + kFix);
  EXPECT_EQ(error(pipelinePlan(2, {{"dp", 4}})),
            std::string("p.bin: mesh: has no 'pp' axis for the pipeline's 2 stages") + kFix);
  EXPECT_EQ(error(pipelinePlan(2, {{"pp", 4}, {"dp", 1}})),
            std::string("p.bin: mesh: axis 'pp' has size 4, but the plan has 2 pipeline "
                        "stages") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_mesh()->add_axis_names("pp");
              p.mutable_mesh()->add_axis_sizes(2);
            }),
            std::string("p.bin: mesh: axis 'pp' has size 2, but the plan has no pipeline") +
                kFix);
}

// ZeRO-3 splits a weight over its stage's data-parallel ranks; any other
// count drew (with --weights random) shards x the buffer: 2^32 - 1 shards
// ran for hours.
TEST(PlanValidation, WeightShardsAreTheDataParallelRanks) {
  EXPECT_EQ(validationError([](plan::Plan &p) { p.mutable_weights(0)->set_shards(3); }),
            std::string("p.bin: weight 0 ('w'): is split into 3 shards, but the mesh has 1 "
                        "data-parallel ranks to hold them") +
                kFix);
  plan::Plan twoRanks = basePlan();
  twoRanks.mutable_mesh()->add_axis_names("dp");
  twoRanks.mutable_mesh()->add_axis_sizes(2);
  twoRanks.mutable_weights(0)->set_shards(2);
  twoRanks.mutable_weights(0)->set_length(2 * twoRanks.weights(0).length());
  Status status = validatePlan(twoRanks, "p.bin");
  EXPECT_TRUE(status.isOk()) << status.toString();
}

TEST(PlanValidation, WeightRandomInitStdIsFinite) {
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_weights(0)->mutable_random_init()->set_std(
                  std::numeric_limits<double>::infinity());
            }),
            std::string("p.bin: weight 0 ('w'): has random init std inf; it must be a finite "
                        "number, 0 or more") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_weights(0)->mutable_random_init()->set_std(-1);
            }),
            std::string("p.bin: weight 0 ('w'): has random init std -1; it must be a finite "
                        "number, 0 or more") +
                kFix);
}

TEST(PlanValidation, ArenaAlignment) {
  EXPECT_EQ(validationError([](plan::Plan &p) { p.set_arena_alignment(48); }),
            std::string("p.bin: plan: arena_alignment 48 is not a power of "
                        "two") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) { p.set_arena_alignment(0); }),
            std::string("p.bin: plan: arena_alignment 0 is not a power of "
                        "two") +
                kFix);
}

TEST(PlanValidation, BufferIdIsItsIndex) {
  EXPECT_EQ(
      validationError([](plan::Plan &p) { p.mutable_buffers(1)->set_id(7); }),
      std::string("p.bin: buffer 1 ('c'): has id 7; a buffer's id must "
                  "be its index") +
          kFix);
}

TEST(PlanValidation, BufferKind) {
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_buffers(2)->set_kind(plan::BUFFER_KIND_UNSPECIFIED);
            }),
            std::string("p.bin: buffer 2 ('t'): has no known kind (0)") + kFix);
}

TEST(PlanValidation, BufferDtype) {
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_buffers(0)->set_dtype(plan::DTYPE_UNSPECIFIED);
            }),
            std::string("p.bin: buffer 0 ('x'): has no known dtype "
                        "(dtype_unspecified)") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_buffers(0)->set_dtype(static_cast<plan::DType>(99));
            }),
            std::string("p.bin: buffer 0 ('x'): has no known dtype (dtype "
                        "99)") +
                kFix);
}

TEST(PlanValidation, BufferBytesMatchShapeAndDtype) {
  EXPECT_EQ(validationError(
                [](plan::Plan &p) { p.mutable_buffers(0)->set_bytes(20); }),
            std::string("p.bin: buffer 0 ('x'): has 20 bytes, but f32 2x3 "
                        "holds 24") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_buffers(0)->set_dtype(plan::F64);
            }),
            std::string("p.bin: buffer 0 ('x'): has 24 bytes, but f64 2x3 "
                        "holds 48") +
                kFix);
  EXPECT_EQ(validationError(
                [](plan::Plan &p) { p.mutable_buffers(0)->set_shape(1, -3); }),
            std::string("p.bin: buffer 0 ('x'): has a negative dimension in "
                        "shape 2x-3") +
                kFix);
}

TEST(PlanValidation, ZeroDimensionalBufferHoldsOneElement) {
  plan::Plan plan = basePlan();
  plan.mutable_buffers(2)->clear_shape();
  plan.mutable_buffers(2)->set_bytes(4);
  Status status = validatePlan(plan, "p.bin");
  EXPECT_TRUE(status.isOk()) << status.toString();
  plan.mutable_buffers(2)->set_bytes(0);
  EXPECT_EQ(validatePlan(plan, "p.bin").message(),
            std::string("p.bin: buffer 2 ('t'): has 0 bytes, but f32 scalar "
                        "holds 4") +
                kFix);
}

TEST(PlanValidation, OffsetAlignedAndInsideTheArena) {
  EXPECT_EQ(validationError(
                [](plan::Plan &p) { p.mutable_buffers(2)->set_offset(160); }),
            std::string("p.bin: buffer 2 ('t'): offset 160 is not a multiple "
                        "of the arena alignment 64") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) { p.set_arena_bytes(264); }),
            std::string("p.bin: buffer 4 ('y'): bytes [256, 272) lie outside "
                        "the device arena of 264 bytes") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_buffers(4)->set_offset(~0ull << 6);
            }),
            std::string("p.bin: buffer 4 ('y'): bytes [18446744073709551552, "
                        "18446744073709551568) lie outside the device arena of "
                        "320 bytes") +
                kFix);
}

// Host buffers (CPU offload) live in the host arena; only "offload" and
// "fetch" cross between the arenas, and inputs stay on the device.
TEST(PlanValidation, HostBuffersStayInTheirArena) {
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_buffers(3)->set_space(plan::HOST);
            }),
            std::string("p.bin: buffer 3 ('w'): bytes [192, 216) lie outside "
                        "the host arena of 0 bytes") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.set_host_arena_bytes(512);
              p.mutable_buffers(0)->set_space(plan::HOST);
            }),
            std::string("p.bin: buffer 0 ('x'): is in host memory, but inputs, "
                        "outputs, scalars and constants live on the device") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_buffers(3)->set_space(static_cast<plan::MemorySpace>(7));
            }),
            std::string("p.bin: buffer 3 ('w'): has no known memory space (7)") + kFix);
  // The matmul reads t on the device and w on the host.
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.set_host_arena_bytes(512);
              p.mutable_buffers(3)->set_space(plan::HOST);
            }),
            std::string("p.bin: program 'infer', instruction 1 (matmul, from "
                        "node '/h.0/attn/MatMul'): mixes host and device buffers "
                        "(buffer 3 ('w') is in host memory); only "
                        "offload and fetch cross between them, and collectives "
                        "run on the device") +
                kFix);
  // A fetch must read the host and write the device.
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_programs(0)->mutable_instructions(0)->set_kernel("fetch");
              p.mutable_programs(0)->mutable_instructions(0)->mutable_inputs()->RemoveLast();
            }),
            std::string("p.bin: program 'infer', instruction 0 (fetch, from node "
                        "'/Add'): fetch copies a host buffer into a device one, "
                        "not buffer 0 ('x') into buffer 2 ('t')") +
                kFix);
}

// NVMe buffers (offload_optimizer or offload_param "nvme") live in the swap
// file, at offsets aligned for direct I/O; they hold optimizer state,
// parameters and their 16-bit copies only, and only "swap_in" (into a host
// buffer) and "swap_out" (from one) touch them.
TEST(PlanValidation, NvmeBuffersOnlySwap) {
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_buffers(3)->set_space(plan::NVME);
            }),
            std::string("p.bin: buffer 3 ('w'): bytes [192, 216) lie outside "
                        "the NVMe swap file of 0 bytes") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.set_nvme_bytes(8192);
              p.mutable_buffers(3)->set_space(plan::NVME);
            }),
            std::string("p.bin: buffer 3 ('w'): is in the NVMe swap file at offset 192, which "
                        "is not a multiple of 4096 (direct I/O)") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.set_nvme_bytes(8192);
              p.mutable_buffers(3)->set_kind(plan::GRADIENT);
              p.mutable_buffers(3)->set_space(plan::NVME);
              p.mutable_buffers(3)->set_offset(4096);
            }),
            std::string("p.bin: buffer 3 ('w'): is in the NVMe swap file, but only parameters, "
                        "their 16-bit copies and optimizer state live there (it is a gradient "
                        "buffer)") +
                kFix);
  // A parameter may (offload_param "nvme"), but only swaps touch it.
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.set_nvme_bytes(8192);
              p.mutable_buffers(3)->set_space(plan::NVME);
              p.mutable_buffers(3)->set_offset(4096);
            }),
            std::string("p.bin: program 'infer', instruction 1 (matmul, from node "
                        "'/h.0/attn/MatMul'): uses buffer 3 ('w'), which is in the NVMe swap "
                        "file; only swap_in and swap_out touch it") +
                kFix);
  // The matmul reads w from the swap file.
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.set_nvme_bytes(8192);
              p.mutable_weights()->Clear();
              p.mutable_buffers(3)->set_kind(plan::OPTIMIZER_STATE);
              p.mutable_buffers(3)->set_space(plan::NVME);
              p.mutable_buffers(3)->set_offset(4096);
            }),
            std::string("p.bin: program 'infer', instruction 1 (matmul, from node "
                        "'/h.0/attn/MatMul'): uses buffer 3 ('w'), which is in the NVMe swap "
                        "file; only swap_in and swap_out touch it") +
                kFix);
  // A swap_in reads the swap file into host memory.
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_programs(0)->mutable_instructions(0)->set_kernel("swap_in");
              p.mutable_programs(0)->mutable_instructions(0)->mutable_inputs()->RemoveLast();
            }),
            std::string("p.bin: program 'infer', instruction 0 (swap_in, from node '/Add'): "
                        "swap_in reads an NVMe buffer into a host one, not buffer 0 ('x') "
                        "into buffer 2 ('t')") +
                kFix);
}

// Streams are ordered by events: a wait needs an earlier record of its
// event on another stream, and records and waits touch no buffer.
TEST(PlanValidation, EventsOrderStreams) {
  auto addSync = [](plan::Plan &p, const char *kernel, int64_t event, uint32_t stream) {
    plan::Instruction *instruction = p.mutable_programs(0)->add_instructions();
    instruction->set_kernel(kernel);
    instruction->set_stream(stream);
    (*instruction->mutable_attributes())["event"].set_i(event);
    return instruction;
  };
  plan::Plan ordered = basePlan();
  addSync(ordered, "record_event", 0, 0);
  addSync(ordered, "wait_event", 0, 1);
  EXPECT_TRUE(validatePlan(ordered, "p.bin").isOk());
  EXPECT_EQ(validationError([&](plan::Plan &p) { addSync(p, "wait_event", 3, 1); }),
            std::string("p.bin: program 'infer', instruction 2 (wait_event): waits on "
                        "stream 1 for event 3, which no earlier instruction records on "
                        "another stream") +
                kFix);
  EXPECT_EQ(validationError([&](plan::Plan &p) {
              addSync(p, "record_event", 0, 1);
              addSync(p, "wait_event", 0, 1);
            }),
            std::string("p.bin: program 'infer', instruction 3 (wait_event): waits on "
                        "stream 1 for event 0, which no earlier instruction records on "
                        "another stream") +
                kFix);
  EXPECT_EQ(validationError([&](plan::Plan &p) {
              addSync(p, "record_event", -1, 0);
            }),
            std::string("p.bin: program 'infer', instruction 2 (record_event): "
                        "record_event needs an \"event\" attribute: an integer from 0 "
                        "to 1048575") +
                kFix);
  EXPECT_EQ(validationError([&](plan::Plan &p) {
              addSync(p, "record_event", 0, 0)->add_inputs(0);
            }),
            std::string("p.bin: program 'infer', instruction 2 (record_event): "
                        "record_event reads and writes no buffer") +
                kFix);
  EXPECT_EQ(validationError([&](plan::Plan &p) {
              p.mutable_programs(0)->mutable_instructions(0)->set_stream(99);
            }),
            std::string("p.bin: program 'infer', instruction 0 (add, from node '/Add'): "
                        "runs on stream 99; plans use at most 16 streams") +
                kFix);
}

TEST(PlanValidation, ConstantCarriesItsBytes) {
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_buffers(1)->mutable_constant_data()->resize(8);
            }),
            std::string("p.bin: buffer 1 ('c'): is a constant of 24 bytes but "
                        "carries 8 bytes of constant_data") +
                kFix);
}

TEST(PlanValidation, WeightFillsAnExistingParameter) {
  EXPECT_EQ(validationError(
                [](plan::Plan &p) { p.mutable_weights(0)->set_buffer(99); }),
            std::string("p.bin: weight 0 ('w'): fills buffer 99, but the plan "
                        "has only 5 buffers") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_weights(0)->set_buffer(2);
              p.mutable_weights(0)->set_length(24);
            }),
            std::string("p.bin: weight 0 ('w'): fills buffer 2 ('t'), which "
                        "is not a parameter buffer") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              *p.add_weights() = p.weights(0);
              p.mutable_weights(1)->set_name("w2");
            }),
            std::string("p.bin: weight 1 ('w2'): fills buffer 3 ('w'), which "
                        "weight 0 fills already") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) { p.clear_weights(); }),
            std::string("p.bin: buffer 3 ('w'): is a parameter that no weight "
                        "fills") +
                kFix);
}

TEST(PlanValidation, WeightLengthIsTheBufferSize) {
  EXPECT_EQ(validationError(
                [](plan::Plan &p) { p.mutable_weights(0)->set_length(20); }),
            std::string("p.bin: weight 0 ('w'): reads 20 bytes of "
                        "'weights.bin' into buffer 3 ('w'), which needs 24") +
                kFix);
  // A weight stored in another dtype needs a conversion, so its length is
  // not the buffer's; the loader refuses it later, by name.
  plan::Plan plan = basePlan();
  plan.mutable_weights(0)->set_file_dtype(plan::F16);
  plan.mutable_weights(0)->set_length(12);
  EXPECT_TRUE(validatePlan(plan, "p.bin").isOk());
  // f32 weights of a bf16 buffer (a 16-bit inference plan's): the file
  // range holds the f32 values, twice the buffer's bytes.
  plan::Plan narrowed = basePlan();
  plan::Buffer &w = *narrowed.mutable_buffers(narrowed.weights(0).buffer());
  w.set_dtype(plan::BF16);
  w.set_bytes(w.bytes() / 2);
  EXPECT_TRUE(validatePlan(narrowed, "p.bin").isOk());
  narrowed.mutable_weights(0)->set_length(w.bytes());
  EXPECT_EQ(validatePlan(narrowed, "p.bin").message(),
            std::string("p.bin: weight 0 ('w'): reads 12 bytes of 'weights.bin' into buffer 3 "
                        "('w'), which needs 24") +
                kFix);
}

TEST(PlanValidation, WeightRandomInitKind) {
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_weights(0)->mutable_random_init()->set_kind(
                  static_cast<plan::RandomInit::Kind>(9));
            }),
            std::string("p.bin: weight 0 ('w'): has an unknown random init "
                        "kind 9") +
                kFix);
}

TEST(PlanValidation, Bindings) {
  EXPECT_EQ(validationError(
                [](plan::Plan &p) { p.mutable_inputs(0)->set_buffer(5); }),
            std::string("p.bin: input 0 ('x'): names buffer 5, but the plan "
                        "has only 5 buffers") +
                kFix);
  EXPECT_EQ(validationError(
                [](plan::Plan &p) { p.mutable_outputs(0)->set_buffer(12); }),
            std::string("p.bin: output 0 ('y'): names buffer 12, but the plan "
                        "has only 5 buffers") +
                kFix);
  EXPECT_EQ(
      validationError([](plan::Plan &p) { *p.add_inputs() = p.inputs(0); }),
      std::string("p.bin: input 1 ('x'): repeats the name of another "
                  "input") +
          kFix);
  EXPECT_EQ(validationError(
                [](plan::Plan &p) { p.mutable_outputs(0)->clear_name(); }),
            std::string("p.bin: output 0 (''): has no name") + kFix);
}

TEST(PlanValidation, Instructions) {
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_programs(0)->mutable_instructions(0)->set_kernel(
                  "frobnicate");
            }),
            std::string("p.bin: program 'infer', instruction 0 (frobnicate, "
                        "from node '/Add'): kernel 'frobnicate' is not one "
                        "this runtime has") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              p.mutable_programs(0)->mutable_instructions(1)->set_inputs(1, 42);
            }),
            std::string("p.bin: program 'infer', instruction 1 (matmul, from "
                        "node '/h.0/attn/MatMul'): reads buffer 42, but the "
                        "plan has only 5 buffers") +
                kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) {
              plan::Instruction *add =
                  p.mutable_programs(0)->mutable_instructions(0);
              add->set_outputs(0, 5);
              add->clear_location();
            }),
            std::string("p.bin: program 'infer', instruction 0 (add): writes "
                        "buffer 5, but the plan has only 5 buffers") +
                kFix);
}

TEST(PlanValidation, Programs) {
  EXPECT_EQ(validationError(
                [](plan::Plan &p) { p.add_programs()->set_name("infer"); }),
            std::string("p.bin: program 'infer': appears twice") + kFix);
  EXPECT_EQ(validationError([](plan::Plan &p) { p.add_programs(); }),
            std::string("p.bin: a program: has no name") + kFix);
}

//===----------------------------------------------------------------------===//
// Training plans, one rule at a time
//===----------------------------------------------------------------------===//

std::string trainingError(const std::function<void(plan::Plan &)> &breakIt) {
  plan::Plan plan = test::trainingPlan();
  breakIt(plan);
  Status status = validatePlan(plan, "p.bin");
  EXPECT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  return status.message();
}

TEST(TrainingValidation, TrainingPlanIsValid) {
  Status status = validatePlan(test::trainingPlan(), "p.bin");
  EXPECT_TRUE(status.isOk()) << status.toString();
  StatusOr<LoadedPlan> loaded =
      parsePlanFile(encodePlanFile(test::trainingPlan(), "t"), "p.bin");
  EXPECT_TRUE(loaded.isOk()) << loaded.status().toString();
}

TEST(TrainingValidation, SettingsMatchTheMode) {
  EXPECT_EQ(trainingError([](plan::Plan &p) { p.clear_training(); }),
            std::string("p.bin: plan: mode 'train' has no training settings "
                        "(the optimizer, batch sizes and loop buffers)") +
                kFix);
  // An empty Training message is still present, and still wrong for infer.
  EXPECT_EQ(validationError([](plan::Plan &p) { p.mutable_training(); }),
            std::string("p.bin: plan: mode 'infer' carries training settings, "
                        "which only a 'train' plan may have") +
                kFix);
}

TEST(TrainingValidation, Optimizer) {
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              p.mutable_training()->set_optimizer("onebitlamb");
            }),
            std::string("p.bin: training: optimizer 'onebitlamb' is not one this "
                        "runtime has ('adamw', 'adam', 'adagrad', 'lamb', 'lion' or 'sgd')") +
                kFix);
  for (const char *optimizer : {"adam", "adagrad", "lamb", "lion", "sgd"}) {
    plan::Plan plan = test::trainingPlan();
    plan.mutable_training()->set_optimizer(optimizer);
    EXPECT_TRUE(validatePlan(plan, "p.bin").isOk()) << optimizer;
  }
}

TEST(TrainingValidation, CountsAreAtLeastOne) {
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              p.mutable_training()->set_gradient_accumulation_steps(0);
            }),
            std::string("p.bin: training: gradient_accumulation_steps is 0; "
                        "it must be at least 1") +
                kFix);
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              p.mutable_training()->set_micro_batch_size(-2);
            }),
            std::string("p.bin: training: micro_batch_size is -2; it must be "
                        "at least 1") +
                kFix);
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              p.mutable_training()->set_data_parallel_size(0);
            }),
            std::string("p.bin: training: data_parallel_size is 0; it must be "
                        "at least 1") +
                kFix);
}

// The loop splits batches and ZeRO shards by data_parallel_size, while the
// ranks that run are the mesh's: the two must agree.
TEST(TrainingValidation, DataParallelSizeIsTheMesh) {
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              p.mutable_mesh()->add_axis_names("dp");
              p.mutable_mesh()->add_axis_sizes(2);
            }),
            std::string("p.bin: training: data_parallel_size is 1, but the mesh has 2 "
                        "data-parallel ranks (world size 2)") +
                kFix);
  plan::Plan twoRanks = test::trainingPlan();
  twoRanks.mutable_mesh()->add_axis_names("dp");
  twoRanks.mutable_mesh()->add_axis_sizes(2);
  twoRanks.mutable_training()->set_data_parallel_size(2);
  Status status = validatePlan(twoRanks, "p.bin");
  EXPECT_TRUE(status.isOk()) << status.toString();
}

TEST(TrainingValidation, AccumulationAndRateAreBounded) {
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              p.mutable_training()->set_gradient_accumulation_steps(int64_t(1) << 40);
            }),
            std::string("p.bin: training: gradient_accumulation_steps is 1099511627776; it "
                        "must be at most 16777216") +
                kFix);
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              p.mutable_training()->set_lr(std::numeric_limits<double>::quiet_NaN());
            }),
            std::string("p.bin: training: lr is nan; it must be a finite number") + kFix);
}

// A step_local gradient (overwritten by every micro-step) is valid only as
// a gradient of a plan of one micro-step a step.
TEST(TrainingValidation, StepLocalGradients) {
  auto mark = [](plan::Plan &p, const std::string &name) {
    for (plan::Buffer &buffer : *p.mutable_buffers())
      if (buffer.name() == name)
        buffer.set_step_local(true);
  };
  plan::Plan valid = test::trainingPlan();
  valid.mutable_training()->set_gradient_accumulation_steps(1);
  mark(valid, "w.grad");
  Status status = validatePlan(valid, "p.bin");
  EXPECT_TRUE(status.isOk()) << status.toString();

  std::string accumulating = trainingError([&](plan::Plan &p) { mark(p, "w.grad"); });
  EXPECT_NE(accumulating.find("p.bin: buffer "), std::string::npos) << accumulating;
  EXPECT_NE(accumulating.find("('w.grad'): is a step_local gradient (overwritten by every "
                              "micro-step) in a plan of 2 micro-steps a step; such gradients "
                              "need gradient_accumulation_steps 1"),
            std::string::npos)
      << accumulating;

  std::string parameter = trainingError([&](plan::Plan &p) {
    p.mutable_training()->set_gradient_accumulation_steps(1);
    mark(p, "w");
  });
  EXPECT_NE(parameter.find("('w'): is marked step_local, which only a gradient can be"),
            std::string::npos)
      << parameter;
}

TEST(TrainingValidation, BufferIdsInRange) {
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              p.mutable_training()->set_optimizer_scalars(13);
            }),
            std::string("p.bin: training optimizer_scalars: names buffer 13, "
                        "but the plan has only 13 buffers") +
                kFix);
  EXPECT_EQ(
      trainingError([](plan::Plan &p) { p.mutable_training()->set_loss(99); }),
      std::string("p.bin: training loss: names buffer 99, but the plan has "
                  "only 13 buffers") +
          kFix);
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              p.mutable_training()->mutable_data_inputs(1)->set_buffer(40);
            }),
            std::string("p.bin: training data input 1 ('y'): names buffer 40, "
                        "but the plan has only 13 buffers") +
                kFix);
}

TEST(TrainingValidation, BufferKinds) {
  // The runtime writes the scalars before a program runs and reads the
  // outputs after: a scalar in a parameter or an output in a gradient would
  // overwrite or read the wrong bytes.
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              p.mutable_training()->set_optimizer_scalars(0);
            }),
            std::string("p.bin: training optimizer_scalars: names buffer 0 "
                        "('x'), which is an input buffer, not a scalars "
                        "buffer") +
                kFix);
  EXPECT_EQ(trainingError(
                [](plan::Plan &p) { p.mutable_training()->set_loss_scale(5); }),
            std::string("p.bin: training loss_scale: names buffer 5 ('loss'), "
                        "which is an output buffer, not a scalars buffer") +
                kFix);
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              p.mutable_training()->set_grad_norm_sq(8);
            }),
            std::string("p.bin: training grad_norm_sq: names buffer 8 "
                        "('w.grad'), which is a gradient buffer, not an output "
                        "buffer") +
                kFix);
  EXPECT_EQ(
      trainingError([](plan::Plan &p) { p.mutable_training()->set_loss(4); }),
      std::string("p.bin: training loss: names buffer 4 ('xw'), which is an "
                  "activation buffer, not an output buffer") +
          kFix);
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              p.mutable_training()->mutable_data_inputs(0)->set_buffer(2);
            }),
            std::string("p.bin: training data input 0 ('x'): names buffer 2 "
                        "('zcc.loss_scale'), which is a scalars buffer, not an "
                        "input buffer") +
                kFix);
}

TEST(TrainingValidation, BufferTypes) {
  // The optimizer kernels read eight f64 scalars and sum_squares writes one
  // f64: anything smaller is read or written past its end.
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              plan::Buffer *scalars = p.mutable_buffers(10);
              scalars->set_shape(0, 4);
              scalars->set_bytes(32);
            }),
            std::string("p.bin: training optimizer_scalars: names buffer 10 "
                        "('zcc.optimizer_scalars'), which holds f64 4; it "
                        "must hold f64 8") +
                kFix);
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              plan::Buffer *norm = p.mutable_buffers(9);
              norm->set_dtype(plan::F32);
              norm->set_bytes(4);
            }),
            std::string("p.bin: training grad_norm_sq: names buffer 9 "
                        "('zcc.grad_norm_sq'), which holds f32 scalar; it must "
                        "hold f64 scalar") +
                kFix);
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              plan::Buffer *seed = p.mutable_buffers(2);
              seed->set_dtype(plan::I64);
              seed->set_bytes(8);
            }),
            std::string("p.bin: training loss_scale: names buffer 2 "
                        "('zcc.loss_scale'), which holds i64 scalar; it must "
                        "hold a float scalar") +
                kFix);
  EXPECT_EQ(trainingError([](plan::Plan &p) {
              plan::Buffer *loss = p.mutable_buffers(5);
              loss->add_shape(2);
              loss->set_bytes(8);
            }),
            std::string("p.bin: training loss: names buffer 5 ('loss'), which "
                        "holds f32 2; it must hold a float scalar") +
                kFix);
  // Any float type and any shape of one element will do for the loss and
  // its scale (fp16 and bf16 plans).
  plan::Plan plan = test::trainingPlan();
  plan.mutable_buffers(2)->set_dtype(plan::BF16);
  plan.mutable_buffers(2)->set_bytes(2);
  plan.mutable_buffers(5)->add_shape(1);
  EXPECT_TRUE(validatePlan(plan, "p.bin").isOk());
}

TEST(TrainingValidation, TheFourProgramsArePresent) {
  for (const char *name :
       {"micro_step", "grad_norm", "optimizer_step", "zero_grads"}) {
    plan::Plan plan = test::trainingPlan();
    auto *programs = plan.mutable_programs();
    programs->erase(std::remove_if(programs->begin(), programs->end(),
                                   [&](const plan::Program &program) {
                                     return program.name() == name;
                                   }),
                    programs->end());
    ASSERT_EQ(plan.programs_size(), 3);
    EXPECT_EQ(validatePlan(plan, "p.bin").message(),
              std::string("p.bin: plan: mode 'train' has no program '") + name +
                  "' (a training plan runs micro_step, grad_norm, "
                  "optimizer_step and zero_grads)" +
                  kFix);
  }
}

//===----------------------------------------------------------------------===//
// zplan dump's text
//===----------------------------------------------------------------------===//

TEST(PlanPrinter, PrintsEveryPart) {
  plan::Plan plan = basePlan();
  plan.mutable_mesh()->add_axis_names("dp");
  plan.mutable_mesh()->add_axis_sizes(1);
  plan.set_config_json("{\"train_batch_size\": 8}");
  plan::MemoryCategory *memory = plan.add_memory();
  memory->set_category("params");
  memory->set_bytes(24);
  plan::Instruction *matmul = plan.mutable_programs(0)->mutable_instructions(1);
  auto &attributes = *matmul->mutable_attributes();
  attributes["transpose_b"].set_b(false);
  attributes["alpha"].set_f(0.5);
  attributes["axes"].mutable_ints()->add_values(-1);
  attributes["axes"].mutable_ints()->add_values(2);
  attributes["name"].set_s("q\"k");
  attributes["axis"].set_i(3);
  matmul->set_stream(1);
  plan.mutable_weights(0)->mutable_random_init()->set_kind(
      plan::RandomInit::ONES);
  StatusOr<LoadedPlan> loaded =
      parsePlanFile(encodePlanFile(plan, "zcc 0.1.0"), "p.bin");
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  std::string text = printPlan(loaded->header, loaded->plan);
  std::string checksum = formatString("0x%08x", loaded->header.checksum());
  EXPECT_EQ(text,
            "header: magic 0x314e414c5043435a \"ZCCPLAN1\", format_version 1, "
            "producer \"zcc 0.1.0\", checksum " +
                checksum +
                "\n"
                "mode: \"infer\"\n"
                "backend: any\n"
                "mesh: \"dp\"=1, world size 1\n"
                "model_path: \"model.onnx\"\n"
                "arena: 320 bytes, alignment 64\n"
                "memory: \"params\"=24\n"
                "buffers: 5\n"
                "  %0 input \"x\" f32[2x3] offset 0 bytes 24\n"
                "  %1 constant \"c\" f32[2x3] offset 64 bytes 24 data 24\n"
                "  %2 activation \"t\" f32[2x3] offset 128 bytes 24\n"
                "  %3 parameter \"w\" f32[3x2] offset 192 bytes 24\n"
                "  %4 output \"y\" f32[2x2] offset 256 bytes 16\n"
                "weights: 1\n"
                "  \"w\" -> %3 file \"weights.bin\" offset 0 length 24 f32, "
                "random ones\n"
                "inputs: 1\n"
                "  \"x\" -> %0\n"
                "outputs: 1\n"
                "  \"y\" -> %4\n"
                "program \"infer\": 2 instructions\n"
                "  %2 = add(%0, %1) stream 0 // /Add\n"
                "  %4 = matmul(%2, %3) {alpha = 0.5, axes = [-1, 2], axis = 3, "
                "name = \"q\\\"k\", transpose_b = false} stream 1 // "
                "/h.0/attn/MatMul\n"
                "config_json: \"{\\\"train_batch_size\\\": 8}\"\n");
}

TEST(PlanPrinter, EmptyPlanPrints) {
  plan::PlanFile header;
  std::string text = printPlan(header, plan::Plan());
  EXPECT_NE(text.find("mesh: world size 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("buffers: 0\n"), std::string::npos) << text;
}

TEST(PlanPrinter, WholeFloatsKeepAPoint) {
  plan::Plan plan = basePlan();
  (*plan.mutable_programs(0)
        ->mutable_instructions(0)
        ->mutable_attributes())["scale"]
      .set_f(2.0);
  std::string text = printPlan(plan::PlanFile(), plan);
  EXPECT_NE(text.find("{scale = 2.0}"), std::string::npos) << text;
}

TEST(PlanPrinter, PrintsTrainingSettings) {
  plan::Plan plan = test::trainingPlan();
  plan::Training &training = *plan.mutable_training();
  training.set_gradient_clipping(1.0);
  training.set_token_range(50257);
  plan::Scheduler &scheduler = *training.mutable_scheduler();
  scheduler.set_type("WarmupDecayLR");
  scheduler.set_warmup_type("log");
  (*scheduler.mutable_params())["warmup_num_steps"] = 10;
  (*scheduler.mutable_params())["total_num_steps"] = 100;
  (*scheduler.mutable_params())["warmup_max_lr"] = 0.001;
  std::string text = printPlan(plan::PlanFile(), plan);
  size_t begin = text.find("training:\n");
  size_t end = text.find("program \"micro_step\"");
  ASSERT_NE(begin, std::string::npos) << text;
  ASSERT_NE(end, std::string::npos) << text;
  EXPECT_LT(text.find("outputs: 2\n"), begin) << "after the bindings";
  EXPECT_EQ(text.substr(begin, end - begin),
            "training:\n"
            "  optimizer: \"adamw\", lr 0.001, beta1 0.9, beta2 0.999, eps "
            "1e-08, weight_decay 0.01, momentum 0.0, dampening 0.0, nesterov "
            "false\n"
            "  scheduler: \"WarmupDecayLR\", warmup_type \"log\", params "
            "\"total_num_steps\"=100.0 \"warmup_max_lr\"=0.001 "
            "\"warmup_num_steps\"=10.0\n"
            "  loss_scaler: disabled\n"
            "  gradient_clipping: 1.0\n"
            "  batch: train_batch_size 2, micro_batch_size 1, "
            "gradient_accumulation_steps 2, data_parallel_size 1\n"
            "  precision: \"fp32\"\n"
            "  steps_per_print: 10\n"
            "  token_range: 50257\n"
            "  parameter_count: 3\n"
            "  optimizer_scalars: %10\n"
            "  loss_scale: %2\n"
            "  grad_norm_sq: %9\n"
            "  loss: %5\n"
            "  data_inputs: 2\n"
            "    \"x\" -> %0\n"
            "    \"y\" -> %1\n");
}

TEST(PlanPrinter, PrintsTheLossScalerAndSgd) {
  plan::Plan plan = test::trainingPlan();
  plan::Training &training = *plan.mutable_training();
  training.set_optimizer("sgd");
  training.set_momentum(0.9);
  training.set_dampening(0.1);
  training.set_nesterov(true);
  training.set_precision("fp16");
  plan::LossScaler &scaler = *training.mutable_loss_scaler();
  scaler.set_enabled(true);
  scaler.set_dynamic(true);
  scaler.set_initial_scale_power(16);
  scaler.set_scale_window(1000);
  scaler.set_hysteresis(2);
  scaler.set_min_scale(1.0);
  std::string text = printPlan(plan::PlanFile(), plan);
  EXPECT_NE(text.find("  optimizer: \"sgd\", lr 0.001, beta1 0.9, beta2 "
                      "0.999, eps 1e-08, weight_decay 0.01, momentum 0.9, "
                      "dampening 0.1, nesterov true\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  scheduler: none (constant lr)\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("  loss_scaler: dynamic, static_scale 0.0, "
                      "initial_scale_power 16, scale_window 1000, hysteresis "
                      "2, consecutive_hysteresis false, min_scale 1.0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  precision: \"fp16\"\n"), std::string::npos) << text;
  scaler.set_dynamic(false);
  scaler.set_static_scale(128);
  scaler.set_consecutive_hysteresis(true);
  text = printPlan(plan::PlanFile(), plan);
  EXPECT_NE(text.find("  loss_scaler: static, static_scale 128.0, "
                      "initial_scale_power 16, scale_window 1000, hysteresis "
                      "2, consecutive_hysteresis true, min_scale 1.0\n"),
            std::string::npos)
      << text;
}

TEST(PlanPrinter, InferencePlansPrintNoTrainingSection) {
  std::string text = printPlan(plan::PlanFile(), basePlan());
  EXPECT_EQ(text.find("training:"), std::string::npos) << text;
}

} // namespace
} // namespace zcc
