// The mpi transport outside mpirun (unavailable, with the reason), a pairwise instance
// (TransportContext::world_ranks) in a process whose MPI was never opened (refused at once, said
// to the partner through the pair's store, and no MPI started), and the pure helpers identify()
// uses to read Open MPI's choices (mpi_observe.h). The collective itself, and pairs formed with
// MPI_Comm_create_group, are checked under mpirun by mpi_allreduce_check (mpi_test.sh).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "rendezvous/memory_store.h"
#include "transports/mpi/mpi_observe.h"
#include "transports/mpi/mpi_transport.h"

using namespace ncclsmoke::transports;
namespace mo = ncclsmoke::transports::mpi_observe;

namespace {

Deadline in_s(int s) { return Clock::now() + std::chrono::seconds(s); }

void clear_launcher_env() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    unsetenv(v);
}

TEST(MpiTransport, OpenOutsideMpirunIsUnavailableWithTheReason) {
  clear_launcher_env();
  auto t = make_mpi_transport();
  EXPECT_EQ(t->name(), "mpi");
  TransportContext ctx;
  ctx.rank = 1;
  ctx.world_size = 2;
  ctx.hosts[1] = "node-b";
  try {
    t->open(ctx, in_s(10));
    FAIL() << "open() outside mpirun succeeded";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unavailable);
    std::string m = e.what();
    EXPECT_NE(m.find("not started by mpirun"), std::string::npos) << m;
    EXPECT_NE(m.find("mpirun ... ncclsmoke run --transports mpi"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 1 (host node-b)"), std::string::npos) << m;
  }
}

// A pair's instance never starts MPI itself (MPI_Init waits for the whole mpirun job): in a
// process where transport:mpi did not open MPI it is unavailable at once, naming why, and it
// tells its partner through the pair's store (its state, and the decision "off"), so the partner
// does not wait for it either.
TEST(MpiTransport, APairWhereMpiWasNeverOpenedIsRefusedAndThePartnerTold) {
  clear_launcher_env();
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);  // as under mpirun, but no MPI child was started
  ncclsmoke::rendezvous::MemoryStore store;
  auto t = make_mpi_transport();
  TransportContext ctx;
  ctx.rank = 1;  // the pair's higher rank: world rank 3
  ctx.world_size = 2;
  ctx.world_ranks = {1, 3};
  ctx.hosts[0] = "node-b";
  ctx.hosts[1] = "node-d";
  ctx.store = &store;
  auto start = Clock::now();
  try {
    t->open(ctx, in_s(30));
    FAIL() << "a pair opened in a process without MPI";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unavailable);
    std::string m = e.what();
    EXPECT_NE(m.find("mpi: rank 3 (host node-d)"), std::string::npos) << m;
    EXPECT_NE(m.find("with rank 1 (host node-b)"), std::string::npos) << m;
    EXPECT_NE(m.find("MPI was not opened in this process"), std::string::npos) << m;
    EXPECT_NE(m.find("never starts MPI itself"), std::string::npos) << m;
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
  auto info = nlohmann::json::parse(store.get("mpi/info/1", in_s(1)));
  EXPECT_EQ(info.value("ready", true), false) << info.dump();
  EXPECT_NE(info.value("why", "").find("MPI was not opened"), std::string::npos) << info.dump();
  EXPECT_EQ(info["world_ranks"], nlohmann::json({1, 3}));
  EXPECT_EQ(store.get("mpi/decision", in_s(1)), "off");
  // No MPI child was started for it.
  EXPECT_FALSE(t->identify().contains("mpi_process_pid"));

  // The partner (world rank 1) is refused at once too: its own MPI is not open either.
  auto p = make_mpi_transport();
  TransportContext pc = ctx;
  pc.rank = 0;
  try {
    p->open(pc, in_s(30));
    FAIL() << "the partner's pair opened";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unavailable) << e.what();
  }
  // A pair's tag is the lower rank's: posted with its state.
  auto pinfo = nlohmann::json::parse(store.get("mpi/info/0", in_s(1)));
  EXPECT_TRUE(pinfo.contains("tag")) << pinfo.dump();
  clear_launcher_env();
}

TEST(MpiTransport, APairWhoseRanksDoNotMatchItsWorldIsInitFailed) {
  clear_launcher_env();
  auto t = make_mpi_transport();
  TransportContext ctx;
  ctx.rank = 0;
  ctx.world_size = 2;
  ctx.world_ranks = {0, 1, 2};
  try {
    t->open(ctx, in_s(10));
    FAIL() << "open succeeded";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::init_failed);
    EXPECT_NE(std::string(e.what()).find("world_ranks [0,1,2] do not match"), std::string::npos)
        << e.what();
  }
}

TEST(MpiTransport, AllreduceBeforeOpenThrows) {
  auto t = make_mpi_transport();
  float x = 1;
  try {
    t->allreduce(&x, &x, 1, DType::float32, ReduceOp::sum, in_s(5));
    FAIL() << "allreduce without open succeeded";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::other);
    EXPECT_NE(std::string(e.what()).find("before a successful open"), std::string::npos);
  }
}

