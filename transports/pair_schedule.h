#pragma once
// The pairwise rounds' schedule: rounds of disjoint pairs over the ranks taking
// part, N/2 pairs at once (an odd N leaves one rank out of each round), so a slow node (slow with
// every partner) is told from a slow link (slow with one partner only). Pure: no I/O, no clock.
//
// - Up to `all_pairs_up_to` ranks (default 16) every pair meets exactly once: the round-robin
//   "circle method", N-1 rounds (N rounds for an odd N, each rank sitting out once), so a bad link
//   between any two hosts is measured.
// - Above it, `rounds` rounds (default 3) of that same round robin, spread over it (round
//   j*(R/rounds) of its R), so every rank meets `rounds` different partners (an odd N may leave a
//   rank out of one of them: a round is added when that would leave it fewer than 2 partners).
//   Distinct rounds of one round robin never repeat a pair.
// - `rounds` = 0 asks for the whole round robin at any size.
// Every rank computes the same schedule from the same sorted participant list, so only that list
// and the options travel (harness/run/pairwise_plan.h).
#include <utility>
#include <vector>

namespace ncclsmoke::transports {

struct PairScheduleOptions {
  int all_pairs_up_to = 16;  // every pair meets once up to this many participants
  int rounds = 3;            // above it: this many rounds; 0 = every pair (the whole round robin)
};

struct PairRound {
  std::vector<std::pair<int, int>> pairs;  // ranks, first < second; disjoint
  int idle = -1;                           // the rank sitting this round out (odd N), else -1
};

// How many rounds the whole round robin has over n participants: n-1 (even n), n (odd n), 0 for
// n < 2.
int round_robin_rounds(int n);

// The rounds over `ranks` (distinct; any order: they are sorted first). Fewer than 2 ranks: none.
std::vector<PairRound> pair_rounds(std::vector<int> ranks, const PairScheduleOptions& o = {});

// `rank`'s partner in `round`, -1 when it sits out or does not take part.
int partner_in(const PairRound& round, int rank);

}  // namespace ncclsmoke::transports
