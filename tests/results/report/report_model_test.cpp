// The report's model and renderers on rows built in memory (report_rows.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "results/report/html_report.h"
#include "results/report/markdown_report.h"
#include "results/report/model.h"
#include "results/report/svg_chart.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"
#include "tests/results/report/report_rows.h"

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
               .verdict = results::Outcome::degraded,
               .busbw = 0.40,
               .findings = {{"BANDWIDTH_REGRESSION", "socket busbw 0.40 GB/s is 54% of 0.74"}}});
  add_run(in, {.run_id = "run-11",
               .t = kT0 + 11 * 3600.0,
               .verdict = results::Outcome::fail,
               .busbw = 0.15,
               .findings = {{"BANDWIDTH_REGRESSION", "socket busbw 0.15 GB/s is 20% of 0.74"},
                            {"STRAGGLER", "rank 1 on vm is slow"}}});
  return in;
}

TEST(ReportModel, ConsecutiveRegressedRunsAreOneIncident) {
  auto m = build_model(healthy_then_regression(), options_at(kT0 + 12 * 3600.0));
  EXPECT_EQ(m.run_count, 12u);
  EXPECT_EQ(m.verdict_counts[results::Outcome::pass], 10);
  EXPECT_EQ(m.verdict_counts[results::Outcome::fail], 1);
  ASSERT_EQ(m.clusters.size(), 1u);
  const auto& c = m.clusters[0];
  EXPECT_EQ(cluster_label(c.cluster), "default");
  ASSERT_EQ(c.incidents.size(), 1u);  // degraded then fail: one step change, one incident
  const auto& i = c.incidents[0];
  EXPECT_EQ(i.runs(), 2u);
  EXPECT_EQ(i.first_run_id, "run-10");
  EXPECT_EQ(i.last_run_id, "run-11");
  EXPECT_TRUE(i.ongoing());
  EXPECT_DOUBLE_EQ(i.onset_unix, kT0 + 10 * 3600.0);
  EXPECT_DOUBLE_EQ(i.duration_s(), 3600.0);
  EXPECT_EQ(i.worst_verdict, results::Outcome::fail);
  EXPECT_DOUBLE_EQ(i.lowest_busbw, 0.15);
  EXPECT_EQ(i.hosts, std::vector<std::string>{"vm"});
  EXPECT_EQ(i.kind, IncidentKind::bandwidth);
  EXPECT_EQ(i.codes, std::vector<results::AnyCode>{results::Code::BANDWIDTH_REGRESSION});
  EXPECT_EQ(i.message, "socket busbw 0.15 GB/s is 20% of 0.74");
  EXPECT_EQ(c.regression_runs, 2u);
  EXPECT_EQ(c.findings_total, 3u);
  // Two BANDWIDTH_REGRESSION messages differ (numbers), but their code, transport and hosts are
  // the same: one group; the STRAGGLER is its own: 2 groups.
  EXPECT_EQ(c.finding_groups_total, 2u);
  EXPECT_EQ(c.findings.front().last_run_id, "run-11");  // newest first
}

// 20 identical regressed runs after a step change are ONE incident, and their 20 identical
// findings are ONE row with the run count, first/last seen and the hosts filled in.
TEST(ReportModel, TwentyIdenticalRegressionsAreOneIncidentAndOneFindingRow) {
  ReportInput in;
  for (int i = 0; i < 5; ++i) add_run(in, {.run_id = "ok-" + std::to_string(i), .t = kT0 + i * 1800.0});
  for (int i = 0; i < 20; ++i)
    add_run(in, {.run_id = "bad-" + std::to_string(i),
                 .t = kT0 + (5 + i) * 1800.0,
                 .verdict = results::Outcome::degraded,
                 .busbw = 0.40,
                 .findings = {{"BANDWIDTH_REGRESSION", "socket: 0.4 GB/s below the degraded threshold"}},
                 .hosts = {"node-1", "node-2"},
                 .ranks = {},
                 .finding_hosts = {}});
  auto m = build_model(in, options_at(kT0 + 30 * 1800.0));
  ASSERT_EQ(m.clusters.size(), 1u);
  const auto& c = m.clusters[0];
  ASSERT_EQ(c.incidents.size(), 1u);
  EXPECT_EQ(c.incidents[0].runs(), 20u);
  EXPECT_EQ(c.incidents[0].hosts, (std::vector<std::string>{"node-1", "node-2"}));
  EXPECT_DOUBLE_EQ(c.incidents[0].duration_s(), 19 * 1800.0);
  ASSERT_EQ(c.findings.size(), 1u);
  const auto& f = c.findings[0];
  EXPECT_EQ(f.runs, 20u);
  EXPECT_EQ(f.first_run_id, "bad-0");
  EXPECT_EQ(f.last_run_id, "bad-19");
  EXPECT_EQ(f.hosts, (std::vector<std::string>{"node-1", "node-2"}));  // from the runs
  auto html = render_html(m);
  EXPECT_EQ(count_of(html, "<li class=\"incident\""), 1u);
  EXPECT_EQ(count_of(html, "<tr class=\"finding"), 1u);
  EXPECT_NE(html.find("20 runs from "), std::string::npos);
  EXPECT_NE(html.find("ongoing for 9 h 30 min"), std::string::npos);
}

// A run in band ends an incident; a run that measured nothing (no number, no finding) neither
// ends nor extends it; the next step change is a second incident.
TEST(ReportModel, IncidentsEndWhenMeasuredBackInBandNotOnAnUnmeasuredRun) {
  ReportInput in;
  int n = 0;
  auto at = [&] { return kT0 + (n++) * 1800.0; };
  auto ok = [&](double bw = 0.72) { add_run(in, {.run_id = "r" + std::to_string(n), .t = at(), .busbw = bw}); };
  auto bad = [&](double bw = 0.3) {
    add_run(in, {.run_id = "r" + std::to_string(n), .t = at(), .verdict = results::Outcome::degraded, .busbw = bw,
                 .findings = {{"BANDWIDTH_REGRESSION", "socket: low"}}});
  };
  auto nothing = [&] {
    add_run(in, {.run_id = "r" + std::to_string(n), .t = at(), .verdict = results::Outcome::inconclusive, .busbw = NAN});
  };
  ok(); ok(); bad(); bad(); nothing(); bad(); ok();  // incident 1: r2, r3, r5; cleared by r6
  ok(); bad(0.1); bad(0.1);                          // incident 2: r8, r9, ongoing
  auto m = build_model(in, options_at(kT0 + 20 * 1800.0));
  const auto& c = m.clusters.at(0);
  ASSERT_EQ(c.incidents.size(), 2u);
  const auto& second = c.incidents[0];  // newest first
  const auto& first = c.incidents[1];
  EXPECT_EQ(first.run_ids, (std::vector<std::string>{"r2", "r3", "r5"}));
  EXPECT_FALSE(first.ongoing());
  EXPECT_EQ(first.cleared_run_id, "r6");
  EXPECT_EQ(second.run_ids, (std::vector<std::string>{"r8", "r9"}));
  EXPECT_TRUE(second.ongoing());
  // r2 (t=2) to r6 (t=6), 30 min apart: regressed for 2 h until r6 measured it back in band.
  EXPECT_NE(describe_incident(first).find("3 runs from "), std::string::npos) << describe_incident(first);
  EXPECT_NE(describe_incident(first).find("cleared after 2 h"), std::string::npos)
      << describe_incident(first);
}

