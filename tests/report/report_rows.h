#pragma once
// Builders of history rows (as History::runs/gates/findings return them) for the report's unit
// tests: one run = a HistoryRun, its socket gate row and its findings.
#include <cmath>
#include <string>
#include <vector>

#include "results/report/model.h"

namespace ncclsmoke::report::testing {

inline constexpr double kT0 = 1795000000;  // 2026-11-18 11:06:40 UTC

struct RunSpec {
  std::string run_id;
  double t = kT0;
  std::string verdict = "pass";
  double busbw = 0.7;
  double baseline = 0.74;
  std::string profile = "ci-loopback";
  std::string transport = "socket";
  std::vector<std::pair<std::string, std::string>> findings;  // (code, message)
  std::vector<std::string> hosts{"vm"};
};

inline void add_run(ReportInput& in, const RunSpec& s) {
  results::HistoryRun r;
  r.run_id = s.run_id;
  r.started_at = "2026-11-18T00:00:00Z";
  r.started_unix = s.t;
  r.verdict = s.verdict;
  r.world_size = 2;
  r.profile = s.profile;
  r.hosts = s.hosts;
  r.source = "test";
  in.runs.push_back(r);
  results::HistoryGate g;
  g.run_id = s.run_id;
  g.started_unix = s.t;
  g.verdict = s.verdict;
  g.profile = s.profile;
  g.world_size = 2;
  g.transport = s.transport;
  g.gate_bytes = 64 << 20;
  g.busbw_gbps = s.busbw;
  g.baseline_gbps = s.baseline;
  g.degraded_ratio = std::isnan(s.baseline) ? NAN : 0.6;
  g.fail_ratio = std::isnan(s.baseline) ? NAN : 0.25;
  g.identity = "interface=lo";
  in.gates.push_back(g);
  for (const auto& [code, message] : s.findings) {
    results::HistoryFinding f;
    f.run_id = s.run_id;
    f.started_unix = s.t;
    f.profile = s.profile;
    f.code = code;
    f.severity = code == "BANDWIDTH_REGRESSION" ? "error" : "warning";
    f.layer = "transport";
    f.message = message;
    f.ranks = {0, 1};
    f.hosts = s.hosts;
    in.findings.push_back(f);
  }
}

inline ReportOptions options_at(double now) {
  ReportOptions o;
  o.since_unix = now - 14 * 86400;
  o.since_text = "14d";
  o.now_unix = now;
  return o;
}

inline std::size_t count_of(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace ncclsmoke::report::testing
