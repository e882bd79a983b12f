// The node's network devices (node/nic_health.h, node/sysfs.h) against the fixture layouts of
// tests/node/fixtures/sysfs (README.md there): states, rates, counters that move between two
// readings, and roots that are missing or hold junk.
#include "node/nic_health.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "node/sysfs.h"
#include "rendezvous/net.h"

namespace ncclsmoke::node {
namespace {

namespace fs = std::filesystem;

// A copy of a fixture layout in a directory of its own, removed at the end.
class SysfsCopy {
 public:
  explicit SysfsCopy(const std::string& layout) {
    root_ = fs::temp_directory_path() /
            ("ncclsmoke-sysfs-" + std::to_string(::getpid()) + "-" + layout + "-" +
             std::to_string(counter_++));
    fs::remove_all(root_);
    fs::copy(std::string(NCCLSMOKE_SOURCE_DIR) + "/tests/node/fixtures/sysfs/" + layout, root_,
             fs::copy_options::recursive);
  }
  ~SysfsCopy() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string root() const { return root_.string(); }
  void write(const std::string& relative, const std::string& text) const {
    std::ofstream(root_ / relative) << text << "\n";
  }

 private:
  fs::path root_;
  static inline int counter_ = 0;
};

const facts::RdmaPortFacts* port_of(const facts::NicFacts& f, const std::string& key) {
  for (const auto& p : f.rdma_ports)
    if (p.key() == key) return &p;
  return nullptr;
}

TEST(NicHealth, ReadsStatesRatesAndTheInterfaceOfTheAddress) {
  SysfsCopy sys("healthy");
  const std::vector<std::string> lo = {"lo"};
  auto before = read_nic_snapshot(sys.root());
  ASSERT_TRUE(before.read);
  EXPECT_EQ(before.interfaces.count("lo"), 1u);
  EXPECT_EQ(before.rdma_ports.size(), 2u);
  auto after = read_nic_snapshot(sys.root(), &lo);
  auto f = nic_facts(before, after, lo);
  ASSERT_TRUE(f.read);
  ASSERT_EQ(f.interfaces.size(), 1u);
  EXPECT_EQ(f.interfaces[0].name, "lo");
  EXPECT_EQ(f.interfaces[0].operstate, "unknown");
  EXPECT_EQ(f.interfaces[0].carrier, 1);
  EXPECT_EQ(f.interfaces[0].mtu, 65536);
  EXPECT_EQ(f.interfaces[0].speed_mbps, -1);  // no speed file, as on loopback
  EXPECT_TRUE(f.interfaces[0].moved.empty());
  ASSERT_EQ(f.rdma_ports.size(), 2u);
  const auto* p = port_of(f, "mlx5_0/1");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->state, "ACTIVE");
  EXPECT_EQ(p->phys_state, "LinkUp");
  EXPECT_EQ(p->link_layer, "InfiniBand");
  EXPECT_DOUBLE_EQ(p->rate_gbps, 400);
  EXPECT_TRUE(p->moved.empty());
}

TEST(NicHealth, APortDownIsReadAsDown) {
  SysfsCopy sys("port_down");
  auto before = read_nic_snapshot(sys.root());
  auto f = nic_facts(before, read_nic_snapshot(sys.root()), {});
  const auto* p = port_of(f, "mlx5_1/1");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->state, "DOWN");
  EXPECT_EQ(p->phys_state, "Polling");
  EXPECT_DOUBLE_EQ(p->rate_gbps, 10);
  EXPECT_EQ(port_of(f, "mlx5_0/1")->state, "ACTIVE");
}

TEST(NicHealth, CountersThatMoveBetweenReadingsAreTheRuns) {
  SysfsCopy sys("healthy");
  const std::vector<std::string> lo = {"lo"};
  auto before = read_nic_snapshot(sys.root());
  sys.write("class/infiniband/mlx5_0/ports/1/counters/symbol_error", "12");
  sys.write("class/infiniband/mlx5_0/ports/1/hw_counters/rnr_nak_retry_err", "3");
  // Counters that count traffic, not faults, are not "moved" evidence.
  sys.write("class/infiniband/mlx5_0/ports/1/counters/port_xmit_data", "99999999999");
  sys.write("class/infiniband/mlx5_0/ports/1/hw_counters/out_of_sequence", "7");
  sys.write("class/net/lo/statistics/rx_crc_errors", "5");
  sys.write("class/net/lo/statistics/tx_bytes", "18446744073709551615");
  auto f = nic_facts(before, read_nic_snapshot(sys.root(), &lo), lo);
  const auto* p = port_of(f, "mlx5_0/1");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->moved, (std::map<std::string, std::uint64_t>{{"rnr_nak_retry_err", 3},
                                                           {"symbol_error", 12}}));
  EXPECT_TRUE(port_of(f, "mlx5_1/1")->moved.empty());
  ASSERT_EQ(f.interfaces.size(), 1u);
  EXPECT_EQ(f.interfaces[0].moved, (std::map<std::string, std::uint64_t>{{"rx_crc_errors", 5}}));
  EXPECT_GT(f.interfaces[0].tx_bytes, 0u);
  EXPECT_GE(f.interval_s, 0);
}

