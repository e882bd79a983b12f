#include "results/report/model.h"

#include <algorithm>
#include <exception>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "results/judging/classify.h"
#include "results/judging/merge.h"
#include "results/report/scale.h"
#include "results/report/summary.h"
#include "results/verdict/ordering.h"

namespace ncclsmoke::report {

using results::HistoryFinding;
using results::HistoryGate;
using results::HistoryRun;

ReportInput load_report_input(const results::History& history, const results::HistoryQuery& q) {
  ReportInput in;
  in.runs = history.runs(q);
  in.gates = history.gates(q);
  in.findings = history.findings(q);
  // Per cluster, the newest run whose stored verdict has world rows (a run whose transports all
  // failed measured no curve): at most kCurveLookback runs back.
  constexpr int kCurveLookback = 10;
  std::map<std::string, int> tried;
  std::set<std::string> found;
  for (auto it = in.runs.rbegin(); it != in.runs.rend(); ++it) {  // runs() is oldest first
    if (found.count(it->cluster) || tried[it->cluster]++ >= kCurveLookback) continue;
    auto j = history.verdict_json(it->run_id);
    if (!j || !j->is_object() || !j->contains("transports") || !(*j)["transports"].is_array())
      continue;
    bool world_rows = false;
    for (const auto& t : (*j)["transports"])
      world_rows = world_rows || (t.is_object() && !t.contains("rank"));
    if (!world_rows) continue;
    in.verdicts[it->run_id] = std::move(*j);
    found.insert(it->cluster);
  }
  return in;
}

std::string cluster_label(const std::string& cluster) {
  return cluster.empty() ? kDefaultCluster : cluster;
}

bool ClusterReport::regressed_now() const {
  return std::any_of(latest.begin(), latest.end(), [](const LatestState& s) {
    return s.state == GateState::degraded || s.state == GateState::fail;
  });
}

std::size_t ClusterReport::ongoing_incidents() const {
  return static_cast<std::size_t>(std::count_if(incidents.begin(), incidents.end(),
                                                [](const Incident& i) { return i.ongoing(); }));
}

bool is_regression_code(const results::AnyCode& code) {
  for (results::Code c : kRegressionCodes)
    if (code == c) return true;
  return false;
}

GateState gate_state(double busbw, double baseline, double degraded_ratio, double fail_ratio) {
  if (!std::isfinite(busbw)) return GateState::not_measured;
  if (!std::isfinite(baseline) || baseline <= 0) return GateState::no_baseline;
  double ratio = busbw / baseline;
  if (std::isfinite(fail_ratio) && ratio < fail_ratio) return GateState::fail;
  if (std::isfinite(degraded_ratio) && ratio < degraded_ratio) return GateState::degraded;
  return GateState::ok;
}

const char* to_string(GateState s) {
  switch (s) {
    case GateState::ok:
      return "ok";
    case GateState::degraded:
      return "degraded";
    case GateState::fail:
      return "fail";
    case GateState::no_baseline:
      return "no-baseline";
    case GateState::not_measured:
      return "not-measured";
  }
  return "not-measured";
}

std::string profile_label(const std::string& profile) {
  return profile.empty() ? "(no profile)" : profile;
}

std::string describe_latest(const LatestState& s) {
  std::string out = s.transport + " on " + profile_label(s.profile) + ": ";
  if (!std::isfinite(s.busbw_gbps))
    return out + "no number at " + format_bytes(s.gate_bytes) + " in the latest run";
  out += format_gbps(s.busbw_gbps) + " GB/s at " + format_bytes(s.gate_bytes);
  if (std::isfinite(s.ratio))
    out += ", " + format_percent(s.ratio) + " of baseline " + format_gbps(s.baseline_gbps);
  else
    out += ", no baseline";
  if (s.unmeasured_after > 0)
    out += "; not measured in the latest " + std::to_string(s.unmeasured_after) +
           (s.unmeasured_after == 1 ? " run" : " runs") + " (last measured " +
           format_utc(s.measured_unix) + ")";
  return out;
}

std::string describe_incident(const Incident& i) {
  std::string out = i.transport + " on " + profile_label(i.profile);
  if (i.gate_bytes > 0) out += " at " + format_bytes(i.gate_bytes);
  out += ": " + std::to_string(i.runs()) + (i.runs() == 1 ? " run" : " runs") + " from " +
         format_utc(i.onset_unix);
  if (std::isfinite(i.lowest_busbw)) {
    out += ", lowest " + format_gbps(i.lowest_busbw) + " GB/s";
    if (std::isfinite(i.lowest_ratio))
      out += " (" + format_percent(i.lowest_ratio) + " of baseline " +
             format_gbps(i.baseline_gbps) + ")";
  }
  if (i.ongoing())
    out += ", ongoing" +
           (i.duration_s() > 0 ? " for " + format_duration(i.duration_s()) : std::string());
  else
    out += ", cleared after " + format_duration(i.duration_s()) + " (" +
           format_utc(i.cleared_unix) + ")";
  return out;
}

namespace {

// Thins a series to about `max_points`: per time bucket and verdict, the lowest and highest
// busbw (and the first missing number) survive; regression points always survive.
std::vector<ChartPoint> thin(const std::vector<ChartPoint>& pts, std::size_t max_points) {
  if (pts.size() <= max_points || max_points < 8) return pts;
  double t0 = pts.front().unix, t1 = pts.back().unix;
  std::size_t buckets = std::max<std::size_t>(1, max_points / 4);
  double width = (t1 - t0) / static_cast<double>(buckets);
  std::vector<char> keep(pts.size(), 0);
  // (bucket, verdict rank) -> indices of min, max, first NaN
  struct Pick {
    std::size_t lo = SIZE_MAX, hi = SIZE_MAX, nan = SIZE_MAX;
  };
  std::vector<std::array<Pick, 4>> picks(buckets);
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const auto& p = pts[i];
    if (p.regression) keep[i] = 1;
    std::size_t b = width > 0 ? static_cast<std::size_t>((p.unix - t0) / width) : 0;
    b = std::min(b, buckets - 1);
    auto& pick = picks[b][static_cast<std::size_t>(results::verdict_rank(p.verdict))];
    if (!std::isfinite(p.busbw_gbps)) {
      if (pick.nan == SIZE_MAX) pick.nan = i;
      continue;
    }
    if (pick.lo == SIZE_MAX || p.busbw_gbps < pts[pick.lo].busbw_gbps) pick.lo = i;
    if (pick.hi == SIZE_MAX || p.busbw_gbps > pts[pick.hi].busbw_gbps) pick.hi = i;
  }
  for (const auto& per_verdict : picks)
    for (const auto& pick : per_verdict)
      for (std::size_t i : {pick.lo, pick.hi, pick.nan})
        if (i != SIZE_MAX) keep[i] = 1;
  std::vector<ChartPoint> out;
  for (std::size_t i = 0; i < pts.size(); ++i)
    if (keep[i]) out.push_back(pts[i]);
  return out;
}

TimelineCell cell_of(const HistoryRun& r, bool regression) {
  TimelineCell c;
  c.t0 = c.t1 = r.started_unix;
  c.verdict = r.verdict;
  c.counts[r.verdict] = 1;
  c.run_id = r.run_id;
  c.regression = regression;
  return c;
}

void merge_into(TimelineCell& c, const HistoryRun& r, bool regression) {
  if (c.counts.empty()) {
    c = cell_of(r, regression);
    return;
  }
  c.t0 = std::min(c.t0, r.started_unix);
  c.t1 = std::max(c.t1, r.started_unix);
  c.counts[r.verdict] += 1;
  if (results::verdict_rank(r.verdict) > results::verdict_rank(c.verdict)) c.verdict = r.verdict;
  c.run_id.clear();
  c.regression = c.regression || regression;
}

}  // namespace

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (!s.empty() && std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

void add_unique(std::vector<results::Code>& v, results::Code c) {
  if (std::find(v.begin(), v.end(), c) == v.end()) v.push_back(c);
}

// The transport a regression finding is about: its subject's. A row stored before subjects
// (history version 3) has none; for those only, the judge's message shape is the evidence
// ("<transport>: ...", nccl_judge's "NCCL on ..."). "" when neither says.
std::string transport_of(const HistoryFinding& f) {
  if (!f.subject.empty()) return f.subject.transport;
  auto colon = f.message.find(": ");
  if (colon != std::string::npos && colon > 0 && colon < 40 &&
      f.message.find(' ') >= colon)
    return f.message.substr(0, colon);
  if (f.message.rfind("NCCL ", 0) == 0) return "nccl";
  return "";
}

struct RunIndex {
  std::unordered_map<std::string, const HistoryRun*> run;
  // run_id -> regression findings
  std::unordered_map<std::string, std::vector<const HistoryFinding*>> regression;
};

// `runs`: the cluster's runs; one of the key's profile after its newest number counts as a run
// that did not measure it, whether it stored a row without a number or no row at all (the
// transport failed before its sweep).
std::vector<LatestState> latest_states(const std::vector<const HistoryGate*>& gates,
                                       const std::vector<const HistoryRun*>& runs) {
  std::map<std::pair<std::string, std::string>, std::vector<const HistoryGate*>> by_pt;
  for (const auto* g : gates)
    if (!g->synthetic) by_pt[{g->profile, g->transport}].push_back(g);
  std::vector<LatestState> out;
  auto streak_class = [](GateState g) { return g == GateState::fail ? GateState::degraded : g; };
  for (auto& [key, gs] : by_pt) {
    std::stable_sort(gs.begin(), gs.end(), [](const HistoryGate* a, const HistoryGate* b) {
      return a->started_unix < b->started_unix;
    });
    const HistoryGate& newest = *gs.back();
    const HistoryGate* measured = nullptr;
    std::size_t after = 0;
    for (auto it = gs.rbegin(); it != gs.rend(); ++it) {
      if (std::isfinite((*it)->busbw_gbps)) {
        measured = *it;
        break;
      }
      ++after;
    }
    const HistoryGate& g = measured ? *measured : newest;
    LatestState st;
    st.cluster = g.cluster;
    st.profile = g.profile;
    st.transport = g.transport;
    st.gate_bytes = g.gate_bytes;
    st.world_size = g.world_size;
    st.busbw_gbps = g.busbw_gbps;
    st.baseline_gbps = g.baseline_gbps;
    st.degraded_ratio = g.degraded_ratio;
    st.fail_ratio = g.fail_ratio;
    st.ratio = (std::isfinite(g.busbw_gbps) && std::isfinite(g.baseline_gbps) &&
                g.baseline_gbps > 0)
                   ? g.busbw_gbps / g.baseline_gbps
                   : kNaN;
    st.state = gate_state(g.busbw_gbps, g.baseline_gbps, g.degraded_ratio, g.fail_ratio);
    st.latest_unix = newest.started_unix;
    st.run_id = newest.run_id;
    st.verdict = newest.verdict;
    st.measured_unix = g.started_unix;
    st.measured_run_id = measured ? g.run_id : "";
    st.unmeasured_after = measured ? after : 0;
    if (measured) {
      std::size_t later = 0;
      const HistoryRun* newest_run = nullptr;
      for (const auto* r : runs) {
        if (r->profile != g.profile || r->started_unix <= g.started_unix) continue;
        ++later;
        if (!newest_run || r->started_unix >= newest_run->started_unix) newest_run = r;
      }
      st.unmeasured_after = std::max(st.unmeasured_after, later);
      if (newest_run && newest_run->started_unix > st.latest_unix) {
        st.latest_unix = newest_run->started_unix;
        st.run_id = newest_run->run_id;
        st.verdict = newest_run->verdict;
      }
    }
    st.since_unix = g.started_unix;
    st.streak_runs = 0;
    for (auto it = gs.rbegin(); it != gs.rend(); ++it) {
      const HistoryGate& h = **it;
      if (measured && !std::isfinite(h.busbw_gbps)) continue;  // sticky: skipped, not a break
      if (h.started_unix > g.started_unix) continue;
      if (streak_class(gate_state(h.busbw_gbps, h.baseline_gbps, h.degraded_ratio,
                                  h.fail_ratio)) != streak_class(st.state))
        break;
      st.since_unix = h.started_unix;
      ++st.streak_runs;
    }
    out.push_back(std::move(st));
  }
  return out;
}

// Incidents of one cluster: per (profile, transport, gate size), consecutive regressed runs.
std::vector<Incident> incidents_of(const std::vector<const HistoryRun*>& runs,
                                   const std::vector<const HistoryGate*>& gates,
                                   const RunIndex& idx) {
  std::vector<Incident> out;
  // run_id -> transports it has gate rows for
  std::unordered_map<std::string, std::set<std::string>> gated;
  for (const auto* g : gates) gated[g->run_id].insert(g->transport);
  // Is the run regressed on this transport by a finding? (A finding that names no transport
  // counts for every transport of its run.)
  auto finding_says = [&](const std::string& run_id, const std::string& transport,
                          const HistoryFinding** which) {
    auto it = idx.regression.find(run_id);
    if (it == idx.regression.end()) return false;
    const auto& ts = gated[run_id];
    for (const auto* f : it->second) {
      std::string t = transport_of(*f);
      if (t == transport || !ts.count(t)) {
        if (which) *which = f;
        return true;
      }
    }
    return false;
  };
  auto extend = [&](Incident& inc, const HistoryRun* run, const HistoryGate* g,
                    const HistoryFinding* f) {
    if (inc.run_ids.empty()) {
      inc.onset_unix = run ? run->started_unix : g->started_unix;
      inc.first_run_id = run ? run->run_id : g->run_id;
      inc.lowest_busbw = inc.baseline_gbps = inc.lowest_ratio = kNaN;
    }
    const std::string& id = run ? run->run_id : g->run_id;
    inc.run_ids.push_back(id);
    inc.last_run_id = id;
    inc.last_unix = run ? run->started_unix : g->started_unix;
    if (run) {
      for (const auto& h : run->hosts) add_unique(inc.hosts, h);
      if (!inc.worst_verdict ||
          results::verdict_rank(run->verdict) > results::verdict_rank(*inc.worst_verdict))
        inc.worst_verdict = run->verdict;
    }
    auto rf = idx.regression.find(id);
    if (rf != idx.regression.end())
      for (const auto* x : rf->second) {
        std::string t = transport_of(*x);
        if (t.empty() || t == inc.transport || !gated[id].count(t)) {
          add_unique(inc.codes, x->code.code());
          inc.message = x->message;
          for (const auto& h : x->hosts) add_unique(inc.hosts, h);
        }
      }
    if (f && inc.message.empty()) inc.message = f->message;
    if (g && std::isfinite(g->busbw_gbps) &&
        (!std::isfinite(inc.lowest_busbw) || g->busbw_gbps < inc.lowest_busbw)) {
      inc.lowest_busbw = g->busbw_gbps;
      inc.baseline_gbps = g->baseline_gbps;
      inc.lowest_ratio = std::isfinite(g->baseline_gbps) && g->baseline_gbps > 0
                             ? g->busbw_gbps / g->baseline_gbps
                             : kNaN;
    }
  };

  std::map<std::tuple<std::string, std::string, std::int64_t>, std::vector<const HistoryGate*>>
      by_key;
  for (const auto* g : gates)
    if (!g->synthetic) by_key[{g->profile, g->transport, g->gate_bytes}].push_back(g);
  std::set<std::string> covered;  // regression runs that belong to some gate-row incident
  for (auto& [key, gs] : by_key) {
    std::stable_sort(gs.begin(), gs.end(), [](const HistoryGate* a, const HistoryGate* b) {
      return a->started_unix < b->started_unix;
    });
    Incident open;
    auto close = [&](const HistoryGate* clearer) {
      if (open.run_ids.empty()) return;
      if (clearer) {
        open.cleared_unix = clearer->started_unix;
        open.cleared_run_id = clearer->run_id;
      }
      out.push_back(std::move(open));
      open = Incident{};
    };
    for (const auto* g : gs) {
      GateState st = gate_state(g->busbw_gbps, g->baseline_gbps, g->degraded_ratio, g->fail_ratio);
      const HistoryFinding* f = nullptr;
      bool regressed = st == GateState::degraded || st == GateState::fail ||
                       finding_says(g->run_id, g->transport, &f);
      if (regressed) {
        if (open.run_ids.empty()) {
          open.cluster = g->cluster;
          open.profile = g->profile;
          open.transport = g->transport;
          open.gate_bytes = g->gate_bytes;
          open.world_size = g->world_size;
        }
        auto r = idx.run.find(g->run_id);
        extend(open, r == idx.run.end() ? nullptr : r->second, g, f);
        if (idx.regression.count(g->run_id)) covered.insert(g->run_id);
      } else if (std::isfinite(g->busbw_gbps)) {
        close(g);  // measured back in the band (or without one): the incident ends here
      }           // measured nothing: sticky, neither ends nor extends
    }
    close(nullptr);
  }

  // Regression findings with no gate row to hang on: per (profile, transport), consecutive runs
  // of the profile that carry one.
  std::map<std::pair<std::string, std::string>, Incident> open;
  for (const auto* r : runs) {
    auto it = idx.regression.find(r->run_id);
    std::set<std::string> here;
    if (it != idx.regression.end() && !covered.count(r->run_id))
      for (const auto* f : it->second) here.insert(transport_of(*f));
    for (auto o = open.begin(); o != open.end();) {
      if (o->first.first == r->profile && !here.count(o->first.second)) {
        o->second.cleared_unix = r->started_unix;
        o->second.cleared_run_id = r->run_id;
        out.push_back(std::move(o->second));
        o = open.erase(o);
      } else {
        ++o;
      }
    }
    for (const auto& t : here) {
      auto& inc = open[{r->profile, t}];
      if (inc.run_ids.empty()) {
        inc.cluster = r->cluster;
        inc.profile = r->profile;
        inc.transport = t.empty() ? "(run)" : t;
      }
      extend(inc, r, nullptr, nullptr);
    }
  }
  for (auto& [k, inc] : open) out.push_back(std::move(inc));

  std::stable_sort(out.begin(), out.end(), [](const Incident& a, const Incident& b) {
    return a.onset_unix > b.onset_unix;
  });
  return out;
}

std::vector<SizeCurve> size_curves_of(const HistoryRun& run, const nlohmann::json& doc) {
  std::vector<SizeCurve> out;
  results::Verdict v;
  try {
    v = results::verdict_from_json(doc);
  } catch (const std::exception&) {
    return out;  // a stored verdict this build cannot read: no curve, the rest of the report stands
  }
  auto heads = results::gate_headlines(v);
  std::vector<std::string> names;
  for (const auto& r : v.transports)
    if (r.rank < 0 && std::find(names.begin(), names.end(), r.transport) == names.end())
      names.push_back(r.transport);
  for (const auto& name : names) {
    SizeCurve c;
    c.cluster = run.cluster;
    c.profile = run.profile;
    c.transport = name;
    c.run_id = run.run_id;
    c.verdict = run.verdict;
    c.unix = run.started_unix;
    c.world_size = v.world.size;
    c.gate_busbw = c.baseline_gbps = c.degraded_ratio = c.fail_ratio = kNaN;
    std::map<std::int64_t, SizePoint> by_size;
    for (const auto& r : v.transports) {
      if (r.transport != name || r.rank >= 0) continue;
      c.synthetic = c.synthetic || r.synthetic;
      auto [it, fresh] = by_size.try_emplace(r.bytes);
      if (fresh) {
        it->second.bytes = r.bytes;
        it->second.out_gbps = it->second.in_gbps = kNaN;
      }
      (r.in_place ? it->second.in_gbps : it->second.out_gbps) = r.busbw_gbps;
    }
    for (auto& [b, p] : by_size) c.points.push_back(p);
    for (const auto& h : heads) {
      if (h.gate.transport != name) continue;
      c.gate_bytes = h.gate.gate_bytes;
      c.gate_busbw = h.gate.busbw_gbps;
      c.gate_in_place = h.row && h.row->in_place;
      c.baseline_gbps = h.gate.baseline_gbps;
      c.degraded_ratio = h.gate.degraded_ratio;
      c.fail_ratio = h.gate.fail_ratio;
    }
    if (!c.points.empty()) out.push_back(std::move(c));
  }
  return out;
}

std::vector<FindingGroup> finding_groups(const std::vector<const HistoryFinding*>& fs,
                                         const RunIndex& idx) {
  std::vector<FindingGroup> out;
  std::unordered_map<std::string, std::size_t> at;
  std::unordered_map<std::size_t, std::unordered_set<std::string>> runs_of;
  for (const auto* f : fs) {  // oldest first
    std::string key = results::finding_dedupe_key(f->code, f->subject, f->message);
    auto [it, fresh] = at.try_emplace(key, out.size());
    if (fresh) {
      FindingGroup g;
      g.code = to_string(f->code);
      g.severity = to_string(f->severity);
      g.layer = to_string(f->layer);
      g.first_unix = f->started_unix;
      g.first_run_id = f->run_id;
      out.push_back(std::move(g));
    }
    FindingGroup& g = out[it->second];
    if (runs_of[it->second].insert(f->run_id).second) ++g.runs;
    g.message = f->message;
    g.last_unix = f->started_unix;
    g.last_run_id = f->run_id;
    if (results::severity_rank(f->severity) > results::severity_rank(results::parse_severity(g.severity).value_or(results::Severity::info)))
      g.severity = to_string(f->severity);
    for (int r : f->ranks)
      if (std::find(g.ranks.begin(), g.ranks.end(), r) == g.ranks.end()) g.ranks.push_back(r);
    for (const auto& h : f->hosts) add_unique(g.hosts, h);
    if (f->hosts.empty()) {  // the finding names no host: the run's hosts are the ones concerned
      auto r = idx.run.find(f->run_id);
      if (r != idx.run.end())
        for (const auto& h : r->second->hosts) add_unique(g.hosts, h);
    }
    add_unique(g.profiles, f->profile.empty() ? "(no profile)" : f->profile);
  }
  for (auto& g : out) std::sort(g.ranks.begin(), g.ranks.end());
  std::stable_sort(out.begin(), out.end(), [](const FindingGroup& a, const FindingGroup& b) {
    return a.last_unix > b.last_unix;
  });
  return out;
}

ClusterReport build_cluster(const std::string& cluster, const std::vector<const HistoryRun*>& runs,
                            const std::vector<const HistoryGate*>& gates,
                            const std::vector<const HistoryFinding*>& findings,
                            const ReportInput& in, const ReportOptions& options) {
  ClusterReport m;
  m.cluster = cluster;
  m.run_count = runs.size();
  for (results::Outcome v : results::kAllOutcomes) m.verdict_counts[v] = 0;
  RunIndex idx;
  for (const auto* r : runs) {
    m.verdict_counts[r->verdict] += 1;
    idx.run[r->run_id] = r;
  }
  if (!runs.empty()) {
    m.first_unix = m.last_unix = runs.front()->started_unix;
    for (const auto* r : runs) {
      m.first_unix = std::min(m.first_unix, r->started_unix);
      m.last_unix = std::max(m.last_unix, r->started_unix);
    }
  }
  for (const auto* f : findings)
    if (is_regression_code(f->code)) idx.regression[f->run_id].push_back(f);
  auto is_regression = [&](const std::string& run_id) { return idx.regression.count(run_id) != 0; };

  m.incidents = incidents_of(runs, gates, idx);
  std::unordered_set<std::string> in_incident;
  for (const auto& i : m.incidents) in_incident.insert(i.run_ids.begin(), i.run_ids.end());
  m.regression_runs = in_incident.size();

  // Series per (profile, transport, gate size).
  std::map<std::tuple<std::string, std::string, std::int64_t>, Series> series;
  for (const auto* gp : gates) {
    const auto& g = *gp;
    auto& s = series[{g.profile, g.transport, g.gate_bytes}];
    s.profile = g.profile;
    s.transport = g.transport;
    s.gate_bytes = g.gate_bytes;
    ChartPoint p;
    p.unix = g.started_unix;
    p.busbw_gbps = g.busbw_gbps;
    p.baseline_gbps = g.baseline_gbps;
    p.degraded_ratio = g.degraded_ratio;
    p.fail_ratio = g.fail_ratio;
    p.verdict = g.verdict;
    p.run_id = g.run_id;
    p.world_size = g.world_size;
    p.regression = is_regression(g.run_id) || in_incident.count(g.run_id) > 0;
    p.synthetic = g.synthetic;
    p.identity = g.identity;
    if (!std::isfinite(p.busbw_gbps)) ++s.not_measured;
    s.points.push_back(std::move(p));
  }
  for (auto& [key, s] : series) {
    std::stable_sort(s.points.begin(), s.points.end(),
                     [](const ChartPoint& a, const ChartPoint& b) { return a.unix < b.unix; });
    s.total_points = s.points.size();
    s.points = thin(s.points, options.max_points_per_series);
    m.series.push_back(std::move(s));
  }
  m.latest = latest_states(gates, runs);

  // The newest run's busbw-versus-size curves.
  // (the newest run with a stored verdict that has a curve: one that measured nothing has none)
  std::vector<const HistoryRun*> with_json;
  for (const auto* r : runs)
    if (in.verdicts.count(r->run_id)) with_json.push_back(r);
  std::stable_sort(with_json.begin(), with_json.end(), [](const HistoryRun* a, const HistoryRun* b) {
    return a->started_unix > b->started_unix;
  });
  for (const auto* r : with_json) {
    m.size_curves = size_curves_of(*r, in.verdicts.at(r->run_id));
    if (!m.size_curves.empty()) break;
  }

  // Timeline: one cell per run, or time buckets when there are more runs than cells.
  std::size_t max_cells = std::max<std::size_t>(1, options.max_timeline_cells);
  if (runs.size() <= max_cells) {
    for (const auto* r : runs) m.timeline.push_back(cell_of(*r, in_incident.count(r->run_id) > 0));
    std::stable_sort(m.timeline.begin(), m.timeline.end(),
                     [](const TimelineCell& a, const TimelineCell& b) { return a.t0 < b.t0; });
  } else {
    m.timeline_bucketed = true;
    std::vector<TimelineCell> cells(max_cells);
    double width = (m.last_unix - m.first_unix) / static_cast<double>(max_cells);
    for (const auto* r : runs) {
      std::size_t b =
          width > 0 ? static_cast<std::size_t>((r->started_unix - m.first_unix) / width) : 0;
      merge_into(cells[std::min(b, max_cells - 1)], *r, in_incident.count(r->run_id) > 0);
    }
    for (auto& c : cells)
      if (!c.counts.empty()) m.timeline.push_back(std::move(c));
  }

  // Findings, grouped; newest last-seen first, capped.
  m.findings_total = findings.size();
  std::vector<const HistoryFinding*> fs(findings.begin(), findings.end());
  std::stable_sort(fs.begin(), fs.end(), [](const HistoryFinding* a, const HistoryFinding* b) {
    return a->started_unix < b->started_unix;
  });
  auto groups = finding_groups(fs, idx);
  m.finding_groups_total = groups.size();
  if (groups.size() > options.max_findings_rows) groups.resize(options.max_findings_rows);
  m.findings = std::move(groups);
  return m;
}

}  // namespace

