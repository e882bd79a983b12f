// `ncclsmoke launch [--nnodes N --node-rank R] [-n|--nproc-per-node P] [run flags]`: a per-node
// launcher in the manner of torchrun. It starts this node's P ranks of `ncclsmoke run` (global
// rank = node rank * P + local rank), waits for them under a deadline, prints the summary of this
// node's lowest rank (on node 0: rank 0's global verdict) and returns that rank's exit code. What
// it reads and defaults to is launch_plan.h; with no flags and no launcher variables it is the
// single-machine launcher it always was (one node, loopback, a free port retried once on a clash).
//
// The screen (the Relay below): the lowest local rank's stdout on stdout (its live nccl-tests
// rows and its summary) and its stderr (log lines) on stderr, as `run` prints them; with
// --verbose (or NCCLSMOKE_LOG_LEVEL=info|debug) every local rank's stderr too, each line
// prefixed "[rank N] ". Every rank's stdout and stderr also go, line by line, to
// OUT_DIR/rank<global rank>.log. The lowest rank's summary is held back until every rank ended:
// first what this node's other ranks found themselves (their own error findings from
// verdict.rank<N>.json that the shown verdict lacks: a rank 1 that could not resolve
// MASTER_ADDR says RENDEZVOUS_DNS, where rank 0 only saw it missing), then the summary, then,
// when a rank exited non-zero, a torchrun-like banner naming the first failure (rank, host, pid,
// exit code, time, log and verdict), on stderr.
//
// One run id: the run folder's name (./ncclsmoke-runs/<run id>/) is handed to every rank as
// NCCLSMOKE_RUN_ID, the verdicts' run_id. NCCLSMOKE_LOG_LEVEL is checked before any rank starts,
// and an --out-dir that cannot be written exits 8 naming it, as `run` does.
#include <CLI/CLI.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "harness/common/cli_util.h"
#include "harness/common/env.h"
#include "harness/common/log.h"
#include "harness/common/summary_tables.h"
#include "harness/launch/launch_command.h"
#include "harness/launch/launch_plan.h"
#include "harness/run/run_command.h"
#include "harness/run/run_options.h"
#include "harness/world/job_identity.h"
#include "harness/world/job_token.h"
#include <nlohmann/json.hpp>

#include "rendezvous/deadline.h"
#include "rendezvous/net.h"
#include "rendezvous/signed_store.h"
#include "rendezvous/store_util.h"
#include "results/report/summary.h"
#include "results/verdict/verdict.h"

extern char** environ;

namespace ncclsmoke::harness {
namespace {

using rendezvous::Clock;
namespace fs = std::filesystem;

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) { g_stop_signal = sig; }

// A port the kernel just handed out on loopback. Another process could take it before rank 0
// binds it; rank 0 then reports the clash (CONFIG_INVALID on MASTER_PORT) and the launcher
// retries once with a new port (single-node default only: no other node could follow).
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

// Test-only: NCCLSMOKE_TEST_FIRST_PORT=<port> is the loopback port the first attempt takes
// instead of a free one, so a test can hold it and see the clash retried
// (tests/launchers/launch_cli_test.py). Unset or not a port: 0 (pick a free one).
int test_first_port() {
  const char* v = std::getenv("NCCLSMOKE_TEST_FIRST_PORT");
  if (!v) return 0;
  char* end = nullptr;
  const long p = std::strtol(v, &end, 10);
  return end != v && *end == '\0' && p > 0 && p < 65536 ? static_cast<int>(p) : 0;
}

struct LaunchOptions {
  LaunchFlags flags;
  RunOptions run;
  bool run_takes_job_id = false;  // this build's `run` has --job-id
  std::string spawn = "auto";     // --spawn: auto | exec | fork (see SpawnMode)
  bool out_dir_given = false;     // --out-dir on the command line (else a run directory)
};

// Where a launch without --out-dir writes: ./ncclsmoke-runs/<run id>/, never the current
// directory itself (a second launch would overwrite the first's logs and verdicts). The run id
// (job_identity.h: make_run_id) is UTC time plus random hex, after the job id when one was given,
// and the folder is claimed with a non-recursive create, so a name already taken gets -2, -3 ...
// and the folder's name is the run id every rank is given.
std::string claim_run_directory(const std::string& run_id, std::string& error) {
  const fs::path root = "ncclsmoke-runs";
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    error = "cannot create the run directory root './" + root.string() + "': " + ec.message() +
            " (choose another place with --out-dir)";
    return "";
  }
  for (int i = 1; i <= 100; ++i) {
    fs::path dir = root / (i == 1 ? run_id : run_id + "-" + std::to_string(i));
    if (fs::create_directory(dir, ec)) return dir.string();
    if (ec) {
      error = "cannot create the run directory './" + dir.string() + "': " + ec.message() +
              " (choose another place with --out-dir)";
      return "";
    }
  }
  error = "100 run directories named './" + (root / run_id).string() +
          "*' already exist (choose another place with --out-dir)";
  return "";
}

// "" when a file can be created in `dir` (the ranks' logs and verdicts go there), else why not.
// Only created and removed, nothing written: a full disk is each rank's own exit 8 (it names
// the verdict it could not write).
std::string unwritable(const std::string& dir) {
  const std::string probe =
      (fs::path(dir) / (".ncclsmoke-launch-check-" + std::to_string(::getpid()))).string();
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

// The environment a rank starts with: ours, without the PET_* variables this launcher consumed,
// and with what torchrun gives its workers (so scripts and libraries in the rank see one world).
std::vector<std::string> rank_environment(const std::vector<std::pair<std::string, std::string>>& set) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (key.rfind("PET_", 0) == 0) continue;
    bool replaced = false;
    for (const auto& [k, v] : set) replaced = replaced || k == key;
    if (!replaced) env.push_back(kv);
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  return env;
}

