#pragma once
// The transports step of `ncclsmoke run`: builds the sweep and backend options from the flags,
// measures (measure_transports, harness/run/transport_phase.h), judges (results::judge_transports),
// lets the liveness watch settle and attach its wait chains, and records what came back. Run only
// when results::next_step says so: collectives need every rank and every path; with a rank
// missing or the mesh failed they would only hang, so next_step lists them not run, naming the
// cause (which keeps the verdict from pass).
#include "harness/run/liveness.h"
#include "harness/run/rendezvous_step.h"
#include "harness/run/run_context.h"

namespace ncclsmoke::harness {

void transports_phase(RunContext& ctx, const StoreSession& s, Liveness& live);

}  // namespace ncclsmoke::harness
