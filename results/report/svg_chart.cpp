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
  std::string t = format_utc(p.unix) + " \xC2\xB7 run " + p.run_id + " \xC2\xB7 " + to_string(p.verdict);
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

// A text label's line box is about 13 px tall at font-size 11: labels closer than this collide.
constexpr double kLabelGap = 14;

struct MarginLabel {
  double y;
  std::string cls, fill, text;
};

// The labels at x, spread apart (spread_labels) within [lo, hi].
std::string margin_labels(std::vector<MarginLabel> labels, double x, double lo, double hi) {
  std::vector<double> ys;
  for (const auto& l : labels) ys.push_back(l.y);
  ys = spread_labels(ys, kLabelGap, lo, hi);
  std::string o;
  for (std::size_t i = 0; i < labels.size(); ++i)
    o += "<text class=\"" + labels[i].cls + "\" x=\"" + svg_num(x) + "\" y=\"" + svg_num(ys[i]) +
         "\" fill=\"" + labels[i].fill + "\">" + html_escape(labels[i].text) + "</text>\n";
  return o;
}

// The baseline's, degraded band's and fail band's labels (at chart heights yb, ydeg, yfail):
// degraded only when its band is above fail's, fail only when there is one.
std::vector<MarginLabel> band_labels(double yb, double ydeg, double yfail, double b, double deg,
                                     double fail) {
  std::vector<MarginLabel> labels{
      {yb + 4, "band-label", kBaselineColor, "baseline " + format_gbps(b)}};
  if (deg > fail)
    labels.push_back({ydeg + 4, "band-label", "#b26a00", "degraded " + format_gbps(deg)});
  if (fail > 0)
    labels.push_back({yfail + 4, "band-label", "#a31515", "fail " + format_gbps(fail)});
  return labels;
}

}  // namespace

std::vector<double> spread_labels(const std::vector<double>& ys, double gap, double lo, double hi) {
  const std::size_t n = ys.size();
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ys[a] < ys[b]; });
  std::vector<double> y(n);
  for (std::size_t k = 0; k < n; ++k) y[k] = std::clamp(ys[order[k]], lo, std::max(lo, hi));
  if (n > 1 && (n - 1) * gap > hi - lo) {  // cannot fit: evenly from lo
    for (std::size_t k = 0; k < n; ++k) y[k] = lo + static_cast<double>(k) * gap;
  } else {
    for (std::size_t k = 1; k < n; ++k) y[k] = std::max(y[k], y[k - 1] + gap);  // push down
    if (n && y[n - 1] > hi) {                                                   // then up
      y[n - 1] = hi;
      for (std::size_t k = n - 1; k-- > 0;) y[k] = std::min(y[k], y[k + 1] - gap);
    }
  }
  std::vector<double> out(n);
  for (std::size_t k = 0; k < n; ++k) out[order[k]] = y[k];
  return out;
}

