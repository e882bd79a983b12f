#pragma once
// What every subcommand shares, whichever room it lives in: its action and the process exit codes
// (see README: 0 pass, 1 fail, 2 usage, 3 degraded, 4 inconclusive; 5 and 6 publish only;
// 7 history unusable (results/history/history.h); 8 verdict not written). A subcommand registers
// itself on the root CLI::App: it declares its options and sets `action`, which main() runs after
// a successful parse; the action returns the exit code.
#include "harness/common/cli_fwd.h"
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

}  // namespace ncclsmoke::harness
