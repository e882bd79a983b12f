// SLOW_HOST / SLOW_LINK from per-link evidence (results/judging/link_rules.h), no baseline: ring
// link stats with TCP_INFO figures, and pairwise rounds.
#include "results/judging/link_rules.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "results/judging/judge_run.h"
#include "results/judging/transport_rules.h"

namespace ncclsmoke::results {
namespace {

using nlohmann::json;

std::string host(int r) { return "h" + std::to_string(r); }

TransportIdentity socket_row(int rank) {
  TransportIdentity id;
  id.transport = "socket";
  id.rank = rank;
  return id;
}

Verdict world_of(int n) {
  Verdict v;
  v.world.size = n;
  for (int r = 0; r < n; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.host = host(r);
    v.ranks.push_back(ri);
  }
  return v;
}

// A ring where every link sent 10,000 segments; `lossy` hosts drop ~6% of what crosses them.
Verdict ring(int n, const std::vector<int>& lossy) {
  Verdict v = world_of(n);
  auto is_lossy = [&](int r) { return std::count(lossy.begin(), lossy.end(), r) > 0; };
  for (int r = 0; r < n; ++r) {
    TransportIdentity id = socket_row(r);
    LinkFacts ls;
    ls.next_rank = (r + 1) % n;
    ls.prev_rank = (r + n - 1) % n;
    ls.send_blocked_s = 0.05;
    ls.tx_segs_out = 10000;
    ls.tx_retrans = (is_lossy(r) || is_lossy(ls.next_rank)) ? 600 : 3;
    ls.tx_rtt_us = 300;
    write_link_stats(id.observed, ls);
    v.identities.push_back(id);
  }
  return v;
}

PairSample sample(int round, int peer, double time_us) {
  PairSample p;
  p.round = round;
  p.peer = peer;
  p.peer_host = host(peer);
  p.bytes = 1 << 20;
  p.iters = 3;
  p.time_us = time_us;
  return p;
}

// Every pair once (round-robin); the time of pair (a,b) is slow_time when `slow(a,b)`.
template <class Slow>
Verdict pairwise(int n, Slow slow) {
  Verdict v = world_of(n);
  std::vector<std::vector<PairSample>> by_rank(n);
  int round = 0;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b, ++round) {
      double t = slow(a, b) ? 60000 : 2500;
      by_rank[a].push_back(sample(round, b, t));
      by_rank[b].push_back(sample(round, a, t));
    }
  for (int r = 0; r < n; ++r) {
    TransportIdentity id = socket_row(r);
    write_pair_samples(id.observed, by_rank[r]);
    v.identities.push_back(id);
  }
  return v;
}

std::vector<Finding> with(const std::vector<Finding>& fs, Code c) {
  std::vector<Finding> out;
  for (const auto& f : fs)
    if (f.code == c) out.push_back(f);
  return out;
}

TEST(LinkRules, AHealthyRingAndHealthyPairsNameNothing) {
  EXPECT_TRUE(judge_links(ring(8, {})).empty());
  EXPECT_TRUE(judge_links(pairwise(8, [](int, int) { return false; })).empty());
}

TEST(LinkRules, ALossyHostOnTheRingIsSlowHostAndNoNeighbourIsNamed) {
  auto fs = judge_links(ring(8, {2}));
  auto slow = with(fs, Code::SLOW_HOST);
  ASSERT_EQ(slow.size(), 1u) << (fs.empty() ? "" : fs[0].message);
  EXPECT_EQ(slow[0].hosts, std::vector<std::string>{"h2"});
  EXPECT_EQ(slow[0].subject.peer_host, "h2");
  EXPECT_EQ(slow[0].subject.transport, "socket");
  EXPECT_NE(slow[0].message.find("retransmits"), std::string::npos) << slow[0].message;
  EXPECT_TRUE(with(fs, Code::SLOW_LINK).empty()) << "links next to the slow host are explained by it";
}

TEST(LinkRules, AHostSlowWithEveryPartnerIsSlowHost) {
  auto fs = judge_links(pairwise(8, [](int a, int b) { return a == 5 || b == 5; }));
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].code, Code::SLOW_HOST);
  EXPECT_EQ(fs[0].hosts, std::vector<std::string>{"h5"});
  EXPECT_EQ(fs[0].evidence["bad_links"], 14);
  EXPECT_EQ(fs[0].subject.phase, "pairwise:socket");
}

