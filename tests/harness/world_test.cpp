#include "harness/world/launchers.h"
#include "harness/world/world.h"
#include "results/judging/probe_rules.h"
#include "results/judging/run_rules.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ncclsmoke::harness {
namespace {

using Env = std::map<std::string, std::string>;

// The finding code the judge gives a problem (CONFIG_MISSING / CONFIG_INVALID).
std::string code_of(const ConfigProblem& p) { return std::string(results::config_finding(p).code.str()); }
std::string severity_of(const ConfigProblem& p) {
  return results::to_string(results::config_finding(p).severity);
}

WorldResult discover(const Env& env, WorldFlags flags = {},
                     const std::string& hostname = "pod-2") {
  return discover_world(flags, map_environment(env), hostname);
}

const ConfigProblem* find(const WorldResult& r, const std::string& code,
                          const std::string& variable) {
  for (const auto& f : r.findings)
    if (code_of(f) == code && f.variable == variable) return &f;
  return nullptr;
}

std::string dump(const WorldResult& r) {
  std::string out;
  for (const auto& f : r.findings)
    out += code_of(f) + "/" + severity_of(f) + " " + f.variable + "='" + f.value + "': " + f.message +
           " | hint: " + f.hint + "\n";
  return out;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Asserts exactly one error finding, with this code and variable, and returns it.
ConfigProblem expect_one_error(const WorldResult& r, const std::string& code,
                               const std::string& variable) {
  EXPECT_FALSE(r.world.has_value()) << dump(r);
  int errors = 0;
  for (const auto& f : r.findings) errors += severity_of(f) == "error";
  EXPECT_EQ(errors, 1) << dump(r);
  const ConfigProblem* f = find(r, code, variable);
  EXPECT_NE(f, nullptr) << dump(r);
  if (!f) return {};
  EXPECT_EQ(severity_of(*f), "error");
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
  EXPECT_EQ(w.source, results::WorldSource::torchrun);
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
  EXPECT_EQ(results::name(r.world->source), "openmpi");
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
  EXPECT_EQ(results::name(r.world->source), "slurm");
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
  EXPECT_EQ(results::name(r.world->source), "k8s-indexed-job");
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
  EXPECT_EQ(results::name(r.world->source), "k8s-indexed-job");
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
  EXPECT_EQ(results::name(r.world->source), "flags");
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
  EXPECT_EQ(results::name(r.world->source), "flags");
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
  EXPECT_EQ(results::name(r.world->source), "flags");
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
  EXPECT_EQ(results::name(r.world->source), "openmpi");
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

// What discovery observed becomes the verdict's finding through the judge: the table's
// "Fix {variable} (value {value}): {fix}" hint, the variable and value as evidence.
TEST(WorldDiscovery, ServiceLinkProblemBecomesTheConfigInvalidFinding) {
  Env env = kTorchrun;
  env["MASTER_PORT"] = "tcp://10.0.0.7:29500";
  auto r = discover(env);
  ASSERT_EQ(r.findings.size(), 1u) << dump(r);
  EXPECT_EQ(r.findings[0].kind, ConfigProblem::Kind::invalid);
  results::Finding f = results::config_finding(r.findings[0]);
  EXPECT_EQ(f.code, results::Code::CONFIG_INVALID);
  EXPECT_EQ(f.severity, results::Severity::error);
  EXPECT_EQ(f.layer, results::Layer::config);
  EXPECT_EQ(f.message, r.findings[0].message);
  EXPECT_EQ(f.hint.rfind("Fix MASTER_PORT (value tcp://10.0.0.7:29500): set enableServiceLinks: "
                         "false",
                         0),
            0u)
      << f.hint;
  EXPECT_EQ(f.evidence["variable"], "MASTER_PORT");
  EXPECT_EQ(f.evidence["value"], "tcp://10.0.0.7:29500");
}

TEST(WorldDiscovery, MissingAndConflictProblemsKeepTheirKind) {
  auto none = discover({});
  ASSERT_FALSE(none.world);
  for (const auto& p : none.findings) {
    EXPECT_EQ(p.kind, ConfigProblem::Kind::missing) << dump(none);
    EXPECT_EQ(results::config_finding(p).code, results::Code::CONFIG_MISSING);
    EXPECT_EQ(results::config_finding(p).hint, p.hint);
  }
  Env env = kTorchrun;
  env["OMPI_COMM_WORLD_RANK"] = "1";
  env["OMPI_COMM_WORLD_SIZE"] = "4";
  auto both = discover(env);
  ASSERT_TRUE(both.world) << dump(both);
  ASSERT_EQ(both.findings.size(), 1u) << dump(both);
  EXPECT_EQ(both.findings[0].kind, ConfigProblem::Kind::conflict);
  EXPECT_FALSE(both.findings[0].blocking());
  EXPECT_EQ(results::config_finding(both.findings[0]).severity, results::Severity::warning);
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
  EXPECT_EQ(results::name(r.world->source), "torchrun");
  ASSERT_EQ(r.findings.size(), 1u) << dump(r);
  const auto& f = r.findings[0];
  EXPECT_EQ(code_of(f), "CONFIG_INVALID");
  EXPECT_EQ(severity_of(f), "warning");
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
  EXPECT_EQ(severity_of(*f), "warning");
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
  EXPECT_EQ(results::name(r.world->source), "torchrun");
}

TEST(WorldDiscovery, OpenMpiBeatsSlurmWhenBothPresent) {
  auto r = discover({{"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"SLURM_PROCID", "1"},
                     {"SLURM_NTASKS", "2"},
                     {"MASTER_ADDR", "h"}});
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(results::name(r.world->source), "openmpi");
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
        has_error |= severity_of(f) == "error";
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
  w.source = results::WorldSource::torchrun;
  EXPECT_EQ(describe(w),
            "rank 2/4 (local 0) on node-b (host pod-2), master 10.0.0.7:29500, from torchrun");
}

// ---- torchrun's agent store and restart count ----

Env torchrun_agent(const std::string& use_agent_store) {
  Env env = kTorchrun;
  env["TORCHELASTIC_RUN_ID"] = "run-7";
  env["TORCHELASTIC_RESTART_COUNT"] = "0";
  env["TORCHELASTIC_USE_AGENT_STORE"] = use_agent_store;
  return env;
}

TEST(WorldStore, RankZeroHostsByDefault) {
  auto r = discover(kTorchrun);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_FALSE(r.world->external_store);
  EXPECT_EQ(r.world->store_host, "10.0.0.7");
  EXPECT_EQ(r.world->store_port, 29501);
  EXPECT_EQ(r.world->store_source, "rank 0");
  EXPECT_EQ(r.world->restart_count, 0);
  EXPECT_EQ(r.world->sources_by_field.at("restart_count"), "default");
}

TEST(WorldStore, TorchrunAgentStoreTrueMakesEveryRankAClient) {
  for (const char* v : {"True", "true", "1", " TRUE "}) {
    Env env = torchrun_agent(v);
    env["TORCHELASTIC_RESTART_COUNT"] = "3";
    auto r = discover(env);
    ASSERT_TRUE(r.world) << v << "\n" << dump(r);
    EXPECT_TRUE(r.findings.empty()) << dump(r);
    EXPECT_TRUE(r.world->external_store) << v;
    EXPECT_EQ(r.world->store_host, "10.0.0.7");
    EXPECT_EQ(r.world->store_port, 29501);
    EXPECT_EQ(r.world->store_source, "TORCHELASTIC_USE_AGENT_STORE");
    EXPECT_EQ(r.world->restart_count, 3);
    EXPECT_EQ(r.world->sources_by_field.at("restart_count"), "TORCHELASTIC_RESTART_COUNT");
    EXPECT_EQ(r.world->job_id, "run-7");
    EXPECT_EQ(r.world->job_id_source, "TORCHELASTIC_RUN_ID");
  }
}

TEST(WorldStore, TorchrunAgentStoreFalseLeavesItToRankZero) {
  for (const char* v : {"False", "false", "0"}) {
    auto r = discover(torchrun_agent(v));
    ASSERT_TRUE(r.world) << v << "\n" << dump(r);
    EXPECT_FALSE(r.world->external_store) << v;
    EXPECT_EQ(r.world->store_source, "rank 0");
    EXPECT_EQ(r.world->store_host, r.world->master_addr);
  }
}

TEST(WorldStore, TorchrunAgentStoreGarbageIsInvalid) {
  for (const char* v : {"yes", "", "2", "Tru"}) {
    auto r = discover(torchrun_agent(v));
    auto f = expect_one_error(r, "CONFIG_INVALID", "TORCHELASTIC_USE_AGENT_STORE");
    EXPECT_EQ(f.value, v);
    EXPECT_TRUE(contains(f.message, "True nor False")) << f.message;
    EXPECT_TRUE(contains(f.hint, "--store")) << f.hint;
  }
}

TEST(WorldStore, AgentStoreVariableIsReadOnlyUnderTorchrun) {
  auto r = discover({{"OMPI_COMM_WORLD_RANK", "0"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "h"},
                     {"TORCHELASTIC_USE_AGENT_STORE", "garbage"},
                     {"TORCHELASTIC_RESTART_COUNT", "x"}});
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_FALSE(r.world->external_store);
  EXPECT_EQ(r.world->restart_count, 0);
}

TEST(WorldStore, BadRestartCountIsInvalid) {
  for (const char* v : {"x", "-1", "", "1.5", "99999999999"}) {
    Env env = torchrun_agent("True");
    env["TORCHELASTIC_RESTART_COUNT"] = v;
    auto r = discover(env);
    auto f = expect_one_error(r, "CONFIG_INVALID", "TORCHELASTIC_RESTART_COUNT");
    EXPECT_EQ(f.value, v);
  }
}

TEST(WorldStore, LauncherTorchrunReadsTheAgentStore) {
  WorldFlags flags{.rank = "0", .world_size = "2", .launcher = "torchrun"};
  auto r = discover({{"MASTER_ADDR", "a"}, {"MASTER_PORT", "1234"},
                     {"TORCHELASTIC_USE_AGENT_STORE", "True"}},
                    flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_TRUE(r.world->external_store);
  EXPECT_EQ(r.world->store_port, 1234);
}

// ---- --store ----

TEST(WorldStore, StoreFlagJoinsAnExternalStoreWithoutMaster) {
  WorldFlags flags{.rank = "0", .world_size = "2", .store = "store.svc:2345"};
  auto r = discover({}, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_TRUE(r.findings.empty()) << dump(r);
  EXPECT_TRUE(r.world->external_store);
  EXPECT_EQ(r.world->store_host, "store.svc");
  EXPECT_EQ(r.world->store_port, 2345);
  EXPECT_EQ(r.world->store_source, "--store");
  EXPECT_EQ(r.world->master_addr, "store.svc");
  EXPECT_EQ(r.world->master_port, 2345);
  EXPECT_EQ(r.world->sources_by_field.at("master_addr"), "--store");
  EXPECT_EQ(r.world->sources_by_field.at("master_port"), "--store");
}

TEST(WorldStore, StoreFlagTakesBracketedIpv6AndIpv4) {
  WorldFlags flags{.rank = "1", .world_size = "2", .store = " [fd00::7]:29500 "};
  auto r = discover({}, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->store_host, "fd00::7");
  EXPECT_EQ(r.world->store_port, 29500);
  flags.store = "10.1.2.3:1";
  r = discover({}, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->store_host, "10.1.2.3");
  EXPECT_EQ(r.world->store_port, 1);
}

TEST(WorldStore, StoreFlagWinsOverAgentStoreAndIgnoresMasterVariables) {
  Env env = torchrun_agent("True");
  env["MASTER_PORT"] = "tcp://10.0.0.1:23456";  // a service link: irrelevant with --store
  WorldFlags flags{.store = "10.9.9.9:4000"};
  auto r = discover(env, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_TRUE(r.findings.empty()) << dump(r);
  EXPECT_EQ(r.world->store_source, "--store");
  EXPECT_EQ(r.world->store_host, "10.9.9.9");
  EXPECT_EQ(r.world->store_port, 4000);
  EXPECT_EQ(r.world->rank, 2);
}

TEST(WorldStore, MasterFlagsStayAlongsideStoreFlag) {
  WorldFlags flags{.rank = "0", .world_size = "2", .master_addr = "m", .master_port = "77",
                   .store = "s:88"};
  auto r = discover({}, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->master_addr, "m");
  EXPECT_EQ(r.world->master_port, 77);
  EXPECT_EQ(r.world->store_host, "s");
  EXPECT_EQ(r.world->store_port, 88);
}

struct BadStore {
  const char* value;
  const char* message_part;
  const char* hint_part;
};

class BadStoreFlag : public testing::TestWithParam<BadStore> {};

TEST_P(BadStoreFlag, IsInvalidNamingFlagValueAndFix) {
  const BadStore& p = GetParam();
  WorldFlags flags{.rank = "0", .world_size = "2", .store = p.value};
  auto r = discover({}, flags);
  auto f = expect_one_error(r, "CONFIG_INVALID", "--store");
  EXPECT_TRUE(contains(f.message, p.message_part)) << f.message;
  EXPECT_TRUE(contains(f.hint, p.hint_part)) << f.hint;
  EXPECT_TRUE(contains(f.message, "HOST:PORT")) << f.message;
}

INSTANTIATE_TEST_SUITE_P(
    WorldStore, BadStoreFlag,
    testing::Values(BadStore{"", "empty", "HOST:PORT"},
                    BadStore{"store.svc", "missing the port", "--store store.svc:<port>"},
                    BadStore{"tcp://store.svc:29500/", "a URL", "--store store.svc:29500"},
                    BadStore{"store:0", "not a TCP port", "HOST:PORT"},
                    BadStore{"store:65536", "not a TCP port", "HOST:PORT"},
                    BadStore{"store:abc", "not a TCP port", "HOST:PORT"},
                    BadStore{"store:", "not a TCP port", "HOST:PORT"},
                    BadStore{"store:-1", "not a TCP port", "HOST:PORT"},
                    BadStore{"fd00::7:29500", "brackets", "[addr]:port"},
                    BadStore{"[fd00::7", "closing ']'", "HOST:PORT"},
                    BadStore{"[fd00::7]", "missing the port", "HOST:PORT"},
                    BadStore{"[fd00::7]x", "text after", "HOST:PORT"},
                    BadStore{"[zz]:1", "not a valid IPv6", "HOST:PORT"},
                    BadStore{"bad host:1", "not a host name", "HOST:PORT"},
                    BadStore{":29500", "not a host name", "HOST:PORT"}));

// ---- Slurm without MASTER_ADDR / MASTER_PORT ----

Env slurm_step() {
  return {{"SLURM_PROCID", "1"},
          {"SLURM_NTASKS", "4"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_JOB_ID", "1234"},
          {"SLURM_STEP_ID", "1"},
          {"SLURM_STEP_NODELIST", "gpu-[03-04,07],login1"},
          {"SLURM_JOB_NODELIST", "gpu-[01-08],login1"}};
}

TEST(WorldSlurm, MasterIsTheStepsFirstHostAndPortComesFromTheJobId) {
  auto r = discover(slurm_step());
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_TRUE(r.findings.empty()) << dump(r);
  EXPECT_EQ(r.world->master_addr, "gpu-03");
  EXPECT_EQ(r.world->sources_by_field.at("master_addr"), "SLURM_STEP_NODELIST");
  EXPECT_EQ(r.world->master_port, 20000 + (1234 * 4 + 1) % 10000);  // 24937
  EXPECT_EQ(r.world->master_port, 24937);
  EXPECT_EQ(r.world->sources_by_field.at("master_port"), "SLURM_JOB_ID");
  EXPECT_EQ(r.world->store_host, "gpu-03");
  EXPECT_EQ(r.world->store_port, 24937);
  EXPECT_FALSE(r.world->external_store);
  EXPECT_EQ(r.world->job_id, "1234.1");
  EXPECT_EQ(r.world->job_id_source, "SLURM_JOB_ID");
}

TEST(WorldSlurm, JobNodelistWhenNoStepNodelist) {
  for (auto [list, first] : std::vector<std::pair<std::string, std::string>>{
           {"rack[1-2]-node[01-02]", "rack1-node01"},
           {"login1,gpu-[01-02]", "login1"},
           {"n[08-10]", "n08"},
           {"c[5]", "c5"},
           {"node17", "node17"}}) {
    Env env = slurm_step();
    env.erase("SLURM_STEP_NODELIST");
    env["SLURM_JOB_NODELIST"] = list;
    auto r = discover(env);
    ASSERT_TRUE(r.world) << list << "\n" << dump(r);
    EXPECT_EQ(r.world->master_addr, first) << list;
    EXPECT_EQ(r.world->sources_by_field.at("master_addr"), "SLURM_JOB_NODELIST");
  }
}

TEST(WorldSlurm, DerivedPortFormula) {
  EXPECT_EQ(slurm_derived_port(1234, 1), 24937);
  EXPECT_EQ(slurm_derived_port(1234, std::nullopt), 24936);
  EXPECT_EQ(slurm_derived_port(5000, 0), 20000);
  EXPECT_EQ(slurm_derived_port(2499, 7), 29999);  // 9996 + 3
  EXPECT_EQ(slurm_derived_port(2500, 0), 20000);  // ids 2500 apart share a port
  const uint64_t big = 4294967295u;
  EXPECT_EQ(slurm_derived_port(big, 2), 20000 + (big * 4 + 2) % 10000);
  for (uint64_t id = 0; id < 20000; id += 7)
    for (uint64_t step = 0; step < 9; ++step) {
      uint16_t p = slurm_derived_port(id, step);
      EXPECT_GE(p, 20000);
      EXPECT_LE(p, 29999);
      EXPECT_LT(p, 32768);  // below Linux's ephemeral range
    }
}

TEST(WorldSlurm, MissingOrNonNumericStepCountsAsZero) {
  for (const char* step : {"batch", "extern", ""}) {
    Env env = slurm_step();
    env["SLURM_STEP_ID"] = step;
    auto r = discover(env);
    ASSERT_TRUE(r.world) << dump(r);
    EXPECT_EQ(r.world->master_port, 24936) << step;
  }
  Env env = slurm_step();
  env.erase("SLURM_STEP_ID");
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->master_port, 24936);
}

TEST(WorldSlurm, ExplicitMasterAddrAndPortWin) {
  Env env = slurm_step();
  env["MASTER_ADDR"] = "head";
  env["MASTER_PORT"] = "29400";
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->master_addr, "head");
  EXPECT_EQ(r.world->master_port, 29400);
  EXPECT_EQ(r.world->sources_by_field.at("master_port"), "MASTER_PORT");

  WorldFlags flags{.master_addr = "flag-head", .master_port = "29401"};
  r = discover(slurm_step(), flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->master_addr, "flag-head");
  EXPECT_EQ(r.world->master_port, 29401);

  // MASTER_PORT alone: address from the node list, port as given.
  env = slurm_step();
  env["MASTER_PORT"] = "29402";
  r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->master_addr, "gpu-03");
  EXPECT_EQ(r.world->master_port, 29402);
}

TEST(WorldSlurm, MalformedNodelistIsInvalidNamingTheVariable) {
  for (const char* list : {"gpu-[01-", "n[3-1]", "", "a,,b", "n[]"}) {
    Env env = slurm_step();
    env["SLURM_STEP_NODELIST"] = list;
    auto r = discover(env);
    auto f = expect_one_error(r, "CONFIG_INVALID", "SLURM_STEP_NODELIST");
    EXPECT_EQ(f.value, list);
    EXPECT_TRUE(contains(f.message, "not a Slurm host list")) << f.message;
    EXPECT_TRUE(contains(f.hint, "--master-addr")) << f.hint;
  }
  Env env = slurm_step();
  env["SLURM_STEP_NODELIST"] = "bad$host";
  auto f = expect_one_error(discover(env), "CONFIG_INVALID", "SLURM_STEP_NODELIST");
  EXPECT_TRUE(contains(f.message, "not a valid host name")) << f.message;
}

TEST(WorldSlurm, BadJobIdWithoutMasterPortIsInvalid) {
  Env env = slurm_step();
  env["SLURM_JOB_ID"] = "12a";
  auto f = expect_one_error(discover(env), "CONFIG_INVALID", "SLURM_JOB_ID");
  EXPECT_EQ(f.value, "12a");
  EXPECT_TRUE(contains(f.hint, "MASTER_PORT")) << f.hint;
  env["MASTER_PORT"] = "29500";
  auto r = discover(env);
  EXPECT_TRUE(r.world) << dump(r);
}

TEST(WorldSlurm, NoJobIdKeepsTheDefaultPort) {
  Env env = slurm_step();
  env.erase("SLURM_JOB_ID");
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->master_port, kDefaultMasterPort);
  EXPECT_EQ(r.world->sources_by_field.at("master_port"), "default");
}

TEST(WorldSlurm, NoNodelistAtAllIsMissingWithScontrolAndPortHint) {
  Env env = slurm_step();
  env.erase("SLURM_STEP_NODELIST");
  env.erase("SLURM_JOB_NODELIST");
  auto f = expect_one_error(discover(env), "CONFIG_MISSING", "MASTER_ADDR");
  EXPECT_TRUE(contains(f.message, "SLURM_STEP_NODELIST")) << f.message;
  EXPECT_TRUE(contains(f.hint, "scontrol show hostnames")) << f.hint;
  EXPECT_TRUE(contains(f.hint, "ephemeral")) << f.hint;
}

TEST(WorldSlurm, SingleTaskNeedsNoNodelist) {
  auto r = discover({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_NODELIST", "[["}});
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->master_addr, "127.0.0.1");
}

TEST(WorldSlurm, StoreFlagSkipsTheNodelist) {
  Env env = slurm_step();
  env["SLURM_STEP_NODELIST"] = "gpu-[01-";
  WorldFlags flags{.store = "s:1"};
  auto r = discover(env, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->store_host, "s");
  EXPECT_EQ(r.world->master_addr, "s");
}

TEST(WorldSlurm, LauncherFlagsReadsNoNodelist) {
  WorldFlags flags{.rank = "0", .world_size = "2", .launcher = "flags"};
  auto r = discover(slurm_step(), flags);
  auto f = expect_one_error(r, "CONFIG_MISSING", "MASTER_ADDR");
  (void)f;
}

// ---- Kubeflow PyTorchJob ----

Env pytorchjob_pod(const std::string& nproc) {
  return {{"RANK", "1"},
          {"WORLD_SIZE", "16"},
          {"MASTER_ADDR", "bert-master-0"},
          {"MASTER_PORT", "23456"},
          {"PET_NNODES", "2"},
          {"PET_NODE_RANK", "1"},
          {"PET_NPROC_PER_NODE", nproc},
          {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}};
}

TEST(WorldPyTorchJob, SeveralProcessesPerPodWithoutTorchrunIsAnError) {
  auto r = discover(pytorchjob_pod("8"));
  auto f = expect_one_error(r, "CONFIG_INVALID", "PET_NPROC_PER_NODE");
  EXPECT_EQ(f.value, "8");
  EXPECT_TRUE(contains(f.message, "pod's index, not a process rank")) << f.message;
  EXPECT_TRUE(contains(f.message, "8 processes per pod")) << f.message;
  EXPECT_TRUE(contains(f.hint, "ncclsmoke launch")) << f.hint;
  EXPECT_TRUE(contains(f.hint, "torchrun --no-python ncclsmoke run")) << f.hint;
  for (const auto& x : r.findings) EXPECT_NE(code_of(x), "RANKS_MISSING");
}

TEST(WorldPyTorchJob, AutoGpuCpuNeedALauncherToo) {
  for (const char* v : {"auto", "gpu", "cpu", "GPU"}) {
    auto f = expect_one_error(discover(pytorchjob_pod(v)), "CONFIG_INVALID", "PET_NPROC_PER_NODE");
    EXPECT_TRUE(contains(f.message, "torchrun's value")) << f.message;
    EXPECT_TRUE(contains(f.hint, "ncclsmoke launch")) << f.hint;
  }
}

TEST(WorldPyTorchJob, MalformedNprocIsInvalid) {
  for (const char* v : {"x", "0", "-2", "", "8x"}) {
    auto f = expect_one_error(discover(pytorchjob_pod(v)), "CONFIG_INVALID", "PET_NPROC_PER_NODE");
    EXPECT_EQ(f.value, v);
    EXPECT_TRUE(contains(f.message, "not a process count")) << f.message;
  }
}

TEST(WorldPyTorchJob, OneProcessPerPodIsFine) {
  Env env = pytorchjob_pod("1");
  env["WORLD_SIZE"] = "2";
  auto r = discover(env, {}, "bert-worker-0");
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 1);
  EXPECT_EQ(r.world->world_size, 2);
  EXPECT_EQ(r.world->job_id, "bert");
  EXPECT_EQ(r.world->job_id_source, "hostname (PyTorchJob)");
}

TEST(WorldPyTorchJob, UnderTorchrunOrWithFlagsTheRankIsAProcessRank) {
  Env env = pytorchjob_pod("8");
  env["TORCHELASTIC_RUN_ID"] = "bert";
  env["RANK"] = "9";
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 9);

  WorldFlags flags{.rank = "9"};
  r = discover(pytorchjob_pod("8"), flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 9);

  WorldFlags only_flags{.rank = "0", .world_size = "1", .launcher = "flags"};
  r = discover(pytorchjob_pod("x"), only_flags);
  ASSERT_TRUE(r.world) << dump(r);
}

TEST(WorldPyTorchJob, MpirunInsideThePodWithLauncherMpi) {
  Env env = pytorchjob_pod("8");
  env["OMPI_COMM_WORLD_RANK"] = "5";
  env["OMPI_COMM_WORLD_SIZE"] = "16";
  WorldFlags flags{.launcher = "mpi"};
  auto r = discover(env, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 5);
}

// ---- job identity in the world ----

TEST(WorldJobId, FlagAndBadFlag) {
  WorldFlags flags{.rank = "0", .world_size = "1", .job_id = "ci-99"};
  auto r = discover({{"SLURM_JOB_ID", "5"}}, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->job_id, "ci-99");
  EXPECT_EQ(r.world->job_id_source, "--job-id");
  for (const std::string& bad : {std::string(""), std::string("a/b"), std::string(129, 'x'),
                                std::string("tab\there")}) {
    flags.job_id = bad;
    auto f = expect_one_error(discover({}, flags), "CONFIG_INVALID", "--job-id");
    EXPECT_TRUE(contains(f.hint, "--job-id")) << f.hint;
  }
}

TEST(WorldJobId, NoneGivesEmpty) {
  WorldFlags flags{.rank = "0", .world_size = "1"};
  auto r = discover({}, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->job_id, "");
  EXPECT_EQ(r.world->job_id_source, "");
}

TEST(WorldJobId, LauncherFlagsReadsOnlyOwnVariable) {
  WorldFlags flags{.rank = "0", .world_size = "1", .launcher = "flags"};
  auto r = discover({{"SLURM_JOB_ID", "5"}, {"TORCHELASTIC_RUN_ID", "t"}}, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->job_id, "");
  r = discover({{"SLURM_JOB_ID", "5"}, {"NCCLSMOKE_JOB_ID", "mine"}}, flags);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->job_id, "mine");
  EXPECT_EQ(r.world->job_id_source, "NCCLSMOKE_JOB_ID");
}

TEST(WorldJobId, IndexedJobFromHostName) {
  auto r = discover_world({}, map_environment({{"JOB_COMPLETION_INDEX", "1"},
                                               {"WORLD_SIZE", "2"},
                                               {"MASTER_ADDR", "smoke-0.smoke"}}),
                          "smoke-1");
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->job_id, "smoke");
  EXPECT_EQ(r.world->job_id_source, "hostname (Indexed Job)");
}

TEST(WorldJobId, OpenMpiJobId) {
  auto r = discover({{"OMPI_COMM_WORLD_RANK", "0"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "h"},
                     {"OMPI_MCA_ess_base_jobid", "4242"}});
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->job_id, "4242");
  EXPECT_EQ(r.world->job_id_source, "OMPI_MCA_ess_base_jobid");
}

// ---- describe() and weird input for the new variables ----

TEST(WorldStore, DescribeMentionsExternalStoreAndJob) {
  World w;
  w.rank = 1;
  w.world_size = 2;
  w.node_name = "n";
  w.hostname = "h";
  w.master_addr = "fd00::7";
  w.master_port = 29500;
  w.source = results::WorldSource::torchrun;
  w.external_store = true;
  w.store_host = "fd00::7";
  w.store_port = 29500;
  w.store_source = "TORCHELASTIC_USE_AGENT_STORE";
  w.job_id = "run-7";
  EXPECT_EQ(describe(w),
            "rank 1/2 (local 0) on n (host h), master [fd00::7]:29500, from torchrun, store "
            "[fd00::7]:29500 (external, TORCHELASTIC_USE_AGENT_STORE), job run-7");
}

TEST(WorldStore, WeirdNewInputNeverCrashes) {
  const std::string weird[] = {"",        " ",     "\xff\xfe", "日本",  "[",
                               "]",       "[]",    "[1-",      "::",    "tcp://[",
                               "a[0-99999999999]", std::string(5000, '9'),
                               std::string(5000, '[')};
  const char* vars[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_JOB_ID",
                        "SLURM_STEP_ID",       "PET_NPROC_PER_NODE", "TORCHELASTIC_USE_AGENT_STORE",
                        "TORCHELASTIC_RESTART_COUNT", "NCCLSMOKE_JOB_ID", "TORCHELASTIC_RUN_ID"};
  for (const auto& value : weird) {
    for (const Env& base : {slurm_step(), torchrun_agent("True"), pytorchjob_pod("1")}) {
      for (const char* var : vars) {
        Env env = base;
        env[var] = value;
        auto r = discover(env);
        bool has_error = false;
        for (const auto& f : r.findings) {
          has_error |= severity_of(f) == "error";
          EXPECT_LE(f.value.size(), 4 * 96u + 8);
          for (char c : f.value + f.message + f.hint) {
            unsigned char u = static_cast<unsigned char>(c);
            EXPECT_TRUE(u >= 0x20 && u < 0x7f) << var << " message has byte " << int(u);
          }
        }
        EXPECT_EQ(r.world.has_value(), !has_error) << var << "=" << value << "\n" << dump(r);
        if (r.world) {
          EXPECT_LE(r.world->job_id.size(), 128u);
        }
      }
    }
    WorldFlags flags{.store = value, .job_id = value};
    auto r = discover(kTorchrun, flags);
    EXPECT_FALSE(r.findings.empty());
  }
}

}  // namespace
}  // namespace ncclsmoke::harness

