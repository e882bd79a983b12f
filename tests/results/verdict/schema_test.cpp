#include "results/verdict/schema.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "results/verdict/verdict.h"
#include "tests/results/sample.h"

namespace ncclsmoke::results {
namespace {

using nlohmann::json;

json sample() { return to_json(testing::full_sample()); }

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// The single error expected for `doc`, or a test failure listing what came instead.
void expect_only(const json& doc, const std::string& expected) {
  auto errors = validate_verdict_json(doc);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_EQ(errors[0], expected);
}

TEST(VerdictSchema, EmbeddedTextIsTheSourceFile) {
  std::ifstream in(std::string(NCCLSMOKE_SOURCE_DIR) + "/results/verdict/verdict.schema.json");
  ASSERT_TRUE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(verdict_schema_text(), ss.str());
  json schema = json::parse(verdict_schema_text());
  EXPECT_EQ(schema["$schema"], "http://json-schema.org/draft-07/schema#");
  EXPECT_EQ(schema["additionalProperties"], false);
}

TEST(VerdictSchema, AcceptsFullDocument) {
  auto errors = validate_verdict_json(sample());
  EXPECT_TRUE(errors.empty()) << joined(errors);
}

TEST(VerdictSchema, MissingRequiredFields) {
  for (const char* key : {"schema_version", "verdict", "exit_code", "findings", "env", "world"}) {
    json j = sample();
    j.erase(key);
    auto errors = validate_verdict_json(j);
    ASSERT_FALSE(errors.empty()) << key;
    EXPECT_EQ(errors[0], std::string("/: missing required property '") + key + "'")
        << joined(errors);
  }
  json j = sample();
  j["findings"][0].erase("hint");
  expect_only(j, "/findings/0: missing required property 'hint'");
  j = sample();
  j["world"].erase("master_port");
  expect_only(j, "/world: missing required property 'master_port'");
  j = sample();
  j["transports"][1].erase("wrong");
  expect_only(j, "/transports/1: missing required property 'wrong'");
}

TEST(VerdictSchema, BadEnumsNameThePathTheValueAndTheChoices) {
  json j = sample();
  j["verdict"] = "ok";
  auto errors = validate_verdict_json(j);
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0], R"(/verdict: "ok" is not one of "pass", "degraded", "fail", "inconclusive")")
      << joined(errors);

  j = sample();
  j["findings"][1]["severity"] = "fatal";
  expect_only(j, R"(/findings/1/severity: "fatal" is not one of "error", "warning", "info")");

  j = sample();
  j["phases"][2]["status"] = "passed";
  expect_only(j,
              R"(/phases/2/status: "passed" is not one of "pass", "fail", "skipped", "degraded", )"
              R"("inconclusive", "not_run")");

  j = sample();
  j["scope"] = "world";
  expect_only(j, R"(/scope: "world" is not one of "global", "local")");

  j = sample();
  j["ranks"][0]["status"] = "ok";
  expect_only(j, R"(/ranks/0/status: "ok" is not one of "joined", "missing", "lost", "failed")");

  j = sample();
  j["findings"][0]["layer"] = "network";
  expect_only(j,
              R"(/findings/0/layer: "network" is not one of "config", "rendezvous", "mesh", )"
              R"("transport", "data", "run", "node")");
}

TEST(VerdictSchema, TypesPatternsAndExtras) {
  json j = sample();
  j["duration_s"] = "fast";
  expect_only(j, R"(/duration_s: expected number, got string "fast")");

  j = sample();
  j["env"]["NCCL_DEBUG"] = 3;
  expect_only(j, "/env/NCCL_DEBUG: expected string, got integer 3");

  j = sample();
  j["schema_version"] = "1.0";
  expect_only(j, R"(/schema_version: expected 1, got "1.0")");

  j = sample();
  j["started_at"] = "2024-05-01 10:15:00";
  auto errors = validate_verdict_json(j);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_EQ(errors[0].rfind(R"(/started_at: "2024-05-01 10:15:00" does not match the pattern)", 0),
            0u)
      << errors[0];

  j = sample();
  j["whole_environment"] = json::object();
  expect_only(j, "/: unknown property 'whole_environment' (not allowed here)");

  j = sample();
  j["findings"][0]["code"] = "rendezvous timeout";
  errors = validate_verdict_json(j);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_EQ(errors[0].rfind("/findings/0/code: ", 0), 0u) << errors[0];

  j = sample();
  j["transports"][0]["busbw_gbps"] = -1.0;
  expect_only(j, "/transports/0/busbw_gbps: -1.0 is below the minimum 0");

  j = sample();
  j["transports"][0]["wrong"] = 1.5;
  expect_only(j, "/transports/0/wrong: expected integer or null, got number 1.5");

  j = sample();
  j["world"]["master_port"] = 70000;
  expect_only(j, "/world/master_port: 70000 is above the maximum 65535");

  j = sample();
  j["versions"]["nccl"] = nullptr;
  expect_only(j, "/versions/nccl: expected string, got null");

  j = sample();
  j["phases"][0]["name"] = "";
  expect_only(j, R"(/phases/0/name: "" is shorter than 1 character(s))");
}

TEST(VerdictSchema, ExitCodeMustMatchVerdict) {
  json j = sample();
  j["exit_code"] = 0;  // verdict is "fail"
  expect_only(j, R"(/exit_code: exit code 0 does not match verdict "fail" (expected 1))");
  j["exit_code"] = 2;  // usage error never appears in a verdict
  EXPECT_FALSE(validate_verdict_json(j).empty());
  j["verdict"] = "degraded";
  j["exit_code"] = 3;
  EXPECT_TRUE(validate_verdict_json(j).empty()) << joined(validate_verdict_json(j));
}

TEST(VerdictSchema, ReportsEveryProblemAtOnce) {
  json j = sample();
  j.erase("run_id");
  j["findings"][0]["severity"] = "bad";
  j["phases"][0]["duration_s"] = -1;
  auto errors = validate_verdict_json(j);
  EXPECT_EQ(errors.size(), 3u) << joined(errors);
}

// The schema must mean the same to the consumers that read it with Python's jsonschema.
TEST(VerdictSchema, PythonJsonschemaAgrees) {
  if (std::system("/usr/bin/python3 -c 'import jsonschema' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-jsonschema not available";
  }
  char dir[] = "/tmp/ncclsmoke_schema_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string good = std::string(dir) + "/good.json";
  const std::string bad = std::string(dir) + "/bad.json";
  std::ofstream(good) << sample().dump();
  json b = sample();
  b["verdict"] = "pass";  // exit_code stays 1
  std::ofstream(bad) << b.dump();
  const std::string schema = std::string(NCCLSMOKE_SOURCE_DIR) + "/results/verdict/verdict.schema.json";
  auto check = [&](const std::string& doc) {
    std::string cmd = "/usr/bin/python3 -c 'import json,sys,jsonschema; "
                      "jsonschema.Draft7Validator.check_schema(json.load(open(sys.argv[1]))); "
                      "jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))'"
                      " " + schema + " " + doc + " >/dev/null 2>&1";
    return std::system(cmd.c_str());
  };
  EXPECT_EQ(check(good), 0);
  EXPECT_NE(check(bad), 0);
  std::remove(good.c_str());
  std::remove(bad.c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace ncclsmoke::results
