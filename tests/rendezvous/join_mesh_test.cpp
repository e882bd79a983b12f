// Join barrier and mesh probe, one thread per rank over an in-memory store (gloo's test shape),
// with the mesh's connections on real loopback sockets.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "harness/world/world.h"
#include "rendezvous/join.h"
#include "rendezvous/memory_store.h"
#include "rendezvous/mesh.h"
#include "rendezvous/tcp_client.h"
#include "results/judging/facts_rendezvous.h"
#include "results/judging/probe_rules.h"

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

// WORLD_SIZE of a million with only rank 0 there: the join ends at its deadline (not 25 s later,
// one CHECK per absent rank), and the roster names the absent ones as one range that every rank
// reads back in full.
TEST(Join, AMillionRankWorldWithOneRankEndsAtTheDeadline) {
  MemoryStore store;
  auto t0 = Clock::now();
  auto res = join_world(store, identity(0, 1'000'000), deadline_after(300ms), 100ms);
  const double waited = seconds_since(t0);
  EXPECT_LT(waited, 0.3 + 2.5);  // the deadline plus the bounded tail, never a scan of the world
  ASSERT_EQ(res.missing.size(), 999'999u);
  EXPECT_EQ(res.missing.front(), 1);
  EXPECT_EQ(res.missing.back(), 999'999);
  auto roster = nlohmann::json::parse(store.get("join/roster", deadline_after(100ms)));
  EXPECT_EQ(roster["missing_ranges"], nlohmann::json::parse("[[1, 999999]]"));
  EXPECT_FALSE(roster.contains("missing"));
}

// The roster lists a host's consecutive ranks as one run, so its size (read by every rank) grows
// with the hosts, not the ranks; every rank reads back each rank's host, node and address, and
// its own identity whole.
TEST(Join, TheRosterListsAHostsRanksAsOneRunThatEveryRankReadsBack) {
  MemoryStore store;
  std::vector<Identity> ids;
  for (int r = 0; r < 6; ++r) {
    Identity id = identity(r, 6);
    id.host = r == 3 ? "b" : "a";  // a a a b a a: three runs
    id.node = id.host + "-node";
    id.local_address = r == 3 ? "10.0.0.2" : "10.0.0.1";
    ids.push_back(id);
  }
  auto results = join_all(store, ids, 2s);
  auto roster = nlohmann::json::parse(store.get("join/roster", deadline_after(100ms)));
  EXPECT_EQ(roster["present_runs"],
            nlohmann::json::parse("[[0, 2, 0, 0, 0], [3, 3, 1, 1, 1], [4, 5, 0, 0, 0]]"));
  EXPECT_EQ(roster["hosts"], nlohmann::json::parse(R"(["a", "b"])"));
  EXPECT_FALSE(roster.contains("present"));
  for (int r = 0; r < 6; ++r) {
    const auto& res = results[r];
    ASSERT_EQ(res.present.size(), 6u) << "rank " << r;
    for (int k = 0; k < 6; ++k) {
      EXPECT_EQ(res.present[k].rank, k);
      EXPECT_EQ(res.present[k].host, ids[k].host);
      EXPECT_EQ(res.present[k].node, ids[k].node);
      EXPECT_EQ(res.present[k].local_address, ids[k].local_address);
      EXPECT_EQ(res.present[k].world_size, 6);
    }
    EXPECT_EQ(res.present[r].pid, ids[r].pid) << "rank " << r << "'s own identity, whole";
    EXPECT_EQ(res.present[r].token, ids[r].token);
  }
  EXPECT_EQ(results[0].present[4].pid, ids[4].pid) << "rank 0 keeps every identity it read";
}

// Every store call rank 0 makes, counted.
struct CountingStore final : Store {
  Store& inner;
  std::atomic<int> calls{0};
  std::string counted_key;         // its GETs are counted apart (how many ranks read the roster)
  std::atomic<int> counted_gets{0};
  explicit CountingStore(Store& s, std::string key = {}) : inner(s), counted_key(std::move(key)) {}
  void set(const std::string& k, const std::string& v) override { ++calls; inner.set(k, v); }
  std::string get(const std::string& k, Deadline d) override {
    ++calls;
    if (k == counted_key) ++counted_gets;
    return inner.get(k, d);
  }
  int64_t add(const std::string& k, int64_t d) override { ++calls; return inner.add(k, d); }
  bool check(const std::vector<std::string>& k) override { ++calls; return inner.check(k); }
  void wait(const std::vector<std::string>& k, Deadline d) override { ++calls; inner.wait(k, d); }
  std::string compare_set(const std::string& k, const std::string& e,
                          const std::string& d) override {
    ++calls;
    return inner.compare_set(k, e, d);
  }
  bool delete_key(const std::string& k) override { ++calls; return inner.delete_key(k); }
  int64_t num_keys() override { ++calls; return inner.num_keys(); }
  void append(const std::string& k, const std::string& v) override { ++calls; inner.append(k, v); }
  std::vector<std::string> multi_get(const std::vector<std::string>& k, Deadline d) override {
    ++calls;
    return inner.multi_get(k, d);
  }
  void multi_set(const std::vector<std::string>& k, const std::vector<std::string>& v) override {
    ++calls;
    inner.multi_set(k, v);
  }
};

// Rank 0 reads the ranks that are here a batch at a time, before the deadline and past it: behind
// a rank that never comes, the thousands that joined after it are all found (none named missing)
// in a few hundred requests, not two a rank.
TEST(Join, RankZeroReadsJoinedRanksInBatchesEvenBehindOneThatNeverCame) {
  MemoryStore store;
  const int world = 4096, absent = 100;
  store.set("join/world_size", std::to_string(world));
  for (int r = 1; r < world; ++r) {
    if (r == absent) continue;
    const Identity id = identity(r, world);
    store.set("join/rank/" + std::to_string(r), id.to_json());
    store.set("join/here/" + std::to_string(r), id.token);
    store.add("join/count", 1);
  }
  CountingStore counted(store);
  auto res = join_world(counted, identity(0, world), deadline_after(300ms), 100ms);
  EXPECT_EQ(res.missing, std::vector<int>{absent});
  EXPECT_EQ(res.present.size(), static_cast<std::size_t>(world - 1));
  EXPECT_LT(counted.calls.load(), world / 4) << "requests for " << world << " ranks";
}

// A hostile or older roster: runs past the world, overlapping, or naming no table entry are
// bounded and skipped; a roster of identity objects (an older rank 0) still reads.
TEST(Join, RosterRunsAreBoundedAndAnOlderRosterStillReads) {
  MemoryStore store;
  store.set("join/world_size", "4");
  store.set("join/roster", R"({"missing_ranges":[],"hosts":["a"],"nodes":["n"],"addresses":["x"],)"
                           R"("present_runs":[[-3,1,0,0,0],[1,2000000000,0,0,0],[2,2,9,0,0],"oops"]})");
  auto res = join_world(store, identity(1, 4), deadline_after(200ms), 100ms);
  ASSERT_EQ(res.present.size(), 4u);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(res.present[k].rank, k);
  EXPECT_EQ(res.present[2].host, "a");
  MemoryStore old;
  old.set("join/world_size", "4");
  old.set("join/roster", R"({"missing_ranges":[[2,3]],"present":[{"rank":0,"host":"h0"},)"
                         R"({"rank":1,"host":"h1"}]})");
  auto res_old = join_world(old, identity(1, 4), deadline_after(200ms), 100ms);
  ASSERT_EQ(res_old.present.size(), 2u);
  EXPECT_EQ(res_old.present[0].host, "h0");
}

// Past the deadline, ranks that claimed late are still found (join/count says some did), and
// the rest are missing without a request each.
TEST(Join, ARankThatClaimedPastTheDeadlineIsStillFound) {
  MemoryStore store;
  // Rank 5 of 6 claims first, then rank 0 waits (for rank 1, which never comes).
  auto late = join_world(store, identity(5, 6), deadline_after(10ms), 0ms);
  (void)late;
  auto res = join_world(store, identity(0, 6), deadline_after(200ms), 100ms);
  EXPECT_EQ(res.missing, (std::vector<int>{1, 2, 3, 4}));
  ASSERT_EQ(res.present.size(), 2u);
  EXPECT_EQ(res.present[1].rank, 5);
}

// A roster from another version (a plain "missing" list) or a hostile one (ranges beyond the
// world, overlapping) reads as the ranks of this world, each once.
TEST(Join, RosterRangesAreBoundedByTheWorld) {
  MemoryStore store;
  store.set("join/world_size", "4");
  store.set("join/roster",
            R"({"missing_ranges":[[2,3],[3,2000000000],[-5,2]],"present":[]})");
  auto res = join_world(store, identity(1, 4), deadline_after(200ms), 100ms);
  EXPECT_EQ(res.missing, (std::vector<int>{0, 1, 2, 3}));
  MemoryStore old;
  old.set("join/world_size", "4");
  old.set("join/roster", R"({"missing":[3, 9],"present":[]})");
  auto res_old = join_world(old, identity(1, 4), deadline_after(200ms), 100ms);
  EXPECT_EQ(res_old.missing, (std::vector<int>{3}));
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

// ---- the roster once per node (RosterCopy) ------------------------------------------------------

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "roster-copy-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::size_t files() const {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(path_),
                                                   std::filesystem::directory_iterator{}));
  }

 private:
  std::filesystem::path path_;
};

