#include "results/report/html_report.h"

#include <cmath>

#include "results/report/escape.h"
#include "results/report/scale.h"
#include "results/report/svg_chart.h"

namespace ncclsmoke::report {
namespace {

constexpr const char* kCss = R"css(
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;color:#212121;
 margin:0;background:#fafafa}
main{max-width:1000px;margin:0 auto;padding:16px 20px 40px;background:#fff}
h1{font-size:22px;margin:4px 0 2px}
h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #e0e0e0;
 padding-bottom:3px}
.meta{color:#616161;margin:0 0 10px}
code{font:12px/1.3 "DejaVu Sans Mono",Menlo,Consolas,monospace;background:#f3f3f3;padding:0 3px;
 border-radius:3px}
#summary{display:flex;gap:10px;flex-wrap:wrap;margin:8px 0}
.count{border-radius:6px;padding:6px 12px;color:#fff;font-weight:600}
.count b{font-size:20px;margin-right:6px}
.v-pass{background:#2e7d32}.v-degraded{background:#ef8f00}.v-fail{background:#c62828}
.v-inconclusive{background:#757575}
.verdict{display:inline-block;color:#fff;border-radius:3px;padding:0 6px;font-size:12px;
 font-weight:600;text-transform:uppercase}
#regressions-section{border:2px solid #c62828;border-radius:8px;padding:4px 14px 10px;
 background:#fff8f8}
#regressions-section.clean{border-color:#2e7d32;background:#f6fbf6}
#regressions-section h2{border:none;margin-top:8px}
#regressions{margin:0;padding-left:18px;max-height:430px;overflow:auto}#regressions li{margin:6px 0}
.rfind{margin:2px 0 0 0;color:#424242}.rfind strong{color:#b71c1c}
h3{font-size:13px;margin:10px 0 4px;color:#424242}
#latest{list-style:none;padding:0;margin:0}
#latest li{margin:4px 0;padding:6px 10px;border-left:6px solid #757575;background:#f5f5f5;
 font-size:15px}
#latest li.s-ok{border-color:#2e7d32}#latest li.s-degraded{border-color:#ef8f00}
#latest li.s-fail{border-color:#c62828;background:#fdecec}
.state{font-weight:700;text-transform:uppercase;font-size:12px;margin-right:4px}
#latest li.s-fail .state{color:#c62828}#latest li.s-degraded .state{color:#b26a00}
#latest li.s-ok .state{color:#2e7d32}
.legend{display:flex;gap:14px;flex-wrap:wrap;color:#424242;font-size:12px;margin:4px 0 8px}
.sw{display:inline-block;width:12px;height:12px;border-radius:6px;vertical-align:-1px;
 margin-right:4px}
.zone{border-radius:0;border:1px solid #ccc}
figure{margin:10px 0 18px}figcaption{font-weight:600;margin-bottom:2px}
figcaption .sub{font-weight:400;color:#616161;font-size:12px}
svg{max-width:100%;height:auto;display:block}
#findings{border-collapse:collapse;width:100%;font-size:12.5px}
#findings th,#findings td{border-bottom:1px solid #e0e0e0;padding:4px 6px;text-align:left;
 vertical-align:top}
#findings th{background:#f5f5f5}
#findings td:nth-child(-n+5){white-space:nowrap}
tr.sev-error td.sev{color:#c62828;font-weight:600}
tr.sev-warning td.sev{color:#b26a00;font-weight:600}
.note{color:#616161;font-size:12px}
#empty{font-size:18px;padding:30px 0;color:#424242}
footer{color:#9e9e9e;font-size:12px;margin-top:30px}
)css";

std::string e(const std::string& s) { return html_escape(s); }

std::string verdict_badge(const std::string& v) {
  return "<span class=\"verdict v-" + e(v) + "\">" + e(v) + "</span>";
}

std::string join_hosts_ranks(const results::HistoryFinding& f) {
  std::string s;
  if (!f.ranks.empty()) {
    s += f.ranks.size() == 1 ? "rank " : "ranks ";
    for (std::size_t i = 0; i < f.ranks.size(); ++i)
      s += (i ? "," : "") + std::to_string(f.ranks[i]);
  }
  if (!f.hosts.empty()) {
    if (!s.empty()) s += "; ";
    for (std::size_t i = 0; i < f.hosts.size(); ++i) s += (i ? ", " : "") + f.hosts[i];
  }
  return s;
}

std::string window_text(const ReportModel& m) {
  std::string s = "since " + format_utc(m.options.since_unix);
  if (!m.options.since_text.empty()) s += " (" + m.options.since_text + ")";
  return s;
}

void regression_item(std::string& o, const Regression& r) {
  o += "<li class=\"regression\" data-run=\"" + e(r.run.run_id) + "\" data-verdict=\"" +
       e(r.run.verdict) + "\"><time datetime=\"" + e(r.run.started_at) + "\">" +
       e(format_utc(r.run.started_unix)) + "</time> " + verdict_badge(r.run.verdict);
  std::string nums;
  for (const auto& g : r.gates) {
    if (g.synthetic || !std::isfinite(g.busbw_gbps)) continue;
    nums += nums.empty() ? " " : "; ";
    nums += e(g.transport) + " <b>" + format_gbps(g.busbw_gbps) + " GB/s</b> at " +
            format_bytes(g.gate_bytes);
    if (std::isfinite(g.baseline_gbps) && g.baseline_gbps > 0)
      nums += ", <b>" + format_percent(g.busbw_gbps / g.baseline_gbps) + "</b> of baseline " +
              format_gbps(g.baseline_gbps);
  }
  o += nums + " <span class=\"note\">\xC2\xB7 run <code>" + e(r.run.run_id) + "</code> on " +
       e(profile_label(r.run.profile));
  if (!r.run.hosts.empty()) {
    o += " (";
    for (std::size_t i = 0; i < r.run.hosts.size() && i < 8; ++i)
      o += (i ? ", " : "") + e(r.run.hosts[i]);
    if (r.run.hosts.size() > 8) o += ", \xE2\x80\xA6";
    o += ")";
  }
  o += "</span>";
  for (const auto& f : r.findings)
    o += "<div class=\"rfind\"><strong>" + e(f.code) + "</strong> (" + e(f.severity) +
         "): " + e(f.message) + "</div>";
  o += "</li>\n";
}

void latest_list(std::string& o, const ReportModel& m) {
  if (m.latest.empty()) {
    o += "<p class=\"none\">No transport measured in this window.</p>\n";
    return;
  }
  o += "<ul id=\"latest\">\n";
  for (const auto& s : m.latest) {
    o += "<li class=\"latest s-" + std::string(to_string(s.state)) + "\" data-state=\"" +
         to_string(s.state) + "\" data-profile=\"" + e(s.profile) + "\" data-transport=\"" +
         e(s.transport) + "\"><span class=\"state\">" + to_string(s.state) + "</span> " +
         e(describe_latest(s)) + ", since " + e(format_utc(s.since_unix)) +
         " <span class=\"note\">(" + std::to_string(s.streak_runs) +
         (s.streak_runs == 1 ? " run" : " runs") + "; latest " + e(format_utc(s.latest_unix)) +
         ", run <code>" + e(s.run_id) + "</code>, " + e(s.verdict) + ")</span></li>\n";
  }
  o += "</ul>\n";
}

}  // namespace

std::string render_html(const ReportModel& m) {
  std::string o;
  o.reserve(64 * 1024 + m.series.size() * 64 * 1024 + m.findings.size() * 400 +
            m.regressions.size() * 600);
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
       "<meta name=\"generator\" content=\"ncclsmoke report\">\n<title>" +
       e(m.options.title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n<main>\n";
  o += "<header>\n<h1 id=\"title\">" + e(m.options.title) + "</h1>\n<p class=\"meta\">Runs " +
       e(window_text(m)) + " \xC2\xB7 profile " +
       (m.options.profile.empty() ? std::string("all") : "<b>" + e(m.options.profile) + "</b>") +
       " \xC2\xB7 generated " + e(format_utc(m.options.now_unix));
  if (!m.options.history_path.empty()) o += " from <code>" + e(m.options.history_path) + "</code>";
  o += "</p>\n</header>\n";

  if (m.run_count == 0) {
    o += "<p id=\"empty\">No runs since " + e(format_utc(m.options.since_unix)) +
         (m.options.since_text.empty() ? "" : " (" + e(m.options.since_text) + ")") +
         (m.options.profile.empty() ? "" : " for profile " + e(m.options.profile)) +
         ".</p>\n</main>\n</body>\n</html>\n";
    return o;
  }

  // Counts by verdict.
  o += "<div id=\"summary\">";
  for (const char* v : kVerdicts) {
    auto it = m.verdict_counts.find(v);
    int n = it == m.verdict_counts.end() ? 0 : it->second;
    o += "<span class=\"count v-" + std::string(v) + "\" data-verdict=\"" + v + "\"><b>" +
         std::to_string(n) + "</b>" + v + "</span>";
  }
  o += "<span class=\"note\" style=\"align-self:center\">" + std::to_string(m.run_count) +
       " runs, " + e(format_utc(m.first_unix)) + " to " + e(format_utc(m.last_unix)) +
       "</span></div>\n";

  // Regressions, at the top: where each (profile, transport) stands now, then every run with a
  // regression finding.
  o += std::string("<section id=\"regressions-section\"") +
       (m.regressions.empty() ? " class=\"clean\"" : "") + ">\n<h2>Regressions (" +
       std::to_string(m.regressions.size()) + ")</h2>\n<h3>Now, per profile and transport</h3>\n";
  latest_list(o, m);
  if (m.regressions.empty()) {
    o += "<p class=\"none\">No run in this window has a BANDWIDTH_REGRESSION or SILENT_FALLBACK "
         "finding.</p>\n";
  } else {
    o += "<h3>Runs with a BANDWIDTH_REGRESSION or SILENT_FALLBACK finding, newest first</h3>\n"
         "<ul id=\"regressions\">\n";
    for (const auto& r : m.regressions) regression_item(o, r);
    o += "</ul>\n";
  }
  o += "</section>\n";

  // Charts.
  o += "<section id=\"charts\">\n<h2>Bus bandwidth at the gate size</h2>\n"
       "<div class=\"legend\"><span><i class=\"sw v-pass\"></i>pass</span>"
       "<span><i class=\"sw v-degraded\"></i>degraded</span><span><i class=\"sw v-fail\"></i>"
       "fail</span><span><i class=\"sw v-inconclusive\"></i>inconclusive</span>"
       "<span><i class=\"sw\" style=\"background:#fff;border:2px solid #212121\"></i>regression "
       "run</span><span>- - baseline</span><span><i class=\"sw zone\" style=\"background:#fff1d6\">"
       "</i>degraded zone</span><span><i class=\"sw zone\" style=\"background:#fbe3e3\"></i>fail "
       "zone</span><span>\xE2\x96\xB2 no number at the gate size</span></div>\n";
  double x0 = m.first_unix, x1 = m.last_unix;
  double pad = std::max(60.0, (x1 - x0) * 0.02);
  x0 -= pad;
  x1 += pad;
  if (m.series.empty()) o += "<p class=\"none\">No gate numbers in this window.</p>\n";
  for (const auto& s : m.series) {
    o += "<figure class=\"chart\" data-transport=\"" + e(s.transport) + "\" data-profile=\"" +
         e(s.profile) + "\"><figcaption>" + e(s.transport) + " on " + e(profile_label(s.profile)) +
         " at " + format_bytes(s.gate_bytes) + " <span class=\"sub\">" +
         std::to_string(s.total_points) + (s.total_points == 1 ? " run" : " runs") +
         " with this gate";
    if (s.not_measured) o += ", " + std::to_string(s.not_measured) + " without a number";
    if (s.points.size() < s.total_points)
      o += "; " + std::to_string(s.points.size()) +
           " points drawn (lowest and highest per time bucket and verdict, every regression)";
    o += "</span></figcaption>\n" + busbw_chart_svg(s, x0, x1) + "</figure>\n";
  }
  o += "</section>\n";

  // Verdict timeline.
  o += "<section id=\"timeline-section\">\n<h2>Verdict timeline</h2>\n<p class=\"note\">" +
       std::string(m.timeline_bucketed
                       ? "One cell per time bucket, coloured by its worst verdict (hover for the "
                         "counts); a dark bar marks a bucket with a regression."
                       : "One cell per run, oldest left (hover for run and verdict); a dark bar "
                         "marks a regression.") +
       "</p>\n<div id=\"timeline\">\n" + timeline_svg(m.timeline, m.timeline_bucketed) +
       "</div>\n</section>\n";

  // Findings table.
  o += "<section id=\"findings-section\">\n<h2>Findings (" + std::to_string(m.findings_total) +
       ")</h2>\n";
  if (m.findings.size() < m.findings_total)
    o += "<p class=\"note\">The newest " + std::to_string(m.findings.size()) + " of " +
         std::to_string(m.findings_total) +
         " findings; every regression is listed at the top.</p>\n";
  if (m.findings_total == 0) {
    o += "<p class=\"none\">No findings in this window.</p>\n";
  }
  o += "<table id=\"findings\">\n<thead><tr><th>time</th><th>run id</th><th>code</th>"
       "<th>severity</th><th>ranks / hosts</th><th>message</th></tr></thead>\n<tbody>\n";
  for (const auto& f : m.findings) {
    o += "<tr class=\"finding sev-" + e(f.severity) + "\" data-code=\"" + e(f.code) +
         "\" data-run=\"" + e(f.run_id) + "\"><td>" + e(format_utc(f.started_unix)) +
         "</td><td><code>" + e(f.run_id) + "</code></td><td>" + e(f.code) +
         "</td><td class=\"sev\">" + e(f.severity) + "</td><td>" + e(join_hosts_ranks(f)) +
         "</td><td>" + e(f.message) + "</td></tr>\n";
  }
  o += "</tbody>\n</table>\n</section>\n";
  o += "<footer>ncclsmoke report \xC2\xB7 self-contained page: no scripts, no external "
       "resources</footer>\n</main>\n</body>\n</html>\n";
  return o;
}

}  // namespace ncclsmoke::report
