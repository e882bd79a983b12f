// The shared net layer (rendezvous/net.h, and try_connect_tcp in connect.h): address spelling,
// host:port splitting, literal parsing, the UDP route lookup, port ranges, and the
// exception-free classified connect the socket transport uses. Loopback only.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "rendezvous/connect.h"
#include "rendezvous/net.h"

namespace ncclsmoke::rendezvous {
namespace {

using namespace std::chrono_literals;

std::string formatted(const std::string& ip, uint16_t port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  EXPECT_TRUE(fill_sockaddr(ip, ss, port, &len)) << ip;
  return format_address(reinterpret_cast<sockaddr*>(&ss), len);
}

TEST(NetFormat, Ipv4AndBracketedIpv6) {
  EXPECT_EQ(formatted("10.0.0.7", 29500), "10.0.0.7:29500");
  EXPECT_EQ(formatted("::1", 5), "[::1]:5");
  EXPECT_EQ(formatted("fd00::7", 65535), "[fd00::7]:65535");
}

TEST(NetFormat, V4MappedReadsAsIpv4) {
  // What a dual-stack listener reports for an IPv4 peer.
  EXPECT_EQ(formatted("::ffff:10.1.2.3", 80), "10.1.2.3:80");
}

TEST(NetFormat, ShortLengthAndUnknownFamily) {
  sockaddr_storage ss{};
  ASSERT_TRUE(fill_sockaddr("::1", ss, 5));
  // A length too short for sockaddr_in6 is not read past.
  EXPECT_EQ(format_address(reinterpret_cast<sockaddr*>(&ss), sizeof(sockaddr_in)),
            "(unknown address family " + std::to_string(AF_INET6) + ")");
  sockaddr_storage un{};
  un.ss_family = AF_UNIX;
  EXPECT_EQ(format_address(reinterpret_cast<sockaddr*>(&un), sizeof un),
            "(unknown address family " + std::to_string(AF_UNIX) + ")");
}

TEST(NetSplit, RoundTripsWithFormatAndJoin) {
  for (const auto& [ip, port] : std::vector<std::pair<std::string, uint16_t>>{
           {"10.0.0.7", 29500}, {"127.0.0.1", 1}, {"::1", 5}, {"fd00::7", 65535}}) {
    std::string text = formatted(ip, port);
    EXPECT_EQ(text, join_host_port(ip, port));
    std::string h;
    uint16_t p = 0;
    ASSERT_TRUE(split_host_port(text, h, p)) << text;
    EXPECT_EQ(h, ip);
    EXPECT_EQ(p, port);
    EXPECT_EQ(host_part(text), ip);
  }
  // Names split as well as literals; a scoped link-local address keeps its scope.
  using Case = std::tuple<std::string, std::string, uint16_t>;
  for (const auto& [text, host, port] :
       std::vector<Case>{{"node-a.example:29500", "node-a.example", 29500},
                         {"[fe80::1%eth0]:7", "fe80::1%eth0", 7}}) {
    std::string h;
    uint16_t p = 0;
    ASSERT_TRUE(split_host_port(text, h, p)) << text;
    EXPECT_EQ(std::tie(h, p), std::tie(host, port)) << text;
  }
  EXPECT_EQ(join_host_port("node-a", 80), "node-a:80");
}

TEST(NetSplit, RejectsBadInputAndLeavesOutputs) {
  for (const char* bad : {"", "host", "host:", ":80", "host:0", "host:65536", "host:99999",
                          "host:12a", "host:+80", "host: 80", "fd00::1:80", "[fd00::1]",
                          "[fd00::1]80", "[fd00::1:80", "[]:80", "host:123456"}) {
    std::string h = "unchanged";
    uint16_t p = 7;
    EXPECT_FALSE(split_host_port(bad, h, p)) << bad;
    EXPECT_EQ(h, "unchanged") << bad;
    EXPECT_EQ(p, 7) << bad;
  }
  EXPECT_EQ(host_part("no-port"), "no-port");
}

TEST(NetParse, NumericLiteralsOnly) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  ASSERT_TRUE(fill_sockaddr("127.0.0.1", ss, 9, &len));
  EXPECT_EQ(ss.ss_family, AF_INET);
  EXPECT_EQ(len, sizeof(sockaddr_in));
  EXPECT_EQ(ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port), 9);
  ASSERT_TRUE(fill_sockaddr("::1", ss, 0, &len));
  EXPECT_EQ(ss.ss_family, AF_INET6);
  EXPECT_EQ(len, sizeof(sockaddr_in6));
  for (const char* bad : {"", "localhost", "[::1]", "1.2.3.4:5", "300.1.1.1"}) {
    EXPECT_FALSE(fill_sockaddr(bad, ss)) << bad;
    EXPECT_EQ(ss.ss_family, 0) << bad;
    EXPECT_FALSE(is_numeric_address(bad)) << bad;
  }
  EXPECT_TRUE(is_numeric_address("10.0.0.7"));
  EXPECT_TRUE(is_numeric_address("fd00::7"));
}

TEST(NetInterface, LoopbackOwnsItsAddress) {
  sockaddr_storage ss{};
  ASSERT_TRUE(fill_sockaddr("127.0.0.1", ss));
  EXPECT_EQ(interface_of(reinterpret_cast<sockaddr*>(&ss)), "lo");
  ASSERT_TRUE(fill_sockaddr("::ffff:127.0.0.1", ss));
  EXPECT_EQ(interface_of(reinterpret_cast<sockaddr*>(&ss)), "lo");
  ASSERT_TRUE(fill_sockaddr("192.0.2.77", ss));  // TEST-NET-1: on no interface here
  EXPECT_EQ(interface_of(reinterpret_cast<sockaddr*>(&ss)), "");
}

