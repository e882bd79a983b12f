#include "harness/world.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace ncclsmoke::harness {
namespace {

using Env = std::map<std::string, std::string>;

WorldResult discover(const Env& env, WorldFlags flags = {}) {
  return discover_world(flags, map_environment(env), "pod-2");
}

const ConfigFinding* find(const WorldResult& r, const std::string& code,
                          const std::string& variable) {
  for (const auto& f : r.findings)
    if (f.code == code && f.variable == variable) return &f;
  return nullptr;
}

std::string dump(const WorldResult& r) {
  std::string out;
  for (const auto& f : r.findings)
    out += f.code + "/" + f.severity + " " + f.variable + "='" + f.value + "': " + f.message +
           " | hint: " + f.hint + "\n";
  return out;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Asserts exactly one error finding, with this code and variable, and returns it.
ConfigFinding expect_one_error(const WorldResult& r, const std::string& code,
                               const std::string& variable) {
  EXPECT_FALSE(r.world.has_value()) << dump(r);
  int errors = 0;
  for (const auto& f : r.findings) errors += f.severity == "error";
  EXPECT_EQ(errors, 1) << dump(r);
  const ConfigFinding* f = find(r, code, variable);
  EXPECT_NE(f, nullptr) << dump(r);
  if (!f) return {};
  EXPECT_EQ(f->severity, "error");
  EXPECT_TRUE(contains(f->message, variable)) << f->message;
  EXPECT_FALSE(f->hint.empty());
  return *f;
}

const Env kTorchrun{{"RANK", "2"},
                    {"WORLD_SIZE", "4"},
                    {"LOCAL_RANK", "0"},
                    {"MASTER_ADDR", "10.0.0.7"},
                    {"MASTER_PORT", "29501"}};

// ---- every launcher's variables ----

TEST(WorldDiscovery, Torchrun) {
  auto r = discover(kTorchrun);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_TRUE(r.findings.empty()) << dump(r);
  const World& w = *r.world;
  EXPECT_EQ(w.rank, 2);
  EXPECT_EQ(w.world_size, 4);
  EXPECT_EQ(w.local_rank, 0);
  EXPECT_EQ(w.master_addr, "10.0.0.7");
  EXPECT_EQ(w.master_port, 29501);
  EXPECT_EQ(w.source, "torchrun");
  EXPECT_EQ(w.hostname, "pod-2");
  EXPECT_EQ(w.node_name, "pod-2");
  EXPECT_EQ(w.sources_by_field.at("rank"), "RANK");
  EXPECT_EQ(w.sources_by_field.at("world_size"), "WORLD_SIZE");
  EXPECT_EQ(w.sources_by_field.at("local_rank"), "LOCAL_RANK");
  EXPECT_EQ(w.sources_by_field.at("master_addr"), "MASTER_ADDR");
  EXPECT_EQ(w.sources_by_field.at("master_port"), "MASTER_PORT");
  EXPECT_EQ(w.sources_by_field.at("node_name"), "hostname");
}

TEST(WorldDiscovery, OpenMpi) {
  auto r = discover({{"OMPI_COMM_WORLD_RANK", "5"},
                     {"OMPI_COMM_WORLD_SIZE", "8"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                     {"MASTER_ADDR", "head-node"}});
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_TRUE(r.findings.empty()) << dump(r);
  EXPECT_EQ(r.world->rank, 5);
  EXPECT_EQ(r.world->world_size, 8);
  EXPECT_EQ(r.world->local_rank, 1);
  EXPECT_EQ(r.world->master_addr, "head-node");
  EXPECT_EQ(r.world->master_port, kDefaultMasterPort);
  EXPECT_EQ(r.world->source, "openmpi");
  EXPECT_EQ(r.world->sources_by_field.at("rank"), "OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(r.world->sources_by_field.at("local_rank"), "OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(r.world->sources_by_field.at("master_port"), "default");
}

TEST(WorldDiscovery, OpenMpiWithoutMasterAddrHintsMpirunExport) {
  auto r = discover({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  auto f = expect_one_error(r, "CONFIG_MISSING", "MASTER_ADDR");
  EXPECT_TRUE(contains(f.hint, "mpirun -x MASTER_ADDR")) << f.hint;
  EXPECT_TRUE(contains(f.hint, "--master-addr")) << f.hint;
}

TEST(WorldDiscovery, Slurm) {
  auto r = discover({{"SLURM_PROCID", "3"},
                     {"SLURM_NTASKS", "4"},
                     {"SLURM_LOCALID", "3"},
                     {"MASTER_ADDR", "gpu-001"}});
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 3);
  EXPECT_EQ(r.world->world_size, 4);
  EXPECT_EQ(r.world->local_rank, 3);
  EXPECT_EQ(r.world->source, "slurm");
  EXPECT_EQ(r.world->sources_by_field.at("world_size"), "SLURM_NTASKS");
}

TEST(WorldDiscovery, SlurmFallsBackToNprocs) {
  auto r = discover({{"SLURM_PROCID", "0"}, {"SLURM_NPROCS", "2"}, {"MASTER_ADDR", "gpu-001"}});
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->world_size, 2);
  EXPECT_EQ(r.world->sources_by_field.at("world_size"), "SLURM_NPROCS");
}

TEST(WorldDiscovery, SlurmMasterFromFlag) {
  WorldFlags flags{.master_addr = "gpu-007"};
  auto r = discover({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}}, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->master_addr, "gpu-007");
  EXPECT_EQ(r.world->sources_by_field.at("master_addr"), "--master-addr");
}

TEST(WorldDiscovery, SlurmWithoutMasterAddrSuggestsScontrol) {
  auto r = discover({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}});
  auto f = expect_one_error(r, "CONFIG_MISSING", "MASTER_ADDR");
  EXPECT_TRUE(contains(f.hint, "scontrol show hostnames $SLURM_JOB_NODELIST | head -1")) << f.hint;
  EXPECT_TRUE(contains(f.message, "world size is 2")) << f.message;
}

TEST(WorldDiscovery, KubernetesIndexedJobWithWorldSizeEnv) {
  auto r = discover({{"JOB_COMPLETION_INDEX", "3"},
                     {"WORLD_SIZE", "4"},
                     {"MASTER_ADDR", "smoke-0.smoke"},
                     {"NODE_NAME", "ip-10-0-1-5.ec2.internal"}});
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_TRUE(r.findings.empty()) << dump(r);
  EXPECT_EQ(r.world->rank, 3);
  EXPECT_EQ(r.world->world_size, 4);
  EXPECT_EQ(r.world->local_rank, 0);
  EXPECT_EQ(r.world->source, "k8s-indexed-job");
  EXPECT_EQ(r.world->node_name, "ip-10-0-1-5.ec2.internal");
  EXPECT_EQ(r.world->hostname, "pod-2");
  EXPECT_EQ(r.world->sources_by_field.at("rank"), "JOB_COMPLETION_INDEX");
  EXPECT_EQ(r.world->sources_by_field.at("node_name"), "NODE_NAME");
  EXPECT_EQ(r.world->sources_by_field.at("local_rank"), "default");
}

TEST(WorldDiscovery, KubernetesIndexedJobWithWorldSizeFlag) {
  WorldFlags flags{.world_size = "4"};
  auto r = discover({{"JOB_COMPLETION_INDEX", "0"}, {"MASTER_ADDR", "smoke-0.smoke"}}, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 0);
  EXPECT_EQ(r.world->world_size, 4);
  EXPECT_EQ(r.world->source, "k8s-indexed-job");
  EXPECT_EQ(r.world->sources_by_field.at("world_size"), "--world-size");
}

TEST(WorldDiscovery, KubernetesIndexedJobWithoutWorldSize) {
  auto r = discover({{"JOB_COMPLETION_INDEX", "2"}, {"MASTER_ADDR", "smoke-0.smoke"}});
  auto f = expect_one_error(r, "CONFIG_MISSING", "WORLD_SIZE");
  EXPECT_TRUE(contains(f.message, "JOB_COMPLETION_INDEX")) << f.message;
  EXPECT_TRUE(contains(f.hint, "--world-size")) << f.hint;
  EXPECT_TRUE(contains(f.hint, "completions")) << f.hint;
}

TEST(WorldDiscovery, KubernetesIndexedJobIndexOutsideWorld) {
  auto r = discover({{"JOB_COMPLETION_INDEX", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "m"}});
  auto f = expect_one_error(r, "CONFIG_INVALID", "JOB_COMPLETION_INDEX");
  EXPECT_TRUE(contains(f.message, "0..3")) << f.message;
  EXPECT_EQ(f.value, "4");
}

TEST(WorldDiscovery, NodeNameFlagBeatsDownwardApi) {
  WorldFlags flags{.node_name = "node-b"};
  Env env = kTorchrun;
  env["NODE_NAME"] = "node-a";
  auto r = discover(env, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->node_name, "node-b");
  EXPECT_EQ(r.world->sources_by_field.at("node_name"), "--node-name");
}

TEST(WorldDiscovery, EmptyNodeNameEnvFallsBackToHostname) {
  Env env = kTorchrun;
  env["NODE_NAME"] = "  ";
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->node_name, "pod-2");
}

TEST(WorldDiscovery, EmptyNodeNameFlagIsInvalid) {
  WorldFlags flags{.node_name = ""};
  auto r = discover(kTorchrun, flags);
  expect_one_error(r, "CONFIG_INVALID", "--node-name");
}

// ---- flags ----

TEST(WorldDiscovery, FlagsOnly) {
  WorldFlags flags{.rank = "1",
                   .world_size = "3",
                   .local_rank = "1",
                   .master_addr = "127.0.0.1",
                   .master_port = "40000"};
  auto r = discover({}, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 1);
  EXPECT_EQ(r.world->world_size, 3);
  EXPECT_EQ(r.world->local_rank, 1);
  EXPECT_EQ(r.world->master_port, 40000);
  EXPECT_EQ(r.world->source, "flags");
  EXPECT_EQ(r.world->sources_by_field.at("rank"), "--rank");
  EXPECT_EQ(r.world->sources_by_field.at("master_port"), "--master-port");
}

TEST(WorldDiscovery, FlagsOverrideEnvironmentFieldByField) {
  WorldFlags flags{.rank = "0", .master_port = "31000"};
  auto r = discover(kTorchrun, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 0);
  EXPECT_EQ(r.world->world_size, 4);  // still from WORLD_SIZE
  EXPECT_EQ(r.world->master_port, 31000);
  EXPECT_EQ(r.world->master_addr, "10.0.0.7");
  EXPECT_EQ(r.world->source, "flags");
  EXPECT_EQ(r.world->sources_by_field.at("rank"), "--rank");
  EXPECT_EQ(r.world->sources_by_field.at("world_size"), "WORLD_SIZE");
  EXPECT_EQ(r.world->sources_by_field.at("master_port"), "--master-port");
}

TEST(WorldDiscovery, FlagOverridesBadEnvironmentValue) {
  WorldFlags flags{.master_port = "29500"};
  Env env = kTorchrun;
  env["MASTER_PORT"] = "tcp://10.0.0.7:29500";
  auto r = discover(env, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_TRUE(r.findings.empty()) << dump(r);
  EXPECT_EQ(r.world->master_port, 29500);
}

TEST(WorldDiscovery, LauncherFlagsIgnoresEnvironment) {
  WorldFlags flags{.world_size = "1", .launcher = "flags"};
  Env env = kTorchrun;
  env["MASTER_PORT"] = "tcp://x:1";  // would be invalid if read
  auto r = discover(env, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 0);
  EXPECT_EQ(r.world->world_size, 1);
  EXPECT_EQ(r.world->master_addr, "127.0.0.1");
  EXPECT_EQ(r.world->master_port, kDefaultMasterPort);
  EXPECT_EQ(r.world->source, "flags");
}

TEST(WorldDiscovery, LauncherHintSelectsThatLaunchersVariables) {
  WorldFlags flags{.launcher = "mpi"};
  Env env = kTorchrun;
  env["OMPI_COMM_WORLD_RANK"] = "1";
  env["OMPI_COMM_WORLD_SIZE"] = "4";
  auto r = discover(env, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_TRUE(r.findings.empty()) << dump(r);  // chosen on purpose: no conflict warning
  EXPECT_EQ(r.world->rank, 1);
  EXPECT_EQ(r.world->source, "openmpi");
}

TEST(WorldDiscovery, LauncherHintWithoutItsVariables) {
  WorldFlags flags{.launcher = "slurm"};
  auto r = discover(kTorchrun, flags);
  EXPECT_FALSE(r.world);
  EXPECT_NE(find(r, "CONFIG_MISSING", "SLURM_PROCID"), nullptr) << dump(r);
}

TEST(WorldDiscovery, UnknownLauncherHint) {
  WorldFlags flags{.launcher = "pbs"};
  auto r = discover(kTorchrun, flags);
  auto f = expect_one_error(r, "CONFIG_INVALID", "--launcher");
  EXPECT_EQ(f.value, "pbs");
  EXPECT_TRUE(contains(f.hint, "torchrun")) << f.hint;
}

TEST(WorldDiscovery, SingleRankWorldNeedsNoMaster) {
  auto r = discover({{"WORLD_SIZE", "1"}});
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 0);
  EXPECT_EQ(r.world->master_addr, "127.0.0.1");
  EXPECT_EQ(r.world->sources_by_field.at("master_addr"), "default");
  EXPECT_EQ(r.world->sources_by_field.at("rank"), "default");
}

TEST(WorldDiscovery, NothingGivenIsMissingRankAndWorldSize) {
  auto r = discover({});
  EXPECT_FALSE(r.world);
  EXPECT_NE(find(r, "CONFIG_MISSING", "--rank"), nullptr) << dump(r);
  auto* f = find(r, "CONFIG_MISSING", "--world-size");
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_TRUE(contains(f->hint, "torchrun")) << f->hint;
}

TEST(WorldDiscovery, TorchrunWithoutMasterAddr) {
  Env env = kTorchrun;
  env.erase("MASTER_ADDR");
  auto r = discover(env);
  auto f = expect_one_error(r, "CONFIG_MISSING", "MASTER_ADDR");
  EXPECT_TRUE(contains(f.hint, "--master-addr")) << f.hint;
}

TEST(WorldDiscovery, KubernetesWithoutMasterAddrMentionsHeadlessService) {
  auto r = discover({{"JOB_COMPLETION_INDEX", "1"}, {"WORLD_SIZE", "2"}});
  auto f = expect_one_error(r, "CONFIG_MISSING", "MASTER_ADDR");
  EXPECT_TRUE(contains(f.hint, "headless Service")) << f.hint;
}

// ---- bad values ----

struct BadValue {
  const char* variable;
  const char* value;
  const char* message_part;
  const char* hint_part;
};

class BadEnvValue : public testing::TestWithParam<BadValue> {};

TEST_P(BadEnvValue, BecomesConfigInvalidNamingVariableValueAndFix) {
  const BadValue& p = GetParam();
  Env env = kTorchrun;
  env[p.variable] = p.value;
  auto r = discover(env);
  auto f = expect_one_error(r, "CONFIG_INVALID", p.variable);
  EXPECT_TRUE(contains(f.message, p.message_part)) << f.message;
  EXPECT_TRUE(contains(f.hint, p.hint_part)) << f.hint;
}

INSTANTIATE_TEST_SUITE_P(
    WorldDiscovery, BadEnvValue,
    testing::Values(
        BadValue{"RANK", "abc", "RANK is 'abc', not an integer", "--rank"},
        BadValue{"RANK", "-1", "negative", "0..3"},
        BadValue{"RANK", "4", "not below the world size 4", "WORLD_SIZE"},
        BadValue{"RANK", "2.0", "not an integer", "RANK"},
        BadValue{"RANK", "+2", "not an integer", "RANK"},
        BadValue{"RANK", "0x2", "not an integer", "RANK"}, BadValue{"RANK", "", "empty", "--rank"},
        BadValue{"RANK", "\t", "empty", "--rank"},
        BadValue{"RANK", "99999999999999999999", "out of range", "--rank"},
        BadValue{"RANK", "-99999999999999999999", "out of range", "--rank"},
        BadValue{"RANK", "4294967296", "out of range", "--rank"},
        BadValue{"RANK", "\xd9\xa3", "not an integer", "--rank"},  // Arabic-Indic digit three
        BadValue{"WORLD_SIZE", "0", "less than 1", "--world-size"},
        BadValue{"WORLD_SIZE", "-4", "less than 1", "--world-size"},
        BadValue{"WORLD_SIZE", "four", "not an integer", "--world-size"},
        BadValue{"WORLD_SIZE", "99999999999", "likely a typo", "--world-size"},
        BadValue{"LOCAL_RANK", "-1", "negative", "--local-rank"},
        BadValue{"LOCAL_RANK", "x", "not an integer", "--local-rank"},
        BadValue{"LOCAL_RANK", "4", "not below the world size", "--local-rank"},
        BadValue{"MASTER_PORT", "0", "not a usable port", "1..65535"},
        BadValue{"MASTER_PORT", "65536", "above 65535", "--master-port"},
        BadValue{"MASTER_PORT", "-1", "not a usable port", "--master-port"},
        BadValue{"MASTER_PORT", "http", "not an integer", "--master-port"},
        BadValue{"MASTER_PORT", "10.0.0.7:29500", "host:port", "MASTER_ADDR"},
        BadValue{"MASTER_ADDR", "tcp://10.0.0.7:29500", "a URL",
                 "(10.0.0.7) and MASTER_PORT to the port (29500)"},
        BadValue{"MASTER_ADDR", "http://[fd00::1]:29500/", "a URL",
                 "(fd00::1) and MASTER_PORT to the port (29500)"},
        BadValue{"MASTER_ADDR", "10.0.0.7:29500", "host:port",
                 "(10.0.0.7) and MASTER_PORT to the port (29500)"},
        BadValue{"MASTER_ADDR", "master-0.smoke:29500", "host:port", "(master-0.smoke)"},
        BadValue{"MASTER_ADDR", "[fd00::1]:29500", "with a port",
                 "MASTER_PORT to the port (29500)"},
        BadValue{"MASTER_ADDR", "[fd00::1", "closing", "--master-addr"},
        BadValue{"MASTER_ADDR", "[not-ipv6]", "not a valid IPv6", "--master-addr"},
        BadValue{"MASTER_ADDR", "[fd00::1]x", "after the IPv6", "--master-addr"},
        BadValue{"MASTER_ADDR", "fd00::zz", "neither an IPv6", "--master-addr"},
        BadValue{"MASTER_ADDR", "", "empty", "--master-addr"},
        BadValue{"MASTER_ADDR", "\t", "empty", "--master-addr"},
        BadValue{"MASTER_ADDR", "two words", "not a valid host name", "--master-addr"},
        BadValue{"MASTER_ADDR", "ma\xc3\xaetre", "not a valid host name", "--master-addr"},
        BadValue{"MASTER_ADDR", "-bad", "not a valid host name", "--master-addr"},
        BadValue{"MASTER_ADDR", "a/b", "not a valid host name", "--master-addr"}));

TEST(WorldDiscovery, KubernetesServiceLinkInMasterPort) {
  Env env = kTorchrun;
  env["MASTER_PORT"] = "tcp://10.0.0.7:29500";
  auto r = discover(env);
  auto f = expect_one_error(r, "CONFIG_INVALID", "MASTER_PORT");
  EXPECT_EQ(f.value, "tcp://10.0.0.7:29500");
  EXPECT_TRUE(contains(
      f.message, "MASTER_PORT is 'tcp://10.0.0.7:29500', a Kubernetes service link, not a port"))
      << f.message;
  EXPECT_TRUE(contains(f.hint, "enableServiceLinks: false")) << f.hint;
  EXPECT_TRUE(contains(f.hint, "rename the Service")) << f.hint;
  EXPECT_TRUE(contains(f.hint, "--master-port 29500")) << f.hint;
}

TEST(WorldDiscovery, KubernetesServiceLinkWithWhitespaceAndIndexedJob) {
  auto r = discover({{"JOB_COMPLETION_INDEX", "1"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "smoke-0.smoke"},
                     {"MASTER_PORT", " tcp://172.20.3.4:29500\n"}});
  auto f = expect_one_error(r, "CONFIG_INVALID", "MASTER_PORT");
  EXPECT_TRUE(contains(f.hint, "enableServiceLinks")) << f.hint;
}

TEST(WorldDiscovery, UrlInMasterPortFlagIsNotCalledAServiceLink) {
  WorldFlags flags{.master_port = "tcp://10.0.0.7:29500"};
  auto r = discover(kTorchrun, flags);
  auto f = expect_one_error(r, "CONFIG_INVALID", "--master-port");
  EXPECT_TRUE(contains(f.message, "a URL")) << f.message;
  EXPECT_TRUE(contains(f.hint, "--master-port 29500")) << f.hint;
}

TEST(WorldDiscovery, BadFlagValuesNameTheFlag) {
  WorldFlags flags{.rank = "abc"};
  auto r = discover(kTorchrun, flags);
  auto f = expect_one_error(r, "CONFIG_INVALID", "--rank");
  EXPECT_TRUE(contains(f.hint, "pass --rank")) << f.hint;
}

TEST(WorldDiscovery, SeveralBadValuesAreAllReported) {
  auto r = discover({{"RANK", "x"},
                     {"WORLD_SIZE", "4"},
                     {"MASTER_ADDR", "tcp://m:1"},
                     {"MASTER_PORT", "tcp://10.0.0.7:29500"}});
  EXPECT_FALSE(r.world);
  EXPECT_NE(find(r, "CONFIG_INVALID", "RANK"), nullptr) << dump(r);
  EXPECT_NE(find(r, "CONFIG_INVALID", "MASTER_ADDR"), nullptr) << dump(r);
  EXPECT_NE(find(r, "CONFIG_INVALID", "MASTER_PORT"), nullptr) << dump(r);
}

// ---- IPv6, trimming ----

TEST(WorldDiscovery, Ipv6MasterInBracketsIsStripped) {
  Env env = kTorchrun;
  env["MASTER_ADDR"] = "[fd00::1]";
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->master_addr, "fd00::1");
  EXPECT_TRUE(contains(describe(*r.world), "master [fd00::1]:29501")) << describe(*r.world);
}

TEST(WorldDiscovery, BareIpv6MasterAndZone) {
  Env env = kTorchrun;
  env["MASTER_ADDR"] = "fe80::1%eth0";
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->master_addr, "fe80::1%eth0");
}

