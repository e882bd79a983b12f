// The command line of the ncclsmoke binary: the root CLI::App and its subcommands (main.cpp calls
// it). It lives in the harness library, beside the command files that also include CLI11, so a
// unity build parses and instantiates CLI11 once for all of them. The conventions every command
// shares are here: the exit codes in the top-level help, an example in every --help (kExamples),
// `ncclsmoke help [COMMAND...]`.
#include "harness/cli/cli_main.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/common/cli_util.h"
#include "harness/common/log.h"
#include "ncclsmoke/version.h"
#ifdef NCCLSMOKE_HAVE_MPI_CHILD
#include "transports/mpi/mpi_transport.h"
#endif

namespace ncclsmoke::harness {
namespace {

// README "Exit codes", the one table; every command's help ends with it at the top level.
constexpr const char* kExitCodes =
    "Exit codes:\n"
    "  0  pass\n"
    "  1  fail: something is broken (a finding of severity error)\n"
    "  2  usage error: a bad flag, value or variable (nothing ran)\n"
    "  3  degraded: works, but slower than it should\n"
    "  4  inconclusive: something required was skipped or not measured\n"
    "  5  publish: metrics not delivered (the history was written)\n"
    "  6  publish: the history was not written (the run is spooled)\n"
    "  7  history, report, baseline learn, publish: the history exists but cannot be used\n"
    "  8  run, launch: a verdict file could not be written (wins over every verdict code)";

// An example for every command's --help, by command path.
const std::vector<std::pair<std::string, std::string>> kExamples = {
    {"run",
     "  torchrun --nproc_per_node 8 --no-python ncclsmoke run --transports nccl\n"
     "  srun -N 4 --ntasks-per-node 8 ncclsmoke run --transports nccl,socket\n"
     "  ncclsmoke run --rank 0 --world-size 2 --master-addr node-0 --transports socket"},
    {"launch",
     "  ncclsmoke launch -n 4\n"
     "  ncclsmoke launch --nnodes 2 --node-rank 0 --master-addr node-0 -n 8 --transports nccl"},
    {"store", "  ncclsmoke store serve --port 29500 --max-total-bytes 512M"},
    {"store serve", "  ncclsmoke store serve --port 29500 --max-total-bytes 512M --duration 3600"},
    {"store check", "  ncclsmoke store check --host node-0 --port 29500 --dialect legacy"},
    {"store selftest", "  ncclsmoke store selftest"},
    {"history", "  ncclsmoke history list --history runs.sqlite --since 7d"},
    {"history import", "  ncclsmoke history import --history runs.sqlite ncclsmoke-runs/"},
    {"history list", "  ncclsmoke history list --history runs.sqlite --cluster eks-a --since 7d"},
    {"history prune", "  ncclsmoke history prune --history runs.sqlite --older-than 90d --vacuum"},
    {"baseline", "  ncclsmoke baseline learn --history runs.sqlite --profiles p.yaml --profile h200x8"},
    {"baseline learn",
     "  ncclsmoke baseline learn --history runs.sqlite --profiles p.yaml --profile h200x8 "
     "--write p.yaml"},
    {"report",
     "  ncclsmoke report --history runs.sqlite --since 30d --html report.html\n"
     "  ncclsmoke report --history postgresql://ncclsmoke@db/runs --markdown -"},
    {"publish",
     "  ncclsmoke publish verdict.json --pushgateway http://pushgateway:9091 "
     "--history runs.sqlite"},
};

std::string command_path(const CLI::App* a) {
  std::string path;
  for (; a && a->get_parent(); a = a->get_parent())
    path = a->get_name() + (path.empty() ? "" : " " + path);
  return path;
}

void add_examples(CLI::App& a) {
  for (auto* sub : a.get_subcommands([](CLI::App*) { return true; })) {
    const std::string path = command_path(sub);
    for (const auto& [p, text] : kExamples)
      if (p == path) sub->footer("Example:\n" + text);
    add_examples(*sub);
  }
}

// `ncclsmoke help [COMMAND [SUBCOMMAND]]`: that command's --help on stdout, exit 0.
void add_help_command(CLI::App& app, Action& action) {
  auto names = std::make_shared<std::vector<std::string>>();
  auto* help = app.add_subcommand("help", "Show the help of a command: ncclsmoke help run");
  help->add_option("command", *names, "The command (and subcommand), e.g. store serve");
  help->footer("Example:\n  ncclsmoke help history import");
  help->callback([&app, names, &action] {
    action = [&app, names]() -> int {
      CLI::App* at = &app;
      for (const auto& n : *names) {
        CLI::App* next = nullptr;
        for (auto* sub : at->get_subcommands([](CLI::App*) { return true; }))
          if (sub->get_name() == n) next = sub;
        if (!next) {
          std::vector<std::string> known;
          for (auto* sub : at->get_subcommands([](CLI::App*) { return true; }))
            known.push_back(sub->get_name());
          const std::string near = closest_name(n, known);
          log_error("ncclsmoke: error: no command '" + n + "'" +
                    (near.empty() ? "" : " (did you mean '" + near + "'?)") + " (see '" +
                    (command_path(at).empty() ? "ncclsmoke" : "ncclsmoke " + command_path(at)) +
                    " --help')");
          return kExitUsage;
        }
        at = next;
      }
      // The formatter, not App::help(): that one shows the selected subcommand's (this `help`).
      std::cout << at->get_formatter()->make_help(at, at->get_name(), CLI::AppFormatMode::Normal)
                << std::flush;
      return kExitPass;
    };
  });
}

}  // namespace

int cli_main(int argc, char** argv) {
#ifdef NCCLSMOKE_HAVE_MPI_CHILD
  // The mpi transport's MPI child process (transports/mpi/mpi_transport.h), not a command.
  if (argc > 1 && std::string(argv[1]) == "__mpi-child")
    return transports::mpi_child_main(argc, argv);
#endif
  CLI::App app{"ncclsmoke: rendezvous, mesh and all-reduce smoke test for GPU training clusters."};
  app.name("ncclsmoke");
  app.footer(std::string("Run 'ncclsmoke help COMMAND' (or COMMAND --help) for a command's flags "
                         "and an example.\n\n") +
             kExitCodes);
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
  add_examples(app);
  add_help_command(app, action);

  if (auto code = parse_command_line(app, argc, argv)) return *code;
  try {
    return action ? action() : kExitUsage;
  } catch (const std::exception& e) {
    log_error(std::string("ncclsmoke: error: ") + e.what());
    return kExitFail;
  }
}

}  // namespace ncclsmoke::harness
