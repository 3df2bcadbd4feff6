//===- Status.cpp - Errors as values for the runtime ----------------------===//

#include "runtime/Support/Status.h"

#include <cstdarg>
#include <cstdio>

namespace zcc {

const char *statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::kOk:
    return "ok";
  case StatusCode::kInvalidArgument:
    return "invalid argument";
  case StatusCode::kNotFound:
    return "not found";
  case StatusCode::kAlreadyExists:
    return "already exists";
  case StatusCode::kFailedPrecondition:
    return "failed precondition";
  case StatusCode::kOutOfRange:
    return "out of range";
  case StatusCode::kUnimplemented:
    return "not supported yet";
  case StatusCode::kResourceExhausted:
    return "resource exhausted";
  case StatusCode::kDeadlineExceeded:
    return "deadline exceeded";
  case StatusCode::kDataLoss:
    return "data loss";
  case StatusCode::kUnavailable:
    return "unavailable";
  case StatusCode::kInternal:
    return "internal error";
  }
  return "unknown";
}

Status &Status::addContext(std::string context) {
  if (isOk() || context.empty())
    return *this;
  message_ = std::move(context) + ": " + message_;
  return *this;
}

std::string Status::toString() const {
  if (isOk())
    return "ok";
  return std::string(statusCodeName(code_)) + ": " + message_;
}

static std::string vformatString(const char *format, va_list args) {
  va_list copy;
  va_copy(copy, args);
  int size = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (size <= 0)
    return std::string();
  std::string result(static_cast<size_t>(size), '\0');
  std::vsnprintf(result.data(), result.size() + 1, format, args);
  return result;
}

std::string formatString(const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::string result = vformatString(format, args);
  va_end(args);
  return result;
}

Status makeStatus(StatusCode code, const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::string message = vformatString(format, args);
  va_end(args);
  return Status(code, std::move(message));
}

} // namespace zcc