TEST(WorldDiscovery, WhitespaceAroundValuesIsTrimmed) {
  auto r = discover({{"RANK", " 2 "},
                     {"WORLD_SIZE", "\t4\n"},
                     {"LOCAL_RANK", " 0"},
                     {"MASTER_ADDR", "  10.0.0.7\r\n"},
                     {"MASTER_PORT", "29500 "},
                     {"NODE_NAME", " node-b "}});
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_TRUE(r.findings.empty()) << dump(r);
  EXPECT_EQ(r.world->rank, 2);
  EXPECT_EQ(r.world->world_size, 4);
  EXPECT_EQ(r.world->master_addr, "10.0.0.7");
  EXPECT_EQ(r.world->master_port, 29500);
  EXPECT_EQ(r.world->node_name, "node-b");
}

// ---- conflicting launchers ----

TEST(WorldDiscovery, ConflictingLaunchersWarnAndTorchrunWins) {
  Env env = kTorchrun;
  env["OMPI_COMM_WORLD_RANK"] = "1";
  env["OMPI_COMM_WORLD_SIZE"] = "4";
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 2);
  EXPECT_EQ(r.world->source, "torchrun");
  ASSERT_EQ(r.findings.size(), 1u) << dump(r);
  const auto& f = r.findings[0];
  EXPECT_EQ(f.code, "CONFIG_INVALID");
  EXPECT_EQ(f.severity, "warning");
  EXPECT_EQ(f.variable, "OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(f.value, "1");
  EXPECT_TRUE(contains(f.message, "disagree")) << f.message;
  EXPECT_TRUE(contains(f.hint, "--launcher")) << f.hint;
}

