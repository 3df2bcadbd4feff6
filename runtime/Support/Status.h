//===- Status.h - Errors as values for the runtime --------------*- C++ -*-===//
//
// The runtime builds without exceptions: every fallible call returns a Status
// (or a StatusOr<T>) and callers add context on the way up, so the message that
// reaches the user says what failed and while doing what.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_SUPPORT_STATUS_H
#define ZCC_RUNTIME_SUPPORT_STATUS_H

#include <optional>
#include <string>
#include <utility>

namespace zcc {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kOutOfRange,
  kUnimplemented,
  kResourceExhausted,
  kDeadlineExceeded,
  kDataLoss,
  kUnavailable,
  kInternal,
};

/// The name of a status code as printed in messages ("invalid argument").
const char *statusCodeName(StatusCode code);

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool isOk() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }

  /// Prepends what the caller was doing: "while loading plan.bin: <message>".
  /// Context added later reads first, like a stack unwinding outwards.
  Status &addContext(std::string context);

  /// "<code name>: <message>", or "ok".
  std::string toString() const;

private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

/// Builds a Status from a printf-style format.
Status makeStatus(StatusCode code, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/// printf into a std::string.
std::string formatString(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/// A value or the Status that explains why there is none.
template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) {
    if (status_.isOk())
      status_ = Status(StatusCode::kInternal,
                       "StatusOr constructed from an ok Status without a value");
  }

  bool isOk() const { return status_.isOk(); }
  const Status &status() const { return status_; }
  Status takeStatus() { return std::move(status_); }

  T &value() & { return *value_; }
  const T &value() const & { return *value_; }
  T &&value() && { return std::move(*value_); }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T &operator*() { return *value_; }

private:
  Status status_;
  std::optional<T> value_;
};

} // namespace zcc

/// Returns early with `expr`'s Status, adding printf-style context, when it is
/// not ok: ZCC_RETURN_IF_ERROR(loadPlan(path), "while loading %s", path).
#define ZCC_RETURN_IF_ERROR(expr, ...)                                         \
  do {                                                                         \
    ::zcc::Status zccStatus_ = (expr);                                         \
    if (!zccStatus_.isOk()) {                                                  \
      zccStatus_.addContext(::zcc::formatString(__VA_ARGS__));                 \
      return zccStatus_;                                                       \
    }                                                                          \
  } while (false)

/// Returns early with `expr`'s Status as it is when it is not ok (the caller
/// adds the context).
#define ZCC_RETURN_IF_FAILED(expr)                                             \
  do {                                                                         \
    ::zcc::Status zccStatus_ = (expr);                                         \
    if (!zccStatus_.isOk())                                                    \
      return zccStatus_;                                                       \
  } while (false)

#endif // ZCC_RUNTIME_SUPPORT_STATUS_H
