// Dialect/era negotiation (dialect_probe.h, TcpStoreOptions::negotiate) against our own server and
// an emulated torch 2.1-2.4 server; the client's own reply limits (> 8 MiB values); ops an older
// server lacks failing with StoreError(invalid) on the op itself; QUEUE_PUSH waking one waiter.
// The real torch 1.13 server is covered by tests/interop/negotiate_vs_torch_server.py.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "rendezvous/dialect_probe.h"
#include "rendezvous/tcp_client.h"
#include "rendezvous/tcp_server.h"
#include "rendezvous/tcp_server_keyspace.h"
#include "tests/wait_until.h"

namespace ncclsmoke::rendezvous {
namespace {

using namespace std::chrono_literals;
using wire::Dialect;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A minimal TCPStore server of the torch 2.1-2.4 era, on 127.0.0.1:0. Its dispatch follows the
// VALIDATE-era classic server in pytorch/pytorch torch/csrc/distributed/c10d/TCPStoreBackend.cpp
// @f3e8ca07 (TCPStoreMasterDaemon::query): a connection's first query must be VALIDATE with the
// magic, else the socket is closed; opcodes SET(1)..CANCEL_WAIT(12) are served; anything else
// (PING 13, QUEUE_PUSH/POP/LEN 14-16, LIST 17) hits "Unexpected query type", which closes the
// socket. The op semantics come from our keyspace; only the era's dispatch is emulated.
// Modes: torch24 (as above), silent (accepts, never reads or answers), close_all (closes every
// connection at once: neither dialect).
class EmulatedServer {
 public:
  enum class Mode { torch24, silent, close_all };

  explicit EmulatedServer(Mode mode) : mode_(mode), keyspace_([this](detail::ConnId c,
                                                                      std::string_view b) {
                                                    send_to(c, b);
                                                  }) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 64) != 0)
      throw std::runtime_error("emulated server: bind/listen failed");
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (::pipe(stop_pipe_) != 0) throw std::runtime_error("pipe failed");
    thread_ = std::thread([this] { loop(); });
  }
  ~EmulatedServer() {
    char x = 1;
    [[maybe_unused]] auto n = ::write(stop_pipe_[1], &x, 1);
    thread_.join();
    for (auto& [id, c] : conns_) ::close(c.fd);
    for (int fd : silent_fds_) ::close(fd);
    ::close(listen_fd_);
    ::close(stop_pipe_[0]);
    ::close(stop_pipe_[1]);
  }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }
  std::vector<std::string> closed_on() {
    std::lock_guard lock(mu_);
    return closed_on_;
  }

 private:
  struct Conn {
    int fd = -1;
    bool validated = false;
    std::string buf;
  };

  void send_to(detail::ConnId id, std::string_view bytes) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    [[maybe_unused]] auto n = ::send(it->second.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }

  void close_conn(detail::ConnId id, const std::string& why) {
    {
      std::lock_guard lock(mu_);
      closed_on_.push_back(why);
    }
    keyspace_.forget(id);
    ::close(conns_[id].fd);
    conns_.erase(id);
  }

  // Serves what is buffered; false when the connection was closed.
  bool serve(detail::ConnId id) {
    for (;;) {
      Conn& c = conns_[id];
      if (!c.validated) {
        if (c.buf.size() < 5) return true;
        uint32_t magic = 0;
        std::memcpy(&magic, c.buf.data() + 1, 4);
        if (c.buf[0] != 0 || magic != wire::kValidateMagic) {
          close_conn(id, "Miscellaneous client without VALIDATE query");
          return false;
        }
        c.validated = true;
        c.buf.erase(0, 5);
        continue;
      }
      if (c.buf.empty()) return true;
      auto byte = static_cast<uint8_t>(c.buf[0]);
      if (byte < 1 || byte > 12) {
        close_conn(id, "Unexpected query type " + std::to_string(byte));
        return false;
      }
      auto dec = wire::decode_request(Dialect::modern, c.buf, wire::Limits{});
      if (dec.status == wire::Status::need_more) return true;
      if (dec.status == wire::Status::error) {
        close_conn(id, dec.error);
        return false;
      }
      c.buf.erase(0, dec.consumed);
      if (auto why = keyspace_.execute(id, Dialect::modern, dec.request)) {
        close_conn(id, why->why);
        return false;
      }
    }
  }

  void loop() {
    for (;;) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
      std::vector<detail::ConnId> ids;
      for (auto& [id, c] : conns_) {
        fds.push_back({c.fd, POLLIN, 0});
        ids.push_back(id);
      }
      if (::poll(fds.data(), fds.size(), 1000) < 0) continue;
      if (fds[1].revents) return;
      if (fds[0].revents & POLLIN) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          ++accepted_;
          if (mode_ == Mode::silent) {
            silent_fds_.push_back(fd);
          } else if (mode_ == Mode::close_all) {
            ::close(fd);
          } else {
            conns_[next_id_++] = Conn{fd, false, {}};
          }
        }
      }
      for (std::size_t i = 0; i < ids.size(); ++i) {
        if (!fds[i + 2].revents) continue;
        char chunk[4096];
        ssize_t n = ::recv(fds[i + 2].fd, chunk, sizeof chunk, 0);
        if (n <= 0) {
          close_conn(ids[i], "peer closed");
          continue;
        }
        conns_[ids[i]].buf.append(chunk, static_cast<std::size_t>(n));
        serve(ids[i]);
      }
    }
  }

  Mode mode_;
  detail::ServerKeyspace keyspace_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::map<detail::ConnId, Conn> conns_;  // loop thread only
  std::vector<int> silent_fds_;
  detail::ConnId next_id_ = 1;
  std::mutex mu_;
  std::vector<std::string> closed_on_;
  std::thread thread_;
};

