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
#include "results/report/escape.h"
#include "results/report/scale.h"
#include "results/report/summary.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/ordering.h"

namespace ncclsmoke::report {

using results::HistoryFinding;
using results::HistoryGate;
using results::HistoryRun;

namespace {

// The hints of the findings groups, from the stored verdict of each group's newest run (newest
// groups first, at most max_runs verdicts read; a verdict read for one group gives the hints of
// every group it holds).
void load_hints(const results::History& history, ReportInput& in, std::size_t max_runs) {
  std::set<std::string> read;
  for (auto it = in.findings.rbegin(); it != in.findings.rend(); ++it) {  // newest first
    std::string key = finding_group_key(*it);
    if (in.hints.count(key) || read.count(it->run_id)) continue;
    if (read.size() >= max_runs) break;
    read.insert(it->run_id);
    std::optional<nlohmann::json> doc;
    if (auto v = in.verdicts.find(it->run_id); v != in.verdicts.end())
      doc = v->second;
    else
      doc = history.verdict_json(it->run_id);
    if (!doc || !doc->is_object()) continue;
    auto fs = doc->find("findings");
    if (fs == doc->end() || !fs->is_array()) continue;
    for (const auto& f : *fs) {
      try {
        if (!f.is_object() || !f.contains("code") || !f["code"].is_string()) continue;
        auto hint = f.find("hint");
        if (hint == f.end() || !hint->is_string() || hint->get<std::string>().empty()) continue;
        results::HistoryFinding hf;
        hf.code = results::AnyCode::from_text(f["code"].get<std::string>());
        hf.message = f.value("message", std::string());
        if (auto h = f.find("hosts"); h != f.end() && h->is_array())
          for (const auto& x : *h)
            if (x.is_string()) hf.hosts.push_back(x.get<std::string>());
        if (auto sj = f.find("subject"); sj != f.end() && sj->is_object())
          hf.subject = results::subject_from_json(*sj);
        in.hints.try_emplace(finding_group_key(hf), hint->get<std::string>());
      } catch (const std::exception&) {
        // a finding this build cannot read: no hint from it
      }
    }
  }
}

}  // namespace

ReportInput load_report_input(const results::History& history, const results::HistoryQuery& q,
                              std::size_t max_hint_runs) {
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
  load_hints(history, in, max_hint_runs);
  return in;
}

std::string cluster_label(const std::string& cluster) {
  return cluster.empty() ? kDefaultCluster : cluster;
}

results::Outcome ClusterReport::now_verdict() const {
  results::Outcome worst = results::Outcome::pass;
  auto worse = [&](results::Outcome v) {
    if (results::verdict_rank(v) > results::verdict_rank(worst)) worst = v;
  };
  for (const auto& n : now) worse(n.verdict);
  for (const auto& s : latest) {
    if (s.state == GateState::fail) worse(results::Outcome::fail);
    if (s.state == GateState::degraded) worse(results::Outcome::degraded);
  }
  return worst;
}

std::size_t ClusterReport::incidents_of(IncidentKind k) const {
  return static_cast<std::size_t>(std::count_if(
      incidents.begin(), incidents.end(), [k](const Incident& i) { return i.kind == k; }));
}

const char* to_string(IncidentKind k) {
  return k == IncidentKind::failure ? "failure" : "bandwidth";
}

std::string verdict_link(const ReportOptions& options, const results::HistoryRun& run) {
  if (!options.verdict_url.empty()) {
    const std::string id = url_escape(run.run_id);
    std::string out = options.verdict_url;
    const std::string token = "{run_id}";
    for (auto p = out.find(token); p != std::string::npos; p = out.find(token, p + id.size()))
      out.replace(p, token.size(), id);
    return out;
  }
  constexpr std::string_view kImport = "import:";
  if (run.source.rfind(kImport, 0) == 0 && run.source.size() > kImport.size() &&
      run.source[kImport.size()] == '/')
    return "file://" + url_escape(run.source.substr(kImport.size()), /*keep_slash=*/true);
  return "";
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

namespace {

std::string codes_text(const std::vector<results::AnyCode>& codes) {
  std::string out;
  for (const auto& c : codes) out += (out.empty() ? "" : ", ") + results::to_string(c);
  return out;
}

}  // namespace

std::string describe_now(const ProfileNow& n) {
  std::string out = results::to_string(n.verdict);
  if (!n.codes.empty()) out += ": " + codes_text(n.codes);
  if (n.streak_runs > 1)
    out += "; the latest " + std::to_string(n.streak_runs) + " runs, since " +
           format_utc(n.since_unix);
  return out;
}

namespace {
// ", ongoing for 3 h 18 min" / ", cleared after 2 h (2026-12-02 22:58 UTC)".
std::string incident_state_text(const Incident& i) {
  if (i.ongoing())
    return ", ongoing" +
           (i.duration_s() > 0 ? " for " + format_duration(i.duration_s()) : std::string());
  return ", cleared after " + format_duration(i.duration_s()) + " (" + format_utc(i.cleared_unix) +
         ")";
}
}  // namespace

std::string describe_incident(const Incident& i) {
  if (i.kind == IncidentKind::failure) {
    std::string out = (i.codes.empty() ? std::string("failed runs") : codes_text(i.codes)) +
                      " on " + profile_label(i.profile);
    if (!i.transport.empty()) out += " (" + i.transport + ")";
    out += ": " + std::to_string(i.runs()) + (i.runs() == 1 ? " run" : " runs") + " from " +
           format_utc(i.onset_unix);
    return out + incident_state_text(i);
  }
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
  return out + incident_state_text(i);
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

void add_unique(std::vector<results::AnyCode>& v, const results::AnyCode& c) {
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

}  // namespace

std::string finding_group_key(const HistoryFinding& f) {
  if (!f.subject.empty()) return results::finding_dedupe_key(f.code, f.subject, std::string());
  std::vector<std::string> hosts = f.hosts;
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  std::string key = results::to_string(f.code) + "\x1f\x1d" + transport_of(f) + '\x1d';
  for (const auto& h : hosts) key += h + '\x1f';
  return key;
}

namespace {

struct RunIndex {
  std::unordered_map<std::string, const HistoryRun*> run;
  // run_id -> regression findings
  std::unordered_map<std::string, std::vector<const HistoryFinding*>> regression;
  // run_id -> every finding of the run
  std::unordered_map<std::string, std::vector<const HistoryFinding*>> all;
  // run_id -> the transports it has gate rows for, and the ones its findings name
  std::unordered_map<std::string, std::set<std::string>> gated, named;
  // Is the run one of the key's runs: a gate row or a finding for the transport, or nothing
  // measured at all (it stopped before its transports)?
  bool of_key(const std::string& run_id, const std::string& transport) const {
    auto g = gated.find(run_id);
    auto n = named.find(run_id);
    bool any_g = g != gated.end() && !g->second.empty();
    bool any_n = n != named.end() && !n->second.empty();
    if (!any_g && !any_n) return true;
    return (any_g && g->second.count(transport)) || (any_n && n->second.count(transport));
  }
};

// `runs`: the cluster's runs; one of the key's runs (RunIndex::of_key) after its newest number
// counts as a run that did not measure it, whether it stored a row without a number or no row at
// all (the transport failed before its sweep, the run stopped before its transports).
std::vector<LatestState> latest_states(const std::vector<const HistoryGate*>& gates,
                                       const std::vector<const HistoryRun*>& runs,
                                       const RunIndex& idx) {
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
        if (!idx.of_key(r->run_id, g.transport)) continue;  // it did not ask for the transport
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
    st.shown = st.state;
    if (st.unmeasured_after > 0 &&
        (st.state == GateState::ok || st.state == GateState::no_baseline))
      st.shown = GateState::not_measured;  // never green over runs that measured nothing
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
          add_unique(inc.codes, x->code);
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

  // Failures: per profile, consecutive runs with an error finding of any other code (or a fail
  // verdict without any finding); the profile's next run without one clears the incident.
  std::vector<const HistoryRun*> by_time(runs.begin(), runs.end());
  std::stable_sort(by_time.begin(), by_time.end(), [](const HistoryRun* a, const HistoryRun* b) {
    return a->started_unix < b->started_unix;
  });
  struct Open {
    Incident inc;
    std::set<std::string> transports;  // named by its findings ("" for one naming none)
  };
  std::map<std::string, Open> failing;  // profile -> open incident
  auto close_failure = [&](Open& o) {
    if (o.transports.size() == 1 && !o.transports.begin()->empty())
      o.inc.transport = *o.transports.begin();
    std::sort(o.inc.ranks.begin(), o.inc.ranks.end());
    o.inc.ranks.erase(std::unique(o.inc.ranks.begin(), o.inc.ranks.end()), o.inc.ranks.end());
    out.push_back(std::move(o.inc));
  };
  std::unordered_set<std::string> bandwidth_runs;  // a fail they explain is not a failure
  for (const auto& i : out) bandwidth_runs.insert(i.run_ids.begin(), i.run_ids.end());
  for (const auto* r : by_time) {
    std::vector<const HistoryFinding*> errors;
    if (auto it = idx.all.find(r->run_id); it != idx.all.end())
      for (const auto* f : it->second)
        if (f->severity == results::Severity::error && !is_regression_code(f->code))
          errors.push_back(f);
    bool failed = !errors.empty() ||
                  (r->verdict == results::Outcome::fail && !idx.all.count(r->run_id) &&
                   !bandwidth_runs.count(r->run_id));
    auto o = failing.find(r->profile);
    if (!failed) {
      if (o != failing.end()) {
        o->second.inc.cleared_unix = r->started_unix;
        o->second.inc.cleared_run_id = r->run_id;
        close_failure(o->second);
        failing.erase(o);
      }
      continue;
    }
    if (o == failing.end()) {
      o = failing.emplace(r->profile, Open{}).first;
      Incident& inc = o->second.inc;
      inc.kind = IncidentKind::failure;
      inc.cluster = r->cluster;
      inc.profile = r->profile;
      inc.world_size = r->world_size;
      inc.onset_unix = r->started_unix;
      inc.first_run_id = r->run_id;
      inc.lowest_busbw = inc.baseline_gbps = inc.lowest_ratio = kNaN;
    }
    Incident& inc = o->second.inc;
    inc.run_ids.push_back(r->run_id);
    inc.last_run_id = r->run_id;
    inc.last_unix = r->started_unix;
    if (!inc.worst_verdict ||
        results::verdict_rank(r->verdict) > results::verdict_rank(*inc.worst_verdict))
      inc.worst_verdict = r->verdict;
    for (const auto* f : errors) {
      add_unique(inc.codes, f->code);
      for (const auto& h : f->hosts) add_unique(inc.hosts, h);
      inc.ranks.insert(inc.ranks.end(), f->ranks.begin(), f->ranks.end());
      o->second.transports.insert(transport_of(*f));
    }
    if (!errors.empty()) inc.message = errors.front()->message;
  }
  for (auto& [profile, o] : failing) close_failure(o);

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

// The hint of a finding group: the stored verdict's, else the finding table's template (its
// placeholders left as "<name>").
std::string hint_of(const std::string& key, const results::AnyCode& code, const ReportInput& in) {
  if (auto h = in.hints.find(key); h != in.hints.end()) return h->second;
  if (const auto* fc = results::find_code(code)) return results::fill_template(fc->hint, {});
  return "";
}

std::vector<FindingGroup> finding_groups(const std::vector<const HistoryFinding*>& fs,
                                         const RunIndex& idx, const ReportInput& in) {
  std::vector<FindingGroup> out;
  std::unordered_map<std::string, std::size_t> at;
  std::unordered_map<std::size_t, std::unordered_set<std::string>> runs_of;
  for (const auto* f : fs) {  // oldest first
    std::string key = finding_group_key(*f);
    auto [it, fresh] = at.try_emplace(key, out.size());
    if (fresh) {
      FindingGroup g;
      g.code = to_string(f->code);
      g.hint = hint_of(key, f->code, in);
      g.hosts_from_runs = true;
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
    if (!f->hosts.empty() && g.hosts_from_runs) {  // named hosts replace the runs' ones
      g.hosts.clear();
      g.hosts_from_runs = false;
    }
    for (const auto& h : f->hosts) add_unique(g.hosts, h);
    if (f->hosts.empty() && g.hosts_from_runs) {  // none named yet: the runs' hosts
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

// A run's error, then warning findings' codes (distinct), and its first such finding.
std::vector<results::AnyCode> codes_of_run(const RunIndex& idx, const std::string& run_id,
                                           const HistoryFinding** first = nullptr) {
  std::vector<results::AnyCode> out;
  auto it = idx.all.find(run_id);
  if (it == idx.all.end()) return out;
  for (results::Severity sev : {results::Severity::error, results::Severity::warning})
    for (const auto* f : it->second) {
      if (f->severity != sev) continue;
      if (first && !*first) *first = f;
      add_unique(out, f->code);
    }
  return out;
}

std::vector<const HistoryRun*> newest_first(const std::vector<const HistoryRun*>& runs) {
  std::vector<const HistoryRun*> out(runs.begin(), runs.end());
  std::stable_sort(out.begin(), out.end(), [](const HistoryRun* a, const HistoryRun* b) {
    return a->started_unix > b->started_unix;
  });
  return out;
}

// Per profile: its newest run, its verdict and why, and how long it has been so.
std::vector<ProfileNow> profile_nows(const std::vector<const HistoryRun*>& runs,
                                     const RunIndex& idx, const ReportInput& in,
                                     const ReportOptions& options) {
  std::map<std::string, std::vector<const HistoryRun*>> by_profile;
  for (const auto* r : newest_first(runs)) by_profile[r->profile].push_back(r);
  std::vector<ProfileNow> out;
  for (const auto& [profile, rs] : by_profile) {
    const HistoryRun& r = *rs.front();
    ProfileNow n;
    n.cluster = r.cluster;
    n.profile = profile;
    n.run_id = r.run_id;
    n.unix = r.started_unix;
    n.verdict = r.verdict;
    n.link = verdict_link(options, r);
    const HistoryFinding* first = nullptr;
    n.codes = codes_of_run(idx, r.run_id, &first);
    if (first) {
      n.message = first->message;
      n.hint = hint_of(finding_group_key(*first), first->code, in);
    }
    for (const auto* x : rs) {
      if (x->verdict != r.verdict) break;
      ++n.streak_runs;
      n.since_unix = x->started_unix;
    }
    out.push_back(std::move(n));
  }
  return out;
}

// The hosts findings (warnings and errors) named, by code; findings naming none under "".
std::vector<HostRow> host_rows(const std::vector<const HistoryRun*>& runs,
                               const std::vector<const HistoryFinding*>& findings,
                               std::vector<std::string>& codes_out) {
  struct Acc {
    HostRow row;
    std::set<std::string> runs;
    std::map<std::string, std::size_t> at;  // code -> index in row.codes
    std::map<std::string, std::set<std::string>> code_runs;
  };
  std::map<std::string, Acc> by_host;
  std::map<std::string, std::set<std::string>> code_runs;  // code -> runs naming some host
  for (const auto* f : findings) {
    if (f->severity == results::Severity::info) continue;
    std::vector<std::string> hosts = f->hosts;
    if (hosts.empty()) hosts.push_back("");
    const std::string code = to_string(f->code);
    for (const auto& h : hosts) {
      Acc& a = by_host[h];
      a.row.host = h;
      a.runs.insert(f->run_id);
      a.row.last_unix = std::max(a.row.last_unix, f->started_unix);
      auto [it, fresh] = a.at.try_emplace(code, a.row.codes.size());
      if (fresh) {
        HostCode c;
        c.code = code;
        c.severity = to_string(f->severity);
        c.first_unix = c.last_unix = f->started_unix;
        c.last_run_id = f->run_id;
        a.row.codes.push_back(std::move(c));
      }
      HostCode& c = a.row.codes[it->second];
      if (a.code_runs[code].insert(f->run_id).second) ++c.runs;
      code_runs[code].insert(f->run_id);
      if (results::severity_rank(f->severity) >
          results::severity_rank(
              results::parse_severity(c.severity).value_or(results::Severity::info)))
        c.severity = to_string(f->severity);
      c.first_unix = std::min(c.first_unix, f->started_unix);
      if (f->started_unix >= c.last_unix) {
        c.last_unix = f->started_unix;
        c.last_run_id = f->run_id;
      }
    }
  }
  std::map<std::string, std::size_t> present;
  for (const auto* r : runs)
    for (const auto& h : std::set<std::string>(r->hosts.begin(), r->hosts.end())) ++present[h];
  std::vector<HostRow> out;
  for (auto& [h, a] : by_host) {
    a.row.finding_runs = a.runs.size();
    a.row.runs_present = h.empty() ? 0 : present[h];
    std::stable_sort(a.row.codes.begin(), a.row.codes.end(),
                     [](const HostCode& x, const HostCode& y) { return x.runs > y.runs; });
    out.push_back(std::move(a.row));
  }
  std::stable_sort(out.begin(), out.end(), [](const HostRow& a, const HostRow& b) {
    if (a.host.empty() != b.host.empty()) return b.host.empty();  // the no-host row last
    if (a.finding_runs != b.finding_runs) return a.finding_runs > b.finding_runs;
    return a.codes.size() > b.codes.size();  // then the one with more codes; then by name
  });
  std::vector<std::pair<std::string, std::size_t>> codes;
  for (const auto& [c, rs] : code_runs) codes.emplace_back(c, rs.size());
  std::stable_sort(codes.begin(), codes.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  codes_out.clear();
  for (const auto& [c, n] : codes) codes_out.push_back(c);
  return out;
}

std::vector<RunRow> run_rows(const std::vector<const HistoryRun*>& runs, const RunIndex& idx,
                             const ReportOptions& options) {
  std::vector<RunRow> out;
  for (const auto* r : newest_first(runs)) {
    if (out.size() >= options.max_run_rows) break;
    RunRow row;
    row.run_id = r->run_id;
    row.unix = r->started_unix;
    row.duration_s = r->duration_s;
    row.verdict = r->verdict;
    row.profile = r->profile;
    row.world_size = r->world_size;
    row.hosts = r->hosts;
    row.codes = codes_of_run(idx, r->run_id);
    row.link = verdict_link(options, *r);
    out.push_back(std::move(row));
  }
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
  for (const auto* f : findings) {
    if (is_regression_code(f->code)) idx.regression[f->run_id].push_back(f);
    idx.all[f->run_id].push_back(f);
    if (std::string t = transport_of(*f); !t.empty()) idx.named[f->run_id].insert(t);
  }
  for (const auto* g : gates) idx.gated[g->run_id].insert(g->transport);
  auto is_regression = [&](const std::string& run_id) { return idx.regression.count(run_id) != 0; };

  m.incidents = incidents_of(runs, gates, idx);
  // "Regressed" on the charts and the timeline: runs of a bandwidth incident.
  std::unordered_set<std::string> in_incident, in_failure;
  for (const auto& i : m.incidents)
    (i.kind == IncidentKind::bandwidth ? in_incident : in_failure)
        .insert(i.run_ids.begin(), i.run_ids.end());
  m.regression_runs = in_incident.size();
  m.failure_runs = in_failure.size();

  m.now = profile_nows(runs, idx, in, options);
  m.hosts = host_rows(runs, findings, m.host_codes);
  m.run_rows = run_rows(runs, idx, options);

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
  m.latest = latest_states(gates, runs, idx);

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
  auto groups = finding_groups(fs, idx, in);
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
