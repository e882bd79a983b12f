// Peer liveness watch: ranks as threads over the in-memory store for the protocol cases (clean
// stop, EOF / RST, relay, deadlines, fd count), and as forked processes over our TCP store for
// the real thing: a rank killed with SIGKILL must be named by every survivor.
#include <gtest/gtest.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "rendezvous/memory_store.h"
#include "rendezvous/mesh.h"
#include "rendezvous/peer_watch.h"
#include "tests/wait_until.h"
#include "rendezvous/tcp_client.h"
#include "rendezvous/tcp_server.h"

namespace ncclsmoke::rendezvous {
namespace {

using namespace std::chrono_literals;

PeerWatchOptions options(int rank, std::vector<int> ranks, Deadline deadline) {
  PeerWatchOptions o;
  o.rank = rank;
  o.ranks = std::move(ranks);
  o.bind_address = "127.0.0.1";
  o.deadline = deadline;
  for (int r : o.ranks) o.hosts[r] = "host-" + std::to_string(r);
  return o;
}

// Collects every rank's callbacks; wait_for() blocks (bounded) until a predicate holds.
struct Reports {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, std::vector<LostPeer>> by_rank;
  std::map<int, std::vector<SilentPeer>> silent_by, resumed_by;

  std::function<void(const LostPeer&)> sink(int rank) {
    return [this, rank](const LostPeer& lp) {
      {
        std::lock_guard<std::mutex> lock(mu);
        by_rank[rank].push_back(lp);
      }
      cv.notify_all();
    };
  }
  // Short heartbeats and silence for the tests; reports go to silent_by / resumed_by.
  void quick_silence(PeerWatchOptions& o) {
    o.heartbeat_interval = 100ms;
    o.silence_timeout = 600ms;
    int rank = o.rank;
    o.on_silent = [this, rank](const SilentPeer& sp) {
      {
        std::lock_guard<std::mutex> lock(mu);
        silent_by[rank].push_back(sp);
      }
      cv.notify_all();
    };
    o.on_resumed = [this, rank](const SilentPeer& sp) {
      {
        std::lock_guard<std::mutex> lock(mu);
        resumed_by[rank].push_back(sp);
      }
      cv.notify_all();
    };
  }
  std::size_t silent_total() {
    std::lock_guard<std::mutex> lock(mu);
    std::size_t n = 0;
    for (auto& [r, v] : silent_by) n += v.size();
    for (auto& [r, v] : resumed_by) n += v.size();
    return n;
  }
  bool wait_for(std::function<bool()> pred, Millis limit) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, limit, pred);
  }
  std::size_t total() {
    std::lock_guard<std::mutex> lock(mu);
    std::size_t n = 0;
    for (auto& [r, v] : by_rank) n += v.size();
    return n;
  }
};

std::vector<std::unique_ptr<PeerWatch>> start_all(Store& store, const std::vector<int>& start,
                                                  const std::vector<int>& ranks, Reports& rep,
                                                  Deadline deadline,
                                                  std::function<void(PeerWatchOptions&)> tweak = {}) {
  std::vector<std::future<std::unique_ptr<PeerWatch>>> fs;
  for (int r : start)
    fs.push_back(std::async(std::launch::async, [&, r] {
      auto o = options(r, ranks, deadline);
      if (tweak) tweak(o);
      return PeerWatch::start(store, o, rep.sink(r));
    }));
  std::vector<std::unique_ptr<PeerWatch>> out;
  for (auto& f : fs) out.push_back(f.get());
  return out;
}

