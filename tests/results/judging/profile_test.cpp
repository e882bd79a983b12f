// Profiles: the shipped example parses, YAML and JSON both load, and bad input names the field.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "results/judging/profile.h"

using namespace ncclsmoke::results;

namespace {

std::string error_of(const std::string& text) {
  try {
    load_profiles(text);
  } catch (const ProfileError& e) {
    return e.what();
  }
  return "(no error)";
}

const char* kMinimal = R"(
profiles:
  - name: x
    transports:
      - transport: socket
        baselines:
          - {busbw_gbps: 1.5, gate_bytes: 1024, source: "measured"}
)";

}  // namespace

TEST(Profile, ExampleFileParses) {
  auto ps = load_profiles_file(NCCLSMOKE_PROFILES_EXAMPLE);
  ASSERT_EQ(ps.size(), 4u);
  const Profile* p5 = find_profile(ps, "p5.48xlarge-efa");
  ASSERT_NE(p5, nullptr);
  const TransportExpectation* nccl = find_transport(*p5, "nccl");
  ASSERT_NE(nccl, nullptr);
  EXPECT_EQ(nccl->identity["network"], "Libfabric");
  EXPECT_EQ(nccl->identity["provider"], "efa");
  EXPECT_EQ(nccl->identity["gdr"], true);
  const BaselineBand* b = find_band(*nccl, 16);
  ASSERT_NE(b, nullptr);
  EXPECT_DOUBLE_EQ(b->busbw_gbps, 487);
  EXPECT_EQ(b->gate_bytes, 16LL << 30);
  EXPECT_NE(b->source.find("public figure"), std::string::npos);
  EXPECT_EQ(find_band(*nccl, 8), nullptr);  // no "any" band: other sizes have no baseline

  // The sample environment policy, as the gpu-efa overlay's pods set it.
  EXPECT_EQ(p5->environment.at("FI_PROVIDER"), "efa");
  EXPECT_EQ(p5->environment.at("FI_EFA_USE_DEVICE_RDMA"), "1");
  EXPECT_EQ(p5->environment.at("NCCL_SOCKET_IFNAME"), std::nullopt);

  const Profile* p4 = find_profile(ps, "p4de-efa");
  ASSERT_NE(p4, nullptr);
  EXPECT_DOUBLE_EQ(find_band(*find_transport(*p4, "nccl"), 16)->busbw_gbps, 78);
  EXPECT_EQ(find_band(*find_transport(*p4, "nccl"), 16)->gate_bytes, 2LL << 30);

  ASSERT_NE(find_profile(ps, "g5-socket"), nullptr);
  const Profile* ci = find_profile(ps, "ci-loopback");
  ASSERT_NE(ci, nullptr);
  const BaselineBand* sb = find_band(*find_transport(*ci, "socket"), 2);
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sb->gate_bytes, 64LL << 20);
  EXPECT_NE(sb->source.find("rough"), std::string::npos);
  EXPECT_EQ(find_transport(*ci, "fabric")->identity["provider"], "tcp");
  EXPECT_FALSE(find_transport(*ci, "fabric")->required);
  EXPECT_TRUE(find_transport(*ci, "socket")->required);
  EXPECT_EQ(find_profile(ps, "nope"), nullptr);
}

TEST(Profile, DefaultsAndAnyWorldSize) {
  auto ps = load_profiles(kMinimal);
  ASSERT_EQ(ps.size(), 1u);
  const auto& t = ps[0].transports[0];
  EXPECT_TRUE(t.identity.is_object() && t.identity.empty());
  const BaselineBand* b = find_band(t, 7);  // key 0 = any
  ASSERT_NE(b, nullptr);
  EXPECT_DOUBLE_EQ(b->degraded_ratio, 0.85);
  EXPECT_DOUBLE_EQ(b->fail_ratio, 0.5);
}

TEST(Profile, ExactWorldSizeWinsOverAny) {
  auto ps = load_profiles(R"(
profiles:
  - name: x
    transports:
      - transport: socket
        baselines:
          - {busbw_gbps: 1, gate_bytes: 10, source: a}
          - {world_size: 4, busbw_gbps: 2, gate_bytes: 10, source: b}
)");
  EXPECT_DOUBLE_EQ(find_band(ps[0].transports[0], 4)->busbw_gbps, 2);
  EXPECT_DOUBLE_EQ(find_band(ps[0].transports[0], 2)->busbw_gbps, 1);
}

