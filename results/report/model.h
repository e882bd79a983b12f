#pragma once
// What the regression report shows, computed from the history rows of one window before any
// rendering: counts by verdict, the regressions (runs whose findings include BANDWIDTH_REGRESSION
// or SILENT_FALLBACK), the latest state per (profile, transport), busbw series per (profile,
// transport, gate size), the verdict timeline and the findings table. The HTML and Markdown
// renderers (html_report.h, markdown_report.h) only format this model.
//
// Scale: a window can hold 10,000+ runs, so the model aggregates what a reader cannot see anyway
// - chart points are thinned to at most `max_points_per_series` (per time bucket and verdict the
// lowest and highest busbw are kept), timeline cells are merged into time buckets coloured by their
// worst verdict, the findings table keeps the newest `max_findings_rows` - but never drops a
// regression: every regression run stays in `regressions` and its points stay on the charts.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "results/history.h"

namespace ncclsmoke::report {

// The rows one report is made of, oldest first, as History::runs/gates/findings return them.
struct ReportInput {
  std::vector<results::HistoryRun> runs;
  std::vector<results::HistoryGate> gates;
  std::vector<results::HistoryFinding> findings;
};

// Reads the window `q` (since/profile) from the history: the only way data enters the report.
ReportInput load_report_input(const results::History& history, const results::HistoryQuery& q);

struct ReportOptions {
  std::string title = "ncclsmoke regression report";
  double since_unix = 0;     // start of the window (for the "no runs since ..." line)
  std::string since_text;    // as the user gave it, e.g. "14d" ("" to omit)
  double now_unix = 0;       // when the report is made
  std::string profile;       // "" all profiles
  std::string history_path;  // shown in the page's header ("" to omit)
  std::size_t max_points_per_series = 400;
  std::size_t max_timeline_cells = 360;
  std::size_t max_findings_rows = 1000;
};

// Finding codes that make a run a regression.
inline constexpr const char* kRegressionCodes[] = {"BANDWIDTH_REGRESSION", "SILENT_FALLBACK"};
bool is_regression_code(const std::string& code);

// Where one gate number sits against its baseline band.
enum class GateState { ok, degraded, fail, no_baseline, not_measured };
GateState gate_state(double busbw, double baseline, double degraded_ratio, double fail_ratio);
const char* to_string(GateState s);  // "ok" "degraded" "fail" "no-baseline" "not-measured"

// The verdict spellings in display order, and the severity order used to merge (fail worst).
inline constexpr const char* kVerdicts[] = {"pass", "degraded", "fail", "inconclusive"};
int verdict_rank(
    const std::string& verdict);  // pass 0, inconclusive 1, degraded 2, fail 3 (other: 3)

struct ChartPoint {
  double unix = 0;
  double busbw_gbps = 0;     // NaN: the run has no number at the gate size
  double baseline_gbps = 0;  // NaN: no band
  double degraded_ratio = 0;
  double fail_ratio = 0;
  std::string verdict;
  std::string run_id;
  int world_size = 0;
  bool regression = false;  // the run is in ReportModel::regressions
  bool synthetic = false;
  std::string identity;
};

// busbw over time of one (profile, transport, gate size).
struct Series {
  std::string profile;
  std::string transport;
  std::int64_t gate_bytes = 0;
  std::vector<ChartPoint> points;  // oldest first, after thinning
  std::size_t total_points = 0;    // before thinning
  std::size_t not_measured = 0;    // points with a NaN busbw (before thinning)
};

struct LatestState {
  std::string profile;
  std::string transport;
  std::int64_t gate_bytes = 0;
  int world_size = 0;
  double busbw_gbps = 0;     // NaN: not measured in the latest run
  double baseline_gbps = 0;  // NaN: no band
  double ratio = 0;          // busbw / baseline, NaN when either is
  double degraded_ratio = 0;
  double fail_ratio = 0;
  GateState state = GateState::no_baseline;
  double latest_unix = 0;
  std::string run_id;
  std::string verdict;  // the latest run's verdict
  // First run of the streak this state belongs to: consecutive runs in the same state, where
  // degraded and fail count as one ("below the band since ..."), and the runs in it.
  double since_unix = 0;
  std::size_t streak_runs = 0;
};

struct Regression {
  results::HistoryRun run;
  std::vector<results::HistoryFinding> findings;  // the BANDWIDTH_REGRESSION/SILENT_FALLBACK ones
  std::vector<results::HistoryGate> gates;        // the run's gate numbers
};

struct TimelineCell {
  double t0 = 0, t1 = 0;  // first and last run in the cell
  std::string verdict;    // the worst verdict in the cell
  std::map<std::string, int> counts;
  std::string run_id;       // when the cell is one run
  bool regression = false;  // some run in the cell is a regression
};

struct ReportModel {
  ReportOptions options;
  std::size_t run_count = 0;
  std::map<std::string, int> verdict_counts;
  double first_unix = 0, last_unix = 0;           // of the runs in the window
  std::vector<Regression> regressions;            // newest first, every one
  std::vector<LatestState> latest;                // sorted by profile, transport
  std::vector<Series> series;                     // sorted by profile, transport, gate size
  std::vector<TimelineCell> timeline;             // oldest first
  bool timeline_bucketed = false;                 // cells merge several runs
  std::vector<results::HistoryFinding> findings;  // newest first, at most max_findings_rows
  std::size_t findings_total = 0;
};

ReportModel build_model(const ReportInput& in, const ReportOptions& options);

// "socket on ci-loopback: 0.31 GB/s at 64 MiB, 42% of baseline 0.74" (no escaping: callers do).
std::string describe_latest(const LatestState& s);
// "(no profile)" for "", else the name.
std::string profile_label(const std::string& profile);

}  // namespace ncclsmoke::report