std::size_t open_fds() {
  std::size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return 0;
  while (auto* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n - 1;  // the DIR's own fd
}

std::vector<int> iota_ranks(int n) {
  std::vector<int> v;
  for (int r = 0; r < n; ++r) v.push_back(r);
  return v;
}

TEST(PeerWatch, WatchPeersIsTheSymmetricUnionOfMeshPeers) {
  auto small = iota_ranks(5);
  EXPECT_EQ(watch_peers(2, small, 64, 4), (std::vector<int>{0, 1, 3, 4}));
  auto ranks = iota_ranks(200);
  std::vector<std::vector<int>> all;
  for (int r = 0; r < 200; ++r) all.push_back(watch_peers(r, ranks, 64, 4));
  for (int r = 0; r < 200; ++r) {
    const auto& mine = all[r];
    for (int m : mesh_peers(r, ranks, 64, 4))
      EXPECT_TRUE(std::binary_search(mine.begin(), mine.end(), m)) << r << " " << m;
    for (int s : mine)
      EXPECT_TRUE(std::binary_search(all[s].begin(), all[s].end(), r)) << r << " " << s;
    EXPECT_LT(mine.size(), 20u);
  }
  auto big = iota_ranks(1024);
  auto t0 = Clock::now();
  auto p = watch_peers(500, big, 64, 4);
  std::printf("watch_peers for 1024 ranks: %zu peers, %.1f ms\n", p.size(),
              seconds_since(t0) * 1000);
  auto fleet = iota_ranks(16384);
  t0 = Clock::now();
  auto q = watch_peers(0, fleet, 64, 4);
  std::printf("watch_peers for 16384 ranks: %zu peers, %.1f ms\n", q.size(),
              seconds_since(t0) * 1000);
  EXPECT_LT(q.size(), 20u);
  EXPECT_TRUE(watch_peers(7, small, 64, 4).empty());  // not taking part
}

TEST(PeerWatch, FourRanksWatchEachOtherAndACleanStopIsNotALoss) {
  MemoryStore store;
  Reports rep;
  auto ranks = iota_ranks(4);
  auto watches = start_all(store, ranks, ranks, rep, deadline_after(5s));
  for (int r = 0; r < 4; ++r) {
    std::vector<int> others;
    for (int s : ranks)
      if (s != r) others.push_back(s);
    EXPECT_EQ(watches[r]->watched(), others) << "rank " << r;
    EXPECT_TRUE(watches[r]->unwatched().empty());
  }
  // One at a time, so the later ones are still watching when the earlier ones leave.
  for (auto& w : watches) {
    auto t0 = Clock::now();
    w->stop();
    std::printf("stop() took %.1f ms\n", seconds_since(t0) * 1000);
    ncclsmoke::testing::pause_for(50ms);  // spaced on purpose: the later ones still watch
  }
  ncclsmoke::testing::pause_for(200ms);  // a check that nothing is reported: no event to wait on
  EXPECT_EQ(rep.total(), 0u);
  for (auto& w : watches) EXPECT_TRUE(w->lost().empty());
  for (auto& w : watches) w->stop();  // idempotent
}

TEST(PeerWatch, BeyondTheThresholdRingAndRandomBoundTheFds) {
  MemoryStore store;
  Reports rep;
  const int n = 12;
  auto ranks = iota_ranks(n);
  std::size_t before = open_fds();
  auto watches = start_all(store, ranks, ranks, rep, deadline_after(8s), [](PeerWatchOptions& o) {
    o.full_threshold = 4;
    o.random_peers = 1;
  });
  std::size_t edges_ends = 0;
  for (int r = 0; r < n; ++r) {
    auto expect = watch_peers(r, ranks, 4, 1);
    EXPECT_EQ(watches[r]->watched(), expect) << "rank " << r;
    EXPECT_TRUE(watches[r]->unwatched().empty());
    EXPECT_GE(expect.size(), 2u);
    EXPECT_LT(expect.size(), static_cast<std::size_t>(n - 1));
    edges_ends += expect.size();
  }
  // Per rank: one listener, one eventfd, one socket per watched peer (both ends live here).
  std::size_t during = open_fds();
  EXPECT_EQ(during - before, edges_ends + 2 * n);
  std::printf("%d ranks, threshold 4 + 1 random: %zu fds in all (%.1f per rank)\n", n,
              during - before, static_cast<double>(during - before) / n);
  for (auto& w : watches) w->stop();
  EXPECT_EQ(open_fds(), before);
  EXPECT_EQ(rep.total(), 0u);
}

TEST(PeerWatch, APeerThatNeverComesEndsUnwatchedAtTheDeadline) {
  MemoryStore store;
  Reports rep;
  auto t0 = Clock::now();
  // Only rank 1 of {0, 1, 2}: rank 0 never dials it, rank 2 never publishes an address.
  auto w = PeerWatch::start(store, options(1, {0, 1, 2}, deadline_after(600ms)), rep.sink(1));
  double took = seconds_since(t0);
  std::printf("setup with two absent peers returned after %.2fs (deadline 0.6s)\n", took);
  EXPECT_LT(took, 5.0);
  EXPECT_TRUE(w->watched().empty());
  EXPECT_EQ(w->unwatched(), (std::vector<int>{0, 2}));
  auto why = w->unwatched_reasons();
  EXPECT_NE(why[0].find("never connected"), std::string::npos) << why[0];
  EXPECT_NE(why[2].find("never published"), std::string::npos) << why[2];
  EXPECT_TRUE(store.check({"watch/addr/1"}));
}

// A raw listener that accepts and never answers: the hello must be bounded by the deadline.
TEST(PeerWatch, APeerThatNeverAnswersTheHelloEndsUnwatched) {
  MemoryStore store;
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  store.set("watch/addr/1", "127.0.0.1:" + std::to_string(ntohs(a.sin_port)));
  Reports rep;
  auto w = PeerWatch::start(store, options(0, {0, 1}, deadline_after(500ms)), rep.sink(0));
  EXPECT_EQ(w->unwatched(), std::vector<int>{1});
  EXPECT_NE(w->unwatched_reasons()[1].find("handshake"), std::string::npos)
      << w->unwatched_reasons()[1];
  w->stop();
  ::close(lfd);
  EXPECT_EQ(rep.total(), 0u);
}

// A hand-made rank `rank` that listens, publishes, answers `count` hellos, then ends each
// connection with `ending` ("eof", "rst", "bye") once `go` is set.
class FakeRank {
 public:
  FakeRank(Store& store, int rank, int count) : rank_(rank) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(lfd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
    store.set("watch/addr/" + std::to_string(rank),
              "127.0.0.1:" + std::to_string(ntohs(a.sin_port)));
    thread_ = std::thread([this, count] { serve(count); });
  }
  ~FakeRank() {
    stop_beating();
    if (thread_.joinable()) thread_.join();
    for (int fd : conns_) ::close(fd);
    ::close(lfd_);
  }
  // After the handshakes: sends a heartbeat every 50 ms to the connections of `to` only (the
  // others hear nothing: a one-sided cut), until end() or the destructor (at most 20 s).
  void beat(std::set<int> to) {
    if (thread_.joinable()) thread_.join();
    beating_ = true;
    beater_ = std::thread([this, to] {
      auto deadline = deadline_after(20s);
      while (beating_ && !expired(deadline)) {
        for (std::size_t i = 0; i < conns_.size(); ++i)
          if (to.count(conn_ranks_[i])) ::send(conns_[i], "H", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        ncclsmoke::testing::pause_for(50ms);  // the fake's heartbeat interval
      }
    });
  }
  void stop_beating() {
    beating_ = false;
    if (beater_.joinable()) beater_.join();
  }
  // Waits (bounded) for the handshakes, then ends every connection.
  void end(const std::string& how) {
    stop_beating();
    if (thread_.joinable()) thread_.join();
    for (int fd : conns_) {
      if (how == "rst") {
        linger l{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      } else if (how == "bye") {
        char b = 'B';
        ::send(fd, &b, 1, MSG_NOSIGNAL);
      }
      ::close(fd);
    }
    conns_.clear();
    conn_ranks_.clear();
  }
  std::size_t connections() const { return conns_.size(); }

 private:
  void serve(int count) {
    auto deadline = deadline_after(5s);
    while (static_cast<int>(conns_.size()) < count && !expired(deadline)) {
      pollfd p{lfd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int fd = ::accept(lfd_, nullptr, nullptr);
      if (fd < 0) continue;
      char in[8];
      std::size_t got = 0;
      while (got < 8 && !expired(deadline)) {
        pollfd q{fd, POLLIN, 0};
        if (::poll(&q, 1, 100) <= 0) continue;
        ssize_t n = ::recv(fd, in + got, 8 - got, 0);
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
      }
      if (got < 8 || std::memcmp(in, "NSPW", 4) != 0) {
        ::close(fd);
        continue;
      }
      char out[8] = {'N', 'S', 'P', 'W'};
      uint32_t r = static_cast<uint32_t>(rank_);
      std::memcpy(out + 4, &r, 4);
      ::send(fd, out, 8, MSG_NOSIGNAL);
      conns_.push_back(fd);
      uint32_t from = 0;
      std::memcpy(&from, in + 4, 4);
      conn_ranks_.push_back(static_cast<int>(from));
    }
  }

  int rank_;
  int lfd_ = -1;
  std::vector<int> conns_;
  std::vector<int> conn_ranks_;  // the rank that said hello on each of conns_
  std::thread thread_;
  std::atomic<bool> beating_{false};
  std::thread beater_;
};

void expect_single_loss(const std::string& ending, const std::string& how) {
  MemoryStore store;
  FakeRank fake(store, 1, 1);
  Reports rep;
  auto w = PeerWatch::start(store, options(0, {0, 1}, deadline_after(3s)), rep.sink(0));
  ASSERT_EQ(w->watched(), std::vector<int>{1});
  fake.end(ending);
  // Wait for the loss itself, not for the first report: on a loaded machine the fake (which
  // sends no heartbeats) can first be reported silent, and the loss follows when the end lands.
  ncclsmoke::testing::wait_until([&] { return !w->lost().empty(); }, 5s);
  auto lost = w->lost();
  ASSERT_FALSE(lost.empty()) << ending << ": no loss reported within 5 s";
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].rank, 1);
  EXPECT_EQ(lost[0].host, "host-1");
  EXPECT_EQ(lost[0].how, how);
  EXPECT_EQ(lost[0].seen_by, 0);
  std::printf("%s reported as '%s' %.3fs after start\n", ending.c_str(), lost[0].how.c_str(),
              lost[0].after_s);
}

TEST(PeerWatch, EofIsALoss) { expect_single_loss("eof", "closed the connection (EOF)"); }
TEST(PeerWatch, ResetIsALoss) { expect_single_loss("rst", "reset (ECONNRESET)"); }

TEST(PeerWatch, ByeThenCloseIsNotALoss) {
  MemoryStore store;
  FakeRank fake(store, 1, 1);
  Reports rep;
  auto w = PeerWatch::start(store, options(0, {0, 1}, deadline_after(3s)), rep.sink(0));
  ASSERT_EQ(w->watched(), std::vector<int>{1});
  fake.end("bye");
  ncclsmoke::testing::pause_for(300ms);  // a check that nothing is reported: no event to wait on
  EXPECT_EQ(rep.total(), 0u);
  EXPECT_TRUE(w->lost().empty());
}

TEST(PeerWatch, StopReturnsWhileACallbackWaitsOnTheCallersLock) {
  MemoryStore store;
  FakeRank fake(store, 1, 1);
  std::mutex held;
  std::promise<void> entered;
  std::atomic<int> calls{0};
  auto w = PeerWatch::start(store, options(0, {0, 1}, deadline_after(3s)), [&](const LostPeer&) {
    if (calls++ == 0) entered.set_value();
    std::lock_guard<std::mutex> lock(held);
  });
  ASSERT_EQ(w->watched(), std::vector<int>{1});
  {
    std::unique_lock<std::mutex> lock(held);
    fake.end("eof");
    ASSERT_EQ(entered.get_future().wait_for(5s), std::future_status::ready);
    auto stopping = std::async(std::launch::async, [&] { w->stop(); });
    EXPECT_EQ(stopping.wait_for(5s), std::future_status::ready) << "stop() blocked on the callback";
    stopping.wait();
  }
  w.reset();  // joins the watch thread once the callback got the lock
  EXPECT_EQ(calls.load(), 1);
}

TEST(PeerWatch, BeyondTheThresholdALossIsRelayedToEveryone) {
  // A ring of 8 (threshold 2, no random peers): rank 7's only neighbours are 6 and 0, both of
  // which dial it. The other five can only learn of its death by relay.
  MemoryStore store;
  Reports rep;
  auto ranks = iota_ranks(8);
  FakeRank fake(store, 7, 2);
  std::vector<int> real = iota_ranks(7);
  auto watches = start_all(store, real, ranks, rep, deadline_after(5s), [](PeerWatchOptions& o) {
    o.full_threshold = 2;
    o.random_peers = 0;
  });
  EXPECT_EQ(watches[0]->watched(), (std::vector<int>{1, 7}));
  EXPECT_EQ(watches[3]->watched(), (std::vector<int>{2, 4}));
  fake.end("eof");
  bool all = rep.wait_for(
      [&] {
        for (int r : real)
          if (rep.by_rank[r].empty()) return false;
        return true;
      },
      5s);
  ASSERT_TRUE(all);
  for (int r : real) {
    auto lost = watches[r]->lost();
    ASSERT_EQ(lost.size(), 1u) << "rank " << r;
    EXPECT_EQ(lost[0].rank, 7);
    EXPECT_EQ(lost[0].host, "host-7");
    if (r == 0 || r == 6) {
      EXPECT_EQ(lost[0].seen_by, r);
    } else {
      EXPECT_TRUE(lost[0].seen_by == 0 || lost[0].seen_by == 6) << lost[0].seen_by;
      EXPECT_NE(lost[0].how.find("reported lost by rank"), std::string::npos) << lost[0].how;
    }
    std::printf("rank %d: lost 7 '%s' at %.3fs\n", r, lost[0].how.c_str(), lost[0].after_s);
  }
  for (auto& w : watches) w->stop();
  EXPECT_EQ(rep.total(), real.size());  // the clean stops added nothing
}

// ---- wait chains (pure) -------------------------------------------------------------------

WaitState waits_on(int r, std::string phase = "mesh", std::string what = "recv from") {
  WaitState w;
  w.phase = std::move(phase);
  w.what = std::move(what);
  w.waiting_on = r;
  w.since = Clock::now() - 2s;
  return w;
}

TEST(WaitChain, AChainPointsAtTheSilentRoot) {
  std::map<int, WaitState> st{{3, waits_on(2)}, {2, waits_on(1)}, {1, waits_on(0)}, {0, waits_on(-1)}};
  auto c = follow_wait_chain(3, st, {0});
  EXPECT_EQ(c.path, (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(c.root, std::optional<int>(0));
  EXPECT_FALSE(c.cycle);
  EXPECT_EQ(c.root_reason, "is silent or lost");
  EXPECT_EQ(root_of_wait_chain(3, st, {0}), std::optional<int>(0));
  // Rank 0 frozen while itself waiting on 3 (a cycle on paper): its silence ends the walk.
  st[0] = waits_on(3);
  EXPECT_EQ(root_of_wait_chain(3, st, {0}), std::optional<int>(0));
  EXPECT_EQ(root_of_wait_chain(1, st, {0}), std::optional<int>(0));
  // A silent rank in the middle is the root, not the end of the chain.
  EXPECT_EQ(root_of_wait_chain(3, st, {2, 0}), std::optional<int>(2));
  std::string text = wait_chain_text(follow_wait_chain(3, st, {0}), st, {{0, "node-a"}, {3, "node-d"}});
  std::printf("%s\n", text.c_str());
  EXPECT_NE(text.find("rank 3 (host node-d) waits on rank 2 in mesh (recv from) for 2."), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0 (host node-a) is silent or lost"), std::string::npos) << text;
}

TEST(WaitChain, ACycleHasNoRoot) {
  std::map<int, WaitState> st{{3, waits_on(2)}, {2, waits_on(1)}, {1, waits_on(3)}};
  auto c = follow_wait_chain(3, st, {});
  EXPECT_TRUE(c.cycle);
  EXPECT_FALSE(c.root.has_value());
  EXPECT_EQ(c.path, (std::vector<int>{3, 2, 1, 3}));
  // Entering a cycle that does not contain the start.
  st[4] = waits_on(3);
  c = follow_wait_chain(4, st, {});
  EXPECT_TRUE(c.cycle);
  EXPECT_EQ(c.path, (std::vector<int>{4, 3, 2, 1, 3}));
  EXPECT_NE(wait_chain_text(c, st, {}).find("deadlock"), std::string::npos);
}

TEST(WaitChain, TheRootIsTheFirstRankThatIsNotWaiting) {
  std::map<int, WaitState> st{{3, waits_on(2)}, {2, waits_on(1)}, {1, waits_on(-1, "sweep", "allreduce")}};
  auto c = follow_wait_chain(3, st, {});
  EXPECT_EQ(c.root, std::optional<int>(1));
  EXPECT_EQ(c.root_reason, "waits on nobody");
  // Waiting on itself is waiting on nobody.
  st[1] = waits_on(1);
  EXPECT_EQ(root_of_wait_chain(3, st, {}), std::optional<int>(1));
  // The start itself not waiting: it is its own root.
  EXPECT_EQ(root_of_wait_chain(1, st, {}), std::optional<int>(1));
}

// Rank 0 died a heartbeat after the others last sent their wait states: their chain goes round
// (2 on 1, 1 on 2) or ends on a rank with no state, never reaching rank 0. The rank the watch
// knows is dead is the root, not "no root" and not a live rank.
TEST(WaitChain, StaleStatesAroundADeadRankEndAtIt) {
  std::map<int, WaitState> st{{2, waits_on(1)}, {1, waits_on(2)}};
  auto c = follow_wait_chain(2, st, {0});
  EXPECT_FALSE(c.cycle);
  EXPECT_EQ(c.root, std::optional<int>(0));
  EXPECT_EQ(c.path, (std::vector<int>{2, 1, 2, 0}));
  EXPECT_NE(c.root_reason.find("silent or lost"), std::string::npos) << c.root_reason;
  std::map<int, WaitState> partial{{2, waits_on(3)}};
  EXPECT_EQ(root_of_wait_chain(2, partial, {0}), std::optional<int>(0));
  // Without a rank known stopped, a cycle is still a cycle.
  EXPECT_TRUE(follow_wait_chain(2, st, {}).cycle);
}

TEST(WaitChain, AMissingStateEndsTheChainThere) {
  std::map<int, WaitState> st{{3, waits_on(2)}, {2, waits_on(7)}};
  auto c = follow_wait_chain(3, st, {});
  EXPECT_EQ(c.path, (std::vector<int>{3, 2, 7}));
  EXPECT_EQ(c.root, std::optional<int>(7));
  EXPECT_EQ(c.root_reason, "has no wait state");
  EXPECT_EQ(root_of_wait_chain(5, {}, {}), std::optional<int>(5));  // nothing known at all
  EXPECT_EQ(root_of_wait_chain(5, {}, {5}), std::optional<int>(5));
}

// ---- silence and wait states over threads ------------------------------------------------

TEST(PeerWatch, BadSilenceOptionsAreRefused) {
  MemoryStore store;
  auto o = options(0, {0}, deadline_after(1s));
  o.heartbeat_interval = 500ms;
  o.silence_timeout = 600ms;  // < 2 heartbeats
  try {
    PeerWatch::start(store, o, {});
    FAIL() << "accepted silence_timeout 600 ms with heartbeats every 500 ms";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("silence_timeout"), std::string::npos) << e.what();
  }
  o.heartbeat_interval = 0ms;
  EXPECT_THROW(PeerWatch::start(store, o, {}), StoreError);
  o.heartbeat_interval = 100ms;
  o.silence_timeout = 0ms;  // off: fine
  EXPECT_NO_THROW(PeerWatch::start(store, o, {}));
}

// FakeRank answers the hello and then sends nothing: exactly what a frozen rank looks like.
TEST(PeerWatch, APeerThatSendsNothingIsSilentThenLost) {
  MemoryStore store;
  FakeRank fake(store, 1, 1);
  Reports rep;
  auto o = options(0, {0, 1}, deadline_after(3s));
  rep.quick_silence(o);
  auto w = PeerWatch::start(store, o, rep.sink(0));
  ASSERT_EQ(w->watched(), std::vector<int>{1});
  ASSERT_TRUE(rep.wait_for([&] { return !rep.silent_by[0].empty(); }, 5s));
  auto sil = w->silent();
  ASSERT_EQ(sil.size(), 1u);
  EXPECT_EQ(sil[0].rank, 1);
  EXPECT_EQ(sil[0].host, "host-1");
  EXPECT_EQ(sil[0].seen_by, 0);
  EXPECT_GE(sil[0].silent_for_s, 0.6);
  EXPECT_NE(sil[0].how.find("not even a heartbeat"), std::string::npos) << sil[0].how;
  EXPECT_EQ(w->silence_witnesses()[1], std::set<int>{0});
  std::printf("silent: '%s' at %.3fs\n", sil[0].how.c_str(), sil[0].after_s);
  EXPECT_TRUE(w->lost().empty());
  fake.end("eof");
  ASSERT_TRUE(rep.wait_for([&] { return !rep.by_rank[0].empty(); }, 5s));
  EXPECT_TRUE(w->silent().empty());  // lost now, no longer "silent"
  EXPECT_TRUE(w->resumed().empty());
  EXPECT_EQ(rep.silent_by[0].size(), 1u);  // reported once
}

TEST(PeerWatch, APeerThatBeatsIsNeverSilentAndOneThatStartsAgainResumes) {
  MemoryStore store;
  FakeRank fake(store, 1, 1);
  Reports rep;
  auto o = options(0, {0, 1}, deadline_after(3s));
  rep.quick_silence(o);
  auto w = PeerWatch::start(store, o, rep.sink(0));
  ASSERT_EQ(w->watched(), std::vector<int>{1});
  fake.beat({0});
  ncclsmoke::testing::pause_for(1500ms);  // 2.5 silence timeouts of heartbeats only
  EXPECT_EQ(rep.silent_total(), 0u);
  fake.stop_beating();
  ASSERT_TRUE(rep.wait_for([&] { return !rep.silent_by[0].empty(); }, 5s));
  fake.beat({0});
  ASSERT_TRUE(rep.wait_for([&] { return !rep.resumed_by[0].empty(); }, 5s));
  auto res = w->resumed();
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].rank, 1);
  EXPECT_EQ(res[0].how, "speaks again");
  EXPECT_GE(res[0].silent_for_s, 0.6);
  EXPECT_TRUE(w->silent().empty());
  EXPECT_TRUE(w->silence_witnesses().empty());
  fake.end("bye");
  ncclsmoke::testing::pause_for(200ms);  // a check that nothing is reported: no event to wait on
  EXPECT_EQ(rep.total(), 0u);
  EXPECT_EQ(rep.silent_by[0].size(), 1u);
}

TEST(PeerWatch, ARelayNeverMakesSilentAPeerWeStillHear) {
  // Rank 3 (fake) beats to 0 and 1 only: 2 sees it silent, 0 and 1 must not, but they keep
  // 2's report as evidence of a one-sided cut.
  MemoryStore store;
  Reports rep;
  auto ranks = iota_ranks(4);
  FakeRank fake(store, 3, 3);
  auto watches = start_all(store, iota_ranks(3), ranks, rep, deadline_after(5s),
                           [&](PeerWatchOptions& o) { rep.quick_silence(o); });
  fake.beat({0, 1});
  ASSERT_TRUE(rep.wait_for([&] { return !rep.silent_by[2].empty(); }, 5s));
  EXPECT_EQ(rep.silent_by[2][0].rank, 3);
  EXPECT_TRUE(ncclsmoke::testing::wait_until(
      [&] {
        return watches[0]->silence_witnesses()[3] == std::set<int>{2} &&
               watches[1]->silence_witnesses()[3] == std::set<int>{2};
      },
      1s));
  ncclsmoke::testing::pause_for(700ms);  // more than a silence timeout: 0 and 1 still hear 3
  EXPECT_TRUE(watches[0]->silent().empty());
  EXPECT_TRUE(watches[1]->silent().empty());
  {
    std::lock_guard<std::mutex> lock(rep.mu);
    EXPECT_TRUE(rep.silent_by[0].empty());
    EXPECT_TRUE(rep.silent_by[1].empty());
    EXPECT_EQ(rep.silent_by[2].size(), 1u);
  }
  fake.end("bye");
  for (auto& w : watches) w->stop();
  EXPECT_EQ(rep.total(), 0u);
}

TEST(PeerWatch, BeyondTheThresholdSilenceIsRelayedToEveryone) {
  // The ring of 8 again: only 0 and 6 hear the fake rank 7; the other five learn by relay.
  MemoryStore store;
  Reports rep;
  auto ranks = iota_ranks(8);
  FakeRank fake(store, 7, 2);
  std::vector<int> real = iota_ranks(7);
  auto watches = start_all(store, real, ranks, rep, deadline_after(5s), [&](PeerWatchOptions& o) {
    o.full_threshold = 2;
    o.random_peers = 0;
    rep.quick_silence(o);
  });
  bool all = rep.wait_for(
      [&] {
        for (int r : real)
          if (rep.silent_by[r].empty()) return false;
        return true;
      },
      8s);
  ASSERT_TRUE(all);
  for (int r : real) {
    auto sil = watches[r]->silent();
    ASSERT_EQ(sil.size(), 1u) << "rank " << r;
    EXPECT_EQ(sil[0].rank, 7);
    if (r == 0 || r == 6) {
      EXPECT_EQ(sil[0].seen_by, r);
    } else {
      EXPECT_TRUE(sil[0].seen_by == 0 || sil[0].seen_by == 6) << sil[0].seen_by;
      EXPECT_NE(sil[0].how.find("reported silent by rank"), std::string::npos) << sil[0].how;
    }
    std::printf("rank %d: 7 silent '%s' at %.3fs\n", r, sil[0].how.c_str(), sil[0].after_s);
  }
  fake.end("eof");
  all = rep.wait_for(
      [&] {
        for (int r : real)
          if (rep.by_rank[r].empty()) return false;
        return true;
      },
      5s);
  ASSERT_TRUE(all);
  for (int r : real) EXPECT_TRUE(watches[r]->silent().empty()) << "rank " << r;
  for (auto& w : watches) w->stop();
  EXPECT_EQ(rep.total(), real.size());
  for (int r : real) {
    std::lock_guard<std::mutex> lock(rep.mu);
    EXPECT_EQ(rep.silent_by[r].size(), 1u) << "rank " << r;
    EXPECT_TRUE(rep.resumed_by[r].empty()) << "rank " << r;
  }
}

TEST(PeerWatch, WaitStatesReachEveryPeerAndTheLatestWins) {
  MemoryStore store;
  Reports rep;
  auto ranks = iota_ranks(3);
  auto watches = start_all(store, ranks, ranks, rep, deadline_after(5s),
                           [&](PeerWatchOptions& o) { rep.quick_silence(o); });
  for (int r = 0; r < 3; ++r) watches[r]->set_wait_state(waits_on((r + 2) % 3, "mesh", "ring recv from"));
  // A burst from rank 0: rate-limited on the wire, but the last one must arrive.
  for (int i = 0; i < 200; ++i) {
    WaitState w = waits_on(2, "transport:socket", "allreduce iteration " + std::to_string(i));
    watches[0]->set_wait_state(w);
  }
  auto seen_all = [&] {
    for (int r = 0; r < 3; ++r) {
      auto st = watches[r]->peer_wait_states();
      if (st.size() != 3) return false;
      if (st[0].what != "allreduce iteration 199") return false;
    }
    return true;
  };
  ASSERT_TRUE(ncclsmoke::testing::wait_until(seen_all, 2s));
  auto st = watches[1]->peer_wait_states();
  EXPECT_EQ(st[0].phase, "transport:socket");
  EXPECT_EQ(st[0].waiting_on, 2);
  EXPECT_EQ(st[2].what, "ring recv from");
  EXPECT_EQ(st[2].waiting_on, 1);
  EXPECT_EQ(st[1].waiting_on, 0);  // our own
  // since is converted to our clock: about 2 s ago, never in the future.
  double age = std::chrono::duration<double>(Clock::now() - st[2].since).count();
  EXPECT_GE(age, 1.9);
  EXPECT_LT(age, 30.0);
  EXPECT_TRUE(follow_wait_chain(1, st, {}).cycle);  // 1 -> 0 -> 2 -> 1
  watches[0]->set_wait_state({});  // rank 0 stops waiting
  ASSERT_TRUE(ncclsmoke::testing::wait_until(
      [&] {
        st = watches[1]->peer_wait_states();
        return st[0].waiting_on == -1;
      },
      2s));
  EXPECT_EQ(root_of_wait_chain(1, st, {}), std::optional<int>(0));
  EXPECT_EQ(root_of_wait_chain(2, st, {}), std::optional<int>(0));
  // Oversized fields are cut, not refused.
  watches[2]->set_wait_state(waits_on(1, std::string(500, 'p'), std::string(5000, 'w')));
  EXPECT_TRUE(ncclsmoke::testing::wait_until(
      [&] {
        st = watches[0]->peer_wait_states();
        return st[2].what.size() == 256 && st[2].phase.size() == 64;
      },
      2s));
  for (auto& w : watches) w->stop();
  EXPECT_EQ(rep.total(), 0u);
  EXPECT_EQ(rep.silent_total(), 0u);
}

double cpu_seconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// No busy loop: the watch threads sleep in poll() between heartbeats, and a hot loop of
// set_wait_state() (rate-limited to one send per 100 ms) does not keep them awake.
TEST(PeerWatch, WatchThreadsDoNotSpinIdleOrUnderAStormOfWaitStates) {
  MemoryStore store;
  Reports rep;
  auto ranks = iota_ranks(4);
  auto watches = start_all(store, ranks, ranks, rep, deadline_after(5s),
                           [&](PeerWatchOptions& o) { rep.quick_silence(o); });
  double all0 = cpu_seconds(RUSAGE_SELF), me0 = cpu_seconds(RUSAGE_THREAD);
  ncclsmoke::testing::pause_for(500ms);  // the idle half second whose CPU time is measured
  double idle = (cpu_seconds(RUSAGE_SELF) - all0) - (cpu_seconds(RUSAGE_THREAD) - me0);
  all0 = cpu_seconds(RUSAGE_SELF);
  me0 = cpu_seconds(RUSAGE_THREAD);
  auto t0 = Clock::now();
  long calls = 0;
  while (Clock::now() - t0 < 500ms) {
    watches[0]->set_wait_state(waits_on(3, "transport:socket", "chunk " + std::to_string(calls)));
    ++calls;
  }
  double storm = (cpu_seconds(RUSAGE_SELF) - all0) - (cpu_seconds(RUSAGE_THREAD) - me0);
  std::printf("4 watch threads, heartbeats every 100 ms: %.1f ms CPU in 0.5 s idle; %.1f ms CPU "
              "during 0.5 s of %ld set_wait_state calls\n", idle * 1000, storm * 1000, calls);
  EXPECT_LT(idle, 0.15);   // a spinning thread alone would take most of a core
  EXPECT_LT(storm, 0.15);
  std::string last = "chunk " + std::to_string(calls - 1);
  EXPECT_TRUE(ncclsmoke::testing::wait_until(
      [&] { return watches[2]->peer_wait_states()[0].what == last; }, 2s))
      << "the last of " << calls << " wait states never arrived";
  for (auto& w : watches) w->stop();
  EXPECT_EQ(rep.silent_total(), 0u);
}

// ---- processes: a real SIGKILL ---------------------------------------------------------------

// Reads lines from `fd` until `done` says so or `limit` passes.
bool read_lines(int fd, std::string& buf, std::vector<std::string>& lines, Millis limit,
                std::function<bool()> done) {
  auto deadline = deadline_after(limit);
  while (!done()) {
    if (expired(deadline)) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(remaining(deadline).count(), 100))) <= 0)
      continue;
    char tmp[4096];
    ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n <= 0) return done();  // every writer gone
    buf.append(tmp, static_cast<std::size_t>(n));
    for (auto nl = buf.find('\n'); nl != std::string::npos; nl = buf.find('\n')) {
      lines.push_back(buf.substr(0, nl));
      buf.erase(0, nl + 1);
    }
  }
  return true;
}

