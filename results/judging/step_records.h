#pragma once
// What a step of `ncclsmoke run` saw that a rule turns into findings and a phase's status:
// a step says what happened, results::judge_local (judge_run.h) says what it means. A step
// records one StepRecord per thing seen (harness/run/run_context.h, RunRecord::saw); the liveness
// watch records the peers it saw stop or come back the same way; the session hands the records to
// judge_local after every step, which judges them in the order seen, adds the findings and the
// phases to the verdict and returns the phases it ended, for the progress lines. No step calls a
// rule.
//
// Each kind of record is the input of one rule, as plain data: a leaf like the facts it holds
// (facts_*.h, observations.h, the verdict's set-aside list), no rule declared here. A record that
// ends a phase names it, with the measured duration and the detail the step saw, and the rule
// gives the phase its status.
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "facts/node.h"
#include "rendezvous/rank_ref.h"
#include "results/judging/config_problem.h"
#include "results/judging/facts_liveness.h"
#include "results/judging/facts_rendezvous.h"
#include "results/judging/facts_transport.h"
#include "results/judging/observations.h"
#include "results/verdict/suspects.h"

namespace ncclsmoke::results {

// The world step: problems in the launcher's variables and flags (CONFIG_MISSING /
// CONFIG_INVALID each, naming the rank when it could be read, and the host).
struct ConfigSeen {
  std::vector<ConfigProblem> problems;
  int rank = -1;  // -1: the rank itself could not be read
  std::string host;
};
// --profiles could not be read, or --profile is not in it (`names`: the profiles it has).
struct ProfileProblemSeen {
  rendezvous::RankRef self;
  std::string profiles_file;
  std::string error;    // unreadable: why; "" when the file was read
  std::string profile;  // not found: the name asked for
  std::vector<std::string> names;
};
// The world step ended: whether the world was built and the configuration accepted (the phase's
// status is world_phase_status's over the launcher's problems).
struct WorldEndSeen {
  std::vector<ConfigProblem> problems;
  bool world_built = false;
  bool accepted = false;
};

// What the run was asked to measure, once the world is known (the world step): --transports
// without "none", and --pairwise with its settings.
struct AskedSeen {
  std::vector<std::string> requested;
  PairwiseAsk pairwise;
};

// The rendezvous step stopped on the store: rank 0 could not listen on the port, a rank could
// not reach the store, or the connection failed after it was made.
struct StorePortSeen {
  rendezvous::RankRef rank0;
  std::string job_id;
  int port = 0;
  std::string error;
  std::string holder;  // who holds the port, "" not known
};
struct StoreConnectSeen {
  StoreFailure failure;
  ProbeContext ctx;
  double waited_s = 0;
};
struct StoreLostSeen {
  StoreFailure failure;
  ProbeContext ctx;
  std::string during;  // "the join barrier", "the mesh probe"
};
// The join barrier returned: who joined, who is missing, a rank claimed twice, another world size.
struct JoinSeen {
  JoinFacts join;
  ProbeContext ctx;
  double join_timeout_s = 0;
};
// The roster against the hosts and nodes set aside (--exclude-hosts / --exclude-file).
struct SetAsideSeen {
  std::vector<RosterEntry> roster;
  SetAsideList list;
};

// The mesh probe could not run on this rank (bad --mesh-bind / --mesh-port-range).
struct MeshNotRunSeen {
  rendezvous::RankRef self;
  std::string error;
};
// The mesh probe's result; `stopped`: ranks the liveness watch saw die or freeze while it ran
// (their pairs were set aside: `set_aside_stopped`).
struct MeshSeen {
  MeshFacts mesh;
  ProbeContext ctx;
  std::map<int, std::string> hosts;
  std::vector<int> stopped;
  bool set_aside_stopped = false;
};

// Every transport's outcome, and the wait chain the liveness watch had when they ended.
struct TransportsSeen {
  std::vector<TransportFacts> outcomes;
  TransportJudgeContext ctx;
  std::optional<WaitChainEvidence> wait_chain;
};

// The pairwise rounds of one transport, or a transport that had none (`skipped`: by the plan,
// for its own reason; else the rounds did not run at all).
struct PairwiseRunSeen {
  PairwiseDecision plan;
  PairwiseRun run;
};
struct PairwiseNotRunSeen {
  std::string transport;
  std::string why;
  bool skipped = false;
};

// Rank 0's pairwise summaries step: every rank's summary it gathered, and what the decision reads
// besides them (next_step decides the rounds from it).
struct PairwiseGatheredSeen {
  PairwiseGathered gathered;
};

// A decision of next_step as the session took it: the step it runs now (Step::finish: none), the
// steps passed over on the way, and their phases, recorded not run.
struct StepTakenSeen {
  Step step = Step::finish;
  std::vector<Step> passed_over;
  std::vector<Phase> not_run;
};

// The liveness watch: a peer it saw die, freeze, or come back.
struct PeerLostSeen {
  LostPeerFact lost;
  rendezvous::RankRef seen_by;
};
struct PeerSilentSeen {
  SilentPeerFact silent;
  int this_rank = -1;
};
struct PeerResumedSeen {
  SilentPeerFact silent;
};

// The kernel log this rank read (node/kernel_log.h): its GPU faults.
struct KernelLogSeen {
  facts::KernelLogFacts log;
  rendezvous::RankRef self;
};

// What NVML said of the node's GPUs (node/gpu_health.h), read by the node's local rank 0.
struct GpuHealthSeen {
  facts::GpuHealthFacts gpus;
  rendezvous::RankRef self;
};

// The node's network devices over the run (node/nic_health.h), read as the run ends.
struct NicsSeen {
  facts::NicFacts nics;
  rendezvous::RankRef self;
};

// The run's deadline passed, or a stop signal came, while `last_phase` was the last one ended.
struct RunTimeoutSeen {
  rendezvous::RankRef self;
  double timeout_s = 0;
};
struct RunTerminatedSeen {
  rendezvous::RankRef self;
  std::string signal_name;  // "SIGTERM", "SIGINT"
  double after_s = 0;
  TerminationCause cause;
};

// What the verdict says of the run besides findings and phases, as the steps saw it; each is
// copied into the verdict as it is judged, so no step writes the verdict itself.
// The world as discovered (whole, or partial after a configuration error): who reports, and the
// world's size, master, job id and where each came from (the verdict's world, less its store).
struct WorldSeen {
  int rank = -1;
  World world;
};
// The store this rank met at (the verdict's world.store).
struct StoreInfoSeen {
  StoreInfo store;
};
// Rank 0's run id, which this rank adopted.
struct RunIdSeen {
  std::string run_id;
};
// The roster after the join: the ranks present (with their host, node, pid and address) and the
// ranks that never joined.
struct RosterSeen {
  std::vector<RankInfo> present;
  std::vector<int> missing;
};

using StepFacts =
    std::variant<ConfigSeen, ProfileProblemSeen, WorldEndSeen, AskedSeen, StorePortSeen, StoreConnectSeen,
                 StoreLostSeen, ForeignStore, StoreFull, JoinSeen, SetAsideSeen, MeshNotRunSeen,
                 MeshSeen, TransportsSeen, PairwiseRunSeen, PairwiseNotRunSeen, PeerLostSeen,
                 PeerSilentSeen, PeerResumedSeen, KernelLogSeen, GpuHealthSeen, NicsSeen, RunTimeoutSeen,
                 RunTerminatedSeen, WorldSeen, StoreInfoSeen, RunIdSeen, RosterSeen,
                 PairwiseGatheredSeen, StepTakenSeen>;

struct StepRecord {
  StepFacts facts;
  // The phase this record ends ("" none: a finding only), how long it ran and what the step saw
  // (the phase's detail).
  std::string phase;
  double duration_s = 0;
  std::string detail;
};

}  // namespace ncclsmoke::results