// Two hosts of four ranks: each host's local rank 0 leads. Rank 0 writes the roster and its
// host's copy; rank 4 is the only rank that GETs it; the six others read their leader's copy and
// end with the same roster. The leaders' files are gone once their RosterCopy is.
TEST(RosterCopy, EachHostReadsTheStoreOnceAndItsOtherRanksTheCopy) {
  ScratchDir dir;
  MemoryStore memory;
  CountingStore store(memory, "join/roster");
  constexpr int kWorld = 8;
  std::vector<Identity> ids;
  std::vector<RosterCopy> copies;
  for (int r = 0; r < kWorld; ++r) {
    Identity id = identity(r, kWorld);
    id.host = r < 4 ? "host-a" : "host-b";
    ids.push_back(id);
    copies.push_back(RosterCopy::for_host("job/0", "run-1", id.host, r % 4 == 0, 5000ms, dir.path()));
  }
  auto deadline = deadline_after(5s);
  std::vector<std::future<JoinResult>> fs;
  for (int r = 0; r < kWorld; ++r)
    fs.push_back(std::async(std::launch::async, [&, r] {
      return join_world(store, ids[r], deadline, 2000ms, {}, &copies[r]);
    }));
  for (int r = 0; r < kWorld; ++r) {
    auto res = fs[r].get();
    EXPECT_TRUE(res.complete()) << "rank " << r;
    ASSERT_EQ(res.present.size(), static_cast<std::size_t>(kWorld)) << "rank " << r;
    EXPECT_EQ(res.present[5].host, "host-b");
    EXPECT_EQ(res.present[r].token, ids[r].token);  // our own identity, whole
    const bool follower = r % 4 != 0;
    EXPECT_EQ(copies[r].read_the_copy(), follower) << "rank " << r;
  }
  EXPECT_EQ(store.counted_gets.load(), 1);  // rank 4; rank 0 wrote it
  EXPECT_EQ(dir.files(), 4u);       // a copy and a mark a host
  copies.clear();
  EXPECT_EQ(dir.files(), 0u);
}

