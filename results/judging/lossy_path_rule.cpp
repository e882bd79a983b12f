#include "results/judging/lossy_path_rule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"
#include "results/verdict/suspects.h"

namespace ncclsmoke::results {

namespace {

bool is_lossy_stall(const Finding& f) {
  return f.code == Code::PEER_STALLED && f.origin == FindingOrigin::lossy_path && !f.hosts.empty() &&
         !(f.evidence.is_object() && f.evidence.contains("witnesses_suspect"));
}

// The ranks that saw it: the merge's reported_by, and the watch's own witness.
std::set<int> witnesses_of(const Finding& f) {
  std::set<int> out(f.subject.reporters.begin(), f.subject.reporters.end());
  if (!f.evidence.is_object()) return out;
  if (auto by = f.evidence.find("reported_by"); by != f.evidence.end() && by->is_array())
    for (const auto& r : *by)
      if (r.is_number_integer()) out.insert(r.get<int>());
  if (auto s = f.evidence.find("seen_by"); s != f.evidence.end() && s->is_number_integer() &&
                                           s->get<int>() >= 0)
    out.insert(s->get<int>());
  return out;
}

// The hosts of a finding's witnesses, other than `accused`.
std::set<std::string> witness_hosts(const Finding& f, const std::map<int, std::string>& host_of,
                                    const std::string& accused) {
  std::set<std::string> out;
  for (int w : witnesses_of(f))
    if (auto h = host_of.find(w); h != host_of.end() && h->second != accused) out.insert(h->second);
  return out;
}

}  // namespace

void discount_suspect_witnesses(Verdict& v) {
  std::map<int, std::string> host_of;
  for (const auto& r : v.ranks)
    if (!r.host.empty()) host_of[r.rank] = r.host;
  auto accused_host = [](const Finding& f) {
    return f.subject.peer_host.empty() && !f.hosts.empty() ? f.hosts.front() : f.subject.peer_host;
  };
  auto stall = [](const Finding& f) {
    return f.code == Code::PEER_STALLED && f.subject.peer >= 0 &&
           !(f.evidence.is_object() && f.evidence.contains("witnesses_suspect"));
  };
  // Hosts another kind of finding blames (a SLOW_HOST, the mesh's suspect, a lost rank's host...).
  std::set<std::string> slow;
  {
    Verdict others;
    others.ranks = v.ranks;
    for (const auto& f : v.findings)
      if (f.code != Code::PEER_STALLED) others.findings.push_back(f);
    for (const auto& n : hosts_named(others))
      if (n.suspect) slow.insert(n.host);
  }
  // Hosts whose own watch heard a peer go quiet behind retransmits: their connections lost
  // packets in this run, whichever end was at fault.
  std::set<std::string> lossy_witnesses;
  for (const auto& f : v.findings)
    if (f.code == Code::PEER_STALLED && f.origin == FindingOrigin::lossy_path)
      for (int w : witnesses_of(f))
        if (auto h = host_of.find(w); h != host_of.end()) lossy_witnesses.insert(h->second);
  std::map<std::string, std::set<std::string>> accusers;  // host -> the other hosts that heard it quiet
  for (const auto& f : v.findings) {
    if (stall(f)) {
      const std::string accused = accused_host(f);
      for (const auto& w : witness_hosts(f, host_of, accused)) accusers[accused].insert(w);
    }
  }
  auto count = [&](const std::string& h) {
    auto it = accusers.find(h);
    return it == accusers.end() ? std::size_t{0} : it->second.size();
  };
  for (auto& f : v.findings) {
    if (!stall(f)) continue;
    const std::string accused = accused_host(f);
    if (accused.empty()) continue;
    const auto witnesses = witness_hosts(f, host_of, accused);
    // A witness is suspect when another finding blames its host, or as many other hosts heard it
    // quiet as heard the accused: its own path explains the silence as well as the accused's.
    const bool suspect_witnesses =
        !witnesses.empty() && std::all_of(witnesses.begin(), witnesses.end(), [&](const auto& w) {
          return slow.count(w) > 0 || count(w) >= count(accused);
        });
    // Silence behind retransmits is a lossy path, and one witness cannot tell which end of it
    // loses the packets (the rule judge_lossy_paths applies before it names a host).
    const bool one_lossy_witness = f.origin == FindingOrigin::lossy_path &&
                                   witnesses.size() < kLossyHostMinWitnesses;
    // So is a silence with no retransmits of its own heard by one witness whose connections to
    // other peers lost packets: the peer's packets may be what its path dropped (retransmitted
    // at the peer's end, where the witness cannot see them).
    const bool one_witness_losing_packets =
        !witnesses.empty() && witnesses.size() < kLossyHostMinWitnesses &&
        std::all_of(witnesses.begin(), witnesses.end(),
                    [&](const auto& w) { return lossy_witnesses.count(w) > 0; });
    if (!suspect_witnesses && !one_lossy_witness && !one_witness_losing_packets) continue;
    f.severity = Severity::info;
    wrap_message(f,
                 suspect_witnesses
                     ? fmt::format("not confirmed: heard only from {}, whose own path is suspect "
                                   "(named by another finding, or heard quiet by as many hosts): ",
                                   fmt::join(witnesses, ", "))
                 : one_lossy_witness
                     ? fmt::format("not confirmed: a lossy path heard only from {}, and one "
                                   "witness cannot tell which end loses the packets: ",
                                   fmt::join(witnesses, ", "))
                     : fmt::format("not confirmed: heard only from {}, whose connections to other "
                                   "peers lost packets in this run (its path may have dropped "
                                   "this peer's packets too): ",
                                   fmt::join(witnesses, ", ")),
                 "");
    if (!f.evidence.is_object()) f.evidence = nlohmann::json::object();
    f.evidence["witnesses_suspect"] = witnesses;
  }
}

std::vector<Finding> judge_lossy_paths(const Verdict& v) {
  std::map<int, std::string> host_of;
  for (const auto& r : v.ranks)
    if (!r.host.empty()) host_of[r.rank] = r.host;
  std::set<std::string> already;
  for (const auto& f : v.findings)
    if (f.code == Code::SLOW_HOST) already.insert(f.hosts.begin(), f.hosts.end());

  struct Seen {
    std::set<std::string> witness_hosts;
    std::set<int> ranks;
    long long retransmits = 0;
  };
  std::map<std::string, Seen> seen;  // the host the lost packets were going to
  for (const auto& f : v.findings) {
    if (!is_lossy_stall(f)) continue;
    const std::string& host = f.hosts.front();
    Seen& s = seen[host];
    s.ranks.insert(f.ranks.begin(), f.ranks.end());
    if (f.evidence.is_object()) s.retransmits += f.evidence.value("retransmits", 0LL);
    for (int w : witnesses_of(f)) {
      auto h = host_of.find(w);
      if (h != host_of.end() && h->second != host) s.witness_hosts.insert(h->second);
    }
  }
  std::size_t most = 0, at_most = 0;  // the highest count, and how many hosts have it
  for (const auto& [host, s] : seen) {
    if (s.witness_hosts.size() > most) {
      most = s.witness_hosts.size();
      at_most = 0;
    }
    if (s.witness_hosts.size() == most) ++at_most;
  }
  std::vector<Finding> out;
  // One host stands out, or there is nothing to tell apart: loss everywhere is the fabric's.
  if (most < kLossyHostMinWitnesses || at_most != 1) return out;
  for (const auto& [host, s] : seen) {
    if (s.witness_hosts.size() != most || already.count(host)) continue;
    std::vector<int> ranks(s.ranks.begin(), s.ranks.end());
    std::vector<std::string> witnesses(s.witness_hosts.begin(), s.witness_hosts.end());
    Subject about;
    about.peer = ranks.empty() ? -1 : ranks.front();
    about.peer_host = host;
    about.phase = "liveness";
    about.item = "lossy path";
    Finding f = make_finding_about(
        Code::SLOW_HOST, about,
        fmt::format("host {} loses packets: the liveness watches on {} other hosts ({}) got no "
                    "answer from its ranks while their connections retransmitted {} segments; "
                    "no other host is named by as many",
                    host, witnesses.size(), fmt::join(witnesses, ", "), s.retransmits),
        ranks, {host}, {{"hosts", host}});
    f.evidence = {{"source", "liveness watch"},  {"host", host},
                  {"witness_hosts", witnesses},  {"retransmits", s.retransmits},
                  {"rule", fmt::format("a host whose ranks the watches of >= {} other hosts saw "
                                       "silent behind retransmits, more than any other host",
                                       kLossyHostMinWitnesses)}};
    f.origin = FindingOrigin::lossy_path;
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace ncclsmoke::results
