#include "results/verdict/verdict.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "results/judging/classify.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/schema.h"
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
  EXPECT_EQ(back.ranks[3].status, RankStatus::missing);
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
  EXPECT_EQ(back.findings[1].subject, v.findings[1].subject);
  EXPECT_EQ(back.findings[1].message_template, v.findings[1].message_template);
  EXPECT_EQ(back.findings[1].message,
            "rank 1 (host host-b) took 2.4x the median all-reduce time, seen by ranks 0, 2 (host "
            "host-a)");
  EXPECT_TRUE(back.findings[0].subject.empty());
  EXPECT_FALSE(j["findings"][0].contains("subject"));
  EXPECT_EQ(back.findings[1].origin, FindingOrigin::liveness_watch);
  EXPECT_EQ(j["findings"][1]["origin"], "liveness_watch");
  EXPECT_EQ(back.findings[0].origin, FindingOrigin::none);
  EXPECT_FALSE(j["findings"][0].contains("origin"));
  EXPECT_EQ(back.schema_minor, kSchemaMinor);
  // The fast reader takes the subject and the origin too, and gives the same verdict.
  auto fast = verdict_from_text_fast(j.dump());
  ASSERT_TRUE(fast.has_value());
  EXPECT_EQ(fast->findings[1].origin, FindingOrigin::liveness_watch);
  EXPECT_EQ(to_json(*fast), j);
  EXPECT_EQ(back.env.at("NCCL_DEBUG"), "INFO");
  ASSERT_TRUE(back.nics.read);
  ASSERT_EQ(back.nics.rdma_ports.size(), 1u);
  EXPECT_EQ(back.nics.rdma_ports[0].moved.at("symbol_error"), 12u);
  EXPECT_EQ(back.nics.interfaces.at(0).speed_mbps, 100000);
  EXPECT_EQ(fast->nics.interfaces.at(0).moved.at("rx_errors"), 2u);
}

// "node" is a rank's own report: a member of another type, or missing, reads as its default on
// both paths, and a verdict without "node" read nothing.
TEST(VerdictJson, TheNodeReadsForgivingly) {
  json j = to_json(testing::full_sample());
  j["node"]["nics"]["interfaces"][0]["mtu"] = "big";
  j["node"]["nics"]["interfaces"][0]["moved"] = {{"rx_errors", -3}, {"tx_errors", 1}};
  j["node"]["nics"]["rdma_ports"][0].erase("state");
  j["node"]["nics"]["rdma_ports"].push_back(7);
  j["node"]["nics"]["interval_s"] = nullptr;
  for (const Verdict& v : {verdict_from_json(j), *verdict_from_text_fast(j.dump())}) {
    ASSERT_TRUE(v.nics.read);
    EXPECT_EQ(v.nics.interfaces.at(0).mtu, -1);
    EXPECT_EQ(v.nics.interfaces.at(0).moved, (std::map<std::string, std::uint64_t>{{"tx_errors", 1}}));
    ASSERT_EQ(v.nics.rdma_ports.size(), 1u);
    EXPECT_EQ(v.nics.rdma_ports[0].state, "");
    EXPECT_EQ(v.nics.interval_s, 0);
  }
  j.erase("node");
  EXPECT_FALSE(verdict_from_json(j).nics.read);
  j["node"] = json::object();
  EXPECT_FALSE(verdict_from_text_fast(j.dump())->nics.read);
}

// The job identity and the store the rank met at survive the round trip, are
// absent when unknown, and a wrong dialect spelling is refused by the schema.
// A verdict written before minor versions and subjects (schema_minor absent, findings without
// subject or template) still reads, on both paths: minor 0, empty subjects, messages as written.
TEST(VerdictJson, AVerdictFromBeforeSubjectsReadsTheSame) {
  json j = to_json(testing::full_sample());
  j.erase("schema_minor");
  for (auto& f : j["findings"]) {
    f.erase("subject");
    f.erase("message_template");
    f.erase("origin");
  }
  for (const Verdict& v : {verdict_from_json(j), *verdict_from_text_fast(j.dump())}) {
    EXPECT_EQ(v.schema_minor, 0);
    ASSERT_EQ(v.findings.size(), 2u);
    EXPECT_TRUE(v.findings[1].subject.empty());
    EXPECT_EQ(v.findings[1].origin, FindingOrigin::none);
    EXPECT_EQ(v.findings[1].message, j["findings"][1]["message"]);
  }
}

