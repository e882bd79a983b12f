#include "harness/run/world_step.h"

#include "node/gpu_health.h"
#include "node/kernel_log.h"
#include "node/nic_health.h"
#include "node/sysfs.h"

#include <set>
#include <sstream>

#include "harness/common/progress.h"
#include "harness/run/set_aside.h"
#include "harness/world/job_token.h"

namespace ncclsmoke::harness {

namespace {

bool load_profile(RunContext& ctx) {
  const auto& o = ctx.o;
  if (o.profile.empty()) return true;
  try {
    ctx.profiles = results::load_profiles_file(o.profiles_file);
  } catch (const std::exception& e) {
    ctx.saw(results::ProfileProblemSeen{.self = ctx.self(), .profiles_file = o.profiles_file,
                                        .error = e.what(), .profile = {}, .names = {}});
    return false;
  }
  ctx.profile = results::find_profile(ctx.profiles, o.profile);
  if (!ctx.profile) {
    std::vector<std::string> names;
    for (const auto& p : ctx.profiles) names.push_back(p.name);
    ctx.saw(results::ProfileProblemSeen{.self = ctx.self(), .profiles_file = o.profiles_file,
                                        .error = {}, .profile = o.profile, .names = names});
    return false;
  }
  return true;
}

// The job token (harness/world/job_token.h): a token file that cannot be used stops the run here, before
// it touches the network, as CONFIG_INVALID naming the file.
bool load_job_token(RunContext& ctx) {
  auto t = resolve_job_token(ctx.o.job_token_file);
  if (t.problem) {
    ctx.saw(results::ConfigSeen{{*t.problem}, ctx.world.rank, ctx.world.hostname});
    return false;
  }
  ctx.job_token = std::move(t.token);
  return true;
}

// --exclude-hosts / --exclude-file (harness/run/set_aside.h): a file that cannot be used stops the run
// here, as CONFIG_INVALID naming the file and the line.
bool load_exclusions(RunContext& ctx) {
  auto problem = load_set_aside(ctx.o.exclude_hosts, ctx.o.exclude_file, ctx.set_aside);
  if (!problem) return true;
  ctx.saw(results::ConfigSeen{{*problem}, ctx.world.rank, ctx.world.hostname});
  return false;
}

// Under Slurm the node's name is Slurm's (SLURMD_NODENAME), unless --node-name or NODE_NAME said
// otherwise: --slurm-drain and --exclude-file name nodes as scontrol and sbatch --exclude know them.
void slurm_node_name(World& w, const Environment& environment) {
  auto it = w.sources_by_field.find("node_name");
  if (it == w.sources_by_field.end() || it->second != "hostname") return;
  auto n = lookup(environment, "SLURMD_NODENAME");
  if (!n || n->empty() || !results::check_host_name(*n).empty()) return;
  w.node_name = *n;
  it->second = "SLURMD_NODENAME";
}

// The world as discovered (whole, or partial after a config error), for the verdict: who
// reports, the world's size and master, the job id and where each came from.
void record_world(RunContext& ctx) {
  const auto& w = ctx.world;
  results::WorldSeen seen;
  seen.rank = w.rank;
  seen.world.size = w.world_size;
  seen.world.master_addr = w.master_addr;
  seen.world.master_port = w.master_port;
  seen.world.source = w.source;
  seen.world.job_id = w.job_id;
  seen.world.job_id_source = w.job_id_source;
  seen.world.restart_count = w.restart_count;
  seen.world.sources = w.sources_by_field;
  ctx.saw(std::move(seen));
}

}  // namespace

// The node's kernel log (NCCLSMOKE_KMSG, else /dev/kmsg), read by the node's local rank 0 once the
// world says who this rank is: its GPU faults are judged with the rest (results/judging/node_rules.h). Read before the
// network steps, so a run the watchdog ends still has it; a GPU fault during a run of seconds is
// left to the next run. The network devices' first reading (NCCLSMOKE_SYSFS_ROOT, else /sys) is
// taken here too: the run ends with the second (RunSession::finish), and the counters that moved
// between them are the run's.
void read_node_at_start(RunContext& ctx) {
  // NVML once a node: its local rank 0 reads every GPU of the node (NCCLSMOKE_NVML names another
  // library, for tests); a node without the driver has no library, and that says nothing.
  if (ctx.world.local_rank == 0) {
    const std::string library = env("NCCLSMOKE_NVML").value_or(node::kNvmlLibrary);
    auto gpus = node::read_gpu_health(library);
    if (gpus.read)
      log_debug(fmt::format("node: NVML {} lists {} GPU{}", gpus.driver_version, gpus.gpus.size(),
                            gpus.gpus.size() == 1 ? "" : "s"));
    else
      log_debug(fmt::format("node: NVML not read ({})", gpus.why_not));
    ctx.saw(results::GpuHealthSeen{std::move(gpus), ctx.self()});
  }
  ctx.nic_start = node::read_nic_snapshot(node::sysfs_root(env("NCCLSMOKE_SYSFS_ROOT")));
  if (!ctx.nic_start.read)
    log_debug(fmt::format("node: no network device under {} was read", ctx.nic_start.root));
  else
    log_debug(fmt::format("node: {} interfaces and {} RDMA ports read under {}",
                          ctx.nic_start.interfaces.size(), ctx.nic_start.rdma_ports.size(),
                          ctx.nic_start.root));
  // The kernel log once a node too: it is the node's, and /dev/kmsg gives one record a read
  // (thousands of reads), which every rank of a node would repeat for the same lines.
  if (ctx.world.local_rank != 0) return;
  const std::string path = env("NCCLSMOKE_KMSG").value_or(node::kKernelLogDefault);
  auto log = node::read_kernel_log(path);
  if (!log.read)
    log_debug(fmt::format("node: the kernel log {} was not read ({}): GPU faults are not known",
                          path, log.why_not));
  else if (!log.xids.empty())
    log_info(fmt::format("node: the kernel log {} has {} NVRM Xid line{}", path, log.xids.size(),
                         log.xids.size() == 1 ? "" : "s"));
  ctx.saw(results::KernelLogSeen{std::move(log), ctx.self()});
}

bool world_step(RunContext& ctx) {
  auto t0 = Clock::now();
  log_set_phase("world");
  auto wr = discover_world(ctx.o.world, ctx.environment);
  if (!wr.findings.empty())
    ctx.saw(results::ConfigSeen{wr.findings, wr.partial ? wr.partial->rank : -1, local_hostname()});
  auto ended = [&](bool world_built, bool accepted) {
    return results::WorldEndSeen{wr.findings, world_built, accepted};
  };
  if (!wr.world && !wr.partial) {
    // The rank itself is unreadable: no rank to name the file after (verdict.invalid-config).
    ctx.end_step("world", ended(false, true), t0,
                  "invalid configuration");
    return false;
  }
  ctx.world = wr.world ? *wr.world : *wr.partial;
  ctx.have_world = true;
  slurm_node_name(ctx.world, ctx.environment);
  if (ctx.world.rank == 0) remove_stale_suspects_file(ctx);
  const auto& w = ctx.world;
  ctx.log_level = run_log_level(w.rank, ctx.o.quiet, ctx.o.verbose, ctx.log_env);
  log_set_host(w.hostname);
  log_for_rank(w.rank, ctx.log_level);
  log_info(phase_start_line("world"));
  record_world(ctx);
  if (!wr.world) {
    // A config error with the rank known: each rank writes its own verdict.rank<N>.json (rank 0
    // verdict.json too) with what it could read, so one bad field does not hide who failed.
    ctx.end_step("world", ended(false, true), t0,
                  "invalid configuration");
    return false;
  }
  if (!load_profile(ctx)) {
    ctx.end_step("world", ended(true, false), t0,
                  "invalid profile");
    return false;
  }
  if (!load_job_token(ctx)) {
    ctx.end_step("world", ended(true, false), t0,
                  "unreadable job token file");
    return false;
  }
  if (!load_exclusions(ctx)) {
    ctx.end_step("world", ended(true, false), t0,
                  "unusable --exclude-file");
    return false;
  }
  read_node_at_start(ctx);
  ctx.end_step("world", ended(true, true), t0, describe(w));
  return true;
}

}  // namespace ncclsmoke::harness
