#pragma once
// The driver shared by every backend, as nccl-tests runs a collective: for each message size
// (min..max, times `factor`), out-of-place then in-place: a data check (known rank-dependent
// inputs, count the wrong elements), warm-up, then `iters` timed back-to-back collectives.
// Bandwidth uses nccl-tests' formulas: algbw = bytes / time (GB/s = 1e9 B/s), all-reduce
// busbw = algbw * 2(n-1)/n. time_us is the average over ranks of each rank's mean iteration time
// (nccl-tests' default, -a 1); every rank's own time is kept for straggler detection, with its
// own algbw/busbw from the same formula (allreduce_bandwidth: the one place it is computed).
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/store_error.h"
#include "transports/transport.h"

namespace ncclsmoke::transports {

// A sweep's rows and result are facts/transport.h's: judging reads the same types.
using facts::SweepResult;
using facts::SweepRow;

// One message size just measured on this rank, before the figures are exchanged: for a live
// progress row (nccl-tests prints each size as it goes). The rows hold this rank's own time,
// bandwidth and wrong count (rank_time_us/rank_wrong empty); the result's rows, after the
// exchange, hold the mean over ranks and the sum of wrong elements.
struct SweepProgress {
  std::string transport;
  int rank = 0;
  int world_size = 1;
  std::size_t index = 0;  // this size's position in sweep_sizes()
  std::size_t sizes = 0;  // how many sizes the sweep measures
  const SweepRow* out_of_place = nullptr;  // null when not measured
  const SweepRow* in_place = nullptr;
};

struct SweepOptions {
  std::size_t min_bytes = 1 << 20;
  std::size_t max_bytes = 64 << 20;
  double factor = 2;
  int warmup_iters = 2;
  int iters = 10;
  DType dtype = DType::float32;
  bool out_of_place = true;
  bool in_place = true;
  bool check = true;
  std::size_t gate_bytes = 64 << 20;  // rounded down to a size the sweep measures
  Millis op_timeout{10000};            // one collective
  // Called on the sweeping thread once before the first size (rows null: the transport is open,
  // the sweep starts) and after each size (both modes) is measured; exceptions are swallowed.
  std::function<void(const SweepProgress&)> on_start;
  std::function<void(const SweepProgress&)> on_size;
};

// The one bandwidth formula (nccl-tests'): algbw = bytes / time in GB/s, NaN for a time that is
// not finite and positive; busbw = algbw * allreduce_busbw_factor(world_size).
struct Bandwidth {
  double algbw_gbps = 0;
  double busbw_gbps = 0;
};
Bandwidth allreduce_bandwidth(std::size_t bytes, double time_us, int world_size);

// What the transports phase (harness/run/transport_phase.h) measured for one requested backend:
// facts/transport.h's TransportOutcome, which results/judging/transport_rules.h judges as it is.
using facts::TransportFailure;
using facts::TransportOutcome;
using facts::TransportStage;

// Message sizes the sweep measures (each a multiple of the dtype size, at least one element).
std::vector<std::size_t> sweep_sizes(const SweepOptions& o);
// The measured size used as the gate: the largest size <= gate_bytes (or the smallest size).
std::size_t gate_size(const SweepOptions& o);

double allreduce_busbw_factor(int world_size);  // 2(n-1)/n

// nccl-tests style data: rank r's element i is 1 + ((r + i) mod 4), so every sum is a small
// integer, exact in float32 and (up to 64 ranks) in bfloat16.
void fill_input(void* buf, std::size_t count, DType dtype, int rank);
int64_t count_wrong(const void* buf, std::size_t count, DType dtype, int world_size);

// Runs the sweep on an opened transport. Every rank's figures are exchanged through `store`
// (keys "sweep/<rank>"), so every rank returns the same rows. Throws TransportError from the
// backend (timeout, peer_lost); `deadline` bounds the whole sweep.
SweepResult run_sweep(Transport& t, const TransportContext& ctx, rendezvous::Store& store,
                      const SweepOptions& o, Deadline deadline);

}  // namespace ncclsmoke::transports
