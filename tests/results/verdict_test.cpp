#include "results/verdict.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "results/classify.h"
#include "results/finding_codes.h"
#include "results/schema.h"
#include "tests/results/sample.h"

namespace ncclsmoke::results {
namespace {

using nlohmann::json;

TEST(VerdictJson, RoundTripKeepsEveryField) {
  Verdict v = testing::full_sample();
  json j = to_json(v);
  Verdict back = verdict_from_json(j);
  EXPECT_EQ(to_json(back), j);
  // Also through text, as the files are read.
  EXPECT_EQ(to_json(verdict_from_json(json::parse(j.dump()))), j);

  EXPECT_EQ(back.run_id, v.run_id);
  EXPECT_EQ(back.world.master_port, 29500);
  ASSERT_EQ(back.ranks.size(), 4u);
  EXPECT_EQ(back.ranks[1].interface, "eth0");
  EXPECT_EQ(back.ranks[3].status, "missing");
  EXPECT_EQ(back.ranks[3].pid, 0);
  ASSERT_EQ(back.phases.size(), 4u);
  EXPECT_FALSE(back.phases[3].required);
  EXPECT_EQ(back.phases[1].detail, "3 of 4 ranks joined");
  ASSERT_EQ(back.transports.size(), 2u);
  EXPECT_EQ(back.transports[0].rank, -1);
  EXPECT_TRUE(back.transports[0].gate);
  EXPECT_DOUBLE_EQ(back.transports[0].busbw_gbps, 1.93);
  EXPECT_EQ(back.transports[0].wrong, 0);
  EXPECT_EQ(back.transports[1].rank, 2);
  EXPECT_TRUE(std::isnan(back.transports[1].time_us));
  EXPECT_EQ(back.transports[1].wrong, -1);
  EXPECT_TRUE(back.transports[1].synthetic);
  ASSERT_EQ(back.identities.size(), 1u);
  EXPECT_EQ(back.identities[0].observed["interface"], "eth0");
  EXPECT_EQ(back.baseline["profile"], "ci-loopback");
  ASSERT_EQ(back.findings.size(), 2u);
  EXPECT_EQ(back.findings[0].evidence["expected"], 4);
  EXPECT_EQ(back.findings[1].hosts, std::vector<std::string>{"host-b"});
  EXPECT_EQ(back.env.at("NCCL_DEBUG"), "INFO");
}

// The job identity and the store the rank met at (issue: launchers) survive the round trip, are
// absent when unknown, and a wrong dialect spelling is refused by the schema.
TEST(VerdictJson, JobAndStoreRoundTrip) {
  Verdict v = testing::full_sample();
  EXPECT_FALSE(to_json(v).at("world").contains("store"));
  EXPECT_FALSE(to_json(v).at("world").contains("job_id"));
  v.world.job_id = "4242.0";
  v.world.job_id_source = "SLURM_JOB_ID";
  v.world.restart_count = 2;
  v.world.sources = {{"master_addr", "SLURM_STEP_NODELIST"}, {"master_port", "SLURM_JOB_ID"}};
  v.world.store = {"10.0.0.7", 29500, "torchelastic agent", "legacy", "torch<=2.0",
                   "ncclsmoke/4242.0/2/"};
  auto j = to_json(v);
  Verdict back = verdict_from_json(j);
  EXPECT_EQ(back.world.job_id, "4242.0");
  EXPECT_EQ(back.world.job_id_source, "SLURM_JOB_ID");
  EXPECT_EQ(back.world.restart_count, 2);
  EXPECT_EQ(back.world.store.hosted_by, "torchelastic agent");
  EXPECT_EQ(back.world.store.dialect, "legacy");
  EXPECT_EQ(back.world.store.era, "torch<=2.0");
  EXPECT_EQ(back.world.store.key_prefix, "ncclsmoke/4242.0/2/");
  EXPECT_EQ(back.world.sources.at("master_port"), "SLURM_JOB_ID");
  EXPECT_EQ(to_json(back), j);
  j["world"]["store"]["dialect"] = "modrn";
  EXPECT_THROW(verdict_from_json(j), VerdictFormatError);
}

TEST(VerdictJson, NotMeasuredIsNullNeverZero) {
  json j = to_json(testing::full_sample());
  const json& row = j["transports"][1];
  EXPECT_TRUE(row["time_us"].is_null());
  EXPECT_TRUE(row["busbw_gbps"].is_null());
  EXPECT_TRUE(row["wrong"].is_null());
  EXPECT_FALSE(j["transports"][0].contains("rank"));
  EXPECT_EQ(j["transports"][1]["rank"], 2);
}

TEST(VerdictJson, OptionalMembersAbsentWhenEmpty) {
  Verdict v = testing::full_sample();
  v.identities.clear();
  v.baseline = nullptr;
  v.findings[0].evidence = nullptr;
  json j = to_json(v);
  EXPECT_FALSE(j.contains("identities"));
  EXPECT_FALSE(j.contains("baseline"));
  EXPECT_FALSE(j["findings"][0].contains("evidence"));
  EXPECT_FALSE(j["ranks"][3].contains("host"));
  EXPECT_TRUE(validate_verdict_json(j).empty());
  Verdict back = verdict_from_json(j);
  EXPECT_TRUE(back.baseline.is_null());
  EXPECT_TRUE(back.findings[0].evidence.is_null());
}

TEST(VerdictJson, PhaseRequiredDefaultsToTrueWhenAbsent) {
  json j = to_json(testing::full_sample());
  j["phases"][3].erase("required");
  EXPECT_TRUE(verdict_from_json(j).phases[3].required);
}

TEST(VerdictJson, FromJsonThrowsNamingThePath) {
  json j = to_json(testing::full_sample());
  j["findings"][1]["severity"] = "fatal";
  j.erase("run_id");
  try {
    verdict_from_json(j);
    FAIL() << "expected VerdictFormatError";
  } catch (const VerdictFormatError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("/findings/1/severity"), std::string::npos) << what;
    EXPECT_NE(what.find("run_id"), std::string::npos) << what;
    EXPECT_EQ(e.problems().size(), 2u) << what;
  }
  EXPECT_THROW(verdict_from_json(json::array()), VerdictFormatError);
  EXPECT_THROW(verdict_from_json(json("pass")), VerdictFormatError);
}

TEST(VerdictJson, NewVerdictIsValidAndInconclusiveUntilSomethingRuns) {
  Verdict v = new_verdict(2);
  EXPECT_EQ(v.reporting_rank, 2);
  EXPECT_EQ(v.scope, "local");
  EXPECT_FALSE(v.tool.version.empty());
  auto errors = validate_verdict_json(to_json(v));
  EXPECT_TRUE(errors.empty()) << errors.front();
  apply_verdict(v);
  EXPECT_EQ(v.verdict, "inconclusive");
  EXPECT_EQ(v.exit_code, 4);
}

TEST(RunId, TimeThenRandomHexAndUnique) {
  std::regex shape("^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$");
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    std::string id = new_run_id();
    EXPECT_TRUE(std::regex_match(id, shape)) << id;
    seen.insert(id);
  }
  EXPECT_GE(seen.size(), 49u);  // 32 random bits; a collision in 50 is ~3e-7
}

