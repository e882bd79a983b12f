// The command line's contract: help and version exit 0; an unknown flag or a bad value prints one
// line naming it and exits 2; the store self-test passes on loopback.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <cstdlib>

#include "tests/harness/run_args.h"

namespace {

using Result = ncclsmoke::testing::CommandResult;
Result run(const std::string& args) {
  return ncclsmoke::testing::run_shell(std::string(NCCLSMOKE_BIN) + " " + args);
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

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  std::string dir = ::testing::TempDir() + "ncclsmoke-cli-" + std::to_string(::getpid());
  std::string mk = "mkdir -p " + dir;
  if (std::system(mk.c_str()) != 0) return "";
  std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

std::string read_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

// A baseline far above what loopback can do: the judged run must fail with a regression, and the
// verdict must record the profile it was judged against.
TEST(Cli, LaunchJudgedAgainstAProfileReportsABandwidthRegression) {
  auto profiles = write_temp("profiles.yaml", R"(profiles:
  - name: impossible
    description: a baseline no loopback run reaches
    transports:
      - transport: socket
        baselines:
          - world_size: 2
            busbw_gbps: 1000
            gate_bytes: 1048576
            source: "test"
)");
  ASSERT_FALSE(profiles.empty());
  auto dir = profiles.substr(0, profiles.rfind('/'));
  auto r = run("launch -n 2 --transports socket --min-bytes 1M --max-bytes 1M --gate-bytes 1M "
               "--iters 2 --profiles " + profiles + " --profile impossible --out-dir " + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  auto verdict = read_file(dir + "/verdict.json");
  EXPECT_NE(verdict.find("BANDWIDTH_REGRESSION"), std::string::npos) << verdict.substr(0, 2000);
  EXPECT_NE(verdict.find("\"impossible\""), std::string::npos);
}

TEST(Cli, AnUnknownProfileIsAConfigErrorBeforeTheNetwork) {
  auto profiles = write_temp("profiles2.yaml", "profiles: []\n");
  auto r = run("run --launcher flags --rank 0 --world-size 1 --profiles " + profiles +
               " --profile nope --out-dir " + profiles.substr(0, profiles.rfind('/')));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("CONFIG_INVALID"), std::string::npos) << r.out;
}

// --gate needs an expectation to fail closed on, and pins NCCL's network.
TEST(Cli, GateWithoutAnExpectationIsAUsageError) {
  auto r = run("run --launcher flags --rank 0 --world-size 1 --gate");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--gate"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--profile or --nccl-net"), std::string::npos) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  r = run("run --launcher flags --rank 0 --world-size 1 --gate --nccl-net Socket "
          "--nccl-policy observe");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--nccl-policy observe"), std::string::npos) << r.out;
}

// --history: rank 0 records the run; `history list` shows it and `history import` of the same
// verdict counts it as already stored.
TEST(Cli, LaunchRecordsItselfInTheHistory) {
  auto marker = write_temp("history-marker", "");
  ASSERT_FALSE(marker.empty());
  auto dir = marker.substr(0, marker.rfind('/'));
  std::string db = dir + "/runs.db";
  std::remove(db.c_str());
  auto r = run("launch -n 2 --transports socket --min-bytes 64K --max-bytes 64K --iters 2 "
               "--out-dir " + dir + " --history " + db);
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("history list --history " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"source\": \"run\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"transport\": \"socket\""), std::string::npos) << r.out;
  r = run("history import --history " + db + " " + dir + "/verdict.json");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("0 runs added, 1 already stored"), std::string::npos) << r.out;
  r = run("history list --history " + dir + "/absent.db");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("absent.db"), std::string::npos) << r.out;
}

// A rank stopped by SIGTERM (a Job's activeDeadlineSeconds, a deleted pod) still leaves a verdict
// naming the signal, in an --out-dir the run created itself.
TEST(Cli, SigtermStillLeavesAVerdict) {
  auto marker = write_temp("sigterm-marker", "");
  ASSERT_FALSE(marker.empty());
  std::string dir = marker.substr(0, marker.rfind('/')) + "/sigterm/nested";
  int free_port = ncclsmoke::testing::free_tcp_port();
  ASSERT_GT(free_port, 0);
  std::string port = std::to_string(free_port);
  // Rank 0 of 2 waits for a rank that never comes (join timeout 30 s); SIGTERM after 1 s.
  std::string cmd = std::string("timeout -s TERM 1 ") + NCCLSMOKE_BIN +
                    " run --launcher flags --rank 0 --world-size 2 --master-addr 127.0.0.1 "
                    "--master-port " + port + " --join-timeout 30 --quiet --out-dir " + dir +
                    " >/dev/null 2>&1";
  int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 124);  // timeout(1): the command was signalled
  auto verdict = read_file(dir + "/verdict.rank0.json");
  EXPECT_NE(verdict.find("RUN_TERMINATED"), std::string::npos) << verdict.substr(0, 2000);
  EXPECT_NE(verdict.find("stopped by SIGTERM"), std::string::npos) << verdict.substr(0, 2000);
}

