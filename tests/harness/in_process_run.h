#pragma once
// N ranks of `ncclsmoke run` as threads of the test process. Each rank is a real RunSession: rank 0
// serves the real store on a loopback port, and the join, the mesh probe, the liveness watch, the
// transports and the pairwise rounds are the ones a process runs. What differs is only what
// RunHooks names: no launcher variables (the world comes from the options), no signal handlers,
// and a watchdog that records its exit code instead of ending the process.
//
// For the tests of the sequencer, where the process boundary is not what the test is about; a rank
// frozen or killed (SIGSTOP, SIGKILL) still needs processes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "harness/common/env.h"
#include "harness/run/run_options.h"
#include "harness/run/run_session.h"
#include "results/verdict/verdict.h"
#include "tests/harness/run_args.h"  // free_tcp_port

namespace ncclsmoke::testing {

struct InProcessRun {
  std::string out_dir;                // every rank's verdict files
  std::vector<int> codes;             // each rank's exit code; -1 for a rank never started
  std::vector<bool> watchdog_exited;  // whether the rank's watchdog ended it
  std::vector<double> seconds;        // from the rank's start to its RunSession's return

  std::optional<results::Verdict> read(const std::string& name) const {
    std::ifstream in(out_dir + "/" + name);
    if (!in) return std::nullopt;
    return results::verdict_from_json(nlohmann::json::parse(in));
  }
  std::optional<results::Verdict> global() const { return read("verdict.json"); }
  std::optional<results::Verdict> local(int rank) const {
    return read("verdict.rank" + std::to_string(rank) + ".json");
  }
};

// Options every in-process rank starts from: its place in the world, a loopback store on `port`,
// the run's own job id, quiet, and deadlines short enough for a unit test (a test narrows them).
inline harness::RunOptions in_process_options(int rank, int world_size, int port,
                                              const std::string& job_id,
                                              const std::string& out_dir) {
  harness::RunOptions o;
  o.world.rank = std::to_string(rank);
  o.world.world_size = std::to_string(world_size);
  o.world.master_addr = "127.0.0.1";
  o.world.master_port = std::to_string(port);
  o.world.launcher = "flags";
  o.world.job_id = job_id;
  o.out_dir = out_dir;
  o.quiet = true;
  o.connect_timeout_s = 10;
  o.join_timeout_s = 10;
  o.mesh_timeout_s = 5;
  o.timeout_s = 60;
  return o;
}

// Runs the ranks of a `world_size` world that are not in `absent`, each a thread, with `tweak` applied
// to its options; returns when every started rank's RunSession returned. The verdicts are in a
// fresh directory under the test's temporary directory, kept for a failing test to show.
inline InProcessRun run_in_process(int world_size,
                                   const std::function<void(int rank, harness::RunOptions&)>& tweak,
                                   const std::set<int>& absent = {}) {
  static std::atomic<int> serial{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string job = std::string(info ? info->name() : "run") + "-" +
                          std::to_string(::getpid()) + "-" + std::to_string(serial++);
  InProcessRun run;
  run.out_dir = (std::filesystem::path(::testing::TempDir()) / ("in-process-" + job)).string();
  std::filesystem::remove_all(run.out_dir);
  std::filesystem::create_directories(run.out_dir);
  run.codes.assign(world_size, -1);
  run.watchdog_exited.assign(world_size, false);
  run.seconds.assign(world_size, 0);
  const int port = free_tcp_port();
  std::vector<char> exited(world_size, 0);  // one writer per slot
  std::vector<std::thread> ranks;
  for (int r = 0; r < world_size; ++r) {
    if (absent.count(r)) continue;
    auto o = in_process_options(r, world_size, port, job, run.out_dir);
    tweak(r, o);
    ranks.emplace_back([&run, &exited, r, o = std::move(o)] {
      harness::RunHooks hooks;
      hooks.environment = harness::map_environment({});
      hooks.handle_signals = false;
      hooks.exit = [&exited, r](int) { exited[r] = 1; };
      const auto t0 = std::chrono::steady_clock::now();
      run.codes[r] = harness::RunSession(o, "", std::move(hooks)).run();
      run.seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < world_size; ++r) run.watchdog_exited[r] = exited[r] != 0;
  return run;
}

// Reading what the ranks wrote.
inline const results::Phase* find_phase(const results::Verdict& v, const std::string& name) {
  auto it = std::find_if(v.phases.begin(), v.phases.end(),
                         [&](const results::Phase& p) { return p.name == name; });
  return it == v.phases.end() ? nullptr : &*it;
}

inline std::set<std::string> finding_codes(const results::Verdict& v) {
  std::set<std::string> out;
  for (const auto& f : v.findings) out.insert(std::string(f.code.str()));
  return out;
}

inline const results::Finding* find_finding(const results::Verdict& v, const std::string& code) {
  for (const auto& f : v.findings)
    if (f.code.str() == code) return &f;
  return nullptr;
}

// One pairwise sample as a rank's identity row carries it (identities[].observed.pairwise[]).
struct PairSampleRead {
  int rank = -1;
  nlohmann::json sample;
  int peer() const { return sample.at("peer").get<int>(); }
  int round() const { return sample.at("round").get<int>(); }
};

inline std::vector<PairSampleRead> pair_samples(const results::Verdict& v,
                                                const std::string& transport) {
  std::vector<PairSampleRead> out;
  for (const auto& id : v.identities) {
    if (id.transport != transport || id.rank < 0 || !id.observed.contains("pairwise")) continue;
    for (const auto& s : id.observed["pairwise"]) out.push_back({id.rank, s});
  }
  return out;
}

// Of the socket transport's pairwise samples: every sample has a time and no error; each pair was measured by both of its ranks in one round;
// no rank is in two pairs of a round; the rounds used are 0..rounds-1. Returns the pairs.
inline std::set<std::pair<int, int>> expect_pairs_on_both_sides(const results::Verdict& v,
                                                                 int rounds) {
  using Pair = std::pair<int, int>;
  std::map<Pair, std::vector<Pair>> sides;  // pair -> (rank, round)
  std::map<Pair, int> rank_in_round;        // (rank, round) -> samples
  std::set<int> used;
  for (const auto& s : pair_samples(v, "socket")) {
    EXPECT_TRUE(s.sample.value("error", nlohmann::json()).is_null()) << s.sample.dump();
    EXPECT_GT(s.sample.value("time_us", 0.0), 0) << s.sample.dump();
    sides[{std::min(s.rank, s.peer()), std::max(s.rank, s.peer())}].push_back({s.rank, s.round()});
    const int times = ++rank_in_round[Pair{s.rank, s.round()}];
    EXPECT_EQ(times, 1) << "rank " << s.rank << " twice in round " << s.round();
    used.insert(s.round());
  }
  std::set<Pair> pairs;
  for (const auto& [pair, seen] : sides) {
    pairs.insert(pair);
    EXPECT_EQ(seen.size(), 2u) << pair.first << "-" << pair.second;
    if (seen.size() != 2) continue;
    EXPECT_NE(seen[0].first, seen[1].first) << pair.first << "-" << pair.second;
    EXPECT_EQ(seen[0].second, seen[1].second) << pair.first << "-" << pair.second;
  }
  std::set<int> expected_rounds;
  for (int i = 0; i < rounds; ++i) expected_rounds.insert(i);
  EXPECT_EQ(used, expected_rounds);
  return pairs;
}

}  // namespace ncclsmoke::testing
