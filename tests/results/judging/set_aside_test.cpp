// Setting bad nodes aside: which hosts a verdict blames (the one list behind
// the metrics, the suspects file and the Slurm drain), the suspects file's text, reading it back
// (--exclude-file) and --exclude-hosts, and the HOST_EXCLUDED rule.
#include <gtest/gtest.h>

#include "results/judging/set_aside_rules.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"
#include "results/verdict/suspects.h"

namespace ncclsmoke::results {
namespace {

Verdict four_hosts() {
  Verdict v;
  v.run_id = "20240501T101500Z-3fa9c2d1";
  for (int r = 0; r < 4; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.host = "h" + std::to_string(r);
    ri.node = "node-" + std::to_string(r);
    v.ranks.push_back(ri);
  }
  return v;
}

Subject peer_subject(int peer, std::string host, int reporter) {
  Subject s;
  s.peer = peer;
  s.peer_host = std::move(host);
  s.reporters = {reporter};
  return s;
}

TEST(Suspects, BlamingCodesOnly) {
  for (Code c : {Code::SLOW_HOST, Code::MTU_MISMATCH, Code::DATA_CORRUPTION, Code::STRAGGLER,
                 Code::PEER_LOST, Code::PEER_STALLED, Code::HOST_EXCLUDED, Code::MESH_BLOCKED})
    EXPECT_TRUE(blames_host(c)) << to_string(c);
  for (Code c : {Code::SLOW_LINK, Code::CONFIG_INVALID, Code::RANKS_MISSING, Code::TRANSPORT_TIMEOUT,
                 Code::BANDWIDTH_REGRESSION, Code::SILENT_FALLBACK, Code::RENDEZVOUS_TIMEOUT})
    EXPECT_FALSE(blames_host(c)) << to_string(c);
  EXPECT_FALSE(blames_host(AnyCode::from_text("SOME_FUTURE_CODE")));
}

TEST(Suspects, SlowLinkNamesTwoHostsButNoSuspect) {
  auto v = four_hosts();
  v.findings.push_back(make_finding(Code::SLOW_LINK, "h1 <-> h2 slow", {1, 2}, {"h1", "h2"}));
  EXPECT_TRUE(suspect_hosts(v).empty());
  EXPECT_EQ(suspects_file_text(v), "");
  // ... while the metrics still see both hosts named.
  auto named = hosts_named(v);
  ASSERT_EQ(named.size(), 2u);
  EXPECT_FALSE(named[0].suspect);
  EXPECT_EQ(named[1].node, "node-2");
}

TEST(Suspects, ThePeerOfALossNotItsWitness) {
  auto v = four_hosts();
  // A transport's PEER_LOST lists the witness's host and the lost peer's; only the peer is blamed.
  v.findings.push_back(make_finding_about(Code::PEER_LOST, peer_subject(3, "h3", 0),
                                          "{reporter} lost {peer}", {0, 3}, {"h0", "h3"}));
  // A loss the transport could not attribute names no one.
  Subject unknown;
  unknown.reporters = {1};
  unknown.reporter_host = "h1";
  v.findings.push_back(make_finding_about(Code::PEER_LOST, unknown, "{reporter} lost a peer", {1}, {"h1"}));
  auto s = suspect_hosts(v);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].node, "node-3");
  EXPECT_EQ(s[0].host, "h3");
  EXPECT_EQ(s[0].codes, std::vector<std::string>{"PEER_LOST"});
}

TEST(Suspects, MeshBlockedOnlyWithASuspectRank) {
  auto v = four_hosts();
  auto pairs = make_finding(Code::MESH_BLOCKED, "pairs", {0, 1}, {"h0", "h1"});
  v.findings.push_back(pairs);
  EXPECT_TRUE(suspect_hosts(v).empty());
  auto one = make_finding(Code::MESH_BLOCKED, "every pair involves h2", {0, 2}, {"h2", "h0"});
  one.evidence = {{"suspect_rank", 2}};
  v.findings.push_back(one);
  auto s = suspect_hosts(v);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].node, "node-2");
}

TEST(Suspects, MtuBlackHoleAtOneHostOnly) {
  auto v = four_hosts();
  v.findings.push_back(make_finding(Code::MTU_MISMATCH, "between h0 and h1", {0, 1}, {"h0", "h1"}));
  EXPECT_TRUE(suspect_hosts(v).empty());
  v.findings.push_back(make_finding(Code::MTU_MISMATCH, "at h3", {3, 0, 1}, {"h3"}));
  auto s = suspect_hosts(v);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].node, "node-3");
}

TEST(Suspects, FileTextOneNodeALineWithCodesAndRunId) {
  auto v = four_hosts();
  v.findings.push_back(make_finding(Code::STRAGGLER, "slow", {2}, {"h2"}));
  v.findings.push_back(make_finding(Code::SLOW_HOST, "slow links", {2}, {"h2"}));
  v.findings.push_back(make_finding(Code::DATA_CORRUPTION, "wrong", {1}, {"h1"}));
  v.findings.push_back(make_finding(Code::TRANSPORT_TIMEOUT, "timeout", {0}, {"h0"}));
  EXPECT_EQ(suspects_file_text(v),
            "node-1 # DATA_CORRUPTION run 20240501T101500Z-3fa9c2d1 host h1\n"
            "node-2 # SLOW_HOST,STRAGGLER run 20240501T101500Z-3fa9c2d1 host h2\n");
  // Read back: the same names, with where they came from.
  SetAsideList list;
  ASSERT_FALSE(parse_suspects_text(suspects_file_text(v), "/out/suspects.txt", list));
  ASSERT_EQ(list.entries.size(), 2u);
  EXPECT_EQ(list.entries[1].name, "node-2");
  EXPECT_EQ(list.entries[1].line, 2);
  EXPECT_EQ(list.entries[1].codes, "SLOW_HOST,STRAGGLER");
  EXPECT_EQ(list.entries[1].run_id, "20240501T101500Z-3fa9c2d1");
  EXPECT_EQ(describe_origin(list.entries[1]),
            "/out/suspects.txt line 2 (SLOW_HOST,STRAGGLER, run 20240501T101500Z-3fa9c2d1)");
  // A host without a node of its own is listed by its host name.
  Verdict bare;
  bare.run_id = "r";
  bare.findings.push_back(make_finding(Code::PEER_STALLED, "frozen", {5}, {"gpu-7"}));
  EXPECT_EQ(suspects_file_text(bare), "gpu-7 # PEER_STALLED run r\n");
}

