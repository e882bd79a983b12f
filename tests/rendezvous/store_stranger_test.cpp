// No stranger crowds out the job (rendezvous/tcp_server.h): WAIT and WATCH_KEY registrations count
// against the budget and a per-connection cap, 128 Ki-key requests run in slices and still answer
// right, idle connections are closed at their deadline (torch 1.13's WATCH_KEY socket excepted),
// a full server sheds its oldest idle stranger before it refuses anyone, and a store-wide limit is
// recorded for the job (stats().full) naming the limit, its flag and the count.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "rendezvous/tcp_server.h"
#include "rendezvous/tcp_server_keyspace.h"
#include "rendezvous/wire.h"
#include "tests/rendezvous/raw_store_client.h"
#include "tests/rendezvous/server_test_util.h"
#include "tests/wait_until.h"

namespace ncclsmoke::rendezvous {
namespace {

using namespace std::chrono_literals;
using server_testing::kIo;
using server_testing::LogSink;
using server_testing::Raw;
using server_testing::req;
using wire::Dialect;
using wire::Op;

class StoreStrangerTest : public server_testing::ServerFixture {
 protected:
  void expect_served(const std::string& tag) {
    Raw ok(port());
    ok.send(req(Op::set, {"/served"}, {tag}));
    EXPECT_EQ(ok.call(req(Op::get, {"/served"})).values.at(0), tag);
  }
  bool stats_reach(std::function<bool(const TcpStoreServerStats&)> pred) {
    return ncclsmoke::testing::wait_until(
        [&] { return pred(server_->stats()); },
        std::chrono::duration_cast<std::chrono::milliseconds>(kIo));
  }
  static std::vector<std::string> keys(const std::string& prefix, std::size_t n,
                                       std::size_t pad = 0) {
    std::vector<std::string> out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
      out.push_back(prefix + std::to_string(i) + std::string(pad, 'k'));
    return out;
  }
  const StoreFullHit* full_hit(const std::string& limit) {
    full_ = server_->stats().full;
    for (const auto& h : full_)
      if (h.limit == limit) return &h;
    return nullptr;
  }

