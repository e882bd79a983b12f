#include "results/judging/link_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "results/judging/transport_rules.h"
#include "results/verdict/finding_text.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/phase_id.h"

namespace ncclsmoke::results {

namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A link is bad on a metric when it is this many times its reference's value AND this far above
// it: the ratio finds the outlier, the floor keeps noise on a fast, quiet network (a reference of
// 0.1 ms and a link at 0.4 ms) from being called bad. Chosen from the namespace runs in
// tests/multihost/test_bad_node_netns.py: 3-5% loss on one host gives its links retransmit rates
// of 1.5-5% (healthy links 0-0.9%, up to 1.4% on a healthy pair while all pairs of a round share
// the bridge: so retransmits alone never name a link, they only count for a host) and 1 MiB
// pair times up to 70x the reference; a 200 Mbit/s NIC gives 20-40x, and 3 s blocked sending.
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
    {"retrans_rate", &LinkEvidence::retrans_rate, 3.0, 0.01, ""},
};
constexpr std::size_t kMetricCount = std::size(kMetrics);
constexpr std::size_t kRetransMetric = 2;
// A retransmit rate is only read from links that sent at least this many segments.
constexpr std::int64_t kMinSegments = 200;
// Retransmitted over sent segments, NaN when too few were sent to tell.
double retrans_rate(std::int64_t retrans, std::int64_t segs) {
  return segs >= kMinSegments && retrans >= 0 ? static_cast<double>(retrans) / segs : kNaN;
}
// A link with nothing to compare with (two hosts: every link touches both) is lossy on its own
// when it retransmits at least this share of what it sent. Healthy namespace links retransmit up
// to 0.9%, a data-centre link far less; 3% loss on one host gives about 3%.
constexpr double kLossyOnItsOwn = 0.02;
// The second pass decides for a host when it met it with at least this many healthy partners.
constexpr std::size_t kSecondPassMinPartners = 2;
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

// One metric's values over one source's links, sorted once, so that the lower third of all of them
// but a few (a host's own links, or the links of a link's two ends) costs the few, not the list.
class SortedMetric {
 public:
  explicit SortedMetric(const std::vector<double>& by_link) : position_(by_link.size(), -1) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < by_link.size(); ++i)
      if (std::isfinite(by_link[i])) order.push_back(i);
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return by_link[a] < by_link[b]; });
    for (std::size_t k = 0; k < order.size(); ++k) {
      sorted_.push_back(by_link[order[k]]);
      position_[order[k]] = static_cast<long>(k);
    }
  }
  // The value a third of the way up the links not in `without` (indices into the source's links);
  // NaN when none is left. A third, not the median: with two bad hosts on a six-host ring, half
  // of the links a host is compared with touch the other bad host.
  double lower_third_without(const std::vector<std::size_t>& without) const {
    std::vector<long> removed;
    for (std::size_t i : without)
      if (position_[i] >= 0) removed.push_back(position_[i]);
    std::sort(removed.begin(), removed.end());
    removed.erase(std::unique(removed.begin(), removed.end()), removed.end());
    const std::size_t left = sorted_.size() - removed.size();
    if (left == 0) return kNaN;
    // The k-th smallest value left: step over every removed position at or before it.
    auto kth = [&](std::size_t k) {
      long p = static_cast<long>(k);
      for (long q : removed)
        if (q <= p) ++p;
      return sorted_[p];
    };
    return kth((left - 1) / 3);
  }

 private:
  std::vector<double> sorted_;
  std::vector<long> position_;  // link -> its place in sorted_, -1 without a value
};

// One source's links ("ring" or "pairwise") of one transport, with each metric sorted and each
// host's links listed: what every reference is taken from.
struct SourceLinks {
  std::vector<const LinkEvidence*> links;
  std::vector<SortedMetric> metrics;
  std::map<std::string, std::vector<std::size_t>> of_host;

