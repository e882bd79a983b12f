// Input checked at the door: every bad run/launch flag value is a usage error (exit 2)
// with one line naming the flag, the value and what is accepted; an alias bomb in a profiles file
// is refused by `run` and `baseline learn`; an unusable history exits 7 from every command that
// reads it (history import/list, report, baseline learn) with the hint for its cause.
#include "harness/run/run_options.h"
#include "tests/harness/run_args.h"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ncclsmoke::harness {
namespace {

namespace fs = std::filesystem;

// Parses `args` as `run ARGS` would (world flags included); returns "" or the error CLI11 raises.
std::string parse_error(std::vector<std::string> args, RunOptions* out = nullptr) {
  CLI::App app("run");
  RunOptions o;
  std::string e = testing::parse_run_args(app, std::move(args), o);
  if (out && e.empty()) *out = o;
  return e;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(RunOptions, UnknownTransportNamesTheItemAndTheBackends) {
  auto e = parse_error({"--transports", "socket,sockte"});
  EXPECT_TRUE(has(e, "--transports")) << e;
  EXPECT_TRUE(has(e, "'sockte'")) << e;
  EXPECT_TRUE(has(e, "accepted: socket, fabric, mpi, nccl; or none")) << e;
  EXPECT_TRUE(has(parse_error({"--transports", "socket,socket"}), "listed twice"));
  EXPECT_TRUE(has(parse_error({"--transports", "none,socket"}), "'none' cannot be combined"));
  EXPECT_TRUE(has(parse_error({"--transports", ","}), "names no transport"));
  for (const char* ok : {"socket", "none", "socket,fabric,mpi,nccl", "nccl"})
    EXPECT_EQ(parse_error({"--transports", ok}), "") << ok;
}

TEST(RunOptions, MasterPortFlagMustBeAPort) {
  for (const char* bad : {"0", "70000", "65536", "-1", "abc", "29500x", " 29500", ""}) {
    auto e = parse_error({"--master-port", bad});
    EXPECT_TRUE(has(e, "--master-port")) << bad << ": " << e;
    EXPECT_TRUE(has(e, "accepted: an integer from 1 to 65535")) << bad << ": " << e;
  }
  RunOptions o;
  EXPECT_EQ(parse_error({"--master-port", "65535"}, &o), "");
  EXPECT_EQ(o.world.master_port.value_or(""), "65535");
  EXPECT_EQ(parse_error({"--master-port", "1"}), "");
}

TEST(RunOptions, EveryDeadlineIsFinitePositiveAndBounded) {
  for (const char* flag : {"--connect-timeout", "--join-timeout", "--mesh-timeout",
                           "--pair-timeout", "--timeout", "--op-timeout", "--transport-timeout"}) {
    for (const char* bad : {"nan", "NaN", "inf", "-inf", "1e308", "604801", "-1", "0", "abc",
                            "1s", ""}) {
      auto e = parse_error({flag, bad});
      EXPECT_TRUE(has(e, std::string(flag) + ":")) << flag << " " << bad << ": " << e;
      EXPECT_TRUE(has(e, "accepted: > 0 and <= 604800 (7 days)")) << flag << " " << bad << ": " << e;
    }
    EXPECT_EQ(parse_error({flag, "0.25"}), "") << flag;
    EXPECT_EQ(parse_error({flag, "604800"}), "") << flag;
  }
  // 0 means "no pause" for the hidden testing aid; CLI11 names no hidden flag, the check does.
  auto e = parse_error({"--hold-after-join", "-1"});
  EXPECT_TRUE(has(e, "--hold-after-join: '-1'")) << e;
  EXPECT_TRUE(has(e, ">= 0 and <= 604800")) << e;
  EXPECT_TRUE(has(parse_error({"--hold-after-join", "nan"}), "not a finite number"));
  EXPECT_EQ(parse_error({"--hold-after-join", "0"}), "");
}

// The door takes rendezvous/net.h's grammar, the one the mesh and the watch read the range with.
TEST(RunOptions, MeshPortRangeIsOrderedPorts) {
  for (const char* bad : {"65535-1", "0-10", "1-65536", "0", "65536", "a-b", "1-2-3", "-5", "5-",
                          " 1-2", "tcp://1.2.3.4:29500", ""}) {
    auto e = parse_error({"--mesh-port-range", bad});
    EXPECT_TRUE(has(e, "--mesh-port-range")) << bad << ": " << e;
    EXPECT_TRUE(has(e, "1 <= A <= B <= 65535")) << bad << ": " << e;
  }
  EXPECT_TRUE(has(parse_error({"--mesh-port-range", "65535-1"}), "reversed"));
  EXPECT_EQ(parse_error({"--mesh-port-range", "30000-30000"}), "");
  EXPECT_EQ(parse_error({"--mesh-port-range", "1-65535"}), "");
  EXPECT_EQ(parse_error({"--mesh-port-range", "30000"}), "");  // one port: 30000-30000
}

TEST(RunOptions, SizesFactorAndIterations) {
  for (const char* flag : {"--min-bytes", "--max-bytes", "--gate-bytes", "--socket-chunk"}) {
    for (const char* bad : {"1MB", "-1", "0", "2T", "x", "1.5M"}) {
      auto e = parse_error({flag, bad});
      EXPECT_TRUE(has(e, std::string(flag) + ":")) << flag << " " << bad << ": " << e;
      EXPECT_TRUE(has(e, "is not a size")) << flag << " " << bad << ": " << e;
    }
  }
  auto e = parse_error({"--min-bytes", "2M", "--max-bytes", "1M"});
  EXPECT_TRUE(has(e, "--min-bytes: '2M' is larger than --max-bytes '1M'")) << e;
  EXPECT_EQ(parse_error({"--min-bytes", "1M", "--max-bytes", "1M"}), "");
  for (const char* bad : {"nan", "inf", "1", "1025", "x"})
    EXPECT_TRUE(has(parse_error({"--factor", bad}), "accepted: a number from 1.01 to 1024")) << bad;
  EXPECT_TRUE(has(parse_error({"--iters", "0"}), "--iters"));
  EXPECT_TRUE(has(parse_error({"--iters", "100001"}), "--iters"));
  EXPECT_TRUE(has(parse_error({"--warmup-iters", "-1"}), "--warmup-iters"));
  EXPECT_TRUE(has(parse_error({"--iters", "nan"}), "--iters"));
  EXPECT_EQ(parse_error({"--iters", "1", "--warmup-iters", "0", "--factor", "4"}), "");
}

// launch forwards run_option_args to its ranks: what it writes must pass the same checks.
TEST(RunOptions, ForwardedArgumentsPassTheChecks) {
  RunOptions o;
  ASSERT_EQ(parse_error({"--timeout", "0.5", "--hold-after-join", "2.5", "--mesh-port-range",
                         "30000-30100", "--transports", "socket,mpi", "--factor", "1.5"},
                        &o),
            "");
  auto args = run_option_args(o);
  EXPECT_EQ(parse_error(args), "");
}

// ---- the whole binary: exit codes and one-line messages ------------------------------------

using Result = testing::CommandResult;
Result sh(const std::string& cmd) { return testing::run_shell(cmd); }

Result bin(const std::string& args) { return sh(std::string(NCCLSMOKE_BIN) + " " + args); }

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

class DoorCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ncclsmoke-door-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::string p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  std::string d() const { return dir_.string(); }
  fs::path dir_;
};

TEST_F(DoorCli, BadRunAndLaunchValuesExitTwoBeforeAnythingStarts) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run --transports sockte", "--transports: unknown transport 'sockte'"},
      {"launch -n 2 --transports sockte", "--transports: unknown transport 'sockte'"},
      {"run --master-port 0", "--master-port: '0' is not a port"},
      {"run --master-port 70000", "--master-port: '70000' is not a port"},
      {"run --master-port -1", "--master-port: '-1' is not a port"},
      {"run --timeout nan", "--timeout: 'nan' is not a finite number"},
      {"run --timeout 1e308", "--timeout: '1e308' seconds is out of range"},
      {"launch -n 2 --join-timeout inf", "--join-timeout: 'inf' is not a finite number"},
      {"run --mesh-port-range 65535-1", "--mesh-port-range: '65535-1' is reversed"},
      {"run --hold-after-join -1", "error: --hold-after-join: '-1'"},
      {"publish v.json --timeout nan", "--timeout: 'nan' is not accepted (accepted: a number from 0.1 to 600)"},
  };
  for (const auto& [args, want] : cases) {
    const bool is_run = args.rfind("run ", 0) == 0 || args.rfind("launch ", 0) == 0;
    auto r = bin(args + (is_run ? " --out-dir " + d() : ""));
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_TRUE(has(r.out, want)) << args << ": " << r.out;
    EXPECT_EQ(lines(r.out), 1) << args << ": " << r.out;
  }
  EXPECT_FALSE(fs::exists(dir_ / "verdict.json"));  // nothing ran
}

