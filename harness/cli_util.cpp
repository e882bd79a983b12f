#include "harness/log.h"
#include "harness/cli_util.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "harness/commands.h"
#include "transports/options.h"

namespace ncclsmoke::harness {

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
    log_error("ncclsmoke: error: " + what + " (see 'ncclsmoke --help')");
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

}  // namespace ncclsmoke::harness
