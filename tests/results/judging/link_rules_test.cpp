// SLOW_HOST / SLOW_LINK from per-link evidence (results/judging/link_rules.h), no baseline: ring
// link stats with TCP_INFO figures, and pairwise rounds.
#include "results/judging/link_rules.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "results/judging/judge_run.h"
#include "results/judging/transport_rules.h"
#include "results/verdict/suspects.h"

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

// ---- every shape: world sizes, one bad host or several, loss or a slow NIC, healthy noise -------

std::set<std::string> hosts_of(const std::vector<Finding>& fs, Code c) {
  std::set<std::string> out;
  for (const auto& f : with(fs, c)) out.insert(f.hosts.begin(), f.hosts.end());
  return out;
}

std::string messages(const std::vector<Finding>& fs) {
  std::string out;
  for (const auto& f : fs) out += "\n  " + f.message;
  return out;
}

TEST(LinkRules, OneLossyHostIsNamedAloneOnEveryWorldSize) {
  for (int n : {3, 4, 5, 8, 16})
    for (int bad = 0; bad < n; bad += (n > 4 ? 3 : 1)) {
      auto fs = judge_links(ring(n, {bad}));
      EXPECT_EQ(hosts_of(fs, Code::SLOW_HOST), std::set<std::string>{host(bad)})
          << n << " hosts, h" << bad << " lossy:" << messages(fs);
      EXPECT_TRUE(with(fs, Code::SLOW_LINK).empty()) << n << " hosts:" << messages(fs);
    }
}

// Pairwise links as the rules read them: every pair (a, b) measured from both ends, `slow`
// pairs at 60 ms against 2.5 ms; the second pass's pairs carry the suspect they were measured for.
struct PairTimes {
  int a, b;
  bool slow;
  int suspect = -1;      // the second pass: a or b; -1 the first rounds
  bool recheck = false;  // the second pass: the link measured again
  double retrans = 0.002;  // retransmitted share of segments sent (a quiet healthy link: 0.2%)
};
std::vector<LinkEvidence> pair_evidence(const std::vector<PairTimes>& pairs) {
  std::vector<LinkEvidence> out;
  int round = 0;
  for (const auto& p : pairs) {
    for (auto [from, to] : {std::pair{p.a, p.b}, std::pair{p.b, p.a}}) {
      LinkEvidence e;
      e.transport = "socket";
      e.source = "pairwise";
      e.from_rank = from;
      e.to_rank = to;
      e.from_host = host(from);
      e.to_host = host(to);
      e.round = round;
      e.time_us = p.slow ? 60000 : 2500;
      if (p.suspect >= 0) e.suspect_host = host(p.suspect);
      e.recheck = p.recheck;
      e.retrans_rate = p.retrans;
      out.push_back(e);
    }
    ++round;
  }
  return out;
}
std::vector<PairTimes> every_pair(int n, const std::set<std::pair<int, int>>& slow) {
  std::vector<PairTimes> out;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) out.push_back({a, b, slow.count({a, b}) > 0});
  return out;
}

TEST(LinkRules, TheSecondPassNamesAHostSlowWithEveryHealthyPartner) {
  // The first rounds caught h3 slow with h5 only (random loss can spare its other pairs): a link.
  auto first = every_pair(8, {{3, 5}});
  auto fs = judge_links(pair_evidence(first));
  EXPECT_TRUE(hosts_of(fs, Code::SLOW_HOST).empty()) << messages(fs);
  EXPECT_EQ(hosts_of(fs, Code::SLOW_LINK), (std::set<std::string>{"h3", "h5"})) << messages(fs);
  // Met again with h0 and h1: h3 slow with both, h5 fine with both. h3 is the host.
  auto both = first;
  for (PairTimes p : {PairTimes{0, 3, true, 3}, PairTimes{1, 5, false, 5},
                      PairTimes{1, 3, true, 3}, PairTimes{0, 5, false, 5}})
    both.push_back(p);
  fs = judge_links(pair_evidence(both));
  EXPECT_EQ(hosts_of(fs, Code::SLOW_HOST), std::set<std::string>{"h3"}) << messages(fs);
  EXPECT_TRUE(with(fs, Code::SLOW_LINK).empty()) << messages(fs);
  auto slow_host = with(fs, Code::SLOW_HOST);
  ASSERT_EQ(slow_host.size(), 1u);
  EXPECT_EQ(slow_host[0].evidence["second_pass"]["slow_with"], json({"h0", "h1"}))
      << slow_host[0].evidence.dump();
  EXPECT_NE(slow_host[0].message.find("second pass met it again with 2 hosts"), std::string::npos)
      << slow_host[0].message;
}