// An origin this version does not know (a newer writer's) reads as none on both paths, and the
// schema takes it.
TEST(VerdictJson, AnUnknownOriginReadsAsNone) {
  json j = to_json(testing::full_sample());
  j["findings"][1]["origin"] = "a_rule_from_the_future";
  EXPECT_TRUE(validate_verdict_json(j).empty());
  for (const Verdict& v : {verdict_from_json(j), *verdict_from_text_fast(j.dump())})
    EXPECT_EQ(v.findings[1].origin, FindingOrigin::none);
}

// Past kMaxExpandedRanks, a range of ranks (RankInfo::through) round-trips on both readers; a
// single rank writes none.
TEST(VerdictJson, RankRangesRoundTrip) {
  Verdict v = testing::full_sample();
  RankInfo never;
  never.status = RankStatus::missing;
  never.detail = "never joined";
  v.ranks.clear();
  std::vector<int> missing;
  for (int r = 4; r <= 4000; ++r) missing.push_back(r);
  missing.push_back(4009);
  add_rank_ranges(v.ranks, missing, never);
  json j = to_json(v);
  ASSERT_EQ(j["ranks"].size(), 2u);
  EXPECT_EQ(j["ranks"][0]["through"], 4000);
  EXPECT_FALSE(j["ranks"][1].contains("through"));
  for (const Verdict& back : {verdict_from_json(j), *verdict_from_text_fast(j.dump())}) {
    ASSERT_EQ(back.ranks.size(), 2u);
    EXPECT_EQ(ranks_in(back.ranks[0]), 3997);
    EXPECT_EQ(ranks_in(back.ranks[1]), 1);
  }
}

// A world of up to kMaxExpandedRanks ranks writes one entry a rank, as verdicts always did.
TEST(VerdictJson, ASmallWorldWritesOneEntryARank) {
  Verdict v = testing::full_sample();
  RankInfo never;
  never.status = RankStatus::missing;
  never.detail = "never joined";
  v.ranks.clear();
  add_rank_ranges(v.ranks, {1, 2, 3, 7}, never);
  json j = to_json(v);
  ASSERT_EQ(j["ranks"].size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(j["ranks"][i]["rank"], std::vector<int>({1, 2, 3, 7})[i]);
    EXPECT_FALSE(j["ranks"][i].contains("through"));
    EXPECT_EQ(j["ranks"][i]["detail"], "never joined");
  }
}