// ---- a config error keeps the world it could read (WorldResult::partial) ----
namespace ncclsmoke::harness {
namespace {

const Env kSlurmTask1{{"SLURM_PROCID", "1"},         {"SLURM_NTASKS", "2"},
                      {"SLURM_LOCALID", "1"},        {"SLURM_JOB_ID", "4242"},
                      {"SLURM_STEP_ID", "0"},        {"SLURM_STEP_NODELIST", "gpu-001"}};

// The case: only MASTER_PORT is bad; the rank, size, source and job id were valid and
// stay, so this rank's verdict is verdict.rank1.json naming them.
TEST(WorldPartial, BadMasterPortKeepsRankSizeSourceAndJobId) {
  Env env = kSlurmTask1;
  env["MASTER_PORT"] = "tcp://10.0.0.1:29500";
  auto r = discover(env);
  expect_one_error(r, "CONFIG_INVALID", "MASTER_PORT");
  ASSERT_TRUE(r.partial) << dump(r);
  EXPECT_EQ(r.partial->rank, 1);
  EXPECT_EQ(r.partial->world_size, 2);
  EXPECT_EQ(r.partial->local_rank, 1);
  EXPECT_EQ(results::name(r.partial->source), "slurm");
  EXPECT_EQ(r.partial->job_id, "4242.0");
  EXPECT_EQ(r.partial->job_id_source, "SLURM_JOB_ID");
  EXPECT_EQ(r.partial->sources_by_field.at("rank"), "SLURM_PROCID");
  // The bad field is not claimed as read: it keeps its default source.
  EXPECT_EQ(r.partial->sources_by_field.at("master_port"), "default");
}

// The size is unreadable but the rank is not: the rank is kept, the size says 0 (unknown).
TEST(WorldPartial, BadWorldSizeKeepsTheRankWithSizeZero) {
  Env env = kSlurmTask1;
  env["SLURM_NTASKS"] = "two";
  auto r = discover(env);
  expect_one_error(r, "CONFIG_INVALID", "SLURM_NTASKS");
  ASSERT_TRUE(r.partial) << dump(r);
  EXPECT_EQ(r.partial->rank, 1);
  EXPECT_EQ(r.partial->world_size, 0);
  EXPECT_EQ(r.partial->sources_by_field.count("world_size"), 0u);
}

// The rank itself is unreadable: nothing to name a verdict after (invalid-config.<pid> stays).
TEST(WorldPartial, UnreadableRankKeepsNoPartialWorld) {
  Env env = kSlurmTask1;
  env["SLURM_PROCID"] = "abc";
  auto r = discover(env);
  expect_one_error(r, "CONFIG_INVALID", "SLURM_PROCID");
  EXPECT_FALSE(r.partial) << dump(r);
}

// A rank outside the world is not a rank either.
TEST(WorldPartial, RankOutsideTheWorldKeepsNoPartialWorld) {
  Env env = kSlurmTask1;
  env["SLURM_PROCID"] = "5";
  auto r = discover(env);
  EXPECT_FALSE(r.world) << dump(r);
  EXPECT_FALSE(r.partial) << dump(r);
}

// A PyTorchJob pod started without torchrun: RANK is the pod's index, not this process's rank,
// so it must not name a verdict.rank<N>.json.
TEST(WorldPartial, PyTorchJobPodIndexIsNotKeptAsARank) {
  auto r = discover(pytorchjob_pod("8"));
  expect_one_error(r, "CONFIG_INVALID", "PET_NPROC_PER_NODE");
  EXPECT_FALSE(r.partial) << dump(r);
}

// A valid world is whole, never partial.
TEST(WorldPartial, ValidWorldHasNoPartial) {
  auto r = discover(kSlurmTask1);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_FALSE(r.partial);
}

}  // namespace
}  // namespace ncclsmoke::harness

