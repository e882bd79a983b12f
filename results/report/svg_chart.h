#pragma once
// The report's charts as inline SVG strings (the page loads nothing, so charts are drawn here):
// - busbw over time of one series, with the baseline band: the baseline as a dashed line, the
//   degraded zone (below degraded_ratio x baseline) shaded amber and the fail zone (below
//   fail_ratio x baseline) shaded red, following the band as it changes over time; one point per
//   run coloured by the run's verdict (data-verdict, and a <title> tooltip naming run, verdict,
//   busbw and its ratio to the baseline); runs without a number as triangles on the time axis.
// - the verdict timeline: one cell per run (or per time bucket), coloured by the (worst) verdict,
//   with the verdict and counts as the cell's <title>.
// Colours are presentation attributes, so the SVG renders the same without the page's CSS.
// Every string from the history is escaped (escape.h).
#include <string>
#include <vector>

#include "results/report/model.h"

namespace ncclsmoke::report {

// "#2e7d32" pass, "#ef8f00" degraded, "#c62828" fail, "#757575" inconclusive (and unknown).
const char* verdict_color(results::Outcome verdict);

struct ChartGeometry {
  double width = 960, height = 260;
  double left = 64, right = 96, top = 16, bottom = 44;  // plot margins (right: band labels)
};

// The x axis spans [x0, x1] (seconds since the epoch; shared by all charts of a page so they
// line up). Root element: <svg class="busbw-chart" data-profile data-transport data-gate-bytes
// data-points data-total-points ...>.
std::string busbw_chart_svg(const Series& s, double x0, double x1, const ChartGeometry& g = {});

// busbw versus message size of one run (nccl-tests' table as a chart): x is log2 of the size
// (ticks at powers of two), y busbw; out-of-place as a solid line with dots, in-place dashed with
// rings; the baseline band drawn as a column at the gate size (dashed baseline, degraded/fail
// zones shaded) and labelled in the right margin; the headline gate point (the lower of out/in,
// as gates_of) marked with an arrow and "gate", its label inside the plot, so it never meets the
// band's labels. Root element: <svg class="size-chart" data-cluster data-transport data-run
// data-points data-gate-bytes data-gate-place="in|out">; points <circle class="sz out|in"
// data-bytes>, the mark <g class="gate-mark" data-in-place>.
std::string size_chart_svg(const SizeCurve& c, const ChartGeometry& g = {});

// Label placement in a chart's right margin: the y positions (text baselines) `ys`, in any order,
// moved as little as possible so that any two are at least `gap` apart and all lie in [lo, hi]
// (when they cannot all fit, they are spread evenly from lo). Returns the new positions in the
// order given. Labels a reader must tell apart ("baseline 0.50" and "degraded 0.30") never overlap.
std::vector<double> spread_labels(const std::vector<double>& ys, double gap, double lo, double hi);

// Root element: <svg class="timeline-strip" data-cells ...>, cells are <rect class="cell"
// data-verdict ...><title>...</title></rect>.
std::string timeline_svg(const std::vector<TimelineCell>& cells, bool bucketed, double width = 960);

}  // namespace ncclsmoke::report
