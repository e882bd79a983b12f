// The pairwise rounds' pure parts (harness/pairwise_plan.h) and one pair measured for real
// (harness/pairwise_step.h measure_pair, the socket backend on loopback threads over an in-memory
// store): when auto runs the rounds (a timeout, a suspect ring link, a gate below the profile) and
// when not (healthy, a stopped rank explains it), which transports take part, the plan and summary
// on the wire, the phase's status and detail, and a pair whose partner never comes ending at its
// deadline with the error.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "harness/pairwise_plan.h"
#include "harness/pairwise_step.h"
#include "rendezvous/memory_store.h"
#include "rendezvous/prefix_store.h"
#include "results/judging/transport_rules.h"
#include "results/verdict/finding_codes.h"
#include "tests/harness/run_args.h"

namespace ncclsmoke::harness {
namespace {

using nlohmann::json;

RankSummary healthy(int rank, const std::string& host,
                    std::vector<std::string> names = {"socket"}) {
  RankSummary s;
  s.rank = rank;
  s.host = host;
  for (const auto& n : names) {
    TransportSummary t;
    t.transport = n;
    t.status = "pass";
    s.transports.push_back(t);
  }
  return s;
}

// Ring link stats of one rank to its next, with TCP's counters.
json ring_stats(int next, std::int64_t retrans, std::int64_t segs) {
  return {{"to_next",
           {{"rank", next},
            {"send_blocked_s", 0.0},
            {"bytes", 1 << 20},
            {"retrans", retrans},
            {"segs_out", segs},
            {"rtt_us", 200.0}}},
          {"from_prev", {{"rank", -1}, {"recv_wait_s", 0.0}, {"bytes", 0}}}};
}

PlanInputs four_hosts() {
  PlanInputs in;
  in.requested = {"socket"};
  in.world_size = 4;
  for (int r = 0; r < 4; ++r) {
    auto s = healthy(r, "host" + std::to_string(r));
    s.transports[0].link_stats = ring_stats((r + 1) % 4, 0, 5000);
    in.summaries.push_back(s);
  }
  return in;
}

TEST(PairwisePlan, AutoLeavesAHealthyRunAlone) {
  auto p = decide_pairwise(four_hosts(), {});
  EXPECT_FALSE(p.run);
  EXPECT_NE(p.reason.find("not needed"), std::string::npos) << p.reason;
  EXPECT_EQ(p.participants, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p.transports, (std::vector<std::string>{"socket"}));
}

TEST(PairwisePlan, ForcedRunsAHealthyRun) {
  PairwiseSettings s;
  s.mode = PairwiseMode::always;
  auto p = decide_pairwise(four_hosts(), s);
  EXPECT_TRUE(p.run);
  EXPECT_EQ(p.reason, "requested (--pairwise)");
}

TEST(PairwisePlan, AutoRunsAfterATimeoutOrALostPeer) {
  auto in = four_hosts();
  in.summaries[2].transports[0].timed_out = true;
  in.summaries[2].transports[0].status = "fail";
  auto p = decide_pairwise(in, {});
  EXPECT_TRUE(p.run);
  EXPECT_NE(p.reason.find("transport:socket failed with a timeout or a lost peer on rank 2"),
            std::string::npos)
      << p.reason;
  EXPECT_EQ(p.transports, (std::vector<std::string>{"socket"})) << "a failed transport still pairs";
}

TEST(PairwisePlan, AutoRunsWhenTheRingShowsASuspectLink) {
  auto in = four_hosts();
  in.summaries[2].transports[0].link_stats = ring_stats(3, 500, 5000);  // 10% retransmits
  auto p = decide_pairwise(in, {});
  EXPECT_TRUE(p.run) << p.reason;
  EXPECT_NE(p.reason.find("the ring's link stats show SLOW_"), std::string::npos) << p.reason;
}

TEST(PairwisePlan, AutoRunsWhenTheGateIsBelowTheProfile) {
  auto in = four_hosts();
  results::Profile prof;
  prof.name = "p";
  results::TransportExpectation te;
  te.transport = "socket";
  results::BaselineBand band;
  band.busbw_gbps = 10;
  band.gate_bytes = 1 << 20;
  te.by_world_size[0] = band;
  prof.transports.push_back(te);
  in.profile = &prof;
  results::TransportRow row;
  row.transport = "socket";
  row.rank = -1;
  row.bytes = 1 << 20;
  row.busbw_gbps = 9;  // 90%: within the 85% band
  in.rows = {row};
  EXPECT_FALSE(decide_pairwise(in, {}).run);
  in.rows[0].busbw_gbps = 5;
  auto p = decide_pairwise(in, {});
  EXPECT_TRUE(p.run);
  EXPECT_NE(p.reason.find("gate busbw 5 GB/s is below 85% of the profile's 10 GB/s"),
            std::string::npos)
      << p.reason;
  in.rows[0].bytes = 2 << 20;  // not the band's size: not compared
  EXPECT_FALSE(decide_pairwise(in, {}).run);
}

TEST(PairwisePlan, AStoppedRankExplainsTheTimeoutsAndIsLeftOut) {
  auto in = four_hosts();
  in.summaries[1].transports[0].timed_out = true;
  in.stopped = {2};
  auto p = decide_pairwise(in, {});
  EXPECT_FALSE(p.run);
  EXPECT_NE(p.reason.find("rank 2 stopped answering"), std::string::npos) << p.reason;
  PairwiseSettings s;
  s.mode = PairwiseMode::always;
  auto forced = decide_pairwise(in, s);
  EXPECT_TRUE(forced.run);
  EXPECT_EQ(forced.participants, (std::vector<int>{0, 1, 3}));
}

TEST(PairwisePlan, TransportsThatCannotPairAreSkippedWithTheReason) {
  PlanInputs in;
  in.requested = {"socket", "mpi", "nccl"};
  for (int r = 0; r < 3; ++r) in.summaries.push_back(healthy(r, "h", {"socket", "mpi", "nccl"}));
  in.summaries[1].transports[2].status = "skipped";
  in.summaries[1].transports[2].skipped_why = "no CUDA device";
  PairwiseSettings s;
  s.mode = PairwiseMode::always;
  auto p = decide_pairwise(in, s);
  EXPECT_TRUE(p.run);
  EXPECT_EQ(p.transports, (std::vector<std::string>{"socket"}));
  ASSERT_EQ(p.skipped.size(), 2u);
  EXPECT_NE(p.skipped["mpi"].find("2-rank MPI world"), std::string::npos);
  EXPECT_EQ(p.skipped["nccl"], "transport:nccl did not run on rank 1: no CUDA device");
}

TEST(PairwisePlan, OneRankOrNoTransportIsNoRun) {
  PairwiseSettings s;
  s.mode = PairwiseMode::always;
  PlanInputs one;
  one.requested = {"socket"};
  one.summaries = {healthy(0, "h")};
  auto p = decide_pairwise(one, s);
  EXPECT_FALSE(p.run);
  EXPECT_NE(p.reason.find("1 rank took part"), std::string::npos) << p.reason;
  PlanInputs none = four_hosts();
  for (auto& sum : none.summaries) sum.transports[0].status = "not_run";
  p = decide_pairwise(none, s);
  EXPECT_FALSE(p.run);
  EXPECT_NE(p.reason.find("no transport can run pairwise rounds"), std::string::npos) << p.reason;
}

TEST(PairwisePlan, PlanAndSummaryRoundTripAndStrangersAreRefused) {
  PairwiseSettings s;
  s.mode = PairwiseMode::always;
  s.schedule.rounds = 0;
  s.bytes = 65536;
  s.iters = 5;
  s.budget_s = 12.5;
  auto p = decide_pairwise(four_hosts(), s);
  auto back = pairwise_plan_from_json(to_json(p));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->run, p.run);
  EXPECT_EQ(back->reason, p.reason);
  EXPECT_EQ(back->participants, p.participants);
  EXPECT_EQ(back->transports, p.transports);
  EXPECT_EQ(back->schedule.rounds, 0);
  EXPECT_EQ(back->bytes, 65536);
  EXPECT_EQ(back->iters, 5);
  EXPECT_DOUBLE_EQ(back->budget_s, 12.5);
  EXPECT_FALSE(pairwise_plan_from_json(json::object()));
  EXPECT_FALSE(pairwise_plan_from_json(json::array()));
  auto bad = to_json(p);
  bad["iters"] = 0;
  EXPECT_FALSE(pairwise_plan_from_json(bad));

