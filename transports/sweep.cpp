#include "transports/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "rendezvous/bounded_json.h"
#include "transports/reduce.h"

namespace ncclsmoke::transports {
namespace {

using nlohmann::json;

double pattern(int rank, std::size_t i) { return 1.0 + static_cast<double>((rank + i) % 4); }

// Expected sum of pattern() over n ranks for an element index ≡ k (mod 4).
double expected_sum(int world_size, std::size_t k) {
  double s = 0;
  for (int r = 0; r < world_size; ++r) s += pattern(r, k);
  return s;
}

// The live view of the size just measured: this rank's own figures (the exchange comes later).
void report_size(Transport& t, const TransportContext& ctx, const SweepOptions& o,
                 const std::vector<std::size_t>& sizes, std::size_t bytes,
                 const std::vector<SweepRow>& rows) {
  SweepRow local[2];
  SweepProgress p;
  p.transport = t.name();
  p.rank = ctx.rank;
  p.world_size = ctx.world_size;
  p.index = static_cast<std::size_t>(std::find(sizes.begin(), sizes.end(), bytes) - sizes.begin());
  p.sizes = sizes.size();
  std::size_t n = 0;  // this size's rows are the last one or two
  while (n < 2 && n < rows.size() && rows[rows.size() - 1 - n].bytes == bytes) ++n;
  for (std::size_t k = 0; k < n; ++k) {
    const SweepRow& r = rows[rows.size() - n + k];
    SweepRow& l = local[k];
    l = r;
    double us = r.rank_time_us.empty() ? NAN : r.rank_time_us.front();
    l.time_us = us;
    l.wrong = r.rank_wrong.empty() ? -1 : r.rank_wrong.front();
    l.rank_time_us.clear();
    l.rank_wrong.clear();
    auto bw = allreduce_bandwidth(l.bytes, us, ctx.world_size);
    l.algbw_gbps = bw.algbw_gbps;
    l.busbw_gbps = bw.busbw_gbps;
    (l.in_place ? p.in_place : p.out_of_place) = &l;
  }
  try {
    o.on_size(p);
  } catch (...) {
    // A progress printer's failure never stops a measurement.
  }
}

}  // namespace

std::vector<std::size_t> sweep_sizes(const SweepOptions& o) {
  std::vector<std::size_t> out;
  std::size_t unit = dtype_size(o.dtype);
  double b = static_cast<double>(std::max(o.min_bytes, unit));
  double factor = o.factor > 1 ? o.factor : 2;
  while (b <= static_cast<double>(o.max_bytes) + 0.5) {
    std::size_t bytes = static_cast<std::size_t>(b) / unit * unit;
    if (bytes == 0) bytes = unit;
    if (out.empty() || out.back() != bytes) out.push_back(bytes);
    if (out.size() > 64) break;
    b *= factor;
  }
  if (out.empty()) out.push_back(std::max(o.min_bytes, unit) / unit * unit);
  return out;
}

std::size_t gate_size(const SweepOptions& o) {
  auto sizes = sweep_sizes(o);
  std::size_t best = sizes.front();
  for (auto s : sizes)
    if (s <= o.gate_bytes) best = s;
  return best;
}

double allreduce_busbw_factor(int n) { return n > 0 ? 2.0 * (n - 1) / n : 0; }

Bandwidth allreduce_bandwidth(std::size_t bytes, double time_us, int world_size) {
  Bandwidth b;
  b.algbw_gbps = std::isfinite(time_us) && time_us > 0
                     ? static_cast<double>(bytes) / (time_us * 1e-6) / 1e9
                     : NAN;
  b.busbw_gbps = b.algbw_gbps * allreduce_busbw_factor(world_size);
  return b;
}

void fill_input(void* buf, std::size_t count, DType dtype, int rank) {
  if (dtype == DType::float32) {
    auto* p = static_cast<float*>(buf);
    for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<float>(pattern(rank, i));
  } else {
    auto* p = static_cast<uint16_t*>(buf);
    uint16_t v[4];
    for (int k = 0; k < 4; ++k) v[k] = float_to_bf16(static_cast<float>(pattern(rank, k)));
    for (std::size_t i = 0; i < count; ++i) p[i] = v[i % 4];
  }
}

int64_t count_wrong(const void* buf, std::size_t count, DType dtype, int world_size) {
  double expect[4];
  for (int k = 0; k < 4; ++k) expect[k] = expected_sum(world_size, k);
  int64_t wrong = 0;
  if (dtype == DType::float32) {
    const auto* p = static_cast<const float*>(buf);
    float e[4];
    for (int k = 0; k < 4; ++k) e[k] = static_cast<float>(expect[k]);
    for (std::size_t i = 0; i < count; ++i) wrong += p[i] != e[i % 4];
  } else {
    // Exact up to 64 ranks (sums <= 256); beyond, allow bfloat16's rounding of partial sums.
    double tol = world_size <= 64 ? 0 : 0.02;
    const auto* p = static_cast<const uint16_t*>(buf);
    for (std::size_t i = 0; i < count; ++i) {
      double got = bf16_to_float(p[i]), e = expect[i % 4];
      wrong += !(std::fabs(got - e) <= tol * e);
    }
  }
  return wrong;
}

SweepResult run_sweep(Transport& t, const TransportContext& ctx, rendezvous::Store& store,
                      const SweepOptions& o, Deadline deadline) {
  auto sizes = sweep_sizes(o);
  std::size_t gate = gate_size(o);
  std::size_t max_bytes = sizes.back();
  // Collective buffers live where the backend wants them; the host copy fills and checks.
  struct Buffer {
    Transport& t;
    void* p;
    Buffer(Transport& tr, std::size_t n) : t(tr), p(tr.allocate(n)) {}
    ~Buffer() { t.release(p); }
  };
  Buffer send(t, max_bytes), recv(t, max_bytes), tiny_in(t, 4), tiny_out(t, 4);
  std::vector<unsigned char> host(max_bytes);
  float one = 1.0f;
  t.copy_in(tiny_in.p, &one, 4);
  auto op_deadline = [&] { return rendezvous::earliest(Clock::now() + o.op_timeout, deadline); };

  SweepResult result;
  json mine = json::array();
  if (o.on_start) {
    SweepProgress p;
    p.transport = t.name();
    p.rank = ctx.rank;
    p.world_size = ctx.world_size;
    p.sizes = sizes.size();
    try {
      o.on_start(p);
    } catch (...) {
    }
  }
  for (std::size_t bytes : sizes) {
    for (int mode = 0; mode < 2; ++mode) {
      bool in_place = mode == 1;
      if ((in_place && !o.in_place) || (!in_place && !o.out_of_place)) continue;
      std::size_t count = bytes / dtype_size(o.dtype);
      void* out = in_place ? send.p : recv.p;
      SweepRow row;
      row.bytes = bytes;
      row.count = count;
      row.dtype = o.dtype;
      row.in_place = in_place;
      row.gate = bytes == gate && !in_place;

      int64_t wrong = -1;
      if (o.check) {
        fill_input(host.data(), count, o.dtype, ctx.rank);
        t.copy_in(send.p, host.data(), bytes);
        if (!in_place) {  // stale data must not pass
          std::memset(host.data(), 0xFF, bytes);
          t.copy_in(recv.p, host.data(), bytes);
        }
        t.allreduce(send.p, out, count, o.dtype, ReduceOp::sum, op_deadline());
        t.copy_out(host.data(), out, bytes);
        wrong = count_wrong(host.data(), count, o.dtype, ctx.world_size);
      }
      for (int i = 0; i < o.warmup_iters; ++i)
        t.allreduce(send.p, out, count, o.dtype, ReduceOp::sum, op_deadline());
      // A one-element collective lines the ranks up before the clock starts.
      t.allreduce(tiny_in.p, tiny_out.p, 1, DType::float32, ReduceOp::sum, op_deadline());
      double us = t.timed_allreduce(send.p, out, count, o.dtype, ReduceOp::sum, o.iters, deadline,
                                    op_deadline);
      mine.push_back({{"time_us", us}, {"wrong", wrong}});
      if (o.on_size) {  // carried to report_size; replaced by every rank's figures below
        row.rank_time_us = {us};
        row.rank_wrong = {wrong};
      }
      result.rows.push_back(row);
    }
    if (o.on_size) report_size(t, ctx, o, sizes, bytes, result.rows);
  }

  // Exchange every rank's figures so each rank reports the same rows.
  store.set("sweep/" + std::to_string(ctx.rank), mine.dump());
  std::vector<json> all(ctx.world_size);
  result.complete = true;
  for (int r = 0; r < ctx.world_size; ++r) {
    try {
      // Bounded (rendezvous/bounded_json.h): a peer's post too big or too deep is a missing one.
      all[r] = rendezvous::parse_bounded_or_discarded(store.get("sweep/" + std::to_string(r), deadline),
                                                      rendezvous::kMaxStorePostJsonBytes);
      if (all[r].is_discarded()) {
        all[r] = nullptr;
        result.complete = false;
      }
    } catch (const std::exception&) {
      result.complete = false;
    }
  }
  for (std::size_t i = 0; i < result.rows.size(); ++i) {
    auto& row = result.rows[i];
    row.rank_time_us.clear();
    row.rank_wrong.clear();
    row.rank_algbw_gbps.clear();
    row.rank_busbw_gbps.clear();
    double sum_us = 0;
    int n = 0;
    int64_t wrong = 0;
    bool checked = true;
    for (int r = 0; r < ctx.world_size; ++r) {
      if (!all[r].is_array() || i >= all[r].size()) {
        row.rank_time_us.push_back(NAN);
        row.rank_wrong.push_back(-1);
        checked = false;
        continue;
      }
      double us = all[r][i].value("time_us", NAN);
      int64_t w = all[r][i].value("wrong", int64_t{-1});
      row.rank_time_us.push_back(us);
      row.rank_wrong.push_back(w);
      if (std::isfinite(us)) {
        sum_us += us;
        ++n;
      }
      if (w < 0) checked = false;
      else wrong += w;
    }
    row.time_us = n ? sum_us / n : NAN;
    row.wrong = checked ? wrong : (wrong > 0 ? wrong : -1);
    auto bw = allreduce_bandwidth(row.bytes, row.time_us, ctx.world_size);
    row.algbw_gbps = bw.algbw_gbps;
    row.busbw_gbps = bw.busbw_gbps;
    for (double us : row.rank_time_us) {
      auto rb = allreduce_bandwidth(row.bytes, us, ctx.world_size);
      row.rank_algbw_gbps.push_back(rb.algbw_gbps);
      row.rank_busbw_gbps.push_back(rb.busbw_gbps);
    }
  }
  return result;
}

}  // namespace ncclsmoke::transports
