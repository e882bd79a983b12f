#include "results/judging/merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "results/judging/classify.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"

namespace ncclsmoke::results {

namespace {

template <typename T>
void sorted_union(std::vector<T>& into, const std::vector<T>& from) {
  into.insert(into.end(), from.begin(), from.end());
  std::sort(into.begin(), into.end());
  into.erase(std::unique(into.begin(), into.end()), into.end());
}

// Appends the values of `from` that `into` lacks, keeping first-appearance order (and dropping
// duplicates already in `into`): a finding's hosts[0] names its subject (MESH_BLOCKED: the
// suspect host) and must stay first.
// Linear in the hosts: one finding merged from every host of a fleet (thousands) stays cheap.
void ordered_union(std::vector<std::string>& into, const std::vector<std::string>& from) {
  std::vector<std::string> out;
  out.reserve(into.size() + from.size());
  std::unordered_set<std::string_view> seen;
  seen.reserve(into.size() + from.size());
  auto add = [&](const std::vector<std::string>& v) {
    for (const auto& x : v)
      if (seen.insert(x).second) out.push_back(x);
  };
  add(into);
  add(from);
  into = std::move(out);
}

void fill_empty(std::string& into, const std::string& from) {
  if (into.empty()) into = from;
}

// Merges `f` into `g` (the same finding): ranks and reporters united and sorted, hosts united in
// first-appearance order, worst severity, first hint and evidence, the message rendered again.
void merge_into(Finding& g, const Finding& f) {
  sorted_union(g.ranks, f.ranks);
  cap_listed_ranks(g);
  ordered_union(g.hosts, f.hosts);
  sorted_union(g.subject.reporters, f.subject.reporters);
  if (severity_rank(f.severity) > severity_rank(g.severity)) g.severity = f.severity;
  fill_empty(g.hint, f.hint);
  if (!g.evidence.is_object() && f.evidence.is_object()) g.evidence = f.evidence;
  render(g);
}

// Adds `ranges` to `ranks` (keyed by first rank) where no single-rank entry falls inside them
// (the parts around one that does), each range once, then a range "described by no rank's
// verdict" for every gap below world_size. Returns the gaps' first ranks.
std::set<int> place_rank_ranges(std::map<int, RankInfo>& ranks, std::vector<RankInfo> ranges,
                                int world_size) {
  std::sort(ranges.begin(), ranges.end(),
            [](const RankInfo& a, const RankInfo& b) { return a.rank < b.rank; });
  int covered = -1;  // every rank <= covered is placed
  std::set<int> gaps;
  auto add_span = [&](const RankInfo& like, int lo, int hi, bool gap) {
    for (int r = lo; r <= hi;) {
      auto next = ranks.lower_bound(r);
      if (next != ranks.end() && next->first == r) {  // taken: step past it (and its range)
        r = std::max(r, next->second.through) + 1;
        continue;
      }
      const int end = next == ranks.end() ? hi : std::min(hi, next->first - 1);
      RankInfo m = like;
      m.rank = r;
      m.through = end > r ? end : -1;
      ranks.emplace(r, m);
      if (gap) gaps.insert(r);
      r = end + 1;
    }
  };
  for (const auto& g : ranges) {
    // A range past the world (a view's own world size, or a forged one) is cut at its end.
    const int hi = world_size > 0 ? std::min(g.through, world_size - 1) : g.through;
    const int lo = std::max(g.rank, covered + 1);
    if (lo > hi) continue;
    add_span(g, lo, hi, false);
    covered = std::max(covered, hi);
  }
  RankInfo none;
  none.status = RankStatus::missing;
  none.detail = "described by no rank's verdict";
  if (world_size > 0) add_span(none, 0, world_size - 1, true);
  return gaps;
}

}  // namespace

std::string finding_dedupe_key(const AnyCode& code, const Subject& subject,
                               const std::string& message) {
  std::string key = to_string(code) + '\x1f';
  if (subject.empty()) return key + '\x1e' + message;
  for (const std::string* part : {&subject.reporter_host, &subject.peer_host, &subject.transport,
                                  &subject.phase, &subject.item})
    key += *part + '\x1f';
  return key + std::to_string(subject.peer);
}

std::string finding_dedupe_key(const Finding& f) {
  return finding_dedupe_key(f.code, f.subject, f.message);
}

void dedupe_findings(std::vector<Finding>& findings) {
  std::vector<Finding> out;
  std::map<std::string, std::size_t> index;
  for (auto& f : findings) {
    auto [it, fresh] = index.try_emplace(finding_dedupe_key(f), out.size());
    if (fresh) {
      out.push_back(std::move(f));
      Finding& n = out.back();
      sorted_union(n.ranks, {});
      ordered_union(n.hosts, {});
      sorted_union(n.subject.reporters, {});
      render(n);
      continue;
    }
    merge_into(out[it->second], f);
  }
  findings = std::move(out);
}

Verdict merge_rank_verdicts(const std::vector<Verdict>& local_views, const MergeOptions& options) {
  if (local_views.empty()) {
    throw std::invalid_argument("merge_rank_verdicts: no local verdicts to merge");
  }
  const Verdict* head = &local_views.front();
  for (const auto& v : local_views) {
    if (v.reporting_rank == options.reporting_rank) {
      head = &v;
      break;
    }
  }

  Verdict out;
  out.schema_version = head->schema_version;
  out.tool = head->tool;
  out.run_id = head->run_id;
  out.started_at = head->started_at;
  out.world = head->world;
  out.env = head->env;
  out.versions = head->versions;
  out.baseline = head->baseline;
  out.scope = Scope::global;
  out.reporting_rank = options.reporting_rank;

  int world_size = options.world_size;
  std::set<int> reported;
  for (const auto& v : local_views) {
    out.duration_s = std::max(out.duration_s, v.duration_s);
    if (options.world_size == 0) world_size = std::max(world_size, v.world.size);
    if (v.reporting_rank >= 0) reported.insert(v.reporting_rank);
  }
  if (world_size > 0) out.world.size = world_size;
  // Alive to the end: its view arrived, or the reporting rank's watch heard it then (merge.h).
  std::set<int> lived = reported;
  lived.insert(options.alive_at_end.begin(), options.alive_at_end.end());

  // A rank that stopped on its own error (its view has an error finding naming itself) and still
  // sent its view was not lost: the others' PEER_LOST about it alone was a guess, and its own
  // finding is the cause the operator must read.
  std::set<int> self_explained;
  for (const auto& v : local_views)
    for (const auto& f : v.findings)
      if (v.reporting_rank >= 0 && f.severity == Severity::error && f.code != Code::PEER_LOST &&
          std::find(f.ranks.begin(), f.ranks.end(), v.reporting_rank) != f.ranks.end())
        self_explained.insert(v.reporting_rank);

  // ranks. Ranges (ranks that never joined, RankInfo::through) stay ranges unless some view
  // describes a rank inside one; ranks no view describes become ranges too, so the merged list
  // grows with the ranks that joined, not with the world size.
  std::map<int, RankInfo> ranks;
  std::vector<RankInfo> ranges;
  for (const auto& v : local_views) {
    for (const auto& r : v.ranks) {
      if (r.through > r.rank) {
        ranges.push_back(r);
        continue;
      }
      // A rank whose own view arrived with no error of its own was not lost (it posted at the end
      // of its run), whatever another rank inferred from its silence: its view says what it was.
      const bool disproved = r.status == RankStatus::lost && lived.count(r.rank) > 0 &&
                             !self_explained.count(r.rank);
      auto [it, fresh] = ranks.try_emplace(r.rank, r);
      RankInfo& m = it->second;
      if (fresh) {
        if (disproved) {
          m.status = RankStatus::joined;
          m.detail.clear();
        }
        continue;
      }
      if (!disproved && rank_status_rank(r.status) > rank_status_rank(m.status)) {
        m.status = r.status;
        if (!r.detail.empty()) m.detail = r.detail;
      }
      fill_empty(m.host, r.host);
      fill_empty(m.node, r.node);
      if (m.pid == 0) m.pid = r.pid;
      fill_empty(m.local_address, r.local_address);
      fill_empty(m.interface, r.interface);
      fill_empty(m.detail, r.detail);
    }
  }
  const std::set<int> gaps = place_rank_ranges(ranks, ranges, world_size);
  for (auto& [_, r] : ranks) out.ranks.push_back(r);

  // phases
  for (const auto& v : local_views) {
    for (const auto& p : v.phases) {
      auto it = std::find_if(out.phases.begin(), out.phases.end(),
                             [&](const Phase& q) { return q.name == p.name; });
      if (it == out.phases.end()) {
        out.phases.push_back(p);
        continue;
      }
      if (phase_status_rank(p.status) > phase_status_rank(it->status)) {
        it->status = p.status;
        it->detail = p.detail;
      }
      it->duration_s = std::max(it->duration_s, p.duration_s);
      it->required = it->required || p.required;
    }
  }

  // findings. One dead (or frozen) rank is seen by every survivor (and by its transport and the
  // liveness watch): PEER_LOST / PEER_STALLED about the same ranks is one finding, with the ranks
  // that saw it in evidence.reported_by, whatever each message said.
  auto per_rank_code = [](const AnyCode& code) {
    return code == Code::PEER_LOST || code == Code::PEER_STALLED;
  };
  auto note_reporter = [&](Finding& g, int reporter) {
    if (!per_rank_code(g.code) || reporter < 0) return;
    if (!g.evidence.is_object()) g.evidence = nlohmann::json::object();
    auto& by = g.evidence["reported_by"];
    if (!by.is_array()) by = nlohmann::json::array();
    if (std::find(by.begin(), by.end(), reporter) == by.end()) by.push_back(reporter);
    std::sort(by.begin(), by.end());
  };
  // A death of a rank whose own view arrived is disproved by that view (merge.h), also of one
  // that stopped on its own error and posted it: its own finding is the cause to read.
  auto disproved_by_its_view = [&](const Finding& f) {
    return f.code == Code::PEER_LOST && !f.ranks.empty() &&
           std::all_of(f.ranks.begin(), f.ranks.end(), [&](int r) { return lived.count(r) > 0; });
  };
  // Which finding a new one joins: the first with its code and the same ranks (PEER_LOST,
  // PEER_STALLED) or the same dedupe key, found through an index of those keys (a fleet's
  // thousands of findings made a scan of them all for each one quadratic: 20 s at 16,384).
  auto match_key = [&](const Finding& f) {
    if (!per_rank_code(f.code)) return finding_dedupe_key(f);
    std::vector<int> ranks = f.ranks;
    sorted_union(ranks, {});
    std::string key = to_string(f.code) + '\x1d';
    for (int r : ranks) key += std::to_string(r) + ',';
    return key;
  };
  std::unordered_map<std::string, std::set<std::size_t>> at_key;  // key -> findings, in order
  for (const auto& v : local_views) {
    for (const auto& f : v.findings) {
      if (disproved_by_its_view(f)) continue;
      const std::string key = match_key(f);
      auto found = at_key.find(key);
      if (found == at_key.end() || found->second.empty()) {
        out.findings.push_back(f);
        Finding& n = out.findings.back();
        sorted_union(n.ranks, {});
        ordered_union(n.hosts, {});
        note_reporter(n, v.reporting_rank);
        at_key[match_key(n)].insert(out.findings.size() - 1);
        continue;
      }
      const std::size_t i = *found->second.begin();
      Finding& g = out.findings[i];
      const std::string before = match_key(g);
      note_reporter(g, v.reporting_rank);
      merge_into(g, f);
      if (std::string after = match_key(g); after != before) {  // the merge moved its key
        at_key[before].erase(i);
        at_key[after].insert(i);
      }
    }
  }

  // transports and identities
  for (const auto& v : local_views) {
    // Rows keep their rank: -1 marks a world row (figures already exchanged among the ranks).
    for (auto t : v.transports) out.transports.push_back(std::move(t));
    for (auto t : v.identities) {
      if (t.rank < 0) t.rank = v.reporting_rank;
      out.identities.push_back(std::move(t));
    }
  }

  // ranks that sent nothing and that nothing explains
  std::set<int> explained;
  for (const auto& f : out.findings) {
    if (severity_rank(f.severity) >= severity_rank(Severity::warning)) {
      explained.insert(f.ranks.begin(), f.ranks.end());
    }
  }
  // Candidates: every rank a view describes as having joined, and every rank no view describes
  // (a gap); a rank the roster lists as never joined is the join's finding, not a missing view.
  // Walked by entry, so a world of a million with one rank present costs one range, not a loop
  // over the world.
  std::vector<int> silent;
  std::size_t silent_total = 0;
  std::vector<std::string> silent_hosts;
  for (const auto& [first, e] : ranks) {
    if (e.status == RankStatus::missing && !gaps.count(first)) continue;
    for (int r = first; r <= std::max(first, e.through); ++r) {
      if (reported.count(r) || explained.count(r)) continue;
      ++silent_total;
      if (silent.size() < kMaxListedRanks) silent.push_back(r);
      if (!e.host.empty()) silent_hosts.push_back(e.host);
    }
  }
  if (!silent.empty()) {
    out.findings.push_back(make_finding(
        Code::RESULTS_MISSING,
        fmt::format("rank {} received no local verdict from rank{} {} ({} of {} views merged)",
                    options.reporting_rank, silent_total > 1 ? "s" : "", rank_runs(silent),
                    local_views.size(), world_size),
        silent, silent_hosts));
    if (silent_total > silent.size()) out.findings.back().evidence["ranks_total"] = silent_total;
    sorted_union(out.findings.back().hosts, {});
  }

  // The same finding from several ranks (of a host): one, naming them all.
  dedupe_findings(out.findings);

  apply_verdict(out, options.required_phases);
  return out;
}

}  // namespace ncclsmoke::results
