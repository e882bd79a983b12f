// SLOW_HOST from the liveness watches' "lossy path" PEER_STALLED warnings
// (results/judging/lossy_path_rule.h), and what it explains (link_rules.h explain_by_slow_hosts),
// through judge_world as rank 0 runs it.
#include "results/judging/lossy_path_rule.h"

#include <gtest/gtest.h>

#include "results/judging/judge_run.h"
#include "results/judging/run_rules.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/suspects.h"

namespace ncclsmoke::results {
namespace {

std::string host(int r) { return "h" + std::to_string(r); }

// One rank's own view: it joined, and its watch saw `silent` ranks go quiet behind retransmits.
Verdict view(int rank, int n, const std::vector<int>& silent) {
  Verdict v;
  v.scope = Scope::local;
  v.reporting_rank = rank;
  v.world.size = n;
  for (int r = 0; r < n; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.host = host(r);
    v.ranks.push_back(ri);
  }
  for (int s : silent) {
    SilentPeerFact p;
    p.rank = s;
    p.host = host(s);
    p.silent_for_s = 3.2;
    p.seen_by = rank;
    p.retransmits = 7;
    note_peer_silent(v, p, rank);
  }
  return v;
}

Finding timeout_on(int rank, const std::string& transport) {
  Subject s;
  s.reporters = {rank};
  s.transport = transport;
  s.phase = "transport:" + transport;
  return make_finding_about(Code::TRANSPORT_TIMEOUT, s, "{reporter} timed out", {rank}, {host(rank)});
}

std::vector<const Finding*> with_code(const Verdict& v, Code c) {
  std::vector<const Finding*> out;
  for (const auto& f : v.findings)
    if (f.code == c) out.push_back(&f);
  return out;
}

WorldRoster roster(int n) {
  WorldRoster r;
  r.world_size = n;
  return r;
}

TEST(LossyPath, AHostManyWatchesSawLossyIsSlowHostAndExplainsTheTimeouts) {
  const int n = 6;
  std::vector<Verdict> views;
  for (int r = 0; r < n; ++r) {
    // Rank 2 sees everyone lossy (its own path is the bad one); the others see rank 2.
    std::vector<int> silent;
    if (r == 2) silent = {0, 1, 3};
    else silent = {2};
    views.push_back(view(r, n, silent));
  }
  views[0].findings.push_back(timeout_on(0, "socket"));
  views[4].findings.push_back(timeout_on(4, "fabric"));
  Verdict g = judge_world(views, roster(n), nullptr);
  auto slow = with_code(g, Code::SLOW_HOST);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0]->hosts, std::vector<std::string>{"h2"});
  EXPECT_EQ(slow[0]->severity, Severity::error);  // it explains the run's errors
  EXPECT_EQ(slow[0]->evidence["witness_hosts"].size(), 5u);
  for (const auto* t : with_code(g, Code::TRANSPORT_TIMEOUT)) {
    EXPECT_EQ(t->severity, Severity::info) << t->message;
    EXPECT_EQ(t->evidence.value("consequence_of_host", ""), "h2");
  }
  EXPECT_EQ(g.verdict, Outcome::fail);
}

TEST(LossyPath, OneWitnessIsNotEnough) {
  const int n = 4;
  std::vector<Verdict> views;
  for (int r = 0; r < n; ++r) views.push_back(view(r, n, r == 1 ? std::vector<int>{3} : std::vector<int>{}));
  Verdict g = judge_world(views, roster(n), nullptr);
  EXPECT_TRUE(with_code(g, Code::SLOW_HOST).empty());
  EXPECT_FALSE(with_code(g, Code::PEER_STALLED).empty());  // the warning itself stays
}

TEST(LossyPath, LossEverywhereNamesNoHost) {
  // Every watch sees every other rank lossy: the fabric, not one host; nothing stands out.
  const int n = 4;
  std::vector<Verdict> views;
  for (int r = 0; r < n; ++r) {
    std::vector<int> others;
    for (int o = 0; o < n; ++o)
      if (o != r) others.push_back(o);
    views.push_back(view(r, n, others));
  }
  Verdict g = judge_world(views, roster(n), nullptr);
  EXPECT_TRUE(with_code(g, Code::SLOW_HOST).empty());
}

TEST(LossyPath, AFrozenRankIsNotLossy) {
  // Silent with no retransmits: a frozen process (its kernel still acknowledges), not loss.
  const int n = 4;
  std::vector<Verdict> views;
  for (int r = 0; r < n; ++r) {
    Verdict v = view(r, n, {});
    if (r != 2) {
      SilentPeerFact p;
      p.rank = 2;
      p.host = host(2);
      p.seen_by = r;
      p.retransmits = 0;
      note_peer_silent(v, p, r);
    }
    views.push_back(v);
  }
  Verdict g = judge_world(views, roster(n), nullptr);
  EXPECT_TRUE(with_code(g, Code::SLOW_HOST).empty());
}

