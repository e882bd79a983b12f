// STORE_TAMPERED (results/judging/run_rules.h): one finding per refused key, made through the
// finding table, raised by judge_local from the rank's facts and by judge_world from rank 0's
// gather, and never about the host a forged value claimed.
#include <gtest/gtest.h>

#include "results/judging/judge_run.h"
#include "results/judging/run_rules.h"
#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {
namespace {

const TamperedValueFact kVerdictKey{"ncclsmoke/job/0/verdict/1", "not signed"};
const TamperedValueFact kSweepKey{"ncclsmoke/job/0/transport/socket/sweep/2",
                                          "signed with another token or under another key"};

Verdict view(int rank, const std::string& host) {
  Verdict v = new_verdict(rank);
  v.world.size = 3;
  v.ranks = {{rank, RankStatus::joined, host, "", 100 + rank, "", "", ""}};
  v.phases = {{"world", PhaseStatus::pass, 0.1, true, ""},
              {"rendezvous", PhaseStatus::pass, 0.1, true, ""},
              {"mesh", PhaseStatus::pass, 0.1, true, ""}};
  return v;
}

TEST(StoreTampered, NamesTheKeyTheReaderAndTheStore) {
  auto f = store_tampered_finding({1, "node-b"}, "10.0.0.1:29500", kSweepKey);
  EXPECT_EQ(f.code, Code::STORE_TAMPERED);
  EXPECT_EQ(f.severity, Severity::error);
  EXPECT_EQ(f.layer, Layer::rendezvous);
  EXPECT_EQ(f.ranks, std::vector<int>{1});
  EXPECT_EQ(f.hosts, std::vector<std::string>{"node-b"});
  EXPECT_EQ(f.subject.item, kSweepKey.key);
  EXPECT_NE(f.message.find("rank 1 (host node-b)"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find(kSweepKey.key), std::string::npos) << f.message;
  EXPECT_NE(f.message.find(kSweepKey.why), std::string::npos) << f.message;
  EXPECT_NE(f.hint.find("10.0.0.1:29500"), std::string::npos) << f.hint;
  EXPECT_NE(f.hint.find(kSweepKey.key), std::string::npos) << f.hint;
  EXPECT_EQ(f.evidence["key"], kSweepKey.key);
}

TEST(StoreTampered, OneFindingPerKeyAndReader) {
  std::vector<Finding> findings;
  note_store_tampered(findings, {0, "node-a"}, "s:1", {kVerdictKey, kSweepKey});
  note_store_tampered(findings, {0, "node-a"}, "s:1", {kVerdictKey});
  ASSERT_EQ(findings.size(), 2u);
  note_store_tampered(findings, {2, "node-c"}, "s:1", {kVerdictKey});  // another reader: its own
  EXPECT_EQ(findings.size(), 3u);
}

TEST(StoreTampered, JudgeLocalRaisesItFromTheFactsAndFails) {
  Verdict v = view(2, "node-c");
  LocalFacts facts;
  facts.tampered = {kSweepKey};
  facts.rank = 2;
  facts.host = "node-c";
  facts.store = "127.0.0.1:29500";
  judge_local(v, facts);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].code, Code::STORE_TAMPERED);
  EXPECT_EQ(v.verdict, Outcome::fail);
  judge_local(v, facts);  // the watchdog may judge again: still one
  EXPECT_EQ(v.findings.size(), 1u);
}

TEST(StoreTampered, JudgeWorldNamesWhatRankZeroRefusedWhileGathering) {
  WorldRoster roster;
  roster.world_size = 2;
  roster.reporting_host = "node-a";
  roster.store = "127.0.0.1:29500";
  roster.tampered = {kVerdictKey};
  roster.unreported = {{1, "node-b"}};  // its genuine verdict never got through
  auto global = judge_world({view(0, "node-a")}, roster, nullptr);
  int tampered = 0;
  for (const auto& f : global.findings) {
    if (f.code == Code::STORE_TAMPERED) {
      ++tampered;
      EXPECT_EQ(f.subject.item, kVerdictKey.key);
      EXPECT_EQ(f.hosts, std::vector<std::string>{"node-a"});
    }
  }
  EXPECT_EQ(tampered, 1);
  EXPECT_NE(global.verdict, Outcome::pass);
}

}  // namespace
}  // namespace ncclsmoke::results
