// The socket transport, one thread per rank over an in-memory store: correct sums for odd counts,
// both dtypes, in- and out-of-place, several connections per peer; the sweep; identify; option
// and interface errors; handshakes that catch a wrong peer; and failures that end in peer_lost or
// timeout naming the rank at fault, within the deadline.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <iostream>
#include <thread>

#include "rendezvous/memory_store.h"
#include "rendezvous/prefix_store.h"
#include "transports/socket/ring.h"
#include "transports/socket/socket_transport.h"
#include "transports/sweep.h"
#include "tests/transports/rank_world.h"
#include "tests/wait_until.h"

namespace ncclsmoke::transports {
namespace {

using namespace std::chrono_literals;
using rendezvous::deadline_after;
using testing::Options;

using testing::make_ctx;
using testing::on_ranks;
using testing::rethrow_any;

// n socket ranks, opened within 20 s (rank_world.h).
class World : public testing::RankWorld {
 public:
  explicit World(int ranks, const Options& options = {})
      : RankWorld(ranks, "socket", make_socket_transport, options, 20s) {}
};

TransportError expect_error(const std::exception_ptr& e, const std::string& what) {
  if (!e) ADD_FAILURE() << what << ": no error";
  try {
    if (e) std::rethrow_exception(e);
  } catch (const TransportError& te) {
    return te;
  } catch (const std::exception& other) {
    ADD_FAILURE() << what << ": not a TransportError: " << other.what();
  }
  return TransportError(ErrorKind::other, "none");
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(RingSegment, CoversEveryElementOnceIncludingEmptySegments) {
  for (std::size_t count : {0, 1, 3, 7, 1000, 1001}) {
    for (int n : {1, 2, 3, 4}) {
      std::size_t next = 0;
      for (int i = 0; i < n; ++i) {
        auto [off, len] = sock::ring_segment(count, n, i);
        EXPECT_EQ(off, next) << count << "/" << n << " segment " << i;
        EXPECT_LE(len, count / n + 1);
        next = off + len;
      }
      EXPECT_EQ(next, count);
    }
  }
}

struct Case {
  int world;
  Options options;
  std::string label;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

class SocketSums : public ::testing::TestWithParam<Case> {};

TEST_P(SocketSums, OddCountsBothDtypesBothPlaces) {
  World w(GetParam().world, GetParam().options);
  for (DType dtype : {DType::float32, DType::bfloat16}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1000},
                              (std::size_t{1} << 20) + 3}) {
      for (bool in_place : {false, true}) {
        std::vector<int64_t> wrong(w.n, -1);
        std::vector<int64_t> send_changed(w.n, 0);
        rethrow_any(on_ranks(w.n, [&](int r) {
          std::size_t bytes = count * dtype_size(dtype);
          std::vector<unsigned char> send(bytes), recv(bytes, 0xFF), orig;
          fill_input(send.data(), count, dtype, r);
          orig = send;
          void* out = in_place ? send.data() : recv.data();
          w.ts[r]->allreduce(send.data(), out, count, dtype, ReduceOp::sum, deadline_after(20s));
          wrong[r] = count_wrong(out, count, dtype, w.n);
          if (!in_place) send_changed[r] = send != orig;
        }));
        for (int r = 0; r < w.n; ++r) {
          EXPECT_EQ(wrong[r], 0) << "rank " << r << " count " << count << " " << to_string(dtype)
                                 << (in_place ? " in-place" : " out-of-place");
          EXPECT_EQ(send_changed[r], 0) << "out-of-place all-reduce wrote into the input";
        }
      }
    }
  }
}

TEST_P(SocketSums, SweepRowsAreCheckedAndMeasured) {
  World w(GetParam().world, GetParam().options);
  SweepOptions o;
  o.min_bytes = 4096;
  o.max_bytes = 1 << 20;
  o.factor = 4;
  o.iters = 2;
  o.warmup_iters = 1;
  o.gate_bytes = 1 << 20;
  std::vector<SweepResult> results(w.n);
  rethrow_any(on_ranks(w.n, [&](int r) {
    results[r] = run_sweep(*w.ts[r], w.ctxs[r], *w.store, o, deadline_after(60s));
  }));
  for (int r = 0; r < w.n; ++r) {
    ASSERT_TRUE(results[r].complete);
    ASSERT_EQ(results[r].rows.size(), 2 * sweep_sizes(o).size());
    for (const auto& row : results[r].rows) {
      EXPECT_EQ(row.wrong, 0) << row.bytes << (row.in_place ? " in-place" : "");
      EXPECT_GT(row.busbw_gbps, 0) << row.bytes;
      EXPECT_EQ(row.rank_time_us.size(), static_cast<std::size_t>(w.n));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Worlds, SocketSums,
    ::testing::Values(Case{2, {}, "w2"}, Case{3, {}, "w3"}, Case{4, {}, "w4"},
                      // Small chunks over several connections: many chunks per segment, striped.
                      Case{2, {{"socket.nconn", "2"}, {"socket.chunk", "4096"}}, "w2_2conn_4k"},
                      Case{3, {{"socket.nconn", "3"}, {"socket.chunk", "1536"}}, "w3_3conn"},
                      Case{4, {{"socket.nconn", "2"}, {"socket.chunk", "65536"},
                               {"socket.bufsize", "0"}}, "w4_2conn_autotune"}),
    [](const ::testing::TestParamInfo<Case>& p) { return p.param.label; });

TEST(SocketTransport, WorldOfOneCopiesAndIdentifies) {
  World w(1);
  std::vector<float> in{1, 2, 3}, out(3, -1);
  w.ts[0]->allreduce(in.data(), out.data(), 3, DType::float32, ReduceOp::sum, deadline_after(5s));
  EXPECT_EQ(out, in);
  auto id = w.ts[0]->identify();
  EXPECT_EQ(id["interface"], "lo");
  EXPECT_EQ(id["address"], "127.0.0.1");
  EXPECT_TRUE(id["listen"].is_null());
}

TEST(SocketTransport, IdentifyReportsInterfaceAddressesAndPeers) {
  World w(3, {{"socket.nconn", "2"}, {"socket.chunk", "131072"}});
  for (int r = 0; r < 3; ++r) {
    auto id = w.ts[r]->identify();
    SCOPED_TRACE(id.dump());
    EXPECT_EQ(id["interface"], "lo");
    EXPECT_EQ(id["address"], "127.0.0.1");
    EXPECT_EQ(id["ifname_rule"], "default");
    EXPECT_EQ(id["nconn"], 2);
    EXPECT_EQ(id["chunk_bytes"], 131072);
    std::string listen = id["listen"];
    EXPECT_EQ(listen.rfind("127.0.0.1:", 0), 0u);
    EXPECT_EQ(w.store->get("addr/" + std::to_string(r), deadline_after(1s)), listen);
    EXPECT_EQ(id["peers"]["send_to"]["rank"], (r + 1) % 3);
    EXPECT_EQ(id["peers"]["recv_from"]["rank"], (r + 2) % 3);
    EXPECT_EQ(id["peers"]["send_to"]["address"],
              w.store->get("addr/" + std::to_string((r + 1) % 3), deadline_after(1s)));
    EXPECT_EQ(id["peers"]["send_to"]["local"].size(), 2u);
    EXPECT_EQ(id["peers"]["recv_from"]["remote"].size(), 2u);
  }
  // The rule in use is reported, from the option or from the environment.
  World named(2, {{"socket.ifname", "lo"}});
  EXPECT_EQ(named.ts[0]->identify()["ifname_rule"], "lo");
  EXPECT_EQ(named.ts[0]->identify()["interface"], "lo");
  ::setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
  try {
    World env(2);
    EXPECT_EQ(env.ts[1]->identify()["ifname_rule"], "=lo");
    EXPECT_EQ(env.ts[1]->identify()["address_source"], "NCCL_SOCKET_IFNAME");
  } catch (...) {
    ::unsetenv("NCCL_SOCKET_IFNAME");
    throw;
  }
  ::unsetenv("NCCL_SOCKET_IFNAME");
}

TEST(SocketTransport, BadOptionsAndUnmatchedInterfaceFailInit) {
  rendezvous::MemoryStore store;
  for (const Options& o : std::vector<Options>{{{"socket.nconn", "0"}},
                                               {{"socket.nconn", "17"}},
                                               {{"socket.nconn", "two"}},
                                               {{"socket.chunk", "12"}},
                                               {{"socket.chunk", "5X"}}}) {
    auto t = make_socket_transport();
    auto ctx = make_ctx(0, 2, &store, o);
    try {
      t->open(ctx, deadline_after(2s));
      ADD_FAILURE() << o.begin()->first << "=" << o.begin()->second << " was accepted";
    } catch (const TransportError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::init_failed);
      EXPECT_TRUE(contains(e.what(), o.begin()->first)) << e.what();
      EXPECT_TRUE(contains(e.what(), "rank 0 (host host-0)")) << e.what();
    }
  }
  auto t = make_socket_transport();
  auto ctx = make_ctx(1, 2, &store, {{"socket.ifname", "=no-such-nic0"}});
  try {
    t->open(ctx, deadline_after(2s));
    ADD_FAILURE() << "an unmatched interface rule was accepted";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::init_failed);
    EXPECT_TRUE(contains(e.what(), "\"=no-such-nic0\"")) << e.what();
    EXPECT_TRUE(contains(e.what(), "lo [127.0.0.1")) << e.what();
    EXPECT_TRUE(contains(e.what(), "socket.ifname")) << e.what();
  }
}

TEST(SocketTransport, OpenTimesOutNamingTheRankThatNeverPublished) {
  rendezvous::MemoryStore store;
  auto t = make_socket_transport();
  auto start = Clock::now();
  try {
    t->open(make_ctx(0, 2, &store, {}), deadline_after(500ms));
    ADD_FAILURE() << "opened without a peer";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::timeout);
    EXPECT_EQ(e.peer(), 1);
    EXPECT_TRUE(contains(e.what(), "rank 1 (host host-1)")) << e.what();
  }
  EXPECT_LT(Clock::now() - start, 1500ms);
}