// A follower whose node has no leader in its temporary directory (no mark: another container,
// or the leader never joined) reads the store at once, without waiting for a copy.
TEST(RosterCopy, AFollowerWithNoLeaderReadsTheStoreAtOnce) {
  ScratchDir dir;
  MemoryStore store;
  store.set("join/roster", "{\"present_runs\":[]}");
  auto follower = RosterCopy::for_host("job/0", "run-1", "host-a", false, 5000ms, dir.path());
  const auto start = Clock::now();
  EXPECT_EQ(follower.read(store, "join/roster", deadline_after(5s)), "{\"present_runs\":[]}");
  EXPECT_LT(seconds_since(start), 1.0);
  EXPECT_FALSE(follower.read_the_copy());
}

// A leader that marked itself and then died before its copy costs its followers their wait,
// then they read the store.
TEST(RosterCopy, ALeaderThatNeverCopiedCostsItsFollowersOnlyTheirWait) {
  ScratchDir dir;
  MemoryStore store;
  auto leader = RosterCopy::for_host("job/0", "run-1", "host-a", true, 300ms, dir.path());
  leader.announce();
  store.set("join/roster", "the store's");
  auto follower = RosterCopy::for_host("job/0", "run-1", "host-a", false, 300ms, dir.path());
  const auto start = Clock::now();
  EXPECT_EQ(follower.read(store, "join/roster", deadline_after(5s)), "the store's");
  EXPECT_GE(seconds_since(start), 0.29);
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_FALSE(follower.read_the_copy());
}

