// The store server's memory budget (rendezvous/tcp_server.h), one test per limit, over raw
// sockets: APPEND over the value limit, a watcher that does not read, the total budget (refuses,
// then recovers after DELETE), the key-count limit, a slowloris request timed from its first
// byte, and half-sent MULTI_SETs that hold buffers. Each limit closes only the connection that hit
// it, with one log line naming the peer and the flag, while another client keeps being served.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/tcp_server.h"
#include "rendezvous/wire.h"
#include "tests/rendezvous/raw_store_client.h"
#include "tests/rendezvous/server_test_util.h"
#include "tests/wait_until.h"

namespace ncclsmoke::rendezvous {
namespace {

using namespace std::chrono_literals;
using wire::Dialect;
using wire::Op;
using wire::Request;
using SteadyClock = std::chrono::steady_clock;
using server_testing::kIo;
using server_testing::LogSink;
using server_testing::req;
using server_testing::Raw;

std::string u64le(uint64_t v) {
  std::string s;
  wire::put_u64(s, v);
  return s;
}

class StoreBudgetTest : public ::testing::Test {
 protected:
  void start(std::function<void(TcpStoreServerOptions&)> tweak) {
    TcpStoreServerOptions opt;
    opt.host = "127.0.0.1";
    opt.stalled_request_timeout = 5s;
    opt.log = log_.fn();
    tweak(opt);
    server_ = TcpStoreServer::start(opt);
  }
  uint16_t port() const { return server_->port(); }
  void expect_healthy(const std::string& tag) {
    Raw ok(port());
    ok.send(req(Op::set, {"/healthy"}, {tag}));
    EXPECT_EQ(ok.call(req(Op::get, {"/healthy"})).values.at(0), tag);
  }
  // Polls the server's stats until `pred` holds (false when it never did within kIo).
  bool stats_reach(std::function<bool(const TcpStoreServerStats&)> pred) {
    return ncclsmoke::testing::wait_until([&] { return pred(server_->stats()); },
                                          std::chrono::duration_cast<std::chrono::milliseconds>(kIo));
  }

