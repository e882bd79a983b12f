#include "harness/actions/slurm_drain.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "harness/common/env.h"
#include "harness/common/log.h"
#include "harness/world/hostlist.h"
#include "results/verdict/suspects.h"

extern char** environ;

namespace ncclsmoke::harness {

using rendezvous::Clock;
using rendezvous::Millis;

namespace {

// Every node's line of `scontrol show node -o` (about 1 KB each): room for 16,384 nodes.
constexpr std::size_t kNodeListCapture = 16u << 20;
constexpr Millis kCommandTimeout{10000};
constexpr Millis kBeforeRunDeadline{300};

std::string first_line(const std::string& s) {
  std::string t = s.substr(0, s.find('\n'));
  while (!t.empty() && (t.back() == '\r' || t.back() == ' ')) t.pop_back();
  return t.size() > 300 ? t.substr(0, 300) + "..." : t;
}

std::string scontrol_binary() {
  if (auto s = env("NCCLSMOKE_SCONTROL")) return *s;
  return "scontrol";
}

}  // namespace

std::string CommandResult::describe() const {
  if (!spawn_error.empty()) return spawn_error;
  if (timed_out) return "timed out (killed)";
  std::string why = first_line(err.empty() ? out : err);
  if (exit_code < 0) return "killed by a signal" + (why.empty() ? "" : ": " + why);
  return fmt::format("exit {}{}", exit_code, why.empty() ? "" : ": " + why);
}

CommandResult run_command(const std::vector<std::string>& argv, rendezvous::Deadline deadline,
                          std::size_t max_capture) {
  CommandResult r;
  if (argv.empty()) {
    r.spawn_error = "no command";
    return r;
  }
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    r.spawn_error = fmt::format("pipe: {}", std::strerror(errno));
    return r;
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.spawn_error = fmt::format("pipe: {}", std::strerror(errno));
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    r.spawn_error = fmt::format("{} could not be started: {}", argv[0], std::strerror(rc));
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return r;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* into[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      const auto n = static_cast<std::size_t>(got);
      if (into[i]->size() + n > max_capture) r.truncated = true;
      if (into[i]->size() < max_capture)
        into[i]->append(buf, std::min(n, max_capture - into[i]->size()));
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  if (r.timed_out) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return r;
  }
  // The pipes closed: the child is exiting; wait for it, still under the deadline.
  while (true) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      r.spawn_error = fmt::format("waitpid: {}", std::strerror(errno));
      return r;
    }
    if (Clock::now() >= deadline) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return r;
    }
    ::usleep(5000);
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::optional<SlurmNodeState> parse_show_node(const std::string& line) {
  auto field = [&](const std::string& key) -> std::optional<std::size_t> {
    for (std::size_t at = line.find(key); at != std::string::npos; at = line.find(key, at + 1))
      if (at == 0 || line[at - 1] == ' ') return at + key.size();
    return std::nullopt;
  };
  auto st = field("State=");
  if (!st) return std::nullopt;
  auto word = [&](std::size_t at) { return line.substr(at, line.find_first_of(" \n", at) - at); };
  SlurmNodeState s;
  s.state = word(*st);
  if (auto n = field("NodeName=")) s.name = word(*n);
  if (auto p = field("Partitions=")) {
    const std::string list = word(*p);
    for (std::size_t b = 0; b < list.size();) {
      auto e = std::min(list.find(',', b), list.size());
      if (e > b && list.compare(b, e - b, "(null)") != 0) s.partitions.push_back(list.substr(b, e - b));
      b = e + 1;
    }
  }
  if (auto rs = field("Reason=")) {
    // The reason runs to the end of the line (Slurm prints it last), less " [user@time]".
    std::string reason = line.substr(*rs);
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r' || reason.back() == ' '))
      reason.pop_back();
    if (!reason.empty() && reason.back() == ']')
      if (auto open = reason.rfind(" ["); open != std::string::npos) reason.resize(open);
    // Fields Slurm may print after the reason in other versions.
    for (const char* next : {" Comment=", " Extra="})
      if (auto at = reason.find(next); at != std::string::npos) reason.resize(at);
    s.reason = reason == "(null)" ? std::string() : reason;
  }
  return s;
}

