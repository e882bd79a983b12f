// `ncclsmoke launch [--nnodes N --node-rank R] [-n|--nproc-per-node P] [run flags]`: a per-node
// launcher in the manner of torchrun. It starts this node's P ranks of `ncclsmoke run` (global
// rank = node rank * P + local rank), waits for them under a deadline, prints the summary of this
// node's lowest rank (on node 0: rank 0's global verdict) and returns that rank's exit code. Each
// rank's output goes to OUT_DIR/rank<global rank>.log. What it reads and defaults to is
// launch_plan.h; with no flags and no launcher variables it is the single-machine launcher it
// always was (one node, loopback, a free port retried once on a clash).
#include <CLI/CLI.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <unordered_map>

#include "harness/cli_util.h"
#include "harness/commands.h"
#include "harness/job_token.h"
#include "harness/launch_plan.h"
#include "harness/log.h"
#include "harness/run_options.h"
#include "rendezvous/deadline.h"
#include "rendezvous/net.h"
#include "rendezvous/signed_store.h"

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

struct LaunchOptions {
  LaunchFlags flags;
  RunOptions run;
  bool run_takes_job_id = false;  // this build's `run` has --job-id
  std::string spawn = "auto";     // --spawn: auto | exec | fork (see SpawnMode)
  bool out_dir_given = false;     // --out-dir on the command line (else a run directory)
};

// Where a launch without --out-dir writes: ./ncclsmoke-runs/<run id>/, never the current
// directory itself (a second launch would overwrite the first's logs and verdicts). The run id
// is the launch's own random job id when it made one (unique already), else the job id (made
// safe for a file name; "run" when there is none) and this node's UTC start time. The directory
// is claimed with a non-recursive create, so two launches in the same second get -2, -3 ...
std::string claim_run_directory(const LaunchPlan& plan, bool id_made_here, std::string& error) {
  const fs::path root = "ncclsmoke-runs";
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    error = "cannot create the run directory root './" + root.string() + "': " + ec.message() +
            " (choose another place with --out-dir)";
    return "";
  }
  std::string base;
  if (id_made_here) {
    base = plan.job_id;
  } else {
    std::string id = plan.job_id.empty() ? "run" : plan.job_id;
    for (char& ch : id)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.')
        ch = '_';
    if (id.size() > 100) id.resize(100);
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    base = id + "-" + stamp;
  }
  for (int i = 1; i <= 100; ++i) {
    fs::path dir = root / (i == 1 ? base : base + "-" + std::to_string(i));
    if (fs::create_directory(dir, ec)) return dir.string();
    if (ec) {
      error = "cannot create the run directory './" + dir.string() + "': " + ec.message() +
              " (choose another place with --out-dir)";
      return "";
    }
  }
  error = "100 run directories named './" + (root / base).string() +
          "*' already exist (choose another place with --out-dir)";
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

pid_t spawn_rank(const std::vector<std::string>& args, const std::vector<std::string>& env,
                 const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
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
                                  const sigset_t& old_mask, int nice_increment) {
  if (nice_increment > 0) ::setpriority(PRIO_PROCESS, 0, nice_increment);  // best effort
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGTERM, &dfl, nullptr);
  ::sigaction(SIGINT, &dfl, nullptr);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || in < 0) ::_exit(127);  // what posix_spawn reports as a failed start
  ::dup2(out, STDOUT_FILENO);
  ::dup2(out, STDERR_FILENO);
  ::dup2(in, STDIN_FILENO);
  ::close(out);
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
                const std::string& log_path, int nice_increment) {
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
  if (pid == 0) run_forked_rank(args, env, log_path, old, nice_increment);
  int saved = errno;
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return pid;
}

std::string log_path(const RunOptions& o, int global_rank) {
  return (fs::path(o.out_dir) / ("rank" + std::to_string(global_rank) + ".log")).string();
}

// The run flags every rank gets, without the ones the launcher sets per rank.
std::vector<std::string> forwarded_run_args(const RunOptions& o) {
  std::vector<std::string> in = run_option_args(o), out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == "--job-id") {
      ++i;
      continue;
    }
    out.push_back(in[i]);
  }
  return out;
}

