//===- JsonDocument.h - JSON with source positions --------------*- C++ -*-===//
//
// nlohmann-json parses the text; this layer adds what a config importer needs
// for good errors and that nlohmann's DOM does not keep: the line and column
// of every key, duplicate keys as errors (DeepSpeed rejects them too), and a
// bound on nesting depth so no input can exhaust the stack.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_COMPILER_IMPORT_CONFIG_JSONDOCUMENT_H
#define ZCC_COMPILER_IMPORT_CONFIG_JSONDOCUMENT_H

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>

namespace zcc::config {

using Json = nlohmann::ordered_json;

/// A 1-based line and column (in bytes) of the source text.
struct SourcePos {
  unsigned line = 1;
  unsigned column = 1;
};

/// A parse failure: where and what.
struct JsonParseError {
  SourcePos pos;
  std::string message;
};

/// A parsed JSON document that remembers where each member's key stands.
/// Members are addressed by a dotted path with bracketed array indices:
/// "zero_optimization.offload_param.device", "optimizer.params.betas[1]".
class JsonDocument {
public:
  /// Parses `text`; on failure returns nothing and fills `error`.
  static std::optional<JsonDocument> parse(const std::string &text,
                                           JsonParseError &error);

  const Json &root() const { return root_; }

  /// The position of the key of the member at `path` (of the element itself
  /// for array elements); the nearest enclosing member's when `path` has no
  /// recorded position; 1:1 for the document.
  SourcePos positionOf(const std::string &path) const;

  /// Deepest nesting the parser accepts.
  static constexpr unsigned kMaxDepth = 64;

private:
  friend class JsonDocumentBuilder;
  Json root_;
  std::map<std::string, SourcePos> positions_;
};

/// Joins a parent path and a member name: ("", "fp16") -> "fp16",
/// ("fp16", "enabled") -> "fp16.enabled".
std::string joinPath(const std::string &parent, const std::string &key);

} // namespace zcc::config

#endif // ZCC_COMPILER_IMPORT_CONFIG_JSONDOCUMENT_H
