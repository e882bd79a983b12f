// The pairwise rounds' wire and flags (harness/run/pairwise_plan.h) and one pair measured for real
// (harness/run/pairwise_step.h measure_pair, the socket backend on loopback threads over an in-memory
// store): the plan and summary on the wire, this rank's summary from its record, the settings
// from the flags, that no backend declares it cannot pair, and a pair whose partner never
// comes ending at its deadline with the error. Whether the rounds run and their phase are
// results/judging/pairwise_rules.h's (tests/results/judging/pairwise_rules_test.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "harness/run/pairwise_plan.h"
#include "harness/run/pairwise_step.h"
#include "rendezvous/memory_store.h"
#include "rendezvous/prefix_store.h"
#include "results/judging/transport_rules.h"
#include "results/verdict/finding_codes.h"
#include "tests/harness/run_args.h"
#include "tests/results/judging/pairwise_inputs.h"
#include "transports/registry.h"

namespace ncclsmoke::harness {
namespace {

using nlohmann::json;

using results::testing::four_hosts;
using results::testing::healthy;
using results::testing::ring_stats;

// Link stats in the verdict's layout (results::write_link_stats), to compare two of them.
json layout(const std::optional<results::LinkFacts>& s) {
  json j = json::object();
  if (s) results::write_link_stats(j, *s);
  return j;
}

TEST(PairwisePlan, PlanAndSummaryRoundTripAndStrangersAreRefused) {
  PairwiseSettings s;
  s.mode = PairwiseMode::always;
  s.schedule.rounds = 0;
  s.bytes = 65536;
  s.iters = 5;
  s.budget_s = 12.5;
  auto p = pairwise_plan(results::decide_pairwise(four_hosts(), s), s);
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
  sum.transports[0].peer_lost = true;
  auto sb = rank_summary_from_json(to_json(sum));
  ASSERT_TRUE(sb);
  EXPECT_EQ(sb->rank, 1);
  EXPECT_EQ(sb->host, "host1");
  ASSERT_EQ(sb->transports.size(), 1u);
  EXPECT_TRUE(sb->transports[0].timed_out);
  EXPECT_TRUE(sb->transports[0].peer_lost);
  EXPECT_EQ(sb->transports[0].status, results::PhaseStatus::pass);
  ASSERT_TRUE(sb->transports[0].link_stats.has_value());
  EXPECT_EQ(layout(sb->transports[0].link_stats), layout(sum.transports[0].link_stats));
  EXPECT_EQ(sb->transports[0].link_stats->tx_retrans, 0);
  EXPECT_EQ(sb->transports[0].link_stats->tx_segs_out, 5000);
  EXPECT_FALSE(rank_summary_from_json(json{{"rank", "x"}}));
  EXPECT_FALSE(rank_summary_from_json(json{{"rank", 1}, {"transports", {1, 2}}}));
  auto odd = to_json(sum);
  odd["transports"][0]["status"] = "sideways";
  EXPECT_FALSE(rank_summary_from_json(odd)) << "a status no phase has";
}

TEST(PairwisePlan, SecondPassRoundTripsAndABadPlanIsRefused) {
  results::SecondPass sp;
  sp.suspects = {"host3"};
  sp.suspect_of_rank = {{3, "host3"}};
  sp.rounds = {{{0, 3}}, {{1, 3}}};
  results::SecondPass linked;  // host1 and host2's link named: both met again, and the link
  linked.suspects = {"host1", "host2"};
  linked.suspect_of_rank = {{1, "host1"}, {2, "host2"}};
  linked.rounds = {{{0, 1}, {2, 3}}, {{1, 3}, {0, 2}}, {{1, 2}}};
  linked.rechecks = {{1, 2}};
  results::SecondPass none;
  none.why_none = "the first rounds named no host";
  none.why_no_partners = "3 suspect hosts and 1 healthy";
  const SecondPasses passes{{"socket", sp}, {"fabric", none}, {"mpi", linked}};
  const std::vector<int> participants{0, 1, 2, 3};
  auto back = second_passes_from_json(to_json(passes), participants);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->at("socket").suspects, sp.suspects);
  EXPECT_EQ(back->at("socket").suspect_of_rank, sp.suspect_of_rank);
  EXPECT_EQ(back->at("socket").rounds, sp.rounds);
  EXPECT_EQ(back->at("fabric").why_none, none.why_none);
  EXPECT_EQ(back->at("fabric").why_no_partners, none.why_no_partners);
  EXPECT_TRUE(back->at("fabric").rounds.empty());
  EXPECT_EQ(back->at("mpi").rounds, linked.rounds);
  EXPECT_EQ(back->at("mpi").rechecks, linked.rechecks);
  // Four hosts: host1 and host3 (a slow link) met with host0 and host2, whose own link lost
  // packets and is measured again: a partner may be a recheck's end.
  results::SecondPass four;
  four.suspects = {"host1", "host3"};
  four.suspect_of_rank = {{1, "host1"}, {3, "host3"}};
  four.rounds = {{{0, 1}, {2, 3}}, {{1, 2}, {0, 3}}, {{0, 2}, {1, 3}}};
  four.rechecks = {{0, 2}, {1, 3}};
  back = second_passes_from_json(to_json(SecondPasses{{"socket", four}}), participants);
  ASSERT_TRUE(back) << to_json(SecondPasses{{"socket", four}}).dump();
  EXPECT_EQ(back->at("socket").rounds, four.rounds);
  // Two stand-ins paired without a recheck, a recheck no round measures: refused.
  auto unlisted = to_json(passes);
  unlisted["mpi"]["rechecks"] = json::array();
  EXPECT_FALSE(second_passes_from_json(unlisted, participants));
  auto unmeasured = to_json(passes);
  unmeasured["mpi"]["rechecks"] = {{1, 2}, {0, 3}};
  EXPECT_FALSE(second_passes_from_json(unmeasured, participants));
  // A pair with a rank outside the rounds, a rank twice in a round, a pair of two suspects or of
  // none, a reversed pair: refused whole.
  for (auto bad_round : std::vector<std::vector<std::pair<int, int>>>{
           {{0, 9}}, {{0, 3}, {3, 1}}, {{1, 2}}, {{3, 0}}}) {
    auto j = to_json(passes);
    j["socket"]["rounds"] = {bad_round};
    EXPECT_FALSE(second_passes_from_json(j, participants)) << j.dump();
  }
  auto j = to_json(passes);
  j["socket"]["stand_ins"] = {{3, "host3"}, {1, "host1"}};
  j["socket"]["rounds"] = {{{1, 3}}};
  EXPECT_FALSE(second_passes_from_json(j, participants)) << "two suspects paired";
  EXPECT_FALSE(second_passes_from_json(json::array(), participants));
  EXPECT_FALSE(second_passes_from_json(json{{"socket", {{"suspects", 1}}}}, participants));
}

// A rank's summary is judged from its own records (the transports step's outcomes, the phases
// next_step passed over), never read back from its verdict.
TEST(PairwisePlan, SummaryIsJudgedFromThisRanksRecords) {
  results::TransportFacts socket;
  socket.name = "socket";
  socket.stage = facts::TransportStage::sweep;
  results::TransportFailureFacts timeout;
  timeout.kind = results::TransportFailureKind::timeout;
  timeout.message = "recv from rank 2 timed out";
  timeout.peer = 2;
  timeout.waited_s = 4;
  socket.error = timeout;
  results::LinkFacts links;
  links.next_rank = 0;
  links.prev_rank = 2;
  links.send_blocked_s = 0.3;
  links.tx_retrans = 12;
  links.tx_segs_out = 300;
  socket.links = links;
  results::TransportFacts fabric;
  fabric.name = "fabric";
  fabric.not_built = "libfabric.so.1 cannot be opened";
  results::TransportJudgeContext ctx;
  ctx.rank = 3;
  ctx.host = "h3";
  results::TransportsSeen outcomes{{socket, fabric}, ctx, std::nullopt};
  results::Phase passed_over;
  passed_over.name = "transport:nccl";
  passed_over.status = results::PhaseStatus::not_run;
  passed_over.detail = "rank 1 never joined";
  results::StepTakenSeen taken;
  taken.not_run.push_back(passed_over);
  const results::AskedSeen asked{{"socket", "fabric", "nccl", "mpi"}, {}};
  const std::vector<results::StepRecord> records{
      {asked, "", 0, ""}, {outcomes, "", 4.2, ""}, {taken, "", 0, ""}};

  const auto ended = results::summarize_transports(records, 3, "h3");
  const auto& s = ended.summary;
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.host, "h3");
  ASSERT_EQ(s.transports.size(), 4u);
  EXPECT_EQ(s.transports[0].status, results::PhaseStatus::fail);
  EXPECT_TRUE(s.transports[0].timed_out);
  EXPECT_FALSE(s.transports[0].peer_lost);
  const auto judged = results::judge_transports({socket}, ctx);
  ASSERT_EQ(judged.identities.size(), 1u);
  EXPECT_EQ(layout(s.transports[0].link_stats)["link_stats"],
            judged.identities[0].observed["link_stats"]);
  EXPECT_EQ(s.transports[1].status, results::PhaseStatus::skipped);
  EXPECT_EQ(s.transports[1].skipped_why, "libfabric.so.1 cannot be opened");
  EXPECT_FALSE(s.transports[1].timed_out);
  EXPECT_EQ(s.transports[2].status, results::PhaseStatus::not_run);
  EXPECT_EQ(s.transports[2].skipped_why, "rank 1 never joined");
  EXPECT_EQ(s.transports[3].status, results::PhaseStatus::not_run);
  EXPECT_TRUE(s.transports[3].skipped_why.empty());
  // Rank 0's side: the transports ran (socket failed; a skipped one counts as run too).
  EXPECT_TRUE(ended.ran);
  EXPECT_FALSE(results::summarize_transports({records[0], records[2]}, 3, "h3").ran);
}

