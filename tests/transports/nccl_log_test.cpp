// The NCCL log parser against constructed logs in the documented wordings of NCCL 2.18-2.28 and
// aws-ofi-nccl (fixtures/nccl/), and the --nccl-net / --nccl-policy parsing.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "transports/nccl/nccl_log.h"
#include "transports/nccl/nccl_policy.h"

namespace fs = std::filesystem;
using namespace ncclsmoke::transports;

namespace {

fs::path fixture(const std::string& name) { return fs::path(NCCLSMOKE_NCCL_FIXTURES) / name; }

NcclObserved load(const std::string& name) {
  auto o = read_nccl_log(fixture(name));
  EXPECT_TRUE(o.missing_files.empty()) << "fixture not found: " << fixture(name);
  return o;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST(NcclLog, IbWithGdrNccl218) {
  auto o = load("ib_gdr_2.18.log");
  EXPECT_TRUE(o.found);
  EXPECT_EQ(o.network, "IB");
  EXPECT_EQ(o.networks, std::vector<std::string>{"IB"});
  EXPECT_TRUE(o.gdr);
  EXPECT_EQ(o.net_channels, 4);  // the P2P/IPC channel line is not a NET one
  EXPECT_EQ(o.gdr_channels, 4);
  EXPECT_EQ(o.net_devices, (std::vector<std::string>{"IB/0", "IB/1"}));
  EXPECT_EQ(o.nccl_version, "2.18.5+cuda12.2");
  EXPECT_EQ(o.host, "ip-10-0-0-1");
  EXPECT_TRUE(o.plugin.empty());
  ASSERT_EQ(o.plugin_lines.size(), 1u);
  EXPECT_NE(o.plugin_lines[0].find("No plugin found"), std::string::npos);
  EXPECT_TRUE(o.ofi_provider.empty());
  EXPECT_TRUE(o.warnings.empty());
}

TEST(NcclLog, TheIbDevicesAndTheRateOfThePortsTheyUsed) {
  auto o = load("ib_gdr_2.18.log");
  EXPECT_EQ(o.ib_ports, (std::map<int, std::string>{{0, "mlx5_0/1"}, {1, "mlx5_1/1"}}));
  EXPECT_EQ(o.to_json()["ib_ports"], (nlohmann::json{{"0", "mlx5_0/1"}, {"1", "mlx5_1/1"}}));
  // The channel lines use IB/0 and IB/1: the fastest of those two ports; a faster port NCCL did
  // not use does not count.
  const std::map<std::string, double> rates{{"mlx5_0/1", 200}, {"mlx5_1/1", 100}, {"mlx5_2/1", 400}};
  auto r = nccl_port_rate(o, rates);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->gbps, 200);
  EXPECT_EQ(r->port, "mlx5_0/1");
  EXPECT_TRUE(r->carried);
  // Without the "Using" line, NET/IB still carried the bytes: every port counts.
  auto unmapped = o;
  unmapped.ib_ports.clear();
  r = nccl_port_rate(unmapped, rates);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->gbps, 400);
  EXPECT_TRUE(r->carried);
  // No RDMA port with a rate on the host, or no network channel at all: nothing to compare with.
  EXPECT_FALSE(nccl_port_rate(o, {}));
  auto local = o;
  local.net_channels = 0;
  EXPECT_FALSE(nccl_port_rate(local, rates));
  // Odd "Using" tokens are skipped, the good ones kept.
  auto odd = parse_nccl_log(
      "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [x]mlx5_1:1/IB [2]:1/IB [3]mlx5_3:y/IB "
      "[4]mlx5_4:2 ; OOB eth0:10.0.0.1<0>\n");
  EXPECT_EQ(odd.ib_ports, (std::map<int, std::string>{{0, "mlx5_0/1"}, {4, "mlx5_4/2"}}));
}