// "Now" keeps saying regressed until a run measures the key again.
TEST(ReportModel, NowStaysRegressedUntilARunMeasuresTheKeyAgain) {
  auto in = healthy_then_regression();  // ends with run-11 at 0.15 GB/s (fail)
  add_run(in, {.run_id = "run-12", .t = kT0 + 12 * 3600.0, .verdict = results::Outcome::inconclusive, .busbw = NAN});
  add_run(in, {.run_id = "run-13", .t = kT0 + 13 * 3600.0, .verdict = results::Outcome::inconclusive, .busbw = NAN});
  auto m = build_model(in, options_at(kT0 + 14 * 3600.0));
  ASSERT_EQ(m.clusters.at(0).latest.size(), 1u);
  auto s = m.clusters[0].latest[0];
  EXPECT_EQ(s.state, GateState::fail);
  EXPECT_DOUBLE_EQ(s.busbw_gbps, 0.15);
  EXPECT_EQ(s.run_id, "run-13");           // the newest run is named
  EXPECT_EQ(s.measured_run_id, "run-11");  // the number is the newest measured one
  EXPECT_EQ(s.unmeasured_after, 2u);
  EXPECT_DOUBLE_EQ(s.since_unix, kT0 + 10 * 3600.0);
  EXPECT_EQ(s.streak_runs, 2u);
  EXPECT_NE(describe_latest(s).find("not measured in the latest 2 runs"), std::string::npos)
      << describe_latest(s);
  EXPECT_TRUE(m.clusters[0].regressed_now());
  EXPECT_EQ(m.clusters[0].incidents.size(), 1u);  // still the one, ongoing
  EXPECT_TRUE(m.clusters[0].incidents[0].ongoing());

  // A run whose transport failed before its sweep stores no gate row at all: still not a number.
  add_run(in, {.run_id = "run-13b", .t = kT0 + 13.5 * 3600.0, .verdict = results::Outcome::inconclusive});
  in.gates.pop_back();
  m = build_model(in, options_at(kT0 + 14 * 3600.0));
  EXPECT_EQ(m.clusters[0].latest[0].state, GateState::fail);
  EXPECT_EQ(m.clusters[0].latest[0].unmeasured_after, 3u);
  EXPECT_EQ(m.clusters[0].latest[0].run_id, "run-13b");

  add_run(in, {.run_id = "run-14", .t = kT0 + 14 * 3600.0, .busbw = 0.71});  // measured, in band
  m = build_model(in, options_at(kT0 + 15 * 3600.0));
  s = m.clusters[0].latest[0];
  EXPECT_EQ(s.state, GateState::ok);
  EXPECT_EQ(s.unmeasured_after, 0u);
  EXPECT_FALSE(m.clusters[0].regressed_now());
  EXPECT_EQ(m.clusters[0].incidents[0].cleared_run_id, "run-14");
}

TEST(ReportModel, OneSectionPerClusterAndAClusterFilter) {
  ReportInput in;
  for (int i = 0; i < 4; ++i) {
    add_run(in, {.run_id = "a" + std::to_string(i), .t = kT0 + i * 60.0, .cluster = "us-east"});
    add_run(in, {.run_id = "b" + std::to_string(i), .t = kT0 + i * 60.0 + 1,
                 .verdict = i >= 2 ? results::Outcome::fail : results::Outcome::pass, .busbw = i >= 2 ? 0.1 : 0.7,
                 .cluster = "eu-west"});
    add_run(in, {.run_id = "c" + std::to_string(i), .t = kT0 + i * 60.0 + 2});  // no cluster
  }
  auto m = build_model(in, options_at(kT0 + 600));
  ASSERT_EQ(m.clusters.size(), 3u);
  EXPECT_EQ(m.clusters[0].cluster, "");  // "default" first
  EXPECT_EQ(m.clusters[1].cluster, "eu-west");
  EXPECT_EQ(m.clusters[2].cluster, "us-east");
  EXPECT_EQ(m.run_count, 12u);
  EXPECT_EQ(m.clusters[1].incidents.size(), 1u);  // gate below the band, no finding needed
  EXPECT_EQ(m.clusters[2].incidents.size(), 0u);
  // The same (profile, transport) in two clusters: two latest states, not one.
  EXPECT_EQ(m.clusters[1].latest.at(0).state, GateState::fail);
  EXPECT_EQ(m.clusters[2].latest.at(0).state, GateState::ok);
  auto html = render_html(m);
  EXPECT_EQ(count_of(html, "<section class=\"cluster\""), 3u);
  EXPECT_NE(html.find("data-cluster=\"default\""), std::string::npos);
  EXPECT_NE(html.find("<h2>Cluster eu-west</h2>"), std::string::npos);
  auto md = render_markdown(m);
  EXPECT_NE(md.find("### Cluster eu-west"), std::string::npos);
  EXPECT_NE(md.find("### Cluster default"), std::string::npos);

  auto opt = options_at(kT0 + 600);
  opt.cluster = "eu-west";
  m = build_model(in, opt);
  ASSERT_EQ(m.clusters.size(), 1u);
  EXPECT_EQ(m.run_count, 4u);
  opt.cluster = "default";
  m = build_model(in, opt);
  ASSERT_EQ(m.clusters.size(), 1u);
  EXPECT_EQ(m.clusters[0].cluster, "");
}

