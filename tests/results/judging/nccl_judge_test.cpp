// Expected vs observed NCCL network: SILENT_FALLBACK on a mismatch, RESULTS_MISSING when nothing
// was observed, nothing when the expectation holds.
#include <gtest/gtest.h>

#include "results/verdict/finding_codes.h"
#include "results/judging/nccl_judge.h"

using namespace ncclsmoke::results;
using nlohmann::json;

namespace {

json expect(const std::string& net, const std::string& policy) {
  return {{"network", net}, {"policy", policy}};
}

json observed(const std::string& net, std::vector<std::string> networks = {}) {
  if (networks.empty()) networks.push_back(net);
  return {{"network", net},
          {"networks", networks},
          {"gdr", false},
          {"found", true},
          {"log_lines", {"h:1:2 [0] NCCL INFO Using network " + net}},
          {"plugin_lines", {"h:1:2 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so."}}};
}

}  // namespace

TEST(NcclJudge, NameMatching) {
  EXPECT_TRUE(same_nccl_network("Libfabric", "AWS Libfabric"));
  EXPECT_TRUE(same_nccl_network("aws libfabric", "LIBFABRIC"));
  EXPECT_TRUE(same_nccl_network("OFI", "Libfabric"));
  EXPECT_TRUE(same_nccl_network("ib", " IB "));
  EXPECT_FALSE(same_nccl_network("IB", "Socket"));
  EXPECT_FALSE(same_nccl_network("Libfabric", "Socket"));
  EXPECT_EQ(canonical_nccl_network(" AWS Libfabric"), "libfabric");
}

TEST(NcclJudge, MatchIsNoFinding) {
  EXPECT_FALSE(judge_nccl_network(expect("Libfabric", "observe"), observed("AWS Libfabric"), 0, "h"));
  EXPECT_FALSE(judge_nccl_network(expect("socket", "pin"), observed("Socket"), 1, "h"));
  EXPECT_FALSE(judge_nccl_network(expect("IB", "observe"), observed("IB"), 0, ""));
}

TEST(NcclJudge, ObserveMismatchIsSilentFallback) {
  auto f = judge_nccl_network(expect("Libfabric", "observe"), observed("Socket"), 3, "ip-10-0-3-9");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->code, Code::SILENT_FALLBACK);
  EXPECT_EQ(f->severity, Severity::error);
  EXPECT_EQ(f->layer, Layer::transport);
  EXPECT_EQ(f->ranks, std::vector<int>{3});
  EXPECT_EQ(f->hosts, std::vector<std::string>{"ip-10-0-3-9"});
  EXPECT_NE(f->message.find("NCCL on rank 3 (host ip-10-0-3-9) used"), std::string::npos) << f->message;
  EXPECT_EQ(f->subject.reporters, std::vector<int>{3});
  EXPECT_EQ(f->subject.transport, "nccl");
  EXPECT_NE(f->message.find("used Socket, expected Libfabric"), std::string::npos);
  EXPECT_NE(f->hint.find("Expected Libfabric, observed Socket"), std::string::npos);
  EXPECT_EQ(f->evidence["expected"]["network"], "Libfabric");
  EXPECT_EQ(f->evidence["observed"], "Socket");
  EXPECT_EQ(f->evidence["gdr"], false);
  EXPECT_TRUE(f->evidence["log_lines"].is_array());
  EXPECT_TRUE(f->evidence["plugin_lines"].is_array());
}

TEST(NcclJudge, PinMismatchIsReportedToo) {
  auto f = judge_nccl_network(expect("IB", "pin"), observed("Socket"), 0, "h");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->code, Code::SILENT_FALLBACK);
  EXPECT_NE(f->message.find("pinned"), std::string::npos);
  EXPECT_EQ(f->evidence["expected"]["policy"], "pin");
}

TEST(NcclJudge, AnyRankOrCommunicatorOnAnotherNetworkIsAMismatch) {
  // "Using network Libfabric" but one channel went over Socket (merged ranks, or two comms).
  auto f = judge_nccl_network(expect("Libfabric", "observe"),
                              observed("Libfabric", {"Libfabric", "Socket"}), -1, "");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->code, Code::SILENT_FALLBACK);
  EXPECT_TRUE(f->ranks.empty());
  EXPECT_NE(f->message.find("Libfabric, Socket"), std::string::npos);
}

TEST(NcclJudge, NothingObservedIsInconclusiveNeverAPass) {
  for (const json& obs : {json(nullptr),
                          json{{"network", nullptr}, {"networks", json::array()}, {"found", false},
                               {"missing_files", {"/tmp/nccl.h.1"}}},
                          json{{"network", nullptr}, {"networks", json::array()}, {"found", true}}}) {
    for (const json& exp : {expect("Libfabric", "observe"), json(nullptr)}) {
      auto f = judge_nccl_network(exp, obs, 2, "h");
      ASSERT_TRUE(f) << obs.dump() << " " << exp.dump();
      EXPECT_EQ(f->code, Code::RESULTS_MISSING);
      EXPECT_EQ(f->severity, Severity::warning);
      ASSERT_NE(find_code(f->code), nullptr);
      EXPECT_EQ(find_code(f->code)->warning_effect, Outcome::inconclusive);
      EXPECT_NE(f->message.find("unknown"), std::string::npos);
    }
  }
  auto f = judge_nccl_network(expect("IB", "observe"),
                              json{{"found", false}, {"missing_files", {"/tmp/nccl.h.1"}}}, 0, "h");
  ASSERT_TRUE(f);
  EXPECT_NE(f->message.find("expected IB"), std::string::npos);
  EXPECT_EQ(f->evidence["missing_files"][0], "/tmp/nccl.h.1");
}

TEST(NcclJudge, NoExpectationWithAnObservationIsNoFinding) {
  EXPECT_FALSE(judge_nccl_network(nullptr, observed("Socket"), 0, "h"));
  EXPECT_FALSE(judge_nccl_network(expect("", "observe"), observed("Socket"), 0, "h"));
}

// Every finding the check makes carries its mark (nccl_judge.h), which add_judged_findings folds
// by; a finding of the same code made elsewhere does not.
TEST(NcclJudge, EveryFindingCarriesTheNetCheckMark) {
  auto fallback = judge_nccl_network(expect("Libfabric", "observe"), observed("Socket"), 0, "h");
  ASSERT_TRUE(fallback);
  EXPECT_EQ(fallback->evidence["source"], kNcclNetCheckSource);
  EXPECT_TRUE(is_nccl_net_check(*fallback));
  auto missing = judge_nccl_network(expect("Libfabric", "observe"), nullptr, 0, "h");
  ASSERT_TRUE(missing);
  EXPECT_TRUE(is_nccl_net_check(*missing));
  Finding other = make_finding(Code::SILENT_FALLBACK, "profile's", {0}, {"h"});
  other.evidence = {{"expected", "Libfabric"}, {"observed", "Socket"}};
  EXPECT_FALSE(is_nccl_net_check(other));
}