  std::vector<StoreFullHit> full_;
};

TEST_F(StoreStrangerTest, WaitRegistrationsCountAgainstTheTotalBudget) {
  constexpr std::size_t kBudget = 16 << 20;
  start([](TcpStoreServerOptions& o) { o.max_total_bytes = kBudget; });
  // Registrations of 400-byte keys cost 928 bytes each: 8,000 fit, 40,000 (37 MB) do not.
  Raw small(port());
  small.send(req(Op::wait, keys("/w", 8000, 400)));
  ASSERT_TRUE(small.alive());
  // stats() is published at the end of the loop's turn, which may come after the PING's reply.
  EXPECT_TRUE(stats_reach([](const auto& s) { return s.registered_bytes >= 8000u * 928; }))
      << server_->stats().registered_bytes;
  Raw big(port());
  big.send(req(Op::wait, keys("/x", 40000, 400)));
  EXPECT_TRUE(big.closed_within(kIo));
  EXPECT_NE(log_.wait_for({big.local(), "WAIT", "would exceed the total memory budget",
                           "WAIT/WATCH_KEY registrations", "--max-total-bytes"}),
            "")
      << log_.all();
  // Its partial registrations left with it; the small waiter's stay, within the budget.
  std::size_t small_cost = 0;
  for (const auto& k : keys("/w", 8000, 400)) small_cost += detail::registration_bytes(k.size());
  EXPECT_TRUE(stats_reach([&](const auto& s) { return s.registered_bytes == small_cost; }))
      << server_->stats().registered_bytes << " != " << small_cost;
  auto st = server_->stats();
  EXPECT_LE(st.registered_bytes + st.stored_bytes + st.buffered_request_bytes, kBudget);
  const StoreFullHit* hit = full_hit("max_total_bytes");
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->flag, "--max-total-bytes");
  EXPECT_EQ(hit->value, kBudget);
  EXPECT_EQ(hit->last_peer, big.local());
  expect_served("after-wait-flood");
  // The small waiter is still answered when its keys come.
  Raw setter(port());
  std::vector<std::string> ks = keys("/w", 8000, 400);
  setter.send(req(Op::multi_set, ks, std::vector<std::string>(ks.size(), "v")));
  EXPECT_EQ(small.read_reply(req(Op::wait, {"/w0"})).byte, wire::kWaitStop);
  EXPECT_TRUE(stats_reach([](const auto& s) { return s.registered_bytes == 0; }));
}

TEST_F(StoreStrangerTest, PendingKeysCapClosesTheConnectionNamingTheFlag) {
  start([](TcpStoreServerOptions& o) { o.max_pending_keys = 1000; });
  Raw ok(port());
  ok.send(req(Op::wait, keys("/ok", 1000)));
  ASSERT_TRUE(ok.alive());
  Raw waiter(port());
  waiter.send(req(Op::wait, keys("/too-many", 1001)));
  EXPECT_TRUE(waiter.closed_within(kIo));
  EXPECT_NE(log_.wait_for({waiter.local(), "WAIT would register 1001 more key(s)",
                           "max_pending_keys 1000 (--max-pending-keys)"}),
            "")
      << log_.all();
  // WATCH_KEY registrations (legacy) add up one key at a time.
  Raw watcher(port(), Dialect::legacy);
  std::string packet;
  for (int i = 0; i < 1001; ++i)
    wire::encode_request(Dialect::legacy, req(Op::watch_key, {"/watch" + std::to_string(i)}),
                         packet);
  watcher.send_raw(packet);
  EXPECT_TRUE(watcher.closed_within(kIo));
  EXPECT_NE(log_.wait_for({watcher.local(), "WATCH_KEY would register 1 more key(s) for this "
                                            "connection (1000 pending",
                           "--max-pending-keys"}),
            "")
      << log_.all();
  // A per-connection cap is not the store being full.
  EXPECT_EQ(full_hit("max_total_bytes"), nullptr);
  EXPECT_TRUE(ok.alive());
  expect_served("after-cap");
}

TEST_F(StoreStrangerTest, RequestsOf128KiKeysRunInSlicesAndAnswerRight) {
  constexpr std::size_t kKeys = 128 * 1024;  // torch's most per request
  start([](TcpStoreServerOptions& o) { o.max_pending_keys = kKeys; });
  auto ks = keys("/s", kKeys);
  Raw waiter(port());
  waiter.send(req(Op::wait, ks));
  Raw other(port());
  EXPECT_EQ(other.call(req(Op::check, ks)).byte, wire::kCheckNotReady);
  // Every key but the last: the waiter is not answered yet.
  std::vector<std::string> most(ks.begin(), ks.end() - 1);
  std::vector<std::string> values;
  values.reserve(kKeys);
  for (std::size_t i = 0; i < kKeys; ++i) values.push_back("v" + std::to_string(i));
  other.send(req(Op::multi_set, most, std::vector<std::string>(values.begin(), values.end() - 1)));
  EXPECT_EQ(other.call(req(Op::check, most)).byte, wire::kCheckReady);
  EXPECT_THROW(waiter.read_reply(req(Op::wait, {"/s0"}), 200ms), std::runtime_error);
  other.send(req(Op::set, {ks.back()}, {values.back()}));
  EXPECT_EQ(waiter.read_reply(req(Op::wait, {"/s0"})).byte, wire::kWaitStop);
  auto got = other.call(req(Op::multi_get, ks));
  ASSERT_EQ(got.values.size(), kKeys);
  EXPECT_EQ(got.values.front(), "v0");
  EXPECT_EQ(got.values[kKeys / 2], values[kKeys / 2]);
  EXPECT_EQ(got.values.back(), values.back());
  EXPECT_TRUE(stats_reach([](const auto& s) { return s.registered_bytes == 0; }))
      << server_->stats().registered_bytes;
  EXPECT_TRUE(waiter.alive());
}

TEST_F(StoreStrangerTest, IdleConnectionIsClosedAtItsDeadlineActiveOnesStay) {
  start([](TcpStoreServerOptions& o) { o.idle_timeout = 300ms; });
  Raw idle(port(), Dialect::legacy);  // connects, sends nothing
  Raw active(port());  // VALIDATE + PING: past its first request (after `idle`: vouches for none)
  EXPECT_TRUE(idle.closed_within(kIo));
  EXPECT_NE(log_.wait_for({idle.local(), "idle: no complete request", "idle timeout 0.3s",
                           "--idle-timeout"}),
            "")
      << log_.all();
  EXPECT_EQ(server_->stats().closed_idle, 1u);
  EXPECT_TRUE(active.alive());
}

TEST_F(StoreStrangerTest, Torch113WatchSocketIsVouchedForByItsMainConnection) {
  start([](TcpStoreServerOptions& o) { o.idle_timeout = 300ms; });
  // torch 1.13: the main socket does its first request (ADD), then opens the WATCH_KEY socket.
  Raw main_socket(port(), Dialect::legacy);
  EXPECT_EQ(main_socket.call(req(Op::add, {"/init"}, {}, 1)).number, 1);
  Raw watch_socket(port(), Dialect::legacy);
  Raw stranger(port(), Dialect::legacy);  // nobody left to vouch for it
  EXPECT_TRUE(stranger.closed_within(kIo));
  EXPECT_TRUE(stats_reach([](const auto& s) { return s.closed_idle == 1; }));
  EXPECT_EQ(watch_socket.call(req(Op::watch_key, {"/init"})).byte, 3);
  EXPECT_EQ(main_socket.call(req(Op::add, {"/init"}, {}, 1)).number, 2);
}

TEST_F(StoreStrangerTest, FullServerShedsTheOldestIdleStrangerBeforeRefusing) {
  start([](TcpStoreServerOptions& o) {
    o.max_connections = 8;
    o.reserved_connections = 2;
  });
  // Strangers may hold 8 - 2 slots: the 7th sheds the 1st.
  std::vector<std::unique_ptr<Raw>> idle;
  for (int i = 0; i < 7; ++i) idle.push_back(std::make_unique<Raw>(port(), Dialect::legacy));
  EXPECT_TRUE(idle[0]->closed_within(kIo));
  EXPECT_NE(log_.wait_for({idle[0]->local(), "shed to make room", "max_connections 8",
                           "--max-connections", "2 kept for the job's ranks"}),
            "")
      << log_.all();
  // The job's ranks (past their first request) find room however many strangers came.
  std::vector<std::unique_ptr<Raw>> ranks;
  for (int i = 0; i < 8; ++i) ranks.push_back(std::make_unique<Raw>(port()));
  for (auto& r : ranks) EXPECT_TRUE(r->alive());
  EXPECT_TRUE(stats_reach([](const auto& s) { return s.shed_idle == 7 && s.open_connections == 8; }));
  EXPECT_EQ(full_hit("max_connections"), nullptr);
  // Full of connections past their first request: the next one is recorded, and may only read
  // (the status key says why the store is full); a write closes it.
  Raw late(port(), Dialect::legacy);
  EXPECT_NE(log_.wait_for({"connection from " + late.local(), "may only read", "max_connections 8",
                           "--max-connections"}),
            "")
      << log_.all();
  const StoreFullHit* hit = full_hit("max_connections");
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->flag, "--max-connections");
  EXPECT_EQ(hit->value, 8u);
  EXPECT_EQ(hit->in_use, 8u);
  EXPECT_EQ(hit->last_peer, late.local());
  auto status = parse_store_full_status(late.call(req(Op::get, {kStoreFullWireKey})).values.at(0));
  ASSERT_TRUE(status.has_value());
  ASSERT_EQ(status->size(), 1u);
  EXPECT_EQ(status->at(0).flag, "--max-connections");
  EXPECT_EQ(status->at(0).value, 8u);
  EXPECT_EQ(status->at(0).in_use, 8u);
  late.send(req(Op::set, {"/x"}, {"v"}));
  EXPECT_TRUE(late.closed_within(kIo));
  EXPECT_NE(log_.wait_for({"SET on a connection accepted past max_connections 8", "may only read"}),
            "")
      << log_.all();
  // At most kStatusOnlyConnections read-only ones: the next sheds the oldest.
  std::vector<std::unique_ptr<Raw>> readers;
  for (std::size_t i = 0; i <= kStatusOnlyConnections; ++i)
    readers.push_back(std::make_unique<Raw>(port()));
  EXPECT_TRUE(readers[0]->closed_within(kIo));
  for (std::size_t i = 1; i < readers.size(); ++i) EXPECT_TRUE(readers[i]->alive());
  for (auto& r : ranks) EXPECT_TRUE(r->alive());
}

