// NCCL_SOCKET_IFNAME matching for the socket transport: prefix lists, '^' exclusion, '=' exact
// names, lo/docker* used only when named, and an error that lists what exists.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "transports/socket/ifname.h"
#include "transports/transport.h"

namespace ncclsmoke::transports::sock {
namespace {

NetInterface v4(const std::string& name, const std::string& addr, bool up = true) {
  return {name, AF_INET, addr, up, name == "lo"};
}
NetInterface v6(const std::string& name, const std::string& addr, bool up = true) {
  return {name, AF_INET6, addr, up, name == "lo"};
}
NetInterface bare(const std::string& name, bool up) { return {name, 0, "", up, false}; }

std::vector<NetInterface> machine() {
  return {v4("lo", "127.0.0.1"),      v6("lo", "::1"),
          v6("eth0", "fd00::2"),      v4("eth0", "192.0.2.2"),
          v6("eth0", "fe80::1"),      v4("eth1", "10.0.0.1"),
          v4("docker0", "172.17.0.1"), bare("ifb0", false),
          v4("ens5", "10.1.0.5", false)};
}

std::string pick(const std::string& rule) {
  auto c = select_interface(machine(), parse_ifname_rule(rule));
  return c.chosen.name + " " + c.chosen.address;
}

TEST(IfnameRule, ParsesPrefixExcludeAndExactForms) {
  auto r = parse_ifname_rule("eth,ens");
  EXPECT_FALSE(r.exclude);
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.names, (std::vector<std::string>{"eth", "ens"}));
  r = parse_ifname_rule("^docker,lo");
  EXPECT_TRUE(r.exclude);
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.names, (std::vector<std::string>{"docker", "lo"}));
  r = parse_ifname_rule("=eth0");
  EXPECT_FALSE(r.exclude);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.names, (std::vector<std::string>{"eth0"}));
  r = parse_ifname_rule("^=eth0, eth1 ,,");
  EXPECT_TRUE(r.exclude);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.names, (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(r.text, "^=eth0, eth1 ,,");
}

TEST(IfnameRule, PrefixAndExactMatching) {
  auto prefix = parse_ifname_rule("eth");
  EXPECT_TRUE(ifname_listed(prefix, "eth0"));
  EXPECT_TRUE(ifname_listed(prefix, "eth10"));
  EXPECT_FALSE(ifname_listed(prefix, "veth0"));
  auto exact = parse_ifname_rule("=eth0");
  EXPECT_TRUE(ifname_listed(exact, "eth0"));
  EXPECT_FALSE(ifname_listed(exact, "eth01"));
  EXPECT_FALSE(ifname_listed(exact, "eth"));
  EXPECT_TRUE(hidden_by_default("lo"));
  EXPECT_TRUE(hidden_by_default("docker0"));
  EXPECT_TRUE(hidden_by_default("lo:1"));  // NCCL's default "^docker,lo" is a prefix rule too
  EXPECT_FALSE(hidden_by_default("eth0"));
}

