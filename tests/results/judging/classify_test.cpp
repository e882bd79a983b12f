#include "results/judging/classify.h"

#include <gtest/gtest.h>

#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {
namespace {

Phase phase(const std::string& name, const std::string& status, bool required = true) {
  Phase p;
  p.name = name;
  p.status = parse_phase_status(status).value();
  p.required = required;
  return p;
}

std::vector<Phase> healthy() {
  return {phase("world", "pass"), phase("rendezvous", "pass"), phase("mesh", "pass")};
}

TEST(OverallVerdict, AllPhasesPassNoFindingsIsPass) {
  EXPECT_EQ(overall_verdict({}, healthy()), Outcome::pass);
  EXPECT_EQ(overall_verdict({}, healthy(), {"world", "rendezvous", "mesh"}), Outcome::pass);
}

TEST(OverallVerdict, NothingRunIsNeverPass) {
  EXPECT_EQ(overall_verdict({}, {}), Outcome::inconclusive);
}

TEST(OverallVerdict, SkippedRequiredPhaseIsInconclusiveNotPass) {
  auto phases = healthy();
  phases.push_back(phase("transport:socket", "skipped"));
  EXPECT_EQ(overall_verdict({}, phases), Outcome::inconclusive);
  phases.back().status = PhaseStatus::not_run;
  EXPECT_EQ(overall_verdict({}, phases), Outcome::inconclusive);
  // The same phase, optional: nothing lost.
  phases.back().required = false;
  EXPECT_EQ(overall_verdict({}, phases), Outcome::pass);
}

TEST(OverallVerdict, MissingRequiredPhaseIsInconclusive) {
  EXPECT_EQ(overall_verdict({}, healthy(), {"world", "rendezvous", "mesh", "transport:socket"}),
            Outcome::inconclusive);
}

TEST(OverallVerdict, InconclusivePhaseOrFinding) {
  auto phases = healthy();
  phases[2].status = PhaseStatus::inconclusive;
  EXPECT_EQ(overall_verdict({}, phases), Outcome::inconclusive);
  EXPECT_EQ(overall_verdict({make_finding(Code::BASELINE_MISSING, "no baseline for socket 64 MiB")},
                            healthy()),
            Outcome::inconclusive);
}

TEST(OverallVerdict, DegradedCodesDegrade) {
  EXPECT_EQ(overall_verdict({make_finding(Code::BANDWIDTH_REGRESSION, "busbw 1.1 < 1.6 GB/s")},
                            healthy()),
            Outcome::degraded);
  EXPECT_EQ(overall_verdict({make_finding(Code::STRAGGLER, "rank 2 is 3x slower", {2})}, healthy()),
            Outcome::degraded);
  auto phases = healthy();
  phases[2].status = PhaseStatus::degraded;
  EXPECT_EQ(overall_verdict({}, phases), Outcome::degraded);
}

TEST(OverallVerdict, RegressionAtErrorSeverityFails) {
  Finding f = make_finding(Code::BANDWIDTH_REGRESSION, "busbw 0.4 far below 1.6 GB/s");
  f.severity = Severity::error;
  EXPECT_EQ(overall_verdict({f}, healthy()), Outcome::fail);
}

TEST(OverallVerdict, ErrorFindingFailsEvenIfPhasesPassed) {
  EXPECT_EQ(overall_verdict({make_finding(Code::SILENT_FALLBACK, "expected efa, got tcp")}, healthy()),
            Outcome::fail);
}

TEST(OverallVerdict, FailedPhaseFailsWithoutAnyFinding) {
  auto phases = healthy();
  phases[1].status = PhaseStatus::fail;
  EXPECT_EQ(overall_verdict({}, phases), Outcome::fail);
}

TEST(OverallVerdict, ErrorPlusDegradedIsFail) {
  std::vector<Finding> f = {make_finding(Code::STRAGGLER, "rank 2 slow", {2}),
                            make_finding(Code::DATA_CORRUPTION, "rank 1: 12 wrong", {1})};
  EXPECT_EQ(overall_verdict(f, healthy()), Outcome::fail);
}

TEST(OverallVerdict, SeveralFindingsTakeTheWorst) {
  std::vector<Finding> f = {make_finding(Code::STRAGGLER, "rank 2 slow", {2}),
                            make_finding(Code::BASELINE_MISSING, "no baseline"),
                            make_finding(Code::BANDWIDTH_REGRESSION, "busbw low")};
  // inconclusive outranks degraded: an unjudged measurement cannot be called "works but slow".
  EXPECT_EQ(overall_verdict(f, healthy()), Outcome::inconclusive);
  f.push_back(make_finding(Code::MESH_BLOCKED, "0->3 blocked", {0, 3}));
  EXPECT_EQ(overall_verdict(f, healthy()), Outcome::fail);
  // Skipped required phase + degraded finding: still not better than inconclusive.
  auto phases = healthy();
  phases.push_back(phase("transport:fabric", "skipped"));
  EXPECT_EQ(overall_verdict({make_finding(Code::STRAGGLER, "slow", {1})}, phases), Outcome::inconclusive);
}

TEST(OverallVerdict, InfoFindingsChangeNothing) {
  Finding f = make_finding(Code::STRAGGLER, "note");
  f.severity = Severity::info;
  EXPECT_EQ(overall_verdict({f}, healthy()), Outcome::pass);
}

TEST(OverallVerdict, UnknownSpellingsFailClosed) {
  // An unknown severity or phase status cannot reach the model (enums.h): the parsers
  // reject it, and verdict_from_json with them (schema_test / enums_test).
  EXPECT_EQ(parse_severity("critical"), std::nullopt);
  EXPECT_EQ(parse_phase_status("ok"), std::nullopt);
  Finding unknown_code;
  unknown_code.code = AnyCode::from_text("SOMETHING_NEW");
  unknown_code.severity = Severity::warning;
  EXPECT_EQ(overall_verdict({unknown_code}, healthy()), Outcome::degraded);
}

TEST(VerdictFor, UnexplainedMissingRankIsNeverPass) {
  Verdict v;
  v.phases = healthy();
  v.ranks.resize(2);
  v.ranks[1].rank = 1;
  v.ranks[1].status = RankStatus::lost;
  EXPECT_EQ(verdict_for(v), Outcome::inconclusive);
  v.findings.push_back(make_finding(Code::PEER_LOST, "rank 1 vanished", {1}));
  EXPECT_EQ(verdict_for(v), Outcome::fail);
  apply_verdict(v);
  EXPECT_EQ(v.verdict, Outcome::fail);
  EXPECT_EQ(v.exit_code, 1);
}

TEST(ExitCode, Mapping) {
  EXPECT_EQ(exit_code_for(Outcome::pass), 0);
  EXPECT_EQ(exit_code_for(Outcome::fail), 1);
  EXPECT_EQ(exit_code_for(Outcome::degraded), 3);
  EXPECT_EQ(exit_code_for(Outcome::inconclusive), 4);
  // A verdict text that is not one of the four fails closed at the edge.
  EXPECT_EQ(exit_code_for(parse_outcome("PASS").value_or(Outcome::fail)), 1);
  EXPECT_EQ(exit_code_for(parse_outcome("").value_or(Outcome::fail)), 1);
}

}  // namespace
}  // namespace ncclsmoke::results
