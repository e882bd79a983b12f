// The shared ring schedule (transports/ring_schedule.h) on its own, without any backend: the
// partition, each rank's step order, that neighbours agree on every chunk, and a whole all-reduce
// simulated over the schedule (in place and out of place) giving exact sums.
#include "transports/ring_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ncclsmoke::transports {
namespace {

const std::vector<std::size_t> kCounts = {0, 1, 2, 3, 5, 7, 8, 9, 17, 100, 1001, 4099};

TEST(RingSchedulePartition, SegmentsCoverEveryElementOnceForEveryCountAndWorld) {
  for (int n = 1; n <= 8; ++n)
    for (std::size_t count : kCounts) {
      SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count));
      std::vector<int> hits(count, 0);
      std::size_t next = 0, lo = count, hi = 0;
      for (int i = 0; i < n; ++i) {
        RingSpan s = ring_segment(count, n, i);
        EXPECT_EQ(s.off, next) << "segment " << i << " does not follow the previous one";
        next = s.off + s.len;
        lo = std::min(lo, s.len), hi = std::max(hi, s.len);
        for (std::size_t e = s.off; e < s.off + s.len && e < count; ++e) ++hits[e];
      }
      EXPECT_EQ(next, count);
      EXPECT_LE(hi - lo, 1u) << "segment lengths differ by more than one";
      for (std::size_t e = 0; e < count; ++e) ASSERT_EQ(hits[e], 1) << "element " << e;
    }
}

TEST(RingSchedulePartition, ChunksCoverEachSegmentOnceAndOnlyTheLastIsShort) {
  for (int n = 1; n <= 8; ++n)
    for (std::size_t count : kCounts)
      for (std::size_t chunk : {std::size_t{1}, std::size_t{3}, std::size_t{64}}) {
        RingSchedule s(0, n, count, chunk);
        for (int seg = 0; seg < n; ++seg) {
          SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count) +
                       " chunk=" + std::to_string(chunk) + " seg=" + std::to_string(seg));
          RingSpan whole = s.segment(seg);
          std::size_t at = whole.off;
          for (std::size_t k = 0; k < s.chunks(seg); ++k) {
            RingSpan c = s.chunk(seg, k);
            EXPECT_EQ(c.off, at);
            EXPECT_GT(c.len, 0u);
            if (k + 1 < s.chunks(seg)) {
              EXPECT_EQ(c.len, chunk);
            }
            at += c.len;
          }
          EXPECT_EQ(at, whole.off + whole.len);
        }
      }
}

TEST(RingScheduleSteps, FourRanksRankZeroOrder) {
  RingSchedule s(0, 4, 40, 100);
  ASSERT_EQ(s.steps(), 6);
  std::vector<int> sends, recvs;
  for (int t = 0; t < s.steps(); ++t) {
    sends.push_back(s.send_segment(t));
    recvs.push_back(s.recv_segment(t));
  }
  EXPECT_EQ(sends, (std::vector<int>{0, 3, 2, 1, 0, 3}));
  EXPECT_EQ(recvs, (std::vector<int>{3, 2, 1, 0, 3, 2}));
  EXPECT_EQ(s.next(), 1);
  EXPECT_EQ(s.prev(), 3);
  EXPECT_STREQ(s.phase(2), "reduce-scatter");
  EXPECT_STREQ(s.phase(3), "all-gather");
}

TEST(RingScheduleSteps, EveryRanksOrderForwardsWhatItReceivedAndMatchesItsNeighbours) {
  for (int n = 1; n <= 8; ++n)
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE("n=" + std::to_string(n) + " rank=" + std::to_string(r));
      RingSchedule s(r, n, 1001, 7), next((r + 1) % n, n, 1001, 7);
      ASSERT_EQ(s.steps(), 2 * (n - 1));
      if (n == 1) continue;
      EXPECT_EQ(s.send_segment(0), r) << "a rank starts with its own segment";
      std::vector<int> reduced, gathered;
      for (int t = 0; t < s.steps(); ++t) {
        if (t > 0) {
          EXPECT_EQ(s.send_segment(t), s.recv_segment(t - 1)) << "step " << t;
        }
        EXPECT_EQ(next.recv_segment(t), s.send_segment(t)) << "step " << t;
        EXPECT_EQ(s.reduces(t), t < n - 1);
        (s.reduces(t) ? reduced : gathered).push_back(s.recv_segment(t));
      }
      // The reduce-scatter ends with segment r+1 final here; the all-gather brings the others.
      EXPECT_EQ(reduced.back(), (r + 1) % n);
      std::vector<int> seen(n, 0);
      for (int seg : gathered) ++seen[seg];
      for (int seg = 0; seg < n; ++seg) EXPECT_EQ(seen[seg], seg == (r + 1) % n ? 0 : 1) << seg;
      // The lists the backends post from: the next rank receives exactly what this one sends.
      auto sends = s.sends(), theirs = next.recvs();
      ASSERT_EQ(sends.size(), theirs.size());
      for (std::size_t i = 0; i < sends.size(); ++i) {
        EXPECT_EQ(sends[i].step, theirs[i].step);
        EXPECT_EQ(sends[i].index, theirs[i].index);
        EXPECT_EQ(sends[i].span.off, theirs[i].span.off);
        EXPECT_EQ(sends[i].span.len, theirs[i].span.len);
        EXPECT_EQ(sends[i].reduce, theirs[i].reduce);
      }
    }
}