// ---- the service-link (MASTER_PORT=tcp://...) fix fits the launcher ----
namespace ncclsmoke::harness {
namespace {

// Under Slurm outside Kubernetes the fix is to unset MASTER_PORT (the job-derived port applies),
// not a pod-spec field.
TEST(WorldServiceLink, SlurmSaysUnsetMasterPort) {
  Env env = kSlurmTask1;
  env["MASTER_PORT"] = "tcp://10.0.0.1:29500";
  auto f = expect_one_error(discover(env), "CONFIG_INVALID", "MASTER_PORT");
  EXPECT_TRUE(contains(f.hint, "unset MASTER_PORT")) << f.hint;
  EXPECT_TRUE(contains(f.hint, "derived from SLURM_JOB_ID")) << f.hint;
  EXPECT_FALSE(contains(f.hint, "enableServiceLinks")) << f.hint;
  EXPECT_FALSE(contains(f.message, "a Kubernetes service link, not a port")) << f.message;
}

// mpirun outside Kubernetes: set the number and export it to every rank.
TEST(WorldServiceLink, OpenMpiSaysExportThePortNumber) {
  Env env{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"},
          {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "tcp://10.0.0.1:29500"}};
  auto f = expect_one_error(discover(env), "CONFIG_INVALID", "MASTER_PORT");
  EXPECT_TRUE(contains(f.hint, "mpirun -x MASTER_PORT=29500")) << f.hint;
  EXPECT_FALSE(contains(f.hint, "enableServiceLinks")) << f.hint;
}

// In a pod (KUBERNETES_SERVICE_HOST set), even srun or mpirun there gets the pod-spec fix.
TEST(WorldServiceLink, InAPodEveryLauncherGetsThePodSpecFix) {
  Env env = kSlurmTask1;
  env["MASTER_PORT"] = "tcp://10.0.0.1:29500";
  env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1";
  auto f = expect_one_error(discover(env), "CONFIG_INVALID", "MASTER_PORT");
  EXPECT_EQ(f.hint.rfind("set enableServiceLinks: false in the pod spec (or rename the Service), "
                         "or pass --master-port 29500",
                         0),
            0u)
      << f.hint;
}

// torchrun outside a pod: may still be Kubernetes-born, so both fixes, the pod's first.
TEST(WorldServiceLink, TorchrunOutsideAPodSaysWhatToSetToo) {
  Env env = kTorchrun;
  env["MASTER_PORT"] = "tcp://10.0.0.7:29500";
  auto f = expect_one_error(discover(env), "CONFIG_INVALID", "MASTER_PORT");
  EXPECT_TRUE(contains(f.hint, "elsewhere set MASTER_PORT to the port number only "
                               "(MASTER_PORT=29500)"))
      << f.hint;
}

}  // namespace
}  // namespace ncclsmoke::harness

