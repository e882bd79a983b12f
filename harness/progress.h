#pragma once
// The lines a run prints as it goes (harness/log.h carries them): phase starts and ends, rank 0's
// join wait, and each sweep size as it is measured in nccl-tests' table shape (a config line, a
// column header, a units row, then one row per size with out-of-place and in-place columns).
// Pure formatting, so the wording is tested without a run.
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

// The table's head for one transport's sweep: config line, column names, units.
std::vector<std::string> sweep_header_lines(const transports::SweepProgress& p,
                                            const transports::SweepOptions& o);
// One size: size, count, type, redop, then time/algbw/busbw/#wrong for out-of-place and
// in-place ("N/A" where a mode was not measured, as nccl-tests prints for a skipped check).
std::string sweep_row_line(const transports::SweepProgress& p);

}  // namespace ncclsmoke::harness