TEST(LinkRules, TheSecondPassClearsAHostFineWithEveryHealthyPartner) {
  // h1 slow with h0 and h2 in the first rounds (4 of its 6 links): a host by the share alone.
  auto first = every_pair(4, {{0, 1}, {1, 2}});
  auto fs = judge_links(pair_evidence(first));
  EXPECT_EQ(hosts_of(fs, Code::SLOW_HOST), std::set<std::string>{"h1"}) << messages(fs);
  // Met again with h3 and h0, h1 is fine with both: not a host; its two bad links are named.
  auto both = first;
  for (PairTimes p : {PairTimes{1, 3, false, 1}, PairTimes{0, 1, false, 1}}) both.push_back(p);
  fs = judge_links(pair_evidence(both));
  EXPECT_TRUE(hosts_of(fs, Code::SLOW_HOST).empty()) << messages(fs);
  EXPECT_FALSE(with(fs, Code::SLOW_LINK).empty()) << messages(fs);
}

TEST(LinkRules, AHealthyPartnerOfTwoBadHostsInTheSecondPassIsNotNamed) {
  // h2 and h5 slow with everyone; the second pass meets each with h0 and h1, which are then
  // slow with both their second-pass partners: they were partners, not suspects, and stay fine.
  std::set<std::pair<int, int>> slow;
  for (int a = 0; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b)
      if (a == 2 || b == 2 || a == 5 || b == 5) slow.insert({a, b});
  auto pairs = every_pair(8, slow);
  for (PairTimes p : {PairTimes{0, 2, true, 2}, PairTimes{1, 5, true, 5},
                      PairTimes{1, 2, true, 2}, PairTimes{0, 5, true, 5}})
    pairs.push_back(p);
  auto fs = judge_links(pair_evidence(pairs));
  EXPECT_EQ(hosts_of(fs, Code::SLOW_HOST), (std::set<std::string>{"h2", "h5"})) << messages(fs);
  EXPECT_TRUE(with(fs, Code::SLOW_LINK).empty()) << messages(fs);
}

TEST(LinkRules, ALinkSlowOnceAndFineWhenMeasuredAgainIsNotNamed) {
  // A healthy world where one all-reduce of h0-h4 waited out a retransmit timeout.
  auto pairs = every_pair(8, {{0, 4}});
  auto fs = judge_links(pair_evidence(pairs));
  EXPECT_EQ(hosts_of(fs, Code::SLOW_LINK), (std::set<std::string>{"h0", "h4"})) << messages(fs);
  // The second pass: both ends fine with healthy hosts, and the link fine when measured again.
  auto again = pairs;
  for (PairTimes p : {PairTimes{0, 1, false, 0}, PairTimes{2, 4, false, 4},
                      PairTimes{0, 2, false, 0}, PairTimes{1, 4, false, 4},
                      PairTimes{0, 4, false, -1, true}})
    again.push_back(p);
  fs = judge_links(pair_evidence(again));
  EXPECT_TRUE(fs.empty()) << messages(fs);
  // Slow again: the link is named, and says it was measured twice.
  again.back().slow = true;
  fs = judge_links(pair_evidence(again));
  auto links = with(fs, Code::SLOW_LINK);
  ASSERT_EQ(links.size(), 1u) << messages(fs);
  EXPECT_EQ(links[0].hosts, (std::vector<std::string>{"h0", "h4"}));
  EXPECT_TRUE(links[0].evidence.value("measured_again", false)) << links[0].evidence.dump();
  EXPECT_NE(links[0].message.find("slow again"), std::string::npos) << links[0].message;
  EXPECT_TRUE(with(fs, Code::SLOW_HOST).empty()) << messages(fs);
}

