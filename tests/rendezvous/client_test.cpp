// Connect diagnostics (connect_tcp) and TcpStore failure behaviour against real sockets: refused,
// DNS, a SYN dropped by iptables, no route, a server that never answers, a server that hangs up.
// The DROP / no-route / dual-stack cases run in a forked child inside its own network (and mount)
// namespace, so nothing outside loopback or the host's real /etc/hosts is touched; they are
// skipped where namespaces or iptables are unavailable.
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "rendezvous/connect.h"
#include "rendezvous/store_util.h"
#include "rendezvous/tcp_client.h"
#include "rendezvous/tcp_server.h"
#include "tests/wait_until.h"

namespace ncclsmoke::rendezvous {
namespace {

using namespace std::chrono_literals;

// A TCP socket bound to a loopback address and port 0. Until listen() is called, connects to it
// are refused, and the port stays ours (no race with other processes picking it).
class BoundSocket {
 public:
  explicit BoundSocket(int family = AF_INET, uint16_t port = 0) {
    fd_ = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage ss{};
    socklen_t len;
    if (family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(&ss);
      in->sin_family = AF_INET;
      in->sin_port = htons(port);
      in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      len = sizeof(sockaddr_in);
    } else {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons(port);
      in6->sin6_addr = in6addr_loopback;
      int v6only = 1;
      ::setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
      len = sizeof(sockaddr_in6);
    }
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
    socklen_t l = sizeof ss;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &l);
    port_ = family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                              : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  }
  ~BoundSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  bool listen() { return ::listen(fd_, 16) == 0; }
  int fd() const { return fd_; }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Runs `body` in a forked child after unshare(flags). The child's result travels back as text:
// "" means pass, "SKIP: ..." means the environment can't do it, anything else is a failure.
std::string in_namespace(int flags, const std::function<std::string()>& body) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::close(pipefd[0]);
    std::string result;
    if (::unshare(flags) != 0) {
      result = std::string("SKIP: unshare: ") + std::strerror(errno);
    } else {
      try {
        result = body();
      } catch (const std::exception& e) {
        result = std::string("exception: ") + e.what();
      }
    }
    (void)!::write(pipefd[1], result.data(), result.size());
    ::_exit(0);
  }
  ::close(pipefd[1]);
  std::string out;
  char buf[4096];
  int fl = ::fcntl(pipefd[0], F_GETFL);
  ::fcntl(pipefd[0], F_SETFL, fl | O_NONBLOCK);
  bool child_done = false;
  ncclsmoke::testing::wait_until(
      [&] {  // drains what the child wrote; done at EOF
        ssize_t n;
        while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) out.append(buf, n);
        child_done = n == 0;
        return child_done;
      },
      60s);
  ::close(pipefd[0]);
  if (!child_done) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!child_done) return "child did not finish within 60s";
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child crashed: " + out;
  return out;
}

bool bring_loopback_up() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool ok = ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
  ifr.ifr_flags |= IFF_UP;
  ok = ok && ::ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
  ::close(s);
  return ok;
}

#define CHILD_EXPECT(cond, text) \
  do {                           \
    if (!(cond)) return std::string(text);       \
  } while (0)

void expect_child(const std::string& result) {
  if (result.rfind("SKIP:", 0) == 0) GTEST_SKIP() << result;
  EXPECT_EQ(result, "");
}

// ---- pure functions ----

TEST(ClassifyErrno, MapsEachErrnoToItsClass) {
  EXPECT_EQ(classify_errno(ECONNREFUSED), ErrorClass::refused);
  EXPECT_EQ(classify_errno(ETIMEDOUT), ErrorClass::timed_out);
  EXPECT_EQ(classify_errno(EHOSTUNREACH), ErrorClass::unreachable);
  EXPECT_EQ(classify_errno(ENETUNREACH), ErrorClass::unreachable);
  EXPECT_EQ(classify_errno(EADDRNOTAVAIL), ErrorClass::unreachable);
  EXPECT_EQ(classify_errno(ECONNRESET), ErrorClass::reset);
  EXPECT_EQ(classify_errno(EPIPE), ErrorClass::reset);
  EXPECT_EQ(classify_errno(ECONNABORTED), ErrorClass::reset);
  EXPECT_EQ(classify_errno(EACCES), ErrorClass::other);
  EXPECT_EQ(classify_errno(0), ErrorClass::other);
}

