// The metric text of a verdict: families, labels, escaping, omitted NaN numbers.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "cronjob/metrics.h"
#include "tests/cronjob/sample_verdicts.h"

namespace ncclsmoke::cronjob {
namespace {

// Counts lines that start with `series` followed by a space, and returns the last one's value.
int find_series(const std::string& text, const std::string& series, std::string* value = nullptr) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) {
      ++n;
      if (value) *value = line.substr(series.size() + 1);
    }
  }
  return n;
}

std::string value(const std::string& text, const std::string& series) {
  std::string v;
  EXPECT_EQ(find_series(text, series, &v), 1) << "series " << series << " in\n" << text;
  return v;
}

TEST(PublishMetrics, PassingRunHasVerdictTimestampsAndGate) {
  MetricsOptions o;
  o.cluster = "prod-east";
  std::string t = render_metrics(testing::passing(), o);
  const std::string l = "cluster=\"prod-east\",profile=\"none\"";
  EXPECT_EQ(value(t, "ncclsmoke_verdict{" + l + ",verdict=\"pass\"}"), "1");
  EXPECT_EQ(value(t, "ncclsmoke_verdict{" + l + ",verdict=\"fail\"}"), "0");
  EXPECT_EQ(value(t, "ncclsmoke_verdict{" + l + ",verdict=\"degraded\"}"), "0");
  EXPECT_EQ(value(t, "ncclsmoke_verdict{" + l + ",verdict=\"inconclusive\"}"), "0");
  EXPECT_EQ(value(t, "ncclsmoke_exit_code{" + l + "}"), "0");
  EXPECT_EQ(value(t, "ncclsmoke_world_size{" + l + "}"), "4");
  EXPECT_EQ(value(t, "ncclsmoke_run_duration_seconds{" + l + "}"), "4.5");
  // 2026-11-30T01:00:00Z = 1796000400; + 4.5 s.
  EXPECT_EQ(value(t, "ncclsmoke_last_run_timestamp_seconds{" + l + "}"), "1796000404.5");
  EXPECT_EQ(value(t, "ncclsmoke_last_success_timestamp_seconds{" + l + "}"), "1796000404.5");
  // The gate row (4 MiB, 2.5 GB/s), not the 1 MiB one; no baseline so no ratio.
  EXPECT_EQ(value(t, "ncclsmoke_gate_busbw_bytes_per_second{" + l +
                         ",transport=\"socket\",synthetic=\"false\"}"),
            "2500000000");
  EXPECT_EQ(value(t, "ncclsmoke_gate_message_bytes{" + l + ",transport=\"socket\",synthetic=\"false\"}"),
            "4194304");
  EXPECT_EQ(t.find("ncclsmoke_gate_ratio"), std::string::npos);
  EXPECT_EQ(t.find("ncclsmoke_gate_baseline_bytes_per_second"), std::string::npos);
  EXPECT_EQ(value(t, "ncclsmoke_transport_status{" + l + ",transport=\"socket\",status=\"pass\"}"), "1");
  EXPECT_EQ(value(t, "ncclsmoke_transport_status{" + l + ",transport=\"socket\",status=\"fail\"}"), "0");
  EXPECT_EQ(value(t, "ncclsmoke_ranks{" + l + ",status=\"joined\"}"), "4");
  EXPECT_EQ(value(t, "ncclsmoke_ranks{" + l + ",status=\"missing\"}"), "0");
  EXPECT_EQ(value(t, "ncclsmoke_build_info{" + l + ",version=\"0.1.0\"}"), "1");
  // Alerting codes are present at 0 so alerts resolve.
  EXPECT_EQ(value(t, "ncclsmoke_findings{" + l + ",code=\"SILENT_FALLBACK\",severity=\"error\"}"), "0");
  EXPECT_EQ(value(t, "ncclsmoke_findings{" + l + ",code=\"BANDWIDTH_REGRESSION\",severity=\"warning\"}"), "0");
  EXPECT_EQ(value(t, "ncclsmoke_findings{" + l + ",code=\"BANDWIDTH_REGRESSION\",severity=\"error\"}"), "0");
  EXPECT_EQ(value(t, "ncclsmoke_findings{" + l + ",code=\"STRAGGLER\",severity=\"warning\"}"), "0");
  // Every family has HELP and TYPE.
  EXPECT_NE(t.find("# HELP ncclsmoke_verdict "), std::string::npos);
  EXPECT_NE(t.find("# TYPE ncclsmoke_verdict gauge\n"), std::string::npos);
  EXPECT_EQ(t.back(), '\n');
}