TEST(Profile, JsonTextLoads) {
  auto ps = load_profiles(R"({"profiles":[{"name":"j","transports":[{"transport":"fabric",
      "identity":{"provider":"efa"},"baselines":[{"world_size":2,"busbw_gbps":10,
      "gate_bytes":1048576,"source":"x"}]}]}]})");
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].transports[0].identity["provider"], "efa");
  EXPECT_EQ(find_band(ps[0].transports[0], 2)->gate_bytes, 1048576);
}

TEST(Profile, QuotedScalarStaysString) {
  auto ps = load_profiles(R"(
profiles:
  - name: "123"
    transports:
      - transport: nccl
        identity: {network: "true"}
)");
  EXPECT_EQ(ps[0].name, "123");
  EXPECT_TRUE(ps[0].transports[0].identity["network"].is_string());
}

TEST(Profile, EnvironmentPolicyValuesAndItsErrors) {
  auto with = [](const std::string& env) {
    return std::string(kMinimal) + "    environment: " + env + "\n";
  };
  auto ps = load_profiles(with("{NCCL_DEBUG: WARN, FI_EFA_USE_DEVICE_RDMA: \"1\", "
                               "NCCL_SOCKET_IFNAME: ~, FI_EFA_KEY: ~}"));
  ASSERT_EQ(ps.size(), 1u);
  const auto& env = ps[0].environment;
  ASSERT_EQ(env.size(), 4u);
  EXPECT_EQ(env.at("NCCL_DEBUG"), "WARN");
  EXPECT_EQ(env.at("FI_EFA_USE_DEVICE_RDMA"), "1");
  EXPECT_EQ(env.at("NCCL_SOCKET_IFNAME"), std::nullopt);
  EXPECT_EQ(env.at("FI_EFA_KEY"), std::nullopt) << "a secret may be required set";
  EXPECT_TRUE(load_profiles(kMinimal)[0].environment.empty());
  // An unquoted number, a variable no verdict keeps, a secret's value: each names the field.
  EXPECT_NE(error_of(with("{FI_EFA_USE_DEVICE_RDMA: 1}"))
                .find("profiles[0] (x).environment.FI_EFA_USE_DEVICE_RDMA: expected a quoted string"),
            std::string::npos)
      << error_of(with("{FI_EFA_USE_DEVICE_RDMA: 1}"));
  EXPECT_NE(error_of(with("{LD_LIBRARY_PATH: /x}")).find("environment.LD_LIBRARY_PATH: not a variable"),
            std::string::npos);
  EXPECT_NE(error_of(with("{FI_EFA_KEY: abc}")).find("a secret's value is never kept"),
            std::string::npos);
  EXPECT_NE(error_of(with("[NCCL_DEBUG]")).find("environment: expected a mapping"),
            std::string::npos);
}

TEST(Profile, BadInputNamesTheField) {
  EXPECT_NE(error_of("profiles: [").find("syntax error at line"), std::string::npos);
  EXPECT_NE(error_of("foo: 1").find("(top).foo: unknown key"), std::string::npos);
  EXPECT_NE(error_of("profiles: 3").find("profiles: expected a list"), std::string::npos);
  EXPECT_NE(error_of("profiles: [{transports: []}]").find("profiles[0].name: missing"),
            std::string::npos);
  EXPECT_NE(error_of("profiles: [{name: a}]").find("profiles[0] (a).transports"),
            std::string::npos);
  std::string bad_num = R"(
profiles:
  - name: a
    transports:
      - transport: socket
        baselines:
          - {busbw_gbps: fast, gate_bytes: 10, source: s}
)";
  EXPECT_NE(error_of(bad_num).find("profiles[0] (a).transports[0].baselines[0].busbw_gbps: "
                                   "expected a number"),
            std::string::npos)
      << error_of(bad_num);
  std::string typo = R"(
profiles:
  - name: a
    transports:
      - transport: socket
        baselines:
          - {busbw_gbps: 1, gate_bytes: 10, source: s, degraded_ration: 0.9}
)";
  EXPECT_NE(error_of(typo).find("baselines[0].degraded_ration: unknown key"), std::string::npos)
      << error_of(typo);
  std::string no_gate = R"(
