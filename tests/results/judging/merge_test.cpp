#include "results/judging/merge.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "results/judging/classify.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"
#include "results/verdict/schema.h"

namespace ncclsmoke::results {
namespace {

Verdict view(int rank, const std::string& host, std::vector<Phase> phases) {
  Verdict v;
  v.run_id = "20240501T101500Z-00000001";
  v.started_at = "2024-05-01T10:15:0" + std::to_string(rank) + ".000Z";
  v.reporting_rank = rank;
  v.world = {3, "master", 29500, WorldSource::torchrun};
  v.env = {{"RANK", std::to_string(rank)}};
  RankInfo r;
  r.rank = rank;
  r.host = host;
  r.pid = 100 + rank;
  v.ranks = {r};
  v.phases = std::move(phases);
  v.duration_s = 1.0 + rank;
  apply_verdict(v);
  return v;
}

Phase timed_phase(const std::string& name, const std::string& status, double s) {
  Phase p;
  p.name = name;
  p.status = parse_phase_status(status).value();
  p.duration_s = s;
  return p;
}

std::vector<Phase> ok(double s = 0.5) {
  return {timed_phase("rendezvous", "pass", s), timed_phase("mesh", "pass", s)};
}

TEST(Merge, HealthyViewsMergeToPass) {
  std::vector<Verdict> views = {view(1, "b", ok(0.7)), view(0, "a", ok(0.2)), view(2, "c", ok())};
  Verdict g = merge_rank_verdicts(views);
  EXPECT_EQ(g.scope, Scope::global);
  EXPECT_EQ(g.reporting_rank, 0);
  EXPECT_EQ(g.env.at("RANK"), "0");  // header from rank 0's view, not the first one
  EXPECT_EQ(g.started_at, "2024-05-01T10:15:00.000Z");
  EXPECT_DOUBLE_EQ(g.duration_s, 3.0);
  ASSERT_EQ(g.ranks.size(), 3u);
  EXPECT_EQ(g.ranks[0].host, "a");
  EXPECT_EQ(g.ranks[2].host, "c");
  ASSERT_EQ(g.phases.size(), 2u);
  EXPECT_EQ(g.phases[0].name, "rendezvous");
  EXPECT_DOUBLE_EQ(g.phases[0].duration_s, 0.7);
  EXPECT_TRUE(g.findings.empty());
  EXPECT_EQ(g.verdict, Outcome::pass);
  EXPECT_EQ(g.exit_code, 0);
  auto errors = validate_verdict_json(to_json(g));
  EXPECT_TRUE(errors.empty()) << errors.front();
}

TEST(Merge, IdenticalFindingsDedupeAndUniteRanksAndHosts) {
  auto v0 = view(0, "a", ok());
  auto v1 = view(1, "b", ok());
  auto v2 = view(2, "c", ok());
  v1.findings.push_back(make_finding(Code::MESH_BLOCKED, "pairs to host c are blocked", {1, 2}, {"c"}));
  v2.findings.push_back(make_finding(Code::MESH_BLOCKED, "pairs to host c are blocked", {2, 0}, {"c", "a"}));
  v0.findings.push_back(make_finding(Code::MESH_BLOCKED, "pairs to host c are blocked", {0}, {"c"}));
  // Same code, different message: kept apart.
  v2.findings.push_back(make_finding(Code::STRAGGLER, "rank 2 slow", {2}, {"c"}));
  Verdict g = merge_rank_verdicts({v0, v1, v2});
  ASSERT_EQ(g.findings.size(), 2u);
  EXPECT_EQ(g.findings[0].code, Code::MESH_BLOCKED);
  EXPECT_EQ(g.findings[0].ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(g.findings[0].hosts, (std::vector<std::string>{"c", "a"}));  // first appearance
  EXPECT_EQ(g.findings[1].code, Code::STRAGGLER);
  EXPECT_EQ(g.verdict, Outcome::fail);
  EXPECT_EQ(g.exit_code, 1);
}

// A dead rank seen by every survivor, each in its own words (the liveness watch, a transport):
// one PEER_LOST, with the ranks that saw it; a loss of another rank stays apart.
TEST(Merge, PeerLostAboutOneRankIsOneFindingWithItsReporters) {
  auto v0 = view(0, "a", ok());
  auto v1 = view(1, "b", ok());
  v0.findings.push_back(make_finding(Code::PEER_LOST, "rank 2 closed the connection, seen by rank 0", {2}, {"c"}));
  v0.findings.push_back(make_finding(Code::PEER_LOST, "socket: rank 2 reset the ring", {2}, {"c"}));
  v1.findings.push_back(make_finding(Code::PEER_LOST, "rank 2 closed the connection, seen by rank 1", {2}, {"c"}));
  v1.findings.push_back(make_finding(Code::PEER_LOST, "rank 3 closed the connection", {3}, {"d"}));
  Verdict g = merge_rank_verdicts({v0, v1});
  std::vector<const Finding*> lost;
  for (const auto& f : g.findings)
    if (f.code == Code::PEER_LOST) lost.push_back(&f);
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0]->ranks, (std::vector<int>{2}));
  EXPECT_EQ(lost[0]->message, "rank 2 closed the connection, seen by rank 0");
  EXPECT_EQ(lost[0]->evidence.at("reported_by"), (nlohmann::json{0, 1}));
  EXPECT_EQ(lost[1]->ranks, (std::vector<int>{3}));
  EXPECT_EQ(lost[1]->evidence.at("reported_by"), (nlohmann::json{1}));
  auto errors = validate_verdict_json(to_json(g));
  EXPECT_TRUE(errors.empty()) << errors.front();
}

// Rank 2 stopped on its own error (WORLD_MISMATCH naming itself) and still sent its view: the
// others' PEER_LOST about it was a guess and goes; a PEER_LOST about a rank that sent nothing stays.
TEST(Merge, RankThatExplainsItselfIsNotLost) {
  auto v0 = view(0, "a", ok());
  auto v1 = view(1, "b", ok());
  auto v2 = view(2, "c", ok());
  v2.findings.push_back(make_finding(Code::WORLD_MISMATCH, "rank 2 has world size 5 but rank 0 has 4", {2}, {"c"}));
  v0.findings.push_back(make_finding(Code::PEER_LOST, "rank 2 stopped answering during the mesh probe", {2}, {"c"}));
  v1.findings.push_back(make_finding(Code::PEER_LOST, "rank 2 stopped answering during the mesh probe", {2}, {"c"}));
  v1.findings.push_back(make_finding(Code::PEER_LOST, "rank 3 closed the connection", {3}, {"d"}));
  Verdict g = merge_rank_verdicts({v0, v1, v2});
  std::vector<std::string> codes;
  for (const auto& f : g.findings) codes.push_back(to_string(f.code) + (f.ranks.empty() ? "" : std::to_string(f.ranks[0])));
  EXPECT_NE(std::find(codes.begin(), codes.end(), "WORLD_MISMATCH2"), codes.end());
  EXPECT_EQ(std::find(codes.begin(), codes.end(), "PEER_LOST2"), codes.end());
  EXPECT_NE(std::find(codes.begin(), codes.end(), "PEER_LOST3"), codes.end());
}

// Loss is not death: rank 1 inferred rank 2 lost from the mesh's silence (a lossy path), and rank
// 0's watch saw it reset as it exited, but rank 2's own view arrived, clean: both go, and so does
// the "lost" status. A PEER_LOST about a rank that sent nothing stays.
TEST(Merge, TheMeshsGuessOfADeathIsDisprovedByTheRanksOwnView) {
  auto v0 = view(0, "a", ok());
  auto v1 = view(1, "b", ok());
  auto v2 = view(2, "c", ok());
  Finding guess = make_finding(Code::PEER_LOST, "rank 2 joined but stopped answering during the mesh probe", {2}, {"c"});
  guess.evidence = {{"source", "mesh silence"}};
  v1.findings.push_back(guess);
  Finding reset = make_finding(Code::PEER_LOST, "rank 2 reset (ECONNRESET) mid-run", {2}, {"c"});
  reset.evidence = {{"source", "liveness watch"}};
  reset.origin = FindingOrigin::liveness_watch;
  v0.findings.push_back(reset);
  v1.ranks.push_back({2, RankStatus::lost, "c", "", 0, "", "", "stopped answering after joining"});
  Finding guess3 = guess;
  guess3.ranks = {3};
  v1.findings.push_back(guess3);
  Verdict g = merge_rank_verdicts({v0, v1, v2}, {.world_size = 4, .required_phases = {}});
  std::vector<int> lost;
  for (const auto& f : g.findings)
    if (f.code == Code::PEER_LOST) lost.insert(lost.end(), f.ranks.begin(), f.ranks.end());
  EXPECT_EQ(lost, std::vector<int>{3});  // rank 3 sent nothing: the guess stands
  for (const auto& r : g.ranks)
    if (r.rank == 2) EXPECT_EQ(r.status, RankStatus::joined);
  // ... unless rank 0's own watch heard rank 3 to the end: alive, its view just did not come.
  Verdict h = merge_rank_verdicts({v0, v1, v2}, {.world_size = 4, .required_phases = {},
                                                 .alive_at_end = {3}});
  for (const auto& f : h.findings) EXPECT_NE(f.code, Code::PEER_LOST) << f.message;
}

// The same TRANSPORT_UNAVAILABLE from each of a host's four ranks, each about itself: one
// finding naming ranks 0-3, its message rendered from the subject. Timeouts waiting for the same
// peer are one; a timeout waiting for another peer stays apart.
TEST(Merge, SameFindingFromEveryRankOfAHostIsOne) {
  std::vector<Verdict> views;
  for (int r = 0; r < 4; ++r) {
    auto v = view(r, "node-a", ok());
    v.world.size = 4;
    v.findings.push_back(make_finding_about(
        Code::TRANSPORT_UNAVAILABLE,
        reported_by({r, "node-a"}, "transport:fabric", "open/unavailable", "fabric"),
        "transport fabric skipped on {reporter}: no efa provider", {r}, {"node-a"}));
    views.push_back(std::move(v));
  }
  auto timeout = [](int r, int peer) {
    Subject about = reported_by({r, "node-a"}, "transport:socket", "sweep/timeout", "socket");
    about.peer = peer;
    about.peer_host = "node-b";
    return make_finding_about(Code::TRANSPORT_TIMEOUT, about,
                              "transport socket timed out on {reporter} waiting for {peer}",
                              {r, peer}, {"node-a"});
  };
  views[1].findings.push_back(timeout(1, 2));
  views[3].findings.push_back(timeout(3, 2));
  views[2].findings.push_back(timeout(2, 0));
  Verdict g = merge_rank_verdicts(views);
  std::vector<const Finding*> un, to;
  for (const auto& f : g.findings) {
    if (f.code == Code::TRANSPORT_UNAVAILABLE) un.push_back(&f);
    if (f.code == Code::TRANSPORT_TIMEOUT) to.push_back(&f);
  }
  ASSERT_EQ(un.size(), 1u);
  EXPECT_EQ(un[0]->ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(un[0]->hosts, std::vector<std::string>{"node-a"});
  EXPECT_EQ(un[0]->message, "transport fabric skipped on ranks 0-3 (host node-a): no efa provider");
  EXPECT_EQ(un[0]->subject.reporters, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(to.size(), 2u);
  EXPECT_EQ(to[0]->ranks, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(to[0]->message,
            "transport socket timed out on ranks 1, 3 (host node-a) waiting for rank 2 (host node-b)");
  EXPECT_EQ(to[1]->message,
            "transport socket timed out on rank 2 (host node-a) waiting for rank 0 (host node-b)");
  auto errors = validate_verdict_json(to_json(g));
  EXPECT_TRUE(errors.empty()) << errors.front();
}

// Dedupe keys on the code and the subject less its reporters: never on the message text.
TEST(Merge, DedupeKeyIsTheCodeAndTheSubject) {
  Subject a = reported_by({3, "host-a"}, "transport:socket", "sweep/timeout", "socket");
  a.peer = 5;
  Subject other_reporter = a;
  other_reporter.reporters = {4};
  EXPECT_EQ(finding_dedupe_key(Code::TRANSPORT_TIMEOUT, a, "on rank 3: waited 1.2 s"),
            finding_dedupe_key(Code::TRANSPORT_TIMEOUT, other_reporter, "on rank 4: waited 9 s"));
  EXPECT_NE(finding_dedupe_key(Code::TRANSPORT_TIMEOUT, a, "m"),
            finding_dedupe_key(Code::TRANSPORT_INIT_FAILED, a, "m"));
  for (auto change : std::vector<std::function<void(Subject&)>>{
           [](Subject& s) { s.peer = 6; }, [](Subject& s) { s.reporter_host = "host-b"; },
           [](Subject& s) { s.transport = "fabric"; }, [](Subject& s) { s.phase = "mesh"; },
           [](Subject& s) { s.item = "open/timeout"; }, [](Subject& s) { s.peer_host = "h"; }}) {
    Subject b = a;
    change(b);
    EXPECT_NE(finding_dedupe_key(Code::TRANSPORT_TIMEOUT, a, "m"),
              finding_dedupe_key(Code::TRANSPORT_TIMEOUT, b, "m"));
  }
  // Without a subject (a finding written before subjects) only the same message matches; the
  // text is never taken apart.
  EXPECT_EQ(finding_dedupe_key(Code::TRANSPORT_TIMEOUT, {}, "on rank 3"),
            finding_dedupe_key(Code::TRANSPORT_TIMEOUT, {}, "on rank 3"));
  EXPECT_NE(finding_dedupe_key(Code::TRANSPORT_TIMEOUT, {}, "on rank 3"),
            finding_dedupe_key(Code::TRANSPORT_TIMEOUT, {}, "on rank 4"));
  EXPECT_NE(finding_dedupe_key(Code::TRANSPORT_TIMEOUT, {}, "m"),
            finding_dedupe_key(Code::TRANSPORT_TIMEOUT, a, "m"));
}

// Two findings about the same subject whose messages differ (each rank waited its own time) are
// one finding, naming both ranks, in the first one's words.
TEST(Merge, FindingsThatDifferOnlyInMessageTextAreDedupedBySubject) {
  std::vector<Finding> fs;
  for (auto [rank, waited] : std::vector<std::pair<int, const char*>>{{0, "19.0"}, {1, "18.97"}})
    fs.push_back(make_finding_about(
        Code::RUN_TIMEOUT, reported_by({rank, "node-a"}, "transport:socket"),
        std::string("{reporter} did not finish within --timeout 20s: transport:socket was still "
                    "running after ") + waited + " s",
        {rank}, {"node-a"}));
  ASSERT_NE(fs[0].message, fs[1].message);
  dedupe_findings(fs);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(fs[0].message,
            "ranks 0, 1 (host node-a) did not finish within --timeout 20s: transport:socket was "
            "still running after 19.0 s");
}

TEST(Merge, DedupeFindingsKeepsOrderWorstSeverityAndNonConsecutiveRanks) {
  auto skipped = [](int rank, const std::string& host) {
    return make_finding_about(Code::TRANSPORT_UNAVAILABLE,
                              reported_by({rank, ""}, "transport:fabric", host, "fabric"),
                              "skipped on {reporter}: x", {rank}, {host});
  };
  std::vector<Finding> fs = {skipped(1, "h1"), make_finding(Code::STRAGGLER, "slow", {}, {}),
                             skipped(4, "h1"), skipped(7, "h1"), skipped(2, "h2")};
  fs[2].severity = Severity::error;
  dedupe_findings(fs);
  ASSERT_EQ(fs.size(), 3u);
  EXPECT_EQ(fs[0].message, "skipped on ranks 1, 4, 7: x");
  EXPECT_EQ(fs[0].severity, Severity::error);
  EXPECT_EQ(fs[1].code, Code::STRAGGLER);
  EXPECT_EQ(fs[2].message, "skipped on rank 2: x");
}

TEST(Merge, DuplicateFindingTakesWorstSeverity) {
  auto v0 = view(0, "a", ok());
  auto v1 = view(1, "b", ok());
  v0.findings.push_back(make_finding(Code::BANDWIDTH_REGRESSION, "busbw low", {0}));
  Finding worse = make_finding(Code::BANDWIDTH_REGRESSION, "busbw low", {1});
  worse.severity = Severity::error;
  v1.findings.push_back(worse);
  Verdict g = merge_rank_verdicts({v0, v1}, {.world_size = 2, .required_phases = {}});
  ASSERT_EQ(g.findings.size(), 1u);
  EXPECT_EQ(g.findings[0].severity, Severity::error);
  EXPECT_EQ(g.verdict, Outcome::fail);
}

TEST(Merge, WorstPhaseStatusWins) {
  auto v0 = view(0, "a", ok());
  auto v1 = view(1, "b", {timed_phase("rendezvous", "pass", 0.1), timed_phase("mesh", "fail", 2.0)});
  v1.phases[1].detail = "1->2 timed out";
  auto v2 = view(2, "c", {timed_phase("rendezvous", "pass", 0.1), timed_phase("mesh", "skipped", 0),
                          timed_phase("transport:socket", "pass", 1.5)});
  Verdict g = merge_rank_verdicts({v0, v1, v2});
  ASSERT_EQ(g.phases.size(), 3u);
  EXPECT_EQ(g.phases[1].status, PhaseStatus::fail);
  EXPECT_EQ(g.phases[1].detail, "1->2 timed out");
  EXPECT_DOUBLE_EQ(g.phases[1].duration_s, 2.0);
  EXPECT_EQ(g.phases[2].name, "transport:socket");
  EXPECT_EQ(g.verdict, Outcome::fail);
}

TEST(Merge, SkippedOnOneRankIsNotHiddenByPassElsewhere) {
  auto v0 = view(0, "a", ok());
  auto v1 = view(1, "b", {timed_phase("rendezvous", "pass", 0.1), timed_phase("mesh", "skipped", 0)});
  Verdict g = merge_rank_verdicts({v0, v1}, {.world_size = 2, .required_phases = {}});
  EXPECT_EQ(g.phases[1].status, PhaseStatus::skipped);
  EXPECT_EQ(g.verdict, Outcome::inconclusive);
  EXPECT_EQ(g.exit_code, 4);
}

TEST(Merge, RankWithoutViewGetsResultsMissing) {
  Verdict g = merge_rank_verdicts({view(0, "a", ok()), view(1, "b", ok())});  // world 3
  ASSERT_EQ(g.ranks.size(), 3u);
  EXPECT_EQ(g.ranks[2].status, RankStatus::missing);
  ASSERT_EQ(g.findings.size(), 1u);
  EXPECT_EQ(g.findings[0].code, Code::RESULTS_MISSING);
  EXPECT_EQ(g.findings[0].ranks, std::vector<int>{2});
  EXPECT_NE(g.findings[0].message.find("rank 2"), std::string::npos) << g.findings[0].message;
  EXPECT_EQ(g.verdict, Outcome::inconclusive);
}

TEST(Merge, RankExplainedByAFindingGetsNoExtraFinding) {
  auto v0 = view(0, "a", ok());
  v0.ranks.push_back({2, RankStatus::lost, "c", "", 0, "", "", "connection reset"});
  v0.findings.push_back(make_finding(Code::PEER_LOST, "rank 2 (c) vanished after joining", {2}, {"c"}));
  Verdict g = merge_rank_verdicts({v0, view(1, "b", ok())});
  ASSERT_EQ(g.findings.size(), 1u);
  EXPECT_EQ(g.findings[0].code, Code::PEER_LOST);
  EXPECT_EQ(g.ranks[2].status, RankStatus::lost);
  EXPECT_EQ(g.ranks[2].host, "c");
  EXPECT_EQ(g.verdict, Outcome::fail);
}

TEST(Merge, RankStatusWorstWinsAndFieldsFilled) {
  auto v0 = view(0, "a", ok());
  v0.ranks.push_back({1, RankStatus::lost, "", "", 0, "", "", "store connection reset"});
  auto v1 = view(1, "b", ok());
  v1.ranks[0].interface = "eth1";
  v1.findings.push_back(make_finding(Code::RENDEZVOUS_LOST, "lost the store", {1}, {"b"}));
  Verdict g = merge_rank_verdicts({v0, v1}, {.world_size = 2, .required_phases = {}});
  ASSERT_EQ(g.ranks.size(), 2u);
  EXPECT_EQ(g.ranks[1].status, RankStatus::lost);
  EXPECT_EQ(g.ranks[1].host, "b");
  EXPECT_EQ(g.ranks[1].interface, "eth1");
  EXPECT_EQ(g.ranks[1].pid, 101);
  EXPECT_EQ(g.ranks[1].detail, "store connection reset");
}

TEST(Merge, TransportRowsKeepTheirRank) {
  auto v0 = view(0, "a", ok());
  auto v1 = view(1, "b", ok());
  TransportRow r;
  r.transport = "socket";
  r.bytes = 1024;
  r.count = 256;
  r.wrong = 0;
  v0.transports.push_back(r);  // a world row (rank -1) ...
  r.rank = 1;
  v1.transports.push_back(r);  // ... and one rank's own row
  Verdict g = merge_rank_verdicts({v0, v1}, {.world_size = 2, .required_phases = {}});
  ASSERT_EQ(g.transports.size(), 2u);
  EXPECT_EQ(g.transports[0].rank, -1);
  EXPECT_EQ(g.transports[1].rank, 1);
}

TEST(Merge, RequiredPhaseMissingEverywhereIsInconclusive) {
  Verdict g = merge_rank_verdicts({view(0, "a", ok()), view(1, "b", ok())},
                                  {.world_size = 2, .required_phases = {"transport:socket"}});
  EXPECT_EQ(g.verdict, Outcome::inconclusive);
}

// A world of a million where one rank joined: the roster's range stays a range through the
// merge, ranks no view describes become ranges, and the world is never walked rank by rank: the
// global verdict is a few entries and one capped RANKS_MISSING-sized list at most.
TEST(Merge, RanksThatNeverJoinedStayRanges) {
  Verdict v0 = view(0, "a", {timed_phase("world", "pass", 0)});
  v0.world.size = 1'000'000;
  RankInfo never;
  never.status = RankStatus::missing;
  never.detail = "never joined";
  add_rank_ranges(v0.ranks, {1, 2, 3, 7, 8}, never);  // 1-3, 7-8; 4-6 and 9.. described by none
  Verdict v5 = view(5, "b", {timed_phase("world", "pass", 0)});
  MergeOptions mo;
  mo.world_size = 1'000'000;
  auto g = merge_rank_verdicts({v0, v5}, mo);
  std::vector<std::pair<int, int>> spans;
  for (const auto& r : g.ranks) spans.push_back({r.rank, std::max(r.rank, r.through)});
  EXPECT_EQ(spans, (std::vector<std::pair<int, int>>{
                       {0, 0}, {1, 3}, {4, 4}, {5, 5}, {6, 6}, {7, 8}, {9, 999'999}}));
  int total = 0;
  for (const auto& r : g.ranks) total += ranks_in(r);
  EXPECT_EQ(total, 1'000'000);
  // Ranks 4, 6 and 9.. sent nothing and nothing explains them; 1-3 and 7-8 never joined (the
  // join's finding, here absent, would say so) and are not called missing views.
  auto rm = std::find_if(g.findings.begin(), g.findings.end(),
                         [](const Finding& f) { return f.code == Code::RESULTS_MISSING; });
  ASSERT_NE(rm, g.findings.end());
  EXPECT_EQ(rm->ranks.size(), kMaxListedRanks);
  EXPECT_EQ(rm->ranks[0], 4);
  EXPECT_EQ(rm->ranks[1], 6);
  EXPECT_EQ(rm->evidence["ranks_total"], 2 + 999'991);
  EXPECT_LT(rm->message.size(), 300u) << rm->message;
  EXPECT_LT(to_json(g).dump().size(), 64u * 1024);
}

// A view's own range cannot reach past the world (a forged "through" of 2^31-1), and a rank one
// view describes inside another's range splits it.
TEST(Merge, ARangeIsCutAtTheWorldAndSplitAroundADescribedRank) {
  Verdict v0 = view(0, "a", {timed_phase("world", "pass", 0)});
  RankInfo never;
  never.rank = 1;
  never.through = 2'147'483'647;
  never.status = RankStatus::missing;
  v0.ranks.push_back(never);
  Verdict v2 = view(2, "c", {timed_phase("world", "pass", 0)});
  MergeOptions mo;
  mo.world_size = 4;
  auto g = merge_rank_verdicts({v0, v2}, mo);
  std::vector<std::pair<int, int>> spans;
  for (const auto& r : g.ranks) spans.push_back({r.rank, std::max(r.rank, r.through)});
  EXPECT_EQ(spans, (std::vector<std::pair<int, int>>{{0, 0}, {1, 1}, {2, 2}, {3, 3}}));
}

// One finding lists at most kMaxListedRanks ranks, however many it concerns and however many
// merges add to it; evidence.ranks_total keeps the count.
TEST(Merge, AFindingListsAtMostTheCapOfRanks) {
  std::vector<int> many(5000);
  for (int i = 0; i < 5000; ++i) many[i] = 4999 - i;
  Finding f = make_finding(Code::RANKS_MISSING, "m", many);
  ASSERT_EQ(f.ranks.size(), kMaxListedRanks);
  EXPECT_EQ(f.ranks.front(), 0);
  EXPECT_EQ(f.evidence["ranks_total"], 5000);
  std::vector<Finding> two{f, make_finding(Code::RANKS_MISSING, "m", {7000, 7001})};
  dedupe_findings(two);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].ranks.size(), kMaxListedRanks);
}

TEST(Merge, NoViewsIsAnError) {
  EXPECT_THROW(merge_rank_verdicts({}), std::invalid_argument);
}

}  // namespace
}  // namespace ncclsmoke::results