TEST(ExcludeParsing, FileLinesCommentsAndBlanks) {
  SetAsideList list;
  EXPECT_FALSE(parse_suspects_text("# header\n\n  gpu-01  \r\ngpu-02# PEER_LOST run x\nGPU-01\n",
                                   "f", list));
  ASSERT_EQ(list.entries.size(), 2u);  // gpu-01 once: names compare without case
  EXPECT_EQ(list.entries[0].name, "gpu-01");
  EXPECT_EQ(list.entries[0].line, 3);
  EXPECT_EQ(list.entries[1].codes, "PEER_LOST");
  EXPECT_NE(list.find("Gpu-02"), nullptr);
  EXPECT_EQ(list.find("gpu-03"), nullptr);
  EXPECT_EQ(list.find(""), nullptr);
  SetAsideList empty;
  EXPECT_FALSE(parse_suspects_text("", "f", empty));
  EXPECT_TRUE(empty.empty());
}

TEST(ExcludeParsing, BadFilesNameTheLine) {
  SetAsideList list;
  auto p = parse_suspects_text("a\nb c\n", "f", list);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->line, 2);
  EXPECT_NE(p->message.find("more than one name"), std::string::npos);
  p = parse_suspects_text("a\nb\nx\xff\n", "f", list);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->line, 3);
  EXPECT_NE(p->message.find("\\xff"), std::string::npos) << p->message;
  p = parse_suspects_text(std::string("a\n\0b\n", 5), "f", list);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->line, 2);
  p = parse_suspects_text("a,b\n", "f", list);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->line, 1);
  p = parse_suspects_text(std::string(kMaxExcludeFileBytes + 1, 'a'), "f", list);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->line, 0);
  p = parse_suspects_text(std::string(254, 'a') + "\n", "f", list);
  ASSERT_TRUE(p);
  EXPECT_NE(p->message.find("253"), std::string::npos);
}

TEST(ExcludeParsing, FlagList) {
  SetAsideList list;
  EXPECT_FALSE(parse_exclude_hosts(" a , b,,c ", list));
  ASSERT_EQ(list.entries.size(), 3u);
  EXPECT_EQ(list.entries[2].name, "c");
  EXPECT_EQ(list.entries[2].source, "--exclude-hosts");
  EXPECT_EQ(describe_origin(list.entries[2]), "--exclude-hosts");
  EXPECT_TRUE(parse_exclude_hosts("a;b", list));
  EXPECT_TRUE(parse_exclude_hosts("a b", list));
  SetAsideList none;
  EXPECT_FALSE(parse_exclude_hosts("", none));
  EXPECT_TRUE(none.empty());
}

TEST(HostExcluded, NamesRanksHostsAndSources) {
  SetAsideList list;
  ASSERT_FALSE(parse_exclude_hosts("h2", list));
  ASSERT_FALSE(parse_suspects_text("node-3 # SLOW_HOST run r1\n", "/s.txt", list));
  std::vector<RosterEntry> roster = {{0, "h0", "node-0"}, {1, "h1", "node-1"}, {2, "h2", "node-2"},
                                     {3, "h3", "node-3"}, {4, "h3", "node-3"}};
  auto ex = excluded_ranks(roster, list);
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[0].matched, "h2");
  EXPECT_EQ(ex[1].matched, "node-3");
  auto f = host_excluded_finding(ex);
  EXPECT_EQ(f.code, Code::HOST_EXCLUDED);
  EXPECT_EQ(f.severity, Severity::error);
  EXPECT_EQ(f.ranks, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(f.hosts, (std::vector<std::string>{"h2", "h3"}));
  EXPECT_NE(f.message.find("h2 (--exclude-hosts)"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("node-3 (/s.txt line 1 (SLOW_HOST, run r1))"), std::string::npos) << f.message;
  EXPECT_NE(f.hint.find("/s.txt"), std::string::npos) << f.hint;
  EXPECT_NE(f.hint.find("--exclude-hosts"), std::string::npos) << f.hint;
  EXPECT_EQ(f.evidence["excluded"].size(), 3u);
  // The same finding from every rank: no reporter in the subject.
  EXPECT_TRUE(f.subject.reporters.empty());
  // Nothing set aside, or no rank on it: no exclusion.
  EXPECT_TRUE(excluded_ranks(roster, SetAsideList{}).empty());
  // A still-excluded host stays a suspect in that run's own file.
  Verdict v;
  v.run_id = "r2";
  v.ranks = {{.rank = 2, .host = "h2", .node = "node-2"}};
  v.findings.push_back(f);
  auto s = suspect_hosts(v);
  ASSERT_EQ(s.size(), 2u);  // h3 has no rank in this verdict: listed by its host name
  EXPECT_EQ(s[0].node, "h3");
  EXPECT_EQ(s[1].node, "node-2");
  EXPECT_EQ(s[1].codes, std::vector<std::string>{"HOST_EXCLUDED"});
}

}  // namespace
}  // namespace ncclsmoke::results
