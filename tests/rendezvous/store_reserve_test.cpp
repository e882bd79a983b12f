// The job's reserve (rendezvous/tcp_server_reserve.h): a stranger who fills the key table or the
// byte budget leaves room for the connections that claimed a rank, and writing under the job's
// key prefix does not make a stranger the job. The refusals stay recorded (STORE_FULL).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/join.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/signed_store.h"
#include "rendezvous/tcp_client.h"
#include "rendezvous/tcp_server.h"
#include "rendezvous/tcp_server_keyspace.h"
#include "rendezvous/tcp_server_reserve.h"
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
using wire::Op;

// The keys of a 4-rank job as the server sees them (torch's "/" + ncclsmoke/<job>/<restart>/).
const std::string kJob = "/ncclsmoke/reserve-job/0/";

class StoreReserveTest : public server_testing::ServerFixture {
 protected:
  bool stats_reach(std::function<bool(const TcpStoreServerStats&)> pred) {
    return ncclsmoke::testing::wait_until(
        [&] { return pred(server_->stats()); },
        std::chrono::duration_cast<std::chrono::milliseconds>(kIo));
  }
  std::optional<StoreFullHit> full_hit(const std::string& limit) {
    for (const auto& h : server_->stats().full)
      if (h.limit == limit) return h;
    return std::nullopt;
  }
  // A stranger's pipelined SETs of fresh keys (`value` each) until the server closes it; the
  // number of keys it then holds.
  int64_t flood(const std::string& value, int most) {
    Raw s(port());
    std::string batch;
    for (int i = 0; i < most; ++i) {
      wire::encode_request(wire::Dialect::modern,
                           req(Op::set, {"/flood/" + std::to_string(i)}, {value}), batch);
      if (batch.size() >= 64 * 1024 || i + 1 == most) {
        if (!s.send_raw(batch)) break;
        batch.clear();
      }
    }
    EXPECT_TRUE(s.closed_within(kIo)) << "the flood was never refused";
    Raw look(port());
    return look.call(req(Op::num_keys)).number;
  }
  // A rank's join as the server sees it: its pre-claim key(s), then its claim. True when the
  // claim created the key (the connection is the job's from then on).
  static bool join(Raw& r, int rank) {
    std::string me = std::to_string(rank);
    if (rank == 0) {
      r.send(req(Op::set, {"/ncclsmoke/owner"}, {R"({"job_id":"reserve-job"})"}));
      r.send(req(Op::set, {kJob + "run/id"}, {"20261205T000000Z-1"}));
    }
    r.send(req(Op::set, {kJob + "join/arrived/" + me}, {"token" + me}));
    if (rank == 0) r.send(req(Op::set, {kJob + "join/world_size"}, {"4"}));
    std::string identity = R"({"rank":)" + me + "}";
    auto got = r.call(req(Op::compare_set, {kJob + "join/rank/" + me}, {"", identity}));
    return got.values.at(0) == identity;
  }
  // What a rank writes after joining: ~`n` keys of a run (mesh, watch, transport, verdict).
  static void run_keys(Raw& r, int rank, int n, const std::string& value = "v") {
    for (int i = 0; i < n; ++i)
      r.send(req(Op::set, {kJob + "run-key/" + std::to_string(rank) + "/" + std::to_string(i)},
                 {value}));
  }

};

TEST(JoinKeyKind, ClaimAndPreClaimKeysAreTheJoinsExactKeys) {
  using detail::JoinKey;
  using detail::join_key_kind;
  EXPECT_EQ(join_key_kind("/ncclsmoke/job/0/join/rank/3"), JoinKey::claim);
  EXPECT_EQ(join_key_kind("/ncclsmoke/a/b/7/join/rank/16383"), JoinKey::claim);
  EXPECT_EQ(join_key_kind("/ncclsmoke/job/0/join/arrived/3"), JoinKey::pre_claim);
  EXPECT_EQ(join_key_kind("/ncclsmoke/job/0/join/world_size"), JoinKey::pre_claim);
  EXPECT_EQ(join_key_kind("/ncclsmoke/job/0/run/id"), JoinKey::pre_claim);
  EXPECT_EQ(join_key_kind("/ncclsmoke/owner"), JoinKey::pre_claim);
  // Anything else under the job's prefix, or a malformed rank, is nobody's claim.
  EXPECT_EQ(join_key_kind("/ncclsmoke/job/0/verdict/3"), JoinKey::none);
  EXPECT_EQ(join_key_kind("/ncclsmoke/job/0/join/here/3"), JoinKey::none);
  EXPECT_EQ(join_key_kind("/ncclsmoke/job/0/join/rank/"), JoinKey::none);
  EXPECT_EQ(join_key_kind("/ncclsmoke/job/0/join/rank/3x"), JoinKey::none);
  EXPECT_EQ(join_key_kind("/ncclsmoke//join/rank/3"), JoinKey::none);
  EXPECT_EQ(join_key_kind("/ncclsmoke/join/rank/3"), JoinKey::none);
  EXPECT_EQ(join_key_kind("/other/job/0/join/rank/3"), JoinKey::none);
  EXPECT_EQ(join_key_kind("/ncclsmoke/job/0/join/rank/12345678901"), JoinKey::none);
}

