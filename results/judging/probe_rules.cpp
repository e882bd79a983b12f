#include "results/judging/probe_rules.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "rendezvous/rank_ref.h"
#include "rendezvous/seconds_text.h"
#include "results/judging/mtu_rule.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"

namespace ncclsmoke::results {
namespace {

using ErrorClass = StoreErrorClass;
using rendezvous::RankRef;
using rendezvous::seconds_text;

// A finding from the table (code, severity, layer) whose hint is this rule's own: it names what
// the rule knows (the store's owner, the suspect host, the deadline) that the table's cannot.
Finding rule(Code code, std::string message, std::vector<int> ranks,
             std::vector<std::string> hosts, std::string hint) {
  Finding f = make_finding(code, std::move(message), std::move(ranks), std::move(hosts));
  f.hint = std::move(hint);
  return f;
}

// The same, about a subject: `message_template` has "{reporter}" for this rank.
Finding rule(Code code, Subject about, std::string message_template, std::vector<int> ranks,
             std::vector<std::string> hosts, std::string hint) {
  Finding f = make_finding_about(code, std::move(about), std::move(message_template),
                                 std::move(ranks), std::move(hosts));
  f.hint = std::move(hint);
  return f;
}

RankRef me(const ProbeContext& c) { return RankRef{c.rank, c.host}; }

std::string master(const ProbeContext& c) {
  bool v6 = c.master_addr.find(':') != std::string::npos;
  return v6 ? fmt::format("[{}]:{}", c.master_addr, c.master_port)
            : fmt::format("{}:{}", c.master_addr, c.master_port);
}

// "rank 0 (the store at H:P)", or "the store at H:P" when rank 0 does not host it.
std::string store_owner(const ProbeContext& c) {
  return c.external_store ? fmt::format("the store at {}", master(c))
                          : fmt::format("rank 0 (the store at {})", master(c));
}

// "the process behind H:P (rank 0)": whose state to look at when the store is stalled.
std::string store_process(const ProbeContext& c) {
  return fmt::format("{}{}", master(c), c.external_store ? "" : " (rank 0)");
}

// Runs and at most 16 of them ("1-999999"): one line at any world size.
std::string join_ints(const std::vector<int>& v) { return rank_runs(v); }

// "rank" / "ranks ", for "rank 3" / "ranks 3, 4".
std::string_view ranks_word(std::size_t n) { return n > 1 ? "ranks " : "rank "; }

std::string host_of(const std::map<int, std::string>& hosts, int rank) {
  auto it = hosts.find(rank);
  return it == hosts.end() || it->second.empty() ? fmt::format("rank {}", rank) : it->second;
}

}  // namespace

Finding config_finding(const ConfigProblem& c) {
  using Kind = ConfigProblem::Kind;
  Finding f;
  if (c.kind == Kind::missing) {
    f = rule(Code::CONFIG_MISSING, c.message, {}, {}, c.hint);
  } else {
    f = make_finding(Code::CONFIG_INVALID, c.message, {}, {},
                     {{"variable", c.variable}, {"value", c.value}, {"fix", c.hint}});
    // No variable (discovery itself failed): the fix alone, not "Fix  (value ): ...".
    if (c.variable.empty()) f.hint = c.hint;
    if (c.kind == Kind::conflict) f.severity = Severity::warning;
  }
  f.evidence = {{"variable", c.variable}, {"value", c.value}};
  return f;
}

Finding connect_finding(const StoreFailure& e, const ProbeContext& c, double waited_s) {
  std::vector<int> ranks{c.rank};
  std::vector<std::string> hosts{c.host};
  const std::string waited = seconds_text(waited_s);
  const std::string base =
      fmt::format("{{reporter}} could not reach the store at {} within {}", master(c), waited);
  const Subject about = reported_by(me(c), "rendezvous", master(c));
  Finding f;
  switch (e.error_class) {
    case ErrorClass::dns:
      f = rule(Code::RENDEZVOUS_DNS, about,
               fmt::format("{{reporter}} could not resolve MASTER_ADDR '{}' within {} (retried)",
                           c.master_addr, waited),
               ranks, hosts,
               "Check the name: for a Kubernetes Indexed Job it is <job>-0.<headless service>; "
               "the Service needs publishNotReadyAddresses: true so rank 0's record exists "
               "before its pod is ready.");
      break;
    case ErrorClass::refused:
      f = rule(Code::RENDEZVOUS_REFUSED, about,
               fmt::format("{}: connection refused (the host answered, nothing listens on port {})",
                           base, c.master_port),
               ranks, hosts,
               "Rank 0 is not running or listens on another port: check rank 0's pod/log, "
               "MASTER_PORT on every rank, and REJECT rules on rank 0's host.");
      break;
    case ErrorClass::timed_out:
      f = rule(Code::RENDEZVOUS_TIMEOUT, about,
               fmt::format("{}: the SYN went unanswered (packets dropped, not refused)", base),
               ranks, hosts,
               "A firewall drops traffic to the master port: on EKS check that the node "
               "security group allows all traffic from itself (inbound and outbound), and "
               "any NetworkPolicy selecting these pods; or rank 0's host is down.");
      break;
    case ErrorClass::stalled:
      // connect() succeeded (the kernel accepted, even for a stopped process, through the listen
      // backlog) but nothing answered: a firewall never lets the handshake complete, so no
      // security-group hint here.
      f = rule(Code::RENDEZVOUS_STALLED, about,
               fmt::format("{{reporter}}: {} accepts the connection but does not answer: the "
                           "process is stalled (SIGSTOP, a debugger, swap) or overloaded (waited {})",
                           store_owner(c), waited),
               ranks, hosts,
               fmt::format("Look at the process behind {}: its state (T = stopped, D = blocked in "
                           "I/O), CPU and memory pressure (swapping), an attached debugger or a "
                           "frozen container. The network is fine: the connection was accepted.",
                           store_process(c)));
      break;
    case ErrorClass::unreachable:
      f = rule(Code::RENDEZVOUS_UNREACHABLE, about, fmt::format("{}: no route to host", base), ranks, hosts,
               "Check MASTER_ADDR and the routes/interfaces on this host.");
      break;
    default:
      f = rule(Code::RENDEZVOUS_LOST, about,
               fmt::format("{}: {}", base, to_string(e.error_class)), ranks, hosts,
               "The store answered but the connection failed: check that MASTER_PORT is an "
               "ncclsmoke or PyTorch store and not another service.");
  }
  f.hosts.push_back(c.master_addr);
  f.evidence = {{"error_class", to_string(e.error_class)},
                {"detail", e.detail},
                {"waited_s", waited_s}};
  return f;
}

Finding lost_finding(const StoreFailure& e, const ProbeContext& c,
                     const std::string& during) {
  Finding f;
  if (e.error_class == ErrorClass::stalled) {
    f = rule(Code::RENDEZVOUS_STALLED, reported_by(me(c), during, master(c)),
             fmt::format("{{reporter}} reconnected to the store during {}: {} accepts the "
                         "connection but does not answer: the process is stalled (SIGSTOP, a "
                         "debugger, swap) or overloaded",
                         during, store_owner(c)),
             {c.rank}, {c.host, c.master_addr},
             fmt::format("Look at the process behind {}: its state (T = stopped), CPU and memory "
                         "pressure, an attached debugger. The network is fine: the connection "
                         "was accepted.",
                         store_process(c)));
  } else {
    f = rule(Code::RENDEZVOUS_LOST, reported_by(me(c), during, master(c)),
             fmt::format("{{reporter}} lost the store at {} during {}: {}", master(c), during,
                         to_string(e.error_class)),
             {c.rank}, {c.host, c.master_addr},
             "Rank 0 (which serves the store) died or its host became unreachable: check "
             "rank 0's pod status and log.");
  }
  f.evidence = {{"error_class", to_string(e.error_class)}, {"detail", e.detail}};
  return f;
}

std::vector<Finding> join_findings(const JoinFacts& j, const ProbeContext& c,
                                   double join_timeout_s) {
  std::vector<Finding> out;
  if (!j.missing.empty()) {
    out.push_back(rule(Code::RANKS_MISSING,
                       fmt::format("{} of {} ranks never joined within {}: {}{}", j.missing.size(),
                                   c.world_size, seconds_text(join_timeout_s),
                                   ranks_word(j.missing.size()), join_ints(j.missing)),
                       j.missing, {},
                       "Check that those pods/processes started (pending pods, crash loops, wrong "
                       "WORLD_SIZE), and that they reach MASTER_ADDR (their own verdicts say why)."));
  }
  if (j.master_world_size) {
    out.push_back(rule(Code::WORLD_MISMATCH, reported_by(me(c), "rendezvous", "world size"),
                       fmt::format("{{reporter}} has world size {} but rank 0 has {}", c.world_size,
                                   *j.master_world_size),
                       {c.rank}, {c.host},
                       "Every rank must get the same WORLD_SIZE (Indexed Job: parallelism = "
                       "completions = the world size)."));
  }
  if (j.rank_taken_by) {
    const auto& t = *j.rank_taken_by;
    out.push_back(rule(Code::WORLD_MISMATCH,
                       reported_by(me(c), "rendezvous", fmt::format("rank {} claimed", c.rank)),
                       fmt::format("rank {} was claimed twice: by host {} (pid {}) and by host {} "
                                   "(pid {})",
                                   c.rank, t.host, t.pid, c.host, c.pid),
                       {c.rank}, {c.host, t.host},
                       "Two processes got the same RANK: check the launcher's rank assignment "
                       "(one rank per pod, distinct JOB_COMPLETION_INDEX)."));
  }
  if (!j.roster_received && c.rank != 0) {
    out.push_back(rule(Code::RENDEZVOUS_LOST, reported_by(me(c), "rendezvous", "roster"),
                       fmt::format("{{reporter}} joined, but rank 0 never published who else "
                                   "joined within {}",
                                   seconds_text(j.waited_s)),
                       {0}, {c.master_addr},
                       "Rank 0 died or hung during the join: check rank 0's pod and log."));
  }
  return out;
}

std::vector<int> suspect_ranks(const std::vector<PairFailureFact>& failures) {
  if (failures.empty()) return {};
  // One pair whose handshake stalled (connected, then no answer) is a lossy or slow path between
  // two hosts: nothing says which end, and a filter would have refused or dropped the SYN.
  if (failures.size() == 1 && failures.front().error_class == ErrorClass::stalled) return {};
  std::map<int, int> involved;
  for (const auto& f : failures) {
    ++involved[f.from];
    if (f.to != f.from) ++involved[f.to];
  }
  std::vector<int> out;
  for (const auto& [rank, n] : involved)
    if (n == static_cast<int>(failures.size())) out.push_back(rank);
  // Two ranks can share every pair only when there is a single failing pair or they block each
  // other; the one the failures point *to* is the likelier culprit (inbound filtering).
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
    auto to_count = [&](int r) {
      return std::count_if(failures.begin(), failures.end(),
                           [&](const auto& f) { return f.to == r; });
    };
    return to_count(a) > to_count(b);
  });
  return out;
}