  explicit SourceLinks(std::vector<const LinkEvidence*> ls) : links(std::move(ls)) {
    for (const auto& m : kMetrics) {
      std::vector<double> xs;
      for (const auto* l : links) xs.push_back(l->*m.field);
      metrics.emplace_back(xs);
    }
    for (std::size_t i = 0; i < links.size(); ++i) {
      of_host[links[i]->from_host].push_back(i);
      of_host[links[i]->to_host].push_back(i);
    }
  }
  // Each metric's lower third over the links that touch none of `hosts`: the healthy links a suspect
  // is compared with, its own links left out so that it cannot drag its reference along (on four
  // hosts a bad host is in half of all pairs, and in half of the ring's links).
  std::array<double, kMetricCount> reference_without(
      std::initializer_list<const std::string*> hosts) const {
    std::vector<std::size_t> without;
    for (const auto* h : hosts)
      if (auto it = of_host.find(*h); it != of_host.end())
        without.insert(without.end(), it->second.begin(), it->second.end());
    std::array<double, kMetricCount> out;
    for (std::size_t m = 0; m < kMetricCount; ++m) out[m] = metrics[m].lower_third_without(without);
    return out;
  }
};

// How one link compares with a reference.
struct BadLink {
  const LinkEvidence* link = nullptr;
  std::vector<std::string> why;   // "retransmits 6.1% vs 0.0% on the other links"
  std::set<std::string> metrics;  // "retransmits"
  bool slow = false;  // bad on time (pair time, time blocked) or failed, not on retransmits alone
  bool on_its_own = false;  // lossy with nothing to compare with (kLossyOnItsOwn)
  json figures = json::object();
};

BadLink compare(const LinkEvidence& l, const std::array<double, kMetricCount>& reference) {
  BadLink b;
  b.link = &l;
  if (!l.error.empty()) {
    b.why.push_back("failed: " + l.error);
    b.metrics.insert("failed");
    b.slow = true;
  }
  bool any_reference = false;
  for (std::size_t m = 0; m < kMetricCount; ++m) {
    const Metric& metric = kMetrics[m];
    const double ref = reference[m], x = l.*metric.field;
    if (!std::isfinite(x)) continue;
    if (!std::isfinite(ref)) continue;
    any_reference = true;
    if (x > metric.ratio * ref && x - ref > metric.floor) {
      b.why.push_back(fmt::format("{} {} vs {} on the links it is compared with",
                                  metric_words(metric.name), figure(x, metric.unit),
                                  figure(ref, metric.unit)));
      b.metrics.insert(metric_words(metric.name));
      if (m != kRetransMetric) b.slow = true;
      b.figures[metric.name] = x;
      b.figures[std::string("reference_") + metric.name] = ref;
    }
  }
  if (!any_reference && std::isfinite(l.retrans_rate) && l.retrans_rate >= kLossyOnItsOwn) {
    b.why.push_back(fmt::format("retransmits {} of what it sent (a healthy link: well under {})",
                                figure(l.retrans_rate, ""), figure(kLossyOnItsOwn, "")));
    b.metrics.insert("retransmits");
    b.on_its_own = true;
    b.figures["retrans_rate"] = l.retrans_rate;
  }
  return b;
}
bool is_bad(const BadLink& b) { return !b.why.empty(); }

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

constexpr const char* kRuleText =
    "a link is bad when a figure is above ratio x its reference and above it by the floor (time "
    "3x/5 ms, blocked 3x/0.2 s, retransmits 3x/1%); the reference is the lower third of the links "
    "that do not touch the host judged, or neither end of the link judged; a host is slow "
    "with >= 2 bad links and >= 2/3 of its links, or when the pairwise second pass found it bad "
    "with every one of >= 2 partners the first rounds found healthy (and not, when fine with "
    "every one); a link the second pass measured again is named only when bad again the same way "
    "(slower or failed; or lossy, after it was lossy or failed), and one bad on retransmits alone only when lossy in both passes; a link with nothing to compare "
    "with is lossy on its own at >= 2% retransmits";

