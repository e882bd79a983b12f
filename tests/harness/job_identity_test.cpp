#include "harness/world/job_identity.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace ncclsmoke::harness {
namespace {

using Env = std::map<std::string, std::string>;

std::optional<JobIdentity> identity(const Env& env, std::optional<std::string> flag = std::nullopt,
                                    const std::string& host = "node-1") {
  return discover_job_identity(flag, map_environment(env), host);
}

void expect_identity(const std::optional<JobIdentity>& j, const std::string& id,
                     const std::string& source) {
  ASSERT_TRUE(j.has_value()) << "expected " << id << " from " << source;
  EXPECT_EQ(j->id, id);
  EXPECT_EQ(j->source, source);
}

TEST(JobIdentity, NoneWhenNothingNamesAJob) {
  EXPECT_FALSE(identity({}));
  EXPECT_FALSE(identity({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  EXPECT_FALSE(discover_job_identity(std::nullopt, Environment{}, "h"));
}

TEST(JobIdentity, FlagWinsOverEverything) {
  expect_identity(identity({{"NCCLSMOKE_JOB_ID", "env"}, {"SLURM_JOB_ID", "7"}}, "ci-42"), "ci-42",
                  "--job-id");
  expect_identity(identity({}, "  spaced  "), "spaced", "--job-id");
}

TEST(JobIdentity, OwnVariableThenTorchrun) {
  expect_identity(identity({{"NCCLSMOKE_JOB_ID", "mine"}, {"TORCHELASTIC_RUN_ID", "r1"}}), "mine",
                  "NCCLSMOKE_JOB_ID");
  expect_identity(identity({{"TORCHELASTIC_RUN_ID", "r1"}, {"SLURM_JOB_ID", "7"}}), "r1",
                  "TORCHELASTIC_RUN_ID");
}

TEST(JobIdentity, TorchrunDefaultRunIdNoneNamesNoJob) {
  EXPECT_FALSE(identity({{"TORCHELASTIC_RUN_ID", "none"}}));
  expect_identity(identity({{"TORCHELASTIC_RUN_ID", "none"}, {"SLURM_JOB_ID", "7"}}), "7",
                  "SLURM_JOB_ID");
}

TEST(JobIdentity, SlurmJobAndStep) {
  expect_identity(identity({{"SLURM_JOB_ID", "1234"}, {"SLURM_STEP_ID", "2"}}), "1234.2",
                  "SLURM_JOB_ID");
  expect_identity(identity({{"SLURM_JOB_ID", "1234"}}), "1234", "SLURM_JOB_ID");
  expect_identity(identity({{"SLURM_JOB_ID", "1234"}, {"SLURM_STEP_ID", "a/b"}}), "1234",
                  "SLURM_JOB_ID");
  expect_identity(identity({{"SLURM_JOB_ID", "1234"}, {"SLURM_STEP_ID", "batch"}}), "1234.batch",
                  "SLURM_JOB_ID");
}

TEST(JobIdentity, OpenMpiThenPmix) {
  expect_identity(identity({{"OMPI_MCA_ess_base_jobid", "3735552001"},
                            {"PMIX_NAMESPACE", "prterun-x-1"}}),
                  "3735552001", "OMPI_MCA_ess_base_jobid");
  expect_identity(identity({{"PMIX_NAMESPACE", "slurm.pmix.77.0"}}), "slurm.pmix.77.0",
                  "PMIX_NAMESPACE");
  expect_identity(identity({{"SLURM_JOB_ID", "77"}, {"PMIX_NAMESPACE", "slurm.pmix.77.0"}}), "77",
                  "SLURM_JOB_ID");
}

TEST(JobIdentity, PyTorchJobHostName) {
  const Env k8s{{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"RANK", "1"}};
  expect_identity(identity(k8s, std::nullopt, "bert-ft-master-0"), "bert-ft",
                  "hostname (PyTorchJob)");
  expect_identity(identity(k8s, std::nullopt, "bert-ft-worker-12"), "bert-ft",
                  "hostname (PyTorchJob)");
  // Not a replica's name.
  EXPECT_FALSE(identity(k8s, std::nullopt, "bert-ft-worker-x"));
  EXPECT_FALSE(identity(k8s, std::nullopt, "-worker-1"));
  EXPECT_FALSE(identity(k8s, std::nullopt, "web-5d8f9"));
  // Outside Kubernetes a host that happens to be called so names no job (ranks on differently
  // named machines would otherwise disagree).
  EXPECT_FALSE(identity({{"RANK", "1"}}, std::nullopt, "ci-worker-3"));
}

TEST(JobIdentity, IndexedJobHostName) {
  expect_identity(identity({{"JOB_COMPLETION_INDEX", "3"}}, std::nullopt, "smoke-28761-3"),
                  "smoke-28761", "hostname (Indexed Job)");
  EXPECT_FALSE(identity({{"JOB_COMPLETION_INDEX", "3"}}, std::nullopt, "smoke-28761-4"));
  EXPECT_FALSE(identity({{"JOB_COMPLETION_INDEX", "3"}}, std::nullopt, "-3"));
  EXPECT_FALSE(identity({{"JOB_COMPLETION_INDEX", "x"}}, std::nullopt, "smoke-x"));
}

TEST(JobIdentity, UnusableVariablesAreSkippedForTheNextSource) {
  const std::string long_id(129, 'a');
  for (const std::string& bad : {std::string(""), std::string("   "), std::string("a/b"),
                                std::string("a\x01"), std::string("caf\xc3\xa9"), long_id}) {
    expect_identity(identity({{"NCCLSMOKE_JOB_ID", bad}, {"SLURM_JOB_ID", "9"}}), "9",
                    "SLURM_JOB_ID");
    // A bad flag is skipped too (discover_world reports it).
    expect_identity(identity({{"SLURM_JOB_ID", "9"}}, bad), "9", "SLURM_JOB_ID");
  }
  expect_identity(identity({{"NCCLSMOKE_JOB_ID", std::string(128, 'b')}}), std::string(128, 'b'),
                  "NCCLSMOKE_JOB_ID");
}

TEST(JobIdentity, ProblemTextNamesTheRule) {
  EXPECT_EQ(job_id_problem("ok-1.2_3"), "");
  EXPECT_EQ(job_id_problem(""), "empty");
  EXPECT_NE(job_id_problem("a/b").find("'/'"), std::string::npos);
  EXPECT_NE(job_id_problem("a\tb").find("control"), std::string::npos);
  EXPECT_NE(job_id_problem(std::string(200, 'x')).find("200 characters"), std::string::npos);
}

TEST(JobIdentity, ThrowingEnvironmentIsHarmless) {
  auto j = discover_job_identity(
      "x", [](const std::string&) -> std::optional<std::string> { throw std::runtime_error("e"); },
      "h");
  expect_identity(j, "x", "--job-id");
  EXPECT_FALSE(discover_job_identity(
      std::nullopt,
      [](const std::string&) -> std::optional<std::string> { throw std::runtime_error("e"); },
      "h"));
}

}  // namespace
}  // namespace ncclsmoke::harness
