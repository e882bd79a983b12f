// The job token's decorator (rendezvous/signed_store.h) over a real store: what it signs, what it
// refuses and how it reports a refusal.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "rendezvous/memory_store.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/signed_store.h"
#include "rendezvous/tcp_client.h"
#include "rendezvous/tcp_server.h"
#include "tests/wait_until.h"

namespace ncclsmoke::rendezvous {
namespace {

using namespace std::chrono_literals;

struct SignedPair {
  std::shared_ptr<MemoryStore> raw = std::make_shared<MemoryStore>();
  std::shared_ptr<TamperSink> sink = std::make_shared<TamperSink>();
  SignedStore store{raw, "s3cret-token", sink};
};

TEST(SignedStore, RoundTripsEveryWrite) {
  SignedPair p;
  p.store.set("a", "value-a");
  EXPECT_EQ(p.store.get("a", deadline_after(1s)), "value-a");
  // What the server holds is not the bare value: it carries the MAC.
  EXPECT_NE(p.raw->get("a", deadline_after(1s)), "value-a");
  p.store.multi_set({"m1", "m2"}, {"one", std::string("t\0o", 3)});
  EXPECT_EQ(p.store.multi_get({"m2", "m1"}, deadline_after(1s)),
            (std::vector<std::string>{std::string("t\0o", 3), "one"}));
  // compare_set: create, then swap against the (signed) expected value.
  EXPECT_EQ(p.store.compare_set("c", "", "first"), "first");
  EXPECT_EQ(p.store.compare_set("c", "first", "second"), "second");
  EXPECT_EQ(p.store.compare_set("c", "not-it", "third"), "second");
  EXPECT_EQ(p.store.get("c", deadline_after(1s)), "second");
  // The empty value is a value too.
  p.store.set("e", "");
  EXPECT_EQ(p.store.get("e", deadline_after(1s)), "");
  EXPECT_TRUE(p.sink->snapshot().empty());
}

TEST(SignedStore, RefusesAnUnsignedValueAndRecordsItOnce) {
  SignedPair p;
  p.raw->set("verdict/1", R"({"forged":true})");
  auto t0 = std::chrono::steady_clock::now();
  try {
    p.store.get("verdict/1", deadline_after(300ms));
    FAIL() << "an unsigned value was accepted";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::timed_out);
    EXPECT_NE(std::string(e.what()).find("'verdict/1'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("failed verification"), std::string::npos) << e.what();
  }
  // It waited for a verified value until the deadline, not one poll.
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
  EXPECT_THROW(p.store.get("verdict/1", deadline_after(100ms)), StoreError);
  EXPECT_THROW(p.store.multi_get({"verdict/1"}, deadline_after(100ms)), StoreError);
  auto seen = p.sink->snapshot();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].key, "verdict/1");
  EXPECT_EQ(seen[0].why, "not signed");
}

TEST(SignedStore, AVerifiedValueThatArrivesBeforeTheDeadlineWins) {
  SignedPair p;
  p.raw->set("k", "forged");
  std::thread writer([&] {
    ncclsmoke::testing::pause_for(150ms);  // late on purpose: the get waits past the forgery
    p.store.set("k", "genuine");  // the holder of the token overwrites the forgery
  });
  EXPECT_EQ(p.store.get("k", deadline_after(5s)), "genuine");
  writer.join();
  EXPECT_EQ(p.sink->snapshot().size(), 1u);
}

TEST(SignedStore, RefusesAValueReplayedUnderAnotherKey) {
  SignedPair p;
  p.store.set("sweep/0", "figures of rank 0");
  // A stranger copies rank 0's signed value to rank 2's key, byte for byte.
  p.raw->set("sweep/2", p.raw->get("sweep/0", deadline_after(1s)));
  EXPECT_THROW(p.store.get("sweep/2", deadline_after(100ms)), StoreError);
  ASSERT_EQ(p.sink->snapshot().size(), 1u);
  EXPECT_EQ(p.sink->snapshot()[0].key, "sweep/2");
  EXPECT_EQ(p.sink->snapshot()[0].why, "signed with another token or under another key");
  EXPECT_EQ(p.store.get("sweep/0", deadline_after(1s)), "figures of rank 0");
}

TEST(SignedStore, BindsTheFullKeyBelowThePrefixes) {
  auto raw = std::make_shared<MemoryStore>();
  auto sink = std::make_shared<TamperSink>();
  auto signed_store = std::make_shared<SignedStore>(raw, "tok", sink);
  PrefixStore job_a("ncclsmoke/job-a/0", signed_store), job_b("ncclsmoke/job-b/0", signed_store);
  job_a.set("verdict/1", "a's verdict");
  // The same key in another job's namespace, replayed: refused, and named by its full key.
  raw->set("ncclsmoke/job-b/0/verdict/1", raw->get("ncclsmoke/job-a/0/verdict/1", deadline_after(1s)));
  EXPECT_THROW(job_b.get("verdict/1", deadline_after(100ms)), StoreError);
  ASSERT_EQ(sink->snapshot().size(), 1u);
  EXPECT_EQ(sink->snapshot()[0].key, "ncclsmoke/job-b/0/verdict/1");
}

TEST(SignedStore, RefusesAValueSignedWithAnotherToken) {
  auto raw = std::make_shared<MemoryStore>();
  auto sink = std::make_shared<TamperSink>();
  SignedStore ours(raw, "our-token", sink), theirs(raw, "their-token", nullptr);
  theirs.set("join/roster", "their roster");
  EXPECT_THROW(ours.get("join/roster", deadline_after(100ms)), StoreError);
  // compare_set over a value that fails: nothing verified is there, and the key is named.
  theirs.set("join/rank/1", "their claim");
  EXPECT_EQ(ours.compare_set("join/rank/1", "", "our claim"), "");
  auto seen = sink->snapshot();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].key, "join/roster");
  EXPECT_EQ(seen[1].key, "join/rank/1");
  const auto stored = raw->get("join/roster", deadline_after(1s));
  EXPECT_FALSE(verify_store_value("our-token", "join/roster", stored).has_value());
  EXPECT_EQ(verify_store_value("their-token", "join/roster", stored).value_or(""), "their roster");
}

