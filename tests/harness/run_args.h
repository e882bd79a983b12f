#pragma once
// Test helpers shared by the CLI tests: parse `ncclsmoke run ARGS` in process, or run a command
// line and collect what it printed.
#include <CLI/CLI.hpp>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "harness/run_options.h"

namespace ncclsmoke::testing {

// Parses `args` as `run ARGS` would (world flags included) into `out`; returns "" or the error
// CLI11 raises. `app` is the parsed command, for tests that look at one option's count.
inline std::string parse_run_args(CLI::App& app, std::vector<std::string> args,
                                  harness::RunOptions& out) {
  harness::add_run_options(app, out, true);
  args.insert(args.begin(), "run");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

struct CommandResult {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `cmd` through the shell, killed after 60 s (so a hang fails the test instead of the suite).
inline CommandResult run_shell(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen(("timeout 60 " + cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace ncclsmoke::testing