TEST(SocketTransport, MismatchedCountsFailLoudlyInsteadOfMixingData) {
  World w(2);
  auto errors = on_ranks(2, [&](int r) {
    std::size_t count = r == 0 ? 1000 : 999;
    std::vector<float> buf(count, 1.0f);
    w.ts[r]->allreduce(buf.data(), buf.data(), count, DType::float32, ReduceOp::sum,
                       deadline_after(10s));
  });
  for (int r = 0; r < 2; ++r) {
    auto e = expect_error(errors[r], "rank " + std::to_string(r));
    EXPECT_TRUE(contains(e.what(), "same count and dtype") || e.kind() == ErrorKind::peer_lost)
        << e.what();
  }
  auto e0 = expect_error(errors[0], "rank 0");
  EXPECT_TRUE(contains(e0.what(), "999")) << e0.what();
}

// A peer that goes away mid-collective: its neighbours see it close, the others learn the cause
// from the neighbour that gave up; nobody waits for the deadline.
void peer_goes_away(int n, int dead) {
  World w(n);
  std::size_t count = 4 << 20;  // 16 MiB: more than the socket buffers hold
  auto start = Clock::now();
  auto errors = on_ranks(n, [&](int r) {
    if (r == dead) {
      ncclsmoke::testing::pause_for(300ms);  // goes away mid-collective: the test's fault
      w.ts[r]->close();
      return;
    }
    std::vector<float> buf(count);
    fill_input(buf.data(), count, DType::float32, r);
    w.ts[r]->allreduce(buf.data(), buf.data(), count, DType::float32, ReduceOp::sum,
                       deadline_after(30s));
  });
  EXPECT_LT(Clock::now() - start, 15s) << "survivors waited for the deadline";
  for (int r = 0; r < n; ++r) {
    if (r == dead) continue;
    auto e = expect_error(errors[r], "rank " + std::to_string(r));
    SCOPED_TRACE(e.what());
    EXPECT_EQ(e.kind(), ErrorKind::peer_lost);
    EXPECT_EQ(e.peer(), dead);
    EXPECT_TRUE(contains(e.what(), "rank " + std::to_string(dead) + " (host host-" +
                                       std::to_string(dead)));
    EXPECT_TRUE(contains(e.what(), "rank " + std::to_string(r) + " (host host-"));
    // Unusable afterwards, and says why.
    float x = 1;
    try {
      w.ts[r]->allreduce(&x, &x, 1, DType::float32, ReduceOp::sum, deadline_after(1s));
      ADD_FAILURE() << "usable after an error";
    } catch (const TransportError& again) {
      EXPECT_TRUE(contains(again.what(), "unusable after an earlier error")) << again.what();
    }
  }
}