// The same finding from every rank of a host (its subject the same, the rank in its message) is
// one row; rows stored before subjects group by code, transport and hosts, never by the text.
TEST(ReportModel, PerRankRepeatsOfAFindingAreOneRow) {
  ReportInput in;
  for (int run = 0; run < 3; ++run)
    for (int r = 0; r < 4; ++r) {
      add_run(in, {.run_id = "run" + std::to_string(run) + (r ? "-dup" + std::to_string(r) : ""),
                   .t = kT0 + run * 60.0 + r * 0.001,
                   .findings = {{"TRANSPORT_UNAVAILABLE",
                                 "transport fabric skipped on rank " + std::to_string(r) +
                                     " (host vm): no efa provider"}},
                   .ranks = {r}});
      in.findings.back().subject = results::reported_by({r, "vm"}, "transport:fabric", "", "fabric");
    }
  for (int r = 0; r < 2; ++r)
    add_run(in, {.run_id = "old" + std::to_string(r),
                 .t = kT0 + 500 + r,
                 .findings = {{"TRANSPORT_TIMEOUT", "an old row " + std::to_string(r)}},
                 .ranks = {r}});
  auto m = build_model(in, options_at(kT0 + 600));
  const auto& c = m.clusters.at(0);
  ASSERT_EQ(c.findings.size(), 2u);
  int unavailable = 0, old = 0;
  for (const auto& g : c.findings) {
    if (g.code == "TRANSPORT_TIMEOUT") {
      ++old;
      continue;
    }
    ++unavailable;
    EXPECT_EQ(g.ranks, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(g.runs, 12u);
    EXPECT_EQ(g.hosts, std::vector<std::string>{"vm"});
  }
  EXPECT_EQ(unavailable, 1);
  EXPECT_EQ(old, 1);  // "an old row 0" and "an old row 1": one code, one host, one row
}

// busbw by size of the newest run, its headline gate point the lower of out/in (in-place here).
TEST(ReportModel, SizeCurveOfTheLatestRunMarksTheHeadlineRow) {
  auto in = healthy_then_regression();
  in.verdicts["run-11"] = sweep_verdict_json("run-11");
  in.verdicts["run-3"] = sweep_verdict_json("run-3", 2.0);  // older: not drawn
  auto m = build_model(in, options_at(kT0 + 12 * 3600.0));
  const auto& c = m.clusters.at(0);
  ASSERT_EQ(c.size_curves.size(), 1u);
  const auto& sc = c.size_curves[0];
  EXPECT_EQ(sc.run_id, "run-11");
  EXPECT_EQ(sc.transport, "socket");
  ASSERT_EQ(sc.points.size(), 9u);  // 1 KiB, 4 KiB, ... 16 MiB, 64 MiB
  EXPECT_EQ(sc.points.front().bytes, 1024);
  EXPECT_EQ(sc.points.back().bytes, 64 << 20);
  EXPECT_EQ(sc.gate_bytes, 64 << 20);
  EXPECT_TRUE(sc.gate_in_place);
  EXPECT_DOUBLE_EQ(sc.gate_busbw, sc.points.back().in_gbps);
  EXPECT_LT(sc.points.back().in_gbps, sc.points.back().out_gbps);
  EXPECT_DOUBLE_EQ(sc.baseline_gbps, 0.74);
  auto svg = size_chart_svg(sc);
  EXPECT_NE(svg.find("data-gate-place=\"in\""), std::string::npos);
  EXPECT_EQ(count_of(svg, "<circle class=\"sz out\""), 9u);
  EXPECT_EQ(count_of(svg, "<circle class=\"sz in\""), 9u);
  EXPECT_EQ(count_of(svg, "<g class=\"gate-mark\" data-in-place=\"true\""), 1u);
  EXPECT_NE(svg.find(">64 MiB</text>"), std::string::npos);  // log2 ticks labelled as sizes
  EXPECT_NE(svg.find(">1 KiB</text>"), std::string::npos);
  EXPECT_NE(svg.find("class=\"baseline\""), std::string::npos);
  auto html = render_html(m);
  EXPECT_EQ(count_of(html, "<svg class=\"size-chart\""), 1u);
}

TEST(ReportModel, LatestStateCarriesRatioAndTheStartOfItsStreak) {
  auto in = healthy_then_regression();
  add_run(in, {.run_id = "run-12",
               .t = kT0 + 12 * 3600.0,
               .verdict = results::Outcome::fail,
               .busbw = 0.10,
               .findings = {{"BANDWIDTH_REGRESSION", "still low"}}});
  auto m = build_model(in, options_at(kT0 + 13 * 3600.0));
  ASSERT_EQ(m.clusters.at(0).latest.size(), 1u);
  const auto& s = m.clusters[0].latest[0];
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
         .verdict = reg ? results::Outcome::fail : results::Outcome::pass,
         .busbw = reg ? 0.1 : 0.6 + (i % 97) * 0.001,
         .findings =
             reg ? std::vector<std::pair<std::string, std::string>>{{"BANDWIDTH_REGRESSION", "low"}}
                 : std::vector<std::pair<std::string, std::string>>{}});
  }
  in.gates[1234].busbw_gbps = 2.5;  // a lone high outlier survives as its bucket's max
  auto opt = options_at(kT0 + 10000 * 60.0);
  auto model = build_model(in, opt);
  ASSERT_EQ(model.clusters.size(), 1u);
  const auto& m = model.clusters[0];
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
  EXPECT_EQ(m.regression_runs, 20u);  // never dropped
  EXPECT_EQ(m.incidents.size(), 20u);  // each isolated regressed run is its own incident
  EXPECT_TRUE(m.timeline_bucketed);
  EXPECT_LE(m.timeline.size(), opt.max_timeline_cells);
  int fail_cells = 0, runs_in_cells = 0;
  for (const auto& c : m.timeline) {
    fail_cells += c.verdict == results::Outcome::fail;
    for (const auto& [v, n] : c.counts) runs_in_cells += n;
  }
  EXPECT_EQ(fail_cells, 20);        // each failing run makes its bucket's worst verdict
  EXPECT_EQ(runs_in_cells, 10000);  // every run is counted in some cell
  ASSERT_EQ(m.findings.size(), 1u);  // 20 identical messages: one row
  EXPECT_EQ(m.findings[0].runs, 20u);
}