TEST(NcclLog, AFallbackPastThePortsIsMeasuredAgainstThemAsNotCarried) {
  const std::map<std::string, double> efa{{"rdmap16s27/1", 100}, {"rdmap32s27/1", 100}};
  // aws-ofi-nccl on efa: the EFA ports carried the bytes (the log names no device).
  auto r = nccl_port_rate(load("efa_ofi_2.23.log"), efa);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->gbps, 100);
  EXPECT_TRUE(r->carried);
  // The plugin failed and NCCL fell back to NET/Socket on a host with EFA: the first-run silent
  // fallback, measured against the port it bypassed.
  for (const char* fallback : {"fallback_ofi_noefa_2.21.log", "fallback_noplugin_2.28.log"}) {
    auto o = load(fallback);
    ASSERT_EQ(o.network, "Socket") << fallback;
    if (o.net_channels == 0) continue;  // a log of the set-up only: nothing to place
    r = nccl_port_rate(o, efa);
    ASSERT_TRUE(r) << fallback;
    EXPECT_FALSE(r->carried) << fallback;
  }
  auto sock = load("socket_loopback_2.28.log");
  r = nccl_port_rate(sock, efa);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->carried);
  // The plugin on its tcp provider: not the device either. Another plugin: not placed.
  auto ofi_tcp = load("efa_ofi_2.23.log");
  ofi_tcp.ofi_provider = "tcp;ofi_rxm";
  r = nccl_port_rate(ofi_tcp, efa);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->carried);
  auto other = sock;
  other.network = "SomeVendorNet";
  EXPECT_FALSE(nccl_port_rate(other, efa));
}

TEST(NcclLog, SocketLoopbackNccl228Synthetic) {
  auto o = load("socket_loopback_2.28.log");
  EXPECT_TRUE(o.found);
  EXPECT_EQ(o.network, "Socket");
  EXPECT_EQ(o.networks, std::vector<std::string>{"Socket"});
  EXPECT_FALSE(o.gdr);
  EXPECT_EQ(o.net_channels, 4);
  EXPECT_EQ(o.gdr_channels, 0);
  EXPECT_EQ(o.net_devices, std::vector<std::string>{"Socket/0"});
  EXPECT_EQ(o.nccl_version, "2.28.3+cuda12.9");
  EXPECT_EQ(o.host, "gpu-node-1");
  EXPECT_EQ(o.plugin, "Socket");  // 2.28's "Initialized NET plugin Socket"
}

TEST(NcclLog, AwsOfiEfaNccl223) {
  auto o = load("efa_ofi_2.23.log");
  EXPECT_EQ(o.network, "Libfabric");
  EXPECT_EQ(o.networks, std::vector<std::string>{"Libfabric"});
  EXPECT_TRUE(o.gdr);
  EXPECT_EQ(o.net_channels, 4);
  EXPECT_EQ(o.gdr_channels, 4);
  EXPECT_EQ(o.net_devices, (std::vector<std::string>{"Libfabric/0", "Libfabric/1"}));
  EXPECT_EQ(o.ofi_provider, "efa");
  EXPECT_EQ(o.ofi_fabric, "efa-direct");
  EXPECT_EQ(o.plugin, "Libfabric");
  EXPECT_TRUE(contains(o.plugin_lines,
                       "ip-10-1-2-3:2201:2260 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.13.2"));
  EXPECT_EQ(o.nccl_version, "2.23.4+cuda12.4");
}

TEST(NcclLog, OlderAwsOfiNamesWithSpaceAndCapitalProvider) {
  auto o = load("efa_ofi_old_2.18.log");
  EXPECT_EQ(o.network, "AWS Libfabric");
  EXPECT_EQ(o.networks, std::vector<std::string>{"AWS Libfabric"});
  EXPECT_TRUE(o.gdr);
  EXPECT_EQ(o.net_channels, 3);
  EXPECT_EQ(o.net_devices, (std::vector<std::string>{"AWS Libfabric/0", "AWS Libfabric/1"}));
  EXPECT_EQ(o.ofi_provider, "efa");  // "Selected Provider is efa (found 4 nics)"
  EXPECT_TRUE(o.ofi_fabric.empty());
  EXPECT_EQ(o.plugin, "AWS Libfabric");
  EXPECT_EQ(o.plugin_lines.size(), 2u);  // the failed libnccl-net.so load is kept as evidence
}

TEST(NcclLog, PluginFailsAndNcclFallsBackToSocket) {
  auto o = load("fallback_ofi_noefa_2.21.log");
  EXPECT_EQ(o.network, "Socket");
  EXPECT_EQ(o.networks, std::vector<std::string>{"Socket"});
  EXPECT_FALSE(o.gdr);
  EXPECT_EQ(o.net_channels, 3);
  EXPECT_EQ(o.plugin, "Libfabric");  // the plugin loaded, then failed to initialise
  EXPECT_TRUE(o.ofi_provider.empty());
  ASSERT_EQ(o.warnings.size(), 2u);
  EXPECT_EQ(o.warnings[0], "NET/OFI Unable to find a protocol that worked.  Failing initialization.");
  EXPECT_EQ(o.nccl_version, "2.21.5+cuda12.4");
  bool has_using = false;
  for (const auto& l : o.lines) has_using |= l.find("Using network Socket") != std::string::npos;
  EXPECT_TRUE(has_using);
}