// A rank that has sent and received its whole part may close at once (end of run) while its
// neighbours still finish theirs: that is not a lost peer.
TEST(SocketTransport, RanksClosingRightAfterTheirLastCollectiveDoNotFailOthers) {
  for (int round = 0; round < 2; ++round) {
    World w(4);
    std::size_t count = 4 << 20;
    std::vector<int64_t> wrong(4, -1);
    rethrow_any(on_ranks(4, [&](int r) {
      std::vector<float> send(count), recv(count);
      fill_input(send.data(), count, DType::float32, r);
      w.ts[r]->allreduce(send.data(), recv.data(), count, DType::float32, ReduceOp::sum,
                         deadline_after(30s));
      w.ts[r]->close();
      wrong[r] = count_wrong(recv.data(), count, DType::float32, 4);
    }));
    for (int r = 0; r < 4; ++r) EXPECT_EQ(wrong[r], 0) << "rank " << r;
  }
}

TEST(SocketFailure, PeerClosingMidCollectiveIsPeerLostTwoRanks) { peer_goes_away(2, 1); }
TEST(SocketFailure, PeerClosingMidCollectiveIsPeerLostThreeRanks) { peer_goes_away(3, 2); }
TEST(SocketFailure, PeerClosingMidCollectiveIsPeerLostFourRanks) { peer_goes_away(4, 1); }

