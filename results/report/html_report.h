#pragma once
// The regression report as ONE self-contained HTML page: inline CSS, charts as inline SVG
// (svg_chart.h), no script, no external font, image or stylesheet, so it can be mailed, attached
// to a ticket or opened offline. Every string from the history is escaped (escape.h).
//
// Layout, most urgent first, full width (dates never wrap; every run's details are written out,
// none only in a tooltip, so a screenshot or an e-mail keeps them): fleet counts by verdict and
// one chip per cluster coloured by where it stands now (#clusters); then one section per cluster:
// its counts; the box of where it stands (each profile's newest run and why - a failing latest
// run is never green -, the bandwidth per (profile, transport), then every incident, failure or
// bandwidth, newest first, with the run that cleared it); the hosts named by findings, by code;
// busbw by message size of its latest run; busbw at the gate size over time; the verdict
// timeline; the findings grouped by code and subject, with their hints; the runs, each linked to
// its verdict (ReportOptions::verdict_url, else the imported file: the only <a href> in the page,
// links a reader follows; nothing is fetched).
//
// Stable hooks for tests and readers (ids/classes):
//   #summary (fleet counts, .count[data-verdict]), #clusters > li[data-cluster][data-state]
//   (data-state: the cluster's now_verdict), section.cluster[data-cluster][data-state] (id
//   "cluster-NAME"), inside it: div.regbox[data-state], ul.now > li.now[data-state][data-profile]
//   [data-run], ul.latest > li.latest[data-state][data-shown][data-transport][data-profile]
//   [data-run][data-unmeasured-after], ul.incidents > li.incident[data-kind=failure|bandwidth]
//   [data-transport][data-profile][data-gate-bytes][data-runs][data-first-run][data-last-run]
//   [data-ongoing][data-cleared-by][data-codes][data-hosts] (newest first; all of them),
//   table.hosts > tbody > tr.host[data-host][data-runs] > td.hc[data-code][data-runs],
//   svg.size-chart[data-transport][data-gate-place] with circle.sz.out / circle.sz.in and
//   g.gate-mark, svg.busbw-chart[data-transport][data-profile][data-gate-bytes] with
//   circle.pt[data-verdict], div.timeline svg rect.cell[data-verdict],
//   table.findings > tbody > tr.finding[data-code][data-runs] (last seen, code, severity, runs,
//   first seen, ranks/hosts, message, td.hint), table.runs > tbody > tr.run[data-run]
//   [data-verdict][data-link] with a.verdict-link[href]; td.date for every date cell; #empty when
//   the window holds no run.
#include <string>

#include "results/report/model.h"

namespace ncclsmoke::report {

std::string render_html(const ReportModel& m);

}  // namespace ncclsmoke::report
