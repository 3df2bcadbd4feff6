//===- OnnxChecker.cpp - ONNX's model checker, behind a wall --------------===//
//
// ONNX's checker reports problems by throwing; this is the one file of the
// compiler built with exceptions, and none escape it.
//
//===----------------------------------------------------------------------===//

#include "onnx/checker.h"

#include <exception>
#include <string>

namespace zcc::onnx_import {

std::string runOnnxChecker(const std::string &modelPath) {
  try {
    // The path form resolves external data relative to the model's folder.
    onnx::checker::check_model(modelPath);
  } catch (const std::exception &error) {
    std::string message = error.what();
    // The checker appends the whole node as text; the first line says what.
    size_t newline = message.find('\n');
    return newline == std::string::npos ? message : message.substr(0, newline);
  }
  return std::string();
}

} // namespace zcc::onnx_import
