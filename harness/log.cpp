#include "harness/log.h"

// Our level names, padded to one width by the pattern ("warn", not spdlog's "warning"). spdlog is
// used header-only (over the compiled libfmt) and only in this file: the names are compiled into
// spdlog's implementation, so Debian's libspdlog could not take them.
#define SPDLOG_LEVEL_NAMES \
  { "trace", "debug", "info", "warn", "error", "crit", "off" }
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

namespace ncclsmoke::harness {
namespace {

spdlog::level::level_enum to_spdlog(LogLevel l) {
  switch (l) {
    case LogLevel::debug: return spdlog::level::debug;
    case LogLevel::info: return spdlog::level::info;
    case LogLevel::warn: return spdlog::level::warn;
    case LogLevel::error: return spdlog::level::err;
    case LogLevel::off: return spdlog::level::off;
  }
  return spdlog::level::info;
}

// One logger for the process, made on first use. stderr_sink_mt: lines from the watch threads and
// the run thread never interleave within a line.
spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> l = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto lg = std::make_shared<spdlog::logger>("ncclsmoke", sink);
    lg->set_formatter(std::make_unique<spdlog::pattern_formatter>("%v"));
    lg->set_level(spdlog::level::info);
    lg->flush_on(spdlog::level::trace);  // every line, as it is written
    return lg;
  }();
  return *l;
}

}  // namespace

std::optional<LogLevel> parse_log_level(const std::string& text) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "debug") return LogLevel::debug;
  if (t == "info") return LogLevel::info;
  if (t == "warn" || t == "warning") return LogLevel::warn;
  if (t == "error") return LogLevel::error;
  if (t == "off") return LogLevel::off;
  return std::nullopt;
}

LogLevel run_log_level(int rank, bool quiet, bool verbose, const std::string& env) {
  if (quiet) return LogLevel::error;
  if (verbose) return LogLevel::info;
  if (auto l = parse_log_level(env)) return *l;
  return rank == 0 ? LogLevel::info : LogLevel::warn;
}

void log_for_rank(int rank, LogLevel level) {
  std::string who = rank < 0 ? "?" : std::to_string(rank);
  auto& l = logger();
  l.set_formatter(std::make_unique<spdlog::pattern_formatter>(
      "%Y-%m-%dT%H:%M:%S.%eZ rank " + who + " %-5l %v", spdlog::pattern_time_type::utc));
  l.set_level(to_spdlog(level));
}

void log_plain(LogLevel level) {
  auto& l = logger();
  l.set_formatter(std::make_unique<spdlog::pattern_formatter>("%v"));
  l.set_level(to_spdlog(level));
}

bool log_enabled(LogLevel level) {
  return level != LogLevel::off && logger().should_log(to_spdlog(level));
}

void log_line(LogLevel level, std::string_view message) {
  if (level == LogLevel::off) return;
  auto& l = logger();
  if (!l.should_log(to_spdlog(level))) return;
  // One event may span lines (a table, a multi-line error): each line gets its own prefix, so
  // grep and a log collector still see whole, attributed lines.
  while (true) {
    auto nl = message.find('\n');
    auto part = message.substr(0, nl);
    l.log(to_spdlog(level), spdlog::string_view_t(part.data(), part.size()));
    if (nl == std::string_view::npos || nl + 1 >= message.size()) break;
    message.remove_prefix(nl + 1);
  }
}

}  // namespace ncclsmoke::harness