TEST(WorldDiscovery, ConflictingWorldSizesWarn) {
  Env env = kTorchrun;
  env["SLURM_PROCID"] = "2";
  env["SLURM_NTASKS"] = "3";
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->world_size, 4);
  auto* f = find(r, "CONFIG_INVALID", "SLURM_NTASKS");
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_EQ(f->severity, "warning");
}

TEST(WorldDiscovery, AgreeingLaunchersDoNotWarn) {
  Env env = kTorchrun;
  env["OMPI_COMM_WORLD_RANK"] = "2";
  env["OMPI_COMM_WORLD_SIZE"] = "4";
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_TRUE(r.findings.empty()) << dump(r);
}

TEST(WorldDiscovery, TorchrunNestedInSrunPerNodeDoesNotWarn) {
  // srun -N2 --ntasks-per-node=1 torchrun --nproc-per-node=2: outer world 2, inner world 4.
  Env env = kTorchrun;
  env["SLURM_PROCID"] = "1";
  env["SLURM_NTASKS"] = "2";
  env["JOB_COMPLETION_INDEX"] = "1";
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_TRUE(r.findings.empty()) << dump(r);
  EXPECT_EQ(r.world->source, "torchrun");
}

TEST(WorldDiscovery, OpenMpiBeatsSlurmWhenBothPresent) {
  auto r = discover({{"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"SLURM_PROCID", "1"},
                     {"SLURM_NTASKS", "2"},
                     {"MASTER_ADDR", "h"}});
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->source, "openmpi");
  EXPECT_TRUE(r.findings.empty()) << dump(r);
}