// All ranks walk the schedule in lock step, chunk by chunk: rank r's chunk goes to rank r+1,
// which sums it (into place, or with its own input when out of place) or copies it.
std::vector<std::vector<int64_t>> simulate(int n, std::size_t count, std::size_t chunk,
                                           bool in_place) {
  constexpr int64_t kPoison = -999999;
  std::vector<std::vector<int64_t>> in(n), out(n);
  std::vector<RingSchedule> s;
  for (int r = 0; r < n; ++r) {
    s.emplace_back(r, n, count, chunk);
    for (std::size_t e = 0; e < count; ++e) in[r].push_back(1000 * (r + 1) + int64_t(e));
    out[r] = in_place ? in[r] : std::vector<int64_t>(count, kPoison);
  }
  if (n == 1) return in;
  for (int t = 0; t < s[0].steps(); ++t) {
    std::vector<std::vector<std::vector<int64_t>>> wire(n);
    for (int r = 0; r < n; ++r) {
      int seg = s[r].send_segment(t);
      const auto& src = t == 0 && !in_place ? in[r] : out[r];
      for (std::size_t k = 0; k < s[r].chunks(seg); ++k) {
        RingSpan c = s[r].chunk(seg, k);
        wire[r].emplace_back(src.begin() + c.off, src.begin() + c.off + c.len);
        for (int64_t v : wire[r].back()) EXPECT_NE(v, kPoison) << "sent bytes never written";
      }
    }
    for (int r = 0; r < n; ++r) {
      int from = s[r].prev(), seg = s[r].recv_segment(t);
      EXPECT_EQ(wire[from].size(), s[r].chunks(seg));
      for (std::size_t k = 0; k < s[r].chunks(seg) && k < wire[from].size(); ++k) {
        RingSpan c = s[r].chunk(seg, k);
        for (std::size_t i = 0; i < c.len; ++i) {
          int64_t base = in_place ? out[r][c.off + i] : in[r][c.off + i];
          out[r][c.off + i] = s[r].reduces(t) ? base + wire[from][k][i] : wire[from][k][i];
        }
      }
    }
  }
  return out;
}

TEST(RingScheduleSimulation, SumsAreExactInPlaceAndOutOfPlace) {
  for (int n = 1; n <= 8; ++n)
    for (std::size_t count : kCounts)
      for (std::size_t chunk : {std::size_t{1}, std::size_t{4}, std::size_t{1000}})
        for (bool in_place : {false, true}) {
          SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count) +
                       " chunk=" + std::to_string(chunk) + (in_place ? " in-place" : ""));
          auto out = simulate(n, count, chunk, in_place);
          int64_t rank_sum = 1000LL * n * (n + 1) / 2;
          for (int r = 0; r < n; ++r)
            for (std::size_t e = 0; e < count; ++e)
              ASSERT_EQ(out[r][e], rank_sum + int64_t(n) * int64_t(e))
                  << "rank " << r << " element " << e;
        }
}

TEST(RingScheduleArgs, RankOutsideTheWorldIsRejected) {
  EXPECT_THROW(RingSchedule(3, 3, 10, 1), std::invalid_argument);
  EXPECT_THROW(RingSchedule(0, 0, 10, 1), std::invalid_argument);
  EXPECT_EQ(RingSchedule(0, 2, 10, 0).chunk_elems(), 1u) << "a zero chunk is one element";
}

}  // namespace
}  // namespace ncclsmoke::transports
