#include "harness/launch/launch_plan.h"
#include "harness/common/env.h"
#include "harness/common/text.h"

#include <dirent.h>

#include <cctype>
#include <cstdio>
#include <random>

#include "rendezvous/store_util.h"

namespace ncclsmoke::harness {
namespace {

struct Raw {
  std::string variable;
  std::string value;
};


std::string shown(const std::string& raw) { return rendezvous::printable(raw, 96); }

// 1 to 9 decimal digits after trimming; nullopt otherwise.
std::optional<long> small_uint(const std::string& raw) {
  std::string s = trim(raw);
  if (s.empty() || s.size() > 9) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  return std::stol(s);
}

class Planner {
 public:
  Planner(const LaunchFlags& f, const Environment& env, const std::string& host, int gpus)
      : f_(f), env_(env), host_(host), gpus_(gpus) {}

  std::variant<LaunchPlan, LaunchError> run();

 private:
  // The launcher variable `name` (harness/common/env.h: guarded, set-but-empty is "").
  std::optional<std::string> var(const char* name) const { return lookup(env_, name); }
  // The flag when given, else the first variable that is set.
  std::optional<Raw> pick(const std::optional<std::string>& flag, const char* flag_name,
                          std::initializer_list<const char*> vars) const {
    if (flag) return Raw{flag_name, *flag};
    for (const char* v : vars)
      if (auto val = var(v)) return Raw{v, *val};
    return std::nullopt;
  }
  LaunchError error(const Raw& r, const std::string& what, const std::string& fix) const {
    return {r.variable, r.value, r.variable + " is " + shown(r.value) + ": " + what + "; " + fix};
  }

