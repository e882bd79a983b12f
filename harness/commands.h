#pragma once
// Each subcommand lives in its own file and registers itself on the root CLI::App: it declares
// its options and sets `action`, which main() runs after a successful parse. Actions return the
// process exit code (see README: 0 pass, 1 fail, 2 usage, 3 degraded, 4 inconclusive; 5 and 6
// publish only; 7 history unusable (results/history/history.h); 8 verdict not written).
#include "harness/cli_fwd.h"
#include <chrono>
#include <functional>

namespace ncclsmoke::harness {

using Action = std::function<int()>;

inline constexpr int kExitPass = 0;
inline constexpr int kExitFail = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitDegraded = 3;
inline constexpr int kExitInconclusive = 4;
// `run`: a verdict file (this rank's, or rank 0's global one) could not be written (disk full,
// read-only, I/O error). Wins over every verdict code: a result nobody can read is never a pass.
inline constexpr int kExitVerdictNotWritten = 8;

// Wall-clock now as Unix seconds: "now" for --since and --older-than.
inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void register_store_command(CLI::App& app, Action& action);
void register_run_command(CLI::App& app, Action& action);
void register_launch_command(CLI::App& app, Action& action);
void register_history_command(CLI::App& app, Action& action);   // history import|list
void register_baseline_command(CLI::App& app, Action& action);  // baseline learn
void register_report_command(CLI::App& app, Action& action);    // report --html/--markdown
void register_publish_command(CLI::App& app, Action& action);   // publish VERDICT.json

}  // namespace ncclsmoke::harness
