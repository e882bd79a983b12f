#pragma once
// The pairwise step of `ncclsmoke run`, after the transports step: rounds of
// disjoint 2-rank all-reduces (transports/pair_schedule.h), so a node slow with every partner is
// told from a link slow with one. Measurement only: each rank records its own pairs as
// results::PairSample in its identity row for the transport (results/judging/link_rules.h's
// observed["pairwise"]) and a phase "pairwise:<transport>" (never required); rank 0's
// judge_world judges the links of every rank (judge_links).
//
// Through the run's (signed, prefixed) store, under "pairwise/":
// 1. every rank posts "summary/<rank>" (harness/run/pairwise_plan.h RankSummary);
// 2. rank 0 reads them, leaving out a rank whose summary does not come (no arrival for
//    max(5 s, --op-timeout + 2 s), at most twice that, never past the run's steps deadline) or
//    that the liveness watch saw stop (the summaries step, Step::pairwise, ends here: rank 0
//    records them as a PairwiseGatheredSeen); results::next_step decides from them
//    (decide_pairwise) and rank 0 posts it as "plan" (the rounds step, Step::pairwise_rounds);
// 3. every rank waits for the plan with a deadline (none: no pairwise, said in the log and the
//    phase); the participants run the plan's transports in order. The budget (--pairwise-budget,
//    never past the run's steps deadline) counts from the plan: each transport has an equal
//    slice of it, and round k of a transport ends at slice start + (k+1) x slice / rounds, the
//    same instant for both ends of a pair (time an early round leaves over carries forward). A
//    round with less than 1 s left is not started: the rank says so in the pair's keys ("late"),
//    so its partner stops waiting, and the phase says the budget was spent. In a round each rank
//    builds a fresh 2-rank instance of the backend through the registry (TransportContext rank
//    0 = the lower rank, world size 2, store "pairwise/<transport>/<round>/<a>-<b>"), opens it,
//    runs a warm-up (its data checked), then --pairwise-iters timed all-reduces of
//    --pairwise-bytes, reads link_stats(), and closes it. A pair that fails or times out records
//    the error; the round goes on. A partner the liveness watch saw stop, or one that had no time
//    left, leaves no sample (its waits on the store are cut into slices that ask): neither says
//    anything about the link.
// 4. where the participants span three hosts or more, the first rounds have two thirds of the
//    budget and a second pass the rest (results/judging/pairwise_rules.h plan_second_pass): each
//    participant posts its first rounds' samples as "first/<rank>"; rank 0 waits for them (to
//    the first rounds' end and 2 s more), judges their links, and posts "second": for each
//    transport, rounds that meet each host the links named with two hosts they did not, and
//    measure each named link again. The ranks it pairs measure as in 3 (keys under
//    "<transport>/s<k>/"), their samples marked with the suspect (or as a link measured again).
// 5. a rank posts "done/<rank>"; rank 0 waits for them (to the budget's end and 2 s more, or
//    until the watch sees them stop) so its gather does not start while others still measure.
// Test-only: NCCLSMOKE_TEST_PAUSE_AT=pairwise stops a rank (SIGSTOP) as its second round starts
// (harness/run/transport_phase.h test_pause_point; tests/harness/pairwise_e2e_test.py).
#include <map>
#include <optional>
#include <string>

#include "harness/run/liveness.h"
#include "harness/run/rendezvous_step.h"
#include "harness/run/run_context.h"
#include "rendezvous/store.h"
#include "results/judging/facts_transport.h"
#include "transports/transport.h"

namespace ncclsmoke::harness {

// Between the two halves of the step: a summary this rank could not post ("" none).
struct PairwiseState {
  std::string why_none;
};

// Every rank posts its summary; rank 0 gathers them and records them (PairwiseGatheredSeen).
void pairwise_summaries_step(RunContext& ctx, const StoreSession& s, const Liveness& live,
                             PairwiseState& state);
// The rounds: rank 0 posts `decided` (results::next_step's) as the plan, the others wait for it;
// the participants run their pairs.
void pairwise_rounds_step(RunContext& ctx, const StoreSession& s, Liveness& live,
                          const std::optional<results::PairwiseDecision>& decided,
                          const PairwiseState& state);

// One pair of one round as this rank measures it.
struct PairTask {
  std::string transport;
  int round = 0;
  int self = 0;  // world ranks
  int peer = 0;
  std::map<int, std::string> hosts;  // world rank -> host
  std::string local_address;
  rendezvous::Store* store = nullptr;          // already prefixed for this round and pair
  std::map<std::string, std::string> options;  // this rank's backend options
  std::int64_t bytes = 1 << 20;
  int iters = 3;
  transports::DType dtype = transports::DType::float32;
  rendezvous::Millis op_timeout{10000};
  rendezvous::Deadline deadline = rendezvous::Deadline::max();  // the round's
};
// Opens a 2-rank instance, checks and times the all-reduces, reads the link stats, closes. Never
// throws: a failure is the sample's error ("<kind>: <message>").
results::PairSample measure_pair(const PairTask& t);

}  // namespace ncclsmoke::harness
