// world.store.authenticated (the job token, README "Threat model"): written, read back by both
// readers, accepted by the schema, and false for a verdict written before it existed.
#include <gtest/gtest.h>

#include "results/verdict/schema.h"
#include "results/verdict/verdict.h"
#include "tests/results/sample.h"

namespace ncclsmoke::results {
namespace {

Verdict with_store(bool authenticated) {
  Verdict v = testing::full_sample();
  v.world.store = {"10.0.0.7",          29500, StoreHostedBy::rank0,
                   StoreDialect::modern, ServerEra::ncclsmoke, "ncclsmoke/job/0/"};
  v.world.store.authenticated = authenticated;
  return v;
}

TEST(StoreAuthenticated, RoundTripsThroughBothReaders) {
  for (bool authenticated : {true, false}) {
    auto j = to_json(with_store(authenticated));
    EXPECT_EQ(j["world"]["store"]["authenticated"], authenticated);
    EXPECT_TRUE(validate_verdict_json(j).empty()) << validate_verdict_json(j).front();
    EXPECT_EQ(verdict_from_json(j).world.store.authenticated, authenticated);
    auto fast = verdict_from_text_fast(j.dump());
    ASSERT_TRUE(fast.has_value());
    EXPECT_EQ(fast->world.store.authenticated, authenticated);
    EXPECT_EQ(to_json(*fast), j);
  }
}

TEST(StoreAuthenticated, AbsentReadsAsNotAuthenticated) {
  auto j = to_json(with_store(true));
  j["world"]["store"].erase("authenticated");
  EXPECT_TRUE(validate_verdict_json(j).empty());
  EXPECT_FALSE(verdict_from_json(j).world.store.authenticated);
  auto fast = verdict_from_text_fast(j.dump());
  ASSERT_TRUE(fast.has_value());
  EXPECT_FALSE(fast->world.store.authenticated);
}

TEST(StoreAuthenticated, ANonBooleanIsRefused) {
  auto j = to_json(with_store(true));
  j["world"]["store"]["authenticated"] = "yes";
  EXPECT_FALSE(validate_verdict_json(j).empty());
  EXPECT_FALSE(verdict_from_text_fast(j.dump()).has_value());
}

}  // namespace
}  // namespace ncclsmoke::results
