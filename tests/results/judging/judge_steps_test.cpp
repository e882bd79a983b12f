// judge_local over a step's records (results/judging/judge_run.h, step_records.h): a step says
// what it saw, the judge says what it means: the findings, the phase's status; and next_step
// judges the same records itself (judged_so_far), nothing is written back.
#include <gtest/gtest.h>

#include "results/judging/judge_run.h"
#include "results/judging/next_step.h"

namespace ncclsmoke::results {
namespace {

ProbeContext probe(int rank = 0) {
  ProbeContext c;
  c.rank = rank;
  c.world_size = 4;
  c.host = "host-" + std::to_string(rank);
  c.master_addr = "host-0";
  c.master_port = 29500;
  return c;
}

bool has_code(const Verdict& v, Code c) {
  return std::any_of(v.findings.begin(), v.findings.end(),
                     [&](const Finding& f) { return f.code == c; });
}

TEST(JudgeSteps, AJoinWithARankMissingFailsThePhaseAndNamesIt) {
  Verdict v;
  JoinFacts join;
  join.missing = {3};
  join.roster_received = true;
  join.waited_s = 30;
  auto ended = judge_local(v, {{JoinSeen{join, probe(), 30}, "rendezvous", 30.2, "3/4 ranks joined"}});
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].name, "rendezvous");
  EXPECT_EQ(ended[0].status, PhaseStatus::fail);
  EXPECT_DOUBLE_EQ(ended[0].duration_s, 30.2);
  EXPECT_EQ(ended[0].detail, "3/4 ranks joined");
  ASSERT_TRUE(has_code(v, Code::RANKS_MISSING));
  EXPECT_EQ(v.phases.size(), 1u);
  // The same join judged complete passes, with no finding.
  Verdict ok;
  join.missing.clear();
  EXPECT_EQ(judge_local(ok, {{JoinSeen{join, probe(), 30}, "rendezvous", 1, ""}}).at(0).status,
            PhaseStatus::pass);
  EXPECT_TRUE(ok.findings.empty());
}

// A complete join of a 4-rank world, as the rendezvous step records it.
std::vector<StepRecord> joined_records() {
  JoinFacts join;
  join.roster_received = true;
  RosterSeen roster;
  for (int r = 0; r < 4; ++r) roster.present.push_back({.rank = r, .host = "h" + std::to_string(r)});
  return {{roster, "", 0, ""}, {JoinSeen{join, probe(1), 30}, "rendezvous", 0.1, "4/4 ranks joined"}};
}

TEST(JudgeSteps, AMeshThatStoppedOnTheStoreIsWhatNextStepReads) {
  Verdict v;
  StoreFailure lost{StoreErrorClass::reset, "connection reset by peer"};
  const StepRecord mesh{StoreLostSeen{lost, probe(1), "the mesh probe"}, "mesh", 0.4, "reset"};
  auto ended = judge_local(v, {mesh});
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].status, PhaseStatus::fail);
  auto records = joined_records();
  WorldSeen world;
  world.rank = 1;
  world.world.size = 4;
  records.insert(records.begin(), {{world, "", 0, ""},
                                   {WorldEndSeen{{}, true, true}, "world", 0, ""},
                                   {AskedSeen{{"socket"}, {}}, "", 0, ""}});
  for (Step s : {Step::world, Step::rendezvous, Step::mesh})
    records.push_back({StepTakenSeen{s, {}, {}}, "", 0, ""});
  records.push_back(mesh);
  auto judged = judged_so_far(records);
  EXPECT_TRUE(judged.world.ok);
  EXPECT_TRUE(judged.has_passed(Step::mesh));
  EXPECT_EQ(judged.mesh_status, PhaseStatus::fail);
  ASSERT_EQ(judged.mesh_errors.size(), 1u);
  EXPECT_EQ(judged.mesh_errors[0], v.findings.at(0).code.code());
  // ... so the transports are listed not run, naming the mesh.
  RunMoment now;
  now.steps_left_s = 30;
  auto next = next_step(judged, now);
  ASSERT_FALSE(next.not_run.empty());
  EXPECT_EQ(next.not_run[0].name, "transport:socket");
  EXPECT_NE(next.not_run[0].detail.find("mesh"), std::string::npos) << next.not_run[0].detail;
  EXPECT_EQ(next.not_run[0].detail.find("joined"), std::string::npos) << next.not_run[0].detail;
}

