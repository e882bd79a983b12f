#include "harness/probe_findings.h"

#include <algorithm>
#include <unistd.h>

#include <cstdio>
#include <set>

namespace ncclsmoke::harness {
namespace {

using results::Finding;
using rendezvous::ErrorClass;

Finding make(std::string code, std::string severity, std::string layer, std::vector<int> ranks,
             std::vector<std::string> hosts, std::string message, std::string hint) {
  Finding f;
  f.code = std::move(code);
  f.severity = std::move(severity);
  f.layer = std::move(layer);
  f.ranks = std::move(ranks);
  f.hosts = std::move(hosts);
  f.message = std::move(message);
  f.hint = std::move(hint);
  return f;
}

using rendezvous::seconds_text;

std::string master(const World& w) {
  bool v6 = w.master_addr.find(':') != std::string::npos;
  return (v6 ? "[" + w.master_addr + "]" : w.master_addr) + ":" + std::to_string(w.master_port);
}

// "rank 0 (the store at H:P)", or "the store at H:P" when rank 0 does not host it.
std::string store_owner(const World& w) {
  return w.external_store ? "the store at " + master(w) : "rank 0 (the store at " + master(w) + ")";
}

std::string who(const World& w) {
  return "rank " + std::to_string(w.rank) + " (host " + w.hostname + ")";
}

std::string join_ints(const std::vector<int>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out;
}

std::string host_of(const std::map<int, std::string>& hosts, int rank) {
  auto it = hosts.find(rank);
  return it == hosts.end() || it->second.empty() ? "rank " + std::to_string(rank) : it->second;
}

}  // namespace

Finding config_finding(const ConfigFinding& c) {
  auto f = make(c.code, c.severity, "config", {}, {}, c.message, c.hint);
  f.evidence = {{"variable", c.variable}, {"value", c.value}};
  return f;
}

Finding connect_finding(const rendezvous::StoreError& e, const World& w, double waited_s) {
  std::vector<int> ranks{w.rank};
  std::vector<std::string> hosts{w.hostname};
  std::string base = who(w) + " could not reach the store at " + master(w) + " within " +
                     seconds_text(waited_s);
  Finding f;
  switch (e.error_class()) {
    case ErrorClass::dns:
      f = make("RENDEZVOUS_DNS", "error", "rendezvous", ranks, hosts,
               who(w) + " could not resolve MASTER_ADDR '" + w.master_addr + "' within " +
                   seconds_text(waited_s) + " (retried)",
               "Check the name: for a Kubernetes Indexed Job it is <job>-0.<headless service>; "
               "the Service needs publishNotReadyAddresses: true so rank 0's record exists "
               "before its pod is ready.");
      break;
    case ErrorClass::refused:
      f = make("RENDEZVOUS_REFUSED", "error", "rendezvous", ranks, hosts,
               base + ": connection refused (the host answered, nothing listens on port " +
                   std::to_string(w.master_port) + ")",
               "Rank 0 is not running or listens on another port: check rank 0's pod/log, "
               "MASTER_PORT on every rank, and REJECT rules on rank 0's host.");
      break;
    case ErrorClass::timed_out:
      f = make("RENDEZVOUS_TIMEOUT", "error", "rendezvous", ranks, hosts,
               base + ": the SYN went unanswered (packets dropped, not refused)",
               "A firewall drops traffic to the master port: on EKS check that the node "
               "security group allows all traffic from itself (inbound and outbound), and "
               "any NetworkPolicy selecting these pods; or rank 0's host is down.");
      break;
    case ErrorClass::stalled:
      // connect() succeeded (the kernel accepted, even for a stopped process, through the listen
      // backlog) but nothing answered: a firewall never lets the handshake complete, so no
      // security-group hint here.
      f = make("RENDEZVOUS_STALLED", "error", "rendezvous", ranks, hosts,
               who(w) + ": " + store_owner(w) + " accepts the connection but does not answer: "
                   "the process is stalled (SIGSTOP, a debugger, swap) or overloaded (waited " +
                   seconds_text(waited_s) + ")",
               "Look at the process behind " + master(w) + (w.external_store ? "" : " (rank 0)") +
                   ": its state (T = stopped, D = blocked in I/O), CPU and memory pressure "
                   "(swapping), an attached debugger or a frozen container. The network is fine: "
                   "the connection was accepted.");
      break;
    case ErrorClass::unreachable:
      f = make("RENDEZVOUS_UNREACHABLE", "error", "rendezvous", ranks, hosts,
               base + ": no route to host",
               "Check MASTER_ADDR and the routes/interfaces on this host.");
      break;
    default:
      f = make("RENDEZVOUS_LOST", "error", "rendezvous", ranks, hosts,
               base + ": " + rendezvous::to_string(e.error_class()),
               "The store answered but the connection failed: check that MASTER_PORT is an "
               "ncclsmoke or PyTorch store and not another service.");
  }
  f.hosts.push_back(w.master_addr);
  f.evidence = {{"error_class", rendezvous::to_string(e.error_class())},
                {"detail", e.what()},
                {"waited_s", waited_s}};
  return f;
}

Finding lost_finding(const rendezvous::StoreError& e, const World& w, const std::string& during) {
  if (e.error_class() == ErrorClass::stalled) {
    auto f = make("RENDEZVOUS_STALLED", "error", "rendezvous", {w.rank},
                  {w.hostname, w.master_addr},
                  who(w) + " reconnected to the store during " + during + ": " + store_owner(w) +
                      " accepts the connection but does not answer: the process is stalled "
                      "(SIGSTOP, a debugger, swap) or overloaded",
                  "Look at the process behind " + master(w) +
                      (w.external_store ? "" : " (rank 0)") +
                      ": its state (T = stopped), CPU and memory pressure, an attached debugger. "
                      "The network is fine: the connection was accepted.");
    f.evidence = {{"error_class", rendezvous::to_string(e.error_class())}, {"detail", e.what()}};
    return f;
  }
  auto f = make("RENDEZVOUS_LOST", "error", "rendezvous", {w.rank}, {w.hostname, w.master_addr},
                who(w) + " lost the store at " + master(w) + " during " + during + ": " +
                    rendezvous::to_string(e.error_class()),
                "Rank 0 (which serves the store) died or its host became unreachable: check "
                "rank 0's pod status and log.");
  f.evidence = {{"error_class", rendezvous::to_string(e.error_class())}, {"detail", e.what()}};
  return f;
}

std::vector<Finding> join_findings(const rendezvous::JoinResult& j, const World& w,
                                   double join_timeout_s) {
  std::vector<Finding> out;
  if (!j.missing.empty()) {
    out.push_back(make("RANKS_MISSING", "error", "rendezvous", j.missing, {},
                       std::to_string(j.missing.size()) + " of " + std::to_string(w.world_size) +
                           " ranks never joined within " + seconds_text(join_timeout_s) + ": rank" +
                           (j.missing.size() > 1 ? "s " : " ") + join_ints(j.missing),
                       "Check that those pods/processes started (pending pods, crash loops, wrong "
                       "WORLD_SIZE), and that they reach MASTER_ADDR (their own verdicts say why)."));
  }
  if (j.master_world_size) {
    out.push_back(make("WORLD_MISMATCH", "error", "rendezvous", {w.rank}, {w.hostname},
                       who(w) + " has world size " + std::to_string(w.world_size) +
                           " but rank 0 has " + std::to_string(*j.master_world_size),
                       "Every rank must get the same WORLD_SIZE (Indexed Job: parallelism = "
                       "completions = the world size)."));
  }
  if (j.rank_taken_by) {
    const auto& t = *j.rank_taken_by;
    out.push_back(make("WORLD_MISMATCH", "error", "rendezvous", {w.rank}, {w.hostname, t.host},
                       "rank " + std::to_string(w.rank) + " was claimed twice: by host " + t.host +
                           " (pid " + std::to_string(t.pid) + ") and by host " + w.hostname +
                           " (pid " + std::to_string(::getpid()) + ")",
                       "Two processes got the same RANK: check the launcher's rank assignment "
                       "(one rank per pod, distinct JOB_COMPLETION_INDEX)."));
  }
  if (!j.roster_received && w.rank != 0) {
    out.push_back(make("RENDEZVOUS_LOST", "error", "rendezvous", {0}, {w.master_addr},
                       who(w) + " joined, but rank 0 never published who else joined within " +
                           seconds_text(j.waited_s),
                       "Rank 0 died or hung during the join: check rank 0's pod and log."));
  }
  return out;
}

std::vector<int> suspect_ranks(const std::vector<rendezvous::PairFailure>& failures) {
  if (failures.empty()) return {};
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

std::vector<Finding> mesh_findings(const rendezvous::MeshResult& m, const World& w,
                                   const std::map<int, std::string>& hosts) {
  std::vector<Finding> out;
  if (!m.failures.empty()) {
    std::set<int> ranks;
    std::map<std::string, int> classes;
    nlohmann::json pairs = nlohmann::json::array();
    for (const auto& f : m.failures) {
      ranks.insert(f.from);
      ranks.insert(f.to);
      ++classes[rendezvous::to_string(f.error_class)];
      pairs.push_back({{"from", f.from},
                       {"to", f.to},
                       {"from_host", host_of(hosts, f.from)},
                       {"to_host", host_of(hosts, f.to)},
                       {"to_address", f.to_address},
                       {"error_class", rendezvous::to_string(f.error_class)},
                       {"waited_s", f.waited_s}});
    }
    auto suspects = suspect_ranks(m.failures);
    std::vector<std::string> named;
    std::string message = std::to_string(m.failures.size()) + " of " +
                          std::to_string(m.pairs_tested) + " rank-to-rank connections failed";
    std::string what;
    for (const auto& [cls, n] : classes) what += (what.empty() ? "" : ", ") + std::to_string(n) + " " + cls;
    message += " (" + what + ")";
    if (!suspects.empty()) {
      int s = suspects.front();
      named.push_back(host_of(hosts, s));
      bool inbound = std::all_of(m.failures.begin(), m.failures.end(),
                                 [&](const auto& f) { return f.to == s; });
      message += "; every failing pair involves " + host_of(hosts, s) + " (rank " +
                 std::to_string(s) + ")" + (inbound ? ", as the destination" : "");
    } else {
      message += "; first: rank " + std::to_string(m.failures[0].from) + " -> rank " +
                 std::to_string(m.failures[0].to) + " (" + host_of(hosts, m.failures[0].to) + ")";
    }
    for (int r : ranks)
      if (std::find(named.begin(), named.end(), host_of(hosts, r)) == named.end())
        named.push_back(host_of(hosts, r));
    auto f = make("MESH_BLOCKED", "error", "mesh", {ranks.begin(), ranks.end()}, named, message,
                  suspects.empty()
                      ? "Rank-to-rank ports are filtered between these hosts while the master "
                        "port is open: allow all TCP ports between the nodes (EKS: a "
                        "self-referencing security-group rule, not only the master port)."
                      : "Check the firewall/security group and NetworkPolicy of " +
                            host_of(hosts, suspects.front()) +
                            ": it filters rank-to-rank ports while the master port is open.");
    f.evidence = {{"pairs", pairs}, {"pairs_tested", m.pairs_tested}};
    if (!suspects.empty()) f.evidence["suspect_rank"] = suspects.front();
    out.push_back(std::move(f));
  }
  if (!m.silent_ranks.empty()) {
    std::vector<std::string> named;
    for (int r : m.silent_ranks) named.push_back(host_of(hosts, r));
    out.push_back(make("PEER_LOST", "error", "mesh", m.silent_ranks, named,
                       "rank" + std::string(m.silent_ranks.size() > 1 ? "s " : " ") +
                           join_ints(m.silent_ranks) + " joined but stopped answering during the "
                           "mesh probe",
                       "The process died or hung after joining: check that pod's status, exit "
                       "code and log (OOM kill, node drain, crash)."));
  }
  if (!m.summary_received && w.rank != 0) {
    out.push_back(make("RENDEZVOUS_LOST", "error", "rendezvous", {0}, {w.master_addr},
                       who(w) + " never received rank 0's mesh summary",
                       "Rank 0 died or hung during the mesh probe: check rank 0's pod and log."));
  }
  return out;
}

MeshJudgement judge_mesh(const rendezvous::MeshResult& m, const World& w,
                         const std::map<int, std::string>& hosts) {
  MeshJudgement j;
  j.findings = mesh_findings(m, w, hosts);
  bool failed = std::any_of(j.findings.begin(), j.findings.end(),
                            [](const Finding& f) { return f.severity == "error"; });
  bool incomplete = m.pairs_untested > 0 || !m.unfinished_ranks.empty();
  std::string budget = seconds_text(m.budget_s);
  if (incomplete) {
    std::string still;
    if (!m.unfinished_ranks.empty()) {
      std::vector<int> shown(m.unfinished_ranks.begin(),
                             m.unfinished_ranks.begin() +
                                 static_cast<long>(std::min<std::size_t>(m.unfinished_ranks.size(), 16)));
      still = "; rank" + std::string(m.unfinished_ranks.size() > 1 ? "s " : " ") + join_ints(shown) +
              (m.unfinished_ranks.size() > shown.size()
                   ? " (and " + std::to_string(m.unfinished_ranks.size() - shown.size()) + " more)"
                   : std::string()) +
              (m.unfinished_ranks.size() > 1 ? " were" : " was") + " still probing";
    }
    auto f = make("MESH_INCOMPLETE", "warning", "mesh", m.unfinished_ranks, {},
                  std::to_string(m.pairs_untested) + " of " + std::to_string(m.pairs_planned()) +
                      " rank-to-rank connections were not tested: the mesh deadline (" + budget +
                      ") ended the probe before they were tried or answered" + still +
                      "; they are neither passed nor blocked",
                  "Raise --mesh-timeout (it was " + budget + " for " +
                      std::to_string(w.world_size) + " ranks, with --pair-timeout per pair), or "
                      "look for an overloaded host (CPU, many ranks per node) that makes the probe "
                      "slow. A blocked path would show as MESH_BLOCKED, not as this.");
    f.evidence = {{"pairs_tested", m.pairs_tested},
                  {"pairs_untested", m.pairs_untested},
                  {"unfinished_ranks", m.unfinished_ranks},
                  {"mesh_timeout_s", m.budget_s}};
    j.findings.push_back(std::move(f));
  }
  j.status = failed ? "fail" : incomplete ? "inconclusive" : "pass";
  j.detail = std::to_string(m.pairs_tested) + " pairs tested, " +
             std::to_string(m.failures.size()) + " failed";
  if (incomplete) {
    j.detail += ", " + std::to_string(m.pairs_untested) + " not tested (the " + budget +
                " deadline ended the probe first";
    if (!m.unfinished_ranks.empty())
      j.detail += "; " + std::to_string(m.unfinished_ranks.size()) + " ranks still probing";
    j.detail += ")";
  }
  if (!m.silent_ranks.empty())
    j.detail += ", " + std::to_string(m.silent_ranks.size()) + " ranks lost";
  return j;
}

}  // namespace ncclsmoke::harness
