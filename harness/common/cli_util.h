#pragma once
// Parsing of the whole command line with the project's error policy: a bad flag or value prints
// one line naming it ("ncclsmoke: error: --port: ...") and exits 2; --help / --version exit 0.
#include "harness/common/cli_fwd.h"
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ncclsmoke::harness {

// Returns an exit code when the process should stop now (help, version, usage error), otherwise
// nullopt and the caller runs the selected action.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

// The longest deadline any flag accepts: past it a value is a typo, not a plan.
inline constexpr double kMaxSeconds = 7 * 24 * 3600.0;

// A number of seconds written as a plain decimal: finite, > 0 (>= 0 when `zero_ok`: 0 means off),
// at most kMaxSeconds. CLI::PositiveNumber / CLI::Range let "nan" through (every comparison with
// NaN is false) and accept "inf" and "1e308". `hidden_name`: CLI11 names no hidden option in its
// errors, so a hidden flag passes its own name.
CLI::Validator seconds_check(bool zero_ok, const std::string& hidden_name = "");
// A finite number in [lo, hi] (CLI::Range with NaN fixed).
CLI::Validator finite_range(double lo, double hi);
// A size in [min, max] bytes through the one size parser (transports/options.h: 4096, 512K, 64M,
// 1G; binary; "MB" refused): "'1MB' is not a size (accepted: a size from 1 to 1024G; ...)".
CLI::Validator size_check(std::uint64_t min, std::uint64_t max);
// The same grammar for an option stored as a byte count: checks like size_check, then rewrites
// the value to its bytes ("512M" -> "536870912"), so every size flag reads one grammar. A
// transform (->transform), and the option gives its type name itself (->type_name("SIZE")).
CLI::Validator size_value(std::uint64_t min, std::uint64_t max);

// The closest of `candidates` to `typo` (edit distance at most 2, or a prefix of 3+ characters);
// "" when none is close. For "did you mean" on a mistyped flag or command.
std::string closest_name(const std::string& typo, const std::vector<std::string>& candidates);

}  // namespace ncclsmoke::harness
