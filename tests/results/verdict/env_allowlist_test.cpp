#include "results/verdict/env_allowlist.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace ncclsmoke::results {
namespace {

TEST(EnvAllowlist, KeepsOnlyAllowedNames) {
  const char* envp[] = {"NCCL_DEBUG=INFO",
                        "NCCL_SOCKET_IFNAME=^lo,docker",
                        "FI_PROVIDER=efa",
                        "OFI_NCCL_DISABLE_GDR=1",
                        "TORCH_DISTRIBUTED_DEBUG=DETAIL",
                        "GLOO_SOCKET_IFNAME=eth0",
                        "MASTER_ADDR=master.smoke.svc",
                        "MASTER_PORT=tcp://10.0.0.7:29500",
                        "RANK=3",
                        "WORLD_SIZE=4",
                        "LOCAL_RANK=0",
                        "CUDA_VISIBLE_DEVICES=0,1",
                        "OMPI_COMM_WORLD_RANK=3",
                        "SLURM_PROCID=3",
                        "SLURM_NTASKS=4",
                        "SLURM_LOCALID=0",
                        "JOB_COMPLETION_INDEX=3",
                        "NODE_NAME=ip-10-0-0-7",
                        // dropped:
                        "PATH=/usr/bin",
                        "HOME=/root",
                        "AWS_SECRET_ACCESS_KEY=abc",
                        "SLURM_JOB_ID=77",
                        "RANKX=1",
                        "XRANK=1",
                        "nccl_debug=INFO",
                        "NCCL_=x",
                        "=novalue",
                        "NOEQUALS",
                        nullptr};
  auto env = allowlisted_env(envp);
  EXPECT_EQ(env.size(), 18u);
  EXPECT_EQ(env.at("NCCL_SOCKET_IFNAME"), "^lo,docker");
  EXPECT_EQ(env.at("MASTER_PORT"), "tcp://10.0.0.7:29500");  // '=' inside values survives
  EXPECT_EQ(env.at("NODE_NAME"), "ip-10-0-0-7");
  for (const char* gone : {"PATH", "HOME", "AWS_SECRET_ACCESS_KEY", "SLURM_JOB_ID", "RANKX", "XRANK",
                           "nccl_debug", "NCCL_"}) {
    EXPECT_EQ(env.count(gone), 0u) << gone;
  }
}

TEST(EnvAllowlist, RedactsSecretsInAllowedNames) {
  const char* envp[] = {"NCCL_IB_TOKEN=t0p",   "TORCH_HUB_SECRET=s3",  "MASTER_PASSWORD=hunter2",
                        "FI_EFA_API_KEY=k",     "GLOO_token_file=/x",   "NCCL_NET=Socket",
                        "NCCL_IB_HCA=mlx5_0=1", nullptr};
  auto env = allowlisted_env(envp);
  ASSERT_EQ(env.size(), 7u);
  EXPECT_EQ(env.at("NCCL_IB_TOKEN"), kRedacted);
  EXPECT_EQ(env.at("TORCH_HUB_SECRET"), kRedacted);
  EXPECT_EQ(env.at("MASTER_PASSWORD"), kRedacted);
  EXPECT_EQ(env.at("FI_EFA_API_KEY"), kRedacted);
  EXPECT_EQ(env.at("GLOO_token_file"), kRedacted);
  EXPECT_EQ(env.at("NCCL_NET"), "Socket");
  EXPECT_EQ(env.at("NCCL_IB_HCA"), "mlx5_0=1");
}

TEST(EnvAllowlist, ReadsTheProcessEnvironmentByDefault) {
  ::setenv("NCCL_NCCLSMOKE_TEST_MARKER", "42", 1);
  ::setenv("NCCLSMOKE_UNLISTED_MARKER", "x", 1);
  auto env = allowlisted_env();
  EXPECT_EQ(env.at("NCCL_NCCLSMOKE_TEST_MARKER"), "42");
  EXPECT_EQ(env.count("NCCLSMOKE_UNLISTED_MARKER"), 0u);
  ::unsetenv("NCCL_NCCLSMOKE_TEST_MARKER");
  ::unsetenv("NCCLSMOKE_UNLISTED_MARKER");
}

// The job token is ncclsmoke's own secret: neither its value nor its file's path reaches a verdict.
TEST(EnvAllowlist, NeverCarriesTheJobToken) {
  const char* envp[] = {"NCCLSMOKE_JOB_TOKEN=hunter2-token", "NCCLSMOKE_JOB_TOKEN_FILE=/run/tok",
                        "NCCL_DEBUG=INFO", nullptr};
  auto env = allowlisted_env(envp);
  EXPECT_EQ(env.count("NCCLSMOKE_JOB_TOKEN"), 0u);
  EXPECT_EQ(env.count("NCCLSMOKE_JOB_TOKEN_FILE"), 0u);
  for (const auto& [k, v] : env) EXPECT_EQ(v.find("hunter2-token"), std::string::npos) << k;
  EXPECT_FALSE(env_name_allowed("NCCLSMOKE_JOB_TOKEN"));
  EXPECT_TRUE(env_name_secret("NCCLSMOKE_JOB_TOKEN"));
  ::setenv("NCCLSMOKE_JOB_TOKEN", "hunter2-token", 1);
  auto from_process = allowlisted_env();
  ::unsetenv("NCCLSMOKE_JOB_TOKEN");
  for (const auto& [k, v] : from_process)
    EXPECT_EQ(v.find("hunter2-token"), std::string::npos) << k;
}

}  // namespace
}  // namespace ncclsmoke::results
