#pragma once
// `run --slurm-drain`: rank 0 acts on its global verdict through scontrol.
//
//   - fail or degraded: each suspect node (results/verdict/suspects.h, by its Slurm name: the
//     ranks' node, SLURMD_NODENAME under srun) is drained:
//       scontrol update NodeName=<n> State=DRAIN Reason="ncclsmoke <codes> run <run id>"
//     A node someone else already drained (a reason without the "ncclsmoke " prefix) is left as
//     it is, reason and all. Nothing is drained when the suspects are more than half the job's
//     nodes (at least one may always be): a fault that names most nodes is not a node's.
//     Nor past the drain budget (--slurm-drain-budget, harness/actions/drain_budget.h): the nodes that
//     `scontrol show node -o` lists drained with ncclsmoke's reason, in the job's partition
//     (SLURM_JOB_PARTITION) or else the cluster, are counted first, and a suspect that would
//     take the count past the budget stays in service; the phase reads degraded and names it.
//     When that count cannot be read, nothing is drained.
//   - pass: each node of the job that ncclsmoke drained (`scontrol show node -o <n>` reads a DRAIN
//     state and a Reason starting "ncclsmoke ") is resumed (State=RESUME). Other drains stay.
//   - inconclusive: nothing.
// The job's nodes are the ranks' nodes, limited to SLURM_JOB_NODELIST when it is set: a node
// outside the job is never touched. Every scontrol is spawned with an argv (no shell) under a
// deadline (10 s, cut by --timeout), its failure named (exit code, stderr, timeout). The scontrol
// run is $NCCLSMOKE_SCONTROL when set (tests), else `scontrol` from PATH.
// What was done goes into the verdict as the "slurm-drain" phase (not required; its detail lists
// every node drained, resumed or kept, and every error) and into the log. It never changes the
// verdict: the phase reads fail when an scontrol failed.
#include <optional>
#include <string>
#include <vector>

#include "harness/actions/drain_budget.h"
#include "harness/common/env.h"
#include "rendezvous/deadline.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::harness {

inline constexpr const char* kDrainReasonPrefix = "ncclsmoke ";

// What one spawned command did.
struct CommandResult {
  int exit_code = -1;        // -1: did not exit normally (signal, timeout, not started)
  bool timed_out = false;
  std::string spawn_error;   // "" when it started
  std::string out, err;      // at most the capture limit each (64 KiB unless asked)
  bool truncated = false;    // out or err reached it
  bool ok() const { return spawn_error.empty() && !timed_out && exit_code == 0; }
  // "exit 1: scontrol: error: Invalid node name specified", "timed out after 10 s", ...
  std::string describe() const;
};
// Runs argv[0] (searched in PATH) with argv, stdin /dev/null, until it exits or `deadline`
// passes (then SIGKILL), keeping at most `max_capture` bytes of each output. Never throws.
inline constexpr std::size_t kDefaultCapture = 64 * 1024;
CommandResult run_command(const std::vector<std::string>& argv, rendezvous::Deadline deadline,
                          std::size_t max_capture = kDefaultCapture);

// A node's state from one `scontrol show node -o` line: State= and Reason= (the reason is the
// text after "Reason=" up to a trailing " [user@time]"). nullopt when the line has no State=.
struct SlurmNodeState {
  std::string name;    // NodeName= ("" when absent)
  std::string state;   // "IDLE+DRAIN", "MIXED", ...
  std::string reason;  // "" none
  std::vector<std::string> partitions;  // Partitions=a,b
  bool drained() const { return state.find("DRAIN") != std::string::npos; }
  bool drained_by_ncclsmoke() const { return drained() && reason.rfind(kDrainReasonPrefix, 0) == 0; }
};
std::optional<SlurmNodeState> parse_show_node(const std::string& line);

// The drains ncclsmoke holds, from `scontrol show node -o` of every node (one line a node): in
// `partition` when one is given and some line lists it, else in every node listed.
struct HeldDrains {
  int scope_nodes = 0;
  std::string scope;              // "partition gpu" or "the cluster"
  std::vector<std::string> ours;  // nodes drained with ncclsmoke's reason, sorted
};
HeldDrains held_drains(const std::string& show_all_nodes, const std::string& partition);

// The drain reason for a suspect: "ncclsmoke PEER_STALLED,STRAGGLER run <id>".
std::string drain_reason(const std::vector<std::string>& codes, const std::string& run_id);

// What a drain needs from the run: the launcher's variables (SLURM_JOB_NODELIST,
// SLURM_JOB_PARTITION), the budget, and the run's deadline, which every scontrol ends before.
struct SlurmDrainRequest {
  Environment environment;
  DrainBudget budget;
  rendezvous::Deadline run_deadline;
};

// Rank 0 with --slurm-drain, after the world's verdict is judged and before it is written: does
// the above and adds the "slurm-drain" phase to `global`.
void slurm_set_aside(const SlurmDrainRequest& request, results::Verdict& global);

}  // namespace ncclsmoke::harness
