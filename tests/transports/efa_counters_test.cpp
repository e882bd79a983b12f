// The sysfs hardware-counter reader against fake trees written into a temporary directory.
#include "transports/fabric/efa_counters.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ncclsmoke::transports {
namespace {

namespace fs = std::filesystem;

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("efa_counters_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void put(const std::string& dev, const std::string& port, const std::string& name,
           const std::string& text) {
    fs::path dir = root_ / dev / "ports" / port / "hw_counters";
    fs::create_directories(dir);
    std::ofstream(dir / name) << text;
  }
  fs::path root_;
};

TEST_F(FakeSysfs, DeltasPerDeviceAndPort) {
  put("rdmap0s6", "1", "tx_bytes", "1000\n");
  put("rdmap0s6", "1", "rx_bytes", "20\n");
  put("rdmap1s7", "1", "tx_bytes", "5\n");
  put("rdmap1s7", "2", "tx_pkts", "7\n");
  auto before = read_hw_counters(root_.string());
  ASSERT_EQ(before.size(), 3u);
  EXPECT_EQ(before["rdmap0s6/1"]["tx_bytes"], 1000u);
  EXPECT_EQ(before["rdmap1s7/2"]["tx_pkts"], 7u);

  put("rdmap0s6", "1", "tx_bytes", "68109456\n");
  put("rdmap0s6", "1", "rx_bytes", "20\n");
  put("rdmap1s7", "1", "tx_bytes", "5");  // no newline: still a number
  put("rdmap1s7", "2", "tx_pkts", "107\n");
  put("rdmap1s7", "2", "rx_pkts", "9\n");  // new since the first snapshot: no delta
  auto d = counter_deltas(before, read_hw_counters(root_.string()));
  EXPECT_EQ(d["rdmap0s6/1"]["tx_bytes"], 68108456u);
  EXPECT_EQ(d["rdmap0s6/1"]["rx_bytes"], 0u);
  EXPECT_EQ(d["rdmap1s7/1"]["tx_bytes"], 0u);
  EXPECT_EQ(d["rdmap1s7/2"]["tx_pkts"], 100u);
  EXPECT_FALSE(d["rdmap1s7/2"].contains("rx_pkts"));
}

TEST_F(FakeSysfs, LargeValuesAndCounterReset) {
  put("efa_0", "1", "rx_bytes", "18446744073709551000\n");  // near 2^64
  auto before = read_hw_counters(root_.string());
  EXPECT_EQ(before["efa_0/1"]["rx_bytes"], 18446744073709551000ull);
  put("efa_0", "1", "rx_bytes", "42\n");  // went backwards: device reset
  auto d = counter_deltas(before, read_hw_counters(root_.string()));
  EXPECT_EQ(d["efa_0/1"]["rx_bytes"], 42u);
}

TEST_F(FakeSysfs, NonNumericAndOddEntriesAreSkipped) {
  put("mlx5_0", "1", "tx_bytes", "12\n");
  put("mlx5_0", "1", "state", "4: ACTIVE\n");
  put("mlx5_0", "1", "empty", "");
  put("mlx5_0", "1", "negative", "-3\n");
  put("mlx5_0", "1", "overflow", "99999999999999999999999\n");
  fs::create_directories(root_ / "mlx5_0" / "ports" / "1" / "hw_counters" / "subdir");
  fs::create_directories(root_ / "mlx5_1" / "ports" / "1");  // a port without hw_counters
  std::ofstream(root_ / "stray_file") << "1\n";              // not a device directory
  auto snap = read_hw_counters(root_.string());
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap["mlx5_0/1"].size(), 1u);
  EXPECT_EQ(snap["mlx5_0/1"]["tx_bytes"], 12u);
}

TEST_F(FakeSysfs, DeviceThatDisappearsHasNoDelta) {
  put("efa_0", "1", "tx_bytes", "1\n");
  auto before = read_hw_counters(root_.string());
  fs::remove_all(root_ / "efa_0");
  auto d = counter_deltas(before, read_hw_counters(root_.string()));
  EXPECT_TRUE(d.is_object());
  EXPECT_TRUE(d.empty());
}

