// The pairwise rounds' schedule (transports/pair_schedule.h) on its own: every round is a set of
// disjoint pairs of participants (N/2 at once; an odd N leaves exactly one out), small worlds meet
// every pair exactly once (N-1 rounds, N for odd N), large ones get the fixed number of rounds
// with at least 2 different partners per rank and no pair repeated, ranks need not be 0..N-1.
#include "transports/pair_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ncclsmoke::transports {
namespace {

std::vector<int> iota_ranks(int n, int stride = 1, int first = 0) {
  std::vector<int> r;
  for (int i = 0; i < n; ++i) r.push_back(first + i * stride);
  return r;
}

// Checks what every schedule must be; returns each rank's set of partners.
std::map<int, std::set<int>> check_rounds(const std::vector<int>& ranks,
                                          const std::vector<PairRound>& rounds) {
  const int n = static_cast<int>(ranks.size());
  std::set<int> in(ranks.begin(), ranks.end());
  std::map<int, std::set<int>> partners;
  std::set<std::pair<int, int>> seen;
  for (size_t k = 0; k < rounds.size(); ++k) {
    SCOPED_TRACE("round " + std::to_string(k));
    const auto& r = rounds[k];
    EXPECT_EQ(static_cast<int>(r.pairs.size()), n / 2) << "N/2 pairs at once";
    std::set<int> busy;
    for (const auto& [a, b] : r.pairs) {
      EXPECT_LT(a, b);
      EXPECT_TRUE(in.count(a) && in.count(b)) << a << "-" << b << " not participants";
      EXPECT_TRUE(busy.insert(a).second) << "rank " << a << " in two pairs of one round";
      EXPECT_TRUE(busy.insert(b).second) << "rank " << b << " in two pairs of one round";
      EXPECT_TRUE(seen.insert({a, b}).second) << "pair " << a << "-" << b << " repeated";
      partners[a].insert(b);
      partners[b].insert(a);
      EXPECT_EQ(partner_in(r, a), b);
      EXPECT_EQ(partner_in(r, b), a);
    }
    if (n % 2 == 1) {
      EXPECT_TRUE(in.count(r.idle)) << "an odd N leaves one participant out";
      EXPECT_FALSE(busy.count(r.idle));
      EXPECT_EQ(partner_in(r, r.idle), -1);
      EXPECT_EQ(busy.size() + 1, in.size());
    } else {
      EXPECT_EQ(r.idle, -1);
      EXPECT_EQ(busy.size(), in.size());
    }
  }
  return partners;
}

TEST(PairSchedule, FewerThanTwoRanksHaveNoRounds) {
  EXPECT_TRUE(pair_rounds({}).empty());
  EXPECT_TRUE(pair_rounds({5}).empty());
  EXPECT_EQ(round_robin_rounds(0), 0);
  EXPECT_EQ(round_robin_rounds(1), 0);
}

TEST(PairSchedule, TwoRanksMeetOnce) {
  auto rounds = pair_rounds({3, 1});
  ASSERT_EQ(rounds.size(), 1u);
  ASSERT_EQ(rounds[0].pairs.size(), 1u);
  EXPECT_EQ(rounds[0].pairs[0], std::make_pair(1, 3));
  EXPECT_EQ(rounds[0].idle, -1);
}

TEST(PairSchedule, SmallWorldsMeetEveryPairExactlyOnce) {
  for (int n = 2; n <= 16; ++n) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto ranks = iota_ranks(n);
    auto rounds = pair_rounds(ranks);
    EXPECT_EQ(static_cast<int>(rounds.size()), n % 2 == 0 ? n - 1 : n);
    auto partners = check_rounds(ranks, rounds);
    for (int r : ranks) EXPECT_EQ(static_cast<int>(partners[r].size()), n - 1) << "rank " << r;
    if (n % 2 == 1) {  // each rank sits out exactly once
      std::multiset<int> idle;
      for (const auto& r : rounds) idle.insert(r.idle);
      for (int r : ranks) EXPECT_EQ(idle.count(r), 1u);
    }
  }
}

TEST(PairSchedule, LargeWorldsGetTheFixedRoundsWithTwoOrMorePartners) {
  for (int n = 17; n <= 300; ++n) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto ranks = iota_ranks(n);
    auto rounds = pair_rounds(ranks);
    EXPECT_EQ(rounds.size(), 3u);
    auto partners = check_rounds(ranks, rounds);
    for (int r : ranks) EXPECT_GE(partners[r].size(), 2u) << "rank " << r;
  }
  auto big = pair_rounds(iota_ranks(1024));
  ASSERT_EQ(big.size(), 3u);
  auto partners = check_rounds(iota_ranks(1024), big);
  for (const auto& [r, p] : partners) EXPECT_EQ(p.size(), 3u) << "rank " << r;
}

TEST(PairSchedule, TwoRoundsOnAnOddWorldAddARoundSoNoRankMeetsOnlyOne) {
  for (int n : {17, 19, 33, 101}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto ranks = iota_ranks(n);
    auto rounds = pair_rounds(ranks, {16, 2});
    EXPECT_EQ(rounds.size(), 3u);
    auto partners = check_rounds(ranks, rounds);
    for (int r : ranks) EXPECT_GE(partners[r].size(), 2u) << "rank " << r;
  }
  auto even = pair_rounds(iota_ranks(18), {16, 2});
  EXPECT_EQ(even.size(), 2u);
  auto partners = check_rounds(iota_ranks(18), even);
  for (const auto& [r, p] : partners) EXPECT_EQ(p.size(), 2u);
}

TEST(PairSchedule, RoundsZeroOrMoreThanTheRoundRobinGiveEveryPair) {
  auto ranks = iota_ranks(20);
  auto all = pair_rounds(ranks, {16, 0});
  EXPECT_EQ(all.size(), 19u);
  auto partners = check_rounds(ranks, all);
  for (int r : ranks) EXPECT_EQ(partners[r].size(), 19u);
  EXPECT_EQ(pair_rounds(ranks, {16, 500}).size(), 19u);
  // A threshold of 0 applies the fixed rounds to small worlds too.
  auto few = pair_rounds(iota_ranks(8), {0, 3});
  EXPECT_EQ(few.size(), 3u);
  check_rounds(iota_ranks(8), few);
}

TEST(PairSchedule, AnyParticipantListAndOrderGiveTheSameSchedule) {
  // Ranks left out (a missing rank) leave gaps: the schedule is over the participants only.
  std::vector<int> ranks = {0, 2, 3, 5, 6, 9, 11};
  auto a = pair_rounds(ranks);
  std::vector<int> shuffled = {11, 3, 0, 9, 2, 6, 5, 3};  // duplicates are ignored
  auto b = pair_rounds(shuffled);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].pairs, b[k].pairs);
    EXPECT_EQ(a[k].idle, b[k].idle);
  }
  auto partners = check_rounds(ranks, a);
  for (int r : ranks) EXPECT_EQ(partners[r].size(), ranks.size() - 1);
  auto strided = iota_ranks(40, 3, 7);
  check_rounds(strided, pair_rounds(strided));
}

TEST(PairSchedule, PartnerOfANonParticipantIsNone) {
  auto rounds = pair_rounds(iota_ranks(4));
  for (const auto& r : rounds) EXPECT_EQ(partner_in(r, 42), -1);
}

}  // namespace
}  // namespace ncclsmoke::transports