// One rank never calls all-reduce: the others time out by their deadline and name it.
// `early` (if >= 0) gets a shorter deadline, so it gives up first on its upstream neighbour.
void rank_never_calls(int n, int absent, int early = -1) {
  World w(n);
  std::size_t count = 1 << 20;
  std::vector<double> took(n, 0);
  auto errors = on_ranks(n, [&](int r) {
    if (r == absent) return;
    std::vector<float> buf(count, 1.0f);
    auto start = Clock::now();
    auto op_timeout = r == early ? 400ms : 800ms;
    try {
      w.ts[r]->allreduce(buf.data(), buf.data(), count, DType::float32, ReduceOp::sum,
                         deadline_after(op_timeout));
    } catch (...) {
      took[r] = std::chrono::duration<double>(Clock::now() - start).count();
      throw;
    }
  });
  for (int r = 0; r < n; ++r) {
    if (r == absent) continue;
    auto e = expect_error(errors[r], "rank " + std::to_string(r));
    SCOPED_TRACE(e.what());
    EXPECT_EQ(e.kind(), ErrorKind::timeout);
    // Ranks further down the ring name the absent rank when their upstream neighbour gave up
    // first (its reason is in the store), else the neighbour they were waiting on.
    int upstream = (r - 1 + n) % n;
    EXPECT_TRUE(e.peer() == absent || e.peer() == upstream) << e.peer();
    EXPECT_TRUE(contains(e.what(), "rank " + std::to_string(e.peer()) + " (host host-"));
    EXPECT_LT(took[r], 0.8 + 1.0);
  }
  // The neighbour waiting directly on the absent rank says it timed out waiting for it.
  auto e = expect_error(errors[(absent + 1) % n], "receiver");
  EXPECT_EQ(e.peer(), absent);
  EXPECT_TRUE(contains(e.what(), "timed out after")) << e.what();
  EXPECT_TRUE(contains(e.what(), "waiting for rank " + std::to_string(absent))) << e.what();
}

TEST(SocketFailure, DeadlineExpiresTwoRanks) { rank_never_calls(2, 1); }
TEST(SocketFailure, DeadlineExpiresThreeRanks) { rank_never_calls(3, 0); }
// Rank 2 gives up on rank 1 first and closes; rank 1, still waiting on the absent rank 0, must
// still name rank 0.
TEST(SocketFailure, DeadlineExpiresThreeRanksDownstreamGivesUpFirst) { rank_never_calls(3, 0, 2); }

// A test socket that plays rank 1 of a two-rank world against a real rank 0.
struct FakeRank {
  int listen_fd = -1;
  std::string address;
  FakeRank() {
    listen_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listen_fd, 8);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&a), &len);
    address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  ~FakeRank() { ::close(listen_fd); }
  static int dial(const std::string& addr) {
    auto colon = addr.rfind(':');
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(colon + 1))));
    ::inet_pton(AF_INET, addr.substr(0, colon).c_str(), &a.sin_addr);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  }
};

