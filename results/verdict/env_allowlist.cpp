#include "results/verdict/env_allowlist.h"

#include <algorithm>
#include <cctype>

#include <unistd.h>  // environ

namespace ncclsmoke::results {

namespace {

// PET_ (Kubeflow), LWS_ (LeaderWorkerSet) and JOBSET_ (our downward-API names) carry a
// launcher's world (harness/world/launchers.cpp), so a verdict shows what discovery read.
// OMPI_MCA_ and UCX_ shape MPI's path as NCCL_ and FI_ shape the others' (judging compares them
// across ranks: config_skew_rule.h).
constexpr std::string_view kPrefixes[] = {"NCCL_", "FI_",  "OFI_",   "TORCH_", "GLOO_",
                                          "MASTER_", "OMPI_COMM_WORLD_", "OMPI_MCA_", "UCX_",
                                          "PET_",  "LWS_", "JOBSET_"};
constexpr std::string_view kExact[] = {"RANK",         "WORLD_SIZE",   "LOCAL_RANK",
                                       "CUDA_VISIBLE_DEVICES", "SLURM_PROCID", "SLURM_NTASKS",
                                       "SLURM_LOCALID", "JOB_COMPLETION_INDEX", "NODE_NAME"};
constexpr std::string_view kSecretWords[] = {"TOKEN", "SECRET", "PASSWORD", "KEY"};

}  // namespace

bool env_name_allowed(std::string_view name) {
  for (auto p : kPrefixes) {
    if (name.size() > p.size() && name.substr(0, p.size()) == p) return true;
  }
  return std::find(std::begin(kExact), std::end(kExact), name) != std::end(kExact);
}

bool env_name_secret(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (auto w : kSecretWords) {
    if (upper.find(w) != std::string::npos) return true;
  }
  return false;
}

std::map<std::string, std::string> allowlisted_env(const char* const* envp) {
  if (!envp) envp = environ;
  std::map<std::string, std::string> out;
  for (; envp && *envp; ++envp) {
    std::string_view entry(*envp);
    auto eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string_view name = entry.substr(0, eq);
    if (!env_name_allowed(name)) continue;
    out[std::string(name)] = env_name_secret(name) ? kRedacted : std::string(entry.substr(eq + 1));
  }
  return out;
}

}  // namespace ncclsmoke::results
