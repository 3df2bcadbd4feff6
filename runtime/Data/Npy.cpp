//===- Npy.cpp - NumPy .npy files -----------------------------------------===//
//
// The format (numpy/lib/format.py): the magic "\x93NUMPY", a major and minor
// version byte, the header length (2 bytes little-endian in 1.0, 4 bytes in
// 2.0), then the header, a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces to a multiple of 64 bytes and ended by '\n', then the
// raw elements.
//
//===----------------------------------------------------------------------===//

#include "runtime/Data/Npy.h"

#include "runtime/Support/File.h"

#include <cctype>
#include <cstring>

namespace zcc {

static const char kMagic[] = "\x93NUMPY";
static const size_t kMagicBytes = 6;

namespace {
struct DescrEntry {
  const char *descr;
  plan::DType dtype;
  size_t bytes;
};
} // namespace

// numpy writes one-byte types with '|' (no byte order).
static const DescrEntry kDescrs[] = {
    {"<f4", plan::F32, 4},  {"<f8", plan::F64, 8}, {"<f2", plan::F16, 2},
    {"<i8", plan::I64, 8},  {"<i4", plan::I32, 4}, {"|i1", plan::I8, 1},
    {"|b1", plan::BOOL, 1},
};

const char *npyDescr(plan::DType dtype) {
  for (const DescrEntry &entry : kDescrs)
    if (entry.dtype == dtype)
      return entry.descr;
  return nullptr;
}

static size_t elementBytes(plan::DType dtype) {
  for (const DescrEntry &entry : kDescrs)
    if (entry.dtype == dtype)
      return entry.bytes;
  return 0;
}

namespace {
/// Reads the header dict. Only the three keys numpy writes are accepted, each
/// once; anything else means a file this reader would misinterpret.
class HeaderParser {
public:
  HeaderParser(const std::string &text, const std::string &name)
      : text_(text), name_(name) {}

  Status parse(std::string &descr, bool &fortranOrder,
               std::vector<int64_t> &shape) {
    bool haveDescr = false, haveOrder = false, haveShape = false;
    skipSpace();
    if (!consume('{'))
      return error("does not start with '{'");
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      if (!parseString(key))
        return error("has a key that is not a string");
      skipSpace();
      if (!consume(':'))
        return error("has no ':' after key '" + key + "'");
      skipSpace();
      if (key == "descr") {
        if (haveDescr || !parseString(descr))
          return error("has a bad or repeated 'descr'");
        haveDescr = true;
      } else if (key == "fortran_order") {
        if (haveOrder || !parseBool(fortranOrder))
          return error("has a bad or repeated 'fortran_order'");
        haveOrder = true;
      } else if (key == "shape") {
        if (haveShape)
          return error("repeats 'shape'");
        Status status = parseShape(shape);
        if (!status.isOk())
          return status;
        haveShape = true;
      } else {
        return error("has an unknown key '" + key + "'");
      }
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (consume('}'))
        break;
      return error("has no ',' or '}' after key '" + key + "'");
    }
    skipSpace();
    if (position_ != text_.size())
      return error("has text after its closing '}'");
    if (!haveDescr || !haveOrder || !haveShape)
      return error("lacks one of 'descr', 'fortran_order' and 'shape'");
    return Status::ok();
  }

private:
  Status error(const std::string &problem) const {
    return Status(StatusCode::kInvalidArgument,
                  name_ + ": malformed .npy header: it " + problem +
                      "; write the file with numpy.save");
  }

  void skipSpace() {
    while (position_ < text_.size() &&
           std::isspace(static_cast<unsigned char>(text_[position_])))
      ++position_;
  }

  bool consume(char c) {
    if (position_ < text_.size() && text_[position_] == c) {
      ++position_;
      return true;
    }
    return false;
  }

  bool consumeWord(const char *word) {
    size_t length = std::strlen(word);
    if (text_.compare(position_, length, word) != 0)
      return false;
    position_ += length;
    return true;
  }

