// harness/common/env.h, the one reader of the environment in harness/: a launcher variable keeps
// set-but-empty apart from unset and survives a broken environment; an ncclsmoke knob reads
// empty as unset.
#include "harness/common/env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

namespace ncclsmoke::harness {
namespace {

TEST(EnvLookup, KeepsEmptyApartFromUnset) {
  auto e = map_environment({{"RANK", ""}, {"WORLD_SIZE", "4"}});
  EXPECT_EQ(lookup(e, "RANK"), std::optional<std::string>(""));
  EXPECT_EQ(lookup(e, "WORLD_SIZE"), std::optional<std::string>("4"));
  EXPECT_EQ(lookup(e, "MASTER_ADDR"), std::nullopt);
}

TEST(EnvLookup, ANullOrThrowingEnvironmentReadsAsUnset) {
  EXPECT_EQ(lookup(Environment{}, "RANK"), std::nullopt);
  Environment throwing = [](const std::string&) -> std::optional<std::string> {
    throw std::runtime_error("broken");
  };
  EXPECT_EQ(lookup(throwing, "RANK"), std::nullopt);
  EXPECT_EQ(lookup(map_environment({{"RANK", "1"}}), nullptr), std::nullopt);
}

TEST(EnvKnob, EmptyReadsAsUnset) {
  ASSERT_EQ(setenv("NCCLSMOKE_ENV_TEST_SET", " v ", 1), 0);
  ASSERT_EQ(setenv("NCCLSMOKE_ENV_TEST_EMPTY", "", 1), 0);
  unsetenv("NCCLSMOKE_ENV_TEST_UNSET");
  EXPECT_EQ(env("NCCLSMOKE_ENV_TEST_SET"), std::optional<std::string>(" v "));  // not trimmed
  EXPECT_EQ(env("NCCLSMOKE_ENV_TEST_EMPTY"), std::nullopt);
  EXPECT_EQ(env("NCCLSMOKE_ENV_TEST_UNSET"), std::nullopt);
  // The launcher reader sees the same process variable as set-but-empty.
  EXPECT_EQ(lookup(process_environment(), "NCCLSMOKE_ENV_TEST_EMPTY"),
            std::optional<std::string>(""));
  unsetenv("NCCLSMOKE_ENV_TEST_SET");
  unsetenv("NCCLSMOKE_ENV_TEST_EMPTY");
}

}  // namespace
}  // namespace ncclsmoke::harness
