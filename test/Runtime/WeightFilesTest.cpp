//===- WeightFilesTest.cpp - Weights by name from ONNX and safetensors ----===//
//
// findOnnxInitializers on models written here byte by byte (the wire format
// through CodedOutputStream, so the test needs no ONNX library and states
// exactly which encodings it covers), and zrun's --weights MODEL.onnx and
// --weights FILE.safetensors through the executor: a weight is found by
// name, checked against the plan's buffer, and every bad file is an error
// that names the file and the weight, never a crash.
//
//===----------------------------------------------------------------------===//

#include "PlanTestUtil.h"

#include "runtime/Data/OnnxWeights.h"
#include "runtime/Data/Safetensors.h"
#include "runtime/Executor.h"

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

#include <gmock/gmock.h>

#ifdef ZCC_TEST_HAVE_NLOHMANN_JSON
#include <nlohmann/json.hpp>
#endif

#include <cstring>
#include <sys/stat.h>

namespace zcc {
namespace {

using test::TempDir;
using ::testing::HasSubstr;

//===----------------------------------------------------------------------===//
// Writing ONNX by hand
//===----------------------------------------------------------------------===//

/// Protobuf fields, appended to a message's bytes.
class Message {
public:
  Message &varint(uint32_t field, uint64_t value) {
    write([&](google::protobuf::io::CodedOutputStream &out) {
      out.WriteTag(field << 3);
      out.WriteVarint64(value);
    });
    return *this;
  }
  Message &bytes(uint32_t field, const std::string &payload) {
    write([&](google::protobuf::io::CodedOutputStream &out) {
      out.WriteTag((field << 3) | 2);
      out.WriteVarint32(static_cast<uint32_t>(payload.size()));
      out.WriteString(payload);
    });
    return *this;
  }
  Message &message(uint32_t field, const Message &inner) {
    return bytes(field, inner.bytes_);
  }
  /// Packed repeated varints (proto3's default for dims).
  Message &packed(uint32_t field, const std::vector<int64_t> &values) {
    Message payload;
    for (int64_t value : values)
      payload.write([&](google::protobuf::io::CodedOutputStream &out) {
        out.WriteVarint64(static_cast<uint64_t>(value));
      });
    return bytes(field, payload.bytes_);
  }
  const std::string &str() const { return bytes_; }

private:
  template <typename Write> void write(Write body) {
    google::protobuf::io::StringOutputStream stream(&bytes_);
    google::protobuf::io::CodedOutputStream out(&stream);
    body(out);
  }