// With the job token known to the server (rank 0 hosting the store), a claim must carry the
// token's signature: a stranger that imitates the join without it stays a stranger (its writes
// stop short of the reserve), while a signed claim makes its connection the job's.
TEST_F(StoreReserveTest, WithATokenOnlyASignedClaimMakesAConnectionTheJobs) {
  const std::string token = make_job_token();
  start([&](TcpStoreServerOptions& o) {
    o.max_stored_keys = 1000;
    o.reserved_ranks = 4;
    o.claim_is_genuine = [token](const std::string& key, const std::string& value) {
      return verify_store_value(token, key.substr(1), value).has_value();
    };
  });
  EXPECT_EQ(flood("0123456789abcdef", 5000), 1000 - 256);
  const std::string claim_key = kJob + "join/rank/7";
  const std::string identity = R"({"rank":7})";

  // The forger's unsigned claim is a stranger's write: refused short of the reserve, like its
  // flood, and its connection is not the job's.
  Raw forger(port());
  forger.send(req(Op::compare_set, {claim_key}, {"", identity}));
  EXPECT_TRUE(forger.closed_within(kIo));
  EXPECT_EQ(server_->stats().job_connections, 0u);

  // A rank's claim, signed under the key as the client names it (no leading "/"), counts.
  Raw rank(port());
  const std::string key1 = kJob + "join/rank/1";
  const std::string signed_identity = sign_store_value(token, key1.substr(1), R"({"rank":1})");
  auto got = rank.call(req(Op::compare_set, {key1}, {"", signed_identity}));
  ASSERT_EQ(got.values.at(0), signed_identity);
  ASSERT_TRUE(stats_reach([](const auto& s) { return s.job_connections == 1; }));
  run_keys(rank, 1, 20);
  EXPECT_TRUE(rank.alive()) << log_.all();
}