TEST(BackoffDelay, GrowsExponentiallyWithoutJitter) {
  Backoff b{100ms, 2.0, 0.0, 10000ms};
  EXPECT_EQ(backoff_delay(b, 0, 0.5, 1h), 100ms);
  EXPECT_EQ(backoff_delay(b, 1, 0.5, 1h), 200ms);
  EXPECT_EQ(backoff_delay(b, 3, 0.5, 1h), 800ms);
}

TEST(BackoffDelay, JitterStaysWithinItsBand) {
  Backoff b{1000ms, 1.5, 0.5, 60000ms};
  for (double u : {0.0, 0.1, 0.5, 0.9, 0.999}) {
    Millis d = backoff_delay(b, 0, u, 1h);
    EXPECT_GE(d, 500ms) << u;
    EXPECT_LE(d, 1500ms) << u;
  }
  EXPECT_LT(backoff_delay(b, 0, 0.0, 1h), backoff_delay(b, 0, 0.99, 1h));
}

TEST(BackoffDelay, NeverExceedsCapOrRemainingTime) {
  Backoff b{100ms, 1.5, 0.5, 2000ms};
  for (int round = 0; round < 200; ++round)
    for (double u : {0.0, 0.5, 0.999}) {
      EXPECT_LE(backoff_delay(b, round, u, 1h), 2000ms) << round;
      EXPECT_LE(backoff_delay(b, round, u, 300ms), 300ms) << round;
      EXPECT_GE(backoff_delay(b, round, u, 1h), 0ms);
    }
  EXPECT_EQ(backoff_delay(b, 50, 0.999, 0ms), 0ms);
  // The cap holds even with jitter at the top of its band.
  EXPECT_EQ(backoff_delay(b, 100, 0.999, 1h), 2000ms);
}

TEST(FormatAddress, WritesIpv4AndBracketedIpv6) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(29500);
  ::inet_pton(AF_INET, "10.0.0.7", &in.sin_addr);
  EXPECT_EQ(format_address(reinterpret_cast<sockaddr*>(&in), sizeof in), "10.0.0.7:29500");
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(29500);
  ::inet_pton(AF_INET6, "fd00::7", &in6.sin6_addr);
  EXPECT_EQ(format_address(reinterpret_cast<sockaddr*>(&in6), sizeof in6), "[fd00::7]:29500");
}

// ---- connect_tcp on loopback ----

TEST(Connect, ClosedPortIsRefusedWithinTheDeadline) {
  BoundSocket closed;  // bound, never listening: the kernel answers SYN with RST
  ASSERT_TRUE(closed.ok());
  auto start = Clock::now();
  try {
    connect_tcp("127.0.0.1", closed.port(), deadline_after(800ms), Backoff{50ms, 1.5, 0.5, 200ms});
    FAIL() << "connected to a port nobody listens on";
  } catch (const StoreError& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.error_class(), ErrorClass::refused) << msg;
    EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(closed.port()))) << msg;
    EXPECT_TRUE(contains(msg, "connection refused")) << msg;
    EXPECT_TRUE(contains(msg, "times)")) << "retries should be counted: " << msg;
  }
  auto waited = Clock::now() - start;
  EXPECT_GE(waited, 550ms) << "should keep retrying until close to the deadline";
  EXPECT_LT(waited, 800ms + 1000ms);
}

