#pragma once
// The human summary printed on stdout: what an on-call engineer reads first.
//
//   ncclsmoke fail (exit 1): run 20240501T101500Z-3fa9c2d1, global, 4 ranks, 2 findings, 10.4 s
//   host-a | OK
//   host-b | ERROR: rank 1 could not reach master:29500 within 10.0 s [RENDEZVOUS_TIMEOUT]
//   (run)  | WARNING: ... [BASELINE_MISSING]
//
//   phase       status  seconds
//   rendezvous  fail      10.02
//
//   hints:
//     RENDEZVOUS_TIMEOUT: Allow TCP master:29500 from every node ...
//
// Hosts come from ranks[] (rank order) and from the findings. A finding names a host directly or
// through its ranks; it gives one line per host it names, and "(run)" when it names none. A host
// with no error/warning finding reads OK. Plain ASCII, aligned columns. Findings are
// deduplicated first (merge.h dedupe_findings), so a verdict written before rank 0 merged
// repeats still prints one line per host, not one per rank.
//
// Then the headline gate number of each transport (gate_headlines), the one number the judge,
// `publish`'s metrics and the report use:
//   gate (busbw at the gate size, the lower of out-of-place and in-place):
//     socket  0.712 GB/s at 64 MiB (in-place), baseline 0.740 GB/s (96%)
#include <string>
#include <string_view>
#include <vector>

#include "results/history/history.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

std::string human_summary(const Verdict& v);
// Whether `line` is a summary's first line ("ncclsmoke <outcome> (exit <code>): ..."), the one
// format human_summary() writes: how `launch` finds where a rank's summary begins in its stdout.
bool is_summary_headline(std::string_view line);

// gates_of(v) (history.h: the world row's busbw at the gate size, the lower of out-of-place
// and in-place, else the lowest per-rank row's) and the row that number comes from (nullptr
// when not measured; on a tie the first, i.e. out-of-place). A table that marks "the gate"
// should mark `row`, so the arrow points at the number everyone reports.
struct GateHeadline {
  HistoryGate gate;
  const TransportRow* row = nullptr;  // into v.transports
};
std::vector<GateHeadline> gate_headlines(const Verdict& v);

// What `launch` prints for its node (harness/launch/launch_command.cpp), read from the findings' data:
// - the error findings its ranks made in their own verdicts (`own`) that `shown` (the verdict on
//   screen; nullptr none) lacks, the same finding from several ranks once;
// - a verdict's error findings, the same one from several ranks once (the failure banner's line).
std::vector<Finding> errors_not_shown(const Verdict* shown, const std::vector<Verdict>& own);
std::vector<Finding> distinct_errors(const Verdict& v);

}  // namespace ncclsmoke::results
