#pragma once
// The one way harness/ reads the environment. Two readers, for two kinds of variable:
//   - lookup(env, name): a launcher's variables (RANK, MASTER_PORT, SLURM_*, ...) through an
//     injectable Environment, so world discovery, the job identity and the launch plan are pure
//     logic that tests feed a map. Set-but-empty stays "" there: `RANK=` is a CONFIG_* finding
//     that names RANK, not a missing rank.
//   - env(name): ncclsmoke's own knobs (NCCLSMOKE_*), read from the process. Empty reads as
//     unset: `NCCLSMOKE_CLUSTER=` in a manifest means "no value", never the value "".
// No other file in harness/ calls std::getenv.
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace ncclsmoke::harness {

// Looks up one environment variable; nullopt when it is not set (set-but-empty is "").
using Environment = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment, read at lookup time (getenv).
Environment process_environment();
// A fixed environment, for tests and for replaying a pod's env.
Environment map_environment(std::map<std::string, std::string> vars);

// `name` in `env`: nullopt when unset, when `env` is empty, or when the lookup throws (a
// replayed or broken environment must not crash discovery: bad input becomes a finding).
std::optional<std::string> lookup(const Environment& env, const char* name);

// The process's variable `name` when it is set and not empty; nullopt otherwise.
std::optional<std::string> env(const char* name);

}  // namespace ncclsmoke::harness