TEST(SignedStore, WithoutATokenPassesEverythingThrough) {
  auto raw = std::make_shared<MemoryStore>();
  auto sink = std::make_shared<TamperSink>();
  SignedStore plain(raw, "", sink);
  EXPECT_FALSE(plain.authenticated());
  plain.set("a", "1");
  EXPECT_EQ(raw->get("a", deadline_after(1s)), "1");
  raw->set("b", "written by anyone");
  EXPECT_EQ(plain.get("b", deadline_after(1s)), "written by anyone");
  plain.append("b", "!");
  EXPECT_EQ(raw->get("b", deadline_after(1s)), "written by anyone!");
  EXPECT_EQ(plain.compare_set("c", "", "x"), "x");
  EXPECT_EQ(raw->get("c", deadline_after(1s)), "x");
  EXPECT_TRUE(sink->snapshot().empty());
}

TEST(SignedStore, CountersAndKeyOperationsPassThroughAppendIsRefused) {
  SignedPair p;
  EXPECT_EQ(p.store.add("join/count", 2), 2);
  EXPECT_EQ(p.raw->add("join/count", 0), 2);  // the server's own integer: not signed
  p.store.set("x", "1");
  EXPECT_TRUE(p.store.check({"x", "join/count"}));
  p.store.wait({"x"}, deadline_after(1s));
  EXPECT_TRUE(p.store.delete_key("x"));
  EXPECT_FALSE(p.store.check({"x"}));
  EXPECT_EQ(p.store.num_keys(), p.raw->num_keys());
  EXPECT_THROW(p.store.append("x", "more"), StoreError);
}

TEST(SignedStore, WorksOverTheTcpStore) {
  TcpStoreServerOptions so;
  so.host = "127.0.0.1";
  so.log = [](const std::string&) {};
  auto server = TcpStoreServer::start(so);
  TcpStoreOptions opt;
  opt.host = "127.0.0.1";
  opt.port = server->port();
  opt.op_timeout = 5s;
  auto writer = TcpStore::connect(opt, deadline_after(5s));
  auto reader = TcpStore::connect(opt, deadline_after(5s));
  auto stranger = TcpStore::connect(opt, deadline_after(5s));
  auto sink = std::make_shared<TamperSink>();
  SignedStore w(*writer, "tok", nullptr), r(*reader, "tok", sink);
  w.set("ncclsmoke/j/0/mesh/addr/1", "127.0.0.1:4000");
  EXPECT_EQ(r.get("ncclsmoke/j/0/mesh/addr/1", deadline_after(2s)), "127.0.0.1:4000");
  stranger->set("ncclsmoke/j/0/mesh/addr/1", "127.0.0.1:6666");
  EXPECT_THROW(r.multi_get({"ncclsmoke/j/0/mesh/addr/1"}, deadline_after(200ms)), StoreError);
  ASSERT_EQ(sink->snapshot().size(), 1u);
  EXPECT_EQ(sink->snapshot()[0].key, "ncclsmoke/j/0/mesh/addr/1");
  server->stop();
}

TEST(JobToken, IsFreshRandomHex) {
  auto a = make_job_token(), b = make_job_token();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
