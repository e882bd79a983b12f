// The fabric transport against the libfabric providers installed here (tcp -> "tcp;ofi_rxm",
// udp -> "udp;ofi_rxd", shm): ranks as threads of one process sharing an in-memory store, and
// ranks as separate processes (this binary re-executed) sharing a real TCPStore server, which is
// how shm is used across processes and how a killed peer is observed.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <thread>

#include "rendezvous/memory_store.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/tcp_client.h"
#include "rendezvous/tcp_server.h"
#include "transports/fabric/fabric_transport.h"
#include "transports/reduce.h"
#include "transports/sweep.h"
#include "tests/transports/rank_world.h"
#include "tests/wait_until.h"

extern char** environ;

namespace ncclsmoke::transports {
namespace {

using namespace std::chrono_literals;
using testing::Options;

using testing::make_ctx;

// n fabric ranks (rank_world.h), opened within 30 s unless open_all is false.
class World : public testing::RankWorld {
 public:
  World(int n, const Options& options, bool open_all = true)
      : RankWorld(n, "fabric", make_fabric_transport, options, open_all ? 30s : 0s) {}
};

// float32 inputs that differ per element and rank, so a segment reduced or gathered at the wrong
// offset is caught (the sweep's pattern repeats every 4 elements); sums stay exact integers.
float f32_value(int rank, std::size_t i) {
  return static_cast<float>((i * 7 + static_cast<std::size_t>(rank) * 13) % 4093);
}

void fill(std::vector<unsigned char>& buf, std::size_t count, DType dt, int rank) {
  if (dt == DType::float32) {
    auto* p = reinterpret_cast<float*>(buf.data());
    for (std::size_t i = 0; i < count; ++i) p[i] = f32_value(rank, i);
  } else {
    fill_input(buf.data(), count, dt, rank);
  }
}

int64_t wrong_elements(const std::vector<unsigned char>& buf, std::size_t count, DType dt, int n) {
  if (dt != DType::float32) return count_wrong(buf.data(), count, dt, n);
  const auto* p = reinterpret_cast<const float*>(buf.data());
  int64_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    double e = 0;
    for (int r = 0; r < n; ++r) e += f32_value(r, i);
    wrong += p[i] != static_cast<float>(e);
  }
  return wrong;
}

// One all-reduce on every rank of `w`, checked; returns the wrong elements summed over ranks.
int64_t checked_allreduce(World& w, std::size_t count, DType dt, bool in_place) {
  std::atomic<int64_t> wrong{0};
  w.each([&](int r) {
    std::size_t bytes = std::max<std::size_t>(count * dtype_size(dt), 1);
    std::vector<unsigned char> in(bytes), out(bytes, 0xEE);
    fill(in, count, dt, r);
    auto& dst = in_place ? in : out;
    w.ts[r]->allreduce(in.data(), dst.data(), count, dt, ReduceOp::sum,
                        rendezvous::deadline_after(60s));
    wrong += wrong_elements(dst, count, dt, w.n);
  });
  return wrong.load();
}

// --- correctness per provider x world size ----------------------------------------------------

struct Param {
  std::string provider;
  int world;
  Options extra;
  std::string label;
};

void PrintTo(const Param& p, std::ostream* os) { *os << p.label; }

class FabricRing : public ::testing::TestWithParam<Param> {};

TEST_P(FabricRing, SumsAreExactForOddCountsBothDtypesInAndOutOfPlace) {
  Options o = GetParam().extra;
  o["fabric.provider"] = GetParam().provider;
  World w(GetParam().world, o);
  const int n = GetParam().world;
  // Counts not divisible by the world, smaller than the world (empty segments), one element,
  // and enough to need many chunks of the small pipeline settings.
  std::vector<std::size_t> counts = {1, static_cast<std::size_t>(n - 1), 7, 1031, 65537, 300007};
  for (std::size_t count : counts)
    for (DType dt : {DType::float32, DType::bfloat16})
      for (bool in_place : {false, true}) {
        SCOPED_TRACE("count " + std::to_string(count) + " " + to_string(dt) +
                     (in_place ? " in-place" : " out-of-place"));
        EXPECT_EQ(checked_allreduce(w, count, dt, in_place), 0);
      }
}

TEST_P(FabricRing, IdentifyReportsWhatLibfabricReturned) {
  Options o = GetParam().extra;
  o["fabric.provider"] = GetParam().provider;
  World w(GetParam().world, o);
  EXPECT_EQ(checked_allreduce(w, 4099, DType::float32, false), 0);
  for (int r = 0; r < w.n; ++r) {
    auto id = w.ts[r]->identify();
    std::string expect = GetParam().provider == "tcp"   ? "tcp;ofi_rxm"
                         : GetParam().provider == "udp" ? "udp;ofi_rxd"
                                                        : GetParam().provider;
    EXPECT_EQ(id.value("provider", ""), expect) << id.dump();
    EXPECT_EQ(id.value("requested_provider", ""), GetParam().provider);
    EXPECT_EQ(id.value("endpoint_type", ""), "FI_EP_RDM");
    EXPECT_FALSE(id.value("fabric", "").empty()) << id.dump();
    EXPECT_FALSE(id.value("domain", "").empty()) << id.dump();
    EXPECT_EQ(id.value("libfabric_version", "").rfind("1.", 0), 0u) << id.dump();
    EXPECT_FALSE(id.contains("hw_counters")) << "counters are for efa (or 'always') only";
    EXPECT_EQ(id["left"].value("rank", -1), (r + w.n - 1) % w.n);
    if (GetParam().provider != "shm") {
      // Loopback ranks pick the domain of the store address (lo), not the first one (eth0).
      EXPECT_EQ(id.value("domain", ""), "lo") << id.dump();
    }
  }
}

std::vector<Param> ring_params() {
  std::vector<Param> out;
  for (std::string p : {"tcp", "udp", "shm"})
    for (int n : {2, 3, 4}) out.push_back({p, n, {}, p + "_" + std::to_string(n)});
  // Small chunks and a short window: many chunks per step, so the pipeline's dependency order,
  // staging slots and tags are exercised.
  Options small = {{"fabric.chunk_bytes", "4096"}, {"fabric.window", "3"}};
  for (std::string p : {"tcp", "shm"}) out.push_back({p, 3, small, p + "_3_smallchunks"});
  out.push_back(
      {"tcp", 2, {{"fabric.chunk_bytes", "1000"}, {"fabric.window", "1"}}, "tcp_2_window1"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Providers, FabricRing, ::testing::ValuesIn(ring_params()),
                         [](const auto& info) { return info.param.label; });

// --- sweep driver -----------------------------------------------------------------------------

TEST(FabricSweep, SmallSweepHasNoWrongElements) {
  World w(3, {{"fabric.provider", "tcp"}});
  SweepOptions so;
  so.min_bytes = 1000;  // not a power of two: odd element counts
  so.max_bytes = 512 << 10;
  so.factor = 4;
  so.iters = 2;
  so.warmup_iters = 1;
  std::vector<SweepResult> results(3);
  w.each([&](int r) {
    results[r] = run_sweep(*w.ts[r], w.ctxs[r], *w.store, so, rendezvous::deadline_after(120s));
  });
  ASSERT_TRUE(results[0].complete);
  ASSERT_EQ(results[0].rows.size(), 2 * sweep_sizes(so).size());
  for (const auto& row : results[0].rows) {
    EXPECT_EQ(row.wrong, 0) << row.bytes << (row.in_place ? " in-place" : "");
    EXPECT_GT(row.busbw_gbps, 0);
  }
}

// --- unavailable providers ----------------------------------------------------------------------

TEST(FabricOpen, EfaIsUnavailableWithLibfabricsOwnError) {
  auto store = std::make_shared<rendezvous::MemoryStore>();
  auto t = make_fabric_transport();
  auto ctx = make_ctx(0, 2, store.get(), {{"fabric.provider", "efa"}});
  try {
    t->open(ctx, rendezvous::deadline_after(10s));
    FAIL() << "open() with provider efa succeeded on a host without EFA";
  } catch (const TransportError& e) {
    std::string m = e.what();
    std::cout << "efa: " << m << "\n";
    EXPECT_EQ(e.kind(), ErrorKind::unavailable) << m;
    EXPECT_NE(m.find("'efa'"), std::string::npos) << m;
    EXPECT_NE(m.find("No data available"), std::string::npos) << m;  // fi_strerror(FI_ENODATA)
    EXPECT_NE(m.find("available: "), std::string::npos) << m;
    EXPECT_NE(m.find("tcp;ofi_rxm"), std::string::npos) << m;
    EXPECT_NE(m.find("shm"), std::string::npos) << m;
  }
  t->close();
  // Nothing was published: a failed open() must not leave an address for peers to use.
  EXPECT_FALSE(store->check({"addr/0"}));
}

TEST(FabricOpen, UnknownProviderIsUnavailable) {
  auto store = std::make_shared<rendezvous::MemoryStore>();
  auto t = make_fabric_transport();
  auto ctx = make_ctx(0, 2, store.get(), {{"fabric.provider", "no_such_provider"}});
  try {
    t->open(ctx, rendezvous::deadline_after(10s));
    FAIL() << "open() succeeded";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unavailable) << e.what();
  }
}

TEST(FabricOpen, UnknownDomainIsInitFailedListingDomains) {
  auto store = std::make_shared<rendezvous::MemoryStore>();
  auto t = make_fabric_transport();
  auto ctx = make_ctx(0, 2, store.get(), {{"fabric.provider", "tcp"}, {"fabric.domain", "nope0"}});
  try {
    t->open(ctx, rendezvous::deadline_after(10s));
    FAIL() << "open() succeeded";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::init_failed) << e.what();
    EXPECT_NE(std::string(e.what()).find("lo"), std::string::npos) << e.what();
  }
}

TEST(FabricOpen, SingleRankWorldCopies) {
  World w(1, {{"fabric.provider", "tcp"}});
  EXPECT_EQ(checked_allreduce(w, 1001, DType::float32, false), 0);
  EXPECT_EQ(checked_allreduce(w, 1001, DType::bfloat16, true), 0);
}

// --- deadlines: nobody hangs ----------------------------------------------------------------

TEST(FabricDeadline, OpenTimesOutNamingTheMissingPeer) {
  World w(2, {{"fabric.provider", "tcp"}}, /*open_all=*/false);
  auto t0 = rendezvous::Clock::now();
  try {
    w.ts[0]->open(w.ctxs[0], rendezvous::deadline_after(800ms));
    FAIL() << "open() succeeded without a peer";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::timeout) << e.what();
    EXPECT_EQ(e.peer(), 1);
    EXPECT_NE(std::string(e.what()).find("host-1"), std::string::npos) << e.what();
  }
  EXPECT_LT(rendezvous::seconds_since(t0), 0.8 + 1.0);
}