TEST(Connect, UnresolvableNameIsDnsAfterRetries) {
  auto start = Clock::now();
  try {
    connect_tcp("no-such-host.invalid", 29500, deadline_after(600ms),
                Backoff{50ms, 1.5, 0.5, 200ms});
    FAIL() << "resolved a .invalid name";
  } catch (const StoreError& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.error_class(), ErrorClass::dns) << msg;
    EXPECT_TRUE(contains(msg, "no-such-host.invalid:29500")) << msg;
    EXPECT_TRUE(contains(msg, "did not resolve")) << msg;
    EXPECT_TRUE(contains(msg, " lookups")) << "the lookup should have been retried: " << msg;
  }
  EXPECT_LT(Clock::now() - start, 600ms + 1000ms);
}

TEST(Connect, ExpiredDeadlineFailsAtOnce) {
  BoundSocket closed;
  ASSERT_TRUE(closed.ok());
  auto start = Clock::now();
  EXPECT_THROW(connect_tcp("127.0.0.1", closed.port(), Clock::now() - 1ms), StoreError);
  EXPECT_LT(Clock::now() - start, 500ms);
}

TEST(Connect, ReportNamesPeerLocalAddressAndInterface) {
  BoundSocket server;
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(server.listen());
  auto start = Clock::now();
  Connected c = connect_tcp("127.0.0.1", server.port(), deadline_after(5s));
  ASSERT_GE(c.fd, 0);
  EXPECT_EQ(c.report.peer_address, "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(c.report.local_address.rfind("127.0.0.1:", 0), 0u) << c.report.local_address;
  EXPECT_EQ(c.report.local_interface, "lo");
  EXPECT_EQ(c.report.host, "127.0.0.1");
  EXPECT_EQ(c.report.port, server.port());
  EXPECT_EQ(c.report.rounds, 1);
  EXPECT_TRUE(c.report.attempts.empty());
  EXPECT_LE(c.report.elapsed_s, std::chrono::duration<double>(Clock::now() - start).count());
  // The contract: blocking, TCP_NODELAY.
  EXPECT_EQ(::fcntl(c.fd, F_GETFL) & O_NONBLOCK, 0);
  int nodelay = 0;
  socklen_t len = sizeof nodelay;
  ::getsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len);
  EXPECT_NE(nodelay, 0);
  ::close(c.fd);
}