TEST(MpiTransport, IdentifyBeforeOpenNamesTheLibrary) {
  auto t = make_mpi_transport();
  auto id = t->identify();
  EXPECT_EQ(id.value("library", "").rfind("Open MPI", 0), 0u) << id.dump();
  EXPECT_EQ(id.value("mpi_version", ""), "3.1") << id.dump();
  EXPECT_FALSE(id.contains("pml")) << "selection is only known after open: " << id.dump();
}

TEST(MpiObserve, VarOwner) {
  EXPECT_EQ(mo::var_owner("btl_tcp_if_include").framework, "btl");
  EXPECT_EQ(mo::var_owner("btl_tcp_if_include").component, "tcp");
  EXPECT_EQ(mo::var_owner("pml_ob1_priority").component, "ob1");
  EXPECT_EQ(mo::var_owner("mtl_ofi_provider_include").component, "ofi");
  EXPECT_EQ(mo::var_owner("btl").component, "");
  EXPECT_EQ(mo::var_owner("btl_base_verbose").component, "");
  EXPECT_EQ(mo::var_owner("coll_tuned_priority").framework, "");
  EXPECT_EQ(mo::var_owner("pmlx_ob1_a").framework, "");
}

TEST(MpiObserve, SurvivorsGroupComponentsByFramework) {
  mo::Survivors s;
  for (const char* n : {"pml_base_verbose", "pml_ob1_priority", "pml_ob1_free_list_num",
                        "btl_tcp_if_include", "btl_self_priority", "btl_vader_fbox_size", "btl",
                        "coll_tuned_use_dynamic_rules", "mtl_ofi_provider_include"})
    mo::add_survivor(s, n);
  EXPECT_EQ(s["pml"], (std::set<std::string>{"ob1"}));
  EXPECT_EQ(s["btl"], (std::set<std::string>{"self", "tcp", "vader"}));
  EXPECT_EQ(s["mtl"], (std::set<std::string>{"ofi"}));
  EXPECT_EQ(s.count("coll"), 0u);
}

TEST(MpiObserve, ParsesProcNetTcpEstablishedRowsOnly) {
  const char* v4 =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0\n"
      "   1: 0100007F:A1B2 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1\n"
      "   2: 0202000A:0050 0302000A:C350 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0 20 4 30 10 -1\n"
      "   3: garbage\n";
  auto c = mo::parse_proc_net_tcp(v4, false);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].inode, 222u);
  EXPECT_EQ(c[0].local, "127.0.0.1:41394");
  EXPECT_EQ(c[0].remote, "127.0.0.1:8080");
  EXPECT_EQ(c[0].remote_port, 8080);
  EXPECT_EQ(c[1].local, "10.0.2.2:80");
  EXPECT_EQ(c[1].remote, "10.0.2.3:50000");
  const char* v6 =
      "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 00000000000000000000000001000000:1F90 00000000000000000000000001000000:C000 01 00000000:00000000 00:00000000 00000000     0        0 444 1 0 20 4 30 10 -1\n";
  auto c6 = mo::parse_proc_net_tcp(v6, true);
  ASSERT_EQ(c6.size(), 1u);
  EXPECT_EQ(c6[0].local, "[::1]:8080");
  EXPECT_EQ(c6[0].remote, "[::1]:49152");
}

TEST(MpiObserve, LauncherPortsComeFromPmixAndOrteUris) {
  EXPECT_EQ(mo::uri_ports("2063073280.0;tcp4://127.0.0.1:59161"), (std::set<int>{59161}));
  EXPECT_EQ(mo::uri_ports("2063073280.0;tcp://192.0.2.2:34687;tcp6://[fd00::2]:56049"),
            (std::set<int>{34687, 56049}));
  EXPECT_TRUE(mo::uri_ports("no uri here").empty());
  std::string a = "PMIX_SERVER_URI41=1.0;tcp4://127.0.0.1:1111";
  std::string b = "OMPI_MCA_orte_local_daemon_uri=1.0;tcp://10.0.0.1:2222";
  std::string c = "OMPI_MCA_orte_hnp_uri=1.0;tcp://10.0.0.1:3333";
  std::string d = "MASTER_PORT_URI=tcp://1.2.3.4:4444";
  std::vector<char*> env = {a.data(), b.data(), c.data(), d.data(), nullptr};
  EXPECT_EQ(mo::launcher_ports(env.data()), (std::set<int>{1111, 2222, 3333}));
}

TEST(MpiObserve, SeesThisProcessesOwnLoopbackConnection) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(ls, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(ls, 1), 0);
  socklen_t len = sizeof a;
  getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  auto before = mo::own_tcp_connections();
  int cs = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(cs, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  int as = accept(ls, nullptr, nullptr);
  ASSERT_GE(as, 0);
  auto after = mo::own_tcp_connections();
  int to_port = 0, from_port = 0;
  for (auto& c : after) {
    if (c.remote == "127.0.0.1:" + std::to_string(port)) ++to_port;
    if (c.local == "127.0.0.1:" + std::to_string(port)) ++from_port;
  }
  EXPECT_EQ(to_port, 1) << "client side of the connection not seen";
  EXPECT_EQ(from_port, 1) << "accepted side of the connection not seen";
  EXPECT_EQ(after.size(), before.size() + 2);
  EXPECT_GE(mo::own_socket_inodes().size(), 3u);
  EXPECT_EQ(mo::vader_segments_mapped(), 0);
  close(as);
  close(cs);
  close(ls);
}

}  // namespace
