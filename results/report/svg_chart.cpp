#include "results/report/svg_chart.h"

#include <algorithm>
#include <cmath>

#include "results/report/escape.h"
#include "results/report/scale.h"

namespace ncclsmoke::report {
namespace {

constexpr const char* kFailZone = "#fbe3e3";
constexpr const char* kDegradedZone = "#fff1d6";
constexpr const char* kBaselineColor = "#37474f";
constexpr const char* kGridColor = "#e0e0e0";
constexpr const char* kAxisColor = "#616161";
constexpr const char* kLineColor = "#90a4ae";

std::string attr(const std::string& s) { return html_escape(s); }

bool same_band(const ChartPoint& a, const ChartPoint& b) {
  auto eq = [](double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; };
  return eq(a.baseline_gbps, b.baseline_gbps) && eq(a.degraded_ratio, b.degraded_ratio) &&
         eq(a.fail_ratio, b.fail_ratio);
}

std::string point_title(const ChartPoint& p) {
  std::string t = format_utc(p.unix) + " \xC2\xB7 run " + p.run_id + " \xC2\xB7 " + p.verdict;
  if (std::isfinite(p.busbw_gbps)) {
    t += " \xC2\xB7 " + format_gbps(p.busbw_gbps) + " GB/s";
    if (std::isfinite(p.baseline_gbps) && p.baseline_gbps > 0)
      t += " (" + format_percent(p.busbw_gbps / p.baseline_gbps) + " of baseline " +
           format_gbps(p.baseline_gbps) + ")";
  } else {
    t += " \xC2\xB7 no busbw at the gate size";
  }
  if (p.world_size > 0) t += " \xC2\xB7 " + std::to_string(p.world_size) + " ranks";
  if (!p.identity.empty()) t += " \xC2\xB7 " + p.identity;
  if (p.synthetic) t += " \xC2\xB7 synthetic (not judged)";
  if (p.regression) t += " \xC2\xB7 REGRESSION";
  return html_escape(t);
}

}  // namespace

const char* verdict_color(const std::string& verdict) {
  if (verdict == "pass") return "#2e7d32";
  if (verdict == "degraded") return "#ef8f00";
  if (verdict == "fail") return "#c62828";
  return "#757575";
}

std::string busbw_chart_svg(const Series& s, double x0, double x1, const ChartGeometry& g) {
  const double px0 = g.left, px1 = g.width - g.right, py0 = g.height - g.bottom, py1 = g.top;
  if (!(x1 > x0)) {
    x0 -= 3600;
    x1 += 3600;
  }
  double ymax = 0;
  for (const auto& p : s.points) {
    if (std::isfinite(p.busbw_gbps)) ymax = std::max(ymax, p.busbw_gbps);
    if (std::isfinite(p.baseline_gbps)) ymax = std::max(ymax, p.baseline_gbps);
  }
  auto yticks = nice_ticks(0, ymax > 0 ? ymax * 1.08 : 1, 5);
  LinearScale x{x0, x1, px0, px1};
  LinearScale y{0, yticks.back(), py0, py1};

  std::string o;
  o.reserve(4096 + s.points.size() * 260);
  const std::string label =
      s.transport + " on " + profile_label(s.profile) + " at " + format_bytes(s.gate_bytes);
  o += "<svg class=\"busbw-chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
       svg_num(g.width) + " " + svg_num(g.height) + "\" width=\"" + svg_num(g.width) +
       "\" height=\"" + svg_num(g.height) + "\" role=\"img\" aria-label=\"busbw of " + attr(label) +
       "\" data-profile=\"" + attr(s.profile) + "\" data-transport=\"" + attr(s.transport) +
       "\" data-gate-bytes=\"" + std::to_string(s.gate_bytes) + "\" data-points=\"" +
       std::to_string(s.points.size()) + "\" data-total-points=\"" +
       std::to_string(s.total_points) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o += "<title>busbw of " + attr(label) + "</title>\n";

  // Baseline band, one segment per stretch of runs that recorded the same band.
  o += "<g class=\"band\">\n";
  for (std::size_t i = 0; i < s.points.size();) {
    std::size_t j = i;
    while (j + 1 < s.points.size() && same_band(s.points[j + 1], s.points[i])) ++j;
    const auto& p = s.points[i];
    double sx0 = i == 0 ? px0 : (x(s.points[i - 1].unix) + x(p.unix)) / 2;
    double sx1 =
        j + 1 >= s.points.size() ? px1 : (x(s.points[j].unix) + x(s.points[j + 1].unix)) / 2;
    if (std::isfinite(p.baseline_gbps) && p.baseline_gbps > 0 && sx1 > sx0) {
      double b = p.baseline_gbps;
      double fail = std::isfinite(p.fail_ratio) ? p.fail_ratio * b : 0;
      double deg = std::isfinite(p.degraded_ratio) ? p.degraded_ratio * b : fail;
      std::string w = svg_num(sx1 - sx0);
      if (fail > 0)
        o += "<rect class=\"fail-zone\" x=\"" + svg_num(sx0) + "\" y=\"" + svg_num(y(fail)) +
             "\" width=\"" + w + "\" height=\"" + svg_num(py0 - y(fail)) + "\" fill=\"" +
             kFailZone + "\"><title>fail below " + format_gbps(fail) + " GB/s (" +
             format_percent(p.fail_ratio) + " of baseline)</title></rect>\n";
      if (deg > fail)
        o += "<rect class=\"degraded-zone\" x=\"" + svg_num(sx0) + "\" y=\"" + svg_num(y(deg)) +
             "\" width=\"" + w + "\" height=\"" + svg_num(y(fail) - y(deg)) + "\" fill=\"" +
             kDegradedZone + "\"><title>degraded below " + format_gbps(deg) + " GB/s (" +
             format_percent(p.degraded_ratio) + " of baseline)</title></rect>\n";
      o += "<line class=\"baseline\" x1=\"" + svg_num(sx0) + "\" x2=\"" + svg_num(sx1) +
           "\" y1=\"" + svg_num(y(b)) + "\" y2=\"" + svg_num(y(b)) + "\" stroke=\"" +
           kBaselineColor + "\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"><title>baseline " +
           format_gbps(b) + " GB/s</title></line>\n";
      if (j + 1 >= s.points.size()) {  // label the band where the chart ends
        o += "<text class=\"band-label\" x=\"" + svg_num(px1 + 4) + "\" y=\"" + svg_num(y(b) + 4) +
             "\" fill=\"" + kBaselineColor + "\">baseline " + format_gbps(b) + "</text>\n";
        if (deg > fail && y(deg) - y(b) > 10)
          o += "<text class=\"band-label\" x=\"" + svg_num(px1 + 4) + "\" y=\"" +
               svg_num(y(deg) + 4) + "\" fill=\"#b26a00\">degraded " + format_gbps(deg) +
               "</text>\n";
        if (fail > 0 && y(fail) - y(deg) > 10)
          o += "<text class=\"band-label\" x=\"" + svg_num(px1 + 4) + "\" y=\"" +
               svg_num(y(fail) + 4) + "\" fill=\"#a31515\">fail " + format_gbps(fail) + "</text>\n";
      }
    }
    i = j + 1;
  }
  o += "</g>\n";

  // Grid, axes, tick labels with units and dates.
  o += "<g class=\"axes\" fill=\"" + std::string(kAxisColor) + "\">\n";
  for (double t : yticks) {
    o += "<line x1=\"" + svg_num(px0) + "\" x2=\"" + svg_num(px1) + "\" y1=\"" + svg_num(y(t)) +
         "\" y2=\"" + svg_num(y(t)) + "\" stroke=\"" + kGridColor + "\"/>";
    o += "<text class=\"y-tick\" x=\"" + svg_num(px0 - 6) + "\" y=\"" + svg_num(y(t) + 4) +
         "\" text-anchor=\"end\">" + svg_num(t) + "</text>\n";
  }
  for (const auto& t : time_ticks(x0, x1, 7)) {
    double tx = x(t.unix);
    o += "<line x1=\"" + svg_num(tx) + "\" x2=\"" + svg_num(tx) + "\" y1=\"" + svg_num(py1) +
         "\" y2=\"" + svg_num(py0 + 4) + "\" stroke=\"" + kGridColor + "\"/>";
    o += "<text class=\"x-tick\" x=\"" + svg_num(tx) + "\" y=\"" + svg_num(py0 + 17) +
         "\" text-anchor=\"middle\">" + html_escape(t.label) + "</text>\n";
  }
  o += "<line x1=\"" + svg_num(px0) + "\" x2=\"" + svg_num(px1) + "\" y1=\"" + svg_num(py0) +
       "\" y2=\"" + svg_num(py0) + "\" stroke=\"" + kAxisColor + "\"/>";
  o += "<line x1=\"" + svg_num(px0) + "\" x2=\"" + svg_num(px0) + "\" y1=\"" + svg_num(py1) +
       "\" y2=\"" + svg_num(py0) + "\" stroke=\"" + kAxisColor + "\"/>\n";
  o += "<text class=\"axis-title\" x=\"14\" y=\"" + svg_num((py0 + py1) / 2) +
       "\" text-anchor=\"middle\" transform=\"rotate(-90 14 " + svg_num((py0 + py1) / 2) +
       ")\">busbw (GB/s)</text>\n";
  o += "<text class=\"axis-title\" x=\"" + svg_num((px0 + px1) / 2) + "\" y=\"" +
       svg_num(g.height - 6) + "\" text-anchor=\"middle\">time (UTC, month-day)</text>\n";
  o += "</g>\n";

  // The busbw line through the measured, non-synthetic points.
  std::string line;
  for (const auto& p : s.points) {
    if (!std::isfinite(p.busbw_gbps) || p.synthetic) continue;
    line += svg_num(x(p.unix)) + "," + svg_num(y(p.busbw_gbps)) + " ";
  }
  if (!line.empty())
    o += "<polyline class=\"busbw-line\" fill=\"none\" stroke=\"" + std::string(kLineColor) +
         "\" stroke-width=\"1.2\" points=\"" + line + "\"/>\n";

  // Points, coloured by verdict; regressions ringed; missing numbers as triangles on the axis.
  double r = s.points.size() > 200 ? 2.6 : 3.8;
  // A few regression points get a dark ring; when there are many, rings would merge into a
  // black band, so they are drawn like the others (still kept, still class "regression").
  std::size_t regression_points = 0;
  for (const auto& p : s.points) regression_points += p.regression ? 1 : 0;
  const bool ring = regression_points <= 60;
  o += "<g class=\"points\">\n";
  for (const auto& p : s.points) {
    const char* color = verdict_color(p.verdict);
    std::string cls = "pt v-" + attr(p.verdict) + (p.regression ? " regression" : "") +
                      (p.synthetic ? " synthetic" : "");
    std::string common =
        " data-verdict=\"" + attr(p.verdict) + "\" data-run=\"" + attr(p.run_id) + "\"";
    if (std::isfinite(p.busbw_gbps)) {
      o += "<circle class=\"" + cls + "\"" + common + " cx=\"" + svg_num(x(p.unix)) + "\" cy=\"" +
           svg_num(y(p.busbw_gbps)) + "\" r=\"" + svg_num(p.regression && ring ? r + 1.2 : r) +
           "\" fill=\"" + (p.synthetic ? std::string("#ffffff") : std::string(color)) +
           "\" stroke=\"" + (p.regression && ring ? std::string("#212121") : std::string(color)) +
           "\" stroke-width=\"" + (p.regression && ring ? "1.6" : "1") + "\"><title>" + point_title(p) +
           "</title></circle>\n";
    } else {
      double cx = x(p.unix);
      o += "<path class=\"" + cls + " missing\"" + common + " d=\"M" + svg_num(cx) + "," +
           svg_num(py0 - 9) + " l-5,9 h10 z\" fill=\"" + color + "\"><title>" + point_title(p) +
           "</title></path>\n";
    }
  }
  o += "</g>\n</svg>\n";
  return o;
}

std::string timeline_svg(const std::vector<TimelineCell>& cells, bool bucketed, double width) {
  const double left = 8, right = 8, top = 6, cell_h = 26, label_h = 18;
  const double height = top + cell_h + label_h + 4;
  const double plot_w = width - left - right;
  std::string o;
  o.reserve(512 + cells.size() * 220);
  o += "<svg class=\"timeline-strip\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
       svg_num(width) + " " + svg_num(height) + "\" width=\"" + svg_num(width) + "\" height=\"" +
       svg_num(height) + "\" data-cells=\"" + std::to_string(cells.size()) + "\" data-bucketed=\"" +
       (bucketed ? "true" : "false") + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  if (cells.empty()) return o + "</svg>\n";
  double w = plot_w / static_cast<double>(cells.size());
  double gap = w > 4 ? 1 : 0;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const auto& c = cells[i];
    std::string title;
    if (!bucketed && !c.run_id.empty()) {
      title = format_utc(c.t0) + " \xC2\xB7 run " + c.run_id + " \xC2\xB7 " + c.verdict;
    } else {
      int n = 0;
      for (const auto& [v, k] : c.counts) n += k;
      title = format_utc(c.t0) + " \xE2\x80\x93 " + format_utc(c.t1) + " \xC2\xB7 " +
              std::to_string(n) + (n == 1 ? " run" : " runs") + ", worst " + c.verdict + ":";
      for (const auto& [v, k] : c.counts) title += " " + std::to_string(k) + " " + v;
    }
    if (c.regression) title += " \xC2\xB7 REGRESSION";
    double cx = left + i * w;
    o += "<rect class=\"cell v-" + attr(c.verdict) + (c.regression ? " regression" : "") +
         "\" data-verdict=\"" + attr(c.verdict) + "\"" +
         (c.run_id.empty() ? std::string() : " data-run=\"" + attr(c.run_id) + "\"") + " x=\"" +
         svg_num(cx) + "\" y=\"" + svg_num(top) + "\" width=\"" + svg_num(std::max(0.5, w - gap)) +
         "\" height=\"" + svg_num(cell_h) + "\" fill=\"" + verdict_color(c.verdict) + "\"><title>" +
         html_escape(title) + "</title></rect>\n";
    if (c.regression)
      o += "<rect class=\"regression-mark\" x=\"" + svg_num(cx) + "\" y=\"" + svg_num(top - 4) +
           "\" width=\"" + svg_num(std::max(0.5, w - gap)) + "\" height=\"3\" fill=\"#212121\"/>\n";
  }
  // Dates under the first, middle and last cells.
  std::vector<std::size_t> at{0};
  if (cells.size() > 2) at.push_back(cells.size() / 2);
  if (cells.size() > 1) at.push_back(cells.size() - 1);
  for (std::size_t k = 0; k < at.size(); ++k) {
    std::size_t i = at[k];
    const char* anchor = k == 0 ? "start" : (i + 1 == cells.size() ? "end" : "middle");
    double tx = k == 0 ? left : (i + 1 == cells.size() ? left + plot_w : left + (i + 0.5) * w);
    o += "<text x=\"" + svg_num(tx) + "\" y=\"" + svg_num(top + cell_h + 14) + "\" text-anchor=\"" +
         anchor + "\" fill=\"#616161\">" +
         html_escape(format_utc(i + 1 == cells.size() ? cells[i].t1 : cells[i].t0)) + "</text>\n";
  }
  return o + "</svg>\n";
}

}  // namespace ncclsmoke::report