TEST(FabricDeadline, StoppedPeerTimesOutWithinDeadlineAndEndpointIsClosed) {
  World w(3, {{"fabric.provider", "tcp"}});
  ASSERT_EQ(checked_allreduce(w, 10007, DType::float32, false), 0);
  // Rank 1 stops participating; ranks 0 and 2 must give up at their deadline, not hang.
  const auto budget = 1000ms;
  std::vector<ErrorKind> kinds(3, ErrorKind::other);
  std::vector<int> peers(3, -2);
  std::vector<double> took(3, 0);
  std::vector<std::string> what(3);
  w.each([&](int r) {
    if (r == 1) return;
    std::vector<float> buf(1 << 16, 1.0f);
    auto t0 = rendezvous::Clock::now();
    try {
      w.ts[r]->allreduce(buf.data(), buf.data(), buf.size(), DType::float32, ReduceOp::sum,
                          rendezvous::deadline_after(budget));
      what[r] = "returned";
    } catch (const TransportError& e) {
      kinds[r] = e.kind();
      peers[r] = e.peer();
      what[r] = e.what();
    }
    took[r] = rendezvous::seconds_since(t0);
  });
  // Rank 2 waits on rank 1, whose endpoint is open: a plain timeout. Rank 0 waits on rank 2, which
  // may have timed out and closed its endpoint a moment earlier: timeout or peer_lost.
  EXPECT_EQ(kinds[2], ErrorKind::timeout) << what[2];
  EXPECT_TRUE(kinds[0] == ErrorKind::timeout || kinds[0] == ErrorKind::peer_lost) << what[0];
  for (int r : {0, 2}) EXPECT_LT(took[r], 1.0 + 1.0) << what[r];
  EXPECT_GE(took[2], 0.9) << what[2];
  EXPECT_NE(what[2].find("timed out after"), std::string::npos) << what[2];
  EXPECT_EQ(peers[2], 1) << what[2];  // rank 2 receives from rank 1
  EXPECT_NE(what[2].find("host-1"), std::string::npos) << what[2];
  // Whom and what it waited for, in the shared spelling (rendezvous/rank_ref.h) and the shared
  // schedule's terms: rank 1 never sent its first chunk of the reduce-scatter.
  EXPECT_NE(what[2].find("waiting for rank 1 (host host-1)"), std::string::npos) << what[2];
  EXPECT_NE(what[2].find("chunk 0 of step 1/4 (reduce-scatter)"), std::string::npos) << what[2];
  // The endpoint is closed after a failure: a later call throws at once instead of hanging.
  std::vector<float> buf(16, 1.0f);
  auto t0 = rendezvous::Clock::now();
  EXPECT_THROW(w.ts[0]->allreduce(buf.data(), buf.data(), buf.size(), DType::float32,
                                   ReduceOp::sum, rendezvous::deadline_after(5s)),
               TransportError);
  EXPECT_LT(rendezvous::seconds_since(t0), 1.0);
  EXPECT_TRUE(w.ts[0]->identify().contains("closed_after_error"));
}