struct Children {
  std::vector<pid_t> pids;
  ~Children() {
    for (pid_t p : pids)
      if (p > 0) ::kill(p, SIGKILL);
    for (pid_t p : pids)
      if (p > 0) ::waitpid(p, nullptr, 0);
  }
};

void write_line(int fd, const std::string& s) {
  std::string line = s + "\n";
  ssize_t n = ::write(fd, line.data(), line.size());  // < PIPE_BUF: atomic among the children
  (void)n;
}

[[noreturn]] void rank_child(int rank, int world, uint16_t port, int report_fd, int ctl_fd) {
  try {
    TcpStoreOptions so;
    so.host = "127.0.0.1";
    so.port = port;
    so.op_timeout = 5000ms;
    auto store = TcpStore::connect(so, deadline_after(5s));
    auto o = options(rank, iota_ranks(world), deadline_after(5s));
    auto w = PeerWatch::start(*store, o, [&](const LostPeer& lp) {
      write_line(report_fd, "lost " + std::to_string(rank) + " " + std::to_string(lp.rank) + " " +
                                lp.host + " " + std::to_string(lp.after_s) + " " + lp.how);
    });
    write_line(report_fd, "ready " + std::to_string(rank) + " " +
                              std::to_string(w->watched().size()) + " " +
                              std::to_string(w->unwatched().size()));
    pollfd p{ctl_fd, POLLIN, 0};
    ::poll(&p, 1, 20000);  // the parent closes the pipe to say "finish"
    w->stop();
    write_line(report_fd, "stopped " + std::to_string(rank));
    ::_exit(0);
  } catch (const std::exception& e) {
    write_line(report_fd, "error " + std::to_string(rank) + " " + e.what());
    ::_exit(1);
  }
}