  auto sum = four_hosts().summaries[1];
  sum.transports[0].timed_out = true;
  auto sb = rank_summary_from_json(to_json(sum));
  ASSERT_TRUE(sb);
  EXPECT_EQ(sb->rank, 1);
  EXPECT_EQ(sb->host, "host1");
  ASSERT_EQ(sb->transports.size(), 1u);
  EXPECT_TRUE(sb->transports[0].timed_out);
  EXPECT_EQ(sb->transports[0].link_stats, sum.transports[0].link_stats);
  EXPECT_FALSE(rank_summary_from_json(json{{"rank", "x"}}));
  EXPECT_FALSE(rank_summary_from_json(json{{"rank", 1}, {"transports", {1, 2}}}));
}

TEST(PairwisePlan, SummaryReadsThisRanksRecord) {
  results::Verdict v;
  results::Phase ph;
  ph.name = "transport:socket";
  ph.status = results::PhaseStatus::fail;
  v.phases.push_back(ph);
  ph.name = "transport:nccl";
  ph.status = results::PhaseStatus::skipped;
  ph.detail = "no CUDA device";
  v.phases.push_back(ph);
  results::Finding f;
  f.code = results::Code::TRANSPORT_TIMEOUT;
  f.subject.phase = "transport:socket";
  v.findings.push_back(f);
  results::TransportIdentity id;
  id.transport = "socket";
  id.rank = 3;
  id.observed = {{"link_stats", ring_stats(0, 1, 300)}, {"interface", "lo"}};
  v.identities.push_back(id);
  auto s = summarize(v, 3, "h3", {"socket", "nccl", "fabric"});
  EXPECT_EQ(s.rank, 3);
  ASSERT_EQ(s.transports.size(), 3u);
  EXPECT_EQ(s.transports[0].status, "fail");
  EXPECT_TRUE(s.transports[0].timed_out);
  EXPECT_EQ(s.transports[0].link_stats, id.observed["link_stats"]);
  EXPECT_EQ(s.transports[1].status, "skipped");
  EXPECT_EQ(s.transports[1].skipped_why, "no CUDA device");
  EXPECT_FALSE(s.transports[1].timed_out);
  EXPECT_EQ(s.transports[2].status, "not_run");
}

TEST(PairwisePlan, SettingsFromTheFlags) {
  RunOptions o;
  auto s = pairwise_settings(o);
  EXPECT_EQ(s.mode, PairwiseMode::automatic);
  EXPECT_EQ(s.schedule.rounds, 3);
  EXPECT_EQ(s.schedule.all_pairs_up_to, 16);
  EXPECT_EQ(s.bytes, 1 << 20);
  EXPECT_EQ(s.iters, 3);
  EXPECT_DOUBLE_EQ(s.budget_s, 30);
  o.pairwise = "always";
  o.pairwise_rounds = "all";
  o.pairwise_bytes = "64K";
  s = pairwise_settings(o);
  EXPECT_EQ(s.mode, PairwiseMode::always);
  EXPECT_EQ(s.schedule.rounds, 0);
  EXPECT_EQ(s.bytes, 65536);
  o.pairwise_rounds = "2";
  s = pairwise_settings(o);
  EXPECT_EQ(s.schedule.rounds, 2);
  EXPECT_EQ(s.schedule.all_pairs_up_to, 0) << "an explicit count applies to a small world too";
  EXPECT_EQ(check_pairwise_mode("never"), "");
  EXPECT_NE(check_pairwise_mode("sometimes"), "");
  EXPECT_EQ(check_pairwise_rounds("all"), "");
  EXPECT_EQ(check_pairwise_rounds("7"), "");
  EXPECT_NE(check_pairwise_rounds("0"), "");
  EXPECT_NE(check_pairwise_rounds("3x"), "");
}

std::string parse(std::vector<std::string> args, RunOptions& o) {
  CLI::App app("run");
  return testing::parse_run_args(app, std::move(args), o);
}

TEST(PairwisePlan, FlagsAreCheckedAtTheDoorAndLaunchForwardsThem) {
  RunOptions o;
  ASSERT_EQ(parse({}, o), "");
  EXPECT_EQ(o.pairwise, "auto");
  for (const auto& a : run_option_args(o))
    EXPECT_EQ(a.rfind("--pairwise", 0), std::string::npos) << "defaults are not forwarded: " << a;
  RunOptions f;
  ASSERT_EQ(parse({"--pairwise"}, f), "");
  EXPECT_EQ(f.pairwise, "always");
  RunOptions n;
  ASSERT_EQ(parse({"--pairwise=never"}, n), "");
  EXPECT_EQ(n.pairwise, "never");
  RunOptions bad;
  EXPECT_NE(parse({"--pairwise=sometimes"}, bad).find("--pairwise"), std::string::npos);
  EXPECT_NE(parse({"--pairwise-rounds", "0"}, bad).find("--pairwise-rounds"), std::string::npos);
  EXPECT_NE(parse({"--pairwise-bytes", "1MB"}, bad).find("--pairwise-bytes"), std::string::npos);
  EXPECT_NE(parse({"--pairwise-budget", "0"}, bad).find("--pairwise-budget"), std::string::npos);
  EXPECT_NE(parse({"--pairwise-iters", "0"}, bad).find("--pairwise-iters"), std::string::npos);

  RunOptions o2;
  ASSERT_EQ(parse({"--pairwise", "--pairwise-rounds", "all", "--pairwise-bytes", "64K",
                   "--pairwise-iters", "5", "--pairwise-budget", "12.5"},
                  o2),
            "");
  auto args = run_option_args(o2);
  RunOptions back;
  ASSERT_EQ(parse(args, back), "");
  EXPECT_EQ(back.pairwise, "always");
  EXPECT_EQ(back.pairwise_rounds, "all");
  EXPECT_EQ(back.pairwise_bytes, "64K");
  EXPECT_EQ(back.pairwise_iters, 5);
  EXPECT_DOUBLE_EQ(back.pairwise_budget_s, 12.5);
  RunOptions back_never;
  ASSERT_EQ(parse(run_option_args(n), back_never), "");
  EXPECT_EQ(back_never.pairwise, "never");
}

TEST(PairwisePhase, StatusAndDetail) {
  PairwisePlan plan;
  plan.reason = "requested (--pairwise)";
  plan.bytes = 1 << 20;
  plan.iters = 3;
  plan.budget_s = 30;
  PairwiseRun run;
  run.transport = "socket";
  run.rank = 2;
  run.rounds_total = 7;
  run.duration_s = 1.2;
  for (int k = 0; k < 7; ++k) {
    results::PairSample s;
    s.round = k;
    s.peer = k;
    s.time_us = 500;
    run.samples.push_back(s);
  }
  auto ph = pairwise_phase(plan, run);
  EXPECT_EQ(ph.name, "pairwise:socket");
  EXPECT_EQ(ph.status, results::PhaseStatus::pass);
  EXPECT_FALSE(ph.required);
  EXPECT_EQ(ph.detail,
            "7 rounds of 1 MiB x 3 in 1.20 s, budget 30 s; rank 2: 7 pairs measured, 0 failed; "
            "reason: requested (--pairwise)");
  run.samples[3].error = "timeout: waiting for rank 3";
  run.samples.resize(5);
  run.rounds_late = 1;
  run.sat_out = 1;
  ph = pairwise_phase(plan, run);
  EXPECT_EQ(ph.status, results::PhaseStatus::degraded) << "evidence, not a failed run";
  EXPECT_NE(ph.detail.find("7 rounds (1 not started: the budget was spent)"), std::string::npos)
      << ph.detail;
  EXPECT_NE(ph.detail.find("4 pairs measured, 1 failed, sat out 1"), std::string::npos)
      << ph.detail;
  EXPECT_NE(ph.detail.find("first failure: round 3 with rank 3: timeout: waiting for rank 3"),
            std::string::npos)
      << ph.detail;
  run.partner_stopped = 2;
  run.partner_late = 1;
  EXPECT_NE(pairwise_phase(plan, run).detail.find(
                ", 2 skipped (the partner had stopped), 1 skipped (the partner had no time left)"),
            std::string::npos)
      << pairwise_phase(plan, run).detail;
  run.samples.clear();
  EXPECT_EQ(pairwise_phase(plan, run).status, results::PhaseStatus::pass)
      << "rounds skipped for a stopped or late partner are not a failure of this rank";
  run = {};
  run.transport = "socket";
  run.rounds_total = 3;
  run.rounds_late = 3;
  ph = pairwise_phase(plan, run);
  EXPECT_EQ(ph.status, results::PhaseStatus::not_run);
  EXPECT_NE(ph.detail.find("3 rounds (3 not started: the budget was spent)"), std::string::npos);
  auto nr = pairwise_not_run_phase("mpi", "why", true);
  EXPECT_EQ(nr.status, results::PhaseStatus::skipped);
  EXPECT_FALSE(nr.required);
}

PairTask pair_task(int self, int peer, rendezvous::Store* store, double seconds) {
  PairTask t;
  t.transport = "socket";
  t.round = 4;
  t.self = self;
  t.peer = peer;
  t.hosts = {{self, "host-" + std::to_string(self)}, {peer, "host-" + std::to_string(peer)}};
  t.local_address = "127.0.0.1";
  t.store = store;
  t.bytes = 256 << 10;
  t.iters = 2;
  t.op_timeout = rendezvous::Millis{5000};
  t.deadline = rendezvous::Clock::now() + std::chrono::duration_cast<rendezvous::Clock::duration>(
                                              std::chrono::duration<double>(seconds));
  return t;
}

TEST(MeasurePair, TwoRanksOnLoopbackMeasureTheirLink) {
  rendezvous::MemoryStore mem;
  rendezvous::PrefixStore store("pairwise/socket/4/3-6", mem);
  results::PairSample a, b;
  std::thread ta([&] { a = measure_pair(pair_task(6, 3, &store, 20)); });
  std::thread tb([&] { b = measure_pair(pair_task(3, 6, &store, 20)); });
  ta.join();
  tb.join();
  for (const auto* s : {&a, &b}) {
    EXPECT_EQ(s->error, "");
    EXPECT_EQ(s->round, 4);
    EXPECT_EQ(s->bytes, 256 << 10);
    EXPECT_EQ(s->iters, 2);
    EXPECT_TRUE(std::isfinite(s->time_us) && s->time_us > 0) << s->time_us;
    EXPECT_TRUE(std::isfinite(s->busbw_gbps) && s->busbw_gbps > 0);
    EXPECT_GE(s->retrans, 0) << "the socket backend reads TCP_INFO";
    EXPECT_GT(s->segs_out, 0);
  }
  EXPECT_EQ(a.peer, 3);
  EXPECT_EQ(a.peer_host, "host-3");
  EXPECT_EQ(b.peer, 6);
  EXPECT_EQ(b.peer_host, "host-6");
}

TEST(MeasurePair, APartnerThatNeverComesEndsAtTheDeadlineWithTheError) {
  rendezvous::MemoryStore mem;
  auto t0 = std::chrono::steady_clock::now();
  auto s = measure_pair(pair_task(0, 1, &mem, 1.0));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 3.0);
  EXPECT_GE(took, 0.9);
  EXPECT_FALSE(s.error.empty());
  EXPECT_EQ(s.error.rfind("timeout: ", 0), 0u) << s.error;
  EXPECT_TRUE(std::isnan(s.time_us));
}

TEST(MeasurePair, AnUnknownBackendIsAnError) {
  rendezvous::MemoryStore mem;
  auto t = pair_task(0, 1, &mem, 1.0);
  t.transport = "no-such-backend";
  auto s = measure_pair(t);
  EXPECT_EQ(s.error, "unavailable: no transport of that name");
}

// The samples land where judge_links reads them.
TEST(MeasurePair, SamplesRoundTripThroughTheIdentityRow) {
  results::TransportIdentity id;
  id.transport = "socket";
  id.rank = 1;
  results::PairSample s;
  s.round = 2;
  s.peer = 0;
  s.peer_host = "h0";
  s.bytes = 1 << 20;
  s.iters = 3;
  s.time_us = 800;
  s.error = "";
  results::write_pair_samples(id.observed, {s});
  auto back = results::pair_samples_of(id);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].round, 2);
  EXPECT_EQ(back[0].peer, 0);
  EXPECT_DOUBLE_EQ(back[0].time_us, 800);
}

}  // namespace
}  // namespace ncclsmoke::harness
