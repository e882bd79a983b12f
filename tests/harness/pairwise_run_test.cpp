// The pairwise rounds of a whole run (harness/run/pairwise_step.h, harness/run/pairwise_plan.h), with the
// ranks as threads of this process (tests/harness/in_process_run.h) over the socket transport:
// the schedule meets every pair on both sides in one round, odd worlds sit one rank out a round,
// auto runs no round on a healthy world, never records no phase, a spent budget starts no round,
// and --pairwise-rounds bounds the rounds. A rank killed or frozen between rounds needs processes:
// tests/harness/pairwise_e2e_test.py.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>

#include "results/verdict/phase_id.h"
#include "tests/harness/in_process_run.h"

namespace ncclsmoke {
namespace {

using results::Outcome;
using results::PhaseStatus;
using testing::InProcessRun;
using testing::expect_pairs_on_both_sides;
using testing::pair_samples;
using testing::run_in_process;
using Pair = std::pair<int, int>;

// launch's shape of these runs: the default 1 MiB pairwise size, a 1-2 MiB sweep.
void pairwise_run(harness::RunOptions& o, results::PairwiseRequest pairwise) {
  o.transports = "socket";
  o.max_bytes = std::size_t{2} << 20;
  o.pairwise.mode = pairwise;
}

// The run passed, with rank 0's verdict.json read into `v`.
void expect_passed(const InProcessRun& run, std::optional<results::Verdict>& v) {
  v = run.global();
  ASSERT_TRUE(v) << "verdict.json in " << run.out_dir;
  for (std::size_t r = 0; r < run.codes.size(); ++r) EXPECT_EQ(run.codes[r], 0) << "rank " << r;
  EXPECT_EQ(v->verdict, Outcome::pass) << ::testing::PrintToString(testing::finding_codes(*v));
}

std::set<Pair> every_pair(int n) {
  std::set<Pair> out;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) out.insert({a, b});
  return out;
}

TEST(PairwiseRun, FourRanksMeetEveryPairInThreeRounds) {
  std::optional<results::Verdict> v;
  expect_passed(run_in_process(4, [](int, harness::RunOptions& o) { pairwise_run(o, results::PairwiseRequest::always); }),
                v);
  ASSERT_TRUE(v);
  const auto* p = testing::find_phase(*v, results::pairwise_phase_name("socket"));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->status, PhaseStatus::pass) << p->detail;
  EXPECT_EQ(p->detail.rfind("3 rounds of 1 MiB x 3 in ", 0), 0u) << p->detail;
  for (const char* part : {"budget 30 s", "reason: requested (--pairwise)", "0 failed"})
    EXPECT_NE(p->detail.find(part), std::string::npos) << part << " in " << p->detail;
  EXPECT_EQ(expect_pairs_on_both_sides(*v, 3), every_pair(4));
  const auto samples = pair_samples(*v, "socket");
  ASSERT_FALSE(samples.empty());
  const auto& s = samples.front().sample;
  EXPECT_EQ(s.value("bytes", 0), 1 << 20) << s.dump();
  EXPECT_EQ(s.value("iters", 0), 3) << s.dump();
  EXPECT_FALSE(s.value("peer_host", std::string()).empty()) << s.dump();
  EXPECT_TRUE(s.contains("segs_out") && s["segs_out"].is_number_integer()) << s.dump();
  EXPECT_TRUE(s.contains("retrans") && s["retrans"].is_number_integer()) << s.dump();
}

TEST(PairwiseRun, AnOddWorldSitsOneRankOutEachOfItsRounds) {
  std::optional<results::Verdict> v;
  expect_passed(run_in_process(5, [](int, harness::RunOptions& o) { pairwise_run(o, results::PairwiseRequest::always); }),
                v);
  ASSERT_TRUE(v);
  EXPECT_EQ(expect_pairs_on_both_sides(*v, 5), every_pair(5));
  std::map<int, int> partners;
  for (const auto& s : pair_samples(*v, "socket")) ++partners[s.rank];
  for (int r = 0; r < 5; ++r) EXPECT_EQ(partners[r], 4) << "rank " << r;
  const auto* p = testing::find_phase(*v, results::pairwise_phase_name("socket"));
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->detail.find("sat out 1"), std::string::npos) << p->detail;
}

TEST(PairwiseRun, AutoRunsNoRoundOnAHealthyWorld) {
  std::optional<results::Verdict> v;
  expect_passed(run_in_process(4, [](int, harness::RunOptions& o) { pairwise_run(o, results::PairwiseRequest::automatic); }), v);
  ASSERT_TRUE(v);
  const auto* p = testing::find_phase(*v, results::pairwise_phase_name("socket"));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->status, PhaseStatus::not_run);
  EXPECT_EQ(p->detail.rfind("not needed", 0), 0u) << p->detail;
  EXPECT_FALSE(p->required);
  EXPECT_TRUE(pair_samples(*v, "socket").empty());
}

TEST(PairwiseRun, NeverRecordsNoPairwisePhase) {
  std::optional<results::Verdict> v;
  expect_passed(run_in_process(4, [](int, harness::RunOptions& o) { pairwise_run(o, results::PairwiseRequest::never); }),
                v);
  ASSERT_TRUE(v);
  for (const auto& p : v->phases) EXPECT_NE(p.name.rfind("pairwise", 0), 0u) << p.name;
}

TEST(PairwiseRun, ASpentBudgetStartsNoRoundAndTheRunStillPasses) {
  std::optional<results::Verdict> v;
  expect_passed(run_in_process(4,
                               [](int, harness::RunOptions& o) {
                                 pairwise_run(o, results::PairwiseRequest::always);
                                 o.pairwise.budget_s = 0.5;
                               }),
                v);
  ASSERT_TRUE(v);
  const auto* p = testing::find_phase(*v, results::pairwise_phase_name("socket"));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->status, PhaseStatus::not_run) << p->detail;
  EXPECT_NE(p->detail.find("3 rounds (3 not started: the budget was spent)"), std::string::npos)
      << p->detail;
  EXPECT_NE(p->detail.find("budget 0.50 s"), std::string::npos) << p->detail;
  EXPECT_TRUE(pair_samples(*v, "socket").empty());
}

TEST(PairwiseRun, TwoRoundsOfEightRanksGiveEveryRankTwoPartners) {
  std::optional<results::Verdict> v;
  expect_passed(run_in_process(8,
                               [](int, harness::RunOptions& o) {
                                 pairwise_run(o, results::PairwiseRequest::always);
                                 o.pairwise_rounds = 2;
                               }),
                v);
  ASSERT_TRUE(v);
  EXPECT_EQ(expect_pairs_on_both_sides(*v, 2).size(), 8u);
  std::map<int, std::set<int>> partners;
  for (const auto& s : pair_samples(*v, "socket")) partners[s.rank].insert(s.peer());
  for (int r = 0; r < 8; ++r) EXPECT_EQ(partners[r].size(), 2u) << "rank " << r;
}

}  // namespace
}  // namespace ncclsmoke