const char* verdict_color(results::Outcome verdict) {
  switch (verdict) {
    case results::Outcome::pass: return "#2e7d32";
    case results::Outcome::degraded: return "#ef8f00";
    case results::Outcome::fail: return "#c62828";
    case results::Outcome::inconclusive: return "#757575";
  }
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
      if (j + 1 >= s.points.size()) {  // label the band where the chart ends, labels apart
        o += margin_labels(band_labels(y(b), y(deg), y(fail), b, deg, fail), px1 + 4, py1 + 4,
                           py0 - 2);
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
    std::string cls = "pt v-" + to_string(p.verdict) + (p.regression ? " regression" : "") +
                      (p.synthetic ? " synthetic" : "");
    std::string common =
        " data-verdict=\"" + to_string(p.verdict) + "\" data-run=\"" + attr(p.run_id) + "\"";
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

std::string size_chart_svg(const SizeCurve& c, const ChartGeometry& g) {
  const double px0 = g.left, px1 = g.width - g.right, py0 = g.height - g.bottom, py1 = g.top;
  double lo = 0, hi = 1, ymax = 0;
  bool any = false;
  for (const auto& p : c.points) {
    if (p.bytes <= 0) continue;
    double l2 = std::log2(static_cast<double>(p.bytes));
    lo = any ? std::min(lo, l2) : l2;
    hi = any ? std::max(hi, l2) : l2;
    any = true;
    for (double v : {p.out_gbps, p.in_gbps})
      if (std::isfinite(v)) ymax = std::max(ymax, v);
  }
  if (std::isfinite(c.baseline_gbps)) ymax = std::max(ymax, c.baseline_gbps);
  if (!(hi > lo)) {
    lo -= 1;
    hi += 1;
  }
  lo = std::floor(lo) - 0.5;
  hi = std::ceil(hi) + 0.5;
  auto yticks = nice_ticks(0, ymax > 0 ? ymax * 1.1 : 1, 5);
  LinearScale x{lo, hi, px0, px1};
  LinearScale y{0, yticks.back(), py0, py1};
  auto xb = [&](std::int64_t b) { return x(std::log2(static_cast<double>(std::max<std::int64_t>(1, b)))); };

  const std::string label = c.transport + " busbw by message size, run " + c.run_id;
  std::string o;
  o += "<svg class=\"size-chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
       svg_num(g.width) + " " + svg_num(g.height) + "\" width=\"" + svg_num(g.width) +
       "\" height=\"" + svg_num(g.height) + "\" role=\"img\" aria-label=\"" + attr(label) +
       "\" data-cluster=\"" + attr(c.cluster) + "\" data-transport=\"" + attr(c.transport) +
       "\" data-run=\"" + attr(c.run_id) + "\" data-points=\"" + std::to_string(c.points.size()) +
       "\" data-gate-bytes=\"" + std::to_string(c.gate_bytes) + "\" data-gate-place=\"" +
       (c.gate_in_place ? "in" : "out") + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o += "<title>" + attr(label) + "</title>\n";

  // The band: a column one size step wide at the gate size.
  if (c.gate_bytes > 0 && std::isfinite(c.baseline_gbps) && c.baseline_gbps > 0) {
    double gx = xb(c.gate_bytes), half = (x(1) - x(0)) / 2;
    double sx0 = std::max(px0, gx - half), sx1 = std::min(px1, gx + half);
    double b = c.baseline_gbps;
    double fail = std::isfinite(c.fail_ratio) ? c.fail_ratio * b : 0;
    double deg = std::isfinite(c.degraded_ratio) ? c.degraded_ratio * b : fail;
    std::string w = svg_num(sx1 - sx0);
    o += "<g class=\"band\">\n";
    if (fail > 0)
      o += "<rect class=\"fail-zone\" x=\"" + svg_num(sx0) + "\" y=\"" + svg_num(y(fail)) +
           "\" width=\"" + w + "\" height=\"" + svg_num(py0 - y(fail)) + "\" fill=\"" + kFailZone +
           "\"><title>fail below " + format_gbps(fail) + " GB/s</title></rect>\n";
    if (deg > fail)
      o += "<rect class=\"degraded-zone\" x=\"" + svg_num(sx0) + "\" y=\"" + svg_num(y(deg)) +
           "\" width=\"" + w + "\" height=\"" + svg_num(y(fail) - y(deg)) + "\" fill=\"" +
           kDegradedZone + "\"><title>degraded below " + format_gbps(deg) +
           " GB/s</title></rect>\n";
    o += "<line class=\"baseline\" x1=\"" + svg_num(sx0 - 10) + "\" x2=\"" + svg_num(std::min(px1, sx1 + 10)) +
         "\" y1=\"" + svg_num(y(b)) + "\" y2=\"" + svg_num(y(b)) + "\" stroke=\"" + kBaselineColor +
         "\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"><title>baseline " + format_gbps(b) +
         " GB/s at " + format_bytes(c.gate_bytes) + "</title></line>\n";
    if (sx1 + 10 < px1)  // a leader from the band to its label in the margin
      o += "<line class=\"leader\" x1=\"" + svg_num(sx1 + 10) + "\" x2=\"" + svg_num(px1) +
           "\" y1=\"" + svg_num(y(b)) + "\" y2=\"" + svg_num(y(b)) + "\" stroke=\"" +
           kBaselineColor + "\" stroke-width=\"0.8\" stroke-dasharray=\"1 3\"/>\n";
    // Labels in the right margin, apart from each other; the gate label stays inside the plot.
    o += margin_labels(band_labels(y(b), y(deg), y(fail), b, deg, fail), px1 + 4, py1 + 4,
                       py0 - 2);
    o += "</g>\n";
  }

  // Grid and axes: a tick per power of two (every second one when crowded).
  o += "<g class=\"axes\" fill=\"" + std::string(kAxisColor) + "\">\n";
  for (double t : yticks) {
    o += "<line x1=\"" + svg_num(px0) + "\" x2=\"" + svg_num(px1) + "\" y1=\"" + svg_num(y(t)) +
         "\" y2=\"" + svg_num(y(t)) + "\" stroke=\"" + kGridColor + "\"/>";
    o += "<text class=\"y-tick\" x=\"" + svg_num(px0 - 6) + "\" y=\"" + svg_num(y(t) + 4) +
         "\" text-anchor=\"end\">" + svg_num(t) + "</text>\n";
  }
  int k0 = static_cast<int>(std::ceil(lo)), k1 = static_cast<int>(std::floor(hi));
  int step = (k1 - k0) > 14 ? 2 : 1;
  for (int k = k0; k <= k1; k += step) {
    double tx = x(k);
    o += "<line x1=\"" + svg_num(tx) + "\" x2=\"" + svg_num(tx) + "\" y1=\"" + svg_num(py1) +
         "\" y2=\"" + svg_num(py0 + 4) + "\" stroke=\"" + kGridColor + "\"/>";
    o += "<text class=\"x-tick\" x=\"" + svg_num(tx) + "\" y=\"" + svg_num(py0 + 17) +
         "\" text-anchor=\"middle\">" + format_bytes(std::int64_t{1} << std::clamp(k, 0, 62)) +
         "</text>\n";
  }
  o += "<line x1=\"" + svg_num(px0) + "\" x2=\"" + svg_num(px1) + "\" y1=\"" + svg_num(py0) +
       "\" y2=\"" + svg_num(py0) + "\" stroke=\"" + kAxisColor + "\"/>";
  o += "<line x1=\"" + svg_num(px0) + "\" x2=\"" + svg_num(px0) + "\" y1=\"" + svg_num(py1) +
       "\" y2=\"" + svg_num(py0) + "\" stroke=\"" + kAxisColor + "\"/>\n";
  o += "<text class=\"axis-title\" x=\"14\" y=\"" + svg_num((py0 + py1) / 2) +
       "\" text-anchor=\"middle\" transform=\"rotate(-90 14 " + svg_num((py0 + py1) / 2) +
       ")\">busbw (GB/s)</text>\n";
  o += "<text class=\"axis-title\" x=\"" + svg_num((px0 + px1) / 2) + "\" y=\"" +
       svg_num(g.height - 6) + "\" text-anchor=\"middle\">message size (log2 scale)</text>\n";
  o += "</g>\n";

  // Out-of-place solid, in-place dashed.
  for (int in_place = 0; in_place < 2; ++in_place) {
    std::string line, dots;
    const char* color = in_place ? "#6a1b9a" : "#1565c0";
    for (const auto& p : c.points) {
      double v = in_place ? p.in_gbps : p.out_gbps;
      if (!std::isfinite(v) || p.bytes <= 0) continue;
      line += svg_num(xb(p.bytes)) + "," + svg_num(y(v)) + " ";
      dots += std::string("<circle class=\"sz ") + (in_place ? "in" : "out") + "\" data-bytes=\"" +
              std::to_string(p.bytes) + "\" cx=\"" + svg_num(xb(p.bytes)) + "\" cy=\"" +
              svg_num(y(v)) + "\" r=\"3.2\" fill=\"" + (in_place ? "#ffffff" : color) +
              "\" stroke=\"" + color + "\" stroke-width=\"1.4\"><title>" +
              format_bytes(p.bytes) + (in_place ? " in-place" : " out-of-place") + ": " +
              format_gbps(v) + " GB/s busbw</title></circle>\n";
    }
    if (!line.empty())
      o += std::string("<polyline class=\"size-line ") + (in_place ? "in" : "out") +
           "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.6\"" +
           (in_place ? " stroke-dasharray=\"5 3\"" : "") + " points=\"" + line + "\"/>\n";
    o += dots;
  }

  // The headline gate point: the row gates_of's number comes from.
  if (c.gate_bytes > 0 && std::isfinite(c.gate_busbw)) {
    double gx = xb(c.gate_bytes), gy = y(c.gate_busbw);
    std::string txt = "gate " + format_gbps(c.gate_busbw) + " GB/s (" +
                      (c.gate_in_place ? "in-place" : "out-of-place") + ")";
    o += "<g class=\"gate-mark\" data-in-place=\"" + std::string(c.gate_in_place ? "true" : "false") +
         "\"><title>" + attr(txt) + ": the headline number, the lower of out-of-place and in-place at " +
         format_bytes(c.gate_bytes) + "</title><circle cx=\"" + svg_num(gx) + "\" cy=\"" +
         svg_num(gy) + "\" r=\"6.5\" fill=\"none\" stroke=\"#212121\" stroke-width=\"1.8\"/>";
    // The arrow points at the circle from the side with room for the label.
    bool left = gx + 230 > g.width;
    double ty = std::max(py1 + 10, gy + 4 + (left ? 18 : 0));
    if (left && ty > py0 - 6) ty = gy - 12;  // a low point: the label above it, off the axis
    if (left)
      o += "<path d=\"M" + svg_num(gx - 8) + "," + svg_num(gy + 5) + " l-11,2 l6,6 z\" "
           "fill=\"#212121\"/><text x=\"" + svg_num(gx - 16) + "\" y=\"" + svg_num(ty) +
           "\" text-anchor=\"end\" fill=\"#212121\" font-weight=\"bold\">" + attr(txt) +
           "</text></g>\n";
    else
      o += "<path d=\"M" + svg_num(gx + 9) + "," + svg_num(gy) + " l9,-5 v10 z\" fill=\"#212121\"/>"
           "<text x=\"" + svg_num(gx + 21) + "\" y=\"" + svg_num(ty) + "\" fill=\"#212121\" "
           "font-weight=\"bold\">" + attr(txt) + "</text></g>\n";
  }
  o += "</svg>\n";
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
      title = format_utc(c.t0) + " \xC2\xB7 run " + c.run_id + " \xC2\xB7 " + to_string(c.verdict);
    } else {
      int n = 0;
      for (const auto& [v, k] : c.counts) n += k;
      title = format_utc(c.t0) + " \xE2\x80\x93 " + format_utc(c.t1) + " \xC2\xB7 " +
              std::to_string(n) + (n == 1 ? " run" : " runs") + ", worst " + to_string(c.verdict) + ":";
      for (const auto& [v, k] : c.counts) title += " " + std::to_string(k) + " " + to_string(v);
    }
    if (c.regression) title += " \xC2\xB7 REGRESSION";
    double cx = left + i * w;
    o += "<rect class=\"cell v-" + to_string(c.verdict) + (c.regression ? " regression" : "") +
         "\" data-verdict=\"" + to_string(c.verdict) + "\"" +
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
