#include "results/report/scale.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ncclsmoke::report {
namespace {

TEST(ReportScale, LinearScaleMapsDomainOntoRangeIncludingInvertedY) {
  LinearScale y{0, 2, 200, 0};  // SVG: y grows downwards
  EXPECT_DOUBLE_EQ(y(0), 200);
  EXPECT_DOUBLE_EQ(y(2), 0);
  EXPECT_DOUBLE_EQ(y(0.5), 150);
  LinearScale flat{3, 3, 0, 100};
  EXPECT_DOUBLE_EQ(flat(3), 50);
}

TEST(ReportScale, NiceTicksCoverTheRangeWithRoundSteps) {
  auto t = nice_ticks(0, 0.8, 5);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_DOUBLE_EQ(t.front(), 0);
  EXPECT_NEAR(t[1], 0.2, 1e-12);
  EXPECT_NEAR(t.back(), 0.8, 1e-12);

  auto u = nice_ticks(0, 187, 5);  // step 50: 0..200
  EXPECT_DOUBLE_EQ(u.front(), 0);
  EXPECT_DOUBLE_EQ(u.back(), 200);
  EXPECT_DOUBLE_EQ(u[1] - u[0], 50);

  auto w = nice_ticks(3.2, 3.2, 5);  // degenerate: still an interval around the value
  EXPECT_LE(w.front(), 3.2);
  EXPECT_GE(w.back(), 3.2);
  EXPECT_GE(w.size(), 2u);

  auto bad = nice_ticks(NAN, 1, 5);
  EXPECT_EQ(bad, (std::vector<double>{0, 1}));
}

TEST(ReportScale, TimeTicksAreRoundUtcTimesWithDateLabels) {
  double t0 = 1795000000;  // 2026-11-18 11:06:40 UTC
  auto days = time_ticks(t0, t0 + 14 * 86400, 7);
  ASSERT_FALSE(days.empty());
  for (const auto& t : days) {
    EXPECT_EQ(std::fmod(t.unix, 86400), 0) << t.label;  // midnight UTC
    EXPECT_GE(t.unix, t0);
    EXPECT_LE(t.unix, t0 + 14 * 86400);
  }
  EXPECT_EQ(days.front().label, "11-19");
  EXPECT_EQ(days[1].unix - days[0].unix, 2 * 86400);  // 14 days / 7 ticks

  auto hours = time_ticks(t0, t0 + 6 * 3600, 6);
  ASSERT_GE(hours.size(), 5u);
  EXPECT_EQ(hours.front().label, "11-18 12:00");
  EXPECT_EQ(std::fmod(hours.front().unix, 3600), 0);

  auto one = time_ticks(t0, t0, 6);  // a single run still gets a label
  ASSERT_EQ(one.size(), 1u);
}

TEST(ReportScale, FormatsBytesBandwidthPercentAndTime) {
  EXPECT_EQ(format_bytes(67108864), "64 MiB");
  EXPECT_EQ(format_bytes(1048576), "1 MiB");
  EXPECT_EQ(format_bytes(1000), "1000 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_gbps(0.3127), "0.31");
  EXPECT_EQ(format_gbps(12.44), "12.4");
  EXPECT_EQ(format_gbps(187.2), "187");
  EXPECT_EQ(format_gbps(NAN), "n/a");
  EXPECT_EQ(format_percent(0.4213), "42%");
  EXPECT_EQ(format_utc(1795000000), "2026-11-18 11:06 UTC");
  EXPECT_EQ(format_utc(1795000000, true), "2026-11-18 11:06:40 UTC");
  EXPECT_EQ(svg_num(12.5), "12.5");
  EXPECT_EQ(svg_num(40.0), "40");
  EXPECT_EQ(svg_num(-0.001), "0");
}

}  // namespace
}  // namespace ncclsmoke::report
