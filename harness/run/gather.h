#pragma once
// The end of a run's verdict: every rank but 0 posts its local verdict to the store; rank 0
// gathers them, merges the global verdict, judges it against the profile, writes it, and records
// it in the history (--history). A rank whose verdict never comes is named (results/judging).
#include "harness/run/liveness.h"
#include "harness/run/rendezvous_step.h"
#include "harness/run/run_context.h"
#include "rendezvous/mesh.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::harness {

// The key rank 0 sets (to the run id) once the world's verdict is written.
inline constexpr const char* kVerdictWrittenKey = "verdict/written";

// What a rank posts for rank 0: its local verdict without the transport rows. Every rank holds
// the same exchanged sweep figures (a row a rank a size: they grow with the world) and rank 0's
// own are the world's; at 8 ranks they were nine tenths of a post's 28 KB. The rank's own file
// keeps them.
results::Verdict posted_view(const results::Verdict& local);

// Not while the store is known frozen, or rank 0 (the store) is known gone: a post would only
// wait out its timeout, and our file already says so. A rank whose own verdict fails then waits
// (until the run's deadline, or rank 0 stops) for kVerdictWrittenKey: its non-zero exit would
// make mpirun, or torchrun's agent, kill rank 0 before it wrote the world's verdict.
void post_local(const RunContext& ctx, const StoreSession& s, const Liveness& live,
                const results::Verdict& local);

// Rank 0: collects every present rank's local verdict (never past the run's deadline + 2 s),
// merges, judges, writes the global verdict and records it in the history. Returns it.
results::Verdict gather_global(RunContext& ctx, const StoreSession& s,
                               const rendezvous::MeshResult& mesh, const Liveness& live,
                               const results::Verdict& local);

}  // namespace ncclsmoke::harness
