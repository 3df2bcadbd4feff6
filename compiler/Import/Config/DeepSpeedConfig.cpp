//===- DeepSpeedConfig.cpp - DeepSpeed JSON config import -----------------===//

#include "compiler/Import/Config/DeepSpeedConfig.h"

#include "compiler/Import/Config/ConfigSchema.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

namespace zcc::config {

std::string formatDiagnostic(const std::string &fileName,
                             const ConfigDiagnostic &diagnostic) {
  const char *severity = "error";
  if (diagnostic.severity == ConfigDiagnostic::Severity::Warning)
    severity = "warning";
  else if (diagnostic.severity == ConfigDiagnostic::Severity::Note)
    severity = "note";
  std::ostringstream out;
  out << fileName << ":" << diagnostic.pos.line << ":" << diagnostic.pos.column
      << ": " << severity << ": ";
  if (!diagnostic.path.empty())
    out << diagnostic.path << ": ";
  out << diagnostic.message;
  return out.str();
}

namespace {

/// The closest spelling to `word` among `candidates`, if one is close enough
/// to be a likely typo (or differs only in case).
std::optional<std::string> closestSpelling(const std::string &word,
                                           const std::vector<std::string> &candidates) {
  std::string lower = llvm::StringRef(word).lower();
  unsigned limit = std::max<unsigned>(2, word.size() / 3);
  std::optional<std::string> best;
  unsigned bestDistance = limit + 1;
  for (const std::string &candidate : candidates) {
    std::string candidateLower = llvm::StringRef(candidate).lower();
    if (candidateLower == lower)
      return candidate;
    unsigned distance = llvm::StringRef(lower).edit_distance(
        candidateLower, /*AllowReplacements=*/true, /*MaxEditDistance=*/limit);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = candidate;
    }
  }
  return best;
}

std::string quoteList(const std::vector<std::string> &items) {
  std::string result;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      result += i + 1 == items.size() ? " or " : ", ";
    result += "'" + items[i] + "'";
  }
  return result;
}

/// "the string \"yes\"", "the number 3", "an object", ...
std::string describe(const Json &value) {
  switch (value.type()) {
  case Json::value_t::null:
    return "null";
  case Json::value_t::boolean:
    return value.get<bool>() ? "true" : "false";
  case Json::value_t::string:
    return "the string " + value.dump();
  case Json::value_t::number_integer:
  case Json::value_t::number_unsigned:
  case Json::value_t::number_float:
    return "the number " + value.dump();
  case Json::value_t::object:
    return "an object";
  case Json::value_t::array:
    return "an array";
  default:
    return "a value of another type";
  }
}

std::string formatNumber(double value) {
  Json number = value;
  if (std::floor(value) == value && std::fabs(value) < 1e15)
    return std::to_string(static_cast<long long>(value));
  return number.dump();
}

bool isAuto(const Json &value) { return value.is_string() && value == "auto"; }

class Importer {
public:
  Importer(const JsonDocument &document, const ConfigImportOptions &options,
           ConfigImportResult &result)
      : document_(document), options_(options), result_(result) {}

  std::optional<Json> run();

private:
  // Diagnostics. `error` records the first error and returns nullopt-friendly
  // false; later ones are dropped because they usually follow from it.
  bool error(const std::string &path, std::string message) {
    if (!failed_)
      result_.diagnostics.push_back({ConfigDiagnostic::Severity::Error, path,
                                     document_.positionOf(path), std::move(message)});
    failed_ = true;
    return false;
  }
  void warning(const std::string &path, std::string message) {
    if (failed_)
      return;
    result_.diagnostics.push_back({ConfigDiagnostic::Severity::Warning, path,
                                   document_.positionOf(path), std::move(message)});
  }

  std::optional<Json> resolveSection(const SectionSpec &section, const Json &input,
                                     const std::string &path);
  std::optional<Json> resolveValue(const KeySpec &spec, const Json &value,
                                   const std::string &path);
  bool checkRange(const KeySpec &spec, double value, const std::string &path);
  bool checkSupport(const KeySpec &spec, const Json &resolved, const std::string &path);
  bool unknownKey(const std::string &path, const std::string &key,
                  const std::vector<std::string> &spellings, const std::string &where);

  std::optional<Json> resolveOptimizer(const Json &input);
  std::optional<Json> resolveScheduler(const Json &input, const Json &optimizer);
  bool checkZero(Json &zero);
  void checkCheckpointing(const Json &checkpointing);
  bool checkOneCycleLR(Json &params, const Json &optimizer);
  bool checkPrecision(const Json &config);
  bool checkPipeline(Json &pipeline);
  bool reconcileBatch(Json &config, int64_t dataParallelSize);

  const JsonDocument &document_;
  const ConfigImportOptions &options_;
  ConfigImportResult &result_;
  bool failed_ = false;
};

bool Importer::unknownKey(const std::string &path, const std::string &key,
                          const std::vector<std::string> &spellings,
                          const std::string &where) {
  std::string message = "unknown key '" + key + "' in " + where;
  if (std::optional<std::string> suggestion = closestSpelling(key, spellings))
    message += "; did you mean '" + *suggestion + "'?";
  else
    message += "; zcc rejects unknown keys so that a typo cannot silently fall back "
               "to a default (remove it, or check DeepSpeed's key names)";
  return error(path, std::move(message));
}