// A rank's stdout and stderr: the write ends of the Relay's pipes, or (-1, -1) for its log file,
// opened by the rank itself (a rank the launcher does not show, or one whose pipes it could not
// make).
struct RankOutput {
  int out = -1;
  int err = -1;
  bool piped() const { return out >= 0 && err >= 0; }
};

pid_t spawn_rank(const std::vector<std::string>& args, const std::vector<std::string>& env,
                 const std::string& log_path, RankOutput to) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (to.piped()) {
    posix_spawn_file_actions_adddup2(&actions, to.out, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, to.err, STDERR_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// How a rank process is started. `exec` is a fresh `ncclsmoke run` (posix_spawn of
// /proc/self/exe): the dynamic linker loads ~57 libraries and libpsm/libpsm2's constructors
// (pulled in by libfabric) poll for ~0.1 s each, ~27 ms of CPU per rank, which at 1024 ranks on
// two cores is most of the run. `fork` starts the rank from this already-loaded launcher: the
// child resets what it inherited (signal handlers and mask, stdio, descriptors marked
// close-on-exec, the environment) to what an exec'd rank would have and runs the same `run`
// command line in a fresh CLI parser, then exits with its code. Only safe while the launcher is
// single-threaded (a fork copies one thread; locks held by others would stay held), so `fork`
// falls back to `exec` when /proc/self/status shows more than one thread.
enum class SpawnMode { kFork, kExec };

// See launch_once: more ranks than this many per CPU make a herd.
constexpr int kHerdPerCpu = 8;
constexpr int kHerdNice = 10;

int online_cpus() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

int thread_count() {
  std::ifstream st("/proc/self/status");
  std::string line;
  while (std::getline(st, line))
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;  // unknown: treated as "not single-threaded"
}

// In the forked child: close what exec would have closed (descriptors marked FD_CLOEXEC).
void close_cloexec_descriptors() {
  std::vector<int> fds;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(d);
    while (dirent* e = ::readdir(d)) {
      int fd = std::atoi(e->d_name);
      if (fd > STDERR_FILENO && fd != own) fds.push_back(fd);
    }
    ::closedir(d);
  }
  for (int fd : fds) {
    int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC)) ::close(fd);
  }
}

// The forked child's whole life: become the rank an exec would have started, run it, exit.
[[noreturn]] void run_forked_rank(const std::vector<std::string>& args,
                                  const std::vector<std::string>& env, const std::string& log,
                                  RankOutput to, const sigset_t& old_mask, int nice_increment) {
  if (nice_increment > 0) ::setpriority(PRIO_PROCESS, 0, nice_increment);  // best effort
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGTERM, &dfl, nullptr);
  ::sigaction(SIGINT, &dfl, nullptr);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (to.piped()) {
    // The pipes' ends are close-on-exec; dup2 gives stdout and stderr copies without it.
    if (in < 0 || ::dup2(to.out, STDOUT_FILENO) < 0 || ::dup2(to.err, STDERR_FILENO) < 0)
      ::_exit(127);
  } else {
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0 || in < 0) ::_exit(127);  // what posix_spawn reports as a failed start
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    ::close(out);
  }
  ::dup2(in, STDIN_FILENO);
  ::close(in);
  close_cloexec_descriptors();
  ::clearenv();
  for (const auto& e : env) ::putenv(::strdup(e.c_str()));  // putenv keeps the pointer
  int code = kExitFail;
  try {
    CLI::App app{"ncclsmoke run (started by ncclsmoke launch)"};
    app.name("ncclsmoke");
    app.require_subcommand(1);
    app.fallthrough(false);
    Action action;
    register_run_command(app, action);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (auto stop = parse_command_line(app, static_cast<int>(args.size()), argv.data()))
      code = *stop;
    else
      code = action ? action() : kExitUsage;
  } catch (const std::exception& e) {
    log_error(std::string("ncclsmoke: error: ") + e.what());  // as main() says it
    code = kExitFail;
  }
  std::cout.flush();
  std::cerr.flush();
  std::exit(code);  // as main() returning: atexit handlers and static destructors run
}

pid_t fork_rank(const std::vector<std::string>& args, const std::vector<std::string>& env,
                const std::string& log_path, RankOutput to, int nice_increment) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);  // nothing buffered here may be written twice
  // A SIGTERM between fork and the child's reset must not reach our handler's copy.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  ::sigprocmask(SIG_BLOCK, &block, &old);
  pid_t pid = ::fork();
  if (pid == 0) run_forked_rank(args, env, log_path, to, old, nice_increment);
  int saved = errno;
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return pid;
}

std::string log_path(const RunOptions& o, int global_rank) {
  return (fs::path(o.out_dir) / ("rank" + std::to_string(global_rank) + ".log")).string();
}

// The run flags every rank gets. --quiet is the launcher's own: it decides what of its ranks'
// output to show, so every rank runs with its output on.
std::vector<std::string> forwarded_run_args(const RunOptions& o) {
  RunOptions ranks = o;
  ranks.quiet = false;
  ranks.given_flags.erase("--quiet");
  return run_option_args(ranks);
}

