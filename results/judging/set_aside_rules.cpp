#include "results/judging/set_aside_rules.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"

namespace ncclsmoke::results {

std::vector<ExcludedRank> excluded_ranks(const std::vector<RosterEntry>& roster,
                                         const SetAsideList& list) {
  std::vector<ExcludedRank> out;
  if (list.empty()) return out;
  for (const auto& r : roster) {
    const SetAsideEntry* e = list.find(r.host);
    std::string matched = r.host;
    if (!e) {
      e = list.find(r.node);
      matched = r.node;
    }
    if (e) out.push_back({r.rank, r.host, r.node, matched, *e});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return out;
}

Finding host_excluded_finding(const std::vector<ExcludedRank>& excluded) {
  std::vector<int> ranks;
  std::vector<std::string> hosts;
  std::set<std::string> names;
  // name -> where it came from, in the order first seen
  std::vector<std::pair<std::string, std::string>> origins;
  std::set<std::string> sources;
  for (const auto& x : excluded) {
    ranks.push_back(x.rank);
    if (!x.host.empty() && std::find(hosts.begin(), hosts.end(), x.host) == hosts.end())
      hosts.push_back(x.host);
    if (names.insert(x.matched).second) origins.emplace_back(x.matched, describe_origin(x.entry));
    sources.insert(x.entry.source);
  }
  std::vector<std::string> said;
  for (const auto& [name, origin] : origins) said.push_back(fmt::format("{} ({})", name, origin));
  Subject about;
  about.phase = "set-aside";
  about.item = fmt::format("{}", fmt::join(names, ","));
  const std::string what = fmt::format(
      "{} {} {} on a host set aside: {}; the run stopped after the join, the mesh and the "
      "transports were not run",
      ranks.size() == 1 ? "rank" : "ranks", rank_runs(ranks), ranks.size() == 1 ? "runs" : "run",
      fmt::join(said, "; "));
  auto f = make_finding_about(Code::HOST_EXCLUDED, about, what, ranks, hosts,
                              {{"hosts", fmt::format("{}", fmt::join(names, ","))},
                               {"source", fmt::format("{}", fmt::join(sources, " / "))}});
  nlohmann::json list = nlohmann::json::array();
  for (const auto& x : excluded) {
    if (list.size() == 64) break;
    list.push_back({{"rank", x.rank},
                    {"host", x.host},
                    {"node", x.node},
                    {"matched", x.matched},
                    {"source", x.entry.source},
                    {"line", x.entry.line},
                    {"codes", x.entry.codes},
                    {"run_id", x.entry.run_id}});
  }
  f.evidence = {{"excluded", list}, {"excluded_total", excluded.size()}};
  return f;
}

}  // namespace ncclsmoke::results