TEST(NcclLog, NoPluginOnLibraryPathFallsBackToSocket) {
  auto o = load("fallback_noplugin_2.28.log");
  EXPECT_EQ(o.network, "Socket");
  EXPECT_TRUE(o.plugin.empty());
  ASSERT_EQ(o.plugin_lines.size(), 1u);
  EXPECT_NE(o.plugin_lines[0].find("libnccl-net-Libfabric.so"), std::string::npos);
  EXPECT_EQ(o.nccl_version, "2.28.9+cuda13.0");
}

TEST(NcclLog, PinnedNetworkNotFoundKeepsTheWarning) {
  auto o = load("pin_missing_2.23.log");
  EXPECT_TRUE(o.found);
  EXPECT_TRUE(o.network.empty());
  EXPECT_TRUE(o.networks.empty());
  ASSERT_EQ(o.warnings.size(), 1u);
  EXPECT_EQ(o.warnings[0], "Error: network NoSuchNet not found.");
}

TEST(NcclLog, VersionOnlyLogNamesNoNetwork) {
  auto o = load("version_only_2.21.log");
  EXPECT_TRUE(o.found);
  EXPECT_TRUE(o.network.empty());
  EXPECT_EQ(o.nccl_version, "2.21.5+cuda12.4");
  EXPECT_EQ(o.host, "ip-10-0-0-2");  // the bare "NCCL version" line has no host prefix; the next has
  ASSERT_EQ(o.warnings.size(), 1u);
  EXPECT_EQ(o.warnings[0], "Cuda failure 'out of memory'");
}

TEST(NcclLog, EmptyAndMissingFiles) {
  auto e = load("empty.log");
  EXPECT_FALSE(e.found);
  EXPECT_TRUE(e.network.empty());
  EXPECT_EQ(e.files.size(), 1u);

  auto m = read_nccl_log(fixture("no_such_file.log"));
  EXPECT_FALSE(m.found);
  ASSERT_EQ(m.missing_files.size(), 1u);
  EXPECT_NE(m.missing_files[0].find("no_such_file.log"), std::string::npos);
  EXPECT_TRUE(m.files.empty());

  EXPECT_FALSE(parse_nccl_log("").found);
  EXPECT_FALSE(parse_nccl_log("plain text\nwithout nccl\n").found);
}

TEST(NcclLog, UsingNetworkWinsOverAnEarlierChannelLine) {
  auto o = parse_nccl_log(
      "h:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0\n"
      "h:1:2 [0] NCCL INFO Using network IB\n"
      "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0(1)/GDRDMA/Shared\r\n");
  EXPECT_EQ(o.network, "IB");
  EXPECT_EQ(o.networks, (std::vector<std::string>{"Socket", "IB"}));
  EXPECT_EQ(o.net_devices, (std::vector<std::string>{"Socket/0", "IB/0"}));
  EXPECT_EQ(o.gdr_channels, 1);
  EXPECT_EQ(o.net_channels, 2);
}

TEST(NcclLog, MergeRanks) {
  auto m = read_nccl_logs({fixture("efa_ofi_2.23.log"), fixture("fallback_ofi_noefa_2.21.log"),
                           fixture("no_such_file.log")});
  EXPECT_TRUE(m.found);
  EXPECT_EQ(m.network, "Libfabric");
  EXPECT_EQ(m.networks, (std::vector<std::string>{"Libfabric", "Socket"}));
  EXPECT_TRUE(m.gdr);
  EXPECT_EQ(m.net_channels, 7);
  EXPECT_EQ(m.gdr_channels, 4);
  EXPECT_EQ(m.files.size(), 2u);
  EXPECT_EQ(m.missing_files.size(), 1u);
  EXPECT_EQ(m.ofi_provider, "efa");
  EXPECT_EQ(m.warnings.size(), 2u);
}