// ---- the launchers of 2026's Kubernetes controllers (harness/world/launchers.cpp) ----
namespace ncclsmoke::harness {
namespace {

// training-operator envvar.go with nprocPerNode "auto": WORLD_SIZE = replicas x 1, RANK = the pod
// index. One process per pod is then a whole world, named as a PyTorchJob, not torchrun.
TEST(WorldPyTorchJob, AutoWithOneProcessPerPodIsAWorldOfPods) {
  Env env = pytorchjob_pod("auto");
  env["WORLD_SIZE"] = "2";
  auto r = discover(env, {}, "bert-worker-0");
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 1);
  EXPECT_EQ(r.world->world_size, 2);
  EXPECT_EQ(results::name(r.world->source), "pytorchjob");
  EXPECT_EQ(r.world->master_addr, "bert-master-0");
  EXPECT_EQ(r.world->master_port, 23456);
  EXPECT_EQ(r.world->job_id, "bert");
}

// Under torchrun inside the pod it is torchrun's world.
TEST(WorldPyTorchJob, UnderTorchrunTheSourceIsTorchrun) {
  Env env = pytorchjob_pod("8");
  env["TORCHELASTIC_RUN_ID"] = "bert";
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(results::name(r.world->source), "torchrun");
}

// kubeflow/trainer pkg/runtime/framework/plugins/torch/torch.go: PET_* only, no RANK/WORLD_SIZE.
Env trainjob_node(const std::string& node_rank, const std::string& nproc = "auto") {
  return {{"PET_NNODES", "2"},
          {"PET_NPROC_PER_NODE", nproc},
          {"PET_NODE_RANK", node_rank},
          {"PET_MASTER_ADDR", "tj-node-0-0.tj"},
          {"PET_MASTER_PORT", "29500"},
          {"JOB_COMPLETION_INDEX", "0"},
          {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}};
}

TEST(WorldTrainerV2, OneRankPerNodeFromPetVariables) {
  for (const char* nproc : {"auto", "4", "1"}) {
    auto r = discover(trainjob_node("1", nproc), {}, "tj-node-1-0");
    ASSERT_TRUE(r.world) << nproc << ": " << dump(r);
    EXPECT_EQ(r.world->rank, 1);
    EXPECT_EQ(r.world->world_size, 2);
    EXPECT_EQ(r.world->master_addr, "tj-node-0-0.tj");
    EXPECT_EQ(r.world->master_port, 29500);
    EXPECT_EQ(results::name(r.world->source), "trainer-v2");
    EXPECT_EQ(r.world->sources_by_field.at("rank"), "PET_NODE_RANK");
    EXPECT_EQ(r.world->sources_by_field.at("master_addr"), "PET_MASTER_ADDR");
    EXPECT_EQ(r.world->job_id, "tj");
    EXPECT_EQ(r.world->job_id_source, "hostname (TrainJob)");
  }
}

TEST(WorldTrainerV2, MissingMasterNamesPetMasterAddr) {
  Env env = trainjob_node("1");
  env.erase("PET_MASTER_ADDR");
  auto f = expect_one_error(discover(env, {}, "tj-node-1-0"), "CONFIG_MISSING", "PET_MASTER_ADDR");
  EXPECT_TRUE(contains(f.hint, "Trainer v2 sets PET_MASTER_ADDR")) << f.hint;
}

// kubernetes-sigs/lws pkg/utils/pod/pod_utils.go: LWS_LEADER_ADDRESS, LWS_GROUP_SIZE,
// LWS_WORKER_INDEX; no MASTER_*.
Env lws_pod(const std::string& index) {
  return {{"LWS_LEADER_ADDRESS", "smoke-0.smoke.default"},
          {"LWS_GROUP_SIZE", "4"},
          {"LWS_WORKER_INDEX", index},
          {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}};
}

TEST(WorldLeaderWorkerSet, TheGroupIsTheWorld) {
  auto r = discover(lws_pod("3"), {}, "smoke-0-3");
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->rank, 3);
  EXPECT_EQ(r.world->world_size, 4);
  EXPECT_EQ(r.world->master_addr, "smoke-0.smoke.default");
  EXPECT_EQ(r.world->master_port, kDefaultMasterPort);
  EXPECT_EQ(results::name(r.world->source), "leaderworkerset");
  EXPECT_EQ(r.world->job_id, "smoke-0");
  EXPECT_EQ(r.world->job_id_source, "LWS_LEADER_ADDRESS");
  Env env = lws_pod("0");
  env["MASTER_PORT"] = "29511";
  r = discover(env, {}, "smoke-0");
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->master_port, 29511);
}