// The store server runs in its own child, so the test process has no threads when it forks
// ranks. Returns the port (0 on failure); close *ctl_out to stop it.
uint16_t fork_store_server(Children& kids, int* ctl_out) {
  int port_pipe[2], server_ctl[2];
  if (::pipe(port_pipe) != 0 || ::pipe(server_ctl) != 0) return 0;
  pid_t server = ::fork();
  if (server < 0) return 0;
  if (server == 0) {
    ::close(port_pipe[0]);
    ::close(server_ctl[1]);
    TcpStoreServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    auto s = TcpStoreServer::start(so);
    uint16_t port = s->port();
    ssize_t n = ::write(port_pipe[1], &port, sizeof port);
    (void)n;
    pollfd p{server_ctl[0], POLLIN, 0};
    ::poll(&p, 1, 60000);
    s->stop();
    ::_exit(0);
  }
  kids.pids.push_back(server);
  ::close(port_pipe[1]);
  ::close(server_ctl[0]);
  *ctl_out = server_ctl[1];
  uint16_t port = 0;
  pollfd pp{port_pipe[0], POLLIN, 0};
  if (::poll(&pp, 1, 10000) <= 0 ||
      ::read(port_pipe[0], &port, sizeof port) != static_cast<ssize_t>(sizeof port))
    port = 0;
  ::close(port_pipe[0]);
  return port;
}