// Starts this node's ranks once; returns the lowest local rank's exit code.
// Copies the first rank's log to stdout as it grows, whole lines only, so `launch` is as live
// as `run` (its progress lines, its sweep rows) instead of printing everything at the end.
class LogFollower {
 public:
  explicit LogFollower(std::string path, bool on) : path_(std::move(path)), on_(on) {}
  // New complete lines since the last call; `all`: also a last line without its newline.
  void poll(bool all = false) {
    if (!on_) return;
    std::ifstream in(path_, std::ios::binary);
    if (!in) return;
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (size <= done_) return;
    std::string chunk(static_cast<std::size_t>(size - done_), '\0');
    in.seekg(done_);
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    chunk.resize(static_cast<std::size_t>(in.gcount()));
    std::size_t end = all ? chunk.size() : chunk.rfind('\n');
    if (end == std::string::npos) return;
    if (!all) ++end;
    std::cout.write(chunk.data(), static_cast<std::streamsize>(end));
    std::cout.flush();
    done_ += static_cast<std::streamoff>(end);
  }
  bool printed_any() const { return done_ > 0; }

 private:
  std::string path_;
  bool on_;
  std::streamoff done_ = 0;
};

int launch_once(const LaunchOptions& lo, const LaunchPlan& plan, int port,
                std::vector<int>& codes, LogFollower& follow) {
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
    const int nice_increment = herd_nice && g != 0 ? kHerdNice : 0;
    pid_t pid = mode == SpawnMode::kFork
                    ? fork_rank(args, rank_environment(set), log_path(o, g), nice_increment)
                                         : spawn_rank(args, rank_environment(set), log_path(o, g));
    if (pid < 0) {
      std::cerr << "ncclsmoke launch: could not start rank " << g << " (local " << l
                << "): " << std::strerror(errno) << "\n";
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      codes.assign(pids.size(), 137);
      return kExitFail;
    }
    pids.push_back(pid);
  }
  // Every rank stops itself by --timeout (its watchdog); the launcher allows a margin, then
  // kills. A SIGTERM/SIGINT to the launcher (a deleted pod) is passed on to every rank, which
  // then writes its RUN_TERMINATED verdict.
  auto deadline = Clock::now() + std::chrono::milliseconds(
                                     static_cast<long long>((o.timeout_s + 10) * 1000));
  codes.assign(pids.size(), -1);
  std::unordered_map<pid_t, std::size_t> index_of;
  for (std::size_t i = 0; i < pids.size(); ++i) index_of[pids[i]] = i;
  std::size_t left = pids.size();
  bool forwarded = false;
  while (left && Clock::now() < deadline) {
    if (g_stop_signal && !forwarded) {
      forwarded = true;
      for (std::size_t i = 0; i < pids.size(); ++i)
        if (codes[i] == -1) ::kill(pids[i], SIGTERM);
      deadline = std::min(deadline, Clock::now() + std::chrono::seconds(15));
    }
    // Reap whichever ranks ended (one waitpid per exit, not one per rank per turn: at 1024
    // ranks polling each pid every 20 ms was a measurable share of a core).
    for (;;) {
      int status = 0;
      pid_t done = ::waitpid(-1, &status, WNOHANG);
      if (done <= 0) break;
      auto it = index_of.find(done);
      if (it == index_of.end() || codes[it->second] != -1) continue;  // not one of ours
      codes[it->second] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      --left;
    }
    follow.poll();
    if (left) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (std::size_t i = 0; i < pids.size(); ++i)
    if (codes[i] == -1) {
      ::kill(pids[i], SIGKILL);
      ::waitpid(pids[i], nullptr, 0);
      codes[i] = 137;
      std::cerr << "ncclsmoke launch: rank " << plan.global_rank(static_cast<int>(i))
                << " (host " << local_hostname() << ") did not finish within "
                << (forwarded ? "15 s of SIGTERM" : "--timeout + 10 s") << "; killed\n";
    }
  return codes[0];
}