std::optional<Json> Importer::resolveSection(const SectionSpec &section,
                                             const Json &input,
                                             const std::string &path) {
  std::string where = path.empty() ? std::string("the top-level object") : "'" + path + "'";
  if (!input.is_object()) {
    error(path, "expected an object, got " + describe(input));
    return std::nullopt;
  }
  // Which canonical key each member sets, and by which spelling.
  std::map<std::string, std::pair<const Json *, std::string>> given;
  std::vector<Json> synthesized;
  synthesized.reserve(input.size());
  auto claim = [&](const std::string &canonical, const Json *value,
                   const std::string &spelling) -> bool {
    auto [it, inserted] = given.try_emplace(canonical, value, spelling);
    if (inserted)
      return true;
    return error(joinPath(path, spelling),
                 "'" + spelling + "' and '" + it->second.second +
                     "' both set '" + canonical + "'; keep one");
  };
  for (auto member = input.begin(); member != input.end(); ++member) {
    const std::string &name = member.key();
    std::string memberPath = joinPath(path, name);
    if (const KeySpec *spec = section.find(name)) {
      if (!claim(spec->name, &member.value(), name))
        return std::nullopt;
      continue;
    }
    if (const DeprecatedKey *deprecated = section.findDeprecated(name)) {
      warning(memberPath, deprecated->note);
      switch (deprecated->action) {
      case DeprecatedKey::Action::Drop:
        break;
      case DeprecatedKey::Action::Rename:
        if (!claim(deprecated->replacement, &member.value(), name))
          return std::nullopt;
        break;
      case DeprecatedKey::Action::OffloadToCpu:
        if (!member.value().is_boolean()) {
          error(memberPath, "expected a boolean (true or false), got " +
                                describe(member.value()));
          return std::nullopt;
        }
        if (member.value().get<bool>()) {
          synthesized.push_back(Json{{"device", "cpu"}});
          if (!claim(deprecated->replacement, &synthesized.back(), name))
            return std::nullopt;
        }
        break;
      }
      continue;
    }
    unknownKey(memberPath, name, section.spellings(), where);
    return std::nullopt;
  }

  Json resolved = Json::object();
  for (const KeySpec &spec : section.keys) {
    auto it = given.find(spec.name);
    std::string keyPath =
        joinPath(path, it == given.end() ? spec.name : it->second.second);
    std::optional<Json> value =
        it == given.end() ? resolveValue(spec, spec.defaultValue, keyPath)
                          : resolveValue(spec, *it->second.first, keyPath);
    if (!value)
      return std::nullopt;
    resolved[spec.name] = std::move(*value);
  }
  return resolved;
}

bool Importer::checkRange(const KeySpec &spec, double value, const std::string &path) {
  bool belowMin = spec.minValue && (spec.minExclusive ? value <= *spec.minValue
                                                      : value < *spec.minValue);
  bool aboveMax = spec.maxValue && (spec.maxExclusive ? value >= *spec.maxValue
                                                      : value > *spec.maxValue);
  if (!belowMin && !aboveMax)
    return true;
  std::string range;
  if (spec.minValue && spec.maxValue)
    range = "between " + formatNumber(*spec.minValue) +
            (spec.minExclusive ? " (exclusive)" : "") + " and " +
            formatNumber(*spec.maxValue) + (spec.maxExclusive ? " (exclusive)" : "");
  else if (spec.minValue)
    range = (spec.minExclusive ? "greater than " : "at least ") +
            formatNumber(*spec.minValue);
  else
    range = (spec.maxExclusive ? "less than " : "at most ") + formatNumber(*spec.maxValue);
  return error(path, formatNumber(value) + " is out of range: '" + spec.name +
                         "' must be " + range);
}

/// Whether an opaque section is switched on (so its support status matters).
bool isActive(const KeySpec &spec, const Json &value) {
  if (value.is_null())
    return false;
  if (spec.defaultValue.is_null())
    return true;
  if (value.is_object()) {
    auto enabled = value.find("enabled");
    if (enabled != value.end())
      return enabled->is_boolean() && enabled->get<bool>();
    return spec.name == "leaf_module" && !value.empty();
  }
  return true;
}

bool Importer::checkSupport(const KeySpec &spec, const Json &resolved,
                            const std::string &path) {
  if (spec.support == Support::Yes)
    return true;
  // "auto" left for zcc-dist-auto-tune to fill is zcc's own choice.
  if (spec.autoMode == AutoMode::Tune && resolved == Json("auto"))
    return true;
  bool changed = spec.kind == ValueKind::Opaque ? isActive(spec, resolved)
                                                : resolved != spec.defaultValue;
  if (!changed)
    return true;
  if (spec.support == Support::NoEffect) {
    warning(path, "has no effect in zcc: " + spec.supportNote);
    return true;
  }
  return error(path, spec.supportNote);
}