// ---- robustness ----

TEST(WorldDiscovery, WeirdInputNeverCrashes) {
  const std::string weird[] = {"",
                               "\t",
                               " ",
                               "99999999999999999999",
                               "-",
                               "--",
                               "\xff\xfe",
                               "\xe2\x80\x8b",  // zero-width space
                               "日本",
                               "[",
                               "]",
                               "[]",
                               "::",
                               ":",
                               "://",
                               "tcp://",
                               "tcp://:",
                               "tcp://[",
                               "[::1]:",
                               std::string(5000, '9'),
                               std::string(5000, 'a')};
  const char* vars[] = {"RANK",
                        "WORLD_SIZE",
                        "LOCAL_RANK",
                        "MASTER_ADDR",
                        "MASTER_PORT",
                        "NODE_NAME",
                        "JOB_COMPLETION_INDEX",
                        "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE",
                        "SLURM_PROCID",
                        "SLURM_NTASKS"};
  for (const auto& value : weird) {
    for (const char* var : vars) {
      Env env = kTorchrun;
      env[var] = value;
      auto r = discover(env);
      bool has_error = false;
      for (const auto& f : r.findings) {
        has_error |= f.severity == "error";
        EXPECT_LE(f.value.size(), 4 * 96u + 8);  // escaped and truncated
        for (char c : f.value + f.message) {
          unsigned char u = static_cast<unsigned char>(c);
          EXPECT_TRUE(u >= 0x20 && u < 0x7f) << var << " message has byte " << int(u);
        }
      }
      EXPECT_EQ(r.world.has_value(), !has_error) << var << "=" << value << "\n" << dump(r);
    }
    WorldFlags flags;
    flags.rank = flags.world_size = flags.local_rank = flags.master_addr = flags.master_port =
        flags.node_name = flags.launcher = value;
    auto r = discover({}, flags);
    EXPECT_FALSE(r.findings.empty());
  }
}

