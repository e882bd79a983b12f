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
  // Ranks whose view did not arrive although the reporting rank's liveness watch heard them to
  // the end: alive, as a rank whose view arrived is (a PEER_LOST about them is disproved).
  std::vector<int> alive_at_end;
};

// - header: from the view whose reporting_rank == options.reporting_rank, else the first view;
//   scope "global"; duration_s = max over views.
// - ranks: one entry per rank number, worst status (joined < missing < lost < failed), empty
//   fields filled from any view. Ranks in [0, world_size) that no view describes are added as
//   "missing".
// - phases: by name in first-seen order; worst status, max duration, required if any view says
//   so, detail from the worst view.
// - findings: the same code and subject (finding_dedupe_key) merged into one (ranks/hosts/
//   reporters united and sorted, worst severity, first hint/evidence); order of first appearance.
// - transports / identities: concatenated; a row without a rank gets its view's reporting rank.
// - PEER_LOST about ranks whose own views arrived (or that options.alive_at_end lists) is
//   dropped, and their "lost" status with it: a rank posts its view at the end of its run, so it
//   lived that long. What another rank took for
//   its death was a lossy path (no mesh result, an unanswered hello) or its exit (a reset as it
//   closed); a rank that stopped on its own error says so in its view.
// - A rank in [0, world_size) that sent no view and that no error/warning finding names gets a
//   RESULTS_MISSING finding (so its absence can never read as a pass).
// - then dedupe_findings(): the same finding from several ranks of a host ("transport fabric
//   skipped on {reporter}: ..." from ranks 0-3) becomes one, naming all of them.
// Throws std::invalid_argument when `local_views` is empty.
Verdict merge_rank_verdicts(const std::vector<Verdict>& local_views,
                            const MergeOptions& options = {});

// What makes two findings "the same" across ranks: the code and the subject (verdict.h) less its
// reporters, so rank 0's and rank 3's "transport fabric skipped on {reporter}: no efa" on host a
// are one finding, while two about different peers, transports, phases or items are not.
// Findings without a subject (written before subjects) match on their message, never parsed.
// Also used by the report to group the history's findings rows.
std::string finding_dedupe_key(const AnyCode& code, const Subject& subject,
                               const std::string& message);
std::string finding_dedupe_key(const Finding& f);

// Merges findings with the same finding_dedupe_key (PEER_LOST and PEER_STALLED: merge_rank_
// verdicts already joins those by rank) into the first one, in first-appearance order: ranks and
// reporters united and sorted, hosts united (first-appearance order), worst severity, first
// non-empty hint, first evidence object; the message is rendered again from its template, so
// the merged one reads "ranks 0-3 (host a)".
void dedupe_findings(std::vector<Finding>& findings);

}  // namespace ncclsmoke::results
