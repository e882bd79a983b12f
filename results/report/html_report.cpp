#include "results/report/html_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "results/report/escape.h"
#include "results/report/scale.h"
#include "results/report/svg_chart.h"

namespace ncclsmoke::report {
namespace {

constexpr const char* kCss = R"css(
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;color:#212121;
 margin:0;background:#fff}
main{padding:16px 28px 40px}
h1{font-size:22px;margin:4px 0 2px}
h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #e0e0e0;padding-bottom:3px}
h3{font-size:13px;margin:14px 0 4px;color:#424242}
.meta{color:#616161;margin:0 0 10px}
code{font:12px/1.3 "DejaVu Sans Mono",Menlo,Consolas,monospace;background:#f3f3f3;padding:0 3px;
 border-radius:3px}
.counts,#summary{display:flex;gap:10px;flex-wrap:wrap;margin:8px 0;align-items:center}
.count{border-radius:6px;padding:6px 12px;color:#fff;font-weight:600}
.count b{font-size:20px;margin-right:6px}
.v-pass{background:#2e7d32}.v-degraded{background:#ef8f00}.v-fail{background:#c62828}
.v-inconclusive{background:#757575}
.verdict{display:inline-block;color:#fff;border-radius:3px;padding:0 6px;font-size:12px;
 font-weight:600;text-transform:uppercase}
.note{color:#616161;font-size:12px}
#empty{font-size:18px;padding:30px 0;color:#424242}
footer{color:#9e9e9e;font-size:12px;margin-top:30px}
#clusters{list-style:none;padding:0;margin:6px 0;display:flex;gap:8px;flex-wrap:wrap}
#clusters li{padding:4px 10px;border-radius:6px;background:#f6fbf6;border-left:6px solid #2e7d32}
#clusters li.s-fail{border-color:#c62828;background:#fdecec}
#clusters li.s-degraded{border-color:#ef8f00;background:#fff4e0}
#clusters li.s-inconclusive{border-color:#757575;background:#f0f0f0}
.cluster{margin-top:22px;padding-top:4px;border-top:3px solid #37474f}
.cluster>h2{font-size:20px;border:none;margin:10px 0 4px}
.regbox{border:2px solid #c62828;border-radius:8px;padding:4px 14px 10px;background:#fff8f8}
.regbox.s-degraded{border-color:#ef8f00;background:#fffaf0}
.regbox.s-inconclusive{border-color:#757575;background:#f7f7f7}
.regbox.s-pass{border-color:#2e7d32;background:#f6fbf6}
.regbox h3{margin-top:8px}
ul.now,ul.latest{list-style:none;padding:0;margin:0}
ul.now li,ul.latest li{margin:4px 0;padding:6px 10px;border-left:6px solid #757575;
 background:#f5f5f5}
ul.now li{font-size:15px}
ul.now li.s-pass,ul.latest li.s-ok{border-color:#2e7d32}
ul.now li.s-degraded,ul.latest li.s-degraded{border-color:#ef8f00}
ul.now li.s-fail,ul.latest li.s-fail{border-color:#c62828;background:#fdecec}
.state{font-weight:700;text-transform:uppercase;font-size:12px;margin-right:4px}
li.s-fail .state{color:#c62828}li.s-degraded .state{color:#b26a00}
li.s-ok .state,li.s-pass .state{color:#2e7d32}li.s-inconclusive .state,
li.s-not-measured .state,li.s-no-baseline .state{color:#616161}
.why{margin:2px 0 0;color:#424242;font-size:13px}.why strong{color:#b71c1c}
ul.incidents{margin:0;padding-left:18px}
ul.incidents li{margin:6px 0}
.rfind{margin:2px 0 0 0;color:#424242}.rfind strong{color:#b71c1c}
.tag{font-weight:700;text-transform:uppercase;font-size:11px;border-radius:3px;padding:0 5px;
 color:#fff;background:#c62828;margin-right:4px}.tag.cleared{background:#757575}
.kind{font-size:11px;border:1px solid #9e9e9e;border-radius:3px;padding:0 4px;margin-right:4px;
 color:#424242;text-transform:uppercase}
figure{margin:10px 0 18px}figcaption{font-weight:600;margin-bottom:2px}
figcaption .sub{font-weight:400;color:#616161;font-size:12px}
svg{display:block;width:100%;height:auto;max-width:1600px}
table.findings,table.hosts,table.runs{border-collapse:collapse;width:100%;font-size:12.5px}
table.findings th,table.findings td,table.hosts th,table.hosts td,table.runs th,table.runs td{
 border-bottom:1px solid #e0e0e0;padding:4px 6px;text-align:left;vertical-align:top}
table.findings th,table.hosts th,table.runs th{background:#f5f5f5;white-space:nowrap}
td.date,td.code,td.num,td.sev,td.run,td.v{white-space:nowrap}
td.num,th.num{text-align:right}
tr.sev-error td.sev{color:#c62828;font-weight:600}
tr.sev-warning td.sev{color:#b26a00;font-weight:600}
td.hint{color:#37474f}
table.hosts td.hc{text-align:center;white-space:nowrap}
table.hosts td.hc.sev-error{background:#fdecec;color:#b71c1c;font-weight:600}
table.hosts td.hc.sev-warning{background:#fff4e0;color:#8a5300;font-weight:600}
table.hosts td.hc .last{display:block;font-weight:400;color:#616161;font-size:11px}
table.runs a{color:#1565c0}
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

std::vector<std::string> code_names(const std::vector<results::AnyCode>& codes) {
  std::vector<std::string> out;
  for (const auto& c : codes) out.push_back(results::to_string(c));
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

// A run id, as a link to its verdict when there is one.
std::string run_ref(const std::string& run_id, const std::string& link) {
  if (link.empty()) return "<code>" + e(run_id) + "</code>";
  return "<a class=\"verdict-link\" href=\"" + e(link) + "\"><code>" + e(run_id) + "</code></a>";
}

// "pass" -> "ok now", else "<verdict> now" (the cluster's chip and box).
std::string now_text(results::Outcome v) {
  switch (v) {
    case results::Outcome::pass: return "ok now";
    case results::Outcome::fail: return "failing now";
    case results::Outcome::degraded: return "degraded now";
    case results::Outcome::inconclusive: return "inconclusive now";
  }
  return "inconclusive now";
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

void incident_item(std::string& o, const Incident& i, const std::map<std::string, std::string>& links) {
  auto link = [&](const std::string& id) {
    auto it = links.find(id);
    return run_ref(id, it == links.end() ? "" : it->second);
  };
  o += "<li class=\"incident\" data-kind=\"" + std::string(to_string(i.kind)) +
       "\" data-cluster=\"" + e(i.cluster) + "\" data-transport=\"" + e(i.transport) +
       "\" data-profile=\"" + e(i.profile) + "\" data-gate-bytes=\"" +
       std::to_string(i.gate_bytes) + "\" data-runs=\"" + std::to_string(i.runs()) +
       "\" data-first-run=\"" + e(i.first_run_id) + "\" data-last-run=\"" + e(i.last_run_id) +
       "\" data-ongoing=\"" + (i.ongoing() ? "true" : "false") + "\" data-cleared-by=\"" +
       e(i.cleared_run_id) + "\" data-codes=\"" + e(list_text(code_names(i.codes), 64)) +
       "\" data-hosts=\"" + e(list_text(i.hosts, 64)) + "\"><span class=\"tag" +
       (i.ongoing() ? "" : " cleared") + "\">" + (i.ongoing() ? "ongoing" : "cleared") +
       "</span><span class=\"kind\">" + to_string(i.kind) + "</span>" +
       (i.worst_verdict ? verdict_badge(*i.worst_verdict) : "") + " <b>" +
       e(describe_incident(i)) + "</b>";
  o += "<div class=\"rfind\">";
  std::string who;
  if (!i.hosts.empty()) who = "hosts " + list_text(i.hosts);
  if (i.hosts.empty() && i.kind == IncidentKind::failure) who = "no host named";
  if (!i.ranks.empty()) who += (who.empty() ? "" : ", ") + ranks_text(i.ranks);
  if (!who.empty()) o += e(who) + " \xC2\xB7 ";
  o += "runs " + link(i.first_run_id);
  if (i.runs() > 1) o += " \xE2\x80\xA6 " + link(i.last_run_id);
  if (!i.ongoing()) o += " \xC2\xB7 cleared by " + link(i.cleared_run_id);
  o += "</div>";
  if (!i.message.empty())
    o += "<div class=\"rfind\"><strong>" + e(list_text(code_names(i.codes))) + "</strong>: " +
         e(i.message) + "</div>";
  o += "</li>\n";
}

void now_list(std::string& o, const ClusterReport& c) {
  o += "<ul class=\"now\">\n";
  for (const auto& n : c.now) {
    const std::string v = to_string(n.verdict);
    o += "<li class=\"now s-" + v + "\" data-state=\"" + v + "\" data-cluster=\"" + e(n.cluster) +
         "\" data-profile=\"" + e(n.profile) + "\" data-run=\"" + e(n.run_id) +
         "\"><span class=\"state\">" + v + "</span> " + e(profile_label(n.profile)) +
         ": latest run " + run_ref(n.run_id, n.link) + " at " + e(format_utc(n.unix)) + " \xE2\x80\x94 " +
         e(describe_now(n));
    if (!n.message.empty())
      o += "<div class=\"why\"><strong>" + e(n.codes.empty() ? "" : results::to_string(n.codes.front())) +
           "</strong>: " + e(n.message) + "</div>";
    if (!n.hint.empty() && n.verdict != results::Outcome::pass)
      o += "<div class=\"why\">hint: " + e(n.hint) + "</div>";
    o += "</li>\n";
  }
  o += "</ul>\n";
}

void latest_list(std::string& o, const ClusterReport& m) {
  if (m.latest.empty()) {
    o += "<p class=\"none\">No transport measured in this window.</p>\n";
    return;
  }
  o += "<ul class=\"latest\">\n";
  for (const auto& s : m.latest) {
    o += "<li class=\"latest s-" + std::string(to_string(s.shown)) + "\" data-state=\"" +
         to_string(s.state) + "\" data-shown=\"" + to_string(s.shown) + "\" data-cluster=\"" +
         e(s.cluster) + "\" data-profile=\"" + e(s.profile) + "\" data-transport=\"" +
         e(s.transport) + "\" data-run=\"" + e(s.run_id) + "\" data-unmeasured-after=\"" +
         std::to_string(s.unmeasured_after) + "\"><span class=\"state\">" + to_string(s.shown) +
         "</span> " + e(describe_latest(s));
    if (s.shown != s.state) o += " \xE2\x80\x94 last measured " + std::string(to_string(s.state));
    o += ", since " + e(format_utc(s.since_unix)) + " <span class=\"note\">(" +
         std::to_string(s.streak_runs) + (s.streak_runs == 1 ? " run" : " runs") +
         "; the key's latest run <code>" + e(s.run_id) + "</code> at " +
         e(format_utc(s.latest_unix)) + ", " + to_string(s.verdict) + ")</span></li>\n";
  }
  o += "</ul>\n";
}

// Hosts named by findings, one row each, a column per code (the most frequent 8; the rest in
// "other codes"): the runs that named the host, and when last.
void hosts_table(std::string& o, const ClusterReport& c) {
  o += "<h3>Hosts in findings (" + std::to_string(c.hosts.size()) +
       ", warnings and errors, runs that named the host)</h3>\n";
  if (c.hosts.empty()) {
    o += "<p class=\"none\">No finding named a host in this window.</p>\n";
    return;
  }
  constexpr std::size_t kColumns = 8;
  std::vector<std::string> cols(c.host_codes.begin(),
                                c.host_codes.begin() + std::min(kColumns, c.host_codes.size()));
  const bool other = c.host_codes.size() > cols.size();
  o += "<table class=\"hosts\">\n<thead><tr><th>host</th><th class=\"num\">runs with findings"
       "</th><th class=\"num\">runs in</th>";
  for (const auto& code : cols) o += "<th>" + e(code) + "</th>";
  if (other) o += "<th>other codes</th>";
  o += "<th>last seen</th></tr></thead>\n<tbody>\n";
  for (const auto& h : c.hosts) {
    o += "<tr class=\"host\" data-host=\"" + e(h.host) + "\" data-runs=\"" +
         std::to_string(h.finding_runs) + "\"><td class=\"code\">" +
         (h.host.empty() ? std::string("<i>(no host named)</i>") : "<b>" + e(h.host) + "</b>") +
         "</td><td class=\"num\">" + std::to_string(h.finding_runs) + "</td><td class=\"num\">" +
         (h.host.empty() ? std::string("\xE2\x80\x93") : std::to_string(h.runs_present)) + "</td>";
    for (const auto& code : cols) {
      auto it = std::find_if(h.codes.begin(), h.codes.end(),
                             [&](const HostCode& x) { return x.code == code; });
      if (it == h.codes.end()) {
        o += "<td class=\"hc\"></td>";
        continue;
      }
      o += "<td class=\"hc sev-" + e(it->severity) + "\" data-code=\"" + e(code) +
           "\" data-runs=\"" + std::to_string(it->runs) + "\">" + std::to_string(it->runs) +
           "<span class=\"last\">" + e(format_utc(it->last_unix)) + "</span></td>";
    }
    if (other) {
      std::string rest;
      for (const auto& x : h.codes)
        if (std::find(cols.begin(), cols.end(), x.code) == cols.end())
          rest += (rest.empty() ? "" : ", ") + x.code + " " + std::to_string(x.runs);
      o += "<td>" + e(rest) + "</td>";
    }
    o += "<td class=\"date\">" + e(format_utc(h.last_unix)) + "</td></tr>\n";
  }
  o += "</tbody>\n</table>\n";
}

void runs_table(std::string& o, const ClusterReport& c) {
  o += "<h3>Runs (" +
       (c.run_rows.size() < c.run_count
            ? "the newest " + std::to_string(c.run_rows.size()) + " of " +
                  std::to_string(c.run_count)
            : std::to_string(c.run_count)) +
       "), newest first, each linked to its verdict</h3>\n";
  o += "<table class=\"runs\">\n<thead><tr><th>started</th><th>run</th><th>verdict</th>"
       "<th>profile</th><th class=\"num\">ranks</th><th class=\"num\">duration</th><th>hosts</th>"
       "<th>findings (errors first)</th></tr></thead>\n<tbody>\n";
  for (const auto& r : c.run_rows) {
    const std::string v = to_string(r.verdict);
    char dur[32];
    std::snprintf(dur, sizeof dur, "%.1f s", r.duration_s);
    o += "<tr class=\"run\" data-run=\"" + e(r.run_id) + "\" data-verdict=\"" + v +
         "\" data-link=\"" + e(r.link) + "\"><td class=\"date\">" + e(format_utc(r.unix, true)) +
         "</td><td class=\"run\">" + run_ref(r.run_id, r.link) + "</td><td class=\"v\">" +
         verdict_badge(r.verdict) + "</td><td>" + e(profile_label(r.profile)) +
         "</td><td class=\"num\">" + std::to_string(r.world_size) + "</td><td class=\"num\">" +
         dur + "</td><td>" + e(list_text(r.hosts)) + "</td><td>" +
         e(list_text(code_names(r.codes))) + "</td></tr>\n";
  }
  o += "</tbody>\n</table>\n";
  bool any_link = std::any_of(c.run_rows.begin(), c.run_rows.end(),
                              [](const RunRow& r) { return !r.link.empty(); });
  if (!any_link)
    o += "<p class=\"note\">No verdict links: give <code>--verdict-url</code> (a template with "
         "<code>{run_id}</code>), or import the verdict files with <code>ncclsmoke history "
         "import</code>, which records where each one was read.</p>\n";
}

void cluster_section(std::string& o, const ClusterReport& c, const ReportModel& m) {
  const std::string name = cluster_label(c.cluster);
  const std::string state = to_string(c.now_verdict());
  o += "<section class=\"cluster\" id=\"cluster-" + e(slug(c.cluster)) + "\" data-cluster=\"" +
       e(name) + "\" data-state=\"" + state + "\">\n<h2>Cluster " + e(name) + "</h2>\n";
  counts(o, c.verdict_counts, "counts");
  o += "<span class=\"note\"> " + std::to_string(c.run_count) + " runs, " +
       e(format_utc(c.first_unix)) + " to " + e(format_utc(c.last_unix)) + "</span></div>\n";

  std::map<std::string, std::string> links;
  for (const auto& r : c.run_rows)
    if (!r.link.empty()) links[r.run_id] = r.link;

  o += "<div class=\"regbox s-" + state + "\" data-state=\"" + state + "\">\n<h3>Now, per profile: " +
       e(now_text(c.now_verdict())) + "</h3>\n";
  now_list(o, c);
  o += "<h3>Bandwidth now, per profile and transport</h3>\n";
  latest_list(o, c);
  o += "<h3>Incidents (" + std::to_string(c.incidents.size()) + ", " +
       std::to_string(c.ongoing_incidents()) + " ongoing: " +
       std::to_string(c.incidents_of(IncidentKind::failure)) + " failure, " +
       std::to_string(c.incidents_of(IncidentKind::bandwidth)) + " bandwidth), newest first</h3>\n";
  if (c.incidents.empty()) {
    o += "<p class=\"none\">No incident in this window: no failed run, no gate number below its "
         "band, no BANDWIDTH_REGRESSION or SILENT_FALLBACK.</p>\n";
  } else {
    o += "<ul class=\"incidents\">\n";
    for (const auto& i : c.incidents) incident_item(o, i, links);
    o += "</ul>\n";
  }
  o += "</div>\n";

  hosts_table(o, c);

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
    o += "; each run is in the run list below</span></figcaption>\n" +
         busbw_chart_svg(s, x0, x1) + "</figure>\n";
  }

  o += "<h3>Verdict timeline</h3>\n<p class=\"note\">" +
       std::string(c.timeline_bucketed
                       ? "One cell per time bucket, coloured by its worst verdict; a dark bar "
                         "marks a bucket with a regressed run."
                       : "One cell per run, oldest left; a dark bar marks a regressed run (the "
                         "run list below has each one).") +
       "</p>\n<div class=\"timeline\">\n" + timeline_svg(c.timeline, c.timeline_bucketed) +
       "</div>\n";

  o += "<h3>Findings (" + std::to_string(c.finding_groups_total) + " distinct, " +
       std::to_string(c.findings_total) + " in all), grouped by code and subject</h3>\n";
  if (c.findings.size() < c.finding_groups_total)
    o += "<p class=\"note\">The " + std::to_string(c.findings.size()) + " most recently seen of " +
         std::to_string(c.finding_groups_total) +
         " distinct findings; every incident is listed above.</p>\n";
  if (c.findings_total == 0) {
    o += "<p class=\"none\">No findings in this window.</p>\n";
    runs_table(o, c);
    o += "</section>\n";
    return;
  }
  o += "<table class=\"findings\">\n<thead><tr><th>last seen</th><th>code</th><th>severity</th>"
       "<th class=\"num\">runs</th><th>first seen</th><th>ranks / hosts</th><th>message (latest)"
       "</th><th>hint</th></tr></thead>\n<tbody>\n";
  for (const auto& f : c.findings) {
    std::string who = ranks_text(f.ranks);
    if (f.hosts_from_runs)
      who += (who.empty() ? "" : "; ") + std::string("no host named") +
             (f.hosts.empty() ? "" : " (runs on " + list_text(f.hosts) + ")");
    else if (!f.hosts.empty())
      who += (who.empty() ? "" : "; ") + list_text(f.hosts);
    o += "<tr class=\"finding sev-" + e(f.severity) + "\" data-code=\"" + e(f.code) +
         "\" data-runs=\"" + std::to_string(f.runs) + "\" data-run=\"" + e(f.last_run_id) +
         "\"><td class=\"date\">" + e(format_utc(f.last_unix)) + "</td><td class=\"code\">" +
         e(f.code) + "</td><td class=\"sev\">" + e(f.severity) + "</td><td class=\"num\">" +
         std::to_string(f.runs) + "</td><td class=\"date\">" + e(format_utc(f.first_unix)) +
         "</td><td>" + e(who) + "</td><td>" + e(f.message) + "</td><td class=\"hint\">" +
         e(f.hint) + "</td></tr>\n";
  }
  o += "</tbody>\n</table>\n";
  runs_table(o, c);
  o += "</section>\n";
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
  o += "<span class=\"note\">" + std::to_string(m.run_count) +
       " runs in " + std::to_string(m.clusters.size()) +
       (m.clusters.size() == 1 ? " cluster, " : " clusters, ") + e(format_utc(m.first_unix)) +
       " to " + e(format_utc(m.last_unix)) + "</span></div>\n<ul id=\"clusters\">\n";
  for (const auto& c : m.clusters) {
    const results::Outcome now = c.now_verdict();
    const std::string st = to_string(now);
    o += "<li class=\"s-" + st + "\" data-cluster=\"" + e(cluster_label(c.cluster)) +
         "\" data-state=\"" + st + "\"><b>" + e(cluster_label(c.cluster)) + "</b>: " +
         std::to_string(c.run_count) + " runs, " + std::to_string(c.incidents.size()) +
         (c.incidents.size() == 1 ? " incident" : " incidents") + " (" +
         std::to_string(c.ongoing_incidents()) + " ongoing), " + now_text(now) + "</li>\n";
  }
  o += "</ul>\n<p class=\"note\">Gate numbers are busbw at the gate size, the lower of "
       "out-of-place and in-place (the number the judge, the summary and the metrics use).</p>\n";
  for (const auto& c : m.clusters) cluster_section(o, c, m);
  o += "<footer>ncclsmoke report \xC2\xB7 self-contained page: no scripts, no external "
       "resources</footer>\n</main>\n</body>\n</html>\n";
  return o;
}

}  // namespace ncclsmoke::report
