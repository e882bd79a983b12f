#include "results/judging/link_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "results/judging/baseline_learn.h"  // median
#include "results/judging/transport_rules.h"
#include "results/verdict/finding_text.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/phase_id.h"

namespace ncclsmoke::results {

namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A link is bad on a metric when it is this many times the median link's value AND this far above
// it: the ratio finds the outlier, the floor keeps noise on a fast, quiet network (a median of
// 0.1 ms and a link at 0.4 ms) from being called bad. Chosen from the namespace runs in
// tests/multihost/test_bad_node_netns.py: 5% loss on one host gives its links retransmit rates of
// 1-7% per 1 MiB pair (others about 0, but up to 1.4% on a healthy link while all pairs of a
// round share the bridge: so retransmits alone never name a link, they only count for a host)
// and 1 MiB pair times up to 70x the median; a 200 Mbit/s link gives 20-40x.
struct Metric {
  const char* name;
  double LinkEvidence::*field;
  double ratio;
  double floor;  // in the metric's unit
  const char* unit;
};
// The round-trip time is kept as evidence but judges nothing: on a ring stuck in a timeout the
// smoothed RTT of a quiet connection is stale, and it named healthy hosts under 30% loss elsewhere.
constexpr Metric kMetrics[] = {
    {"time_us", &LinkEvidence::time_us, 3.0, 5000.0, "us"},
    {"send_blocked_s", &LinkEvidence::send_blocked_s, 3.0, 0.2, "s"},
    {"retrans_rate", &LinkEvidence::retrans_rate, 5.0, 0.01, ""},
};
// A retransmit rate is only read from links that sent at least this many segments.
constexpr std::int64_t kMinSegments = 200;
// Retransmitted over sent segments, NaN when too few were sent to tell.
double retrans_rate(std::int64_t retrans, std::int64_t segs) {
  return segs >= kMinSegments && retrans >= 0 ? static_cast<double>(retrans) / segs : kNaN;
}
// A host is slow when at least this many of its links are bad, and at least this share of them.
constexpr int kSlowHostMinBad = 2;
constexpr double kSlowHostShare = 2.0 / 3.0;

std::string figure(double x, const char* unit) {
  if (std::string(unit) == "us") return x >= 1000 ? fmt::format("{:.1f} ms", x / 1000) : fmt::format("{:.0f} us", x);
  if (std::string(unit) == "s") return fmt::format("{:.2f} s", x);
  return fmt::format("{:.1f}%", x * 100);  // a rate
}

const char* metric_words(const std::string& name) {
  if (name == "time_us") return "all-reduce time";
  if (name == "send_blocked_s") return "time blocked sending";
  return "retransmits";
}

struct BadLink {
  const LinkEvidence* link = nullptr;
  std::vector<std::string> why;  // "retransmits 6.1% vs median 0.0%"
  std::set<std::string> metrics;  // "retransmits"
  bool slow = false;  // bad on time (pair time, time blocked) or failed, not on retransmits alone
  json figures = json::object();
};

json link_json(const BadLink& b) {
  json j = {{"from_rank", b.link->from_rank}, {"from_host", b.link->from_host},
            {"to_rank", b.link->to_rank},     {"to_host", b.link->to_host},
            {"source", b.link->source}};
  if (b.link->round >= 0) j["round"] = b.link->round;
  if (!b.link->error.empty()) j["error"] = b.link->error;
  if (std::isfinite(b.link->rtt_us)) j["rtt_us"] = b.link->rtt_us;
  for (auto& [k, v] : b.figures.items()) j[k] = v;
  return j;
}

// One (transport, source) group of inter-host links -> findings.
// `source`: "pairwise" when the group holds pairwise links (then the ring's links still count for
// the hosts, but only pairwise links are named as SLOW_LINK), else "ring".
void judge_group(const std::string& transport, const std::string& source,
                 const std::vector<const LinkEvidence*>& links, std::vector<Finding>& out) {
  if (links.size() < 3) return;
  std::map<std::string, double> medians;
  for (const auto& m : kMetrics) {
    std::vector<double> xs;
    for (const auto* l : links) {
      double x = l->*m.field;
      if (std::isfinite(x)) xs.push_back(x);
    }
    if (xs.size() >= 3) medians[m.name] = median(xs);
  }

  std::vector<BadLink> bad;
  for (const auto* l : links) {
    BadLink b;
    b.link = l;
    if (!l->error.empty()) {
      b.why.push_back("failed: " + l->error);
      b.metrics.insert("failed");
      b.slow = true;
    }
    for (const auto& m : kMetrics) {
      auto med = medians.find(m.name);
      double x = l->*m.field;
      if (med == medians.end() || !std::isfinite(x)) continue;
      if (x > m.ratio * med->second && x - med->second > m.floor) {
        b.why.push_back(fmt::format("{} {} vs median {}", metric_words(m.name), figure(x, m.unit),
                                    figure(med->second, m.unit)));
        b.metrics.insert(metric_words(m.name));
        if (std::string(m.name) != "retrans_rate") b.slow = true;
        b.figures[m.name] = x;
        b.figures[std::string("median_") + m.name] = med->second;
      }
    }
    if (!b.why.empty()) bad.push_back(std::move(b));
  }
  if (bad.empty()) return;

  // Per host: its measured links and its bad ones.
  std::map<std::string, int> total, bad_count;
  std::map<std::string, std::set<int>> ranks_of;
  for (const auto* l : links) {
    total[l->from_host]++;
    total[l->to_host]++;
    ranks_of[l->from_host].insert(l->from_rank);
    ranks_of[l->to_host].insert(l->to_rank);
  }
  for (const auto& b : bad) {
    bad_count[b.link->from_host]++;
    bad_count[b.link->to_host]++;
  }
  std::set<std::string> slow_hosts;
  for (const auto& [host, n] : bad_count)
    if (n >= kSlowHostMinBad && n >= kSlowHostShare * total[host]) slow_hosts.insert(host);

  const std::string phase =
      source == "pairwise" ? pairwise_phase_name(transport) : transport_phase_name(transport);
  const std::string how = source == "pairwise" ? "in pairwise rounds and on the ring" : "on the ring";
  for (const auto& host : slow_hosts) {
    json jl = json::array();
    std::set<std::string> reasons;
    // The first bad link's figures make the message concrete; the rest are in the evidence.
    const BadLink* first = nullptr;
    for (const auto& b : bad)
      if (b.link->from_host == host || b.link->to_host == host) {
        if (!first) first = &b;
        jl.push_back(link_json(b));
        reasons.insert(b.metrics.begin(), b.metrics.end());
      }
    std::string what;
    for (const auto& r : reasons) what += (what.empty() ? "" : ", ") + r;
    std::vector<int> ranks(ranks_of[host].begin(), ranks_of[host].end());
    Subject s;
    s.transport = transport;
    s.phase = phase;
    s.item = "slow host";
    s.peer = ranks.empty() ? -1 : ranks.front();
    s.peer_host = host;
    Finding f = make_finding_about(
        Code::SLOW_HOST, s,
        fmt::format("{}: host {} is slow with its peers {}: {} of its {} links far worse than the "
                    "run's median link ({}; e.g. {} -> {}: {})",
                    transport, host, how, bad_count[host], total[host], what, first->link->from_host,
                    first->link->to_host, first->why.front()),
        ranks, {host}, {{"hosts", host}});
    f.evidence = {{"transport", transport},      {"source", source},
                  {"host", host},                {"bad_links", bad_count[host]},
                  {"links", total[host]},        {"medians", medians},
                  {"bad", jl},
                  {"rule", fmt::format("a link is bad when a figure is above ratio x the median and "
                                       "above it by the floor (time 3x/5 ms, blocked 3x/0.2 s, "
                                       "retransmits 5x/1%); a host is slow with >= {} "
                                       "bad links and >= 2/3 of its links",
                                       kSlowHostMinBad)}};
    out.push_back(std::move(f));
  }

  // Bad links not explained by a slow host at either end, one finding per host pair. A link is
  // named only when it is slower (time), not on retransmits alone: a few dozen retransmits in a
  // 1 MiB exchange on a busy bridge are noise for one link, while across all of a host's links
  // they are the host's loss (counted above).
  std::map<std::pair<std::string, std::string>, std::vector<const BadLink*>> pairs;
  for (const auto& b : bad) {
    if (slow_hosts.count(b.link->from_host) || slow_hosts.count(b.link->to_host)) continue;
    if (!b.slow) continue;
    if (source == "pairwise" && b.link->source != "pairwise") continue;  // the ring can't tell
    auto key = std::minmax(b.link->from_host, b.link->to_host);
    pairs[{key.first, key.second}].push_back(&b);
  }
  for (const auto& [ends, bs] : pairs) {
    json jl = json::array();
    std::set<int> ranks;
    for (const auto* b : bs) {
      jl.push_back(link_json(*b));
      ranks.insert(b->link->from_rank);
      ranks.insert(b->link->to_rank);
    }
    const BadLink& b = *bs.front();
    Subject s;
    s.transport = transport;
    s.phase = phase;
    s.item = "slow link " + ends.first + " <-> " + ends.second;
    s.peer = b.link->to_rank;
    s.peer_host = b.link->to_host;
    Finding f = make_finding_about(
        Code::SLOW_LINK, s,
        fmt::format("{}: the link between {} and {} is far worse than the run's median link {} "
                    "({} -> {}: {}), while both hosts are fine with their other peers{}",
                    transport, ends.first, ends.second, how, b.link->from_host, b.link->to_host,
                    b.why.front(),
                    source == "pairwise"
                        ? ""
                        : " on the ring (each host has only two ring links, so a NIC slow in "
                          "one direction looks the same: --pairwise tells a host from a link)"),
        std::vector<int>(ranks.begin(), ranks.end()), {ends.first, ends.second},
        {{"hosts", ends.first + " and " + ends.second}});
    f.evidence = {{"transport", transport}, {"source", source}, {"hosts", {ends.first, ends.second}},
                  {"medians", medians},      {"bad", jl}};
    out.push_back(std::move(f));
  }
}

}  // namespace

