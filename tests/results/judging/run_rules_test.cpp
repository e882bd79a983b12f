// The run's own rules (results/judging/run_rules.h) over hand-built observations: blame the root,
// the liveness watch's findings, the resumed downgrade, the run's endings, the gather's naming and
// the phase statuses. Every finding must come out with the table's severity and layer.
#include "results/judging/run_rules.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {
namespace {

using rendezvous::RankRef;

LostPeerFact lost(int rank, const std::string& host) {
  LostPeerFact l;
  l.rank = rank;
  l.host = host;
  l.how = "closed the connection (EOF)";
  l.after_s = 0.25;
  return l;
}

SilentPeerFact silent(int rank, const std::string& host, double for_s = 0.6) {
  SilentPeerFact s;
  s.rank = rank;
  s.host = host;
  s.silent_for_s = for_s;
  s.seen_by = 1;
  s.how = "sent nothing for 0.6 s (not even a heartbeat)";
  return s;
}

Finding timeout_between(int a, int b) {
  return make_finding(Code::TRANSPORT_TIMEOUT, "rank " + std::to_string(a) + " timed out on rank " +
                                               std::to_string(b), {a, b});
}

void expect_table(const Finding& f) {
  const auto* c = find_code(f.code);
  ASSERT_NE(c, nullptr) << f.code;
  EXPECT_EQ(f.layer, c->layer) << f.code;
  EXPECT_FALSE(f.hint.empty()) << f.code;
  EXPECT_EQ(f.hint.find('{'), std::string::npos) << f.code << ": " << f.hint;
}

Verdict verdict_with_ranks(int n) {
  Verdict v = new_verdict(1);
  for (int r = 0; r < n; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.host = "node-" + std::to_string(r);
    ri.status = RankStatus::joined;
    v.ranks.push_back(ri);
  }
  return v;
}

TEST(RunRules, AFrozenRankZeroMakesItsNeighboursTimeoutsInformation) {
  std::vector<Finding> fs;
  fs.push_back(peer_stalled_finding(silent(0, "node-0"), 1));
  fs.push_back(timeout_between(1, 2));
  fs.push_back(make_finding(Code::RENDEZVOUS_LOST, "the store connection reset", {1}));
  demote_consequences(fs, /*watch_lost=*/{}, /*rank0_hosts_store=*/true);
  EXPECT_EQ(fs[0].severity, Severity::error);  // the root stays the error
  EXPECT_EQ(fs[1].severity, Severity::info);
  EXPECT_EQ(fs[1].message.rfind("a consequence of rank 0 stopping (frozen or dead): ", 0), 0u)
      << fs[1].message;
  EXPECT_EQ(fs[1].evidence["consequence_of"], nlohmann::json::array({0}));
  EXPECT_EQ(fs[2].severity, Severity::info);  // rank 0 hosts the store: the store's loss is rank 0's
}

TEST(RunRules, AStoreLossIsNotRankZerosWhenTheStoreIsExternal) {
  std::vector<Finding> fs;
  fs.push_back(peer_stalled_finding(silent(0, "node-0"), 1));
  fs.push_back(make_finding(Code::RENDEZVOUS_LOST, "the store connection reset", {1}));
  demote_consequences(fs, {}, /*rank0_hosts_store=*/false);
  EXPECT_EQ(fs[1].severity, Severity::error);
}

TEST(RunRules, APeerLostFromTheWatchStays) {
  std::vector<Finding> fs;
  fs.push_back(peer_lost_finding(lost(2, "node-2"), RankRef{1, "node-1"}));
  fs.push_back(timeout_between(1, 3));
  demote_consequences(fs, {2}, true);
  EXPECT_EQ(fs[0].severity, Severity::error);
  EXPECT_EQ(fs[0].evidence.value("source", ""), "liveness watch");
  EXPECT_EQ(fs[1].severity, Severity::info);
}

TEST(RunRules, AMeshGuessAboutARankTheWatchSawFrozenIsAConsequence) {
  std::vector<Finding> fs;
  fs.push_back(peer_stalled_finding(silent(2, "node-2"), 1));
  fs.push_back(make_finding(Code::PEER_LOST, "rank 2 stopped answering after joining", {2}));
  demote_consequences(fs, /*watch_lost=*/{}, true);
  EXPECT_EQ(fs[1].severity, Severity::info);
  // ... but when the watch saw it die too, the PEER_LOST about it stays.
  std::vector<Finding> died;
  died.push_back(peer_stalled_finding(silent(2, "node-2"), 1));
  died.push_back(make_finding(Code::PEER_LOST, "rank 2 stopped answering after joining", {2}));
  demote_consequences(died, {2}, true);
  EXPECT_EQ(died[1].severity, Severity::error);
}

TEST(RunRules, NothingIsDemotedWithoutARootOrOnceResumed) {
  std::vector<Finding> fs{timeout_between(1, 2)};
  demote_consequences(fs, {}, true);
  EXPECT_EQ(fs[0].severity, Severity::error);

  Verdict v = verdict_with_ranks(3);
  note_peer_silent(v, silent(2, "node-2"), 1);
  v.findings.push_back(timeout_between(0, 1));
  note_peer_resumed(v, silent(2, "node-2", 2.5));
  demote_consequences(v.findings, {}, true);
  EXPECT_EQ(v.findings[1].severity, Severity::error);  // a warning stall is no root
}

TEST(RunRules, ResumedDowngradesTheStallAndTheRankStatus) {
  Verdict v = verdict_with_ranks(3);
  note_peer_silent(v, silent(2, "node-2"), 1);
  note_peer_silent(v, silent(2, "node-2"), 1);  // once per rank
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].severity, Severity::error);
  EXPECT_EQ(v.ranks[2].status, RankStatus::failed);
  note_peer_resumed(v, silent(2, "node-2", 2.5));
  EXPECT_EQ(v.findings[0].severity, Severity::warning);
  EXPECT_NE(v.findings[0].message.find("rank 2 (host node-2) was unresponsive for 2.5"),
            std::string::npos)
      << v.findings[0].message;
  EXPECT_EQ(v.ranks[2].status, RankStatus::joined);
  expect_table(v.findings[0]);
}

