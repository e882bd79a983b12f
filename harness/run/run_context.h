#pragma once
// What every step of one `ncclsmoke run` shares: the options, the world once discovered, the
// run's clock and deadline, the profile, and the verdict being built (RunRecord).
//
// Locking: RunRecord::mu guards the verdict and the records not judged yet. Three threads take
// it: the run thread (the steps record, the session judges), the liveness watch's callbacks
// (harness/run/liveness.h: they only record) and the watchdog (harness/run/run_session.h: it judges what
// is left). Liveness's own lock may be taken while mu is held, never the other way round:
// stopping the watch joins its thread, whose callbacks take mu.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "harness/common/cli_util.h"
#include "harness/common/env.h"
#include "harness/common/log.h"
#include "harness/run/run_options.h"
#include "harness/world/world.h"
#include "node/nic_health.h"
#include "rendezvous/deadline.h"
#include "rendezvous/rank_ref.h"
#include "results/judging/next_step.h"
#include "results/judging/profile.h"
#include "results/judging/step_records.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::harness {

using rendezvous::Clock;
using rendezvous::Deadline;
using rendezvous::Millis;

// Flags are checked at the door (run_options.cpp); this stays defined for any other caller: a
// non-finite or non-positive value is no time at all, a huge one is capped.
inline Millis ms(double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0) return Millis(0);
  return Millis(static_cast<long long>(std::min(seconds, kMaxSeconds) * 1000));
}

// The verdict under construction and its lock. The steps and the liveness watch record what
// they saw (saw); results::judge_local turns the records into findings and phases (the session
// calls it after every step, at the end, and the watchdog does).
struct RunRecord {
  std::mutex mu;
  results::Verdict verdict;  // guarded by mu
  std::vector<results::StepRecord> pending;  // guarded by mu: seen, not judged yet
  // guarded by mu: every record judged so far, in the order seen (append-only): what next_step's
  // judged_so_far reads.
  std::vector<results::StepRecord> judged;

  void saw(results::StepRecord r) {
    std::lock_guard lock(mu);
    pending.push_back(std::move(r));
  }

};

// What the run keeps back from its steps for the verdict: a quarter of --timeout, at most 1 s.
inline constexpr Millis kVerdictReserve{1000};
// How long past --timeout the watchdog waits for the verdict the steps are writing.
inline constexpr Millis kWatchdogGrace{300};

// A fixed timeout at fleet size: the store answers every rank's reads and posts, so each round
// trip, and the roster's way to the last rank, take longer with the world. The mesh probe's
// deadline and the store client's per-request timeout get one second more for each 1,024 ranks
// (nothing under 1,024; 16 s at 16,384, where the roster reached the last of 16,383 simulated
// ranks 18-23 s after rank 0 published it on 2 cores: bench/fleet_sim.py).
inline double grown_with_world(double seconds, int world_size) {
  return seconds + static_cast<double>(std::max(0, world_size) / 1024);
}

struct RunContext {
  RunContext(RunOptions options, std::string log_env);
  RunContext(const RunContext&) = delete;
  RunContext& operator=(const RunContext&) = delete;

  const RunOptions o;  // as parsed at the door; no step rewrites them
  // Where the launcher's variables are read (RANK, SLURM_*, ...): the process's, or the map an
  // in-process run gives each of its ranks.
  Environment environment = process_environment();
  std::string log_env;               // NCCLSMOKE_LOG_LEVEL as given ("" unset)
  LogLevel log_level = LogLevel::warn;  // set before the rank is known; used once it is
  Clock::time_point start;
  // --timeout from the start. The steps (join, mesh, transports) stop at steps_deadline, which
  // leaves kVerdictReserve for what follows them (post, gather, merge, write), so the verdict is
  // on disk by run_deadline; the watchdog is only the backstop, kWatchdogGrace later.
  Deadline run_deadline;
  Deadline steps_deadline;
  World world;
  bool have_world = false;
  std::vector<results::Profile> profiles;
  const results::Profile* profile = nullptr;
  // The hosts and nodes set aside: --exclude-hosts and the --exclude-file, read by the world step.
  results::SetAsideList set_aside;
  // The job token (harness/world/job_token.h) the store's values are signed with; "" none. Never
  // logged, never in a verdict.
  std::string job_token;
  RunRecord record;
  // This run's id: launch's (NCCLSMOKE_RUN_ID), else a new one; rank 0's, once adopted (the
  // rendezvous step records it for the verdict).
  std::string run_id;
  // The node's network devices as the run started (world step); the run's end reads them again.
  node::NicSnapshot nic_start;
  std::atomic<bool> write_failed{false};

  rendezvous::RankRef self() const { return {world.rank, world.hostname}; }
  bool hosts_store() const { return world.rank == 0 && !world.external_store; }
  // The run's namespace in the store: <job>/<restart>, so nothing collides with torch's agent
  // keys, a training job sharing the store, another job on the same port, or an earlier attempt
  // of this one under torchrun.
  std::string job_namespace() const;
  // The --transports list without "none".
  std::vector<std::string> requested_transports() const;

  // Records the decision the session takes (results::taken) and judges it at once: the phases of
  // the steps it passes over join the verdict not run, each logged at info.
  void took(const results::NextStep& next);
  // Records what ended the phase `name` (started at t0; `detail`: what the step saw, "" for the
  // rule to word it). Its status, findings and end line come when the session judges the
  // records (results::judge_local), as the step returns.
  void end_step(const std::string& name, results::StepFacts facts, Clock::time_point t0,
                std::string detail = {});
  // Judges the records not judged yet (results::judge_local) and logs the end line of each phase
  // they ended.
  void judge_pending();
  // The same with RunRecord::mu held and no log line (the watchdog's): the phases it ended.
  std::vector<results::Phase> judge_pending_locked();
  // What judging makes of every record so far that the order of the steps depends on
  // (results::judged_so_far; takes RunRecord::mu).
  results::JudgedSoFar judged_so_far();
  void log_phase_end(const results::Phase& p) const;
  // Records something seen that ends no phase (a store full, a configuration problem).
  void saw(results::StepFacts facts) { record.saw({std::move(facts), {}, 0, {}}); }

  std::string local_path() const;   // verdict.rank<N>.json (or invalid-config.<pid>) in --out-dir
  std::string global_path() const;  // --json or verdict.json in --out-dir
  // A verdict that cannot be written is loud: stderr names the path and the error, and the exit
  // code is kExitVerdictNotWritten whatever the verdict said (never a silent pass).
  void write(const std::string& path, const results::Verdict& v);
  int exit_code(const results::Verdict& shown) const;
};

}  // namespace ncclsmoke::harness