// One transport's inter-host links -> findings. `named_source`: "pairwise" when pairwise rounds
// ran (then the ring's links still count for the hosts, but only pairwise links are named as
// SLOW_LINK: every host met several partners, so a host is told from a link), else "ring".
void judge_transport(const std::string& transport, const std::string& named_source,
                     const std::vector<const LinkEvidence*>& links, std::vector<Finding>& out,
                     std::vector<HostPair>* lossy_candidates) {
  std::map<std::string, std::vector<const LinkEvidence*>> by_source;
  for (const auto* l : links) by_source[l->source].push_back(l);
  std::vector<SourceLinks> sources;
  for (auto& [name, ls] : by_source) sources.emplace_back(std::move(ls));

  // Hosts: each compared with the links that do not touch it, per source.
  std::set<std::string> hosts;
  for (const auto* l : links) {
    hosts.insert(l->from_host);
    hosts.insert(l->to_host);
  }
  std::set<std::string> slow_hosts;
  std::map<std::string, std::vector<BadLink>> bad_of_host;
  std::map<std::string, int> links_of_host;
  std::map<std::string, std::set<int>> ranks_of;
  std::map<std::string, json> reference_of_host;
  std::map<std::string, json> second_pass_of;  // host -> its second pass's partners, bad ones
  for (const auto& host : hosts) {
    int total = 0;
    std::vector<BadLink> bad;
    json reference = json::object();
    std::set<std::string> confirm_partners, confirm_bad;  // second-pass partners, and the bad ones
    for (const auto& src : sources) {
      auto mine = src.of_host.find(host);
      if (mine == src.of_host.end()) continue;
      const auto ref = src.reference_without({&host});
      for (std::size_t m = 0; m < kMetricCount; ++m)
        if (std::isfinite(ref[m])) reference[src.links.front()->source][kMetrics[m].name] = ref[m];
      for (std::size_t i : mine->second) {
        const LinkEvidence& l = *src.links[i];
        // A second-pass link measured to ask about the other end is that host's evidence, not
        // this partner's: a healthy partner of a bad host is never counted slow for meeting it.
        if (!l.suspect_host.empty() && l.suspect_host != host) continue;
        ++total;
        ranks_of[host].insert(l.from_host == host ? l.from_rank : l.to_rank);
        BadLink b = compare(l, ref);
        const std::string& other = l.from_host == host ? l.to_host : l.from_host;
        const bool confirms = l.suspect_host == host;  // the second pass asked about this host
        if (confirms) confirm_partners.insert(other);
        if (is_bad(b) && !b.on_its_own) {
          if (confirms) confirm_bad.insert(other);
          bad.push_back(std::move(b));
        }
      }
    }
    links_of_host[host] = total;
    reference_of_host[host] = std::move(reference);
    const int n = static_cast<int>(bad.size());
    bool slow = n >= kSlowHostMinBad && n >= kSlowHostShare * total;
    // The second pass, where it answered clearly, decides (see the header).
    if (confirm_partners.size() >= kSecondPassMinPartners) {
      if (confirm_bad.size() == confirm_partners.size()) slow = true;
      if (confirm_bad.empty()) slow = false;
    }
    if (!confirm_partners.empty())
      second_pass_of[host] = {{"partners", confirm_partners}, {"slow_with", confirm_bad}};
    if (slow) slow_hosts.insert(host);
    bad_of_host[host] = std::move(bad);
  }
  // On the ring a host between two bad hosts has both its links bad: each is the other end's.
  // A slow host whose every bad link ends at another slow host is explained by them and is not
  // named (a miss is better than a healthy node drained); the weakest such host goes first, and
  // the rest are asked again without it.
  for (;;) {
    const std::string* redundant = nullptr;
    for (const auto& host : slow_hosts) {
      const auto& bad = bad_of_host[host];
      const bool explained = std::all_of(bad.begin(), bad.end(), [&](const BadLink& b) {
        const std::string& other = b.link->from_host == host ? b.link->to_host : b.link->from_host;
        return slow_hosts.count(other) > 0;
      });
      if (explained && (!redundant || bad.size() < bad_of_host[*redundant].size()))
        redundant = &host;
    }
    if (!redundant) break;
    slow_hosts.erase(*redundant);
  }

  const std::string phase = named_source == "pairwise" ? pairwise_phase_name(transport)
                                                       : transport_phase_name(transport);
  const std::string how =
      named_source == "pairwise" ? "in pairwise rounds and on the ring" : "on the ring";
  for (const auto& host : slow_hosts) {
    const auto& bad = bad_of_host[host];
    json jl = json::array();
    std::set<std::string> reasons;
    for (const auto& b : bad) {
      jl.push_back(link_json(b));
      reasons.insert(b.metrics.begin(), b.metrics.end());
    }
    std::string what;
    for (const auto& r : reasons) what += (what.empty() ? "" : ", ") + r;
    // The first bad link's figures make the message concrete; the rest are in the evidence.
    const BadLink& first = bad.front();
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
                    "links between other hosts ({}; e.g. {} -> {}: {})",
                    transport, host, how, bad.size(), links_of_host[host], what,
                    first.link->from_host, first.link->to_host, first.why.front()),
        ranks, {host}, {{"hosts", host}});
    f.evidence = {{"transport", transport},
                  {"source", named_source},
                  {"host", host},
                  {"bad_links", bad.size()},
                  {"links", links_of_host[host]},
                  {"reference", reference_of_host[host]},
                  {"bad", jl},
                  {"rule", kRuleText}};
    if (auto sp = second_pass_of.find(host); sp != second_pass_of.end()) {
      f.evidence["second_pass"] = sp->second;
      f.message += fmt::format("; the second pass met it again with {} host{} the first rounds "
                               "found healthy: slow with {} of them",
                               sp->second["partners"].size(),
                               sp->second["partners"].size() == 1 ? "" : "s",
                               sp->second["slow_with"].size());
    }
    out.push_back(std::move(f));
  }

  // Links not explained by a slow host at either end: each compared with the links that touch
  // neither of its ends, one finding per host pair. A link is named only when it is slower (time)
  // or failed, not on retransmits alone: a few dozen retransmits in a 1 MiB exchange on a busy
  // bridge are noise for one link, while across all of a host's links they are the host's loss
  // (counted above). With nothing to compare with (two hosts), a link that loses packets on its
  // own account is named: a host cannot be told from the link between them.
  // A link the second pass measured again is named only when it was bad again. A pairwise link
  // bad on retransmits alone is named only when it lost packets in the first rounds and again in
  // the second pass (lossy_first, lossy_again); the first time, it is a candidate for it.
  // A link measured again is confirmed by the same kind of trouble: slower or failed again, or
  // losing packets again after it lost packets (or failed, as handshakes do under loss) the first
  // time. A link only slower the first time that merely retransmits a little when measured again
  // is a busy moment twice, not a bad link.
  std::map<HostPair, std::vector<BadLink>> pairs, lossy;
  std::set<HostPair> rechecked, slow_again, lossy_first, lossy_again, lossy_or_failed_first;
  for (const auto& src : sources)
    for (const auto* l : src.links) {
      if (l->recheck) continue;
      BadLink b = compare(*l, src.reference_without({&l->from_host, &l->to_host}));
      if (b.metrics.count("retransmits") || b.metrics.count("failed")) {
        auto ends = std::minmax(l->from_host, l->to_host);
        lossy_or_failed_first.insert({ends.first, ends.second});
      }
    }
  for (const auto& src : sources) {
    for (const auto* l : src.links) {
      if (slow_hosts.count(l->from_host) || slow_hosts.count(l->to_host)) continue;
      auto ends = std::minmax(l->from_host, l->to_host);
      const HostPair key{ends.first, ends.second};
      if (l->recheck) rechecked.insert(key);
      BadLink b = compare(*l, src.reference_without({&l->from_host, &l->to_host}));
      if (!is_bad(b)) continue;
      if (l->recheck && !b.slow && !lossy_or_failed_first.count(key)) continue;
      if (!(b.slow || b.on_its_own)) {
        if (l->source == "pairwise") {
          // Confirmed on retransmits alone only at a rate no healthy link reaches: links sharing a
          // busy bridge retransmit up to 1.5% (kLossyOnItsOwn is 2%); a lossy link far more.
          if (l->recheck && !(std::isfinite(l->retrans_rate) && l->retrans_rate >= kLossyOnItsOwn))
            continue;
          (l->recheck ? lossy_again : lossy_first).insert(key);
          lossy[key].push_back(std::move(b));
        }
        continue;
      }
      if (named_source == "pairwise" && l->source != "pairwise" && !b.on_its_own) continue;
      if (l->recheck) slow_again.insert(key);
      pairs[key].push_back(std::move(b));
    }
  }
  for (const auto& key : lossy_first) {
    if (pairs.count(key)) continue;  // slower too: named as such
    if (lossy_again.count(key)) {
      pairs[key] = std::move(lossy[key]);
    } else if (lossy_candidates && !rechecked.count(key)) {
      lossy_candidates->push_back(key);
    }
  }
  for (const auto& [ends, bs] : pairs) {
    if (rechecked.count(ends) && !slow_again.count(ends) && !lossy_again.count(ends)) continue;
    json jl = json::array();
    std::set<int> ranks;
    bool alone = true;
    for (const auto& b : bs) {
      jl.push_back(link_json(b));
      ranks.insert(b.link->from_rank);
      ranks.insert(b.link->to_rank);
      alone = alone && b.on_its_own;
    }
    const BadLink& b = bs.front();
    const std::string link_how = b.link->source == "pairwise" ? "in pairwise rounds" : "on the ring";
    Subject s;
    s.transport = transport;
    s.phase = phase;
    s.item = "slow link " + ends.first + " <-> " + ends.second;
    s.peer = b.link->to_rank;
    s.peer_host = b.link->to_host;
    std::string message;
    if (alone)
      message = fmt::format(
          "{}: the link between {} and {} loses packets {} ({} -> {}: {}); with no link between "
          "other hosts to compare with, either host or the path between them can be at fault: "
          "both are candidates, neither is set aside on this alone",
          transport, ends.first, ends.second, link_how, b.link->from_host, b.link->to_host,
          b.why.front());
    else
      message = fmt::format(
          "{}: the link between {} and {} is far worse than the links between other hosts {} "
          "({} -> {}: {}), while both hosts are fine with their other peers{}",
          transport, ends.first, ends.second, how, b.link->from_host, b.link->to_host,
          b.why.front(),
          named_source == "pairwise"
              ? ""
              : " on the ring (each host has only two ring links, so a NIC slow in one direction "
                "looks the same: --pairwise tells a host from a link)");
    if (rechecked.count(ends))
      message += slow_again.count(ends)
                     ? "; measured again in the second pass, it was slow again"
                     : "; measured again in the second pass, it lost packets again";
    Finding f = make_finding_about(Code::SLOW_LINK, s, message,
                                   std::vector<int>(ranks.begin(), ranks.end()),
                                   {ends.first, ends.second},
                                   {{"hosts", ends.first + " and " + ends.second}});
    f.evidence = {{"transport", transport},
                  {"source", named_source},
                  {"hosts", {ends.first, ends.second}},
                  {"compared", alone ? "with nothing: no link touches neither end"
                                     : "with the links that touch neither end"},
                  {"bad", jl},
                  {"rule", kRuleText}};
    if (rechecked.count(ends)) f.evidence["measured_again"] = true;
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
    if (!p.suspect_host.empty()) j["suspect"] = p.suspect_host;
    if (p.recheck) j["recheck"] = true;
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
    if (auto e = j.find("suspect"); e != j.end() && e->is_string())
      p.suspect_host = e->get<std::string>();
    if (auto e = j.find("recheck"); e != j.end() && e->is_boolean()) p.recheck = e->get<bool>();
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
    for (auto& e : pair_links(id.transport, id.rank, host(id.rank), pair_samples_of(id), host_of))
      out.push_back(std::move(e));
  }
  return out;
}

