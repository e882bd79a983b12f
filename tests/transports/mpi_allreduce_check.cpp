// Started under mpirun (see mpi_test.sh): checks the mpi transport in a real Open MPI job.
//
//   mpirun -np N mpi_allreduce_check [--scenario check|timeout|open_timeout|kill|child_dies|
//       init_fails|pairs|pair_partner_dead] [--collective allreduce|
//       iallreduce] [--master-addr ADDR] [--expect-pml X] [--expect-btl X] [--expect-mtl X]
//       [--expect-tcp] [--expect-no-tcp] [--expect-distinct-hosts] [--identify-dir DIR]
//       [--open-timeout S]
//
// check: a world-size mismatch is refused (init_failed); every count (odd ones, not divisible by
// the world) x float32/bfloat16 x out-of-place/in-place gives exact sums and leaves the input
// alone; a corrupted element is counted; run_sweep over a TcpStore served by rank 0 (its port is
// shared with an allreduce) gives complete rows with no wrong element; identify() reports the
// library and what Open MPI selected. Every rank prints "mpi_allreduce_check: rank R/N PASS".
// timeout: the last rank skips a collective; the others get TransportError(timeout) within the
// deadline plus slack, then "unusable" errors, and print "TIMEOUT_OK rank R".
// open_timeout: the last rank never opens; the others' open() ends in TransportError(timeout)
// naming MPI_Init_thread, and they print "OPEN_TIMEOUT_OK rank R".
// kill: the last rank SIGKILLs itself; the survivors' allreduce must not hang (mpirun ends them).
// init_fails (run with --mca btl self): every rank's open() is init_failed with Open MPI's reason
// ("unreachable"), and the rank survives to print "INIT_FAILED_OK rank R".
// child_dies: rank 0's MPI child process is killed; rank 0 names the death, the others end within
// their deadline; every rank prints "CHILD_DIES_OK rank R".
// pairs: the pairwise rounds' instances (TransportContext::world_ranks) over a TcpStore served by
// rank 0, after the world instance is closed: every pair of the round robin
// (transports/pair_schedule.h), disjoint pairs at once, forms its communicator with
// MPI_Comm_create_group and gives exact sums (float32, bfloat16, in-place) and a timed loop; then
// ranks 0 and 1: rank 1 comes 3 s late to a pair rank 0 waits 1.5 s for (rank 0: timeout "did
// not arrive", rank 1: timeout "had given up", neither made an MPI call), and the same two pair
// again at once. Every rank prints "mpi_allreduce_check: rank R/N PASS".
// pair_partner_dead: the last rank's MPI child is killed; its pair with the rank before it is
// refused on both sides at once (unavailable: "MPI is unusable in this process" there, "its
// partner ... cannot take part" here) and both print "PAIR_DEAD_OK rank R".
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/prefix_store.h"
#include "rendezvous/tcp_client.h"
#include "transports/pair_schedule.h"
#include "rendezvous/tcp_server.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/sweep.h"
#include "tests/wait_until.h"

using namespace ncclsmoke;
using namespace ncclsmoke::transports;
using nlohmann::json;

namespace {

int g_rank = -1, g_size = 0;
int g_failures = 0, g_checks = 0;

void expect(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    std::fprintf(stderr, "mpi_allreduce_check: rank %d FAIL: %s\n", g_rank, what.c_str());
  }
}

Deadline in_s(int s) { return Clock::now() + std::chrono::seconds(s); }

