// Join barrier and mesh probe, one thread per rank over an in-memory store (gloo's test shape),
// with the mesh's connections on real loopback sockets.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "rendezvous/join.h"
#include "rendezvous/memory_store.h"
#include "rendezvous/mesh.h"

namespace ncclsmoke::rendezvous {
namespace {

using namespace std::chrono_literals;

Identity identity(int rank, int world) {
  Identity id;
  id.rank = rank;
  id.world_size = world;
  id.host = "host-" + std::to_string(rank);
  id.node = "node-" + std::to_string(rank);
  id.pid = 1000 + rank;
  id.token = "t" + std::to_string(rank);
  return id;
}

std::vector<JoinResult> join_all(MemoryStore& store, const std::vector<Identity>& ids,
                                 Millis budget) {
  auto deadline = deadline_after(budget);
  std::vector<std::future<JoinResult>> fs;
  for (const auto& id : ids)
    fs.push_back(std::async(std::launch::async,
                            [&, id] { return join_world(store, id, deadline, 500ms); }));
  std::vector<JoinResult> out;
  for (auto& f : fs) out.push_back(f.get());
  return out;
}

TEST(Join, EveryRankSeesACompleteRoster) {
  MemoryStore store;
  std::vector<Identity> ids;
  for (int r = 0; r < 4; ++r) ids.push_back(identity(r, 4));
  auto results = join_all(store, ids, 3s);
  for (const auto& res : results) {
    EXPECT_TRUE(res.complete());
    EXPECT_TRUE(res.roster_received);
    ASSERT_EQ(res.present.size(), 4u);
    EXPECT_EQ(res.present[2].host, "host-2");
  }
}

TEST(Join, MissingRankIsNamedByEveryoneAfterTheDeadline) {
  MemoryStore store;
  std::vector<Identity> ids;
  for (int r = 0; r < 3; ++r) ids.push_back(identity(r, 4));  // rank 3 never starts
  auto start = Clock::now();
  auto results = join_all(store, ids, 400ms);
  EXPECT_LT(Clock::now() - start, 3s);
  for (const auto& res : results) {
    EXPECT_FALSE(res.complete());
    EXPECT_EQ(res.missing, std::vector<int>{3});
    EXPECT_EQ(res.present.size(), 3u);
  }
}

TEST(Join, WorldSizeDisagreementIsReported) {
  MemoryStore store;
  std::vector<Identity> ids{identity(0, 2), identity(1, 3)};
  auto results = join_all(store, ids, 2s);
  ASSERT_TRUE(results[1].master_world_size.has_value());
  EXPECT_EQ(*results[1].master_world_size, 2);
  EXPECT_FALSE(results[1].complete());
}

TEST(Join, TwoProcessesClaimingOneRankAreCaught) {
  MemoryStore store;
  auto a = identity(1, 2);
  auto b = identity(1, 2);
  b.host = "other-host";
  b.token = "other";
  store.compare_set("join/rank/1", "", a.to_json());
  auto res = join_world(store, b, deadline_after(200ms), 100ms);
  ASSERT_TRUE(res.rank_taken_by.has_value());
  EXPECT_EQ(res.rank_taken_by->host, "host-1");
}

TEST(Join, NoRosterWhenRankZeroNeverComes) {
  MemoryStore store;
  auto res = join_world(store, identity(1, 2), deadline_after(200ms), 100ms);
  EXPECT_FALSE(res.roster_received);
}

TEST(Mesh, PeersAreAllOthersBelowTheThreshold) {
  std::vector<int> ranks{0, 1, 2, 3};
  EXPECT_EQ(mesh_peers(2, ranks, 64, 4), (std::vector<int>{0, 1, 3}));
}

TEST(Mesh, PeersAreRingPlusRandomAboveTheThreshold) {
  std::vector<int> ranks;
  for (int r = 0; r < 200; ++r) ranks.push_back(r);
  auto p = mesh_peers(10, ranks, 64, 4);
  EXPECT_LE(p.size(), 6u);
  EXPECT_GE(p.size(), 2u);
  EXPECT_NE(std::find(p.begin(), p.end(), 9), p.end());
  EXPECT_NE(std::find(p.begin(), p.end(), 11), p.end());
  EXPECT_EQ(std::find(p.begin(), p.end(), 10), p.end());
  EXPECT_EQ(p, mesh_peers(10, ranks, 64, 4));  // reproducible
  auto wrap = mesh_peers(0, ranks, 64, 0);
  EXPECT_EQ(wrap, (std::vector<int>{1, 199}));
}

TEST(Mesh, SplitHostPort) {
  std::string h;
  uint16_t p = 0;
  EXPECT_TRUE(split_host_port("10.0.0.7:29500", h, p));
  EXPECT_EQ(h, "10.0.0.7");
  EXPECT_EQ(p, 29500);
  EXPECT_TRUE(split_host_port("[fd00::1]:80", h, p));
  EXPECT_EQ(h, "fd00::1");
  EXPECT_FALSE(split_host_port("fd00::1:80", h, p));
  EXPECT_FALSE(split_host_port("host:", h, p));
  EXPECT_FALSE(split_host_port("host:99999", h, p));
  EXPECT_FALSE(split_host_port("host:12a", h, p));
  EXPECT_FALSE(split_host_port("", h, p));
}

MeshOptions mesh_options(int rank, std::vector<int> ranks, Deadline deadline) {
  MeshOptions o;
  o.rank = rank;
  o.ranks = std::move(ranks);
  o.bind_address = "127.0.0.1";
  o.pair_timeout = 1000ms;
  o.deadline = deadline;
  o.done_grace = 500ms;
  return o;
}

TEST(Mesh, HealthyLoopbackMeshHasNoFailures) {
  MemoryStore store;
  std::vector<int> ranks{0, 1, 2, 3};
  auto deadline = deadline_after(5s);
  std::vector<std::future<MeshResult>> fs;
  for (int r : ranks)
    fs.push_back(std::async(std::launch::async, [&, r] {
      return run_mesh_probe(store, mesh_options(r, ranks, deadline));
    }));
  for (auto& f : fs) {
    auto res = f.get();
    EXPECT_TRUE(res.summary_received);
    EXPECT_TRUE(res.failures.empty()) << res.failures.front().message;
    EXPECT_TRUE(res.silent_ranks.empty());
    EXPECT_EQ(res.pairs_tested, 12u);
  }
}

TEST(Mesh, ARankThatNeverProbesIsSilentAndTheOthersFinishInTime) {
  MemoryStore store;
  std::vector<int> ranks{0, 1, 2};  // rank 2 joined, then died before the mesh
  auto start = Clock::now();
  auto deadline = deadline_after(2s);
  std::vector<std::future<MeshResult>> fs;
  for (int r : {0, 1})
    fs.push_back(std::async(std::launch::async, [&, r] {
      return run_mesh_probe(store, mesh_options(r, ranks, deadline));
    }));
  auto r0 = fs[0].get();
  auto r1 = fs[1].get();
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(r0.silent_ranks, std::vector<int>{2});
  EXPECT_TRUE(r1.summary_received);
  EXPECT_EQ(r1.silent_ranks, std::vector<int>{2});
  EXPECT_TRUE(r0.failures.empty());
}

TEST(Mesh, AClosedPortIsAFailedPairNamingBothEnds) {
  MemoryStore store;
  // Rank 1 publishes an address where nothing listens (port 1 on loopback: refused).
  store.set("mesh/addr/1", "127.0.0.1:1");
  store.set("mesh/result/1", R"({"tested":0,"failures":[]})");
  auto res = run_mesh_probe(store, mesh_options(0, {0, 1}, deadline_after(3s)));
  ASSERT_EQ(res.failures.size(), 1u);
  EXPECT_EQ(res.failures[0].from, 0);
  EXPECT_EQ(res.failures[0].to, 1);
  EXPECT_EQ(res.failures[0].error_class, ErrorClass::refused) << res.failures[0].message;
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