TEST(ReportHtml, RegressionIsCalledOutAtTheTop) {
  auto html = render_html(build_model(healthy_then_regression(), options_at(kT0 + 12 * 3600.0)));
  auto regs = html.find("<ul class=\"incidents\">");
  auto chart = html.find("<svg class=\"busbw-chart\"");
  auto timeline = html.find("class=\"timeline\"");
  auto findings = html.find("<table class=\"findings\">");
  ASSERT_NE(regs, std::string::npos);
  ASSERT_NE(chart, std::string::npos);
  EXPECT_LT(regs, chart);
  EXPECT_LT(chart, timeline);
  EXPECT_LT(timeline, findings);
  // One incident from run-10 to run-11, with its numbers.
  EXPECT_EQ(count_of(html, "<li class=\"incident\""), 1u);
  EXPECT_NE(html.find("data-first-run=\"run-10\" data-last-run=\"run-11\""), std::string::npos);
  EXPECT_NE(html.find("lowest 0.15 GB/s (20% of baseline 0.74), ongoing for 1 h"),
            std::string::npos);
  EXPECT_NE(html.find("socket on ci-loopback: 0.15 GB/s at 64 MiB, 20% of baseline 0.74, since"),
            std::string::npos);
  EXPECT_EQ(count_of(html, "<tr class=\"finding"), 2u);
  // Self-contained: nothing to fetch (no verdict link either: no --verdict-url, no import path).
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

TEST(ReportHtml, PointsAndTimelineCellsCarryTheirVerdict) {
  auto model = build_model(healthy_then_regression(), options_at(kT0 + 12 * 3600.0));
  const auto& m = model.clusters.at(0);
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
  add_run(in, {.run_id = "a", .t = kT0, .verdict = results::Outcome::inconclusive, .busbw = NAN, .baseline = NAN});
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
               .verdict = results::Outcome::fail,
               .busbw = 0.1,
               .profile = "p" + evil,
               .transport = "sock" + attr_evil,
               .findings = {{"BANDWIDTH_REGRESSION", evil}, {"STRAGGLER", evil}},
               .hosts = {"h" + evil}});
  // verdict and severity are enums now (results/verdict/enums.h): no text can ride on them.
  in.runs[0].verdict = results::Outcome::fail;
  in.gates[0].verdict = results::Outcome::fail;
  in.findings[0].severity = results::Severity::error;
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
                 .verdict = results::Outcome::fail,
                 .busbw = 0.1,
                 .findings = {{"SILENT_FALLBACK", "expected efa, observed tcp"}}});
  auto md = render_markdown(build_model(in, options_at(kT0 + 30 * 3600.0)), 10);
  EXPECT_NE(md.find("Runs: 27"), std::string::npos);
  EXPECT_NE(md.find("pass 10 \xC2\xB7 degraded 1 \xC2\xB7 fail 16 \xC2\xB7 inconclusive 0"),
            std::string::npos);
  // run-10, run-11 and the 15 fallbacks are consecutive regressed runs: one incident.
  EXPECT_NE(md.find("Incidents (1, 1 ongoing, newest first):"), std::string::npos) << md;
  EXPECT_NE(md.find("17 runs from"), std::string::npos);
  EXPECT_EQ(count_of(md, "  - BANDWIDTH\\_REGRESSION, SILENT\\_FALLBACK: "), 1u) << md;
  EXPECT_NE(md.find("socket on ci-loopback: 0.10 GB/s at 64 MiB, 14% of baseline 0.74"),
            std::string::npos);
  EXPECT_NE(md.find("**fail** since"), std::string::npos);
}

// Verdicts are Outcomes ranked by results::verdict_rank (ordering.h), the one order merge and
// classify use: a cell holding degraded and inconclusive runs is inconclusive, one with a fail is
// fail; the counts are per Outcome.
TEST(ReportModel, TimelineCellWorstVerdictFollowsTheModelsOrder) {
  ReportInput in;
  add_run(in, {.run_id = "a", .t = kT0});
  add_run(in, {.run_id = "b", .t = kT0 + 60, .verdict = results::Outcome::degraded});
  add_run(in, {.run_id = "c", .t = kT0 + 120, .verdict = results::Outcome::inconclusive});
  add_run(in, {.run_id = "d", .t = kT0 + 180, .verdict = results::Outcome::degraded});
  auto opt = options_at(kT0 + 3600);
  opt.max_timeline_cells = 1;
  auto m = build_model(in, opt);
  ASSERT_EQ(m.clusters.size(), 1u);
  ASSERT_EQ(m.clusters[0].timeline.size(), 1u);
  const auto& cell = m.clusters[0].timeline[0];
  EXPECT_EQ(cell.verdict, results::Outcome::inconclusive);
  EXPECT_EQ(cell.counts.at(results::Outcome::degraded), 2);
  EXPECT_EQ(cell.counts.at(results::Outcome::inconclusive), 1);
  EXPECT_EQ(m.verdict_counts.at(results::Outcome::fail), 0);  // every Outcome, 0 for none

  add_run(in, {.run_id = "e", .t = kT0 + 240, .verdict = results::Outcome::fail});
  auto with_fail = build_model(in, opt);
  EXPECT_EQ(with_fail.clusters[0].timeline.at(0).verdict, results::Outcome::fail);
}

TEST(ReportModel, RegressionCodesAreTheEnumsOnly) {
  EXPECT_TRUE(is_regression_code(results::Code::BANDWIDTH_REGRESSION));
  EXPECT_TRUE(is_regression_code(results::Code::SILENT_FALLBACK));
  EXPECT_FALSE(is_regression_code(results::Code::STRAGGLER));
  EXPECT_TRUE(is_regression_code(results::AnyCode::from_text("SILENT_FALLBACK")));
  EXPECT_FALSE(is_regression_code(results::AnyCode::from_text("BANDWIDTH_REGRESSION_V2")));
}


// ---- Now, failure incidents, hosts, run links, hints ----

// A finding row of run `run_id` (as History::findings returns it).
void add_finding(ReportInput& in, const std::string& run_id, results::Code code,
                 results::Severity severity, const std::string& message, std::vector<int> ranks,
                 std::vector<std::string> hosts, results::Subject subject = {}) {
  results::HistoryFinding f;
  f.run_id = run_id;
  for (const auto& r : in.runs)
    if (r.run_id == run_id) {
      f.started_unix = r.started_unix;
      f.profile = r.profile;
      f.cluster = r.cluster;
    }
  f.code = code;
  f.severity = severity;
  f.layer = results::Layer::transport;
  f.message = message;
  f.ranks = std::move(ranks);
  f.hosts = std::move(hosts);
  f.subject = std::move(subject);
  in.findings.push_back(std::move(f));
}

// A run that stopped before its transports: no gate row (History stores none without a number).
void add_unmeasured_run(ReportInput& in, const std::string& id, double t, results::Outcome v,
                        std::vector<std::string> hosts = {"vm-a", "vm-b", "vm-c"}) {
  add_run(in, {.run_id = id, .t = t, .verdict = v, .busbw = NAN, .hosts = std::move(hosts)});
  in.gates.pop_back();
}

results::Subject socket_subject(int rank, const std::string& host) {
  return results::reported_by({rank, host}, "transport:socket", "open", "socket");
}

