// The report's model and renderers on rows built in memory (report_rows.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "results/report/html_report.h"
#include "results/report/markdown_report.h"
#include "results/report/model.h"
#include "results/report/svg_chart.h"
#include "tests/report/report_rows.h"

namespace ncclsmoke::report {
namespace {

using namespace ncclsmoke::report::testing;

// 10 healthy runs an hour apart, then 2 regressions (degraded, then fail).
ReportInput healthy_then_regression() {
  ReportInput in;
  for (int i = 0; i < 10; ++i)
    add_run(
        in,
        {.run_id = "run-" + std::to_string(i), .t = kT0 + i * 3600.0, .busbw = 0.70 + 0.01 * i});
  add_run(in, {.run_id = "run-10",
               .t = kT0 + 10 * 3600.0,
               .verdict = "degraded",
               .busbw = 0.40,
               .findings = {{"BANDWIDTH_REGRESSION", "socket busbw 0.40 GB/s is 54% of 0.74"}}});
  add_run(in, {.run_id = "run-11",
               .t = kT0 + 11 * 3600.0,
               .verdict = "fail",
               .busbw = 0.15,
               .findings = {{"BANDWIDTH_REGRESSION", "socket busbw 0.15 GB/s is 20% of 0.74"},
                            {"STRAGGLER", "rank 1 on vm is slow"}}});
  return in;
}

TEST(ReportModel, RegressionsAreNewestFirstWithTheirGateNumbers) {
  auto m = build_model(healthy_then_regression(), options_at(kT0 + 12 * 3600.0));
  EXPECT_EQ(m.run_count, 12u);
  EXPECT_EQ(m.verdict_counts["pass"], 10);
  EXPECT_EQ(m.verdict_counts["fail"], 1);
  ASSERT_EQ(m.regressions.size(), 2u);
  EXPECT_EQ(m.regressions[0].run.run_id, "run-11");
  EXPECT_EQ(m.regressions[1].run.run_id, "run-10");
  ASSERT_EQ(m.regressions[0].findings.size(), 1u);  // only the regression codes
  EXPECT_EQ(m.regressions[0].findings[0].code, "BANDWIDTH_REGRESSION");
  ASSERT_EQ(m.regressions[0].gates.size(), 1u);
  EXPECT_DOUBLE_EQ(m.regressions[0].gates[0].busbw_gbps, 0.15);
  EXPECT_EQ(m.findings_total, 3u);
  EXPECT_EQ(m.findings.front().run_id, "run-11");  // newest first
}

TEST(ReportModel, LatestStateCarriesRatioAndTheStartOfItsStreak) {
  auto in = healthy_then_regression();
  add_run(in, {.run_id = "run-12",
               .t = kT0 + 12 * 3600.0,
               .verdict = "fail",
               .busbw = 0.10,
               .findings = {{"BANDWIDTH_REGRESSION", "still low"}}});
  auto m = build_model(in, options_at(kT0 + 13 * 3600.0));
  ASSERT_EQ(m.latest.size(), 1u);
  const auto& s = m.latest[0];
  EXPECT_EQ(s.state, GateState::fail);
  EXPECT_NEAR(s.ratio, 0.10 / 0.74, 1e-9);
  // Below the band since run-10 (degraded), then fail: one streak.
  EXPECT_DOUBLE_EQ(s.since_unix, kT0 + 10 * 3600.0);
  EXPECT_EQ(s.streak_runs, 3u);
  EXPECT_EQ(describe_latest(s), "socket on ci-loopback: 0.10 GB/s at 64 MiB, 14% of baseline 0.74");
}

TEST(ReportModel, GateStateFollowsTheBand) {
  EXPECT_EQ(gate_state(0.7, 0.74, 0.6, 0.25), GateState::ok);
  EXPECT_EQ(gate_state(0.4, 0.74, 0.6, 0.25), GateState::degraded);
  EXPECT_EQ(gate_state(0.1, 0.74, 0.6, 0.25), GateState::fail);
  EXPECT_EQ(gate_state(0.1, NAN, NAN, NAN), GateState::no_baseline);
  EXPECT_EQ(gate_state(NAN, 0.74, 0.6, 0.25), GateState::not_measured);
}

TEST(ReportModel, ThinningKeepsEveryRegressionAndTheExtremes) {
  ReportInput in;
  for (int i = 0; i < 10000; ++i) {
    bool reg = i % 500 == 7;
    add_run(
        in,
        {.run_id = "r" + std::to_string(i),
         .t = kT0 + i * 60.0,
         .verdict = reg ? "fail" : "pass",
         .busbw = reg ? 0.1 : 0.6 + (i % 97) * 0.001,
         .findings =
             reg ? std::vector<std::pair<std::string, std::string>>{{"BANDWIDTH_REGRESSION", "low"}}
                 : std::vector<std::pair<std::string, std::string>>{}});
  }
  in.gates[1234].busbw_gbps = 2.5;  // a lone high outlier survives as its bucket's max
  auto opt = options_at(kT0 + 10000 * 60.0);
  auto m = build_model(in, opt);
  ASSERT_EQ(m.series.size(), 1u);
  const auto& s = m.series[0];
  EXPECT_EQ(s.total_points, 10000u);
  EXPECT_LE(s.points.size(), opt.max_points_per_series + 20);  // 20 regressions on top
  EXPECT_EQ(std::count_if(s.points.begin(), s.points.end(),
                          [](const ChartPoint& p) { return p.regression; }),
            20);
  EXPECT_TRUE(std::any_of(s.points.begin(), s.points.end(),
                          [](const ChartPoint& p) { return p.run_id == "r1234"; }));
  EXPECT_TRUE(
      std::is_sorted(s.points.begin(), s.points.end(),
                     [](const ChartPoint& a, const ChartPoint& b) { return a.unix < b.unix; }));
  EXPECT_EQ(m.regressions.size(), 20u);  // never dropped
  EXPECT_TRUE(m.timeline_bucketed);
  EXPECT_LE(m.timeline.size(), opt.max_timeline_cells);
  int fail_cells = 0, runs_in_cells = 0;
  for (const auto& c : m.timeline) {
    fail_cells += c.verdict == "fail";
    for (const auto& [v, n] : c.counts) runs_in_cells += n;
  }
  EXPECT_EQ(fail_cells, 20);        // each failing run makes its bucket's worst verdict
  EXPECT_EQ(runs_in_cells, 10000);  // every run is counted in some cell
  EXPECT_EQ(m.findings.size(), 20u);
}

TEST(ReportHtml, RegressionIsCalledOutAtTheTop) {
  auto html = render_html(build_model(healthy_then_regression(), options_at(kT0 + 12 * 3600.0)));
  auto regs = html.find("<ul id=\"regressions\">");
  auto chart = html.find("<svg class=\"busbw-chart\"");
  auto timeline = html.find("id=\"timeline\"");
  auto findings = html.find("<table id=\"findings\">");
  ASSERT_NE(regs, std::string::npos);
  ASSERT_NE(chart, std::string::npos);
  EXPECT_LT(regs, chart);
  EXPECT_LT(chart, timeline);
  EXPECT_LT(timeline, findings);
  // Newest regression first, with its numbers.
  auto r11 = html.find("<li class=\"regression\" data-run=\"run-11\"");
  auto r10 = html.find("<li class=\"regression\" data-run=\"run-10\"");
  ASSERT_NE(r11, std::string::npos);
  ASSERT_NE(r10, std::string::npos);
  EXPECT_LT(r11, r10);
  EXPECT_NE(html.find("20% of baseline 0.74"), std::string::npos);
  EXPECT_NE(html.find("socket on ci-loopback: 0.15 GB/s at 64 MiB, 20% of baseline 0.74, since"),
            std::string::npos);
  EXPECT_EQ(count_of(html, "<tr class=\"finding"), 3u);
  // Self-contained: nothing to fetch.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

TEST(ReportHtml, PointsAndTimelineCellsCarryTheirVerdict) {
  auto m = build_model(healthy_then_regression(), options_at(kT0 + 12 * 3600.0));
  ASSERT_EQ(m.series.size(), 1u);
  auto svg = busbw_chart_svg(m.series[0], kT0, kT0 + 12 * 3600.0);
  EXPECT_NE(svg.find("data-transport=\"socket\""), std::string::npos);
  EXPECT_EQ(count_of(svg, "<circle class=\"pt v-pass\" data-verdict=\"pass\""), 10u);
  EXPECT_EQ(count_of(svg, "<circle class=\"pt v-degraded regression\" data-verdict=\"degraded\""),
            1u);
  EXPECT_EQ(count_of(svg,
                     "<circle class=\"pt v-fail regression\" data-verdict=\"fail\" "
                     "data-run=\"run-11\""),
            1u);
  EXPECT_NE(svg.find("fill=\"#c62828\""), std::string::npos);  // the fail point is red
  EXPECT_NE(svg.find("class=\"baseline\""), std::string::npos);
  EXPECT_NE(svg.find("class=\"fail-zone\""), std::string::npos);
  EXPECT_NE(svg.find("class=\"degraded-zone\""), std::string::npos);
  EXPECT_NE(svg.find("busbw (GB/s)"), std::string::npos);
  EXPECT_NE(svg.find("class=\"x-tick\""), std::string::npos);

  auto strip = timeline_svg(m.timeline, m.timeline_bucketed);
  EXPECT_EQ(count_of(strip, "<rect class=\"cell"), 12u);
  EXPECT_EQ(count_of(strip, "data-verdict=\"pass\""), 10u);
  EXPECT_NE(strip.find("run run-11 \xC2\xB7 fail"), std::string::npos);  // tooltip text
}

TEST(ReportHtml, MissingNumbersAndMissingBaselinesStillDraw) {
  ReportInput in;
  add_run(in, {.run_id = "a", .t = kT0, .verdict = "inconclusive", .busbw = NAN, .baseline = NAN});
  add_run(in, {.run_id = "b", .t = kT0 + 60, .busbw = 0.5, .baseline = NAN, .profile = ""});
  auto m = build_model(in, options_at(kT0 + 120));
  auto html = render_html(m);
  EXPECT_NE(html.find("class=\"pt v-inconclusive missing\""), std::string::npos);
  EXPECT_NE(html.find("(no profile)"), std::string::npos);
  EXPECT_NE(html.find("no number at 64 MiB in the latest run"), std::string::npos);
  EXPECT_NE(html.find("0.50 GB/s at 64 MiB, no baseline"), std::string::npos);
}

TEST(ReportHtml, HostileStringsFromTheHistoryAreEscapedEverywhere) {
  const std::string evil = "<script>alert(1)</script>";
  const std::string attr_evil = "x\" onload=\"alert(2)";
  ReportInput in;
  add_run(in, {.run_id = "run-" + attr_evil,
               .t = kT0,
               .verdict = "fail",
               .busbw = 0.1,
               .profile = "p" + evil,
               .transport = "sock" + attr_evil,
               .findings = {{"BANDWIDTH_REGRESSION", evil}, {"STRAGGLER", evil}},
               .hosts = {"h" + evil}});
  in.runs[0].verdict = "fail" + evil;
  in.gates[0].verdict = "fail" + attr_evil;
  in.findings[0].severity = "error" + evil;
  auto opt = options_at(kT0 + 60);
  opt.title = "T" + evil;
  opt.history_path = "/tmp/" + evil;
  auto html = render_html(build_model(in, opt));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("onload=\"alert"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_GE(count_of(html, "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>"), 2u);  // message
  EXPECT_NE(html.find("x&quot; onload=&quot;alert(2)"), std::string::npos);

  auto md = render_markdown(build_model(in, opt));
  for (std::size_t p = md.find('<'); p != std::string::npos; p = md.find('<', p + 1))
    EXPECT_TRUE(p > 0 && md[p - 1] == '\\') << "unescaped '<' at " << p << " in\n" << md;
  EXPECT_NE(md.find("\\<script\\>alert(1)\\</script\\>"), std::string::npos);
}

TEST(ReportHtml, EmptyWindowSaysNoRunsSince) {
  auto opt = options_at(kT0);
  auto m = build_model(ReportInput{}, opt);
  auto html = render_html(m);
  EXPECT_NE(html.find("<p id=\"empty\">No runs since 2026-11-04 11:06 UTC (14d).</p>"),
            std::string::npos);
  EXPECT_EQ(html.find("busbw-chart"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  auto md = render_markdown(m);
  EXPECT_NE(md.find("No runs since 2026-11-04 11:06 UTC."), std::string::npos);
}

TEST(ReportMarkdown, SummarisesCountsRegressionsAndLatest) {
  auto in = healthy_then_regression();
  for (int i = 0; i < 15; ++i)
    add_run(in, {.run_id = "x" + std::to_string(i),
                 .t = kT0 + 20 * 3600.0 + i,
                 .verdict = "fail",
                 .busbw = 0.1,
                 .findings = {{"SILENT_FALLBACK", "expected efa, observed tcp"}}});
  auto md = render_markdown(build_model(in, options_at(kT0 + 30 * 3600.0)), 10);
  EXPECT_NE(md.find("Runs: 27"), std::string::npos);
  EXPECT_NE(md.find("pass 10 \xC2\xB7 degraded 1 \xC2\xB7 fail 16 \xC2\xB7 inconclusive 0"),
            std::string::npos);
  EXPECT_NE(md.find("Regressions (17, newest first):"), std::string::npos);
  EXPECT_NE(md.find("and 7 earlier"), std::string::npos);
  EXPECT_EQ(count_of(md, "SILENT\\_FALLBACK (warning)"), 10u);
  EXPECT_NE(md.find("socket on ci-loopback: 0.10 GB/s at 64 MiB, 14% of baseline 0.74"),
            std::string::npos);
  EXPECT_NE(md.find("**fail** since"), std::string::npos);
}

}  // namespace
}  // namespace ncclsmoke::report