  LogSink log_;
  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(StoreBudgetTest, AppendOverTheValueLimitIsRefused) {
  start([](TcpStoreServerOptions& o) { o.limits.max_value_bytes = 1 << 20; });
  Raw a(port());
  // A thousand 1 KiB appends fit (and arrive intact): the limit counts the whole value.
  std::string packet;
  for (int i = 0; i < 1000; ++i)
    wire::encode_request(Dialect::modern,
                         req(Op::append, {"/log"}, {std::string(1024, char('a' + i % 26))}), packet);
  ASSERT_TRUE(a.send_raw(packet));
  auto got = a.call(req(Op::get, {"/log"})).values.at(0);
  ASSERT_EQ(got.size(), 1000u * 1024);
  EXPECT_EQ(got[0], 'a');
  EXPECT_EQ(got[999 * 1024], char('a' + 999 % 26));
  // The next 100 KiB would make it 1.07 MiB > 1 MiB: the connection is closed, the value kept.
  a.send(req(Op::append, {"/log"}, {std::string(100 * 1024, 'z')}));
  EXPECT_TRUE(a.closed_within(kIo));
  std::string line = log_.wait_for({"APPEND of 102400 bytes", "would exceed max_value_bytes 1048576",
                                    "--max-value-bytes", a.local()});
  EXPECT_NE(line, "") << log_.all();
  Raw b(port());
  EXPECT_EQ(b.call(req(Op::get, {"/log"})).values.at(0).size(), 1000u * 1024);
  EXPECT_EQ(server_->stats().closed_for_limits, 1u);
  expect_healthy("after-append");
}

TEST_F(StoreBudgetTest, NonReadingWatcherIsDroppedAtTheOutputCapWhileOthersAreServed) {
  start([](TcpStoreServerOptions& o) { o.max_output_bytes = 1 << 20; });
  Raw setter(port());
  setter.send(req(Op::set, {"/w"}, {std::string(2 << 20, 'v')}));
  ASSERT_TRUE(setter.alive());
  // A legacy watcher with a tiny receive buffer that never reads its notifications.
  Raw watcher(port(), Dialect::legacy, 4096);
  EXPECT_EQ(watcher.call(req(Op::watch_key, {"/w"})).byte, 3);  // KEY_CALLBACK_REGISTERED
  // Twenty 1-byte APPENDs in one packet: each notification carries ~4 MiB (old + new value).
  std::string packet;
  for (int i = 0; i < 20; ++i)
    wire::encode_request(Dialect::modern, req(Op::append, {"/w"}, {"+"}), packet);
  ASSERT_TRUE(setter.send_raw(packet));
  EXPECT_EQ(setter.call(req(Op::get, {"/w"})).values.at(0).size(), (2u << 20) + 20);
  std::string line =
      log_.wait_for({watcher.local(), "peer reads nothing", "over max_output_bytes 1048576",
                     "--max-output-bytes"});
  EXPECT_NE(line, "") << log_.all();
  // Dropped, not buffered: its queue is released and nothing more is queued for it.
  EXPECT_TRUE(stats_reach([](const auto& s) { return s.queued_reply_bytes == 0; }))
      << server_->stats().queued_reply_bytes;
  EXPECT_TRUE(watcher.closed_within(kIo));
  EXPECT_TRUE(setter.alive());
  expect_healthy("after-watcher");
}

TEST_F(StoreBudgetTest, TotalBudgetRefusesThenRecoversAfterDelete) {
  constexpr std::size_t kBudget = 4 << 20;
  start([](TcpStoreServerOptions& o) { o.max_total_bytes = kBudget; });
  const std::string value(256 * 1024, 'b');
  int stored = 0;
  std::string refused_by;
  {
    Raw filler(port());
    for (int i = 0; i < 64; ++i) {
      filler.send(req(Op::set, {"/b" + std::to_string(i)}, {value}));
      if (!filler.alive()) {
        refused_by = filler.local();
        break;
      }
      ++stored;
    }
  }
  // 7/8 of 4 MiB is for 256 KiB values: 13 fit (3.3 MiB), the 14th does not.
  EXPECT_GE(stored, 10);
  EXPECT_LE(stored, 14);
  EXPECT_NE(log_.wait_for({refused_by, "would exceed the total memory budget",
                           "max_total_bytes 4194304 (--max-total-bytes"}),
            "")
      << log_.all();
  // stats() is published at the end of the loop's turn, which may come after the last reply.
  EXPECT_TRUE(stats_reach([&](const auto& s) { return s.keys == static_cast<uint64_t>(stored); }))
      << server_->stats().keys << " keys, " << stored << " stored";
  EXPECT_LE(server_->stats().stored_bytes, kBudget);
  // Others are still served (small requests), and DELETE makes room for a big one again.
  Raw c(port());
  EXPECT_EQ(c.call(req(Op::add, {"/n"}, {}, 1)).number, 1);
  EXPECT_EQ(c.call(req(Op::delete_key, {"/b0"})).number, 1);
  EXPECT_EQ(c.call(req(Op::delete_key, {"/b1"})).number, 1);
  c.send(req(Op::set, {"/again"}, {value}));
  ASSERT_TRUE(c.alive());
  EXPECT_EQ(c.call(req(Op::get, {"/again"})).values.at(0), value);
}

// Keys one client pins (WATCH_KEY registrations) stop at 3/4 of the budget: the last quarter is
// kept for stored values and requests, so another client's SET is served while the pinning
// connection is open (store_attacks.py's watch_flood refused the bystander's SET in one CI run of
// many, when the registrations had filled the whole budget).
TEST_F(StoreBudgetTest, PinnedKeysLeaveAQuarterOfTheBudgetForOthersWrites) {
  constexpr std::size_t kBudget = 4 << 20;
  start([](TcpStoreServerOptions& o) { o.max_total_bytes = kBudget; });
  Raw pinner(port(), Dialect::legacy);
  const std::string pad(8000, 'k');
  int registered = 0;
  // Up to 255 (4.1 MB: just under the whole budget, so without the cap nothing refuses them and
  // the pinning connection stays open holding nearly all of it).
  for (int i = 0; i < 255; ++i) {
    try {  // KEY_CALLBACK_REGISTERED, until the server refuses and closes the connection
      if (pinner.call(req(Op::watch_key, {"/pin/" + std::to_string(i) + pad})).byte != 3) break;
    } catch (const std::exception&) {
      break;
    }
    ++registered;
  }
  // Each costs 128 + twice the key (16,138 bytes): 3/4 of 4 MiB holds 194 of them, the whole
  // budget 259.
  EXPECT_GE(registered, 150);
  EXPECT_LE(registered, 200) << "registrations went past 3/4 of the budget";
  EXPECT_NE(log_.wait_for({"WATCH_KEY", "3/4 of max_total_bytes (--max-total-bytes)"}), "")
      << log_.all();
  // A write that needs most of the last quarter is served.
  Raw writer(port());
  const std::string value(768 * 1024, 'v');
  writer.send(req(Op::set, {"/after-pins"}, {value}));
  ASSERT_TRUE(writer.alive()) << log_.all();
  EXPECT_EQ(writer.call(req(Op::get, {"/after-pins"})).values.at(0), value);
}

TEST_F(StoreBudgetTest, KeyCountLimitRefusesTheNextKeyOnly) {
  start([](TcpStoreServerOptions& o) { o.max_stored_keys = 100; });
  Raw a(port());
  std::string packet;
  for (int i = 0; i < 100; ++i)
    wire::encode_request(Dialect::modern, req(Op::set, {"/k" + std::to_string(i)}, {"v"}), packet);
  ASSERT_TRUE(a.send_raw(packet));
  EXPECT_EQ(a.call(req(Op::num_keys)).number, 100);
  a.send(req(Op::set, {"/k5"}, {"overwrite is fine"}));
  EXPECT_EQ(a.call(req(Op::get, {"/k5"})).values.at(0), "overwrite is fine");
  a.send(req(Op::set, {"/one-too-many"}, {"v"}));
  EXPECT_TRUE(a.closed_within(kIo));
  EXPECT_NE(log_.wait_for({a.local(), "key-count limit", "max_stored_keys 100 (--max-keys)"}), "")
      << log_.all();
  Raw b(port());
  EXPECT_EQ(b.call(req(Op::num_keys)).number, 100);
  EXPECT_EQ(b.call(req(Op::delete_key, {"/k0"})).number, 1);
  b.send(req(Op::set, {"/room-again"}, {"v"}));
  EXPECT_EQ(b.call(req(Op::get, {"/room-again"})).values.at(0), "v");
}

TEST_F(StoreBudgetTest, SlowlorisIsClosedAtTheDeadlineFromItsFirstByte) {
  start([](TcpStoreServerOptions& o) { o.stalled_request_timeout = 600ms; });
  Raw slow(port());
  // A SET whose key is 1000 bytes long, sent one byte every 100 ms: each byte comes well within
  // the 600 ms timeout, so only a deadline from the first byte can close it.
  std::string request = std::string(1, '\x01') + u64le(1000) + std::string(1000, 'k');
  auto first = SteadyClock::now();
  bool closed = false;
  std::size_t sent = 0;
  for (; sent < 60 && !closed; ++sent) {
    if (!slow.send_raw(request.substr(sent, 1))) {
      closed = true;
      break;
    }
    closed = slow.closed_within(100ms);
  }
  auto took = SteadyClock::now() - first;
  ASSERT_TRUE(closed) << "still open after " << sent << " bytes one every 100 ms";
  EXPECT_GE(took, 500ms);  // not before its deadline
  EXPECT_NE(log_.wait_for({slow.local(), "stalled mid-request", "after its first byte",
                           "--request-timeout"}),
            "")
      << log_.all();
  EXPECT_EQ(server_->stats().closed_for_limits, 1u);
  expect_healthy("after-slowloris");
}

TEST_F(StoreBudgetTest, HalfSentMultiSetsCountWhileBufferedAndAreReleased) {
  start([](TcpStoreServerOptions& o) {
    o.max_total_bytes = 8 << 20;
    o.stalled_request_timeout = 1500ms;
  });
  // MULTI_SET (count, then key, value per key) of 4 keys x 4 MiB; each sender stops after 3 MiB
  // of the first value.
  auto half_multi_set = [] {
    return std::string(1, '\x0b') + u64le(4) + u64le(4) + "/ms0" + u64le(4 << 20) +
           std::string(3 << 20, 'x');
  };
  Raw bystander(port());
  Raw first(port()), second(port());
  ASSERT_TRUE(first.send_raw(half_multi_set()));
  ASSERT_TRUE(second.send_raw(half_multi_set()));
  EXPECT_TRUE(stats_reach([](const auto& s) { return s.buffered_request_bytes >= (6u << 20); }))
      << server_->stats().buffered_request_bytes;
  // A third would take the buffers past 7/8 of 8 MiB: refused at once, long before its deadline.
  Raw third(port());
  third.send_raw(half_multi_set());
  EXPECT_TRUE(third.closed_within(1000ms));
  EXPECT_NE(log_.wait_for({third.local(), "MULTI_SET", "would exceed the total memory budget"}), "")
      << log_.all();
  EXPECT_LE(server_->stats().buffered_request_bytes, 8u << 20);
  // Small requests still go through beside the held buffers.
  EXPECT_EQ(bystander.call(req(Op::add, {"/during"}, {}, 1)).number, 1);
  // The two that stay silent are closed at their request deadline, and their memory is released.
  EXPECT_TRUE(first.closed_within(kIo));
  EXPECT_TRUE(second.closed_within(kIo));
  EXPECT_NE(log_.wait_for({first.local(), "stalled mid-request", "a MULTI_SET"}), "")
      << log_.all();
  EXPECT_TRUE(stats_reach([](const auto& s) { return s.buffered_request_bytes == 0; }))
      << server_->stats().buffered_request_bytes;
  EXPECT_EQ(server_->stats().keys, 1u);  // only /during: nothing of the MULTI_SETs was stored
  EXPECT_EQ(bystander.call(req(Op::add, {"/during"}, {}, 1)).number, 2);
}

TEST_F(StoreBudgetTest, BigReplyToAClientThatReadsGoesThroughTheCap) {
  // One reply larger than max_output_bytes is sent when nothing else is queued (a MULTI_GET of
  // many values); a reader that takes it is served in full.
  start([](TcpStoreServerOptions& o) { o.max_output_bytes = 1 << 20; });
  Raw c(port());
  std::string v(3 << 20, 'r');
  c.send(req(Op::set, {"/r"}, {v}));
  auto mg = c.call(req(Op::multi_get, {"/r", "/r"}));
  ASSERT_EQ(mg.values.size(), 2u);
  EXPECT_EQ(mg.values[0], v);
  EXPECT_EQ(mg.values[1], v);
  EXPECT_TRUE(c.alive());
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
