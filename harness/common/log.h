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
//
// --log-format json (or NCCLSMOKE_LOG_FORMAT=json) makes every line one JSON object for a log
// collector (Loki, Fluent Bit): {"time", "rank" (null until known), "host", "level", "phase"
// (the run's phase at the time, "" outside a run), "message", and "code" on a finding's line}.
// At the end of a run each warning or error finding gets its own line there, with its code.
// --color auto|always|never colours the level of text run lines; auto means stderr is a terminal
// and NO_COLOR is not set (no-color.org).
#include <optional>
#include <string>
#include <string_view>

namespace ncclsmoke::harness {

enum class LogLevel { debug, info, warn, error, off };
enum class LogFormat { text, json };
enum class ColorMode { automatic, always, never };

inline constexpr const char* kLogLevelEnv = "NCCLSMOKE_LOG_LEVEL";
inline constexpr const char* kLogLevelNames = "debug, info, warn, error, off";

// "debug", "info", "warn" (or "warning"), "error", "off" (case-insensitive); nullopt otherwise.
std::optional<LogLevel> parse_log_level(const std::string& text);
inline constexpr const char* kLogFormatEnv = "NCCLSMOKE_LOG_FORMAT";
// "text" or "json" (case-insensitive); nullopt otherwise.
std::optional<LogFormat> parse_log_format(const std::string& text);
// "auto", "always", "never" (case-insensitive); nullopt otherwise.
std::optional<ColorMode> parse_color_mode(const std::string& text);
// The line shape and colour for the rest of the process (call before the run starts; the
// current level and rank stay). `no_color_env`: NO_COLOR's value ("" when unset).
void log_configure(LogFormat format, ColorMode color, const std::string& no_color_env);
bool log_is_json();
// The run's current phase and this process's host, for JSON lines.
void log_set_phase(std::string_view phase);
void log_set_host(std::string_view host);
// One JSON log line's object, without its newline: the shape every --log-format json line has
// (time now; rank < 0 is null; code "" leaves the field out). For a line written outside the
// logger (launch's own lines about its ranks).
std::string json_log_object(LogLevel level, std::string_view message, std::string_view code,
                            int rank, std::string_view host, std::string_view phase);
// A line about a finding: in JSON its "code" field is `code`; in text the line reads
// "<code>: <message>".
void log_finding(LogLevel level, std::string_view code, std::string_view message);

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
