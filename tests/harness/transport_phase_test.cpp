// measure_transports (harness/run/transport_phase.h) with the real socket backend, two ranks on
// threads over an in-memory store on loopback: it measures only (typed outcomes, no finding),
// the per-rank bandwidth is the sweep's one formula, the typed link stats come back, the wait
// hook ends cleared; an unknown backend is "not built"; a store known unusable fails the backend's
// store operations at once as a StoreError; the judge (results/judging/transport_rules.h) turns outcomes into findings.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

#include "harness/run/transport_phase.h"
#include "rendezvous/memory_store.h"
#include "results/judging/transport_rules.h"

namespace ncclsmoke::harness {
namespace {

using transports::TransportFailure;
using transports::TransportOutcome;
using transports::TransportStage;

TransportPhaseOptions small_sweep(std::vector<std::string> names) {
  TransportPhaseOptions o;
  o.transports = std::move(names);
  o.sweep.min_bytes = 64 << 10;
  o.sweep.max_bytes = 128 << 10;
  o.sweep.gate_bytes = 128 << 10;
  o.sweep.iters = 2;
  o.sweep.warmup_iters = 1;
  o.sweep.op_timeout = rendezvous::Millis{10000};
  o.timeout_s = 30;
  return o;
}

TransportPhaseInput input(int rank, int n, rendezvous::Store* store) {
  TransportPhaseInput in;
  in.rank = rank;
  in.world_size = n;
  in.host = "host-" + std::to_string(rank);
  for (int k = 0; k < n; ++k) in.hosts[k] = "host-" + std::to_string(k);
  in.local_address = "127.0.0.1";
  in.store = store;
  return in;
}

TEST(TransportPhase, UnknownBackendIsNotBuiltAndMeasuresNothing) {
  auto out = measure_transports(input(0, 1, nullptr), small_sweep({"no-such-backend"}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "no-such-backend");
  ASSERT_TRUE(out[0].not_built.has_value());
  EXPECT_EQ(*out[0].not_built, "no transport of that name");
  EXPECT_FALSE(out[0].error.has_value());
  EXPECT_TRUE(out[0].sweep.rows.empty());

  auto in = input(0, 1, nullptr);
  auto measured = measure_transports(in, small_sweep({"no-such-backend"}));
  auto judged = results::judge_transports(measured, {in.rank, in.host, in.hosts});
  ASSERT_EQ(judged.phases.size(), 1u);
  EXPECT_EQ(judged.phases[0].status, results::PhaseStatus::skipped);
  ASSERT_EQ(judged.findings.size(), 1u);
  EXPECT_EQ(judged.findings[0].code, results::Code::TRANSPORT_UNAVAILABLE);
}

TEST(TransportPhase, SocketTwoRanksMeasuresTypedOutcomes) {
  rendezvous::MemoryStore store;
  std::vector<TransportOutcome> outcomes[2];
  std::exception_ptr errors[2];
  std::atomic<int> waits{0};
  std::mutex mu;
  rendezvous::WaitState last[2];
  std::thread ranks[2];
  for (int r = 0; r < 2; ++r)
    ranks[r] = std::thread([&, r] {
      try {
        auto in = input(r, 2, &store);
        in.set_wait_state = [&, r](const rendezvous::WaitState& w) {
          ++waits;
          std::lock_guard lock(mu);
          last[r] = w;
        };
        outcomes[r] = measure_transports(in, small_sweep({"socket"}));
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(r);
    ASSERT_FALSE(errors[r]);
    ASSERT_EQ(outcomes[r].size(), 1u);
    const TransportOutcome& o = outcomes[r][0];
    ASSERT_FALSE(o.error.has_value()) << o.error->message;
    EXPECT_EQ(o.stage, TransportStage::done);
    EXPECT_TRUE(o.sweep.complete);
    ASSERT_EQ(o.sweep.rows.size(), 4u);  // 2 sizes x out-of-place, in-place
    for (const auto& row : o.sweep.rows) {
      ASSERT_EQ(row.rank_busbw_gbps.size(), 2u);
      for (int k = 0; k < 2; ++k) {
        auto bw = transports::allreduce_bandwidth(row.bytes, row.rank_time_us[k], 2);
        EXPECT_DOUBLE_EQ(row.rank_algbw_gbps[k], bw.algbw_gbps);
        EXPECT_DOUBLE_EQ(row.rank_busbw_gbps[k], bw.busbw_gbps);
        EXPECT_TRUE(std::isfinite(row.rank_busbw_gbps[k]));
        EXPECT_EQ(row.rank_wrong[k], 0);
      }
    }
    ASSERT_TRUE(o.links.has_value());
    EXPECT_EQ(o.links->next_rank, 1 - r);
    EXPECT_EQ(o.links->prev_rank, 1 - r);
    EXPECT_GT(o.links->bytes_sent, 0);
    EXPECT_FALSE(o.network.has_value());  // the socket backend reports no network expectation
    EXPECT_TRUE(o.identity.is_object());
    EXPECT_GT(o.duration_s, 0);
    EXPECT_EQ(last[r].waiting_on, -1);  // a transport that completes clears its wait
  }
  EXPECT_GT(waits.load(), 0);

  // The judgement of those outcomes: pass, rows per rank from the sweep's figures, link stats in
  // the identity under the documented key.
  auto j = results::judge_transports({outcomes[0]},
                                     {0, "host-0", {{0, "host-0"}, {1, "host-1"}}});
  ASSERT_EQ(j.phases.size(), 1u);
  EXPECT_EQ(j.phases[0].status, results::PhaseStatus::pass);
  EXPECT_TRUE(j.findings.empty());
  EXPECT_EQ(j.rows.size(), 4u * 3u);
  ASSERT_EQ(j.identities.size(), 1u);
  auto ls = results::link_stats_of(j.identities[0]);
  ASSERT_TRUE(ls.has_value());
  EXPECT_EQ(ls->next_rank, 1);
}

// Rank 1 never comes; the store is declared unusable: the backend's first store operation fails
// at once (the guard's StoreError(stalled)); the socket backend reports it as its own
// init_failed naming the reason, measured in stage open and judged a failure.
TEST(TransportPhase, UnusableStoreFailsTheBackendAtOnce) {
  rendezvous::MemoryStore store;
  auto in = input(0, 2, &store);
  in.store_unusable = [] { return std::string("rank 0, which serves the store, is frozen"); };
  auto o = small_sweep({"socket"});
  o.timeout_s = 20;
  auto out = measure_transports(in, o);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].error.has_value());
  EXPECT_EQ(out[0].stage, TransportStage::open);
  EXPECT_EQ(out[0].error->source, TransportFailure::Source::transport);
  EXPECT_EQ(out[0].error->kind, transports::ErrorKind::init_failed);
  EXPECT_NE(out[0].error->message.find("is frozen"), std::string::npos) << out[0].error->message;
  auto j = results::judge_transports({out}, {0, "host-0", {}});
  ASSERT_EQ(j.findings.size(), 1u);
  EXPECT_EQ(j.findings[0].code, results::Code::TRANSPORT_INIT_FAILED);
  EXPECT_EQ(j.phases[0].status, results::PhaseStatus::fail);
  EXPECT_EQ(j.phases[0].detail.rfind("open: ", 0), 0u) << j.phases[0].detail;
}

}  // namespace
}  // namespace ncclsmoke::harness