HeldDrains held_drains(const std::string& show_all_nodes, const std::string& partition) {
  std::vector<SlurmNodeState> nodes;
  for (std::size_t b = 0; b < show_all_nodes.size();) {
    auto e = std::min(show_all_nodes.find('\n', b), show_all_nodes.size());
    if (auto n = parse_show_node(show_all_nodes.substr(b, e - b)); n && !n->name.empty())
      nodes.push_back(std::move(*n));
    b = e + 1;
  }
  auto in_partition = [&](const SlurmNodeState& n) {
    return std::find(n.partitions.begin(), n.partitions.end(), partition) != n.partitions.end();
  };
  const bool by_partition =
      !partition.empty() && std::any_of(nodes.begin(), nodes.end(), in_partition);
  HeldDrains h;
  h.scope = by_partition ? "partition " + partition : std::string("the cluster");
  for (const auto& n : nodes) {
    if (by_partition && !in_partition(n)) continue;
    ++h.scope_nodes;
    if (n.drained_by_ncclsmoke()) h.ours.push_back(n.name);
  }
  std::sort(h.ours.begin(), h.ours.end());
  return h;
}

std::string drain_reason(const std::vector<std::string>& codes, const std::string& run_id) {
  return fmt::format("{}{} run {}", kDrainReasonPrefix,
                     codes.empty() ? std::string("SUSPECT") : fmt::format("{}", fmt::join(codes, ",")),
                     run_id.empty() ? std::string("unknown") : run_id);
}