TEST(Connect, RetriesUntilTheServerStartsListening) {
  BoundSocket server;  // refuses until listen()
  ASSERT_TRUE(server.ok());
  std::thread later([&] {
    ncclsmoke::testing::pause_for(300ms);  // the late server is the test
    server.listen();
  });
  Connected c;
  EXPECT_NO_THROW(c = connect_tcp("127.0.0.1", server.port(), deadline_after(10s),
                                  Backoff{50ms, 1.5, 0.5, 200ms}));
  later.join();
  ASSERT_GE(c.fd, 0);
  EXPECT_GE(c.report.rounds, 2);
  ASSERT_FALSE(c.report.attempts.empty());
  EXPECT_EQ(c.report.attempts.front().error_class, ErrorClass::refused);
  EXPECT_EQ(c.report.attempts.front().address, "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_LE(c.report.attempts.size(), 8u) << "the attempt list must stay bounded";
  ::close(c.fd);
}

// A SYN dropped by iptables (a NetworkPolicy / security-group DROP) must end at the deadline as
// timed_out, not block for the kernel's ~2 minutes of SYN retries.
TEST(Connect, DroppedSynTimesOutAtTheDeadline) {
  expect_child(in_namespace(CLONE_NEWNET, []() -> std::string {
    if (!bring_loopback_up()) return "SKIP: cannot bring lo up in a new network namespace";
    BoundSocket server;
    CHILD_EXPECT(server.ok() && server.listen(), "cannot listen in the namespace");
    std::string rule = "iptables -A INPUT -p tcp --dport " + std::to_string(server.port()) +
                       " -j DROP >/dev/null 2>&1";
    if (std::system(rule.c_str()) != 0) return "SKIP: iptables is not usable here";
    auto start = Clock::now();
    try {
      connect_tcp("127.0.0.1", server.port(), deadline_after(800ms));
      return "connected through a DROP rule";
    } catch (const StoreError& e) {
      double waited = seconds_since(start);
      std::string msg = e.what();
      CHILD_EXPECT(e.error_class() == ErrorClass::timed_out, "class " +
                                                                 std::string(to_string(e.error_class())) +
                                                                 ": " + msg);
      CHILD_EXPECT(contains(msg, "no answer to SYN"), "message: " + msg);
      CHILD_EXPECT(contains(msg, "127.0.0.1:" + std::to_string(server.port())), "message: " + msg);
      CHILD_EXPECT(waited >= 0.7 && waited < 2.8, "waited " + std::to_string(waited) + "s");
    }
    return "";
  }));
}

TEST(Connect, NoRouteIsUnreachable) {
  expect_child(in_namespace(CLONE_NEWNET, []() -> std::string {
    // A fresh network namespace has no routes at all: 10.255.0.1 cannot be reached.
    try {
      connect_tcp("10.255.0.1", 29500, deadline_after(500ms), Backoff{50ms, 1.5, 0.5, 100ms});
      return "connected without a route";
    } catch (const StoreError& e) {
      std::string msg = e.what();
      CHILD_EXPECT(e.error_class() == ErrorClass::unreachable, "class " +
                                                                   std::string(to_string(e.error_class())) +
                                                                   ": " + msg);
      CHILD_EXPECT(contains(msg, "10.255.0.1:29500"), "message: " + msg);
    }
    return "";
  }));
}

// A name with an IPv6 and an IPv4 address where only one family listens still connects, and the
// report records the failed family. "localhost" has only 127.0.0.1 on some hosts, so the child
// gets its own /etc/hosts (private mount namespace) with a dual-stack name.
TEST(Connect, TriesEveryAddressOfADualStackName) {
  expect_child(in_namespace(CLONE_NEWNS, []() -> std::string {
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      return std::string("SKIP: cannot make mounts private: ") + std::strerror(errno);
    char path[] = "/tmp/ncclsmoke-hosts-XXXXXX";
    int tmp = ::mkstemp(path);
    if (tmp < 0) return "SKIP: mkstemp";
    std::string hosts = "::1 ncclsmoke-dual\n127.0.0.1 ncclsmoke-dual\n";
    (void)!::write(tmp, hosts.data(), hosts.size());
    ::close(tmp);
    bool mounted = ::mount(path, "/etc/hosts", nullptr, MS_BIND, nullptr) == 0;
    ::unlink(path);
    if (!mounted) return std::string("SKIP: bind-mount /etc/hosts: ") + std::strerror(errno);

    // Which family does the resolver list first? Make that one refuse.
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (::getaddrinfo("ncclsmoke-dual", "1", &hints, &res) != 0) return "SKIP: name not resolved";
    std::vector<int> families;
    for (auto* ai = res; ai; ai = ai->ai_next) families.push_back(ai->ai_family);
    ::freeaddrinfo(res);
    if (families.size() < 2 || families.front() == families.back())
      return "SKIP: the resolver did not return both families";
    int first = families.front(), second = families.back();
    BoundSocket listener(second);
    if (!listener.ok()) return "SKIP: cannot bind the second family";
    BoundSocket refuser(first, listener.port());  // same port, other family, not listening
    if (!refuser.ok()) return "SKIP: cannot bind the first family on the same port";
    CHILD_EXPECT(listener.listen(), "listen failed");

    Connected c = connect_tcp("ncclsmoke-dual", listener.port(), deadline_after(5s));
    ::close(c.fd);
    std::string port = std::to_string(listener.port());
    std::string want_peer = (second == AF_INET ? "127.0.0.1:" : "[::1]:") + port;
    std::string want_failed = (first == AF_INET ? "127.0.0.1:" : "[::1]:") + port;
    CHILD_EXPECT(c.report.peer_address == want_peer, "peer " + c.report.peer_address);
    CHILD_EXPECT(!c.report.attempts.empty(), "no failed attempt recorded");
    CHILD_EXPECT(c.report.attempts.front().address == want_failed,
                 "failed attempt on " + c.report.attempts.front().address);
    CHILD_EXPECT(c.report.attempts.front().error_class == ErrorClass::refused,
                 "failed attempt class " +
                     std::string(to_string(c.report.attempts.front().error_class)));
    CHILD_EXPECT(c.report.local_interface == "lo", "interface " + c.report.local_interface);
    CHILD_EXPECT(c.report.rounds == 1, "rounds " + std::to_string(c.report.rounds));
    return "";
  }));
}

// ---- TcpStore against servers that misbehave ----

TcpStoreOptions options_for(uint16_t port, wire::Dialect d, Millis op_timeout) {
  TcpStoreOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.dialect = d;
  o.op_timeout = op_timeout;
  o.backoff = Backoff{50ms, 1.5, 0.5, 200ms};
  return o;
}

TEST(TcpStoreClient, ModernHandshakeWithASilentServerIsStalledNotDropped) {
  BoundSocket server;  // listens (the kernel completes the handshake) but never reads
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(server.listen());
  auto start = Clock::now();
  try {
    TcpStore::connect(options_for(server.port(), wire::Dialect::modern, 500ms),
                      deadline_after(5s));
    FAIL() << "handshake succeeded against a silent server";
  } catch (const StoreError& e) {
    std::string msg = e.what();
    // Accepted but never answered: stalled, not timed_out (a dropped SYN).
    EXPECT_EQ(e.error_class(), ErrorClass::stalled) << msg;
    EXPECT_TRUE(contains(msg, "accepts the connection but does not answer")) << msg;
    EXPECT_TRUE(contains(msg, "VALIDATE/PING")) << msg;
    EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(server.port()))) << msg;
    EXPECT_TRUE(contains(msg, "legacy dialect")) << "should hint at a dialect mismatch: " << msg;
  }
  EXPECT_LT(Clock::now() - start, 3s);
}