int launch(LaunchOptions lo) {
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
  if (!lo.out_dir_given) {
    std::string error;
    lo.run.out_dir = claim_run_directory(plan, id_made_here, error);
    if (lo.run.out_dir.empty()) {
      std::cerr << "ncclsmoke launch: " << error << "\n";
      return kExitUsage;
    }
  }
  std::error_code ec;
  fs::create_directories(lo.run.out_dir, ec);
  if (ec) {
    std::cerr << "ncclsmoke launch: cannot create --out-dir '" << lo.run.out_dir
              << "': " << ec.message() << "\n";
    return kExitUsage;
  }
  struct sigaction sa{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);

  const int first = plan.global_rank(0), last = plan.global_rank(plan.nproc_per_node - 1);
  std::vector<int> codes;
  int code = kExitFail;
  for (int attempt = 0; attempt < 2; ++attempt) {
    int port = plan.master_port;
    if (port == 0) port = free_loopback_port();
    if (port <= 0) {
      std::cerr << "ncclsmoke launch: no free loopback port\n";
      return kExitFail;
    }
    if (!lo.run.quiet && attempt == 0)
      std::cout << "ncclsmoke launch: node " << plan.node_rank << "/" << plan.nnodes << " (host "
                << local_hostname() << "): ranks " << first << ".." << last << " of "
                << plan.world_size() << ", master " << rendezvous::join_host_port(plan.master_addr, static_cast<uint16_t>(port))
                << ", job id " << (plan.job_id.empty() ? "(none)" : plan.job_id)
                << (plan.job_id_source.empty() ? "" : " (from " + plan.job_id_source + ")")
                << ", " << token_note << "; logs and verdicts in " << lo.run.out_dir << std::endl;
    LogFollower follow(log_path(lo.run, first), !lo.run.quiet);
    code = launch_once(lo, plan, port, codes, follow);
    std::ifstream log(log_path(lo.run, first));
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    bool clash = text.find("cannot serve the store on port") != std::string::npos;
    // The port was taken between our probe and rank 0's bind.
    if (clash && plan.retry_new_port && attempt == 0 && !g_stop_signal) {
      if (follow.printed_any() && !lo.run.quiet)
        std::cout << "ncclsmoke launch: port " << port
                  << " was taken before rank 0 could bind it; starting again on another port"
                  << std::endl;
      continue;
    }
    follow.poll(/*all=*/true);  // what the ranks wrote after the last turn
    break;
  }
  // Said even with --quiet: a rank whose verdict file is missing must never look like a pass.
  for (std::size_t l = 0; l < codes.size(); ++l)
    if (codes[l] == kExitVerdictNotWritten)
      std::cerr << "ncclsmoke launch: rank " << plan.global_rank(static_cast<int>(l))
                << " could not write its verdict (exit " << kExitVerdictNotWritten << "); see "
                << log_path(lo.run, plan.global_rank(static_cast<int>(l))) << "\n";
  if (!lo.run.quiet) {
    std::cout << "ranks' exit codes:";
    for (std::size_t l = 0; l < codes.size(); ++l)
      std::cout << " " << plan.global_rank(static_cast<int>(l)) << "=" << codes[l];
    std::cout << "; logs and verdicts in " << lo.run.out_dir << "\n";
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
  cmd->add_option("-n,--ranks,--nproc-per-node", lo->flags.nproc_per_node,
                  "Ranks on this node (else PET_NPROC_PER_NODE; default 4)")
      ->group(g);
  cmd->add_option("--nnodes", lo->flags.nnodes, "Nodes in the job (else PET_NNODES; default 1)")
      ->group(g);
  cmd->add_option("--node-rank", lo->flags.node_rank,
                  "This node's index, 0..nnodes-1 (else PET_NODE_RANK; default 0 on one node)")
      ->group(g);
  cmd->add_option("--master-addr", lo->flags.master_addr,
                  "Node 0's address, where its first rank hosts the store (else PET_MASTER_ADDR, "
                  "MASTER_ADDR; default 127.0.0.1 on one node)")
      ->group(g);
  cmd->add_option("--master-port", lo->flags.master_port,
                  "The store's port (else PET_MASTER_PORT, MASTER_PORT; default a free loopback "
                  "port on one node, 29500 on several)")
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