// A cluster with bandwidth in band whose latest run then fails to open the socket
// transport. "Now" is that failure (never green), the socket key's state is not shown green
// over it, and the run it quotes is that run.
TEST(ReportNow, AFailingLatestRunIsNeverGreen) {
  ReportInput in;
  for (int i = 0; i < 4; ++i)
    add_run(in, {.run_id = "ok-" + std::to_string(i), .t = kT0 + i * 600.0, .busbw = 0.72});
  add_unmeasured_run(in, "bad", kT0 + 4 * 600.0, results::Outcome::fail);
  add_finding(in, "bad", results::Code::TRANSPORT_INIT_FAILED, results::Severity::error,
              "socket: rank 2 (host vm-c) could not connect to rank 0", {2}, {"vm-c"},
              socket_subject(2, "vm-c"));
  auto m = build_model(in, options_at(kT0 + 3600));
  const auto& c = m.clusters.at(0);
  EXPECT_EQ(c.now_verdict(), results::Outcome::fail);
  ASSERT_EQ(c.now.size(), 1u);
  EXPECT_EQ(c.now[0].run_id, "bad");
  EXPECT_EQ(c.now[0].verdict, results::Outcome::fail);
  EXPECT_EQ(c.now[0].codes, std::vector<results::AnyCode>{results::Code::TRANSPORT_INIT_FAILED});
  EXPECT_EQ(c.now[0].streak_runs, 1u);
  EXPECT_NE(c.now[0].message.find("could not connect"), std::string::npos);
  EXPECT_NE(describe_now(c.now[0]).find("fail: TRANSPORT_INIT_FAILED"), std::string::npos);
  ASSERT_EQ(c.latest.size(), 1u);
  EXPECT_EQ(c.latest[0].state, GateState::ok);            // the last number was in band ...
  EXPECT_EQ(c.latest[0].shown, GateState::not_measured);  // ... but not shown green over "bad"
  EXPECT_EQ(c.latest[0].run_id, "bad");
  EXPECT_EQ(c.latest[0].unmeasured_after, 1u);
  EXPECT_FALSE(c.regressed_now());  // bandwidth did not regress; the run failed

  auto html = render_html(m);
  EXPECT_NE(html.find("<li class=\"s-fail\" data-cluster=\"default\" data-state=\"fail\">"),
            std::string::npos);
  EXPECT_NE(html.find("failing now"), std::string::npos);
  EXPECT_EQ(html.find("ok now"), std::string::npos);
  EXPECT_NE(html.find("<div class=\"regbox s-fail\""), std::string::npos);
  EXPECT_NE(html.find("<li class=\"now s-fail\" data-state=\"fail\""), std::string::npos);
  EXPECT_EQ(html.find("class=\"latest s-ok\""), std::string::npos);
  EXPECT_NE(html.find("class=\"latest s-not-measured\""), std::string::npos);
  auto md = render_markdown(m);
  EXPECT_NE(md.find("**fail now**"), std::string::npos) << md;

  // The next run passes and measures: green again, and the failure is a cleared incident.
  add_run(in, {.run_id = "back", .t = kT0 + 5 * 600.0, .busbw = 0.71});
  m = build_model(in, options_at(kT0 + 3600));
  EXPECT_EQ(m.clusters[0].now_verdict(), results::Outcome::pass);
  EXPECT_EQ(m.clusters[0].latest[0].shown, GateState::ok);
  ASSERT_EQ(m.clusters[0].incidents.size(), 1u);
  EXPECT_EQ(m.clusters[0].incidents[0].cleared_run_id, "back");
  EXPECT_NE(render_html(m).find("ok now"), std::string::npos);
}

// The run quoted for a (profile, transport) key is a run of that key: one that measured the
// transport, named it in a finding, or measured nothing at all; a socket-only run that failed is
// not the fabric key's latest run.
TEST(ReportNow, TheLatestRunOfAKeyIsARunOfThatKey) {
  ReportInput in;
  add_run(in, {.run_id = "both", .t = kT0, .busbw = 0.7});
  add_run(in, {.run_id = "both", .t = kT0, .busbw = 0.6, .transport = "fabric"});
  in.runs.pop_back();  // one run, two gate rows
  add_unmeasured_run(in, "socket-fail", kT0 + 600, results::Outcome::fail);
  add_finding(in, "socket-fail", results::Code::TRANSPORT_INIT_FAILED, results::Severity::error,
              "socket: connect refused", {0}, {"vm-a"}, socket_subject(0, "vm-a"));
  auto m = build_model(in, options_at(kT0 + 3600));
  const auto& c = m.clusters.at(0);
  ASSERT_EQ(c.latest.size(), 2u);
  const auto& fabric = c.latest[0].transport == "fabric" ? c.latest[0] : c.latest[1];
  const auto& socket = c.latest[0].transport == "socket" ? c.latest[0] : c.latest[1];
  EXPECT_EQ(fabric.run_id, "both");
  EXPECT_EQ(fabric.unmeasured_after, 0u);
  EXPECT_EQ(fabric.shown, GateState::ok);
  EXPECT_EQ(socket.run_id, "socket-fail");
  EXPECT_EQ(socket.shown, GateState::not_measured);
  EXPECT_EQ(c.now_verdict(), results::Outcome::fail);

  // A run that stopped before any transport (RANKS_MISSING) is every key's.
  add_unmeasured_run(in, "ranks-missing", kT0 + 1200, results::Outcome::fail);
  add_finding(in, "ranks-missing", results::Code::RANKS_MISSING, results::Severity::error,
              "1 of 3 ranks never joined within 30 s: rank 2", {2}, {});
  m = build_model(in, options_at(kT0 + 3600));
  for (const auto& s : m.clusters[0].latest) {
    EXPECT_EQ(s.run_id, "ranks-missing") << s.transport;
    EXPECT_EQ(s.shown, GateState::not_measured) << s.transport;
  }
}

