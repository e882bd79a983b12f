#include "results/report/markdown_report.h"

#include <cmath>

#include "results/report/escape.h"
#include "results/report/scale.h"

namespace ncclsmoke::report {
namespace {

std::string window_text(const ReportModel& m) {
  std::string s = "since " + format_utc(m.options.since_unix);
  if (!m.options.since_text.empty()) s += " (" + markdown_escape(m.options.since_text) + ")";
  s += ", profile " +
       (m.options.profile.empty() ? std::string("all") : markdown_escape(m.options.profile));
  return s;
}

std::string gate_numbers(const Regression& r) {
  std::string s;
  for (const auto& g : r.gates) {
    if (g.synthetic || !std::isfinite(g.busbw_gbps)) continue;
    if (!s.empty()) s += "; ";
    s += markdown_escape(g.transport) + " " + format_gbps(g.busbw_gbps) + " GB/s at " +
         format_bytes(g.gate_bytes);
    if (std::isfinite(g.baseline_gbps) && g.baseline_gbps > 0)
      s += " (" + format_percent(g.busbw_gbps / g.baseline_gbps) + " of " +
           format_gbps(g.baseline_gbps) + ")";
  }
  return s;
}

}  // namespace

std::string render_markdown(const ReportModel& m, std::size_t max_regressions) {
  std::string o;
  o += "**" + markdown_escape(m.options.title) + "** \xE2\x80\x94 " + window_text(m) + "\n\n";
  if (m.run_count == 0) {
    o += "No runs since " + format_utc(m.options.since_unix) + ".\n";
    return o;
  }
  o += "Runs: " + std::to_string(m.run_count) + " (" + format_utc(m.first_unix) + " to " +
       format_utc(m.last_unix) + ") \xE2\x80\x94 ";
  bool first = true;
  for (const char* v : kVerdicts) {
    auto it = m.verdict_counts.find(v);
    o += (first ? "" : " \xC2\xB7 ") + std::string(v) + " " +
         std::to_string(it == m.verdict_counts.end() ? 0 : it->second);
    first = false;
  }
  for (const auto& [v, n] : m.verdict_counts) {
    bool known = false;
    for (const char* k : kVerdicts) known = known || v == k;
    if (!known && n > 0) o += " \xC2\xB7 " + markdown_escape(v) + " " + std::to_string(n);
  }
  o += "\n\n";

  if (m.regressions.empty()) {
    o += "Regressions: none (no BANDWIDTH\\_REGRESSION or SILENT\\_FALLBACK in the window).\n\n";
  } else {
    o += "Regressions (" + std::to_string(m.regressions.size()) + ", newest first):\n";
    for (std::size_t i = 0; i < m.regressions.size() && i < max_regressions; ++i) {
      const auto& r = m.regressions[i];
      o += "- " + format_utc(r.run.started_unix) + " **" + markdown_escape(r.run.verdict) +
           "** run `" + markdown_escape(r.run.run_id) + "` on " +
           markdown_escape(profile_label(r.run.profile));
      std::string nums = gate_numbers(r);
      if (!nums.empty()) o += ": " + nums;
      o += "\n";
      for (const auto& f : r.findings)
        o += "  - " + markdown_escape(f.code) + " (" + markdown_escape(f.severity) +
             "): " + markdown_escape(f.message) + "\n";
    }
    if (m.regressions.size() > max_regressions)
      o += "- \xE2\x80\xA6 and " + std::to_string(m.regressions.size() - max_regressions) +
           " earlier (all listed in the HTML report)\n";
    o += "\n";
  }

  if (!m.latest.empty()) {
    o += "Latest per profile and transport:\n";
    for (const auto& s : m.latest) {
      o += "- " + markdown_escape(describe_latest(s)) + " \xE2\x80\x94 **" + to_string(s.state) +
           "** since " + format_utc(s.since_unix) + " (" + std::to_string(s.streak_runs) +
           (s.streak_runs == 1 ? " run" : " runs") + ")\n";
    }
  }
  return o;
}

}  // namespace ncclsmoke::report
