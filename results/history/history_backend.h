#pragma once
// The storage behind results::History (history.h): one small interface, one implementation per
// engine (history_sqlite.cpp: the embedded file; history_postgres.cpp: a shared server through
// libpq). Internal to results/: callers use History only.
//
// Every implementation keeps History's contract: add_stream is one transaction (all or nothing,
// also when the process dies mid-batch), a run_id already stored is a duplicate and a no-op,
// queries return oldest first (newest `limit` when set), NaN is stored as NULL and read back as
// NaN, and every error is a HistoryError whose what() names the history (a URL with its
// password redacted) and ends with the hint for its HistoryProblem.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <limits>
#include <vector>

#include "rendezvous/bounded_json.h"
#include "results/history/history.h"

namespace ncclsmoke::results::detail {

// A number the history does not have (no baseline, no measurement): NaN in rows, null in JSON.
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

class HistoryBackend {
 public:
  virtual ~HistoryBackend() = default;
  // `source`: each run's, unless `next` gives one of its own.
  virtual AddResult add_stream(const History::NextSourcedVerdict& next, const std::string& source,
                               const std::string& cluster) = 0;
  virtual std::int64_t prune(double before_unix, bool vacuum) = 0;
  virtual std::int64_t count_runs() = 0;
  virtual std::vector<HistoryRun> runs(const HistoryQuery& q) = 0;
  virtual std::vector<HistoryGate> gates(const HistoryQuery& q) = 0;
  virtual std::vector<HistoryFinding> findings(const HistoryQuery& q) = 0;
  virtual std::optional<nlohmann::json> verdict_json(const std::string& run_id) = 0;
};

// `name`: what messages call the history (the path; for a URL, redact_history_url's form).
std::unique_ptr<HistoryBackend> open_sqlite_history(const std::string& path, bool create,
                                                    int busy_timeout_ms);
std::unique_ptr<HistoryBackend> open_postgres_history(const std::string& url, bool create,
                                                      int timeout_ms);

// Shared by both: what a verdict puts in the columns.
std::string profile_of(const Verdict& v);
std::vector<std::string> hosts_of(const Verdict& v);
// started_at as seconds since the epoch; throws HistoryError(bad_verdict) naming `name` and the run.
double started_unix_of(const Verdict& v, const std::string& name);
// JSON array text ("[1,2]", "[\"a\"]") back to values; anything else gives {}.
std::vector<int> parse_int_array(const std::string& text);
std::vector<std::string> parse_string_array(const std::string& text);

// One row of runs / gates / findings, whichever backend read it: both SELECT these columns in
// this order, and `Row` answers text(c), real(c) (NaN for NULL), integer(c) and flag(c).
// The enumerated columns hold the schema's spelling (stored from validated verdicts); a text that
// is not one (a hand-edited database) reads as the worst value: fail, error, layer run. A finding
// code this build does not know keeps its text (AnyCode).
template <class Row>
HistoryRun run_from_row(const Row& s) {
  HistoryRun r;
  r.run_id = s.text(0);
  r.started_at = s.text(1);
  r.started_unix = s.real(2);
  r.duration_s = s.real(3);
  r.verdict = parse_outcome(s.text(4)).value_or(Outcome::fail);
  r.exit_code = static_cast<int>(s.integer(5));
  r.world_size = static_cast<int>(s.integer(6));
  r.profile = s.text(7);
  r.tool_version = s.text(8);
  r.hosts = parse_string_array(s.text(9));
  r.source = s.text(10);
  r.cluster = s.text(11);
  return r;
}

template <class Row>
HistoryGate gate_from_row(const Row& s) {
  HistoryGate g;
  g.run_id = s.text(0);
  g.started_unix = s.real(1);
  g.verdict = parse_outcome(s.text(2)).value_or(Outcome::fail);
  g.profile = s.text(3);
  g.world_size = static_cast<int>(s.integer(4));
  g.transport = s.text(5);
  g.gate_bytes = s.integer(6);
  g.busbw_gbps = s.real(7);
  g.baseline_gbps = s.real(8);
  g.degraded_ratio = s.real(9);
  g.fail_ratio = s.real(10);
  g.synthetic = s.flag(11);
  g.identity = s.text(12);
  g.cluster = s.text(13);
  return g;
}

template <class Row>
HistoryFinding finding_from_row(const Row& s) {
  HistoryFinding f;
  f.run_id = s.text(0);
  f.started_unix = s.real(1);
  f.profile = s.text(2);
  f.code = AnyCode::from_text(s.text(3));
  f.severity = parse_severity(s.text(4)).value_or(Severity::error);
  f.layer = parse_layer(s.text(5)).value_or(Layer::run);
  f.message = s.text(6);
  f.ranks = parse_int_array(s.text(7));
  f.hosts = parse_string_array(s.text(8));
  f.cluster = s.text(9);
  const std::string subject = s.text(10);
  if (!subject.empty()) f.subject = subject_from_json(
        rendezvous::parse_bounded_or_discarded(subject, rendezvous::kMaxSmallJsonBytes));
  return f;
}

}  // namespace ncclsmoke::results::detail
