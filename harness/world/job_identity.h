#pragma once
// The job a rank belongs to, so that two jobs sharing a store (two Slurm jobs on one node on the
// default port, a training job and the smoke test on torchrun's agent store) never read each
// other's keys. Every key of a run lives under ncclsmoke/<job id>/<restart>/ (run_command.cpp).
//
// Sources, first usable one wins: --job-id, NCCLSMOKE_JOB_ID, TORCHELASTIC_RUN_ID (except
// torchrun's default "none", which names no job), SLURM_JOB_ID (with a usable SLURM_STEP_ID:
// "<job>.<step>"), Open MPI's OMPI_MCA_ess_base_jobid, then PMIX_NAMESPACE, a JobSet's name
// (JOBSET_NAME from the downward API, else the pod's host name <js>-<rjob>-<j>-<p> read against
// MASTER_ADDR <js>-<rjob>-0-0.<js>), a LeaderWorkerSet group's leader (the first label of
// LWS_LEADER_ADDRESS), a Trainer v2 TrainJob's name (host <tj>-node-0-<i>), a PyTorchJob pod's
// host name (<name>-master-<i> / <name>-worker-<i> -> <name>, only inside Kubernetes, i.e. with
// KUBERNETES_SERVICE_HOST set, which the kubelet gives every container), an Indexed Job pod's host
// name (<job>-<JOB_COMPLETION_INDEX> -> <job>). None of them: "" (the run then uses the fixed
// namespace "local", as before job identities existed). Every source is one value shared by all
// ranks of a job, so the ranks agree on the namespace without talking.
#include <optional>
#include <string>
#include <string_view>

#include "harness/world/world.h"

namespace ncclsmoke::harness {

struct JobIdentity {
  std::string id;      // printable ASCII, at most 128 characters; never contains '/'
  std::string source;  // the flag or variable it came from ("--job-id", "SLURM_JOB_ID", ...,
                       // "hostname (PyTorchJob)", "hostname (Indexed Job)")
};

inline constexpr std::size_t kMaxJobIdLength = 128;

// Never throws. `flag` is --job-id when given. Values are trimmed of surrounding whitespace. An
// unusable value (empty, '/', control or non-ASCII bytes, over 128 characters) in a variable is
// skipped in favour of the next source; in --job-id it is skipped here too and reported by
// discover_world as CONFIG_INVALID (job_id_problem says why).
std::optional<JobIdentity> discover_job_identity(const std::optional<std::string>& flag,
                                                 const Environment& env,
                                                 const std::string& hostname);

// Why `value` (after trimming) cannot be a job id ("empty", "contains '/'", ...), or "" if it can.
std::string job_id_problem(std::string_view value);

// The run id: the verdict's run_id, shared by every rank of one run (rank 0's, adopted through the
// store). A rank makes its own unless NCCLSMOKE_RUN_ID gives it: `launch` makes one, names its run
// folder after it and hands it to every rank, so the folder and every verdict (also those of ranks
// that never reached the store) say the same id.
inline constexpr const char* kRunIdEnv = "NCCLSMOKE_RUN_ID";
// Why `value` cannot be a run id, or "" if it can: 1..128 characters, each a letter, digit, '-',
// '_' or '.' (it names a folder), not starting with '.' or '-'.
std::string run_id_problem(std::string_view value);
// A fresh run id: results::new_run_id()'s "20261201T214708Z-55ed3275", after "<prefix>-" when
// `prefix` is not empty (a job id, its other characters made '_', cut to 96).
std::string make_run_id(std::string_view prefix);

}  // namespace ncclsmoke::harness