// The flags generated from the backends' declarations (transports/options.h) take the same door.
TEST_F(DoorCli, BadBackendOptionValuesExitTwoNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run --socket-chunk 12X", "--socket-chunk: '12X' is not a size (accepted: a size from 1K to 256M"},
      {"run --socket-bufsize 2G", "--socket-bufsize: '2G' is not a size (accepted: a size from 0 to 1G"},
      {"launch -n 2 --fabric-window 0", "--fabric-window: '0' is out of range (accepted: an integer from 1 to 256)"},
      {"run --fabric-hw-counters maybe", "--fabric-hw-counters: 'maybe' is not accepted (accepted: auto, always or never)"},
      {"run --mpi-collective reduce", "--mpi-collective: 'reduce' is not accepted (accepted: allreduce or iallreduce)"},
      {"run --gpu x", "--gpu: 'x' is not an integer (accepted: an integer from 0 to 1023)"},
      {"launch -n 2 --nccl-policy sometimes", "--nccl-policy: 'sometimes' is not accepted (accepted: pin or observe)"},
      {"run --max-bytes 64MB", "--max-bytes: '64MB' is not a size"},
  };
  for (const auto& [args, want] : cases) {
    auto r = bin(args + " --out-dir " + d());
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_TRUE(has(r.out, want)) << args << ": " << r.out;
    EXPECT_EQ(lines(r.out), 1) << args << ": " << r.out;
  }
  EXPECT_FALSE(fs::exists(dir_ / "verdict.json"));  // nothing ran
}