std::unique_ptr<TcpStoreServer> start_our_server() {
  TcpStoreServerOptions o;
  o.host = "127.0.0.1";
  o.log = [](const std::string&) {};
  return TcpStoreServer::start(o);
}

TcpStoreOptions client_options(uint16_t port, bool negotiate = true) {
  TcpStoreOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.negotiate = negotiate;
  o.op_timeout = 5000ms;
  return o;
}

class DialectProbeTest : public ::testing::Test {
 protected:
  // Ports are reused across tests' servers; each test starts with no cached answers.
  void SetUp() override { forget_dialect_probes(); }
};

TEST_F(DialectProbeTest, OurServerIsValidatePingAndTheSecondProbeIsCached) {
  auto server = start_our_server();
  DialectProbe p = probe_dialect("127.0.0.1", server->port(), deadline_after(5000ms), {});
  EXPECT_EQ(p.era, StoreEra::validate_ping);
  EXPECT_EQ(p.dialect, Dialect::modern);
  EXPECT_TRUE(p.ping);
  EXPECT_FALSE(p.cached);
  EXPECT_STREQ(to_string(p.era), "torch>=2.5");
  EXPECT_TRUE(contains(p.era_text, "VALIDATE + PING")) << p.era_text;
  uint64_t accepted = server->stats().accepted;

  DialectProbe again = probe_dialect("127.0.0.1", server->port(), deadline_after(5000ms), {});
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.era, StoreEra::validate_ping);
  EXPECT_EQ(server->stats().accepted, accepted) << "a cached probe must not connect";
}

TEST_F(DialectProbeTest, ConcurrentProbesOfOneEndpointProbeOnce) {
  auto server = start_our_server();
  std::mutex mu;
  std::vector<DialectProbe> answers;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      DialectProbe p = probe_dialect("127.0.0.1", server->port(), deadline_after(5000ms), {});
      std::lock_guard lock(mu);
      answers.push_back(p);
    });
  for (auto& t : threads) t.join();
  ASSERT_EQ(answers.size(), 4u);
  int fresh = 0;
  for (const auto& a : answers) {
    EXPECT_EQ(a.era, StoreEra::validate_ping);
    fresh += !a.cached;
  }
  EXPECT_EQ(fresh, 1);
  EXPECT_EQ(server->stats().accepted, 1u) << "one probe connection for four callers";
}

