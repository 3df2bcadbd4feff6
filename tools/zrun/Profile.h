//===- Profile.h - zrun --profile's tables ----------------------*- C++ -*-===//
//
// Turns what a profiled executor measured (Executor::profile()) into the
// tables `zrun --profile` prints: the time per program, per kernel and the
// most expensive instructions, like torch.profiler's key_averages().
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_TOOLS_ZRUN_PROFILE_H
#define ZCC_TOOLS_ZRUN_PROFILE_H

#include "runtime/Executor.h"

#include <string>

namespace zcc {

/// The rows --profile prints when it is given no count.
constexpr int kDefaultProfileRows = 25;

/// `executor`'s profile as text: a header naming `scope` (what was
/// measured, e.g. "steps 2-10"), the time per program, then at most `rows`
/// kernels and `rows` instructions, each sorted by total time.
std::string formatProfile(const Executor &executor, const std::string &scope, int rows);

/// Writes the same profile as JSON to `path`: every kernel, the top `rows`
/// instructions and the time per program.
Status writeProfileJson(const Executor &executor, const std::string &scope, int rows,
                        const std::string &path);

/// Where the profile of a run logged to --log-json `logJson` goes: the same
/// name with ".profile.json" for its extension ("run.jsonl" gives
/// "run.profile.json").
std::string profileJsonPath(const std::string &logJson);

} // namespace zcc

#endif // ZCC_TOOLS_ZRUN_PROFILE_H
