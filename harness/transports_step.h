#pragma once
// The transports step of `ncclsmoke run`: builds the sweep and backend options from the flags,
// measures (measure_transports, harness/transport_phase.h), judges (results::judge_transports),
// lets the liveness watch settle and attach its wait chains, and records what came back. Collectives need every rank and every
// path: with a rank missing or a pair blocked they would only hang, so the transports are then
// listed as not run (which keeps the verdict from pass).
#include "harness/liveness.h"
#include "harness/rendezvous_step.h"
#include "harness/run_context.h"

namespace ncclsmoke::harness {

void transports_phase(RunContext& ctx, const StoreSession& s, Liveness& live, bool mesh_ok);

}  // namespace ncclsmoke::harness