std::optional<Json> Importer::resolveValue(const KeySpec &spec, const Json &value,
                                           const std::string &path) {
  if (isAuto(value) && spec.kind != ValueKind::String) {
    switch (spec.autoMode) {
    case AutoMode::Tune:
      return Json("auto");
    case AutoMode::UseDefault:
      return resolveValue(spec, spec.defaultValue, path);
    case AutoMode::Reject:
      error(path, "\"auto\" is filled in by the Hugging Face Trainer; zcc needs a "
                  "value here" +
                      (spec.defaultValue.is_null()
                           ? std::string()
                           : " (DeepSpeed's default is " + spec.defaultValue.dump() + ")"));
      return std::nullopt;
    }
  }
  if (value.is_null() && spec.kind != ValueKind::Section) {
    if (spec.nullable)
      return Json(nullptr);
    error(path, "null is not allowed for '" + spec.name + "'");
    return std::nullopt;
  }

  Json resolved;
  switch (spec.kind) {
  case ValueKind::Bool:
    if (!value.is_boolean()) {
      error(path, "expected a boolean (true or false), got " + describe(value));
      return std::nullopt;
    }
    resolved = value;
    break;
  case ValueKind::Int: {
    int64_t integer = 0;
    if (value.is_number_unsigned()) {
      if (value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
        error(path, value.dump() + " is out of range for a 64-bit integer");
        return std::nullopt;
      }
      integer = static_cast<int64_t>(value.get<uint64_t>());
    } else if (value.is_number_integer()) {
      integer = value.get<int64_t>();
    } else if (value.is_number_float()) {
      // 5e8 is how DeepSpeed configs write bucket sizes; pydantic accepts a
      // float with no fractional part for an int field, and so does zcc.
      double number = value.get<double>();
      if (std::floor(number) != number) {
        error(path, "expected an integer, got " + value.dump());
        return std::nullopt;
      }
      if (std::fabs(number) > 9.2e18) {
        error(path, value.dump() + " is out of range for a 64-bit integer");
        return std::nullopt;
      }
      integer = static_cast<int64_t>(number);
    } else {
      error(path, "expected an integer, got " + describe(value));
      return std::nullopt;
    }
    if (!checkRange(spec, static_cast<double>(integer), path))
      return std::nullopt;
    resolved = integer;
    break;
  }
  case ValueKind::Number: {
    if (!value.is_number()) {
      error(path, "expected a number, got " + describe(value));
      return std::nullopt;
    }
    double number = value.get<double>();
    if (!checkRange(spec, number, path))
      return std::nullopt;
    resolved = number;
    break;
  }
  case ValueKind::String:
    if (!value.is_string()) {
      error(path, "expected a string, got " + describe(value));
      return std::nullopt;
    }
    resolved = value;
    break;
  case ValueKind::Enum: {
    if (!value.is_string()) {
      error(path, "expected one of " + quoteList(spec.choices) + ", got " + describe(value));
      return std::nullopt;
    }
    std::string text = value.get<std::string>();
    if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
      std::string message = "'" + text + "' is not a valid value; expected " +
                            quoteList(spec.choices);
      if (std::optional<std::string> suggestion = closestSpelling(text, spec.choices))
        message += " (did you mean '" + *suggestion + "'?)";
      error(path, std::move(message));
      return std::nullopt;
    }
    resolved = value;
    break;
  }
  case ValueKind::NumberList: {
    size_t size = spec.defaultValue.size();
    if (!value.is_array() || value.size() != size) {
      error(path, "expected a list of " + std::to_string(size) + " numbers, got " +
                      describe(value));
      return std::nullopt;
    }
    resolved = Json::array();
    for (size_t i = 0; i < size; ++i) {
      if (!value[i].is_number()) {
        error(path + "[" + std::to_string(i) + "]",
              "expected a number, got " + describe(value[i]));
        return std::nullopt;
      }
      resolved.push_back(value[i].get<double>());
    }
    break;
  }
  case ValueKind::IntList: {
    if (!value.is_array()) {
      error(path, "expected a list of integers, got " + describe(value));
      return std::nullopt;
    }
    resolved = Json::array();
    for (size_t i = 0; i < value.size(); ++i) {
      std::string item = path + "[" + std::to_string(i) + "]";
      const Json &element = value[i];
      if (!element.is_number() || element.is_number_float() ||
          (element.is_number_unsigned() &&
           element.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))) {
        error(item, "expected an integer, got " + describe(element));
        return std::nullopt;
      }
      int64_t integer = element.get<int64_t>();
      if (!checkRange(spec, static_cast<double>(integer), item))
        return std::nullopt;
      resolved.push_back(integer);
    }
    break;
  }
  case ValueKind::Section: {
    std::optional<Json> section =
        resolveSection(*spec.section, value.is_null() ? Json::object() : value, path);
    if (!section)
      return std::nullopt;
    resolved = std::move(*section);
    break;
  }
  case ValueKind::Opaque:
    if (!value.is_object()) {
      error(path, "expected an object, got " + describe(value));
      return std::nullopt;
    }
    if (auto enabled = value.find("enabled");
        enabled != value.end() && !enabled->is_boolean()) {
      error(joinPath(path, "enabled"),
            "expected a boolean (true or false), got " + describe(*enabled));
      return std::nullopt;
    }
    resolved = value;
    break;
  }
  if (!checkSupport(spec, resolved, path))
    return std::nullopt;
  return resolved;
}