TEST(VerdictJson, JobAndStoreRoundTrip) {
  Verdict v = testing::full_sample();
  EXPECT_FALSE(to_json(v).at("world").contains("store"));
  EXPECT_FALSE(to_json(v).at("world").contains("job_id"));
  v.world.job_id = "4242.0";
  v.world.job_id_source = "SLURM_JOB_ID";
  v.world.restart_count = 2;
  v.world.sources = {{"master_addr", "SLURM_STEP_NODELIST"}, {"master_port", "SLURM_JOB_ID"}};
  v.world.store = {"10.0.0.7",          29500, StoreHostedBy::torchelastic_agent,
                   StoreDialect::legacy, ServerEra::torch_le_2_0, "ncclsmoke/4242.0/2/"};
  auto j = to_json(v);
  Verdict back = verdict_from_json(j);
  EXPECT_EQ(back.world.job_id, "4242.0");
  EXPECT_EQ(back.world.job_id_source, "SLURM_JOB_ID");
  EXPECT_EQ(back.world.restart_count, 2);
  EXPECT_EQ(back.world.store.hosted_by, StoreHostedBy::torchelastic_agent);
  EXPECT_EQ(back.world.store.dialect, StoreDialect::legacy);
  EXPECT_EQ(back.world.store.era, ServerEra::torch_le_2_0);
  // The JSON spelling is the one written before these fields were enums.
  EXPECT_EQ(j["world"]["store"]["hosted_by"], "torchelastic agent");
  EXPECT_EQ(j["world"]["store"]["dialect"], "legacy");
  EXPECT_EQ(j["world"]["store"]["era"], "torch<=2.0");
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
  EXPECT_EQ(v.scope, Scope::local);
  EXPECT_FALSE(v.tool.version.empty());
  auto errors = validate_verdict_json(to_json(v));
  EXPECT_TRUE(errors.empty()) << errors.front();
  apply_verdict(v);
  EXPECT_EQ(v.verdict, Outcome::inconclusive);
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
    EXPECT_TRUE(codes.insert(to_string(c.code)).second) << c.code;
    EXPECT_TRUE(c.severity == Severity::error || c.severity == Severity::warning || c.severity == Severity::info) << c.code;
    EXPECT_TRUE(c.warning_effect == Outcome::degraded || c.warning_effect == Outcome::inconclusive) << c.code;
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
  EXPECT_EQ(find_code(Code::BANDWIDTH_REGRESSION)->severity, Severity::warning);
  EXPECT_EQ(find_code(Code::STRAGGLER)->warning_effect, Outcome::degraded);
  EXPECT_EQ(find_code(Code::BASELINE_MISSING)->warning_effect, Outcome::inconclusive);
  EXPECT_EQ(find_code(Code::DATA_CORRUPTION)->layer, Layer::data);
  EXPECT_EQ(find_code("NOPE"), nullptr);
}