TEST_F(DialectProbeTest, NegotiatedAndLegacyClientsShareOurServer) {
  auto server = start_our_server();
  auto negotiated = TcpStore::connect(client_options(server->port()), deadline_after(5000ms));
  ASSERT_TRUE(negotiated->negotiation().has_value());
  EXPECT_EQ(negotiated->negotiation()->era, StoreEra::validate_ping);
  EXPECT_EQ(negotiated->options().dialect, Dialect::modern);

  TcpStoreOptions lo = client_options(server->port(), false);
  lo.dialect = Dialect::legacy;
  auto legacy = TcpStore::connect(lo, deadline_after(5000ms));
  EXPECT_FALSE(legacy->negotiation().has_value());

  negotiated->set("a", "from-modern");
  EXPECT_EQ(legacy->get("a", deadline_after(2000ms)), "from-modern");
  legacy->set("b", "from-legacy");
  EXPECT_EQ(negotiated->get("b", deadline_after(2000ms)), "from-legacy");
  EXPECT_EQ(negotiated->add("n", 2), 2);
  EXPECT_EQ(legacy->add("n", 3), 5);
  EXPECT_EQ(negotiated->ping(77), 77u);
  negotiated->queue_push("q", "item");
  EXPECT_EQ(negotiated->queue_len("q"), 1);
  EXPECT_EQ(negotiated->queue_pop("q", deadline_after(2000ms)), "item");
  auto keys = negotiated->list();
  EXPECT_EQ(keys.size(), 3u);

  // A second negotiated client of the same endpoint reuses the cached answer.
  auto second = TcpStore::connect(client_options(server->port()), deadline_after(5000ms));
  ASSERT_TRUE(second->negotiation().has_value());
  EXPECT_TRUE(second->negotiation()->cached);
  EXPECT_EQ(second->get("a", deadline_after(2000ms)), "from-modern");
}

TEST_F(DialectProbeTest, Torch24ServerIsValidateNoPing) {
  EmulatedServer server(EmulatedServer::Mode::torch24);
  DialectProbe p = probe_dialect("127.0.0.1", server.port(), deadline_after(5000ms), {});
  EXPECT_EQ(p.era, StoreEra::validate_no_ping);
  EXPECT_EQ(p.dialect, Dialect::modern);
  EXPECT_FALSE(p.ping);
  EXPECT_STREQ(to_string(p.era), "torch2.1-2.4");
  EXPECT_TRUE(contains(p.era_text, "2.1-2.4")) << p.era_text;
  auto closed = server.closed_on();
  ASSERT_FALSE(closed.empty());
  EXPECT_TRUE(contains(closed.back(), "Unexpected query type 13")) << closed.back();
  int accepted = server.accepted();
  EXPECT_TRUE(probe_dialect("127.0.0.1", server.port(), deadline_after(5000ms), {}).cached);
  EXPECT_EQ(server.accepted(), accepted) << "a cached probe must not connect";
}

TEST_F(DialectProbeTest, TellingModernCannotJoinATorch24Store) {
  EmulatedServer server(EmulatedServer::Mode::torch24);
  TcpStoreOptions o = client_options(server.port(), false);
  o.backoff.initial = 50ms;
  try {
    TcpStore::connect(o, deadline_after(1500ms));
    FAIL() << "VALIDATE + PING should be closed by a 2.1-2.4 server";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::reset) << e.what();
    EXPECT_TRUE(contains(e.what(), "2.1-2.4")) << "should hint at the era: " << e.what();
  }
}

