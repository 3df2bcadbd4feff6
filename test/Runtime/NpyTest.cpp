//===- NpyTest.cpp - NumPy .npy reading and writing -----------------------===//
//
// zrun's inputs and outputs are .npy files: every supported dtype and shape
// must round-trip, files numpy writes must read, and anything else must be
// refused with a message that says how to convert it.
//
//===----------------------------------------------------------------------===//

#include "PlanTestUtil.h"

#include "runtime/Data/Npy.h"

#include <cstring>

namespace zcc {
namespace {

using test::TempDir;

HostTensor makeTensor(plan::DType dtype, std::vector<int64_t> shape,
                      size_t elementBytes) {
  HostTensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.data.resize(static_cast<size_t>(tensor.numElements()) * elementBytes);
  for (size_t i = 0; i < tensor.data.size(); ++i)
    tensor.data[i] = static_cast<uint8_t>(i * 37 + 11);
  return tensor;
}

/// The bytes numpy 1.x writes for np.save(f, np.arange(6, dtype='<f4')
/// .reshape(2, 3)), header and all.
std::string numpyWritten() {
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  float values[] = {0, 1, 2, 3, 4, 5};
  bytes.append(reinterpret_cast<const char *>(values), sizeof(values));
  return bytes;
}

/// A .npy file (version 1.0) with `header` as its dict and `dataBytes` zero
/// bytes of data.
std::string withHeader(const std::string &dict, size_t dataBytes) {
  std::string header = dict + "\n";
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  return bytes + header + std::string(dataBytes, '\0');
}

std::string parseError(const std::string &bytes) {
  StatusOr<HostTensor> tensor = parseNpy(bytes, "a.npy");
  EXPECT_FALSE(tensor.isOk());
  return tensor.isOk() ? std::string() : tensor.status().message();
}

struct DtypeCase {
  plan::DType dtype;
  const char *descr;
  size_t bytes;
};

TEST(Npy, RoundTripsEveryDtypeAndShape) {
  TempDir dir;
  const DtypeCase cases[] = {
      {plan::F32, "<f4", 4},  {plan::F64, "<f8", 8}, {plan::F16, "<f2", 2},
      {plan::I64, "<i8", 8},  {plan::I32, "<i4", 4}, {plan::I8, "|i1", 1},
      {plan::BOOL, "|b1", 1},
  };
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {5}, {2, 3}, {2, 0, 4}, {1, 2, 3, 4}};
  for (const DtypeCase &c : cases) {
    EXPECT_STREQ(npyDescr(c.dtype), c.descr);
    for (const std::vector<int64_t> &shape : shapes) {
      HostTensor tensor = makeTensor(c.dtype, shape, c.bytes);
      if (c.dtype == plan::BOOL)
        for (uint8_t &byte : tensor.data)
          byte &= 1;
      std::string path = dir.file("t.npy");
      ASSERT_TRUE(writeNpy(path, tensor).isOk());
      StatusOr<HostTensor> back = readNpy(path);
      ASSERT_TRUE(back.isOk()) << back.status().toString();
      EXPECT_EQ(back->dtype, c.dtype) << c.descr;
      EXPECT_EQ(back->shape, shape) << c.descr;
      EXPECT_EQ(back->data, tensor.data) << c.descr;
    }
  }
}

TEST(Npy, HeaderIsWhatNumpyWrites) {
  HostTensor tensor = makeTensor(plan::F32, {5}, 4);
  StatusOr<std::string> bytes = encodeNpy(tensor);
  ASSERT_TRUE(bytes.isOk());
  EXPECT_EQ(bytes->substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t headerLength = static_cast<unsigned char>((*bytes)[8]) |
                        static_cast<unsigned char>((*bytes)[9]) << 8;
  EXPECT_EQ((10 + headerLength) % 64, 0u) << "data starts 64-byte aligned";
  std::string header = bytes->substr(10, headerLength);
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': "
                         "(5,), }",
                         0),
            0u)
      << header;
  EXPECT_EQ(header.back(), '\n');

  tensor = makeTensor(plan::F32, {}, 4);
  bytes = encodeNpy(tensor);
  ASSERT_TRUE(bytes.isOk());
  EXPECT_NE(bytes->find("'shape': (), }"), std::string::npos);
}

TEST(Npy, ReadsWhatNumpyWrote) {
  StatusOr<HostTensor> tensor = parseNpy(numpyWritten(), "a.npy");
  ASSERT_TRUE(tensor.isOk()) << tensor.status().toString();
  EXPECT_EQ(tensor->dtype, plan::F32);
  EXPECT_EQ(tensor->shape, (std::vector<int64_t>{2, 3}));
  float values[6];
  std::memcpy(values, tensor->data.data(), sizeof(values));
  EXPECT_EQ(values[5], 5.f);
}

TEST(Npy, ReadsVersion2AndOtherSpellings) {
  // Version 2.0 has a 4-byte header length; keys may come in any order and
  // with either quote; Python 2 wrote "3L".
  std::string header =
      "{\"shape\": (3L,), \"fortran_order\": False, \"descr\": \"<i8\"}\n";
  std::string bytes("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i)
    bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header + std::string(24, '\x01');
  StatusOr<HostTensor> tensor = parseNpy(bytes, "a.npy");
  ASSERT_TRUE(tensor.isOk()) << tensor.status().toString();
  EXPECT_EQ(tensor->dtype, plan::I64);
  EXPECT_EQ(tensor->shape, (std::vector<int64_t>{3}));
}

TEST(Npy, WritesVersion2ForHugeHeaders) {
  // Only a shape of thousands of dimensions needs a header over 64 KiB; an
  // empty one (a zero dimension) keeps the data small.
  HostTensor tensor;
  tensor.dtype = plan::I8;
  tensor.shape.assign(30000, 1);
  tensor.shape[0] = 0;
  StatusOr<std::string> bytes = encodeNpy(tensor);
  ASSERT_TRUE(bytes.isOk());
  EXPECT_EQ((*bytes)[6], 2);
  StatusOr<HostTensor> back = parseNpy(*bytes, "big.npy");
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back->shape, tensor.shape);
}