// --- hardware counters through identify() ---------------------------------------------------

TEST(FabricCounters, IdentifyReportsDeltasFromTheConfiguredRoot) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("fabric_hw_" + std::to_string(getpid()));
  fs::path dir = root / "efa_0" / "ports" / "1" / "hw_counters";
  fs::create_directories(dir);
  auto put = [&](const char* name, uint64_t v) { std::ofstream(dir / name) << v << "\n"; };
  put("tx_bytes", 1000);
  put("rx_bytes", 50);
  std::ofstream(root / "efa_0" / "ports" / "1" / "rate") << "100 Gb/sec (4X EDR)\n";
  World w(2, {{"fabric.provider", "tcp"},
              {"fabric.hw_counters", "always"},
              {"fabric.hw_counters_root", root.string()}});
  put("tx_bytes", 1000 + 4096);
  put("rx_bytes", 50 + 10);
  auto id = w.ts[0]->identify();
  fs::remove_all(root);
  ASSERT_TRUE(id.contains("hw_counters")) << id.dump();
  EXPECT_EQ(id["hw_counters"]["efa_0/1"].value("tx_bytes", 0), 4096) << id.dump();
  EXPECT_EQ(id["hw_counters"]["efa_0/1"].value("rx_bytes", 0), 10) << id.dump();
  EXPECT_EQ(id.value("hw_counters_root", ""), root.string());
  // The port's rate, for the line-rate rule: this port's counters moved.
  EXPECT_EQ(id.value("port_rate_gbps", 0.0), 100.0) << id.dump();
  EXPECT_EQ(id.value("port_rate_port", ""), "efa_0/1");
  EXPECT_TRUE(id.value("port_rate_carried", false));
}