  std::string bytes_;
};

/// An external_data entry (StringStringEntryProto).
Message entry(const std::string &key, const std::string &value) {
  return Message().bytes(1, key).bytes(2, value);
}

/// A ModelProto: ir_version 8, a producer, and a graph with a name, one
/// (unrelated) node and `initializers`.
std::string model(const std::vector<Message> &initializers) {
  Message graph;
  graph.message(1, Message().bytes(4, "MatMul").bytes(1, "x").bytes(1, "w"));
  graph.bytes(2, "test-graph");
  for (const Message &tensor : initializers)
    graph.message(5, tensor);
  return Message()
      .varint(1, 8)
      .bytes(2, "zcc-test")
      .message(7, graph)
      .message(8, Message().bytes(1, "").varint(2, 17))
      .str();
}

/// w = [[1, 2], [3, 4], [5, 6]] as FLOAT raw_data, dims written unpacked.
Message rawWeight(const std::string &name = "w",
                  const std::vector<int64_t> &dims = {3, 2},
                  int32_t dtype = kOnnxFloat) {
  Message tensor;
  for (int64_t dim : dims)
    tensor.varint(1, static_cast<uint64_t>(dim));
  tensor.varint(2, static_cast<uint64_t>(dtype));
  tensor.bytes(8, name);
  tensor.bytes(9, test::floatBytes({1, 2, 3, 4, 5, 6}));
  return tensor;
}

const std::string kWeights = test::floatBytes({1, 2, 3, 4, 5, 6});

//===----------------------------------------------------------------------===//
// findOnnxInitializers
//===----------------------------------------------------------------------===//

TEST(OnnxWeights, RawAndFloatData) {
  TempDir dir;
  // b: packed float_data, dims packed, the name after the data.
  Message b;
  b.packed(1, {2}).varint(2, kOnnxFloat);
  b.bytes(4, test::floatBytes({7, 8}));
  b.bytes(8, "b");
  // ids: int64_data (field 7) is not a byte range the runtime can read.
  Message ids;
  ids.packed(1, {2}).varint(2, kOnnxInt64).bytes(8, "ids").packed(7, {1, 2});
  std::string bytes = model({rawWeight(), b, ids});
  std::string path = dir.file("model.onnx");
  test::writeBytes(path, bytes);

  StatusOr<OnnxInitializers> found = findOnnxInitializers(path);
  ASSERT_TRUE(found.isOk()) << found.status().toString();
  ASSERT_EQ(found->size(), 3u);

  const InitializerLocation &w = found->at("w");
  EXPECT_EQ(w.dtype, kOnnxFloat);
  EXPECT_EQ(w.dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(w.file, path);
  EXPECT_FALSE(w.external);
  ASSERT_EQ(w.length, 24u);
  EXPECT_EQ(bytes.substr(w.offset, w.length), kWeights);

  const InitializerLocation &bias = found->at("b");
  EXPECT_EQ(bias.dims, (std::vector<int64_t>{2}));
  ASSERT_EQ(bias.length, 8u);
  EXPECT_EQ(bytes.substr(bias.offset, bias.length),
            test::floatBytes({7, 8}));

  EXPECT_EQ(found->at("ids").dtype, kOnnxInt64);
  EXPECT_EQ(found->at("ids").length, 0u);

  // The overload on bytes in memory finds the same.
  StatusOr<OnnxInitializers> again =
      findOnnxInitializers(path, bytes.data(), bytes.size());
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(again->at("w").offset, w.offset);
}

TEST(OnnxWeights, ExternalData) {
  TempDir dir;
  Message w;
  w.packed(1, {3, 2}).varint(2, kOnnxFloat).bytes(8, "w");
  w.message(13, entry("location", "w.bin"))
      .message(13, entry("offset", "16"))
      .message(13, entry("length", "24"))
      .varint(14, 1);
  // No "length": the whole tensor, from its dtype and shape.
  Message v;
  v.bytes(8, "v").packed(1, {4}).varint(2, kOnnxFloat16).varint(14, 1);
  v.message(13, entry("location", "sub/v.bin"));
  std::string path = dir.file("model.onnx");
  test::writeBytes(path, model({w, v}));

  StatusOr<OnnxInitializers> found = findOnnxInitializers(path);
  ASSERT_TRUE(found.isOk()) << found.status().toString();
  const InitializerLocation &wl = found->at("w");
  EXPECT_TRUE(wl.external);
  EXPECT_EQ(wl.file, "w.bin");
  EXPECT_EQ(wl.offset, 16u);
  EXPECT_EQ(wl.length, 24u);
  const InitializerLocation &vl = found->at("v");
  EXPECT_TRUE(vl.external);
  EXPECT_EQ(vl.file, "sub/v.bin");
  EXPECT_EQ(vl.offset, 0u);
  EXPECT_EQ(vl.length, 8u);
}

TEST(OnnxWeights, BadExternalOffset) {
  TempDir dir;
  Message w = rawWeight();
  w.message(13, entry("offset", "12abc")).varint(14, 1);
  std::string path = dir.file("model.onnx");
  test::writeBytes(path, model({w}));
  StatusOr<OnnxInitializers> found = findOnnxInitializers(path);
  ASSERT_FALSE(found.isOk());
  EXPECT_THAT(found.status().message(),
              HasSubstr("'" + path + "': initializer 'w' has external_data "
                                     "offset '12abc'"));
}

TEST(OnnxWeights, TruncatedFileIsAnErrorNotACrash) {
  TempDir dir;
  std::string bytes = model({rawWeight()});
  std::string path = dir.file("model.onnx");
  // Cut inside w's raw_data: the graph's length prefix points past the end.
  test::writeBytes(path, bytes.substr(0, bytes.size() - 20));
  StatusOr<OnnxInitializers> found = findOnnxInitializers(path);
  ASSERT_FALSE(found.isOk());
  EXPECT_EQ(found.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(found.status().message(),
              HasSubstr("'" + path + "' is not a valid ONNX model"));

  // Every prefix parses or fails cleanly; none crashes.
  for (size_t size = 0; size < bytes.size(); ++size)
    (void)findOnnxInitializers(path, bytes.data(), size);

  // Not protobuf at all: a group-end tag, then an invalid wire type.
  std::string junk = "\x0c\xff\xff\xff\xff\x0f garbage";
  EXPECT_FALSE(findOnnxInitializers(path, junk.data(), junk.size()).isOk());

  StatusOr<OnnxInitializers> missing =
      findOnnxInitializers(dir.file("absent.onnx"));
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

//===----------------------------------------------------------------------===//
// Loading a plan's weights by name
//===----------------------------------------------------------------------===//

LoadedPlan load(const plan::Plan &plan) {
  StatusOr<LoadedPlan> loaded =
      parsePlanFile(encodePlanFile(plan, "t"), "test.bin");
  EXPECT_TRUE(loaded.isOk()) << loaded.status().toString();
  return loaded.isOk() ? std::move(*loaded) : LoadedPlan();
}

ExecutorOptions fromFile(WeightSource source, const std::string &file) {
  ExecutorOptions options;
  options.weights.source = source;
  options.weights.file = file;
  return options;
}

/// y = x @ w with w from `options`, x = [[1, 2, 3], [4, 5, 6]]; the plan's
/// own weight file does not exist, so only the named source can fill w.
StatusOr<std::vector<float>> runMatmul(const ExecutorOptions &options) {
  plan::Plan plan = test::matmulWeightPlan();
  plan.set_model_path("/nonexistent/model.onnx");
  StatusOr<std::unique_ptr<Executor>> executor =
      Executor::instantiate(load(plan), options);
  if (!executor.isOk())
    return executor.takeStatus();
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  Status status = (*executor)->setInput("x", x.data(), x.size() * sizeof(float),
                                        plan::F32, {2, 3});
  if (status.isOk())
    status = (*executor)->run("infer");
  if (!status.isOk())
    return status;
  StatusOr<HostTensor> y = (*executor)->output("y");
  if (!y.isOk())
    return y.takeStatus();
  std::vector<float> values(y->data.size() / sizeof(float));
  std::memcpy(values.data(), y->data.data(), y->data.size());
  return values;
}

const std::vector<float> kMatmulResult = {22, 28, 49, 64};
const char kPrefix[] = "while instantiating test.bin: cannot load the "
                       "weights: weight 'w' (buffer 1) ";

std::string runError(const ExecutorOptions &options) {
  StatusOr<std::vector<float>> y = runMatmul(options);
  EXPECT_FALSE(y.isOk());
  return y.isOk() ? std::string() : y.status().message();
}

TEST(OnnxWeightsByName, InlineAndExternal) {
  TempDir dir;
  std::string inlinePath = dir.file("inline.onnx");
  test::writeBytes(inlinePath, model({rawWeight("other", {2}), rawWeight()}));
  StatusOr<std::vector<float>> y =
      runMatmul(fromFile(WeightSource::kOnnxFile, inlinePath));
  ASSERT_TRUE(y.isOk()) << y.status().toString();
  EXPECT_EQ(*y, kMatmulResult);

  // External data is relative to the model's own folder.
  ASSERT_EQ(::mkdir(dir.file("m").c_str(), 0755), 0);
  test::writeBytes(dir.file("m/data.bin"), std::string(16, '\x7f') + kWeights);
  Message w;
  w.packed(1, {3, 2}).varint(2, kOnnxFloat).bytes(8, "w").varint(14, 1);
  w.message(13, entry("location", "data.bin"))
      .message(13, entry("offset", "16"));
  std::string externalPath = dir.file("m/external.onnx");
  test::writeBytes(externalPath, model({w}));
  y = runMatmul(fromFile(WeightSource::kOnnxFile, externalPath));
  ASSERT_TRUE(y.isOk()) << y.status().toString();
  EXPECT_EQ(*y, kMatmulResult);

  // ... and its file must hold the range.
  test::writeBytes(dir.file("m/data.bin"), std::string(20, '\0'));
  EXPECT_THAT(runError(fromFile(WeightSource::kOnnxFile, externalPath)),
              HasSubstr("needs bytes [16, 40) of '" + dir.file("m/data.bin") +
                        "', but the file has only 20 bytes"));
}

TEST(OnnxWeightsByName, MissingWrongShapeWrongDtype) {
  TempDir dir;
  std::string path = dir.file("model.onnx");
  test::writeBytes(path, model({rawWeight("v"), rawWeight("u")}));
  EXPECT_EQ(runError(fromFile(WeightSource::kOnnxFile, path)),
            std::string(kPrefix) + "is not in '" + path +
                "' (it has 2 initializers); pass a file with the plan's "
                "weight names, such as a copy of the model it was compiled "
                "from");

  test::writeBytes(path, model({rawWeight("w", {2, 3})}));
  EXPECT_EQ(runError(fromFile(WeightSource::kOnnxFile, path)),
            std::string(kPrefix) + "is ONNX FLOAT of shape 2x3 in '" + path +
                "', but the plan's buffer is f32 of shape 3x2; pass weights of the "
                "model the plan was compiled from (or recompile the plan for "
                "this one)");

  test::writeBytes(path, model({rawWeight("w", {3, 2}, kOnnxDouble)}));
  EXPECT_THAT(runError(fromFile(WeightSource::kOnnxFile, path)),
              HasSubstr("is ONNX DOUBLE of shape 3x2 in '" + path +
                        "', but the plan's buffer is f32 of shape 3x2"));

  test::writeBytes(path, "not a model at all");
  EXPECT_THAT(runError(fromFile(WeightSource::kOnnxFile, path)),
              HasSubstr("'" + path + "' is not a valid ONNX model"));
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

/// A safetensors file: the size, `header`, then `data`.
std::string safetensorsBytes(const std::string &header,
                             const std::string &data) {
  std::string bytes;
  uint64_t size = header.size();
  for (int i = 0; i < 8; ++i)
    bytes.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
  return bytes + header + data;
}

#ifdef ZCC_TEST_HAVE_NLOHMANN_JSON

using Json = nlohmann::json;

/// A header with "other" (2 floats) before w, and metadata.
Json header(const std::string &name = "w", const std::string &dtype = "F32",
            const std::vector<int64_t> &shape = {3, 2},
            const std::vector<uint64_t> &offsets = {8, 32}) {
  Json json;
  json["__metadata__"] = {{"format", "pt"}};
  json["other"] = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}};
  json[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", offsets}};
  return json;
}

std::string writeSafetensors(const TempDir &dir, const Json &json) {
  std::string text = json.dump();
  // Writers pad the header to 8 bytes with spaces.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string path = dir.file("weights.safetensors");
  test::writeBytes(path, safetensorsBytes(text, test::floatBytes({9, 9}) +
                                                    kWeights));
  return path;
}

TEST(Safetensors, RoundTrip) {
  TempDir dir;
  std::string path = writeSafetensors(dir, header());
  StatusOr<SafetensorsIndex> index = readSafetensorsIndex(path);
  ASSERT_TRUE(index.isOk()) << index.status().toString();
  EXPECT_EQ(index->size(), 2u);
  EXPECT_EQ(index->at("w").dtype, "F32");
  EXPECT_EQ(index->at("w").length, 24u);

  StatusOr<std::vector<float>> y =
      runMatmul(fromFile(WeightSource::kSafetensorsFile, path));
  ASSERT_TRUE(y.isOk()) << y.status().toString();
  EXPECT_EQ(*y, kMatmulResult);
}

TEST(Safetensors, WrongDtypeShapeOrName) {
  TempDir dir;
  std::string path = writeSafetensors(dir, header("w", "F16", {3, 2}, {8, 20}));
  EXPECT_EQ(runError(fromFile(WeightSource::kSafetensorsFile, path)),
            std::string(kPrefix) + "is F16 of shape 3x2 in '" + path +
                "', but the plan's buffer is f32 of shape 3x2; pass weights of the "
                "model the plan was compiled from (or recompile the plan for "
                "this one)");

  path = writeSafetensors(dir, header("w", "F32", {6}));
  EXPECT_THAT(runError(fromFile(WeightSource::kSafetensorsFile, path)),
              HasSubstr("is F32 of shape 6 in '" + path +
                        "', but the plan's buffer is f32 of shape 3x2"));

  path = writeSafetensors(dir, header("w2"));
  EXPECT_EQ(runError(fromFile(WeightSource::kSafetensorsFile, path)),
            std::string(kPrefix) + "is not in '" + path +
                "' (it has 2 tensors); pass a file with the plan's weight "
                "names, such as a copy of the model it was compiled from");

  // Right dtype and shape, but a byte range of the wrong length.
  path = writeSafetensors(dir, header("w", "F32", {3, 2}, {8, 28}));
  EXPECT_THAT(runError(fromFile(WeightSource::kSafetensorsFile, path)),
              HasSubstr("has 20 bytes of data in '" + path + "'"));
}

TEST(Safetensors, OffsetsBeyondTheFile) {
  TempDir dir;
  std::string path = writeSafetensors(dir, header("w", "F32", {3, 2}, {8, 40}));
  StatusOr<SafetensorsIndex> index = readSafetensorsIndex(path);
  ASSERT_FALSE(index.isOk());
  EXPECT_EQ(index.status().message(),
            "'" + path +
                "' is not a valid safetensors file: tensor 'w' has "
                "data_offsets [8, 40), beyond the 32 bytes of data in the "
                "file (truncated, or written by something else? save it with "
                "safetensors.torch.save_file)");
  EXPECT_THAT(runError(fromFile(WeightSource::kSafetensorsFile, path)),
              HasSubstr("tensor 'w' has data_offsets [8, 40)"));

  path = writeSafetensors(dir, header("w", "F32", {3, 2}, {32, 8}));
  EXPECT_THAT(readSafetensorsIndex(path).status().message(),
              HasSubstr("0 <= begin <= end"));
}

TEST(Safetensors, BadHeaders) {
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
  // A size far above the sanity bound.
  std::string bytes = safetensorsBytes("{}", "");
  bytes[5] = '\x01'; // 2^40 + 2
  test::writeBytes(path, bytes);
  EXPECT_THAT(readSafetensorsIndex(path).status().message(),
              HasSubstr("its header size is 1099511627778 bytes, above the "
                        "100000000 bytes that zrun accepts"));

  // Within the bound but beyond the file.
  bytes = safetensorsBytes("{}", "");
  bytes[0] = '\x40';
  test::writeBytes(path, bytes);
  EXPECT_THAT(readSafetensorsIndex(path).status().message(),
              HasSubstr("its header size is 64 bytes, above the 2 bytes that "
                        "follow it in the file"));

  test::writeBytes(path, "abc");
  EXPECT_THAT(readSafetensorsIndex(path).status().message(),
              HasSubstr("fewer than the 8 of the header size"));

  for (const char *text :
       {"{\"w\": ", "[1, 2]", "{\"w\": 3}", "{\"w\": {\"dtype\": 1}}",
        "{\"w\": {\"dtype\": \"F32\", \"shape\": [-1], "
        "\"data_offsets\": [0, 0]}}",
        "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], "
        "\"data_offsets\": [0]}}"}) {
    test::writeBytes(path, safetensorsBytes(text, ""));
    StatusOr<SafetensorsIndex> index = readSafetensorsIndex(path);
    ASSERT_FALSE(index.isOk()) << text;
    EXPECT_THAT(index.status().message(),
                HasSubstr("'" + path + "' is not a valid safetensors file"))
        << text;
  }
}

#else

TEST(Safetensors, NeedsNlohmannJson) {
  TempDir dir;
  std::string path = dir.file("w.safetensors");
  test::writeBytes(path, safetensorsBytes("{}", ""));
  EXPECT_FALSE(haveSafetensorsSupport());
  EXPECT_THAT(runError(fromFile(WeightSource::kSafetensorsFile, path)),
              HasSubstr("this zrun was built without nlohmann-json; "
                        "safetensors weights are not available"));
}

#endif // ZCC_TEST_HAVE_NLOHMANN_JSON

} // namespace
} // namespace zcc
