// One contract suite, run against every Store implementation (gloo's pattern): memory, prefix,
// and our TCP client against our TCP server in both dialects.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "rendezvous/memory_store.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/tcp_client.h"
#include "rendezvous/tcp_server.h"
#include "tests/wait_until.h"

namespace ncclsmoke::rendezvous {
namespace {

using namespace std::chrono_literals;

// A backend under test hands out any number of clients that share one keyspace.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::shared_ptr<Store> client() = 0;
};

class MemoryBackend : public Backend {
 public:
  std::shared_ptr<Store> client() override { return store_; }

 private:
  std::shared_ptr<MemoryStore> store_ = std::make_shared<MemoryStore>();
};

class PrefixBackend : public Backend {
 public:
  std::shared_ptr<Store> client() override {
    return std::make_shared<PrefixStore>("pg0", inner_);
  }

 private:
  std::shared_ptr<MemoryStore> inner_ = std::make_shared<MemoryStore>();
};

class TcpBackend : public Backend {
 public:
  explicit TcpBackend(wire::Dialect d) : dialect_(d) {
    TcpStoreServerOptions opt;
    opt.host = "127.0.0.1";
    opt.log = [](const std::string&) {};
    server_ = TcpStoreServer::start(opt);
  }
  ~TcpBackend() override { server_->stop(); }
  std::shared_ptr<Store> client() override {
    TcpStoreOptions opt;
    opt.host = "127.0.0.1";
    opt.port = server_->port();
    opt.dialect = dialect_;
    opt.op_timeout = 5s;
    return TcpStore::connect(opt, deadline_after(5s));
  }

 private:
  wire::Dialect dialect_;
  std::unique_ptr<TcpStoreServer> server_;
};

struct BackendCase {
  std::string name;
  std::function<std::unique_ptr<Backend>()> make;
};

class StoreContract : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override {
    backend_ = GetParam().make();
    store_ = backend_->client();
  }
  std::unique_ptr<Backend> backend_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreContract, SetThenGetReturnsValue) {
  store_->set("a", "1");
  EXPECT_EQ(store_->get("a", deadline_after(2s)), "1");
  store_->set("a", "two");
  EXPECT_EQ(store_->get("a", deadline_after(2s)), "two");
}

TEST_P(StoreContract, ValuesAreBinarySafe) {
  std::string v("\0\x01\xff\n", 4);
  std::string k("bin\0key", 7);
  store_->set(k, v);
  EXPECT_EQ(store_->get(k, deadline_after(2s)), v);
  store_->set("empty", "");
  EXPECT_EQ(store_->get("empty", deadline_after(2s)), "");
}

TEST_P(StoreContract, AddCountsFromZeroAndStoresDecimal) {
  EXPECT_EQ(store_->add("n", 1), 1);
  EXPECT_EQ(store_->add("n", 4), 5);
  EXPECT_EQ(store_->add("n", -7), -2);
  EXPECT_EQ(store_->get("n", deadline_after(2s)), "-2");
}

TEST_P(StoreContract, AddOnNonNumericValueIsAnError) {
  store_->set("text", "hello");
  EXPECT_THROW(store_->add("text", 1), StoreError);
}

TEST_P(StoreContract, CheckDoesNotBlock) {
  EXPECT_FALSE(store_->check({"x"}));
  store_->set("x", "");
  EXPECT_TRUE(store_->check({"x"}));
  EXPECT_FALSE(store_->check({"x", "y"}));
}

TEST_P(StoreContract, WaitReturnsWhenPresentAndTimesOutWhenNot) {
  store_->set("here", "1");
  store_->wait({"here"}, deadline_after(2s));
  auto start = Clock::now();
  try {
    store_->wait({"here", "never"}, deadline_after(300ms));
    FAIL() << "wait did not time out";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::timed_out) << e.what();
  }
  auto waited = Clock::now() - start;
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 3s);
}

TEST_P(StoreContract, StoreIsUsableAfterAWaitTimesOut) {
  EXPECT_THROW(store_->wait({"never"}, deadline_after(100ms)), StoreError);
  store_->set("after", "ok");
  EXPECT_EQ(store_->get("after", deadline_after(2s)), "ok");
  EXPECT_EQ(store_->add("after/n", 3), 3);
}