TEST(FindingCodes, MakeFindingFillsFromTable) {
  Finding f = make_finding(Code::CONFIG_INVALID, "MASTER_PORT=tcp://10.0.0.7:29500 is not a port", {},
                           {"host-a"},
                           {{"variable", "MASTER_PORT"},
                            {"value", "tcp://10.0.0.7:29500"},
                            {"fix", "set enableServiceLinks: false in the pod spec"}});
  EXPECT_EQ(f.severity, Severity::error);
  EXPECT_EQ(f.layer, Layer::config);
  EXPECT_EQ(f.hint,
            "Fix MASTER_PORT (value tcp://10.0.0.7:29500): set enableServiceLinks: false in the "
            "pod spec");
  // A typo does not compile (make_finding takes a Code); the text form is rejected by the parser.
  EXPECT_EQ(parse_code("CONFIG_INVALDI"), std::nullopt);
  EXPECT_THROW(make_finding(Code::unknown, "typo"), std::invalid_argument);
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


// The import's one-pass reader must accept only what the schema accepts, and read it exactly as
// verdict_from_json does. A corpus of mutated verdicts (every member removed, retyped, bent to
// the edge of its constraint; unknown members; text-level damage) is run through both: whatever
// the fast reader accepts, the full path (nlohmann + valijson + verdict_from_json) must accept,
// with an identical Verdict. Documents the fast reader is unsure about go the full path anyway.
namespace fast_corpus {

json full_sample_json() {
  Verdict v = testing::full_sample();
  v.world.job_id = "job-1";
  v.world.job_id_source = "--job-id";
  v.world.restart_count = 1;
  v.world.sources = {{"rank", "--rank"}, {"master_addr", "MASTER_ADDR"}};
  v.world.store = {"master.smoke.svc",      29500, StoreHostedBy::rank0,
                   StoreDialect::modern,    ServerEra::torch_ge_2_5, "ncclsmoke/job-1/0/"};
  v.baseline = {{"profile", "ci-loopback"},
                {"transports", json::array({{{"transport", "socket"},
                                              {"band", {{"busbw_gbps", 1.5}, {"gate_bytes", 1048576}}}}})}};
  return to_json(v);
}

const std::vector<json>& replacements() {
  static const std::vector<json> r = {
      nullptr, true, false, 0, -1, 1, 2, 3, 4, 65535, 65536, -2, 1.0, 0.5, -0.5, 1e2,
      json::parse("-0"), json::parse("9223372036854775808"), json::parse("18446744073709551616"),
      json::parse("2147483648"), "", "x", "A", "a", "A b", "\xc3\xa9", std::string(1, '\0'),
      "2024-05-01T10:15:00Z", "2024-05-01T10:15:00.Z", "2024-05-01 10:15:00Z", "pass", "fail",
      "degraded", "inconclusive", "global", "local", "error", "joined", "modern", "RANKS_MISSING",
      "lower_case", std::string(128, 'r'), std::string(129, 'r'), std::string(127, 'r') + "\xc3\xa9",
      json::object(), json::array(), json::array({1}), json::array({"a"}), json::array({-1}),
      json{{"a", 1}}};
  return r;
}

// Every JSON pointer in `j` (objects and arrays, recursively), the root excluded.
void pointers(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      out.push_back(at / it.key());
      pointers(it.value(), at / it.key(), out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      out.push_back(at / i);
      pointers(j[i], at / i, out);
    }
  }
}

std::vector<std::string> corpus() {
  std::vector<std::string> texts;
  std::vector<json> bases = {full_sample_json(), to_json(testing::full_sample())};
  for (const json& base : bases) {
    texts.push_back(base.dump());
    texts.push_back(base.dump(2));
    std::vector<json::json_pointer> ptrs;
    pointers(base, json::json_pointer(), ptrs);
    for (const auto& ptr : ptrs) {
      json removed = base;
      removed[ptr.parent_pointer()].is_object()
          ? (void)removed[ptr.parent_pointer()].erase(ptr.back())
          : removed[ptr.parent_pointer()].erase(std::stoul(ptr.back()));
      texts.push_back(removed.dump());
      for (const json& r : replacements()) {
        json changed = base;
        changed[ptr] = r;
        texts.push_back(changed.dump());
      }
      if (base[ptr].is_object()) {
        json extra = base;
        extra[ptr]["unknown_member"] = 1;
        texts.push_back(extra.dump());
      }
    }
    json extra = base;
    extra["unknown_member"] = 1;
    texts.push_back(extra.dump());
    for (const char* v : {"pass", "fail", "degraded", "inconclusive"}) {
      for (int code : {0, 1, 2, 3, 4}) {
        json c = base;
        c["verdict"] = v;
        c["exit_code"] = code;
        texts.push_back(c.dump());
      }
    }
  }
  // Text-level: what a JSON tree cannot hold.
  const std::string t = bases[0].dump();
  auto replace_first = [&](const std::string& from, const std::string& to) {
    std::string s = t;
    auto at = s.find(from);
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
  };
  texts.push_back("\xef\xbb\xbf" + t);                                  // BOM
  texts.push_back(" \n\t" + t + " \r\n");                                // whitespace
  texts.push_back(t + "x");                                              // trailing garbage
  texts.push_back(t + "{}");
  texts.push_back(t.substr(0, t.size() - 1));                            // truncated
  texts.push_back(replace_first("\"run_id\"", "\"run\\u005fid\""));     // escaped key
  texts.push_back(replace_first("{\"baseline\"", "{\"run_id\":\"dup\",\"baseline\""));  // duplicate key
  texts.push_back(replace_first("\"schema_version\":1", "\"schema_version\":1.0"));
  texts.push_back(replace_first("\"schema_version\":1", "\"schema_version\":01"));
  texts.push_back(replace_first("\"schema_version\":1", "\"schema_version\":+1"));
  texts.push_back(replace_first("\"schema_version\":1", "\"schema_version\":1e0"));
  texts.push_back(replace_first("\"host-a\"", "\"host-\\u0061\""));       // escape in a value
  texts.push_back(replace_first("\"host-a\"", "\"host-\xff\""));          // invalid UTF-8
  texts.push_back(replace_first("\"host-a\"", "\"host-\ta\""));           // raw control char
  texts.push_back(replace_first("\"host-a\"", "\"host-\\ud800\""));       // lone surrogate
  texts.push_back(replace_first("\"NCCL_DEBUG\"", "\"NCCL_\\u0044EBUG\""));  // escaped map key
  texts.push_back(replace_first("{\"joined\":3", "{\"joined\":3,\"joined\":4"));  // dup in free-form
  texts.push_back(replace_first("\"evidence\":{", "\"evidence\":{\"s\":\"}\\\"{\","));  // braces in a string
  texts.push_back(replace_first("\"evidence\":{", "\"evidence\":{\"s\":[}"));
  texts.push_back(replace_first("true", "tru"));
  texts.push_back(replace_first("false", "falsey"));
  texts.push_back(replace_first(":null", ":nul"));
  texts.push_back(replace_first("1.93", "1.93e400"));
  texts.push_back(replace_first("1.93", "1."));
  texts.push_back(replace_first("1.93", "-1.93"));
  texts.push_back(replace_first("1.93", "1.93E+2"));
  texts.push_back(replace_first(",", ",,"));
  texts.push_back(replace_first("[", "[,"));
  texts.push_back("");
  texts.push_back("[]");
  texts.push_back("null");
  // Seeded byte damage all over the text.
  std::mt19937 rng(14);
  const std::string bytes = "{}[]\",:0123456789.-eE\\ tfnul\x80\xc3 Zx";
  for (int k = 0; k < 3000; ++k) {
    std::string s = t;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % s.size();
      switch (rng() % 3) {
        case 0: s[at] = bytes[rng() % bytes.size()]; break;
        case 1: s.erase(at, 1 + rng() % 4); break;
        default: s.insert(at, 1, bytes[rng() % bytes.size()]); break;
      }
    }
    texts.push_back(s);
  }
  return texts;
}

}  // namespace fast_corpus

