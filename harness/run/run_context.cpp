#include "harness/run/run_context.h"

#include <sys/utsname.h>

#include "results/judging/judge_run.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "harness/common/command.h"
#include "harness/common/env.h"
#include "harness/common/progress.h"
#include "harness/world/job_identity.h"
#include "ncclsmoke/version.h"
#include "results/verdict/env_allowlist.h"
#include "results/verdict/write.h"

namespace ncclsmoke::harness {

namespace fs = std::filesystem;

RunContext::RunContext(RunOptions options, std::string env)
    : o(std::move(options)), log_env(std::move(env)), start(Clock::now()) {
  run_deadline = start + ms(o.timeout_s);
  steps_deadline = run_deadline - std::min(kVerdictReserve, ms(o.timeout_s) / 4);
  record.verdict = results::new_verdict(-1);
  // Given by launch (checked at the door, run_command.cpp), so its run folder and every verdict
  // of the run carry one id; rank 0's is adopted by the others through the store as always.
  if (auto id = harness::env(kRunIdEnv); id && run_id_problem(*id).empty())
    record.verdict.run_id = *id;
  run_id = record.verdict.run_id;
  record.verdict.env = results::allowlisted_env();
  record.verdict.versions["ncclsmoke"] = kVersion;
  // The kernel shapes the network stack: judging compares it across ranks (CONFIG_SKEW, info).
  if (struct utsname u; uname(&u) == 0) record.verdict.versions["kernel"] = u.release;
}

std::string RunContext::job_namespace() const {
  return fmt::format("{}/{}", world.job_id.empty() ? std::string("local") : world.job_id,
                     world.restart_count);
}

std::vector<std::string> RunContext::requested_transports() const {
  std::vector<std::string> out;
  std::stringstream ss(o.transports);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty() && item != "none") out.push_back(item);
  return out;
}

namespace {
// A failed phase is an error line, a passed or skipped one info, and so is an optional phase
// that did not run (the pairwise rounds not needed); anything else (inconclusive, degraded, a
// required phase not run) a warning.
LogLevel phase_log_level(const results::Phase& p) {
  using S = results::PhaseStatus;
  if (p.status == S::fail) return LogLevel::error;
  if (p.status == S::pass || p.status == S::skipped) return LogLevel::info;
  if (p.status == S::not_run && !p.required) return LogLevel::info;
  return LogLevel::warn;
}
}  // namespace

void RunContext::end_step(const std::string& name, results::StepFacts facts,
                          Clock::time_point t0, std::string detail) {
  record.saw({std::move(facts), name, rendezvous::seconds_since(t0), std::move(detail)});
}

std::vector<results::Phase> RunContext::judge_pending_locked() {
  if (record.pending.empty()) return {};
  auto records = std::move(record.pending);
  record.pending.clear();
  auto ended = results::judge_local(record.verdict, records);
  for (auto& r : records) record.judged.push_back(std::move(r));
  return ended;
}

results::JudgedSoFar RunContext::judged_so_far() {
  std::lock_guard lock(record.mu);
  return results::judged_so_far(record.judged);
}

void RunContext::judge_pending() {
  std::vector<results::Phase> ended;
  {
    std::lock_guard lock(record.mu);
    ended = judge_pending_locked();
  }
  for (const auto& p : ended) log_phase_end(p);
}

void RunContext::log_phase_end(const results::Phase& p) const {
  log_line(phase_log_level(p),
           phase_end_line(p.name, results::to_string(p.status), p.duration_s, p.detail));
}

void RunContext::took(const results::NextStep& next) {
  for (const auto& p : next.not_run)
    log_info(phase_end_line(p.name, results::to_string(p.status), p.duration_s, p.detail));
  std::lock_guard lock(record.mu);
  record.pending.push_back({results::taken(next), {}, 0, {}});
  judge_pending_locked();  // logged above, at info whatever the phase
}

std::string RunContext::local_path() const {
  std::string name = have_world ? fmt::format("verdict.rank{}.json", world.rank)
                                : fmt::format("verdict.invalid-config.{}.json", ::getpid());
  return (fs::path(o.out_dir) / name).string();
}

std::string RunContext::global_path() const {
  return o.json_path.empty() ? (fs::path(o.out_dir) / "verdict.json").string() : o.json_path;
}

void RunContext::write(const std::string& path, const results::Verdict& v) {
  try {
    results::write_json_atomically(path, results::to_json(v));
  } catch (const std::exception& e) {
    log_error(fmt::format("ncclsmoke: {}: error: the {} verdict ({}) was NOT written to {}: {} "
                          "(exit {}; free space or fix --out-dir/--json and run again)",
                          self(), v.scope, v.verdict, path, e.what(), kExitVerdictNotWritten));
    write_failed = true;
  }
}

int RunContext::exit_code(const results::Verdict& shown) const {
  return write_failed ? kExitVerdictNotWritten : shown.exit_code;
}

}  // namespace ncclsmoke::harness
