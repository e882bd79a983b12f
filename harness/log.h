#pragma once
// The process's log: one line per event on stderr, flushed as it is written, because a Kubernetes
// log (and `kubectl logs -f`) is lines, not a terminal: a line held in a buffer is a hang nobody
// sees. stdout stays for results (summaries, tables, paths); stderr is for what happens.
//
// Two shapes (spdlog underneath, stderr sink, flushed on every line):
//   - tool lines (the default, every command but `run`): the message as written, so a usage error
//     stays one bare line ("ncclsmoke: error: --port: ...");
//   - run lines, once a rank knows who it is: ISO 8601 UTC time, the rank, the level, the message:
//       2026-12-01T15:02:03.123Z rank 0 info  rendezvous: 2/3 joined, waiting for rank 2 ...
//
// Who says what in a run (run_log_level): rank 0 tells the run as it goes (info); the other ranks
// print only their own warnings and errors, so N ranks' logs are not N copies of one story;
// --verbose or NCCLSMOKE_LOG_LEVEL=info|debug makes every rank talk; --quiet prints errors only.
#include <optional>
#include <string>
#include <string_view>

namespace ncclsmoke::harness {

enum class LogLevel { debug, info, warn, error, off };

inline constexpr const char* kLogLevelEnv = "NCCLSMOKE_LOG_LEVEL";
inline constexpr const char* kLogLevelNames = "debug, info, warn, error, off";

// "debug", "info", "warn" (or "warning"), "error", "off" (case-insensitive); nullopt otherwise.
std::optional<LogLevel> parse_log_level(const std::string& text);

// The level of one rank of a run: --quiet (errors only) wins over --verbose (info), which wins
// over NCCLSMOKE_LOG_LEVEL (`env`, "" when unset; already checked by parse_log_level), which wins
// over the default: info on rank 0, warn elsewhere (rank < 0: not known yet, warn).
LogLevel run_log_level(int rank, bool quiet, bool verbose, const std::string& env);

// Switches to run lines for `rank` (timestamp, "rank N", level); callable again once the rank is
// known (before that, rank < 0 prints "rank ?").
void log_for_rank(int rank, LogLevel level);
// Back to tool lines (the message only) at `level`; the default state of the process.
void log_plain(LogLevel level = LogLevel::info);

bool log_enabled(LogLevel level);
void log_line(LogLevel level, std::string_view message);
inline void log_debug(std::string_view m) { log_line(LogLevel::debug, m); }
inline void log_info(std::string_view m) { log_line(LogLevel::info, m); }
inline void log_warn(std::string_view m) { log_line(LogLevel::warn, m); }
inline void log_error(std::string_view m) { log_line(LogLevel::error, m); }

}  // namespace ncclsmoke::harness