TEST(LinkRules, ALinkSlowOnceThatOnlyRetransmitsALittleWhenMeasuredAgainIsNotNamed) {
  // h0-h2 waited out a timeout once (slower, no retransmits); measured again it is as fast as the
  // rest but retransmits 2% on a busy bridge: a different kind of trouble, not the same link
  // fault twice. Lossy again after it lost packets the first time, it would be named.
  auto pairs = every_pair(4, {{0, 2}});
  auto again = pairs;
  PairTimes recheck{0, 2, false, -1, true};
  recheck.retrans = 0.02;
  again.push_back(recheck);
  auto fs = judge_links(pair_evidence(again));
  EXPECT_TRUE(with(fs, Code::SLOW_LINK).empty()) << messages(fs);
  for (auto& p : again)
    if (p.a == 0 && p.b == 2 && !p.recheck) p.retrans = 0.03;
  fs = judge_links(pair_evidence(again));
  EXPECT_EQ(hosts_of(fs, Code::SLOW_LINK), (std::set<std::string>{"h0", "h2"})) << messages(fs);
}

TEST(LinkRules, ALinkThatLosesPacketsTwiceIsNamedOnRetransmitsAlone) {
  // h2-h5 retransmits 5% in the first rounds, no slower: no finding yet, a candidate.
  auto pairs = every_pair(8, {});
  for (auto& p : pairs)
    if (p.a == 2 && p.b == 5) p.retrans = 0.05;
  std::vector<HostPair> candidates;
  auto fs = judge_links(pair_evidence(pairs), &candidates);
  EXPECT_TRUE(fs.empty()) << messages(fs);
  EXPECT_EQ(candidates, (std::vector<HostPair>{{"h2", "h5"}}));
  // Measured again (and each end with healthy hosts): lossy again, it is named.
  auto again = pairs;
  for (PairTimes p : {PairTimes{0, 2, false, 2}, PairTimes{1, 5, false, 5},
                      PairTimes{1, 2, false, 2}, PairTimes{0, 5, false, 5}})
    again.push_back(p);
  PairTimes recheck{2, 5, false, -1, true};
  recheck.retrans = 0.045;
  again.push_back(recheck);
  candidates.clear();
  fs = judge_links(pair_evidence(again), &candidates);
  EXPECT_TRUE(candidates.empty()) << "measured again: no longer a candidate";
  auto links = with(fs, Code::SLOW_LINK);
  ASSERT_EQ(links.size(), 1u) << messages(fs);
  EXPECT_EQ(links[0].hosts, (std::vector<std::string>{"h2", "h5"}));
  EXPECT_NE(links[0].message.find("lost packets again"), std::string::npos) << links[0].message;
  EXPECT_NE(links[0].message.find("retransmits 5.0%"), std::string::npos) << links[0].message;
  EXPECT_TRUE(with(fs, Code::SLOW_HOST).empty()) << messages(fs);
  // Clean the second time: a busy moment, not a link.
  again.back().retrans = 0.002;
  fs = judge_links(pair_evidence(again));
  EXPECT_TRUE(fs.empty()) << messages(fs);
  // Retransmitting a little the second time (1.5%: what healthy links sharing a busy bridge
  // reach) is not losing packets again.
  again.back().retrans = 0.015;
  fs = judge_links(pair_evidence(again));
  EXPECT_TRUE(fs.empty()) << messages(fs);
  // A pair whose first round failed (its handshake lost under the loss) and that loses packets,
  // no slower, when measured again: confirmed, and the message says how.
  auto failed_then_lossy = every_pair(8, {{2, 5}});
  failed_then_lossy.push_back(recheck);
  auto ev = pair_evidence(failed_then_lossy);
  for (auto& e : ev)
    if (!e.recheck && std::min(e.from_rank, e.to_rank) == 2 && std::max(e.from_rank, e.to_rank) == 5)
      e.error = "init_failed: the handshake did not finish";
  fs = judge_links(ev);
  links = with(fs, Code::SLOW_LINK);
  ASSERT_EQ(links.size(), 1u) << messages(fs);
  EXPECT_NE(links[0].message.find("it lost packets again"), std::string::npos) << links[0].message;
}