TEST(FabricCounters, LinkStatsCarryTheDevicesRetransmitsWhenTheDeviceIsTheRanksOwn) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("fabric_rt_" + std::to_string(getpid()));
  fs::path dir = root / "efa_0" / "ports" / "1" / "hw_counters";
  fs::create_directories(dir);
  auto put = [&](const char* name, uint64_t v) { std::ofstream(dir / name) << v << "\n"; };
  put("tx_pkts", 100);
  put("retrans_pkts", 3);
  const Options o{{"fabric.provider", "tcp"},
                  {"fabric.hw_counters", "always"},
                  {"fabric.hw_counters_root", root.string()}};
  World w(3, o);
  EXPECT_EQ(checked_allreduce(w, 1 << 16, DType::float32, false), 0);
  put("tx_pkts", 100 + 2000);
  put("retrans_pkts", 3 + 90);
  auto ls = w.ts[1]->link_stats();
  ASSERT_TRUE(ls);
  EXPECT_EQ(ls->next_rank, 2);
  EXPECT_EQ(ls->prev_rank, 0);
  // 64 Ki floats over 3 ranks: each rank sends 2 x 2/3 of the buffer.
  EXPECT_GT(ls->bytes_sent, (1 << 18));
  EXPECT_GT(ls->bytes_received, (1 << 18));
  EXPECT_GE(ls->send_blocked_s, 0.0);
  EXPECT_GE(ls->recv_wait_s, 0.0);
  EXPECT_EQ(ls->tx_retrans, 90);
  EXPECT_EQ(ls->tx_segs_out, 2000);
  // Two ranks of the run on this host: the device's counters are not this link's alone.
  World shared(2, o, false);
  for (auto& c : shared.ctxs) c.ranks_on_host = 2;
  shared.each([&](int r) { shared.ts[r]->open(shared.ctxs[r], rendezvous::deadline_after(30s)); });
  ls = shared.ts[0]->link_stats();
  fs::remove_all(root);
  ASSERT_TRUE(ls);
  EXPECT_EQ(ls->tx_retrans, -1);
  EXPECT_EQ(ls->tx_segs_out, -1);
}