TEST(Npy, NotANpyFile) {
  EXPECT_EQ(parseError("hello world"),
            "a.npy: not a .npy file (it does not start with \"\\x93NUMPY\"); "
            "write it with numpy.save");
  EXPECT_EQ(parseError(""),
            "a.npy: not a .npy file (it does not start with \"\\x93NUMPY\"); "
            "write it with numpy.save");
}

TEST(Npy, UnsupportedVersion) {
  std::string bytes = numpyWritten();
  bytes[6] = 3;
  EXPECT_EQ(parseError(bytes),
            "a.npy: .npy format version 3.0 is not supported (versions 1.0 "
            "and 2.0 are); write it with numpy.save");
}

TEST(Npy, CutShort) {
  std::string bytes = numpyWritten();
  EXPECT_EQ(parseError(bytes.substr(0, 9)),
            "a.npy: the .npy file is cut short inside its header");
  EXPECT_EQ(parseError(bytes.substr(0, 60)),
            "a.npy: the .npy header claims 118 bytes but the file has only 50 "
            "after it: the file is cut short");
  EXPECT_EQ(parseError(bytes.substr(0, bytes.size() - 4)),
            "a.npy: array of shape (2, 3) and dtype '<f4' needs 24 bytes of "
            "data but the file has 20: the file is cut short");
  EXPECT_EQ(parseError(bytes + "xx"),
            "a.npy: array of shape (2, 3) and dtype '<f4' needs 24 bytes of "
            "data but the file has 26: the file has trailing bytes");
}

TEST(Npy, EveryPrefixIsAnErrorNotACrash) {
  std::string bytes = numpyWritten();
  for (size_t length = 0; length < bytes.size(); ++length)
    EXPECT_FALSE(parseNpy(bytes.substr(0, length), "a.npy").isOk()) << length;
}

TEST(Npy, UnsupportedDtypes) {
  EXPECT_EQ(
      parseError(withHeader(
          "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", 4)),
      "a.npy: array dtype '>f4' is big-endian; convert it with "
      "x.astype(x.dtype.newbyteorder('<'))");
  EXPECT_EQ(
      parseError(withHeader(
          "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }", 2)),
      "a.npy: array dtype '<u2' is not supported (float16/32/64, "
      "int8/32/64 and bool are); convert it, e.g. x.astype(np.float32)");
  EXPECT_EQ(parseError(withHeader(
                "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", 8)),
            "a.npy: array dtype '|O' is not supported (float16/32/64, "
            "int8/32/64 and bool are); convert it, e.g. x.astype(np.float32)");
}

TEST(Npy, FortranOrder) {
  EXPECT_EQ(
      parseError(withHeader(
          "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16)),
      "a.npy: array is in Fortran order; save np.ascontiguousarray(x) "
      "instead");
}

TEST(Npy, MalformedHeaders) {
  const char kFix[] = "; write the file with numpy.save";
  struct Case {
    const char *dict;
    const char *problem;
  } cases[] = {
      {"'descr': '<f4'}", "does not start with '{'"},
      {"{descr: '<f4'}", "has a key that is not a string"},
      {"{'descr' '<f4'}", "has no ':' after key 'descr'"},
      {"{'descr': <f4}", "has a bad or repeated 'descr'"},
      {"{'descr': '<f4', 'descr': '<f4'}", "has a bad or repeated 'descr'"},
      {"{'fortran_order': false}", "has a bad or repeated 'fortran_order'"},
      {"{'shape': 3}", "has a 'shape' that is not a tuple"},
      {"{'shape': (-3,)}",
       "has a 'shape' entry that is not a non-negative integer"},
      {"{'shape': (3 4)}", "has a 'shape' tuple without ',' or ')'"},
      {"{'shape': (99999999999999999999,)}",
       "has a 'shape' dimension too large to address"},
      {"{'shape': (1,), 'shape': (1,)}", "repeats 'shape'"},
      {"{'order': 'C'}", "has an unknown key 'order'"},
      {"{'descr': '<f4' 'shape': (1,)}", "has no ',' or '}' after key 'descr'"},
      {"{'descr': '<f4'} extra", "has text after its closing '}'"},
      {"{'descr': '<f4', 'shape': (1,)}",
       "lacks one of 'descr', 'fortran_order' and 'shape'"},
      {"{'descr': '<f4", "has a bad or repeated 'descr'"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(parseError(withHeader(c.dict, 4)),
              std::string("a.npy: malformed .npy header: it ") + c.problem +
                  kFix)
        << c.dict;
}

TEST(Npy, MissingFile) {
  TempDir dir;
  StatusOr<HostTensor> tensor = readNpy(dir.file("absent.npy"));
  ASSERT_FALSE(tensor.isOk());
  EXPECT_EQ(tensor.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tensor.status().message(), "cannot open '" +
                                           dir.file("absent.npy") +
                                           "': No such file or directory");
}

TEST(Npy, Bfloat16HasNoNumpyDtype) {
  HostTensor tensor = makeTensor(plan::BF16, {2}, 2);
  StatusOr<std::string> bytes = encodeNpy(tensor);
  ASSERT_FALSE(bytes.isOk());
  EXPECT_EQ(bytes.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(bytes.status().message(),
            "numpy has no dtype for bf16 tensors, so they cannot be written "
            "as .npy");
}

} // namespace
} // namespace zcc
