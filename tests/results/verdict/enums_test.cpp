// The verdict model's enums (results/verdict/enums.h): every value's spelling round-trips, the
// schema's enum lists equal the enums, the code list and the finding table agree, an unknown
// finding code or open-list value (a newer ncclsmoke's) survives verdict JSON -> model -> JSON
// unchanged, and a bad spelling is still rejected with its path.
#include "results/verdict/enums.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "rendezvous/dialect_probe.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/schema.h"
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
  expect_round_trip<Scope>(2, parse_scope);
  expect_round_trip<StoreDialect>(2, parse_store_dialect);
  // The open lists' known values (their `unknown` slot is spelled "" and never parsed).
  expect_round_trip<WorldSource>(static_cast<int>(WorldSource::unknown), parse_world_source);
  expect_round_trip<StoreHostedBy>(static_cast<int>(StoreHostedBy::unknown),
                                   parse_store_hosted_by);
  expect_round_trip<ServerEra>(static_cast<int>(ServerEra::unknown), parse_server_era);
  // The schema's spellings, spelled out once.
  EXPECT_EQ(to_string(PhaseStatus::not_run), "not_run");
  EXPECT_EQ(to_string(Outcome::inconclusive), "inconclusive");
  EXPECT_EQ(to_string(Code::PEER_LOST), "PEER_LOST");
  EXPECT_EQ(to_string(Scope::global), "global");
  EXPECT_EQ(to_string(StoreDialect::legacy), "legacy");
  EXPECT_EQ(to_string(WorldSource::flags), "flags");
  EXPECT_EQ(to_string(WorldSource::torchrun), "torchrun");
  EXPECT_EQ(to_string(WorldSource::openmpi), "openmpi");
  EXPECT_EQ(to_string(WorldSource::slurm), "slurm");
  EXPECT_EQ(to_string(WorldSource::k8s_indexed_job), "k8s-indexed-job");
  EXPECT_EQ(to_string(StoreHostedBy::rank0), "rank 0");
  EXPECT_EQ(to_string(StoreHostedBy::torchelastic_agent), "torchelastic agent");
  EXPECT_EQ(to_string(StoreHostedBy::external), "external (--store)");
  EXPECT_EQ(to_string(ServerEra::torch_le_2_0), "torch<=2.0");
  EXPECT_EQ(to_string(ServerEra::torch_2_1_to_2_4), "torch2.1-2.4");
  EXPECT_EQ(to_string(ServerEra::torch_ge_2_5), "torch>=2.5");
  EXPECT_EQ(to_string(ServerEra::ncclsmoke), "ncclsmoke");
  EXPECT_EQ(to_string(WorldSource::unknown), "");
  EXPECT_EQ(fmt::format("{}/{}", Scope::local, ServerEra::torch_ge_2_5), "local/torch>=2.5");
  EXPECT_EQ(parse_world_source(""), std::nullopt);  // "" is the unknown slot, not a source
  EXPECT_EQ(parse_scope("Global"), std::nullopt);
  EXPECT_THROW(json("world").get<Scope>(), std::invalid_argument);
  EXPECT_THROW(json("pbs").get<WorldSource>(), std::invalid_argument);  // the bare enum: known only
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

// An open list's value (enums.h Open<>): known values compare as their enum; any other text is
// kept, so a verdict from a newer launcher or torch era reads and writes back unchanged.
TEST(Enums, OpenValuesKnownAndUnknown) {
  AnyWorldSource slurm = WorldSource::slurm;
  EXPECT_TRUE(slurm.known());
  EXPECT_TRUE(slurm == WorldSource::slurm);
  EXPECT_FALSE(slurm == WorldSource::flags);
  EXPECT_EQ(AnyWorldSource::from_text("slurm"), slurm);  // the text of a known value is the enum
  EXPECT_EQ(AnyWorldSource::from_text("slurm").value(), WorldSource::slurm);

  auto future = AnyWorldSource::from_text("flux-framework");
  EXPECT_FALSE(future.known());
  EXPECT_EQ(future.value(), WorldSource::unknown);
  EXPECT_FALSE(future == WorldSource::unknown);  // an unknown value equals no enumerator
  EXPECT_EQ(future.str(), "flux-framework");
  EXPECT_EQ(to_string(future), "flux-framework");
  EXPECT_EQ(fmt::format("{}", future), "flux-framework");
  std::ostringstream os;
  os << future << "|" << slurm;
  EXPECT_EQ(os.str(), "flux-framework|slurm");
  EXPECT_NE(future, AnyWorldSource::from_text("pbs"));

  // The default is unknown with empty text: a world never discovered writes "".
  AnyWorldSource none;
  EXPECT_FALSE(none.known());
  EXPECT_EQ(none.str(), "");
  EXPECT_EQ(none, AnyWorldSource::from_text(""));

  json j = AnyServerEra::from_text("torch>=3.0");
  EXPECT_EQ(j, json("torch>=3.0"));
  EXPECT_EQ(j.get<AnyServerEra>().str(), "torch>=3.0");
  EXPECT_EQ(json("torch2.1-2.4").get<AnyServerEra>(), ServerEra::torch_2_1_to_2_4);
  EXPECT_EQ(json("a sidecar").get<AnyStoreHostedBy>().str(), "a sidecar");
  EXPECT_THROW(json(0).get<AnyStoreHostedBy>(), std::invalid_argument);  // still a string
}

