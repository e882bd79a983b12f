#pragma once
// The subcommands, one file each. `run` and `launch` live in their own rooms (harness/run/,
// harness/launch/); the others only read and write results, so they live here with main().
#include "harness/common/command.h"
#include "harness/launch/launch_command.h"
#include "harness/run/run_command.h"

namespace ncclsmoke::harness {

void register_store_command(CLI::App& app, Action& action);
void register_history_command(CLI::App& app, Action& action);   // history import|list
void register_baseline_command(CLI::App& app, Action& action);  // baseline learn
void register_report_command(CLI::App& app, Action& action);    // report --html/--markdown
void register_publish_command(CLI::App& app, Action& action);   // publish VERDICT.json

}  // namespace ncclsmoke::harness
