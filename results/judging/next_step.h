#pragma once
// Which step of `ncclsmoke run` runs next (issue 21): one pure rule over what the steps saw so far
// (observations.h). harness/run_session.cpp's run_steps() asks it between steps; a step only
// measures and records.
//
// The order is world -> rendezvous -> mesh -> transports -> pairwise -> finish:
// - a world not discovered or a configuration refused: finish;
// - a rendezvous that stopped before the join returned, a roster that never came, another world
//   size or a taken rank: finish; a rank on a host set aside (HOST_EXCLUDED): finish, no mesh;
// - the mesh runs among the ranks present (missing ranks don't stop the others);
// - the transports (when any was asked for) need every rank joined and every path: with a rank
//   missing, or the mesh failed (MTU_MISMATCH, MESH_BLOCKED, a rank lost ...), collectives would
//   only hang, so each is listed not run, the reason naming the cause the run saw;
// - the pairwise summaries (every rank posts how its transports ended, rank 0 gathers) unless
//   --pairwise=never or no transport was asked for; listed not run when the steps' deadline has
//   passed or the store (rank 0) stopped answering;
// - the pairwise rounds: on rank 0 with the plan decided here from the summaries
//   (decide_pairwise, pairwise_rules.h).
#include <optional>
#include <string>
#include <vector>

#include "results/judging/observations.h"
#include "results/judging/pairwise_rules.h"
#include "results/judging/step_records.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

struct NextStep {
  Step step = Step::finish;  // the step to run now
  std::string reason;        // why (the step passed over, or why the run finishes)
  // Steps passed over on the way to `step` (in order), and the phases to record for them.
  std::vector<Step> passed_over;
  std::vector<Phase> not_run;
  // Step::pairwise_rounds on rank 0: whether the rounds run, over which ranks and transports
  // (decide_pairwise over the summaries rank 0 gathered). Other ranks wait for rank 0's plan.
  std::optional<PairwiseDecision> pairwise_plan;
};

// What the records so far say that the order depends on: the join (JoinSeen, RosterSeen) and the
// mesh (MeshSeen) as recorded, the mesh phase's status and the codes of its error findings
// (MTU_MISMATCH, MESH_BLOCKED, PEER_LOST, RENDEZVOUS_LOST ..., in the order made), and the ranks
// on a host set aside (HOST_EXCLUDED). A pure function of the records (judged_so_far, by the same
// rules judge_local applies), never written back into the observations.
struct JudgedSoFar {
  JoinObservation join;
  MeshObservation mesh;
  PhaseStatus mesh_status = PhaseStatus::not_run;
  std::vector<Code> mesh_errors;
  std::vector<int> excluded;
  std::vector<RankInfo> roster;  // the ranks that joined, as the roster describes them
};
JudgedSoFar judged_so_far(const std::vector<StepRecord>& records);

NextStep next_step(const RunObservations& seen, const JudgedSoFar& judged);

// After the harness ran `next.step` (or recorded its not_run phases): the steps now behind it.
void note_taken(RunObservations& seen, const NextStep& next);

std::string_view name(Step s);

// Why the transports cannot run over this join and mesh ("" when they can).
std::string transports_blocked_reason(const RunObservations& seen, const JudgedSoFar& judged);

}  // namespace ncclsmoke::results
