#include "harness/run/run_options.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "harness/common/cli_util.h"
#include "harness/run/pairwise_plan.h"
#include "harness/run/set_aside.h"
#include "harness/run/transport_phase.h"
#include "harness/world/launchers.h"
#include "rendezvous/net.h"
#include "transports/options.h"
#include "transports/registry.h"

namespace ncclsmoke::harness {
namespace {

// Each validator returns "" or one line naming the value and what is accepted; CLI11 puts the
// flag's name in front, and parse_command_line prints it and exits 2.

std::string accepted_transports() {
  std::string list;
  for (const auto& b : transports::backends()) list += (list.empty() ? "" : ", ") + b.name;
  return list + "; or none";
}

// --gate's backend settings, from the declarations ("--<backend>-<option> <value> and " each).
std::string gate_settings() {
  std::string out;
  for (const auto* spec : transports::all_options())
    if (!spec->gate_value.empty())
      out += fmt::format("{} {} and ", spec->flags().front(), spec->gate_value);
  return out;
}

// What a gate accepts as its expectation: --profile or any option declared as one.
std::string gate_expectations() {
  std::string out = "--profile";
  for (const auto* spec : transports::all_options())
    if (spec->gate_expectation) out += " or " + spec->flags().front();
  return out;
}

// The help group of every generated backend option starts with this.
constexpr const char* kBackendGroup = "Backend options: ";

// A flag's first long name ("--timeout"), hidden ones too (CLI11's get_name is "" for those).
std::string flag_name(const CLI::Option& flag) {
  return flag.get_lnames().empty() ? "-" + flag.get_snames().front() : "--" + flag.get_lnames().front();
}

// A flag bound to a bool, whose current value run_option_args can read back ("true"/"false").
CLI::Option* add_bool_flag(CLI::App& app, const std::string& name, bool& value,
                           const std::string& help) {
  return app.add_flag(name, value, help)->default_function([&value] {
    return std::string(value ? "true" : "false");
  });
}

CLI::Validator port_check() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        return rendezvous::parse_port(v) ? ""
                                         : "'" + v + "' is not a port (accepted: an integer from 1 to 65535)";
      },
      "PORT");
}

// One flag per declared backend option (transports/registry.h): --<backend>-<option>, plus the
// declaration's older spellings, checked at the door by the declaration the backend reads with.
void add_backend_options(CLI::App& app, RunOptions& o) {
  for (const auto* spec : transports::all_options()) {
    const std::string key = spec->key();
    std::string names;
    for (const auto& f : spec->flags()) names += (names.empty() ? "" : ",") + f;
    const std::string group = fmt::format("{}{}", kBackendGroup, spec->backend);
    if (spec->kind == transports::OptionKind::boolean) {
      app.add_flag_function(names, [&o, key](std::int64_t) { o.backend_options[key] = "true"; },
                            spec->help)
          ->group(group);
      continue;
    }
    auto* opt = app.add_option_function<std::string>(
        names, [&o, key](const std::string& v) { o.backend_options[key] = v; }, spec->help);
    std::string type = spec->kind == transports::OptionKind::size      ? "SIZE"
                       : spec->kind == transports::OptionKind::integer ? "INT"
                                                                       : "TEXT";
    if (spec->kind == transports::OptionKind::choice) {
      type.clear();
      for (const auto& c : spec->choices) type += (type.empty() ? "" : "|") + c;
    }
    opt->type_name(type)->group(group);
    if (spec->kind != transports::OptionKind::string)
      opt->check(CLI::Validator(
          [spec](std::string& v) -> std::string {
            auto why = spec->check(v);
            return why.empty() ? "" : fmt::format("'{}' {}", v, why);
          },
          ""));
    const std::string shown = spec->default_text.empty() ? spec->default_help : spec->default_text;
    if (!shown.empty()) opt->default_str(shown);
  }
}

}  // namespace

