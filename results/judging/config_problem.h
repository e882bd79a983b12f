#pragma once
// What world discovery (harness/world/world.h) found wrong with the command line or the launcher's
// environment, as a typed observation: which variable, its value, what is wrong and how to fix
// it. Discovery only observes; results/judging/probe_rules.h turns each problem into the
// CONFIG_MISSING / CONFIG_INVALID finding through the finding table. It lives here, not in
// harness/, because judging reads it and results/ cannot depend on harness/.
#include <string>

namespace ncclsmoke::results {

struct ConfigProblem {
  enum class Kind {
    missing,    // required and given neither by flag nor by the environment -> CONFIG_MISSING
    invalid,    // given, but unusable -> CONFIG_INVALID, an error: no world is built
    conflict,   // two launchers' variables disagree; one was chosen and the world built anyway
                // -> CONFIG_INVALID as a warning
  };
  Kind kind = Kind::invalid;
  std::string variable;  // "MASTER_PORT", "--rank", ... ("" for an internal failure)
  std::string value;     // the raw value, non-printable bytes escaped as \xNN, truncated; "" if absent
  std::string message;   // one sentence naming the variable and value
  std::string hint;      // what to change, e.g. "set enableServiceLinks: false in the pod spec"
  // Whether discovery could not build a world because of it (missing, invalid).
  bool blocking() const { return kind != Kind::conflict; }
};

}  // namespace ncclsmoke::results