// next_step reads the join and the mesh out of their records: nothing copies them beside.
TEST(JudgeSteps, TheJoinAndTheMeshAreReadOutOfTheirRecords) {
  auto before = judged_so_far({});
  EXPECT_FALSE(before.join.joined);
  auto records = joined_records();
  auto joined = judged_so_far(records);
  EXPECT_TRUE(joined.join.joined);
  EXPECT_TRUE(joined.join.roster_received);
  EXPECT_FALSE(joined.join.world_size_conflict);
  EXPECT_FALSE(joined.join.rank_taken);
  EXPECT_EQ(joined.join.present, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(joined.join.missing.empty());

  JoinFacts disputed;
  disputed.roster_received = true;
  disputed.missing = {3};
  disputed.master_world_size = 8;
  disputed.rank_taken_by = JoinFacts::Claimant{"h9", 42};
  auto d = judged_so_far({{JoinSeen{disputed, probe(1), 30}, "rendezvous", 30, ""}});
  EXPECT_TRUE(d.join.world_size_conflict);
  EXPECT_TRUE(d.join.rank_taken);
  EXPECT_EQ(d.join.missing, std::vector<int>{3});

  MeshSeen mesh;
  mesh.ctx = probe(1);
  mesh.mesh.summary_received = true;
  mesh.mesh.pairs_tested = 12;
  mesh.mesh.failures.push_back({.from = 0, .to = 2, .to_address = "10.0.0.3:4000",
                                .error_class = StoreErrorClass::timed_out});
  mesh.mesh.silent_ranks = {3};
  mesh.mesh.mtu_black_holes_total = 2;
  records.push_back({mesh, "mesh", 1.0, ""});
  auto m = judged_so_far(records);
  EXPECT_EQ(m.mesh.blocked_pairs, (std::vector<std::pair<int, int>>{{0, 2}}));
  EXPECT_EQ(m.mesh.silent_ranks, std::vector<int>{3});
  EXPECT_EQ(m.mesh.mtu_black_holes, 2u);
  EXPECT_EQ(m.mesh_status, PhaseStatus::fail);
}

TEST(JudgeSteps, AHostSetAsideIsExcludedAndListedForNextStep) {
  SetAsideList list;
  list.add({"node-b", "--exclude-hosts", 0, "", ""});
  std::vector<RosterEntry> roster{{0, "node-a", "node-a"}, {1, "node-b", "node-b"}};
  Verdict v;
  const std::vector<StepRecord> records{{SetAsideSeen{roster, list}, "set-aside", 0.01, ""}};
  auto ended = judge_local(v, records);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].status, PhaseStatus::fail);
  EXPECT_EQ(ended[0].detail, "1 of 2 ranks on hosts set aside");
  EXPECT_TRUE(has_code(v, Code::HOST_EXCLUDED));
  EXPECT_EQ(judged_so_far(records).excluded, (std::vector<int>{1}));
  // Nobody on the list: the phase passes and says how many names were set aside.
  Verdict none;
  SetAsideList other;
  other.add({"node-z", "--exclude-hosts", 0, "", ""});
  auto pass = judge_local(none, {{SetAsideSeen{roster, other}, "set-aside", 0.01, ""}});
  EXPECT_EQ(pass.at(0).status, PhaseStatus::pass);
  EXPECT_EQ(pass.at(0).detail, "no rank's host or node is among the 1 set aside");
  EXPECT_TRUE(none.findings.empty());
}

TEST(JudgeSteps, RecordsAreJudgedInTheOrderSeenAndAPhaseEndsOnce) {
  Verdict v;
  v.ranks = {{.rank = 2, .host = "host-2"}};
  SilentPeerFact silent;
  silent.rank = 2;
  silent.host = "host-2";
  silent.silent_for_s = 12;
  judge_local(v, {{PeerSilentSeen{silent, 0}, "", 0, ""}});
  ASSERT_TRUE(has_code(v, Code::PEER_STALLED));
  EXPECT_EQ(v.findings.back().severity, Severity::error);
  silent.silent_for_s = 15;
  judge_local(v, {{PeerResumedSeen{silent}, "", 0, ""}});
  EXPECT_EQ(v.findings.back().severity, Severity::warning) << "it came back";
  // A phase already ended is not added again (a pairwise transport recorded twice).
  auto first = judge_local(v, {{PairwiseNotRunSeen{"socket", "not needed", false}, "", 0, ""}});
  auto again = judge_local(v, {{PairwiseNotRunSeen{"socket", "not needed", false}, "", 0, ""}});
  EXPECT_EQ(first.size(), 1u);
  EXPECT_TRUE(again.empty());
  // The run's ending names the last phase that ended.
  judge_local(v, {{RunTimeoutSeen{{0, "host-0"}, 20}, "", 0, ""}});
  ASSERT_TRUE(has_code(v, Code::RUN_TIMEOUT));
  EXPECT_EQ(v.findings.back().subject.item, "after pairwise:socket");
}

}  // namespace
}  // namespace ncclsmoke::results
