//===- JsonDocument.cpp - JSON with source positions ----------------------===//

#include "compiler/Import/Config/JsonDocument.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <vector>

namespace zcc::config {

std::string joinPath(const std::string &parent, const std::string &key) {
  return parent.empty() ? key : parent + "." + key;
}

namespace {

/// Walks the text for nlohmann's lexer and publishes how far it has read, so
/// the SAX callbacks can tell where the token they receive ends.
class CountingIterator {
public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char *;
  using reference = const char &;

  CountingIterator(const char *current, const char *begin, size_t *consumed)
      : current_(current), begin_(begin), consumed_(consumed) {}

  reference operator*() const { return *current_; }
  CountingIterator &operator++() {
    ++current_;
    *consumed_ = static_cast<size_t>(current_ - begin_);
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator previous = *this;
    ++*this;
    return previous;
  }
  bool operator==(const CountingIterator &other) const {
    return current_ == other.current_;
  }
  bool operator!=(const CountingIterator &other) const {
    return current_ != other.current_;
  }

private:
  const char *current_;
  const char *begin_;
  size_t *consumed_;
};

SourcePos positionAt(const std::string &text, size_t offset) {
  SourcePos pos;
  if (offset > text.size())
    offset = text.size();
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++pos.line;
      pos.column = 1;
    } else {
      ++pos.column;
    }
  }
  return pos;
}

/// Finds the opening quote of a string token whose closing quote is at
/// `closing`, skipping escaped quotes.
size_t openingQuote(const std::string &text, size_t closing) {
  for (size_t i = closing; i-- > 0;) {
    if (text[i] != '"')
      continue;
    size_t backslashes = 0;
    for (size_t j = i; j-- > 0 && text[j] == '\\';)
      ++backslashes;
    if (backslashes % 2 == 0)
      return i;
  }
  return 0;
}

/// Strips nlohmann's "[json.exception.parse_error.101] parse error at line 3,
/// column 5: " prefix; zcc prints its own position.
std::string plainParseMessage(const std::string &what) {
  size_t column = what.find("column ");
  if (column != std::string::npos) {
    size_t colon = what.find(": ", column);
    if (colon != std::string::npos)
      return what.substr(colon + 2);
  }
  size_t bracket = what.find("] ");
  return bracket == std::string::npos ? what : what.substr(bracket + 2);
}

} // namespace

/// Builds the DOM from SAX events, recording key positions and rejecting
/// duplicate keys, too-deep nesting and non-finite numbers.
class JsonDocumentBuilder {
public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  JsonDocumentBuilder(const std::string &text, const size_t *consumed,
                      JsonDocument &document, JsonParseError &error)
      : text_(text), consumed_(consumed), document_(document), error_(error) {}

  bool null() { return addValue(Json(nullptr)); }
  bool boolean(bool value) { return addValue(Json(value)); }
  bool number_integer(number_integer_t value) { return addValue(Json(value)); }
  bool number_unsigned(number_unsigned_t value) { return addValue(Json(value)); }
  bool number_float(number_float_t value, const string_t &spelling) {
    if (!std::isfinite(value))
      return fail(tokenStart(), "the number " + spelling +
                                    " is out of range for a double");
    return addValue(Json(value));
  }
  bool string(string_t &value) { return addValue(Json(value)); }
  bool binary(binary_t &) { return fail(tokenStart(), "binary values are not JSON"); }

  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t &name) {
    Frame &frame = stack_.back();
    size_t closing = *consumed_ == 0 ? 0 : *consumed_ - 1;
    SourcePos pos = positionAt(text_, openingQuote(text_, closing));
    std::string path = joinPath(frame.path, name);
    if (frame.value->contains(name)) {
      SourcePos first = document_.positions_[path];
      return fail(pos, "duplicate key '" + name + "' in " +
                           (frame.path.empty() ? std::string("the top-level object")
                                               : "'" + frame.path + "'") +
                           " (first given at line " + std::to_string(first.line) +
                           ", column " + std::to_string(first.column) +
                           "); DeepSpeed rejects duplicate keys too: keep one");
    }
    document_.positions_[path] = pos;
    pendingKey_ = name;
    return true;
  }

  bool parse_error(std::size_t position, const std::string &lastToken,
                   const nlohmann::detail::exception &exception) {
    if (failed_)
      return false;
    // `position` counts the characters the lexer read: just past the
    // offending token, or one past the end where the input ran out. A lexer
    // error ("last read: ...") points at the character it failed on; a parser
    // error at the start of the token it did not expect. nlohmann resets
    // `lastToken` only when a string or number starts, so it spells exactly
    // those tokens; before a literal or punctuation it also holds the tokens
    // and whitespace read since, and cannot locate them.
    bool lexerError = std::string(exception.what()).find("last read:") != std::string::npos;
    size_t start = position == 0 ? 0 : position - 1;
    if (position > text_.size()) {
      start = text_.size();
    } else if (!lexerError) {
      auto isNumberChar = [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.' ||
               c == 'e' || c == 'E';
      };
      auto isLetter = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
      if (text_[start] == '"')
        start = openingQuote(text_, start);
      else if (!lastToken.empty() && lastToken.size() <= position &&
               std::all_of(lastToken.begin(), lastToken.end(), isNumberChar) &&
               text_.compare(position - lastToken.size(), lastToken.size(), lastToken) == 0)
        start = position - lastToken.size();
      else
        while (start > 0 && isLetter(text_[start]) && isLetter(text_[start - 1]))
          --start;
    }
    error_.pos = positionAt(text_, start);
    error_.message = "invalid JSON: " + plainParseMessage(exception.what());
    failed_ = true;
    return false;
  }

  bool failed() const { return failed_; }

