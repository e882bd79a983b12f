#include "results/judging/mtu_rule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {
// Named, not anonymous: in a unity build this file shares a unit with the other rules.
namespace mtu_rule_impl {

using MtuPath = MtuPathFact;

constexpr std::size_t kMaxEvidencePaths = 64;
constexpr std::size_t kMaxNamedPartners = 8;

std::string host_name(const std::map<int, std::string>& hosts, int rank) {
  auto it = hosts.find(rank);
  return it == hosts.end() || it->second.empty() ? fmt::format("rank {}", rank) : it->second;
}

// "1500", or "1500/9001" when the paths claimed different MTUs.
std::string values_text(const std::set<int>& v) { return fmt::format("{}", fmt::join(v, "/")); }

// "1280", or "1272-1280".
std::string range_text(const std::set<int>& v) {
  if (v.empty()) return "?";
  if (v.size() == 1) return std::to_string(*v.begin());
  return fmt::format("{}-{}", *v.begin(), *v.rbegin());
}

std::string partners_text(const std::set<std::string>& partners) {
  std::vector<std::string> shown;
  for (const auto& p : partners) {
    if (shown.size() == kMaxNamedPartners) break;
    shown.push_back(p);
  }
  std::string text = fmt::format("{}", fmt::join(shown, ", "));
  if (partners.size() > shown.size())
    text += fmt::format(" and {} more", partners.size() - shown.size());
  return text;
}

struct Group {
  std::vector<std::string> named;  // one host, or the two ends of a link, or many (fabric-wide)
  std::vector<const MtuPath*> paths;
};

Finding group_finding(const Group& g, const MeshFacts& m,
                      const std::map<int, std::string>& hosts) {
  std::set<int> claimed, crossed, ranks;
  std::set<std::string> partners;
  std::set<std::string> named(g.named.begin(), g.named.end());
  nlohmann::json paths = nlohmann::json::array();
  for (const MtuPath* p : g.paths) {
    if (p->probed_mtu > 0) claimed.insert(p->probed_mtu);
    if (p->path_mtu > 0) crossed.insert(p->path_mtu);
    std::string from = host_name(hosts, p->from), to = host_name(hosts, p->to);
    for (auto [rank, host, other] : {std::tuple{p->from, from, to}, std::tuple{p->to, to, from}}) {
      if (named.count(host)) {
        ranks.insert(rank);
        if (!named.count(other)) partners.insert(other);
      }
    }
    if (paths.size() < kMaxEvidencePaths)
      paths.push_back({{"from", p->from},
                       {"to", p->to},
                       {"from_host", from},
                       {"to_host", to},
                       {"to_address", p->to_address},
                       {"interface", p->interface},
                       {"local_mtu", p->local_mtu},
                       {"peer_mtu", p->peer_mtu},
                       {"probed_mtu", p->probed_mtu},
                       {"path_mtu", p->path_mtu}});
  }
  const std::string local = values_text(claimed), path = range_text(crossed);
  const std::string who = fmt::format("{}", fmt::join(g.named, ", "));
  // "at host2" + "on 6 paths to and from host2 (with host0, host1, host3)".
  std::string at, on;
  bool fabric_wide = false;
  Subject about;
  about.phase = "mesh";
  const std::size_t n = g.paths.size();
  const char* s = n == 1 ? "" : "s";
  if (g.named.size() == 1) {
    at = "at " + who;
    on = fmt::format("on {} path{} to and from {} (with {})", n, s, who, partners_text(partners));
    about.item = "mtu " + who;
  } else if (g.named.size() == 2 && partners.empty()) {
    at = fmt::format("between {} and {}", g.named[0], g.named[1]);
    on = fmt::format("on {} path{} between them", n, s);
    about.item = fmt::format("mtu {} <-> {}", g.named[0], g.named[1]);
  } else {
    at = fmt::format("on most paths ({} hosts)", g.named.size());
    on = fmt::format("on {} path{} between {}", n, s, partners_text(named));
    about.item = "mtu fabric";
    fabric_wide = true;
  }
  std::string message = fmt::format(
      "path-MTU black hole {}: don't-fragment packets of {} bytes (the interfaces' MTU) vanish {} "
      "without an ICMP answer while small ones cross; the largest that crosses is {} bytes",
      at, local, on, path);
  Finding f =
      make_finding_about(Code::MTU_MISMATCH, about, message, {ranks.begin(), ranks.end()}, g.named,
                         {{"local_mtu", local}, {"path_mtu", path}, {"hosts", who}});
  f.evidence = {{"paths", paths},
                {"paths_total", g.paths.size()},
                {"local_mtu", claimed.empty() ? 0 : *claimed.rbegin()},
                {"path_mtu", crossed.empty() ? 0 : *crossed.begin()},
                {"mtu_paths_checked", m.mtu_paths_checked}};
  // What the named hosts are: the one culprit ("host"), the two ends of one link ("link": setting
  // either aside is not the fix), or the whole fabric ("fabric": no host is the culprit).
  f.evidence["scope"] = fabric_wide ? "fabric" : g.named.size() == 1 ? "host" : "link";
  if (g.named.size() == 1) f.evidence["suspect_host"] = g.named.front();
  return f;
}

}  // namespace mtu_rule_impl

