#include "transports/pair_schedule.h"

#include <algorithm>

namespace ncclsmoke::transports {

int round_robin_rounds(int n) {
  if (n < 2) return 0;
  return n % 2 == 0 ? n - 1 : n;
}

namespace {

// Round `r` of the circle method over m (even) slots: slot m-1 stays put and meets slot r; the
// others pair up symmetrically around r. Slot n (== m-1 when n is odd) is the empty seat.
PairRound circle_round(const std::vector<int>& ranks, int r) {
  const int n = static_cast<int>(ranks.size());
  const int m = n % 2 == 0 ? n : n + 1;  // an odd n gets an empty seat
  const int ring = m - 1;
  PairRound out;
  auto add = [&](int a, int b) {
    if (a >= n || b >= n) {  // one of them is the empty seat: the other sits out
      out.idle = ranks[static_cast<size_t>(a >= n ? b : a)];
      return;
    }
    int x = ranks[static_cast<size_t>(a)], y = ranks[static_cast<size_t>(b)];
    out.pairs.emplace_back(std::min(x, y), std::max(x, y));
  };
  add(r, m - 1);
  for (int i = 1; i < m / 2; ++i) add((r + i) % ring, (r - i + ring) % ring);
  std::sort(out.pairs.begin(), out.pairs.end());
  return out;
}

}  // namespace

std::vector<PairRound> pair_rounds(std::vector<int> ranks, const PairScheduleOptions& o) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  const int n = static_cast<int>(ranks.size());
  const int total = round_robin_rounds(n);
  std::vector<PairRound> out;
  if (total == 0) return out;
  int want = total;
  if (n > o.all_pairs_up_to && o.rounds > 0) {
    want = o.rounds;
    // An odd n leaves each rank out of exactly one round of the round robin: with two rounds a
    // rank could meet a single partner, so a third is added.
    if (n % 2 == 1 && want == 2) want = 3;
    want = std::min(want, total);
  }
  for (int j = 0; j < want; ++j) {
    // Spread over the round robin (all of it when want == total).
    int r = static_cast<int>(static_cast<long long>(j) * total / want);
    out.push_back(circle_round(ranks, r));
  }
  return out;
}

int partner_in(const PairRound& round, int rank) {
  for (const auto& [a, b] : round.pairs) {
    if (a == rank) return b;
    if (b == rank) return a;
  }
  return -1;
}

}  // namespace ncclsmoke::transports
