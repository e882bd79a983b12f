// `ncclsmoke baseline learn`: proposes profile baselines from the run history (the median of the
// newest passing runs per transport, world size and gate size; results/judging/baseline_learn.h), prints
// the diff against the profiles file and, with --write, writes the merged file atomically.
//
// Exit codes: 0 proposals made (and written with --write); 2 usage or unreadable input (flags,
// profiles file - an alias bomb too, refused by results/judging/profile.h's node budget -, unknown
// profile, missing history file); 4 nothing to propose (no passing runs, or no key with
// --min-runs runs) - the file is then not written; 7 (results::kExitHistoryUnusable) the history
// exists but cannot be read (corrupt, locked, I/O error ...), with the hint for that cause.
#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include "harness/cli/commands.h"
#include "harness/common/log.h"
#include "results/history/history.h"
#include "results/judging/baseline_learn.h"
#include "results/judging/profile.h"
#include "results/verdict/write.h"

namespace ncclsmoke::harness {
namespace {

namespace fs = std::filesystem;
using namespace ncclsmoke::results;

// The history's rows as baseline learning reads them (results/judging/baseline_learn.h): judging
// does not include the history, so the command that reads it converts them here.
LearnGate learn_gate(const HistoryGate& g) {
  return {.run_id = g.run_id,
          .started_unix = g.started_unix,
          .verdict = g.verdict,
          .profile = g.profile,
          .world_size = g.world_size,
          .transport = g.transport,
          .gate_bytes = g.gate_bytes,
          .busbw_gbps = g.busbw_gbps,
          .synthetic = g.synthetic};
}
std::vector<LearnFinding> learn_findings(const std::vector<HistoryFinding>& findings) {
  std::vector<LearnFinding> out;
  out.reserve(findings.size());
  for (const auto& f : findings) out.push_back({f.run_id, f.code, f.severity});
  return out;
}

struct LearnFlags {
  std::string history;
  std::string profiles_file;
  std::string profile;
  int last = 10;
  int min_runs = 3;
  std::string since = "30d";
  std::string write;
  bool include_degraded = false;
};

int usage(const std::string& msg) {
  log_error("ncclsmoke baseline learn: error: " + msg);
  return kExitUsage;
}

int learn(const LearnFlags& f) {
  std::vector<Profile> profiles;
  try {
    profiles = load_profiles_file(f.profiles_file);
  } catch (const ProfileError& e) {
    return usage(std::string("--profiles: ") + e.what());
  }
  if (!find_profile(profiles, f.profile)) {
    std::string names;
    for (const auto& p : profiles) names += (names.empty() ? "" : ", ") + p.name;
    return usage("--profile: profile '" + f.profile + "' is not in " + f.profiles_file +
                 " (profiles there: " + (names.empty() ? "none" : names) + ")");
  }
  double since_unix = 0;
  try {
    since_unix = parse_since(f.since, unix_now());
  } catch (const std::invalid_argument& e) {
    return usage(std::string("--since: ") + e.what());
  }
  std::error_code ec;
  if (!is_history_url(f.history) && !fs::exists(f.history, ec))  // not a file: exit 7
    return usage("--history: '" + f.history + "' does not exist");

  std::vector<LearnGate> gates;
  std::vector<HistoryRun> all_runs;
  std::vector<LearnFinding> degraded;  // the degraded runs' findings: learn_baselines picks which count
  try {
    History h(f.history, /*create=*/false);
    HistoryQuery q;
    q.profile = f.profile;
    q.since_unix = since_unix;
    all_runs = h.runs(q);
    if (f.include_degraded) {
      HistoryQuery qd = q;
      qd.verdict = Outcome::degraded;
      degraded = learn_findings(h.findings(qd));
    } else {
      q.verdict = Outcome::pass;
    }
    for (const auto& g : h.gates(q)) gates.push_back(learn_gate(g));
  } catch (const HistoryError& e) {
    log_error(std::string("ncclsmoke baseline learn: error: --history: ") + e.what());
    return kExitHistoryUnusable;
  }

  LearnOptions o;
  o.profile = f.profile;
  o.last = f.last;
  o.min_runs = f.min_runs;
  o.include_degraded = f.include_degraded;
  o.degraded_findings = std::move(degraded);
  LearnResult r;
  try {
    r = learn_baselines(gates, profiles, o);
  } catch (const LearnError& e) {
    return usage(e.what());
  }

  if (r.runs_accepted == 0) {
    std::map<std::string, int> verdicts;
    for (const auto& run : all_runs) ++verdicts[results::to_string(run.verdict)];
    std::string seen;
    for (const auto& [v, n] : verdicts) seen += (seen.empty() ? "" : ", ") + std::to_string(n) + " " + v;
    log_error("ncclsmoke baseline learn: no passing runs of profile '" + f.profile + "' in " +
              redact_history_url(f.history) + " since " + utc_time(since_unix) + " with a usable gate number" +
              " (runs of that profile there: " + (seen.empty() ? "none" : seen) + ")" +
              (f.include_degraded ? "" : "; degraded runs count only with --include-degraded") +
              "; nothing proposed");
    return kExitInconclusive;
  }
  std::cout << diff_text(r, f.profiles_file);
  if (r.written() == 0) {
    log_error("ncclsmoke baseline learn: no key has " + std::to_string(f.min_runs) +
              " passing runs (--min-runs); nothing proposed" +
              (f.write.empty() ? "" : ", " + f.write + " not written"));
    return kExitInconclusive;
  }
  if (!f.write.empty()) {
    std::string header =
        "ncclsmoke profiles: " + f.profiles_file + " with the baselines of profile '" + f.profile +
        "' learned from " + redact_history_url(f.history) + " at " + utc_time(unix_now()) +
        " by `ncclsmoke baseline learn`.\nComments of the input file are not carried over; the "
        "field reference is results/judging/profiles.example.yaml.";
    try {
      std::string text = merged_yaml(r, header);
      write_text_atomically(f.write, text);
    } catch (const LearnError& e) {
      log_error(std::string("ncclsmoke baseline learn: error: ") + e.what());
      return kExitFail;
    } catch (const WriteError& e) {
      return usage(std::string("--write: ") + e.what());
    }
    std::cout << "wrote " << f.write << " (" << r.written() << " band"
              << (r.written() == 1 ? "" : "s") << " of profile " << f.profile << " updated)\n";
  }
  return kExitPass;
}

}  // namespace

void register_baseline_command(CLI::App& app, Action& action) {
  auto* baseline = app.add_subcommand("baseline", "Learn profile baselines from the run history");
  baseline->require_subcommand(1);
  auto f = std::make_shared<LearnFlags>();
  auto* learn_cmd = baseline->add_subcommand(
      "learn",
      "Propose busbw baselines for a profile: the median of the newest passing runs per "
      "(transport, world size, gate size); prints the diff against the profiles file");
  learn_cmd->add_option("--history", f->history, "Run history: an SQLite file or a postgresql:// URL (see `ncclsmoke history`)")
      ->required();
  learn_cmd->add_option("--profiles", f->profiles_file, "Profiles file (YAML or JSON)")->required();
  learn_cmd->add_option("--profile", f->profile, "Profile to learn baselines for")->required();
  learn_cmd->add_option("--last", f->last, "Newest passing runs used per key")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  learn_cmd->add_option("--min-runs", f->min_runs,
                        "Keys with fewer runs are listed but not proposed")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  learn_cmd->add_option("--since", f->since,
                        "Only runs started since: 30d, 36h, 90m, 3600s or an RFC 3339 time")
      ->capture_default_str();
  learn_cmd->add_flag("--include-degraded", f->include_degraded,
                      "Also learn from degraded runs whose only warnings are "
                      "BANDWIDTH_REGRESSION (a baseline set too high degrades healthy runs)");
  learn_cmd->add_option("--write", f->write,
                        "Write the whole profiles file with the proposed bands merged in (atomic; "
                        "may name the --profiles file itself)");
  learn_cmd->callback([f, &action] { action = [f] { return learn(*f); }; });
}

}  // namespace ncclsmoke::harness