TEST_F(DialectProbeTest, NegotiatedClientWorksWithATorch24Store) {
  EmulatedServer server(EmulatedServer::Mode::torch24);
  auto store = TcpStore::connect(client_options(server.port()), deadline_after(5000ms));
  ASSERT_TRUE(store->negotiation().has_value());
  EXPECT_EQ(store->negotiation()->era, StoreEra::validate_no_ping);
  int closes_after_probe = static_cast<int>(server.closed_on().size());

  store->set("k", "v");
  EXPECT_EQ(store->get("k", deadline_after(2000ms)), "v");
  EXPECT_EQ(store->add("c", 4), 4);
  EXPECT_EQ(store->add("c", 1), 5);
  EXPECT_TRUE(store->check({"k", "c"}));
  EXPECT_FALSE(store->check({"k", "missing"}));
  store->wait({"k"}, deadline_after(2000ms));
  EXPECT_EQ(store->compare_set("cs", "", "one"), "one");
  EXPECT_EQ(store->compare_set("cs", "one", "two"), "two");
  EXPECT_EQ(store->num_keys(), 3);
  EXPECT_TRUE(store->delete_key("cs"));
  EXPECT_FALSE(store->delete_key("cs"));
  EXPECT_EQ(static_cast<int>(server.closed_on().size()), closes_after_probe)
      << "no op so far may have been closed on";

  // A WAIT woken by another negotiated client's SET.
  auto other = TcpStore::connect(client_options(server.port()), deadline_after(5000ms));
  EXPECT_TRUE(other->negotiation()->cached);
  std::thread setter([&] {
    ncclsmoke::testing::pause_for(100ms);  // late on purpose: the get must block until the set
    other->set("late", "x");
  });
  EXPECT_EQ(store->get("late", deadline_after(5000ms)), "x");
  setter.join();
}

TEST_F(DialectProbeTest, OpsATorch24StoreLacksFailOnTheOpNamingTheTorchNeeded) {
  EmulatedServer server(EmulatedServer::Mode::torch24);
  auto store = TcpStore::connect(client_options(server.port()), deadline_after(5000ms));
  auto expect_invalid = [&](const char* what, auto&& op, const std::string& needs) {
    try {
      op();
      ADD_FAILURE() << what << " should fail on a 2.1-2.4 server";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.error_class(), ErrorClass::invalid) << what << ": " << e.what();
      EXPECT_TRUE(contains(e.what(), std::string(what) + " needs " + needs)) << e.what();
      EXPECT_TRUE(contains(e.what(), "torch 2.1-2.4")) << "era missing: " << e.what();
      EXPECT_TRUE(contains(e.what(), "closed the connection on it")) << e.what();
      std::printf("%s error: %s\n", what, e.what());
    }
  };
  expect_invalid("QUEUE_PUSH", [&] { store->queue_push("q", "x"); },
                 "a torch >= 2.8 libuv server or an ncclsmoke server");
  expect_invalid("QUEUE_POP", [&] { store->queue_pop("q", deadline_after(3000ms)); },
                 "a torch >= 2.8 libuv server");
  expect_invalid("QUEUE_LEN", [&] { store->queue_len("q"); }, "a torch >= 2.8 libuv server");
  expect_invalid("LIST", [&] { store->list(); }, "a torch >= 2.10 libuv server");
  // Every reconnect above reused the negotiated answer: no second probe, no PING handshake.
  int pings = 0;
  for (const auto& why : server.closed_on()) pings += contains(why, "Unexpected query type 13");
  EXPECT_EQ(pings, 1) << "only the probe's PING may have been closed on";
  expect_invalid("PING", [&] { store->ping(5); }, "torch >= 2.5");
  // The client reconnects and keeps working after each of those.
  store->set("after", "ok");
  EXPECT_EQ(store->get("after", deadline_after(2000ms)), "ok");
}

TEST_F(DialectProbeTest, ServerThatAcceptsButNeverAnswersIsStalled) {
  EmulatedServer server(EmulatedServer::Mode::silent);
  try {
    probe_dialect("127.0.0.1", server.port(), deadline_after(700ms), {});
    FAIL() << "probe of a silent server must fail as stalled";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::stalled) << e.what();
    EXPECT_TRUE(contains(e.what(), "did not answer")) << e.what();
    EXPECT_TRUE(contains(e.what(), "127.0.0.1:" + std::to_string(server.port()))) << e.what();
  }
  // Not cached: the next probe tries again (and connects again).
  int accepted = server.accepted();
  EXPECT_THROW(probe_dialect("127.0.0.1", server.port(), deadline_after(300ms), {}), StoreError);
  EXPECT_GT(server.accepted(), accepted);
}

