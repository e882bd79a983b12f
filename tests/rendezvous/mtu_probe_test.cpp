// The mesh's path-MTU probe (rendezvous/mtu_probe.h) on loopback: a healthy path passes at the
// interface MTU; an echo that drops datagrams above a size (a hop with a smaller MTU that sends no
// ICMP) is a black hole whose path MTU is found exactly; no echo is "not checked", quickly; the
// deadline bounds everything.
#include "rendezvous/mtu_probe.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace ncclsmoke::rendezvous {
namespace {

// A UDP echo on 127.0.0.1 (an ephemeral port), served by a thread until destroyed.
class Echo {
 public:
  explicit Echo(int answer_up_to = 0, int rank = 1, double drop = 0) {
    fd_ = open_mtu_echo("127.0.0.1", 0);
    EXPECT_GE(fd_, 0);
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    wake_ = ::eventfd(0, EFD_CLOEXEC);
    thread_ = std::thread([this, answer_up_to, rank, drop] {
      for (int i = 0; i < 100000; ++i) {  // bounded
        pollfd p[2] = {{fd_, POLLIN, 0}, {wake_, POLLIN, 0}};
        if (::poll(p, 2, 1000) < 0 || p[1].revents) return;
        if (p[0].revents) answer_mtu_probes(fd_, rank, 1500, answer_up_to, drop);
      }
    });
  }
  ~Echo() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_, &one, sizeof one);
    thread_.join();
    ::close(fd_);
    ::close(wake_);
  }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1, wake_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

TEST(MtuProbe, AHealthyPathPassesAtTheSmallerOfTheTwoMtus) {
  Echo echo;  // says its interface MTU is 1500; loopback's own is 65536
  auto r = probe_path_mtu(0, 1, "127.0.0.1", "127.0.0.1", echo.port(), Millis{1},
                          deadline_after(Millis{3000}));
  EXPECT_EQ(r.outcome, MtuOutcome::passed) << to_string(r.outcome);
  EXPECT_GE(r.path.local_mtu, 65535);  // the loopback route's (IP_MTU), 65535 or 65536
  EXPECT_EQ(r.path.peer_mtu, 1500);
  EXPECT_EQ(r.path.probed_mtu, 1500);
  EXPECT_EQ(r.path.path_mtu, 1500);
  EXPECT_EQ(r.path.interface, "lo");
  EXPECT_LT(r.duration_s, 0.5);
}

TEST(MtuProbe, AHopThatDropsLargePacketsIsABlackHoleWithItsPathMtu) {
  Echo echo(1252);  // 1252 bytes of UDP payload = a 1280-byte IPv4 packet
  auto r = probe_path_mtu(0, 1, "127.0.0.1", "127.0.0.1", echo.port(), Millis{1},
                          deadline_after(Millis{5000}));
  EXPECT_EQ(r.outcome, MtuOutcome::black_hole) << to_string(r.outcome);
  EXPECT_EQ(r.path.probed_mtu, 1500);
  EXPECT_EQ(r.path.path_mtu, 1280);
  EXPECT_EQ(r.path.from, 0);
  EXPECT_EQ(r.path.to, 1);
  // 5 full-size tries and 3 search rounds at the 100 ms floor: about 0.8 s.
  EXPECT_LT(r.duration_s, 2.0);
}

TEST(MtuProbe, RandomLossIsNeverABlackHole) {
  // Half of all datagrams lost on the way in (the 30%-loss-each-way test host loses about as
  // many round trips): the full size gets 20 copies, the small one 8, so a lossy path is passed
  // (or, rarely, not checked), never called a black hole.
  Echo echo(0, 1, 0.5);
  int passed = 0;
  for (int i = 0; i < 20; ++i) {
    auto r = probe_path_mtu(0, 1, "127.0.0.1", "127.0.0.1", echo.port(), Millis{1},
                            deadline_after(Millis{3000}));
    EXPECT_NE(r.outcome, MtuOutcome::black_hole) << i;
    passed += r.outcome == MtuOutcome::passed;
  }
  EXPECT_GE(passed, 18);
}

TEST(MtuProbe, NoEchoIsNotCheckedAndQuick) {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);  // a port nobody answers on: bound, then closed
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  auto r = probe_path_mtu(0, 1, "127.0.0.1", "127.0.0.1", ntohs(a.sin_port), Millis{1},
                          deadline_after(Millis{3000}));
  EXPECT_EQ(r.outcome, MtuOutcome::no_answer) << to_string(r.outcome);
  EXPECT_LT(r.duration_s, 1.0);  // ICMP port unreachable ends it at once on loopback
}

TEST(MtuProbe, TheDeadlineCutsABlackHoleShortAsNotChecked) {
  Echo echo(1252);
  auto t = Clock::now();
  auto r = probe_path_mtu(0, 1, "127.0.0.1", "127.0.0.1", echo.port(), Millis{1},
                          deadline_after(Millis{250}));
  EXPECT_EQ(r.outcome, MtuOutcome::cut) << to_string(r.outcome);
  EXPECT_LT(seconds_since(t), 0.5);
}

TEST(MtuProbe, AWrongRankAnsweringIsNoAnswer) {
  Echo echo(0, 7);  // the peer we mean is rank 1; rank 7 answers at this address
  auto r = probe_path_mtu(0, 1, "127.0.0.1", "127.0.0.1", echo.port(), Millis{1},
                          deadline_after(Millis{3000}));
  EXPECT_EQ(r.outcome, MtuOutcome::no_answer) << to_string(r.outcome);
}

TEST(MtuProbe, PathsInsideOneHostAreLeftOut) {
  EXPECT_TRUE(same_host_path("10.0.0.1", "10.0.0.1"));
  EXPECT_TRUE(same_host_path("127.0.0.1", "127.0.0.1"));
  EXPECT_TRUE(same_host_path("::1", "::1"));
  EXPECT_FALSE(same_host_path("10.0.0.1", "10.0.0.2"));
  EXPECT_EQ(interface_mtu_of("127.0.0.1"), 65536);
  EXPECT_EQ(interface_mtu_of("not an address"), 0);
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
