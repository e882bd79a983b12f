// The two entry points of judging (results/judging/judge_run.h): judge_local over one rank's
// record, judge_world over the views rank 0 gathered.
#include "results/judging/judge_run.h"

#include <gtest/gtest.h>

#include <set>

#include "results/judging/classify.h"
#include "results/judging/run_rules.h"
#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {
namespace {

Verdict local_view(int rank, const std::string& host) {
  Verdict v = new_verdict(rank);
  v.world.size = 3;
  v.ranks = {{rank, RankStatus::joined, host, "", 100 + rank, "", "", ""}};
  v.phases = {{"world", PhaseStatus::pass, 0.1, true, ""},
              {"rendezvous", PhaseStatus::pass, 0.1, true, ""},
              {"mesh", PhaseStatus::pass, 0.1, true, ""}};
  return v;
}

// A frozen rank's consequences are demoted once, at the end; a phase never reached is listed.
TEST(JudgeRun, LocalDemotesConsequencesOnceAndListsPhasesNotRun) {
  Verdict v = local_view(0, "h0");
  v.phases.pop_back();  // the run stopped before the mesh
  SilentPeerFact s;
  s.rank = 2;
  s.host = "h2";
  s.silent_for_s = 4;
  note_peer_silent(v, s, 0);
  v.findings.push_back(make_finding(Code::TRANSPORT_TIMEOUT, "waited for rank 2", {0, 2}, {"h0"}));
  judge_local(v, {.watch_lost = {}, .rank0_hosts_store = true, .duration_s = 7.5});
  ASSERT_EQ(v.findings.size(), 2u);
  EXPECT_EQ(v.findings[0].code, Code::PEER_STALLED);
  EXPECT_EQ(v.findings[0].severity, Severity::error);
  EXPECT_EQ(v.findings[1].severity, Severity::info);
  EXPECT_EQ(v.findings[1].message.rfind("a consequence of rank 2 stopping", 0), 0u)
      << v.findings[1].message;
  EXPECT_EQ(v.phases.back().name, "mesh");
  EXPECT_EQ(v.phases.back().status, PhaseStatus::not_run);
  EXPECT_DOUBLE_EQ(v.duration_s, 7.5);
  EXPECT_EQ(v.verdict, Outcome::fail);
  // Judging the same record again changes nothing (the watchdog and finish may both run it).
  Verdict again = v;
  judge_local(again, {.watch_lost = {}, .rank0_hosts_store = true, .duration_s = 7.5});
  EXPECT_EQ(to_json(again), to_json(v));
}

// A fleet where no view came but rank 0's (its store overloaded, the ranks gone): every rank is
// named once, on its own host, and the suspects are those hosts. Merging, dedupe and the witness
// rule once scanned every finding (or every rank) for each finding: 16,384 ranks took 20 s.
TEST(JudgeRun, WorldOf16384RanksNoneReportedNamesEachOnce) {
  const int world = 16384;
  Verdict own = local_view(0, "h0");
  own.world.size = world;
  for (int r = 1; r < world; ++r)
    own.ranks.push_back({r, RankStatus::joined, "h" + std::to_string(r / 8), "", 100 + r, "", "", ""});
  apply_verdict(own);
  WorldRoster roster{.world_size = world, .reporting_rank = 0, .duration_s = 30};
  for (int r = 1; r < world; ++r) roster.unreported.push_back({r, "h" + std::to_string(r / 8), false});
  Verdict g = judge_world({own}, roster, nullptr);
  std::set<int> named;
  for (const auto& f : g.findings)
    if (f.code == Code::PEER_LOST) {
      ASSERT_EQ(f.ranks.size(), 1u) << f.message;
      EXPECT_TRUE(named.insert(f.ranks[0]).second) << "named twice: " << f.ranks[0];
      EXPECT_EQ(f.hosts, std::vector<std::string>{"h" + std::to_string(f.ranks[0] / 8)});
    }
  EXPECT_EQ(named.size(), static_cast<std::size_t>(world - 1));
  EXPECT_EQ(g.verdict, Outcome::fail);
}

// Rank 0's world verdict: an unreported rank is named, views merged, no profile -> no baseline.
TEST(JudgeRun, WorldNamesTheUnreportedAndMergesTheViews) {
  std::vector<Verdict> views{local_view(0, "h0"), local_view(1, "h1")};
  for (auto& v : views) apply_verdict(v);
  WorldRoster roster{.world_size = 3, .reporting_rank = 0, .unreported = {{2, "h2"}},
                     .duration_s = 3};
  Verdict g = judge_world(views, roster, nullptr);
  EXPECT_EQ(g.scope, Scope::global);
  EXPECT_DOUBLE_EQ(g.duration_s, 3);
  ASSERT_EQ(g.findings.size(), 1u);
  EXPECT_EQ(g.findings[0].code, Code::PEER_LOST);
  EXPECT_EQ(g.findings[0].ranks, std::vector<int>{2});
  EXPECT_EQ(g.findings[0].message, "rank 2 (host h2) joined but never reported its verdict");
  EXPECT_EQ(g.findings[0].subject.peer, 2);
  EXPECT_TRUE(g.baseline.is_null());
  EXPECT_EQ(g.verdict, Outcome::fail);
  EXPECT_THROW(judge_world({}, roster, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace ncclsmoke::results