std::vector<LinkEvidence> pair_links(const std::string& transport, int rank,
                                     const std::string& host,
                                     const std::vector<PairSample>& samples,
                                     const std::map<int, std::string>& host_of) {
  std::vector<LinkEvidence> out;
  for (const auto& p : samples) {
    if (p.error_kind == kPairUnavailable) continue;  // the backend's absence, not the link
    LinkEvidence e;
    e.transport = transport;
    e.source = "pairwise";
    e.from_rank = rank;
    e.to_rank = p.peer;
    e.from_host = host;
    auto peer = host_of.find(p.peer);
    e.to_host = peer != host_of.end() ? peer->second : p.peer_host;
    e.round = p.round;
    e.suspect_host = p.suspect_host;
    e.recheck = p.recheck;
    e.time_us = p.time_us;
    e.retrans_rate = retrans_rate(p.retrans, p.segs_out);
    if (std::isfinite(p.rtt_us) && p.rtt_us > 0) e.rtt_us = p.rtt_us;
    e.error = p.error;
    out.push_back(std::move(e));
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

std::vector<Finding> judge_links(const std::vector<LinkEvidence>& all,
                                 std::vector<HostPair>* lossy_candidates) {
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
    judge_transport(transport, paired.count(transport) ? "pairwise" : "ring", links, out,
                    lossy_candidates);
  return out;
}

std::optional<SlowestLine> slowest_line(const std::vector<RankInfo>& ranks) {
  std::optional<SlowestLine> out;
  std::set<std::string> hosts;
  for (const auto& r : ranks) {
    if (r.status != RankStatus::joined) continue;
    if (r.host.empty() || r.link_speed_mbps <= 0) return std::nullopt;
    hosts.insert(r.host);
    if (!out || r.link_speed_mbps < out->mbps) out = SlowestLine{r.link_speed_mbps, r.host, r.interface};
  }
  if (hosts.size() < 2) return std::nullopt;
  return out;
}

std::optional<SlowestLine> slowest_device(const std::string& transport,
                                          const std::vector<TransportIdentity>& identities,
                                          const std::vector<RankInfo>& ranks) {
  std::map<int, std::string> host_of;
  for (const auto& r : ranks) host_of[r.rank] = r.host;
  std::optional<SlowestLine> slowest;
  std::set<std::string> hosts;
  int rows = 0;
  for (const auto& id : identities) {
    if (id.transport != transport || id.rank < 0) continue;
    ++rows;
    const double gbps = number_or(id.observed, "port_rate_gbps", kNaN);
    if (!std::isfinite(gbps) || gbps <= 0) return std::nullopt;  // one unknown rank may be the slow one
    hosts.insert(host_of[id.rank]);
    const int mbps = static_cast<int>(std::lround(gbps * 1000));
    if (!slowest || mbps < slowest->mbps) {
      slowest = SlowestLine{mbps, host_of[id.rank],
                            id.observed.value("port_rate_port", std::string()), true,
                            id.observed.value("port_rate_carried", true)};
    } else if (mbps == slowest->mbps && !id.observed.value("port_rate_carried", true)) {
      slowest->carried = false;  // the same rate, and this rank's device carried nothing
    }
  }
  if (rows == 0 || hosts.size() < 2) return std::nullopt;
  return slowest;
}

std::vector<Finding> judge_line_rate(const std::vector<TransportRow>& rows,
                                     const std::vector<RankInfo>& ranks,
                                     const std::vector<TransportIdentity>& identities) {
  std::vector<Finding> out;
  const auto interface_line = slowest_line(ranks);
  // transport -> (largest size, best busbw there), in the order first seen.
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::int64_t, double>> best;
  for (const auto& r : rows) {
    if (r.rank >= 0 || r.synthetic || r.bytes < kLineRateMinBytes || !std::isfinite(r.busbw_gbps))
      continue;
    auto [it, fresh] = best.try_emplace(r.transport, r.bytes, r.busbw_gbps);
    if (fresh) order.push_back(r.transport);
    else if (r.bytes > it->second.first) it->second = {r.bytes, r.busbw_gbps};
    else if (r.bytes == it->second.first) it->second.second = std::max(it->second.second, r.busbw_gbps);
  }
  for (const auto& transport : order) {
    const auto device_line = slowest_device(transport, identities, ranks);
    const auto& line = device_line ? device_line : interface_line;
    if (!line) continue;
    const auto [bytes, busbw] = best[transport];
    const double share = busbw / line->gbps();
    if (share >= kLineRateFloor) continue;
    Subject s;
    s.transport = transport;
    s.phase = transport_phase_name(transport);
    s.item = "line rate";
    const std::string what =
        line->device
            ? fmt::format("the slowest device port can carry (host {} {}: {} Gb/s = {:.3g} GB/s)",
                          line->host, line->interface, line->mbps / 1000.0, line->gbps())
            : fmt::format("the slowest interface can carry (host {} {}: {} Mb/s = {:.3g} GB/s)",
                          line->host, line->interface.empty() ? "interface" : line->interface,
                          line->mbps, line->gbps());
    Finding f = make_finding_about(
        Code::BELOW_LINE_RATE, s,
        fmt::format("{}: busbw {:.3g} GB/s at {} MiB is {:.1f}% of what {}; under {:.0f}% a path "
                    "is rate-limited, lossy, or not the one expected{}",
                    transport, busbw, static_cast<double>(bytes) / (1 << 20), share * 100, what,
                    kLineRateFloor * 100,
                    line->device && !line->carried
                        ? "; that port's counters did not move: the bytes did not cross the "
                          "device (a fallback to another path)"
                        : ""));
    f.evidence = {{"transport", transport},
                  {"busbw_gbps", busbw},
                  {"bytes", bytes},
                  {"line_rate_gbps", line->gbps()},
                  {"link_speed_mbps", line->mbps},
                  {"slowest_host", line->host},
                  {"interface", line->interface},
                  {"line_source", line->device ? "device port" : "interface"},
                  {"share", share},
                  {"floor", kLineRateFloor}};
    if (line->device) f.evidence["device_carried_bytes"] = line->carried;
    out.push_back(std::move(f));
  }
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
      bool slow_transport = f.code == Code::BELOW_LINE_RATE &&
                            (s.transport.empty() || f.subject.transport == s.transport);
      if (timeout || silent || other || slow_transport) {
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
