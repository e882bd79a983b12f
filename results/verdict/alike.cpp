#include "results/verdict/alike.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "rendezvous/rank_runs.h"

namespace ncclsmoke::results {
namespace {

using nlohmann::json;

// The ranks a finding lists (its ranks, reporters, peer).
std::set<int> listed_ranks(const Verdict& v) {
  std::set<int> ranks;
  for (const auto& f : v.findings) {
    ranks.insert(f.ranks.begin(), f.ranks.end());
    ranks.insert(f.subject.reporters.begin(), f.subject.reporters.end());
    if (f.subject.peer >= 0) ranks.insert(f.subject.peer);
  }
  return ranks;
}

// Those, and every rank of a host a finding names.
std::set<int> on_named_hosts(const Verdict& v, std::set<int> ranks) {
  std::set<std::string> hosts;
  for (const auto& f : v.findings) {
    hosts.insert(f.hosts.begin(), f.hosts.end());
    if (!f.subject.reporter_host.empty()) hosts.insert(f.subject.reporter_host);
    if (!f.subject.peer_host.empty()) hosts.insert(f.subject.peer_host);
  }
  if (!hosts.empty())
    for (const auto& r : v.ranks)
      if (hosts.count(r.host))
        for (int k = r.rank; k < r.rank + ranks_in(r); ++k) ranks.insert(k);
  return ranks;
}

// The ranks as runs (sorted and deduplicated first).
json runs_of(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return rendezvous::rank_runs(ranks);
}

// min/median/max of the finite values (the lower median of an even count, so it is a value
// one rank measured); null when none is finite.
json spread(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double x) { return !std::isfinite(x); }),
               values.end());
  if (values.empty()) return nullptr;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), mid, values.end());
  const double median = *mid;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return {{"min", *lo}, {"median", median}, {"max", *hi}};
}

// Every leaf of an observed object: members that are not objects (arrays included), by path.
void leaves(const json& j, std::vector<std::string>& path,
            const std::function<void(const std::vector<std::string>&, const json&)>& visit) {
  for (const auto& [k, x] : j.items()) {
    path.push_back(k);
    if (x.is_object() && !x.empty())
      leaves(x, path, visit);
    else
      visit(path, x);
    path.pop_back();
  }
}

std::string dotted(const std::vector<std::string>& path) {
  std::string out;
  for (const auto& p : path) out += (out.empty() ? "" : ".") + p;
  return out;
}

json::json_pointer pointer(const std::vector<std::string>& path) {
  json::json_pointer p;
  for (const auto& k : path) p /= k;
  return p;
}

// One member path over a group: the value each rank had.
struct Leaf {
  std::vector<std::string> path;
  std::vector<std::pair<int, const json*>> values;
};

json identity_group(const std::string& transport, const std::vector<const TransportIdentity*>& ids) {
  std::vector<int> ranks;
  std::vector<Leaf> leaves_in_order;
  std::map<std::string, std::size_t> leaf_at;
  for (const auto* id : ids) {
    ranks.push_back(id->rank);
    std::vector<std::string> path;
    leaves(id->observed, path, [&](const std::vector<std::string>& p, const json& x) {
      auto [it, fresh] = leaf_at.try_emplace(dotted(p), leaves_in_order.size());
      if (fresh) leaves_in_order.push_back({p, {}});
      leaves_in_order[it->second].values.push_back({id->rank, &x});
    });
  }
  json group = {{"transport", transport}, {"ranks", runs_of(ranks)},
                {"rank_count", static_cast<std::int64_t>(ids.size())}};
  const bool same_expected = std::all_of(ids.begin(), ids.end(), [&](const TransportIdentity* id) {
    return id->expected == ids.front()->expected;
  });
  if (same_expected && ids.front()->expected.is_object()) group["expected"] = ids.front()->expected;
  json common = json::object(), spreads = json::object(), values = json::object(),
       distinct = json::object();
  for (const auto& leaf : leaves_in_order) {
    const std::string key = dotted(leaf.path);
    const json& first = *leaf.values.front().second;
    const bool everywhere = leaf.values.size() == ids.size();
    const bool same = std::all_of(leaf.values.begin(), leaf.values.end(),
                                  [&](const auto& rv) { return *rv.second == first; });
    if (same && everywhere) {
      common[pointer(leaf.path)] = first;
      continue;
    }
    const bool numbers = std::all_of(leaf.values.begin(), leaf.values.end(),
                                     [](const auto& rv) { return rv.second->is_number(); });
    if (numbers) {
      std::vector<double> xs;
      xs.reserve(leaf.values.size());
      for (const auto& rv : leaf.values) xs.push_back(rv.second->template get<double>());
      json s = spread(std::move(xs));
      if (s.is_object() && !everywhere) s["rank_count"] = static_cast<std::int64_t>(leaf.values.size());
      spreads[key] = std::move(s);
      continue;
    }
    std::map<std::string, std::vector<int>> by_value;
    for (const auto& [rank, x] : leaf.values) {
      by_value[x->is_string() ? x->template get<std::string>() : x->dump()].push_back(rank);
      if (by_value.size() > kMaxAlikeValues) break;
    }
    if (by_value.size() > kMaxAlikeValues) {
      std::set<std::string> all;
      for (const auto& rv : leaf.values)
        all.insert(rv.second->is_string() ? rv.second->template get<std::string>() : rv.second->dump());
      distinct[key] = static_cast<std::int64_t>(all.size());
      continue;
    }
    json listed = json::object();
    for (auto& [text, rs] : by_value) listed[text] = runs_of(std::move(rs));
    values[key] = std::move(listed);
  }
  group["common"] = std::move(common);
  if (!spreads.empty()) group["spread"] = std::move(spreads);
  if (!values.empty()) group["values"] = std::move(values);
  if (!distinct.empty()) group["distinct"] = std::move(distinct);
  return group;
}

