#include "harness/run/transports_step.h"

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <set>

#include "harness/common/progress.h"
#include "harness/run/transport_phase.h"
#include "results/verdict/phase_id.h"

namespace ncclsmoke::harness {
namespace {

// --gate without sweep flags measures exactly the gate size the profile's bands use for this
// world size (when the requested transports' bands agree on one), so the gate is one quick size
// and never inconclusive for a size mismatch. nullopt: the sweep flags' sizes.
std::optional<std::size_t> gate_size_from_profile(const RunContext& ctx) {
  if (!ctx.o.gate || ctx.o.sweep_explicit() || !ctx.profile) return std::nullopt;
  std::set<std::int64_t> sizes;
  for (const auto& t : ctx.requested_transports()) {
    const auto* te = results::find_transport(*ctx.profile, t);
    const auto* band = te ? results::find_band(*te, ctx.world.world_size) : nullptr;
    if (band) sizes.insert(band->gate_bytes);
  }
  if (sizes.size() != 1) return std::nullopt;
  return static_cast<std::size_t>(*sizes.begin());
}

}  // namespace

void transports_phase(RunContext& ctx, const StoreSession& s, Liveness& live) {
  // Whether the transports run (every rank joined, every path reached) is results::next_step's.
  const auto& o_ = ctx.o;
  const auto& world_ = ctx.world;
  const auto& join = s.join;
  auto names = ctx.requested_transports();
  TransportPhaseOptions to;
  to.transports = names;
  to.sweep.min_bytes = o_.min_bytes;
  to.sweep.max_bytes = o_.max_bytes;
  to.sweep.gate_bytes = o_.gate_bytes;
  if (auto gate = gate_size_from_profile(ctx))
    to.sweep.min_bytes = to.sweep.max_bytes = to.sweep.gate_bytes = *gate;
  if (to.sweep.max_bytes < to.sweep.min_bytes) to.sweep.max_bytes = to.sweep.min_bytes;
  to.sweep.factor = o_.factor;
  to.sweep.iters = o_.iters;
  to.sweep.warmup_iters = o_.warmup_iters;
  transports::parse_dtype(o_.dtype, to.sweep.dtype);
  to.sweep.check = !o_.no_check;
  to.sweep.op_timeout = ms(o_.op_timeout_s);
  to.timeout_s = o_.transport_timeout_s;
  to.run_limit = ctx.steps_deadline;
  // The backends' options: the declared flags given, plus each declaration's per-rank default
  // (harness/run/run_options.h).
  to.backend_options = backend_options_for_run(o_, world_.rank, world_.local_rank);

  if (!live.started()) live.start(*s.store, join, s.self.local_address);
  TransportPhaseInput in;
  in.rank = world_.rank;
  in.world_size = world_.world_size;
  in.host = world_.hostname;
  for (const auto& id : join.present) in.hosts[id.rank] = id.host;
  in.local_address = s.self.local_address;
  in.store = s.store.get();
  // Each size as it is measured, nccl-tests' table (harness/common/progress.h).
  // The phase line is a log line (stderr); the table's head and rows are results (stdout,
  // unprefixed; progress.h says when).
  to.sweep.on_start = [shown = to.sweep, table = o_.table_format](const transports::SweepProgress& p) {
    log_set_phase(results::transport_phase_name(p.transport));
    log_info(phase_start_line(results::transport_phase_name(p.transport),
                              fmt::format("open; sweep of {} sizes", p.sizes)));
    print_sweep_start(p, shown, table);
  };
  to.sweep.on_size = [table = o_.table_format](const transports::SweepProgress& p) {
    print_sweep_row(p, table);
  };
  log_set_phase("transports");
  log_info(phase_start_line("transports", o_.transports));
  in.set_wait_state = [&live](const rendezvous::WaitState& w) { live.set_wait_state(w); };
  in.store_unusable = [&live]() -> std::string { return live.store_unusable(); };
  // The step only measures and records; results::judge_local (transport_rules.h) decides, from
  // the outcomes as they are (facts/transport.h), when the session judges the step.
  auto outcomes = measure_transports(in, to);
  live.settle(outcomes);
  auto chain = live.wait_chain(in.hosts);
  ctx.saw(results::TransportsSeen{std::move(outcomes), {in.rank, in.host, in.hosts, o_.timeout_s},
                                  std::move(chain)});
}

}  // namespace ncclsmoke::harness