  bool parseString(std::string &out) {
    if (position_ >= text_.size())
      return false;
    char quote = text_[position_];
    if (quote != '\'' && quote != '"')
      return false;
    size_t end = text_.find(quote, position_ + 1);
    if (end == std::string::npos)
      return false;
    out = text_.substr(position_ + 1, end - position_ - 1);
    position_ = end + 1;
    return true;
  }

  bool parseBool(bool &out) {
    if (consumeWord("True"))
      out = true;
    else if (consumeWord("False"))
      out = false;
    else
      return false;
    return true;
  }

  Status parseShape(std::vector<int64_t> &shape) {
    shape.clear();
    if (!consume('('))
      return error("has a 'shape' that is not a tuple");
    while (true) {
      skipSpace();
      if (consume(')'))
        return Status::ok();
      if (position_ >= text_.size() ||
          !std::isdigit(static_cast<unsigned char>(text_[position_])))
        return error("has a 'shape' entry that is not a non-negative integer");
      int64_t dim = 0;
      while (position_ < text_.size() &&
             std::isdigit(static_cast<unsigned char>(text_[position_]))) {
        if (__builtin_mul_overflow(dim, 10, &dim) ||
            __builtin_add_overflow(dim, text_[position_] - '0', &dim))
          return error("has a 'shape' dimension too large to address");
        ++position_;
      }
      // Python 2's numpy wrote long integers as "3L".
      consume('L');
      shape.push_back(dim);
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (consume(')'))
        return Status::ok();
      return error("has a 'shape' tuple without ',' or ')'");
    }
  }

  const std::string &text_;
  const std::string &name_;
  size_t position_ = 0;
};
} // namespace

static uint32_t readLittleEndian(const std::string &bytes, size_t at,
                                 int count) {
  uint32_t value = 0;
  for (int i = 0; i < count; ++i)
    value |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + i]))
             << (8 * i);
  return value;
}

StatusOr<HostTensor> parseNpy(const std::string &bytes,
                              const std::string &name) {
  auto invalid = [&](const std::string &problem) {
    return Status(StatusCode::kInvalidArgument, name + ": " + problem);
  };
  if (bytes.size() < kMagicBytes + 2 ||
      bytes.compare(0, kMagicBytes, kMagic) != 0)
    return invalid("not a .npy file (it does not start with \"\\x93NUMPY\"); "
                   "write it with numpy.save");
  int major = static_cast<unsigned char>(bytes[6]);
  int minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2) || minor != 0)
    return invalid(formatString(".npy format version %d.%d is not supported "
                                "(versions 1.0 and 2.0 are); write it with "
                                "numpy.save",
                                major, minor));
  size_t lengthBytes = major == 1 ? 2 : 4;
  size_t headerStart = kMagicBytes + 2 + lengthBytes;
  if (bytes.size() < headerStart)
    return invalid("the .npy file is cut short inside its header");
  uint64_t headerLength =
      readLittleEndian(bytes, kMagicBytes + 2, static_cast<int>(lengthBytes));
  if (headerLength > bytes.size() - headerStart)
    return invalid(formatString("the .npy header claims %llu bytes but the "
                                "file has only %zu after it: the file is cut "
                                "short",
                                static_cast<unsigned long long>(headerLength),
                                bytes.size() - headerStart));

  std::string descr;
  bool fortranOrder = false;
  HostTensor tensor;
  std::string header = bytes.substr(headerStart, headerLength);
  Status parsed =
      HeaderParser(header, name).parse(descr, fortranOrder, tensor.shape);
  if (!parsed.isOk())
    return parsed;

  const DescrEntry *entry = nullptr;
  for (const DescrEntry &candidate : kDescrs)
    if (descr == candidate.descr)
      entry = &candidate;
  if (!entry) {
    if (!descr.empty() && descr[0] == '>')
      return invalid("array dtype '" + descr +
                     "' is big-endian; convert it with x.astype(x.dtype."
                     "newbyteorder('<'))");
    return invalid("array dtype '" + descr +
                   "' is not supported (float16/32/64, int8/32/64 and bool "
                   "are); convert it, e.g. x.astype(np.float32)");
  }
  if (fortranOrder)
    return invalid("array is in Fortran order; save np.ascontiguousarray(x) "
                   "instead");
  tensor.dtype = entry->dtype;

  uint64_t expectedBytes = entry->bytes;
  for (int64_t dim : tensor.shape)
    if (__builtin_mul_overflow(expectedBytes, static_cast<uint64_t>(dim),
                               &expectedBytes))
      return invalid("array shape is too large to address");
  size_t dataStart = headerStart + headerLength;
  uint64_t dataBytes = bytes.size() - dataStart;
  if (dataBytes != expectedBytes)
    return invalid(formatString(
        "array of shape (%s) and dtype '%s' needs %llu bytes of data but the "
        "file has %llu: %s",
        [&] {
          std::string text;
          for (size_t i = 0; i < tensor.shape.size(); ++i)
            text += (i ? ", " : "") + std::to_string(tensor.shape[i]);
          return text;
        }()
            .c_str(),
        descr.c_str(), static_cast<unsigned long long>(expectedBytes),
        static_cast<unsigned long long>(dataBytes),
        dataBytes < expectedBytes ? "the file is cut short"
                                  : "the file has trailing bytes"));
  tensor.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(dataStart),
                     bytes.end());
  return tensor;
}