TEST_F(StoreStrangerTest, KeyLimitIsRecordedForTheJob) {
  start([](TcpStoreServerOptions& o) { o.max_stored_keys = 10; });
  Raw a(port());
  for (int i = 0; i < 10; ++i) a.send(req(Op::set, {"/k" + std::to_string(i)}, {"v"}));
  EXPECT_EQ(a.call(req(Op::num_keys)).number, 10);
  EXPECT_EQ(full_hit("max_stored_keys"), nullptr);
  a.send(req(Op::set, {"/k10"}, {"v"}));
  EXPECT_TRUE(a.closed_within(kIo));
  ASSERT_TRUE(stats_reach([](const auto& s) { return !s.full.empty(); }));
  const StoreFullHit* hit = full_hit("max_stored_keys");
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->flag, "--max-keys");
  EXPECT_EQ(hit->value, 10u);
  EXPECT_EQ(hit->in_use, 10u);
  EXPECT_EQ(hit->refusals, 1u);
  EXPECT_EQ(hit->last_peer, a.local());
  // A job served apart (`store serve`) reads the same from the status key, which takes no key
  // slot and no client may write.
  Raw b(port());
  std::string text;
  ncclsmoke::testing::wait_until(
      [&] {
        if (b.call(req(Op::check, {kStoreFullWireKey})).byte != wire::kCheckReady) return false;
        text = b.call(req(Op::get, {kStoreFullWireKey})).values.at(0);
        return !text.empty();
      },
      std::chrono::seconds(5), std::chrono::milliseconds(10));
  auto status = parse_store_full_status(text);
  ASSERT_TRUE(status.has_value()) << text;
  ASSERT_EQ(status->size(), 1u);
  EXPECT_EQ(status->at(0).limit, "max_stored_keys");
  EXPECT_EQ(status->at(0).flag, "--max-keys");
  EXPECT_EQ(status->at(0).value, 10u);
  EXPECT_EQ(status->at(0).refusals, 1u);
  EXPECT_EQ(status->at(0).last_peer, a.local());
  EXPECT_EQ(b.call(req(Op::num_keys)).number, 10);
  b.send(req(Op::set, {kStoreFullWireKey}, {R"({"store_full":[]})"}));
  EXPECT_TRUE(b.closed_within(kIo));
  EXPECT_NE(log_.wait_for({"the store's own status key"}), "") << log_.all();
  Raw c(port());
  EXPECT_EQ(c.call(req(Op::get, {kStoreFullWireKey})).values.at(0), text);
}