ReportModel build_model(const ReportInput& in, const ReportOptions& options) {
  ReportModel m;
  m.options = options;
  for (results::Outcome v : results::kAllOutcomes) m.verdict_counts[v] = 0;
  auto wanted = [&](const std::string& cluster) {
    if (options.cluster.empty()) return true;
    if (options.cluster == kDefaultCluster) return cluster.empty() || cluster == kDefaultCluster;
    return cluster == options.cluster;
  };
  // Rows per cluster. Gates and findings take their run's cluster (the row's own field may be
  // unset by an older history).
  std::unordered_map<std::string, const HistoryRun*> run_of;
  std::map<std::string, std::vector<const HistoryRun*>> runs;
  for (const auto& r : in.runs) {
    if (!wanted(r.cluster)) continue;
    run_of[r.run_id] = &r;
    runs[r.cluster].push_back(&r);
  }
  std::map<std::string, std::vector<const HistoryGate*>> gates;
  for (const auto& g : in.gates) {
    auto it = run_of.find(g.run_id);
    if (it != run_of.end()) gates[it->second->cluster].push_back(&g);
  }
  std::map<std::string, std::vector<const HistoryFinding*>> findings;
  for (const auto& f : in.findings) {
    auto it = run_of.find(f.run_id);
    if (it != run_of.end()) findings[it->second->cluster].push_back(&f);
  }
  bool first = true;
  for (auto& [cluster, rs] : runs) {  // std::map: "" first, then by name
    m.run_count += rs.size();
    for (const auto* r : rs) {
      m.verdict_counts[r->verdict] += 1;
      if (first) m.first_unix = m.last_unix = r->started_unix;
      first = false;
      m.first_unix = std::min(m.first_unix, r->started_unix);
      m.last_unix = std::max(m.last_unix, r->started_unix);
    }
    m.clusters.push_back(
        build_cluster(cluster, rs, gates[cluster], findings[cluster], in, options));
  }
  return m;
}

}  // namespace ncclsmoke::report