std::optional<Json> Importer::resolveOptimizer(const Json &input) {
  const std::string path = "optimizer";
  if (input.is_null())
    return Json(nullptr);
  if (!input.is_object()) {
    error(path, "expected an object with 'type' and 'params', got " + describe(input));
    return std::nullopt;
  }
  for (auto member = input.begin(); member != input.end(); ++member)
    if (member.key() != "type" && member.key() != "params" &&
        member.key() != "legacy_fusion") {
      unknownKey(joinPath(path, member.key()), member.key(),
                 {"type", "params", "legacy_fusion"}, "'optimizer'");
      return std::nullopt;
    }
  auto type = input.find("type");
  if (type == input.end()) {
    error(path, "'type' is missing; set it to \"AdamW\", \"Adam\", \"Adagrad\", \"Lamb\", "
                "\"Lion\" or \"SGD\"");
    return std::nullopt;
  }
  if (!type->is_string()) {
    error("optimizer.type", "expected a string, got " + describe(*type));
    return std::nullopt;
  }
  std::string name = type->get<std::string>();
  std::optional<OptimizerName> known = lookupOptimizer(name);
  if (!known) {
    std::string message = "unknown optimizer '" + name + "'";
    if (std::optional<std::string> suggestion = closestSpelling(name, optimizerSpellings()))
      message += "; did you mean '" + *suggestion + "'?";
    error("optimizer.type", message + " (zcc supports 'Adam', 'AdamW', 'Adagrad', 'Lamb', 'Lion' and 'SGD')");
    return std::nullopt;
  }
  if (!known->supported) {
    error("optimizer.type", "optimizer '" + name +
                                "' is not supported yet; zcc supports 'Adam', "
                                "'AdamW', 'Adagrad', 'Lamb', 'Lion' and 'SGD'");
    return std::nullopt;
  }
  auto legacyFusion = input.find("legacy_fusion");
  if (legacyFusion != input.end() && !legacyFusion->is_boolean()) {
    error("optimizer.legacy_fusion", "expected a boolean, got " + describe(*legacyFusion));
    return std::nullopt;
  }
  auto paramsIt = input.find("params");
  Json paramsInput = paramsIt == input.end() ? Json::object() : *paramsIt;
  std::optional<Json> params = resolveSection(
      optimizerParamsSchema(known->canonical), paramsInput, "optimizer.params");
  if (!params)
    return std::nullopt;

  if (known->canonical == "adagrad") {
    if ((*params)["initial_accumulator_value"].get<double>() != 0.0) {
      error("optimizer.params.initial_accumulator_value",
            "a non-zero initial_accumulator_value is not supported yet; zcc's Adagrad "
            "starts its sums at 0 (remove it)");
      return std::nullopt;
    }
  } else if (known->canonical != "sgd") {
    for (size_t i = 0; i < 2; ++i) {
      double beta = (*params)["betas"][i].get<double>();
      if (beta < 0.0 || beta >= 1.0) {
        error("optimizer.params.betas[" + std::to_string(i) + "]",
              formatNumber(beta) + " is out of range: " +
                  (known->canonical == "lion"   ? "Lion"
                   : known->canonical == "lamb" ? "Lamb"
                                                : "Adam") +
                  "'s betas must be in [0, 1)");
        return std::nullopt;
      }
    }
    if (known->canonical == "lamb") {
      // DeepSpeed's engine clips before FusedLamb's step and passes it no
      // gradient norms: a max_grad_norm there fails in DeepSpeed.
      if ((*params)["max_grad_norm"].get<double>() != 0.0) {
        error("optimizer.params.max_grad_norm",
              "Lamb's own clipping is not supported (DeepSpeed's engine gives FusedLamb no "
              "gradient norm either); remove it and set the top-level gradient_clipping");
        return std::nullopt;
      }
      double minCoeff = (*params)["min_coeff"].get<double>();
      double maxCoeff = (*params)["max_coeff"].get<double>();
      if (minCoeff > maxCoeff) {
        error("optimizer.params.min_coeff",
              formatNumber(minCoeff) + " is above max_coeff " + formatNumber(maxCoeff) +
                  ": the trust ratio is clamped to [min_coeff, max_coeff]");
        return std::nullopt;
      }
    }
    // DeepSpeed: AdamW always decouples weight decay; "Adam" does too unless
    // adam_w_mode is switched off.
    if (known->canonical == "adamw") {
      if (!(*params)["adam_w_mode"].get<bool>())
        warning("optimizer.params.adam_w_mode",
                "adam_w_mode=false has no effect with AdamW (use type \"Adam\" for "
                "L2-coupled weight decay)");
      (*params)["adam_w_mode"] = true;
    }
  } else {
    bool nesterov = (*params)["nesterov"].get<bool>();
    if (nesterov && ((*params)["momentum"].get<double>() <= 0.0 ||
                     (*params)["dampening"].get<double>() != 0.0)) {
      error("optimizer.params.nesterov",
            "Nesterov momentum needs momentum > 0 and dampening 0 (as in torch.optim.SGD)");
      return std::nullopt;
    }
  }
  return Json{{"type", known->canonical}, {"params", std::move(*params)}};
}

