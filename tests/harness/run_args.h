#pragma once
// Test helpers shared by the CLI tests: parse `ncclsmoke run ARGS` in process, or run a command
// line and collect what it printed.
#include <CLI/CLI.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "harness/run/run_options.h"

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

// A TCP port free on every address right now, for a store rank 0 will serve: the kernel picks it
// (bind to port 0, dual-stack, then close), so tests running in parallel never share one. 0 when
// no socket could be had.
inline int free_tcp_port() {
  int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  int off = 0;
  ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin6_port);
  ::close(fd);
  return port;
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
