//===- RunTool.h - Run a command-line tool from a test ----------*- C++ -*-===//
//
// Tests of zrun's and zplan's command-line contract run the built tools as
// a user would and look at the exit code and what they print.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_TEST_RUNTIME_RUNTOOL_H
#define ZCC_TEST_RUNTIME_RUNTOOL_H

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <sys/wait.h>
#include <vector>

namespace zcc::test {

struct ToolResult {
  int exitCode = -1;
  std::string output; // standard output and standard error together
};

inline std::string shellQuote(const std::string &text) {
  std::string quoted = "'";
  for (char c : text)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

/// Runs `tool` with `args` through the shell, each argument quoted.
inline ToolResult runTool(const char *tool, const std::vector<std::string> &args) {
  std::string command = shellQuote(tool);
  for (const std::string &arg : args)
    command += " " + shellQuote(arg);
  command += " 2>&1";
  ToolResult result;
  std::FILE *pipe = ::popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << command;
  if (!pipe)
    return result;
  char buffer[4096];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    result.output.append(buffer, got);
  int status = ::pclose(pipe);
  result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

} // namespace zcc::test

#endif // ZCC_TEST_RUNTIME_RUNTOOL_H