// Every failure class is an incident: consecutive failed runs of a (cluster, profile) are one,
// with its onset, runs, hosts, ranks, codes and the run that cleared it.
TEST(ReportIncidents, FailuresBecomeIncidentsWithTheRunThatClearedThem) {
  ReportInput in;
  int n = 0;
  auto t = [&] { return kT0 + (n++) * 1800.0; };
  auto ok = [&](const std::string& id) { add_run(in, {.run_id = id, .t = t(), .busbw = 0.72}); };
  ok("r0");
  ok("r1");
  for (const char* id : {"r2", "r3", "r4"}) {
    add_unmeasured_run(in, id, t(), results::Outcome::fail);
    add_finding(in, id, results::Code::TRANSPORT_INIT_FAILED, results::Severity::error,
                "socket: rank 2 (host vm-c) could not connect", {2}, {"vm-c"},
                socket_subject(2, "vm-c"));
  }
  ok("r5");  // clears it
  add_run(in, {.run_id = "r6", .t = t(), .verdict = results::Outcome::degraded, .busbw = 0.7,
               .findings = {{"STRAGGLER", "rank 1 is slow"}}});  // a warning: no failure
  for (const char* id : {"r7", "r8"}) {
    add_unmeasured_run(in, id, t(), results::Outcome::fail);
    add_finding(in, id, results::Code::RANKS_MISSING, results::Severity::error,
                std::string("1 of 3 ranks never joined within 30 s: rank 2"), {2}, {});
  }
  auto m = build_model(in, options_at(kT0 + 20 * 1800.0));
  const auto& c = m.clusters.at(0);
  ASSERT_EQ(c.incidents.size(), 2u);
  EXPECT_EQ(c.incidents_of(IncidentKind::failure), 2u);
  EXPECT_EQ(c.failure_runs, 5u);
  EXPECT_EQ(c.regression_runs, 0u);
  const auto& newest = c.incidents[0];
  const auto& first = c.incidents[1];
  EXPECT_EQ(first.kind, IncidentKind::failure);
  EXPECT_EQ(first.run_ids, (std::vector<std::string>{"r2", "r3", "r4"}));
  EXPECT_EQ(first.cleared_run_id, "r5");
  EXPECT_DOUBLE_EQ(first.onset_unix, kT0 + 2 * 1800.0);
  EXPECT_EQ(first.hosts, std::vector<std::string>{"vm-c"});
  EXPECT_EQ(first.ranks, std::vector<int>{2});
  EXPECT_EQ(first.transport, "socket");
  EXPECT_EQ(first.codes, std::vector<results::AnyCode>{results::Code::TRANSPORT_INIT_FAILED});
  EXPECT_EQ(first.worst_verdict, results::Outcome::fail);
  EXPECT_EQ(describe_incident(first),
            "TRANSPORT_INIT_FAILED on ci-loopback (socket): 3 runs from 2026-11-18 12:06 UTC, "
            "cleared after 1 h 30 min (2026-11-18 13:36 UTC)");
  EXPECT_TRUE(newest.ongoing());
  EXPECT_EQ(newest.run_ids, (std::vector<std::string>{"r7", "r8"}));
  EXPECT_EQ(newest.codes, std::vector<results::AnyCode>{results::Code::RANKS_MISSING});
  EXPECT_TRUE(newest.hosts.empty());  // the missing rank's host is unknown
  EXPECT_EQ(newest.ranks, std::vector<int>{2});
  EXPECT_EQ(newest.transport, "");

  auto html = render_html(m);
  EXPECT_EQ(count_of(html, "<li class=\"incident\" data-kind=\"failure\""), 2u);
  EXPECT_NE(html.find("data-cleared-by=\"r5\""), std::string::npos);
  EXPECT_NE(html.find("no host named, rank 2"), std::string::npos);
  auto md = render_markdown(m);
  EXPECT_NE(md.find("**cleared** failure: TRANSPORT\\_INIT\\_FAILED on ci-loopback (socket)"),
            std::string::npos)
      << md;
}

// Findings are grouped by code and subject data, never by the message: RANKS_MISSING "1 of 3"
// and "1 of 2" are one row; the same code on two hosts stays two rows. Each row has a hint: the
// stored verdict's, else the finding table's.
TEST(ReportFindings, GroupedByCodeAndSubjectWithHints) {
  ReportInput in;
  add_unmeasured_run(in, "a", kT0, results::Outcome::fail);
  add_finding(in, "a", results::Code::RANKS_MISSING, results::Severity::error,
              "1 of 2 ranks never joined within 30 s: rank 1", {1}, {});
  add_unmeasured_run(in, "b", kT0 + 60, results::Outcome::fail);
  add_finding(in, "b", results::Code::RANKS_MISSING, results::Severity::error,
              "1 of 3 ranks never joined within 30 s: rank 2", {2}, {});
  add_run(in, {.run_id = "c", .t = kT0 + 120, .verdict = results::Outcome::degraded});
  add_finding(in, "c", results::Code::STRAGGLER, results::Severity::warning, "rank 1 slow", {1},
              {"vm-b"});
  add_finding(in, "c", results::Code::STRAGGLER, results::Severity::warning, "rank 2 slow", {2},
              {"vm-c"});
  in.hints[finding_group_key(in.findings[0])] = "Start the missing pods.";
  EXPECT_EQ(finding_group_key(in.findings[0]), finding_group_key(in.findings[1]));
  EXPECT_NE(finding_group_key(in.findings[2]), finding_group_key(in.findings[3]));
  auto m = build_model(in, options_at(kT0 + 600));
  const auto& c = m.clusters.at(0);
  ASSERT_EQ(c.findings.size(), 3u);
  const FindingGroup* missing = nullptr;
  for (const auto& g : c.findings)
    if (g.code == "RANKS_MISSING") missing = &g;
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(missing->runs, 2u);
  EXPECT_EQ(missing->ranks, (std::vector<int>{1, 2}));
  EXPECT_EQ(missing->message, "1 of 3 ranks never joined within 30 s: rank 2");  // the newest
  EXPECT_EQ(missing->hint, "Start the missing pods.");
  for (const auto& g : c.findings)
    if (g.code == "STRAGGLER") {  // no stored hint: the finding table's
      EXPECT_FALSE(g.hint.empty());
      EXPECT_EQ(g.hint, results::fill_template(results::find_code(results::Code::STRAGGLER)->hint, {}));
    }
  auto html = render_html(m);
  EXPECT_EQ(count_of(html, "<tr class=\"finding sev-error\" data-code=\"RANKS_MISSING\""), 1u);
  EXPECT_NE(html.find("<td class=\"hint\">Start the missing pods.</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>hint</th>"), std::string::npos);
  // Dates never wrap: their cells say so.
  EXPECT_NE(html.find("td.date"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"date\">2026-11-18 11:08 UTC</td>"), std::string::npos);
}

// The hosts the findings named, by code: three hosts, and the findings that named none apart.
TEST(ReportHosts, HostsInFindingsByCode) {
  ReportInput in;
  for (int i = 0; i < 3; ++i) {
    std::string id = "f" + std::to_string(i);
    add_unmeasured_run(in, id, kT0 + i * 60.0, results::Outcome::fail);
    add_finding(in, id, results::Code::TRANSPORT_INIT_FAILED, results::Severity::error,
                "socket: rank 2 could not connect", {2}, {"vm-c"}, socket_subject(2, "vm-c"));
  }
  add_run(in, {.run_id = "s", .t = kT0 + 300, .verdict = results::Outcome::degraded,
               .hosts = {"vm-a", "vm-b", "vm-c"}});
  add_finding(in, "s", results::Code::STRAGGLER, results::Severity::warning, "rank 1 slow", {1},
              {"vm-b"});
  add_finding(in, "s", results::Code::BANDWIDTH_REGRESSION, results::Severity::warning, "low", {},
              {"vm-a", "vm-b", "vm-c"});
  add_finding(in, "s", results::Code::RESULTS_MISSING, results::Severity::info, "consequence",
              {}, {"vm-a"});  // info: not counted
  add_unmeasured_run(in, "m", kT0 + 400, results::Outcome::fail);
  add_finding(in, "m", results::Code::RANKS_MISSING, results::Severity::error,
              "1 of 3 ranks never joined", {2}, {});
  auto m = build_model(in, options_at(kT0 + 600));
  const auto& c = m.clusters.at(0);
  ASSERT_EQ(c.hosts.size(), 4u);
  EXPECT_EQ(c.hosts[0].host, "vm-c");  // most runs with findings first
  EXPECT_EQ(c.hosts[0].finding_runs, 4u);
  EXPECT_EQ(c.hosts[0].runs_present, 5u);
  ASSERT_EQ(c.hosts[0].codes.size(), 2u);
  EXPECT_EQ(c.hosts[0].codes[0].code, "TRANSPORT_INIT_FAILED");
  EXPECT_EQ(c.hosts[0].codes[0].runs, 3u);
  EXPECT_EQ(c.hosts[0].codes[0].severity, "error");
  EXPECT_EQ(c.hosts[0].codes[0].last_run_id, "f2");
  EXPECT_EQ(c.hosts[1].host, "vm-b");
  EXPECT_EQ(c.hosts[1].codes.size(), 2u);
  EXPECT_EQ(c.hosts[2].host, "vm-a");
  EXPECT_EQ(c.hosts[2].codes.size(), 1u);  // RESULTS_MISSING is info
  EXPECT_EQ(c.hosts[3].host, "");          // RANKS_MISSING named no host: its own row, last
  EXPECT_EQ(c.hosts[3].codes.at(0).code, "RANKS_MISSING");
  EXPECT_EQ(c.host_codes.front(), "TRANSPORT_INIT_FAILED");
  auto html = render_html(m);
  EXPECT_EQ(count_of(html, "<tr class=\"host\""), 4u);
  EXPECT_NE(html.find("<tr class=\"host\" data-host=\"vm-c\" data-runs=\"4\">"), std::string::npos);
  EXPECT_NE(html.find("data-code=\"TRANSPORT_INIT_FAILED\" data-runs=\"3\">3<span"),
            std::string::npos);
  EXPECT_NE(html.find("(no host named)"), std::string::npos);
}

