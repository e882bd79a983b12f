#pragma once
// What the regression report shows, computed from the history rows of one window before any
// rendering, per cluster (a fleet's report has one section per cluster; runs stored without a
// cluster form the "default" one): counts by verdict; where each profile stands now (its newest
// run's verdict: a failing latest run is never shown green); the incidents - bandwidth
// regressions (consecutive regressed runs of one (cluster, transport, profile, gate size)) and
// failures (consecutive runs of one (cluster, profile) with an error finding of any other code:
// RANKS_MISSING, TRANSPORT_INIT_FAILED, ...), each with onset, runs, hosts, codes and the run that
// cleared it, one entry per step change, never one per run; where each (profile, transport)
// stands now; the hosts named by findings, by code; the runs with a link to each verdict; busbw
// series per (profile, transport, gate size); a busbw-versus-size curve of the cluster's latest
// run against its baseline band; the verdict timeline; the findings grouped by code and subject
// (never by message text), each with its hint. The HTML and Markdown renderers only format this
// model.
//
// A (profile, transport) key's bandwidth state is sticky: a run that measured nothing for it
// (transport failed, gate size not in the sweep, the run stopped before its transports) does not
// change the state; only a run that measures the key again does. But an "ok" the newest runs of
// the key did not measure again is shown as not measured, never green. A run belongs to a key
// when it has a gate row or a finding for the transport, or when it measured nothing at all; a
// run that measured other transports only (it did not ask for this one) is not the key's.
//
// Scale: a window can hold 10,000+ runs, so the model aggregates what a reader cannot see anyway
// - chart points are thinned to at most `max_points_per_series` (per time bucket and verdict the
// lowest and highest busbw are kept), timeline cells are merged into time buckets coloured by their
// worst verdict, the findings table keeps the newest `max_findings_rows` groups - but never drops a
// regression: every regression run belongs to an incident and its points stay on the charts.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/history/history.h"
#include "results/verdict/enums.h"