std::vector<unsigned char> hello(uint32_t rank, uint32_t world, uint32_t nconn, uint32_t conn,
                                 uint32_t chunk) {
  std::vector<unsigned char> b(32, 0);
  uint32_t fields[] = {0x4b52534eu, 1, rank, world, nconn, conn, chunk};
  for (int f = 0; f < 7; ++f)
    for (int i = 0; i < 4; ++i) b[4 * f + i] = static_cast<unsigned char>(fields[f] >> (8 * i));
  return b;
}

TEST(SocketHandshake, ConnectionClaimingTheWrongRankFailsInit) {
  rendezvous::MemoryStore store;
  FakeRank fake;
  store.set("addr/1", fake.address);
  auto opened = std::async(std::launch::async, [&] {
    auto t = make_socket_transport();
    t->open(make_ctx(0, 2, &store, {}), deadline_after(10s));
  });
  std::string addr0 = store.get("addr/0", deadline_after(10s));
  int fd = FakeRank::dial(addr0);
  auto h = hello(5, 2, 1, 0, 1 << 20);
  ASSERT_EQ(::send(fd, h.data(), h.size(), 0), 32);
  try {
    opened.get();
    ADD_FAILURE() << "accepted a connection claiming rank 5";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::init_failed);
    EXPECT_TRUE(contains(e.what(), "claiming rank 5")) << e.what();
    EXPECT_TRUE(contains(e.what(), "expected only rank 1")) << e.what();
  }
  ::close(fd);
}

TEST(SocketHandshake, StrangersAreDroppedAndNamedWhenTheRealPeerNeverComes) {
  rendezvous::MemoryStore store;
  FakeRank fake;
  store.set("addr/1", fake.address);
  auto opened = std::async(std::launch::async, [&] {
    auto t = make_socket_transport();
    t->open(make_ctx(0, 2, &store, {}), deadline_after(800ms));
  });
  std::string addr0 = store.get("addr/0", deadline_after(10s));
  int fd = FakeRank::dial(addr0);
  const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_GT(::send(fd, junk, sizeof junk - 1, 0), 0);
  try {
    opened.get();
    ADD_FAILURE() << "opened without its peer";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::timeout);
    EXPECT_EQ(e.peer(), 1);
    EXPECT_TRUE(contains(e.what(), "0 of 1 connections from rank 1")) << e.what();
    EXPECT_TRUE(contains(e.what(), "did not speak the handshake")) << e.what();
  }
  ::close(fd);
}

TEST(SocketHandshake, AnswerFromTheWrongRankFailsInit) {
  rendezvous::MemoryStore store;
  FakeRank fake;
  store.set("addr/1", fake.address);
  auto opened = std::async(std::launch::async, [&] {
    auto t = make_socket_transport();
    t->open(make_ctx(0, 2, &store, {{"socket.chunk", "65536"}}), deadline_after(10s));
  });
  // Play rank 1 correctly towards rank 0, but answer rank 0's dial as "rank 7".
  std::string addr0 = store.get("addr/0", deadline_after(10s));
  int out = FakeRank::dial(addr0);
  auto h = hello(1, 2, 1, 0, 65536);
  ASSERT_EQ(::send(out, h.data(), h.size(), 0), 32);
  int in = ::accept(fake.listen_fd, nullptr, nullptr);
  ASSERT_GE(in, 0);
  unsigned char buf[32];
  ASSERT_EQ(::recv(in, buf, 32, MSG_WAITALL), 32);
  unsigned char ack[16] = {0};
  uint32_t fields[] = {0x4b41534eu, 7, 0, 0};
  for (int f = 0; f < 4; ++f)
    for (int i = 0; i < 4; ++i) ack[4 * f + i] = static_cast<unsigned char>(fields[f] >> (8 * i));
  ASSERT_EQ(::send(in, ack, 16, 0), 16);
  try {
    opened.get();
    ADD_FAILURE() << "accepted an answer from rank 7";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::init_failed);
    EXPECT_TRUE(contains(e.what(), "rank 7 answered")) << e.what();
  }
  ::close(in);
  ::close(out);
}

