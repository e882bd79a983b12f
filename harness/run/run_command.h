#pragma once
// `ncclsmoke run`: one rank of the smoke test (RunSession), its options declared by run_options.h.
#include "harness/common/command.h"

namespace ncclsmoke::harness {

void register_run_command(CLI::App& app, Action& action);

}  // namespace ncclsmoke::harness