// The bad node over a month of runs: SLOW_HOST, SLOW_LINK and MTU_MISMATCH per host, so the host
// that keeps coming back heads the per-host view, and a link's two ends are both counted.
TEST(ReportHosts, TheHostThatKeepsComingBackHeadsTheBadNodeView) {
  ReportInput in;
  const std::vector<std::string> hosts{"n1", "n2", "n3", "n4"};
  for (int day = 0; day < 6; ++day) {
    std::string id = "d" + std::to_string(day);
    add_run(in, {.run_id = id, .t = kT0 + day * 86400.0, .verdict = results::Outcome::degraded,
                 .hosts = hosts});
    if (day != 3)  // n2 is slow in 5 of 6 runs
      add_finding(in, id, results::Code::SLOW_HOST, results::Severity::warning,
                  "socket: host n2 is slow with its peers on the ring", {1}, {"n2"});
    if (day >= 4)  // the n3-n4 cable went bad on day 4
      add_finding(in, id, results::Code::SLOW_LINK, results::Severity::warning,
                  "socket: the link between n3 and n4 is far worse", {2, 3}, {"n3", "n4"});
  }
  add_run(in, {.run_id = "mtu", .t = kT0 + 6 * 86400.0, .verdict = results::Outcome::fail,
               .hosts = hosts});
  add_finding(in, "mtu", results::Code::MTU_MISMATCH, results::Severity::error,
              "host n4's paths drop 9001-byte packets", {3}, {"n4"});
  auto m = build_model(in, options_at(kT0 + 7 * 86400.0));
  const auto& c = m.clusters.at(0);
  ASSERT_GE(c.hosts.size(), 3u);
  EXPECT_EQ(c.hosts[0].host, "n2");
  EXPECT_EQ(c.hosts[0].finding_runs, 5u);
  EXPECT_EQ(c.hosts[0].runs_present, 7u);
  ASSERT_EQ(c.hosts[0].codes.size(), 1u);
  EXPECT_EQ(c.hosts[0].codes[0].code, "SLOW_HOST");
  EXPECT_EQ(c.hosts[0].codes[0].last_run_id, "d5");
  EXPECT_EQ(c.hosts[1].host, "n4");  // SLOW_LINK twice and MTU_MISMATCH once: 3 runs
  EXPECT_EQ(c.hosts[1].finding_runs, 3u);
  ASSERT_EQ(c.hosts[1].codes.size(), 2u);
  EXPECT_EQ(c.hosts[1].codes[0].code, "SLOW_LINK");
  EXPECT_EQ(c.hosts[1].codes[1].code, "MTU_MISMATCH");
  EXPECT_EQ(c.hosts[1].codes[1].severity, "error");
  EXPECT_EQ(c.hosts[2].host, "n3");
  EXPECT_EQ(c.hosts[2].finding_runs, 2u);
  EXPECT_EQ(c.host_codes.front(), "SLOW_HOST");
  auto html = render_html(m);
  EXPECT_NE(html.find("<tr class=\"host\" data-host=\"n2\" data-runs=\"5\">"), std::string::npos);
  EXPECT_NE(html.find("data-code=\"MTU_MISMATCH\""), std::string::npos);
}

// The node's own faults (GPU_XID, NIC_DOWN, NIC_ERRORS) are per-host rows like the network's:
// the node whose port stays down heads the view with its codes.
TEST(ReportHosts, TheNodesOwnFaultsArePerHostRows) {
  ReportInput in;
  const std::vector<std::string> hosts{"g1", "g2", "g3"};
  for (int day = 0; day < 3; ++day) {
    std::string id = "n" + std::to_string(day);
    add_run(in, {.run_id = id, .t = kT0 + day * 86400.0, .verdict = results::Outcome::fail,
                 .hosts = hosts});
    add_finding(in, id, results::Code::NIC_DOWN, results::Severity::error,
                "rank 1 (host g2) has 1 RDMA port down that other nodes have up", {1}, {"g2"});
    if (day == 2)
      add_finding(in, id, results::Code::GPU_XID, results::Severity::error,
                  "the kernel log of rank 2 (host g3) has NVRM Xid 79", {2}, {"g3"});
    if (day == 1)
      add_finding(in, id, results::Code::NIC_ERRORS, results::Severity::warning,
                  "RDMA port mlx5_0 port 1's error counters moved on rank 1 (host g2)", {1},
                  {"g2"});
  }
  auto m = build_model(in, options_at(kT0 + 4 * 86400.0));
  const auto& c = m.clusters.at(0);
  ASSERT_GE(c.hosts.size(), 2u);
  EXPECT_EQ(c.hosts[0].host, "g2");
  EXPECT_EQ(c.hosts[0].finding_runs, 3u);
  ASSERT_EQ(c.hosts[0].codes.size(), 2u);
  EXPECT_EQ(c.hosts[0].codes[0].code, "NIC_DOWN");
  EXPECT_EQ(c.hosts[0].codes[1].code, "NIC_ERRORS");
  EXPECT_EQ(c.hosts[1].host, "g3");
  EXPECT_EQ(c.hosts[1].codes.at(0).code, "GPU_XID");
  auto html = render_html(m);
  EXPECT_NE(html.find("<tr class=\"host\" data-host=\"g2\" data-runs=\"3\">"), std::string::npos);
  EXPECT_NE(html.find("data-code=\"GPU_XID\""), std::string::npos);
}

