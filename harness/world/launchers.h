#pragma once
// Every launcher ncclsmoke reads a world from, one declaration each: how it is detected, which
// variables carry the rank, the world size, the local rank and the master, the host names it
// gives its pods, and the hints that speak its own spec. World discovery (world.cpp), `--launcher`
// and its help, the job identity (job_identity.cpp) and `launch`'s world label read this table;
// adding a launcher is one entry in launchers.cpp plus its test (tests/launchers/).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/common/env.h"
#include "results/judging/facts_liveness.h"  // TerminationCause
#include "results/verdict/enums.h"

namespace ncclsmoke::harness {

// Where rank 0's address comes from when no master-address variable is set.
enum class MasterFallback : std::uint8_t {
  none,
  slurm_nodelist,  // the first host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST
  mpi_hostfile,    // the first host of the hostfile OMPI_MCA_orte_default_hostfile names (MPIJob)
};

// How the rank is read.
enum class RankRule : std::uint8_t {
  variable,  // rank_var holds it
  jobset,    // JOBSET_JOB_GLOBAL_INDEX x (world size / JOBSET_GLOBAL_REPLICAS) + JOB_COMPLETION_INDEX
};

struct LauncherSpec {
  results::WorldSource source;  // World::source
  const char* name;             // --launcher NAME
  std::vector<const char*> aliases;  // other --launcher spellings
  const char* label;            // in messages
  // --launcher auto: true when this launcher started the process (entries are tried in order).
  bool (*detect)(const Environment& env, const std::string& host);
  RankRule rank_rule = RankRule::variable;
  const char* rank_var;                // the variable named in findings about the rank
  std::vector<const char*> size_vars;  // first one set wins
  const char* local_var;               // nullptr: none (one process per pod)
  std::vector<const char*> addr_vars;  // rank 0's address, first one set wins
  std::vector<const char*> port_vars;  // its port, first one set wins
  MasterFallback master_fallback = MasterFallback::none;
  bool port_from_slurm_job = false;    // no port variable: derived from SLURM_JOB_ID
  bool torchelastic_agent = false;     // TORCHELASTIC_* (restart count, the agent's store)
  // Its rank and size count processes, so another such launcher around it is compared with it
  // (check_conflicts); pod-level launchers are not (a pod index is not a process rank).
  bool process_ranks = false;
  const char* host_pattern;       // the host names its pods or tasks get, for docs and messages
  const char* missing_size_hint;  // nullptr: "pass --world-size, or set <size_vars>"
  const char* missing_master_hint;
  // MASTER_PORT=tcp://ip:port outside a pod (a Kubernetes service link leaked in): the fix in
  // this launcher's terms; nullptr: the generic one.
  const char* service_link_fix;
  // A stop signal (RUN_TERMINATED): who most likely sent it, and which deadline to raise.
  const char* stop_sender;
  const char* stop_fix;
};

// Every launcher, in detection order (--launcher auto tries them so).
const std::vector<LauncherSpec>& launchers();
// --launcher NAME (a name or an alias, any case); nullptr when unknown ("auto" and "flags" are
// not launchers: the caller handles them).
const LauncherSpec* launcher_named(std::string_view name);
// The first launcher whose detect() holds; nullptr when none.
const LauncherSpec* detect_launcher(const Environment& env, const std::string& host);
// The entry of a WorldSource; nullptr for flags, launch and unknown.
const LauncherSpec* launcher_of(results::WorldSource source);
// RUN_TERMINATED's likely sender and fix for a world from `source` (launch and flags included).
results::TerminationCause termination_of(results::WorldSource source);
// "auto, torchrun, pytorchjob, ..., flags": every --launcher value, for the help and hints.
std::string launcher_choices();

// Host-name patterns (the controllers' own naming), for detection and the job identity.
// "<tj>-node-<j>-<i>" -> "<tj>" (Trainer v2 TrainJob pods: <tj>-node-0-<i>).
std::optional<std::string> trainjob_name(const std::string& host);
// A JobSet pod: "<js>-<rjob>-<j>-<p>" with MASTER_ADDR "<js>-<rjob>-0-0.<js>[...]": the JobSet's
// name, the replicated job's and the job index. nullopt when the host name does not fit.
struct JobSetHost {
  std::string jobset, replicated_job;
  std::string job_index, pod_index;
};
std::optional<JobSetHost> jobset_host(const std::string& host, const std::string& master_addr);

}  // namespace ncclsmoke::harness