void write_pair_samples(json& observed, const std::vector<PairSample>& samples) {
  if (!observed.is_object()) observed = json::object();
  json& arr = observed[kPairwiseKey];
  if (!arr.is_array()) arr = json::array();
  for (const auto& p : samples) {
    json j = {{"round", p.round}, {"peer", p.peer}, {"bytes", p.bytes}, {"iters", p.iters}};
    if (!p.peer_host.empty()) j["peer_host"] = p.peer_host;
    if (std::isfinite(p.time_us)) j["time_us"] = p.time_us;
    if (std::isfinite(p.busbw_gbps)) j["busbw_gbps"] = p.busbw_gbps;
    if (p.segs_out >= 0) {
      j["retrans"] = p.retrans;
      j["segs_out"] = p.segs_out;
    }
    if (std::isfinite(p.rtt_us)) j["rtt_us"] = p.rtt_us;
    if (!p.error.empty()) j["error"] = p.error;
    if (!p.error_kind.empty()) j["error_kind"] = p.error_kind;
    arr.push_back(std::move(j));
  }
}

std::vector<PairSample> pair_samples_of(const TransportIdentity& id) {
  std::vector<PairSample> out;
  if (!id.observed.is_object()) return out;
  auto arr = id.observed.find(kPairwiseKey);
  if (arr == id.observed.end() || !arr->is_array()) return out;
  auto num = [](const json& o, const char* k, auto fallback) { return number_or(o, k, fallback); };
  for (const auto& j : *arr) {
    if (!j.is_object()) continue;
    PairSample p;
    p.round = num(j, "round", -1);
    p.peer = num(j, "peer", -1);
    if (p.peer < 0) continue;
    p.peer_host = j.value("peer_host", std::string());
    p.bytes = num(j, "bytes", std::int64_t{0});
    p.iters = num(j, "iters", 0);
    p.time_us = num(j, "time_us", kNaN);
    p.busbw_gbps = num(j, "busbw_gbps", kNaN);
    p.retrans = num(j, "retrans", std::int64_t{-1});
    p.segs_out = num(j, "segs_out", std::int64_t{-1});
    p.rtt_us = num(j, "rtt_us", kNaN);
    if (auto e = j.find("error"); e != j.end() && e->is_string()) p.error = e->get<std::string>();
    if (auto e = j.find("error_kind"); e != j.end() && e->is_string())
      p.error_kind = e->get<std::string>();
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<LinkEvidence> link_evidence(const Verdict& v) {
  std::map<int, std::string> host_of;
  for (const auto& r : v.ranks)
    if (ranks_in(r) == 1 && !r.host.empty()) host_of[r.rank] = r.host;
  auto host = [&](int rank, const std::string& fallback = {}) {
    auto it = host_of.find(rank);
    return it != host_of.end() ? it->second : fallback;
  };
  std::vector<LinkEvidence> out;
  for (const auto& id : v.identities) {
    if (id.rank < 0) continue;
    if (auto ls = link_stats_of(id))
      if (auto e = ring_link(id.transport, id.rank, host(id.rank), *ls, host(ls->next_rank)))
        out.push_back(std::move(*e));
    for (const auto& p : pair_samples_of(id)) {
      if (p.error_kind == kPairUnavailable) continue;  // the backend's absence, not the link
      LinkEvidence e;
      e.transport = id.transport;
      e.source = "pairwise";
      e.from_rank = id.rank;
      e.to_rank = p.peer;
      e.from_host = host(id.rank);
      e.to_host = host(p.peer, p.peer_host);
      e.round = p.round;
      e.time_us = p.time_us;
      e.retrans_rate = retrans_rate(p.retrans, p.segs_out);
      if (std::isfinite(p.rtt_us) && p.rtt_us > 0) e.rtt_us = p.rtt_us;
      e.error = p.error;
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::optional<LinkEvidence> ring_link(const std::string& transport, int rank,
                                      const std::string& host, const LinkFacts& stats,
                                      const std::string& next_host) {
  if (stats.next_rank < 0 || stats.next_rank == rank) return std::nullopt;
  LinkEvidence e;
  e.transport = transport;
  e.source = "ring";
  e.from_rank = rank;
  e.to_rank = stats.next_rank;
  e.from_host = host;
  e.to_host = next_host;
  e.send_blocked_s = stats.send_blocked_s;
  e.retrans_rate = retrans_rate(stats.tx_retrans, stats.tx_segs_out);
  if (std::isfinite(stats.tx_rtt_us) && stats.tx_rtt_us > 0) e.rtt_us = stats.tx_rtt_us;
  return e;
}

std::vector<Finding> judge_links(const std::vector<LinkEvidence>& all) {
  // transport -> its inter-host links, from both sources: a host's ring links and its pairwise
  // links all count towards SLOW_HOST (more evidence, less noise); where pairwise rounds ran, only
  // their links can be a SLOW_LINK (every host met several partners, so a host is told from a
  // link; on the ring it has only two).
  std::map<std::string, std::vector<const LinkEvidence*>> groups;
  std::set<std::string> paired;
  for (const auto& l : all) {
    if (l.from_host.empty() || l.to_host.empty() || l.from_host == l.to_host) continue;
    groups[l.transport].push_back(&l);
    if (l.source == "pairwise") paired.insert(l.transport);
  }
  std::vector<Finding> out;
  for (const auto& [transport, links] : groups)
    judge_group(transport, paired.count(transport) ? "pairwise" : "ring", links, out);
  return out;
}

void explain_by_slow_hosts(std::vector<Finding>& findings) {
  struct Slow {
    std::string host, transport;
    std::set<int> ranks;
    std::size_t index;
  };
  std::vector<Slow> slow;
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const Finding& f = findings[i];
    if (f.code != Code::SLOW_HOST || f.hosts.empty()) continue;
    slow.push_back({f.hosts.front(), f.subject.transport, {f.ranks.begin(), f.ranks.end()}, i});
  }
  if (slow.empty()) return;
  std::set<std::size_t> explains_error;
  for (auto& f : findings) {
    if (f.severity == Severity::info) continue;
    const Slow* cause = nullptr;
    for (const auto& s : slow) {
      bool about_it = std::any_of(f.ranks.begin(), f.ranks.end(),
                                  [&](int r) { return s.ranks.count(r) > 0; }) ||
                      std::find(f.hosts.begin(), f.hosts.end(), s.host) != f.hosts.end();
      // A SLOW_HOST of no transport (lossy_path_rule.h: loss the watch saw) explains every
      // transport's timeouts, its own set-up failures, and links that have it at one end.
      bool timeout = f.code == Code::TRANSPORT_TIMEOUT &&
                     (s.transport.empty() || f.subject.transport == s.transport);
      bool silent = (f.code == Code::PEER_LOST || f.code == Code::PEER_STALLED) && about_it;
      bool other = s.transport.empty() && about_it &&
                   (f.code == Code::TRANSPORT_INIT_FAILED || f.code == Code::SLOW_LINK);
      if (timeout || silent || other) {
        cause = &s;
        break;
      }
    }
    if (!cause) continue;
    if (f.severity == Severity::error) explains_error.insert(cause->index);
    f.severity = Severity::info;
    wrap_message(f, fmt::format("a consequence of host {}'s slow links (SLOW_HOST): ", cause->host),
                 "");
    if (!f.evidence.is_object()) f.evidence = json::object();
    f.evidence["consequence_of_host"] = cause->host;
  }
  for (std::size_t i : explains_error) findings[i].severity = Severity::error;
}

}  // namespace ncclsmoke::results