std::optional<Json> Importer::resolveScheduler(const Json &input, const Json &optimizer) {
  const std::string path = "scheduler";
  if (input.is_null())
    return Json(nullptr);
  if (!input.is_object()) {
    error(path, "expected an object with 'type' and 'params', got " + describe(input));
    return std::nullopt;
  }
  for (auto member = input.begin(); member != input.end(); ++member)
    if (member.key() != "type" && member.key() != "params") {
      unknownKey(joinPath(path, member.key()), member.key(), {"type", "params"},
                 "'scheduler'");
      return std::nullopt;
    }
  if (optimizer.is_null()) {
    error(path, "a scheduler needs an optimizer: add an \"optimizer\" section");
    return std::nullopt;
  }
  auto type = input.find("type");
  if (type == input.end()) {
    error(path, "'type' is missing; set it to one of " + quoteList(schedulerNames()));
    return std::nullopt;
  }
  if (!type->is_string()) {
    error("scheduler.type", "expected a string, got " + describe(*type));
    return std::nullopt;
  }
  std::string name = type->get<std::string>();
  const SectionSpec *schema = schedulerParamsSchema(name);
  if (!schema) {
    // torch.optim.lr_scheduler's classes that DeepSpeed would build from the
    // config (engine.py falls back to them) and zcc does not run, and why.
    struct Refused {
      std::vector<std::string> names;
      const char *why;
    };
    static const Refused kRefused[] = {
        {{"LambdaLR", "MultiplicativeLR"},
         "takes a Python function (lr_lambda), which a JSON config cannot give; use one of "},
        {{"SequentialLR", "ChainedScheduler"},
         "chains scheduler objects, which a JSON config cannot give; use one of "},
        {{"CyclicLR", "ReduceLROnPlateau"}, "is not supported yet; zcc supports "}};
    for (const Refused &refused : kRefused)
      if (std::find(refused.names.begin(), refused.names.end(), name) != refused.names.end()) {
        error("scheduler.type", "torch scheduler '" + name + "' " + refused.why +
                                    quoteList(schedulerNames()));
        return std::nullopt;
      }
    std::string message = "unknown scheduler '" + name + "'";
    if (std::optional<std::string> suggestion = closestSpelling(name, schedulerNames()))
      message += "; did you mean '" + *suggestion + "'? (scheduler names are case-sensitive)";
    else
      message += "; zcc supports " + quoteList(schedulerNames());
    error("scheduler.type", message);
    return std::nullopt;
  }
  auto paramsIt = input.find("params");
  Json paramsInput = paramsIt == input.end() ? Json::object() : *paramsIt;
  std::optional<Json> resolvedParams =
      resolveSection(*schema, paramsInput, "scheduler.params");
  if (!resolvedParams)
    return std::nullopt;
  Json &params = *resolvedParams;

  if (params.contains("warmup_type")) {
    std::string warmupType = params["warmup_type"].get<std::string>();
    if (warmupType != "log" && warmupType != "linear") {
      warning("scheduler.params.warmup_type",
              "unknown warmup_type '" + warmupType + "'; DeepSpeed falls back to 'log'");
      params["warmup_type"] = "log";
    }
  }
  if (name == "WarmupLR" && params["warmup_max_lr"].is_null())
    params["warmup_max_lr"] = optimizer["params"]["lr"];
  if (name == "WarmupDecayLR" || name == "WarmupCosineLR") {
    if (params["total_num_steps"].is_null()) {
      error("scheduler.params", "'total_num_steps' is required by " + name +
                                    ": set it to the job's number of optimizer steps");
      return std::nullopt;
    }
    if (params["total_num_steps"].get<int64_t>() < params["warmup_num_steps"].get<int64_t>())
      warning("scheduler.params.total_num_steps",
              "total_num_steps (" + params["total_num_steps"].dump() +
                  ") is less than warmup_num_steps (" + params["warmup_num_steps"].dump() +
                  "): the schedule never leaves warmup");
  }
  if (name == "OneCycle") {
    for (const char *required : {"cycle_min_lr", "cycle_max_lr"})
      if (params[required].is_null()) {
        error("scheduler.params", std::string("'") + required + "' is required by OneCycle");
        return std::nullopt;
      }
    if (params["cycle_second_step_size"].is_null())
      params["cycle_second_step_size"] = params["cycle_first_step_size"];
    if (params["cycle_second_stair_count"].is_null())
      params["cycle_second_stair_count"] = params["cycle_first_stair_count"];
    if (params["cycle_min_mom"].get<double>() > params["cycle_max_mom"].get<double>()) {
      error("scheduler.params.cycle_min_mom", "cycle_min_mom must not exceed cycle_max_mom");
      return std::nullopt;
    }
    if (params["decay_lr_rate"].get<double>() > 0.0 &&
        params["decay_step_size"].get<int64_t>() == 0) {
      error("scheduler.params.decay_step_size",
            "decay_lr_rate > 0 needs decay_step_size > 0 (it divides the decay)");
      return std::nullopt;
    }
  }
  if (isTorchScheduler(name)) {
    // torch requires 'initial_lr' in the param groups of a scheduler built
    // at last_epoch != -1 (KeyError), which DeepSpeed never sets.
    if (params["last_epoch"].get<int64_t>() != -1) {
      error("scheduler.params.last_epoch",
            "torch's " + name +
                " resumes from last_epoch only with 'initial_lr' in the optimizer's param "
                "groups, which DeepSpeed does not set (torch raises KeyError); remove "
                "last_epoch, and resume from a checkpoint instead");
      return std::nullopt;
    }
    struct Required {
      const char *type, *param, *meaning;
    };
    static const Required kRequired[] = {
        {"StepLR", "step_size", ""},
        {"MultiStepLR", "milestones",
         ": the steps (counted from 1) after which the lr is multiplied by gamma"},
        {"ExponentialLR", "gamma", ""},
        {"CosineAnnealingLR", "T_max", ": the steps of half a cosine period"},
        {"CosineAnnealingWarmRestarts", "T_0", ": the steps before the first restart"}};
    for (const Required &required : kRequired)
      if (name == required.type && params[required.param].is_null()) {
        error("scheduler.params", std::string("'") + required.param + "' is required by " +
                                      name + required.meaning);
        return std::nullopt;
      }
  }
  if (name == "OneCycleLR" && !checkOneCycleLR(params, optimizer))
    return std::nullopt;
  return Json{{"type", name}, {"params", std::move(params)}};
}

/// torch.optim.lr_scheduler.OneCycleLR's constructor checks, and its
/// total_steps from epochs * steps_per_epoch when it is not given.
bool Importer::checkOneCycleLR(Json &params, const Json &optimizer) {
  if (params["max_lr"].is_null())
    return error("scheduler.params", "'max_lr' is required by OneCycleLR: the peak lr");
  if (params["total_steps"].is_null()) {
    if (params["epochs"].is_null() || params["steps_per_epoch"].is_null())
      return error("scheduler.params",
                   "OneCycleLR needs total_steps, or epochs and steps_per_epoch (torch "
                   "raises ValueError): set total_steps to the job's optimizer steps");
    params["total_steps"] =
        params["epochs"].get<int64_t>() * params["steps_per_epoch"].get<int64_t>();
  }
  std::string strategy = params["anneal_strategy"].get<std::string>();
  if (strategy != "cos" && strategy != "linear")
    return error("scheduler.params.anneal_strategy",
                 "'" + strategy + "' is not 'cos' or 'linear' (torch raises ValueError)");
  if (params["cycle_momentum"].get<bool>()) {
    // torch cycles Adam's (and Lion's, Lamb's) beta1, SGD's momentum.
    std::string type = optimizer.is_object() ? optimizer["type"].get<std::string>() : "";
    if (type == "adagrad")
      return error("scheduler.params.cycle_momentum",
                   "Adagrad has neither momentum nor betas to cycle (torch raises "
                   "ValueError): set cycle_momentum to false");
    if (type == "sgd")
      return error("scheduler.params.cycle_momentum",
                   "cycling SGD's momentum is not supported yet: set cycle_momentum to false");
  }
  return true;
}

/// DeepSpeed offloads checkpoints to the CPU only when it partitions them.
void Importer::checkCheckpointing(const Json &checkpointing) {
  if (checkpointing["cpu_checkpointing"].get<bool>() &&
      !checkpointing["partition_activations"].get<bool>())
    warning("activation_checkpointing.cpu_checkpointing",
            "has no effect without partition_activations (DeepSpeed offloads only "
            "partitioned checkpoints); set partition_activations to true as well");
}

