// CONFIG_SKEW (results/judging/config_skew_rule.h): the ranks whose stack or settings differ
// from the majority's, from each rank's own verdict.
#include "results/judging/config_skew_rule.h"

#include <gtest/gtest.h>

#include "results/judging/classify.h"
#include "results/judging/judge_run.h"
#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {
namespace {

using nlohmann::json;

// Rank r on host "h<r>" with the same settings as every other rank.
RankConfig rank(int r) {
  RankConfig c;
  c.rank = r;
  c.host = "h" + std::to_string(r);
  c.variables = {{"NCCL_SOCKET_IFNAME", "eth0"}, {"FI_PROVIDER", "efa"}, {"NCCL_DEBUG", "WARN"}};
  c.versions = {{"ncclsmoke version", "0.9.0"}, {"kernel", "6.1.0-18-amd64"}};
  return c;
}

std::vector<RankConfig> world(int n) {
  std::vector<RankConfig> out;
  for (int r = 0; r < n; ++r) out.push_back(rank(r));
  return out;
}

TEST(ConfigSkew, NothingWhenEveryRankAgreesOrThereIsOneRank) {
  EXPECT_TRUE(judge_config_skew(world(4)).empty());
  auto one = world(1);
  one[0].variables["NCCL_IB_DISABLE"] = "1";
  EXPECT_TRUE(judge_config_skew(one).empty());
}

TEST(ConfigSkew, TheOddRankIsNamedByHostAndVariableAndTheOthersAreNot) {
  auto ranks = world(4);
  ranks[2].variables["NCCL_SOCKET_IFNAME"] = "eth1";
  auto fs = judge_config_skew(ranks);
  ASSERT_EQ(fs.size(), 1u);
  const Finding& f = fs[0];
  EXPECT_EQ(f.code, Code::CONFIG_SKEW);
  EXPECT_EQ(f.severity, Severity::warning);
  EXPECT_EQ(f.ranks, std::vector<int>{2});
  EXPECT_EQ(f.hosts, std::vector<std::string>{"h2"});
  EXPECT_EQ(f.message,
            "NCCL_SOCKET_IFNAME: host h2 (rank 2) has \"eth1\"; the other 3 ranks, on 3 hosts, "
            "\"eth0\"");
  EXPECT_EQ(f.evidence["majority"], "eth0");
  EXPECT_EQ(f.evidence["values"]["eth1"]["ranks"], json({2}));
  EXPECT_NE(f.hint.find("NCCL_SOCKET_IFNAME"), std::string::npos) << f.hint;
}

TEST(ConfigSkew, AVariableMissingOnOneRankIsNamedWithWhatTheOthersSet) {
  auto ranks = world(4);
  ranks[3].variables.erase("FI_PROVIDER");
  ranks[0].variables["NCCL_IB_DISABLE"] = "1";  // set on one rank only
  auto fs = judge_config_skew(ranks);
  ASSERT_EQ(fs.size(), 2u);
  // Sorted by item name: FI_PROVIDER, NCCL_IB_DISABLE.
  EXPECT_EQ(fs[0].message,
            "FI_PROVIDER: host h3 (rank 3) does not set it; the other 3 ranks, on 3 hosts, \"efa\"");
  EXPECT_EQ(fs[0].ranks, std::vector<int>{3});
  EXPECT_EQ(fs[1].message,
            "NCCL_IB_DISABLE: host h0 (rank 0) has \"1\"; the other 3 ranks, on 3 hosts, do not "
            "set it");
  EXPECT_EQ(fs[1].ranks, std::vector<int>{0});
}

TEST(ConfigSkew, VersionsAreComparedAmongTheRanksThatReportThem) {
  auto ranks = world(4);
  for (auto& r : ranks) r.versions["NCCL version"] = "2.28.3+cuda12.9";
  ranks[1].versions["NCCL version"] = "2.21.5+cuda12.4";
  ranks[3].versions.erase("NCCL version");  // NCCL did not run there: not a difference
  ranks[2].versions["kernel"] = "6.1.0-21-amd64";
  auto fs = judge_config_skew(ranks);
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].message,
            "NCCL version: host h1 (rank 1) has \"2.21.5+cuda12.4\"; the other 2 ranks, on 2 "
            "hosts, \"2.28.3+cuda12.9\"");
  // The kernel shapes no bytes on its own: worth a line, not a degraded run.
  EXPECT_EQ(fs[1].evidence["item"], "kernel");
  EXPECT_EQ(fs[1].severity, Severity::info);
}