// A copy anyone could have written, or a link in its place, is not taken: the follower reads the
// store's roster, never the planted one.
TEST(RosterCopy, ACopyOthersCanWriteOrALinkIsNotTaken) {
  for (bool as_link : {false, true}) {
    ScratchDir dir;
    MemoryStore store;
    auto leader = RosterCopy::for_host("job/0", "run-1", "host-a", true, 300ms, dir.path());
    leader.announce();
    store.set("join/roster", "the store's");
    EXPECT_EQ(leader.read(store, "join/roster", deadline_after(5s)), "the store's");
    const auto copy = leader.path();
    std::filesystem::remove(copy);
    if (as_link) {
      const auto planted = dir.path() / "planted";
      std::ofstream(planted) << "planted";
      std::filesystem::create_symlink(planted, copy);
    } else {
      std::ofstream(copy) << "planted";
      ::chmod(copy.c_str(), 0666);
    }
    auto follower = RosterCopy::for_host("job/0", "run-1", "host-a", false, 300ms, dir.path());
    EXPECT_EQ(follower.read(store, "join/roster", deadline_after(5s)), "the store's")
        << (as_link ? "a link" : "writable by others");
    EXPECT_FALSE(follower.read_the_copy());
  }
}

// One pair of files a run and host: another run, host or job has its own, and no host name can
// put the files outside the directory.
TEST(RosterCopy, EachRunAndHostHasItsOwnFiles) {
  const std::filesystem::path dir = "/scratch";
  auto path = [&](const char* job, const char* run, const char* host) {
    return RosterCopy::for_host(job, run, host, true, 1000ms, dir).path();
  };
  const auto base = path("job/0", "run-1", "host-a");
  EXPECT_EQ(base, path("job/0", "run-1", "host-a"));
  EXPECT_NE(base, path("job/1", "run-1", "host-a"));
  EXPECT_NE(base, path("job/0", "run-2", "host-a"));
  EXPECT_NE(base, path("job/0", "run-1", "host-b"));
  EXPECT_NE(path("ab", "c", "h"), path("a", "bc", "h"));
  EXPECT_EQ(path("job/0", "run-1", "../../etc/passwd").parent_path(), dir);
  EXPECT_EQ(base.parent_path(), dir);
  EXPECT_EQ(base.filename().string().rfind("ncclsmoke-roster-", 0), 0u);
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
  auto deadline = deadline_after(1s);
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

// ---- unfinished is not failed ----

harness::World world_of(int rank, int size) {
  harness::World w;
  w.rank = rank;
  w.world_size = size;
  w.hostname = "host-" + std::to_string(rank);
  w.master_addr = "127.0.0.1";
  w.master_port = 29500;
  return w;
}

bool has_code(const std::vector<results::Finding>& fs, const std::string& code) {
  return std::any_of(fs.begin(), fs.end(), [&](const auto& f) { return f.code.str() == code; });
}

std::string codes(const std::vector<results::Finding>& fs) {
  std::string out;
  for (const auto& f : fs) out += results::to_string(f.code) + ": " + f.message + "\n";
  return out;
}

// A TCP listener on loopback that never accepts: the kernel completes every connection through
// the backlog (as for a SIGSTOPped process) and nothing ever answers.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof in;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&in), len) != 0 ||
        ::listen(fd_, 64) != 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&in), &len) != 0)
      return;
    port_ = ntohs(in.sin_port);
  }
  ~SilentListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

std::size_t planned_pairs(const std::vector<int>& ranks, const MeshOptions& o) {
  std::size_t n = 0;
  for (int r : ranks) n += mesh_peers(r, ranks, o.full_mesh_threshold, o.random_peers).size();
  return n;
}