private:
  struct Frame {
    Json *value;
    std::string path;
  };

  SourcePos tokenStart() const {
    return positionAt(text_, *consumed_ == 0 ? 0 : *consumed_ - 1);
  }

  bool fail(SourcePos pos, std::string message) {
    error_.pos = pos;
    error_.message = std::move(message);
    failed_ = true;
    return false;
  }

  /// Places a value in the enclosing container (or as the root) and returns
  /// it with its path.
  std::pair<Json *, std::string> place(Json value) {
    if (stack_.empty()) {
      document_.root_ = std::move(value);
      return {&document_.root_, ""};
    }
    Frame &frame = stack_.back();
    if (frame.value->is_object()) {
      Json &slot = (*frame.value)[pendingKey_];
      slot = std::move(value);
      return {&slot, joinPath(frame.path, pendingKey_)};
    }
    std::string path = frame.path + "[" + std::to_string(frame.value->size()) + "]";
    document_.positions_[path] = tokenStart();
    frame.value->push_back(std::move(value));
    return {&frame.value->back(), path};
  }

  bool addValue(Json value) {
    place(std::move(value));
    return true;
  }

  bool open(Json container) {
    if (stack_.size() >= JsonDocument::kMaxDepth)
      return fail(tokenStart(), "JSON nested deeper than " +
                                    std::to_string(JsonDocument::kMaxDepth) +
                                    " levels; a DeepSpeed config is a few levels deep");
    auto [value, path] = place(std::move(container));
    stack_.push_back(Frame{value, path});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  const std::string &text_;
  const size_t *consumed_;
  JsonDocument &document_;
  JsonParseError &error_;
  std::vector<Frame> stack_;
  std::string pendingKey_;
  bool failed_ = false;
};

std::optional<JsonDocument> JsonDocument::parse(const std::string &text,
                                                JsonParseError &error) {
  // nlohmann's lexer takes a NUL byte for the end of the input: whatever
  // followed one was ignored without a word.
  if (size_t nul = text.find('\0'); nul != std::string::npos) {
    error.pos = positionAt(text, nul);
    error.message = "invalid JSON: a NUL byte, which JSON text never holds (a string spells "
                    "it \\u0000); the file is binary or damaged";
    return std::nullopt;
  }
  JsonDocument document;
  size_t consumed = 0;
  JsonDocumentBuilder builder(text, &consumed, document, error);
  const char *begin = text.data();
  CountingIterator first(begin, begin, &consumed);
  CountingIterator last(begin + text.size(), begin, &consumed);
  bool ok = Json::sax_parse(first, last, &builder);
  if (!ok || builder.failed()) {
    if (error.message.empty())
      error.message = "invalid JSON";
    return std::nullopt;
  }
  return document;
}

SourcePos JsonDocument::positionOf(const std::string &path) const {
  std::string current = path;
  while (!current.empty()) {
    auto it = positions_.find(current);
    if (it != positions_.end())
      return it->second;
    size_t cut = current.find_last_of(".[");
    if (cut == std::string::npos)
      break;
    current.resize(cut);
  }
  return SourcePos();
}

} // namespace zcc::config
