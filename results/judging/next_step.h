#pragma once
// Which step of `ncclsmoke run` runs next: one pure rule over the step records so far
// (step_records.h, read by judged_so_far) and the present moment. harness/run/run_session.cpp's run_steps() asks it between steps; a step only
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
#include <algorithm>
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

// What the records so far say that the order depends on, a pure function of them (judged_so_far,
// by the same rules judge_local applies):
//   - the world (WorldEndSeen, WorldSeen) and what the run was asked for (AskedSeen);
//   - the steps taken or passed over, and the phases recorded not run (StepTakenSeen);
//   - the join (JoinSeen, RosterSeen) and the mesh (MeshSeen) as recorded, the mesh phase's status
//     and the codes of its error findings (MTU_MISMATCH, MESH_BLOCKED, PEER_LOST,
//     RENDEZVOUS_LOST ..., in the order made), and the ranks on a host set aside (HOST_EXCLUDED);
//   - what rank 0's pairwise summaries step gathered (PairwiseGatheredSeen).
struct JudgedSoFar {
  WorldObservation world;
  std::vector<std::string> requested;
  PairwiseAsk pairwise_ask;
  std::vector<Step> passed;        // the steps run or passed over so far, in order
  std::vector<Phase> passed_over;  // the phases recorded not run, in order
  JoinObservation join;
  MeshObservation mesh;
  PhaseStatus mesh_status = PhaseStatus::not_run;
  std::vector<Code> mesh_errors;
  std::vector<int> excluded;
  std::vector<RankInfo> roster;  // the ranks that joined, as the roster describes them
  PairwiseGathered pairwise_gathered;

  bool has_passed(Step s) const {
    return std::find(passed.begin(), passed.end(), s) != passed.end();
  }
};
JudgedSoFar judged_so_far(const std::vector<StepRecord>& records);

// The step to run now, from the records so far and the present moment (the liveness watch, the
// time left). The session records the decision it takes as a StepTakenSeen.
NextStep next_step(const JudgedSoFar& judged, const RunMoment& now);

// The record of taking `next`.
StepTakenSeen taken(const NextStep& next);

std::string_view name(Step s);

// Why the transports cannot run over this join and mesh ("" when they can).
std::string transports_blocked_reason(const JudgedSoFar& judged);

}  // namespace ncclsmoke::results