// Big tables grow without a one-shot rehash, and every entry stays findable while they move.
TEST(IncrementalHashTest, GrowsInStepsAndFindsEveryEntry) {
  detail::IncrementalHash<std::unordered_map<std::string, int>> m;
  constexpr int kN = 50000;
  bool migrated = false;
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(m.try_emplace("k" + std::to_string(i), i).second);
    migrated = migrated || m.migrating();
    if (i % 997 == 0) {
      for (int j = 0; j <= i; j += 101) ASSERT_NE(m.find("k" + std::to_string(j)), nullptr) << j;
    }
  }
  EXPECT_TRUE(migrated);
  EXPECT_EQ(m.size(), static_cast<std::size_t>(kN));
  EXPECT_FALSE(m.try_emplace("k7", 0).second);
  EXPECT_EQ(m.find("k7")->second, 7);
  for (int i = 0; i < kN; i += 2) ASSERT_EQ(m.erase("k" + std::to_string(i)), 1u);
  std::size_t seen = 0;
  m.for_each([&](const auto&) { ++seen; });
  EXPECT_EQ(seen, static_cast<std::size_t>(kN / 2));
  EXPECT_EQ(m.find("k2"), nullptr);
  EXPECT_EQ(m.find("k3")->second, 3);
}

// Each event-loop turn's CPU time is measured beside its wall time (a turn stretched by a loaded
// machine is told apart from one that worked long).
TEST_F(StoreStrangerTest, TurnCpuTimeIsReportedBesideWallTime) {
  start([](TcpStoreServerOptions&) {});
  for (int i = 0; i < 20; ++i) expect_served("t" + std::to_string(i));
  auto s = server_->stats();
  EXPECT_GT(s.longest_turn_us, 0u);
  EXPECT_GE(s.longest_turn_cpu_us, s.longest_turn_its_cpu_us);
  // The CPU clock is read just after the wall clock: a little over the wall time at most.
  EXPECT_LE(s.longest_turn_its_cpu_us, s.longest_turn_us + 1000);
  EXPECT_LE(s.slow_cpu_turns, s.slow_turns);
}