TEST(PeerWatchProcesses, EverySurvivorNamesTheRankKilledWithSigkill) {
  const int world = 4, victim = 2;
  Children kids;
  int server_ctl[2] = {-1, -1};
  uint16_t port = fork_store_server(kids, &server_ctl[1]);
  ASSERT_NE(port, 0);

  int report[2], ctl[2];
  ASSERT_EQ(::pipe(report), 0);
  ASSERT_EQ(::pipe(ctl), 0);
  std::map<int, pid_t> rank_pid;
  for (int r = 0; r < world; ++r) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(report[0]);
      ::close(ctl[1]);
      ::close(server_ctl[1]);
      rank_child(r, world, port, report[1], ctl[0]);
    }
    kids.pids.push_back(pid);
    rank_pid[r] = pid;
  }
  ::close(report[1]);
  ::close(ctl[0]);

  std::string buf;
  std::vector<std::string> lines;
  auto count = [&](const std::string& prefix) {
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
  };
  bool ready = read_lines(report[0], buf, lines, 15s, [&] {
    return count("ready ") + count("error ") == world;
  });
  for (auto& l : lines) std::printf("  child: %s\n", l.c_str());
  ASSERT_TRUE(ready);
  ASSERT_EQ(count("error "), 0);
  for (auto& l : lines) {
    std::istringstream in(l);
    std::string word;
    int rank = -1;
    std::size_t watched = 0, unwatched = 0;
    in >> word >> rank >> watched >> unwatched;
    EXPECT_EQ(watched, static_cast<std::size_t>(world - 1)) << l;
    EXPECT_EQ(unwatched, 0u) << l;
  }

  lines.clear();
  auto killed_at = Clock::now();
  ASSERT_EQ(::kill(rank_pid[victim], SIGKILL), 0);
  bool reported = read_lines(report[0], buf, lines, 5s, [&] {
    return count("lost ") >= world - 1;
  });
  double took = seconds_since(killed_at);
  for (auto& l : lines) std::printf("  child: %s\n", l.c_str());
  std::printf("all %d survivors named rank %d %.1f ms after SIGKILL\n", world - 1, victim,
              took * 1000);
  EXPECT_TRUE(reported);

  ::close(ctl[1]);  // survivors stop cleanly: that must add no loss
  read_lines(report[0], buf, lines, 10s, [&] { return count("stopped ") == world - 1; });
  for (auto& l : lines) {
    if (l.rfind("lost ", 0) == 0) std::printf("  child: %s\n", l.c_str());
  }
  std::map<int, std::vector<std::string>> lost_by;
  for (auto& l : lines) {
    if (l.rfind("lost ", 0) != 0) continue;
    std::istringstream in(l);
    std::string word, host, how;
    int who = -1, rank = -1;
    double after = 0;
    in >> word >> who >> rank >> host >> after;
    std::getline(in, how);
    EXPECT_EQ(rank, victim) << l;
    EXPECT_EQ(host, "host-" + std::to_string(victim)) << l;
    EXPECT_TRUE(how.find("EOF") != std::string::npos || how.find("ECONNRESET") != std::string::npos)
        << l;
    lost_by[who].push_back(l);
  }
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    EXPECT_EQ(lost_by[r].size(), 1u) << "rank " << r << " should name rank " << victim << " once";
  }
  EXPECT_EQ(count("stopped "), world - 1);
  ::close(report[0]);
  ::close(server_ctl[1]);
  for (auto& pid : kids.pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (pid != rank_pid[victim]) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "pid " << pid;
    }
    pid = 0;  // reaped: the guard must not signal a reused pid
  }
}

