#include "harness/common/progress.h"

#include "harness/common/log.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <iostream>

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

// nccl-tests' time column: 2 decimals under 100 us, 1 under 10 ms, none above.
std::string time_text(double us) {
  if (!std::isfinite(us)) return "nan";
  return fmt(us >= 10000.0 ? "%.0f" : us >= 100.0 ? "%.1f" : "%.2f", us);
}

std::string bw_text(double gbps) { return std::isfinite(gbps) ? fmt("%.2f", gbps) : "nan"; }

// time algbw busbw #wrong for one mode, nccl-tests' widths ("  %7s  %6.2f  %6.2f  %5s").
std::string mode_columns(const TableMode& m) {
  if (!m.measured) return fmt("  %7s  %6s  %6s  %5s", "-", "-", "-", "-");
  std::string wrong = m.wrong < 0 ? "N/A" : std::to_string(m.wrong);
  return fmt("  %7s  %6s  %6s  %5s", time_text(m.time_us).c_str(), bw_text(m.algbw_gbps).c_str(),
             bw_text(m.busbw_gbps).c_str(), wrong.c_str());
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

std::vector<std::string> table_header_lines() {
  std::vector<std::string> lines{
      fmt("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place", "",
          "", "", "", ""),
      fmt("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s", "size", "count",
          "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
          "#wrong"),
      fmt("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s", "(B)",
          "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")};
  for (auto& l : lines) l.erase(l.find_last_not_of(' ') + 1);
  return lines;
}

std::string table_row_line(const TableRow& r) {
  return fmt("%12llu  %12llu  %8s  %6s  %6d", static_cast<unsigned long long>(r.bytes),
             static_cast<unsigned long long>(r.count), r.type.c_str(), "sum", -1) +
         mode_columns(r.out_of_place) + mode_columns(r.in_place);
}

std::vector<std::string> sweep_header_lines(const transports::SweepProgress& p,
                                            const transports::SweepOptions& o) {
  std::vector<std::string> out;
  out.push_back(fmt("# transport %s: all_reduce sweep: nranks %d minBytes %zu maxBytes %zu "
                    "step: %g(factor) warmup iters: %d iters: %d validation: %d",
                    p.transport.c_str(), p.world_size, o.min_bytes, o.max_bytes, o.factor,
                    o.warmup_iters, o.iters, o.check ? 1 : 0));
  out.push_back("# rows as measured: rank " + std::to_string(p.rank) +
                "'s own time and data check; the summary table at the end averages every rank");
  for (auto& h : table_header_lines()) out.push_back(std::move(h));
  return out;
}

std::string sweep_row_line(const transports::SweepProgress& p) {
  const auto* any = p.out_of_place ? p.out_of_place : p.in_place;
  TableRow row;
  row.bytes = any ? any->bytes : 0;
  row.count = any ? any->count : 0;
  row.type = any ? transports::to_string(any->dtype) : "-";
  row.out_of_place = table_mode(p.out_of_place);
  row.in_place = table_mode(p.in_place);
  return table_row_line(row);
}

namespace {
// Whether this rank prints a live table, and where (see progress.h).
enum class LiveTable { none, stdout_rows, log_lines };
LiveTable live_table(const std::string& table_format) {
  if (!log_enabled(LogLevel::info)) return LiveTable::none;
  if (log_is_json()) return LiveTable::log_lines;
  return table_format.empty() || table_format == "text" ? LiveTable::stdout_rows : LiveTable::none;
}
}  // namespace

void print_sweep_start(const transports::SweepProgress& p, const transports::SweepOptions& o,
                       const std::string& table_format) {
  auto where = live_table(table_format);
  if (where == LiveTable::none) return;
  std::string text;
  for (const auto& h : sweep_header_lines(p, o)) text += h + "\n";
  if (where == LiveTable::log_lines) {
    text.pop_back();
    log_info(text);
    return;
  }
  std::cout << text << std::flush;
}

void print_sweep_row(const transports::SweepProgress& p, const std::string& table_format) {
  auto where = live_table(table_format);
  if (where == LiveTable::none) return;
  std::string line = sweep_row_line(p);
  if (where == LiveTable::log_lines) {
    log_info(line);
    return;
  }
  std::cout << line << '\n' << std::flush;
}

}  // namespace ncclsmoke::harness
