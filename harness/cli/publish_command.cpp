// `ncclsmoke publish VERDICT.json`: the CronJob's last step on rank 0 — history, textfile,
// Pushgateway, exit by policy. The work is in cronjob/publish.h; this file is only the CLI.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "cronjob/publish.h"
#include "harness/cli/commands.h"
#include "harness/common/cli_util.h"
#include "harness/common/env.h"
#include "harness/common/log.h"

namespace ncclsmoke::harness {
namespace {

struct PublishFlags {
  cronjob::PublishOptions options;
  std::string fail_on = "fail,degraded,inconclusive";
};

std::string default_cluster() {
  return env("NCCLSMOKE_CLUSTER").value_or("default");
}

}  // namespace

void register_publish_command(CLI::App& app, Action& action) {
  auto flags = std::make_shared<PublishFlags>();
  flags->options.cluster = default_cluster();
  auto* cmd = app.add_subcommand(
      "publish",
      "Publish a verdict: append it to the history, write a node-exporter textfile, push metrics "
      "to a Pushgateway (HTTP POST, grouping job/cluster/profile), exit by policy. With neither "
      "--pushgateway nor --textfile the metrics are printed on stdout.");
  cmd->footer(
      "Exit codes: 0 delivered and the verdict is not in --fail-on; 1 fail, 3 degraded, "
      "4 inconclusive (the verdict's code when it is in --fail-on; wins over 5 and 6); 2 usage "
      "error or unreadable/invalid verdict file; 5 metrics not delivered (Pushgateway or textfile "
      "failed; the history was still written); 6 the history could not be written (the verdict is "
      "then spooled to HISTORY.spool/ - for a postgresql:// history $NCCLSMOKE_SPOOL_DIR, else "
      "./ncclsmoke-history.spool - and stored by the next publish that can write the history).");
  auto& o = flags->options;
  cmd->add_option("verdict", o.verdict_path, "The verdict JSON (rank 0's OUT_DIR/verdict.json)")
      ->required();
  cmd->add_option("--pushgateway", o.pushgateway_url,
                  "Pushgateway base URL, e.g. http://pushgateway.monitoring:9091");
  cmd->add_option("--textfile", o.textfile_dir,
                  "Directory of node-exporter's textfile collector: writes DIR/ncclsmoke.prom "
                  "atomically");
  cmd->add_option("--history", o.history_path,
                  "Run history to append the run to: an SQLite file or a "
                  "postgresql://user:pass@host:port/db URL (the password is never printed)");
  cmd->add_option("--suspects-dir", o.suspects_dir,
                  "Write the run's suspect nodes (the format `run --exclude-file` reads) to "
                  "DIR/suspects.txt (the latest run) and DIR/suspects-<run id>.txt");
  cmd->add_option("--job", o.job, "Pushgateway job name")->capture_default_str();
  cmd->add_option("--cluster", o.cluster,
                  "Cluster label and grouping key, also recorded in the history (default "
                  "$NCCLSMOKE_CLUSTER, else \"default\")");
  cmd->add_option("--fail-on", flags->fail_on,
                  "Verdicts that make the exit code non-zero: comma list of fail, degraded, "
                  "inconclusive, or none")
      ->capture_default_str()
      ->check([](const std::string& s) {
        try {
          cronjob::parse_fail_on(s);
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      });
  cmd->add_option("--timeout", o.timeout_s, "Seconds per push attempt (connect and total)")
      ->check(finite_range(0.1, 600.0))
      ->capture_default_str();
  cmd->add_option("--retries", o.retries,
                  "Push retries after the first attempt (jittered exponential backoff)")
      ->check(CLI::Range(0, 20))
      ->capture_default_str();
  cmd->add_flag("--quiet", o.quiet, "Print only warnings, errors and a non-zero outcome");
  cmd->callback([flags, &action] {
    action = [flags] {
      cronjob::PublishOptions o = flags->options;
      try {
        o.fail_on = cronjob::parse_fail_on(flags->fail_on);
        return cronjob::publish(o, std::cout, std::cerr);
      } catch (const cronjob::PublishUsageError& e) {
        log_error(std::string("ncclsmoke: error: ") + e.what());
        return kExitUsage;
      }
    };
  });
}

}  // namespace ncclsmoke::harness
