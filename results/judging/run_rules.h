#pragma once
// The run's own rules: what a rank's run (not one probe or one transport) concludes from what it
// saw. The harness's RunSession only measures and records; every finding, rank status and phase
// status is decided here, over typed inputs, and every finding is made
// through the finding table (make_finding), so its severity and layer are the table's.
//
//  - the liveness watch's observations (facts_liveness.h): a rank died (PEER_LOST) or froze (PEER_STALLED), and a
//    frozen one that answered again (the stall is downgraded to a warning);
//  - "blame the root": once the watch names a frozen or dead rank, the timeouts and lost
//    connections its neighbours then saw are its consequences (info), not theirs;
//  - the wait chain ("3 waits on 2, 2 on 1, 1 on 0") attached to the findings it explains;
//  - the run's own endings: RUN_TIMEOUT, RUN_TERMINATED;
//  - the store and config errors RunSession meets: STORE_FOREIGN_JOB, CONFIG_INVALID for the
//    store port and for --profiles/--profile, MESH_BLOCKED when the mesh probe could not run;
//  - rank 0's gather: PEER_LOST for a rank that joined but never reported, and a rank whose own
//    verdict explains why it stopped;
//  - the rendezvous and mesh phase statuses, and the phases listed as not run.
//
// Pure functions: no I/O, no clock, no lock. The caller holds whatever lock guards the verdict.
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "rendezvous/rank_ref.h"  // the one spelling of a rank (ncclsmoke_message_spelling)
#include "results/judging/config_problem.h"
#include "results/judging/facts_liveness.h"
#include "results/judging/facts_rendezvous.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// ---- the job token ----------------------------------------------------------------------------

// STORE_TAMPERED: `reader` refused the value of `key` (the key as the store names it) because it
// failed the job token's verification (`why`); `master` is the store's host:port.
Finding store_tampered_finding(rendezvous::RankRef reader, std::string_view master,
                               const TamperedValueFact& value);
// One STORE_TAMPERED per refused key: a key already named by `reader` is not named again.
void note_store_tampered(std::vector<Finding>& findings, rendezvous::RankRef reader,
                         std::string_view master,
                         const std::vector<TamperedValueFact>& values);

// Whether a finding with `code` already names `rank` (one finding per dead or frozen rank).
bool names_rank(const std::vector<Finding>& findings, Code code, int rank);

// ---- liveness watch ----------------------------------------------------------------------------

// PEER_LOST from the watch (evidence.source = "liveness watch"): `seen_by` is this rank.
Finding peer_lost_finding(const LostPeerFact& lost, rendezvous::RankRef seen_by);
// PEER_STALLED from the watch; `this_rank` names the witness when the watch's own is unknown.
Finding peer_stalled_finding(const SilentPeerFact& silent, int this_rank);
// Whether `f` is a PEER_LOST the liveness watch made (a seen death, not a guess).
bool from_liveness_watch(const Finding& f);

// The roster entry of `rank` (if any) gets `status` and `detail`.
void mark_rank(Verdict& v, int rank, RankStatus status, const std::string& detail);

// What the watch's callbacks record in this rank's verdict: the finding (once per rank) and the
// rank's status in the roster ("lost" / "failed", and back to "joined" on a resume).
void note_peer_lost(Verdict& v, const LostPeerFact& lost, rendezvous::RankRef seen_by);
void note_peer_silent(Verdict& v, const SilentPeerFact& silent, int this_rank);
// It came back: its PEER_STALLED error becomes a warning ("was unresponsive for ..."), which is
// still worth reading but did not end the run.
void note_peer_resumed(Verdict& v, const SilentPeerFact& silent);

// Blame the root, not the neighbour: once the watch knows a rank is frozen (PEER_STALLED) or dead
// (its PEER_LOST), the TRANSPORT_TIMEOUT / PEER_LOST / TRANSPORT_INIT_FAILED and store findings
// (RENDEZVOUS_LOST / _STALLED, when `rank0_hosts_store` and rank 0 is the one) that followed
// become info, pointing at that rank (evidence.consequence_of). A PEER_LOST about the stopped
// rank itself stays, unless it is a mesh guess about a rank the watch saw frozen, not dead
// (`watch_lost`: the ranks the watch saw die).
void demote_consequences(std::vector<Finding>& findings, const std::set<int>& watch_lost,
                         bool rank0_hosts_store);

// A TRANSPORT_TIMEOUT is what a chain explains: it gets the evidence (and the text when the chain
// is longer than this rank); a PEER_LOST names its peer itself, so only a chain that runs on to a
// frozen or dead rank is added to it.
void attach_wait_chain(std::vector<Finding>& findings, const WaitChainEvidence& e);

