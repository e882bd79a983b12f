#pragma once
// The regression report as ONE self-contained HTML page: inline CSS, charts as inline SVG
// (svg_chart.h), no script, no external font, image or stylesheet, so it can be mailed, attached
// to a ticket or opened offline. Every string from the history is escaped (escape.h).
//
// Layout, most urgent first: counts by verdict; the regressions box (where each (profile,
// transport) stands now, then every regression run, newest first); the busbw charts; the
// verdict timeline; the findings table.
//
// Stable hooks for tests and readers (ids/classes):
//   #summary (counts by verdict, .count[data-verdict]), #regressions > li.regression[data-run]
//   (newest first; all of them), #latest > li.latest[data-state][data-transport][data-profile],
//   svg.busbw-chart[data-transport][data-profile][data-gate-bytes] with circle.pt[data-verdict],
//   #timeline svg rect.cell[data-verdict], table#findings > tbody > tr (time, run id, code,
//   severity, ranks/hosts, message), #empty when the window holds no run.
#include <string>

#include "results/report/model.h"

namespace ncclsmoke::report {

std::string render_html(const ReportModel& m);

}  // namespace ncclsmoke::report
