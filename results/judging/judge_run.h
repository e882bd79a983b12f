#pragma once
// The two calls that decide a run's verdicts, so the harness assembles no rules:
// - judge_local: one rank's own view: as each step ends, over what it recorded (step_records.h),
//   and once its steps are over (or the watchdog stopped them), over the whole record;
// - judge_world: rank 0's verdict for the world, from every local view it gathered.
// Each applies the rules in their one order and ends with apply_verdict (classify.h).
#include <set>
#include <string>
#include <vector>

#include "results/judging/facts_rendezvous.h"
#include "results/judging/observations.h"
#include "results/judging/profile.h"
#include "results/judging/step_records.h"
#include "results/judging/view_trust.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// What the rank knows beyond its verdict record: the ranks its liveness watch saw die, and
// whether rank 0 hosts the store (then a lost store is rank 0's consequence).
struct LocalFacts {
  std::set<int> watch_lost;
  bool rank0_hosts_store = true;
  double duration_s = 0;
  // The store keys whose values failed the job token's verification (STORE_TAMPERED, one each),
  // the rank and host that refused them, and the store's host:port.
  std::vector<TamperedValueFact> tampered;
  int rank = -1;
  std::string host;
  std::string store;
};

// A step's records (step_records.h), judged in the order seen: each rule's findings, the phase a
// record ends (with the rule's status; a phase of that name already in `v` is not added twice),
// the rows and identities of the transports and the pairwise samples, the ranks the mesh or the
// watch found lost. Pure over `records`: it writes the verdict and nothing else (what next_step
// needs of the judged records, it judges itself: next_step.h judged_so_far). Returns the phases it
// added, for the progress lines.
std::vector<Phase> judge_local(Verdict& v, const std::vector<StepRecord>& records);

// Once the steps are over. In order: every phase that never ran is listed (fail closed), STORE_TAMPERED for each refused
// store key, the consequences of a frozen or
// dead rank are demoted to info (run_rules.h demote_consequences), the verdict applied.
void judge_local(Verdict& v, const LocalFacts& facts);

// Rank 0's gather: who joined, and who sent no view.
struct WorldRoster {
  int world_size = 0;
  int reporting_rank = 0;
  struct Rank {
    int rank = -1;
    std::string host;
    bool seen_alive = false;  // rank 0's liveness watch had it connected and answering
  };
  std::vector<Rank> unreported;  // joined but no view arrived (named in rank 0's own view)
  double duration_s = 0;
  double gathered_s = 0;         // how long rank 0 waited for the views
  // Every rank that joined, as the roster has it, and the rank whose key each view after
  // views[0] was read from (view_trust.h): empty lists skip the check (a caller without a roster).
  std::vector<RosterRank> joined;
  std::vector<int> posted_as;
  // Ranks rank 0 took for dead (the mesh heard nothing, the watch saw them stop) whose verdict
  // came all the same: a view whose own error names its rank explains it (explained_by_itself).
  std::vector<int> taken_for_dead;
  // Posts rank 0 could not read (too big, too deep, not a verdict): RESULTS_MISSING each.
  struct Unreadable {
    int rank = -1;
    std::string host, key, problem;
  };
  std::vector<Unreadable> unreadable;
  // What rank 0 refused while gathering (STORE_TAMPERED in its own view), its host, the store.
  std::vector<TamperedValueFact> tampered;
  std::string reporting_host;
  std::string store;
};

// In order: the views of ranks taken for dead that explain themselves, the posted views rank 0
// can disprove set aside (view_trust.h), each unreported rank
// named in rank 0's view (views[0]), the views merged (merge.h),
// the profile's rules when there is a profile (judge.h) and its baseline record, the verdict
// applied. `views` must hold rank 0's own view first.
Verdict judge_world(std::vector<Verdict> views, const WorldRoster& roster, const Profile* profile);

}  // namespace ncclsmoke::results