void slurm_set_aside(const SlurmDrainRequest& request, results::Verdict& global) {
  const auto t0 = Clock::now();
  results::Phase phase;
  phase.name = "slurm-drain";
  phase.required = false;
  std::vector<std::string> done, errors;
  auto finish = [&](results::PhaseStatus status, std::string detail) {
    phase.status = status;
    phase.detail = std::move(detail);
    phase.duration_s = rendezvous::seconds_since(t0);
    global.phases.push_back(phase);
  };
  // Each scontrol: 10 s, and done before the watchdog's deadline.
  auto call = [&](std::vector<std::string> args, std::size_t capture = kDefaultCapture) {
    auto deadline = std::min(Clock::now() + kCommandTimeout, request.run_deadline - kBeforeRunDeadline);
    args.insert(args.begin(), scontrol_binary());
    return run_command(args, deadline, capture);
  };

  // The job's nodes: the ranks' nodes, limited to SLURM_JOB_NODELIST when it is set.
  std::set<std::string> job_nodes;
  for (const auto& r : global.ranks)
    if (r.status != results::RankStatus::missing && !r.node.empty()) job_nodes.insert(r.node);
  const auto nodelist = lookup(request.environment, "SLURM_JOB_NODELIST");
  if (nodelist && !nodelist->empty()) {
    std::string why;
    auto hosts = expand_hostlist(*nodelist, &why);
    if (!hosts) {
      log_error(fmt::format("slurm-drain: SLURM_JOB_NODELIST '{}' cannot be read ({}): no node "
                            "is drained or resumed",
                            *nodelist, why));
      return finish(results::PhaseStatus::fail,
                    fmt::format("SLURM_JOB_NODELIST unreadable: {}", why));
    }
    std::set<std::string> in_job(hosts->begin(), hosts->end());
    for (auto it = job_nodes.begin(); it != job_nodes.end();)
      it = in_job.count(*it) ? std::next(it) : job_nodes.erase(it);
  }

  auto show = [&](const std::string& node, std::string& problem) -> std::optional<SlurmNodeState> {
    auto r = call({"show", "node", "-o", node});
    if (!r.ok()) {
      problem = fmt::format("scontrol show node -o {}: {}", node, r.describe());
      return std::nullopt;
    }
    auto s = parse_show_node(r.out);
    if (!s) problem = fmt::format("scontrol show node -o {}: no State= in '{}'", node, first_line(r.out));
    return s;
  };

  bool held_back = false;  // a suspect the budget kept in service
  if (global.verdict == results::Outcome::fail || global.verdict == results::Outcome::degraded) {
    std::vector<results::SuspectHost> suspects;
    for (auto& s : results::suspect_hosts(global))
      if (job_nodes.count(s.node)) suspects.push_back(std::move(s));
    if (suspects.empty())
      return finish(results::PhaseStatus::skipped,
                    fmt::format("verdict {}: no node of the job is a suspect; nothing drained",
                                global.verdict));
    const std::size_t limit = std::max<std::size_t>(1, job_nodes.size() / 2);
    if (suspects.size() > limit) {
      log_error(fmt::format("slurm-drain: {} of the job's {} nodes are suspects: a fault that "
                            "names most nodes is not a node's; none drained",
                            suspects.size(), job_nodes.size()));
      return finish(results::PhaseStatus::skipped,
                    fmt::format("{} of {} nodes suspect (more than {}): none drained",
                                suspects.size(), job_nodes.size(), limit));
    }
    // The budget: the drains ncclsmoke holds now, across runs.
    const auto& budget = request.budget;
    auto listing = call({"show", "node", "-o"}, kNodeListCapture);
    if (!listing.ok() || listing.truncated) {
      const std::string problem = fmt::format(
          "the drain budget (--slurm-drain-budget {}) cannot be checked: scontrol show node -o: {}",
          budget.text(),
          listing.ok() ? fmt::format("its output is over {} MiB", kNodeListCapture >> 20)
                       : listing.describe());
      log_error("slurm-drain: " + problem + "; none drained");
      return finish(results::PhaseStatus::fail, problem + "; none drained");
    }
    const auto held = held_drains(listing.out, lookup(request.environment, "SLURM_JOB_PARTITION").value_or(""));
    const int allowed = budget.allowed(held.scope_nodes);
    std::vector<std::string> holding = held.ours;
    for (const auto& s : suspects) {
      std::string problem;
      auto state = show(s.node, problem);
      if (!state) {
        errors.push_back(problem);
        log_error("slurm-drain: " + problem + fmt::format("; {} not drained", s.node));
        continue;
      }
      if (state->drained() && !state->drained_by_ncclsmoke()) {
        done.push_back(fmt::format("kept {} (already drained by someone else: \"{}\")", s.node,
                                   state->reason));
        log_warn(fmt::format("slurm-drain: {} is already drained (\"{}\", not ncclsmoke's): left "
                             "as it is",
                             s.node, state->reason));
        continue;
      }
      const bool already_ours = state->drained_by_ncclsmoke();
      if (!already_ours && static_cast<int>(holding.size()) >= allowed) {
        held_back = true;
        const std::string why = fmt::format(
            "not drained {}: the drain budget is spent (--slurm-drain-budget {}: {} of the {} "
            "nodes of {}; ncclsmoke holds {} drained{}{}); resume the repaired ones (scontrol "
            "update NodeName=<node> State=RESUME) or raise the budget",
            s.node, budget.text(), allowed, held.scope_nodes, held.scope, holding.size(),
            holding.empty() ? "" : ": ", fmt::join(holding, ","));
        done.push_back(why);
        log_error("slurm-drain: " + why);
        continue;
      }
      const std::string reason = drain_reason(s.codes, global.run_id);
      auto r = call({"update", "NodeName=" + s.node, "State=DRAIN", "Reason=" + reason});
      if (!r.ok()) {
        errors.push_back(fmt::format("scontrol update NodeName={} State=DRAIN: {}", s.node, r.describe()));
        log_error(fmt::format("slurm-drain: could not drain {}: scontrol update NodeName={} "
                              "State=DRAIN: {}",
                              s.node, s.node, r.describe()));
        continue;
      }
      if (!already_ours) holding.push_back(s.node);
      done.push_back(fmt::format("drained {} (Reason=\"{}\")", s.node, reason));
      log_warn(fmt::format("slurm-drain: drained {} (Reason=\"{}\"): it takes no new jobs until "
                           "`scontrol update NodeName={} State=RESUME` or a passing ncclsmoke "
                           "run with --slurm-drain on it",
                           s.node, reason, s.node));
    }
  } else if (global.verdict == results::Outcome::pass) {
    for (const auto& node : job_nodes) {
      std::string problem;
      auto state = show(node, problem);
      if (!state) {
        errors.push_back(problem);
        log_error("slurm-drain: " + problem);
        continue;
      }
      if (!state->drained()) continue;
      if (!state->drained_by_ncclsmoke()) {
        done.push_back(fmt::format("kept {} (drained by someone else: \"{}\")", node, state->reason));
        log_warn(fmt::format("slurm-drain: {} passed but stays drained: its reason \"{}\" is not "
                             "ncclsmoke's",
                             node, state->reason));
        continue;
      }
      auto r = call({"update", "NodeName=" + node, "State=RESUME"});
      if (!r.ok()) {
        errors.push_back(fmt::format("scontrol update NodeName={} State=RESUME: {}", node, r.describe()));
        log_error(fmt::format("slurm-drain: could not resume {}: {}", node, r.describe()));
        continue;
      }
      done.push_back(fmt::format("resumed {} (was drained: \"{}\")", node, state->reason));
      log_warn(fmt::format("slurm-drain: resumed {}: it passed (ncclsmoke had drained it: \"{}\")",
                           node, state->reason));
    }
  } else {
    return finish(results::PhaseStatus::skipped,
                  fmt::format("verdict {}: neither drained nor resumed", global.verdict));
  }
  std::vector<std::string> all = done;
  all.insert(all.end(), errors.begin(), errors.end());
  if (all.empty()) all.push_back(global.verdict == results::Outcome::pass
                                     ? fmt::format("no node of the job ({}) drained by ncclsmoke",
                                                   fmt::join(job_nodes, ","))
                                     : std::string("nothing to do"));
  finish(!errors.empty() ? results::PhaseStatus::fail
         : held_back      ? results::PhaseStatus::degraded
                          : results::PhaseStatus::pass,
         fmt::format("{}", fmt::join(all, "; ")));
}

}  // namespace ncclsmoke::harness