TEST(ConfigSkew, AnEvenSplitNamesNoHostAndDebugSettingsAreInfo) {
  auto ranks = world(4);
  ranks[0].variables["FI_PROVIDER"] = "tcp";
  ranks[1].variables["FI_PROVIDER"] = "tcp";
  ranks[3].variables["NCCL_DEBUG"] = "INFO";
  auto fs = judge_config_skew(ranks);
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_TRUE(fs[0].hosts.empty());
  EXPECT_TRUE(fs[0].ranks.empty());
  EXPECT_NE(fs[0].message.find("no majority"), std::string::npos) << fs[0].message;
  EXPECT_NE(fs[0].message.find("hosts h0, h1 (ranks 0, 1) have \"tcp\""), std::string::npos)
      << fs[0].message;
  EXPECT_TRUE(fs[0].evidence["majority"].is_null());
  EXPECT_EQ(fs[1].severity, Severity::info);
  EXPECT_EQ(fs[1].ranks, std::vector<int>{3});
}

TEST(ConfigSkew, ASettingMadePerRankIsOneInfoLine) {
  auto ranks = world(12);
  for (auto& r : ranks) r.variables["NCCL_DEBUG_FILE"] = "/logs/nccl." + std::to_string(r.rank);
  auto fs = judge_config_skew(ranks);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].severity, Severity::info);
  EXPECT_TRUE(fs[0].ranks.empty());
  EXPECT_EQ(fs[0].evidence["values_total"], 12);
  EXPECT_EQ(fs[0].evidence["values"].size(), 8u);
}

TEST(ConfigSkew, WhatIsComparedAndWhatMpirunKeepsForItself) {
  EXPECT_TRUE(skew_variable("NCCL_SOCKET_IFNAME"));
  EXPECT_TRUE(skew_variable("FI_EFA_USE_DEVICE_RDMA"));
  EXPECT_TRUE(skew_variable("OFI_NCCL_PROTOCOL"));
  EXPECT_TRUE(skew_variable("OMPI_MCA_btl_tcp_if_include"));
  EXPECT_TRUE(skew_variable("UCX_TLS"));
  for (const char* own : {"OMPI_MCA_ess_base_vpid", "OMPI_MCA_orte_ess_node_rank",
                          "OMPI_MCA_orte_local_daemon_uri", "OMPI_MCA_pmix",
                          "OMPI_MCA_initial_wdir", "OMPI_MCA_shmem_RUNTIME_QUERY_hint"})
    EXPECT_FALSE(skew_variable(own)) << own;
  for (const char* other : {"RANK", "LOCAL_RANK", "CUDA_VISIBLE_DEVICES", "MASTER_PORT",
                            "OMPI_COMM_WORLD_RANK", "NCCL_", "TORCH_NCCL_ASYNC_ERROR_HANDLING"})
    EXPECT_FALSE(skew_variable(other)) << other;
}

// From the verdicts rank 0 gathers: each rank's env, versions and its transports' identities.
Verdict view(int r, const std::string& nccl, const std::string& ifname) {
  Verdict v = new_verdict(r);
  v.world.size = 3;
  v.ranks = {{r, RankStatus::joined, "h" + std::to_string(r), "", 100 + r, "", "", ""}};
  v.phases = {{"world", PhaseStatus::pass, 0.1, true, ""},
              {"rendezvous", PhaseStatus::pass, 0.1, true, ""},
              {"mesh", PhaseStatus::pass, 0.1, true, ""}};
  v.env = {{"NCCL_SOCKET_IFNAME", ifname}, {"RANK", std::to_string(r)}};
  v.versions = {{"ncclsmoke", v.tool.version}, {"kernel", "6.1.0-18-amd64"}};
  TransportIdentity id;
  id.transport = "nccl";
  id.rank = r;
  id.observed = {{"nccl_version", nccl}, {"cuda_driver", "13.0"}, {"nccl_log", {{"plugin", "Libfabric"}}}};
  v.identities.push_back(id);
  TransportIdentity other = id;  // another rank's row in this view is not this rank's
  other.rank = (r + 1) % 3;
  other.observed["nccl_version"] = "9.9.9";
  v.identities.push_back(other);
  return v;
}