TEST(WorldLeaderWorkerSet, AnIndexOutsideTheGroupIsInvalid) {
  auto f = expect_one_error(discover(lws_pod("4"), {}, "smoke-0-4"), "CONFIG_INVALID",
                            "LWS_WORKER_INDEX");
  EXPECT_TRUE(contains(f.message, "not below the world size 4")) << f.message;
}

// A JobSet with 2 child Jobs x 2 pods (js-w-{0,1}-{0,1}): our manifests pass the JobSet's labels
// and annotations through the downward API.
Env jobset_pod(const std::string& job, const std::string& pod, bool downward = true) {
  Env env{{"JOB_COMPLETION_INDEX", pod},
          {"WORLD_SIZE", "4"},
          {"MASTER_ADDR", "js-w-0-0.js"},
          {"MASTER_PORT", "29500"},
          {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}};
  if (downward) {
    env["JOBSET_NAME"] = "js";
    env["JOBSET_JOB_GLOBAL_INDEX"] = job;
    env["JOBSET_GLOBAL_REPLICAS"] = "2";
  }
  return env;
}

TEST(WorldJobSet, GlobalRankFromJobIndexAndPodIndex) {
  std::set<int> ranks;
  for (const char* job : {"0", "1"})
    for (const char* pod : {"0", "1"}) {
      auto r = discover(jobset_pod(job, pod), {}, fmt::format("js-w-{}-{}", job, pod));
      ASSERT_TRUE(r.world) << dump(r);
      EXPECT_EQ(r.world->rank, std::stoi(job) * 2 + std::stoi(pod));
      ranks.insert(r.world->rank);
      EXPECT_EQ(r.world->world_size, 4);
      EXPECT_EQ(results::name(r.world->source), "jobset");
      EXPECT_EQ(r.world->job_id, "js");
      EXPECT_EQ(r.world->job_id_source, "JOBSET_NAME");
    }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
}