TEST(NicHealth, ACounterThatWentBackwardsReportsItsValueAfterTheReset) {
  SysfsCopy sys("healthy");
  sys.write("class/infiniband/mlx5_0/ports/1/counters/symbol_error", "100");
  auto before = read_nic_snapshot(sys.root());
  sys.write("class/infiniband/mlx5_0/ports/1/counters/symbol_error", "4");
  auto f = nic_facts(before, read_nic_snapshot(sys.root()), {});
  EXPECT_EQ(port_of(f, "mlx5_0/1")->moved.at("symbol_error"), 4u);
}

TEST(NicHealth, NothingIsKnownWhereNothingIsThere) {
  auto none = read_nic_snapshot("/nonexistent/ncclsmoke-sysfs");
  EXPECT_FALSE(none.read);
  auto f = nic_facts(none, none, {"eth0"});
  EXPECT_FALSE(f.read);
  EXPECT_TRUE(f.interfaces.empty());
  EXPECT_TRUE(f.rdma_ports.empty());
  // An interface that is not there is left out, not reported as down.
  SysfsCopy sys("healthy");
  const std::vector<std::string> eth = {"eth9"};
  auto g = nic_facts(read_nic_snapshot(sys.root()), read_nic_snapshot(sys.root(), &eth), eth);
  EXPECT_TRUE(g.read);
  EXPECT_TRUE(g.interfaces.empty());
}

TEST(NicHealth, JunkInAFileIsNotKnownAndNothingThrows) {
  SysfsCopy sys("healthy");
  sys.write("class/infiniband/mlx5_0/ports/1/counters/symbol_error", "lots");
  sys.write("class/infiniband/mlx5_0/ports/1/rate", "fast");
  sys.write("class/net/lo/mtu", "-");
  const std::vector<std::string> lo = {"lo", "../../etc", ""};
  auto before = read_nic_snapshot(sys.root(), &lo);
  EXPECT_EQ(before.interfaces.size(), 1u);
  sys.write("class/infiniband/mlx5_0/ports/1/counters/symbol_error", "9");
  auto f = nic_facts(before, read_nic_snapshot(sys.root(), &lo), lo);
  const auto* p = port_of(f, "mlx5_0/1");
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->rate_gbps, 0);
  EXPECT_TRUE(p->moved.empty());  // unreadable before: no delta to tell
  EXPECT_EQ(f.interfaces.at(0).mtu, -1);
}

// The speed a rank's verdict carries for its interface (ranks[].link_speed_mbps) is read under the
// same root.
TEST(Sysfs, TheInterfaceSpeedIsReadUnderTheRoot) {
  SysfsCopy sys("healthy");
  sys.write("class/net/lo/speed", "100000");
  EXPECT_EQ(rendezvous::interface_speed_mbps("lo", sys.root()), 100000);
  sys.write("class/net/lo/speed", "-1");  // a link that is down, or a virtual device
  EXPECT_EQ(rendezvous::interface_speed_mbps("lo", sys.root()), 0);
  EXPECT_EQ(rendezvous::interface_speed_mbps("../lo", sys.root()), 0);
  EXPECT_EQ(rendezvous::interface_speed_mbps("eth9", sys.root()), 0);
}

TEST(Sysfs, RootAndRateText) {
  EXPECT_EQ(sysfs_root(std::nullopt), "/sys");
  EXPECT_EQ(sysfs_root(std::string()), "/sys");
  EXPECT_EQ(sysfs_root(std::string("/tmp/x")), "/tmp/x");
  EXPECT_EQ(rdma_class_dir("/tmp/x"), "/tmp/x/class/infiniband");
  EXPECT_EQ(parse_port_rate("2.5 Gb/sec (1X SDR)"), 2.5);
  EXPECT_EQ(parse_port_rate("400 Gb/sec (4X NDR)"), 400);
  EXPECT_EQ(parse_port_rate("Gb/sec"), std::nullopt);
  EXPECT_TRUE(rdma_error_counter("symbol_error"));
  EXPECT_TRUE(rdma_error_counter("rx_drops"));
  EXPECT_FALSE(rdma_error_counter("port_xmit_data"));
  EXPECT_TRUE(interface_error_counter("rx_errors"));
  EXPECT_FALSE(interface_error_counter("tx_bytes"));
}

}  // namespace
}  // namespace ncclsmoke::node
