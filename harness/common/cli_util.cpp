#include "harness/common/cli_util.h"
#include "harness/common/log.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <vector>

#include "harness/common/command.h"
#include "transports/options.h"

namespace ncclsmoke::harness {

namespace {

// The subcommand the parse got to (the last one selected at each level).
CLI::App* deepest(CLI::App* a) {
  auto selected = a->get_subcommands();
  return selected.empty() ? a : deepest(selected.back());
}

std::string path_of(const CLI::App* a) {
  std::string path;
  for (; a && a->get_parent(); a = a->get_parent())
    path = a->get_name() + (path.empty() ? "" : " " + path);
  return path.empty() ? "ncclsmoke" : "ncclsmoke " + path;
}

// " (did you mean '--transports'?)" for the first unexpected word close to a flag or command of
// `at`; "" when none is close.
std::string did_you_mean(CLI::App& app, CLI::App* at) {
  std::vector<std::string> names;
  for (const auto* o : at->get_options()) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  for (auto* sub : at->get_subcommands([](CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  std::vector<std::string> extras = at->remaining();
  for (const auto& e : app.remaining()) extras.push_back(e);
  for (const auto& word : extras) {
    std::string w = word.substr(0, word.find('='));
    if (w.empty()) continue;
    std::string near = closest_name(w, names);
    if (!near.empty() && near != w) return " (did you mean '" + near + "'?)";
  }
  return "";
}

}  // namespace

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    // CLI11 puts no name before a hidden option's message (": ..."); such validators name the flag.
    if (what.rfind(": ", 0) == 0) what.erase(0, 2);
    CLI::App* at = deepest(&app);
    // No suggestion after a value CLI11 refused: the words it left unread are the rest of a good
    // command line ("-n" is not a misspelt "-h").
    const bool refused_value = dynamic_cast<const CLI::ValidationError*>(&e) != nullptr ||
                               dynamic_cast<const CLI::ConversionError*>(&e) != nullptr;
    log_error("ncclsmoke: error: " + what + (refused_value ? std::string() : did_you_mean(app, at)) +
              " (see '" + path_of(at) + " --help')");
    return kExitUsage;
  }
  return std::nullopt;
}

CLI::Validator seconds_check(bool zero_ok, const std::string& hidden_name) {
  return CLI::Validator(
      [zero_ok, hidden_name](std::string& v) -> std::string {
        const std::string who = hidden_name.empty() ? "" : hidden_name + ": ";
        const std::string accepted = std::string(zero_ok ? ">= 0" : "> 0") + " and <= " +
                                     std::to_string(static_cast<long>(kMaxSeconds)) + " (7 days)";
        errno = 0;
        char* end = nullptr;
        double d = std::strtod(v.c_str(), &end);
        if (v.empty() || end == v.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(d))
          return who + "'" + v + "' is not a finite number of seconds (accepted: " + accepted + ")";
        if (d < 0 || (d == 0 && !zero_ok) || d > kMaxSeconds)
          return who + "'" + v + "' seconds is out of range (accepted: " + accepted + ")";
        return "";
      },
      "SECONDS");
}

CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        char* end = nullptr;
        double d = std::strtod(v.c_str(), &end);
        std::ostringstream accepted;
        accepted << "a number from " << lo << " to " << hi;
        if (v.empty() || end == v.c_str() || *end != '\0' || !std::isfinite(d) || d < lo || d > hi)
          return "'" + v + "' is not accepted (accepted: " + accepted.str() + ")";
        return "";
      },
      "NUMBER");
}

CLI::Validator size_check(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& v) -> std::string {
        auto why = transports::check_size(v, min, max);
        return why.empty() ? "" : fmt::format("'{}' {}", v, why);
      },
      "SIZE");
}

CLI::Validator size_value(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& v) -> std::string {
        auto why = transports::check_size(v, min, max);
        if (!why.empty()) return fmt::format("'{}' {}", v, why);
        if (auto bytes = transports::parse_size(v)) v = std::to_string(*bytes);
        return "";
      },
      "");  // the option names its type (SIZE)
}

std::string closest_name(const std::string& typo, const std::vector<std::string>& candidates) {
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::string best;
  std::size_t best_d = 3;
  for (const auto& c : candidates) {
    std::size_t d = distance(typo, c);
    // "--trans" for "--transports": a clear prefix counts as close.
    if (typo.size() >= 5 && c.rfind(typo, 0) == 0) d = std::min<std::size_t>(d, 1);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

}  // namespace ncclsmoke::harness