bool Importer::checkZero(Json &zero) {
  int64_t stage = zero["stage"].get<int64_t>();
  if (zero["overlap_comm"].is_null())
    zero["overlap_comm"] = stage == 3;
  for (const char *section : {"offload_param", "offload_optimizer"}) {
    std::string device = zero[section]["device"].get<std::string>();
    std::string path = std::string("zero_optimization.") + section;
    bool optimizer = std::string(section) == "offload_optimizer";
    const Json &nvmePath = zero[section]["nvme_path"];
    if (device == "nvme" && (!nvmePath.is_string() || nvmePath.get<std::string>().empty()))
      return error(path + ".nvme_path",
                   "device \"nvme\" needs nvme_path: the folder (on an NVMe drive) where each "
                   "rank keeps its swap file; zrun --nvme-path overrides it at run time");
    if (device != "nvme" && nvmePath.is_string())
      warning(path + ".nvme_path", "has no effect: only read with device \"nvme\"");
    if (optimizer && zero[section]["ratio"].get<double>() < 1.0 && stage != 3)
      return error(path + ".ratio",
                   "a ratio below 1 (partial offload) needs ZeRO stage 3 (stage is " +
                       std::to_string(stage) + ")");
    if (device == "none")
      continue;
    if (!optimizer && device == "nvme" &&
        zero["offload_optimizer"]["device"].get<std::string>() == "nvme" &&
        zero["offload_optimizer"]["nvme_path"].is_string() &&
        zero["offload_optimizer"]["nvme_path"] != nvmePath)
      return error(path + ".nvme_path",
                   "differs from offload_optimizer.nvme_path: each rank keeps one swap file, "
                   "for its parameters and its optimizer state; give both the same folder");
    if (std::string(section) == "offload_param" && stage != 3)
      return error(path, "offload_param needs ZeRO stage 3 (stage is " +
                             std::to_string(stage) +
                             "): set zero_optimization.stage to 3, or remove offload_param");
    if (std::string(section) == "offload_optimizer" && stage == 0)
      return error(path, "offload_optimizer needs ZeRO stage 1, 2 or 3 (stage is 0): "
                         "set zero_optimization.stage, or remove offload_optimizer");
  }
  return true;
}

bool Importer::checkPrecision(const Json &config) {
  const Json &fp16 = config["fp16"];
  const Json &bf16 = config["bf16"];
  if (fp16["enabled"].get<bool>() && bf16["enabled"].get<bool>()) {
    bool bf16Legacy = document_.root().contains("bfloat16");
    return error(bf16Legacy ? "bfloat16.enabled" : "bf16.enabled",
                 "fp16 and bf16 cannot both be enabled; keep one");
  }
  if (fp16["enabled"].get<bool>() && fp16["loss_scale"].get<double>() == 0.0) {
    if (fp16["loss_scale_window"].get<int64_t>() <= 0)
      return error("fp16.loss_scale_window",
                   "must be greater than 0 with dynamic loss scaling (loss_scale 0)");
    if (fp16["min_loss_scale"].get<double>() <= 0.0)
      return error("fp16.min_loss_scale",
                   "must be greater than 0 with dynamic loss scaling (loss_scale 0)");
  }
  if (bf16["bf16_optimizer_states"].get<bool>()) {
    if (!bf16["bf16_master_weights_and_grads"].get<bool>())
      return error("bf16.bf16_optimizer_states",
                   "needs bf16.bf16_master_weights_and_grads to be true");
    if (config["zero_optimization"]["stage"].get<int64_t>() < 1)
      return error("bf16.bf16_optimizer_states", "needs ZeRO stage 1 or higher");
  }
  // zcc reduces and accumulates gradients in fp32 (the plan's gradient
  // buffers); a 16-bit choice here would trade accuracy for bandwidth.
  if (const Json &type = config["communication_data_type"];
      type.is_string() && type != "fp32")
    warning("communication_data_type",
            "has no effect in zcc: the gradients are reduced in fp32, not " +
                type.get<std::string>());
  if (const Json &type = config["data_types"]["grad_accum_dtype"];
      type.is_string() && type != "fp32")
    return error("data_types.grad_accum_dtype",
                 "zcc accumulates gradients in fp32; " + type.get<std::string>() +
                     " accumulation is not supported: set it to \"fp32\" or remove it");
  if (config["gradient_allreduce_op"] == "sum" &&
      config["zero_optimization"]["stage"].get<int64_t>() == 3)
    return error("gradient_allreduce_op",
                 "'sum' is not supported with ZeRO stage 3 (DeepSpeed rejects it too); "
                 "use 'avg'");
  return true;
}