// What the launcher shows of its ranks, and their log files (see the file comment). Each shown
// rank writes into two pipes; the Relay reads them as lines arrive, writes every line to the
// rank's log (so rank<N>.log holds both streams, in arrival order), and routes it: the lowest
// local rank's stdout to stdout and its stderr to stderr; with `all_ranks` every other local
// rank's stderr to stderr, prefixed "[rank N] " (their stdout, a summary each, stays in their
// logs). From the lowest rank's summary head on, its lines are held (held()) for the end.
class Relay {
 public:
  Relay(bool all_ranks, bool prefix) : all_ranks_(all_ranks), prefix_(prefix) {}
  ~Relay() { close_all(); }
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  // Pipes for one rank (local 0 is always shown; the others when `all_ranks`). The result is
  // what the child writes into; not piped() means the rank writes its log file itself.
  RankOutput attach(int local, int global, const std::string& log_path) {
    if (local != 0 && !all_ranks_) return {};
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    int log = -1;
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
        (log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
      for (int fd : {out[0], out[1], err[0], err[1]})
        if (fd >= 0) ::close(fd);
      return {};  // too many open files ...: this rank writes its own log, unshown
    }
    for (int fd : {out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    Shown r;
    r.local = local;
    r.global = global;
    r.log = log;
    r.streams[0].fd = out[0];
    r.streams[1].fd = err[0];
    r.child = {out[1], err[1]};
    ranks_.push_back(std::move(r));
    return ranks_.back().child;
  }

  // The parent's copies of a child's pipe ends, closed once it started (or failed to).
  void started(int local) {
    for (auto& r : ranks_)
      if (r.local == local) {
        for (int* fd : {&r.child.out, &r.child.err})
          if (*fd >= 0) {
            ::close(*fd);
            *fd = -1;
          }
      }
  }

  // Waits up to `timeout_ms` for output, then takes what there is (whole lines).
  void pump(int timeout_ms) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Shown*, int>> who;
    for (auto& r : ranks_)
      for (int k = 0; k < 2; ++k)
        if (r.streams[k].fd >= 0) {
          fds.push_back({r.streams[k].fd, POLLIN, 0});
          who.emplace_back(&r, k);
        }
    if (fds.empty()) {
      if (timeout_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
      return;
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
    for (std::size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents) read_from(*who[i].first, who[i].second);
    std::cout.flush();
    std::cerr.flush();
  }

  // After the ranks ended: what is still in the pipes (a grandchild holding a pipe open must not
  // keep the launcher: at most ~0.5 s), then each stream's last line without its newline.
  void finish() {
    auto until = Clock::now() + std::chrono::milliseconds(500);
    while (open_streams() && Clock::now() < until) pump(20);
    for (auto& r : ranks_)
      for (int k = 0; k < 2; ++k) {
        auto& st = r.streams[k];
        if (!st.partial.empty()) line(r, k, std::exchange(st.partial, {}));
      }
    std::cout.flush();
    std::cerr.flush();
    close_all();
  }

  bool shown_any() const { return shown_any_; }
  // The lowest rank's lines from its summary on: [0] stdout, [1] stderr.
  const std::vector<std::string>& held(int stream) const { return held_[stream]; }

 private:
  struct Stream {
    int fd = -1;
    std::string partial;
  };
  struct Shown {
    int local = 0, global = 0;
    int log = -1;
    Stream streams[2];  // 0 stdout, 1 stderr
    RankOutput child;
  };

  int open_streams() const {
    int n = 0;
    for (const auto& r : ranks_) n += (r.streams[0].fd >= 0) + (r.streams[1].fd >= 0);
    return n;
  }

  void read_from(Shown& r, int k) {
    Stream& st = r.streams[k];
    char buf[65536];
    for (int turns = 0; turns < 16; ++turns) {
      ssize_t n = ::read(st.fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {  // EOF (or an error): the rank closed it
        ::close(st.fd);
        st.fd = -1;
        return;
      }
      st.partial.append(buf, static_cast<std::size_t>(n));
      std::size_t start = 0;
      for (std::size_t nl; (nl = st.partial.find('\n', start)) != std::string::npos; start = nl + 1)
        line(r, k, st.partial.substr(start, nl - start));
      st.partial.erase(0, start);
      if (st.partial.size() > (1u << 20)) line(r, k, std::exchange(st.partial, {}));  // no newline
    }
  }

  void line(Shown& r, int k, const std::string& text) {
    if (r.log >= 0) {
      std::string out = text + "\n";
      for (std::size_t done = 0; done < out.size();) {  // best effort: a full disk loses log lines
        ssize_t n = ::write(r.log, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
      }
    }
    if (r.local == 0) {
      if (!holding_[k] && results::is_summary_headline(text)) holding_[k] = true;
      if (holding_[k]) {
        held_[k].push_back(text);
        return;
      }
      shown_any_ = true;
      if (k == 0)
        std::cout << text << '\n';
      else
        std::cerr << (prefix_ ? "[rank " + std::to_string(r.global) + "] " : "") << text << '\n';
      return;
    }
    if (k == 1) {
      shown_any_ = true;
      std::cerr << (prefix_ ? "[rank " + std::to_string(r.global) + "] " : "") << text << '\n';
    }
  }

  void close_all() {
    for (auto& r : ranks_) {
      for (int* fd : {&r.streams[0].fd, &r.streams[1].fd, &r.child.out, &r.child.err, &r.log})
        if (*fd >= 0) {
          ::close(*fd);
          *fd = -1;
        }
    }
  }

  bool all_ranks_, prefix_;
  std::vector<Shown> ranks_;
  bool holding_[2] = {false, false};
  std::vector<std::string> held_[2];
  bool shown_any_ = false;
};

// How one rank ended.
struct RankEnd {
  pid_t pid = -1;
  int code = -1;  // exit status, 128 + signal; -1 still running
  std::chrono::system_clock::time_point when{};
};

// Starts this node's ranks once; returns the lowest local rank's exit code.
int launch_once(const LaunchOptions& lo, const LaunchPlan& plan, int port,
                std::vector<RankEnd>& ends, Relay& relay) {
  const auto& o = lo.run;
  const std::vector<std::string> common = forwarded_run_args(o);
  // auto: exec (a rank exactly as `run` starts it) unless the ranks far outnumber the CPUs,
  // i.e. a rendezvous/mesh scale run, where process start is most of the wall time (1024 ranks
  // on 2 CPUs: exec 27 s, fork 16 s).
  const bool herd = plan.nproc_per_node > kHerdPerCpu * online_cpus();
  const bool want_fork = lo.spawn == "fork" || (lo.spawn == "auto" && herd);
  const SpawnMode mode = want_fork && thread_count() == 1 ? SpawnMode::kFork : SpawnMode::kExec;
  // Forked ranks all start within a second or two; when they far outnumber the CPUs (a
  // rendezvous/mesh scale run, not a bandwidth one), the herd parsing the roster and probing
  // the mesh at once starved rank 0 (the store and the verdict collector) to ~1% of a CPU:
  // its store went 10 s without answering and the liveness watch reported ranks lost (1024
  // ranks, 2 CPUs). Then every rank but rank 0 runs niced (kHerdNice), fair among themselves.
  const bool herd_nice = mode == SpawnMode::kFork && plan.node_rank == 0 && herd;
  std::vector<pid_t> pids;
  for (int l = 0; l < plan.nproc_per_node; ++l) {
    const int g = plan.global_rank(l);
    std::vector<std::string> args{"ncclsmoke",     "run",
                                  "--launcher",    "flags",
                                  "--rank",        std::to_string(g),
                                  "--local-rank",  std::to_string(l),
                                  "--world-size",  std::to_string(plan.world_size()),
                                  "--master-addr", plan.master_addr,
                                  "--master-port", std::to_string(port),
                                  "--node-name",
                                  plan.local_node_names ? "local-" + std::to_string(g)
                                                        : plan.node_name};
    args.insert(args.end(), common.begin(), common.end());
    if (plan.store_on_loopback && o.store_bind.empty()) {
      args.push_back("--store-bind");
      args.push_back("127.0.0.1");
    }
    // A backend's per-rank values (a GPU per local rank ...) follow from --rank and --local-rank
    // in the rank itself (transports/options.h: rank_default), so nothing backend-specific here.
    if (lo.run_takes_job_id && !plan.job_id.empty()) {
      args.push_back("--job-id");
      args.push_back(plan.job_id);
    }
    std::vector<std::pair<std::string, std::string>> set{
        {"RANK", std::to_string(g)},
        {"LOCAL_RANK", std::to_string(l)},
        {"WORLD_SIZE", std::to_string(plan.world_size())},
        {"LOCAL_WORLD_SIZE", std::to_string(plan.nproc_per_node)},
        {"GROUP_RANK", std::to_string(plan.node_rank)},
        {"GROUP_WORLD_SIZE", std::to_string(plan.nnodes)},
        {"MASTER_ADDR", plan.master_addr},
        {"MASTER_PORT", std::to_string(port)}};
    if (!plan.job_id.empty()) set.emplace_back("NCCLSMOKE_JOB_ID", plan.job_id);
    // The rank's world comes in flags; what launch itself read it from goes in the verdict.
    set.emplace_back("NCCLSMOKE_LAUNCH_SOURCE", std::string(results::name(plan.source)));
    if (!plan.job_id_source.empty())
      set.emplace_back("NCCLSMOKE_LAUNCH_JOB_ID_SOURCE", plan.job_id_source);
    if (!plan.job_token.empty()) set.emplace_back("NCCLSMOKE_JOB_TOKEN", plan.job_token);
    // The run folder's name is every verdict's run_id (run_context.cpp reads it).
    if (!plan.run_id.empty()) set.emplace_back(kRunIdEnv, plan.run_id);
    const int nice_increment = herd_nice && g != 0 ? kHerdNice : 0;
    const std::string log = log_path(o, g);
    const RankOutput to = relay.attach(l, g, log);
    pid_t pid = mode == SpawnMode::kFork
                    ? fork_rank(args, rank_environment(set), log, to, nice_increment)
                    : spawn_rank(args, rank_environment(set), log, to);
    const int start_errno = errno;
    relay.started(l);
    if (pid < 0) {
      std::cerr << "ncclsmoke launch: could not start rank " << g << " (local " << l
                << "): " << std::strerror(start_errno) << " (its log: " << log << ")\n";
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      ends.assign(pids.size(), RankEnd{});
      for (std::size_t i = 0; i < pids.size(); ++i)
        ends[i] = {pids[i], 137, std::chrono::system_clock::now()};
      relay.finish();
      return kExitFail;
    }
    pids.push_back(pid);
  }
  // Every rank stops itself by --timeout (its watchdog); the launcher allows a margin, then
  // kills. A SIGTERM/SIGINT to the launcher (a deleted pod) is passed on to every rank, which
  // then writes its RUN_TERMINATED verdict.
  auto deadline = Clock::now() + std::chrono::milliseconds(
                                     static_cast<long long>((o.timeout_s + 10) * 1000));
  ends.assign(pids.size(), RankEnd{});
  for (std::size_t i = 0; i < pids.size(); ++i) ends[i].pid = pids[i];
  std::unordered_map<pid_t, std::size_t> index_of;
  for (std::size_t i = 0; i < pids.size(); ++i) index_of[pids[i]] = i;
  std::size_t left = pids.size();
  bool forwarded = false;
  while (left && Clock::now() < deadline) {
    if (g_stop_signal && !forwarded) {
      forwarded = true;
      for (std::size_t i = 0; i < pids.size(); ++i)
        if (ends[i].code == -1) ::kill(pids[i], SIGTERM);
      deadline = std::min(deadline, Clock::now() + std::chrono::seconds(15));
    }
    // Reap whichever ranks ended (one waitpid per exit, not one per rank per turn: at 1024
    // ranks polling each pid every 20 ms was a measurable share of a core).
    for (;;) {
      int status = 0;
      pid_t done = ::waitpid(-1, &status, WNOHANG);
      if (done <= 0) break;
      auto it = index_of.find(done);
      if (it == index_of.end() || ends[it->second].code != -1) continue;  // not one of ours
      ends[it->second].code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      ends[it->second].when = std::chrono::system_clock::now();
      --left;
    }
    // Waits for the ranks' output up to 20 ms (the turn's pause).
    relay.pump(left ? 20 : 0);
  }
  for (std::size_t i = 0; i < pids.size(); ++i)
    if (ends[i].code == -1) {
      ::kill(pids[i], SIGKILL);
      ::waitpid(pids[i], nullptr, 0);
      ends[i].code = 137;
      ends[i].when = std::chrono::system_clock::now();
      std::cerr << "ncclsmoke launch: rank " << plan.global_rank(static_cast<int>(i))
                << " (host " << local_hostname() << ") did not finish within "
                << (forwarded ? "15 s of SIGTERM" : "--timeout + 10 s") << "; killed\n";
    }
  relay.finish();
  return ends[0].code;
}

std::optional<results::Verdict> read_verdict(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    return results::verdict_from_text(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Rank 0 of this run could not listen on the store's port: its verdict (the global one it writes
// alone, or its own) holds the finding of origin store_port.
bool store_port_taken(const RunOptions& o, const std::string& run_id) {
  const std::string own = (fs::path(o.out_dir) / "verdict.rank0.json").string();
  const std::string global =
      o.json_path.empty() ? (fs::path(o.out_dir) / "verdict.json").string() : o.json_path;
  for (const auto& path : {own, global})
    if (auto v = read_verdict(path); v && v->run_id == run_id)
      for (const auto& f : v->findings)
        if (f.origin == results::FindingOrigin::store_port) return true;
  return false;
}

std::string utc_text(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// "1 (fail)", "137 (SIGKILL)": an exit status and what it means here (README: Exit codes).
std::string exit_text(int code) {
  switch (code) {
    case kExitPass: return "0 (pass)";
    case kExitFail: return "1 (fail)";
    case kExitUsage: return "2 (usage error)";
    case kExitDegraded: return "3 (degraded)";
    case kExitInconclusive: return "4 (inconclusive)";
    case kExitVerdictNotWritten: return "8 (verdict not written)";
    case 127: return "127 (could not start)";
    default: break;
  }
  if (code > 128 && code < 128 + 65) {
    const char* name = ::sigabbrev_np(code - 128);
    return std::to_string(code) + " (killed by " + (name ? std::string("SIG") + name : "signal " + std::to_string(code - 128)) + ")";
  }
  return std::to_string(code);
}

// The error findings this node's ranks made themselves (verdict.rank<N>.json) that `shown` (the
// verdict on screen) lacks, merged across ranks: what only they saw, such as rank 1's
// RENDEZVOUS_DNS when rank 0 could only say it never joined.
std::vector<results::Finding> own_findings_not_shown(const LaunchPlan& plan, const RunOptions& o,
                                                     const std::optional<results::Verdict>& shown) {
  std::vector<results::Verdict> own;
  for (int l = 0; l < plan.nproc_per_node; ++l) {
    const int g = plan.global_rank(l);
    if (shown && shown->scope == results::Scope::local && shown->reporting_rank == g) continue;
    auto v = read_verdict((fs::path(o.out_dir) / ("verdict.rank" + std::to_string(g) + ".json")).string());
    if (v) own.push_back(std::move(*v));
  }
  return results::errors_not_shown(shown ? &*shown : nullptr, own);
}

std::string own_findings_block(const std::vector<results::Finding>& found) {
  if (found.empty()) return "";
  constexpr std::size_t kMax = 12, kMaxMessage = 600;
  std::string s = "this node's ranks found (their own verdicts, verdict.rank<N>.json):\n";
  for (std::size_t i = 0; i < found.size() && i < kMax; ++i) {
    const auto& f = found[i];
    std::string msg = f.message.size() > kMaxMessage ? f.message.substr(0, kMaxMessage) + "..." : f.message;
    s += "  ERROR: " + msg + " [" + results::to_string(f.code) + "]\n";
    if (!f.hint.empty()) s += "    hint: " + f.hint + "\n";
  }
  if (found.size() > kMax)
    s += "  ... and " + std::to_string(found.size() - kMax) + " more (verdict.rank<N>.json)\n";
  return s + "\n";
}

// torchrun's failure banner: the first rank that exited non-zero (the root cause, as observed),
// and the others. On stderr, also with --quiet.
std::string failure_banner(const LaunchPlan& plan, const RunOptions& o,
                           const std::vector<RankEnd>& ends) {
  std::vector<std::size_t> failed;
  for (std::size_t i = 0; i < ends.size(); ++i)
    if (ends[i].code != 0) failed.push_back(i);
  if (failed.empty()) return "";
  std::stable_sort(failed.begin(), failed.end(),
                   [&](std::size_t a, std::size_t b) { return ends[a].when < ends[b].when; });
  const std::string host = local_hostname();
  const std::string rule(72, '='), thin(72, '-');
  auto entry = [&](std::size_t i, std::size_t n) {
    const int l = static_cast<int>(i), g = plan.global_rank(l);
    const std::string verdict =
        (fs::path(o.out_dir) / ("verdict.rank" + std::to_string(g) + ".json")).string();
    std::string e = "[" + std::to_string(n) + "]:\n";
    e += "  time      : " + utc_text(ends[i].when) + "\n";
    e += "  host      : " + host + "\n";
    e += "  rank      : " + std::to_string(g) + " (local_rank: " + std::to_string(l) + ")\n";
    std::string code = exit_text(ends[i].code);
    code = code.back() == ')' ? code.substr(0, code.size() - 1) + "; pid: " : code + " (pid: ";
    e += "  exitcode  : " + code + std::to_string(ends[i].pid) + ")\n";
    e += "  log       : " + log_path(o, g) + "\n";
    auto v = read_verdict(verdict);
    e += "  verdict   : " + (v ? verdict : verdict + " (not written)") + "\n";
    if (v) {
      const auto errors = results::distinct_errors(*v);
      if (!errors.empty()) {
        std::string msg = errors[0].message;
        if (msg.size() > 300) msg = msg.substr(0, 300) + "...";
        e += "  finding   : " + results::to_string(errors[0].code) + ": " + msg +
             (errors.size() > 1 ? " (and " + std::to_string(errors.size() - 1) + " more)" : "") + "\n";
      }
    }
    return e;
  };
  std::string b = rule + "\n";
  b += "ncclsmoke launch FAILED: " + std::to_string(failed.size()) + " of " +
       std::to_string(ends.size()) + " rank" + (ends.size() == 1 ? "" : "s") + " on node " +
       std::to_string(plan.node_rank) + " (host " + host + ") exited non-zero\n";
  b += thin + "\nFailures:\n";
  constexpr std::size_t kMaxOthers = 8;
  if (failed.size() == 1) b += "  <NO_OTHER_FAILURES>\n";
  for (std::size_t k = 1; k < failed.size() && k <= kMaxOthers; ++k) {
    std::string e = entry(failed[k], k);
    std::size_t at = 0;
    for (std::size_t nl; (nl = e.find('\n', at)) != std::string::npos; at = nl + 1)
      b += "  " + e.substr(at, nl - at + 1);
  }
  if (failed.size() > kMaxOthers + 1)
    b += "  ... and " + std::to_string(failed.size() - kMaxOthers - 1) + " more\n";
  b += thin + "\nRoot Cause (first observed failure):\n";
  std::string e = entry(failed[0], 0);
  std::size_t at = 0;
  for (std::size_t nl; (nl = e.find('\n', at)) != std::string::npos; at = nl + 1)
    b += "  " + e.substr(at, nl - at + 1);
  return b + rule + "\n";
}

// One of launch's own lines as --log-format json writes every line (harness/common/log.h), phase "launch".
std::string json_log_line(LogLevel level, const std::string& message, const std::string& code = "",
                          int rank = -1) {
  return json_log_object(level, message, code, rank, local_hostname(), "launch") + "\n";
}

// The banner's root cause on one line (for --log-format json): rank, exit, pid, time, log and
// its first error finding's code; "" when every rank exited 0.
std::string first_failure_json(const LaunchPlan& plan, const RunOptions& o,
                               const std::vector<RankEnd>& ends) {
  std::size_t failed = 0, first = ends.size();
  for (std::size_t i = 0; i < ends.size(); ++i)
    if (ends[i].code != 0) {
      ++failed;
      if (first == ends.size() || ends[i].when < ends[first].when) first = i;
    }
  if (!failed) return "";
  const int l = static_cast<int>(first), g = plan.global_rank(l);
  const std::string verdict =
      (fs::path(o.out_dir) / ("verdict.rank" + std::to_string(g) + ".json")).string();
  std::string code, what;
  if (auto v = read_verdict(verdict))
    for (const auto& f : v->findings)
      if (f.severity == results::Severity::error) {
        code = results::to_string(f.code);
        what = ": " + f.message;
        break;
      }
  return json_log_line(
      LogLevel::error,
      "ncclsmoke launch FAILED: " + std::to_string(failed) + " of " + std::to_string(ends.size()) +
          " ranks exited non-zero; first failure: rank " + std::to_string(g) + " (local_rank " +
          std::to_string(l) + "), exit " + exit_text(ends[first].code) + ", pid " +
          std::to_string(ends[first].pid) + ", at " + utc_text(ends[first].when) + ", log " +
          log_path(o, g) + ", verdict " + verdict + what,
      code, g);
}

int launch(LaunchOptions lo) {
  // Checked before anything starts: every rank would refuse it, each in its own log.
  const std::string log_env = env(kLogLevelEnv).value_or("");
  if (!log_env.empty() && !parse_log_level(log_env)) {
    std::cerr << "ncclsmoke launch: error: " << kLogLevelEnv << "='" << log_env
              << "' is not a log level (accepted: " << kLogLevelNames << "); no rank was started\n";
    return kExitUsage;
  }
  std::string given_run_id;
  if (auto id = env(kRunIdEnv)) {
    if (auto why = run_id_problem(*id); !why.empty()) {
      std::cerr << "ncclsmoke launch: error: " << kRunIdEnv << "="
                << rendezvous::printable(*id, 96) << " is not a run id: " << why
                << " (use letters, digits, '-', '_' and '.', at most 128); no rank was started\n";
      return kExitUsage;
    }
    given_run_id = *id;
  }
  auto planned = plan_launch(lo.flags, process_environment(), local_hostname(),
                             count_nvidia_devices());
  if (auto* err = std::get_if<LaunchError>(&planned)) {
    std::cerr << "ncclsmoke launch: " << err->message << "\n";
    return kExitUsage;
  }
  LaunchPlan plan = std::get<LaunchPlan>(planned);
  // One node: every rank is ours, so a fresh id per launch keeps two launches apart. Several
  // nodes must agree on it, so without an identity there is none (the runs' fixed namespace).
  const bool id_made_here = plan.job_id.empty() && plan.nnodes == 1;
  if (id_made_here) {
    plan.job_id = random_launch_id();
    plan.job_id_source = "random, this launch";
  }
  // One node: every rank is ours, so a token made here (RAND_bytes) is the whole job's. Several
  // nodes must share one: each node's environment sets NCCLSMOKE_JOB_TOKEN (or a token file).
  std::string token_note = "store unauthenticated (set NCCLSMOKE_JOB_TOKEN on every node)";
  if (job_token_given(lo.run.job_token_file)) {
    token_note = "store values signed with the given job token";
  } else if (plan.nnodes == 1) {
    try {
      plan.job_token = rendezvous::make_job_token();
      token_note = "store values signed with a job token made for this launch";
    } catch (const std::exception& e) {
      std::cerr << "ncclsmoke launch: " << e.what() << "\n";
      return kExitFail;
    }
  }
  // One run id: the folder's name. On several nodes each node names its own folder; rank 0's id
  // (node 0's) is the one every verdict that reached the store carries.
  plan.run_id = given_run_id.empty() ? make_run_id(id_made_here ? "" : plan.job_id) : given_run_id;
  if (!lo.out_dir_given) {
    std::string error;
    lo.run.out_dir = claim_run_directory(plan.run_id, error);
    if (lo.run.out_dir.empty()) {
      std::cerr << "ncclsmoke launch: " << error << "; no rank was started (exit "
                << kExitVerdictNotWritten << ")\n";
      return kExitVerdictNotWritten;
    }
    plan.run_id = fs::path(lo.run.out_dir).filename().string();
  }
  // An --out-dir nobody can write is `run`'s exit 8, said once here, before any rank starts.
  std::error_code ec;
  fs::create_directories(lo.run.out_dir, ec);
  std::string why = ec ? ec.message() : unwritable(lo.run.out_dir);
  if (!why.empty()) {
    std::cerr << "ncclsmoke launch: cannot write to --out-dir '" << lo.run.out_dir
              << "': " << why << "; no rank was started, no log or verdict could be written (exit "
              << kExitVerdictNotWritten << ")\n";
    return kExitVerdictNotWritten;
  }
  struct sigaction sa{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);

  // What the screen shows (the Relay): every local rank's log lines with --verbose or a talking
  // NCCLSMOKE_LOG_LEVEL; prefixed by rank unless the lines are JSON objects (they carry it).
  const auto level = parse_log_level(log_env);
  const bool all_ranks = !lo.run.quiet && (lo.run.verbose || (level && *level <= LogLevel::info));
  std::string log_format = lo.run.log_format.empty() ? env(kLogFormatEnv).value_or("text")
                                                     : lo.run.log_format;
  for (auto& c : log_format) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool json_lines = log_format == "json";
  // Text tables: launch's own lines go with the summary on stdout; csv/json: stdout is the
  // table alone, so they go to stderr.
  const bool text_table = parse_table_format(lo.run.table_format).value_or(TableFormat::text) ==
                          TableFormat::text;
  std::ostream& human = text_table ? std::cout : std::cerr;
  // launch's own lines: on `human`, or one JSON object each on stderr.
  auto say = [&](const std::string& line) {
    if (json_lines)
      std::cerr << json_log_line(LogLevel::info, line.substr(std::string("ncclsmoke launch: ").size()))
                << std::flush;
    else
      human << line << std::endl;
  };

  const int first = plan.global_rank(0), last = plan.global_rank(plan.nproc_per_node - 1);
  // Verbose with many ranks: three descriptors a shown rank (two pipes and its log).
  if (all_ranks) {
    rlimit rl{};
    const rlim_t want = static_cast<rlim_t>(3 * plan.nproc_per_node + 64);
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
      rl.rlim_cur = std::min(want, rl.rlim_max);
      ::setrlimit(RLIMIT_NOFILE, &rl);  // best effort: a rank without pipes writes its own log
    }
  }
  std::vector<RankEnd> ends;
  std::unique_ptr<Relay> relay;
  int code = kExitFail;
  for (int attempt = 0; attempt < 2; ++attempt) {
    int port = plan.master_port;
    if (port == 0) port = attempt == 0 ? test_first_port() : 0;
    if (port == 0) port = free_loopback_port();
    if (port <= 0) {
      std::cerr << "ncclsmoke launch: no free loopback port\n";
      return kExitFail;
    }
    if (!lo.run.quiet && attempt == 0)
      say("ncclsmoke launch: node " + std::to_string(plan.node_rank) + "/" +
          std::to_string(plan.nnodes) + " (host " + local_hostname() + "): ranks " +
          std::to_string(first) + ".." + std::to_string(last) + " of " +
          std::to_string(plan.world_size()) + ", master " +
          rendezvous::join_host_port(plan.master_addr, static_cast<uint16_t>(port)) + ", job id " +
          (plan.job_id.empty() ? "(none)" : plan.job_id) +
          (plan.job_id_source.empty() ? "" : " (from " + plan.job_id_source + ")") + ", run id " +
          plan.run_id + ", " + token_note + "; logs and verdicts in " + lo.run.out_dir);
    relay = std::make_unique<Relay>(all_ranks, all_ranks && !json_lines);
    code = launch_once(lo, plan, port, ends, *relay);
    const bool clash = plan.node_rank == 0 && store_port_taken(lo.run, plan.run_id);
    // The port was taken between our probe and rank 0's bind: its summary is not shown.
    if (clash && plan.retry_new_port && attempt == 0 && !g_stop_signal) {
      if (!lo.run.quiet)
        say("ncclsmoke launch: port " + std::to_string(port) +
            " was taken before rank 0 could bind it; starting again on another port");
      continue;
    }
    break;
  }
  // First what this node's ranks found themselves and the shown verdict lacks, then the held
  // summary (the lowest rank's, as `run` prints it), then the banner of the first failure.
  const bool quiet = lo.run.quiet;
  if (!quiet) {
    std::optional<results::Verdict> shown;
    if (plan.node_rank == 0)
      shown = read_verdict(lo.run.json_path.empty()
                               ? (fs::path(lo.run.out_dir) / "verdict.json").string()
                               : lo.run.json_path);
    if (!shown)
      shown = read_verdict(
          (fs::path(lo.run.out_dir) / ("verdict.rank" + std::to_string(first) + ".json")).string());
    const auto found = own_findings_not_shown(plan, lo.run, shown);
    if (json_lines) {
      for (const auto& f : found)
        std::cerr << json_log_line(LogLevel::error, f.message, results::to_string(f.code),
                                   f.subject.reporters.empty() ? -1 : f.subject.reporters.front());
    } else {
      // Before the summary, on the stream the summary is on.
      (relay->held(0).empty() && !relay->held(1).empty() ? std::cerr : human)
          << own_findings_block(found);
    }
  }
  for (const auto& l : relay->held(1)) std::cerr << l << "\n";
  for (const auto& l : relay->held(0)) std::cout << l << "\n";
  std::cout.flush();
  // Said even with --quiet: a rank whose verdict file is missing must never look like a pass.
  for (std::size_t l = 0; l < ends.size(); ++l)
    if (ends[l].code == kExitVerdictNotWritten)
      std::cerr << "ncclsmoke launch: rank " << plan.global_rank(static_cast<int>(l))
                << " could not write its verdict (exit " << kExitVerdictNotWritten << "); see "
                << log_path(lo.run, plan.global_rank(static_cast<int>(l))) << "\n";
  std::cerr << (json_lines ? first_failure_json(plan, lo.run, ends)
                          : failure_banner(plan, lo.run, ends))
            << std::flush;
  if (!quiet) {
    std::size_t failed = 0;
    for (const auto& e : ends) failed += e.code != 0;
    const std::string ranks = "ranks " + std::to_string(first) + ".." + std::to_string(last);
    say("ncclsmoke launch: " +
        (failed == 0 ? ranks + " all exited 0"
                     : std::to_string(failed) + " of " + ranks +
                           " exited non-zero (the first failure is above)") +
        "; run " + plan.run_id + "; logs and verdicts in " + lo.run.out_dir);
  }
  return code;
}

}  // namespace

void register_launch_command(CLI::App& app, Action& action) {
  auto lo = std::make_shared<LaunchOptions>();
  auto* cmd = app.add_subcommand(
      "launch",
      "Start this node's ranks (like torchrun: --nnodes/--node-rank/--nproc-per-node, else "
      "training-operator's PET_* variables) and print its lowest rank's verdict");
  auto* g = "Launch (default: PET_* variables, else one node on loopback)";
  // torchrun's spellings work too (--nproc_per_node, --node_rank, --master_addr, --master_port),
  // so a torchrun command line can swap in `ncclsmoke launch`.
  cmd->add_option("-n,--ranks,--nproc-per-node,--nproc_per_node", lo->flags.nproc_per_node,
                  "Ranks on this node (else PET_NPROC_PER_NODE; default 4)")
      ->type_name("INT")
      ->group(g);
  cmd->add_option("--nnodes", lo->flags.nnodes, "Nodes in the job (else PET_NNODES; default 1)")
      ->type_name("N|N:N")
      ->group(g);
  cmd->add_option("--node-rank,--node_rank", lo->flags.node_rank,
                  "This node's index, 0..nnodes-1 (else PET_NODE_RANK; default 0 on one node)")
      ->type_name("INT")
      ->group(g);
  cmd->add_option("--master-addr,--master_addr", lo->flags.master_addr,
                  "Node 0's address, where its first rank hosts the store (else PET_MASTER_ADDR, "
                  "MASTER_ADDR; default 127.0.0.1 on one node)")
      ->group(g);
  cmd->add_option("--master-port,--master_port", lo->flags.master_port,
                  "The store's port (else PET_MASTER_PORT, MASTER_PORT; default a free loopback "
                  "port on one node, 29500 on several)")
      ->type_name("PORT")
      ->group(g);
  cmd->add_option("--spawn", lo->spawn,
                  "How ranks start: exec (a fresh `ncclsmoke run` each), fork (from this "
                  "launcher: no dynamic loading, ~45% less CPU per rank; falls back to exec when "
                  "the launcher is not single-threaded), or auto (default: fork when the ranks "
                  "outnumber 8 per CPU, a scale run, else exec)")
      ->check(CLI::IsMember({"auto", "exec", "fork"}))
      ->group(g);
  add_run_options(*cmd, lo->run, false);
  if (auto* out = cmd->get_option_no_throw("--out-dir"))
    out->description(
           "Directory for rank<N>.log, verdict.rank<N>.json and verdict.json (default: a new "
           "run directory ./ncclsmoke-runs/<run id>/, printed at the start)")
        ->default_str("");
  if (!cmd->get_option_no_throw("--job-id"))
    cmd->add_option("--job-id", lo->flags.job_id,
                    "Job id shared by every rank (else the launcher's environment; one node: a "
                    "random id per launch)")
        ->group(g);
  cmd->callback([lo, cmd, &app, &action] {
    if (auto* opt = cmd->get_option_no_throw("--job-id"); opt && opt->count())
      lo->flags.job_id = opt->as<std::string>();
    lo->out_dir_given = cmd->get_option("--out-dir")->count() > 0;
    try {
      lo->run_takes_job_id = app.get_subcommand("run")->get_option_no_throw("--job-id") != nullptr;
    } catch (const CLI::Error&) {
      lo->run_takes_job_id = false;
    }
    action = [lo] { return launch(*lo); };
  });
}

}  // namespace ncclsmoke::harness