std::vector<Finding> mesh_findings(const MeshFacts& m, const ProbeContext& c,
                                   const std::map<int, std::string>& hosts) {
  std::vector<Finding> out;
  if (!m.failures.empty()) {
    std::set<int> ranks;
    std::map<std::string, int> classes;
    nlohmann::json pairs = nlohmann::json::array();
    for (const auto& f : m.failures) {
      ranks.insert(f.from);
      ranks.insert(f.to);
      ++classes[to_string(f.error_class)];
      pairs.push_back({{"from", f.from},
                       {"to", f.to},
                       {"from_host", host_of(hosts, f.from)},
                       {"to_host", host_of(hosts, f.to)},
                       {"to_address", f.to_address},
                       {"error_class", to_string(f.error_class)},
                       {"waited_s", f.waited_s}});
    }
    auto suspects = suspect_ranks(m.failures);
    std::vector<std::string> what;
    for (const auto& [cls, n] : classes) what.push_back(fmt::format("{} {}", n, cls));
    std::string message =
        fmt::format("{} of {} rank-to-rank connections failed ({})", m.failures.size(),
                    m.pairs_tested, fmt::join(what, ", "));
    std::vector<std::string> named;
    if (!suspects.empty()) {
      int s = suspects.front();
      named.push_back(host_of(hosts, s));
      bool inbound = std::all_of(m.failures.begin(), m.failures.end(),
                                 [&](const auto& f) { return f.to == s; });
      message += fmt::format("; every failing pair involves {} (rank {}){}", host_of(hosts, s), s,
                             inbound ? ", as the destination" : "");
    } else {
      const auto& first = m.failures[0];
      message += fmt::format("; first: rank {} -> rank {} ({})", first.from, first.to,
                             host_of(hosts, first.to));
    }
    for (int r : ranks)
      if (std::find(named.begin(), named.end(), host_of(hosts, r)) == named.end())
        named.push_back(host_of(hosts, r));
    auto f = rule(Code::MESH_BLOCKED, message, {ranks.begin(), ranks.end()}, named,
                  suspects.empty()
                      ? std::string("Rank-to-rank ports are filtered between these hosts while "
                                    "the master port is open: allow all TCP ports between the "
                                    "nodes (EKS: a self-referencing security-group rule, not only "
                                    "the master port).")
                      : fmt::format("Check the firewall/security group and NetworkPolicy of {}: "
                                    "it filters rank-to-rank ports while the master port is open.",
                                    host_of(hosts, suspects.front())));
    f.evidence = {{"pairs", pairs}, {"pairs_tested", m.pairs_tested}};
    if (!suspects.empty()) f.evidence["suspect_rank"] = suspects.front();
    out.push_back(std::move(f));
  }
  if (!m.silent_ranks.empty()) {
    std::vector<std::string> named;
    for (int r : m.silent_ranks) named.push_back(host_of(hosts, r));
    // Layer "run", the table's, as for the liveness watch's PEER_LOST (it was "mesh" here).
    Finding lost = rule(Code::PEER_LOST,
                        fmt::format("{}{} joined but stopped answering during the mesh probe",
                                    ranks_word(m.silent_ranks.size()), join_ints(m.silent_ranks)),
                        m.silent_ranks, named,
                        "The process died or hung after joining: check that pod's status, exit "
                        "code and log (OOM kill, node drain, crash).");
    // An inference from silence, not a witnessed death (the merge drops it, as any PEER_LOST,
    // for a rank whose own verdict arrived: it lived to the end of its run).
    lost.evidence = {{"source", "mesh silence"}};
    out.push_back(std::move(lost));
  }
  if (!m.summary_received && c.rank != 0) {
    out.push_back(rule(Code::RENDEZVOUS_LOST, reported_by(me(c), "mesh", "mesh summary"),
                       "{reporter} never received rank 0's mesh summary", {0},
                       {c.master_addr},
                       "Rank 0 died or hung during the mesh probe: check rank 0's pod and log."));
  }
  return out;
}