TEST(EfaCounters, MissingOrEmptyRootGivesEmptySnapshot) {
  EXPECT_TRUE(read_hw_counters("/nonexistent/ncclsmoke/infiniband").empty());
  EXPECT_TRUE(read_hw_counters("").empty());
  EXPECT_TRUE(read_hw_counters("/etc/hostname").empty());  // a file, not a directory
  EXPECT_TRUE(counter_deltas({}, {}).empty());
}

TEST(PortRate, ReadsTheKernelsRateText) {
  EXPECT_EQ(parse_port_rate("100 Gb/sec (4X EDR)\n"), 100.0);
  EXPECT_EQ(parse_port_rate("400 Gb/sec (4X NDR)"), 400.0);
  EXPECT_EQ(parse_port_rate("2.5 Gb/sec (1X SDR)"), 2.5);
  EXPECT_EQ(parse_port_rate("12.5 Gb/sec (1X EDR)"), 12.5);
  for (const char* bad : {"", "Gb/sec", "100", "100 Mb/sec", "-5 Gb/sec", "0 Gb/sec (1X SDR)",
                          "1e9 Gb/sec", "100Gb/sec", "9999999 Gb/sec"})
    EXPECT_FALSE(parse_port_rate(bad)) << bad;
}

TEST_F(FakeSysfs, PortRatesAndThePortThatCarriedTheBytes) {
  auto rate = [&](const std::string& dev, const std::string& text) {
    fs::create_directories(root_ / dev / "ports" / "1");
    std::ofstream(root_ / dev / "ports" / "1" / "rate") << text;
  };
  rate("rdmap0s6", "100 Gb/sec (4X EDR)\n");
  rate("rdmap1s7", "200 Gb/sec (4X HDR)\n");
  rate("broken", "fast\n");
  auto rates = read_port_rates(root_.string());
  EXPECT_EQ(rates, (std::map<std::string, double>{{"rdmap0s6/1", 100}, {"rdmap1s7/1", 200}}));
  // The port whose counters moved, though another is faster.
  auto r = run_port_rate(rates, {{"rdmap0s6/1", {{"tx_bytes", 4096u}}}, {"rdmap1s7/1", {{"tx_bytes", 0u}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->port, "rdmap0s6/1");
  EXPECT_EQ(r->gbps, 100);
  EXPECT_TRUE(r->carried);
  // None moved: the fastest present, and it did not carry the bytes.
  r = run_port_rate(rates, nlohmann::json::object());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->port, "rdmap1s7/1");
  EXPECT_FALSE(r->carried);
  EXPECT_FALSE(run_port_rate({}, nlohmann::json::object()));
}

TEST(DeviceRetransmits, SumsThePortsThatSentAndNeedsTheNetworkCounters) {
  using nlohmann::json;
  // Two ports sent; a third sent nothing (its retransmits are not this run's link).
  json d = {{"efa_0/1", {{"tx_pkts", 1000u}, {"retrans_pkts", 30u}}},
            {"efa_1/1", {{"tx_pkts", 500u}, {"retrans_pkts", 5u}}},
            {"efa_2/1", {{"tx_pkts", 0u}, {"retrans_pkts", 7u}}}};
  auto r = device_retransmits(d);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->tx_pkts, 1500);
  EXPECT_EQ(r->retrans_pkts, 35);
  // An EFA without the network counters (before Nitro v4), an IB port, nothing: unknown.
  EXPECT_FALSE(device_retransmits(json{{"efa_0/1", {{"tx_pkts", 1000u}, {"rx_drops", 2u}}}}));
  EXPECT_FALSE(device_retransmits(json{{"mlx5_0/1", {{"port_xmit_packets", 9u}}}}));
  EXPECT_FALSE(device_retransmits(json::object()));
  EXPECT_FALSE(device_retransmits(json::array()));
}

}  // namespace
}  // namespace ncclsmoke::transports
