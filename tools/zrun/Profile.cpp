//===- Profile.cpp - zrun --profile's tables ------------------------------===//

#include "tools/zrun/Profile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

namespace zcc {
namespace {

struct KernelRow {
  std::string kernel;
  uint64_t calls = 0;
  double seconds = 0;
};

struct InstructionRow {
  const plan::Program *program = nullptr;
  int index = 0;
  uint64_t calls = 0;
  double seconds = 0;
};

struct ProgramRow {
  std::string name;
  /// Runs of the program: its instructions run once each per run.
  uint64_t runs = 0;
  double seconds = 0;
};

struct Summary {
  double seconds = 0;
  std::vector<ProgramRow> programs;
  /// Sorted by time, longest first (ties in name or plan order), so that
  /// the tables are the same from run to run where times tie.
  std::vector<KernelRow> kernels;
  std::vector<InstructionRow> instructions;
};

Summary summarize(const Executor &executor) {
  Summary summary;
  std::map<std::string, KernelRow> kernels;
  for (const ProgramProfile &program : executor.profile()) {
    ProgramRow row{program.program->name(), 0, 0};
    for (size_t i = 0; i < program.instructions.size(); ++i) {
      const InstructionProfile &counter = program.instructions[i];
      if (counter.calls == 0)
        continue;
      const plan::Instruction &instruction = program.program->instructions(static_cast<int>(i));
      row.runs = std::max(row.runs, counter.calls);
      row.seconds += counter.seconds;
      KernelRow &kernel = kernels[instruction.kernel()];
      kernel.kernel = instruction.kernel();
      kernel.calls += counter.calls;
      kernel.seconds += counter.seconds;
      summary.instructions.push_back(
          {program.program, static_cast<int>(i), counter.calls, counter.seconds});
    }
    summary.seconds += row.seconds;
    if (row.runs > 0)
      summary.programs.push_back(std::move(row));
  }
  for (auto &[name, row] : kernels)
    summary.kernels.push_back(std::move(row));
  std::stable_sort(summary.kernels.begin(), summary.kernels.end(),
                   [](const KernelRow &a, const KernelRow &b) { return a.seconds > b.seconds; });
  std::stable_sort(
      summary.instructions.begin(), summary.instructions.end(),
      [](const InstructionRow &a, const InstructionRow &b) { return a.seconds > b.seconds; });
  return summary;
}

double percentOf(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

/// An instruction's first output as "2x16x64xf32" ("f32" for a scalar).
std::string outputText(const plan::Plan &plan, const plan::Instruction &instruction) {
  if (instruction.outputs_size() == 0)
    return "-";
  const plan::Buffer &buffer = plan.buffers(instruction.outputs(0));
  std::string text;
  for (int64_t dim : buffer.shape())
    text += std::to_string(dim) + "x";
  return text + dtypeText(buffer.dtype());
}

/// Where an instruction came from: its ONNX node, else its output's name.
std::string originText(const plan::Plan &plan, const plan::Instruction &instruction) {
  if (!instruction.location().empty())
    return instruction.location();
  if (instruction.outputs_size() > 0 && !plan.buffers(instruction.outputs(0)).name().empty())
    return plan.buffers(instruction.outputs(0)).name();
  return "-";
}

int widthOf(const std::string &header, size_t longest) {
  return static_cast<int>(std::max(header.size(), longest));
}

} // namespace

std::string formatProfile(const Executor &executor, const std::string &scope, int rows) {
  std::string out;
  const plan::Plan &plan = executor.plan().plan;
  Summary summary = summarize(executor);
  const size_t shown = static_cast<size_t>(std::max(rows, 0));
  out += formatString("\nprofile of %s, %s backend\n", scope.c_str(), executor.backend().name());
  out += "(each instruction ran to completion before the next started: streams did not "
         "overlap)\n";
  out += formatString("total profiled time: %.3f ms\n", summary.seconds * 1e3);

  size_t longest = 0;
  for (const ProgramRow &row : summary.programs)
    longest = std::max(longest, row.name.size());
  int nameWidth = widthOf("program", longest);
  out += formatString("\n%-*s %8s %12s %7s\n", nameWidth, "program", "runs", "total ms", "%");
  for (const ProgramRow &row : summary.programs)
    out += formatString("%-*s %8llu %12.3f %6.1f%%\n", nameWidth, row.name.c_str(),
                        static_cast<unsigned long long>(row.runs), row.seconds * 1e3,
                        percentOf(row.seconds, summary.seconds));

  longest = 0;
  for (const KernelRow &row : summary.kernels)
    longest = std::max(longest, row.kernel.size());
  nameWidth = widthOf("kernel", longest);
  out += formatString("\n%-*s %8s %12s %12s %7s\n", nameWidth, "kernel", "calls", "total ms",
                      "avg us", "%");
  double rest = 0;
  for (size_t k = 0; k < summary.kernels.size(); ++k) {
    const KernelRow &row = summary.kernels[k];
    if (k >= shown) {
      rest += row.seconds;
      continue;
    }
    out += formatString("%-*s %8llu %12.3f %12.3f %6.1f%%\n", nameWidth, row.kernel.c_str(),
                        static_cast<unsigned long long>(row.calls), row.seconds * 1e3,
                        row.calls ? row.seconds * 1e6 / static_cast<double>(row.calls) : 0.0,
                        percentOf(row.seconds, summary.seconds));
  }
  if (summary.kernels.size() > shown)
    out += formatString("(%zu more kernels: %.3f ms, %.1f%%)\n", summary.kernels.size() - shown,
                        rest * 1e3, percentOf(rest, summary.seconds));

  // The instruction table: its text columns sized to the rows it shows.
  struct Line {
    const InstructionRow *row;
    std::string kernel, output, origin;
  };
  std::vector<Line> lines;
  size_t programWidth = 0, kernelWidth = 0, outputWidth = 0;
  for (size_t k = 0; k < summary.instructions.size() && k < shown; ++k) {
    const InstructionRow &row = summary.instructions[k];
    const plan::Instruction &instruction = row.program->instructions(row.index);
    lines.push_back(
        {&row, instruction.kernel(), outputText(plan, instruction), originText(plan, instruction)});
    programWidth = std::max(programWidth, row.program->name().size());
    kernelWidth = std::max(kernelWidth, lines.back().kernel.size());
    outputWidth = std::max(outputWidth, lines.back().output.size());
  }
  const int programColumn = widthOf("program", programWidth);
  const int kernelColumn = widthOf("kernel", kernelWidth);
  const int outputColumn = widthOf("output", outputWidth);
  out += formatString("\ntop %zu of %zu instructions\n", lines.size(), summary.instructions.size());
  out += formatString("%-*s %6s  %-*s  %-*s %8s %12s %7s  %s\n", programColumn, "program", "index",
                      kernelColumn, "kernel", outputColumn, "output", "calls", "total ms", "%",
                      "location");
  for (const Line &line : lines)
    out += formatString("%-*s %6d  %-*s  %-*s %8llu %12.3f %6.1f%%  %s\n", programColumn,
                        line.row->program->name().c_str(), line.row->index, kernelColumn,
                        line.kernel.c_str(), outputColumn, line.output.c_str(),
                        static_cast<unsigned long long>(line.row->calls), line.row->seconds * 1e3,
                        percentOf(line.row->seconds, summary.seconds), line.origin.c_str());
  return out;
}

Status writeProfileJson(const Executor &executor, const std::string &scope, int rows,
                        const std::string &path) {
  const plan::Plan &plan = executor.plan().plan;
  Summary summary = summarize(executor);
  nlohmann::ordered_json json;
  json["scope"] = scope;
  json["backend"] = executor.backend().name();
  json["total_ms"] = summary.seconds * 1e3;
  json["programs"] = nlohmann::ordered_json::array();
  for (const ProgramRow &row : summary.programs)
    json["programs"].push_back({{"program", row.name},
                                {"runs", row.runs},
                                {"total_ms", row.seconds * 1e3},
                                {"percent", percentOf(row.seconds, summary.seconds)}});
  json["kernels"] = nlohmann::ordered_json::array();
  for (const KernelRow &row : summary.kernels)
    json["kernels"].push_back(
        {{"kernel", row.kernel},
         {"calls", row.calls},
         {"total_ms", row.seconds * 1e3},
         {"avg_us", row.calls ? row.seconds * 1e6 / static_cast<double>(row.calls) : 0.0},
         {"percent", percentOf(row.seconds, summary.seconds)}});
  json["instructions"] = nlohmann::ordered_json::array();
  for (size_t k = 0; k < summary.instructions.size() && k < static_cast<size_t>(rows); ++k) {
    const InstructionRow &row = summary.instructions[k];
    const plan::Instruction &instruction = row.program->instructions(row.index);
    json["instructions"].push_back({{"program", row.program->name()},
                                    {"index", row.index},
                                    {"kernel", instruction.kernel()},
                                    {"output", outputText(plan, instruction)},
                                    {"location", originText(plan, instruction)},
                                    {"calls", row.calls},
                                    {"total_ms", row.seconds * 1e3},
                                    {"percent", percentOf(row.seconds, summary.seconds)}});
  }
  // Names from the plan need not be UTF-8; a bad byte must not abort a run
  // built without exceptions.
  std::string text =
      json.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  std::FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    return makeStatus(StatusCode::kUnavailable, "cannot write the profile %s: %s", path.c_str(),
                      std::strerror(errno));
  bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  if (std::fclose(file) != 0 || !written)
    return makeStatus(StatusCode::kUnavailable, "cannot write the profile %s: %s", path.c_str(),
                      std::strerror(errno));
  return Status::ok();
}

std::string profileJsonPath(const std::string &logJson) {
  size_t slash = logJson.rfind('/');
  size_t dot = logJson.rfind('.');
  bool hasExtension =
      dot != std::string::npos && dot > 0 && (slash == std::string::npos || dot > slash + 1);
  return (hasExtension ? logJson.substr(0, dot) : logJson) + ".profile.json";
}

} // namespace zcc
