// Whether the pairwise rounds run (results/judging/pairwise_rules.h decide_pairwise): when auto
// runs them (a timeout, a lost peer, a suspect ring link, a gate below the profile) and when not
// (healthy, a stopped rank explains it, the transports did not run), which transports take part
// (a backend that cannot pair, one that did not run on a rank), and the phase's status and detail.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/results/judging/pairwise_inputs.h"
#include "results/judging/pairwise_rules.h"

namespace ncclsmoke::results {
namespace {

using nlohmann::json;

using results::testing::four_hosts;
using results::testing::healthy;
using results::testing::ring_stats;

TEST(PairwisePlan, AutoLeavesAHealthyRunAlone) {
  auto p = decide_pairwise(four_hosts(), {});
  EXPECT_FALSE(p.run);
  EXPECT_NE(p.reason.find("not needed"), std::string::npos) << p.reason;
  EXPECT_EQ(p.participants, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p.transports, (std::vector<std::string>{"socket"}));
}

TEST(PairwisePlan, ForcedRunsAHealthyRun) {
  PairwiseAsk s;
  s.mode = PairwiseRequest::always;
  auto p = decide_pairwise(four_hosts(), s);
  EXPECT_TRUE(p.run);
  EXPECT_EQ(p.reason, "requested (--pairwise)");
}

TEST(PairwisePlan, AutoRunsAfterATimeoutOrALostPeer) {
  auto in = four_hosts();
  in.summaries[2].transports[0].timed_out = true;
  in.summaries[2].transports[0].status = PhaseStatus::fail;
  auto p = decide_pairwise(in, {});
  EXPECT_TRUE(p.run);
  EXPECT_NE(p.reason.find("transport:socket failed with a timeout or a lost peer on rank 2"),
            std::string::npos)
      << p.reason;
  EXPECT_EQ(p.transports, (std::vector<std::string>{"socket"})) << "a failed transport still pairs";
}

TEST(PairwisePlan, AutoRunsWhenTheRingShowsASuspectLink) {
  auto in = four_hosts();
  // Blocked 2 s sending to rank 3 where the others never block (judge_links names a link on
  // time, not on retransmits alone).
  in.summaries[2].transports[0].link_stats->send_blocked_s = 2.0;
  auto p = decide_pairwise(in, {});
  EXPECT_TRUE(p.run) << p.reason;
  EXPECT_NE(p.reason.find("the ring's link stats show SLOW_"), std::string::npos) << p.reason;
}

// No profile, a first run: the transport carries 2% of what the slowest interface says it can.
TEST(PairwisePlan, AutoRunsWhenATransportIsFarBelowTheLineRate) {
  auto in = four_hosts();
  for (int r = 0; r < 4; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.host = "host" + std::to_string(r);
    ri.interface = "eth0";
    ri.link_speed_mbps = 10000;
    in.ranks.push_back(ri);
  }
  TransportRow row;
  row.transport = "socket";
  row.bytes = 4 << 20;
  row.busbw_gbps = 0.025;
  in.rows = {row};
  auto p = decide_pairwise(in, {});
  EXPECT_TRUE(p.run) << p.reason;
  EXPECT_NE(p.reason.find("BELOW_LINE_RATE"), std::string::npos) << p.reason;
  in.rows[0].busbw_gbps = 0.4;  // 32%: a healthy namespace ring
  EXPECT_FALSE(decide_pairwise(in, {}).run);
}

TEST(PairwisePlan, AutoRunsWhenTheGateIsBelowTheProfile) {
  auto in = four_hosts();
  Profile prof;
  prof.name = "p";
  TransportExpectation te;
  te.transport = "socket";
  BaselineBand band;
  band.busbw_gbps = 10;
  band.gate_bytes = 1 << 20;
  te.by_world_size[0] = band;
  prof.transports.push_back(te);
  in.profile = &prof;
  TransportRow row;
  row.transport = "socket";
  row.rank = -1;
  row.bytes = 1 << 20;
  row.busbw_gbps = 9;  // 90%: within the 85% band
  in.rows = {row};
  EXPECT_FALSE(decide_pairwise(in, {}).run);
  in.rows[0].busbw_gbps = 5;
  auto p = decide_pairwise(in, {});
  EXPECT_TRUE(p.run);
  EXPECT_NE(p.reason.find("gate busbw 5 GB/s is below 85% of the profile's 10 GB/s"),
            std::string::npos)
      << p.reason;
  in.rows[0].bytes = 2 << 20;  // not the band's size: not compared
  EXPECT_FALSE(decide_pairwise(in, {}).run);
}

TEST(PairwisePlan, AStoppedRankExplainsTheTimeoutsAndIsLeftOut) {
  auto in = four_hosts();
  in.summaries[1].transports[0].timed_out = true;
  in.stopped = {2};
  auto p = decide_pairwise(in, {});
  EXPECT_FALSE(p.run);
  EXPECT_NE(p.reason.find("rank 2 stopped answering"), std::string::npos) << p.reason;
  PairwiseAsk s;
  s.mode = PairwiseRequest::always;
  auto forced = decide_pairwise(in, s);
  EXPECT_TRUE(forced.run);
  EXPECT_EQ(forced.participants, (std::vector<int>{0, 1, 3}));
}

// A backend that declares it cannot pair (BackendInfo::no_pairs; none of the built-in ones does
// now: "shmem" stands for one whose library owns a world it cannot split) is skipped with its
// reason, and so is one that did not run on some rank.
TEST(PairwisePlan, TransportsThatCannotPairAreSkippedWithTheReason) {
  PairwiseInputs in;
  in.requested = {"socket", "shmem", "nccl"};
  for (int r = 0; r < 3; ++r) in.summaries.push_back(healthy(r, "h", {"socket", "shmem", "nccl"}));
  in.summaries[1].transports[2].status = PhaseStatus::skipped;
  in.summaries[1].transports[2].skipped_why = "no CUDA device";
  in.cannot_pair["shmem"] = "a 2-rank shmem world cannot be formed inside the run";
  PairwiseAsk s;
  s.mode = PairwiseRequest::always;
  auto p = decide_pairwise(in, s);
  EXPECT_TRUE(p.run);
  EXPECT_EQ(p.transports, (std::vector<std::string>{"socket"}));
  ASSERT_EQ(p.skipped.size(), 2u);
  EXPECT_NE(p.skipped["shmem"].find("2-rank shmem world"), std::string::npos);
  EXPECT_EQ(p.skipped["nccl"], "transport:nccl did not run on rank 1: no CUDA device");
}

TEST(PairwisePlan, OneRankOrNoTransportIsNoRun) {
  PairwiseAsk s;
  s.mode = PairwiseRequest::always;
  PairwiseInputs one;
  one.requested = {"socket"};
  one.summaries = {healthy(0, "h")};
  auto p = decide_pairwise(one, s);
  EXPECT_FALSE(p.run);
  EXPECT_NE(p.reason.find("1 rank took part"), std::string::npos) << p.reason;
  PairwiseInputs none = four_hosts();
  for (auto& sum : none.summaries) sum.transports[0].status = PhaseStatus::not_run;
  p = decide_pairwise(none, s);
  EXPECT_FALSE(p.run);
  EXPECT_NE(p.reason.find("no transport can run pairwise rounds"), std::string::npos) << p.reason;
}

TEST(PairwisePlan, AutoAndForcedAlikeDoNotRunWhenTheTransportsDidNot) {
  auto in = four_hosts();
  in.transports_ran = false;
  in.summaries.resize(1);
  for (auto mode : {PairwiseRequest::automatic, PairwiseRequest::always}) {
    PairwiseAsk s;
    s.mode = mode;
    auto p = decide_pairwise(in, s);
    EXPECT_FALSE(p.run);
    EXPECT_EQ(p.reason, "the transports did not run");
    EXPECT_EQ(p.participants, (std::vector<int>{0}));
  }
}

TEST(PairwisePlan, APeerLostAloneAlsoRunsTheRounds) {
  auto in = four_hosts();
  in.summaries[3].transports[0].peer_lost = true;
  auto p = decide_pairwise(in, {});
  EXPECT_TRUE(p.run);
  EXPECT_NE(p.reason.find("timeout or a lost peer on rank 3"), std::string::npos) << p.reason;
}

TEST(PairwisePhase, StatusAndDetail) {
  PairwiseDecision plan;
  plan.reason = "requested (--pairwise)";
  plan.bytes = 1 << 20;
  plan.iters = 3;
  plan.budget_s = 30;
  PairwiseRun run;
  run.transport = "socket";
  run.rank = 2;
  run.rounds_total = 7;
  run.duration_s = 1.2;
  for (int k = 0; k < 7; ++k) {
    PairSample s;
    s.round = k;
    s.peer = k;
    s.time_us = 500;
    run.samples.push_back(s);
  }
  auto ph = pairwise_phase(plan, run);
  EXPECT_EQ(ph.name, "pairwise:socket");
  EXPECT_EQ(ph.status, PhaseStatus::pass);
  EXPECT_FALSE(ph.required);
  EXPECT_EQ(ph.detail,
            "7 rounds of 1 MiB x 3 in 1.20 s, budget 30 s; rank 2: 7 pairs measured, 0 failed; "
            "reason: requested (--pairwise)");
  run.samples[3].error = "timeout: waiting for rank 3";
  run.samples.resize(5);
  run.rounds_late = 1;
  run.sat_out = 1;
  ph = pairwise_phase(plan, run);
  EXPECT_EQ(ph.status, PhaseStatus::degraded) << "evidence, not a failed run";
  EXPECT_NE(ph.detail.find("7 rounds (1 not started: the budget was spent)"), std::string::npos)
      << ph.detail;
  EXPECT_NE(ph.detail.find("4 pairs measured, 1 failed, sat out 1"), std::string::npos)
      << ph.detail;
  EXPECT_NE(ph.detail.find("first failure: round 3 with rank 3: timeout: waiting for rank 3"),
            std::string::npos)
      << ph.detail;
  run.partner_stopped = 2;
  run.partner_late = 1;
  EXPECT_NE(pairwise_phase(plan, run).detail.find(
                ", 2 skipped (the partner had stopped), 1 skipped (the partner had no time left)"),
            std::string::npos)
      << pairwise_phase(plan, run).detail;
  run.samples.clear();
  EXPECT_EQ(pairwise_phase(plan, run).status, PhaseStatus::pass)
      << "rounds skipped for a stopped or late partner are not a failure of this rank";
  run = {};
  run.transport = "socket";
  run.rounds_total = 3;
  run.rounds_late = 3;
  ph = pairwise_phase(plan, run);
  EXPECT_EQ(ph.status, PhaseStatus::not_run);
  EXPECT_NE(ph.detail.find("3 rounds (3 not started: the budget was spent)"), std::string::npos);
  auto nr = pairwise_not_run_phase("mpi", "why", true);
  EXPECT_EQ(nr.status, PhaseStatus::skipped);
  EXPECT_FALSE(nr.required);
}


// ---- the second pass ----------------------------------------------------------------------------

// One transport's first-round links over every pair of `n` hosts (rank r on host "h<r>"), both
// directions; `slow` pairs at 60 ms, the rest at 2.5 ms.
std::vector<LinkEvidence> first_rounds(int n, const std::set<std::pair<int, int>>& slow,
                                       const std::map<int, std::string>& host_of) {
  std::vector<LinkEvidence> out;
  int round = 0;
  for (const auto& [a, ha] : host_of)
    for (const auto& [b, hb] : host_of) {
      if (b <= a || ha == hb) continue;
      for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
        LinkEvidence e;
        e.transport = "socket";
        e.source = "pairwise";
        e.from_rank = from;
        e.to_rank = to;
        e.from_host = host_of.at(from);
        e.to_host = host_of.at(to);
        e.round = round;
        e.time_us = slow.count({a, b}) ? 60000 : 2500;
        out.push_back(e);
      }
      ++round;
    }
  (void)n;
  return out;
}
std::map<int, std::string> one_rank_a_host(int n) {
  std::map<int, std::string> m;
  for (int r = 0; r < n; ++r) m[r] = "h" + std::to_string(r);
  return m;
}

TEST(SecondPass, MeetsEachSuspectWithTwoHealthyHostsInDisjointRounds) {
  const auto hosts = one_rank_a_host(8);
  auto sp = plan_second_pass(first_rounds(8, {{3, 5}}, hosts), hosts);
  EXPECT_EQ(sp.suspects, (std::vector<std::string>{"h3", "h5"}));
  EXPECT_EQ(sp.why_none, "");
  // Two rounds with healthy partners, and a third measuring the named link h3-h5 again.
  ASSERT_EQ(sp.rounds.size(), 3u);
  EXPECT_EQ(sp.rechecks, (std::set<std::pair<int, int>>{{3, 5}}));
  EXPECT_EQ(sp.rounds[2], (std::vector<std::pair<int, int>>{{3, 5}}));
  std::map<int, std::set<int>> partners;
  for (const auto& round : sp.rounds) {
    std::set<int> busy;
    for (auto [a, b] : round) {
      EXPECT_LT(a, b);
      EXPECT_TRUE(busy.insert(a).second && busy.insert(b).second) << "a rank twice in a round";
      if (sp.rechecks.count({a, b})) continue;
      const int suspect = sp.suspect_of_rank.count(a) ? a : b;
      const int partner = suspect == a ? b : a;
      EXPECT_EQ(sp.suspect_of_rank.count(partner), 0u) << "two suspects paired";
      partners[suspect].insert(partner);
    }
  }
  EXPECT_EQ(partners[3].size(), 2u);
  EXPECT_EQ(partners[5].size(), 2u);
  EXPECT_EQ(sp.suspect_of_rank, (std::map<int, std::string>{{3, "h3"}, {5, "h5"}}));
}

TEST(SecondPass, NoneWhenNothingIsNamedOrMostHostsAreSuspects) {
  const auto four = one_rank_a_host(4);
  auto sp = plan_second_pass(first_rounds(4, {}, four), four);
  EXPECT_TRUE(sp.rounds.empty());
  EXPECT_EQ(sp.why_none, "the first rounds named no host");
  // Three of five hosts slow with everyone: a fault most hosts share. No host is met with
  // partners (too few to trust); whatever links the rules named are only measured again.
  const auto five = one_rank_a_host(5);
  std::set<std::pair<int, int>> slow;
  for (int a = 0; a < 5; ++a)
    for (int b = a + 1; b < 5; ++b)
      if (a < 3) slow.insert({a, b});
  sp = plan_second_pass(first_rounds(5, slow, five), five);
  EXPECT_TRUE(sp.suspects.empty()) << ::testing::PrintToString(sp.suspects);
  for (const auto& round : sp.rounds)
    for (const auto& pair : round) EXPECT_TRUE(sp.rechecks.count(pair)) << pair.first << "-" << pair.second;
  // Two bad links on five hosts (h0-h1, h2-h3): four suspects, one healthy host to meet them:
  // no suspect is met, but both links are measured again (one round: they share no end).
  sp = plan_second_pass(first_rounds(5, {{0, 1}, {2, 3}}, five), five);
  EXPECT_TRUE(sp.suspects.empty());
  EXPECT_NE(sp.why_no_partners.find("too few healthy partners"), std::string::npos)
      << sp.why_no_partners;
  EXPECT_EQ(sp.rechecks, (std::set<std::pair<int, int>>{{0, 1}, {2, 3}}));
  ASSERT_EQ(sp.rounds.size(), 1u);
  EXPECT_EQ(sp.rounds[0].size(), 2u);
}

TEST(SecondPass, NamedLinksSharingAnEndAreMeasuredAgainInRoundsOfTheirOwn) {
  // h1-h3 and h1-h5 both slow (h1 fine with the rest: two links, not a host): each is measured
  // again, in different rounds (h1 is in both).
  const auto hosts = one_rank_a_host(8);
  auto sp = plan_second_pass(first_rounds(8, {{1, 3}, {1, 5}}, hosts), hosts);
  EXPECT_EQ(sp.suspects, (std::vector<std::string>{"h1", "h3", "h5"}));
  EXPECT_EQ(sp.rechecks, (std::set<std::pair<int, int>>{{1, 3}, {1, 5}}));
  ASSERT_EQ(sp.rounds.size(), 4u);
  EXPECT_EQ(sp.rounds[2].size(), 1u);
  EXPECT_EQ(sp.rounds[3].size(), 1u);
}

TEST(SecondPass, ALinkThatLostPacketsWithNoSlowdownIsMeasuredAgain) {
  const auto hosts = one_rank_a_host(8);
  auto links = first_rounds(8, {}, hosts);
  for (auto& l : links)  // quiet links retransmit 0.2%; h2-h5 5%, no slower
    l.retrans_rate =
        std::min(l.from_rank, l.to_rank) == 2 && std::max(l.from_rank, l.to_rank) == 5 ? 0.05 : 0.002;
  auto sp = plan_second_pass(links, hosts);
  // Not suspects (nothing was named), but the link is measured again, its ends standing in.
  EXPECT_TRUE(sp.suspects.empty());
  EXPECT_EQ(sp.rechecks, (std::set<std::pair<int, int>>{{2, 5}}));
  EXPECT_TRUE(sp.suspect_of_rank.empty()) << "no host is met with partners";
  ASSERT_EQ(sp.rounds.size(), 1u);
}

TEST(SecondPass, OnFourHostsALossyCandidateLinkStillLeavesPartners) {
  // h1-h3 slow; h0-h2 lost packets with no slowdown (a candidate). Without the candidate's ends
  // there is no partner left on four hosts: they stand in, so h1 and h3 still meet two each.
  const auto hosts = one_rank_a_host(4);
  auto links = first_rounds(4, {{1, 3}}, hosts);
  for (auto& l : links)
    l.retrans_rate = std::min(l.from_rank, l.to_rank) == 0 && std::max(l.from_rank, l.to_rank) == 2
                         ? 0.05 : 0.002;
  auto sp = plan_second_pass(links, hosts);
  EXPECT_EQ(sp.suspects, (std::vector<std::string>{"h1", "h3"}));
  EXPECT_EQ(sp.why_no_partners, "");
  EXPECT_EQ(sp.rechecks, (std::set<std::pair<int, int>>{{0, 2}, {1, 3}}));
  std::map<int, std::set<int>> partners;
  for (const auto& round : sp.rounds)
    for (auto [a, b] : round)
      if (!sp.rechecks.count({a, b})) partners[a == 1 || a == 3 ? a : b].insert(a == 1 || a == 3 ? b : a);
  EXPECT_EQ(partners[1], (std::set<int>{0, 2}));
  EXPECT_EQ(partners[3], (std::set<int>{0, 2}));
  // On eight hosts the clean hosts suffice: the candidate's ends are not partners.
  const auto eight = one_rank_a_host(8);
  links = first_rounds(8, {{1, 3}}, eight);
  for (auto& l : links)
    l.retrans_rate = std::min(l.from_rank, l.to_rank) == 0 && std::max(l.from_rank, l.to_rank) == 2
                         ? 0.05 : 0.002;
  sp = plan_second_pass(links, eight);
  for (const auto& round : sp.rounds)
    for (auto [a, b] : round)
      if (!sp.rechecks.count({a, b})) {
        EXPECT_NE(a, 0);
        EXPECT_NE(b, 2);
        EXPECT_NE(a, 2);
      }
}

TEST(SecondPass, OneRankStandsForEachHost) {
  // Two ranks a host (ranks 2h and 2h+1 on host h): the lowest rank of each host is paired.
  std::map<int, std::string> hosts;
  for (int r = 0; r < 8; ++r) hosts[r] = "h" + std::to_string(r / 2);
  std::set<std::pair<int, int>> slow;
  for (int a = 0; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b)
      if (a / 2 == 1 || b / 2 == 1) slow.insert({a, b});  // host h1 slow with everyone
  auto sp = plan_second_pass(first_rounds(8, slow, hosts), hosts);
  EXPECT_EQ(sp.suspects, (std::vector<std::string>{"h1"}));
  EXPECT_EQ(sp.suspect_of_rank, (std::map<int, std::string>{{2, "h1"}}));
  ASSERT_EQ(sp.rounds.size(), 2u);
  for (const auto& round : sp.rounds) {
    ASSERT_EQ(round.size(), 1u);
    EXPECT_EQ(round[0].second % 2 + round[0].first % 2, 0) << "a host's lowest rank stands for it";
  }
}

TEST(SecondPass, APhaseSaysWhatTheSecondPassDid) {
  PairwiseDecision plan;
  plan.bytes = 1 << 20;
  plan.iters = 3;
  plan.reason = "requested (--pairwise)";
  PairwiseRun run;
  run.transport = "socket";
  run.rank = 3;
  run.rounds_total = 7;
  run.second_suspects = {"h3"};
  run.second_rounds = 2;
  run.second_pairs_here = 2;
  auto ph = pairwise_phase(plan, run);
  EXPECT_NE(ph.detail.find("second pass: 2 rounds meeting h3 again with hosts the first rounds "
                           "found healthy (2 pairs here, in 0.00 s, planned in 0.00 s)"),
            std::string::npos)
      << ph.detail;
  run.second_rechecks = 1;
  run.second_rounds = 3;
  EXPECT_NE(pairwise_phase(plan, run).detail.find(
                "found healthy, and measuring 1 link again (2 pairs here"),
            std::string::npos)
      << pairwise_phase(plan, run).detail;
  run.second_suspects.clear();
  run.second_rounds = 1;
  EXPECT_NE(pairwise_phase(plan, run).detail.find("second pass: 1 round measuring 1 link again ("),
            std::string::npos)
      << pairwise_phase(plan, run).detail;
  run.second_rechecks = 0;
  run.second_rounds = 0;
  run.second_why_none = "the first rounds named no host";
  EXPECT_NE(pairwise_phase(plan, run).detail.find("no second pass: the first rounds named no host"),
            std::string::npos);
}

}  // namespace
}  // namespace ncclsmoke::results
