#pragma once
// The lines a run prints as it goes: phase starts and ends and rank 0's join wait (log lines,
// harness/common/log.h, on stderr), and each sweep size as it is measured, in nccl-tests' table shape:
// a comment line naming the transport and the sweep, a column header, a units row, then one row
// per size with out-of-place and in-place side by side. The live rows and the summary table at
// the end (harness/common/summary_tables.h) are one shape, unprefixed, so either parses as nccl-tests
// output:
//
//   #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
//   #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
//       1048576        262144   float32     sum      -1    458.1    2.29    2.29      0    511.3    2.05    2.05      0
//
// Pure formatting, so the wording is tested without a run.
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/join.h"
#include "transports/sweep.h"

namespace ncclsmoke::harness {

// "rendezvous: 2/3 joined, waiting for rank 2 (never connected), 6 s of 30 s". `elapsed_s` and
// `timeout_s` are the run's clock against --join-timeout (the join deadline counts from the start).
std::string join_wait_line(const rendezvous::JoinProgress& p, double elapsed_s, double timeout_s);

// "mesh: start" / "mesh: pass in 0.02 s: 6/6 pairs connected".
std::string phase_start_line(const std::string& phase, const std::string& detail = "");
std::string phase_end_line(const std::string& phase, const std::string& status, double seconds,
                           const std::string& detail);

// ---- nccl-tests' table ------------------------------------------------------------------------

// One mode's figures; `measured` false prints nccl-tests' dashes.
struct TableMode {
  bool measured = false;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::int64_t wrong = -1;  // -1: not checked ("N/A")
};
// A measured row's figures (a live transports::SweepRow or a verdict's results::TransportRow:
// both have time_us, algbw_gbps, busbw_gbps, wrong); nullptr: not measured.
template <typename Row>
TableMode table_mode(const Row* r) {
  TableMode m;
  if (!r) return m;
  m.measured = true;
  m.time_us = r->time_us;
  m.algbw_gbps = r->algbw_gbps;
  m.busbw_gbps = r->busbw_gbps;
  m.wrong = r->wrong;
  return m;
}
// One size: the leading columns, then out-of-place and in-place side by side. The redop is sum
// and the root -1 (all-reduce has none), as nccl-tests prints them.
struct TableRow {
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
  std::string type = "float32";
  TableMode out_of_place, in_place;
};

// The group line ("out-of-place", "in-place"), the column names and the units, each starting '#'.
std::vector<std::string> table_header_lines();
// One row, columns aligned under table_header_lines(); time as nccl-tests prints it (2 decimals
// under 100 us, 1 under 10 ms, none above), bandwidths at 2 decimals, "N/A" for an unchecked mode.
std::string table_row_line(const TableRow& row);

// The live table's head for one transport's sweep: "# transport <name>: all_reduce sweep ..."
// (nccl-tests' config line), a line saying whose rows these are, and table_header_lines().
std::vector<std::string> sweep_header_lines(const transports::SweepProgress& p,
                                            const transports::SweepOptions& o);
// One size as this rank measured it (table_row_line).
std::string sweep_row_line(const transports::SweepProgress& p);

// Where the live table goes: the rows are results, so they go to stdout, unprefixed, when the
// rank talks (its log level lets info through, i.e. rank 0 by default, every rank with
// --verbose, none with --quiet) and the table format is text; with --log-format json they are
// log lines (every line of the process one JSON object); with --table-format csv|json stdout
// holds only the summary table, so there is no live table.
void print_sweep_start(const transports::SweepProgress& p, const transports::SweepOptions& o,
                       const std::string& table_format);
void print_sweep_row(const transports::SweepProgress& p, const std::string& table_format);

}  // namespace ncclsmoke::harness