TEST_F(DialectProbeTest, ServerThatClosesEverythingSpeaksNeitherDialect) {
  EmulatedServer server(EmulatedServer::Mode::close_all);
  try {
    probe_dialect("127.0.0.1", server.port(), deadline_after(3000ms), {});
    FAIL() << "a server that closes every connection has no dialect";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::reset) << e.what();
    EXPECT_TRUE(contains(e.what(), "neither TCPStore dialect")) << e.what();
  }
}

TEST_F(DialectProbeTest, RefusedConnectKeepsItsClass) {
  // A bound socket that never listens: connects are refused, and the port stays ours.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  Backoff fast;
  fast.initial = 50ms;
  try {
    probe_dialect("127.0.0.1", ntohs(a.sin_port), deadline_after(400ms), fast);
    ADD_FAILURE() << "nothing listens";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::refused) << e.what();
  }
  ::close(fd);
}

TEST_F(DialectProbeTest, ClientReadsAValueLargerThanTheServerLimit) {
  // Our server caps a whole value at max_value_bytes, APPEND included: raise it for this test.
  TcpStoreServerOptions o;
  o.host = "127.0.0.1";
  o.log = [](const std::string&) {};
  o.limits.max_value_bytes = 16 * 1024 * 1024;
  auto server = TcpStoreServer::start(o);
  auto store = TcpStore::connect(client_options(server->port()), deadline_after(5000ms));
  // Each APPEND is under the default 8 MiB value limit; the 12 MiB concatenation fits this
  // server's 16 MiB, but not a client sized to the default limits.
  const std::string chunk(4 * 1024 * 1024, 'x');
  for (int i = 0; i < 3; ++i) store->append("big", chunk + static_cast<char>('a' + i));
  std::string value = store->get("big", deadline_after(10000ms));
  ASSERT_EQ(value.size(), 3 * (chunk.size() + 1));
  EXPECT_EQ(value[chunk.size()], 'a');
  EXPECT_EQ(value.back(), 'c');
  EXPECT_GT(value.size(), wire::Limits{}.max_value_bytes);

  // With the server's limits the same reply is refused: the client default is what allows it.
  TcpStoreOptions tight = client_options(server->port());
  tight.limits = wire::Limits{};
  auto small = TcpStore::connect(tight, deadline_after(5000ms));
  try {
    small->get("big", deadline_after(10000ms));
    ADD_FAILURE() << "a >8 MiB reply should exceed the server-sized limits";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::protocol) << e.what();
    EXPECT_TRUE(contains(e.what(), "exceeds the limit")) << e.what();
  }
}

// ---- QUEUE_PUSH wakes one waiter ----

struct Sent {
  std::map<detail::ConnId, std::string> bytes;
  detail::ServerKeyspace::Send sink() {
    return [this](detail::ConnId c, std::string_view b) { bytes[c].append(b); };
  }
};

wire::Request request(wire::Op op, std::vector<std::string> keys,
                      std::vector<std::string> values = {}) {
  wire::Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  return r;
}

TEST(QueueWakeOne, OnePushAnswersExactlyTheOldestWaiter) {
  Sent sent;
  detail::ServerKeyspace ks(sent.sink());
  for (detail::ConnId c : {3, 1, 2})  // arrival order 3, 1, 2
    ASSERT_FALSE(ks.execute(c, Dialect::modern, request(wire::Op::wait, {"/q"})));
  EXPECT_TRUE(sent.bytes.empty());
  ASSERT_FALSE(ks.execute(9, Dialect::modern, request(wire::Op::queue_push, {"/q"}, {"x"})));
  ASSERT_EQ(sent.bytes.size(), 1u) << "exactly one waiter is answered";
  EXPECT_EQ(sent.bytes.count(3), 1u) << "the oldest waiter";
  EXPECT_FALSE(ks.has_pending_wait(3));
  EXPECT_TRUE(ks.has_pending_wait(1));
  EXPECT_TRUE(ks.has_pending_wait(2));

  ASSERT_FALSE(ks.execute(9, Dialect::modern, request(wire::Op::queue_push, {"/q"}, {"y"})));
  EXPECT_EQ(sent.bytes.count(1), 1u);
  EXPECT_TRUE(ks.has_pending_wait(2));
  ASSERT_FALSE(ks.execute(9, Dialect::modern, request(wire::Op::queue_push, {"/q"}, {"z"})));
  EXPECT_EQ(sent.bytes.count(2), 1u);
  EXPECT_EQ(ks.pending_waits(), 0u);
}