// The run list links each run to its verdict: --verdict-url's template (the run id URL-escaped),
// else the file an import read it from, else nothing.
TEST(ReportRuns, RunListLinksEachVerdict) {
  results::HistoryRun r;
  r.run_id = "20261201T000000Z-1a2b";
  ReportOptions o;
  EXPECT_EQ(verdict_link(o, r), "");
  r.source = "import:/srv/runs/launch-1/verdict.json";
  EXPECT_EQ(verdict_link(o, r), "file:///srv/runs/launch-1/verdict.json");
  r.source = "import:relative.json";  // not a path the page can resolve
  EXPECT_EQ(verdict_link(o, r), "");
  r.source = "import:/tmp/a b/#x.json";
  EXPECT_EQ(verdict_link(o, r), "file:///tmp/a%20b/%23x.json");
  o.verdict_url = "https://ci.example/v/{run_id}.json?x={run_id}";
  EXPECT_EQ(verdict_link(o, r),
            "https://ci.example/v/20261201T000000Z-1a2b.json?x=20261201T000000Z-1a2b");
  r.run_id = "a/../\"x&y";
  EXPECT_EQ(verdict_link(o, r), "https://ci.example/v/a%2F..%2F%22x%26y.json?x=a%2F..%2F%22x%26y");

  ReportInput in;
  for (int i = 0; i < 5; ++i) add_run(in, {.run_id = "run-" + std::to_string(i), .t = kT0 + i * 60.0});
  auto opt = options_at(kT0 + 600);
  opt.verdict_url = "https://ci.example/v/{run_id}.json";
  opt.max_run_rows = 3;
  auto m = build_model(in, opt);
  const auto& c = m.clusters.at(0);
  ASSERT_EQ(c.run_rows.size(), 3u);
  EXPECT_EQ(c.run_rows[0].run_id, "run-4");  // newest first
  EXPECT_EQ(c.run_rows[0].link, "https://ci.example/v/run-4.json");
  auto html = render_html(m);
  EXPECT_EQ(count_of(html, "<tr class=\"run\""), 3u);
  EXPECT_NE(html.find("the newest 3 of 5"), std::string::npos);
  EXPECT_NE(html.find("<a class=\"verdict-link\" href=\"https://ci.example/v/run-4.json\">"),
            std::string::npos);
  // The "now" line links its run too; nothing else in the page has an href.
  EXPECT_EQ(count_of(html, "href="), count_of(html, "<a class=\"verdict-link\" href="));
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

// Labels in a chart's margin are spread so no two overlap, and stay inside their range.
TEST(ReportCharts, MarginLabelsNeverOverlap) {
  auto ys = spread_labels({100, 104, 98}, 14, 10, 250);
  ASSERT_EQ(ys.size(), 3u);
  std::vector<double> sorted = ys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_GE(sorted[1] - sorted[0], 14 - 1e-9);
  EXPECT_GE(sorted[2] - sorted[1], 14 - 1e-9);
  EXPECT_DOUBLE_EQ(ys[2], 98);  // the topmost keeps its place
  ys = spread_labels({248, 249}, 14, 10, 250);  // at the bottom: pushed up
  EXPECT_LE(std::max(ys[0], ys[1]), 250);
  EXPECT_GE(std::fabs(ys[0] - ys[1]), 14 - 1e-9);
  ys = spread_labels({5, 6, 7}, 14, 10, 20);  // cannot fit: evenly from lo
  EXPECT_DOUBLE_EQ(*std::min_element(ys.begin(), ys.end()), 10);

  // The size chart: the band's labels in the right margin, the gate label inside the plot,
  // whatever the gate number (0.50 vs 0.61 overlapped before).
  auto in = healthy_then_regression();
  in.verdicts["run-11"] = sweep_verdict_json("run-11", 0.85);
  auto m = build_model(in, options_at(kT0 + 12 * 3600.0));
  ASSERT_EQ(m.clusters.at(0).size_curves.size(), 1u);
  ChartGeometry g;
  auto svg = size_chart_svg(m.clusters[0].size_curves[0], g);
  const double px1 = g.width - g.right;
  std::size_t labels = 0;
  for (auto p = svg.find("<text class=\"band-label\" x=\""); p != std::string::npos;
       p = svg.find("<text class=\"band-label\" x=\"", p + 1), ++labels)
    EXPECT_GE(std::stod(svg.substr(p + 28)), px1) << svg.substr(p, 80);
  EXPECT_EQ(labels, 3u);  // baseline, degraded, fail
  auto gate = svg.find("<g class=\"gate-mark\"");
  ASSERT_NE(gate, std::string::npos);
  auto text = svg.find("<text x=\"", gate);
  ASSERT_NE(text, std::string::npos);
  EXPECT_LE(std::stod(svg.substr(text + 9)), px1);
  EXPECT_NE(svg.find("text-anchor=\"end\" fill=\"#212121\"", gate), std::string::npos);
}


// From a real (SQLite) history: each finding group's hint comes from the stored verdict (history
// rows keep no hint), and an imported run's source is its file, the run list's link.
TEST(ReportInputs, HintsAndVerdictPathsComeFromTheHistory) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ncclsmoke-report-input-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "h.db").string();
  {
    results::History h(db, true);
    auto v = results::testing::full_sample();
    v.started_at = "2026-11-18T11:00:00.000Z";
    const std::string path = "import:/runs/launch-1/verdict.json";
    bool given = false;
    h.add_stream(results::History::NextSourcedVerdict(
                     [&](const results::Verdict*& out, const std::string*& text,
                         const std::string*& src) {
                       if (given) return false;
                       out = &v;
                       text = nullptr;
                       src = &path;
                       return given = true;
                     }),
                 "import");
  }
  results::History h(db, false);
  results::HistoryQuery q;
  auto in = load_report_input(h, q);
  ASSERT_EQ(in.runs.size(), 1u);
  EXPECT_EQ(in.runs[0].source, "import:/runs/launch-1/verdict.json");
  ReportOptions o;
  EXPECT_EQ(verdict_link(o, in.runs[0]), "file:///runs/launch-1/verdict.json");
  ASSERT_EQ(in.findings.size(), 2u);
  for (const auto& f : in.findings) {
    auto hint = in.hints.find(finding_group_key(f));
    ASSERT_NE(hint, in.hints.end()) << to_string(f.code);
    if (f.code == results::Code::RANKS_MISSING) {  // the verdict's own, its {master} filled in
      EXPECT_NE(hint->second.find("master.smoke.svc:29500"), std::string::npos) << hint->second;
    }
  }
  auto m = build_model(in, options_at(results::parse_rfc3339("2026-11-18T12:00:00Z")));
  ASSERT_EQ(m.clusters.size(), 1u);
  for (const auto& g : m.clusters[0].findings) EXPECT_FALSE(g.hint.empty()) << g.code;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ncclsmoke::report