TEST(IfnameSelect, PrefixListPicksFirstInterfaceAndItsIpv4Address) {
  EXPECT_EQ(pick("eth"), "eth0 192.0.2.2");  // IPv6 listed first, IPv4 preferred
  auto c = select_interface(machine(), parse_ifname_rule("eth"));
  EXPECT_EQ(c.matched, (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(pick("eth1"), "eth1 10.0.0.1");
  EXPECT_EQ(pick("xx,eth1"), "eth1 10.0.0.1");
}

TEST(IfnameSelect, ExcludeSkipsListedAndNeverLandsOnLoopbackOrDocker) {
  EXPECT_EQ(pick("^eth0"), "eth1 10.0.0.1");
  EXPECT_EQ(pick("^docker,lo"), "eth0 192.0.2.2");
  try {
    pick("^eth");
    FAIL() << "lo and docker0 must not be chosen by an exclude rule";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::init_failed);
    std::string m = e.what();
    EXPECT_NE(m.find("\"^eth\""), std::string::npos) << m;
    EXPECT_NE(m.find("lo [127.0.0.1, ::1]"), std::string::npos) << m;
    EXPECT_NE(m.find("used only when a rule names them"), std::string::npos) << m;
    EXPECT_NE(m.find("ens5 [10.1.0.5] (down)"), std::string::npos) << m;
  }
}

TEST(IfnameSelect, ExactFormsMatchWholeNamesOnly) {
  EXPECT_EQ(pick("=eth1"), "eth1 10.0.0.1");
  EXPECT_EQ(pick("^=eth"), "eth0 192.0.2.2");  // "eth" excludes no real name exactly
  EXPECT_EQ(pick("^=eth0"), "eth1 10.0.0.1");
  EXPECT_THROW(pick("=eth"), TransportError);
}

TEST(IfnameSelect, LoopbackAndDockerOnlyWhenNamed) {
  EXPECT_EQ(pick("lo"), "lo 127.0.0.1");
  EXPECT_EQ(pick("=lo"), "lo 127.0.0.1");
  EXPECT_EQ(pick("docker"), "docker0 172.17.0.1");
}

TEST(IfnameSelect, DownOrAddresslessOrLinkLocalOnlyInterfacesAreSkipped) {
  EXPECT_THROW(pick("ens"), TransportError);   // ens5 is down
  EXPECT_THROW(pick("ifb"), TransportError);   // no address
  std::vector<NetInterface> ll{v6("eth0", "fe80::1"), v6("eth1", "fd00::7")};
  auto c = select_interface(ll, parse_ifname_rule("eth"));
  EXPECT_EQ(c.chosen.name, "eth1");
  EXPECT_EQ(c.chosen.family, AF_INET6);
  EXPECT_EQ(c.chosen.address, "fd00::7");
}

TEST(IfnameSelect, NoMatchNamesTheRuleAndEveryInterface) {
  try {
    pick("ib");
    FAIL() << "no ib interface exists";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::init_failed);
    std::string m = e.what();
    for (const char* s : {"\"ib\"", "eth0 [fd00::2, 192.0.2.2, fe80::1] (not in the list)",
                          "eth1 [10.0.0.1]", "docker0", "ifb0 (not in the list)"})
      EXPECT_NE(m.find(s), std::string::npos) << s << " in: " << m;
  }
}

TEST(IfnameOwner, FindsTheInterfaceOwningAnAddress) {
  auto ifs = machine();
  ASSERT_NE(interface_owning(ifs, "127.0.0.1"), nullptr);
  EXPECT_EQ(interface_owning(ifs, "127.0.0.1")->name, "lo");
  ASSERT_NE(interface_owning(ifs, "[::1]"), nullptr);
  EXPECT_EQ(interface_owning(ifs, "[::1]")->family, AF_INET6);
  ASSERT_NE(interface_owning(ifs, "::ffff:192.0.2.2"), nullptr);
  EXPECT_EQ(interface_owning(ifs, "::ffff:192.0.2.2")->name, "eth0");
  EXPECT_EQ(interface_owning(ifs, "10.9.9.9"), nullptr);
  EXPECT_EQ(interface_owning(ifs, "not-an-address"), nullptr);
}

TEST(IfnameDescribe, ListsAddressesAndState) {
  EXPECT_EQ(describe_interfaces({v4("lo", "127.0.0.1"), v6("lo", "::1"), bare("ifb0", false)}),
            "lo [127.0.0.1, ::1], ifb0 (down, no address)");
  EXPECT_EQ(describe_interfaces({}), "none");
}

TEST(IfnameLive, ThisMachineHasLoopbackAndSelectingItWorks) {
  auto ifs = list_interfaces();
  const NetInterface* lo = interface_owning(ifs, "127.0.0.1");
  ASSERT_NE(lo, nullptr) << describe_interfaces(ifs);
  EXPECT_TRUE(lo->up);
  EXPECT_TRUE(lo->loopback);
  auto c = select_interface(ifs, parse_ifname_rule("=" + lo->name));
  EXPECT_EQ(c.chosen.address, "127.0.0.1");
}

}  // namespace
}  // namespace ncclsmoke::transports::sock