TEST(LinkRules, TheSecondPassTravelsInThePairSamples) {
  PairSample p = sample(7, 2, 3000);
  p.suspect_host = "h2";
  PairSample again = sample(8, 3, 2600);
  again.recheck = true;
  TransportIdentity id = socket_row(0);
  write_pair_samples(id.observed, {p, sample(0, 1, 2500), again});
  EXPECT_EQ(id.observed["pairwise"][0]["suspect"], "h2") << id.observed.dump();
  EXPECT_FALSE(id.observed["pairwise"][1].contains("suspect")) << id.observed.dump();
  EXPECT_FALSE(id.observed["pairwise"][1].contains("recheck")) << id.observed.dump();
  EXPECT_EQ(id.observed["pairwise"][2]["recheck"], true) << id.observed.dump();
  auto back = pair_samples_of(id);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].suspect_host, "h2");
  EXPECT_TRUE(back[2].recheck);
  EXPECT_FALSE(back[1].recheck);
  auto links = pair_links("socket", 0, "h0", back, {{2, "h2"}});
  ASSERT_EQ(links.size(), 3u);
  EXPECT_TRUE(links[2].recheck);
  EXPECT_EQ(links[0].suspect_host, "h2");
  EXPECT_EQ(links[0].to_host, "h2");
  EXPECT_EQ(links[1].to_host, "h1") << "a peer host_of does not know: the sample's peer_host";
}

TEST(LinkRules, AHostSlowWithEveryPartnerIsNamedOnFourHosts) {
  // On four hosts a host is in half of the pairs: a median over every pair is half its own.
  for (int bad = 0; bad < 4; ++bad) {
    auto fs = judge_links(pairwise(4, [&](int a, int b) { return a == bad || b == bad; }));
    EXPECT_EQ(hosts_of(fs, Code::SLOW_HOST), std::set<std::string>{host(bad)}) << messages(fs);
    EXPECT_TRUE(with(fs, Code::SLOW_LINK).empty()) << messages(fs);
  }
}

TEST(LinkRules, TwoBadHostsAreBothNamedAndNoOther) {
  // Apart, side by side, across the ring's seam, and one apart (the host between them has both
  // ring links bad, each explained by its other end).
  for (std::vector<int> bad : {std::vector<int>{2, 5}, {2, 3}, {0, 7}, {3, 5}}) {
    std::set<std::string> want{host(bad[0]), host(bad[1])};
    auto fs = judge_links(ring(8, bad));
    EXPECT_EQ(hosts_of(fs, Code::SLOW_HOST), want) << "ring:" << messages(fs);
    auto ps = judge_links(pairwise(8, [&](int a, int b) {
      return a == bad[0] || b == bad[0] || a == bad[1] || b == bad[1];
    }));
    EXPECT_EQ(hosts_of(ps, Code::SLOW_HOST), want) << "pairwise:" << messages(ps);
    EXPECT_TRUE(with(ps, Code::SLOW_LINK).empty()) << messages(ps);
  }
}

TEST(LinkRules, TwoHostsNameTheirLinkAndSetNeitherAside) {
  auto fs = judge_links(ring(2, {1}));
  ASSERT_EQ(fs.size(), 1u) << messages(fs);
  EXPECT_EQ(fs[0].code, Code::SLOW_LINK);
  EXPECT_EQ(fs[0].hosts, (std::vector<std::string>{"h0", "h1"}));
  EXPECT_NE(fs[0].message.find("either host or the path"), std::string::npos) << fs[0].message;
  EXPECT_NE(fs[0].message.find("6.0%"), std::string::npos) << fs[0].message;
  Verdict v = world_of(2);
  v.findings = fs;
  EXPECT_TRUE(suspect_hosts(v).empty()) << "a link's two ends are candidates, not suspects";
  // A healthy pair of hosts: the namespace bridge's own retransmits (up to 0.9%) name nothing.
  Verdict healthy = ring(2, {});
  for (auto& id : healthy.identities) {
    auto ls = *link_stats_of(id);
    ls.tx_retrans = 90;
    write_link_stats(id.observed, ls);
  }
  EXPECT_TRUE(judge_links(healthy).empty());
}