TEST_F(StoreReserveTest, ClaimedRanksWriteTheirKeysWithTheTableFullOfAStranger) {
  // 4 ranks x 64 keys = 256 of 1000 keys are the job's.
  start([](TcpStoreServerOptions& o) {
    o.max_stored_keys = 1000;
    o.reserved_ranks = 4;
  });
  auto st = server_->stats();
  EXPECT_EQ(st.reserved_keys, 4 * detail::kReservedKeysPerRank);
  EXPECT_EQ(st.reserved_bytes, 4 * detail::kReservedBytesPerRank);

  // The stranger stops short of the reserve, and its refusal is recorded for the job.
  EXPECT_EQ(flood("0123456789abcdef", 5000), 1000 - 256);
  ASSERT_TRUE(stats_reach([](const auto& s) { return !s.full.empty(); }));
  auto hit = full_hit("max_stored_keys");
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->flag, "--max-keys");
  EXPECT_EQ(hit->value, 1000u);
  EXPECT_EQ(hit->job_refusals, 0u);  // only a stranger: the job had room
  EXPECT_NE(log_.wait_for({"key-count limit", "744 keys stored", "max_stored_keys 1000 (--max-keys)",
                           "256 are held for the job's claimed ranks (--reserved-ranks)"}),
            "")
      << log_.all();

  // Each of 4 ranks joins (rank 0: 4 keys and its claim, the others 1 and theirs: 11 keys) and
  // writes what a run writes (11 keys a rank measured for 4 ranks; 40 here).
  std::vector<std::unique_ptr<Raw>> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(std::make_unique<Raw>(port()));
    ASSERT_TRUE(join(*ranks.back(), r)) << "rank " << r;
  }
  for (int r = 0; r < 4; ++r) run_keys(*ranks[r], r, 40);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(ranks[r]->alive()) << "rank " << r << "\n" << log_.all();
  EXPECT_EQ(ranks[0]->call(req(Op::num_keys)).number, 744 + 11 + 4 * 40);
  ASSERT_TRUE(stats_reach([](const auto& s) { return s.job_connections == 4; }));
  EXPECT_EQ(server_->stats().job_keys, 11u + 4 * 40);

  // A stranger writing under the job's prefix (public: LIST, ncclsmoke/owner) is still a
  // stranger: refused, and recorded.
  Raw mimic(port());
  mimic.send(req(Op::set, {kJob + "verdict/1"}, {"forged"}));
  EXPECT_TRUE(mimic.closed_within(kIo));
  ASSERT_TRUE(stats_reach([](const auto& s) {
    for (const auto& h : s.full)
      if (h.limit == "max_stored_keys") return h.refusals >= 2;
    return false;
  }));
  EXPECT_EQ(full_hit("max_stored_keys")->last_peer, mimic.local());

  // The job may use the whole table, reserve and general pool, up to --max-keys itself.
  std::size_t left = 1000 - static_cast<std::size_t>(ranks[1]->call(req(Op::num_keys)).number);
  run_keys(*ranks[1], 100, static_cast<int>(left));
  ASSERT_TRUE(ranks[1]->alive()) << log_.all();
  EXPECT_EQ(ranks[1]->call(req(Op::num_keys)).number, 1000);
  ranks[1]->send(req(Op::set, {kJob + "one-too-many"}, {"v"}));
  EXPECT_TRUE(ranks[1]->closed_within(kIo));
  for (int r : {0, 2, 3}) EXPECT_TRUE(ranks[r]->alive());
  // That refusal was the job's own, and the status key says so too.
  ASSERT_TRUE(stats_reach([](const auto& s) {
    for (const auto& h : s.full)
      if (h.limit == "max_stored_keys") return h.job_refusals == 1 && h.refusals == 3;
    return false;
  }));
  std::string text;
  ASSERT_TRUE(ncclsmoke::testing::wait_until(
      [&] {
        text = ranks[0]->call(req(Op::get, {kStoreFullWireKey})).values.at(0);
        return text.find("\"job_refusals\":1") != std::string::npos;
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(kIo)))
      << text;
  auto status = parse_store_full_status(text);
  ASSERT_TRUE(status.has_value()) << text;
  EXPECT_EQ(status->at(0).job_refusals, 1u);
  EXPECT_EQ(status->at(0).refusals, 3u);
}

TEST_F(StoreReserveTest, BeforeItsClaimAConnectionTakesOnlyTheJoinsFewKeys) {
  start([](TcpStoreServerOptions& o) {
    o.max_stored_keys = 1000;
    o.reserved_ranks = 4;
  });
  ASSERT_EQ(flood("x", 5000), 744);
  // Not claimed yet: the join's own pre-claim keys come from the reserve, four at most ...
  Raw early(port());
  early.send(req(Op::set, {"/ncclsmoke/owner"}, {"o"}));
  for (const char* k : {"run/id", "join/world_size", "join/arrived/0"})
    early.send(req(Op::set, {kJob + k}, {"v"}));
  ASSERT_TRUE(early.alive()) << log_.all();
  early.send(req(Op::set, {kJob + "join/arrived/1"}, {"v"}));
  EXPECT_TRUE(early.closed_within(kIo));
  // ... and nothing else.
  Raw other(port());
  other.send(req(Op::set, {kJob + "join/here/0"}, {"v"}));
  EXPECT_TRUE(other.closed_within(kIo));
  // A claim makes the connection the job's: then it writes anything.
  Raw rank(port());
  EXPECT_TRUE(join(rank, 2));
  run_keys(rank, 2, 10);
  EXPECT_TRUE(rank.alive()) << log_.all();
}