TEST(VerdictFast, AcceptsOnlyWhatTheSchemaAcceptsAndReadsItTheSame) {
  size_t fast_accepted = 0, schema_accepted = 0, unsure = 0;
  const auto texts = fast_corpus::corpus();
  for (const auto& text : texts) {
    auto fast = verdict_from_text_fast(text);
    json doc = json::parse(text, nullptr, false);
    // verdict_from_json accepts exactly what the schema accepts (it throws with
    // validate_verdict_json's problems otherwise): one validation per document.
    std::optional<Verdict> slow;
    if (!doc.is_discarded()) {
      try {
        slow = verdict_from_json(doc);
      } catch (const VerdictFormatError&) {
      }
    }
    const bool valid = slow.has_value();
    schema_accepted += valid;
    if (!fast) {
      unsure += valid;
      continue;
    }
    ++fast_accepted;
    ASSERT_TRUE(valid) << "the fast reader accepted what the schema rejects:\n" << text;
    EXPECT_EQ(to_json(*fast), to_json(*slow)) << text;
  }
  // The corpus exercises both sides, and ordinary verdicts take the fast path.
  EXPECT_GT(fast_accepted, 500u);
  EXPECT_GT(texts.size() - schema_accepted, 1000u);
  EXPECT_LT(unsure * 5, schema_accepted) << unsure << " valid documents went the slow path";
  EXPECT_TRUE(verdict_from_text_fast(fast_corpus::full_sample_json().dump(2)).has_value());
  EXPECT_TRUE(verdict_from_text_fast(to_json(testing::full_sample()).dump()).has_value());
  std::printf("fast-path corpus: %zu documents, %zu schema-valid, %zu fast-accepted, %zu unsure\n",
              texts.size(), schema_accepted, fast_accepted, unsure);
}

}  // namespace
}  // namespace ncclsmoke::results
