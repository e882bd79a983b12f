#pragma once
// World discovery: who this process is (rank, world size, local rank, master address/port, node)
// from the command line first, else the launcher's environment (every launcher of
// harness/world/launchers.h: torchrun, Open MPI, Slurm, Kubeflow's PyTorchJob and Trainer v2, a
// LeaderWorkerSet, a JobSet, a Kubernetes Indexed Job). Pure logic over an injectable environment so every launcher and every
// bad value is unit-testable. Bad input never throws or crashes: it becomes a ConfigProblem that
// names the variable, its value and the fix, because a misconfigured pod must still end in a
// verdict the on-call engineer can act on (e.g. the MASTER_PORT=tcp://... service-link injection).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/common/env.h"  // Environment, process_environment, map_environment
#include "results/judging/config_problem.h"
#include "results/judging/facts_rendezvous.h"
#include "results/verdict/enums.h"

namespace ncclsmoke::harness {

// What the command line gave. Values are kept as text so that `--rank abc` is validated by the
// same rules (and reported the same way) as `RANK=abc`.
struct WorldFlags {
  std::optional<std::string> rank = std::nullopt;         // --rank
  std::optional<std::string> world_size = std::nullopt;   // --world-size
  std::optional<std::string> local_rank = std::nullopt;   // --local-rank
  std::optional<std::string> master_addr = std::nullopt;  // --master-addr
  // What master_addr's findings call it: the flag, or where a caller took the value from
  // (`launch` checks PET_MASTER_ADDR's value through here, and its error names that variable).
  std::string master_addr_name = "--master-addr";
  std::optional<std::string> master_port = std::nullopt;  // --master-port
  std::optional<std::string> node_name = std::nullopt;    // --node-name
  // --launcher: auto (detect, in harness/world/launchers.cpp's order), a launcher's name or alias
  // (torchrun, mpi, slurm, trainer, lws, jobset, k8s, ...: read only its variables), flags (read no launcher
  // variables; NODE_NAME is still honoured). Anything else is a CONFIG_INVALID finding.
  std::string launcher = "auto";
  // --store HOST:PORT (IPv6 as [addr]:port): join a store someone else hosts; every rank, rank 0
  // too, is then a client. Wins over torchrun's agent store; MASTER_ADDR/PORT are not needed.
  std::optional<std::string> store = std::nullopt;
  // --job-id: the namespace of this run's store keys, else the launcher's (harness/world/job_identity.h;
  // under --launcher flags only NCCLSMOKE_JOB_ID). Unusable (empty, '/', > 128) -> CONFIG_INVALID.
  std::optional<std::string> job_id = std::nullopt;
};

struct World {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr;  // host name or address; IPv6 without brackets
  uint16_t master_port = 29500;
  std::string node_name;  // --node-name, else NODE_NAME (downward API), else hostname
  std::string hostname;   // gethostname() of this process (the pod name on Kubernetes)
  // Where the rank came from: flags, torchrun, openmpi, slurm, k8s-indexed-job (the verdict's
  // world.source spelling, results/verdict/enums.h); unknown until discovered.
  results::WorldSource source = results::WorldSource::unknown;
  // Field ("rank", "world_size", "local_rank", "master_addr", "master_port", "node_name",
  // "restart_count" (torchrun only), "store") -> the flag or variable it was read from ("--rank",
  // "RANK", "SLURM_STEP_NODELIST", "SLURM_JOB_ID", "--store", ...), or "default" / "hostname";
  // "store" holds store_source.
  std::map<std::string, std::string> sources_by_field;

  std::string job_id;          // JobIdentity::id, "" when none
  std::string job_id_source;   // JobIdentity::source, "" when none
  int restart_count = 0;       // TORCHELASTIC_RESTART_COUNT under torchrun (0 otherwise)
  // The store: hosted by rank 0 (default), or by someone else, in which case every rank, rank 0
  // too, is a client: torchrun's agent (TORCHELASTIC_USE_AGENT_STORE=True: the agent on node 0
  // already listens on MASTER_PORT, so rank 0 could not bind it) or --store.
  bool external_store = false;
  std::string store_host;      // = master_addr unless --store
  uint16_t store_port = 0;     // = master_port unless --store
  std::string store_source;    // "rank 0" | "TORCHELASTIC_USE_AGENT_STORE" | "--store"
};

// What discovery found wrong, one typed observation per problem (kind, variable, value, message,
// hint); results/judging/probe_rules.h (config_finding) turns each into CONFIG_MISSING /
// CONFIG_INVALID. Discovery observes; it does not make findings.
using results::ConfigProblem;

struct WorldResult {
  std::optional<World> world;           // set iff no problem is blocking()
  // When a problem blocks but the rank was readable: what discovery could read, so the config
  // error's verdict keeps the rank, job id and source (verdict.rank<N>.json, not the pid-named
  // invalid-config file). Fields that failed keep their defaults; world_size is 0 when it was
  // unreadable, master_addr "" when unreadable. Unset when world is set or the rank is unknown.
  std::optional<World> partial;
  std::vector<ConfigProblem> findings;  // the problems (errors and conflicts), in discovery order
};

// Flags win over the environment, field by field. Never throws.
//
// Slurm sets no MASTER_ADDR/MASTER_PORT. Without them (and without --master-addr/--master-port),
// the master is the first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST), where srun places
// task 0 under its block and cyclic distributions, and the port is
//   20000 + (SLURM_JOB_ID * 4 + SLURM_STEP_ID % 4) % 10000
// (a missing or non-numeric SLURM_STEP_ID, e.g. the batch step, counts as 0). Every task of a step
// computes the same port; two jobs sharing a node get different ones (unless their ids differ by a
// multiple of 2500), and so do up to 4 steps of one job. 20000..29999 lies below Linux's ephemeral
// range (32768..60999 by default), so the kernel never hands the port to a client socket.
//
// Under a Kubeflow PyTorchJob with PET_NPROC_PER_NODE > 1, RANK is the pod's index, not a process
// rank: started without torchrun (no TORCHELASTIC_RUN_ID), that is a CONFIG_INVALID error rather
// than a wrong rank.
WorldResult discover_world(const WorldFlags& flags, const Environment& env);
// Same, with the host name given (tests); the overload above uses local_hostname().
WorldResult discover_world(const WorldFlags& flags, const Environment& env,
                           const std::string& hostname);

std::string local_hostname();

// One line for logs: "rank 2/4 (local 0) on node-b (host pod-2), master 10.0.0.7:29500, from
// torchrun", then ", store <host>:<port> (external, <store_source>)" when external_store and
// ", job <id>" when job_id is set.
std::string describe(const World& world);

// Defaults and limits, exposed for the CLI's help text and for tests.
inline constexpr uint16_t kDefaultMasterPort = 29500;
inline constexpr int kMaxWorldSize = 1 << 20;  // a sanity bound: larger values are typos
inline constexpr uint16_t kSlurmPortBase = 20000;  // derived Slurm ports: 20000..29999
inline constexpr uint16_t kSlurmPortSpan = 10000;
// The derived Slurm port for SLURM_JOB_ID / SLURM_STEP_ID values (step: nullopt = 0).
uint16_t slurm_derived_port(uint64_t job_id, std::optional<uint64_t> step_id);

// The facts of `world` the probe rules (results/judging/probe_rules.h) name; pid is this
// process's.
results::ProbeContext probe_context(const World& world);

}  // namespace ncclsmoke::harness
