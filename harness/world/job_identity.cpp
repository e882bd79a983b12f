#include "harness/world/job_identity.h"
#include "harness/common/env.h"
#include "harness/common/text.h"
#include "harness/world/launchers.h"
#include "results/verdict/verdict.h"

#include <cctype>
#include <cstddef>

#include <fmt/format.h>

namespace ncclsmoke::harness {
namespace {

std::optional<JobIdentity> usable(const std::optional<std::string>& raw, const char* source) {
  if (!raw) return std::nullopt;
  std::string v = trim(*raw);
  if (!job_id_problem(v).empty()) return std::nullopt;
  return JobIdentity{v, source};
}

// <name>-master-<i> / <name>-worker-<i> -> <name> (training-operator names PyTorchJob pods so).
std::optional<std::string> pytorchjob_name(const std::string& host) {
  for (const char* role : {"-master-", "-worker-"}) {
    auto at = host.rfind(role);
    if (at == std::string::npos || at == 0) continue;
    std::string_view index = std::string_view(host).substr(at + std::string_view(role).size());
    if (all_digits(index)) return host.substr(0, at);
  }
  return std::nullopt;
}

}  // namespace

std::string job_id_problem(std::string_view raw) {
  std::string v = trim(raw);
  if (v.empty()) return "empty";
  if (v.size() > kMaxJobIdLength)
    return fmt::format("{} characters long, more than {}", v.size(), kMaxJobIdLength);
  for (char c : v) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '/') return "contains '/', which separates store key levels";
    if (u < 0x20 || u >= 0x7f) return "contains a control or non-ASCII byte";
  }
  return "";
}

std::optional<JobIdentity> discover_job_identity(const std::optional<std::string>& flag,
                                                 const Environment& env,
                                                 const std::string& hostname) {
  try {
    auto get = [&env](const char* name) { return lookup(env, name); };
    if (auto j = usable(flag, "--job-id")) return j;
    if (auto j = usable(get("NCCLSMOKE_JOB_ID"), "NCCLSMOKE_JOB_ID")) return j;
    if (auto j = usable(get("TORCHELASTIC_RUN_ID"), "TORCHELASTIC_RUN_ID"); j && j->id != "none")
      return j;
    if (auto job = usable(get("SLURM_JOB_ID"), "SLURM_JOB_ID")) {
      if (auto step = usable(get("SLURM_STEP_ID"), "SLURM_STEP_ID")) {
        std::string both = fmt::format("{}.{}", job->id, step->id);
        if (both.size() <= kMaxJobIdLength) job->id = both;
      }
      return job;
    }
    if (auto j = usable(get("OMPI_MCA_ess_base_jobid"), "OMPI_MCA_ess_base_jobid")) return j;
    if (auto j = usable(get("PMIX_NAMESPACE"), "PMIX_NAMESPACE")) return j;
    const std::string host = trim(hostname);
    // JobSet: its name, passed through the downward API, else from the pod's host name.
    if (auto j = usable(get("JOBSET_NAME"), "JOBSET_NAME")) return j;
    if (auto master = get("MASTER_ADDR"); master && get("JOB_COMPLETION_INDEX"))
      if (auto js = jobset_host(host, *master))
        if (auto j = usable(js->jobset, "hostname (JobSet)")) return j;
    // LeaderWorkerSet: one world per group, named by its leader pod (<lws>-<g>.<lws>.<ns>).
    if (auto leader = get("LWS_LEADER_ADDRESS")) {
      std::string l = trim(*leader);
      if (auto j = usable(l.substr(0, l.find('.')), "LWS_LEADER_ADDRESS")) return j;
    }
    // Trainer v2: pods <tj>-node-0-<i> of the TrainJob <tj> (kubeflow/trainer jobset/builder.go: one
    // child Job "node" of numNodes pods).
    if (get("PET_NODE_RANK"))
      if (auto name = trainjob_name(host))
        if (auto j = usable(*name, "hostname (TrainJob)")) return j;
    if (get("KUBERNETES_SERVICE_HOST")) {
      if (auto name = pytorchjob_name(host))
        if (auto j = usable(*name, "hostname (PyTorchJob)")) return j;
    }
    if (auto index = get("JOB_COMPLETION_INDEX")) {
      std::string suffix = fmt::format("-{}", trim(*index));
      if (all_digits(trim(*index)) && host.size() > suffix.size() &&
          host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0)
        if (auto j = usable(host.substr(0, host.size() - suffix.size()), "hostname (Indexed Job)"))
          return j;
    }
  } catch (...) {
    // Allocation failure only: no identity rather than a crash.
  }
  return std::nullopt;
}

std::string run_id_problem(std::string_view v) {
  if (v.empty()) return "empty";
  if (v.size() > 128) return fmt::format("{} characters, more than 128", v.size());
  if (v.front() == '.' || v.front() == '-') return fmt::format("starts with '{}'", v.front());
  for (unsigned char c : v)
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.')
      return c < 0x20 || c >= 0x7f ? fmt::format("contains the byte 0x{:02x}", c)
                                    : fmt::format("contains '{}'", static_cast<char>(c));
  return "";
}

std::string make_run_id(std::string_view prefix) {
  std::string p;
  for (unsigned char c : prefix.substr(0, 96))
    p += std::isalnum(c) || c == '-' || c == '_' || c == '.' ? static_cast<char>(c) : '_';
  while (!p.empty() && (p.front() == '.' || p.front() == '-')) p.erase(0, 1);
  std::string id = results::new_run_id();
  return p.empty() ? id : p + "-" + id;
}

}  // namespace ncclsmoke::harness