// Healthy figures drawn from what namespace runs measured (retransmits 0-0.9%, time blocked up
// to 0.02 s, 1 MiB pair times 0.5-1.7 ms); faults at the strengths the namespace tests use (loss
// 3-10%: retransmits 1.5-10% on every link of the host; a slow NIC: 20-40x the pair time).
// The bad hosts are at most (n - 2) / 2: beyond that most links touch a bad host, and loss
// everywhere is the fabric's, not a host's.
TEST(LinkRules, RandomShapesNameEveryBadHostAndNoHealthyOne) {
  std::mt19937 rng(20261207);
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<>(lo, hi)(rng); };
  int faulty_runs = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    const int n = std::uniform_int_distribution<>(2, 12)(rng);
    const int max_bad = n == 2 ? 1 : std::max(0, (n - 2) / 2);
    const int n_bad = std::uniform_int_distribution<>(0, std::min(2, max_bad))(rng);
    std::set<int> bad;
    while (static_cast<int>(bad.size()) < n_bad)
      bad.insert(std::uniform_int_distribution<>(0, n - 1)(rng));
    const bool slow_nic = uniform(0, 1) < 0.5;
    const bool with_pairs = n > 2 && uniform(0, 1) < 0.6;
    auto touches_bad = [&](int a, int b) { return bad.count(a) || bad.count(b); };
    Verdict v = world_of(n);
    std::vector<std::vector<PairSample>> by_rank(n);
    if (with_pairs) {
      int round = 0;
      for (int a = 0; a < n; ++a)
        for (int b = a + 1; b < n; ++b, ++round) {
          const bool hit = touches_bad(a, b);
          for (int side : {a, b}) {
            PairSample p = sample(round, side == a ? b : a, uniform(500, 1700));
            p.segs_out = 2900;
            p.retrans = static_cast<int>(2900 * uniform(0, 0.009));
            if (hit && slow_nic) p.time_us *= uniform(20, 40);
            if (hit && !slow_nic) p.retrans = static_cast<int>(2900 * uniform(0.03, 0.10));
            by_rank[side].push_back(p);
          }
        }
    }
    for (int r = 0; r < n; ++r) {
      TransportIdentity id = socket_row(r);
      LinkFacts ls;
      ls.next_rank = (r + 1) % n;
      ls.prev_rank = (r + n - 1) % n;
      const bool hit = touches_bad(r, ls.next_rank);
      ls.send_blocked_s = uniform(0, 0.02);
      ls.tx_segs_out = 76000;
      ls.tx_retrans = static_cast<std::int64_t>(76000 * uniform(0, 0.009));
      if (hit && !slow_nic) ls.tx_retrans = static_cast<std::int64_t>(76000 * uniform(0.03, 0.10));
      if (bad.count(r) && slow_nic) ls.send_blocked_s = uniform(2, 4);  // it sends slowly
      write_link_stats(id.observed, ls);
      if (with_pairs) write_pair_samples(id.observed, by_rank[r]);
      v.identities.push_back(id);
    }
    auto fs = judge_links(v);
    std::set<std::string> want;
    for (int b : bad) want.insert(host(b));
    const std::string shape = "trial " + std::to_string(trial) + ": " + std::to_string(n) +
                              " hosts, bad " + testing::PrintToString(bad) +
                              (slow_nic ? " slow NIC" : " lossy") + (with_pairs ? ", pairs" : ", ring");
    // Never a healthy host: no SLOW_HOST outside the bad set, no SLOW_LINK between healthy hosts.
    for (const auto& h : hosts_of(fs, Code::SLOW_HOST))
      EXPECT_TRUE(want.count(h)) << shape << " named healthy " << h << messages(fs);
    for (const auto& f : with(fs, Code::SLOW_LINK))
      EXPECT_TRUE(want.count(f.hosts[0]) || want.count(f.hosts[1])) << shape << messages(fs);
    if (bad.empty()) continue;
    ++faulty_runs;
    if (n == 2) {
      // Two hosts: loss names the link and both ends; a slow NIC needs the line rate.
      if (!slow_nic) EXPECT_EQ(hosts_of(fs, Code::SLOW_LINK), (std::set<std::string>{"h0", "h1"})) << shape;
      continue;
    }
    // A slow NIC on the ring alone shows on one link (the bad host's sends): something is named,
    // and the pairwise rounds that it triggers tell the hosts.
    if (slow_nic && !with_pairs) {
      EXPECT_FALSE(fs.empty()) << shape;
      continue;
    }
    EXPECT_EQ(hosts_of(fs, Code::SLOW_HOST), want) << shape << messages(fs);
  }
  EXPECT_GT(faulty_runs, 500);
}