TEST(PublishMetrics, FailingRunCountsFindingsAndComparesWithBaseline) {
  std::string t = render_metrics(testing::failing(), {});
  const std::string l = "cluster=\"default\",profile=\"p5.48xlarge-efa\"";
  EXPECT_EQ(value(t, "ncclsmoke_verdict{" + l + ",verdict=\"fail\"}"), "1");
  EXPECT_EQ(value(t, "ncclsmoke_verdict{" + l + ",verdict=\"pass\"}"), "0");
  EXPECT_EQ(value(t, "ncclsmoke_exit_code{" + l + "}"), "1");
  EXPECT_EQ(value(t, "ncclsmoke_findings{" + l + ",code=\"SILENT_FALLBACK\",severity=\"error\"}"), "1");
  EXPECT_EQ(value(t, "ncclsmoke_findings{" + l + ",code=\"BANDWIDTH_REGRESSION\",severity=\"error\"}"), "2");
  EXPECT_EQ(value(t, "ncclsmoke_findings{" + l + ",code=\"BANDWIDTH_REGRESSION\",severity=\"warning\"}"), "0");
  EXPECT_EQ(value(t, "ncclsmoke_findings{" + l + ",code=\"STRAGGLER\",severity=\"warning\"}"), "1");
  EXPECT_EQ(value(t, "ncclsmoke_findings{" + l + ",code=\"RANKS_MISSING\",severity=\"error\"}"), "0");
  const std::string nccl = l + ",transport=\"nccl\",synthetic=\"false\"}";
  EXPECT_EQ(value(t, "ncclsmoke_gate_busbw_bytes_per_second{" + nccl), "1200000000");
  EXPECT_EQ(value(t, "ncclsmoke_gate_baseline_bytes_per_second{" + nccl), "400000000000");
  EXPECT_EQ(value(t, "ncclsmoke_gate_ratio{" + nccl), "0.003");
  EXPECT_EQ(value(t, "ncclsmoke_gate_degraded_ratio{" + nccl), "0.9");
  EXPECT_EQ(value(t, "ncclsmoke_gate_fail_ratio{" + nccl), "0.5");
  EXPECT_EQ(value(t, "ncclsmoke_gate_message_bytes{" + nccl), "268435456");
  EXPECT_EQ(value(t, "ncclsmoke_transport_identity_info{" + l + ",transport=\"nccl\",identity=\"network=Socket\"}"), "1");
  EXPECT_EQ(value(t, "ncclsmoke_transport_status{" + l + ",transport=\"nccl\",status=\"fail\"}"), "1");
  EXPECT_EQ(value(t, "ncclsmoke_transport_status{" + l + ",transport=\"fabric\",status=\"skipped\"}"), "1");
  // No success time is known: the family is absent (a POST keeps the Pushgateway's old value).
  EXPECT_EQ(t.find("ncclsmoke_last_success_timestamp_seconds"), std::string::npos);
  EXPECT_EQ(t.find("NaN"), std::string::npos);
}

TEST(PublishMetrics, UnmeasuredGateIsOmittedNotZero) {
  std::string t = render_metrics(testing::failing(), {});
  // fabric's gate row has busbw NaN: its size is known, its bandwidth is not.
  EXPECT_EQ(find_series(t, "ncclsmoke_gate_message_bytes{cluster=\"default\",profile=\"p5.48xlarge-efa\","
                           "transport=\"fabric\",synthetic=\"false\"}"),
            1);
  EXPECT_EQ(t.find("ncclsmoke_gate_busbw_bytes_per_second{cluster=\"default\",profile=\"p5.48xlarge-efa\","
                   "transport=\"fabric\""),
            std::string::npos);
  EXPECT_EQ(t.find("NaN"), std::string::npos);
}

TEST(PublishMetrics, KnownEarlierSuccessIsCarriedOnFailure) {
  MetricsOptions o;
  o.last_success_unix = 1796000000.25;
  std::string t = render_metrics(testing::failing(), o);
  EXPECT_EQ(value(t, "ncclsmoke_last_success_timestamp_seconds{cluster=\"default\",profile=\"p5.48xlarge-efa\"}"),
            "1796000000.25");
  EXPECT_EQ(last_success_from_text(t), 1796000000.25);
  // A pass newer than the remembered one wins.
  std::string p = render_metrics(testing::passing(), o);
  EXPECT_EQ(last_success_from_text(p), 1796000404.5);
  EXPECT_TRUE(std::isnan(last_success_from_text("")));
  EXPECT_TRUE(std::isnan(last_success_from_text("ncclsmoke_last_success_timestamp_seconds_x 5\n")));
}