// Hundreds of ranks and a deadline that has already passed when they start probing: nothing can
// be tested, and nothing may be called blocked or lost for it.
TEST(MeshDeadline, ADeadlineTooShortForTheWorldIsInconclusiveNotBlockedNorLost) {
  MemoryStore store;
  std::vector<int> ranks;
  for (int r = 0; r < 200; ++r) ranks.push_back(r);
  auto deadline = Clock::now();  // every rank starts after it: cut short before the first dial
  std::vector<std::future<MeshResult>> fs;
  for (int r : ranks)
    fs.push_back(std::async(std::launch::async, [&, r] {
      auto o = mesh_options(r, ranks, deadline);
      o.done_grace = 3000ms;  // the collection waits for results; this is not a timed assertion
      return run_mesh_probe(store, o);
    }));
  std::vector<MeshResult> results;
  for (auto& f : fs) results.push_back(f.get());
  auto o = mesh_options(0, ranks, deadline);
  for (const auto& res : results) {
    EXPECT_TRUE(res.summary_received);
    EXPECT_TRUE(res.failures.empty()) << res.failures.front().message;
    EXPECT_TRUE(res.silent_ranks.empty()) << "rank " << res.silent_ranks.front() << " called lost";
    EXPECT_EQ(res.pairs_tested, 0u);
    EXPECT_EQ(res.pairs_untested, planned_pairs(ranks, o));
    EXPECT_TRUE(res.deadline_hit);
  }
  std::map<int, std::string> hosts;
  for (int r : ranks) hosts[r] = "host-" + std::to_string(r);
  for (int r : {0, 1, 199}) {
    auto j = results::judge_mesh(static_cast<const facts::MeshFacts&>(results[static_cast<std::size_t>(r)]),
                                 harness::probe_context(world_of(r, 200)), hosts);
    EXPECT_EQ(j.status, results::PhaseStatus::inconclusive) << codes(j.findings);
    EXPECT_FALSE(has_code(j.findings, "MESH_BLOCKED")) << codes(j.findings);
    EXPECT_FALSE(has_code(j.findings, "PEER_LOST")) << codes(j.findings);
    ASSERT_TRUE(has_code(j.findings, "MESH_INCOMPLETE")) << codes(j.findings);
    std::string count = std::to_string(planned_pairs(ranks, o));
    EXPECT_NE(j.detail.find(count + " not tested"), std::string::npos) << j.detail;
    EXPECT_NE(j.findings.back().message.find(count + " of " + count), std::string::npos)
        << j.findings.back().message;
    EXPECT_EQ(j.findings.back().severity, results::Severity::warning);
  }
}

// A pair the phase deadline cut before its own pair timeout is not tested, even when the peer
// never answers.
TEST(MeshDeadline, APairCutByThePhaseDeadlineIsNotTested) {
  MemoryStore store;
  SilentListener silent;
  ASSERT_NE(silent.port(), 0);
  store.set("mesh/addr/1", silent.address());
  store.set("mesh/result/1", R"({"tested":0,"untested":0,"failures":[]})");
  auto o = mesh_options(0, {0, 1}, deadline_after(300ms));
  o.pair_timeout = 60s;  // the phase deadline comes first, whatever the machine's speed
  auto res = run_mesh_probe(store, o);
  EXPECT_TRUE(res.failures.empty()) << res.failures.front().message;
  EXPECT_EQ(res.pairs_tested, 0u);
  EXPECT_EQ(res.pairs_untested, 1u);
  auto j = results::judge_mesh(static_cast<const facts::MeshFacts&>(res),
                               harness::probe_context(world_of(0, 2)), {});
  EXPECT_EQ(j.status, results::PhaseStatus::inconclusive) << codes(j.findings);
  EXPECT_FALSE(has_code(j.findings, "MESH_BLOCKED"));
}