TEST(WorldDiscovery, NullOrThrowingEnvironmentIsHarmless) {
  WorldFlags flags{.world_size = "1"};
  auto r1 = discover_world(flags, Environment{}, "h");
  ASSERT_TRUE(r1.world) << dump(r1);
  auto r2 = discover_world(
      flags,
      [](const std::string&) -> std::optional<std::string> { throw std::runtime_error("x"); }, "h");
  ASSERT_TRUE(r2.world) << dump(r2);
  auto r3 = discover_world(flags, map_environment({}), "");
  ASSERT_TRUE(r3.world);
  EXPECT_FALSE(r3.world->hostname.empty());
}

TEST(WorldDiscovery, ProcessEnvironmentReadsRealVariables) {
  ASSERT_EQ(setenv("NCCLSMOKE_WORLD_TEST_VAR", "v1", 1), 0);
  auto env = process_environment();
  EXPECT_EQ(env("NCCLSMOKE_WORLD_TEST_VAR"), std::optional<std::string>("v1"));
  EXPECT_EQ(env("NCCLSMOKE_WORLD_TEST_UNSET_VAR"), std::nullopt);
  unsetenv("NCCLSMOKE_WORLD_TEST_VAR");
  EXPECT_FALSE(local_hostname().empty());
}

TEST(WorldDiscovery, DescribeIsOneLine) {
  World w;
  w.rank = 2;
  w.world_size = 4;
  w.local_rank = 0;
  w.node_name = "node-b";
  w.hostname = "pod-2";
  w.master_addr = "10.0.0.7";
  w.master_port = 29500;
  w.source = "torchrun";
  EXPECT_EQ(describe(w),
            "rank 2/4 (local 0) on node-b (host pod-2), master 10.0.0.7:29500, from torchrun");
}

}  // namespace
}  // namespace ncclsmoke::harness
