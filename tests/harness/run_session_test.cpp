// The sequencer of `ncclsmoke run` (harness/run/run_session.h) with its ranks as threads of this
// process (tests/harness/in_process_run.h): the real store, mesh, liveness watch and transports,
// judged into the verdicts the ranks write, with no process started and nothing slept.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>

#include "harness/run/gather.h"
#include "results/verdict/phase_id.h"
#include "tests/results/sample.h"
#include "tests/harness/in_process_run.h"

namespace ncclsmoke {
namespace {

using results::Outcome;
using results::PhaseStatus;
using results::RankStatus;
using testing::InProcessRun;
using testing::run_in_process;

const auto phase = testing::find_phase;
const auto codes = testing::finding_codes;
const auto finding = testing::find_finding;

// Whether `r` is one of the ranks the entries of `v.ranks` with status `s` stand for.
bool rank_has_status(const results::Verdict& v, int r, RankStatus s) {
  for (const auto& e : v.ranks)
    if (e.status == s && r >= e.rank && r <= std::max(e.rank, e.through)) return true;
  return false;
}

// A small socket sweep: two sizes, two timed iterations each.
void small_socket_sweep(harness::RunOptions& o) {
  o.transports = "socket";
  o.min_bytes = 64 << 10;
  o.max_bytes = 128 << 10;
  o.iters = 2;
  o.pairwise.mode = results::PairwiseRequest::never;
}

TEST(RunInProcess, FourHealthyRanksPassEveryPhase) {
  const InProcessRun run = run_in_process(4, [](int, harness::RunOptions& o) { small_socket_sweep(o); });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(run.codes[r], 0) << "rank " << r << "; verdicts in " << run.out_dir;
    EXPECT_FALSE(run.watchdog_exited[r]) << "rank " << r;
    auto local = run.local(r);
    ASSERT_TRUE(local) << "verdict.rank" << r << ".json in " << run.out_dir;
    EXPECT_EQ(local->reporting_rank, r);
  }
  auto v = run.global();
  ASSERT_TRUE(v) << "verdict.json in " << run.out_dir;
  EXPECT_EQ(v->verdict, Outcome::pass) << "findings: " << ::testing::PrintToString(codes(*v));
  EXPECT_EQ(v->scope, results::Scope::global);
  EXPECT_EQ(v->world.size, 4);
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(rank_has_status(*v, r, RankStatus::joined)) << r;
  for (const std::string& name : std::vector<std::string>{
           "world", "rendezvous", "mesh", results::transport_phase_name("socket")}) {
    const auto* p = phase(*v, name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->status, PhaseStatus::pass) << name << ": " << p->detail;
  }
  // Every rank measured both sizes, and the data was checked.
  std::set<std::pair<int, std::int64_t>> measured;
  for (const auto& row : v->transports) {
    if (row.transport != "socket" || row.rank < 0) continue;
    EXPECT_EQ(row.wrong, 0) << "rank " << row.rank << " at " << row.bytes;
    measured.insert({row.rank, row.bytes});
  }
  EXPECT_EQ(measured.size(), 8u);
  // No pairwise phase was asked for.
  EXPECT_EQ(phase(*v, results::pairwise_phase_name("socket")), nullptr);
}

TEST(RunInProcess, ARankThatNeverJoinsIsNamedMissingAndTheOthersGoOn) {
  // Rank 3 of 4 never starts; the join waits 1 s for it.
  const InProcessRun run = run_in_process(
      4,
      [](int, harness::RunOptions& o) {
        small_socket_sweep(o);
        o.join_timeout_s = 1;
      },
      {3});
  EXPECT_EQ(run.codes[3], -1);
  auto v = run.global();
  ASSERT_TRUE(v) << "verdict.json in " << run.out_dir;
  EXPECT_NE(run.codes[0], 0);
  EXPECT_NE(v->verdict, Outcome::pass);
  const auto* missing = finding(*v, "RANKS_MISSING");
  ASSERT_NE(missing, nullptr) << "findings: " << ::testing::PrintToString(codes(*v));
  EXPECT_EQ(missing->ranks, std::vector<int>{3});
  EXPECT_TRUE(rank_has_status(*v, 3, RankStatus::missing));
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(rank_has_status(*v, r, RankStatus::joined)) << r;
    EXPECT_FALSE(run.watchdog_exited[r]) << r;
  }
  // Nobody else is blamed.
  for (const auto& f : v->findings) {
    if (f.code.str() == "RANKS_MISSING") continue;
    for (int r : f.ranks) EXPECT_EQ(r, 3) << f.code.str() << ": " << f.message;
  }
}

