#include "results/judging/classify.h"

#include <gtest/gtest.h>

#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {
namespace {

Phase phase(const std::string& name, const std::string& status, bool required = true) {
  Phase p;
  p.name = name;
  p.status = status;
  p.required = required;
  return p;
}

std::vector<Phase> healthy() {
  return {phase("world", "pass"), phase("rendezvous", "pass"), phase("mesh", "pass")};
}

TEST(OverallVerdict, AllPhasesPassNoFindingsIsPass) {
  EXPECT_EQ(overall_verdict({}, healthy()), "pass");
  EXPECT_EQ(overall_verdict({}, healthy(), {"world", "rendezvous", "mesh"}), "pass");
}

TEST(OverallVerdict, NothingRunIsNeverPass) {
  EXPECT_EQ(overall_verdict({}, {}), "inconclusive");
}

TEST(OverallVerdict, SkippedRequiredPhaseIsInconclusiveNotPass) {
  auto phases = healthy();
  phases.push_back(phase("transport:socket", "skipped"));
  EXPECT_EQ(overall_verdict({}, phases), "inconclusive");
  phases.back().status = "not_run";
  EXPECT_EQ(overall_verdict({}, phases), "inconclusive");
  // The same phase, optional: nothing lost.
  phases.back().required = false;
  EXPECT_EQ(overall_verdict({}, phases), "pass");
}

TEST(OverallVerdict, MissingRequiredPhaseIsInconclusive) {
  EXPECT_EQ(overall_verdict({}, healthy(), {"world", "rendezvous", "mesh", "transport:socket"}),
            "inconclusive");
}

TEST(OverallVerdict, InconclusivePhaseOrFinding) {
  auto phases = healthy();
  phases[2].status = "inconclusive";
  EXPECT_EQ(overall_verdict({}, phases), "inconclusive");
  EXPECT_EQ(overall_verdict({make_finding("BASELINE_MISSING", "no baseline for socket 64 MiB")},
                            healthy()),
            "inconclusive");
}

TEST(OverallVerdict, DegradedCodesDegrade) {
  EXPECT_EQ(overall_verdict({make_finding("BANDWIDTH_REGRESSION", "busbw 1.1 < 1.6 GB/s")},
                            healthy()),
            "degraded");
  EXPECT_EQ(overall_verdict({make_finding("STRAGGLER", "rank 2 is 3x slower", {2})}, healthy()),
            "degraded");
  auto phases = healthy();
  phases[2].status = "degraded";
  EXPECT_EQ(overall_verdict({}, phases), "degraded");
}

TEST(OverallVerdict, RegressionAtErrorSeverityFails) {
  Finding f = make_finding("BANDWIDTH_REGRESSION", "busbw 0.4 far below 1.6 GB/s");
  f.severity = "error";
  EXPECT_EQ(overall_verdict({f}, healthy()), "fail");
}

TEST(OverallVerdict, ErrorFindingFailsEvenIfPhasesPassed) {
  EXPECT_EQ(overall_verdict({make_finding("SILENT_FALLBACK", "expected efa, got tcp")}, healthy()),
            "fail");
}

TEST(OverallVerdict, FailedPhaseFailsWithoutAnyFinding) {
  auto phases = healthy();
  phases[1].status = "fail";
  EXPECT_EQ(overall_verdict({}, phases), "fail");
}

TEST(OverallVerdict, ErrorPlusDegradedIsFail) {
  std::vector<Finding> f = {make_finding("STRAGGLER", "rank 2 slow", {2}),
                            make_finding("DATA_CORRUPTION", "rank 1: 12 wrong", {1})};
  EXPECT_EQ(overall_verdict(f, healthy()), "fail");
}

TEST(OverallVerdict, SeveralFindingsTakeTheWorst) {
  std::vector<Finding> f = {make_finding("STRAGGLER", "rank 2 slow", {2}),
                            make_finding("BASELINE_MISSING", "no baseline"),
                            make_finding("BANDWIDTH_REGRESSION", "busbw low")};
  // inconclusive outranks degraded: an unjudged measurement cannot be called "works but slow".
  EXPECT_EQ(overall_verdict(f, healthy()), "inconclusive");
  f.push_back(make_finding("MESH_BLOCKED", "0->3 blocked", {0, 3}));
  EXPECT_EQ(overall_verdict(f, healthy()), "fail");
  // Skipped required phase + degraded finding: still not better than inconclusive.
  auto phases = healthy();
  phases.push_back(phase("transport:fabric", "skipped"));
  EXPECT_EQ(overall_verdict({make_finding("STRAGGLER", "slow", {1})}, phases), "inconclusive");
}

TEST(OverallVerdict, InfoFindingsChangeNothing) {
  Finding f = make_finding("STRAGGLER", "note");
  f.severity = "info";
  EXPECT_EQ(overall_verdict({f}, healthy()), "pass");
}

TEST(OverallVerdict, UnknownSpellingsFailClosed) {
  Finding f = make_finding("STRAGGLER", "x");
  f.severity = "critical";
  EXPECT_EQ(overall_verdict({f}, healthy()), "fail");
  auto phases = healthy();
  phases[0].status = "ok";
  EXPECT_EQ(overall_verdict({}, phases), "fail");
  Finding unknown_code;
  unknown_code.code = "SOMETHING_NEW";
  unknown_code.severity = "warning";
  EXPECT_EQ(overall_verdict({unknown_code}, healthy()), "degraded");
}

TEST(VerdictFor, UnexplainedMissingRankIsNeverPass) {
  Verdict v;
  v.phases = healthy();
  v.ranks.resize(2);
  v.ranks[1].rank = 1;
  v.ranks[1].status = "lost";
  EXPECT_EQ(verdict_for(v), "inconclusive");
  v.findings.push_back(make_finding("PEER_LOST", "rank 1 vanished", {1}));
  EXPECT_EQ(verdict_for(v), "fail");
  apply_verdict(v);
  EXPECT_EQ(v.verdict, "fail");
  EXPECT_EQ(v.exit_code, 1);
}

TEST(ExitCode, Mapping) {
  EXPECT_EQ(exit_code_for("pass"), 0);
  EXPECT_EQ(exit_code_for("fail"), 1);
  EXPECT_EQ(exit_code_for("degraded"), 3);
  EXPECT_EQ(exit_code_for("inconclusive"), 4);
  EXPECT_EQ(exit_code_for("PASS"), 1);
  EXPECT_EQ(exit_code_for(""), 1);
}

}  // namespace
}  // namespace ncclsmoke::results