// The case: a JobSet without the downward-API variables looked like two Indexed Jobs
// (ranks 0,1 twice, two job ids). It is named as a JobSet and stops at once.
TEST(WorldJobSet, WithoutTheDownwardApiItIsNamedNotSplit) {
  auto r = discover(jobset_pod("1", "0", false), {}, "js-w-1-0");
  auto f = expect_one_error(r, "CONFIG_MISSING", "JOBSET_GLOBAL_REPLICAS");
  EXPECT_TRUE(contains(f.message, "JobSet js, replicated job w, child Job 1, pod 0")) << f.message;
  EXPECT_TRUE(contains(f.message, "JOBSET_JOB_GLOBAL_INDEX")) << f.message;
  EXPECT_TRUE(contains(f.hint, "metadata.annotations['jobset.sigs.k8s.io/global-replicas']"))
      << f.hint;
  EXPECT_FALSE(r.partial);
  // A plain Indexed Job (host <job>-<i>, MASTER_ADDR <job>-0.<service>) is not taken for one.
  Env indexed{{"JOB_COMPLETION_INDEX", "1"}, {"WORLD_SIZE", "2"},
              {"MASTER_ADDR", "smoke-0.smoke-svc"}};
  auto ir = discover(indexed, {}, "smoke-1");
  ASSERT_TRUE(ir.world) << dump(ir);
  EXPECT_EQ(results::name(ir.world->source), "k8s-indexed-job");
}

