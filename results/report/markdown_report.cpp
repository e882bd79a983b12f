#include "results/report/markdown_report.h"

#include <cmath>

#include "results/report/escape.h"
#include "results/report/scale.h"

namespace ncclsmoke::report {
namespace {

std::string markdown_window_text(const ReportModel& m) {
  std::string s = "since " + format_utc(m.options.since_unix);
  if (!m.options.since_text.empty()) s += " (" + markdown_escape(m.options.since_text) + ")";
  s += ", profile " +
       (m.options.profile.empty() ? std::string("all") : markdown_escape(m.options.profile));
  return s;
}

}  // namespace

std::string render_markdown(const ReportModel& m, std::size_t max_regressions) {
  std::string o;
  o += "**" + markdown_escape(m.options.title) + "** \xE2\x80\x94 " + markdown_window_text(m) + "\n\n";
  if (m.run_count == 0) {
    o += "No runs since " + format_utc(m.options.since_unix) + ".\n";
    return o;
  }
  o += "Runs: " + std::to_string(m.run_count) + " (" + format_utc(m.first_unix) + " to " +
       format_utc(m.last_unix) + ") \xE2\x80\x94 ";
  bool first = true;
  for (results::Outcome v : results::kAllOutcomes) {
    auto it = m.verdict_counts.find(v);
    o += (first ? "" : " \xC2\xB7 ") + to_string(v) + " " +
         std::to_string(it == m.verdict_counts.end() ? 0 : it->second);
    first = false;
  }
  o += "\n\n";

  for (const auto& c : m.clusters) {
    o += "### Cluster " + markdown_escape(cluster_label(c.cluster)) + " \xE2\x80\x94 " +
         std::to_string(c.run_count) + " runs";
    for (results::Outcome v : results::kAllOutcomes) {
      auto it = c.verdict_counts.find(v);
      int n = it == c.verdict_counts.end() ? 0 : it->second;
      if (n) o += " \xC2\xB7 " + to_string(v) + " " + std::to_string(n);
    }
    o += " \xE2\x80\x94 **" + std::string(c.now_verdict() == results::Outcome::pass
                                              ? "ok now"
                                              : to_string(c.now_verdict()) + " now") +
         "**\n\n";
    for (const auto& n : c.now) {
      o += "- Now on " + markdown_escape(profile_label(n.profile)) + ": **" +
           markdown_escape(describe_now(n)) + "** (run `" + markdown_escape(n.run_id) + "`, " +
           format_utc(n.unix) + (n.link.empty() ? "" : ", " + markdown_escape(n.link)) + ")\n";
      if (n.verdict != results::Outcome::pass && !n.message.empty())
        o += "  - " + markdown_escape(n.message) + "\n";
    }
    o += "\n";
    if (c.incidents.empty()) {
      o += "Incidents: none (no failed run, no gate number below its band, no "
           "BANDWIDTH\\_REGRESSION or SILENT\\_FALLBACK in the window).\n\n";
    } else {
      o += "Incidents (" + std::to_string(c.incidents.size()) + ", " +
           std::to_string(c.ongoing_incidents()) + " ongoing, newest first):\n";
      for (std::size_t i = 0; i < c.incidents.size() && i < max_regressions; ++i) {
        const auto& inc = c.incidents[i];
        o += "- **" + std::string(inc.ongoing() ? "ongoing" : "cleared") + "** " +
             to_string(inc.kind) + ": " + markdown_escape(describe_incident(inc));
        if (!inc.hosts.empty()) {
          o += "; hosts ";
          for (std::size_t h = 0; h < inc.hosts.size() && h < 8; ++h)
            o += (h ? ", " : "") + markdown_escape(inc.hosts[h]);
          if (inc.hosts.size() > 8) o += ", \xE2\x80\xA6";
        }
        if (!inc.ongoing()) o += "; cleared by `" + markdown_escape(inc.cleared_run_id) + "`";
        o += "\n";
        if (!inc.message.empty()) {
          std::string codes;
          for (const auto& cd : inc.codes) codes += (codes.empty() ? "" : ", ") + to_string(cd);
          o += "  - " + markdown_escape(codes) + ": " + markdown_escape(inc.message) + "\n";
        }
      }
      if (c.incidents.size() > max_regressions)
        o += "- \xE2\x80\xA6 and " + std::to_string(c.incidents.size() - max_regressions) +
             " earlier (all listed in the HTML report)\n";
      o += "\n";
    }
    if (!c.latest.empty()) {
      o += "Bandwidth now, per profile and transport:\n";
      for (const auto& s : c.latest) {
        o += "- " + markdown_escape(describe_latest(s)) + " \xE2\x80\x94 **" + to_string(s.shown) +
             "**" + (s.shown != s.state ? " (last measured " + std::string(to_string(s.state)) + ")"
                                        : std::string()) +
             " since " + format_utc(s.since_unix) + " (" + std::to_string(s.streak_runs) +
             (s.streak_runs == 1 ? " run" : " runs") + ")\n";
      }
      o += "\n";
    }
    std::string hosts;
    std::size_t shown = 0;
    for (const auto& h : c.hosts) {
      if (h.host.empty() || shown == 5) continue;
      ++shown;
      std::string codes;
      for (std::size_t k = 0; k < h.codes.size() && k < 3; ++k)
        codes += (k ? ", " : "") + h.codes[k].code + " " + std::to_string(h.codes[k].runs);
      hosts += (hosts.empty() ? "" : "; ") + h.host + " (" + codes + ")";
    }
    if (!hosts.empty())
      o += "Hosts in findings (runs): " + markdown_escape(hosts) + "\n\n";
  }
  return o;
}

}  // namespace ncclsmoke::report