TEST(NetRoute, LoopbackRoutesFromLoopback) {
  EXPECT_EQ(route_source_address("127.0.0.1", 29500), "127.0.0.1");
  EXPECT_EQ(route_source_address("not a host name!", 1), "");
}

// The one port grammar: plain digits 1..65535, nothing around them.
TEST(NetPort, PlainDigitsFromOneTo65535) {
  EXPECT_EQ(parse_port("29500"), uint16_t{29500});
  EXPECT_EQ(parse_port("1"), uint16_t{1});
  EXPECT_EQ(parse_port("65535"), uint16_t{65535});
  EXPECT_EQ(parse_port("00080"), uint16_t{80});  // five digits, leading zeros: still the port
  for (const char* bad : {"", "0", "00000", "65536", "99999", "100000", " 1", "1 ", "+1", "-1",
                          "0x50", "1e3", "tcp://1.2.3.4:29500", "1.2.3.4:29500", "29500/"})
    EXPECT_EQ(parse_port(bad), std::nullopt) << bad;
}

TEST(NetPortRange, SinglePortsAndOrderedRanges) {
  struct Case {
    const char* text;
    uint16_t lo, hi;
  };
  for (const Case& c : {Case{"29500", 29500, 29500}, Case{"29500-29510", 29500, 29510},
                        Case{"1-65535", 1, 65535}, Case{"5-5", 5, 5}}) {
    uint16_t lo = 9, hi = 9;
    EXPECT_EQ(parse_port_range(c.text, lo, hi), "") << c.text;
    EXPECT_EQ(lo, c.lo) << c.text;
    EXPECT_EQ(hi, c.hi) << c.text;
  }
}

TEST(NetPortRange, RefusalsQuoteTheTextAndTheGrammar) {
  for (const char* bad : {"", "0", "65536", "0-10", "-", "a-b", "1-", "-5", "1-x", "70000-70001",
                          "1-65536", "1--2", " 1-2", "1-2 ", "1-2-3", "abc",
                          "tcp://1.2.3.4:29500"}) {
    uint16_t lo = 9, hi = 9;
    std::string why;
    EXPECT_NO_THROW(why = parse_port_range(bad, lo, hi)) << bad;
    EXPECT_NE(why.find(fmt::format("'{}' is not a port range", bad)), std::string::npos)
        << bad << ": " << why;
    EXPECT_NE(why.find("1 <= A <= B <= 65535"), std::string::npos) << bad << ": " << why;
    EXPECT_EQ(lo, 0) << bad;
    EXPECT_EQ(hi, 0) << bad;
  }
  uint16_t lo = 9, hi = 9;
  EXPECT_EQ(parse_port_range("5-3", lo, hi),
            "'5-3' is reversed (accepted: a port N or a range A-B with 1 <= A <= B <= 65535, "
            "e.g. 30000-30100)");
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 0);
}

// split_host_port takes its port through the same grammar.
TEST(NetPort, HostPortUsesTheSamePortGrammar) {
  std::string h;
  uint16_t p = 0;
  EXPECT_TRUE(split_host_port("a:29500", h, p));
  EXPECT_EQ(p, 29500);
  for (const char* bad : {"a:0", "a:65536", "a: 1", "a:+1", "a:"})
    EXPECT_FALSE(split_host_port(bad, h, p)) << bad;
}

// The exception-free face of the classified connect: same class and sentence as connect_tcp.
TEST(NetConnect, RefusedIsClassifiedWithoutThrowing) {
  // A bound, never-listening socket: connects to its port are refused, and no other process can
  // take the port meanwhile.
  int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(holder, 0);
  sockaddr_storage ss{};
  socklen_t len = 0;
  ASSERT_TRUE(fill_sockaddr("127.0.0.1", ss, 0, &len));
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&ss), len), 0);
  len = sizeof ss;
  ASSERT_EQ(::getsockname(holder, reinterpret_cast<sockaddr*>(&ss), &len), 0);
  uint16_t port = ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);

  ConnectOutcome out = try_connect_tcp("127.0.0.1", port, deadline_after(300ms));
  EXPECT_FALSE(out.ok());
  EXPECT_EQ(out.fd, -1);
  EXPECT_EQ(out.error_class, ErrorClass::refused);
  EXPECT_NE(out.error.find(join_host_port("127.0.0.1", port)), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("connection refused"), std::string::npos) << out.error;
  EXPECT_FALSE(out.report.attempts.empty());
  try {
    connect_tcp("127.0.0.1", port, deadline_after(100ms));
    ADD_FAILURE() << "connect_tcp to a refusing port returned";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::refused);
  }

  ASSERT_EQ(::listen(holder, 4), 0);
  ConnectOutcome ok = try_connect_tcp("127.0.0.1", port, deadline_after(2s));
  ASSERT_TRUE(ok.ok()) << ok.error;
  EXPECT_EQ(ok.report.peer_address, join_host_port("127.0.0.1", port));
  EXPECT_EQ(host_part(ok.report.local_address), "127.0.0.1");
  EXPECT_EQ(ok.report.local_interface, "lo");
  EXPECT_TRUE(ok.error.empty());
  ::close(ok.fd);
  ::close(holder);
}

TEST(NetConnect, ExpiredDeadlineIsTimedOut) {
  ConnectOutcome out = try_connect_tcp("127.0.0.1", 9, Clock::now() - 1s);
  EXPECT_FALSE(out.ok());
  EXPECT_EQ(out.error_class, ErrorClass::timed_out);
  EXPECT_NE(out.error.find("deadline had already passed"), std::string::npos) << out.error;
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
