#pragma once
// Builders of history rows (as History::runs/gates/findings return them) for the report's unit
// tests: one run = a HistoryRun, its socket gate row and its findings.
#include <cmath>
#include <string>
#include <vector>

#include "results/report/model.h"
#include "results/verdict/verdict.h"
#include "tests/results/sample.h"

namespace ncclsmoke::report::testing {

inline constexpr double kT0 = 1795000000;  // 2026-11-18 11:06:40 UTC

struct RunSpec {
  std::string run_id;
  double t = kT0;
  results::Outcome verdict = results::Outcome::pass;
  double busbw = 0.7;
  double baseline = 0.74;
  std::string profile = "ci-loopback";
  std::string transport = "socket";
  std::vector<std::pair<std::string, std::string>> findings;  // (code, message)
  std::vector<std::string> hosts{"vm"};
  std::string cluster;
  std::vector<int> ranks{0, 1};  // of each finding
  std::vector<std::string> finding_hosts{"="};  // "=": the run's hosts
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
  r.cluster = s.cluster;
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
  g.cluster = s.cluster;
  in.gates.push_back(g);
  for (const auto& [code, message] : s.findings) {
    results::HistoryFinding f;
    f.run_id = s.run_id;
    f.started_unix = s.t;
    f.profile = s.profile;
    f.code = results::AnyCode::from_text(code);
    f.severity = code == "BANDWIDTH_REGRESSION" ? results::Severity::error : results::Severity::warning;
    f.layer = results::Layer::transport;
    f.message = message;
    f.ranks = s.ranks;
    f.hosts = s.finding_hosts == std::vector<std::string>{"="} ? s.hosts : s.finding_hosts;
    f.cluster = s.cluster;
    in.findings.push_back(f);
  }
}

// The stored verdict JSON of a run whose socket sweep went from 1 KiB to 64 MiB (world rows,
// out-of-place and in-place; in-place a little lower at the gate so the headline comes from it),
// judged against the 0.74 GB/s band at 64 MiB. `scale` multiplies every busbw.
inline nlohmann::json sweep_verdict_json(const std::string& run_id, double scale = 1.0) {
  results::Verdict v = results::testing::full_sample();
  v.run_id = run_id;
  v.verdict = results::Outcome::pass;
  v.exit_code = 0;
  v.findings.clear();
  v.transports.clear();
  for (std::int64_t b = 1024; b <= (64 << 20); b *= 4) {
    for (int in_place = 0; in_place < 2; ++in_place) {
      results::TransportRow r;
      r.transport = "socket";
      r.bytes = b;
      r.count = b / 4;
      r.in_place = in_place != 0;
      // a saturating curve, like a real sweep
      double bw = 0.72 * scale * static_cast<double>(b) / (static_cast<double>(b) + (1 << 20));
      r.busbw_gbps = r.in_place ? bw * 0.97 : bw;
      r.algbw_gbps = r.busbw_gbps;
      r.time_us = static_cast<double>(b) / (r.algbw_gbps * 1e3);
      r.wrong = 0;
      r.gate = b == (64 << 20) && !r.in_place;
      v.transports.push_back(r);
    }
  }
  v.baseline = {{"profile", "ci-loopback"},
                {"world_size", 4},
                {"transports",
                 {{{"transport", "socket"},
                   {"band",
                    {{"busbw_gbps", 0.74},
                     {"gate_bytes", 64 << 20},
                     {"degraded_ratio", 0.6},
                     {"fail_ratio", 0.25}}}}}}};
  return results::to_json(v);
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
