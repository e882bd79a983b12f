// `ncclsmoke run`: one process per rank. The door (flags, NCCLSMOKE_LOG_LEVEL) is here; the run
// itself is harness/run/run_session.h: world -> rendezvous (store join) -> mesh -> transports ->
// verdict, under a watchdog.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "harness/run/run_command.h"
#include "harness/common/env.h"
#include "harness/common/log.h"
#include "harness/run/run_options.h"
#include "harness/run/run_session.h"
#include "harness/world/job_identity.h"

namespace ncclsmoke::harness {

int run_smoke(const RunOptions& options) {
  // NCCLSMOKE_LOG_LEVEL is checked at the door like a flag: a typo is a usage error naming it.
  const std::string log_env = env(kLogLevelEnv).value_or("");
  if (!log_env.empty() && !parse_log_level(log_env)) {
    log_error(fmt::format("ncclsmoke: error: {}='{}' is not a log level (accepted: {})",
                          kLogLevelEnv, log_env, kLogLevelNames));
    return kExitUsage;
  }
  // NCCLSMOKE_RUN_ID (launch sets it: its run folder's name) becomes every verdict's run_id.
  if (auto id = env(kRunIdEnv))
    if (const std::string why = run_id_problem(*id); !why.empty()) {
      log_error(fmt::format("ncclsmoke: error: {}='{}' is not a run id: {} (use letters, digits, "
                            "'-', '_' and '.', at most 128)",
                            kRunIdEnv, *id, why));
      return kExitUsage;
    }
  // --log-format, else NCCLSMOKE_LOG_FORMAT (checked at the door too), and --color.
  std::string format_text = options.log_format;
  const char* format_from = "--log-format";
  if (format_text.empty()) {
    format_text = env(kLogFormatEnv).value_or("text");
    format_from = kLogFormatEnv;
  }
  auto format = parse_log_format(format_text);
  if (!format) {
    log_error(fmt::format("ncclsmoke: error: {}='{}' is not a log format (accepted: text, json)",
                          format_from, format_text));
    return kExitUsage;
  }
  log_configure(*format, parse_color_mode(options.color).value_or(ColorMode::automatic),
                env("NO_COLOR").value_or(""));
  // Until the rank is known: run lines marked "rank ?", warnings and errors only.
  log_for_rank(-1, run_log_level(-1, options.quiet, false, log_env));
  return RunSession(options, log_env).run();
}

void register_run_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<RunOptions>();
  auto* run = app.add_subcommand(
      "run", "Run one rank of the smoke test: rendezvous, mesh probe, verdict");
  add_run_options(*run, *options, true);
  run->callback([options, &action] { action = [options] { return run_smoke(*options); }; });
}

}  // namespace ncclsmoke::harness