bool Importer::checkPipeline(Json &pipeline) {
  std::string method = pipeline["partition_method"].get<std::string>();
  const std::string path = "pipeline.partition_method";
  if (method == "best") {
    warning(path, "'best' is DeepSpeed's unread default; zcc partitions by 'parameters'");
    pipeline["partition_method"] = method = "parameters";
  }
  if (method == "profile")
    return error(path, "'profile' is not supported (DeepSpeed raises NotImplementedError "
                       "too); use 'parameters', 'uniform', 'flops' or 'type:REGEX'");
  if (llvm::StringRef(method).starts_with("type:")) {
    std::string pattern = method.substr(5);
    llvm::Regex regex(pattern, llvm::Regex::IgnoreCase);
    std::string regexError;
    if (pattern.empty() || !regex.isValid(regexError))
      return error(path, "'" + pattern + "' is not a valid regular expression" +
                             (regexError.empty() ? std::string() : ": " + regexError));
  } else if (method != "parameters" && method != "uniform" && method != "flops") {
    std::string message = "'" + method + "' is not a partition method; expected "
                          "'parameters', 'uniform', 'flops' or 'type:REGEX'";
    if (std::optional<std::string> suggestion =
            closestSpelling(method, {"parameters", "uniform", "flops"}))
      message += " (did you mean '" + *suggestion + "'?)";
    return error(path, message);
  }
  if (!pipeline["enabled"].get<bool>() && pipeline["num_stages"].get<int64_t>() != 1) {
    warning("pipeline.num_stages", "has no effect: pipeline.enabled is false");
    pipeline["num_stages"] = 1;
  }
  int64_t stages = pipeline["num_stages"].get<int64_t>();
  // The interleaved schedule's model chunks per stage (Megatron's virtual
  // pipeline size); every other schedule holds one.
  const bool interleaved = pipeline["schedule"] == "interleaved";
  if (!pipeline["chunks"].is_null() && !interleaved) {
    if (pipeline["chunks"].get<int64_t>() != 1)
      warning("pipeline.chunks", "has no effect: only the 'interleaved' schedule splits a "
                                 "stage into chunks");
    pipeline["chunks"] = 1;
  }
  if (pipeline["chunks"].is_null())
    pipeline["chunks"] = interleaved ? 2 : 1;
  if (interleaved && pipeline["enabled"].get<bool>()) {
    if (stages < 2)
      return error("pipeline.schedule",
                   "'interleaved' needs at least 2 stages (num_stages is " +
                       std::to_string(stages) + "): set num_stages, or use '1f1b'");
    if (pipeline["chunks"].get<int64_t>() < 2)
      return error("pipeline.chunks",
                   "the 'interleaved' schedule needs at least 2 chunks per stage, got " +
                       std::to_string(pipeline["chunks"].get<int64_t>()) +
                       "; with one chunk use the '1f1b' schedule");
  }
  if (options_.worldSize % stages != 0) {
    // The divisors in increasing order, from the pairs (d, world size / d)
    // with d <= sqrt(world size). The search stops at 2^20: listing every
    // divisor of a prime world size near 2^61 never finished.
    const int64_t worldSize = options_.worldSize;
    std::vector<int64_t> divisors, cofactors;
    bool complete = true;
    for (int64_t d = 1; d <= worldSize / d; ++d) {
      if (d > (int64_t(1) << 20)) {
        complete = false;
        break;
      }
      if (worldSize % d == 0) {
        divisors.push_back(d);
        if (d != worldSize / d)
          cofactors.push_back(worldSize / d);
      }
    }
    divisors.insert(divisors.end(), cofactors.rbegin(), cofactors.rend());
    std::string listed;
    for (int64_t d : divisors) {
      if (listed.size() >= 60) {
        listed += ", ...";
        break;
      }
      listed += (listed.empty() ? "" : ", ") + std::to_string(d);
    }
    return error("pipeline.num_stages",
                 "num_stages (" + std::to_string(stages) +
                     ") does not divide the world size (" +
                     std::to_string(options_.worldSize) + "): run on a multiple of " +
                     std::to_string(stages) + " ranks, or set num_stages to " +
                     (complete ? "one of " + listed
                               : "a divisor of " + std::to_string(worldSize) + ", such as " +
                                     listed));
  }
  return true;
}

bool multiplyChecked(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}

bool Importer::reconcileBatch(Json &config, int64_t dp) {
  auto read = [&](const char *name) -> std::optional<int64_t> {
    const Json &value = config[name];
    if (value.is_null())
      return std::nullopt;
    return value.get<int64_t>();
  };
  std::optional<int64_t> tb = read("train_batch_size");
  std::optional<int64_t> mb = read("train_micro_batch_size_per_gpu");
  std::optional<int64_t> gas = read("gradient_accumulation_steps");
  Json &pipeline = config["pipeline"];
  const bool microBatchesGiven = !pipeline["micro_batches"].is_null();
  if (pipeline["enabled"].get<bool>() && microBatchesGiven) {
    int64_t microBatches = pipeline["micro_batches"].get<int64_t>();
    if (gas && *gas != microBatches)
      return error("pipeline.micro_batches",
                   "micro_batches (" + std::to_string(microBatches) +
                       ") differs from gradient_accumulation_steps (" +
                       std::to_string(*gas) +
                       "); a pipeline's micro-batch count is its accumulation count: "
                       "set one of them, or both to the same value");
    gas = microBatches;
  }

  const std::string dpText = std::to_string(dp);
  std::string derivation;
  if (tb && mb && gas) {
  } else if (tb && mb) {
    gas = *tb / *mb / dp;
    derivation = "gradient_accumulation_steps = train_batch_size / "
                 "train_micro_batch_size_per_gpu / data-parallel size = " +
                 std::to_string(*tb) + " / " + std::to_string(*mb) + " / " + dpText;
  } else if (tb && gas) {
    mb = *tb / dp / *gas;
    derivation = "train_micro_batch_size_per_gpu = train_batch_size / data-parallel "
                 "size / gradient_accumulation_steps = " +
                 std::to_string(*tb) + " / " + dpText + " / " + std::to_string(*gas);
  } else if (mb && gas) {
    int64_t product = 0;
    if (!multiplyChecked(*mb, *gas, product) || !multiplyChecked(product, dp, product))
      return error("train_micro_batch_size_per_gpu", "the batch size overflows");
    tb = product;
  } else if (tb) {
    gas = 1;
    mb = *tb / dp;
    derivation = "train_micro_batch_size_per_gpu = train_batch_size / data-parallel "
                 "size = " + std::to_string(*tb) + " / " + dpText;
  } else if (mb) {
    gas = 1;
    int64_t product = 0;
    if (!multiplyChecked(*mb, dp, product))
      return error("train_micro_batch_size_per_gpu", "the batch size overflows");
    tb = product;
  } else {
    return error("", "no batch size: set train_batch_size or "
                     "train_micro_batch_size_per_gpu (DeepSpeed needs one of them)");
  }
  if (*gas <= 0 || *mb <= 0)
    return error("train_batch_size",
                 derivation + " is 0 (integer division, as in DeepSpeed): "
                              "train_batch_size must be at least "
                              "train_micro_batch_size_per_gpu * data-parallel size; "
                              "raise train_batch_size or lower the micro-batch size");
  int64_t expected = 0;
  if (!multiplyChecked(*mb, *gas, expected) || !multiplyChecked(expected, dp, expected))
    return error("train_batch_size", "the batch size overflows");
  if (*tb != expected) {
    std::string message =
        "train_batch_size is not equal to train_micro_batch_size_per_gpu * "
        "gradient_accumulation_steps * data-parallel size: " +
        std::to_string(*tb) + " != " + std::to_string(*mb) + " * " +
        std::to_string(*gas) + " * " + dpText;
    if (!derivation.empty())
      message += " (" + derivation + ")";
    message += "; set train_batch_size to " + std::to_string(expected);
    if (*tb % (*mb * dp) == 0)
      message += ", or gradient_accumulation_steps to " + std::to_string(*tb / (*mb * dp));
    if (*tb % (*gas * dp) == 0)
      message += ", or train_micro_batch_size_per_gpu to " + std::to_string(*tb / (*gas * dp));
    int64_t stages = pipeline["num_stages"].get<int64_t>();
    if (*tb % (*mb * *gas) == 0 && *tb / (*mb * *gas) >= 1)
      message += ", or run with --world-size " + std::to_string(*tb / (*mb * *gas) * stages);
    return error("train_batch_size", message);
  }
  // A pipeline plan unrolls every micro-batch of every stage: 2^16 compile
  // in about a second, 1e8 ran out of memory after 20 s.
  constexpr int64_t kMaxPipelineMicroBatches = int64_t(1) << 16;
  if (pipeline["enabled"].get<bool>() && *gas > kMaxPipelineMicroBatches)
    return error(microBatchesGiven ? "pipeline.micro_batches" : "gradient_accumulation_steps",
                 std::to_string(*gas) +
                     " micro-batches per step: a pipeline plan unrolls each of them, and zcc "
                     "allows at most " +
                     std::to_string(kMaxPipelineMicroBatches) +
                     "; lower gradient_accumulation_steps and raise "
                     "train_micro_batch_size_per_gpu");
  config["train_batch_size"] = *tb;
  config["train_micro_batch_size_per_gpu"] = *mb;
  config["gradient_accumulation_steps"] = *gas;
  pipeline["micro_batches"] = *gas;
  int64_t stages = pipeline["num_stages"].get<int64_t>();
  if (pipeline["enabled"].get<bool>() && pipeline["schedule"] == "interleaved" &&
      *gas % stages != 0)
    return error(
        "pipeline.micro_batches",
        "the 'interleaved' schedule runs the micro-batches in groups of num_stages (" +
            std::to_string(stages) + "), but there are " + std::to_string(*gas) +
            "; set pipeline.micro_batches (gradient_accumulation_steps) to a multiple of " +
            std::to_string(stages));
  return true;
}

