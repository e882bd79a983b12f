#pragma once
// The environment that goes into a verdict: only what explains a communication run (launcher and
// NCCL/libfabric/torch settings), never the whole environment, and never a secret's value.
#include <map>
#include <string>
#include <string_view>

namespace ncclsmoke::results {

inline constexpr const char* kRedacted = "<redacted>";

// Allowed: NCCL_*, FI_*, OFI_*, TORCH_*, GLOO_*, MASTER_*, OMPI_COMM_WORLD_*, OMPI_MCA_*, UCX_*,
// PET_*, LWS_*, JOBSET_*, and exactly RANK,
// WORLD_SIZE, LOCAL_RANK, CUDA_VISIBLE_DEVICES, SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
// JOB_COMPLETION_INDEX, NODE_NAME. Names are case-sensitive, as the launchers set them.
bool env_name_allowed(std::string_view name);
// Names containing TOKEN, SECRET, PASSWORD or KEY (any case) keep the name, lose the value.
bool env_name_secret(std::string_view name);

// From a NULL-terminated "NAME=value" array (envp / environ); null means the process's environ.
std::map<std::string, std::string> allowlisted_env(const char* const* envp = nullptr);

}  // namespace ncclsmoke::results