struct Args {
  std::string scenario = "check";
  std::string collective = "allreduce";
  std::string master_addr = "127.0.0.1";
  std::string expect_pml, expect_btl, expect_mtl;
  std::string identify_dir;  // each rank writes identify-<rank>.json there
  int open_timeout_s = 60;    // init_fails: the open deadline
  bool expect_tcp = false;
  bool expect_no_tcp = false;
  bool expect_distinct_hosts = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "mpi_allreduce_check: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--scenario") a.scenario = val();
    else if (k == "--collective") a.collective = val();
    else if (k == "--master-addr") a.master_addr = val();
    else if (k == "--identify-dir") a.identify_dir = val();
    else if (k == "--open-timeout") a.open_timeout_s = std::atoi(val().c_str());
    else if (k == "--expect-pml") a.expect_pml = val();
    else if (k == "--expect-btl") a.expect_btl = val();
    else if (k == "--expect-mtl") a.expect_mtl = val();
    else if (k == "--expect-tcp") a.expect_tcp = true;
    else if (k == "--expect-no-tcp") a.expect_no_tcp = true;
    else if (k == "--expect-distinct-hosts") a.expect_distinct_hosts = true;
    else {
      std::fprintf(stderr, "mpi_allreduce_check: unknown argument %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// One allreduce of `count` elements, checked: exact sums, untouched input (out-of-place).
void check_one(Transport& t, std::size_t count, DType dtype, bool in_place) {
  std::size_t bytes = count * dtype_size(dtype);
  std::vector<unsigned char> send(bytes), recv(bytes, 0xFF), orig(bytes);
  fill_input(send.data(), count, dtype, g_rank);
  orig = send;
  void* out = in_place ? send.data() : recv.data();
  std::string what = std::to_string(count) + " " + to_string(dtype) +
                     (in_place ? " in-place" : " out-of-place");
  try {
    t.allreduce(send.data(), out, count, dtype, ReduceOp::sum, in_s(60));
  } catch (const TransportError& e) {
    expect(false, what + ": " + e.what());
    return;
  }
  int64_t wrong = count_wrong(out, count, dtype, g_size);
  expect(wrong == 0, what + ": " + std::to_string(wrong) + " wrong elements");
  if (!in_place) expect(send == orig, what + ": the input buffer changed");
  // The data check itself must catch a corrupted element.
  if (count > 2) {
    auto* p = static_cast<unsigned char*>(out);
    p[(count / 2) * dtype_size(dtype) + dtype_size(dtype) - 1] ^= 0x40;  // a high bit
    expect(count_wrong(out, count, dtype, g_size) == 1, what + ": corruption not caught");
  }
}

// A TcpStore served by rank 0 (its port reaches the others through an allreduce).
std::shared_ptr<rendezvous::Store> shared_store(
    Transport& t, const Args& a, std::unique_ptr<rendezvous::TcpStoreServer>& server,
    uint16_t* port_out = nullptr) {
  float port = 0;
  if (g_rank == 0) {
    rendezvous::TcpStoreServerOptions so;
    so.host = a.master_addr;
    server = rendezvous::TcpStoreServer::start(so);
    port = static_cast<float>(server->port());
  }
  t.allreduce(&port, &port, 1, DType::float32, ReduceOp::sum, in_s(60));
  rendezvous::TcpStoreOptions co;
  co.host = a.master_addr;
  co.port = static_cast<uint16_t>(port);
  if (port_out) *port_out = co.port;
  return rendezvous::TcpStore::connect(co, in_s(30));
}

int scenario_check(Transport& t, const TransportContext& ctx, const Args& a) {
  for (DType dtype : {DType::float32, DType::bfloat16})
    for (std::size_t count : {1, 2, 3, 5, 7, 31, 1000, 1023, 65537, 262147})
      for (bool in_place : {false, true}) check_one(t, count, dtype, in_place);

  // A store for run_sweep.
  std::unique_ptr<rendezvous::TcpStoreServer> server;
  uint16_t served_port = 0;
  std::shared_ptr<rendezvous::Store> store = shared_store(t, a, server, &served_port);

  for (DType dtype : {DType::float32, DType::bfloat16}) {
    SweepOptions o;
    o.min_bytes = 4096;
    o.max_bytes = 1 << 20;
    o.factor = 4;
    o.warmup_iters = 1;
    o.iters = 3;
    o.dtype = dtype;
    o.gate_bytes = 1 << 20;
    o.op_timeout = Millis(60000);
    SweepResult r;
    try {
      rendezvous::PrefixStore ps(std::string("sweep-") + to_string(dtype) + "/", store);
      r = run_sweep(t, ctx, ps, o, in_s(120));
    } catch (const std::exception& e) {
      expect(false, std::string("run_sweep ") + to_string(dtype) + ": " + e.what());
      continue;
    }
    expect(r.complete, std::string("run_sweep ") + to_string(dtype) + ": incomplete");
    expect(r.rows.size() == 2 * sweep_sizes(o).size(), "run_sweep rows");
    for (auto& row : r.rows) {
      expect(row.wrong == 0, "run_sweep " + std::to_string(row.bytes) + " B: wrong " +
                                 std::to_string(row.wrong));
      expect(row.time_us > 0 && row.busbw_gbps > 0, "run_sweep: no time/bandwidth");
      expect(static_cast<int>(row.rank_time_us.size()) == g_size, "run_sweep: rank times");
      if (g_rank == 0)
        std::printf("sweep %s %9zu B %-12s %10.1f us algbw %7.3f busbw %7.3f GB/s wrong %lld\n",
                    to_string(dtype), row.bytes, row.in_place ? "in-place" : "out-of-place",
                    row.time_us, row.algbw_gbps, row.busbw_gbps,
                    static_cast<long long>(row.wrong));
    }
  }

  json id = t.identify();
  {
    json shown = id;
    shown.erase("how");  // long, and mpirun may interleave long lines of local ranks
    std::printf("identify rank %d: %s\n", g_rank, shown.dump().c_str());
  }
  if (!a.identify_dir.empty()) {
    std::string path = a.identify_dir + "/identify-" + std::to_string(g_rank) + ".json";
    FILE* f = std::fopen(path.c_str(), "w");
    expect(f != nullptr, "cannot write " + path);
    if (f) {
      std::fputs(id.dump().c_str(), f);
      std::fclose(f);
    }
  }
  expect(id.value("library", "").rfind("Open MPI", 0) == 0, "identify: library is not Open MPI");
  expect(id.value("mpi_version", "") == "3.1", "identify: mpi_version");
  expect(id.value("rank", -1) == g_rank && id.value("world_size", -1) == g_size,
         "identify: rank/world_size");
  expect(id.contains("pml") && id["pml"].value("selected", json()) != "unknown",
         "identify: pml selection unknown");
  if (!a.expect_pml.empty())
    expect(id["pml"].value("selected", json()) == a.expect_pml, "identify: pml != " + a.expect_pml);
  if (!a.expect_mtl.empty())
    expect(id["mtl"].value("selected", json()) == a.expect_mtl, "identify: mtl != " + a.expect_mtl);
  if (!a.expect_btl.empty()) {
    bool found = false;
    for (auto& b : id["btl"].value("selected", json::array()))
      if (b == a.expect_btl) found = true;
    expect(found, "identify: btl " + a.expect_btl + " not selected");
  }
  // The store's connections are this program's own (made after MPI_Init): leave them out.
  int mpi_tcp = 0;
  std::string store_port = ":" + std::to_string(served_port);
  for (auto& c : id["observed"].value("tcp_connections", json::array())) {
    std::string s = c.get<std::string>();
    auto arrow = s.find(" -> ");
    if (s.substr(0, arrow).substr(s.substr(0, arrow).rfind(':')) == store_port ||
        s.substr(s.rfind(':')) == store_port)
      continue;
    ++mpi_tcp;
  }
  if (a.expect_tcp) expect(mpi_tcp > 0, "identify: no MPI TCP connection observed");
  if (a.expect_no_tcp) expect(mpi_tcp == 0, "identify: MPI TCP connections observed");
  if (a.expect_no_tcp && g_size > 1)
    expect(id["observed"].value("vader_segments_mapped", 0) >= 2, "identify: no vader segments");

  // Every rank reports its host; with --expect-distinct-hosts they must all differ.
  store->set("host/" + std::to_string(g_rank), id.value("host", ""));
  if (g_rank == 0) {
    std::set<std::string> hosts;
    for (int r = 0; r < g_size; ++r) hosts.insert(store->get("host/" + std::to_string(r), in_s(60)));
    std::printf("hosts:");
    for (auto& h : hosts) std::printf(" %s", h.c_str());
    std::printf("\n");
    if (a.expect_distinct_hosts)
      expect(static_cast<int>(hosts.size()) == g_size, "ranks do not run on distinct hosts");
  }
  // Rank 0 keeps serving until everyone is done with the store.
  store->add("done", 1);
  if (g_rank == 0) {
    ncclsmoke::testing::wait_until([&] { return store->add("done", 0) >= g_size; },
                                   std::chrono::seconds(60), Millis(20));
  }
  store.reset();
  if (server) server->stop();
  (void)ctx;
  return 0;
}

int scenario_timeout(Transport& t, const Args& a) {
  std::vector<float> buf(1024);
  if (g_rank == g_size - 1) {
    // Skips the collective (the rank the test is about); mpirun ends it once the others exit
    // without MPI_Finalize.
    ncclsmoke::testing::pause_for(std::chrono::seconds(20));  // the rank that stays away
    return 0;
  }
  fill_input(buf.data(), buf.size(), DType::float32, g_rank);
  auto start = Clock::now();
  bool timed_out = false;
  try {
    t.allreduce(buf.data(), buf.data(), buf.size(), DType::float32, ReduceOp::sum,
                Clock::now() + Millis(2000));
  } catch (const TransportError& e) {
    timed_out = e.kind() == ErrorKind::timeout;
    std::printf("rank %d: %s: %s\n", g_rank, to_string(e.kind()), e.what());
    std::string want = "abandoned";
    expect(std::string(e.what()).find(want) != std::string::npos, "timeout message lacks " + want);
  }
  double waited = rendezvous::seconds_since(start);
  expect(timed_out, "no timeout");
  expect(waited < 2.0 + 10.0, "timeout took " + std::to_string(waited) + " s");
  try {
    t.allreduce(buf.data(), buf.data(), buf.size(), DType::float32, ReduceOp::sum, in_s(5));
    expect(false, "allreduce after a timeout did not throw");
  } catch (const TransportError& e) {
    expect(std::string(e.what()).find("unusable") != std::string::npos,
           std::string("second allreduce: ") + e.what());
  }
  json id = t.identify();
  expect(id.value("state", "").rfind("unusable", 0) == 0, "identify after timeout: " + id.dump());
  if (g_failures == 0) std::printf("TIMEOUT_OK rank %d (%.1f s)\n", g_rank, waited);
  std::fflush(stdout);
  return 0;
}

int scenario_kill(Transport& t) {
  std::vector<float> buf(1 << 20);
  t.allreduce(buf.data(), buf.data(), 1, DType::float32, ReduceOp::sum, in_s(60));
  if (g_rank == g_size - 1) {
    std::printf("rank %d: SIGKILL myself\n", g_rank);
    std::fflush(stdout);
    raise(SIGKILL);
  }
  for (int i = 0; i < 100; ++i) {
    try {
      t.allreduce(buf.data(), buf.data(), buf.size(), DType::float32, ReduceOp::sum, in_s(30));
    } catch (const TransportError& e) {
      std::printf("KILL_SEEN rank %d: %s: %s\n", g_rank, to_string(e.kind()), e.what());
      std::fflush(stdout);
      return 0;
    }
  }
  expect(false, "100 allreduces succeeded with a dead peer");
  return 0;
}

// Rank 0's MPI child process is SIGKILLed behind the transport's back: rank 0's next allreduce
// names the death (other, "killed by signal 9", the child's stderr tail as evidence), later calls
// are "unusable"; the other ranks' allreduce ends with an error within its deadline.
int scenario_child_dies(Transport& t) {
  std::vector<float> buf(1024);
  t.allreduce(buf.data(), buf.data(), 1, DType::float32, ReduceOp::sum, in_s(60));
  auto start = Clock::now();
  if (g_rank == 0) {
    json id = t.identify();
    int pid = id.value("mpi_process_pid", 0);
    expect(pid > 0 && pid != getpid(), "identify: no MPI child pid: " + id.dump());
    if (pid <= 0) return 1;
    kill(pid, SIGKILL);
    try {
      t.allreduce(buf.data(), buf.data(), buf.size(), DType::float32, ReduceOp::sum, in_s(10));
      expect(false, "allreduce after the MPI child was killed succeeded");
    } catch (const TransportError& e) {
      std::printf("rank %d: %s: %s\n", g_rank, to_string(e.kind()), e.what());
      std::string m = e.what();
      expect(e.kind() == ErrorKind::other, std::string("kind ") + to_string(e.kind()));
      // Noticed by the first request after the kill (the scratch buffer's growth or the
      // collective itself).
      expect(m.find("the MPI child process died during") != std::string::npos &&
                 m.find("killed by signal 9") != std::string::npos,
             "message does not name the death: " + m);
      expect(e.evidence().contains("child_stderr_tail") &&
                 e.evidence().value("mpi_child_exit", "") == "signal 9",
             "evidence: " + e.evidence().dump());
    }
    try {
      t.allreduce(buf.data(), buf.data(), buf.size(), DType::float32, ReduceOp::sum, in_s(5));
      expect(false, "allreduce after the death did not throw");
    } catch (const TransportError& e) {
      expect(std::string(e.what()).find("unusable") != std::string::npos,
             std::string("second allreduce: ") + e.what());
    }
    json id2 = t.identify();
    expect(id2.value("state", "").rfind("unusable", 0) == 0, "identify after death: " + id2.dump());
    // mpirun ends the job once this rank exits (its MPI process did not finalize): let the
    // others report first.
    std::this_thread::sleep_until(start + std::chrono::seconds(5));
  } else {
    try {
      t.allreduce(buf.data(), buf.data(), buf.size(), DType::float32, ReduceOp::sum,
                  Clock::now() + Millis(3000));
      expect(false, "allreduce with rank 0's MPI process dead succeeded");
    } catch (const TransportError& e) {
      std::printf("rank %d: %s: %s\n", g_rank, to_string(e.kind()), e.what());
    }
  }
  double waited = rendezvous::seconds_since(start);
  expect(waited < 5.0 + 10.0, "child_dies took " + std::to_string(waited) + " s");
  if (g_failures == 0) std::printf("CHILD_DIES_OK rank %d (%.1f s)\n", g_rank, waited);
  std::fflush(stdout);
  return 0;
}


// Everyone is done with the store before rank 0 stops serving it.
void release_store(std::shared_ptr<rendezvous::Store>& store,
                   std::unique_ptr<rendezvous::TcpStoreServer>& server) {
  store->add("done", 1);
  if (g_rank == 0)
    ncclsmoke::testing::wait_until([&] { return store->add("done", 0) >= g_size; },
                                   std::chrono::seconds(60), Millis(20));
  store.reset();
  if (server) server->stop();
}

TransportContext pair_context(const TransportContext& world, int peer, rendezvous::Store* store) {
  TransportContext c;
  c.rank = g_rank < peer ? 0 : 1;
  c.world_size = 2;
  c.world_ranks = {std::min(g_rank, peer), std::max(g_rank, peer)};
  c.hosts[c.rank] = hostname();
  c.hosts[1 - c.rank] = "host-of-rank-" + std::to_string(peer);
  c.options = world.options;
  c.store = store;
  return c;
}

// One pair instance opened, checked and timed; returns the mean microseconds (or -1).
double check_pair(const TransportContext& world, int peer, rendezvous::Store& store,
                  const std::string& what) {
  auto t = make_mpi_transport();
  auto c = pair_context(world, peer, &store);
  try {
    t->open(c, in_s(30));
  } catch (const TransportError& e) {
    expect(false, what + ": open: " + to_string(e.kind()) + ": " + e.what());
    return -1;
  }
  double us = -1;
  try {
    for (DType dtype : {DType::float32, DType::bfloat16})
      for (bool in_place : {false, true}) {
        const std::size_t count = 65537;
        std::size_t bytes = count * dtype_size(dtype);
        std::vector<unsigned char> send(bytes), recv(bytes, 0xFF);
        fill_input(send.data(), count, dtype, c.rank);
        void* out = in_place ? send.data() : recv.data();
        t->allreduce(send.data(), out, count, dtype, ReduceOp::sum, in_s(30));
        int64_t wrong = count_wrong(out, count, dtype, 2);
        expect(wrong == 0, what + ": " + to_string(dtype) + (in_place ? " in-place" : "") + ": " +
                               std::to_string(wrong) + " wrong elements");
      }
    std::size_t n = 1 << 16;
    void* sb = t->allocate(n * 4);
    void* rb = t->allocate(n * 4);
    us = t->timed_allreduce(sb, rb, n, DType::float32, ReduceOp::sum, 5, in_s(30),
                            [] { return in_s(10); });
    t->release(sb);
    t->release(rb);
    expect(us > 0, what + ": no time");
    json id = t->identify();
    expect(id.value("world_ranks", json()) == json(c.world_ranks) &&
               id.value("rank", -1) == c.rank && id.value("world_size", -1) == 2,
           what + ": identify: " + id.dump());
  } catch (const TransportError& e) {
    expect(false, what + ": " + to_string(e.kind()) + ": " + e.what());
  }
  t->close();
  return us;
}

int scenario_pairs(Transport& world_t, const TransportContext& ctx, const Args& a) {
  std::unique_ptr<rendezvous::TcpStoreServer> server;
  auto store = shared_store(world_t, a, server);
  world_t.close();  // the pairs do not need the world instance
  std::vector<int> all;
  for (int r = 0; r < g_size; ++r) all.push_back(r);
  auto rounds = pair_rounds(all);
  auto t0 = Clock::now();
  int measured = 0;
  for (std::size_t k = 0; k < rounds.size(); ++k) {
    int peer = partner_in(rounds[k], g_rank);
    if (peer < 0) continue;
    std::string name = "pairs/" + std::to_string(k) + "/" + std::to_string(std::min(g_rank, peer)) +
                       "-" + std::to_string(std::max(g_rank, peer));
    rendezvous::PrefixStore ps(name, store);
    double us = check_pair(ctx, peer, ps, name);
    if (us > 0) ++measured;
    std::printf("rank %d: round %zu with rank %d: %.1f us (64K floats x 5)\n", g_rank, k, peer, us);
  }
  expect(measured == g_size - 1, "measured " + std::to_string(measured) + " pairs of " +
                                     std::to_string(g_size - 1));
  std::printf("rank %d: %zu rounds in %.2f s\n", g_rank, rounds.size(),
              rendezvous::seconds_since(t0));

  // A partner that comes too late: neither side makes an MPI call, and both pair again at once.
  if (g_rank <= 1 && g_size >= 2) {
    int peer = 1 - g_rank;
    rendezvous::PrefixStore late("late/0-1", store);
    auto c = pair_context(ctx, peer, &late);
    auto t = make_mpi_transport();
    if (g_rank == 1)
      ncclsmoke::testing::pause_for(std::chrono::seconds(3));  // the partner that comes too late
    auto start = Clock::now();
    try {
      t->open(c, g_rank == 0 ? Clock::now() + Millis(1500) : in_s(10));
      expect(false, "late pair: open succeeded");
    } catch (const TransportError& e) {
      std::string m = e.what();
      double took = rendezvous::seconds_since(start);
      std::printf("rank %d: late pair: %s: %s (%.2f s)\n", g_rank, to_string(e.kind()), m.c_str(),
                  took);
      expect(e.kind() == ErrorKind::timeout, "late pair: kind " + std::string(to_string(e.kind())));
      expect(m.find(g_rank == 0 ? "did not arrive" : "had given up") != std::string::npos,
             "late pair: " + m);
      expect(m.find("no MPI call was made") != std::string::npos, "late pair: " + m);
      expect(took < (g_rank == 0 ? 1.5 + 1.0 : 1.0), "late pair took " + std::to_string(took));
    }
    rendezvous::PrefixStore again("again/0-1", store);
    double us = check_pair(ctx, peer, again, "again/0-1");
    std::printf("rank %d: paired again with rank %d: %.1f us\n", g_rank, peer, us);
  }
  release_store(store, server);
  return 0;
}

int scenario_pair_partner_dead(Transport& world_t, const TransportContext& ctx, const Args& a) {
  std::unique_ptr<rendezvous::TcpStoreServer> server;
  auto store = shared_store(world_t, a, server);
  const int last = g_size - 1, before = g_size - 2;
  if (g_rank == last) {
    int pid = world_t.identify().value("mpi_process_pid", 0);
    expect(pid > 0, "no MPI child pid");
    if (pid > 0) kill(pid, SIGKILL);
    // Ended before the pair opens, and waitable (WNOWAIT leaves it for the transport to reap):
    // the open must find it ended between calls.
    auto waitable = [pid] {
      siginfo_t info{};
      return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
             info.si_pid == pid;
    };
    if (pid > 0)
      expect(ncclsmoke::testing::wait_until(waitable, std::chrono::seconds(10)),
             "the killed MPI child did not end within 10 s");
  }
  if (g_rank == last || g_rank == before) {
    int peer = g_rank == last ? before : last;
    rendezvous::PrefixStore ps("dead", store);
    auto t = make_mpi_transport();
    auto start = Clock::now();
    try {
      t->open(pair_context(ctx, peer, &ps), in_s(30));
      expect(false, "a pair with a dead MPI child opened");
    } catch (const TransportError& e) {
      std::string m = e.what();
      double took = rendezvous::seconds_since(start);
      std::printf("rank %d: %s: %s (%.2f s)\n", g_rank, to_string(e.kind()), m.c_str(), took);
      expect(e.kind() == ErrorKind::unavailable, std::string("kind ") + to_string(e.kind()));
      expect(m.find("MPI is unusable in this process because the MPI child process ended") !=
                 std::string::npos,
             "message: " + m);
      if (g_rank == before)
        expect(m.find("cannot take part") != std::string::npos, "message: " + m);
      expect(took < 2.0, "took " + std::to_string(took) + " s");
    }
    if (g_failures == 0) std::printf("PAIR_DEAD_OK rank %d\n", g_rank);
  }
  release_store(store, server);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "__mpi-child") return mpi_child_main(argc, argv);
  Args a = parse(argc, argv);
  const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* s = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!r || !s) {
    std::fprintf(stderr, "mpi_allreduce_check: start me with mpirun (no OMPI_COMM_WORLD_*)\n");
    return 2;
  }
  g_rank = std::atoi(r);
  g_size = std::atoi(s);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  TransportContext ctx;
  ctx.rank = g_rank;
  ctx.world_size = g_size;
  ctx.hosts[g_rank] = hostname();
  ctx.options["mpi.collective"] = a.collective;

  if (a.scenario == "open_timeout") {
    // The last rank never opens the transport (on purpose, for 8 s): the others' MPI_Init cannot
    // complete.
    if (g_rank == g_size - 1) {
      ncclsmoke::testing::pause_for(std::chrono::seconds(8));  // the rank that never opens
      return 0;
    }
    auto t = make_mpi_transport();
    auto start = Clock::now();
    try {
      t->open(ctx, Clock::now() + Millis(3000));
      expect(false, "open succeeded without the last rank");
    } catch (const TransportError& e) {
      std::printf("rank %d: %s: %s\n", g_rank, to_string(e.kind()), e.what());
      expect(e.kind() == ErrorKind::timeout, "open: not a timeout");
      expect(std::string(e.what()).find("MPI_Init_thread did not return") != std::string::npos,
             "open timeout does not name MPI_Init_thread");
    }
    double waited = rendezvous::seconds_since(start);
    expect(waited < 3.0 + 10.0, "open timeout took " + std::to_string(waited) + " s");
    if (g_failures == 0) std::printf("OPEN_TIMEOUT_OK rank %d (%.1f s)\n", g_rank, waited);
    return g_failures ? 1 : 0;
  }
  if (a.scenario == "init_fails") {
    // Started with `--mca btl self` across processes. On one host Open MPI aborts inside
    // MPI_Init_thread; across hosts a rank may instead see MPI_Comm_dup fail, and a peer wait in
    // MPI_Init until the open deadline. Each rank prints INIT_FAILED_OK when its open() was
    // init_failed with Open MPI's reason, INIT_FAILED_OTHER <kind> otherwise.
    auto t = make_mpi_transport();
    auto start = Clock::now();
    try {
      t->open(ctx, in_s(a.open_timeout_s));
      expect(false, "open succeeded although Open MPI cannot connect the ranks");
    } catch (const TransportError& e) {
      std::printf("rank %d: %s: %s\n", g_rank, to_string(e.kind()), e.what());
      std::string m = e.what();
      bool reason = m.find("unreachable") != std::string::npos ||
                    m.find("unable to reach") != std::string::npos;
      bool evidence = e.evidence().contains("open_mpi_help") &&
                      e.evidence().contains("child_stderr_tail");
      double waited = rendezvous::seconds_since(start);
      if (e.kind() == ErrorKind::init_failed && reason && evidence)
        std::printf("INIT_FAILED_OK rank %d (%.1f s)\n", g_rank, waited);
      else
        std::printf("INIT_FAILED_OTHER rank %d %s reason=%d evidence=%d (%.1f s)\n", g_rank,
                    to_string(e.kind()), reason, evidence, waited);
    }
    std::fflush(stdout);
    return g_failures ? 1 : 0;
  }
  // A world that disagrees with MPI_COMM_WORLD is refused (MPI is initialised once, here).
  {
    TransportContext bad = ctx;
    bad.world_size = g_size + 1;
    auto t = make_mpi_transport();
    try {
      t->open(bad, in_s(60));
      expect(false, "open with a wrong world size succeeded");
    } catch (const TransportError& e) {
      expect(e.kind() == ErrorKind::init_failed &&
                 std::string(e.what()).find("world size mismatch") != std::string::npos,
             std::string("wrong world size: ") + to_string(e.kind()) + ": " + e.what());
    }
  }
  auto t = make_mpi_transport();
  try {
    t->open(ctx, in_s(60));
  } catch (const TransportError& e) {
    std::fprintf(stderr, "mpi_allreduce_check: rank %d: open failed: %s: %s\n", g_rank,
                 to_string(e.kind()), e.what());
    return 1;
  }

  if (a.scenario == "check") scenario_check(*t, ctx, a);
  else if (a.scenario == "timeout") return scenario_timeout(*t, a), g_failures ? 1 : 0;
  else if (a.scenario == "kill") scenario_kill(*t);
  else if (a.scenario == "child_dies") return scenario_child_dies(*t), g_failures ? 1 : 0;
  else if (a.scenario == "pairs") scenario_pairs(*t, ctx, a);
  else if (a.scenario == "pair_partner_dead")
    return scenario_pair_partner_dead(*t, ctx, a), std::fflush(stdout), g_failures ? 1 : 0;
  else {
    std::fprintf(stderr, "mpi_allreduce_check: unknown scenario %s\n", a.scenario.c_str());
    return 2;
  }
  t->close();
  if (g_failures == 0)
    std::printf("mpi_allreduce_check: rank %d/%d PASS (%d checks)\n", g_rank, g_size, g_checks);
  else
    std::printf("mpi_allreduce_check: rank %d/%d FAILED %d of %d checks\n", g_rank, g_size,
                g_failures, g_checks);
  return g_failures ? 1 : 0;
}
