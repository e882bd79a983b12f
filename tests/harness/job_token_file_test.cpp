// Where the job token comes from (harness/world/job_token.h): the flag's file, NCCLSMOKE_JOB_TOKEN,
// NCCLSMOKE_JOB_TOKEN_FILE; a file that cannot be used is a ConfigProblem naming it.
#include "harness/world/job_token.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ncclsmoke::harness {
namespace {

namespace fs = std::filesystem;

class JobTokenFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ncclsmoke-token-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ::unsetenv("NCCLSMOKE_JOB_TOKEN");
    ::unsetenv("NCCLSMOKE_JOB_TOKEN_FILE");
  }
  void TearDown() override {
    ::unsetenv("NCCLSMOKE_JOB_TOKEN");
    ::unsetenv("NCCLSMOKE_JOB_TOKEN_FILE");
    fs::remove_all(dir_);
  }
  std::string write(const std::string& name, const std::string& text) {
    auto p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  fs::path dir_;
};

TEST_F(JobTokenFile, StripsOneTrailingNewline) {
  EXPECT_EQ(read_job_token_file(write("a", "s3cret\n"), "--job-token-file").token, "s3cret");
  EXPECT_EQ(read_job_token_file(write("b", "s3cret"), "--job-token-file").token, "s3cret");
  EXPECT_EQ(read_job_token_file(write("c", "s3cret\n\n"), "--job-token-file").token, "s3cret\n");
  auto r = read_job_token_file(write("d", "s3cret\r\n"), "NCCLSMOKE_JOB_TOKEN_FILE");
  EXPECT_EQ(r.token, "s3cret");
  EXPECT_EQ(r.source, "NCCLSMOKE_JOB_TOKEN_FILE");
  EXPECT_FALSE(r.problem);
}

TEST_F(JobTokenFile, AFileThatCannotBeUsedIsNamed) {
  const std::string missing = (dir_ / "missing").string();
  const std::string bad[] = {missing, write("empty", ""), write("newline", "\n"), dir_.string(),
                             write("big", std::string(kMaxJobTokenFileBytes + 1, 'x'))};
  for (const auto& path : bad) {
    auto r = read_job_token_file(path, "--job-token-file");
    ASSERT_TRUE(r.problem) << path;
    EXPECT_TRUE(r.token.empty());
    EXPECT_EQ(r.problem->kind, results::ConfigProblem::Kind::invalid);
    EXPECT_EQ(r.problem->variable, "--job-token-file");
    EXPECT_EQ(r.problem->value, path);
    EXPECT_NE(r.problem->message.find(path), std::string::npos) << r.problem->message;
    EXPECT_FALSE(r.problem->hint.empty());
  }
  EXPECT_NE(read_job_token_file(missing, "x").problem->message.find("No such file"),
            std::string::npos);
}

TEST_F(JobTokenFile, TheFlagWinsThenTheTokenThenItsFile) {
  EXPECT_TRUE(resolve_job_token("").token.empty());
  EXPECT_FALSE(job_token_given(""));
  ::setenv("NCCLSMOKE_JOB_TOKEN_FILE", write("env-file", "from-env-file\n").c_str(), 1);
  EXPECT_EQ(resolve_job_token("").token, "from-env-file");
  ::setenv("NCCLSMOKE_JOB_TOKEN", "from-env", 1);
  EXPECT_EQ(resolve_job_token("").token, "from-env");
  EXPECT_EQ(resolve_job_token("").source, "NCCLSMOKE_JOB_TOKEN");
  EXPECT_EQ(resolve_job_token(write("flag", "from-flag")).token, "from-flag");
  EXPECT_TRUE(job_token_given(""));
  // Empty reads as unset (env.h): a manifest's `value: ""` means no token, not the token "".
  ::setenv("NCCLSMOKE_JOB_TOKEN", "", 1);
  ::unsetenv("NCCLSMOKE_JOB_TOKEN_FILE");
  EXPECT_FALSE(job_token_given(""));
  EXPECT_FALSE(resolve_job_token("").problem);
}

}  // namespace
}  // namespace ncclsmoke::harness