// Link accounting (ring.h): identify()'s link_stats say where each rank waited. Rank 1 comes
// 500 ms late to the first all-reduce; with small fixed socket buffers its previous rank (0)
// cannot park its 1 MiB segment in the kernel, so rank 0 waits send-blocked towards rank 1, and
// rank 2, whose data must come through rank 1, waits on receive. Bytes and counts are exact.
TEST(SocketLinkStats, SayWhereEachRankWaitedAndCountBytesAndCollectives) {
  constexpr int n = 3, late = 1;
  World w(n, {{"socket.bufsize", "64K"}});
  const std::size_t count = 3 * (std::size_t{1} << 18);  // 3 MiB of float32: 1 MiB segments
  const uint64_t per_rank = 2 * (n - 1) * (count / n) * sizeof(float);  // bytes each rank sends
  std::vector<double> wall_s(n, 0);
  std::vector<int64_t> wrong(n, -1);
  std::atomic<int> arrived{0};
  auto round = [&](bool delay) {
    rethrow_any(on_ranks(n, [&](int r) {
      std::vector<float> buf(count);
      fill_input(buf.data(), count, DType::float32, r);
      arrived.fetch_add(1);
      ncclsmoke::testing::wait_until([&] { return arrived.load() % n == 0; }, 2s, 100us);
      if (delay && r == late) ncclsmoke::testing::pause_for(500ms);  // the slow peer under test
      auto t0 = Clock::now();
      w.ts[r]->allreduce(buf.data(), buf.data(), count, DType::float32, ReduceOp::sum,
                         deadline_after(30s));
      wall_s[r] += std::chrono::duration<double>(Clock::now() - t0).count();
      wrong[r] = count_wrong(buf.data(), count, DType::float32, n);
    }));
  };
  round(true);
  std::vector<nlohmann::json> first(n);
  for (int r = 0; r < n; ++r) {
    first[r] = w.ts[r]->identify()["link_stats"];
    std::cout << "rank " << r << " (" << wall_s[r] << " s): " << first[r].dump() << "\n";
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + first[r].dump());
    EXPECT_EQ(wrong[r], 0);
    ASSERT_TRUE(first[r].is_object());
    const auto& tx = first[r]["to_next"];
    const auto& rx = first[r]["from_prev"];
    EXPECT_EQ(tx["rank"], (r + 1) % n);
    EXPECT_EQ(tx["host"], "host-" + std::to_string((r + 1) % n));
    EXPECT_EQ(rx["rank"], (r + n - 1) % n);
    EXPECT_EQ(rx["host"], "host-" + std::to_string((r + n - 1) % n));
    EXPECT_EQ(first[r]["collectives"], 1);
    EXPECT_EQ(tx["bytes"].get<uint64_t>(), per_rank);
    EXPECT_EQ(rx["bytes"].get<uint64_t>(), per_rank);
    double blocked = tx["send_blocked_s"], waited = rx["recv_wait_s"];
    EXPECT_GE(blocked, 0);
    EXPECT_GE(waited, 0);
    // Waits are parts of the collective's own time, charged to one side at a time.
    EXPECT_LE(blocked + waited, wall_s[r] + 0.01) << "wall " << wall_s[r] << " s";
  }
  EXPECT_GE(first[late - 1]["to_next"]["send_blocked_s"].get<double>(), 0.3)
      << "rank " << late - 1 << " had a segment for the late rank and nowhere to put it";
  EXPECT_GE(first[late + 1]["from_prev"]["recv_wait_s"].get<double>(), 0.3)
      << "rank " << late + 1 << " had nothing to do until the late rank sent";

  // Accumulated over the transport's life.
  round(false);
  for (int r = 0; r < n; ++r) {
    auto now = w.ts[r]->identify()["link_stats"];
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + now.dump());
    EXPECT_EQ(wrong[r], 0);
    EXPECT_EQ(now["collectives"], 2);
    EXPECT_EQ(now["to_next"]["bytes"].get<uint64_t>(), 2 * per_rank);
    EXPECT_EQ(now["from_prev"]["bytes"].get<uint64_t>(), 2 * per_rank);
    EXPECT_GE(now["to_next"]["send_blocked_s"].get<double>(),
              first[r]["to_next"]["send_blocked_s"].get<double>());
    EXPECT_GE(now["from_prev"]["recv_wait_s"].get<double>(),
              first[r]["from_prev"]["recv_wait_s"].get<double>());
  }
}

TEST(SocketLinkStats, WorldOfOneCountsCollectivesOnly) {
  World w(1);
  float x = 2;
  w.ts[0]->allreduce(&x, &x, 1, DType::float32, ReduceOp::sum, deadline_after(5s));
  auto ls = w.ts[0]->identify()["link_stats"];
  EXPECT_EQ(ls, nlohmann::json({{"collectives", 1}})) << ls.dump();
}

}  // namespace
}  // namespace ncclsmoke::transports
