// NIC_ERRORS and NIC_DOWN (results/judging/nic_rules.h): counters that moved as findings of the
// right severity, a port down named only where other hosts have it up, the host a suspect only
// for what is an error, and the counters as evidence beside the findings about the same host.
#include "results/judging/nic_rules.h"

#include <gtest/gtest.h>

#include "results/judging/node_rules.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/suspects.h"

namespace ncclsmoke::results {
namespace {

facts::RdmaPortFacts port(const std::string& device, const std::string& state,
                          std::map<std::string, std::uint64_t> moved = {}) {
  facts::RdmaPortFacts p;
  p.device = device;
  p.port = 1;
  p.state = state;
  p.phys_state = state == "ACTIVE" ? "LinkUp" : "Polling";
  p.link_layer = "InfiniBand";
  p.rate_gbps = state == "ACTIVE" ? 400 : 10;
  p.moved = std::move(moved);
  return p;
}

facts::NicFacts nics_with(std::vector<facts::RdmaPortFacts> ports,
                          std::vector<facts::NetInterfaceFacts> interfaces = {}) {
  facts::NicFacts n;
  n.read = true;
  n.root = "/sys";
  n.interval_s = 3.2;
  n.rdma_ports = std::move(ports);
  n.interfaces = std::move(interfaces);
  return n;
}

TEST(NicErrors, SeverityFollowsWhatMoved) {
  facts::NetInterfaceFacts drops;
  drops.name = "eth0";
  drops.moved = {{"rx_dropped", 4}};
  facts::NetInterfaceFacts crc;
  crc.name = "eth1";
  crc.moved = {{"rx_crc_errors", 2}, {"rx_dropped", 1}};
  auto fs = nic_error_findings(
      nics_with({port("mlx5_0", "ACTIVE", {{"symbol_error", 12}}), port("mlx5_1", "ACTIVE"),
                 port("mlx5_2", "ACTIVE", {{"link_downed", 1}, {"symbol_error", 40}})},
                {drops, crc}),
      {3, "gpu-3"});
  ASSERT_EQ(fs.size(), 4u);
  EXPECT_EQ(fs[0].code, Code::NIC_ERRORS);
  EXPECT_EQ(fs[0].severity, Severity::warning);
  EXPECT_EQ(fs[0].message,
            "RDMA port mlx5_0 port 1's error counters moved during the run's 3.2 s on rank 3 "
            "(host gpu-3): symbol_error +12");
  EXPECT_EQ(fs[0].evidence["moved"]["symbol_error"], 12);
  EXPECT_EQ(fs[1].severity, Severity::error) << "the link went down during the run";
  EXPECT_EQ(fs[2].severity, Severity::info) << "an interface that only dropped frames";
  EXPECT_EQ(fs[3].severity, Severity::warning);
  EXPECT_NE(fs[3].hint.find("eth1"), std::string::npos) << fs[3].hint;
  // Nothing moved, or nothing read: no finding.
  EXPECT_TRUE(nic_error_findings(nics_with({port("mlx5_0", "ACTIVE")}), {3, "gpu-3"}).empty());
  facts::NicFacts unread = nics_with({port("mlx5_0", "ACTIVE", {{"symbol_error", 1}})});
  unread.read = false;
  EXPECT_TRUE(nic_error_findings(unread, {3, "gpu-3"}).empty());
}

std::vector<HostPorts> hosts_with_down(int n, std::set<int> down_on) {
  std::vector<HostPorts> hs;
  for (int i = 0; i < n; ++i)
    hs.push_back({"gpu-" + std::to_string(i), "gpu-" + std::to_string(i), i * 8,
                  {port("mlx5_0", "ACTIVE"), port("mlx5_1", down_on.count(i) ? "DOWN" : "ACTIVE")}});
  return hs;
}

TEST(NicDown, NamesThePortDownWhereOtherHostsHaveItUpOnEveryShape) {
  for (int n : {2, 4, 8, 16}) {
    for (std::set<int> down : {std::set<int>{}, std::set<int>{1}, std::set<int>{0, n - 1}}) {
      auto fs = judge_nic_ports(hosts_with_down(n, down));
      // Two hosts both down (n == 2) is a port cabled nowhere.
      const std::size_t expected = down.size() < static_cast<std::size_t>(n) ? down.size() : 0;
      ASSERT_EQ(fs.size(), expected) << n << " hosts";
      if (!expected) continue;
      std::set<std::string> named;
      for (const auto& f : fs) {
        EXPECT_EQ(f.code, Code::NIC_DOWN);
        EXPECT_EQ(f.severity, Severity::error);
        ASSERT_EQ(f.hosts.size(), 1u);
        named.insert(f.hosts[0]);
        EXPECT_NE(f.message.find("mlx5_1/1 is DOWN, Polling"), std::string::npos) << f.message;
      }
      for (int d : down) EXPECT_TRUE(named.count("gpu-" + std::to_string(d))) << n;
    }
  }
  auto fs = judge_nic_ports(hosts_with_down(4, {2}));
  EXPECT_EQ(fs[0].message,
            "rank 16 (host gpu-2) has 1 RDMA port down that other nodes have up: mlx5_1/1 is "
            "DOWN, Polling (ACTIVE on gpu-0, gpu-1, gpu-3)");
}

TEST(NicDown, APortDownEverywhereOrAHostAloneNamesNoOne) {
  std::vector<HostPorts> hs = hosts_with_down(4, {0, 1, 2, 3});
  EXPECT_TRUE(judge_nic_ports(hs).empty()) << "a port cabled nowhere";
  EXPECT_TRUE(judge_nic_ports(hosts_with_down(1, {0})).empty());
  // Ports another host does not have are not compared.
  hs = hosts_with_down(3, {});
  hs[1].ports.push_back(port("mlx5_9", "DOWN"));
  EXPECT_TRUE(judge_nic_ports(hs).empty());
}

TEST(NicDown, HostPortsTakesOneViewPerHost) {
  std::vector<Verdict> views;
  for (int r = 0; r < 4; ++r) {
    Verdict v = new_verdict(r);
    v.reporting_rank = r;
    v.ranks = {{r, RankStatus::joined, "gpu-" + std::to_string(r / 2), "", 1, "", "", ""}};
    v.nics = nics_with({port("mlx5_0", r / 2 == 1 ? "DOWN" : "ACTIVE")});
    views.push_back(v);
  }
  views.push_back(new_verdict(5));  // a view that read nothing
  auto hs = host_ports(views);
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[1].host, "gpu-1");
  EXPECT_EQ(hs[1].rank, 2);
  auto fs = judge_nic_ports(hs);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].hosts, std::vector<std::string>{"gpu-1"});
}

