#pragma once
// The regression report as ONE self-contained HTML page: inline CSS, charts as inline SVG
// (svg_chart.h), no script, no external font, image or stylesheet, so it can be mailed, attached
// to a ticket or opened offline. Every string from the history is escaped (escape.h).
//
// Layout, most urgent first: fleet counts by verdict and one line per cluster (#clusters); then
// one section per cluster: its counts, the regressions box (where each (profile, transport)
// stands now, then the regression incidents, newest first), busbw by message size of its latest
// run, busbw at the gate size over time, the verdict timeline, the findings grouped.
//
// Stable hooks for tests and readers (ids/classes):
//   #summary (fleet counts, .count[data-verdict]), #clusters > li[data-cluster],
//   section.cluster[data-cluster] (id "cluster-NAME"), inside it: ul.latest >
//   li.latest[data-state][data-transport][data-profile][data-unmeasured-after], ul.incidents >
//   li.incident[data-transport][data-profile][data-gate-bytes][data-runs][data-ongoing]
//   (newest first; all of them), svg.size-chart[data-transport][data-gate-place] with
//   circle.sz.out / circle.sz.in and g.gate-mark, svg.busbw-chart[data-transport][data-profile]
//   [data-gate-bytes] with circle.pt[data-verdict], div.timeline svg rect.cell[data-verdict],
//   table.findings > tbody > tr.finding[data-code][data-runs] (last seen, code, severity, runs,
//   first seen, ranks/hosts, message); #empty when the window holds no run.
#include <string>

#include "results/report/model.h"

namespace ncclsmoke::report {

std::string render_html(const ReportModel& m);

}  // namespace ncclsmoke::report
