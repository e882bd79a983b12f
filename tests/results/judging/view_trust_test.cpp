// Rank 0's check of the posted views (results/judging/view_trust.h), through judge_world: the
// forged posts a stranger on the cluster network can make without the job token.
#include "results/judging/view_trust.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "results/judging/classify.h"
#include "results/judging/judge_run.h"
#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {
namespace {

const std::vector<std::string> kHosts = {"h0", "h1", "h2", "h3"};

Verdict view_of(int rank) {
  Verdict v = new_verdict(rank);
  v.world.size = 4;
  v.world.master_addr = "h0";
  for (int r = 0; r < 4; ++r)
    v.ranks.push_back({r, RankStatus::joined, kHosts[r], "", 100 + r, "10.0.0." + std::to_string(r + 1), "", ""});
  v.phases = {{"world", PhaseStatus::pass, 0.1, true, ""},
              {"rendezvous", PhaseStatus::pass, 0.1, true, ""},
              {"mesh", PhaseStatus::pass, 0.1, true, ""}};
  apply_verdict(v);
  return v;
}

WorldRoster roster_of(std::vector<int> posted, int world_size_of_3 = 4) {
  WorldRoster w;
  w.world_size = 4;
  for (int r = 0; r < 4; ++r)
    w.joined.push_back({r, kHosts[r], "10.0.0." + std::to_string(r + 1) + ":40000",
                        r == 3 ? world_size_of_3 : 4});
  w.posted_as = std::move(posted);
  return w;
}

bool names_host(const Verdict& g, const std::string& host) {
  return std::any_of(g.findings.begin(), g.findings.end(), [&](const Finding& f) {
    return std::find(f.hosts.begin(), f.hosts.end(), host) != f.hosts.end() ||
           f.subject.peer_host == host || f.subject.reporter_host == host;
  });
}

const Finding* find(const Verdict& g, Code c) {
  for (const auto& f : g.findings)
    if (f.code == c) return &f;
  return nullptr;
}

// Every view is what it says: nothing set aside, the world passes.
TEST(ViewTrust, HonestViewsPass) {
  auto g = judge_world({view_of(0), view_of(1), view_of(2), view_of(3)}, roster_of({1, 2, 3}),
                       nullptr);
  EXPECT_EQ(g.verdict, Outcome::pass);
  EXPECT_EQ(find(g, Code::VERDICT_DISPROVED), nullptr);
}

// A stranger posts a verdict for healthy rank 1 with DATA_CORRUPTION on a host not in the job:
// no finding of the world names that host, and the post is named.
TEST(ViewTrust, AHostOutsideTheJobIsNeverNamed) {
  Verdict forged = view_of(1);
  forged.findings.push_back(
      make_finding(Code::DATA_CORRUPTION, "wrong sums from gpu-node-7", {1}, {"gpu-node-7"}));
  auto g = judge_world({view_of(0), forged, view_of(2), view_of(3)}, roster_of({1, 2, 3}), nullptr);
  EXPECT_FALSE(names_host(g, "gpu-node-7")) << to_json(g).dump(1);
  EXPECT_EQ(find(g, Code::DATA_CORRUPTION), nullptr);
  const Finding* d = find(g, Code::VERDICT_DISPROVED);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->ranks, std::vector<int>{1});
  EXPECT_EQ(d->evidence["key"], "verdict/1");
  EXPECT_NE(d->message.find("gpu-node-7, not in the job's roster"), std::string::npos)
      << d->message;
  EXPECT_EQ(g.verdict, Outcome::fail);
}

// A view posted under rank 2's key that says it is rank 1's, or that puts a rank on another host.
TEST(ViewTrust, AViewUnderAnotherRanksKeyOrOnAnotherHostIsSetAside) {
  Verdict as_other = view_of(1);
  Verdict moved = view_of(3);
  moved.ranks[3].host = "h1";
  auto g = judge_world({view_of(0), view_of(1), as_other, moved}, roster_of({1, 2, 3}), nullptr);
  std::vector<int> disproved;
  for (const auto& f : g.findings)
    if (f.code == Code::VERDICT_DISPROVED) disproved.insert(disproved.end(), f.ranks.begin(), f.ranks.end());
  std::sort(disproved.begin(), disproved.end());
  EXPECT_EQ(disproved, (std::vector<int>{2, 3}));
}