TEST(NicFaults, SuspectsConsequencesAndEvidence) {
  Verdict v = new_verdict(0);
  v.ranks = {{0, RankStatus::joined, "gpu-0", "node-0", 1, "", "", ""},
             {1, RankStatus::joined, "gpu-1", "node-1", 2, "", "", ""},
             {2, RankStatus::joined, "gpu-2", "node-2", 3, "", "", ""}};
  v.findings = judge_nic_ports(hosts_with_down(3, {1}));
  for (auto& f : nic_error_findings(nics_with({port("mlx5_0", "ACTIVE", {{"symbol_error", 9}})}),
                                    {2, "gpu-2"}))
    v.findings.push_back(f);
  Finding timeout = make_finding(Code::TRANSPORT_TIMEOUT, "fabric timed out on rank 1", {1}, {"gpu-1"});
  Finding slow = make_finding(Code::SLOW_LINK, "the link gpu-0 -> gpu-2 is slow", {0}, {"gpu-0", "gpu-2"});
  v.findings.push_back(timeout);
  v.findings.push_back(slow);
  explain_by_node_faults(v.findings);
  attach_nic_evidence(v.findings);
  EXPECT_EQ(v.findings[2].severity, Severity::info) << v.findings[2].message;
  EXPECT_EQ(v.findings[2].message.rfind(
                "a consequence of host gpu-1's RDMA port down (NIC_DOWN): ", 0), 0u)
      << v.findings[2].message;
  EXPECT_EQ(v.findings[3].severity, slow.severity) << "a warning explains nothing away";
  ASSERT_TRUE(v.findings[3].evidence.contains("nic")) << v.findings[3].evidence.dump();
  EXPECT_EQ(v.findings[3].evidence["nic"][0]["host"], "gpu-2");
  EXPECT_EQ(v.findings[3].evidence["nic"][0]["code"], "NIC_ERRORS");
  std::set<std::string> suspects;
  for (const auto& s : suspect_hosts(v)) suspects.insert(s.node);
  EXPECT_EQ(suspects, std::set<std::string>{"node-1"}) << suspects_file_text(v);
}

}  // namespace
}  // namespace ncclsmoke::results
