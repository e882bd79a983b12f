#pragma once
// The world step of `ncclsmoke run`: discover rank, world size and master from flags and the
// launcher's environment (harness/world/world.h), record them in the verdict, and read the profile
// before touching the network, so a typo in the ConfigMap fails fast and names the field, on
// every rank.
#include "harness/run/run_context.h"

namespace ncclsmoke::harness {

// Records the world phase. Returns false when the configuration or the profile is unusable.
bool world_step(RunContext& ctx);

}  // namespace ncclsmoke::harness
