// The command line's contract: help and version exit 0; an unknown flag or a bad value prints one
// line naming it and exits 2; the store self-test passes on loopback.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

Result run(const std::string& args) {
  std::string cmd = std::string("timeout 60 ") + NCCLSMOKE_BIN + " " + args + " 2>&1";
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(Cli, HelpExitsZeroAndListsSubcommands) {
  auto r = run("--help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("store"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Exit codes"), std::string::npos) << r.out;
}

TEST(Cli, SubcommandHasItsOwnHelp) {
  auto r = run("store serve --help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--port"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--max-value-bytes"), std::string::npos) << r.out;
}

TEST(Cli, VersionPrintsNameAndVersion) {
  auto r = run("--version");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("ncclsmoke ", 0), 0u) << r.out;
}

TEST(Cli, UnknownFlagIsOneLineNamingItWithExitTwo) {
  auto r = run("store serve --no-such-flag");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--no-such-flag"), std::string::npos) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
}

TEST(Cli, BadValueIsOneLineNamingTheFlagWithExitTwo) {
  auto r = run("store serve --port abc");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--port"), std::string::npos) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;

  r = run("store serve --port 70000");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--port"), std::string::npos) << r.out;

  r = run("store check --dialect ancient");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--dialect"), std::string::npos) << r.out;
}

TEST(Cli, MissingSubcommandIsAUsageError) {
  auto r = run("");
  EXPECT_EQ(r.code, 2) << r.out;
  r = run("no-such-command");
  EXPECT_EQ(r.code, 2) << r.out;
}

TEST(Cli, StoreSelftestPassesInBothDialects) {
  auto r = run("store selftest");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("dialect legacy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dialect modern"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(Cli, CheckAgainstNothingFailsWithTheAddressInTheMessage) {
  // Port 1 on loopback: nothing listens there, so the connect is refused at once.
  auto r = run("store check --host 127.0.0.1 --port 1 --timeout 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("127.0.0.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("refused"), std::string::npos) << r.out;
}

}  // namespace