TEST(PairwisePlan, EveryBackendCanPair) {
  // BackendInfo::no_pairs is read generically by pairwise_step.cpp (the harness names no
  // backend). MPI pairs too: a 2-rank communicator per pair with MPI_Comm_create_group inside
  // the mpirun world (transports/mpi/mpi_transport.h; tests/launchers/mpirun_pairwise_test.py).
  for (const char* name : {"socket", "fabric", "mpi", "nccl"}) {
    const auto* b = transports::find_backend(name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(b->no_pairs, "") << name;
  }
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
  o.pairwise.mode = PairwiseMode::always;
  o.pairwise_rounds = 0;  // all
  o.pairwise.bytes = 64 << 10;
  s = pairwise_settings(o);
  EXPECT_EQ(s.mode, PairwiseMode::always);
  EXPECT_EQ(s.schedule.rounds, 0);
  EXPECT_EQ(s.bytes, 65536);
  o.pairwise_rounds = 2;
  s = pairwise_settings(o);
  EXPECT_EQ(s.schedule.rounds, 2);
  EXPECT_EQ(s.schedule.all_pairs_up_to, 0) << "an explicit count applies to a small world too";
  EXPECT_EQ(check_pairwise_mode("never"), "");
  EXPECT_NE(check_pairwise_mode("sometimes"), "");
  EXPECT_EQ(check_pairwise_rounds("all"), "");
  EXPECT_EQ(check_pairwise_rounds("7"), "");
  EXPECT_NE(check_pairwise_rounds("0"), "");
  EXPECT_NE(check_pairwise_rounds("3x"), "");
  EXPECT_EQ(parse_pairwise_mode("Always"), PairwiseMode::always);
  EXPECT_EQ(parse_pairwise_rounds("auto"), std::nullopt);
  EXPECT_EQ(parse_pairwise_rounds("ALL"), 0);
  EXPECT_EQ(parse_pairwise_rounds("7"), 7);
}

std::string parse(std::vector<std::string> args, RunOptions& o) {
  CLI::App app("run");
  return testing::parse_run_args(app, std::move(args), o);
}

TEST(PairwisePlan, FlagsAreCheckedAtTheDoorAndLaunchForwardsThem) {
  RunOptions o;
  ASSERT_EQ(parse({}, o), "");
  EXPECT_EQ(o.pairwise.mode, PairwiseMode::automatic);
  EXPECT_EQ(o.pairwise_rounds, std::nullopt);
  for (const auto& a : run_option_args(o))
    EXPECT_EQ(a.rfind("--pairwise", 0), std::string::npos) << "defaults are not forwarded: " << a;
  RunOptions f;
  ASSERT_EQ(parse({"--pairwise"}, f), "");
  EXPECT_EQ(f.pairwise.mode, PairwiseMode::always);
  RunOptions n;
  ASSERT_EQ(parse({"--pairwise=never"}, n), "");
  EXPECT_EQ(n.pairwise.mode, PairwiseMode::never);
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
  EXPECT_EQ(back.pairwise.mode, PairwiseMode::always);
  EXPECT_EQ(back.pairwise_rounds, 0);
  EXPECT_EQ(back.pairwise.bytes, 64 << 10);
  EXPECT_EQ(back.pairwise.iters, 5);
  EXPECT_DOUBLE_EQ(back.pairwise.budget_s, 12.5);
  RunOptions back_never;
  ASSERT_EQ(parse(run_option_args(n), back_never), "");
  EXPECT_EQ(back_never.pairwise.mode, PairwiseMode::never);
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

// measure_pair tells the instance its ranks in the run's world (TransportContext::world_ranks,
// lower first): the mpi backend forms the pair inside MPI_COMM_WORLD by them and names this rank
// by its world rank. Outside a process whose MPI transport opened MPI it refuses at once, with
// the reason, and starts no MPI.
TEST(MeasurePair, AnMpiPairKnowsItsWorldRanksAndSaysWhyItCannotRun) {
  const auto* mpi = transports::find_backend("mpi");
  if (!mpi || !mpi->make) GTEST_SKIP() << "built without MPI";
  setenv("OMPI_COMM_WORLD_SIZE", "8", 1);  // "under mpirun", but transport:mpi never opened
  rendezvous::MemoryStore mem;
  rendezvous::PrefixStore store("pairwise/mpi/4/3-6", mem);
  auto t = pair_task(6, 3, &store, 20);
  t.transport = "mpi";
  auto t0 = std::chrono::steady_clock::now();
  auto s = measure_pair(t);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  unsetenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_LT(took, 2.0);
  EXPECT_EQ(s.error.rfind("unavailable: mpi: rank 6 (host host-6): ", 0), 0u) << s.error;
  EXPECT_NE(s.error.find("with rank 3 (host host-3)"), std::string::npos) << s.error;
  EXPECT_NE(s.error.find("MPI was not opened in this process"), std::string::npos) << s.error;
  EXPECT_TRUE(std::isnan(s.time_us));
  // Its partner is told through the pair's store: the rank's state and the decision "off".
  auto info = json::parse(mem.get("pairwise/mpi/4/3-6/mpi/info/1", rendezvous::Clock::now()));
  EXPECT_EQ(info["world_ranks"], json({3, 6}));
  EXPECT_EQ(info.value("ready", true), false);
  EXPECT_EQ(mem.get("pairwise/mpi/4/3-6/mpi/decision", rendezvous::Clock::now()), "off");
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
