#include "harness/common/log.h"

// spdlog is Debian's compiled libspdlog (over the compiled libfmt). Our level names ("warn", not
// spdlog's "warning") are printed by our own pattern flag, %*, since spdlog's %l names are fixed
// when its library is compiled.
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <memory>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

std::string own_hostname() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "unknown-host";
}

// What a JSON line says beside the message (set from the run as it goes).
struct LineState {
  std::mutex mu;
  LogFormat format = LogFormat::text;
  bool color = false;
  bool run_lines = false;  // log_for_rank's shape (else tool lines)
  int rank = -1;
  std::string host = own_hostname();
  std::string phase;
};
LineState& state() {
  static LineState s;
  return s;
}

std::string_view level_name(LogLevel l) {
  switch (l) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
    case LogLevel::off: return "off";
  }
  return "info";
}

// 2026-12-01T15:02:03.123Z, as the text lines write it.
std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms));
}

// This process's line, with the run's rank, host and phase as they are now.
std::string json_line(LogLevel level, std::string_view message, std::string_view code) {
  auto& s = state();
  int rank;
  std::string host, phase;
  {
    std::lock_guard lock(s.mu);
    rank = s.rank;
    host = s.host;
    phase = s.phase;
  }
  return json_log_object(level, message, code, rank, host, phase);
}

// The sink for the chosen colour: spdlog's colour sink marks the level (%^...%$) on a terminal.
void use_sink(bool color) {
  auto& l = logger();
  l.sinks().clear();
  if (color) {
    l.sinks().push_back(
        std::make_shared<spdlog::sinks::stderr_color_sink_mt>(spdlog::color_mode::always));
  } else {
    l.sinks().push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  }
}

std::string lowered(std::string t) {
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return t;
}

}  // namespace

// Invalid UTF-8 in a message (a peer's bytes) is replaced, never thrown on.
std::string json_log_object(LogLevel level, std::string_view message, std::string_view code,
                            int rank, std::string_view host, std::string_view phase) {
  nlohmann::json j;
  j["time"] = utc_now();
  j["rank"] = rank < 0 ? nlohmann::json(nullptr) : nlohmann::json(rank);
  j["host"] = std::string(host);
  j["phase"] = std::string(phase);
  j["level"] = level_name(level);
  j["message"] = std::string(message);
  if (!code.empty()) j["code"] = std::string(code);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<LogFormat> parse_log_format(const std::string& text) {
  const std::string t = lowered(text);
  if (t == "text") return LogFormat::text;
  if (t == "json") return LogFormat::json;
  return std::nullopt;
}

std::optional<ColorMode> parse_color_mode(const std::string& text) {
  const std::string t = lowered(text);
  if (t == "auto") return ColorMode::automatic;
  if (t == "always") return ColorMode::always;
  if (t == "never") return ColorMode::never;
  return std::nullopt;
}

void log_configure(LogFormat format, ColorMode color, const std::string& no_color_env) {
  auto& s = state();
  bool on = color == ColorMode::always ||
            (color == ColorMode::automatic && no_color_env.empty() && ::isatty(STDERR_FILENO));
  if (format == LogFormat::json) on = false;
  bool run_lines;
  int rank;
  {
    std::lock_guard lock(s.mu);
    s.format = format;
    s.color = on;
    run_lines = s.run_lines;
    rank = s.rank;
  }
  use_sink(on);
  auto& l = logger();
  const auto level = l.level();
  if (run_lines) {
    log_for_rank(rank, LogLevel::info);
  } else {
    l.set_formatter(std::make_unique<spdlog::pattern_formatter>("%v"));
  }
  l.set_level(level);
}

bool log_is_json() {
  auto& s = state();
  std::lock_guard lock(s.mu);
  return s.format == LogFormat::json;
}

void log_set_phase(std::string_view phase) {
  auto& s = state();
  std::lock_guard lock(s.mu);
  s.phase = std::string(phase);
}

void log_set_host(std::string_view host) {
  auto& s = state();
  std::lock_guard lock(s.mu);
  if (!host.empty()) s.host = std::string(host);
}

std::optional<LogLevel> parse_log_level(const std::string& text) {
  const std::string t = lowered(text);
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
  auto& s = state();
  bool json, color;
  {
    std::lock_guard lock(s.mu);
    s.run_lines = true;
    s.rank = rank;
    json = s.format == LogFormat::json;
    color = s.color;
  }
  std::string who = rank < 0 ? "?" : std::to_string(rank);
  auto& l = logger();
  if (json) {
    // log_line builds the whole object; the formatter adds nothing.
    l.set_formatter(std::make_unique<spdlog::pattern_formatter>("%v"));
  } else {
    auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    f->add_flag<LevelFlag>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%eZ rank " + who +
                                            (color ? " %^%*%$ %v" : " %* %v"));
    l.set_formatter(std::move(f));
  }
  l.set_level(to_spdlog(level));
}

void log_plain(LogLevel level) {
  auto& s = state();
  {
    std::lock_guard lock(s.mu);
    s.run_lines = false;
  }
  auto& l = logger();
  l.set_formatter(std::make_unique<spdlog::pattern_formatter>("%v"));
  l.set_level(to_spdlog(level));
}

bool log_enabled(LogLevel level) {
  return level != LogLevel::off && logger().should_log(to_spdlog(level));
}

namespace {
void emit(LogLevel level, std::string_view message, std::string_view code) {
  if (level == LogLevel::off) return;
  auto& l = logger();
  if (!l.should_log(to_spdlog(level))) return;
  auto& s = state();
  bool json;
  {
    std::lock_guard lock(s.mu);
    json = s.format == LogFormat::json && s.run_lines;
  }
  // One event may span lines (a table, a multi-line error): each line gets its own prefix (or
  // its own JSON object), so grep and a log collector still see whole, attributed lines.
  while (true) {
    auto nl = message.find('\n');
    auto part = message.substr(0, nl);
    if (json) {
      const std::string line = json_line(level, part, code);
      l.log(to_spdlog(level), spdlog::string_view_t(line.data(), line.size()));
    } else if (!code.empty()) {
      const std::string line = fmt::format("{}: {}", code, part);
      l.log(to_spdlog(level), spdlog::string_view_t(line.data(), line.size()));
    } else {
      l.log(to_spdlog(level), spdlog::string_view_t(part.data(), part.size()));
    }
    if (nl == std::string_view::npos || nl + 1 >= message.size()) break;
    message.remove_prefix(nl + 1);
  }
}
}  // namespace

void log_line(LogLevel level, std::string_view message) { emit(level, message, {}); }

void log_finding(LogLevel level, std::string_view code, std::string_view message) {
  emit(level, message, code);
}

}  // namespace ncclsmoke::harness
