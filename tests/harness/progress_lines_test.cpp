// Progress lines: the join reports its wait through JoinWatch (rank 0 only) with a reason that is
// true — never connected, or connected with the rank not claimed — and the formatting of the join
// line, phase lines and nccl-tests' sweep table. One thread per rank over an in-memory store.
#include <gtest/gtest.h>

#include <future>
#include <mutex>

#include "harness/common/log.h"
#include "harness/common/progress.h"
#include "rendezvous/join.h"
#include "rendezvous/memory_store.h"

namespace ncclsmoke::harness {
namespace {

using namespace std::chrono_literals;
using rendezvous::Identity;
using rendezvous::JoinProgress;
using rendezvous::JoinWatch;

Identity identity(int rank, int world) {
  Identity id;
  id.rank = rank;
  id.world_size = world;
  id.host = "host-" + std::to_string(rank);
  id.token = "t" + std::to_string(rank);
  return id;
}

struct Seen {
  std::mutex mu;
  std::vector<JoinProgress> reports;
  void add(const JoinProgress& p) {
    std::lock_guard lock(mu);
    reports.push_back(p);
  }
};

TEST(JoinProgress, RankZeroReportsWhoItWaitsForAndWhy) {
  rendezvous::MemoryStore store;
  Seen seen;
  JoinWatch w;
  w.every = 100ms;  // raised to the 250 ms floor
  // World of 3: rank 1 joins; rank 2 "connects" (sets its arrival key, what its join does first,
  // before the claim) only once rank 0 has said it never connected: no timing in the assertions.
  w.on_progress = [&](const JoinProgress& p) {
    seen.add(p);
    if (!p.waiting_for_connected) store.set("join/arrived/2", "t2");
  };
  auto r1 = std::async(std::launch::async, [&] {
    return rendezvous::join_world(store, identity(1, 3), rendezvous::deadline_after(1200ms),
                                  1000ms);
  });
  // 1.2 s at the 250 ms floor: four reports or more, and the test needs two.
  auto res =
      rendezvous::join_world(store, identity(0, 3), rendezvous::deadline_after(1200ms), 200ms, w);
  r1.get();
  EXPECT_EQ(res.missing, std::vector<int>{2});
  std::lock_guard lock(seen.mu);
  ASSERT_GE(seen.reports.size(), 2u);
  for (const auto& p : seen.reports) {
    EXPECT_EQ(p.world_size, 3);
    EXPECT_EQ(p.waiting_for, 2);
    EXPECT_EQ(p.joined, 2);
    EXPECT_EQ(p.others_missing, 0);
  }
  EXPECT_FALSE(seen.reports.front().waiting_for_connected);
  EXPECT_TRUE(seen.reports[1].waiting_for_connected);
  EXPECT_TRUE(seen.reports.back().waiting_for_connected);
}

TEST(JoinProgress, AShortDeadlineStillGetsALineBeforeItPasses) {
  rendezvous::MemoryStore store;
  Seen seen;
  JoinWatch w;  // every 5 s, but the deadline is 0.8 s away: shortened to half of it
  w.on_progress = [&](const JoinProgress& p) { seen.add(p); };
  rendezvous::join_world(store, identity(0, 2), rendezvous::deadline_after(800ms), 100ms, w);
  std::lock_guard lock(seen.mu);
  ASSERT_GE(seen.reports.size(), 1u);
  EXPECT_EQ(seen.reports[0].joined, 1);
  EXPECT_EQ(seen.reports[0].waiting_for, 1);
}

TEST(JoinProgress, NoWatchNoReportsAndACompleteJoinReportsNothing) {
  rendezvous::MemoryStore store;
  Seen seen;
  JoinWatch w;
  w.every = 50ms;
  w.on_progress = [&](const JoinProgress& p) { seen.add(p); };
  auto r1 = std::async(std::launch::async, [&] {
    return rendezvous::join_world(store, identity(1, 2), rendezvous::deadline_after(2s), 500ms);
  });
  auto res = rendezvous::join_world(store, identity(0, 2), rendezvous::deadline_after(2s), 500ms, w);
  r1.get();
  EXPECT_TRUE(res.complete());
  // Rank 1 may be a few ms late: a report then names it, never anyone else.
  std::lock_guard lock(seen.mu);
  for (const auto& p : seen.reports) EXPECT_EQ(p.waiting_for, 1);
}

TEST(ProgressLines, JoinWaitWording) {
  JoinProgress p;
  p.world_size = 3;
  p.joined = 2;
  p.waiting_for = 2;
  EXPECT_EQ(join_wait_line(p, 6.0, 30), "rendezvous: 2/3 joined, waiting for rank 2 (never connected), 6.0 s of 30 s");
  p.waiting_for_connected = true;
  p.joined = 1;
  p.others_missing = 1;
  EXPECT_EQ(join_wait_line(p, 12.4, 30),
            "rendezvous: 1/3 joined, waiting for rank 2 (connected, rank not claimed yet) and 1 "
            "more, 12 s of 30 s");
}

TEST(ProgressLines, PhaseLines) {
  EXPECT_EQ(phase_start_line("mesh"), "mesh: start");
  EXPECT_EQ(phase_start_line("mesh", "3 ranks"), "mesh: start (3 ranks)");
  EXPECT_EQ(phase_end_line("mesh", "pass", 0.0234, "6/6 pairs"), "mesh: pass in 0.02 s: 6/6 pairs");
}

TEST(ProgressLines, SweepTableInNcclTestsShape) {
  transports::SweepOptions o;
  o.min_bytes = 1 << 20;
  o.max_bytes = 4 << 20;
  transports::SweepRow out, in;
  out.bytes = in.bytes = 1 << 20;
  out.count = in.count = (1 << 20) / 4;
  in.in_place = true;
  out.time_us = 1000;
  out.algbw_gbps = 1.05;
  out.busbw_gbps = 1.05;
  out.wrong = 0;
  in.time_us = 2000;
  in.algbw_gbps = 0.52;
  in.busbw_gbps = 0.52;
  in.wrong = -1;
  transports::SweepProgress p;
  p.transport = "socket";
  p.world_size = 2;
  p.sizes = 3;
  p.out_of_place = &out;
  p.in_place = &in;
  auto head = sweep_header_lines(p, o);
  ASSERT_EQ(head.size(), 5u);
  EXPECT_EQ(head[0].rfind("# transport socket: all_reduce sweep: ", 0), 0u) << head[0];
  EXPECT_NE(head[0].find("nranks 2 minBytes 1048576 maxBytes 4194304 step: 2(factor)"), std::string::npos);
  // nccl-tests' three header lines, the summary table's too (harness/common/summary_tables.h).
  const auto table = table_header_lines();
  EXPECT_EQ(std::vector<std::string>(head.begin() + 2, head.end()), table);
  EXPECT_NE(head[2].find("out-of-place"), std::string::npos);
  EXPECT_NE(head[2].find("in-place"), std::string::npos);
  EXPECT_NE(head[3].find("size"), std::string::npos);
  EXPECT_NE(head[3].find("redop"), std::string::npos);
  EXPECT_NE(head[3].find("root"), std::string::npos);
  EXPECT_NE(head[3].find("#wrong"), std::string::npos);
  EXPECT_NE(head[4].find("(GB/s)"), std::string::npos);
  for (const auto& h : head) EXPECT_EQ(h[0], '#') << h;  // comments to a parser
  std::string row = sweep_row_line(p);
  EXPECT_EQ(row.find("socket"), std::string::npos) << row;  // unprefixed: a bare nccl-tests row
  EXPECT_NE(row.find("1048576"), std::string::npos);
  EXPECT_NE(row.find("262144"), std::string::npos);
  EXPECT_NE(row.find("float32"), std::string::npos);
  EXPECT_NE(row.find("1000.0"), std::string::npos);
  EXPECT_NE(row.find("2000.0"), std::string::npos);
  EXPECT_NE(row.find("1.05"), std::string::npos);
  EXPECT_NE(row.find(" sum      -1 "), std::string::npos) << row;  // redop, root
  EXPECT_NE(row.find("N/A"), std::string::npos);  // in-place not checked
  // The columns line up: the row is as wide as the column header.
  EXPECT_EQ(row.size(), head[3].size()) << row << "\n" << head[3];
  p.in_place = nullptr;
  EXPECT_NE(sweep_row_line(p).find("-"), std::string::npos);
}

TEST(LogLevels, WhoSaysWhat) {
  EXPECT_EQ(run_log_level(0, false, false, ""), LogLevel::info);
  EXPECT_EQ(run_log_level(3, false, false, ""), LogLevel::warn);
  EXPECT_EQ(run_log_level(3, false, true, ""), LogLevel::info);
  EXPECT_EQ(run_log_level(3, false, false, "debug"), LogLevel::debug);
  EXPECT_EQ(run_log_level(0, true, true, "debug"), LogLevel::error);  // --quiet wins
  EXPECT_EQ(run_log_level(0, false, false, "OFF"), LogLevel::off);
  EXPECT_FALSE(parse_log_level("loud"));
  EXPECT_EQ(parse_log_level("Warning"), LogLevel::warn);
}

}  // namespace
}  // namespace ncclsmoke::harness
