// Which step runs next (results/judging/next_step.h) over hand-built judged records: the order
// of a healthy run, what ends a run early (the world, the join, a host set aside), the transports
// passed over with the cause the run saw (missing ranks, MTU_MISMATCH, MESH_BLOCKED, a lost rank),
// and the pairwise step passed over (--pairwise=never, no transport, the deadline, the store).
#include <gtest/gtest.h>

#include "results/judging/next_step.h"

namespace ncclsmoke::results {

void PrintTo(Step s, std::ostream* os) { *os << name(s); }

namespace {

// What judging made of the records (judged_so_far's result, set by hand here;
// judge_steps_test.cpp judges real records) and the present moment.
struct Seen : JudgedSoFar {
  LivenessObservation live;
  double steps_left_s = 0;
};
NextStep step_of(const Seen& s) { return next_step(s, RunMoment{s.live, s.steps_left_s}); }
std::string blocked_of(const Seen& s) { return transports_blocked_reason(s); }
// The session records the decision it takes; judged_so_far reads the steps behind it from that.
void note_taken(Seen& s, const NextStep& n) {
  const auto after = judged_so_far({{taken(n), "", 0, ""}});
  s.passed.insert(s.passed.end(), after.passed.begin(), after.passed.end());
  s.passed_over.insert(s.passed_over.end(), after.passed_over.begin(), after.passed_over.end());
}

// A 4-rank world that joined completely, rank `rank`, asking for `requested`.
Seen joined(std::vector<std::string> requested = {"socket"}, int rank = 0) {
  Seen o;
  o.passed = {Step::world, Step::rendezvous};
  o.world = {true, rank, 4};
  o.join.joined = true;
  o.join.roster_received = true;
  o.join.present = {0, 1, 2, 3};
  o.requested = std::move(requested);
  o.steps_left_s = 30;
  return o;
}

Seen after_mesh(PhaseStatus mesh, std::vector<std::string> requested = {"socket"}) {
  auto o = joined(std::move(requested));
  o.passed.push_back(Step::mesh);
  o.mesh_status = mesh;
  return o;
}

std::vector<Step> walk(Seen o) {
  std::vector<Step> order;
  for (int i = 0; i < 10; ++i) {
    auto n = step_of(o);
    order.push_back(n.step);
    if (n.step == Step::finish) break;
    note_taken(o, n);
  }
  return order;
}

TEST(NextStep, AHealthyRunWalksEveryStepInOrder) {
  Seen o;
  o.world = {true, 0, 4};
  o.join = joined().join;
  o.requested = {"socket"};
  o.steps_left_s = 30;
  o.mesh_status = PhaseStatus::pass;
  EXPECT_EQ(walk(o), (std::vector<Step>{Step::world, Step::rendezvous, Step::mesh,
                                        Step::transports, Step::pairwise,
                                        Step::pairwise_rounds, Step::finish}));
}

TEST(NextStep, AWorldNotDiscoveredOrAJoinThatStoppedFinishes) {
  Seen o;
  EXPECT_EQ(step_of(o).step, Step::world);
  o.passed = {Step::world};
  EXPECT_EQ(step_of(o).step, Step::finish) << "world.ok is false";
  o.world.ok = true;
  EXPECT_EQ(step_of(o).step, Step::rendezvous);
  o.passed.push_back(Step::rendezvous);
  auto n = step_of(o);
  EXPECT_EQ(n.step, Step::finish);
  EXPECT_NE(n.reason.find("stopped before the join"), std::string::npos) << n.reason;
  EXPECT_TRUE(n.not_run.empty());
  for (auto breaks : {&JoinObservation::world_size_conflict, &JoinObservation::rank_taken}) {
    auto j = joined();
    j.join.*breaks = true;
    EXPECT_EQ(step_of(j).step, Step::finish);
  }
  auto r = joined();
  r.join.roster_received = false;
  EXPECT_EQ(step_of(r).step, Step::finish);
}

TEST(NextStep, AHostSetAsideStopsTheRunBeforeTheMesh) {
  auto o = joined();
  o.excluded = {2, 3};
  auto n = step_of(o);
  EXPECT_EQ(n.step, Step::finish);
  EXPECT_NE(n.reason.find("HOST_EXCLUDED"), std::string::npos) << n.reason;
  EXPECT_NE(n.reason.find("ranks 2, 3"), std::string::npos) << n.reason;
  EXPECT_TRUE(n.not_run.empty()) << "judge_local lists the phases not run, as before";
}

TEST(NextStep, MissingRanksRunTheMeshButNotTheTransports) {
  auto o = joined({"socket", "fabric"});
  o.join.present = {0, 1, 2};
  o.join.missing = {3};
  EXPECT_EQ(step_of(o).step, Step::mesh) << "the mesh among those present is worth knowing";
  o.passed.push_back(Step::mesh);
  o.mesh_status = PhaseStatus::pass;
  auto n = step_of(o);
  EXPECT_EQ(n.step, Step::pairwise);
  EXPECT_EQ(n.passed_over, (std::vector<Step>{Step::transports}));
  ASSERT_EQ(n.not_run.size(), 2u);
  EXPECT_EQ(n.not_run[0].name, "transport:socket");
  EXPECT_EQ(n.not_run[1].name, "transport:fabric");
  EXPECT_EQ(n.not_run[0].status, PhaseStatus::not_run);
  EXPECT_TRUE(n.not_run[0].required);
  EXPECT_EQ(n.not_run[0].detail, "rank 3 never joined");
  note_taken(o, n);  // the pairwise step ran
  EXPECT_TRUE(o.has_passed(Step::transports));
  EXPECT_TRUE(o.has_passed(Step::pairwise));
  n = step_of(o);
  EXPECT_EQ(n.step, Step::pairwise_rounds) << "rank 0 decides whether rounds run";
  note_taken(o, n);
  EXPECT_EQ(step_of(o).step, Step::finish);
}

TEST(NextStep, AnMtuBlackHoleIsTheReasonTheTransportsDidNotRun) {
  auto o = after_mesh(PhaseStatus::fail);
  o.mesh_errors = {Code::MTU_MISMATCH};
  o.mesh.mtu_black_holes = 14;
  auto n = step_of(o);
  ASSERT_EQ(n.not_run.size(), 1u);
  EXPECT_EQ(n.not_run[0].detail,
            "the mesh failed: 14 paths black-holed full-MTU packets (MTU_MISMATCH)");
  EXPECT_EQ(n.not_run[0].detail.find("not every rank joined"), std::string::npos);
}

TEST(NextStep, BlockedPairsAndOtherMeshErrorsAreNamed) {
  auto o = after_mesh(PhaseStatus::fail);
  o.mesh_errors = {Code::MESH_BLOCKED};
  o.mesh.blocked_pairs = {{0, 2}, {1, 2}};
  EXPECT_EQ(blocked_of(o), "the mesh failed: 2 pairs blocked (MESH_BLOCKED)");
  auto lost = after_mesh(PhaseStatus::fail);
  lost.mesh_errors = {Code::PEER_LOST, Code::PEER_LOST};
  lost.mesh.silent_ranks = {3};
  EXPECT_EQ(blocked_of(lost),
            "the mesh failed: rank 3 stopped answering; PEER_LOST");
  auto bare = after_mesh(PhaseStatus::fail);
  EXPECT_EQ(blocked_of(bare), "the mesh phase failed");
  // Not failed (inconclusive: the deadline cut the probe short): the transports still run.
  auto cut = after_mesh(PhaseStatus::inconclusive);
  EXPECT_EQ(blocked_of(cut), "");
  EXPECT_EQ(step_of(cut).step, Step::transports);
  // Missing ranks and a failed mesh: both said.
  auto both = after_mesh(PhaseStatus::fail);
  both.join.missing = {5, 6};
  both.mesh_errors = {Code::MESH_BLOCKED};
  both.mesh.blocked_pairs = {{0, 1}};
  EXPECT_EQ(blocked_of(both),
            "ranks 5, 6 never joined; the mesh failed: 1 pair blocked (MESH_BLOCKED)");
}

TEST(NextStep, NoTransportOrPairwiseNeverFinishesAfterTheirStep) {
  auto none = after_mesh(PhaseStatus::pass, {});
  auto n = step_of(none);
  EXPECT_EQ(n.step, Step::finish);
  EXPECT_TRUE(n.not_run.empty());
  auto never = after_mesh(PhaseStatus::pass);
  never.pairwise_ask.mode = PairwiseRequest::never;
  never.passed.push_back(Step::transports);
  n = step_of(never);
  EXPECT_EQ(n.step, Step::finish);
  EXPECT_TRUE(n.not_run.empty());
  // Transports passed over and pairwise never: finish at once, the transports listed not run.
  auto blocked = after_mesh(PhaseStatus::fail);
  blocked.pairwise_ask.mode = PairwiseRequest::never;
  n = step_of(blocked);
  EXPECT_EQ(n.step, Step::finish);
  ASSERT_EQ(n.not_run.size(), 1u);
  EXPECT_EQ(n.not_run[0].name, "transport:socket");
}

TEST(NextStep, PairwiseIsPassedOverAtTheDeadlineOrWithTheStoreGone) {
  auto o = after_mesh(PhaseStatus::pass, {"socket", "nccl"});
  o.passed.push_back(Step::transports);
  EXPECT_EQ(step_of(o).step, Step::pairwise);
  auto late = o;
  late.steps_left_s = 0;
  auto n = step_of(late);
  EXPECT_EQ(n.step, Step::finish);
  EXPECT_EQ(n.passed_over, (std::vector<Step>{Step::pairwise}));
  ASSERT_EQ(n.not_run.size(), 2u);
  EXPECT_EQ(n.not_run[1].name, "pairwise:nccl");
  EXPECT_FALSE(n.not_run[1].required);
  EXPECT_EQ(n.not_run[1].detail, "the run reached its --timeout before the pairwise rounds");
  auto frozen = o;
  frozen.live.store_frozen = true;
  EXPECT_EQ(step_of(frozen).not_run.at(0).detail, "the store (rank 0) stopped answering");
  // Rank 0 stopped: the others pass over; rank 0 itself (whose own watch cannot see itself stop)
  // goes on.
  auto gone = o;
  gone.live.rank0_stopped = true;
  EXPECT_EQ(step_of(gone).step, Step::pairwise);
  gone.world.rank = 2;
  EXPECT_EQ(step_of(gone).step, Step::finish);
  // Stopped ranks alone are rank 0's plan's business (decide_pairwise), not a reason to skip.
  auto stopped = o;
  stopped.live.stopped = {3};
  EXPECT_EQ(step_of(stopped).step, Step::pairwise);
  o.passed.push_back(Step::pairwise);
  EXPECT_EQ(step_of(o).step, Step::pairwise_rounds);
  o.passed.push_back(Step::pairwise_rounds);
  EXPECT_EQ(step_of(o).step, Step::finish);
}

// The rounds step: rank 0 is handed the plan, decided here from the summaries it gathered; the
// other ranks wait for rank 0's.
TEST(NextStep, RankZeroIsHandedThePairwisePlanDecidedFromTheSummaries) {
  auto o = after_mesh(PhaseStatus::pass, {"socket"});
  o.passed.push_back(Step::transports);
  o.passed.push_back(Step::pairwise);
  o.world.world_size = 2;
  o.pairwise_ask.mode = PairwiseRequest::always;
  auto& g = o.pairwise_gathered;
  g.gathered = true;
  for (int r : {0, 1}) {
    RankSummary s;
    s.rank = r;
    s.host = "host-" + std::to_string(r);
    s.transports.push_back({"socket", PhaseStatus::pass, false, false, std::nullopt, ""});
    g.summaries.push_back(s);
  }
  auto n = step_of(o);
  ASSERT_EQ(n.step, Step::pairwise_rounds);
  ASSERT_TRUE(n.pairwise_plan.has_value());
  EXPECT_TRUE(n.pairwise_plan->run) << n.pairwise_plan->reason;
  EXPECT_EQ(n.pairwise_plan->participants, (std::vector<int>{0, 1}));
  // Asked for automatically, with nothing wrong: no rounds, and the plan says why.
  o.pairwise_ask.mode = PairwiseRequest::automatic;
  auto quiet = step_of(o);
  ASSERT_TRUE(quiet.pairwise_plan.has_value());
  EXPECT_FALSE(quiet.pairwise_plan->run);
  EXPECT_FALSE(quiet.pairwise_plan->reason.empty());
  // Rank 0's own transports never ran: no rounds.
  o.pairwise_ask.mode = PairwiseRequest::always;
  o.pairwise_gathered.transports_ran = false;
  EXPECT_FALSE(step_of(o).pairwise_plan->run);
  // Another rank is handed no plan: it waits for rank 0's.
  o.world.rank = 1;
  EXPECT_FALSE(step_of(o).pairwise_plan.has_value());
}

}  // namespace
}  // namespace ncclsmoke::results