MeshJudgement judge_mesh(const MeshFacts& m, const ProbeContext& c,
                         const std::map<int, std::string>& hosts) {
  MeshJudgement j;
  j.findings = mesh_findings(m, c, hosts);
  // Path-MTU black holes (mtu_rule.h): an error, so the phase fails and no transport runs on them.
  for (auto& f : mtu_findings(m, hosts)) j.findings.push_back(std::move(f));
  bool failed = std::any_of(j.findings.begin(), j.findings.end(),
                            [](const Finding& f) { return f.severity == Severity::error; });
  bool incomplete = m.pairs_untested > 0 || !m.unfinished_ranks.empty();
  const std::string budget = seconds_text(m.budget_s);
  if (incomplete) {
    std::string still;
    if (!m.unfinished_ranks.empty()) {
      const std::size_t n = m.unfinished_ranks.size();
      std::vector<int> shown(m.unfinished_ranks.begin(),
                             m.unfinished_ranks.begin() +
                                 static_cast<long>(std::min<std::size_t>(n, 16)));
      still = fmt::format("; {}{}{} {} still probing", ranks_word(n), join_ints(shown),
                          n > shown.size() ? fmt::format(" (and {} more)", n - shown.size())
                                           : std::string(),
                          n > 1 ? "were" : "was");
    }
    Subject about;
    about.phase = "mesh";
    about.item = "mesh deadline";
    auto f = rule(Code::MESH_INCOMPLETE, about,
                  fmt::format("{} of {} rank-to-rank connections were not tested: the mesh "
                              "deadline ({}) ended the probe before they were tried or "
                              "answered{}; they are neither passed nor blocked",
                              m.pairs_untested, m.pairs_planned(), budget, still),
                  m.unfinished_ranks, {},
                  fmt::format("Raise --mesh-timeout (it was {} for {} ranks, with --pair-timeout "
                              "per pair), or look for an overloaded host (CPU, many ranks per "
                              "node) that makes the probe slow. A blocked path would show as "
                              "MESH_BLOCKED, not as this.",
                              budget, c.world_size));
    f.evidence = {{"pairs_tested", m.pairs_tested},
                  {"pairs_untested", m.pairs_untested},
                  {"unfinished_ranks", m.unfinished_ranks},
                  {"mesh_timeout_s", m.budget_s}};
    j.findings.push_back(std::move(f));
  }
  j.status = failed ? PhaseStatus::fail : incomplete ? PhaseStatus::inconclusive : PhaseStatus::pass;
  j.detail = fmt::format("{} pairs tested, {} failed", m.pairs_tested, m.failures.size());
  if (incomplete) {
    j.detail += fmt::format(", {} not tested (the {} deadline ended the probe first",
                            m.pairs_untested, budget);
    if (!m.unfinished_ranks.empty())
      j.detail += fmt::format("; {} ranks still probing", m.unfinished_ranks.size());
    j.detail += ")";
  }
  if (!m.silent_ranks.empty())
    j.detail += fmt::format(", {} ranks lost", m.silent_ranks.size());
  if (auto mtu = mtu_detail(m); !mtu.empty()) j.detail += "; " + mtu;
  return j;
}

}  // namespace ncclsmoke::results