namespace ncclsmoke::report {

// The rows one report is made of, oldest first, as History::runs/gates/findings return them.
struct ReportInput {
  std::vector<results::HistoryRun> runs;
  std::vector<results::HistoryGate> gates;
  std::vector<results::HistoryFinding> findings;
  // Stored verdict JSON (History::verdict_json) by run_id: at least each cluster's newest run,
  // for the busbw-versus-size curves. A run missing here simply has no curve.
  std::map<std::string, nlohmann::json> verdicts;
  // The hint of each finding group (finding_group_key), from the stored verdict of its newest
  // run (history rows keep no hint). A group missing here gets the finding table's hint.
  std::map<std::string, std::string> hints;
};

// Reads the window `q` (since/profile/cluster) from the history, the verdict JSON of each
// cluster's newest run, and the hints of the findings (from the newest run of each group, at
// most `max_hint_runs` verdicts read): the only way data enters the report.
ReportInput load_report_input(const results::History& history, const results::HistoryQuery& q,
                              std::size_t max_hint_runs = 400);

struct ReportOptions {
  std::string title = "ncclsmoke regression report";
  double since_unix = 0;     // start of the window (for the "no runs since ..." line)
  std::string since_text;    // as the user gave it, e.g. "14d" ("" to omit)
  double now_unix = 0;       // when the report is made
  std::string profile;       // "" all profiles
  std::string cluster;       // "" all clusters; "default" also matches runs without a cluster
  std::string history_path;  // shown in the page's header ("" to omit)
  // Where each run's verdict can be read: "{run_id}" is replaced by the run id (URL-escaped),
  // e.g. "https://ci.example/ncclsmoke/{run_id}.json". "" : the file an import read it from
  // (HistoryRun::source "import:<path>"), as a file:// link; none when the history has no path.
  std::string verdict_url;
  std::size_t max_run_rows = 200;  // the run list: the newest this many
  std::size_t max_points_per_series = 400;
  std::size_t max_timeline_cells = 360;
  std::size_t max_findings_rows = 1000;
};

// "default" for runs stored without a cluster, else the name.
std::string cluster_label(const std::string& cluster);
inline constexpr const char* kDefaultCluster = "default";

// The link to a run's verdict (ReportOptions::verdict_url, else the imported file), "" none.
std::string verdict_link(const ReportOptions& options, const results::HistoryRun& run);

// What groups findings across runs and ranks: the code and the subject (results::
// finding_dedupe_key without the message); a finding stored without a subject groups by its
// code, its transport and the hosts it names - never by the message text, so "1 of 3 ranks never
// joined" and "1 of 2 ranks never joined" are one row.
std::string finding_group_key(const results::HistoryFinding& f);

// Finding codes that make a run a regression.
inline constexpr results::Code kRegressionCodes[] = {results::Code::BANDWIDTH_REGRESSION,
                                                     results::Code::SILENT_FALLBACK};
bool is_regression_code(const results::AnyCode& code);  // false for every unknown code

// Where one gate number sits against its baseline band.
enum class GateState { ok, degraded, fail, no_baseline, not_measured };
GateState gate_state(double busbw, double baseline, double degraded_ratio, double fail_ratio);
const char* to_string(GateState s);  // "ok" "degraded" "fail" "no-baseline" "not-measured"

// Verdicts are results::Outcome: listed in results::kAllOutcomes' order (enums.h), and the worst
// of several (a timeline cell, an incident) is the one results::verdict_rank (ordering.h) ranks
// highest, the order merge and classify use too.

struct ChartPoint {
  double unix = 0;
  double busbw_gbps = 0;     // NaN: the run has no number at the gate size
  double baseline_gbps = 0;  // NaN: no band
  double degraded_ratio = 0;
  double fail_ratio = 0;
  results::Outcome verdict = results::Outcome::pass;
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
  std::string cluster;
  std::string profile;
  std::string transport;
  std::int64_t gate_bytes = 0;
  int world_size = 0;
  double busbw_gbps = 0;     // NaN: not measured in the latest run
  double baseline_gbps = 0;  // NaN: no band
  double ratio = 0;          // busbw / baseline, NaN when either is
  double degraded_ratio = 0;
  double fail_ratio = 0;
  GateState state = GateState::no_baseline;  // of the newest run that measured the key
  // What the report shows: `state`, except an ok (or no-baseline) number that the key's newest
  // runs did not measure again is not_measured: a run that failed is never shown green.
  GateState shown = GateState::no_baseline;
  double latest_unix = 0;   // the key's newest run (measured or not; see the top of this file)
  std::string run_id;       // that run
  results::Outcome verdict = results::Outcome::pass;  // its verdict
  double measured_unix = 0; // the newest run that measured it (== latest_unix when it did)
  std::string measured_run_id;
  std::size_t unmeasured_after = 0;  // runs after that one without a number (sticky state)
  // First run of the streak this state belongs to: consecutive measuring runs in the same state,
  // where degraded and fail count as one ("below the band since ..."), and the runs in it; runs
  // that measured nothing neither break nor extend it.
  double since_unix = 0;
  std::size_t streak_runs = 0;
};

// kind bandwidth: consecutive regressed runs of one (cluster, profile, transport, gate size): a
// run is regressed for the key when its gate number is below the degraded threshold or it has a
// regression finding about the transport. A run that measures the key within the band ends the
// incident; a run that measured nothing neither ends nor extends it.
// kind failure: consecutive runs of one (cluster, profile) with an error finding whose code is
// not a regression code (RANKS_MISSING, TRANSPORT_INIT_FAILED, MESH_BLOCKED, ...; or a fail
// verdict without any finding); the profile's next run without one clears it.
enum class IncidentKind { bandwidth, failure };
const char* to_string(IncidentKind k);  // "bandwidth" "failure"

struct Incident {
  IncidentKind kind = IncidentKind::bandwidth;
  std::string cluster, profile;
  std::string transport;        // failure: the transport every finding names, else ""
  std::int64_t gate_bytes = 0;  // 0: the regression had no gate row (finding only), a failure
  int world_size = 0;
  double onset_unix = 0;        // first regressed run
  double last_unix = 0;         // last regressed run
  double cleared_unix = 0;      // the run that measured it back in the band; 0: ongoing
  std::string first_run_id, last_run_id, cleared_run_id;
  std::vector<std::string> run_ids;  // every regressed run, oldest first
  // bandwidth: the runs' hosts and the findings' united; failure: the hosts its findings name
  // (first-appearance order)
  std::vector<std::string> hosts;
  std::vector<int> ranks;            // failure: the ranks its findings name (sorted)
  std::vector<results::AnyCode> codes;  // codes seen (BANDWIDTH_REGRESSION, RANKS_MISSING, ...)
  std::string message;               // the newest finding's message ("" none)
  std::optional<results::Outcome> worst_verdict;  // of the regressed runs (none: no run row)
  double lowest_busbw = 0;           // NaN: no number
  double baseline_gbps = 0;          // of the lowest run; NaN none
  double lowest_ratio = 0;           // NaN without both
  bool ongoing() const { return cleared_unix == 0; }
  std::size_t runs() const { return run_ids.size(); }
  // Until cleared (or, ongoing, until the last regressed run).
  double duration_s() const { return (ongoing() ? last_unix : cleared_unix) - onset_unix; }
};

// busbw versus message size of one transport in one run (the world rows, as nccl-tests prints
// them), with the band the run was judged against and the headline gate row marked.
struct SizePoint {
  std::int64_t bytes = 0;
  double out_gbps = 0;  // out-of-place busbw; NaN absent
  double in_gbps = 0;   // in-place busbw; NaN absent
};
struct SizeCurve {
  std::string cluster, profile, transport, run_id;
  results::Outcome verdict = results::Outcome::pass;
  double unix = 0;
  int world_size = 0;
  std::vector<SizePoint> points;  // ascending size
  bool synthetic = false;
  // The headline: results::gate_headlines (gates_of): busbw at the gate size, lower of out/in.
  std::int64_t gate_bytes = 0;
  double gate_busbw = 0;         // NaN: not measured
  bool gate_in_place = false;    // which row the headline number comes from
  double baseline_gbps = 0, degraded_ratio = 0, fail_ratio = 0;  // NaN: no band
};

// The same finding across runs: code + subject, or code + message for a row stored before
// subjects (results::finding_dedupe_key); hosts filled from the run when the finding names none.
struct FindingGroup {
  std::string code, severity, layer;
  std::string message;  // the newest occurrence's
  std::string hint;     // its hint (ReportInput::hints, else the finding table's)
  std::size_t runs = 0;
  double first_unix = 0, last_unix = 0;
  std::string first_run_id, last_run_id;
  std::vector<int> ranks;
  std::vector<std::string> hosts;
  bool hosts_from_runs = false;  // no occurrence named a host: `hosts` are its runs' hosts
  std::vector<std::string> profiles;
};

struct TimelineCell {
  double t0 = 0, t1 = 0;  // first and last run in the cell
  results::Outcome verdict = results::Outcome::pass;  // the worst verdict in the cell
  std::map<results::Outcome, int> counts;
  std::string run_id;       // when the cell is one run
  bool regression = false;  // some run in the cell is a regression
};

// Where one (cluster, profile) stands now: its newest run, and why that run is not a pass.
struct ProfileNow {
  std::string cluster, profile;
  std::string run_id;
  double unix = 0;
  results::Outcome verdict = results::Outcome::pass;
  std::vector<results::AnyCode> codes;  // its error, then warning findings' codes (distinct)
  std::string message;  // its first error finding's message (else first warning's; "" none)
  std::string hint;     // that finding's hint
  std::string link;     // verdict_link
  // The newest runs of the profile with this same verdict: how many, since when.
  std::size_t streak_runs = 0;
  double since_unix = 0;
};

// A host named by findings over the window: per code, the runs that named it.
struct HostCode {
  std::string code;
  std::string severity;  // the worst seen
  std::size_t runs = 0;
  double first_unix = 0, last_unix = 0;
  std::string last_run_id;
};
struct HostRow {
  std::string host;          // "": findings that named no host (RANKS_MISSING: it never joined)
  std::size_t runs_present = 0;  // runs the host took part in (HistoryRun::hosts)
  std::size_t finding_runs = 0;  // runs with some finding (warning or error) naming it
  double last_unix = 0;
  std::vector<HostCode> codes;   // most runs first
};

// One run in the run list.
struct RunRow {
  std::string run_id;
  double unix = 0;
  double duration_s = 0;
  results::Outcome verdict = results::Outcome::pass;
  std::string profile;
  int world_size = 0;
  std::vector<std::string> hosts;
  std::vector<results::AnyCode> codes;  // error, then warning findings' codes (distinct)
  std::string link;                     // verdict_link ("" none)
};

// One cluster's part of the report.
struct ClusterReport {
  std::string cluster;  // as stored ("" runs without a cluster: shown as "default")
  std::size_t run_count = 0;
  std::map<results::Outcome, int> verdict_counts;  // every Outcome, 0 for none
  double first_unix = 0, last_unix = 0;
  std::vector<ProfileNow> now;           // per profile, sorted by profile
  std::vector<Incident> incidents;       // both kinds, newest onset first, every one
  std::size_t regression_runs = 0;       // runs in some bandwidth incident
  std::size_t failure_runs = 0;          // runs in some failure incident
  std::vector<LatestState> latest;       // sorted by profile, transport
  std::vector<HostRow> hosts;            // most finding runs first; the "" row (no host) last
  std::vector<std::string> host_codes;   // the codes of `hosts`, most runs first (the columns)
  std::vector<RunRow> run_rows;          // newest first, at most max_run_rows
  std::vector<Series> series;            // sorted by profile, transport, gate size
  std::vector<SizeCurve> size_curves;    // the newest run's, per transport
  std::vector<TimelineCell> timeline;    // oldest first
  bool timeline_bucketed = false;        // cells merge several runs
  std::vector<FindingGroup> findings;    // newest last-seen first, at most max_findings_rows
  std::size_t finding_groups_total = 0;
  std::size_t findings_total = 0;        // rows before grouping
  bool regressed_now() const;            // some latest state is degraded or fail
  // The worst of each profile's newest verdict and each key's bandwidth state (degraded, fail):
  // pass only when every profile's newest run passed and no key is below its band.
  results::Outcome now_verdict() const;
  std::size_t ongoing_incidents() const;
  std::size_t incidents_of(IncidentKind k) const;
};

struct ReportModel {
  ReportOptions options;
  std::size_t run_count = 0;                  // fleet-wide
  std::map<results::Outcome, int> verdict_counts;  // fleet-wide; every Outcome, 0 for none
  double first_unix = 0, last_unix = 0;       // of the runs in the window
  std::vector<ClusterReport> clusters;        // by name; "" (default) first
};

ReportModel build_model(const ReportInput& in, const ReportOptions& options);

// "socket on ci-loopback: 0.31 GB/s at 64 MiB, 42% of baseline 0.74" (no escaping: callers do);
// sticky: "...; not measured in the latest 2 runs" when the newest runs had no number.
std::string describe_latest(const LatestState& s);
// "socket on ci-loopback at 64 MiB: 12 runs from 2026-11-28 10:00 UTC, lowest 0.15 GB/s (20% of
// baseline 0.74), ongoing for 5 h 30 min" / "..., cleared after 3 h (2026-11-28 13:00 UTC)";
// a failure: "RANKS_MISSING on ci-loopback: 3 runs from ..., ongoing for 1 h" (no escaping).
std::string describe_incident(const Incident& i);
// "fail: TRANSPORT_INIT_FAILED, RANKS_MISSING; failing for 2 runs since 2026-11-28 10:00 UTC"
// (no escaping).
std::string describe_now(const ProfileNow& n);
// "(no profile)" for "", else the name.
std::string profile_label(const std::string& profile);

}  // namespace ncclsmoke::report