std::string check_transports(const std::string& text) {
  if (text == "none") return "";
  std::stringstream ss(text);
  std::string item;
  std::set<std::string> seen;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if (item == "none")
      return "'none' cannot be combined with transports in '" + text + "' (accepted: " +
             accepted_transports() + ")";
    if (!transports::find_backend(item))
      return "unknown transport '" + item + "' in '" + text + "' (accepted: " +
             accepted_transports() + ")";
    if (!seen.insert(item).second)
      return "transport '" + item + "' is listed twice in '" + text + "'";
  }
  if (seen.empty())
    return "'" + text + "' names no transport (accepted: " + accepted_transports() + ")";
  return "";
}

std::string check_port_range(const std::string& text) {
  std::uint16_t lo = 0, hi = 0;
  return rendezvous::parse_port_range(text, lo, hi);
}

void add_run_options(CLI::App& app, RunOptions& o, bool include_world_flags) {
  const std::size_t first_declared = app.get_options().size();
  if (include_world_flags) {
    auto* g = "World (default: the launcher's environment)";
    app.add_option("--rank", o.world.rank, "This process's rank (else the launcher's: RANK, "
                                           "OMPI_COMM_WORLD_RANK, SLURM_PROCID, PET_NODE_RANK, "
                                           "LWS_WORKER_INDEX, JOB_COMPLETION_INDEX, ...)")
        ->type_name("INT")
        ->group(g);
    app.add_option("--world-size", o.world.world_size, "Number of ranks (else WORLD_SIZE, ...)")
        ->type_name("INT")
        ->group(g);
    app.add_option("--local-rank", o.world.local_rank, "Rank on this node (else LOCAL_RANK, ...)")
        ->type_name("INT")
        ->group(g);
    app.add_option("--master-addr", o.world.master_addr, "Rank 0's address (else MASTER_ADDR)")
        ->group(g);
    // A bad flag is a usage error here (exit 2); a bad MASTER_PORT variable stays a
    // CONFIG_INVALID finding in the verdict (world.cpp): it comes from the environment.
    app.add_option("--master-port", o.world.master_port,
                   "Rank 0's store port, 1-65535 (else MASTER_PORT, default 29500)")
        ->check(port_check())
        ->group(g);
    app.add_option("--node-name", o.world.node_name, "Node name (else NODE_NAME, else hostname)")
        ->group(g);
    app.add_option("--launcher", o.world.launcher,
                   fmt::format("Whose environment to read: {} (harness/world/launchers.cpp; auto "
                               "detects them in that order)",
                               launcher_choices()))
        ->check(CLI::Validator(
            [](std::string& v) -> std::string {
              std::string l = v;
              for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
              if (l == "auto" || l == "flags" || launcher_named(l)) return "";
              return fmt::format("'{}' is not a launcher (accepted: {})", v, launcher_choices());
            },
            "LAUNCHER"))
        ->group(g)
        ->capture_default_str();
    app.add_option("--store", o.world.store,
                   "Join a store someone else hosts, HOST:PORT (IPv6 as [addr]:port): every "
                   "rank, rank 0 too, is a client (default: rank 0 hosts it, or torchrun's agent "
                   "when TORCHELASTIC_USE_AGENT_STORE=True)")
        ->group(g);
    app.add_option("--job-id", o.world.job_id,
                   "Namespace of this run's store keys, so jobs sharing a store never mix (else "
                   "NCCLSMOKE_JOB_ID, TORCHELASTIC_RUN_ID, SLURM_JOB_ID.SLURM_STEP_ID, Open MPI's "
                   "job id, the PyTorchJob / Indexed Job name)")
        ->group(g);
  }
  auto* d = "Deadlines (seconds)";
  app.add_option("--connect-timeout", o.connect_timeout_s, "Reach the master's store")
      ->check(seconds_check(false))->group(d)->capture_default_str();
  app.add_option("--join-timeout", o.join_timeout_s, "Rank 0 waits this long for every rank")
      ->check(seconds_check(false))->group(d)->capture_default_str();
  app.add_option("--mesh-timeout", o.mesh_timeout_s, "The whole rank-to-rank probe (plus 1 s for each 1,024 ranks)")
      ->check(seconds_check(false))->group(d)->capture_default_str();
  app.add_option("--pair-timeout", o.pair_timeout_s, "One rank-to-rank connection")
      ->check(seconds_check(false))->group(d)->capture_default_str();
  app.add_option("--timeout", o.timeout_s, "The whole run")
      ->check(seconds_check(false))->group(d)->capture_default_str();
  auto* n = "Network";
  app.add_option("--store-bind", o.store_bind,
                 "Address rank 0's store listens on (default: every address, dual-stack)")
      ->group(n);
  app.add_option("--job-token-file", o.job_token_file,
                 "File holding the job token every store value is signed with (else "
                 "NCCLSMOKE_JOB_TOKEN, else NCCLSMOKE_JOB_TOKEN_FILE; e.g. a mounted Secret; one "
                 "trailing newline is stripped). Without a token the store is unauthenticated")
      ->group(n);
  app.add_option("--mesh-bind", o.mesh_bind,
                 "Address the mesh probe listens on (default: the address used to reach the store)")
      ->group(n);
  app.add_option("--mesh-port-range", o.mesh_port_range,
                 "Ports the mesh probe may listen on: a port or a range, e.g. 30000-30100 "
                 "(default: ephemeral)")
      ->check(CLI::Validator(check_port_range, "A-B"))
      ->group(n);
  app.add_option("--mesh-threshold", o.mesh_threshold,
                 "Probe all pairs up to this many ranks; ring + random peers above")
      ->check(CLI::Range(std::size_t{2}, std::size_t{1} << 20))->group(n)->capture_default_str();
  app.add_option("--mesh-random-peers", o.mesh_random_peers,
                 "Random peers per rank above the threshold")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1024}))->group(n)->capture_default_str();
  auto* t = "Transports";
  app.add_option("--transports", o.transports,
                 "Comma-separated transports to run: " + accepted_transports())
      ->check(CLI::Validator(check_transports, "LIST"))
      ->group(t)->capture_default_str();
  app.add_option("--min-bytes", o.min_bytes, "Smallest message size")
      ->transform(size_value(1, transports::kMaxSize))->type_name("SIZE")->group(t)
      ->default_str(transports::size_text(o.min_bytes));
  app.add_option("--max-bytes", o.max_bytes, "Largest message size")
      ->transform(size_value(1, transports::kMaxSize))->type_name("SIZE")->group(t)
      ->default_str(transports::size_text(o.max_bytes));
  app.add_option("--gate-bytes", o.gate_bytes,
                 "Size whose busbw the judging step compares (largest measured size <= this)")
      ->transform(size_value(1, transports::kMaxSize))->type_name("SIZE")->group(t)
      ->default_str(transports::size_text(o.gate_bytes));
  app.add_option("--factor", o.factor, "Size multiplier between steps")
      ->check(finite_range(1.01, 1024.0))->group(t)->capture_default_str();
  app.add_option("--iters", o.iters, "Timed iterations per size")
      ->check(CLI::Range(1, 100000))->group(t)->capture_default_str();
  app.add_option("--warmup-iters", o.warmup_iters, "Warm-up iterations per size")
      ->check(CLI::Range(0, 100000))->group(t)->capture_default_str();
  app.add_option("--dtype", o.dtype, "Element type: float32 or bfloat16")
      ->check(CLI::IsMember({"float32", "bfloat16"}))->group(t)->capture_default_str();
  add_bool_flag(app, "--no-check", o.no_check, "Skip the data check (the #wrong column reads n/a)")
      ->group(t);
  app.add_option("--op-timeout", o.op_timeout_s, "Deadline of one collective (seconds)")
      ->check(seconds_check(false))->group(t)->capture_default_str();
  app.add_option("--transport-timeout", o.transport_timeout_s,
                 "Deadline of one transport: connect + sweep (seconds)")
      ->check(seconds_check(false))->group(t)->capture_default_str();
  auto* pw = "Pairwise rounds (a bad node told from a bad link)";
  app.add_flag("--pairwise{always}")
      ->description(
          "After the transports, rounds of disjoint 2-rank all-reduces (every pair up to 16 "
          "ranks, else 3 rounds of different partners): --pairwise or --pairwise=always runs "
          "them, --pairwise=never never; auto (the default) runs them when a transport timed "
          "out, the ring's link stats show a suspect link, or the gate busbw is below the "
          "profile's degraded ratio")
      ->check(CLI::Validator(check_pairwise_mode, ""))
      ->each([&o](const std::string& v) { o.pairwise.mode = parse_pairwise_mode(v); })
      ->default_function([&o] { return pairwise_mode_text(o.pairwise.mode); })
      ->type_name("[=auto|always|never]")
      ->group(pw);
  app.add_option_function<std::string>(
         "--pairwise-rounds",
         [&o](const std::string& v) { o.pairwise_rounds = parse_pairwise_rounds(v); },
         "Rounds: auto (every pair up to 16 ranks, else 3), all (every pair), or N")
      ->check(CLI::Validator(check_pairwise_rounds, "auto|all|N"))
      ->default_function([&o] {
        return o.pairwise_rounds ? pairwise_rounds_text(*o.pairwise_rounds) : std::string("auto");
      })
      ->default_str("auto")
      ->group(pw);
  app.add_option("--pairwise-bytes", o.pairwise.bytes, "Message size of the pairs' all-reduces")
      ->transform(size_value(1, transports::kMaxSize))->type_name("SIZE")
      ->default_str(transports::size_text(static_cast<std::uint64_t>(o.pairwise.bytes)))
      ->group(pw);
  app.add_option("--pairwise-iters", o.pairwise.iters, "Timed all-reduces per pair")
      ->check(CLI::Range(1, 100000))->group(pw)->capture_default_str();
  app.add_option("--pairwise-budget", o.pairwise.budget_s,
                 "Time for every transport's rounds together (seconds; never past --timeout): "
                 "rounds it leaves no time for are not run, and the phase says so")
      ->check(seconds_check(false))->group(pw)->capture_default_str();
  add_backend_options(app, o);
  auto* j = "Judging";
  auto* profiles = app.add_option("--profiles", o.profiles_file,
                                  "Profiles file (YAML or JSON): expected transport identities and "
                                  "baseline bandwidth per node class")
                       ->group(j);
  app.add_option("--profile", o.profile,
                 "Profile to judge this run against (e.g. ci-loopback, p5.48xlarge-efa); without it "
                 "bandwidth is measured but not judged")
      ->needs(profiles)
      ->group(j);
  add_bool_flag(app, "--gate", o.gate,
                fmt::format("Pre-training gate: {}short deadlines (connect 60, join 60, mesh 10, "
                            "transport 45, op 10, whole run 100 s: pods still pulling their image "
                            "count against join) unless given explicitly; needs {}, so there is "
                            "an expectation to fail closed on",
                            gate_settings(), gate_expectations()))
      ->group(j);
  // --gate fills in the deadlines the user did not set (an explicit flag always wins).
  app.parse_complete_callback([&app, &o, first_declared] {
    auto unset = [&app](const char* flag) { return app.get_option(flag)->count() == 0; };
    const auto declared = app.get_options();
    for (std::size_t i = first_declared; i < declared.size(); ++i)
      if (declared[i]->count() > 0) o.given_flags.insert(flag_name(*declared[i]));
    if (!unset("--min-bytes") && !unset("--max-bytes") && o.min_bytes > o.max_bytes)
      throw CLI::ValidationError("--min-bytes", "'" + transports::size_text(o.min_bytes) +
                                                    "' is larger than --max-bytes '" +
                                                    transports::size_text(o.max_bytes) +
                                                    "' (accepted: min <= max)");
    if (!o.gate) return;
    // What a gate does to the backends is in their declarations (transports/options.h).
    bool expected = !o.profile.empty();
    for (const auto* spec : transports::all_options()) {
      const std::string given = o.backend_option(spec->key());
      if (!spec->gate_value.empty() && !given.empty() && given != spec->gate_value)
        throw CLI::ValidationError("--gate", fmt::format("{}: drop {} {}", spec->gate_reason,
                                                         spec->flags().front(), given));
      expected = expected || (spec->gate_expectation && !given.empty());
    }
    if (!expected)
      throw CLI::ValidationError("--gate", fmt::format("needs {}: without an expectation a "
                                                       "broken fabric could still pass",
                                                       gate_expectations()));
    for (const auto* spec : transports::all_options())
      if (!spec->gate_value.empty()) o.backend_options[spec->key()] = spec->gate_value;
    const std::pair<const char*, double*> deadlines[] = {
        {"--connect-timeout", &o.connect_timeout_s}, {"--join-timeout", &o.join_timeout_s},
        {"--mesh-timeout", &o.mesh_timeout_s},       {"--transport-timeout", &o.transport_timeout_s},
        {"--op-timeout", &o.op_timeout_s},           {"--timeout", &o.timeout_s}};
    const double gate_values[] = {60, 60, 10, 45, 10, 100};
    for (size_t i = 0; i < std::size(deadlines); ++i)
      if (unset(deadlines[i].first)) *deadlines[i].second = gate_values[i];
  });
  auto* aside = "Setting bad nodes aside";
  app.add_option("--exclude-hosts", o.exclude_hosts,
                 "Hosts or nodes known bad, comma-separated: a rank on one stops the run after "
                 "the join with HOST_EXCLUDED (no mesh, no transport)")
      ->check(CLI::Validator(check_exclude_hosts, "H,..."))
      ->group(aside);
  app.add_option("--exclude-file", o.exclude_file,
                 "The suspects.txt an earlier failing run wrote beside its verdict.json (one host "
                 "or node a line, '#' comments): its hosts are set aside as with --exclude-hosts")
      ->type_name("FILE")
      ->group(aside);
  add_bool_flag(app, "--slurm-drain", o.slurm_drain,
                "Under Slurm, rank 0 drains the suspect nodes of a failing or degraded run "
                "(scontrol, Reason \"ncclsmoke <code> run <id>\") and resumes the nodes ncclsmoke "
                "drained after a passing run; other drains are never touched")
      ->group(aside);
  app.add_option_function<std::string>(
         "--slurm-drain-budget",
         [&o](const std::string& v) { o.slurm_drain_budget = *parse_drain_budget(v, nullptr); },
         "With --slurm-drain: the most nodes ncclsmoke holds drained at once, counted across "
         "runs by its drain reason (N nodes, or P% of the job's partition, at least one); a "
         "suspect past it is not drained and the verdict's slurm-drain phase says why")
      ->check(CLI::Validator(
          [](std::string& v) {
            std::string why;
            return parse_drain_budget(v, &why) ? std::string() : why;
          },
          ""))
      ->type_name("N|P%")
      ->default_function([&o] { return o.slurm_drain_budget.text(); })
      ->default_str(DrainBudget{}.text())
      ->group(aside);
  auto* out = "Output";
  app.add_option("--history", o.history_path,
                 "Run history: an SQLite file (created if absent) or a "
                 "postgresql://user:pass@host/db URL; rank 0 records the global verdict")
      ->group(out);
  app.add_option("--out-dir", o.out_dir,
                 "Directory for verdict.rank<N>.json (every rank) and verdict.json (rank 0)")
      ->group(out)->capture_default_str();
  app.add_option("--json", o.json_path, "Path of rank 0's global verdict (default OUT_DIR/verdict.json)")
      ->group(out);
  auto* quiet = add_bool_flag(app, "--quiet", o.quiet, "Print nothing but errors")->group(out);
  add_bool_flag(app, "--verbose", o.verbose,
                "Every rank logs its progress on stderr, not only rank 0 (also "
                "NCCLSMOKE_LOG_LEVEL=debug|info|warn|error|off)")
      ->group(out)
      ->excludes(quiet);
  app.add_option("--log-format", o.log_format,
                 "Shape of the log lines on stderr: text, or json (one object a line: time, "
                 "rank, host, level, phase, message, code; for Loki or Fluent Bit; also "
                 "NCCLSMOKE_LOG_FORMAT)")
      ->check(CLI::IsMember({"text", "json"}, CLI::ignore_case))
      ->group(out);
  app.add_option("--color", o.color,
                 "Colour the level of log lines: auto (stderr is a terminal and NO_COLOR is "
                 "unset), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}, CLI::ignore_case))
      ->group(out)
      ->capture_default_str();
  app.add_option("--table-format", o.table_format,
                 "The bandwidth table: text (nccl-tests' columns on stdout, live rows as measured "
                 "and the summary at the end), or csv / json (stdout holds the summary table "
                 "alone, for scripts; the human summary goes to stderr)")
      ->check(CLI::IsMember({"text", "csv", "json"}, CLI::ignore_case))
      ->group(out)
      ->capture_default_str();
  app.add_option("--hold-after-join", o.hold_after_join_s,
                 "Testing aid: pause this long after the join barrier")
      ->check(seconds_check(true, "--hold-after-join"))->group("");
}