std::vector<Finding> mtu_findings(const MeshFacts& m,
                                  const std::map<int, std::string>& hosts) {
  using namespace mtu_rule_impl;
  std::vector<Finding> out;
  if (m.mtu_black_holes.empty()) return out;
  // Host-level paths: both ends' hosts (a path inside one host has no MTU hop: not counted).
  std::vector<std::pair<std::string, std::string>> ends;
  std::vector<const MtuPath*> paths;
  for (const auto& p : m.mtu_black_holes) {
    std::string a = host_name(hosts, p.from), b = host_name(hosts, p.to);
    if (a == b) continue;
    ends.emplace_back(a, b);
    paths.push_back(&p);
  }
  std::vector<bool> taken(paths.size(), false);
  std::vector<Group> groups;
  std::set<std::string> named_hosts;
  for (std::size_t guard = 0; guard < paths.size(); ++guard) {
    // The host with the most black-holed paths left (ties: more partners, then the name).
    std::map<std::string, std::pair<std::size_t, std::set<std::string>>> count;
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (taken[i]) continue;
      auto& [a, b] = ends[i];
      ++count[a].first;
      count[a].second.insert(b);
      ++count[b].first;
      count[b].second.insert(a);
    }
    if (count.empty()) break;
    auto best = count.begin();
    for (auto it = count.begin(); it != count.end(); ++it) {
      auto key = [](const auto& e) { return std::pair{e.second.first, e.second.second.size()}; };
      if (key(*it) > key(*best)) best = it;
    }
    const std::string host = best->first;
    Group g;
    if (best->second.second.size() >= 2) {
      g.named = {host};
    } else {
      // Every path of this host goes to one other host: the link, both ends.
      g.named = {host, *best->second.second.begin()};
      std::sort(g.named.begin(), g.named.end());
    }
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (taken[i]) continue;
      bool in = g.named.size() == 1 ? (ends[i].first == host || ends[i].second == host)
                                    : (std::set<std::string>{ends[i].first, ends[i].second} ==
                                       std::set<std::string>(g.named.begin(), g.named.end()));
      if (!in) continue;
      taken[i] = true;
      g.paths.push_back(paths[i]);
    }
    named_hosts.insert(g.named.begin(), g.named.end());
    groups.push_back(std::move(g));
  }
  // Fabric-wide: more than half the run's hosts named (and at least 3).
  std::set<std::string> all_hosts;
  for (const auto& [rank, host] : hosts)
    all_hosts.insert(host.empty() ? fmt::format("rank {}", rank) : host);
  if (named_hosts.size() >= 3 && named_hosts.size() * 2 > all_hosts.size()) {
    Group g;
    g.named.assign(named_hosts.begin(), named_hosts.end());
    g.paths = paths;
    out.push_back(group_finding(g, m, hosts));
    return out;
  }
  for (const auto& g : groups) out.push_back(group_finding(g, m, hosts));
  return out;
}

std::string mtu_detail(const MeshFacts& m) {
  using namespace mtu_rule_impl;
  if (m.mtu_paths_checked == 0 && m.mtu_paths_unchecked == 0) return "";
  std::string text;
  if (m.mtu_paths_checked > 0) {
    text =
        fmt::format("MTU {} on {} path{}", values_text({m.mtu_values.begin(), m.mtu_values.end()}),
                    m.mtu_paths_checked, m.mtu_paths_checked == 1 ? "" : "s");
    if (m.mtu_black_holes_total > 0) {
      std::set<int> crossed;
      for (const auto& p : m.mtu_black_holes)
        if (p.path_mtu > 0) crossed.insert(p.path_mtu);
      text += fmt::format(", {} black-holed ({} crosses)", m.mtu_black_holes_total,
                          range_text(crossed));
    }
  }
  if (m.mtu_paths_unchecked > 0)
    text += fmt::format("{}{} path{} not MTU-checked (no UDP answer, or no time left)",
                        text.empty() ? "" : ", ", m.mtu_paths_unchecked,
                        m.mtu_paths_unchecked == 1 ? "" : "s");
  return text;
}

}  // namespace ncclsmoke::results