// ---- processes: a real SIGSTOP (frozen, not dead) ----------------------------------------

// True when the machine is so loaded (load average above twice the cores, e.g. another test
// launching a thousand ranks) that a 600 ms silence can be real overload, not a bug.
bool overloaded() {
  double load = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = 0;
    std::fclose(f);
  }
  long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  bool over = load > 2.0 * static_cast<double>(std::max(1L, cores));
  if (over) std::printf("machine overloaded (load %.1f on %ld cores)\n", load, cores);
  return over;
}

[[noreturn]] void silence_child(int rank, int world, uint16_t port, int report_fd, int ctl_fd,
                                int busy_rank) {
  try {
    TcpStoreOptions so;
    so.host = "127.0.0.1";
    so.port = port;
    so.op_timeout = 5000ms;
    auto store = TcpStore::connect(so, deadline_after(5s));
    auto o = options(rank, iota_ranks(world), deadline_after(5s));
    o.heartbeat_interval = 100ms;
    o.silence_timeout = 600ms;
    auto me = std::to_string(rank);
    o.on_silent = [&](const SilentPeer& sp) {
      write_line(report_fd, "silent " + me + " " + std::to_string(sp.rank) + " " +
                                std::to_string(sp.seen_by) + " " + std::to_string(sp.silent_for_s));
    };
    o.on_resumed = [&](const SilentPeer& sp) {
      write_line(report_fd, "resumed " + me + " " + std::to_string(sp.rank) + " " +
                                std::to_string(sp.silent_for_s));
    };
    auto w = PeerWatch::start(*store, o, [&](const LostPeer& lp) {
      write_line(report_fd, "lost " + me + " " + std::to_string(lp.rank) + " " + lp.how);
    });
    w->set_wait_state(waits_on((rank + world - 1) % world, "test", "ring recv from"));
    ncclsmoke::testing::wait_until(
        [&] { return w->peer_wait_states().size() >= static_cast<std::size_t>(world); }, 5s);
    std::string waits = "waits " + me;
    for (const auto& [k, ws] : w->peer_wait_states())
      waits += " " + std::to_string(k) + ":" + std::to_string(ws.waiting_on);
    write_line(report_fd, waits);
    write_line(report_fd, "ready " + me + " " + std::to_string(w->watched().size()));
    if (rank == busy_rank) {
      // CPU-bound main thread, 2.5 silence timeouts long: the watch thread must still beat.
      volatile uint64_t spin = 0;
      auto t0 = Clock::now();
      while (Clock::now() - t0 < 1500ms) spin = spin + 1;
      write_line(report_fd, "busy-done " + me);
    }
    pollfd p{ctl_fd, POLLIN, 0};
    ::poll(&p, 1, 60000);  // the parent closes the pipe to say "finish"
    w->stop();
    write_line(report_fd, "stopped " + me);
    ::_exit(0);
  } catch (const std::exception& e) {
    write_line(report_fd, "error " + std::to_string(rank) + " " + e.what());
    ::_exit(1);
  }
}