TEST(RunRules, PeerLostIsRecordedOnceAndMarksTheRank) {
  Verdict v = verdict_with_ranks(3);
  note_peer_lost(v, lost(2, "node-2"), RankRef{1, "node-1"});
  note_peer_lost(v, lost(2, "node-2"), RankRef{1, "node-1"});
  ASSERT_EQ(v.findings.size(), 1u);
  const auto& f = v.findings[0];
  expect_table(f);
  EXPECT_EQ(f.layer, Layer::run);
  EXPECT_EQ(f.ranks, std::vector<int>{2});
  EXPECT_NE(f.message.find("rank 2 (host node-2) closed the connection (EOF) mid-run, seen by "
                           "rank 1 (host node-1)"),
            std::string::npos)
      << f.message;
  EXPECT_EQ(v.ranks[2].status, RankStatus::lost);
}

TEST(RunRules, RunTimeoutNamesTheRankAndTheTimeout) {
  auto f = run_timeout_finding(RankRef{3, "node-c"}, 30, "mesh");
  expect_table(f);
  EXPECT_EQ(f.code, Code::RUN_TIMEOUT);
  EXPECT_EQ(f.severity, Severity::error);
  EXPECT_EQ(f.ranks, std::vector<int>{3});
  EXPECT_EQ(f.hosts, std::vector<std::string>{"node-c"});
  EXPECT_EQ(f.message, "rank 3 (host node-c) did not finish within --timeout 30s");
  EXPECT_NE(f.hint.find("the phase after mesh"), std::string::npos) << f.hint;
}