  const LaunchFlags& f_;
  const Environment& env_;
  std::string host_;
  int gpus_;
};

std::variant<LaunchPlan, LaunchError> Planner::run() {
  LaunchPlan p;

  // Nodes. Under an elasticPolicy training-operator sets PET_NNODES to "min:max".
  if (auto r = pick(f_.nnodes, "--nnodes", {"PET_NNODES"})) {
    std::string v = trim(r->value);
    auto colon = v.find(':');
    std::optional<long> n;
    if (colon != std::string::npos) {
      auto lo = small_uint(v.substr(0, colon)), hi = small_uint(v.substr(colon + 1));
      if (!lo || !hi)
        return error(*r, "not a number of nodes or a MIN:MAX range",
                     "set it to the number of nodes (pods), e.g. 2");
      if (*lo != *hi)
        return error(*r,
                     "an elastic range: ncclsmoke launch starts one fixed world, and elastic "
                     "ranges need torchrun",
                     "make minReplicas equal maxReplicas (or pass --nnodes N with the node count)");
      n = lo;
    } else {
      n = small_uint(v);
      if (!n)
        return error(*r, "not a number of nodes",
                     "set it to the number of nodes (pods) taking part, e.g. 2");
    }
    if (*n < 1 || *n > 65536)
      return error(*r, "outside 1..65536", "set it to the number of nodes (pods), e.g. 2");
    p.nnodes = static_cast<int>(*n);
    p.nnodes_from = r->variable;
  } else {
    p.nnodes_from = "default";
  }

  // Processes on this node. training-operator's default nprocPerNode is "auto".
  if (auto r = pick(f_.nproc_per_node, "--nproc-per-node", {"PET_NPROC_PER_NODE"})) {
    std::string v = trim(r->value);
    std::optional<long> n;
    if (v == "auto" || v == "gpu") {
      if (gpus_ <= 0)
        return error(*r, "torchrun's device count, and this node shows no GPU (/dev/nvidia<N>)",
                     "set nprocPerNode to a number, or pass --nproc-per-node N");
      n = gpus_;
    } else if (v == "cpu") {
      return error(*r, "one rank per CPU core is not a useful smoke test",
                   "set nprocPerNode to a number (the GPUs per pod), or pass --nproc-per-node N");
    } else {
      n = small_uint(v);
      if (!n) return error(*r, "not a number of processes", "set it to the ranks per node, e.g. 8");
    }
    if (*n < 1 || *n > 1024)
      return error(*r, "outside 1..1024", "set it to the ranks per node (e.g. its GPUs), 1..1024");
    p.nproc_per_node = static_cast<int>(*n);
    p.nproc_from = r->variable;
  } else {
    p.nproc_from = "default";
  }
  if (static_cast<long long>(p.nnodes) * p.nproc_per_node > kMaxWorldSize)
    return LaunchError{p.nnodes_from, std::to_string(p.nnodes),
                       p.nnodes_from + " " + std::to_string(p.nnodes) + " x " + p.nproc_from +
                           " " + std::to_string(p.nproc_per_node) + " is more than " +
                           std::to_string(kMaxWorldSize) + " ranks, likely a typo"};

  // This node's index.
  if (auto r = pick(f_.node_rank, "--node-rank", {"PET_NODE_RANK"})) {
    auto n = small_uint(r->value);
    if (!n)
      return error(*r, "not a node index",
                   "set it to this node's index, 0.." + std::to_string(p.nnodes - 1));
    if (*n >= p.nnodes)
      return error(*r, "not below the node count " + std::to_string(p.nnodes) + " (from " +
                           p.nnodes_from + ")",
                   "node ranks run 0.." + std::to_string(p.nnodes - 1) +
                       ": make the node rank and the node count describe the same job");
    p.node_rank = static_cast<int>(*n);
    p.node_rank_from = r->variable;
  } else if (p.nnodes > 1) {
    return LaunchError{"PET_NODE_RANK", "",
                       "PET_NODE_RANK is not set and no --node-rank was given, but there are " +
                           std::to_string(p.nnodes) + " nodes (from " + p.nnodes_from +
                           "); pass --node-rank <0.." + std::to_string(p.nnodes - 1) +
                           "> on each node (training-operator sets PET_NODE_RANK)"};
  } else {
    p.node_rank_from = "default";
  }

  // Rank 0's address: node 0's first process hosts the store there.
  auto addr = pick(f_.master_addr, "--master-addr", {"PET_MASTER_ADDR", "MASTER_ADDR"});
  if (addr) {
    WorldFlags check;
    check.rank = "0";
    check.world_size = "2";
    check.master_addr = addr->value;
    check.master_addr_name = addr->variable;  // the world check names what the value came from
    check.master_port = "1";
    check.launcher = "flags";
    auto res = discover_world(check, map_environment({}), host_);
    for (const auto& fd : res.findings)
      if (fd.blocking() && fd.variable == addr->variable)
        return LaunchError{addr->variable, addr->value, fd.message + "; " + fd.hint};
    p.master_addr = trim(addr->value);
    p.addr_from = addr->variable;
  } else if (p.nnodes > 1) {
    return LaunchError{"MASTER_ADDR", "",
                       "no master address: " + std::to_string(p.nnodes) +
                           " nodes but neither --master-addr, PET_MASTER_ADDR nor MASTER_ADDR "
                           "is set; pass --master-addr <node 0's host> on every node"};
  } else {
    p.addr_from = "default";
    p.store_on_loopback = true;
  }

  // Its port. A port picked here is known to this node only, so only then may it change.
  if (auto r = pick(f_.master_port, "--master-port", {"PET_MASTER_PORT", "MASTER_PORT"})) {
    if (r->value.find("://") != std::string::npos)
      return error(*r, "a Kubernetes service link, not a port (a Service named 'master' injects "
                       "MASTER_PORT=tcp://ip:port)",
                   "set enableServiceLinks: false in the pod spec, or pass --master-port N");
    auto n = small_uint(r->value);
    if (!n || *n < 1 || *n > 65535)
      return error(*r, "not a TCP port", "set it to a port in 1..65535 for rank 0's store");
    p.master_port = static_cast<int>(*n);
    p.port_from = r->variable;
  } else if (p.nnodes == 1) {
    p.master_port = 0;
    p.retry_new_port = true;
    p.port_from = "free loopback port";
  } else {
    p.master_port = kDefaultMasterPort;
    p.port_from = "default";
  }

  if (p.nnodes == 1) {
    p.local_node_names = true;
  } else {
    auto n = var("NODE_NAME");
    std::string name = n ? trim(*n) : "";
    p.node_name = name.empty() ? trim(host_) : name;
    if (p.node_name.empty()) p.node_name = "unknown-host";
  }

  // One job id for every process of every node, decided here.
  if (f_.job_id) {
    const std::string& v = *f_.job_id;
    bool ok = !v.empty() && v.size() <= 128 && v.find('/') == std::string::npos;
    for (unsigned char c : v) ok = ok && c > 0x20 && c < 0x7f;
    if (!ok)
      return error(Raw{"--job-id", v}, "not a job id",
                   "use 1..128 printable characters without '/' or spaces");
  }
  if (auto id = discover_job_identity(f_.job_id, env_, host_)) {
    p.job_id = id->id;
    p.job_id_source = id->source;
  }
  // Which launcher started this launch: a value read from PET_* names the Kubeflow controller.
  for (const std::string* from : {&p.nnodes_from, &p.nproc_from, &p.node_rank_from, &p.addr_from,
                                  &p.port_from})
    if (from->rfind("PET_", 0) == 0)
      p.source = var("RANK") ? results::WorldSource::pytorchjob : results::WorldSource::trainer_v2;
  return p;
}

}  // namespace

std::variant<LaunchPlan, LaunchError> plan_launch(const LaunchFlags& flags, const Environment& env,
                                                  const std::string& hostname, int gpu_count) {
  try {
    return Planner(flags, env, hostname, gpu_count).run();
  } catch (const std::exception& e) {
    return LaunchError{"", "", std::string("launch planning failed: ") + e.what()};
  }
}

int count_nvidia_devices() {
  int n = 0;
  if (DIR* d = ::opendir("/dev")) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
          name.find_first_not_of("0123456789", 6) == std::string::npos)
        ++n;
    }
    ::closedir(d);
  }
  return n;
}

std::string random_launch_id() {
  std::random_device rd;
  unsigned long long v = (static_cast<unsigned long long>(rd()) << 32) ^ rd();
  char buf[32];
  std::snprintf(buf, sizeof buf, "launch-%016llx", v);
  return buf;
}

}  // namespace ncclsmoke::harness
