#include "harness/log.h"

// spdlog is Debian's compiled libspdlog (over the compiled libfmt). Our level names ("warn", not
// spdlog's "warning") are printed by our own pattern flag, %*, since spdlog's %l names are fixed
// when its library is compiled.
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

// %*: the level as every line writes it, padded to one width: "debug", "info ", "warn ", "error".
class LevelFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string_view name = "info ";
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug: name = "debug"; break;
      case spdlog::level::warn: name = "warn "; break;
      case spdlog::level::err:
      case spdlog::level::critical: name = "error"; break;
      default: break;
    }
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<LevelFlag>();
  }
};

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
  auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  f->add_flag<LevelFlag>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%eZ rank " + who + " %* %v");
  l.set_formatter(std::move(f));
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
