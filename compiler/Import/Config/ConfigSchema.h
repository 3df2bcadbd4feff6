//===- ConfigSchema.h - The DeepSpeed config schema as data -----*- C++ -*-===//
//
// Every section and key zcc accepts, with DeepSpeed's defaults, types and
// ranges (../shared/DEEPSPEED.md section 1), in one table. The importer walks
// the table; adding a key is adding a row.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_COMPILER_IMPORT_CONFIG_CONFIGSCHEMA_H
#define ZCC_COMPILER_IMPORT_CONFIG_CONFIGSCHEMA_H

#include "compiler/Import/Config/JsonDocument.h"

#include <optional>
#include <string>
#include <vector>

namespace zcc::config {

enum class ValueKind {
  Bool,
  Int,
  Number,
  String,
  /// A string from `choices`.
  Enum,
  /// A fixed-size list of numbers (Adam's betas).
  NumberList,
  /// A list of integers of any length, each in the key's range (MultiStepLR's
  /// milestones).
  IntList,
  /// A nested section with its own keys.
  Section,
  /// A section zcc does not interpret: only its `enabled` flag is read.
  Opaque,
};

/// What "auto" means for a key.
enum class AutoMode {
  /// DeepSpeed drops "auto" before validation, so the default applies.
  UseDefault,
  /// Kept as "auto": zcc's cost model chooses, and the report says what.
  Tune,
  /// "auto" is filled in by the Hugging Face Trainer; zcc needs a value.
  Reject,
};

/// Whether zcc honours a key when it is set away from its default.
enum class Support {
  Yes,
  /// Meaningless in a static plan (a hook or a tracing knob): a warning.
  NoEffect,
  /// Not implemented: an error, never a silent no-op.
  Unsupported,
};

struct SectionSpec;

struct KeySpec {
  std::string name;
  ValueKind kind = ValueKind::Bool;
  /// null for DeepSpeed's None.
  Json defaultValue;
  bool nullable = false;
  std::optional<double> minValue;
  bool minExclusive = false;
  std::optional<double> maxValue;
  bool maxExclusive = false;
  std::vector<std::string> choices;
  size_t listSize = 0;
  const SectionSpec *section = nullptr;
  AutoMode autoMode = AutoMode::UseDefault;
  Support support = Support::Yes;
  std::string supportNote;
  /// Other names accepted silently (pydantic field names for the stage3_*
  /// aliases, since DeepSpeed populates by name too).
  std::vector<std::string> aliases;

  KeySpec &atLeast(double value) {
    minValue = value;
    return *this;
  }
  KeySpec &above(double value) {
    minValue = value;
    minExclusive = true;
    return *this;
  }
  KeySpec &atMost(double value) {
    maxValue = value;
    return *this;
  }
  KeySpec &below(double value) {
    maxValue = value;
    maxExclusive = true;
    return *this;
  }
  KeySpec &orNull() {
    nullable = true;
    return *this;
  }
  KeySpec &autoTuned() {
    autoMode = AutoMode::Tune;
    return *this;
  }
  KeySpec &autoRejected() {
    autoMode = AutoMode::Reject;
    return *this;
  }
  KeySpec &noEffect(std::string why) {
    support = Support::NoEffect;
    supportNote = std::move(why);
    return *this;
  }
  KeySpec &unsupported(std::string why) {
    support = Support::Unsupported;
    supportNote = std::move(why);
    return *this;
  }
  KeySpec &alias(std::string name) {
    aliases.push_back(std::move(name));
    return *this;
  }
};

/// A name DeepSpeed still accepts but that another key replaces.
struct DeprecatedKey {
  enum class Action {
    /// The value moves to `replacement`.
    Rename,
    /// A bool that, when true, means `replacement = {"device": "cpu"}`.
    OffloadToCpu,
    /// Accepted and dropped.
    Drop,
  };
  std::string name;
  std::string replacement;
  Action action = Action::Rename;
  std::string note;
};

struct SectionSpec {
  std::string name;
  std::vector<KeySpec> keys;
  std::vector<DeprecatedKey> deprecated;

  const KeySpec *find(const std::string &key) const;
  const DeprecatedKey *findDeprecated(const std::string &key) const;
  /// Every accepted spelling, for "did you mean".
  std::vector<std::string> spellings() const;
};

/// The top level of a DeepSpeed config.
const SectionSpec &topLevelSchema();

/// Parameters of the optimizers zcc implements ("adam", "adamw", "adagrad",
/// "lion", "sgd").
const SectionSpec &optimizerParamsSchema(const std::string &canonicalType);

/// Parameters of each LR scheduler, by its DeepSpeed name ("WarmupLR", ...).
const SectionSpec *schedulerParamsSchema(const std::string &type);

/// DeepSpeed's scheduler names.
const std::vector<std::string> &schedulerNames();

/// Whether `type` is one of torch.optim.lr_scheduler's classes that zcc
/// runs (DeepSpeed's fallback for a name it does not define).
bool isTorchScheduler(const std::string &type);

/// Optimizer names DeepSpeed knows: its own, lower-cased, and torch.optim's.
struct OptimizerName {
  std::string canonical;
  bool supported;
};
std::optional<OptimizerName> lookupOptimizer(const std::string &type);
std::vector<std::string> optimizerSpellings();

} // namespace zcc::config

#endif // ZCC_COMPILER_IMPORT_CONFIG_CONFIGSCHEMA_H
