//===- DeepSpeedConfig.h - DeepSpeed JSON config import ---------*- C++ -*-===//
//
// Reads a DeepSpeed config as users write it and resolves it the way
// DeepSpeed does: every default filled in, aliases and deprecated names mapped
// to the keys that replace them, "auto" handled, the batch triple reconciled
// against the data-parallel world size. zcc is stricter than DeepSpeed where
// silence would hide a mistake: unknown keys and settings zcc cannot honour
// are errors that say what is wrong, where, and how to fix it.
//
// The resolved config is plain JSON with canonical key names; ConfigAttr.h
// turns it into the `zcc.config` module attribute that passes read.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_COMPILER_IMPORT_CONFIG_DEEPSPEEDCONFIG_H
#define ZCC_COMPILER_IMPORT_CONFIG_DEEPSPEEDCONFIG_H

#include "compiler/Import/Config/JsonDocument.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zcc::config {

struct ConfigDiagnostic {
  enum class Severity { Error, Warning, Note };
  Severity severity = Severity::Error;
  /// Dotted JSON path of the offending member; empty for the whole document.
  std::string path;
  SourcePos pos;
  std::string message;
};

struct ConfigImportOptions {
  /// Total ranks; data-parallel size = worldSize / pipeline stages.
  int64_t worldSize = 1;
};

struct ConfigImportResult {
  /// The resolved config; empty when an error was found.
  std::optional<Json> config;
  /// Warnings and notes in source order, then at most one error (the first
  /// one found: later errors often follow from it).
  std::vector<ConfigDiagnostic> diagnostics;

  bool succeeded() const { return config.has_value(); }
};

/// Parses and resolves `text`.
ConfigImportResult importDeepSpeedConfig(const std::string &text,
                                         const ConfigImportOptions &options);

/// Formats a diagnostic as "FILE:LINE:COL: error: PATH: MESSAGE".
std::string formatDiagnostic(const std::string &fileName,
                             const ConfigDiagnostic &diagnostic);

} // namespace zcc::config

#endif // ZCC_COMPILER_IMPORT_CONFIG_DEEPSPEEDCONFIG_H
