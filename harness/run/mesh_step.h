#pragma once
// The mesh step of `ncclsmoke run`: every present rank probes its peers (rendezvous/mesh.h).
// Pairs that failed because one end froze or died are that rank's consequence, not a network
// verdict: the liveness watch's own PEER_STALLED / PEER_LOST names it, so the step asks the watch
// first and sets those pairs aside. The findings and the phase status come from results/judging.
#include "harness/run/liveness.h"
#include "harness/run/rendezvous_step.h"
#include "harness/run/run_context.h"
#include "rendezvous/mesh.h"

namespace ncclsmoke::harness {

// Records the mesh phase (MeshSeen); `mesh` receives what the probe measured. Whether the
// transports run after it is results::next_step's, from that record.
void mesh_step(RunContext& ctx, const StoreSession& s, const Liveness& live,
               rendezvous::MeshResult& mesh);

}  // namespace ncclsmoke::harness
