#pragma once
// Rank 0's merge: every rank's local view (its own verdict document) into one global verdict.
// Union, never vote: a problem seen by one rank stays in the result, and the verdict is recomputed
// from the merged findings and phases (classify.h), so merging can only make it worse, not better.
#include <string>
#include <vector>

#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

struct MergeOptions {
  int reporting_rank = 0;  // whose header (run_id, world, env, versions) the global verdict uses
  int world_size = 0;      // expected world; 0 = the largest world.size among the views
  // Phases that must be present in the merged result (see overall_verdict()).
  std::vector<std::string> required_phases;
};

// - header: from the view whose reporting_rank == options.reporting_rank, else the first view;
//   scope "global"; duration_s = max over views.
// - ranks: one entry per rank number, worst status (joined < missing < lost < failed), empty
//   fields filled from any view. Ranks in [0, world_size) that no view describes are added as
//   "missing".
// - phases: by name in first-seen order; worst status, max duration, required if any view says
//   so, detail from the worst view.
// - findings: identical code + message merged into one (ranks/hosts united and sorted, worst
//   severity, first hint/evidence); order of first appearance.
// - transports / identities: concatenated; a row without a rank gets its view's reporting rank.
// - A rank in [0, world_size) that sent no view and that no error/warning finding names gets a
//   RESULTS_MISSING finding (so its absence can never read as a pass).
// - then dedupe_findings(): the same finding from several ranks of a host ("transport fabric
//   skipped on rank 3 (host a): ..." from ranks 0-3) becomes one, naming all of them.
// Throws std::invalid_argument when `local_views` is empty.
Verdict merge_rank_verdicts(const std::vector<Verdict>& local_views,
                            const MergeOptions& options = {});

// What makes two findings "the same" across ranks: the code and the message once each "rank N"
// whose N is one of the finding's own ranks is written "rank #". So rank 0's and rank 3's
// "transport fabric skipped on rank 0 (host a): no efa" match, while "... lost rank 2" and
// "... lost rank 5" (peers, not the finding's reporter) do not. Also used by the report to group
// the history's findings rows, and by the summary for verdicts written before this rule.
std::string finding_dedupe_key(const AnyCode& code, const std::string& message,
                               const std::vector<int>& ranks);
// The same for a code's text (an unknown one included).
std::string finding_dedupe_key(std::string_view code, const std::string& message,
                               const std::vector<int>& ranks);

// Merges findings with the same finding_dedupe_key (identical messages always; PEER_LOST and
// PEER_STALLED only when identical, merge_rank_verdicts already joins those by rank) into the
// first one, in first-appearance order: ranks united and sorted, hosts united (first-appearance
// order), worst severity, first non-empty hint, first evidence object. A "rank N" that differs
// among the merged ones reads "ranks 0-3" (or "ranks 1, 4, 7") in the merged message.
void dedupe_findings(std::vector<Finding>& findings);

}  // namespace ncclsmoke::results