TEST_P(StoreContract, WaitWakesEveryWaiterWhenKeyIsSet) {
  constexpr int kWaiters = 4;
  std::vector<std::shared_ptr<Store>> clients;
  for (int i = 0; i < kWaiters; ++i) clients.push_back(backend_->client());
  std::atomic<int> woke{0};
  std::vector<std::thread> threads;
  for (auto& c : clients)
    threads.emplace_back([&, c] {
      c->wait({"go"}, deadline_after(5s));
      ++woke;
    });
  ncclsmoke::testing::pause_for(50ms);  // a check that no waiter wakes early: no event to wait on
  EXPECT_EQ(woke.load(), 0);
  store_->set("go", "1");
  for (auto& t : threads) t.join();
  EXPECT_EQ(woke.load(), kWaiters);
}

TEST_P(StoreContract, GetBlocksUntilSetByAnotherClient) {
  auto other = backend_->client();
  std::thread setter([&] {
    ncclsmoke::testing::pause_for(100ms);  // late on purpose: the get must block until the set
    other->set("late", "value");
  });
  EXPECT_EQ(store_->get("late", deadline_after(5s)), "value");
  setter.join();
}

TEST_P(StoreContract, CompareSetFollowsTorchSemantics) {
  EXPECT_EQ(store_->compare_set("cs", "", "first"), "first");     // missing + empty: create
  EXPECT_EQ(store_->compare_set("cs", "wrong", "x"), "first");     // mismatch: unchanged
  EXPECT_EQ(store_->compare_set("cs", "first", "second"), "second");
  EXPECT_EQ(store_->compare_set("absent", "exp", "d"), "exp");     // missing + non-empty
  EXPECT_FALSE(store_->check({"absent"}));
}

TEST_P(StoreContract, DeleteKeyReportsWhetherItExisted) {
  store_->set("d", "1");
  EXPECT_TRUE(store_->delete_key("d"));
  EXPECT_FALSE(store_->delete_key("d"));
  EXPECT_FALSE(store_->check({"d"}));
}

TEST_P(StoreContract, NumKeysCountsKeys) {
  int64_t base = store_->num_keys();
  store_->set("k1", "1");
  store_->set("k2", "2");
  EXPECT_EQ(store_->num_keys(), base + 2);
  store_->delete_key("k1");
  EXPECT_EQ(store_->num_keys(), base + 1);
}

TEST_P(StoreContract, AppendCreatesThenConcatenates) {
  store_->append("log", "a");
  store_->append("log", "bc");
  EXPECT_EQ(store_->get("log", deadline_after(2s)), "abc");
}

TEST_P(StoreContract, MultiSetAndMultiGet) {
  store_->multi_set({"m1", "m2", "m3"}, {"1", "", "3"});
  auto v = store_->multi_get({"m3", "m1", "m2"}, deadline_after(2s));
  EXPECT_EQ(v, (std::vector<std::string>{"3", "1", ""}));
}

TEST_P(StoreContract, MultiGetTimesOutOnMissingKey) {
  store_->set("p", "1");
  EXPECT_THROW(store_->multi_get({"p", "q"}, deadline_after(200ms)), StoreError);
}

TEST_P(StoreContract, ConcurrentAddsFromManyClientsAreAtomic) {
  constexpr int kClients = 8, kAdds = 50;
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&] {
      auto c = backend_->client();
      for (int j = 0; j < kAdds; ++j) c->add("counter", 1);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(store_->add("counter", 0), kClients * kAdds);
}

INSTANTIATE_TEST_SUITE_P(
    AllStores, StoreContract,
    ::testing::Values(
        BackendCase{"memory", [] { return std::make_unique<MemoryBackend>(); }},
        BackendCase{"prefix", [] { return std::make_unique<PrefixBackend>(); }},
        BackendCase{"tcp_legacy",
                    [] { return std::make_unique<TcpBackend>(wire::Dialect::legacy); }},
        BackendCase{"tcp_modern",
                    [] { return std::make_unique<TcpBackend>(wire::Dialect::modern); }}),
    [](const auto& info) { return info.param.name; });

TEST(PrefixStore, JoinsKeysLikeTorch) {
  auto inner = std::make_shared<MemoryStore>();
  PrefixStore p("default_pg", inner);
  p.set("0", "id");
  EXPECT_TRUE(inner->check({"default_pg/0"}));
  PrefixStore nested("0", std::make_shared<PrefixStore>("default_pg", inner));
  nested.set("x", "1");
  EXPECT_TRUE(inner->check({"default_pg/0/x"}));
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