TEST(TcpStoreClient, OpTimeoutNamesOpKeyPeerAndClosesTheConnection) {
  BoundSocket server;
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(server.listen());
  auto store = TcpStore::connect(options_for(server.port(), wire::Dialect::legacy, 300ms),
                                 deadline_after(5s));
  auto start = Clock::now();
  try {
    store->add("counter", 1);
    FAIL() << "ADD got an answer from a silent server";
  } catch (const StoreError& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.error_class(), ErrorClass::timed_out) << msg;
    EXPECT_TRUE(contains(msg, "ADD")) << msg;
    EXPECT_TRUE(contains(msg, "'/counter'")) << msg;
    EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(server.port()))) << msg;
    EXPECT_TRUE(contains(msg, "timed out after")) << msg;
  }
  EXPECT_GE(Clock::now() - start, 250ms);
  EXPECT_LT(Clock::now() - start, 2s);
  // The next op reconnects (the listener still accepts) and is bounded the same way.
  try {
    store->num_keys();
    FAIL() << "GETNUMKEYS got an answer from a silent server";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::timed_out) << e.what();
  }
}

TEST(TcpStoreClient, ServerHangingUpIsResetNamingTheOp) {
  BoundSocket server;
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(server.listen());
  std::atomic<bool> stop{false};
  std::thread acceptor([&] {
    // Accept, read whatever comes, hang up.
    while (!stop) {
      pollfd p{server.fd(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept(server.fd(), nullptr, nullptr);
      if (c < 0) continue;
      pollfd q{c, POLLIN, 0};
      if (::poll(&q, 1, 2000) > 0) {
        char buf[256];
        (void)!::read(c, buf, sizeof buf);
      }
      ::close(c);
    }
  });
  auto store = TcpStore::connect(options_for(server.port(), wire::Dialect::legacy, 2000ms),
                                 deadline_after(5s));
  try {
    store->add("k", 1);
    ADD_FAILURE() << "ADD succeeded on a server that hangs up";
  } catch (const StoreError& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.error_class(), ErrorClass::reset) << msg;
    EXPECT_TRUE(contains(msg, "closed the connection during ADD on key '/k'")) << msg;
  }
  stop = true;
  acceptor.join();
}

TEST(TcpStoreClient, ConnectFailureIsClassified) {
  BoundSocket closed;
  ASSERT_TRUE(closed.ok());
  try {
    TcpStore::connect(options_for(closed.port(), wire::Dialect::modern, 500ms),
                      deadline_after(400ms));
    FAIL() << "connected to a closed port";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::refused) << e.what();
  }
}

