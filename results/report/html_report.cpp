#include "results/report/html_report.h"

#include <cctype>
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
.counts{display:flex;gap:10px;flex-wrap:wrap;margin:8px 0}
.cluster{margin-top:22px;padding-top:4px;border-top:3px solid #37474f}
.cluster>h2{font-size:20px;border:none;margin:10px 0 4px}
#clusters{list-style:none;padding:0;margin:6px 0;display:flex;gap:8px;flex-wrap:wrap}
#clusters li{padding:4px 10px;border-radius:6px;background:#f5f5f5;border-left:6px solid #2e7d32}
#clusters li.regressed{border-color:#c62828;background:#fdecec}
.regbox{border:2px solid #c62828;border-radius:8px;padding:4px 14px 10px;background:#fff8f8}
.regbox.clean{border-color:#2e7d32;background:#f6fbf6}
.regbox h3{margin-top:8px}
ul.incidents{margin:0;padding-left:18px;max-height:430px;overflow:auto}ul.incidents li{margin:6px 0}
.tag{font-weight:700;text-transform:uppercase;font-size:11px;border-radius:3px;padding:0 5px;
 color:#fff;background:#c62828;margin-right:4px}.tag.cleared{background:#757575}
ul.latest{list-style:none;padding:0;margin:0}
ul.latest li{margin:4px 0;padding:6px 10px;border-left:6px solid #757575;background:#f5f5f5;
 font-size:15px}
ul.latest li.s-ok{border-color:#2e7d32}ul.latest li.s-degraded{border-color:#ef8f00}
ul.latest li.s-fail{border-color:#c62828;background:#fdecec}
ul.latest li.s-fail .state{color:#c62828}ul.latest li.s-degraded .state{color:#b26a00}
ul.latest li.s-ok .state{color:#2e7d32}
table.findings{border-collapse:collapse;width:100%;font-size:12.5px}
table.findings th,table.findings td{border-bottom:1px solid #e0e0e0;padding:4px 6px;text-align:left;
 vertical-align:top}
table.findings th{background:#f5f5f5}
table.findings td:nth-child(-n+3){white-space:nowrap}
)css";

std::string e(const std::string& s) { return html_escape(s); }

std::string verdict_badge(results::Outcome v) {
  const std::string s = to_string(v);
  return "<span class=\"verdict v-" + s + "\">" + s + "</span>";
}

std::string list_text(const std::vector<std::string>& v, std::size_t max = 8) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < max; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max) s += ", \xE2\x80\xA6 (" + std::to_string(v.size()) + ")";
  return s;
}

std::vector<std::string> code_names(const std::vector<results::Code>& codes) {
  std::vector<std::string> out;
  for (results::Code c : codes) out.push_back(to_string(c));
  return out;
}

std::string ranks_text(const std::vector<int>& r) {
  if (r.empty()) return "";
  std::string s = r.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < r.size() && i < 16; ++i) s += (i ? "," : "") + std::to_string(r[i]);
  if (r.size() > 16) s += ",\xE2\x80\xA6";
  return s;
}

std::string html_window_text(const ReportModel& m) {
  std::string s = "since " + format_utc(m.options.since_unix);
  if (!m.options.since_text.empty()) s += " (" + m.options.since_text + ")";
  return s;
}

// An id-safe form of a cluster name: letters, digits, '-' and '_' kept, the rest '_'.
std::string slug(const std::string& c) {
  std::string s = c.empty() ? std::string(kDefaultCluster) : c;
  for (auto& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
  return s;
}

void counts(std::string& o, const std::map<results::Outcome, int>& vc, const std::string& cls) {
  o += "<div class=\"" + cls + "\">";
  for (results::Outcome verdict : results::kAllOutcomes) {
    auto it = vc.find(verdict);
    int n = it == vc.end() ? 0 : it->second;
    const std::string v = to_string(verdict);
    o += "<span class=\"count v-" + v + "\" data-verdict=\"" + v + "\"><b>" +
         std::to_string(n) + "</b>" + v + "</span>";
  }
}

void incident_item(std::string& o, const Incident& i) {
  o += "<li class=\"incident\" data-cluster=\"" + e(i.cluster) + "\" data-transport=\"" +
       e(i.transport) + "\" data-profile=\"" + e(i.profile) + "\" data-gate-bytes=\"" +
       std::to_string(i.gate_bytes) + "\" data-runs=\"" + std::to_string(i.runs()) +
       "\" data-first-run=\"" + e(i.first_run_id) + "\" data-last-run=\"" + e(i.last_run_id) +
       "\" data-ongoing=\"" + (i.ongoing() ? "true" : "false") + "\"><span class=\"tag" +
       (i.ongoing() ? "" : " cleared") + "\">" + (i.ongoing() ? "ongoing" : "cleared") +
       "</span>" + (i.worst_verdict ? verdict_badge(*i.worst_verdict) : "") + " <b>" +
       e(describe_incident(i)) + "</b>";
  o += "<div class=\"rfind\">";
  if (!i.hosts.empty()) o += "hosts " + e(list_text(i.hosts)) + " \xC2\xB7 ";
  o += "runs <code>" + e(i.first_run_id) + "</code>";
  if (i.runs() > 1) o += " \xE2\x80\xA6 <code>" + e(i.last_run_id) + "</code>";
  if (!i.ongoing()) o += " \xC2\xB7 cleared by <code>" + e(i.cleared_run_id) + "</code>";
  o += "</div>";
  if (!i.message.empty())
    o += "<div class=\"rfind\"><strong>" + e(list_text(code_names(i.codes))) + "</strong>: " + e(i.message) +
         "</div>";
  o += "</li>\n";
}

void latest_list(std::string& o, const ClusterReport& m) {
  if (m.latest.empty()) {
    o += "<p class=\"none\">No transport measured in this window.</p>\n";
    return;
  }
  o += "<ul class=\"latest\">\n";
  for (const auto& s : m.latest) {
    o += "<li class=\"latest s-" + std::string(to_string(s.state)) + "\" data-state=\"" +
         to_string(s.state) + "\" data-cluster=\"" + e(s.cluster) + "\" data-profile=\"" +
         e(s.profile) + "\" data-transport=\"" + e(s.transport) + "\" data-unmeasured-after=\"" +
         std::to_string(s.unmeasured_after) + "\"><span class=\"state\">" + to_string(s.state) +
         "</span> " + e(describe_latest(s)) + ", since " + e(format_utc(s.since_unix)) +
         " <span class=\"note\">(" + std::to_string(s.streak_runs) +
         (s.streak_runs == 1 ? " run" : " runs") + "; latest " + e(format_utc(s.latest_unix)) +
         ", run <code>" + e(s.run_id) + "</code>, " + to_string(s.verdict) + ")</span></li>\n";
  }
  o += "</ul>\n";
}

void cluster_section(std::string& o, const ClusterReport& c, const ReportModel& m) {
  const std::string name = cluster_label(c.cluster);
  o += "<section class=\"cluster\" id=\"cluster-" + e(slug(c.cluster)) + "\" data-cluster=\"" +
       e(name) + "\">\n<h2>Cluster " + e(name) + "</h2>\n";
  counts(o, c.verdict_counts, "counts");
  o += "<span class=\"note\" style=\"align-self:center\"> " + std::to_string(c.run_count) +
       " runs, " + e(format_utc(c.first_unix)) + " to " + e(format_utc(c.last_unix)) +
       "</span></div>\n";

  o += std::string("<div class=\"regbox") + (c.incidents.empty() ? " clean" : "") +
       "\">\n<h3>Now, per profile and transport</h3>\n";
  latest_list(o, c);
  o += "<h3>Regression incidents (" + std::to_string(c.incidents.size()) + ", " +
       std::to_string(c.ongoing_incidents()) + " ongoing; " + std::to_string(c.regression_runs) +
       (c.regression_runs == 1 ? " run" : " runs") + "), newest first</h3>\n";
  if (c.incidents.empty()) {
    o += "<p class=\"none\">No regressed run in this window (no gate number below its band, no "
         "BANDWIDTH_REGRESSION or SILENT_FALLBACK).</p>\n";
  } else {
    o += "<ul class=\"incidents\">\n";
    for (const auto& i : c.incidents) incident_item(o, i);
    o += "</ul>\n";
  }
  o += "</div>\n";

  if (!c.size_curves.empty()) {
    o += "<h3>busbw by message size, the latest run that measured</h3>\n";
    for (const auto& sc : c.size_curves) {
      o += "<figure class=\"size\" data-transport=\"" + e(sc.transport) + "\"><figcaption>" +
           e(sc.transport) + " by size, run <code>" + e(sc.run_id) + "</code> " +
           verdict_badge(sc.verdict) + " <span class=\"sub\">" + e(format_utc(sc.unix)) + ", " +
           std::to_string(sc.world_size) + " ranks; solid out-of-place, dashed in-place" +
           (sc.synthetic ? "; synthetic (ranks share a device, not judged)" : "") +
           "</span></figcaption>\n" + size_chart_svg(sc) + "</figure>\n";
    }
  }

  o += "<h3>busbw at the gate size over time</h3>\n";
  double x0 = m.first_unix, x1 = m.last_unix;
  double pad = std::max(60.0, (x1 - x0) * 0.02);
  x0 -= pad;
  x1 += pad;
  if (c.series.empty()) o += "<p class=\"none\">No gate numbers in this window.</p>\n";
  for (const auto& s : c.series) {
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

  o += "<h3>Verdict timeline</h3>\n<p class=\"note\">" +
       std::string(c.timeline_bucketed
                       ? "One cell per time bucket, coloured by its worst verdict (hover for the "
                         "counts); a dark bar marks a bucket with a regressed run."
                       : "One cell per run, oldest left (hover for run and verdict); a dark bar "
                         "marks a regressed run.") +
       "</p>\n<div class=\"timeline\">\n" + timeline_svg(c.timeline, c.timeline_bucketed) +
       "</div>\n";

  o += "<h3>Findings (" + std::to_string(c.finding_groups_total) + " distinct, " +
       std::to_string(c.findings_total) + " in all)</h3>\n";
  if (c.findings.size() < c.finding_groups_total)
    o += "<p class=\"note\">The " + std::to_string(c.findings.size()) + " most recently seen of " +
         std::to_string(c.finding_groups_total) +
         " distinct findings; every regression is in the incidents above.</p>\n";
  if (c.findings_total == 0) o += "<p class=\"none\">No findings in this window.</p>\n";
  o += "<table class=\"findings\">\n<thead><tr><th>last seen</th><th>code</th><th>severity</th>"
       "<th>runs</th><th>first seen</th><th>ranks / hosts</th><th>message (latest)</th></tr>"
       "</thead>\n<tbody>\n";
  for (const auto& f : c.findings) {
    std::string who = ranks_text(f.ranks);
    if (!f.hosts.empty()) who += (who.empty() ? "" : "; ") + list_text(f.hosts);
    o += "<tr class=\"finding sev-" + e(f.severity) + "\" data-code=\"" + e(f.code) +
         "\" data-runs=\"" + std::to_string(f.runs) + "\" data-run=\"" + e(f.last_run_id) +
         "\"><td>" + e(format_utc(f.last_unix)) + "</td><td>" + e(f.code) +
         "</td><td class=\"sev\">" + e(f.severity) + "</td><td>" + std::to_string(f.runs) +
         "</td><td>" + e(format_utc(f.first_unix)) + "</td><td>" + e(who) + "</td><td>" +
         e(f.message) + "</td></tr>\n";
  }
  o += "</tbody>\n</table>\n</section>\n";
}

}  // namespace

std::string render_html(const ReportModel& m) {
  std::string o;
  o.reserve(64 * 1024 + m.clusters.size() * 256 * 1024);
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
       "<meta name=\"generator\" content=\"ncclsmoke report\">\n<title>" +
       e(m.options.title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n<main>\n";
  o += "<header>\n<h1 id=\"title\">" + e(m.options.title) + "</h1>\n<p class=\"meta\">Runs " +
       e(html_window_text(m)) + " \xC2\xB7 profile " +
       (m.options.profile.empty() ? std::string("all") : "<b>" + e(m.options.profile) + "</b>") +
       " \xC2\xB7 cluster " +
       (m.options.cluster.empty() ? std::string("all") : "<b>" + e(m.options.cluster) + "</b>") +
       " \xC2\xB7 generated " + e(format_utc(m.options.now_unix));
  if (!m.options.history_path.empty()) o += " from <code>" + e(m.options.history_path) + "</code>";
  o += "</p>\n</header>\n";

  if (m.run_count == 0) {
    o += "<p id=\"empty\">No runs since " + e(format_utc(m.options.since_unix)) +
         (m.options.since_text.empty() ? "" : " (" + e(m.options.since_text) + ")") +
         (m.options.profile.empty() ? "" : " for profile " + e(m.options.profile)) +
         (m.options.cluster.empty() ? "" : " in cluster " + e(m.options.cluster)) +
         ".</p>\n</main>\n</body>\n</html>\n";
    return o;
  }

  // Fleet: counts by verdict, then one line per cluster (regressed now or not).
  counts(o, m.verdict_counts, "summary\" id=\"summary");
  o += "<span class=\"note\" style=\"align-self:center\">" + std::to_string(m.run_count) +
       " runs in " + std::to_string(m.clusters.size()) +
       (m.clusters.size() == 1 ? " cluster, " : " clusters, ") + e(format_utc(m.first_unix)) +
       " to " + e(format_utc(m.last_unix)) + "</span></div>\n<ul id=\"clusters\">\n";
  for (const auto& c : m.clusters) {
    bool bad = c.regressed_now() || c.ongoing_incidents() > 0;
    o += "<li data-cluster=\"" + e(cluster_label(c.cluster)) + "\"" +
         (bad ? " class=\"regressed\"" : "") + "><b>" + e(cluster_label(c.cluster)) + "</b>: " +
         std::to_string(c.run_count) + " runs, " + std::to_string(c.incidents.size()) +
         (c.incidents.size() == 1 ? " incident" : " incidents") +
         (bad ? ", regressed now" : ", ok now") + "</li>\n";
  }
  o += "</ul>\n<p class=\"note\">Gate numbers are busbw at the gate size, the lower of "
       "out-of-place and in-place (the number the judge, the summary and the metrics use).</p>\n";
  for (const auto& c : m.clusters) cluster_section(o, c, m);
  o += "<footer>ncclsmoke report \xC2\xB7 self-contained page: no scripts, no external "
       "resources</footer>\n</main>\n</body>\n</html>\n";
  return o;
}

}  // namespace ncclsmoke::report
