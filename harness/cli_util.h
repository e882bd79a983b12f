#pragma once
// Parsing of the whole command line with the project's error policy: a bad flag or value prints
// one line naming it ("ncclsmoke: error: --port: ...") and exits 2; --help / --version exit 0.
#include <CLI/CLI.hpp>
#include <optional>

namespace ncclsmoke::harness {

// Returns an exit code when the process should stop now (help, version, usage error), otherwise
// nullopt and the caller runs the selected action.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

}  // namespace ncclsmoke::harness
