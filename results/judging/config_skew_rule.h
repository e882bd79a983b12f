#pragma once
// The job's configuration across its ranks: CONFIG_SKEW (against each other) and ENV_POLICY
// (against the profile's environment policy, below).
//
// CONFIG_SKEW: the ranks of one job that run with a communication stack or settings other than the
// majority's. One node with another NCCL, a missing NCCL_SOCKET_IFNAME or FI_PROVIDER on one pod,
// an old ncclsmoke on one host: each makes a job fail or crawl in a way no single rank can see,
// and each is plain when every rank's view is side by side.
//
// What is compared, per rank (rank_configs reads it from each rank's own verdict):
// - the communication-shaping variables: every NCCL_*, FI_*, OFI_*, OMPI_MCA_* and UCX_* the
//   rank ran with (verdict env, env_allowlist.h: a secret's value is never there), but those
//   mpirun sets for its own bookkeeping (OMPI_MCA_ess*, orte_*, pmix*, initial_wdir: per rank or
//   per node by design); a variable set on some ranks and not on others is a difference (unset
//   is a value);
// - versions: ncclsmoke, the kernel;
// - what the transports reported, on the ranks that ran them: NCCL's version, its net plugin,
//   the CUDA driver and runtime (nccl); the libfabric version and provider (fabric); the MPI
//   library (mpi).
// For each item, the value most ranks have is the majority when more than half of the ranks that
// report the item have it; every other value is named with its ranks and hosts, in one finding
// per item ("NCCL version: host gpu-7 (rank 7) has 2.21.5; the other 15 ranks, on 15 hosts,
// 2.28.3"). With no such majority the finding lists the split and names no host (past 8
// values, one info line: a setting made per rank). Severity
// warning; info for what shapes no bytes (NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE, the
// kernel). Nothing is compared with fewer than two ranks' views. A skew names a configuration,
// not a broken node: CONFIG_SKEW sets no host aside (results/verdict/suspects.h).
#include <map>
#include <string>
#include <vector>

#include "results/judging/profile.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// One rank's items: "NCCL_SOCKET_IFNAME" (a variable), or a label ("NCCL version", "kernel") ->
// value. `variables` are compared with unset as a value; `versions` only among the ranks that
// report them.
struct RankConfig {
  int rank = -1;
  std::string host;
  std::map<std::string, std::string> variables;
  std::map<std::string, std::string> versions;
};

// True for the variables compared (the prefixes above).
bool skew_variable(const std::string& name);

// One entry per rank that posted its own verdict (the first view of each reporting rank).
std::vector<RankConfig> rank_configs(const std::vector<Verdict>& views);

std::vector<Finding> judge_config_skew(const std::vector<RankConfig>& ranks);

// ENV_POLICY: the ranks that run without a variable the profile's environment policy wants
// (profile.h Profile::environment), or with another value; one finding per variable, naming
// each rank and host off it with what it has and what the profile wants. Read from each rank's
// own verdict (its env), so every rank is checked, not only rank 0. Severity warning; no host is
// set aside (a job's configuration, not a node's fault). Nothing when the policy is empty. A
// variable the policy names is judged by it alone (judge_world leaves it out of CONFIG_SKEW).
std::vector<Finding> judge_env_policy(const std::vector<Verdict>& views, const Profile& profile);

}  // namespace ncclsmoke::results