// ---- the physical expectation -------------------------------------------------------------------

Verdict on_interfaces(int n, int mbps) {
  Verdict v = world_of(n);
  for (auto& r : v.ranks) {
    r.interface = "eth0";
    r.link_speed_mbps = mbps;
  }
  return v;
}

TransportRow world_row(const std::string& transport, std::int64_t bytes, double busbw) {
  TransportRow row;
  row.transport = transport;
  row.bytes = bytes;
  row.busbw_gbps = busbw;
  return row;
}

TEST(LineRate, ATransportFarBelowTheSlowestInterfaceIsNamedWithTheFigures) {
  Verdict v = on_interfaces(4, 10000);
  v.ranks[2].link_speed_mbps = 1000;  // the slowest: 0.125 GB/s
  v.transports = {world_row("socket", 1 << 20, 0.002), world_row("socket", 4 << 20, 0.003),
                  world_row("socket", 4 << 20, 0.004), world_row("fabric", 4 << 20, 0.1)};
  auto fs = judge_line_rate(v);
  ASSERT_EQ(fs.size(), 1u) << messages(fs);
  EXPECT_EQ(fs[0].code, Code::BELOW_LINE_RATE);
  EXPECT_EQ(fs[0].subject.transport, "socket");
  // The best row at the largest size, against host h2's 1,000 Mb/s.
  EXPECT_NE(fs[0].message.find("busbw 0.004 GB/s at 4 MiB is 3.2%"), std::string::npos) << fs[0].message;
  EXPECT_NE(fs[0].message.find("host h2 eth0: 1000 Mb/s = 0.125 GB/s"), std::string::npos) << fs[0].message;
  EXPECT_DOUBLE_EQ(fs[0].evidence["line_rate_gbps"].get<double>(), 0.125);
  Verdict as_suspects = v;
  as_suspects.findings = fs;
  EXPECT_TRUE(suspect_hosts(as_suspects).empty()) << "a transport's figure blames no host";
}

TEST(LineRate, NothingIsJudgedWithoutEveryRanksSpeedOrOnOneHost) {
  Verdict v = on_interfaces(4, 10000);
  v.transports = {world_row("socket", 4 << 20, 0.01)};
  EXPECT_EQ(judge_line_rate(v).size(), 1u);
  Verdict unknown = v;
  unknown.ranks[3].link_speed_mbps = 0;  // that rank may be the slow one
  EXPECT_TRUE(judge_line_rate(unknown).empty());
  Verdict one_host = v;
  for (auto& r : one_host.ranks) r.host = "same";
  EXPECT_TRUE(judge_line_rate(one_host).empty());
  Verdict small = v;
  small.transports = {world_row("socket", 256 << 10, 0.01)};  // latency, not bandwidth
  EXPECT_TRUE(judge_line_rate(small).empty());
  Verdict synthetic = v;
  synthetic.transports[0].synthetic = true;
  EXPECT_TRUE(judge_line_rate(synthetic).empty());
  Verdict healthy = v;
  healthy.transports = {world_row("socket", 4 << 20, 0.25)};  // 20%: a loaded namespace ring
  EXPECT_TRUE(judge_line_rate(healthy).empty());
}