TEST(RunRules, RunTerminatedNamesTheSignalAndTheLastPhase) {
  auto f = run_terminated_finding(RankRef{1, "node-b"}, "SIGTERM", 4.2, "rendezvous");
  expect_table(f);
  EXPECT_NE(f.message.find("rank 1 (host node-b) was stopped by SIGTERM after"), std::string::npos);
  EXPECT_NE(f.message.find("last phase finished: rendezvous"), std::string::npos);
}

// The launcher's words (harness/world/launchers.cpp) go into the message and the hint as given.
TEST(RunRules, RunTerminatedCarriesTheLaunchersCause) {
  auto f = run_terminated_finding(RankRef{0, "h"}, "SIGTERM", 1.0, "world",
                                  TerminationCause{"Slurm: the job's time limit", "raise --time"});
  expect_table(f);
  EXPECT_NE(f.message.find("likely sender: Slurm: the job's time limit"), std::string::npos)
      << f.message;
  EXPECT_NE(f.hint.find("raise --time"), std::string::npos) << f.hint;
  auto d = run_terminated_finding(RankRef{0, "h"}, "SIGINT", 1.0, "world");
  EXPECT_NE(d.hint.find("give the supervising deadline more than --timeout"), std::string::npos)
      << d.hint;
  EXPECT_EQ(d.hint.find("activeDeadlineSeconds"), std::string::npos) << d.hint;
}

TEST(RunRules, StoreAndConfigFindingsGoThroughTheTable) {
  ForeignStore s;
  s.self = RankRef{1, "node-b"};
  s.this_job = "job-a";
  s.store = "10.0.0.1:29500";
  s.port = 29500;
  s.other_job = "job-b";
  s.other_world_size = 4;
  s.other_host = "node-x";
  s.other_pid = 77;
  auto foreign = store_foreign_job_finding(s);
  expect_table(foreign);
  EXPECT_NE(foreign.hint.find("port 29500 is shared by job job-a and job job-b"), std::string::npos);
  EXPECT_EQ(foreign.evidence["other_world_size"], 4);

  auto port = store_port_finding(RankRef{0, "node-a"}, "", 29500, "address in use", "");
  expect_table(port);
  EXPECT_EQ(port.code, Code::CONFIG_INVALID);
  EXPECT_NE(port.message.find("rank 0 (host node-a) of job (none) cannot serve the store on port 29500"),
            std::string::npos);
  EXPECT_NE(port.hint.find("Fix MASTER_PORT (value 29500): Another process holds"), std::string::npos)
      << port.hint;

  auto unknown = profile_unknown_finding(RankRef{0, "node-a"}, "prod", "p.yaml", {"ci", "dev"});
  expect_table(unknown);
  EXPECT_NE(unknown.hint.find("Pick one of: ci, dev"), std::string::npos) << unknown.hint;
  expect_table(profiles_unreadable_finding(RankRef{0, "node-a"}, "p.yaml", "no such file"));

  auto mesh = mesh_not_run_finding(RankRef{2, "node-c"}, "cannot bind");
  expect_table(mesh);
  EXPECT_EQ(mesh.layer, Layer::mesh);
  EXPECT_EQ(mesh.message, "rank 2 (host node-c) could not run the mesh probe: cannot bind");
}

TEST(RunRules, WaitChainEvidenceGoesOnTimeoutsAndOnPeerLostOnlyWhenItReachesAStoppedRank) {
  WaitChainEvidence e;
  e.chain.path = {3, 2, 0};
  e.chain.root = 0;
  e.chain.root_reason = "is silent or lost";
  e.text = "rank 3 waits on rank 2; rank 2 waits on rank 0";
  std::vector<Finding> fs{timeout_between(3, 2), make_finding(Code::PEER_LOST, "rank 2 reset", {2})};
  attach_wait_chain(fs, e);
  EXPECT_EQ(fs[0].evidence["wait_chain"]["root"], 0);
  EXPECT_NE(fs[0].message.find("; wait chain: rank 3 waits on rank 2"), std::string::npos);
  EXPECT_FALSE(fs[1].evidence.is_object() && fs[1].evidence.contains("wait_chain"));
  e.reaches_stopped = true;
  attach_wait_chain(fs, e);
  EXPECT_TRUE(fs[1].evidence.contains("wait_chain"));
}