TEST(LinkRules, OneSlowPairIsSlowLinkNamingBothEndsNotAHost) {
  auto fs = judge_links(pairwise(8, [](int a, int b) { return a == 2 && b == 5; }));
  ASSERT_EQ(fs.size(), 1u) << fs[0].message;
  EXPECT_EQ(fs[0].code, Code::SLOW_LINK);
  EXPECT_EQ(fs[0].hosts, (std::vector<std::string>{"h2", "h5"}));
  EXPECT_NE(fs[0].message.find("h2 and h5"), std::string::npos) << fs[0].message;
}

TEST(LinkRules, PairwiseRoundsOutweighTheRingsTwoLinksPerHost) {
  Verdict v = ring(8, {2});  // the ring suspects h2 ...
  Verdict p = pairwise(8, [](int a, int b) { return a == 6 || b == 6; });  // ... pairs say h6
  for (std::size_t r = 0; r < v.identities.size(); ++r)
    v.identities[r].observed[kPairwiseKey] = p.identities[r].observed[kPairwiseKey];
  auto fs = judge_links(v);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].hosts, std::vector<std::string>{"h6"});
}

TEST(LinkRules, LinksInsideOneHostAreNotJudged) {
  Verdict v = ring(4, {1});
  for (auto& r : v.ranks) r.host = "same";
  EXPECT_TRUE(judge_links(v).empty());
}

TEST(LinkRules, AFailedPairCountsAsBad) {
  Verdict v = pairwise(6, [](int, int) { return false; });
  for (auto& id : v.identities) {
    auto samples = pair_samples_of(id);
    for (auto& s : samples)
      if (id.rank == 4 || s.peer == 4) {
        s.error = "timed out after 2 s";
        s.time_us = std::numeric_limits<double>::quiet_NaN();
      }
    id.observed.erase(kPairwiseKey);
    write_pair_samples(id.observed, samples);
  }
  auto fs = judge_links(v);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].code, Code::SLOW_HOST);
  EXPECT_EQ(fs[0].hosts, std::vector<std::string>{"h4"});
}

// A pair that could not run because the backend cannot run on one rank (MPI failed there) says
// nothing of any link: every host's pairs failing that way names no host.
TEST(LinkRules, APairTheBackendCouldNotRunIsNoLinkEvidence) {
  Verdict v = pairwise(6, [](int, int) { return false; });
  for (auto& id : v.identities) {
    auto samples = pair_samples_of(id);
    for (auto& s : samples) {
      s.error = "unavailable: MPI is unusable in this process";
      s.error_kind = kPairUnavailable;
      s.time_us = std::numeric_limits<double>::quiet_NaN();
    }
    id.observed.erase(kPairwiseKey);
    write_pair_samples(id.observed, samples);
  }
  EXPECT_TRUE(judge_links(v).empty());
  EXPECT_TRUE(link_evidence(v).empty());
}

TEST(LinkRules, PairSamplesRoundTrip) {
  TransportIdentity id;
  PairSample p = sample(3, 7, 1234.5);
  p.busbw_gbps = 0.8;
  p.retrans = 4;
  p.segs_out = 900;
  p.rtt_us = 210;
  p.error = "timeout: 2 s";
  p.error_kind = "timeout";
  write_pair_samples(id.observed, {p});
  auto back = pair_samples_of(id);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].error_kind, "timeout");
  EXPECT_EQ(back[0].peer, 7);
  EXPECT_EQ(back[0].round, 3);
  EXPECT_DOUBLE_EQ(back[0].time_us, 1234.5);
  EXPECT_EQ(back[0].retrans, 4);
  EXPECT_EQ(back[0].segs_out, 900);
}

TEST(LinkRules, TheWorldJudgementNamesASlowHostWithoutAProfile) {
  Verdict v = ring(8, {3});
  v.scope = Scope::local;
  WorldRoster roster;
  roster.world_size = 8;
  roster.reporting_rank = 0;
  Verdict g = judge_world({v}, roster, nullptr);
  auto slow = with(g.findings, Code::SLOW_HOST);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].hosts, std::vector<std::string>{"h3"});
  EXPECT_EQ(slow[0].severity, Severity::warning);
}


TEST(LinkRules, RetransmitsAloneOnOneLinkNameNoLink) {
  Verdict v = pairwise(8, [](int, int) { return false; });
  for (auto& id : v.identities) {
    if (id.rank != 4) continue;
    auto samples = pair_samples_of(id);
    for (auto& s : samples)
      if (s.peer == 0) {
        s.segs_out = 800;
        s.retrans = 23;  // 2.9%, the time as every other pair's
      }
    id.observed.erase(kPairwiseKey);
    write_pair_samples(id.observed, samples);
  }
  EXPECT_TRUE(judge_links(v).empty());
}

}  // namespace
}  // namespace ncclsmoke::results
