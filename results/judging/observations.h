#pragma once
// What the steps of one `ncclsmoke run` saw, as plain typed facts that the step records hold:
// the leaf both harness/'s steps and results/judging/ include. A step fills its part; only a rule
// in results/judging/ decides from it (next_step.h: which step runs next; pairwise_rules.h: whether
// the pairwise rounds run).
//
// A leaf: the standard library, nlohmann's JSON (the ring's link stats travel in the verdict's own
// layout) and the verdict's enums only. Nothing from rendezvous/, transports/ or results/history/:
// what the judge needs of the join, the mesh and the transports is facts/'s types, which
// rendezvous/ and transports/ return themselves. The facts the rules take sit beside it, leaves
// too: facts_rendezvous.h (a store failure and its class, the join, the mesh and its path MTUs,
// refused store values), facts_liveness.h (a lost or silent peer, the wait chain) and
// facts_transport.h (one backend's outcome, its sweep rows and link stats), each naming facts/'s
// types; no file copies them. Judging links only ncclsmoke_verdict and the header-only facts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "results/judging/facts_transport.h"
#include "results/verdict/enums.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// The steps of a run, in the order they can run. The pairwise step is two: the summaries (every
// rank posts how its transports ended, rank 0 gathers them), then the rounds (rank 0 posts the
// plan next_step decided from the summaries, pairwise_rules.h; every rank runs its pairs).
enum class Step { world, rendezvous, mesh, transports, pairwise, pairwise_rounds, finish };

// --pairwise: auto (the default), always (--pairwise alone), never.
enum class PairwiseRequest { automatic, always, never };

// What the pairwise flags ask for (--pairwise, --pairwise-bytes, --pairwise-iters,
// --pairwise-budget).
struct PairwiseAsk {
  PairwiseRequest mode = PairwiseRequest::automatic;
  std::int64_t bytes = 1 << 20;  // per all-reduce
  int iters = 3;                 // timed all-reduces per pair
  double budget_s = 30;          // every transport's rounds together
};

// The world step: the world was discovered and the configuration accepted.
struct WorldObservation {
  bool ok = false;
  int rank = -1;
  int world_size = 0;
};

// The join as its records say (JoinSeen, RosterSeen): next_step.h's judged_so_far reads it out of
// them; no step writes it.
struct JoinObservation {
  // The join barrier returned (false: the step stopped before, on the store, a port, another
  // job's store: its finding says which).
  bool joined = false;
  bool roster_received = false;      // rank 0 published the roster
  bool world_size_conflict = false;  // rank 0 announced another world size
  bool rank_taken = false;           // another process holds this rank
  std::vector<int> present;          // ranks, sorted
  std::vector<int> missing;          // ranks that never arrived
};

// The mesh as its record says (MeshSeen, after the ranks the watch saw stop were set aside), read
// out of it by judged_so_far beside what it means (the phase's status, its error codes).
struct MeshObservation {
  std::size_t mtu_black_holes = 0;  // paths where full-MTU packets vanish
  std::vector<std::pair<int, int>> blocked_pairs;  // (from, to)
  std::vector<int> silent_ranks;                   // heard nothing from, and not alive
};

// How one transport's phase ended on one rank: what the pairwise decision reads (rank 0 reads
// every rank's, through the store).
struct TransportSummary {
  std::string transport;
  PhaseStatus status = PhaseStatus::not_run;  // of the phase "transport:<t>"
  bool timed_out = false;                     // TRANSPORT_TIMEOUT
  bool peer_lost = false;                     // PEER_LOST
  std::optional<LinkFacts> link_stats;         // the ring's link to the next rank; none: not a ring
  std::string skipped_why;                    // the phase's detail when it did not run
};
struct RankSummary {
  int rank = -1;
  std::string host;
  std::vector<TransportSummary> transports;
};

struct Profile;  // profile.h

// Rank 0's pairwise summaries step: what the pairwise decision reads (pairwise_rules.h
// PairwiseInputs; next_step decides from it).
struct PairwiseGathered {
  bool gathered = false;        // rank 0 ran the summaries step
  bool transports_ran = true;   // rank 0's transports step ran (false: no rounds)
  std::vector<RankSummary> summaries;   // rank 0's own among them
  std::vector<TransportRow> rows;       // rank 0's rows (the world rows: rank -1)
  std::vector<int> stopped;             // ranks the watch saw die or freeze
  // transport -> why its backend cannot form a 2-rank world (the backend's own declaration).
  std::map<std::string, std::string> cannot_pair;
  const Profile* profile = nullptr;
};

// What the liveness watch says, sampled before each decision.
struct LivenessObservation {
  std::vector<int> stopped;     // ranks the watch saw die or freeze
  bool rank0_stopped = false;   // the store's host among them
  bool store_frozen = false;    // a probe found the store accepting but silent
};

// What the run's clock and the liveness watch say now, sampled before each decision: the present,
// not something a step saw (next_step.h).
struct RunMoment {
  LivenessObservation live;
  double steps_left_s = 0;  // until the steps' deadline (--timeout less the verdict's reserve)
};

// Rank 0's decision, which every rank follows.
struct PairwiseDecision {
  bool run = false;
  std::string reason;
  std::vector<int> participants;               // sorted; ranks that posted their summary in time
  std::vector<std::string> transports;         // run in this order
  std::map<std::string, std::string> skipped;  // transport -> why it has no rounds
  std::int64_t bytes = 1 << 20;
  int iters = 3;
  double budget_s = 30;
};

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
  std::vector<PairSample> samples;  // this rank's pairs (the second pass's among them)
  // The second pass (pairwise_rules.h plan_second_pass), as the plan rank 0 posted it: the
  // suspect hosts met again, and its rounds; why it had none ("" when it ran, or none was asked).
  std::vector<std::string> second_suspects;
  int second_rounds = 0;
  int second_rechecks = 0;    // named links measured again
  int second_pairs_here = 0;  // this rank's pairs in it
  int second_late = 0;        // of those, not started: too little time left
  double second_plan_s = 0;   // posting the first rounds' samples until the plan came
  double second_duration_s = 0;  // this transport's second-pass rounds
  std::string second_why_none;
};

}  // namespace ncclsmoke::results