// Values this build does not know in the free-text fields, and "" for a world never discovered,
// survive verdict JSON -> model -> JSON unchanged through both readers.
TEST(Enums, UnknownOpenValuesSurviveVerdictJsonRoundTrip) {
  Verdict v = testing::full_sample();
  v.world.store = {"10.0.0.7", 29500, StoreHostedBy::rank0, StoreDialect::modern,
                   ServerEra::torch_ge_2_5, "ncclsmoke/j/0/"};
  json doc = to_json(v);
  EXPECT_EQ(doc["world"]["source"], "torchrun");
  EXPECT_EQ(doc["world"]["store"]["hosted_by"], "rank 0");
  EXPECT_EQ(doc["world"]["store"]["era"], "torch>=2.5");
  for (const char* source : {"flux-framework", ""}) {
    doc["world"]["source"] = source;
    doc["world"]["store"]["hosted_by"] = "a sidecar";
    doc["world"]["store"]["era"] = "torch>=3.0";
    Verdict back = verdict_from_json(doc);
    EXPECT_FALSE(back.world.source.known()) << source;
    EXPECT_EQ(back.world.source.str(), source);
    EXPECT_EQ(back.world.store.hosted_by.str(), "a sidecar");
    EXPECT_FALSE(back.world.store.era.known());
    EXPECT_EQ(to_json(back), doc) << source;
    auto fast = verdict_from_text_fast(doc.dump());
    ASSERT_TRUE(fast.has_value()) << source;
    EXPECT_EQ(to_json(*fast), doc) << source;
  }
  // scope and dialect are enum lists in the schema: another spelling is refused by both readers.
  doc["world"]["store"]["dialect"] = "future";
  EXPECT_THROW(verdict_from_json(doc), VerdictFormatError);
  EXPECT_FALSE(verdict_from_text_fast(doc.dump()).has_value());
  doc["world"]["store"]["dialect"] = "legacy";
  doc["scope"] = "world";
  EXPECT_THROW(verdict_from_json(doc), VerdictFormatError);
  EXPECT_FALSE(verdict_from_text_fast(doc.dump()).has_value());
}

// Every enum list of the schema (results/verdict/verdict.schema.json, as compiled in) is exactly
// the C++ enum's spellings in enumerator order; the open lists are free text in the schema (so a
// newer ncclsmoke's value is accepted) and have no enum there.
TEST(Enums, SchemaEnumListsEqualTheEnums) {
  const json schema = json::parse(verdict_schema_text());
  auto spellings = [](const auto& all) {
    json out = json::array();
    for (auto e : all) out.push_back(to_string(e));
    return out;
  };
  auto first_n = [](int n, auto tag) {
    std::vector<decltype(tag)> out;
    for (int i = 0; i < n; ++i) out.push_back(static_cast<decltype(tag)>(i));
    return out;
  };
  const json& defs = schema.at("definitions");
  EXPECT_EQ(defs.at("verdict_value").at("enum"), spellings(kAllOutcomes));
  EXPECT_EQ(defs.at("rank").at("properties").at("status").at("enum"),
            spellings(kAllRankStatuses));
  EXPECT_EQ(defs.at("phase").at("properties").at("status").at("enum"),
            spellings(kAllPhaseStatuses));
  EXPECT_EQ(defs.at("finding").at("properties").at("severity").at("enum"),
            spellings(first_n(3, Severity{})));
  EXPECT_EQ(defs.at("finding").at("properties").at("layer").at("enum"),
            spellings(first_n(7, Layer{})));
  EXPECT_EQ(schema.at("properties").at("scope").at("enum"), spellings(first_n(2, Scope{})));
  const json& world = schema.at("properties").at("world").at("properties");
  const json& store = world.at("store").at("properties");
  EXPECT_EQ(store.at("dialect").at("enum"), spellings(first_n(2, StoreDialect{})));
  // The enum lists above cover every value: one more is not a value.
  EXPECT_EQ(name(static_cast<Severity>(3)), "?");
  EXPECT_EQ(name(static_cast<Scope>(2)), "?");
  EXPECT_EQ(name(static_cast<StoreDialect>(2)), "?");
  for (const json* open : {&world.at("source"), &store.at("hosted_by"), &store.at("era")}) {
    EXPECT_EQ(open->at("type"), "string") << *open;
    EXPECT_FALSE(open->contains("enum")) << *open;
  }
}

// The rendezvous layer's era names (dialect_probe.h, what the harness records) are the verdict's.
TEST(Enums, RendezvousEraSpellingsAreKnownServerEras) {
  using rendezvous::StoreEra;
  for (StoreEra e : {StoreEra::torch_legacy, StoreEra::validate_no_ping, StoreEra::validate_ping})
    EXPECT_TRUE(parse_server_era(rendezvous::to_string(e)).has_value()) << rendezvous::to_string(e);
  EXPECT_EQ(to_string(ServerEra::torch_le_2_0), rendezvous::to_string(StoreEra::torch_legacy));
  EXPECT_EQ(to_string(ServerEra::torch_2_1_to_2_4),
            rendezvous::to_string(StoreEra::validate_no_ping));
  EXPECT_EQ(to_string(ServerEra::torch_ge_2_5), rendezvous::to_string(StoreEra::validate_ping));
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
