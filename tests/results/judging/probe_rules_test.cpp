// The probe rules (results/judging/probe_rules.h) over typed observations: a ConfigProblem becomes
// CONFIG_MISSING / CONFIG_INVALID through the finding table, and every rendezvous / mesh rule's
// finding carries its table row's code, severity and layer.
#include "results/judging/probe_rules.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {
namespace {

using ErrorClass = StoreErrorClass;

ConfigProblem problem(ConfigProblem::Kind kind, std::string variable, std::string value,
                      std::string message, std::string hint) {
  ConfigProblem p;
  p.kind = kind;
  p.variable = std::move(variable);
  p.value = std::move(value);
  p.message = std::move(message);
  p.hint = std::move(hint);
  return p;
}

ProbeContext context(int rank, int size) {
  ProbeContext c;
  c.rank = rank;
  c.world_size = size;
  c.host = "host-" + std::to_string(rank);
  c.master_addr = "10.0.0.7";
  c.master_port = 29500;
  c.pid = 4242;
  return c;
}

// The finding's code is in the table, and its layer is the table's (severity too, unless the
// rule downgrades a CONFIG_INVALID conflict to a warning).
void expect_from_table(const Finding& f) {
  const FindingCode* row = find_code(f.code);
  ASSERT_NE(row, nullptr) << f.code;
  EXPECT_EQ(f.layer, row->layer) << f.code;
  EXPECT_EQ(f.severity, row->severity) << f.code;
  EXPECT_FALSE(f.hint.empty()) << f.code;
  EXPECT_FALSE(f.message.empty()) << f.code;
}

TEST(ConfigProblemToFinding, MissingIsConfigMissingWithItsOwnFix) {
  auto p = problem(ConfigProblem::Kind::missing, "MASTER_ADDR", "",
                   "no master address: world size is 4 but neither --master-addr nor "
                   "MASTER_ADDR is set, so ranks cannot find rank 0",
                   "export it to every rank: mpirun -x MASTER_ADDR=<rank 0 host>");
  EXPECT_TRUE(p.blocking());
  Finding f = config_finding(p);
  EXPECT_EQ(f.code, Code::CONFIG_MISSING);
  expect_from_table(f);
  EXPECT_EQ(f.layer, Layer::config);
  EXPECT_EQ(f.message, p.message);
  EXPECT_EQ(f.hint, "export it to every rank: mpirun -x MASTER_ADDR=<rank 0 host>");
  EXPECT_EQ(f.evidence["variable"], "MASTER_ADDR");
  EXPECT_EQ(f.evidence["value"], "");
  EXPECT_TRUE(f.ranks.empty());
  EXPECT_TRUE(f.hosts.empty());
}

TEST(ConfigProblemToFinding, InvalidIsConfigInvalidWithTheTablesFixTemplate) {
  auto p = problem(ConfigProblem::Kind::invalid, "MASTER_PORT", "tcp://10.0.0.7:29500",
                   "MASTER_PORT is \"tcp://10.0.0.7:29500\", a Kubernetes service link, not a port",
                   "set enableServiceLinks: false in the pod spec");
  Finding f = config_finding(p);
  EXPECT_EQ(f.code, Code::CONFIG_INVALID);
  expect_from_table(f);
  EXPECT_EQ(f.hint,
            "Fix MASTER_PORT (value tcp://10.0.0.7:29500): set enableServiceLinks: false in the "
            "pod spec");
  EXPECT_EQ(f.evidence["variable"], "MASTER_PORT");
  EXPECT_EQ(f.evidence["value"], "tcp://10.0.0.7:29500");
}

TEST(ConfigProblemToFinding, AConflictBetweenLaunchersIsAConfigInvalidWarning) {
  auto p = problem(ConfigProblem::Kind::conflict, "OMPI_COMM_WORLD_RANK", "1",
                   "OMPI_COMM_WORLD_RANK is \"1\" (Open MPI) but this process is rank 2 by "
                   "torchrun; launchers disagree, using torchrun's rank",
                   "pass --launcher torchrun");
  EXPECT_FALSE(p.blocking());
  Finding f = config_finding(p);
  EXPECT_EQ(f.code, Code::CONFIG_INVALID);
  EXPECT_EQ(f.severity, Severity::warning);
  EXPECT_EQ(f.layer, Layer::config);
  EXPECT_NE(f.hint.find("Fix OMPI_COMM_WORLD_RANK (value 1): pass --launcher torchrun"),
            std::string::npos)
      << f.hint;
}

TEST(ConfigProblemToFinding, NoVariableGivesTheFixAlone) {
  auto p = problem(ConfigProblem::Kind::invalid, "", "", "world discovery failed: bad_alloc",
                   "report this as a bug in ncclsmoke");
  Finding f = config_finding(p);
  EXPECT_EQ(f.code, Code::CONFIG_INVALID);
  EXPECT_EQ(f.severity, Severity::error);
  EXPECT_EQ(f.hint, "report this as a bug in ncclsmoke");
}

TEST(ProbeRules, EveryConnectClassComesFromTheTable) {
  const auto c = context(3, 4);
  const std::vector<std::pair<ErrorClass, std::string>> cases{
      {ErrorClass::dns, "RENDEZVOUS_DNS"},
      {ErrorClass::refused, "RENDEZVOUS_REFUSED"},
      {ErrorClass::timed_out, "RENDEZVOUS_TIMEOUT"},
      {ErrorClass::stalled, "RENDEZVOUS_STALLED"},
      {ErrorClass::unreachable, "RENDEZVOUS_UNREACHABLE"},
      {ErrorClass::reset, "RENDEZVOUS_LOST"}};
  for (const auto& [cls, code] : cases) {
    Finding f = connect_finding({cls, "detail"}, c, 2.0);
    EXPECT_EQ(name(f.code), code);
    expect_from_table(f);
    EXPECT_EQ(f.message.rfind("rank 3 (host host-3)", 0), 0u) << f.message;
    EXPECT_EQ(f.hosts, (std::vector<std::string>{"host-3", "10.0.0.7"}));
    EXPECT_EQ(f.evidence["waited_s"], 2.0);
  }
}

TEST(ProbeRules, AnIpv6MasterIsBracketedAndAnUnknownHostIsNotSpelledEmpty) {
  auto c = context(1, 2);
  c.master_addr = "fd00::7";
  c.host.clear();
  Finding f = connect_finding({ErrorClass::refused, "refused"}, c, 1.0);
  EXPECT_NE(f.message.find("rank 1 could not reach the store at [fd00::7]:29500"),
            std::string::npos)
      << f.message;
  EXPECT_EQ(f.message.find("(host )"), std::string::npos) << f.message;
}

TEST(ProbeRules, JoinRulesNameTheClaimantsPidFromTheContext) {
  JoinFacts j;
  j.missing = {2, 3};
  j.master_world_size = 8;
  j.rank_taken_by = JoinFacts::Claimant{"host-x", 77};
  j.roster_received = false;
  j.waited_s = 5;
  auto out = join_findings(j, context(1, 4), 30);
  ASSERT_EQ(out.size(), 4u);
  for (const auto& f : out) expect_from_table(f);
  EXPECT_EQ(out[0].code, Code::RANKS_MISSING);
  EXPECT_EQ(out[0].message, "2 of 4 ranks never joined within 30.0s: ranks 2, 3");
  EXPECT_EQ(out[1].code, Code::WORLD_MISMATCH);
  EXPECT_EQ(out[1].message, "rank 1 (host host-1) has world size 4 but rank 0 has 8");
  EXPECT_EQ(out[2].message,
            "rank 1 was claimed twice: by host host-x (pid 77) and by host host-1 (pid 4242)");
  EXPECT_EQ(out[3].code, Code::RENDEZVOUS_LOST);
}

TEST(ProbeRules, MeshPeerLostHasTheTablesLayer) {
  MeshFacts m;
  m.silent_ranks = {2};
  m.summary_received = true;
  m.pairs_tested = 3;
  auto j = judge_mesh(m, context(0, 3), {{2, "host-2"}});
  ASSERT_EQ(j.findings.size(), 1u);
  EXPECT_EQ(j.findings[0].code, Code::PEER_LOST);
  expect_from_table(j.findings[0]);
  EXPECT_EQ(j.findings[0].layer, Layer::run);  // was "mesh" before the rule moved to the table
  EXPECT_EQ(j.findings[0].message, "rank 2 joined but stopped answering during the mesh probe");
  EXPECT_EQ(j.status, PhaseStatus::fail);
  EXPECT_EQ(j.detail, "3 pairs tested, 0 failed, 1 ranks lost");
}

TEST(ProbeRules, MeshBlockedAndIncompleteComeFromTheTable) {
  MeshFacts m;
  m.failures = {{0, 2, "10.0.0.9:4000", ErrorClass::timed_out, "", 1.0},
                {1, 2, "10.0.0.9:4000", ErrorClass::refused, "", 0.1}};
  m.pairs_tested = 6;
  m.pairs_untested = 2;
  m.unfinished_ranks = {1};
  m.summary_received = true;
  m.budget_s = 10;
  auto j = judge_mesh(m, context(0, 3), {{0, "h0"}, {1, "h1"}, {2, "h2"}});
  ASSERT_EQ(j.findings.size(), 2u);
  for (const auto& f : j.findings) expect_from_table(f);
  EXPECT_EQ(j.findings[0].code, Code::MESH_BLOCKED);
  EXPECT_EQ(j.findings[0].message,
            "2 of 6 rank-to-rank connections failed (1 refused, 1 timed_out); every failing pair "
            "involves h2 (rank 2), as the destination");
  EXPECT_EQ(j.findings[0].hosts.front(), "h2");
  EXPECT_EQ(j.findings[1].code, Code::MESH_INCOMPLETE);
  EXPECT_NE(j.findings[1].message.find("; rank 1 was still probing;"), std::string::npos)
      << j.findings[1].message;
  EXPECT_EQ(j.status, PhaseStatus::fail);
}

}  // namespace
}  // namespace ncclsmoke::results