TEST(RunId, Rfc3339Utc) {
  using namespace std::chrono;
  system_clock::time_point t{seconds(1714558500) + milliseconds(123)};
  EXPECT_EQ(rfc3339_utc(t), "2024-05-01T10:15:00.123Z");
  EXPECT_EQ(rfc3339_utc(system_clock::time_point{}), "1970-01-01T00:00:00.000Z");
}

TEST(FindingCodes, TableIsCompleteAndUnique) {
  std::set<std::string> codes;
  for (const auto& c : finding_codes()) {
    EXPECT_TRUE(codes.insert(std::string(c.code)).second) << c.code;
    EXPECT_TRUE(c.severity == "error" || c.severity == "warning" || c.severity == "info") << c.code;
    EXPECT_TRUE(c.warning_effect == "degraded" || c.warning_effect == "inconclusive") << c.code;
    EXPECT_FALSE(c.meaning.empty()) << c.code;
    EXPECT_FALSE(c.hint.empty()) << c.code;
    EXPECT_EQ(c.meaning.find('|'), std::string_view::npos) << c.code;  // Markdown table cell
  }
  for (const char* c :
       {"CONFIG_INVALID", "CONFIG_MISSING", "RENDEZVOUS_DNS", "RENDEZVOUS_REFUSED",
        "RENDEZVOUS_TIMEOUT", "RENDEZVOUS_UNREACHABLE", "RANKS_MISSING", "WORLD_MISMATCH",
        "RENDEZVOUS_LOST", "MESH_BLOCKED", "PEER_LOST", "RUN_TIMEOUT", "TRANSPORT_INIT_FAILED",
        "TRANSPORT_UNAVAILABLE", "TRANSPORT_TIMEOUT", "SILENT_FALLBACK", "BANDWIDTH_REGRESSION",
        "STRAGGLER", "DATA_CORRUPTION", "BASELINE_MISSING"}) {
    EXPECT_TRUE(codes.count(c)) << c;
  }
  EXPECT_EQ(find_code("BANDWIDTH_REGRESSION")->severity, "warning");
  EXPECT_EQ(find_code("STRAGGLER")->warning_effect, "degraded");
  EXPECT_EQ(find_code("BASELINE_MISSING")->warning_effect, "inconclusive");
  EXPECT_EQ(find_code("DATA_CORRUPTION")->layer, "data");
  EXPECT_EQ(find_code("NOPE"), nullptr);
}

TEST(FindingCodes, MakeFindingFillsFromTable) {
  Finding f = make_finding("CONFIG_INVALID", "MASTER_PORT=tcp://10.0.0.7:29500 is not a port", {},
                           {"host-a"},
                           {{"variable", "MASTER_PORT"},
                            {"value", "tcp://10.0.0.7:29500"},
                            {"fix", "set enableServiceLinks: false in the pod spec"}});
  EXPECT_EQ(f.severity, "error");
  EXPECT_EQ(f.layer, "config");
  EXPECT_EQ(f.hint,
            "Fix MASTER_PORT (value tcp://10.0.0.7:29500): set enableServiceLinks: false in the "
            "pod spec");
  EXPECT_THROW(make_finding("CONFIG_INVALDI", "typo"), std::invalid_argument);
  EXPECT_EQ(fill_template("to {master} via {nic}", {{"master", "m:1"}}), "to m:1 via <nic>");
  EXPECT_EQ(fill_template("unclosed {brace", {}), "unclosed {brace");
}

TEST(FindingCodes, DocsFileMatchesTable) {
  const std::string path = std::string(NCCLSMOKE_SOURCE_DIR) + "/docs/findings.md";
  std::ifstream in(path);
  std::stringstream ss;
  if (in) ss << in.rdbuf();
  if (!in || ss.str() != findings_markdown()) {
    std::ofstream("findings.md.expected") << findings_markdown();
    FAIL() << path << " is missing or differs from findings_markdown(); the expected text was written to "
           << "findings.md.expected in the test's working directory; copy it over.";
  }
}

}  // namespace
}  // namespace ncclsmoke::results
