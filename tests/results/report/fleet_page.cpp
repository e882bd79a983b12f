// Writes the report page of an in-memory fleet (three clusters, rows built as History returns
// them, report_rows.h) to argv[1] and prints what the page must show as JSON on stdout, so the
// headless-Chromium test can check the fleet layout without depending on how the history
// stores the cluster:
//   us-east  one step change (degraded from run 30 on): one ongoing incident of 18 runs;
//   eu-west  a step change that cleared (runs 10-17 fail), a second one from run 40 (degraded),
//            then two runs that measured nothing: "Now" still says degraded;
//   default  (runs without a cluster) healthy, every run with the same TRANSPORT_UNAVAILABLE
//            from each of its two ranks: one findings row.
// The newest run of each cluster that measured has a stored verdict with a 1 KiB - 64 MiB sweep
// (the size curve; eu-west's is run 45's); its in-place row is the lower at the gate, so the gate
// mark sits on it.
//
//   report_fleet_page OUT.html
#include <cstdio>
#include <fstream>
#include <iostream>

#include "results/report/html_report.h"
#include "results/verdict/finding_text.h"
#include "tests/results/report/report_rows.h"

using namespace ncclsmoke::report;
using namespace ncclsmoke::report::testing;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: report_fleet_page OUT.html\n";
    return 2;
  }
  ReportInput in;
  const int n = 48;
  const double step = 1800;
  auto id = [](const std::string& c, int i) { return c + "-run-" + std::to_string(i); };
  for (int i = 0; i < n; ++i) {
    double t = kT0 + i * step;
    bool bad = i >= 30;
    add_run(in, {.run_id = id("us-east", i),
                 .t = t,
                 .verdict = bad ? ncclsmoke::results::Outcome::degraded : ncclsmoke::results::Outcome::pass,
                 .busbw = bad ? 0.35 : 0.71 + 0.01 * (i % 3),
                 .findings = bad ? std::vector<std::pair<std::string, std::string>>{
                                       {"BANDWIDTH_REGRESSION",
                                        "socket: 0.35 GB/s busbw at 67108864 bytes vs baseline "
                                        "0.74 GB/s (47%), below the degraded threshold 60%"}}
                                 : std::vector<std::pair<std::string, std::string>>{},
                 .hosts = {"use-node-1", "use-node-2"},
                 .cluster = "us-east",
                 .ranks = {},
                 .finding_hosts = {}});
    bool fail = i >= 10 && i <= 17, deg = i >= 40 && i <= 45, none = i >= 46;
    add_run(in, {.run_id = id("eu-west", i),
                 .t = t + 60,
                 .verdict = fail ? ncclsmoke::results::Outcome::fail : deg ? ncclsmoke::results::Outcome::degraded : none ? ncclsmoke::results::Outcome::inconclusive : ncclsmoke::results::Outcome::pass,
                 .busbw = fail ? 0.12 : deg ? 0.38 : none ? NAN : 0.72,
                 .findings = fail  ? std::vector<std::pair<std::string, std::string>>{
                                        {"BANDWIDTH_REGRESSION",
                                         "socket: 0.12 GB/s busbw at 67108864 bytes vs baseline "
                                         "0.74 GB/s (16%), below the fail threshold 25%"}}
                             : deg ? std::vector<std::pair<std::string, std::string>>{
                                         {"BANDWIDTH_REGRESSION",
                                          "socket: 0.38 GB/s busbw at 67108864 bytes vs "
                                          "baseline 0.74 GB/s (51%), below the degraded "
                                          "threshold 60%"}}
                             : none ? std::vector<std::pair<std::string, std::string>>{
                                          {"TRANSPORT_TIMEOUT",
                                           "transport socket timed out on rank 0 (host "
                                           "euw-node-1) after 60 s"}}
                                    : std::vector<std::pair<std::string, std::string>>{},
                 .hosts = {"euw-node-1", "euw-node-2"},
                 .cluster = "eu-west",
                 .ranks = {0},
                 .finding_hosts = {}});
    for (int r = 0; r < 2; ++r) {
      // two rows of one run: the same finding from each rank
      if (r == 0)
        add_run(in, {.run_id = id("default", i), .t = t + 120, .busbw = 0.70, .hosts = {"vm-1"}});
      ncclsmoke::results::HistoryFinding f;
      f.run_id = id("default", i);
      f.started_unix = t + 120;
      f.profile = "ci-loopback";
      f.code = ncclsmoke::results::Code::TRANSPORT_UNAVAILABLE;
      f.severity = ncclsmoke::results::Severity::warning;
      f.layer = ncclsmoke::results::Layer::transport;
      f.message = "transport fabric skipped on rank " + std::to_string(r) +
                  " (host vm-1): no efa provider";
      f.ranks = {r};
      f.hosts = {"vm-1"};
      f.subject = ncclsmoke::results::reported_by({r, "vm-1"}, "transport:fabric",
                                                  "open/unavailable", "fabric");
      in.findings.push_back(f);
    }
  }
  in.verdicts[id("us-east", n - 1)] = sweep_verdict_json(id("us-east", n - 1), 0.5);
  // eu-west's two newest runs measured nothing: its curve is run 45's.
  in.verdicts[id("eu-west", 45)] = sweep_verdict_json(id("eu-west", 45), 0.55);
  auto empty = sweep_verdict_json(id("eu-west", n - 1));
  empty["transports"] = nlohmann::json::array();
  in.verdicts[id("eu-west", n - 1)] = empty;
  in.verdicts[id("default", n - 1)] = sweep_verdict_json(id("default", n - 1), 1.0);

  auto opt = options_at(kT0 + n * step + 600);
  opt.title = "ncclsmoke fleet report (generated rows)";
  auto model = build_model(in, opt);
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out << render_html(model);
  out.close();
  if (!out) {
    std::cerr << "cannot write " << argv[1] << "\n";
    return 1;
  }
  std::cout << R"({"clusters": {)"
            << R"("us-east": {"incidents": 1, "ongoing": 1, "runs": [18], "now": "degraded"}, )"
            << R"("eu-west": {"incidents": 2, "ongoing": 1, "runs": [6, 8], "now": "degraded", "unmeasured_after": 2, "curve_run": "eu-west-run-45"}, )"
            << R"("default": {"incidents": 0, "ongoing": 0, "runs": [], "now": "ok", "finding_rows": 1}}})"
            << "\n";
  return 0;
}