TEST(ConfigSkew, RankZeroReadsEachRanksOwnViewAndNamesTheOddOne) {
  std::vector<Verdict> views{view(0, "2.28.3", "eth0"), view(1, "2.28.3", "eth0"),
                             view(2, "2.21.5", "eth0")};
  auto configs = rank_configs(views);
  ASSERT_EQ(configs.size(), 3u);
  EXPECT_EQ(configs[2].host, "h2");
  EXPECT_EQ(configs[2].versions["NCCL version"], "2.21.5");
  EXPECT_EQ(configs[2].versions["NCCL net plugin"], "Libfabric");
  EXPECT_EQ(configs[2].variables.count("RANK"), 0u) << "per rank by design: not compared";
  for (auto& v : views) apply_verdict(v);
  WorldRoster roster;
  roster.world_size = 3;
  roster.reporting_rank = 0;
  roster.duration_s = 3;
  Verdict g = judge_world(views, roster, nullptr);
  ASSERT_EQ(g.findings.size(), 1u) << to_json(g).dump(1);
  EXPECT_EQ(g.findings[0].code, Code::CONFIG_SKEW);
  EXPECT_EQ(g.findings[0].message,
            "NCCL version: host h2 (rank 2) has \"2.21.5\"; the other 2 ranks, on 2 hosts, "
            "\"2.28.3\"");
  EXPECT_EQ(g.verdict, Outcome::degraded);
}

TEST(EnvPolicy, EachRankOffThePolicyIsNamedWithWhatItHasAndWhatIsWanted) {
  std::vector<Verdict> views{view(0, "2.28.3", "eth0"), view(1, "2.28.3", "eth1"),
                             view(2, "2.28.3", "eth0"), view(3, "2.28.3", "eth1")};
  views[2].env.erase("NCCL_SOCKET_IFNAME");
  views[1].env["FI_PROVIDER"] = "efa";
  views[3].env["FI_PROVIDER"] = "efa";
  Profile p;
  p.name = "p5";
  p.environment = {{"NCCL_SOCKET_IFNAME", "eth0"}, {"FI_PROVIDER", std::nullopt},
                   {"NCCL_DEBUG", std::nullopt}};
  auto fs = judge_env_policy(views, p);
  ASSERT_EQ(fs.size(), 3u);
  // By variable name: FI_PROVIDER, NCCL_DEBUG, NCCL_SOCKET_IFNAME.
  EXPECT_EQ(fs[0].code, Code::ENV_POLICY);
  EXPECT_EQ(fs[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(fs[0].message, "FI_PROVIDER: the profile p5 wants it set, to any value; hosts h0, h2 "
                           "(ranks 0, 2) do not set it");
  EXPECT_EQ(fs[1].ranks, (std::vector<int>{0, 1, 2, 3})) << "no rank sets it: all are named";
  EXPECT_EQ(fs[2].ranks, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(fs[2].message,
            "NCCL_SOCKET_IFNAME: the profile p5 wants it \"eth0\"; host h2 (rank 2) does not set "
            "it; hosts h1, h3 (ranks 1, 3) have \"eth1\"");
  EXPECT_EQ(fs[2].evidence["wanted"], "eth0");
  EXPECT_NE(fs[2].hint.find("NCCL_SOCKET_IFNAME"), std::string::npos) << fs[2].hint;
  EXPECT_NE(fs[2].hint.find("p5"), std::string::npos) << fs[2].hint;
  // Every rank as the policy wants: nothing; no policy: nothing.
  for (auto& v : views) {
    v.env["NCCL_SOCKET_IFNAME"] = "eth0";
    v.env["FI_PROVIDER"] = "tcp";
    v.env["NCCL_DEBUG"] = "WARN";
  }
  EXPECT_TRUE(judge_env_policy(views, p).empty());
  EXPECT_TRUE(judge_env_policy(views, Profile{}).empty());
}

}  // namespace
}  // namespace ncclsmoke::results