TEST(PublishMetrics, LabelValuesAreEscaped) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  MetricsOptions o;
  o.cluster = "east \"1\"";
  std::string t = render_metrics(testing::failing("we\\ird\n\"p\"/x"), o);
  EXPECT_EQ(value(t, "ncclsmoke_exit_code{cluster=\"east \\\"1\\\"\",profile=\"we\\\\ird\\n\\\"p\\\"/x\"}"),
            "1");
  // No raw newline inside a series line: every line is a comment or name{...} value.
  std::istringstream in(t);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) continue;
    EXPECT_EQ(line.rfind("ncclsmoke_", 0), 0u) << line;
    EXPECT_EQ(line.back() == '}', false) << line;
  }
}

TEST(PublishMetrics, ValueFormatting) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(1e-9), "1e-09");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
  EXPECT_EQ(format_value(-INFINITY), "-Inf");
  EXPECT_EQ(format_value(1796000404.5), "1796000404.5");
}

TEST(PublishMetrics, ProfileOfVerdict) {
  EXPECT_EQ(verdict_profile(testing::passing()), "");
  EXPECT_EQ(profile_label(""), "none");
  EXPECT_EQ(verdict_profile(testing::failing("x")), "x");
  auto v = testing::passing();
  v.baseline = {{"profile", nullptr}, {"reason", "no profile selected"}};
  EXPECT_EQ(verdict_profile(v), "");
}

TEST(PublishMetrics, SuspectHostsNamedByFindingsWithTheirNode) {
  auto v = testing::failing();
  for (auto& r : v.ranks) r.node = "ip-10-0-0-" + std::to_string(r.rank) + ".ec2.internal";
  // Two ranks' copies of one finding (same code, severity, host) make one series; a host that no
  // rank of the verdict lists keeps its own name as the node.
  v.findings.push_back(results::make_finding(results::Code::STRAGGLER, "rank 2 slow (its copy)", {2}, {"host-2"}));
  v.findings.push_back(results::make_finding(results::Code::MESH_BLOCKED, "1 <-> 3", {1, 3}, {"host-1", "host-3"}));
  v.findings.push_back(results::make_finding(results::Code::RANKS_MISSING, "rank 9", {9}, {"elsewhere"}));
  std::string t = render_metrics(v, {});
  const std::string l = "cluster=\"default\",profile=\"p5.48xlarge-efa\"";
  EXPECT_EQ(value(t, "ncclsmoke_suspect_host{" + l +
                         ",code=\"STRAGGLER\",severity=\"warning\",host=\"host-2\",node=\"ip-10-0-0-2.ec2.internal\"}"),
            "1");
  EXPECT_EQ(value(t, "ncclsmoke_suspect_host{" + l +
                         ",code=\"MESH_BLOCKED\",severity=\"error\",host=\"host-3\",node=\"ip-10-0-0-3.ec2.internal\"}"),
            "1");
  EXPECT_EQ(value(t, "ncclsmoke_suspect_host{" + l +
                         ",code=\"RANKS_MISSING\",severity=\"error\",host=\"elsewhere\",node=\"elsewhere\"}"),
            "1");
  // Only named hosts: host-0 is in no finding; the findings without hosts add nothing.
  EXPECT_EQ(t.find("host=\"host-0\""), std::string::npos);
  std::istringstream in(t);
  std::string line;
  int series = 0;
  while (std::getline(in, line)) series += line.rfind("ncclsmoke_suspect_host{", 0) == 0;
  EXPECT_EQ(series, 4);
  EXPECT_EQ(value(t, "ncclsmoke_suspect_hosts_omitted{" + l + "}"), "0");
  EXPECT_NE(t.find("# HELP ncclsmoke_suspect_host 1 per (finding code"), std::string::npos);
}

TEST(PublishMetrics, SuspectNodeIsTheFindingRanksNode) {
  // `launch -n 4` on one host: every rank has a "node" of its own (local-<rank>).
  auto v = testing::passing();
  for (auto& r : v.ranks) {
    r.host = "vm";
    r.node = "local-" + std::to_string(r.rank);
  }
  v.findings.push_back(results::make_finding(results::Code::PEER_LOST, "rank 3 lost", {3}, {"vm"}));
  std::string t = render_metrics(v, {});
  EXPECT_EQ(value(t, "ncclsmoke_suspect_host{cluster=\"default\",profile=\"none\",code=\"PEER_LOST\","
                     "severity=\"error\",host=\"vm\",node=\"local-3\"}"),
            "1");
  EXPECT_EQ(t.find("node=\"local-0\""), std::string::npos);
}