TEST(RunInProcess, ACollectivePastItsDeadlineIsATransportTimeout) {
  // 64 MiB across 4 ranks in 1 ms: no machine does that, so every rank's first collective is
  // aborted at its deadline.
  const InProcessRun run = run_in_process(4, [](int, harness::RunOptions& o) {
    small_socket_sweep(o);
    o.min_bytes = o.max_bytes = std::size_t{64} << 20;
    o.op_timeout_s = 0.001;
    o.transport_timeout_s = 20;
  });
  auto v = run.global();
  ASSERT_TRUE(v) << "verdict.json in " << run.out_dir;
  EXPECT_NE(run.codes[0], 0);
  EXPECT_NE(v->verdict, Outcome::pass);
  EXPECT_TRUE(codes(*v).count("TRANSPORT_TIMEOUT"))
      << "findings: " << ::testing::PrintToString(codes(*v));
  const auto* p = phase(*v, results::transport_phase_name("socket"));
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->status, PhaseStatus::pass) << p->detail;
  // The run itself ended in time: its own deadline was not what stopped it.
  EXPECT_FALSE(codes(*v).count("RUN_TIMEOUT"));
  for (int r = 0; r < 4; ++r) EXPECT_FALSE(run.watchdog_exited[r]) << r;
  // The earlier phases are untouched by it.
  for (const std::string name : {"rendezvous", "mesh"}) {
    const auto* earlier = phase(*v, name);
    ASSERT_NE(earlier, nullptr) << name;
    EXPECT_EQ(earlier->status, PhaseStatus::pass) << name;
  }
}

TEST(RunInProcess, APairwiseRoundMeetsEveryPairOnBothSides) {
  const InProcessRun run = run_in_process(4, [](int, harness::RunOptions& o) {
    small_socket_sweep(o);
    o.pairwise.mode = results::PairwiseRequest::always;
    o.pairwise.bytes = 64 << 10;
    o.pairwise.iters = 2;
  });
  auto v = run.global();
  ASSERT_TRUE(v) << "verdict.json in " << run.out_dir;
  for (int r = 0; r < 4; ++r) EXPECT_EQ(run.codes[r], 0) << r;
  EXPECT_EQ(v->verdict, Outcome::pass) << "findings: " << ::testing::PrintToString(codes(*v));
  const auto* p = phase(*v, results::pairwise_phase_name("socket"));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->status, PhaseStatus::pass) << p->detail;
  EXPECT_NE(p->detail.find("3 rounds of"), std::string::npos) << p->detail;
  // 4 ranks meet in 3 rounds: each pair once, measured by both of its ranks in the same round.
  EXPECT_EQ(testing::expect_pairs_on_both_sides(*v, 3).size(), 6u);
}

TEST(RunInProcess, ASweepPastTimeoutEndsInRunTimeoutWithEveryVerdictInTime) {
  // Two ranks sweep 32 MiB all-reduces with far more iterations than --timeout 2 allows, and the
  // transport's and each collective's own deadlines are far later: only the run's deadline (the
  // steps' end, else the watchdog through the injected exit) can end it.
  constexpr double kTimeout = 2;
  constexpr double kSlack = 0.5;  // every verdict is written by --timeout + this
  const InProcessRun run = run_in_process(2, [](int, harness::RunOptions& o) {
    small_socket_sweep(o);
    o.min_bytes = o.max_bytes = std::size_t{32} << 20;
    o.iters = 100000;
    o.op_timeout_s = 60;
    o.transport_timeout_s = 60;
    o.timeout_s = kTimeout;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(run.codes[r], 0) << r;
    EXPECT_LE(run.seconds[r], kTimeout + kSlack) << "rank " << r;
    auto local = run.local(r);
    ASSERT_TRUE(local) << "verdict.rank" << r << ".json in " << run.out_dir;
    EXPECT_TRUE(codes(*local).count("RUN_TIMEOUT"))
        << "rank " << r << ": " << ::testing::PrintToString(codes(*local));
    EXPECT_FALSE(codes(*local).count("TRANSPORT_TIMEOUT")) << "rank " << r;
  }
  auto v = run.global();
  ASSERT_TRUE(v) << "verdict.json in " << run.out_dir;
  EXPECT_NE(v->verdict, Outcome::pass);
  const auto* timeout = finding(*v, "RUN_TIMEOUT");
  ASSERT_NE(timeout, nullptr) << "findings: " << ::testing::PrintToString(codes(*v));
  EXPECT_NE(timeout->message.find(results::transport_phase_name("socket")), std::string::npos)
      << timeout->message;
  const auto* p = phase(*v, results::transport_phase_name("socket"));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->status, PhaseStatus::inconclusive) << p->detail;
}