// The fabric transport's rows carry their device port's rate (transports/fabric/efa_counters.h).
void on_device_ports(Verdict& v, const std::string& transport, double gbps, bool carried = true) {
  for (const auto& r : v.ranks) {
    TransportIdentity id;
    id.transport = transport;
    id.rank = r.rank;
    id.observed = {{"port_rate_gbps", gbps}, {"port_rate_port", "efa_0/1"},
                   {"port_rate_carried", carried}};
    v.identities.push_back(id);
  }
}

TEST(LineRate, AFabricIsHeldToItsDevicePortNotTheInterface) {
  // 4 hosts on 10,000 Mb/s interfaces, EFA ports of 100 Gb/s (12.5 GB/s): a fabric at 0.3 GB/s is
  // 2.4% of its port, though 24% of the interface; the socket ring beside it is judged as before.
  Verdict v = on_interfaces(4, 10000);
  v.transports = {world_row("fabric", 4 << 20, 0.3), world_row("socket", 4 << 20, 0.3)};
  on_device_ports(v, "fabric", 100);
  auto fs = judge_line_rate(v);
  ASSERT_EQ(fs.size(), 1u) << messages(fs);
  EXPECT_EQ(fs[0].subject.transport, "fabric");
  EXPECT_NE(fs[0].message.find("2.4% of what the slowest device port can carry (host h0 efa_0/1: "
                               "100 Gb/s = 12.5 GB/s)"),
            std::string::npos)
      << fs[0].message;
  EXPECT_EQ(fs[0].evidence["line_source"], "device port");
  EXPECT_EQ(fs[0].evidence["device_carried_bytes"], true);
  EXPECT_EQ(fs[0].message.find("fallback"), std::string::npos) << fs[0].message;
  // The device counters did not move: the bytes went another way, and the finding says so.
  Verdict fallback = on_interfaces(4, 10000);
  fallback.transports = {world_row("fabric", 4 << 20, 0.3)};
  on_device_ports(fallback, "fabric", 100, false);
  fs = judge_line_rate(fallback);
  ASSERT_EQ(fs.size(), 1u) << messages(fs);
  EXPECT_NE(fs[0].message.find("did not cross the device (a fallback"), std::string::npos)
      << fs[0].message;
  // With no interface speed at all (a cloud NIC that reports none), the ports still judge.
  Verdict no_speed = on_interfaces(4, 0);
  no_speed.transports = {world_row("fabric", 4 << 20, 0.3)};
  on_device_ports(no_speed, "fabric", 100);
  EXPECT_EQ(judge_line_rate(no_speed).size(), 1u);
  // One rank without a port rate: the interfaces decide (0.3 GB/s of 1.25 GB/s: fine).
  Verdict partial = v;
  partial.identities.back().observed.erase("port_rate_gbps");
  fs = judge_line_rate(partial);
  EXPECT_TRUE(with(fs, Code::BELOW_LINE_RATE).empty()) << messages(fs);
}

TEST(LineRate, ASlowHostNamedExplainsItsTransportsLineRate) {
  Verdict v = ring(8, {3});
  for (auto& r : v.ranks) {
    r.interface = "eth0";
    r.link_speed_mbps = 10000;
  }
  v.transports = {world_row("socket", 4 << 20, 0.02)};
  v.scope = Scope::local;
  WorldRoster roster;
  roster.world_size = 8;
  roster.reporting_rank = 0;
  Verdict g = judge_world({v}, roster, nullptr);
  auto below = with(g.findings, Code::BELOW_LINE_RATE);
  ASSERT_EQ(below.size(), 1u);
  EXPECT_EQ(below[0].severity, Severity::info) << below[0].message;
  EXPECT_EQ(below[0].evidence.value("consequence_of_host", ""), "h3");
}

}  // namespace
}  // namespace ncclsmoke::results