TEST(TcpStoreClient, ModernOnlyOpsAreInvalidInLegacy) {
  BoundSocket server;
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(server.listen());
  auto store = TcpStore::connect(options_for(server.port(), wire::Dialect::legacy, 300ms),
                                 deadline_after(5s));
  auto expect_invalid = [](const std::function<void()>& f) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.error_class(), ErrorClass::invalid) << e.what();
      EXPECT_TRUE(contains(e.what(), "modern dialect")) << e.what();
    }
  };
  expect_invalid([&] { store->ping(1); });
  expect_invalid([&] { store->list(); });
  expect_invalid([&] { store->queue_len("q"); });
  expect_invalid([&] { store->queue_push("q", "v"); });
}


// ---- TcpStore against our server: what the contract suite does not pin down ----

class WithServer : public ::testing::TestWithParam<wire::Dialect> {
 protected:
  void SetUp() override {
    TcpStoreServerOptions opt;
    opt.host = "127.0.0.1";
    opt.log = [](const std::string&) {};
    server_ = TcpStoreServer::start(opt);
  }
  void TearDown() override { server_->stop(); }
  std::unique_ptr<TcpStore> client(const std::string& prefix = "/") {
    auto o = options_for(server_->port(), GetParam(), 5000ms);
    o.key_prefix = prefix;
    return TcpStore::connect(o, deadline_after(5s));
  }
  std::unique_ptr<TcpStoreServer> server_;
};

// get_present waits for late keys by looking, so a key that never comes does not cost the
// connection: a blocking MULTI_GET cut short by the deadline did, and the reconnect to a busy
// store could wait out its whole handshake timeout.
TEST_P(WithServer, GetPresentWaitsForLateKeysWithoutReconnecting) {
  auto store = client();
  auto writer = client();
  store->set("a", "1");
  std::thread late([&] {
    std::this_thread::sleep_for(150ms);
    writer->set("b", "2");
  });
  const auto start = Clock::now();
  std::vector<bool> present;
  auto values = get_present(*store, {"a", "b", "c"}, deadline_after(600ms), present);
  const double waited = seconds_since(start);
  late.join();
  EXPECT_EQ(values, (std::vector<std::string>{"1", "2", ""}));
  EXPECT_EQ(present, (std::vector<bool>{true, true, false}));
  EXPECT_GE(waited, 0.59);  // "c" never came: it looked until the deadline
  EXPECT_LT(waited, 3.0);
  EXPECT_EQ(store->get("a", deadline_after(1s)), "1");  // the same connection still serves
  EXPECT_EQ(server_->stats().accepted, 2u) << "get_present reconnected";
  // Every key there: answered without waiting.
  const auto again = Clock::now();
  values = get_present(*store, {"a", "b"}, deadline_after(5s), present);
  EXPECT_EQ(values, (std::vector<std::string>{"1", "2"}));
  EXPECT_LT(seconds_since(again), 1.0);
}