TEST(WorldJobSet, ReplicasThatDoNotDivideTheWorldAreInvalid) {
  Env env = jobset_pod("0", "1");
  env["JOBSET_GLOBAL_REPLICAS"] = "3";
  auto f = expect_one_error(discover(env, {}, "js-w-0-1"), "CONFIG_INVALID",
                            "JOBSET_GLOBAL_REPLICAS");
  EXPECT_TRUE(contains(f.message, "does not divide the world size 4")) << f.message;
}

TEST(WorldJobSet, HostNamePattern) {
  auto h = jobset_host("train-workers-3-7", "train-workers-0-0.train.ns.svc");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->jobset, "train");
  EXPECT_EQ(h->replicated_job, "workers");
  EXPECT_EQ(h->job_index, "3");
  EXPECT_EQ(h->pod_index, "7");
  EXPECT_FALSE(jobset_host("train-3-7", "train-0-0.train"));  // no replicated job
  EXPECT_FALSE(jobset_host("other-w-1-0", "js-w-0-0.js"));
  EXPECT_FALSE(jobset_host("js-w-1-0", "js-w-0-0"));
  EXPECT_EQ(trainjob_name("tj-node-1-0"), std::optional<std::string>("tj"));
  EXPECT_EQ(trainjob_name("tj-worker-1-0"), std::nullopt);
}