TEST(RunInProcess, TheWatchdogWritesTheVerdictOfAStepThatOverrunsTheRun) {
  // Every rank holds 2 s after the join (a step that does not look at the clock) under
  // --timeout 1: the watchdog writes RUN_TIMEOUT at --timeout + its grace and ends the rank
  // through the injected exit; the held step, once it returns, writes nothing over it.
  const InProcessRun run = run_in_process(2, [](int, harness::RunOptions& o) {
    o.transports = "none";
    o.timeout_s = 1;
    o.hold_after_join_s = 2;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(run.watchdog_exited[r]) << r;
    EXPECT_NE(run.codes[r], 0) << r;
    auto local = run.local(r);
    ASSERT_TRUE(local) << "verdict.rank" << r << ".json in " << run.out_dir;
    EXPECT_TRUE(codes(*local).count("RUN_TIMEOUT"))
        << "rank " << r << ": " << ::testing::PrintToString(codes(*local));
    const auto* mesh = phase(*local, "mesh");
    ASSERT_NE(mesh, nullptr) << "rank " << r;
    EXPECT_EQ(mesh->status, PhaseStatus::not_run) << "rank " << r;
    EXPECT_EQ(mesh->detail, "the run ended before it started") << "rank " << r;
  }
  auto v = run.global();
  ASSERT_TRUE(v) << "verdict.json in " << run.out_dir;
  EXPECT_NE(v->verdict, Outcome::pass);
  EXPECT_TRUE(codes(*v).count("RUN_TIMEOUT")) << ::testing::PrintToString(codes(*v));
}

// A rank that stops on its own error says so: rank 0's verdict carries that rank's own finding,
// not a PEER_LOST guessed from its silence.
bool names_with_own_finding(const results::Verdict& v, const std::string& code, int rank) {
  bool own = false;
  for (const auto& f : v.findings) {
    const bool about = std::find(f.ranks.begin(), f.ranks.end(), rank) != f.ranks.end();
    if (about && f.code.str() == "PEER_LOST") ADD_FAILURE() << "PEER_LOST about rank " << rank;
    if (about && f.code.str() == code) own = true;
  }
  return own;
}

TEST(RunInProcess, ARankWithItsOwnWorldSizeIsNamedByItsOwnFinding) {
  const InProcessRun run = run_in_process(4, [](int r, harness::RunOptions& o) {
    o.transports = "none";
    o.join_timeout_s = 5;
    o.mesh_timeout_s = 3;
    if (r == 2) o.world.world_size = "5";
  });
  auto v = run.global();
  ASSERT_TRUE(v) << "verdict.json in " << run.out_dir;
  EXPECT_EQ(v->verdict, Outcome::fail);
  EXPECT_TRUE(names_with_own_finding(*v, "WORLD_MISMATCH", 2))
      << ::testing::PrintToString(codes(*v));
}

TEST(RunInProcess, ARankThatCannotListenForTheMeshIsNamedByItsOwnFinding) {
  // Rank 3 alone may listen only on one port, and this test holds it.
  const int blocker = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(blocker, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(blocker, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(::listen(blocker, 1), 0);
  ASSERT_EQ(::getsockname(blocker, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  const InProcessRun run = run_in_process(4, [&](int r, harness::RunOptions& o) {
    o.transports = "none";
    o.join_timeout_s = 5;
    o.mesh_timeout_s = 3;
    if (r == 3) o.mesh_port_range = port + "-" + port;
  });
  ::close(blocker);
  auto v = run.global();
  ASSERT_TRUE(v) << "verdict.json in " << run.out_dir;
  EXPECT_EQ(v->verdict, Outcome::fail);
  EXPECT_TRUE(names_with_own_finding(*v, "MESH_BLOCKED", 3)) << ::testing::PrintToString(codes(*v));
}

// A rank posts its view without the sweep rows (every rank's copy of the world's figures, which
// rank 0 has itself); everything else judging reads travels unchanged, and the post still reads
// as a verdict.
TEST(PostedView, LeavesOutTheSweepRowsAndNothingElse) {
  const results::Verdict local = results::testing::full_sample();
  ASSERT_FALSE(local.transports.empty());
  const results::Verdict posted = harness::posted_view(local);
  EXPECT_TRUE(posted.transports.empty());
  results::Verdict expected = local;
  expected.transports.clear();
  EXPECT_EQ(results::to_json(posted), results::to_json(expected));
  const std::string text = results::to_json(posted).dump();
  EXPECT_LT(text.size(), results::to_json(local).dump().size());
  EXPECT_EQ(results::to_json(results::verdict_from_text(text)), results::to_json(expected));
}

}  // namespace
}  // namespace ncclsmoke