// Heavy loss on h1 of four hosts: h0's watch hears h1 quiet, and h1's own watch hears its
// neighbour h2 quiet. Each is one witness of a lossy path, which cannot tell which end loses the
// packets: h2 is never set aside on h1's word, and h1 not on h0's alone. When h3's watch hears h1
// quiet too, two hosts confirm it and h1 is the suspect.
TEST(LossyPath, AWitnessOnALossyHostAccusesNoOneOnItsWordAlone) {
  const int n = 4;
  auto suspects_of = [&](const std::vector<std::vector<int>>& silent) {
    std::vector<Verdict> views;
    for (int r = 0; r < n; ++r) views.push_back(view(r, n, silent[r]));
    Verdict g = judge_world(views, roster(n), nullptr);
    std::vector<std::string> out;
    for (const auto& s : suspect_hosts(g)) out.push_back(s.node);
    for (const auto* f : with_code(g, Code::PEER_STALLED))
      if (f->subject.peer == 2) {
        EXPECT_EQ(f->severity, Severity::info);
        EXPECT_NE(f->message.find("not confirmed"), std::string::npos) << f->message;
      }
    return out;
  };
  EXPECT_EQ(suspects_of({{1}, {2}, {}, {}}), std::vector<std::string>{});
  EXPECT_EQ(suspects_of({{1}, {2}, {}, {1}}), std::vector<std::string>{"h1"});
}

// Heavy loss on h2 of eight: the mesh already blames h2 (its suspect rank), and h2's own watch
// heard h1 quiet. No other host heard h1 quiet: h1 is not set aside on h2's word.
TEST(LossyPath, AWitnessTheMeshBlamesAccusesNoOne) {
  const int n = 8;
  std::vector<Verdict> views;
  for (int r = 0; r < n; ++r) views.push_back(view(r, n, r == 2 ? std::vector<int>{1} : std::vector<int>{}));
  Finding blocked = make_finding(Code::MESH_BLOCKED, "rank 0 cannot reach rank 2", {0, 2}, {host(0), host(2)});
  blocked.evidence = {{"suspect_rank", 2}};
  views[0].findings.push_back(blocked);
  Verdict g = judge_world(views, roster(n), nullptr);
  std::vector<std::string> suspects;
  for (const auto& s : suspect_hosts(g)) suspects.push_back(s.node);
  EXPECT_EQ(suspects, std::vector<std::string>{"h2"}) << suspects_file_text(g);
}

// 30% loss on h2 of eight: h2's watch hears h1 quiet behind retransmits (its own connection
// lost packets), and hears h0 quiet with none (h0's replies were lost; h0's kernel retransmitted
// them, out of h2's sight). No other host heard h0 quiet: h0 is not set aside on h2's word,
// and its PEER_STALLED says why. The same silence heard by a witness whose connections lost
// nothing stays a warning naming h0.
TEST(LossyPath, AWitnessWhoseConnectionsLostPacketsAccusesNoOneOnItsWordAlone) {
  const int n = 8;
  auto judged = [&](bool witness_lost_packets) {
    std::vector<Verdict> views;
    for (int r = 0; r < n; ++r)
      views.push_back(view(r, n, r == 2 && witness_lost_packets ? std::vector<int>{1}
                                                                : std::vector<int>{}));
    SilentPeerFact quiet;
    quiet.rank = 0;
    quiet.host = host(0);
    quiet.silent_for_s = 3.8;
    quiet.seen_by = 2;
    quiet.retransmits = 0;
    note_peer_silent(views[2], quiet, 2);
    return judge_world(views, roster(n), nullptr);
  };
  auto stall_of_h0 = [](const Verdict& g) -> const Finding* {
    for (const auto* f : with_code(g, Code::PEER_STALLED))
      if (f->subject.peer == 0) return f;
    return nullptr;
  };
  Verdict lossy = judged(true);
  const Finding* f = stall_of_h0(lossy);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::info);
  EXPECT_NE(f->message.find("lost packets in this run"), std::string::npos) << f->message;
  EXPECT_TRUE(suspect_hosts(lossy).empty()) << suspects_file_text(lossy);

  Verdict clean = judged(false);
  f = stall_of_h0(clean);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->severity, Severity::info) << f->message;
}

// Two hosts that only hear each other quiet: neither is set aside on the other's word.
TEST(LossyPath, TwoHostsHearingOnlyEachOtherQuietBlameNoOne) {
  const int n = 4;
  std::vector<Verdict> views;
  for (int r = 0; r < n; ++r)
    views.push_back(view(r, n, r == 1 ? std::vector<int>{3} : r == 3 ? std::vector<int>{1}
                                                                     : std::vector<int>{}));
  Verdict g = judge_world(views, roster(n), nullptr);
  EXPECT_TRUE(suspect_hosts(g).empty()) << suspects_file_text(g);
}

}  // namespace
}  // namespace ncclsmoke::results
