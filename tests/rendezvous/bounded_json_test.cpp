// The bounded JSON parse (rendezvous/bounded_json.h) and the store-post readers built on it:
// deep, wide, long and truncated documents end in a clean error, never a crash, and everything
// within the limits parses exactly as nlohmann would.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "rendezvous/bounded_json.h"
#include "rendezvous/join.h"
#include "rendezvous/store_owner.h"

namespace ncclsmoke::rendezvous {
namespace {

constexpr std::size_t kBig = std::size_t{64} << 20;

std::string deep_arrays(std::size_t n) { return std::string(n, '[') + std::string(n, ']'); }

std::string deep_objects(std::size_t n) {
  std::string s;
  s.reserve(n * 6 + 2);
  for (std::size_t i = 0; i < n; ++i) s += "{\"a\":";
  s += "1";
  s.append(n, '}');
  return s;
}

TEST(BoundedJson, DeepArraysAreRefusedNamingTheDepthAndTheByte) {
  auto r = parse_bounded_json(deep_arrays(100'000), kBig);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.value.is_discarded());
  // The 65th '[' is byte 64.
  EXPECT_EQ(r.error, "nested deeper than 64 levels at byte 64");
}

TEST(BoundedJson, DeepObjectsAreRefused) {
  auto r = parse_bounded_json(deep_objects(100'000), kBig);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("nested deeper than 64 levels at byte "), std::string::npos) << r.error;
}

TEST(BoundedJson, TheLimitIsExactly64Levels) {
  auto at = parse_bounded_json(deep_arrays(kMaxJsonDepth), kBig);
  EXPECT_TRUE(at.ok()) << at.error;
  EXPECT_FALSE(json_deeper_than(at.value));
  EXPECT_FALSE(parse_bounded_json(deep_arrays(kMaxJsonDepth + 1), kBig).ok());
  EXPECT_TRUE(parse_bounded_json(deep_arrays(3), kBig, 3).ok());
  EXPECT_FALSE(parse_bounded_json(deep_arrays(4), kBig, 3).ok());
}

TEST(BoundedJson, BracketsInsideStringsDoNotCount) {
  std::string s = "[\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"]";
  auto r = parse_bounded_json(s, kBig);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.value[0].get<std::string>().size(), 2001u);
}

TEST(BoundedJson, TooBigIsRefusedNamingBothSizes) {
  std::string s = "\"" + std::string(3 << 20, 'x') + "\"";
  auto r = parse_bounded_json(s, std::size_t{2} << 20);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error, "3.0 MiB (3145730 bytes), more than the 2.0 MiB limit");
  EXPECT_TRUE(parse_bounded_json(s, std::size_t{4} << 20).ok());
}

TEST(BoundedJson, WideAndLongDocumentsWithinTheLimitsParse) {
  std::string wide = "[";
  for (int i = 0; i < 1'000'000; ++i) wide += i ? ",0" : "0";
  wide += "]";
  auto w = parse_bounded_json(wide, kBig);
  ASSERT_TRUE(w.ok()) << w.error;
  EXPECT_EQ(w.value.size(), 1'000'000u);
  auto l = parse_bounded_json("{\"s\":\"" + std::string(8 << 20, 'y') + "\"}", kBig);
  ASSERT_TRUE(l.ok()) << l.error;
  EXPECT_EQ(l.value["s"].get<std::string>().size(), std::size_t{8} << 20);
}

TEST(BoundedJson, TruncatedTextIsNotJsonAtAByte) {
  const std::string full = R"({"a":[1,2,{"b":"c\"d"}],"e":true})";
  for (std::size_t n = 0; n < full.size(); ++n) {
    auto r = parse_bounded_json(full.substr(0, n), kBig);
    EXPECT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.error.rfind("not JSON at byte ", 0), 0u) << r.error;
  }
  EXPECT_TRUE(parse_bounded_json(full, kBig).ok());
}

// Mutated documents (deterministic seeds): within the limits, the bounded parse accepts exactly
// what nlohmann accepts; past them, it refuses with a limit error. Never a crash.
TEST(BoundedJson, MutatedDocumentsAgreeWithNlohmannWithinTheLimits) {
  const std::string base =
      R"({"rank":1,"host":"a","ports":[1,2,3],"nested":{"x":[{"y":"[{\"}"},null,1.5e3]}})";
  const char pieces[] = {'[', ']', '{', '}', '"', '\\', ',', ':', '1', ' '};
  int refused_deep = 0;
  for (unsigned seed = 1; seed <= 2000; ++seed) {
    std::mt19937 rng(seed);
    std::string s = base;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % (s.size() + 1);
      switch (rng() % 4) {
        case 0: s.insert(at, 1, pieces[rng() % sizeof pieces]); break;
        case 1: if (at < s.size()) s.erase(at, 1); break;
        case 2: s.insert(at, std::string(rng() % 200, '[')); break;  // often past the depth
        default: s.resize(at); break;                               // truncated
      }
    }
    auto r = parse_bounded_json(s, kBig);
    if (auto limit = json_limit_problem(s, kBig)) {
      EXPECT_FALSE(r.ok()) << seed;
      EXPECT_EQ(r.error, *limit) << seed;
      ++refused_deep;
    } else {
      EXPECT_EQ(r.ok(), nlohmann::json::accept(s)) << "seed " << seed << ": " << s;
    }
  }
  EXPECT_GT(refused_deep, 0);  // the corpus reaches the depth limit
}

TEST(BoundedJson, DeeperThanOnABuiltTreeIsIterative) {
  nlohmann::json j = 1;
  for (int i = 0; i < 5000; ++i) j = nlohmann::json::array({std::move(j)});
  EXPECT_TRUE(json_deeper_than(j));
  EXPECT_TRUE(json_deeper_than(j, 4999));
  EXPECT_FALSE(json_deeper_than(j, 5000));
  EXPECT_FALSE(json_deeper_than(nlohmann::json{{"a", {1, 2, {{"b", 3}}}}}, 3));
  EXPECT_TRUE(json_deeper_than(nlohmann::json{{"a", {1, 2, {{"b", {4}}}}}}, 3));
}

TEST(BoundedJson, SizeText) {
  EXPECT_EQ(json_size_text(812), "812 bytes");
  EXPECT_EQ(json_size_text(4096), "4.0 KiB");
  EXPECT_EQ(json_size_text(std::size_t{12} << 20), "12.0 MiB");
}

// The store posts' readers: a stranger's deep, huge or truncated post is no identity, no owner.
TEST(BoundedJsonReaders, StorePostsOutsideTheLimitsAreRefused) {
  const std::string owner = StoreOwner{"job-1", 2, "host-a", 42, "ncclsmoke/job-1"}.to_json();
  ASSERT_TRUE(StoreOwner::from_json(owner));
  const std::string deep_owner = "{\"job_id\":" + deep_arrays(100'000) + "}";
  const std::string too_big = "{\"job_id\":\"" + std::string(kMaxSmallJsonBytes, 'j') + "\"}";
  for (const auto& bad : {deep_arrays(100'000), deep_objects(100'000), deep_owner, too_big,
                          owner.substr(0, owner.size() / 2)}) {
    EXPECT_FALSE(StoreOwner::from_json(bad));
    EXPECT_FALSE(Identity::from_json(bad));
  }
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
