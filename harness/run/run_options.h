#pragma once
// Options of `ncclsmoke run`, shared by the run command and the local launcher (which forwards
// them to every rank it starts).
#include "harness/common/cli_fwd.h"
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/actions/drain_budget.h"
#include "harness/common/cli_util.h"  // kMaxSeconds, seconds_check
#include "harness/world/world.h"
#include "results/judging/observations.h"  // PairwiseAsk
#include "results/verdict/suspects.h"

namespace ncclsmoke::harness {

struct RunOptions {
  WorldFlags world;
  // Deadlines, seconds. Defaults are seconds, not torch's 5-30 minutes.
  double connect_timeout_s = 30;  // reach the master's store (DNS + TCP, retried)
  double join_timeout_s = 30;     // rank 0 waits this long for every rank to join
  double mesh_timeout_s = 10;     // the whole mesh probe
  double pair_timeout_s = 3;      // one rank-to-rank connection
  double timeout_s = 120;         // the whole run; past it a RUN_TIMEOUT verdict is written
  // Store
  std::string store_bind;         // rank 0's store listens here ("" = every address, dual-stack)
  std::string job_token_file;     // --job-token-file: the job token's file (harness/world/job_token.h)
  // Mesh
  std::string mesh_bind;          // "" = the local address used to reach the store
  std::string mesh_port_range;    // "N" or "A-B" (rendezvous::parse_port_range); "" = not given: ephemeral
  std::size_t mesh_threshold = 64;
  std::size_t mesh_random_peers = 4;
  // Output
  std::string out_dir = ".";      // verdict.rank<N>.json (every rank), verdict.json (rank 0)
  std::string json_path;          // overrides the global verdict's path
  bool quiet = false;
  std::string log_format;  // --log-format text|json ("" : NCCLSMOKE_LOG_FORMAT, else text)
  std::string color = "auto";  // --color auto|always|never (harness/common/log.h)
  bool verbose = false;           // every rank logs its progress (default: rank 0 only)
  std::string table_format = "text";  // --table-format text|csv|json (harness/common/summary_tables.h)
  // Transports (issue: host transports). "none" runs no transport.
  std::string transports = "socket";
  // Sizes in bytes, read at the door by the one size parser (transports/options.h).
  std::size_t min_bytes = std::size_t{1} << 20;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t gate_bytes = std::size_t{64} << 20;
  double factor = 2;
  int iters = 5;
  int warmup_iters = 1;
  std::string dtype = "float32";
  bool no_check = false;
  double op_timeout_s = 10;         // one collective
  double transport_timeout_s = 60;  // one transport: open + sweep
  // Pairwise rounds after the transports (harness/run/pairwise_step.h, harness/run/pairwise_plan.h):
  // --pairwise[=auto|always|never] (the flag alone: always), --pairwise-bytes, --pairwise-iters,
  // --pairwise-budget (seconds, within --timeout), with their defaults (results::PairwiseAsk's).
  results::PairwiseAsk pairwise;
  // --pairwise-rounds: nullopt for auto (every pair up to 16 ranks, else 3), 0 for all, else N.
  std::optional<int> pairwise_rounds;
  // Backend options (transports/options.h), by key ("socket.chunk" -> "512K"): the text of each
  // generated --<backend>-<option> flag that was given, already checked at the door; an option
  // not given is absent (its declared default applies). backend_options_for_run() adds the
  // per-rank values. A backend's option is declared in its folder, never here.
  std::map<std::string, std::string> backend_options;
  // The text given for a backend option ("" when it was not given).
  std::string backend_option(const std::string& key) const {
    auto it = backend_options.find(key);
    return it == backend_options.end() ? std::string() : it->second;
  }
  // Judging: compare with a profile's expected identities and baselines (results/judging/profile.h)
  std::string profiles_file;        // YAML/JSON profiles file (a ConfigMap in a cluster)
  std::string profile;              // profile name in that file
  bool gate = false;                // pre-training gate: pin + short deadlines (run_options.cpp)
  // Any of --min-bytes/--max-bytes/--gate-bytes given. Without them a gate measures exactly the
  // profile band's gate size (one size: quick, and never BASELINE_MISSING for a size mismatch).
  bool sweep_explicit() const {
    return given_flags.count("--min-bytes") || given_flags.count("--max-bytes") ||
           given_flags.count("--gate-bytes");
  }
  std::string history_path;         // rank 0 records the global verdict in this SQLite history
  // Set aside (harness/run/set_aside.h): hosts or nodes known bad, by flag and by an earlier run's
  // suspects file; a rank on one is HOST_EXCLUDED after the join. --slurm-drain: rank 0 drains
  // the suspects of a failing run and resumes its own drains after a pass (harness/actions/slurm_drain.h).
  std::string exclude_hosts;        // --exclude-hosts H,...
  std::string exclude_file;         // --exclude-file F
  bool slurm_drain = false;
  DrainBudget slurm_drain_budget;   // --slurm-drain-budget N|P%
  // Testing aid: every rank pauses this long after the join barrier (to kill one mid-run).
  double hold_after_join_s = 0;
  // The run flags given on the command line, by their first long name ("--timeout"): a given
  // flag is forwarded by run_option_args even at its default value, since what `--gate` fills in
  // depends on whether a flag was given.
  std::set<std::string> given_flags;
};

// Input is checked at the door (each a usage error, exit 2, one line naming flag, value and the
// accepted values): --transports items must be backends of transports/registry.h (or "none"
// alone); --master-port and --mesh-port-range ports are 1-65535 with A <= B (one grammar:
// rendezvous/net.h); every deadline is a
// finite number of seconds > 0 (>= 0 for --hold-after-join) and at most kMaxSeconds, so no
// NaN/inf/1e308 reaches the deadline arithmetic; sizes go through the one size parser
// (transports/options.h) and an explicit --min-bytes must not exceed an explicit --max-bytes;
// each backend option is checked by its declaration (name, kind, range); --factor is finite.
// "" when `text` is an accepted --transports value, else the one-line reason.
std::string check_transports(const std::string& text);
// "" when `text` is an accepted --mesh-port-range, else the reason: the grammar is
// rendezvous/net.h's parse_port_range ("N" or "A-B", 1 <= A <= B <= 65535), the one the mesh
// probe and the liveness watch read the range with.
std::string check_port_range(const std::string& text);

// Declares the run flags on `app` (the run subcommand, or the launcher that forwards them).
void add_run_options(CLI::App& app, RunOptions& options, bool include_world_flags);

// The non-world flags of `options` as command-line arguments that `run` parses back into the
// same options: each flag that differs from its default or was given (the launcher forwards them).
std::vector<std::string> run_option_args(const RunOptions& options);

// The options one rank's transports get (TransportContext::options): the given backend options,
// plus each option's per-rank default (transports/options.h: rank_default) where none was given.
std::map<std::string, std::string> backend_options_for_run(const RunOptions& options, int rank,
                                                           int local_rank);

}  // namespace ncclsmoke::harness