// --gate without sweep flags measures exactly the profile band's gate size, and judges it.
TEST(Cli, GateMeasuresTheProfilesGateSize) {
  auto profiles = write_temp("gate-profiles.yaml", R"(profiles:
  - name: gate-loopback
    transports:
      - transport: socket
        baselines:
          - {world_size: 2, busbw_gbps: 0.001, gate_bytes: 262144, source: "test"}
)");
  ASSERT_FALSE(profiles.empty());
  auto dir = profiles.substr(0, profiles.rfind('/')) + "/gate";
  auto r = run("launch -n 2 --gate --transports socket --iters 2 --profiles " + profiles +
               " --profile gate-loopback --out-dir " + dir);
  EXPECT_EQ(r.code, 0) << r.out;
  auto verdict = read_file(dir + "/verdict.json");
  EXPECT_NE(verdict.find("\"bytes\": 262144"), std::string::npos) << verdict.substr(0, 3000);
  EXPECT_EQ(verdict.find("\"bytes\": 1048576"), std::string::npos) << "swept past the gate size";
  EXPECT_EQ(verdict.find("\"bytes\": 67108864"), std::string::npos) << "swept past the gate size";
}

}  // namespace

// ---- CLI conventions ----
namespace {

TEST(CliConventions, TopLevelHelpListsEveryExitCode) {
  auto r = run("--help");
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* code : {"  0  pass", "  1  fail", "  2  usage", "  3  degraded",
                           "  4  inconclusive", "  5  publish", "  6  publish", "  7  history",
                           "  8  run, launch"})
    EXPECT_NE(r.out.find(code), std::string::npos) << code << "\n" << r.out;
}

TEST(CliConventions, EveryCommandsHelpHasAnExample) {
  for (const char* cmd : {"run", "launch", "store serve", "store check", "store selftest",
                          "history import", "history list", "history prune", "baseline learn",
                          "report", "publish", "help"}) {
    auto r = run(std::string(cmd) + " --help");
    EXPECT_EQ(r.code, 0) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("Example:\n  "), std::string::npos) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("ncclsmoke " + std::string(cmd).substr(0, std::string(cmd).find(' '))),
              std::string::npos)
        << cmd << "\n" << r.out;
  }
}

TEST(CliConventions, HelpCommandShowsACommandsHelp) {
  auto r = run("help store serve");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--max-total-bytes"), std::string::npos) << r.out;
  r = run("help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Exit codes"), std::string::npos) << r.out;
  r = run("help histroy");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("did you mean 'history'?"), std::string::npos) << r.out;
}

TEST(CliConventions, ErrorsPointAtTheSubcommandsHelpAndSuggestTheFlag) {
  auto r = run("run --trasnports socket");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("did you mean '--transports'?"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(see 'ncclsmoke run --help')"), std::string::npos) << r.out;
  r = run("history list --histroy x.sqlite");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("did you mean '--history'?"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(see 'ncclsmoke history list --help')"), std::string::npos) << r.out;
  r = run("lanuch -n 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("did you mean 'launch'?"), std::string::npos) << r.out;
  // Nothing close: no suggestion, still the help to read.
  r = run("run --zzzzzzzz");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out.find("did you mean"), std::string::npos) << r.out;
  // A value refused: the flag is named, and the good words after it are no misspelling.
  r = run("run --socket-nconn 99 -n 1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--socket-nconn: '99' is out of range"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("did you mean"), std::string::npos) << r.out;
}

TEST(CliConventions, WorldFlagsAreTypedIntegers) {
  auto r = run("run --help");
  for (const char* flag : {"--rank INT", "--world-size INT", "--local-rank INT"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  EXPECT_NE(r.out.find("postgresql://"), std::string::npos) << r.out;
}

// One size grammar: `store serve` refuses "8GB" as `run --max-bytes` does, and takes 512M.
TEST(CliConventions, StoreServeAndRunShareTheSizeGrammar) {
  auto serve = run("store serve --max-total-bytes 8GB --duration 0.1");
  auto sweep = run("run --max-bytes 8MB --world-size 1 --transports none");
  EXPECT_EQ(serve.code, 2) << serve.out;
  EXPECT_EQ(sweep.code, 2) << sweep.out;
  EXPECT_NE(serve.out.find("'8GB'"), std::string::npos) << serve.out;
  auto ok = run("store serve --port 0 --max-total-bytes 512M --duration 0.2");
  EXPECT_EQ(ok.code, 0) << ok.out;
}

TEST(CliConventions, UnknownLauncherListsTheTable) {
  auto r = run("run --launcher sge --world-size 1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("jobset"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lws"), std::string::npos) << r.out;
}

}  // namespace

namespace {

// torchrun's underscore spellings are launch's flags too, and its numbers are typed.
TEST(CliConventions, LaunchTakesTorchrunsSpellings) {
  auto h = run("launch --help");
  for (const char* s : {"--nproc_per_node", "--node_rank", "--master_addr", "--master_port",
                        "--nproc_per_node INT", "--node-rank,--node_rank INT"})
    EXPECT_NE(h.out.find(s), std::string::npos) << s << "\n" << h.out;
  auto r = run("launch --nproc_per_node 2 --nnodes 1 --node_rank 0 --master_addr 127.0.0.1 "
               "--transports none --quiet --out-dir " + std::string(::testing::TempDir()) +
               "ncclsmoke-cli-torchrun-spellings");
  EXPECT_EQ(r.code, 0) << r.out;
}

}  // namespace