// --- ranks as processes -----------------------------------------------------------------------
// The parent serves a TCPStore on 127.0.0.1:0 and re-executes this binary once per rank with
// NCCLSMOKE_FABRIC_CHILD="rank world port provider mode"; each child runs FabricChild.Rank and
// reports through the store ("result/<rank>").

std::string child_env() {
  const char* e = std::getenv("NCCLSMOKE_FABRIC_CHILD");
  return e ? e : "";
}

TEST(FabricChild, Rank) {
  if (child_env().empty()) GTEST_SKIP() << "runs only as a child of FabricProcesses tests";
  int rank = 0, world = 0, port = 0;
  char provider[64] = {}, mode[32] = {};
  ASSERT_EQ(
      std::sscanf(child_env().c_str(), "%d %d %d %63s %31s", &rank, &world, &port, provider, mode),
      5);
  rendezvous::TcpStoreOptions so;
  so.host = "127.0.0.1";
  so.port = static_cast<uint16_t>(port);
  std::shared_ptr<rendezvous::Store> tcp =
      rendezvous::TcpStore::connect(so, rendezvous::deadline_after(20s));
  rendezvous::PrefixStore store("transport/fabric", tcp);
  auto ctx = make_ctx(rank, world, &store, {{"fabric.provider", provider}});
  auto t = make_fabric_transport();
  std::string result;
  try {
    t->open(ctx, rendezvous::deadline_after(30s));
    std::vector<unsigned char> in(4 * 300007), out(in.size());
    fill(in, 300007, DType::float32, rank);
    t->allreduce(in.data(), out.data(), 300007, DType::float32, ReduceOp::sum,
                 rendezvous::deadline_after(30s));
    int64_t wrong = wrong_elements(out, 300007, DType::float32, world);
    result =
        "ok wrong=" + std::to_string(wrong) + " provider=" + t->identify().value("provider", "");
    if (std::string(mode) == "die" && rank == 1) {
      tcp->set("pid/1", std::to_string(::getpid()));
      tcp->set("result/" + std::to_string(rank), result);
      ::kill(::getpid(), SIGKILL);
    }
    if (std::string(mode) == "die") {
      // The next collective runs into the dead rank 1.
      tcp->wait({"result/1"}, rendezvous::deadline_after(30s));
      // Rank 1 kills itself right after that set: this rank waits for the death itself (its
      // process ended, its sockets closed), then lets it grow old. The scenario is a peer that
      // died a while before the collective: ofi_rxm has taken the closed connection in without
      // a word by then, so nothing but the deadline's probe tells this rank (a collective
      // started at once would see the fresh EPIPE instead).
      const pid_t dead = std::stoi(tcp->get("pid/1", rendezvous::deadline_after(5s)));
      if (!ncclsmoke::testing::wait_until([&] { return ncclsmoke::testing::process_ended(dead); },
                                          10s))
        throw std::runtime_error("rank 1 (pid " + std::to_string(dead) + ") did not end");
      ncclsmoke::testing::pause_for(300ms);  // the death's age: the provider's silence after it
      auto t0 = rendezvous::Clock::now();
      try {
        t->allreduce(in.data(), out.data(), 300007, DType::float32, ReduceOp::sum,
                     rendezvous::deadline_after(1500ms));
        result = "second collective returned";
      } catch (const TransportError& e) {
        char took[32];
        std::snprintf(took, sizeof took, "%.2f", rendezvous::seconds_since(t0));
        result = std::string("error kind=") + to_string(e.kind()) +
                 " peer=" + std::to_string(e.peer()) + " took=" + took + " what=" + e.what();
      }
    }
  } catch (const std::exception& e) {
    result = std::string("failed: ") + e.what();
  }
  t->close();
  tcp->set("result/" + std::to_string(rank), result);
}

