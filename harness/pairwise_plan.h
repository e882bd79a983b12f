#pragma once
// The pairwise rounds' plan (issue 23, item 2), pure: what each rank posts after the transports
// step (RankSummary), how rank 0 decides from those whether the rounds run (decide_pairwise), the
// plan every rank then follows (PairwisePlan), and the phase a rank records for one transport's
// rounds (pairwise_phase). harness/pairwise_step.cpp moves these through the store and runs the
// rounds; transports/pair_schedule.h is the schedule itself.
//
// When: --pairwise (always) forces the rounds, --pairwise=never disables them, and the default
// (auto) runs them when the main step suggests a bad node or link:
// - a transport failed with a timeout or a lost peer on some rank (TRANSPORT_TIMEOUT, PEER_LOST);
// - results::judge_links (results/judging/link_rules.h), over a verdict made of the posted ring
//   link stats and the ranks' hosts, finds a SLOW_HOST or SLOW_LINK;
// - with a profile, a transport's world gate busbw is below the band's degraded ratio.
// A transport takes part when it ran (not skipped / not run) on every participant, and its
// backend can form a 2-rank world of its own (MPI cannot: MPI_COMM_WORLD is fixed by mpirun).
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/run_options.h"
#include "results/judging/link_rules.h"
#include "results/judging/profile.h"
#include "results/verdict/verdict.h"
#include "transports/pair_schedule.h"

namespace ncclsmoke::harness {

enum class PairwiseMode { automatic, always, never };

struct PairwiseSettings {
  PairwiseMode mode = PairwiseMode::automatic;
  transports::PairScheduleOptions schedule;  // rounds 0 = every pair
  std::int64_t bytes = 1 << 20;              // per all-reduce
  int iters = 3;                             // timed all-reduces per pair
  double budget_s = 30;                      // every transport's rounds together
};

// The settings the flags ask for (already checked at the door: check_pairwise_mode,
// check_pairwise_rounds).
PairwiseSettings pairwise_settings(const RunOptions& o);
// "" when accepted, else the reason: --pairwise auto|always|never; --pairwise-rounds auto|all|N
// (N from 1 to 100000).
std::string check_pairwise_mode(const std::string& text);
std::string check_pairwise_rounds(const std::string& text);

// What one rank posts after its transports step: per requested transport, how its phase ended,
// whether it failed on a timeout or a lost peer, and its ring link stats (the identity row's
// observed["link_stats"], results/judging/transport_rules.h's layout; null when none).
struct TransportSummary {
  std::string transport;
  std::string status;  // the phase "transport:<t>" status as written ("pass", "skipped", ...)
  bool timed_out = false;
  nlohmann::json link_stats;
  std::string skipped_why;  // the phase's detail when it did not run
};
struct RankSummary {
  int rank = -1;
  std::string host;
  std::vector<TransportSummary> transports;
};
// From this rank's record, for the requested transports.
RankSummary summarize(const results::Verdict& record, int rank, const std::string& host,
                      const std::vector<std::string>& requested);
nlohmann::json to_json(const RankSummary& s);
// nullopt when the post is not a summary (a stranger's, a newer format).
std::optional<RankSummary> rank_summary_from_json(const nlohmann::json& j);

struct PairwisePlan {
  bool run = false;
  std::string reason;
  std::vector<int> participants;               // sorted; ranks that posted their summary in time
  std::vector<std::string> transports;         // run in this order
  std::map<std::string, std::string> skipped;  // transport -> why it has no rounds
  transports::PairScheduleOptions schedule;
  std::int64_t bytes = 1 << 20;
  int iters = 3;
  double budget_s = 30;
};
nlohmann::json to_json(const PairwisePlan& p);
std::optional<PairwisePlan> pairwise_plan_from_json(const nlohmann::json& j);

struct PlanInputs {
  std::vector<RankSummary> summaries;       // rank 0's own among them
  std::vector<std::string> requested;       // --transports, in order
  std::vector<results::TransportRow> rows;  // rank 0's rows (the world rows: rank -1)
  const results::Profile* profile = nullptr;
  int world_size = 0;
  // Ranks the liveness watch saw die or freeze: in auto mode their timeouts are explained (a dead
  // peer, not a slow link), so no rounds; forced rounds leave them out.
  std::vector<int> stopped;
};
// Rank 0's decision. Participants are the summaries' ranks.
PairwisePlan decide_pairwise(const PlanInputs& in, const PairwiseSettings& s);

// Why a backend cannot run 2-rank rounds ("" when it can).
std::string no_pairs_reason(const std::string& transport);

// What one rank did for one transport's rounds, for its phase "pairwise:<transport>".
struct PairwiseRun {
  std::string transport;
  int rank = 0;             // this rank
  int rounds_total = 0;     // in the schedule
  int rounds_late = 0;      // not started: less than the minimum left before the round's deadline
  int sat_out = 0;          // rounds this rank had no partner in
  int partner_stopped = 0;  // the partner had stopped (liveness watch): no sample
  int partner_late = 0;     // the partner had no time left for the round: no sample
  double duration_s = 0;
  std::vector<results::PairSample> samples;  // this rank's pairs
};
// The phase (never required: it adds evidence, and its absence takes nothing from a run):
// - not a participant / no rounds: not_run / skipped with the reason;
// - pass when every pair of this rank was measured; degraded when one failed (timeout, peer lost,
//   wrong data...: the sample's error, which judge_links reads as a bad link): the rounds add
//   evidence, they do not fail a run whose transports passed; rounds the budget cut are said in
//   the detail.
results::Phase pairwise_phase(const PairwisePlan& plan, const PairwiseRun& run);
// The phase when the plan did not run the rounds (or this rank takes no part).
results::Phase pairwise_not_run_phase(const std::string& transport, const std::string& why,
                                      bool skipped);

// "1 MiB", "64 KiB", "1000 B".
std::string size_text(std::int64_t bytes);

}  // namespace ncclsmoke::harness