TEST_F(StoreReserveTest, ByteBudgetKeepsTheReserveForClaimedRanks) {
  // 8 MiB budget; 4 ranks x 256 KiB = 1 MiB reserved. 32 KiB values (small items: no 7/8 cap).
  start([](TcpStoreServerOptions& o) {
    o.max_total_bytes = 8 << 20;
    o.reserved_ranks = 4;
  });
  std::string value(32 * 1024, 'b');
  int64_t stored = flood(value, 1000);
  EXPECT_GT(stored, 150);  // ~ (8 MiB - 1 MiB) / 32 KiB
  EXPECT_LT(stored, 8 * 1024 / 32 - 1024 / 32 + 2);
  ASSERT_TRUE(stats_reach([](const auto& s) { return !s.full.empty(); }));
  auto hit = full_hit("max_total_bytes");
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->flag, "--max-total-bytes");
  EXPECT_NE(log_.wait_for({"would exceed the total memory budget",
                           "held for the job's claimed ranks (--reserved-ranks)"}),
            "")
      << log_.all();
  // Four ranks store 192 KiB each (their verdicts) in the reserve.
  std::vector<std::unique_ptr<Raw>> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(std::make_unique<Raw>(port()));
    ASSERT_TRUE(join(*ranks.back(), r)) << "rank " << r << "\n" << log_.all();
    run_keys(*ranks.back(), r, 6, value);
  }
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(ranks[r]->alive()) << "rank " << r << "\n" << log_.all();
  ASSERT_TRUE(stats_reach([](const auto& s) { return s.job_keys == 11 + 4 * 6; }));
  auto job_bytes = server_->stats().job_bytes;
  EXPECT_GE(job_bytes, 4u * 6 * 32 * 1024);
  // A stranger overwriting a job's key takes it over (a key is the job's while the job wrote it
  // last): it leaves the job's count, so the reserve the stranger may not use grows back.
  Raw mimic(port());
  mimic.send(req(Op::set, {kJob + "run-key/0/0"}, {"m"}));
  EXPECT_TRUE(mimic.alive());
  ASSERT_TRUE(stats_reach([](const auto& s) { return s.job_keys == 11 + 4 * 6 - 1; }));
  EXPECT_EQ(server_->stats().job_bytes,
            job_bytes - (detail::kEntryOverhead + (kJob + "run-key/0/0").size() + value.size()));
  EXPECT_TRUE(ranks[0]->alive());
}

// End to end through the client stack the harness uses (TcpStore -> SignedStore -> prefixes):
// join_world of 4 ranks, then each posts its keys, with the table full of a stranger's keys.
TEST_F(StoreReserveTest, AJoinAndItsPostsPassBesideAFullTable) {
  start([](TcpStoreServerOptions& o) {
    o.max_stored_keys = 2000;
    o.reserved_ranks = 4;
  });
  ASSERT_EQ(flood("x", 5000), 2000 - 256);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  std::vector<std::string> errors(4);
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      try {
        TcpStoreOptions opt;
        opt.port = port();
        opt.op_timeout = 10s;
        auto client = TcpStore::connect(opt, deadline_after(10s));
        auto sink = std::make_shared<TamperSink>();
        auto signed_store = std::make_shared<SignedStore>(*client, "token-of-the-job", sink);
        PrefixStore store("reserve-job/0", std::make_shared<PrefixStore>("ncclsmoke", signed_store));
        Identity self;
        self.rank = r;
        self.world_size = 4;
        self.host = "host" + std::to_string(r);
        self.token = "t" + std::to_string(r);
        auto joined = join_world(store, self, deadline_after(15s));
        if (!joined.complete()) throw std::runtime_error("join incomplete");
        for (int i = 0; i < 20; ++i)
          store.set("post/" + std::to_string(r) + "/" + std::to_string(i), std::string(1000, 'p'));
        store.set("verdict/" + std::to_string(r), std::string(8000, 'v'));
        if (store.get("verdict/" + std::to_string(r), deadline_after(5s)).size() != 8000)
          throw std::runtime_error("verdict read back wrong");
        ok[r] = 1;
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) EXPECT_EQ(ok[r], 1) << "rank " << r << ": " << errors[r] << "\n"
                                                  << log_.all();
  // Still named: the stranger's refusal.
  auto hit = full_hit("max_stored_keys");
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->value, 2000u);
}

TEST_F(StoreReserveTest, TheReserveIsAtMostHalfOfEachLimitAndOffByDefault) {
  start([](TcpStoreServerOptions& o) {
    o.max_stored_keys = 1000;
    o.max_total_bytes = 4 << 20;
    o.reserved_ranks = 100;
  });
  auto st = server_->stats();
  EXPECT_EQ(st.reserved_keys, 500u);
  EXPECT_EQ(st.reserved_bytes, std::size_t{2} << 20);
  server_->stop();
  // Without reserved_ranks the reserve follows reserved_connections (the harness's world size),
  // 0 by default: a plain server reserves nothing.
  start([](TcpStoreServerOptions& o) { o.max_stored_keys = 1000; });
  EXPECT_EQ(server_->stats().reserved_keys, 0u);
  server_->stop();
  start([](TcpStoreServerOptions& o) {
    o.max_stored_keys = 1000;
    o.reserved_connections = 3;
  });
  EXPECT_EQ(server_->stats().reserved_keys, 3 * detail::kReservedKeysPerRank);
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
