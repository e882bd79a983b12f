#include "results/report/scale.h"

#include <time.h>

#include <array>
#include <cmath>
#include <cstdio>

namespace ncclsmoke::report {

double LinearScale::operator()(double v) const {
  if (d1 == d0) return (r0 + r1) / 2;
  return r0 + (v - d0) * (r1 - r0) / (d1 - d0);
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    lo -= 0.5;
    hi += 0.5;
  }
  if (target < 1) target = 1;
  double raw = (hi - lo) / target;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag * 10;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (mag * m >= raw) {
      step = mag * m;
      break;
    }
  }
  double first = std::floor(lo / step + 1e-9) * step;
  double last = std::ceil(hi / step - 1e-9) * step;
  std::vector<double> ticks;
  for (int i = 0; first + i * step <= last + step * 1e-6 && i < 1000; ++i) {
    double t = first + i * step;
    if (std::fabs(t) < step * 1e-9) t = 0;  // no "-0"
    ticks.push_back(t);
  }
  return ticks;
}

namespace {

struct tm utc_tm(double unix) {
  time_t t = static_cast<time_t>(std::floor(unix));
  struct tm tm {};
  gmtime_r(&t, &tm);
  return tm;
}

}  // namespace

std::vector<TimeTick> time_ticks(double t0, double t1, int target) {
  std::vector<TimeTick> out;
  if (!std::isfinite(t0) || !std::isfinite(t1) || t1 < t0) return out;
  if (target < 1) target = 1;
  constexpr double kHour = 3600, kDay = 86400;
  const std::array<double, 12> steps{kHour / 4, kHour / 2, kHour,      2 * kHour,
                                     3 * kHour, 6 * kHour, 12 * kHour, kDay,
                                     2 * kDay,  7 * kDay,  14 * kDay,  30 * kDay};
  double span = t1 - t0;
  double step = steps.back();
  for (double s : steps) {
    if (span / s <= target) {
      step = s;
      break;
    }
  }
  // Steps of 7 days and more start on a day boundary; below a day they align to UTC midnight.
  double first = std::ceil(t0 / step) * step;
  if (step >= 7 * kDay) first = std::ceil(t0 / kDay) * kDay;
  for (double t = first; t <= t1 && out.size() < 200; t += step) {
    auto tm = utc_tm(t);
    char buf[32];
    if (step >= kDay)
      std::snprintf(buf, sizeof buf, "%02d-%02d", tm.tm_mon + 1, tm.tm_mday);
    else
      std::snprintf(buf, sizeof buf, "%02d-%02d %02d:%02d", tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                    tm.tm_min);
    out.push_back({t, buf});
  }
  if (out.empty()) {
    auto tm = utc_tm(t0);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%02d-%02d %02d:%02d", tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                  tm.tm_min);
    out.push_back({t0, buf});
  }
  return out;
}

std::string format_bytes(std::int64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (u < 4 && std::fabs(v) >= 1024 && std::fmod(v, 1024) == 0) {
    v /= 1024;
    ++u;
  }
  if (u == 0 && std::fabs(v) >= 1024) {  // not a whole number of KiB: one decimal
    while (u < 4 && std::fabs(v) >= 1024) {
      v /= 1024;
      ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  return buf;
}

std::string format_gbps(double gbps) {
  if (!std::isfinite(gbps)) return "n/a";
  char buf[32];
  double a = std::fabs(gbps);
  std::snprintf(buf, sizeof buf, a >= 100 ? "%.0f" : a >= 10 ? "%.1f" : "%.2f", gbps);
  return buf;
}

std::string format_percent(double ratio) {
  if (!std::isfinite(ratio)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", ratio * 100);
  return buf;
}

std::string format_utc(double unix, bool with_seconds) {
  if (!std::isfinite(unix)) return "unknown time";
  auto tm = utc_tm(unix);
  char buf[48];
  if (with_seconds)
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d UTC", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  else
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d UTC", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min);
  return buf;
}

std::string svg_num(double v) {
  if (!std::isfinite(v)) return "0";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  auto s = static_cast<std::int64_t>(seconds);
  if (s < 60) return std::to_string(s) + " s";
  if (s < 3600) return std::to_string(s / 60) + " min";
  if (s < 86400) {
    std::int64_t m = (s % 3600) / 60;
    return std::to_string(s / 3600) + " h" + (m ? " " + std::to_string(m) + " min" : "");
  }
  std::int64_t h = (s % 86400) / 3600;
  return std::to_string(s / 86400) + " d" + (h ? " " + std::to_string(h) + " h" : "");
}

}  // namespace ncclsmoke::report
