#pragma once
// `ncclsmoke launch`: the local launcher. It starts `run` ranks on this machine (launch_plan.h),
// forwards the run's options to them, and shows rank 0's summary.
#include "harness/common/command.h"

namespace ncclsmoke::harness {

void register_launch_command(CLI::App& app, Action& action);

}  // namespace ncclsmoke::harness
