#pragma once
// What `ncclsmoke launch` starts on this node, decided before anything is started: a per-node
// launcher in the manner of torchrun. Each value comes from its flag, else the variable
// training-operator sets for torchrun (PET_NNODES, PET_NODE_RANK, PET_NPROC_PER_NODE,
// PET_MASTER_ADDR / PET_MASTER_PORT, and the plain MASTER_ADDR / MASTER_PORT), else today's
// single-machine default (one node, 127.0.0.1, a free loopback port, store on loopback).
// Pure over an injectable environment, so every bad value is testable; a bad value is one
// LaunchError naming the flag or variable, its value and the fix, and nothing is started.
#include <optional>
#include <string>

#include "results/verdict/enums.h"
#include <variant>

#include "harness/world/job_identity.h"
#include "harness/world/world.h"

namespace ncclsmoke::harness {

// The launch flags as given (text, so `--nnodes x` and `PET_NNODES=x` are checked alike).
struct LaunchFlags {
  std::optional<std::string> nnodes;          // --nnodes
  std::optional<std::string> node_rank;       // --node-rank
  std::optional<std::string> nproc_per_node;  // --nproc-per-node, -n, --ranks
  std::optional<std::string> master_addr;     // --master-addr
  std::optional<std::string> master_port;     // --master-port
  std::optional<std::string> job_id;          // --job-id
};

struct LaunchPlan {
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 4;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;             // 0: pick a free loopback port (single-node default only)
  bool retry_new_port = false;     // only when the port was picked here: no other node knows it
  bool store_on_loopback = false;  // single-node default: the store binds 127.0.0.1 only
  bool local_node_names = false;   // one node: ranks are named local-<r> (as before)
  std::string node_name;           // multi-node: NODE_NAME, else the host name
  std::string job_id;              // "" when none (single-node: a random one is made at launch)
  std::string job_id_source;
  // The launcher around this launch, for every rank's world.source: a Kubeflow PyTorchJob (PET_*
  // with RANK, the pod's index), Trainer v2 (PET_* without RANK), else `launch` on its own. Each
  // rank reads it from NCCLSMOKE_LAUNCH_SOURCE (its --rank etc. are flags, not the launcher's).
  results::WorldSource source = results::WorldSource::launch;
  // The job token handed to every rank as NCCLSMOKE_JOB_TOKEN ("" none: the ranks read their own
  // environment). One node: made per launch unless one is set (launch_command.cpp).
  std::string job_token;
  // The run id (job_identity.h), handed to every rank as NCCLSMOKE_RUN_ID: the run folder's name
  // when launch made the folder ("" none: each rank makes its own, rank 0's wins).
  std::string run_id;
  // Where each value came from, for the launcher's first line ("--nnodes", "PET_NNODES", ...).
  std::string nnodes_from, node_rank_from, nproc_from, addr_from, port_from;

  int world_size() const { return nnodes * nproc_per_node; }
  int global_rank(int local_rank) const { return node_rank * nproc_per_node + local_rank; }
};

struct LaunchError {
  std::string variable;  // the flag or variable at fault
  std::string value;     // its raw value (escaped)
  std::string message;   // one line: names the variable and value, says the fix
};

// `gpu_count` answers nproc-per-node "auto"/"gpu" (the /dev/nvidia<N> devices in production).
std::variant<LaunchPlan, LaunchError> plan_launch(const LaunchFlags& flags, const Environment& env,
                                                  const std::string& hostname, int gpu_count);

// GPUs visible as /dev/nvidia<N> character devices (no CUDA needed).
int count_nvidia_devices();

// A fresh id for one single-node launch: "launch-<16 hex digits>".
std::string random_launch_id();

}  // namespace ncclsmoke::harness