// A bad MASTER_PORT *variable* comes from the environment, not the command line: it stays a
// CONFIG_INVALID finding in the verdict (exit 1).
TEST_F(DoorCli, BadMasterPortVariableStaysAFinding) {
  auto r = sh("env MASTER_PORT=70000 RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 " +
              std::string(NCCLSMOKE_BIN) + " run --launcher torchrun --transports none --out-dir " + d());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "CONFIG_INVALID")) << r.out;
}

std::string alias_bomb() {
  std::string t = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 9; ++i) {
    t += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) t += (k ? ", *l" : "*l") + std::to_string(i - 1);
    t += "]\n";
  }
  return t + "profiles: [{name: x, transports: [{transport: socket, identity: {b: *l8}}]}]\n";
}

TEST_F(DoorCli, AliasBombIsRefusedByRunAndBaselineLearn) {
  auto bomb = write("bomb.yaml", alias_bomb());
  auto t0 = std::chrono::steady_clock::now();
  auto r = bin("run --launcher flags --rank 0 --world-size 1 --transports none --profiles " + bomb +
               " --profile x --out-dir " + d());
  double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 1) << r.out;  // a CONFIG_INVALID finding, as for any bad profiles file
  EXPECT_TRUE(has(r.out, "CONFIG_INVALID")) << r.out;
  EXPECT_TRUE(has(r.out, "alias bomb")) << r.out;
  std::string verdict;
  {  // the world phase failed before the store: the rank's local verdict
    std::ifstream in(dir_ / "verdict.rank0.json");
    verdict.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_TRUE(has(verdict, "alias bomb")) << verdict.substr(0, 3000);
  EXPECT_TRUE(has(verdict, bomb)) << verdict.substr(0, 3000);

  auto h = write("h.db", "");
  t0 = std::chrono::steady_clock::now();
  r = bin("baseline learn --history " + h + " --profiles " + bomb + " --profile x");
  double learn_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r.out, bomb)) << r.out;
  EXPECT_TRUE(has(r.out, "alias bomb")) << r.out;
  EXPECT_EQ(lines(r.out), 1) << r.out;
  std::printf("alias bomb refused: run %.3f s (whole process), baseline learn %.3f s\n", run_s,
              learn_s);
}

TEST_F(DoorCli, UnusableHistoryExitsSevenWithTheHintEverywhere) {
  auto db = write("history.db", std::string(8192, 'x'));  // not a database
  auto v = write("v.json", "{}");
  auto profiles = write("p.yaml", "profiles: [{name: x, transports: [{transport: socket}]}]\n");
  const std::vector<std::string> commands = {
      "history import --history " + db + " " + v,
      "history list --history " + db,
      "history prune --history " + db + " --older-than 90d",
      "report --history " + db,
      "baseline learn --history " + db + " --profiles " + profiles + " --profile x",
  };
  for (const auto& c : commands) {
    auto r = bin(c);
    EXPECT_EQ(r.code, 7) << c << ": " << r.out;
    EXPECT_TRUE(has(r.out, "mv " + db + " " + db + ".corrupt")) << c << ": " << r.out;
    EXPECT_TRUE(has(r.out, "ncclsmoke history import")) << c << ": " << r.out;
    EXPECT_EQ(lines(r.out), 1) << c << ": " << r.out;
  }
  // A missing history file is still a bad flag value.
  auto r = bin("report --history " + d() + "/absent.db");
  EXPECT_EQ(r.code, 2) << r.out;
}

}  // namespace
}  // namespace ncclsmoke::harness
