#include "harness/progress.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace ncclsmoke::harness {
namespace {

std::string seconds_short(double s) {
  char buf[32];
  if (!std::isfinite(s) || s < 0) s = 0;
  std::snprintf(buf, sizeof buf, s < 10 ? "%.1f" : "%.0f", s);
  return buf;
}

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

// time algbw busbw #wrong for one mode, nccl-tests' widths.
std::string mode_columns(const transports::SweepRow* r) {
  if (!r) return fmt("  %8s  %6s  %6s  %6s", "-", "-", "-", "-");
  std::string wrong = r->wrong < 0 ? "N/A" : std::to_string(r->wrong);
  auto num = [](double v, const char* f) {
    return std::isfinite(v) ? fmt(f, v) : std::string("nan");
  };
  return fmt("  %8s  %6s  %6s  %6s", num(r->time_us, "%.1f").c_str(),
             num(r->algbw_gbps, "%.2f").c_str(), num(r->busbw_gbps, "%.2f").c_str(),
             wrong.c_str());
}

}  // namespace

std::string join_wait_line(const rendezvous::JoinProgress& p, double elapsed_s, double timeout_s) {
  std::string line = "rendezvous: " + std::to_string(p.joined) + "/" +
                     std::to_string(p.world_size) + " joined, waiting for rank " +
                     std::to_string(p.waiting_for) +
                     (p.waiting_for_connected ? " (connected, rank not claimed yet)"
                                              : " (never connected)");
  if (p.others_missing > 0)
    line += " and " + std::to_string(p.others_missing) + " more";
  line += ", " + seconds_short(elapsed_s) + " s of " + seconds_short(timeout_s) + " s";
  return line;
}

std::string phase_start_line(const std::string& phase, const std::string& detail) {
  return phase + ": start" + (detail.empty() ? "" : " (" + detail + ")");
}

std::string phase_end_line(const std::string& phase, const std::string& status, double seconds,
                           const std::string& detail) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", std::isfinite(seconds) ? seconds : 0.0);
  return phase + ": " + status + " in " + buf + " s" + (detail.empty() ? "" : ": " + detail);
}

std::vector<std::string> sweep_header_lines(const transports::SweepProgress& p,
                                            const transports::SweepOptions& o) {
  const std::string t = p.transport + ": ";
  std::vector<std::string> out;
  out.push_back(t + fmt("# all_reduce sweep: nranks %d minBytes %zu maxBytes %zu step: %g(factor) "
                        "warmup iters: %d iters: %d validation: %d",
                        p.world_size, o.min_bytes, o.max_bytes, o.factor, o.warmup_iters, o.iters,
                        o.check ? 1 : 0));
  out.push_back(t + "# rows as measured: rank " + std::to_string(p.rank) +
                "'s own time and data check; the summary table averages every rank");
  auto centred = [](const std::string& text, std::size_t width) {
    std::size_t left = text.size() < width ? (width - text.size()) / 2 : 0;
    std::string s = std::string(left, ' ') + text;
    return s + std::string(s.size() < width ? width - s.size() : 0, ' ');
  };
  // The row's leading columns are 44 characters after the '#', each mode's group 34.
  out.push_back(t + "#" + std::string(44, ' ') + centred("out-of-place", 34) +
                centred("in-place", 34));
  out.push_back(t + fmt("#%12s  %12s  %8s  %6s  %8s  %6s  %6s  %6s  %8s  %6s  %6s  %6s", "size",
                        "count", "type", "redop", "time", "algbw", "busbw", "#wrong", "time",
                        "algbw", "busbw", "#wrong"));
  out.push_back(t + fmt("#%12s  %12s  %8s  %6s  %8s  %6s  %6s  %6s  %8s  %6s  %6s  %6s", "(B)",
                        "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                        "(GB/s)", ""));
  return out;
}

std::string sweep_row_line(const transports::SweepProgress& p) {
  const auto* any = p.out_of_place ? p.out_of_place : p.in_place;
  std::size_t bytes = any ? any->bytes : 0, count = any ? any->count : 0;
  const char* type = any ? transports::to_string(any->dtype) : "-";
  return p.transport + ": " +
         fmt(" %12zu  %12zu  %8s  %6s", bytes, count, type, "sum") + mode_columns(p.out_of_place) +
         mode_columns(p.in_place);
}

}  // namespace ncclsmoke::harness