TEST(PublishMetrics, NoSuspectHostStillCarriesTheFamily) {
  // A POST that lacked the family would leave the last run's suspect hosts on the Pushgateway.
  std::string t = render_metrics(testing::passing(), {});
  EXPECT_EQ(value(t, "ncclsmoke_suspect_host{cluster=\"default\",profile=\"none\"}"), "0");
  EXPECT_EQ(t.find("ncclsmoke_suspect_host{cluster=\"default\",profile=\"none\",code="), std::string::npos);
  EXPECT_EQ(value(t, "ncclsmoke_suspect_hosts_omitted{cluster=\"default\",profile=\"none\"}"), "0");
}

TEST(PublishMetrics, SuspectHostsAreBoundedErrorsFirst) {
  auto v = testing::passing();
  // 100 warnings and 10 errors, each naming its own host: the errors all stay.
  for (int i = 0; i < 100; ++i)
    v.findings.push_back(results::make_finding(results::Code::STRAGGLER, "slow", {}, {"w-" + std::to_string(i)}));
  for (int i = 0; i < 10; ++i)
    v.findings.push_back(results::make_finding(results::Code::PEER_LOST, "lost", {}, {"e-" + std::to_string(i)}));
  std::string t = render_metrics(v, {});
  std::istringstream in(t);
  std::string line;
  std::size_t series = 0, errors = 0;
  while (std::getline(in, line)) {
    if (line.rfind("ncclsmoke_suspect_host{", 0) != 0) continue;
    ++series;
    errors += line.find("severity=\"error\"") != std::string::npos;
  }
  EXPECT_EQ(series, kMaxSuspectSeries);
  EXPECT_EQ(errors, 10u);
  EXPECT_EQ(value(t, "ncclsmoke_suspect_hosts_omitted{cluster=\"default\",profile=\"none\"}"),
            std::to_string(110 - kMaxSuspectSeries));
}

TEST(PublishMetrics, HelpTextsAreAContract) {
  // The Pushgateway refuses a push (HTTP 400) whose HELP differs from another group's of the same
  // family, e.g. one pushed by an older version: a family's name and HELP never change. Sorted.
  const std::string want =
      "# HELP ncclsmoke_build_info Version of the ncclsmoke that ran (always 1).\n"
      "# HELP ncclsmoke_exit_code Exit code of the last smoke run (0 pass, 1 fail, 3 degraded, 4 inconclusive).\n"
      "# HELP ncclsmoke_findings Findings of the last smoke run by code and severity (see docs/findings.md).\n"
      "# HELP ncclsmoke_gate_baseline_bytes_per_second Baseline bus bandwidth at the gate size from the selected profile.\n"
      "# HELP ncclsmoke_gate_busbw_bytes_per_second All-reduce bus bandwidth at the gate message size: the number the judge compares with the baseline (bytes per second).\n"
      "# HELP ncclsmoke_gate_degraded_ratio Ratio to baseline below which the run is degraded.\n"
      "# HELP ncclsmoke_gate_fail_ratio Ratio to baseline below which the run fails.\n"
      "# HELP ncclsmoke_gate_message_bytes Message size of the gate measurement.\n"
      "# HELP ncclsmoke_gate_ratio Gate bus bandwidth divided by the baseline (1 = at baseline).\n"
      "# HELP ncclsmoke_last_run_timestamp_seconds When the last smoke run ended, seconds since the epoch.\n"
      "# HELP ncclsmoke_last_success_timestamp_seconds When the last passing smoke run ended, seconds since the epoch.\n"
      "# HELP ncclsmoke_ranks Ranks of the last smoke run by status.\n"
      "# HELP ncclsmoke_run_duration_seconds Wall time of the last smoke run.\n"
      "# HELP ncclsmoke_suspect_host 1 per (finding code, severity, host) a finding of the last smoke run names; node is the host's Kubernetes node. One series without code/host (value 0) when none.\n"
      "# HELP ncclsmoke_suspect_hosts_omitted (code, severity, host) pairs named by findings but left out of ncclsmoke_suspect_host (over its series limit).\n"
      "# HELP ncclsmoke_transport_identity_info What actually carried the bytes per transport (always 1).\n"
      "# HELP ncclsmoke_transport_status Status of each transport phase of the last smoke run: 1 for its status.\n"
      "# HELP ncclsmoke_verdict Verdict of the last smoke run: 1 for its verdict, 0 for the others.\n"
      "# HELP ncclsmoke_world_size Number of ranks the last smoke run expected (0 unknown).\n";
  std::string t = render_metrics(testing::failing(), {}) + render_metrics(testing::passing(), {});
  std::istringstream in(t);
  std::set<std::string> help;
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("# HELP ", 0) == 0) help.insert(line);
  std::string got;
  for (const auto& h : help) got += h + "\n";
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace ncclsmoke::cronjob