// A peer that accepts but never answers, for the full pair timeout (twice: the retry), is a
// failed pair: stalled, named, and the phase fails.
TEST(MeshDeadline, APeerSilentForTheWholePairTimeoutIsBlockedAsStalled) {
  MemoryStore store;
  SilentListener silent;
  ASSERT_NE(silent.port(), 0);
  store.set("mesh/addr/1", silent.address());
  store.set("mesh/result/1", R"({"tested":0,"untested":0,"failures":[]})");
  auto o = mesh_options(0, {0, 1}, deadline_after(60s));
  o.pair_timeout = 200ms;
  auto res = run_mesh_probe(store, o);
  ASSERT_EQ(res.failures.size(), 1u);
  EXPECT_EQ(res.failures[0].error_class, ErrorClass::stalled) << res.failures[0].message;
  EXPECT_NE(res.failures[0].message.find("dialled again"), std::string::npos)
      << res.failures[0].message;
  EXPECT_EQ(res.pairs_untested, 0u);
  auto j = results::judge_mesh(static_cast<const facts::MeshFacts&>(res),
                               harness::probe_context(world_of(0, 2)), {});
  EXPECT_EQ(j.status, results::PhaseStatus::fail);
  EXPECT_TRUE(has_code(j.findings, "MESH_BLOCKED")) << codes(j.findings);
}

// A refusal is an answer: blocked, whatever the deadline (the listener of a real peer, closed).
TEST(MeshDeadline, AClosedListenerIsStillBlocked) {
  MemoryStore store;
  std::string addr;
  {
    SilentListener gone;  // bound, then closed: nothing listens on that port any more
    addr = gone.address();
  }
  store.set("mesh/addr/1", addr);
  store.set("mesh/result/1", R"({"tested":0,"untested":0,"failures":[]})");
  auto o = mesh_options(0, {0, 1}, deadline_after(60s));
  o.pair_timeout = 300ms;
  auto res = run_mesh_probe(store, o);
  ASSERT_EQ(res.failures.size(), 1u);
  EXPECT_EQ(res.failures[0].error_class, ErrorClass::refused) << res.failures[0].message;
  auto j = results::judge_mesh(static_cast<const facts::MeshFacts&>(res),
                               harness::probe_context(world_of(0, 2)),
                               {{0, "host-0"}, {1, "host-1"}});
  EXPECT_EQ(j.status, results::PhaseStatus::fail);
  EXPECT_TRUE(has_code(j.findings, "MESH_BLOCKED")) << codes(j.findings);
  EXPECT_FALSE(has_code(j.findings, "PEER_LOST")) << codes(j.findings);
  EXPECT_FALSE(has_code(j.findings, "MESH_INCOMPLETE")) << codes(j.findings);
}

// A rank whose result never comes but whose listener still answers was still probing: not lost.
// One whose listener is gone is lost, and pairs towards it are not blamed on the network.
TEST(MeshDeadline, ARankStillProbingIsNotLostButAGoneOneIs) {
  MemoryStore store;
  std::vector<int> ranks{0, 1, 2};
  std::promise<void> release;
  auto released = release.get_future().share();
  // Rank 1: a real probe that keeps its listener open but never publishes a result in time
  // (it is stuck before its result: simulated by a wrapper store that holds mesh/result/1).
  struct HoldResult final : Store {
    Store& inner;
    std::shared_future<void> gate;
    HoldResult(Store& s, std::shared_future<void> g) : inner(s), gate(std::move(g)) {}
    void set(const std::string& k, const std::string& v) override {
      if (k == "mesh/result/1") gate.wait();
      inner.set(k, v);
    }
    std::string get(const std::string& k, Deadline d) override { return inner.get(k, d); }
    int64_t add(const std::string& k, int64_t d) override { return inner.add(k, d); }
    bool check(const std::vector<std::string>& k) override { return inner.check(k); }
    void wait(const std::vector<std::string>& k, Deadline d) override { inner.wait(k, d); }
    std::string compare_set(const std::string& k, const std::string& e,
                            const std::string& d) override {
      return inner.compare_set(k, e, d);
    }
    bool delete_key(const std::string& k) override { return inner.delete_key(k); }
    int64_t num_keys() override { return inner.num_keys(); }
    void append(const std::string& k, const std::string& v) override { inner.append(k, v); }
    std::vector<std::string> multi_get(const std::vector<std::string>& k, Deadline d) override {
      return inner.multi_get(k, d);
    }
    void multi_set(const std::vector<std::string>& k, const std::vector<std::string>& v) override {
      inner.multi_set(k, v);
    }
  };
  HoldResult held(store, released);
  std::string gone_addr;
  {
    SilentListener gone;
    gone_addr = gone.address();
  }
  store.set("mesh/addr/2", gone_addr);  // rank 2 listened, then died
  auto deadline = deadline_after(1000ms);
  auto r1 = std::async(std::launch::async, [&] {
    auto o = mesh_options(1, ranks, deadline);
    o.done_grace = 500ms;
    return run_mesh_probe(held, o);
  });
  auto o0 = mesh_options(0, ranks, deadline);
  o0.done_grace = 400ms;
  auto r0 = run_mesh_probe(store, o0);
  release.set_value();
  auto res1 = r1.get();
  EXPECT_EQ(r0.unfinished_ranks, std::vector<int>{1});
  EXPECT_EQ(r0.silent_ranks, std::vector<int>{2});
  for (const auto& f : r0.failures)
    ADD_FAILURE() << "a pair towards the lost rank was blamed on the network: " << f.message;
  auto j = results::judge_mesh(static_cast<const facts::MeshFacts&>(r0),
                               harness::probe_context(world_of(0, 3)), {});
  EXPECT_TRUE(has_code(j.findings, "PEER_LOST")) << codes(j.findings);
  EXPECT_FALSE(has_code(j.findings, "MESH_BLOCKED")) << codes(j.findings);
  EXPECT_TRUE(has_code(j.findings, "MESH_INCOMPLETE")) << codes(j.findings);
  for (const auto& f : j.findings)
    if (f.code == results::Code::PEER_LOST) {
      EXPECT_EQ(f.ranks, std::vector<int>{2});
    }
}