// kubeflow/mpi-operator v2: the launcher's OMPI_MCA_orte_default_hostfile, no MASTER_ADDR.
TEST(WorldMpiJob, MasterIsTheHostfilesFirstHost) {
  const std::string path = ::testing::TempDir() + "ncclsmoke-world-hostfile";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("# written by the controller\n\nmj-worker-0.mj.default.svc slots=8\n"
                "mj-worker-1.mj.default.svc slots=8\n",
                f);
    std::fclose(f);
  }
  Env env{{"OMPI_COMM_WORLD_RANK", "9"}, {"OMPI_COMM_WORLD_SIZE", "16"},
          {"OMPI_MCA_orte_default_hostfile", path}};
  auto r = discover(env);
  ASSERT_TRUE(r.world) << dump(r);
  EXPECT_EQ(r.world->master_addr, "mj-worker-0.mj.default.svc");
  EXPECT_EQ(r.world->sources_by_field.at("master_addr"), "OMPI_MCA_orte_default_hostfile");
  EXPECT_EQ(results::name(r.world->source), "openmpi");
  std::remove(path.c_str());
  // Where the file is not mounted (a worker pod), the hint says how to export MASTER_ADDR.
  auto f = expect_one_error(discover(env), "CONFIG_INVALID", "OMPI_MCA_orte_default_hostfile");
  EXPECT_TRUE(contains(f.hint, "mpirun -x MASTER_ADDR=$(head -1 /etc/mpi/hostfile")) << f.hint;
}

TEST(WorldLaunchers, EveryEntryIsNamedAndDetectedByItsOwnVariables) {
  std::set<std::string> names;
  for (const auto& l : launchers()) {
    EXPECT_TRUE(names.insert(l.name).second) << l.name;
    EXPECT_EQ(launcher_named(l.name), &l);
    EXPECT_EQ(launcher_of(l.source), &l);
    for (const char* a : l.aliases) EXPECT_EQ(launcher_named(a), &l) << a;
    EXPECT_NE(l.missing_master_hint, nullptr);
    EXPECT_FALSE(l.size_vars.empty());
    EXPECT_FALSE(l.addr_vars.empty());
  }
  EXPECT_EQ(launcher_named("flags"), nullptr);
  EXPECT_EQ(launcher_named("auto"), nullptr);
  EXPECT_TRUE(contains(launcher_choices(), "jobset")) << launcher_choices();
  auto f = expect_one_error(discover(kTorchrun, WorldFlags{.launcher = "sge"}), "CONFIG_INVALID",
                            "--launcher");
  EXPECT_TRUE(contains(f.hint, launcher_choices())) << f.hint;
}

}  // namespace
}  // namespace ncclsmoke::harness

// ---- RUN_TERMINATED's cause per launcher (launchers.cpp: stop_sender, stop_fix) ----
namespace ncclsmoke::harness {
namespace {

using results::WorldSource;

// activeDeadlineSeconds only where a Kubernetes Job (or a Kubeflow job) has one to raise.
TEST(WorldLaunchers, StopCauseAndFixFitTheLauncher) {
  for (const auto& l : launchers()) {
    auto c = termination_of(l.source);
    EXPECT_FALSE(c.sender.empty()) << l.name;
    EXPECT_FALSE(c.deadline_fix.empty()) << l.name;
    const bool k8s_deadline = l.source == WorldSource::k8s_indexed_job ||
                              l.source == WorldSource::pytorchjob ||
                              l.source == WorldSource::trainer_v2 ||
                              l.source == WorldSource::jobset;
    EXPECT_EQ(c.deadline_fix.find("activeDeadlineSeconds") != std::string::npos, k8s_deadline)
        << l.name << ": " << c.deadline_fix;
  }
  EXPECT_NE(termination_of(WorldSource::slurm).deadline_fix.find("raise the job's --time"),
            std::string::npos);
  EXPECT_NE(termination_of(WorldSource::openmpi).deadline_fix.find("raise mpirun's --timeout"),
            std::string::npos);
  EXPECT_EQ(termination_of(WorldSource::launch).sender.rfind("ncclsmoke launch", 0), 0u);
  EXPECT_EQ(termination_of(WorldSource::flags).sender, results::TerminationCause{}.sender);
  // Rendered through the rule, the message names the sender and the hint the fix.
  auto f = results::run_terminated_finding(rendezvous::RankRef{0, "h"}, "SIGTERM", 1.0, "world",
                                           termination_of(WorldSource::slurm));
  EXPECT_TRUE(contains(f.message, "likely sender: Slurm")) << f.message;
  EXPECT_TRUE(contains(f.hint, "raise the job's --time above --timeout")) << f.hint;
  EXPECT_FALSE(contains(f.hint, "activeDeadlineSeconds")) << f.hint;
}

}  // namespace
}  // namespace ncclsmoke::harness
