#pragma once
// Baseline learning: proposes the `busbw_gbps` of profile bands from the run history, so that the
// numbers a profile holds are this cluster's own healthy figures instead of public or rough ones.
// Pure logic: the history's gates (as LearnGate) + profiles (profile.h) in; proposals, a diff text
// and the merged profiles (as YAML that load_profiles() reads back identically) out. The CLI
// (`ncclsmoke baseline learn`, harness/cli/baseline_command.cpp) does the file and database I/O and
// turns the history's rows into LearnGate / LearnFinding, so judging never includes the history.
//
// Rules:
// - Only gates of the selected profile count, from runs whose verdict is "pass" (and, with
//   include_degraded, "degraded" runs whose only warnings are BANDWIDTH_REGRESSION, read from
//   `degraded_findings`: degraded_only_by_bandwidth); synthetic rows (ranks
//   sharing a GPU) and non-finite or non-positive busbw are excluded and counted.
// - Gates are grouped per key (transport, world_size, gate_bytes). Per key, the newest `last`
//   runs (by start time) are used; busbw_gbps = their median, rounded to 4 significant digits.
//   A key with fewer than `min_runs` runs is reported as "not enough runs (n of N)" and not
//   proposed.
// - Tolerances (degraded_ratio, fail_ratio) are kept from the file's band for that transport and
//   world size (the exact world size, else the "any world size" band), else the defaults of
//   BaselineBand. source = "learned: median of N passing runs <first>..<last> (ncclsmoke baseline
//   learn)", first/last being the runs' start times (UTC).
// - The profile model holds one band per (transport, world size). When the history holds several
//   gate sizes for one (transport, world size), the one the file already uses wins, else the one
//   with the most runs (ties: the larger gate); the others are reported as not written.
// - A transport the profile lacks is added with `required: false`, so runs that do not measure it
//   are not made inconclusive by the new entry; the diff says so.
// - Bands of the file the history has no runs for are kept unchanged and listed.
//
// Why "passing runs" only: a run that regressed must not teach the baseline its regression. The
// price: a run judged degraded ONLY because the file's baseline is wrong (too high) is excluded
// too, so a bad baseline cannot be learned away from such runs. include_degraded admits degraded
// runs whose only warning findings are BANDWIDTH_REGRESSION (see degraded_only_by_bandwidth());
// a degraded run with any other warning (STRAGGLER, a suspected SILENT_FALLBACK ...) stays out.
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "results/judging/profile.h"
#include "results/verdict/enums.h"

namespace ncclsmoke::results {

class LearnError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One gate of one stored run: the fields of the history's gate row (results/history/history.h
// HistoryGate) that learning reads. busbw_gbps NaN: not measured.
struct LearnGate {
  std::string run_id;
  double started_unix = 0;
  Outcome verdict = Outcome::inconclusive;  // the run's verdict
  std::string profile;
  int world_size = 0;
  std::string transport;
  std::int64_t gate_bytes = 0;
  double busbw_gbps = 0;
  bool synthetic = false;  // ranks shared a device: never learned from
};

// One stored finding, as degraded_only_by_bandwidth() reads it (HistoryFinding's run, code and
// severity).
struct LearnFinding {
  std::string run_id;
  AnyCode code;
  Severity severity = Severity::error;
};

struct LearnOptions {
  std::string profile;                       // required: the profile to learn for
  int last = 10;                             // newest passing runs used per key, >= 1
  int min_runs = 3;                          // fewer runs for a key: not proposed, >= 1
  bool include_degraded = false;
  // The stored findings of the degraded runs (with include_degraded): the rule picks which count.
  std::vector<LearnFinding> degraded_findings;
};

struct LearnKey {
  std::string transport;
  int world_size = 0;
  std::int64_t gate_bytes = 0;
  auto operator<=>(const LearnKey&) const = default;
};

struct Proposal {
  enum class Status {
    kChanged,     // the file has a band for (transport, world size): busbw replaced
    kNew,         // the file has no band for (transport, world size) (maybe not the transport)
    kNotEnough,   // fewer than min_runs runs: not proposed
    kNotWritten,  // another gate size of the same (transport, world size) was chosen
  };
  LearnKey key;
  Status status = Status::kNew;
  int runs = 0;                        // runs used (at most `last`)
  int runs_available = 0;              // runs in the history for this key (before `last`)
  std::vector<std::string> run_ids;    // the runs used, oldest first
  double first_unix = 0, last_unix = 0;
  double median_gbps = 0, min_gbps = 0, max_gbps = 0;
  bool has_current = false;            // the file's band that applies to this key now
  int current_world_size = 0;          // its key (the exact world size or 0 = any)
  BaselineBand current;
  BaselineBand proposed;               // valid unless kNotEnough
  bool new_transport = false;          // the profile did not name the transport
};

// A band of the file that no proposal replaces (kept unchanged in the merged file).
struct KeptBand {
  std::string transport;
  int world_size = 0;  // 0 = any
  BaselineBand band;
};

struct LearnResult {
  std::string profile;
  int last = 0, min_runs = 0;       // the options used
  std::vector<Proposal> proposals;  // sorted by key
  std::vector<KeptBand> kept;       // bands of the profile the history has no runs for
  std::vector<Profile> merged;      // every profile of the file, the selected one updated
  int gates_used = 0;               // gates of accepted runs that entered some key's group
  int runs_accepted = 0;            // distinct accepted runs
  int excluded_verdict = 0;         // gates of runs with a verdict that does not count
  int excluded_synthetic = 0;
  int excluded_unmeasured = 0;      // NaN / infinite / <= 0 busbw, or no gate size
  int excluded_other_profile = 0;
  int written() const;              // proposals with status kChanged or kNew
};

// The median (mean of the middle two for an even count). Throws LearnError when empty.
double median(std::vector<double> values);

// Runs (ids) whose findings make them "degraded only because of bandwidth": every warning or
// error finding of the run is BANDWIDTH_REGRESSION of severity warning. Findings of one run share
// a run_id; runs with no findings at all are not listed (they are not degraded).
std::set<std::string> degraded_only_by_bandwidth(const std::vector<LearnFinding>& findings);

// Throws LearnError when the profile is not in `profiles` (the message names it and lists the
// profiles there) or when the options are out of range.
LearnResult learn_baselines(const std::vector<LearnGate>& gates,
                            const std::vector<Profile>& profiles, const LearnOptions& options);

// The human diff: per key current -> proposed busbw with the % change, "new", "not enough runs
// (n of N)", "not written", and the kept bands the history has no runs for. `profiles_file`
// names the file in the heading.
std::string diff_text(const LearnResult& r, const std::string& profiles_file);

// Profiles as YAML in the shape profile.h documents: strings double-quoted (so "1.0" stays a
// string), numbers plain, world_size 0 and `required: true` omitted. `header` (may be empty) is
// written as comment lines at the top. load_profiles(profiles_to_yaml(p)) == p.
std::string profiles_to_yaml(const std::vector<Profile>& profiles, const std::string& header);

// The merged YAML of a result, checked: it is loaded back with load_profiles() and compared with
// r.merged; a difference throws LearnError (so a file that would not read back is never written).
std::string merged_yaml(const LearnResult& r, const std::string& header);

// Value equality of profiles (every field, bands compared exactly).
bool same_profiles(const std::vector<Profile>& a, const std::vector<Profile>& b);

// "2026-11-30T01:02:03Z" (UTC, whole seconds).
std::string utc_time(double unix_seconds);

}  // namespace ncclsmoke::results