// A rank killed after the join never begins the mesh: it alone is named (PEER_LOST), and the pairs
// towards it are explained by that, not reported as left untested by the deadline.
TEST(MeshDeadline, ARankThatNeverBeganIsLostAndItsPairsAreNotIncomplete) {
  MemoryStore store;
  std::vector<int> ranks{0, 1, 2};
  auto deadline = deadline_after(1s);
  std::vector<std::future<MeshResult>> fs;
  for (int r : {0, 1})
    fs.push_back(std::async(std::launch::async, [&, r] {
      return run_mesh_probe(store, mesh_options(r, ranks, deadline));
    }));
  auto r0 = fs[0].get();
  auto r1 = fs[1].get();
  EXPECT_EQ(r0.silent_ranks, std::vector<int>{2});
  EXPECT_EQ(r0.pairs_tested, 2u);  // 0 -> 1 and 1 -> 0
  EXPECT_EQ(r0.pairs_untested, 0u);
  EXPECT_EQ(r0.pairs_lost, 4u);  // 0 -> 2, 1 -> 2, and rank 2's own two
  EXPECT_EQ(r1.pairs_lost, 4u);
  auto j = results::judge_mesh(static_cast<const facts::MeshFacts&>(r1),
                               harness::probe_context(world_of(1, 3)), {});
  EXPECT_EQ(j.status, results::PhaseStatus::fail);
  EXPECT_TRUE(has_code(j.findings, "PEER_LOST")) << codes(j.findings);
  EXPECT_FALSE(has_code(j.findings, "MESH_INCOMPLETE")) << codes(j.findings);
  EXPECT_FALSE(has_code(j.findings, "MESH_BLOCKED")) << codes(j.findings);
}

// A rank that joined and left before its probe (its own error) says so in the mesh's keys: the
// others neither wait for its address nor leave it to the deadline. It is lost at once, its pairs
// lost pairs like a rank that never began, on 3 and 5 ranks.
TEST(MeshDeadline, ARankThatSaidItLeftIsLostAtOnce) {
  for (int n : {3, 5}) {
    MemoryStore store;
    std::vector<int> ranks;
    for (int r = 0; r < n; ++r) ranks.push_back(r);
    const int gone = n - 1;
    publish_left_mesh(store, gone, "WORLD_MISMATCH: rank 2 says the world has 5 ranks");
    auto t0 = std::chrono::steady_clock::now();
    auto deadline = deadline_after(5s);
    std::vector<std::future<MeshResult>> fs;
    for (int r = 0; r < gone; ++r)
      fs.push_back(std::async(std::launch::async, [&, r] {
        return run_mesh_probe(store, mesh_options(r, ranks, deadline));
      }));
    std::vector<MeshResult> res;
    for (auto& f : fs) res.push_back(f.get());
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(took, 2.5) << n << " ranks: waited for a rank that said it left";
    const std::size_t alive = static_cast<std::size_t>(gone);
    for (const auto& r : res) {
      EXPECT_EQ(r.silent_ranks, std::vector<int>{gone}) << n;
      EXPECT_EQ(r.pairs_tested, alive * (alive - 1)) << n;
      EXPECT_EQ(r.pairs_untested, 0u) << n;
      EXPECT_EQ(r.pairs_lost, 2 * alive) << n;  // every pair to it, and its own
      EXPECT_FALSE(r.deadline_hit) << n;
      EXPECT_TRUE(r.failures.empty()) << n;
    }
    // Rank 0 knows it left on its own (the gather waits for its verdict instead of taking it dead).
    EXPECT_EQ(res[0].left_ranks, std::vector<int>{gone}) << n;
    auto j = results::judge_mesh(static_cast<const facts::MeshFacts&>(res[1]),
                                 harness::probe_context(world_of(1, n)), {});
    EXPECT_TRUE(has_code(j.findings, "PEER_LOST")) << codes(j.findings);
    EXPECT_FALSE(has_code(j.findings, "MESH_BLOCKED")) << codes(j.findings);
    EXPECT_FALSE(has_code(j.findings, "MESH_INCOMPLETE")) << codes(j.findings);
  }
}

