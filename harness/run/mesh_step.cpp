#include "harness/run/mesh_step.h"

#include <fmt/format.h>

#include <map>

#include "harness/common/progress.h"
#include "harness/run/transport_phase.h"  // test_pause_point
#include "rendezvous/net.h"

namespace ncclsmoke::harness {

using namespace ncclsmoke::rendezvous;

void mesh_step(RunContext& ctx, const StoreSession& s, const Liveness& live, MeshResult& mesh) {
  const auto& w = ctx.world;
  const auto& join = s.join;
  auto t0 = Clock::now();
  log_set_phase("mesh");
  log_info(phase_start_line("mesh", fmt::format("{} ranks", join.present.size())));
  MeshOptions m;
  m.rank = w.rank;
  for (const auto& id : join.present) m.ranks.push_back(id.rank);
  m.bind_address = ctx.o.mesh_bind.empty() ? s.self.local_address : ctx.o.mesh_bind;
  m.advertise_address = m.bind_address;
  if (!ctx.o.mesh_port_range.empty())  // checked at the door; not given: 0/0, ephemeral
    parse_port_range(ctx.o.mesh_port_range, m.port_min, m.port_max);
  m.full_mesh_threshold = ctx.o.mesh_threshold;
  m.random_peers = ctx.o.mesh_random_peers;
  m.pair_timeout = ms(ctx.o.pair_timeout_s);
  m.deadline = earliest(Clock::now() + ms(grown_with_world(ctx.o.mesh_timeout_s, w.world_size)),
                        ctx.steps_deadline);
  const int rank = w.rank;
  m.after_publish = [rank] { test_pause_point("mesh", rank); };
  m.seen_alive = [&live](int r) { return live.reachable_ranks().count(r) > 0; };
  try {
    mesh = run_mesh_probe(*s.store, m);
  } catch (const StoreError& e) {
    bool could_not_run = e.error_class() == ErrorClass::invalid || e.error_class() == ErrorClass::other;
    if (could_not_run && w.rank != 0) {
      // The others must not wait for an address this rank will never publish.
      try {
        publish_left_mesh(*s.store, w.rank, fmt::format("MESH_BLOCKED: {}", e.what()));
      } catch (const StoreError&) {
      }
    }
    if (could_not_run)
      ctx.end_step("mesh", results::MeshNotRunSeen{ctx.self(), e.what()}, t0, e.what());
    else
      ctx.end_step("mesh", results::StoreLostSeen{e.failure(), probe_context(w), "the mesh probe"},
                   t0, e.what());
    return;
  }
  std::map<int, std::string> hosts;
  for (const auto& id : join.present) hosts[id.rank] = id.host;
  // A probe the deadline cut short is inconclusive (pairs not tested), not failed; the
  // transports still run then, under their own deadlines.
  MeshResult seen = mesh;
  auto stopped = live.stopped_ranks_for_mesh(seen);
  auto aside = set_aside_stopped_ranks(seen, stopped);
  // Loss is not death: a rank the mesh heard nothing from that the liveness watch still has
  // connected (answering, or silent behind a lossy path) is not lost: its pairs are untested. A
  // frozen one was set aside above as stopped (PEER_STALLED); only the watch sees a death. This
  // rank is alive too, whatever rank 0's summary says of it (its results came after the summary:
  // it was still probing), and no watch of its own watches it.
  std::set<int> alive = live.not_lost_ranks();
  alive.insert(w.rank);
  for (auto it = seen.silent_ranks.begin(); it != seen.silent_ranks.end();)
    if (alive.count(*it)) {
      seen.unfinished_ranks.push_back(*it);
      it = seen.silent_ranks.erase(it);
    } else {
      ++it;
    }
  // What the mesh means (MESH_BLOCKED, MTU_MISMATCH, PEER_LOST, the phase's status) is judging's;
  // next_step reads this record and what it judged (results::judged_so_far).
  ctx.end_step("mesh",
               results::MeshSeen{.mesh = seen,
                                 .ctx = probe_context(w),
                                 .hosts = std::move(hosts),
                                 .stopped = stopped,
                                 .set_aside_stopped = !aside.empty()},
               t0);
}

}  // namespace ncclsmoke::harness