std::optional<Json> Importer::run() {
  const Json &root = document_.root();
  if (!root.is_object()) {
    error("", "a DeepSpeed config is a JSON object, got " + describe(root));
    return std::nullopt;
  }
  if (options_.worldSize < 1) {
    error("", "the world size must be at least 1");
    return std::nullopt;
  }
  // The legacy form "zero_optimization": true means stage 1 with a top-level
  // allgather_size.
  Json input = root;
  auto zero = input.find("zero_optimization");
  if (zero != input.end() && zero->is_boolean()) {
    bool enabled = zero->get<bool>();
    warning("zero_optimization",
            "the boolean form is deprecated; use \"zero_optimization\": {\"stage\": " +
                std::string(enabled ? "1" : "0") + "}");
    Json section = Json{{"stage", enabled ? 1 : 0}};
    if (enabled && input.contains("allgather_size"))
      section["allgather_bucket_size"] = input["allgather_size"];
    *zero = std::move(section);
  }

  std::optional<Json> config = resolveSection(topLevelSchema(), input, "");
  if (!config)
    return std::nullopt;
  std::optional<Json> optimizer = resolveOptimizer((*config)["optimizer"]);
  if (!optimizer)
    return std::nullopt;
  (*config)["optimizer"] = *optimizer;
  std::optional<Json> scheduler = resolveScheduler((*config)["scheduler"], *optimizer);
  if (!scheduler)
    return std::nullopt;
  (*config)["scheduler"] = *scheduler;

  if (!checkZero((*config)["zero_optimization"]) || !checkPrecision(*config) ||
      !checkPipeline((*config)["pipeline"]))
    return std::nullopt;
  // Lamb's host step (DeepSpeed has none either) is not written yet.
  if (const Json &optimizerSection = (*config)["optimizer"];
      optimizerSection.is_object() && optimizerSection["type"] == "lamb" &&
      (*config)["zero_optimization"]["offload_optimizer"]["device"] != "none") {
    error("zero_optimization.offload_optimizer",
          "Lamb with offload_optimizer is not supported yet (DeepSpeed has no CPU Lamb "
          "either): remove offload_optimizer, or use Adam, AdamW, Adagrad or Lion");
    return std::nullopt;
  }
  checkCheckpointing((*config)["activation_checkpointing"]);
  int64_t stages = (*config)["pipeline"]["num_stages"].get<int64_t>();
  int64_t dp = options_.worldSize / stages;
  if (!reconcileBatch(*config, dp))
    return std::nullopt;
  (*config)["world_size"] = options_.worldSize;
  (*config)["data_parallel_size"] = dp;
  (*config)["pipeline_parallel_size"] = stages;
  return config;
}

} // namespace

ConfigImportResult importDeepSpeedConfig(const std::string &text,
                                         const ConfigImportOptions &options) {
  ConfigImportResult result;
  JsonParseError parseError;
  std::optional<JsonDocument> document = JsonDocument::parse(text, parseError);
  if (!document) {
    result.diagnostics.push_back({ConfigDiagnostic::Severity::Error, "", parseError.pos,
                                  parseError.message});
    return result;
  }
  Importer importer(*document, options, result);
  result.config = importer.run();
  // Warnings in source order; the error, if any, stays last.
  auto isWarning = [](const ConfigDiagnostic &d) {
    return d.severity != ConfigDiagnostic::Severity::Error;
  };
  auto errors = std::stable_partition(result.diagnostics.begin(),
                                      result.diagnostics.end(), isWarning);
  std::stable_sort(result.diagnostics.begin(), errors,
                   [](const ConfigDiagnostic &a, const ConfigDiagnostic &b) {
                     return std::make_pair(a.pos.line, a.pos.column) <
                            std::make_pair(b.pos.line, b.pos.column);
                   });
  return result;
}

} // namespace zcc::config
