// The verdict model's enums (results/verdict/enums.h): every value's spelling round-trips, the
// code list and the finding table agree, an unknown finding code (a newer ncclsmoke's) survives
// verdict JSON -> model -> JSON unchanged, and a bad spelling is still rejected with its path.
#include "results/verdict/enums.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "results/verdict/finding_codes.h"
#include "results/verdict/verdict.h"
#include "tests/results/sample.h"

namespace ncclsmoke::results {
namespace {

using nlohmann::json;

template <typename E, typename Parse>
void expect_round_trip(int count, Parse parse) {
  std::set<std::string> seen;
  for (int i = 0; i < count; ++i) {
    E e = static_cast<E>(i);
    std::string s = to_string(e);
    EXPECT_FALSE(s.empty()) << i;
    EXPECT_TRUE(seen.insert(s).second) << s;
    ASSERT_TRUE(parse(s).has_value()) << s;
    EXPECT_EQ(*parse(s), e) << s;
    json j = e;  // to_json: the spelling, never the integer
    EXPECT_EQ(j, json(s));
    EXPECT_EQ(j.get<E>(), e);
    std::ostringstream os;
    os << e;
    EXPECT_EQ(os.str(), s);
  }
  EXPECT_EQ(parse("no-such-value"), std::nullopt);
  EXPECT_EQ(parse(""), std::nullopt);
}

TEST(Enums, EveryValueRoundTrips) {
  expect_round_trip<Severity>(3, parse_severity);
  expect_round_trip<Layer>(6, parse_layer);
  expect_round_trip<PhaseStatus>(6, parse_phase_status);
  expect_round_trip<Outcome>(4, parse_outcome);
  expect_round_trip<RankStatus>(4, parse_rank_status);
  expect_round_trip<Code>(static_cast<int>(Code::unknown), parse_code);
  // The schema's spellings, spelled out once.
  EXPECT_EQ(to_string(PhaseStatus::not_run), "not_run");
  EXPECT_EQ(to_string(Outcome::inconclusive), "inconclusive");
  EXPECT_EQ(to_string(Code::PEER_LOST), "PEER_LOST");
  // Case matters, as in the schema.
  EXPECT_EQ(parse_severity("Error"), std::nullopt);
  EXPECT_EQ(parse_code("peer_lost"), std::nullopt);
  EXPECT_EQ(parse_code(""), std::nullopt);  // the unknown slot's empty spelling is not a code
  EXPECT_THROW(json("critical").get<Severity>(), std::invalid_argument);
  EXPECT_THROW(json(2).get<Outcome>(), std::invalid_argument);
}

TEST(Enums, CodeListMatchesTheFindingTable) {
  const auto& table = finding_codes();
  ASSERT_EQ(table.size(), static_cast<std::size_t>(Code::unknown));
  for (std::size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(static_cast<std::size_t>(table[i].code), i) << table[i].code;
    EXPECT_EQ(find_code(table[i].code), &table[i]);
    EXPECT_EQ(find_code(to_string(table[i].code)), &table[i]);
  }
  EXPECT_EQ(find_code(Code::unknown), nullptr);
  EXPECT_EQ(find_code(AnyCode::from_text("FROM_THE_FUTURE")), nullptr);
}

TEST(Enums, AnyCodeKnownAndUnknown) {
  AnyCode known = Code::MESH_BLOCKED;
  EXPECT_TRUE(known.known());
  EXPECT_TRUE(known == Code::MESH_BLOCKED);
  EXPECT_FALSE(known == Code::PEER_LOST);
  EXPECT_EQ(known.str(), "MESH_BLOCKED");
  EXPECT_EQ(AnyCode::parse("MESH_BLOCKED"), known);  // the text of a known code is the enum

  auto future = AnyCode::parse("LINK_FLAPPING_V2");
  ASSERT_TRUE(future.has_value());
  EXPECT_FALSE(future->known());
  EXPECT_EQ(future->code(), Code::unknown);
  EXPECT_FALSE(*future == Code::unknown);  // an unknown code equals no Code
  EXPECT_EQ(future->str(), "LINK_FLAPPING_V2");
  EXPECT_EQ(to_string(*future), "LINK_FLAPPING_V2");
  EXPECT_NE(*future, AnyCode::from_text("LINK_FLAPPING_V3"));
  EXPECT_LT(AnyCode(Code::DATA_CORRUPTION), *future);  // ordered by text

  EXPECT_EQ(AnyCode::parse("lower_case"), std::nullopt);  // ^[A-Z][A-Z0-9_]*$
  EXPECT_EQ(AnyCode::parse("9LIVES"), std::nullopt);
  EXPECT_EQ(AnyCode::parse(""), std::nullopt);
  EXPECT_THROW(json("bad code").get<AnyCode>(), std::invalid_argument);
}

TEST(Enums, UnknownFindingCodeSurvivesVerdictJsonRoundTrip) {
  json doc = to_json(testing::full_sample());
  ASSERT_FALSE(doc["findings"].empty());
  doc["findings"][0]["code"] = "FROM_A_NEWER_NCCLSMOKE";
  const std::string text = doc.dump();

  Verdict v = verdict_from_json(doc);
  ASSERT_FALSE(v.findings.empty());
  EXPECT_FALSE(v.findings[0].code.known());
  EXPECT_EQ(v.findings[0].code.str(), "FROM_A_NEWER_NCCLSMOKE");
  EXPECT_EQ(to_json(v), doc);  // model -> JSON unchanged

  // The import's fast path reads the same model.
  auto fast = verdict_from_text_fast(text);
  ASSERT_TRUE(fast.has_value());
  EXPECT_EQ(to_json(*fast), doc);
}

TEST(Enums, BadSeverityInAVerdictIsRejectedWithItsPath) {
  json doc = to_json(testing::full_sample());
  doc["findings"][0]["severity"] = "critical";
  try {
    verdict_from_json(doc);
    FAIL() << "a verdict with severity \"critical\" was accepted";
  } catch (const VerdictFormatError& e) {
    bool named = false;
    for (const auto& p : e.problems()) named = named || p.find("findings/0/severity") != std::string::npos;
    EXPECT_TRUE(named) << e.what();
  }
  EXPECT_FALSE(verdict_from_text_fast(doc.dump()).has_value());

  json bad_status = to_json(testing::full_sample());
  bad_status["phases"][0]["status"] = "ok";
  EXPECT_THROW(verdict_from_json(bad_status), VerdictFormatError);
  EXPECT_FALSE(verdict_from_text_fast(bad_status.dump()).has_value());
}

}  // namespace
}  // namespace ncclsmoke::results