std::vector<std::string> run_option_args(const RunOptions& o) {
  // The flags are read from their declarations: `o` and a default RunOptions are each bound to a
  // throw-away command, and a flag whose value differs from its default, or that was given, goes
  // out as the text `run` parses back into the same value. A new flag needs no line here.
  RunOptions now = o, defaults;
  CLI::App with_now, with_defaults;
  add_run_options(with_now, now, false);
  add_run_options(with_defaults, defaults, false);
  const auto flags = with_now.get_options(), default_flags = with_defaults.get_options();
  std::vector<std::string> a;
  for (std::size_t i = 0; i < flags.size(); ++i) {
    CLI::Option* flag = flags[i];
    // --help is no value; backend options are a map, forwarded below.
    if (flag == with_now.get_help_ptr() || flag->get_group().rfind(kBackendGroup, 0) == 0) continue;
    const std::string name = flag_name(*flag);
    const std::string value = flag->capture_default_str()->get_default_str();
    const bool given = o.given_flags.count(name) > 0;
    if (!given && value == default_flags[i]->capture_default_str()->get_default_str()) continue;
    if (flag->get_expected_max() == 0) {  // a flag: present or not, or with its value after '='
      if (value == "true")
        a.push_back(name);
      else if (value != "false")
        a.push_back(name + "=" + value);
    } else {
      a.push_back(name);
      a.push_back(value);
    }
  }
  // Every given backend option, under its first spelling (the one --help shows).
  for (const auto* spec : transports::all_options()) {
    auto it = o.backend_options.find(spec->key());
    if (it == o.backend_options.end()) continue;
    if (spec->kind == transports::OptionKind::boolean) {
      if (it->second == "true") a.push_back(spec->flags().front());
      continue;
    }
    a.push_back(spec->flags().front());
    a.push_back(it->second);
  }
  return a;
}

std::map<std::string, std::string> backend_options_for_run(const RunOptions& o, int rank,
                                                           int local_rank) {
  return transports::with_rank_defaults(o.backend_options, {rank, local_rank, o.out_dir});
}

}  // namespace ncclsmoke::harness