// A big WAIT cancelled is withdrawn later (retire); a new WAIT of the same connection on the same
// keys keeps its index entries and is answered.
TEST(KeyspaceRetireTest, CancelledBigWaitDoesNotUnregisterTheNextOne) {
  std::vector<std::pair<detail::ConnId, std::string>> sent;
  detail::ServerKeyspace ks([&](detail::ConnId c, std::string&& b) { sent.emplace_back(c, b); });
  wire::Request wait;
  wait.op = Op::wait;
  for (int i = 0; i < 1000; ++i) wait.keys.push_back("/w" + std::to_string(i));
  ASSERT_FALSE(ks.execute(1, Dialect::modern, wait));
  wire::Request cancel;
  cancel.op = Op::cancel_wait;
  ASSERT_FALSE(ks.execute(1, Dialect::modern, cancel));
  EXPECT_TRUE(ks.retiring());
  ASSERT_FALSE(ks.execute(1, Dialect::modern, wait));
  ks.retire(SIZE_MAX);
  EXPECT_FALSE(ks.retiring());
  EXPECT_EQ(ks.registrations(1), 1000u);
  sent.clear();
  wire::Request set;
  set.op = Op::multi_set;
  set.keys = wait.keys;
  set.values.assign(wait.keys.size(), "v");
  ASSERT_FALSE(ks.execute(2, Dialect::modern, set));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].first, 1u);
  EXPECT_EQ(sent[0].second, std::string(1, static_cast<char>(wire::kWaitStop)));
  EXPECT_EQ(ks.registered_bytes(), 0u);
}

// A WATCH_KEY notification of a big value refers to the stored value instead of copying it, and
// what was queued stays right while the value grows by later APPENDs or is replaced.
TEST(KeyspaceRetireTest, BigWatchNotificationsShareTheStoredValueAndStayRight) {
  using Parts = std::vector<detail::SharedBytes>;
  std::vector<std::pair<detail::ConnId, std::string>> sent;
  std::vector<std::pair<detail::ConnId, Parts>> shared;
  detail::ServerKeyspace ks([&](detail::ConnId c, std::string&& b) { sent.emplace_back(c, b); },
                            {}, [&](detail::ConnId c, const Parts& p) { shared.emplace_back(c, p); });
  wire::Request watch;
  watch.op = Op::watch_key;
  watch.keys = {"/big"};
  ASSERT_FALSE(ks.execute(1, Dialect::legacy, watch));
  const std::string a(100 * 1024, 'a'), b(100 * 1024, 'b');
  auto run = [&](Op op, std::vector<std::string> values) {
    wire::Request r;
    r.op = op;
    r.keys = {"/big"};
    r.values = std::move(values);
    ASSERT_FALSE(ks.execute(2, Dialect::modern, std::move(r)));
  };
  auto message = [](uint8_t type, std::string_view old_value, std::string_view new_value) {
    std::string m;
    wire::put_u8(m, type);
    wire::put_bytes(m, "/big");
    wire::put_bytes(m, old_value);
    wire::put_bytes(m, new_value);
    return m;
  };
  auto flat = [](const Parts& parts) {
    std::string m;
    for (const auto& p : parts) m.append(p.view());
    return m;
  };
  run(Op::set, {a});
  run(Op::append, {b});
  run(Op::append, {"c"});
  run(Op::set, {"small"});
  ASSERT_EQ(shared.size(), 4u);
  for (const auto& [conn, parts] : shared) EXPECT_EQ(conn, 1u);
  // Read only now: after the value grew twice and was replaced.
  EXPECT_EQ(flat(shared[0].second), message(1, "", a));
  EXPECT_EQ(flat(shared[1].second), message(4, a, a + b));
  EXPECT_EQ(flat(shared[2].second), message(4, a + b, a + b + "c"));
  EXPECT_EQ(flat(shared[3].second), message(0, a + b + "c", "small"));
  // The APPEND's old and new values are the same stored string, referred to twice.
  std::size_t big = 0;
  for (const auto& p : shared[1].second)
    if (p.len >= detail::ServerKeyspace::kShareFrom) {
      ++big;
      EXPECT_EQ(p.owner, shared[1].second.back().owner);
    }
  EXPECT_EQ(big, 2u);
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