TEST(NcclLog, WarningsAndLinesAreCapped) {
  std::string text;
  for (int i = 0; i < 500; ++i) text += "h:1:2 [0] x.cc:1 NCCL WARN w" + std::to_string(i) + "\n";
  auto o = parse_nccl_log(text);
  EXPECT_EQ(o.warnings.size(), kMaxWarnings);
  EXPECT_EQ(o.lines.size(), kMaxLines);
}

TEST(NcclLog, FindLogsByPrefix) {
  auto dir = fs::temp_directory_path() / ("nccl_log_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* n : {"nccl.host.2", "nccl.host.1", "other.txt"}) std::ofstream(dir / n) << "x\n";
  auto found = find_nccl_logs(dir, "nccl.");
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].filename(), "nccl.host.1");
  EXPECT_TRUE(find_nccl_logs(dir / "absent", "nccl.").empty());
  fs::remove_all(dir);
}

TEST(NcclLog, JsonShape) {
  auto j = load("efa_ofi_2.23.log").to_json();
  EXPECT_EQ(j["network"], "Libfabric");
  EXPECT_EQ(j["gdr"], true);
  EXPECT_EQ(j["ofi_provider"], "efa");
  EXPECT_EQ(j["found"], true);
  EXPECT_TRUE(j["log_lines"].is_array());
  auto none = NcclObserved{}.to_json();
  EXPECT_TRUE(none["network"].is_null());
  EXPECT_EQ(none["found"], false);
  EXPECT_FALSE(none.contains("log_lines"));
}

// Logs captured on a real GPU by bench/gpu/check.sh (its archive's fixture/ folder, trimmed),
// kept under fixtures/nccl/real/ as <network>_<what>.log: each must parse to that network, with
// NET channel lines and NCCL's version. Skips until the first capture is added.
TEST(NcclLog, RealLogsFromTheGpuCheck) {
  fs::path dir = fixture("real");
  std::vector<fs::path> logs;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".log") logs.push_back(e.path());
  std::sort(logs.begin(), logs.end());
  if (logs.empty()) GTEST_SKIP() << "no captured log under " << dir << " yet (bench/gpu/check.sh)";
  for (const auto& path : logs) {
    SCOPED_TRACE(path.string());
    std::string name = path.filename().string();
    std::string expected = name.substr(0, name.find('_'));
    auto o = read_nccl_log(path);
    EXPECT_TRUE(o.missing_files.empty());
    EXPECT_TRUE(o.found);
    EXPECT_EQ(o.network, expected);
    EXPECT_GT(o.net_channels, 0);
    EXPECT_EQ(o.nccl_version.rfind("2.", 0), 0u) << o.nccl_version;
    EXPECT_FALSE(o.host.empty());
  }
}

TEST(NcclPolicy, ParsePolicy) {
  NetPolicy p = NetPolicy::observe;
  EXPECT_TRUE(parse_policy("PIN", p));
  EXPECT_EQ(p, NetPolicy::pin);
  EXPECT_TRUE(parse_policy(" observe ", p));
  EXPECT_EQ(p, NetPolicy::observe);
  EXPECT_FALSE(parse_policy("force", p));
  EXPECT_EQ(p, NetPolicy::observe);
  EXPECT_EQ(policy_name(NetPolicy::pin), "pin");
}

TEST(NcclPolicy, ParseExpectation) {
  NetExpectation e;
  EXPECT_EQ(parse_expectation(" AWS Libfabric ", "pin", e), "");
  EXPECT_EQ(e.net, "AWS Libfabric");
  EXPECT_EQ(e.nccl_net_env(), std::optional<std::string>("AWS Libfabric"));
  EXPECT_EQ(e.to_json(), (nlohmann::json{{"network", "AWS Libfabric"}, {"policy", "pin"}}));

  EXPECT_EQ(parse_expectation("Libfabric", "observe", e), "");
  EXPECT_FALSE(e.nccl_net_env().has_value());  // observe never sets NCCL_NET
  EXPECT_EQ(e.to_json()["policy"], "observe");

  EXPECT_EQ(parse_expectation("", "observe", e), "");
  EXPECT_FALSE(e.has_net());
  EXPECT_TRUE(e.to_json().is_null());

  EXPECT_NE(parse_expectation("", "pin", e).find("needs --nccl-net"), std::string::npos);
  EXPECT_NE(parse_expectation("IB,Socket", "pin", e).find("not a single network"), std::string::npos);
  EXPECT_NE(parse_expectation("IB", "sometimes", e).find("not one of"), std::string::npos);
}