// Rank 3 joined with WORLD_SIZE=5; a fake "pass" posted for it cannot hide that: the fake is set
// aside and rank 0's own observation of the claim is the WORLD_MISMATCH. Its honest view, which
// says so itself, is kept.
TEST(ViewTrust, AWorldMismatchRankZeroSawCannotBecomeAPass) {
  auto g = judge_world({view_of(0), view_of(1), view_of(2), view_of(3)}, roster_of({1, 2, 3}, 5),
                       nullptr);
  const Finding* w = find(g, Code::WORLD_MISMATCH);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->ranks, std::vector<int>{3});
  EXPECT_NE(w->message.find("world size 5"), std::string::npos) << w->message;
  EXPECT_NE(find(g, Code::VERDICT_DISPROVED), nullptr);
  EXPECT_EQ(find(g, Code::PEER_LOST), nullptr);
  EXPECT_EQ(g.verdict, Outcome::fail);

  Verdict honest = view_of(3);
  honest.world.size = 5;
  honest.findings.push_back(make_finding(Code::WORLD_MISMATCH, "rank 3 has world size 5 but rank 0 has 4", {3}, {"h3"}));
  auto g2 = judge_world({view_of(0), view_of(1), view_of(2), honest}, roster_of({1, 2, 3}, 5), nullptr);
  EXPECT_EQ(find(g2, Code::VERDICT_DISPROVED), nullptr);
  EXPECT_NE(find(g2, Code::WORLD_MISMATCH), nullptr);
  // Rank 3 never posting at all: rank 0's observation still names it.
  WorldRoster none = roster_of({1, 2}, 5);
  none.unreported.push_back({3, "h3", false});
  auto g3 = judge_world({view_of(0), view_of(1), view_of(2)}, none, nullptr);
  EXPECT_NE(find(g3, Code::WORLD_MISMATCH), nullptr);
}

// Verdict keys deleted (or a post lost) for ranks the liveness watch heard to the end: their
// results are missing; nobody is called dead. A rank the watch did not hear is PEER_LOST as before.
TEST(ViewTrust, ALiveRankWhoseVerdictNeverCameIsResultsMissingNotPeerLost) {
  WorldRoster w = roster_of({});
  w.unreported = {{1, "h1", true}, {2, "h2", true}, {3, "h3", false}};
  w.gathered_s = 5;
  auto g = judge_world({view_of(0)}, w, nullptr);
  std::vector<int> missing;  // one finding per rank: each is its own subject
  for (const auto& f : g.findings)
    if (f.code == Code::RESULTS_MISSING) {
      missing.insert(missing.end(), f.ranks.begin(), f.ranks.end());
      EXPECT_NE(f.message.find("was alive to the end"), std::string::npos) << f.message;
    }
  std::sort(missing.begin(), missing.end());
  EXPECT_EQ(missing, (std::vector<int>{1, 2}));
  const Finding* lost = find(g, Code::PEER_LOST);
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->ranks, std::vector<int>{3});
  for (const auto& r : g.ranks)
    if (r.rank == 1 || r.rank == 2) EXPECT_EQ(r.status, RankStatus::joined);
}

// A store-layer finding may name the store address the rank dialled (its MASTER_ADDR spelling);
// any other layer may not.
TEST(ViewTrust, TheStoreAddressARankDialledIsItsWordOnlyForStoreFindings) {
  Verdict v1 = view_of(1);
  v1.world.master_addr = "store.job.svc";
  v1.findings.push_back(make_finding(Code::RENDEZVOUS_LOST, "lost the store", {1}, {"h1", "store.job.svc"}));
  EXPECT_TRUE(disproofs(v1, 1, view_of(0), roster_of({}).joined).empty());
  v1.findings.push_back(make_finding(Code::DATA_CORRUPTION, "x", {1}, {"store.job.svc"}));
  EXPECT_FALSE(disproofs(v1, 1, view_of(0), roster_of({}).joined).empty());
}

}  // namespace
}  // namespace ncclsmoke::results