profiles:
  - name: a
    transports:
      - transport: socket
        baselines: [{busbw_gbps: 1, source: s}]
)";
  EXPECT_NE(error_of(no_gate).find("baselines[0].gate_bytes: missing"), std::string::npos);
  std::string ratios = R"(
profiles:
  - name: a
    transports:
      - transport: socket
        baselines: [{busbw_gbps: 1, gate_bytes: 1, source: s, degraded_ratio: 0.5, fail_ratio: 0.6}]
)";
  EXPECT_NE(error_of(ratios).find("fail_ratio: must be in"), std::string::npos);
  std::string dup = R"(
profiles:
  - {name: a, transports: [{transport: socket}]}
  - {name: a, transports: [{transport: socket}]}
)";
  EXPECT_NE(error_of(dup).find("profiles[1].name: duplicate profile 'a'"), std::string::npos);
  std::string dup_ws = R"(
profiles:
  - name: a
    transports:
      - transport: socket
        baselines:
          - {busbw_gbps: 1, gate_bytes: 1, source: s}
          - {world_size: 0, busbw_gbps: 2, gate_bytes: 1, source: s}
)";
  EXPECT_NE(error_of(dup_ws).find("baselines[1].world_size: duplicate world size 0"),
            std::string::npos);
  EXPECT_NE(error_of("profiles: [{name: a, transports: [{transport: socket, identity: {p: [1]}}]}]")
                .find("identity.p: expected a string"),
            std::string::npos);
  EXPECT_NE(error_of("profiles: [{name: a, transports: [{transport: socket, required: maybe}]}]")
                .find("transports[0].required: expected true or false"),
            std::string::npos);
  try {
    load_profiles_file("/nonexistent/profiles.yaml");
    FAIL();
  } catch (const ProfileError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/profiles.yaml"), std::string::npos);
  }
}

namespace {

// Nine levels of ten aliases ("billion laughs"): 10^9 scalars once expanded.
std::string alias_bomb(int levels = 9, int width = 10) {
  std::string t = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < levels; ++i) {
    t += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < width; ++k) t += (k ? ", *l" : "*l") + std::to_string(i - 1);
    t += "]\n";
  }
  return t + "profiles: [{name: x, transports: [{transport: socket, identity: {bomb: *l" +
         std::to_string(levels - 1) + "}}]}]\n";
}

}  // namespace

TEST(Profile, AliasBombIsRefusedNamingTheLimit) {
  auto t0 = std::chrono::steady_clock::now();
  std::string err = error_of(alias_bomb());
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("alias bomb (9 levels x 10) refused in %.1f ms\n", ms);
  EXPECT_NE(err.find("YAML nodes once aliases are expanded"), std::string::npos) << err;
  EXPECT_NE(err.find(std::to_string(kMaxYamlNodes)), std::string::npos) << err;
}

TEST(Profile, AliasBombFileIsRefusedNamingTheFile) {
  std::string path = ::testing::TempDir() + "/bomb_profiles.yaml";
  {
    std::ofstream out(path);
    out << alias_bomb();
  }
  try {
    load_profiles_file(path);
    FAIL() << "the bomb loaded";
  } catch (const ProfileError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("alias bomb"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(Profile, SmallAliasesStillLoad) {
  // An anchor reused a few times is ordinary YAML and stays accepted.
  auto ps = load_profiles(R"(
profiles:
  - name: a
    transports:
      - transport: socket
        baselines: [&band {busbw_gbps: 2, gate_bytes: 1024, source: measured}]
      - transport: fabric
        baselines: [*band]
)");
  ASSERT_EQ(ps.size(), 1u);
  ASSERT_EQ(ps[0].transports.size(), 2u);
  EXPECT_EQ(ps[0].transports[1].by_world_size.at(0).busbw_gbps, 2);
}

TEST(Profile, DeepNestingAndNonScalarKeysAreProfileErrors) {
  std::string deep = "profiles: ";
  for (int i = 0; i < 80; ++i) deep += "[";
  for (int i = 0; i < 80; ++i) deep += "]";
  EXPECT_NE(error_of(deep).find("nested deeper than"), std::string::npos) << error_of(deep);
  EXPECT_NE(error_of("? [a, b]\n: 1\n").find("is not a plain scalar"), std::string::npos)
      << error_of("? [a, b]\n: 1\n");
}
