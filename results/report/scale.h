#pragma once
// Axis arithmetic and number/time formatting for the report's inline SVG charts. Pure functions
// (no I/O, no locale: times are UTC, decimals use '.'), so the charts are reproducible and the
// unit tests can pin every tick.
#include <cstdint>
#include <string>
#include <vector>

namespace ncclsmoke::report {

// Maps the domain [d0, d1] linearly onto the range [r0, r1] (r1 < r0 is fine: SVG's y grows
// downwards). A degenerate domain (d0 == d1) maps everything to the middle of the range.
struct LinearScale {
  double d0 = 0, d1 = 1, r0 = 0, r1 = 1;
  double operator()(double v) const;
};

// "Nice" ticks (1, 2, 2.5 or 5 times a power of ten) covering [lo, hi] with about `target`
// intervals: the first tick is <= lo, the last >= hi. lo == hi gets a unit-wide interval around
// it. Non-finite input gives {0, 1}.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

struct TimeTick {
  double unix = 0;
  std::string label;  // "11-28" at day steps, "11-28 06:00" below a day
};
// Ticks at round UTC times (1 h, 2 h, 3 h, 6 h, 12 h, 1 d, 2 d, 7 d, 14 d, 30 d steps) inside
// [t0, t1], about `target` of them; at least one when t1 >= t0.
std::vector<TimeTick> time_ticks(double t0, double t1, int target = 6);

// 67108864 -> "64 MiB", 1000 -> "1000 B", 1536 -> "1.5 KiB".
std::string format_bytes(std::int64_t bytes);
// Bandwidth with sensible precision: 0.3127 -> "0.31", 12.44 -> "12.4", 187.2 -> "187".
std::string format_gbps(double gbps);
// 0.4213 -> "42%".
std::string format_percent(double ratio);
// Seconds since the epoch -> "2026-11-29 10:15 UTC" (with_seconds: "2026-11-29 10:15:07 UTC").
std::string format_utc(double unix, bool with_seconds = false);
// Seconds -> "45 s", "12 min", "5 h 30 min", "3 d 4 h" (two units at most, rounded down).
std::string format_duration(double seconds);
// A number for an SVG attribute: fixed, at most 2 decimals, no trailing zeros ("12.5", "40").
std::string svg_num(double v);

}  // namespace ncclsmoke::report