TEST(QueueWakeOne, AWaiterOnMoreKeysDoesNotSwallowThePush) {
  Sent sent;
  detail::ServerKeyspace ks(sent.sink());
  ASSERT_FALSE(ks.execute(1, Dialect::modern, request(wire::Op::wait, {"/q", "/other"})));
  ASSERT_FALSE(ks.execute(2, Dialect::modern, request(wire::Op::wait, {"/q"})));
  ASSERT_FALSE(ks.execute(9, Dialect::modern, request(wire::Op::queue_push, {"/q"}, {"x"})));
  EXPECT_EQ(sent.bytes.count(2), 1u) << "the first waiter still misses /other; the next one wakes";
  EXPECT_TRUE(ks.has_pending_wait(1));
  // The first waiter now misses only /other.
  ASSERT_FALSE(ks.execute(9, Dialect::modern, request(wire::Op::set, {"/other"}, {"v"})));
  EXPECT_EQ(sent.bytes.count(1), 1u);
}

TEST(QueueWakeOne, SetStillWakesEveryWaiter) {
  Sent sent;
  detail::ServerKeyspace ks(sent.sink());
  for (detail::ConnId c : {1, 2, 3})
    ASSERT_FALSE(ks.execute(c, Dialect::modern, request(wire::Op::wait, {"/k"})));
  ASSERT_FALSE(ks.execute(9, Dialect::modern, request(wire::Op::set, {"/k"}, {"v"})));
  EXPECT_EQ(sent.bytes.size(), 3u);
  EXPECT_EQ(ks.pending_waits(), 0u);
}

TEST_F(DialectProbeTest, ThreeQueuePoppersOnePushOneItemEach) {
  auto server = start_our_server();
  std::vector<std::unique_ptr<TcpStore>> clients;
  for (int i = 0; i < 3; ++i)
    clients.push_back(TcpStore::connect(client_options(server->port()), deadline_after(5000ms)));
  auto pusher = TcpStore::connect(client_options(server->port()), deadline_after(5000ms));
  std::mutex mu;
  std::vector<std::string> got;
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      try {
        std::string v = clients[i]->queue_pop("q", deadline_after(20000ms));
        std::lock_guard lock(mu);
        got.push_back(v);
      } catch (const StoreError& e) {
        std::lock_guard lock(mu);
        got.push_back(std::string("error: ") + e.what());
      }
    });
  auto count = [&] {
    std::lock_guard lock(mu);
    return got.size();
  };
  auto wait_for = [&](std::size_t n) {
    ncclsmoke::testing::wait_until([&] { return count() >= n; }, 10s);
  };
  // The three WAITs reach the server first: each pending one holds a registration on "/q".
  ASSERT_TRUE(ncclsmoke::testing::wait_until(
      [&] { return server->stats().registered_bytes >= 3 * detail::registration_bytes(2); }, 10s))
      << server->stats().registered_bytes << " bytes of WAIT registrations";
  pusher->queue_push("q", "one");
  wait_for(1);
  ASSERT_EQ(count(), 1u);
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(got[0], "one");
  }
  EXPECT_EQ(pusher->queue_len("q"), 0);
  pusher->queue_push("q", "two");
  pusher->queue_push("q", "three");
  wait_for(3);
  for (auto& t : threads) t.join();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"one", "three", "two"}));
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
