#pragma once
// The pairwise rounds' rules (decided here in judging, not in the steps): whether rank 0's
// plan runs the rounds, over every rank's transport summary (observations.h RankSummary), and the
// phase a rank records for one transport's rounds. harness/run/pairwise_step.cpp moves the summaries
// and the plan through the store and runs the rounds; harness/run/pairwise_plan.h is their wire form.
//
// When: --pairwise (always) forces the rounds, --pairwise=never disables them (next_step.h never
// runs the step), and the default (auto) runs them when the main step suggests a bad node or link:
// - a transport failed with a timeout or a lost peer on some rank (TRANSPORT_TIMEOUT, PEER_LOST);
// - judge_links (link_rules.h), over a verdict made of the posted ring link stats and the ranks'
//   hosts, finds a SLOW_HOST or SLOW_LINK;
// - with a profile, a transport's world gate busbw is below the band's degraded ratio;
// - without one, a transport is BELOW_LINE_RATE (link_rules.h).
// A transport takes part when it ran (not skipped / not run) on every participant, and its
// backend can form a 2-rank world of its own (the backend declares when it cannot:
// transports/registry.h BackendInfo::no_pairs, passed in as `cannot_pair`).
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "results/judging/link_rules.h"
#include "results/judging/observations.h"
#include "results/judging/profile.h"
#include "results/judging/step_records.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// What --pairwise and its flags ask for.
struct PairwiseInputs {
  std::vector<RankSummary> summaries;  // rank 0's own among them
  std::vector<std::string> requested;  // --transports, in order
  std::vector<TransportRow> rows;      // rank 0's rows (the world rows: rank -1)
  const Profile* profile = nullptr;
  int world_size = 0;
  // Ranks the liveness watch saw die or freeze: in auto mode their timeouts are explained (a dead
  // peer, not a slow link), so no rounds; forced rounds leave them out.
  std::vector<int> stopped;
  // transport -> why its backend cannot form a 2-rank world (the backend's own words).
  std::map<std::string, std::string> cannot_pair;
  // Whether rank 0's transports step ran at all (false: listed not run, no rounds).
  bool transports_ran = true;
  // The roster (hosts and their interfaces' speeds): a transport far below what the slowest
  // interface carries (link_rules.h judge_line_rate) starts the rounds too.
  std::vector<RankInfo> ranks;
};

PairwiseDecision decide_pairwise(const PairwiseInputs& in, const PairwiseAsk& ask);

// ---- the second pass: host versus link decided by evidence ------------------------------------
// After the first rounds of a transport, rank 0 judges their links (judge_links over every rank's
// pair samples, pair_links) and meets each host they name (SLOW_HOST, or either end of a
// SLOW_LINK) again with `partners` hosts they named nothing about, one pair per round, the
// suspects' pairs of a round disjoint: a host slow with every healthy partner is the host, one fine
// with them all is not (link_rules.h reads the samples' suspect_host). One rank stands for each
// host: its lowest participant. Partners are the hosts the first rounds said nothing about (at
// most `partners` of them; the ends of a lossy candidate link only when the others are too few to
// meet every suspect that often); no suspect is met when the suspects outnumber them (a fault most hosts
// share is not a host's: no partner to trust, `why_no_partners`). Each link they name (SLOW_LINK),
// and each that lost packets with no slowdown (judge_links' lossy candidates), is measured again
// whatever the partners, its two ends' stand-ins paired in the rounds after those: one all-reduce
// that waited out a retransmit timeout makes a healthy link look slow once, not twice (link_rules.h
// names a link measured again only when it is bad again in the same way).
// Cost: `partners` rounds of one pair per suspect, and a round or more for the named links,
// whatever the world size.
inline constexpr int kSecondPassPartners = 2;
struct SecondPass {
  std::vector<std::string> suspects;                     // hosts, sorted
  // The rank standing for each suspect met with partners (a link's ends measured again are
  // in `rechecks`): in a pair that is not a recheck, exactly one rank is here.
  std::map<int, std::string> suspect_of_rank;
  std::vector<std::vector<std::pair<int, int>>> rounds;  // rank pairs, lower rank first, disjoint
  std::set<std::pair<int, int>> rechecks;                // the pairs of `rounds` that are links
  std::string why_none;                                  // "" when there are rounds
  std::string why_no_partners;  // no suspect met with partners (the links may still be measured)
};
// `links`: one transport's first-round pairwise links, from every rank; `host_of`: the
// participants' hosts.
SecondPass plan_second_pass(const std::vector<LinkEvidence>& links,
                            const std::map<int, std::string>& host_of,
                            int partners = kSecondPassPartners);

// The phase (never required: it adds evidence, and its absence takes nothing from a run):
// - pass when every pair of this rank was measured; degraded when one failed (timeout, peer lost,
//   wrong data...: the sample's error, which judge_links reads as a bad link): the rounds add
//   evidence, they do not fail a run whose transports passed; rounds the budget cut are said in
//   the detail; not_run when the budget was spent before the first round.
Phase pairwise_phase(const PairwiseDecision& plan, const PairwiseRun& run);
// The phase when the plan did not run the rounds (or this rank takes no part).
Phase pairwise_not_run_phase(const std::string& transport, const std::string& why, bool skipped);

// How this rank's transports ended, for the pairwise decision: judged from its records (the
// transports step's outcomes, by the rules judge_local applies to them) and the phases next_step
// passed over (`seen.passed_over`), for the transports `seen.requested`; never read back from the
// verdict. `ran` and `rows` are what rank 0's decision reads besides the summaries: whether its
// transports step ran any transport, and its rows.
struct TransportsEnded {
  RankSummary summary;
  bool ran = false;
  std::vector<TransportRow> rows;
};
TransportsEnded summarize_transports(const std::vector<StepRecord>& records, int rank,
                                     const std::string& host);

}  // namespace ncclsmoke::results