// ---- accepted but never answered vs a dropped SYN ----

TEST(StalledStore, AStoreThatAcceptsButNeverAnswersIsStalledWithoutTheFirewallHint) {
  SilentListener rank0;  // rank 0 SIGSTOPped: its backlog still completes connections
  ASSERT_NE(rank0.port(), 0);
  TcpStoreOptions opt;
  opt.host = "127.0.0.1";
  opt.port = rank0.port();
  opt.op_timeout = 300ms;
  auto w = world_of(3, 4);
  w.master_port = rank0.port();
  try {
    TcpStore::connect(opt, deadline_after(5s));
    FAIL() << "connected to a store that never answers";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::stalled) << e.what();
    auto f = results::connect_finding(e.failure(), harness::probe_context(w), 0.3);
    EXPECT_EQ(f.code, results::Code::RENDEZVOUS_STALLED);
    EXPECT_NE(f.message.find("rank 0 (the store at 127.0.0.1:" + std::to_string(rank0.port()) +
                             ") accepts the connection but does not answer: the process is "
                             "stalled (SIGSTOP, a debugger, swap) or overloaded"),
              std::string::npos)
        << f.message;
    EXPECT_EQ(f.message.find("SYN"), std::string::npos) << f.message;
    EXPECT_EQ(f.hint.find("security group"), std::string::npos) << f.hint;
    EXPECT_EQ(f.hint.find("firewall"), std::string::npos) << f.hint;
  }
}

TEST(StalledStore, ADroppedSynKeepsTheTimeoutAndItsFirewallHint) {
  // A SYN that goes unanswered cannot be made on loopback: the classification is checked on the
  // error connect_tcp throws for it (class timed_out, connect() never completed).
  auto w = world_of(3, 4);
  StoreError dropped(ErrorClass::timed_out,
                     "could not connect to 127.0.0.1:29500 after 5 s: 3 attempts over 1 address "
                     "in 3 rounds; 127.0.0.1:29500: connection timed out (no answer to SYN)");
  auto f = results::connect_finding(dropped.failure(),
                                    harness::probe_context(w), 5.0);
  EXPECT_EQ(f.code, results::Code::RENDEZVOUS_TIMEOUT);
  EXPECT_NE(f.message.find("SYN went unanswered"), std::string::npos) << f.message;
  EXPECT_NE(f.hint.find("security group"), std::string::npos) << f.hint;
  StoreError stalled(ErrorClass::stalled, "connected to 127.0.0.1:29500 but ...");
  auto g = results::connect_finding(stalled.failure(),
                                    harness::probe_context(w), 5.0);
  EXPECT_EQ(g.code, results::Code::RENDEZVOUS_STALLED);
  auto external = w;
  external.external_store = true;
  auto h = results::connect_finding(stalled.failure(),
                                    harness::probe_context(external), 5.0);
  EXPECT_NE(h.message.find("the store at 127.0.0.1:29500 accepts"), std::string::npos)
      << h.message;
  EXPECT_EQ(h.message.find("rank 0 ("), std::string::npos) << h.message;
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