json row_group(const std::vector<const TransportRow*>& rows) {
  const TransportRow& r0 = *rows.front();
  std::vector<int> ranks;
  std::vector<double> time_us, algbw, busbw;
  std::int64_t wrong = -1;
  for (const auto* r : rows) {
    ranks.push_back(r->rank);
    time_us.push_back(r->time_us);
    algbw.push_back(r->algbw_gbps);
    busbw.push_back(r->busbw_gbps);
    if (r->wrong >= 0) wrong = std::max<std::int64_t>(wrong, 0) + r->wrong;
  }
  json g = {{"transport", r0.transport},
            {"bytes", r0.bytes},
            {"count", r0.count},
            {"dtype", r0.dtype},
            {"in_place", r0.in_place},
            {"ranks", runs_of(std::move(ranks))},
            {"rank_count", static_cast<std::int64_t>(rows.size())},
            {"time_us", spread(std::move(time_us))},
            {"algbw_gbps", spread(std::move(algbw))},
            {"busbw_gbps", spread(std::move(busbw))},
            {"wrong", wrong >= 0 ? json(wrong) : json(nullptr)}};
  if (r0.gate) g["gate"] = true;
  if (r0.synthetic) g["synthetic"] = true;
  return g;
}

}  // namespace

Verdict summarise_alike(Verdict v) {
  std::size_t described = 0;
  for (const auto& r : v.ranks) described += static_cast<std::size_t>(ranks_in(r));
  if (described <= kMaxExpandedRanks) return v;
  const std::set<int> listed = listed_ranks(v);
  const std::set<int> named = on_named_hosts(v, listed);

  // Identities: per transport, in the order transports first appear; its lowest rank stays.
  std::map<std::string, int> lowest;
  for (const auto& id : v.identities)
    if (id.rank >= 0) {
      auto [it, fresh] = lowest.try_emplace(id.transport, id.rank);
      if (!fresh) it->second = std::min(it->second, id.rank);
    }
  std::vector<std::string> order;
  std::map<std::string, std::vector<const TransportIdentity*>> summarised_ids;
  std::vector<std::size_t> kept_ids;
  for (std::size_t i = 0; i < v.identities.size(); ++i) {
    const auto& id = v.identities[i];
    if (id.rank < 0 || named.count(id.rank) || lowest[id.transport] == id.rank) {
      kept_ids.push_back(i);
      continue;
    }
    auto& group = summarised_ids[id.transport];
    if (group.empty()) order.push_back(id.transport);
    group.push_back(&id);
  }
  // Rows: per transport, size, dtype and placement, in the order they first appear.
  using RowKey = std::tuple<std::string, std::int64_t, std::string, bool, bool, bool>;
  std::vector<RowKey> row_order;
  std::map<RowKey, std::vector<const TransportRow*>> summarised_rows;
  std::vector<std::size_t> kept_rows;
  for (std::size_t i = 0; i < v.transports.size(); ++i) {
    const auto& r = v.transports[i];
    if (r.rank < 0 || listed.count(r.rank)) {
      kept_rows.push_back(i);
      continue;
    }
    RowKey key{r.transport, r.bytes, r.dtype, r.in_place, r.gate, r.synthetic};
    auto& group = summarised_rows[key];
    if (group.empty()) row_order.push_back(key);
    group.push_back(&r);
  }
  if (summarised_ids.empty() && summarised_rows.empty()) return v;

  json alike = json::object();
  if (!summarised_ids.empty()) {
    alike["identities"] = json::array();
    for (const auto& t : order) alike["identities"].push_back(identity_group(t, summarised_ids[t]));
  }
  if (!summarised_rows.empty()) {
    alike["transports"] = json::array();
    for (const auto& k : row_order) alike["transports"].push_back(row_group(summarised_rows[k]));
  }
  std::vector<TransportIdentity> ids;
  ids.reserve(kept_ids.size());
  for (auto i : kept_ids) ids.push_back(std::move(v.identities[i]));
  std::vector<TransportRow> rows;
  rows.reserve(kept_rows.size());
  for (auto i : kept_rows) rows.push_back(std::move(v.transports[i]));
  v.identities = std::move(ids);
  v.transports = std::move(rows);
  v.alike = std::move(alike);
  return v;
}

}  // namespace ncclsmoke::results