// ---- the run's endings -------------------------------------------------------------------------

// `last_phase`: the last phase that finished ("none" before the first).
Finding run_timeout_finding(rendezvous::RankRef self, double timeout_s, std::string_view last_phase);
// The run's deadline cut `phase` short while it ran (it had run `ran_s`): the same code, naming
// the phase that was running rather than the last one that finished.
Finding run_timeout_during(rendezvous::RankRef self, double timeout_s, std::string_view phase,
                           double ran_s);
// `signal_name`: "SIGTERM" / "SIGINT"; `cause`: the launcher's (message and hint).
Finding run_terminated_finding(rendezvous::RankRef self, std::string_view signal_name,
                               double after_s, std::string_view last_phase,
                               const TerminationCause& cause = {});

// ---- store and configuration -------------------------------------------------------------------

Finding store_foreign_job_finding(const ForeignStore& s);

Finding store_full_finding(const StoreFull& s);

// Rank 0 cannot listen on MASTER_PORT; `holder` names who holds it ("" = unknown).
Finding store_port_finding(rendezvous::RankRef rank0, std::string_view job_id, int port,
                           std::string_view error, std::string_view holder);

// --profiles cannot be read / --profile is not in it (`names`: the profiles the file has).
Finding profiles_unreadable_finding(rendezvous::RankRef self, std::string_view profiles_file,
                                    std::string_view error);
Finding profile_unknown_finding(rendezvous::RankRef self, std::string_view profile,
                                std::string_view profiles_file,
                                const std::vector<std::string>& names);

// The mesh probe itself could not run on this rank (bad --mesh-bind / --mesh-port-range).
Finding mesh_not_run_finding(rendezvous::RankRef self, std::string_view error);

// ---- rank 0's gather ---------------------------------------------------------------------------

// A rank that joined but whose verdict never came. `seen_alive` (rank 0's liveness watch had it
// connected and answering to the end): RESULTS_MISSING, the rank is not called dead; otherwise
// PEER_LOST in rank 0's own view (unless a PEER_LOST / PEER_STALLED already names it) and its
// roster status "lost". `waited_s`: how long rank 0 gathered.
void name_unreported_rank(Verdict& mine, rendezvous::RankRef rank, bool seen_alive = false,
                          double waited_s = 0);
// The same for many ranks in one pass: rank 0's findings and roster entries are indexed once,
// not scanned for each rank (a fleet's thousands of unreported ranks).
struct UnreportedRank {
  rendezvous::RankRef rank;
  bool seen_alive = false;
};
void name_unreported_ranks(Verdict& mine, const std::vector<UnreportedRank>& ranks,
                           double waited_s = 0);
// A rank posted a verdict rank 0 cannot read (too big, nested too deep, not JSON, not a verdict;
// `problem` says which): RESULTS_MISSING in rank 0's own view naming the rank and the problem.
void name_unreadable_post(Verdict& mine, rendezvous::RankRef rank, std::string_view key,
                          std::string_view problem);
// A rank rank 0 took for dead posted a verdict whose own error names itself: that error is the
// cause, and the rank reads "failed" with its own code (the merge drops the PEER_LOST guesses).
void explained_by_itself(Verdict& mine, const Verdict& theirs, int rank);

// ---- phase statuses ----------------------------------------------------------------------------

struct PhaseOutcome {
  PhaseStatus status = PhaseStatus::pass;  // pass | inconclusive | fail
  std::string detail;
};
// "pass" when every rank joined and the roster came, else "fail".
// The status of a phase whose step had to stop on `cause` (the store could not be served or
// reached, the join or the mesh probe broke off, another job's store): fail for an error, else
// inconclusive. A step that stopped never passes.
PhaseStatus stopped_phase_status(const Finding& cause);

// The world phase: fail when no world could be built, discovery found a problem that stops the
// run (missing or invalid), or the profile could not be used; else pass (a launcher conflict is
// only a warning finding).
PhaseStatus world_phase_status(const std::vector<ConfigProblem>& problems, bool world_built,
                               bool profile_usable);

PhaseStatus rendezvous_phase_status(const JoinFacts& join);
// The mesh phase when the watch saw ranks stop: "fail", and the detail says who (and that their
// pairs were set aside, untested). Unchanged when `stopped` is empty.
PhaseOutcome mesh_outcome_with_stopped(PhaseOutcome judged, const std::vector<int>& stopped,
                                       bool pairs_set_aside);
Phase not_run_phase(std::string name, std::string detail);
// Fail closed: world / rendezvous / mesh not in `phases` are added as not run, with why: the
// first phase that failed, or "the run ended before it started" (a deadline or a signal).
void list_phases_not_run(std::vector<Phase>& phases);

}  // namespace ncclsmoke::results
