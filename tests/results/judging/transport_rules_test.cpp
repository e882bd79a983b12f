// judge_transports (results/judging/transport_rules.h) over hand-built outcomes (TransportFacts,
// facts_transport.h): each way a
// backend can end -> the finding code, the phase status and detail; the data check, an incomplete
// sweep, an unknown backend, the network report (any backend's), the typed link stats' layout.
#include <gtest/gtest.h>

#include <cmath>

#include "results/judging/nccl_judge.h"
#include "results/judging/transport_rules.h"
#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {
namespace {

using nlohmann::json;
using ErrorKind = TransportFailureKind;
using TransportFailure = TransportFailureFacts;
using TransportOutcome = TransportFacts;

// nccl-tests' figures for a 3-rank all-reduce of `bytes` in `time_us` (GB/s; NaN without a time):
// plausible rows only, the rules copy them (transports/sweep.h computes them in a run).
double algbw(std::int64_t bytes, double time_us) {
  return std::isfinite(time_us) && time_us > 0 ? bytes / (time_us * 1e3) : NAN;
}
double busbw(std::int64_t bytes, double time_us) { return algbw(bytes, time_us) * 4 / 3; }

TransportJudgeContext ctx() { return {0, "h0", {{0, "h0"}, {1, "h1"}, {2, "h2"}}}; }

// A measured 3-rank sweep of one size, out-of-place, as run_sweep leaves it.
TransportOutcome measured(const std::string& name, std::vector<int64_t> wrong = {0, 0, 0}) {
  TransportOutcome o;
  o.name = name;
  o.stage = facts::TransportStage::done;
  o.duration_s = 1.5;
  SweepRowFacts r;
  r.dtype = facts::DType::float32;
  r.bytes = 1 << 20;
  r.count = r.bytes / 4;
  r.gate = true;
  r.rank_time_us = {100, 200, NAN};
  r.rank_wrong = wrong;
  r.time_us = 150;
  r.wrong = 0;
  for (auto w : wrong) r.wrong += w;
  for (double us : r.rank_time_us) {
    r.rank_algbw_gbps.push_back(algbw(r.bytes, us));
    r.rank_busbw_gbps.push_back(busbw(r.bytes, us));
  }
  r.algbw_gbps = algbw(r.bytes, r.time_us);
  r.busbw_gbps = busbw(r.bytes, r.time_us);
  o.sweep.rows = {r};
  o.sweep.complete = true;
  o.identity = {{"interface", "lo"}};
  return o;
}

TransportOutcome failed(ErrorKind kind, int peer,
                        facts::TransportStage stage = facts::TransportStage::sweep) {
  TransportOutcome o;
  o.name = "socket";
  o.stage = stage;
  TransportFailure e;
  e.kind = kind;
  e.message = "boom";
  e.peer = peer;
  e.evidence = {{"errno", 104}};
  e.waited_s = 2.5;
  o.error = e;
  return o;
}

TransportJudgement judge_one(const TransportOutcome& o) { return judge_transports({o}, ctx()); }

TEST(TransportRules, UnknownOrNotBuiltBackendIsSkippedAndUnavailable) {
  TransportOutcome o;
  o.name = "nope";
  o.not_built = "no transport of that name";
  auto j = judge_one(o);
  ASSERT_EQ(j.phases.size(), 1u);
  EXPECT_EQ(j.phases[0].name, "transport:nope");
  EXPECT_EQ(j.phases[0].status, PhaseStatus::skipped);
  EXPECT_EQ(j.phases[0].detail, "no transport of that name");
  ASSERT_EQ(j.findings.size(), 1u);
  EXPECT_EQ(j.findings[0].code, Code::TRANSPORT_UNAVAILABLE);
  EXPECT_EQ(j.findings[0].ranks, std::vector<int>{0});
  EXPECT_NE(j.findings[0].message.find("skipped on rank 0 (host h0)"), std::string::npos)
      << j.findings[0].message;
  EXPECT_TRUE(j.rows.empty());
  EXPECT_TRUE(j.identities.empty());
}

TEST(TransportRules, EachErrorKindHasItsCodeAndStatus) {
  struct Case {
    ErrorKind kind;
    const char* code;
    const char* status;
  } cases[] = {{ErrorKind::unavailable, "TRANSPORT_UNAVAILABLE", "skipped"},
               {ErrorKind::init_failed, "TRANSPORT_INIT_FAILED", "fail"},
               {ErrorKind::timeout, "TRANSPORT_TIMEOUT", "fail"},
               {ErrorKind::peer_lost, "PEER_LOST", "fail"},
               {ErrorKind::other, "TRANSPORT_INIT_FAILED", "fail"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.code);
    auto j = judge_one(failed(c.kind, 2));
    ASSERT_EQ(j.phases.size(), 1u);
    EXPECT_EQ(name(j.phases[0].status), c.status);
    EXPECT_EQ(j.phases[0].detail, "sweep: boom");
    ASSERT_EQ(j.findings.size(), 1u);
    const Finding& f = j.findings[0];
    EXPECT_EQ(name(f.code), c.code);
    // Every field the table owns comes from the table (PEER_LOST: layer "run").
    const FindingCode* row = find_code(f.code);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(f.layer, row->layer);
    EXPECT_EQ(f.severity, row->severity);
    EXPECT_EQ(f.evidence["error_kind"], to_string(c.kind));
    EXPECT_EQ(f.evidence["waited_s"], 2.5);
    EXPECT_EQ(f.evidence["detail"]["errno"], 104);
    EXPECT_NE(f.message.find("rank 0 (host h0)"), std::string::npos) << f.message;
    EXPECT_NE(f.message.find("boom"), std::string::npos) << f.message;
    EXPECT_TRUE(j.rows.empty());
  }
  auto timeout = judge_one(failed(ErrorKind::timeout, 2)).findings[0];
  EXPECT_NE(timeout.message.find("after 2.5"), std::string::npos) << timeout.message;
  EXPECT_EQ(timeout.ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(timeout.hosts, (std::vector<std::string>{"h0", "h2"}));
}

// The run's --timeout, not the transport's own, ended it: RUN_TIMEOUT naming the phase, and the
// phase is inconclusive (cut short, not failed); a backend the run had no time left for is not_run.
TEST(TransportRules, TheRunsDeadlineIsRunTimeoutNotTransportTimeout) {
  auto cut = failed(ErrorKind::timeout, 2);
  cut.run_deadline_bound = true;
  TransportOutcome late;
  late.name = "fabric";
  late.not_started = "the run reached its --timeout before this transport started";
  auto c = ctx();
  c.run_timeout_s = 20;
  auto j = judge_transports({cut, late}, c);
  ASSERT_EQ(j.phases.size(), 2u);
  EXPECT_EQ(j.phases[0].status, PhaseStatus::inconclusive);
  EXPECT_EQ(j.phases[1].status, PhaseStatus::not_run);
  EXPECT_EQ(j.phases[1].detail, *late.not_started);
  ASSERT_EQ(j.findings.size(), 1u);
  const Finding& f = j.findings[0];
  EXPECT_EQ(f.code, Code::RUN_TIMEOUT);
  EXPECT_EQ(f.ranks, std::vector<int>{0});
  EXPECT_NE(f.message.find("--timeout 20s: transport:socket was still running after 2.5"),
            std::string::npos)
      << f.message;
  EXPECT_EQ(f.evidence["stage"], "sweep");
  // The same timeout under the transport's own deadline stays the transport's.
  cut.run_deadline_bound = false;
  EXPECT_EQ(judge_transports({cut}, c).findings[0].code, Code::TRANSPORT_TIMEOUT);
}

TEST(TransportRules, PeerLostNamesThePeerOrSaysTheTransportDoesNot) {
  auto named = judge_one(failed(ErrorKind::peer_lost, 2)).findings[0];
  EXPECT_EQ(named.ranks, std::vector<int>{2});
  EXPECT_NE(named.message.find("lost rank 2 (host h2)"), std::string::npos) << named.message;
  EXPECT_EQ(named.layer, Layer::run);

  auto unknown = judge_one(failed(ErrorKind::peer_lost, -1)).findings[0];
  EXPECT_EQ(unknown.code, Code::PEER_LOST);
  EXPECT_NE(unknown.message.find("lost a peer (the transport does not say which)"),
            std::string::npos)
      << unknown.message;
  EXPECT_EQ(unknown.message.find("-1"), std::string::npos) << unknown.message;
  EXPECT_EQ(unknown.message.find("no rank"), std::string::npos) << unknown.message;
  EXPECT_EQ(unknown.ranks, std::vector<int>{0});  // only this rank is known
}

TEST(TransportRules, StoreLostDuringATransport) {
  TransportOutcome o = failed(ErrorKind::other, -1, facts::TransportStage::open);
  o.error->source = TransportFailure::Source::store;
  o.error->message = "rank 0, which serves the store, is frozen";
  auto j = judge_one(o);
  EXPECT_EQ(j.phases[0].status, PhaseStatus::fail);
  EXPECT_EQ(j.phases[0].detail, "open: rank 0, which serves the store, is frozen");
  ASSERT_EQ(j.findings.size(), 1u);
  EXPECT_EQ(j.findings[0].code, Code::RENDEZVOUS_LOST);
  EXPECT_NE(j.findings[0].message.find("during transport socket (open)"), std::string::npos)
      << j.findings[0].message;
}

TEST(TransportRules, HealthySweepPassesWithWorldAndRankRows) {
  auto o = measured("socket");
  auto j = judge_one(o);
  ASSERT_EQ(j.phases.size(), 1u);
  EXPECT_EQ(j.phases[0].status, PhaseStatus::pass);
  EXPECT_EQ(j.phases[0].detail, "1 sizes/modes measured");
  EXPECT_EQ(j.phases[0].duration_s, 1.5);
  EXPECT_TRUE(j.findings.empty());
  ASSERT_EQ(j.rows.size(), 4u);  // the world row, then ranks 0..2
  EXPECT_EQ(j.rows[0].rank, -1);
  EXPECT_TRUE(j.rows[0].gate);
  EXPECT_DOUBLE_EQ(j.rows[0].busbw_gbps, o.sweep.rows[0].busbw_gbps);
  for (int k = 0; k < 3; ++k) {
    const auto& r = j.rows[1 + k];
    EXPECT_EQ(r.rank, k);
    EXPECT_FALSE(r.gate);
    EXPECT_EQ(r.wrong, 0);
    if (k < 2) {
      EXPECT_DOUBLE_EQ(r.time_us, o.sweep.rows[0].rank_time_us[k]);
      EXPECT_DOUBLE_EQ(r.busbw_gbps, o.sweep.rows[0].rank_busbw_gbps[k]);
    } else {
      EXPECT_TRUE(std::isnan(r.busbw_gbps));
    }
  }
  // 1 MiB in 100 us over 3 ranks: algbw 10.49 GB/s, busbw x 4/3.
  EXPECT_NEAR(j.rows[1].algbw_gbps, 10.48576, 1e-9);
  EXPECT_NEAR(j.rows[1].busbw_gbps, 10.48576 * 4 / 3, 1e-9);
  ASSERT_EQ(j.identities.size(), 1u);
  EXPECT_EQ(j.identities[0].transport, "socket");
  EXPECT_EQ(j.identities[0].rank, 0);
  EXPECT_EQ(j.identities[0].observed["interface"], "lo");
  EXPECT_TRUE(j.identities[0].expected.is_null());
  EXPECT_FALSE(j.identities[0].observed.contains("link_stats"));
}

TEST(TransportRules, SyntheticOutcomeMarksEveryRow) {
  auto o = measured("nccl");
  o.synthetic = true;
  for (const auto& r : judge_one(o).rows) EXPECT_TRUE(r.synthetic);
}

TEST(TransportRules, WrongElementsAreDataCorruption) {
  auto j = judge_one(measured("socket", {0, 5, 0}));
  EXPECT_EQ(j.phases[0].status, PhaseStatus::fail);
  ASSERT_EQ(j.findings.size(), 1u);
  const Finding& f = j.findings[0];
  EXPECT_EQ(f.code, Code::DATA_CORRUPTION);
  EXPECT_EQ(f.ranks, std::vector<int>{1});
  EXPECT_EQ(f.hosts, std::vector<std::string>{"h1"});
  EXPECT_EQ(f.evidence["wrong_by_rank"]["1"], 5);
  EXPECT_NE(f.message.find("5 wrong elements on 1 rank(s)"), std::string::npos) << f.message;
  EXPECT_EQ(j.rows[2].wrong, 5);
}

TEST(TransportRules, IncompleteSweepIsResultsMissingNotAFailure) {
  auto o = measured("socket");
  o.sweep.complete = false;
  auto j = judge_one(o);
  EXPECT_EQ(j.phases[0].status, PhaseStatus::pass);
  ASSERT_EQ(j.findings.size(), 1u);
  EXPECT_EQ(j.findings[0].code, Code::RESULTS_MISSING);
  EXPECT_EQ(j.findings[0].severity, Severity::warning);
  EXPECT_EQ(j.findings[0].ranks, std::vector<int>{0});
}

// The network report is judged whatever the backend's name: no branch on "nccl".
TEST(TransportRules, NetworkReportMismatchIsSilentFallbackForAnyBackend) {
  for (const char* name : {"nccl", "fabric"}) {
    SCOPED_TRACE(name);
    auto o = measured(name);
    o.network = NetworkFacts{
        {{"network", "Libfabric"}, {"policy", "observe"}},
        {{"found", true}, {"network", "Socket"}, {"networks", {"Socket"}}}};
    auto j = judge_one(o);
    ASSERT_EQ(j.findings.size(), 1u);
    EXPECT_EQ(j.findings[0].code, Code::SILENT_FALLBACK);
    EXPECT_TRUE(is_nccl_net_check(j.findings[0]));
    EXPECT_EQ(j.findings[0].ranks, std::vector<int>{0});
    EXPECT_EQ(j.identities[0].expected["network"], "Libfabric");
    EXPECT_EQ(j.phases[0].status, PhaseStatus::pass);  // the judge's verdict comes from the finding
  }
  // Expected and observed agree: nothing.
  auto ok = measured("nccl");
  ok.network = NetworkFacts{
      {{"network", "Socket"}, {"policy", "pin"}},
      {{"found", true}, {"network", "Socket"}, {"networks", {"Socket"}}}};
  EXPECT_TRUE(judge_one(ok).findings.empty());
  // A report with no log read: what carried the bytes is unknown.
  auto unread = measured("nccl");
  unread.network = NetworkFacts{{{"network", "Socket"}, {"policy", "pin"}}, nullptr};
  auto j = judge_one(unread);
  ASSERT_EQ(j.findings.size(), 1u);
  EXPECT_EQ(j.findings[0].code, Code::RESULTS_MISSING);
  EXPECT_TRUE(is_nccl_net_check(j.findings[0]));
  // No report at all (a backend with nothing to say about a network): nothing.
  EXPECT_TRUE(judge_one(measured("nccl")).findings.empty());
}

TEST(TransportRules, LinkStatsAreWrittenInTheDocumentedLayout) {
  auto o = measured("socket");
  o.identity["link_stats"] = {{"to_next", {{"host", "h1"}}}, {"collectives", 7}};
  LinkFacts ls;
  ls.next_rank = 1;
  ls.send_blocked_s = 0.75;
  ls.bytes_sent = 4096;
  ls.prev_rank = 2;
  ls.recv_wait_s = 0.25;
  ls.bytes_received = 2048;
  o.links = ls;
  auto j = judge_one(o);
  const json& obs = j.identities[0].observed["link_stats"];
  EXPECT_EQ(obs["to_next"]["rank"], 1);
  EXPECT_EQ(obs["to_next"]["send_blocked_s"], 0.75);
  EXPECT_EQ(obs["to_next"]["bytes"], 4096);
  EXPECT_EQ(obs["to_next"]["host"], "h1");  // the backend's own members are kept
  EXPECT_EQ(obs["from_prev"]["rank"], 2);
  EXPECT_EQ(obs["from_prev"]["recv_wait_s"], 0.25);
  EXPECT_EQ(obs["collectives"], 7);
  auto back = link_stats_of(j.identities[0]);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->next_rank, 1);
  EXPECT_EQ(back->send_blocked_s, 0.75);
  EXPECT_EQ(back->bytes_sent, 4096);
  EXPECT_EQ(back->prev_rank, 2);
  EXPECT_EQ(back->recv_wait_s, 0.25);
  EXPECT_EQ(back->bytes_received, 2048);
}

TEST(TransportRules, LinkStatsOfReadsOldVerdictsAndRejectsJunk) {
  TransportIdentity id;
  id.observed = {{"link_stats", {{"to_next", {{"send_blocked_s", 2.0}}}}}};
  auto old = link_stats_of(id);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->send_blocked_s, 2.0);
  EXPECT_EQ(old->next_rank, -1);
  id.observed = {{"link_stats", {{"collectives", 3}}}};  // a world of one
  EXPECT_FALSE(link_stats_of(id).has_value());
  id.observed = {{"link_stats", {{"to_next", {{"send_blocked_s", "2"}}}}}};
  EXPECT_FALSE(link_stats_of(id).has_value());
  id.observed = json::array();
  EXPECT_FALSE(link_stats_of(id).has_value());
}

TEST(TransportRules, OutcomesAreJudgedInOrder) {
  TransportOutcome nope;
  nope.name = "nope";
  nope.not_built = "not built here";
  auto j = judge_transports({measured("socket"), nope, failed(ErrorKind::timeout, 1)}, ctx());
  ASSERT_EQ(j.phases.size(), 3u);
  EXPECT_EQ(j.phases[0].name, "transport:socket");
  EXPECT_EQ(j.phases[1].name, "transport:nope");
  EXPECT_EQ(j.phases[2].status, PhaseStatus::fail);
  ASSERT_EQ(j.findings.size(), 2u);
  EXPECT_EQ(j.findings[0].code, Code::TRANSPORT_UNAVAILABLE);
  EXPECT_EQ(j.findings[1].code, Code::TRANSPORT_TIMEOUT);
}

}  // namespace
}  // namespace ncclsmoke::results
