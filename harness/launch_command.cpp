// `ncclsmoke launch -n N [run flags]`: starts N ranks of `ncclsmoke run` on this machine on a
// free loopback port, waits for them under a deadline, prints rank 0's summary and returns its
// exit code. Each rank's output goes to OUT_DIR/rank<N>.log.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "harness/commands.h"
#include "harness/run_options.h"
#include "rendezvous/deadline.h"

extern char** environ;

namespace ncclsmoke::harness {
namespace {

using rendezvous::Clock;
namespace fs = std::filesystem;

// A port the kernel just handed out on loopback. Another process could take it before rank 0
// binds it; rank 0 then reports the clash (CONFIG_INVALID on MASTER_PORT) and the launcher
// retries once with a new port.
int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

struct LaunchOptions {
  int ranks = 4;
  RunOptions run;
};

pid_t spawn_rank(const std::vector<std::string>& args, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// Starts the world once; returns rank 0's exit code, or -1 when rank 0 could not bind the port.
int launch_once(const LaunchOptions& lo, int port, std::vector<int>& codes) {
  std::vector<pid_t> pids;
  const auto& o = lo.run;
  for (int r = 0; r < lo.ranks; ++r) {
    std::vector<std::string> args{"ncclsmoke",      "run",
                                  "--launcher",     "flags",
                                  "--rank",         std::to_string(r),
                                  "--local-rank",   std::to_string(r),
                                  "--world-size",   std::to_string(lo.ranks),
                                  "--master-addr",  "127.0.0.1",
                                  "--master-port",  std::to_string(port),
                                  "--node-name",    "local-" + std::to_string(r)};
    for (auto& a : run_option_args(o)) args.push_back(a);
    if (o.store_bind.empty()) {
      args.push_back("--store-bind");
      args.push_back("127.0.0.1");
    }
    auto log = (fs::path(o.out_dir) / ("rank" + std::to_string(r) + ".log")).string();
    pid_t pid = spawn_rank(args, log);
    if (pid < 0) {
      std::cerr << "ncclsmoke launch: could not start rank " << r << "\n";
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      return 1;
    }
    pids.push_back(pid);
  }
  // Every rank stops itself by --timeout (its watchdog); the launcher allows a margin, then kills.
  auto deadline = Clock::now() + std::chrono::milliseconds(
                                     static_cast<long long>((o.timeout_s + 10) * 1000));
  codes.assign(pids.size(), -1);
  std::size_t left = pids.size();
  while (left && Clock::now() < deadline) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -1 || pids[i] <= 0) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
    }
    if (left) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (std::size_t i = 0; i < pids.size(); ++i)
    if (codes[i] == -1) {
      ::kill(pids[i], SIGKILL);
      ::waitpid(pids[i], nullptr, 0);
      codes[i] = 137;
      std::cerr << "ncclsmoke launch: rank " << i << " did not finish within --timeout + 10s; "
                << "killed\n";
    }
  return codes[0];
}

int launch(const LaunchOptions& lo) {
  std::error_code ec;
  fs::create_directories(lo.run.out_dir, ec);
  if (ec) {
    std::cerr << "ncclsmoke launch: cannot create --out-dir '" << lo.run.out_dir
              << "': " << ec.message() << "\n";
    return kExitUsage;
  }
  std::vector<int> codes;
  int code = 1;
  for (int attempt = 0; attempt < 2; ++attempt) {
    int port = free_loopback_port();
    if (port <= 0) {
      std::cerr << "ncclsmoke launch: no free loopback port\n";
      return kExitFail;
    }
    code = launch_once(lo, port, codes);
    std::ifstream log0(fs::path(lo.run.out_dir) / "rank0.log");
    std::string text((std::istreambuf_iterator<char>(log0)), std::istreambuf_iterator<char>());
    bool clash = text.find("cannot serve the store on port") != std::string::npos;
    if (clash && attempt == 0) continue;  // the port was taken between our probe and rank 0
    if (!lo.run.quiet) std::cout << text;
    break;
  }
  if (!lo.run.quiet) {
    std::cout << "ranks' exit codes:";
    for (std::size_t r = 0; r < codes.size(); ++r) std::cout << " " << r << "=" << codes[r];
    std::cout << "; logs and verdicts in " << lo.run.out_dir << "\n";
  }
  return code;
}

}  // namespace

void register_launch_command(CLI::App& app, Action& action) {
  auto lo = std::make_shared<LaunchOptions>();
  auto* cmd = app.add_subcommand(
      "launch", "Start N ranks on this machine and print rank 0's verdict");
  cmd->add_option("-n,--ranks", lo->ranks, "Number of ranks")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  add_run_options(*cmd, lo->run, false);
  cmd->callback([lo, &action] { action = [lo] { return launch(*lo); }; });
}

}  // namespace ncclsmoke::harness