TEST(RunRules, TheGatherNamesAnUnreportedRankOnceAndASelfExplainedOne) {
  Verdict mine = verdict_with_ranks(3);
  name_unreported_rank(mine, RankRef{2, "node-2"});
  name_unreported_rank(mine, RankRef{2, "node-2"});
  ASSERT_EQ(mine.findings.size(), 1u);
  expect_table(mine.findings[0]);
  EXPECT_EQ(mine.findings[0].message, "rank 2 (host node-2) joined but never reported its verdict");
  EXPECT_EQ(mine.ranks[2].status, RankStatus::lost);

  Verdict theirs = verdict_with_ranks(3);
  theirs.findings.push_back(make_finding(Code::WORLD_MISMATCH, "rank 1 has world size 5", {1}));
  explained_by_itself(mine, theirs, 1);
  EXPECT_EQ(mine.ranks[1].status, RankStatus::failed);
  EXPECT_EQ(mine.ranks[1].detail, "stopped on its own error: WORLD_MISMATCH");
}

TEST(RunRules, PhaseStatuses) {
  JoinFacts join;
  join.roster_received = true;
  EXPECT_EQ(rendezvous_phase_status(join), PhaseStatus::pass);
  join.missing = {3};
  EXPECT_EQ(rendezvous_phase_status(join), PhaseStatus::fail);

  auto same = mesh_outcome_with_stopped({PhaseStatus::pass, "6 pairs tested, 0 failed"}, {}, false);
  EXPECT_EQ(same.status, PhaseStatus::pass);
  auto failed = mesh_outcome_with_stopped({PhaseStatus::pass, "6 pairs tested, 0 failed"}, {1, 2}, true);
  EXPECT_EQ(failed.status, PhaseStatus::fail);
  EXPECT_EQ(failed.detail, "6 pairs tested, 0 failed; rank 1, 2 stopped answering (liveness "
                           "watch): its pairs are not tested");

  std::vector<Phase> phases(1);
  phases[0].name = "world";
  phases[0].status = PhaseStatus::pass;
  list_phases_not_run(phases);
  ASSERT_EQ(phases.size(), 3u);
  EXPECT_EQ(phases[1].name, "rendezvous");
  EXPECT_EQ(phases[1].status, PhaseStatus::not_run);
  EXPECT_EQ(phases[2].name, "mesh");
}

// A step that stopped never passes; a launcher conflict alone leaves the world passing.
TEST(RunRules, StoppedAndWorldPhaseStatuses) {
  auto lost = make_finding(Code::RENDEZVOUS_LOST, "rank 1 lost the store", {1});
  EXPECT_EQ(stopped_phase_status(lost), PhaseStatus::fail);
  lost.severity = Severity::warning;
  EXPECT_EQ(stopped_phase_status(lost), PhaseStatus::inconclusive);

  ConfigProblem conflict;
  conflict.kind = ConfigProblem::Kind::conflict;
  ConfigProblem invalid;
  invalid.kind = ConfigProblem::Kind::invalid;
  EXPECT_EQ(world_phase_status({}, true, true), PhaseStatus::pass);
  EXPECT_EQ(world_phase_status({conflict}, true, true), PhaseStatus::pass);
  EXPECT_EQ(world_phase_status({conflict, invalid}, true, true), PhaseStatus::fail);
  EXPECT_EQ(world_phase_status({}, false, true), PhaseStatus::fail);  // no world, fail closed
  EXPECT_EQ(world_phase_status({}, true, false), PhaseStatus::fail);  // the profile is unusable
}

}  // namespace
}  // namespace ncclsmoke::results