StatusOr<HostTensor> readNpy(const std::string &path) {
  StatusOr<std::string> bytes = readFile(path);
  if (!bytes.isOk())
    return bytes.takeStatus();
  return parseNpy(*bytes, path);
}

StatusOr<std::string> encodeNpy(const HostTensor &tensor) {
  const char *descr = npyDescr(tensor.dtype);
  if (!descr) {
    std::string name = plan::DType_Name(tensor.dtype);
    for (char &c : name)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return makeStatus(StatusCode::kUnimplemented,
                      "numpy has no dtype for %s tensors, so they cannot be "
                      "written as .npy",
                      name.c_str());
  }
  uint64_t expectedBytes = elementBytes(tensor.dtype);
  for (int64_t dim : tensor.shape)
    expectedBytes *= static_cast<uint64_t>(dim);
  if (tensor.data.size() != expectedBytes)
    return makeStatus(
        StatusCode::kInternal, "a tensor of %llu bytes holds %zu bytes of data",
        static_cast<unsigned long long>(expectedBytes), tensor.data.size());

  // Python's tuple syntax: "()", "(5,)", "(2, 3)".
  std::string shape = "(";
  for (size_t i = 0; i < tensor.shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(tensor.shape[i]);
  if (tensor.shape.size() == 1)
    shape += ",";
  shape += ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";

  // numpy pads the header so the data starts at a multiple of 64 bytes.
  size_t lengthBytes = 2;
  size_t prefix = kMagicBytes + 2 + lengthBytes;
  size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  if (total - prefix > 0xffff) {
    lengthBytes = 4;
    prefix = kMagicBytes + 2 + lengthBytes;
    total = (prefix + header.size() + 1 + 63) / 64 * 64;
  }
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';

  std::string bytes(kMagic, kMagicBytes);
  bytes += static_cast<char>(lengthBytes == 2 ? 1 : 2);
  bytes += '\0';
  uint32_t headerLength = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < lengthBytes; ++i)
    bytes += static_cast<char>((headerLength >> (8 * i)) & 0xff);
  bytes += header;
  bytes.append(reinterpret_cast<const char *>(tensor.data.data()),
               tensor.data.size());
  return bytes;
}

Status writeNpy(const std::string &path, const HostTensor &tensor) {
  StatusOr<std::string> bytes = encodeNpy(tensor);
  if (!bytes.isOk()) {
    Status status = bytes.takeStatus();
    return status.addContext("cannot write '" + path + "'");
  }
  return writeFile(path, *bytes);
}

} // namespace zcc
