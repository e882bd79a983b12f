// The command line of the ncclsmoke binary: the root CLI::App and its subcommands (main.cpp calls
// it). It lives in the harness library, beside the command files that also include CLI11, so a
// unity build parses and instantiates CLI11 once for all of them.
#include "harness/cli_main.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "harness/log.h"
#include "harness/cli_util.h"
#include "harness/commands.h"
#include "ncclsmoke/version.h"
#ifdef NCCLSMOKE_HAVE_MPI_CHILD
#include "transports/mpi/mpi_transport.h"
#endif

namespace ncclsmoke::harness {

int cli_main(int argc, char** argv) {
#ifdef NCCLSMOKE_HAVE_MPI_CHILD
  // The mpi transport's MPI child process (transports/mpi/mpi_transport.h), not a command.
  if (argc > 1 && std::string(argv[1]) == "__mpi-child")
    return transports::mpi_child_main(argc, argv);
#endif
  CLI::App app{
      "ncclsmoke: rendezvous, mesh and all-reduce smoke test for GPU training clusters.\n"
      "Exit codes: 0 pass, 1 fail, 2 usage error, 3 degraded, 4 inconclusive."};
  app.name("ncclsmoke");
  app.set_version_flag("--version", std::string("ncclsmoke ") + ncclsmoke::kVersion);
  app.require_subcommand(1);
  app.fallthrough(false);

  Action action;
  register_run_command(app, action);
  register_launch_command(app, action);
  register_store_command(app, action);
  register_history_command(app, action);
  register_baseline_command(app, action);
  register_report_command(app, action);
  register_publish_command(app, action);

  if (auto code = parse_command_line(app, argc, argv)) return *code;
  try {
    return action ? action() : kExitUsage;
  } catch (const std::exception& e) {
    log_error(std::string("ncclsmoke: error: ") + e.what());
    return kExitFail;
  }
}

}  // namespace ncclsmoke::harness