struct Children {
  std::vector<pid_t> pids;
  ~Children() {
    for (pid_t p : pids)
      if (p > 0) ::kill(p, SIGKILL), ::waitpid(p, nullptr, 0);
  }
};

// Runs `world` child ranks; returns each rank's result line.
std::vector<std::string> run_processes(int world, const std::string& provider,
                                       const std::string& mode) {
  rendezvous::TcpStoreServerOptions so;
  so.host = "127.0.0.1";
  auto server = rendezvous::TcpStoreServer::start(so);
  rendezvous::TcpStoreOptions co;
  co.port = server->port();
  auto client = rendezvous::TcpStore::connect(co, rendezvous::deadline_after(10s));

  Children kids;
  std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  for (int r = 0; r < world; ++r) {
    std::string env = "NCCLSMOKE_FABRIC_CHILD=" + std::to_string(r) + " " + std::to_string(world) +
                      " " + std::to_string(server->port()) + " " + provider + " " + mode;
    std::vector<std::string> envs = {env};
    for (char** e = environ; *e; ++e)
      if (std::string(*e).rfind("NCCLSMOKE_FABRIC_CHILD=", 0) != 0 &&
          std::string(*e).rfind("GTEST_", 0) != 0)
        envs.push_back(*e);
    std::vector<char*> envp;
    for (auto& s : envs) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string filter = "--gtest_filter=FabricChild.Rank";
    char* argv[] = {exe.data(), filter.data(), nullptr};
    pid_t pid = -1;
    EXPECT_EQ(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()), 0);
    kids.pids.push_back(pid);
  }
  std::vector<std::string> results(world);
  auto deadline = rendezvous::deadline_after(90s);
  for (int r = 0; r < world; ++r) {
    try {
      results[r] = client->get("result/" + std::to_string(r), deadline);
    } catch (const std::exception& e) {
      results[r] = std::string("no result: ") + e.what();
    }
  }
  for (pid_t& p : kids.pids) {
    if (p > 0 && ncclsmoke::testing::wait_until([&] { return ::waitpid(p, nullptr, WNOHANG) == p; }, 5s))
      p = -1;
  }
  return results;
}

TEST(FabricProcesses, ShmAndTcpAcrossProcesses) {
  for (std::string provider : {"shm", "tcp"}) {
    auto results = run_processes(3, provider, "sum");
    std::string expect = provider == "tcp" ? "tcp;ofi_rxm" : "shm";
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(results[r], "ok wrong=0 provider=" + expect) << provider << " rank " << r;
  }
}

TEST(FabricProcesses, KilledPeerEndsInPeerLostOrTimeoutNamingIt) {
  auto results = run_processes(2, "tcp", "die");
  EXPECT_EQ(results[1].rfind("ok wrong=0", 0), 0u) << results[1];
  const std::string& r0 = results[0];
  std::cout << "rank 0 after rank 1 was killed: " << r0 << "\n";
  ASSERT_EQ(r0.rfind("error kind=", 0), 0u) << r0;
  // ofi_rxm reports nothing for the dead connection; the transport probes the peer's listening
  // address once the deadline passes and finds it refused.
  EXPECT_NE(r0.find("kind=peer_lost"), std::string::npos) << r0;
  EXPECT_NE(r0.find("refuses TCP connections"), std::string::npos) << r0;
  EXPECT_NE(r0.find("peer=1"), std::string::npos) << r0;
  EXPECT_NE(r0.find("host-1"), std::string::npos) << r0;
  double took = std::atof(r0.substr(r0.find("took=") + 5).c_str());
  EXPECT_LT(took, 1.5 + 1.0) << r0;
}

}  // namespace
}  // namespace ncclsmoke::transports