TEST(PeerWatchProcesses, AFrozenRankIsNamedSilentByEveryoneThenResumedOrLost) {
  const int world = 4, busy = 1, frozen = 0, killed = 2;
  Children kids;
  int server_ctl = -1;
  uint16_t port = fork_store_server(kids, &server_ctl);
  ASSERT_NE(port, 0);
  int report[2], ctl[2];
  ASSERT_EQ(::pipe(report), 0);
  ASSERT_EQ(::pipe(ctl), 0);
  std::map<int, pid_t> rank_pid;
  for (int r = 0; r < world; ++r) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(report[0]);
      ::close(ctl[1]);
      ::close(server_ctl);
      silence_child(r, world, port, report[1], ctl[0], busy);
    }
    kids.pids.push_back(pid);
    rank_pid[r] = pid;
  }
  ::close(report[1]);
  ::close(ctl[0]);

  std::string buf;
  std::vector<std::string> lines;
  auto matching = [&](const std::string& prefix) {
    std::vector<std::string> out;
    for (auto& l : lines)
      if (l.rfind(prefix, 0) == 0) out.push_back(l);
    return out;
  };
  auto count = [&](const std::string& prefix) { return matching(prefix).size(); };
  // "silent <reporter> <about>" lines about `about`, by reporter.
  auto reporters = [&](const std::string& word, int about) {
    std::multiset<int> by;
    for (auto& l : matching(word + " ")) {
      std::istringstream in(l);
      std::string w;
      int who = -1, k = -1;
      in >> w >> who >> k;
      if (k == about) by.insert(who);
    }
    return by;
  };
  // silent minus resumed, per (reporter, about): what a reporter still holds silent.
  auto open_silences = [&] {
    std::map<std::pair<int, int>, int> open;
    for (auto& l : lines) {
      std::istringstream in(l);
      std::string w;
      int who = -1, k = -1;
      in >> w >> who >> k;
      if (w == "silent") ++open[{who, k}];
      if (w == "resumed") --open[{who, k}];
    }
    return open;
  };
  auto show = [&](std::size_t from) {
    for (std::size_t i = from; i < lines.size(); ++i) std::printf("  child: %s\n", lines[i].c_str());
  };

  bool ready = read_lines(report[0], buf, lines, 15s, [&] {
    return count("ready ") + count("error ") == world;
  });
  show(0);
  ASSERT_TRUE(ready);
  ASSERT_EQ(count("error "), 0u);
  // Wait states: every rank sees every rank's "waits on my left neighbour".
  for (auto& l : matching("waits ")) {
    std::string expect;
    for (int k = 0; k < world; ++k)
      expect += " " + std::to_string(k) + ":" + std::to_string((k + world - 1) % world);
    EXPECT_EQ(l.substr(l.find(' ', 6)), expect) << l;
  }
  EXPECT_EQ(count("waits "), static_cast<std::size_t>(world));

  std::size_t mark = lines.size();
  ASSERT_TRUE(read_lines(report[0], buf, lines, 15s, [&] { return count("busy-done ") == 1; }));
  show(mark);
  if (!overloaded()) {
    EXPECT_EQ(count("silent "), 0u) << "a CPU-bound main thread made a rank look silent";
  }
  for (auto& [pair, n] : open_silences())  // even overloaded: every silence must have ended
    EXPECT_EQ(n, 0) << "rank " << pair.first << " still holds rank " << pair.second << " silent";

  // SIGSTOP rank 0: its sockets stay open, no EOF; the survivors must name it silent.
  mark = lines.size();
  auto stopped_at = Clock::now();
  ASSERT_EQ(::kill(rank_pid[frozen], SIGSTOP), 0);
  bool named = read_lines(report[0], buf, lines, 10s,
                          [&] { return reporters("silent", frozen).size() >= world - 1u; });
  double took = seconds_since(stopped_at);
  show(mark);
  std::printf("all %d others named SIGSTOPped rank %d silent %.2fs after SIGSTOP (timeout 0.6s)\n",
              world - 1, frozen, took);
  EXPECT_TRUE(named);
  auto once = [](std::multiset<int> m) { return std::set<int>(m.begin(), m.end()); };
  EXPECT_EQ(once(reporters("silent", frozen)), (std::set<int>{1, 2, 3}));
  mark = lines.size();
  ASSERT_EQ(::kill(rank_pid[frozen], SIGCONT), 0);
  bool back = read_lines(report[0], buf, lines, 10s,
                         [&] { return reporters("resumed", frozen).size() >= world - 1u; });
  show(mark);
  EXPECT_TRUE(back);
  EXPECT_EQ(once(reporters("resumed", frozen)), (std::set<int>{1, 2, 3}));
  EXPECT_EQ(count("lost "), 0u);

  // SIGSTOP then SIGKILL rank 2: silent first, then lost.
  mark = lines.size();
  ASSERT_EQ(::kill(rank_pid[killed], SIGSTOP), 0);
  named = read_lines(report[0], buf, lines, 10s,
                     [&] { return reporters("silent", killed).size() >= world - 1u; });
  EXPECT_TRUE(named);
  EXPECT_EQ(once(reporters("silent", killed)), (std::set<int>{0, 1, 3}));
  ASSERT_EQ(::kill(rank_pid[killed], SIGKILL), 0);
  bool lost = read_lines(report[0], buf, lines, 10s,
                         [&] { return reporters("lost", killed).size() >= world - 1u; });
  show(mark);
  EXPECT_TRUE(lost);
  EXPECT_EQ(reporters("lost", killed), (std::multiset<int>{0, 1, 3}));

  // A clean stop adds nothing: no loss, no silence, no resume.
  mark = lines.size();
  ::close(ctl[1]);
  read_lines(report[0], buf, lines, 10s, [&] { return count("stopped ") == world - 1u; });
  show(mark);
  EXPECT_EQ(count("stopped "), world - 1u);
  // Every silence ended: with a resume, or (rank 2) with its loss. Losses: rank 2 only, once each.
  for (auto& [pair, n] : open_silences())
    EXPECT_EQ(n, pair.second == killed ? 1 : 0)
        << "rank " << pair.first << " about rank " << pair.second;
  EXPECT_EQ(count("lost "), 3u);
  // On a machine that is not overloaded, exactly the reports above and nothing else (rank 0,
  // once resumed, called nobody silent; nobody reported anything after stop()).
  if (!overloaded()) {
    EXPECT_EQ(count("silent "), 6u);
    EXPECT_EQ(count("resumed "), 3u);
  } else {
    std::printf("overloaded: %zu silent / %zu resumed reports (6 / 3 expected when idle)\n",
                count("silent "), count("resumed "));
  }
  ::close(report[0]);
  ::close(server_ctl);
  for (auto& pid : kids.pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (pid != rank_pid[killed]) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "pid " << pid;
    }
    pid = 0;  // reaped: the guard must not signal a reused pid
  }
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
