#include "results/report/model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "results/report/scale.h"

namespace ncclsmoke::report {

using results::HistoryFinding;
using results::HistoryGate;
using results::HistoryRun;

ReportInput load_report_input(const results::History& history, const results::HistoryQuery& q) {
  ReportInput in;
  in.runs = history.runs(q);
  in.gates = history.gates(q);
  in.findings = history.findings(q);
  return in;
}

bool is_regression_code(const std::string& code) {
  for (const char* c : kRegressionCodes)
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

int verdict_rank(const std::string& verdict) {
  if (verdict == "pass") return 0;
  if (verdict == "inconclusive") return 1;
  if (verdict == "degraded") return 2;
  return 3;  // fail, and any unknown spelling: the worst case
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
    auto& pick = picks[b][static_cast<std::size_t>(verdict_rank(p.verdict))];
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
  if (verdict_rank(r.verdict) > verdict_rank(c.verdict)) c.verdict = r.verdict;
  c.run_id.clear();
  c.regression = c.regression || regression;
}

}  // namespace

ReportModel build_model(const ReportInput& in, const ReportOptions& options) {
  ReportModel m;
  m.options = options;
  m.run_count = in.runs.size();
  for (const char* v : kVerdicts) m.verdict_counts[v] = 0;
  for (const auto& r : in.runs) m.verdict_counts[r.verdict] += 1;
  if (!in.runs.empty()) {
    m.first_unix = m.last_unix = in.runs.front().started_unix;
    for (const auto& r : in.runs) {
      m.first_unix = std::min(m.first_unix, r.started_unix);
      m.last_unix = std::max(m.last_unix, r.started_unix);
    }
  }

  // Regressions: every run with a regression finding, newest first.
  std::unordered_map<std::string, std::vector<const HistoryFinding*>> regression_findings;
  for (const auto& f : in.findings)
    if (is_regression_code(f.code)) regression_findings[f.run_id].push_back(&f);
  std::unordered_map<std::string, std::vector<const HistoryGate*>> gates_by_run;
  for (const auto& g : in.gates)
    if (regression_findings.count(g.run_id)) gates_by_run[g.run_id].push_back(&g);
  for (auto it = in.runs.rbegin(); it != in.runs.rend(); ++it) {
    auto found = regression_findings.find(it->run_id);
    if (found == regression_findings.end()) continue;
    Regression reg;
    reg.run = *it;
    for (const auto* f : found->second) reg.findings.push_back(*f);
    for (const auto* g : gates_by_run[it->run_id]) reg.gates.push_back(*g);
    m.regressions.push_back(std::move(reg));
  }
  auto is_regression = [&](const std::string& run_id) {
    return regression_findings.count(run_id) != 0;
  };

  // Series per (profile, transport, gate size); latest state per (profile, transport).
  std::map<std::tuple<std::string, std::string, std::int64_t>, Series> series;
  std::map<std::pair<std::string, std::string>, std::vector<const HistoryGate*>> by_pt;
  for (const auto& g : in.gates) {
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
    p.regression = is_regression(g.run_id);
    p.synthetic = g.synthetic;
    p.identity = g.identity;
    if (!std::isfinite(p.busbw_gbps)) ++s.not_measured;
    s.points.push_back(std::move(p));
    if (!g.synthetic) by_pt[{g.profile, g.transport}].push_back(&g);
  }
  for (auto& [key, s] : series) {
    std::stable_sort(s.points.begin(), s.points.end(),
                     [](const ChartPoint& a, const ChartPoint& b) { return a.unix < b.unix; });
    s.total_points = s.points.size();
    s.points = thin(s.points, options.max_points_per_series);
    m.series.push_back(std::move(s));
  }
  for (auto& [key, gs] : by_pt) {
    std::stable_sort(gs.begin(), gs.end(), [](const HistoryGate* a, const HistoryGate* b) {
      return a->started_unix < b->started_unix;
    });
    const HistoryGate& g = *gs.back();
    LatestState st;
    st.profile = g.profile;
    st.transport = g.transport;
    st.gate_bytes = g.gate_bytes;
    st.world_size = g.world_size;
    st.busbw_gbps = g.busbw_gbps;
    st.baseline_gbps = g.baseline_gbps;
    st.degraded_ratio = g.degraded_ratio;
    st.fail_ratio = g.fail_ratio;
    st.ratio =
        (std::isfinite(g.busbw_gbps) && std::isfinite(g.baseline_gbps) && g.baseline_gbps > 0)
            ? g.busbw_gbps / g.baseline_gbps
            : std::numeric_limits<double>::quiet_NaN();
    st.state = gate_state(g.busbw_gbps, g.baseline_gbps, g.degraded_ratio, g.fail_ratio);
    st.latest_unix = g.started_unix;
    st.run_id = g.run_id;
    st.verdict = g.verdict;
    st.since_unix = g.started_unix;
    st.streak_runs = 0;
    // A regression's streak spans degraded and fail runs alike: "below the band since ...".
    auto streak_class = [](GateState g) { return g == GateState::fail ? GateState::degraded : g; };
    for (auto it = gs.rbegin(); it != gs.rend(); ++it) {
      const HistoryGate& h = **it;
      if (streak_class(gate_state(h.busbw_gbps, h.baseline_gbps, h.degraded_ratio, h.fail_ratio)) !=
          streak_class(st.state))
        break;
      st.since_unix = h.started_unix;
      ++st.streak_runs;
    }
    m.latest.push_back(std::move(st));
  }

  // Timeline: one cell per run, or time buckets when there are more runs than cells.
  std::size_t max_cells = std::max<std::size_t>(1, options.max_timeline_cells);
  if (in.runs.size() <= max_cells) {
    for (const auto& r : in.runs) m.timeline.push_back(cell_of(r, is_regression(r.run_id)));
    std::stable_sort(m.timeline.begin(), m.timeline.end(),
                     [](const TimelineCell& a, const TimelineCell& b) { return a.t0 < b.t0; });
  } else {
    m.timeline_bucketed = true;
    std::vector<TimelineCell> cells(max_cells);
    double width = (m.last_unix - m.first_unix) / static_cast<double>(max_cells);
    for (const auto& r : in.runs) {
      std::size_t b =
          width > 0 ? static_cast<std::size_t>((r.started_unix - m.first_unix) / width) : 0;
      merge_into(cells[std::min(b, max_cells - 1)], r, is_regression(r.run_id));
    }
    for (auto& c : cells)
      if (!c.counts.empty()) m.timeline.push_back(std::move(c));
  }

  // Findings table: newest first, capped.
  m.findings_total = in.findings.size();
  std::vector<const HistoryFinding*> fs;
  fs.reserve(in.findings.size());
  for (const auto& f : in.findings) fs.push_back(&f);
  std::stable_sort(fs.begin(), fs.end(), [](const HistoryFinding* a, const HistoryFinding* b) {
    return a->started_unix > b->started_unix;
  });
  for (std::size_t i = 0; i < fs.size() && i < options.max_findings_rows; ++i)
    m.findings.push_back(*fs[i]);
  return m;
}

}  // namespace ncclsmoke::report
