#include "harness/world/launchers.h"
#include "harness/common/text.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace ncclsmoke::harness {
namespace {

using results::WorldSource;

bool has(const Environment& env, const char* name) { return lookup(env, name).has_value(); }

std::string lowered(std::string_view s) {
  std::string out(trim(s));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "<a>-<digits>" -> {"<a>", "<digits>"}; nullopt when the last part is not all digits.
std::optional<std::pair<std::string, std::string>> split_index(std::string_view s) {
  auto dash = s.rfind('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == s.size()) return std::nullopt;
  std::string_view index = s.substr(dash + 1);
  if (!all_digits(index)) return std::nullopt;
  return std::make_pair(std::string(s.substr(0, dash)), std::string(index));
}

// A Kubeflow PyTorchJob pod (training-operator pkg/controller.v1/pytorch/envvar.go) started
// without torchrun: RANK is the pod's index and PET_* describe torchrun's nodes.
bool detect_pytorchjob(const Environment& env, const std::string&) {
  return has(env, "RANK") && (has(env, "PET_NPROC_PER_NODE") || has(env, "PET_NNODES")) &&
         !has(env, "TORCHELASTIC_RUN_ID");
}
bool detect_torchrun(const Environment& env, const std::string&) { return has(env, "RANK"); }
bool detect_openmpi(const Environment& env, const std::string&) {
  return has(env, "OMPI_COMM_WORLD_RANK");
}
bool detect_slurm(const Environment& env, const std::string&) { return has(env, "SLURM_PROCID"); }
// Kubeflow Trainer v2 (kubeflow/trainer pkg/runtime/framework/plugins/torch/torch.go): only PET_*,
// no RANK (which would have made it a PyTorchJob or torchrun above).
bool detect_trainer(const Environment& env, const std::string&) {
  return has(env, "PET_NODE_RANK");
}
// LeaderWorkerSet (kubernetes-sigs/lws pkg/utils/pod/pod_utils.go) sets LWS_WORKER_INDEX in
// every pod of a group, the leader's 0.
bool detect_lws(const Environment& env, const std::string&) {
  return has(env, "LWS_WORKER_INDEX");
}
// JobSet sets no variable of its own: our manifests pass its labels and annotations through the
// downward API (JOBSET_*); without them a JobSet pod still shows by its host name and MASTER_ADDR,
// so it is named as one (and told what to add) instead of joining a world of one child Job.
bool detect_jobset(const Environment& env, const std::string& host) {
  if (has(env, "JOBSET_NAME") || has(env, "JOBSET_JOB_GLOBAL_INDEX") ||
      has(env, "JOBSET_GLOBAL_REPLICAS"))
    return true;
  auto master = lookup(env, "MASTER_ADDR");
  return has(env, "JOB_COMPLETION_INDEX") && master && jobset_host(host, *master).has_value();
}
bool detect_indexed_job(const Environment& env, const std::string&) {
  return has(env, "JOB_COMPLETION_INDEX");
}

const std::vector<LauncherSpec> kLaunchers = {
    {.source = WorldSource::pytorchjob,
     .name = "pytorchjob",
     .aliases = {"kubeflow-pytorchjob"},
     .label = "Kubeflow PyTorchJob",
     .detect = detect_pytorchjob,
     .rank_var = "RANK",
     .size_vars = {"WORLD_SIZE"},
     .local_var = nullptr,
     .addr_vars = {"MASTER_ADDR"},
     .port_vars = {"MASTER_PORT"},
     .host_pattern = "<job>-master-0, <job>-worker-<i>",
     .missing_size_hint = "training-operator sets WORLD_SIZE in every pod of the PyTorchJob; set it "
                          "in the pod template, or pass --world-size",
     .missing_master_hint = "training-operator sets MASTER_ADDR to <job>-master-0 when the "
                            "PyTorchJob has a Master replica: add one, or set MASTER_ADDR in the "
                            "pod template, or pass --master-addr <rank 0 host>",
     .service_link_fix = nullptr,
     .stop_sender = "training-operator: the PyTorchJob's runPolicy.activeDeadlineSeconds, a "
                     "deleted pod or an operator",
     .stop_fix = "raise the PyTorchJob's runPolicy.activeDeadlineSeconds above --timeout"},
    {.source = WorldSource::torchrun,
     .name = "torchrun",
     .aliases = {"torch", "torchelastic"},
     .label = "torchrun",
     .detect = detect_torchrun,
     .rank_var = "RANK",
     .size_vars = {"WORLD_SIZE"},
     .local_var = "LOCAL_RANK",
     .addr_vars = {"MASTER_ADDR"},
     .port_vars = {"MASTER_PORT"},
     .torchelastic_agent = true,
     .process_ranks = true,
     .host_pattern = "any",
     .missing_size_hint = nullptr,
     .missing_master_hint = "torchrun sets MASTER_ADDR from --master-addr / --rdzv-endpoint; set "
                            "it in the job spec, or pass --master-addr <rank 0 host>",
     .service_link_fix = nullptr,
     .stop_sender = "torchrun's agent: it stops every worker when one fails or when it is "
                     "stopped itself (its pod, job or operator)",
     .stop_fix = "give whatever stops torchrun (its job's or pod's time limit) more than "
                  "--timeout; otherwise find the worker that failed first in torchrun's "
                  "output"},
    {.source = WorldSource::openmpi,
     .name = "mpi",
     .aliases = {"openmpi", "ompi", "mpirun", "mpijob"},
     .label = "Open MPI",
     .detect = detect_openmpi,
     .rank_var = "OMPI_COMM_WORLD_RANK",
     .size_vars = {"OMPI_COMM_WORLD_SIZE"},
     .local_var = "OMPI_COMM_WORLD_LOCAL_RANK",
     .addr_vars = {"MASTER_ADDR"},
     .port_vars = {"MASTER_PORT"},
     .master_fallback = MasterFallback::mpi_hostfile,
     .process_ranks = true,
     .host_pattern = "the hostfile's hosts (MPIJob: <mj>-worker-<i>.<mj>.<ns>.svc)",
     .missing_size_hint = nullptr,
     .missing_master_hint =
         "export it to every rank: mpirun -x MASTER_ADDR=<rank 0 host> (in an MPIJob: mpirun -x "
         "MASTER_ADDR=$(head -1 /etc/mpi/hostfile | cut -d' ' -f1)); without it the master is "
         "the first host of the hostfile OMPI_MCA_orte_default_hostfile names, where a rank can "
         "read that file; or pass --master-addr <rank 0 host>",
     .service_link_fix = "set MASTER_PORT to the port number only and export it to every rank "
                         "(mpirun -x MASTER_PORT={port}), or pass --master-port {port}",
     .stop_sender = "mpirun: it stops every rank when one rank fails, when its --timeout "
                     "expires or when it is interrupted",
     .stop_fix = "raise mpirun's --timeout above ncclsmoke's --timeout; otherwise find the "
                  "rank that exited first in mpirun's output"},
    {.source = WorldSource::slurm,
     .name = "slurm",
     .aliases = {"srun", "sbatch"},
     .label = "Slurm",
     .detect = detect_slurm,
     .rank_var = "SLURM_PROCID",
     .size_vars = {"SLURM_NTASKS", "SLURM_NPROCS"},
     .local_var = "SLURM_LOCALID",
     .addr_vars = {"MASTER_ADDR"},
     .port_vars = {"MASTER_PORT"},
     .master_fallback = MasterFallback::slurm_nodelist,
     .port_from_slurm_job = true,
     .process_ranks = true,
     .host_pattern = "the allocation's nodes (SLURM_STEP_NODELIST)",
     .missing_size_hint = nullptr,
     .missing_master_hint =
         "run under srun, which sets SLURM_STEP_NODELIST (its first host becomes the master), or "
         "export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -1) in the "
         "batch script before srun, or pass --master-addr <rank 0 host>",
     .service_link_fix = "unset MASTER_PORT (e.g. `env -u MASTER_PORT srun ...` or `unset "
                         "MASTER_PORT` in the batch script): without it the port is derived from "
                         "SLURM_JOB_ID; or pass --master-port {port}",
     .stop_sender = "Slurm: the job's time limit (--time or the partition's MaxTime), scancel "
                     "or preemption",
     .stop_fix = "raise the job's --time above --timeout (sacct -j <job> -o State shows "
                  "TIMEOUT, CANCELLED or PREEMPTED)"},
    {.source = WorldSource::trainer_v2,
     .name = "trainer",
     .aliases = {"trainer-v2", "trainjob", "kubeflow-trainer"},
     .label = "Kubeflow Trainer v2 TrainJob",
     .detect = detect_trainer,
     .rank_var = "PET_NODE_RANK",
     .size_vars = {"PET_NNODES"},
     .local_var = nullptr,
     .addr_vars = {"PET_MASTER_ADDR", "MASTER_ADDR"},
     .port_vars = {"PET_MASTER_PORT", "MASTER_PORT"},
     .host_pattern = "<tj>-node-0-<i> (one child Job, numNodes pods)",
     .missing_size_hint = "Trainer v2 sets PET_NNODES from the TrainJob's numNodes; set it, or "
                          "pass --world-size",
     .missing_master_hint = "Trainer v2 sets PET_MASTER_ADDR to <tj>-node-0-0.<tj> in every "
                            "node; set it (or MASTER_ADDR), or pass --master-addr <rank 0 host>",
     .service_link_fix = nullptr,
     .stop_sender = "Kubeflow Trainer: the TrainJob's activeDeadlineSeconds (its JobSet's), "
                     "the TrainJob suspended or deleted, or an operator",
     .stop_fix = "raise the TrainJob's activeDeadlineSeconds above --timeout"},
    {.source = WorldSource::leaderworkerset,
     .name = "lws",
     .aliases = {"leaderworkerset"},
     .label = "LeaderWorkerSet",
     .detect = detect_lws,
     .rank_var = "LWS_WORKER_INDEX",
     .size_vars = {"LWS_GROUP_SIZE"},
     .local_var = nullptr,
     .addr_vars = {"LWS_LEADER_ADDRESS", "MASTER_ADDR"},
     .port_vars = {"MASTER_PORT"},
     .host_pattern = "leader <lws>-<g>, workers <lws>-<g>-<i>",
     .missing_size_hint = "LeaderWorkerSet sets LWS_GROUP_SIZE from leaderWorkerTemplate.size; "
                          "pass --world-size if it is missing",
     .missing_master_hint = "LeaderWorkerSet sets LWS_LEADER_ADDRESS (<lws>-<g>.<lws>.<ns>) in "
                            "every pod of a group; pass --master-addr <leader host> if it is "
                            "missing",
     .service_link_fix = nullptr,
     .stop_sender = "LeaderWorkerSet: it recreates the whole group when one pod fails "
                     "(RecreateGroupOnPodRestart) and on a rolling update, or an operator",
     .stop_fix = "find the pod of the group that failed first, or hold rolling updates "
                  "while the smoke test runs"},
    {.source = WorldSource::jobset,
     .name = "jobset",
     .aliases = {},
     .label = "JobSet",
     .detect = detect_jobset,
     .rank_rule = RankRule::jobset,
     .rank_var = "JOBSET_JOB_GLOBAL_INDEX",
     .size_vars = {"WORLD_SIZE"},
     .local_var = nullptr,
     .addr_vars = {"MASTER_ADDR"},
     .port_vars = {"MASTER_PORT"},
     .host_pattern = "<js>-<rjob>-<j>-<p> (subdomain <js>)",
     .missing_size_hint = "set WORLD_SIZE in the pod template to every pod of the JobSet (child "
                          "Jobs x parallelism), or pass --world-size",
     .missing_master_hint = "set MASTER_ADDR in the pod template to the first pod under the "
                            "JobSet's Service, <js>-<rjob>-0-0.<js> (network.enableDNSHostnames, "
                            "on by default), or pass --master-addr <rank 0 host>",
     .service_link_fix = nullptr,
     .stop_sender = "JobSet: its failurePolicy restarting every child Job when one fails, a "
                     "child Job's activeDeadlineSeconds, the JobSet suspended or deleted",
     .stop_fix = "raise the child Jobs' activeDeadlineSeconds above --timeout; if a "
                  "restart did it, find the pod that failed first (kubectl get pods -l "
                  "jobset.sigs.k8s.io/jobset-name=<js>)"},
    {.source = WorldSource::k8s_indexed_job,
     .name = "k8s",
     .aliases = {"kubernetes", "k8s-indexed-job", "indexed-job"},
     .label = "Kubernetes Indexed Job",
     .detect = detect_indexed_job,
     .rank_var = "JOB_COMPLETION_INDEX",
     .size_vars = {"WORLD_SIZE"},
     .local_var = nullptr,
     .addr_vars = {"MASTER_ADDR"},
     .port_vars = {"MASTER_PORT"},
     .host_pattern = "<job>-<i> (subdomain: the headless Service)",
     .missing_size_hint = "pass --world-size <the Job's completions> or set WORLD_SIZE in the pod "
                          "template",
     .missing_master_hint = "set MASTER_ADDR to rank 0's stable DNS name through the headless "
                            "Service (<job>-0.<service>), or pass --master-addr <rank 0 host>",
     .service_link_fix = nullptr,
     .stop_sender = "the Job's activeDeadlineSeconds, a deleted pod or an operator",
     .stop_fix = "raise the Job's activeDeadlineSeconds above --timeout"},
};

}  // namespace

const std::vector<LauncherSpec>& launchers() { return kLaunchers; }

const LauncherSpec* launcher_named(std::string_view name) {
  const std::string n = lowered(name);
  for (const auto& l : kLaunchers) {
    if (n == l.name) return &l;
    for (const char* a : l.aliases)
      if (n == a) return &l;
  }
  return nullptr;
}

const LauncherSpec* detect_launcher(const Environment& env, const std::string& host) {
  for (const auto& l : kLaunchers)
    if (l.detect(env, host)) return &l;
  return nullptr;
}

const LauncherSpec* launcher_of(results::WorldSource source) {
  for (const auto& l : kLaunchers)
    if (l.source == source) return &l;
  return nullptr;
}

results::TerminationCause termination_of(results::WorldSource source) {
  if (const LauncherSpec* l = launcher_of(source)) return {l->stop_sender, l->stop_fix};
  if (source == WorldSource::launch)
    return {"ncclsmoke launch: it stops every rank when one fails, when it is interrupted or "
            "when its own deadline passes",
            "find the rank that failed first in launch's output; if the deadline is too short, "
            "raise --timeout"};
  return {};
}

std::string launcher_choices() {
  std::string out = "auto";
  for (const auto& l : kLaunchers) out += fmt::format(", {}", l.name);
  return out + ", flags";
}

std::optional<std::string> trainjob_name(const std::string& host) {
  auto pod = split_index(trim(host));
  if (!pod) return std::nullopt;
  auto node = split_index(pod->first);
  if (!node) return std::nullopt;
  constexpr std::string_view kRole = "-node";
  const std::string& rest = node->first;
  if (rest.size() <= kRole.size() || rest.compare(rest.size() - kRole.size(), kRole.size(), kRole))
    return std::nullopt;
  return rest.substr(0, rest.size() - kRole.size());
}

std::optional<JobSetHost> jobset_host(const std::string& host_raw, const std::string& master_raw) {
  const std::string host = trim(host_raw), master = trim(master_raw);
  // MASTER_ADDR: "<js>-<rjob>-0-0.<js>[.<ns>...]": the first label is pod 0 of job 0, the second
  // the JobSet's Service (its subdomain).
  auto dot = master.find('.');
  if (dot == std::string::npos) return std::nullopt;
  auto dot2 = master.find('.', dot + 1);
  const std::string first = master.substr(0, dot);
  const std::string sub = master.substr(dot + 1, dot2 == std::string::npos ? std::string::npos
                                                                           : dot2 - dot - 1);
  if (sub.empty() || first.rfind(sub + "-", 0) != 0 || host.rfind(sub + "-", 0) != 0)
    return std::nullopt;
  auto m_pod = split_index(first);
  if (!m_pod || m_pod->second != "0") return std::nullopt;
  auto m_job = split_index(m_pod->first);
  if (!m_job || m_job->second != "0") return std::nullopt;
  auto pod = split_index(host);
  if (!pod) return std::nullopt;
  auto job = split_index(pod->first);
  if (!job) return std::nullopt;
  // A non-empty <rjob> between "<js>-" and "-<j>-<p>" (it may differ from the master's).
  if (job->first.size() <= sub.size() + 1) return std::nullopt;
  JobSetHost out;
  out.jobset = sub;
  out.replicated_job = job->first.substr(sub.size() + 1);
  out.job_index = job->second;
  out.pod_index = pod->second;
  return out;
}

}  // namespace ncclsmoke::harness