TEST_P(WithServer, WaitTimeoutNamesTheMissingKeysAndTimeWaited) {
  auto store = client();
  store->set("here", "1");
  auto start = Clock::now();
  try {
    store->wait({"here", "never"}, deadline_after(300ms));
    FAIL() << "wait returned without the key";
  } catch (const StoreError& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.error_class(), ErrorClass::timed_out) << msg;
    EXPECT_TRUE(contains(msg, "still missing: '/never'")) << msg;
    EXPECT_FALSE(contains(msg, "'/here'")) << "a present key is not missing: " << msg;
    EXPECT_TRUE(contains(msg, "timed out after 0.")) << msg;
    EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(server_->port()))) << msg;
  }
  EXPECT_LT(Clock::now() - start, 2s) << "a timed-out wait must return near its deadline";
  EXPECT_EQ(store->get("here", deadline_after(2s)), "1");
}

TEST_P(WithServer, GetOfAMissingKeyTimesOutAsGet) {
  auto store = client();
  try {
    store->get("absent", deadline_after(200ms));
    FAIL() << "get returned a missing key";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::timed_out) << e.what();
    EXPECT_TRUE(contains(e.what(), "GET timed out")) << e.what();
  }
}

TEST_P(WithServer, KeysArePrefixedExceptTheWorkerCounter) {
  auto store = client();
  auto raw = client("");  // sees the wire keys
  store->set("k", "v");
  // SET has no reply: a round trip on the same connection makes the server have applied it
  // before another connection looks.
  EXPECT_EQ(store->get("k", deadline_after(2s)), "v");
  EXPECT_TRUE(raw->check({"/k"}));
  EXPECT_FALSE(raw->check({"k"}));
  EXPECT_EQ(store->join_workers(1, deadline_after(2s)), 1);
  EXPECT_EQ(raw->get("init/", deadline_after(2s)), "1");
  EXPECT_FALSE(raw->check({"/init/"}));
}

TEST_P(WithServer, JoinWorkersWaitsForWorldSizeAndCountsEachClientOnce) {
  auto a = client(), b = client();
  EXPECT_EQ(a->join_workers(1, deadline_after(2s)), 1);
  EXPECT_EQ(a->join_workers(1, deadline_after(2s)), 1) << "a second join must not count again";
  try {
    a->join_workers(2, deadline_after(200ms));
    FAIL() << "joined without the second worker";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::timed_out) << e.what();
    EXPECT_TRUE(contains(e.what(), "1/2 workers joined")) << e.what();
  }
  int64_t seen_a = 0;
  std::thread waiter([&] { seen_a = a->join_workers(2, deadline_after(10s)); });
  ncclsmoke::testing::pause_for(100ms);  // b joins late on purpose: a blocks in its join first
  EXPECT_EQ(b->join_workers(2, deadline_after(10s)), 2);
  waiter.join();
  EXPECT_EQ(seen_a, 2);
}

TEST_P(WithServer, OneClientIsSafeToShareAcrossThreads) {
  auto store = client();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) store->add("shared", 1);
    });
  // A wait holds the connection (one op at a time, like torch's activeOpLock_), so it runs on
  // a key that exists: its reply must not be confused with the ADD replies around it.
  store->set("present", "1");
  std::thread waiter([&] {
    for (int i = 0; i < 20; ++i) store->wait({"present"}, deadline_after(5s));
  });
  for (auto& t : threads) t.join();
  waiter.join();
  EXPECT_EQ(store->add("shared", 0), 200);
}

TEST_P(WithServer, ConnectReportAndPingInModern) {
  auto store = client();
  EXPECT_EQ(store->connect_report().peer_address, "127.0.0.1:" + std::to_string(server_->port()));
  EXPECT_EQ(store->connect_report().local_interface, "lo");
  if (GetParam() == wire::Dialect::modern) {
    EXPECT_EQ(store->ping(0xC0FFEE), 0xC0FFEEu);
    store->set("listed", "1");
    auto keys = store->list();
    EXPECT_NE(std::find(keys.begin(), keys.end(), "listed"), keys.end());
  }
}

INSTANTIATE_TEST_SUITE_P(Dialects, WithServer,
                         ::testing::Values(wire::Dialect::legacy, wire::Dialect::modern),
                         [](const auto& info) { return std::string(wire::to_string(info.param)); });

}  // namespace
}  // namespace ncclsmoke::rendezvous
