#pragma once
// A verdict as Prometheus metrics (text exposition format 0.0.4), for the Pushgateway and for
// node-exporter's textfile collector. Every series carries `cluster` and `profile` labels (profile
// "none" when the run selected none — an empty label value would read as no label and break the
// alert rules' `by (cluster, profile)`). The same text goes to both sinks.
//
// Families (all gauges; names are a contract with cronjob/alerts/ and the dashboards — add,
// never rename):
//   ncclsmoke_verdict{verdict}                       1 for the run's verdict, 0 for the other three
//   ncclsmoke_exit_code                              the run's own exit code (0/1/3/4)
//   ncclsmoke_run_duration_seconds
//   ncclsmoke_world_size
//   ncclsmoke_ranks{status}                          ranks per status (joined/missing/lost/failed)
//   ncclsmoke_last_run_timestamp_seconds             when the run ended (started_at + duration)
//   ncclsmoke_last_success_timestamp_seconds         only when known: this run passed, or the
//                                                    caller found an earlier pass (history, the
//                                                    previous textfile). Absent otherwise, so an
//                                                    HTTP POST to the Pushgateway keeps the old one.
//   ncclsmoke_gate_busbw_bytes_per_second{transport,synthetic}   the number the judge compares
//   ncclsmoke_gate_baseline_bytes_per_second{transport,synthetic}
//   ncclsmoke_gate_ratio{transport,synthetic}        busbw / baseline
//   ncclsmoke_gate_degraded_ratio / _fail_ratio{transport,synthetic}   the baseline band's limits
//   ncclsmoke_gate_message_bytes{transport,synthetic} the gate's message size
//   ncclsmoke_transport_identity_info{transport,identity}   1; what carried the bytes
//   ncclsmoke_transport_status{transport,status}     1 for the transport phase's status, 0 others
//   ncclsmoke_findings{code,severity}                findings per (code, severity); 0 for every
//                                                    known code at its default severity and for
//                                                    the alerting codes (SILENT_FALLBACK,
//                                                    BANDWIDTH_REGRESSION, STRAGGLER) at error and
//                                                    warning, so alerts resolve instead of going
//                                                    stale
//   ncclsmoke_build_info{version}                    1; the version of the tool that ran
//   ncclsmoke_suspect_host{code,severity,host,node}  1 per (finding code, severity, host) that a
//                                                    finding names: the suspect node on the
//                                                    dashboard and in the alerts. `host` is the
//                                                    rank's hostname (in a pod: the pod's), `node`
//                                                    the Kubernetes node (RankInfo::node: NODE_NAME,
//                                                    else hostname) of the finding's ranks on that
//                                                    host, else of any rank of that host, else the
//                                                    host itself.
//                                                    Bounded: only hosts findings name, at most
//                                                    kMaxSuspectSeries, errors first, then
//                                                    warnings, then info. When no finding names a
//                                                    host: one series without code/severity/host/
//                                                    node, value 0 — a POST must carry the family,
//                                                    or the Pushgateway keeps the last run's hosts.
//   ncclsmoke_suspect_hosts_omitted                  the (code, severity, host) pairs over that
//                                                    limit (0 normally)
// HELP texts are part of the contract too: the Pushgateway rejects a push (HTTP 400) whose HELP
// differs from the same family's in another group, e.g. one pushed by an older version.
// A number that was not measured (NaN) is omitted, never written as 0 or NaN: a missing bandwidth
// must not read as "zero bandwidth" on a dashboard.
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "results/verdict/verdict.h"

namespace ncclsmoke::cronjob {

using Labels = std::vector<std::pair<std::string, std::string>>;

// The most ncclsmoke_suspect_host series one verdict yields (a cluster-wide outage that names
// every host must not become thousands of series per run).
inline constexpr std::size_t kMaxSuspectSeries = 64;

struct MetricsOptions {
  std::string cluster = "default";
  // Seconds since the epoch of the last passing run known from elsewhere (history, previous
  // textfile); NaN: unknown. Ignored when the verdict itself is a pass (its own end time wins),
  // and when older than nothing: the newer of the two is used.
  double last_success_unix = std::nan("");
};

// The profile the run was judged against (Verdict::baseline["profile"]); "" when none.
std::string verdict_profile(const results::Verdict& v);
// The label value for a profile: "none" for "".
std::string profile_label(const std::string& profile);
// When the run ended, seconds since the epoch: started_at + duration_s. NaN when started_at does
// not parse.
double run_end_unix(const results::Verdict& v);

// Label value escaping of the text format: backslash, double quote and newline.
std::string escape_label_value(const std::string& value);
// A sample value as the text format spells it: shortest round-trip decimal, NaN, +Inf, -Inf.
std::string format_value(double value);

// The exposition text for one verdict (HELP and TYPE lines, families in a fixed order).
std::string render_metrics(const results::Verdict& v, const MetricsOptions& options);

// The value of ncclsmoke_last_success_timestamp_seconds in a previously rendered text (e.g. the
// textfile left by the last run); NaN when absent or unreadable.
double last_success_from_text(const std::string& text);

}  // namespace ncclsmoke::cronjob
