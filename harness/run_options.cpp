#include "harness/run_options.h"

#include <sstream>

namespace ncclsmoke::harness {

void add_run_options(CLI::App& app, RunOptions& o, bool include_world_flags) {
  if (include_world_flags) {
    auto* g = "World (default: the launcher's environment)";
    app.add_option("--rank", o.world.rank, "This process's rank (else RANK, OMPI_COMM_WORLD_RANK, "
                                           "SLURM_PROCID, JOB_COMPLETION_INDEX)")
        ->group(g);
    app.add_option("--world-size", o.world.world_size, "Number of ranks (else WORLD_SIZE, ...)")
        ->group(g);
    app.add_option("--local-rank", o.world.local_rank, "Rank on this node (else LOCAL_RANK, ...)")
        ->group(g);
    app.add_option("--master-addr", o.world.master_addr, "Rank 0's address (else MASTER_ADDR)")
        ->group(g);
    app.add_option("--master-port", o.world.master_port,
                   "Rank 0's store port (else MASTER_PORT, default 29500)")
        ->group(g);
    app.add_option("--node-name", o.world.node_name, "Node name (else NODE_NAME, else hostname)")
        ->group(g);
    app.add_option("--launcher", o.world.launcher,
                   "Whose environment to read: auto|torchrun|mpi|slurm|k8s|flags")
        ->check(CLI::IsMember({"auto", "torchrun", "mpi", "slurm", "k8s", "flags"}))
        ->group(g)
        ->capture_default_str();
  }
  auto* d = "Deadlines (seconds)";
  app.add_option("--connect-timeout", o.connect_timeout_s, "Reach the master's store")
      ->check(CLI::PositiveNumber)->group(d)->capture_default_str();
  app.add_option("--join-timeout", o.join_timeout_s, "Rank 0 waits this long for every rank")
      ->check(CLI::PositiveNumber)->group(d)->capture_default_str();
  app.add_option("--mesh-timeout", o.mesh_timeout_s, "The whole rank-to-rank probe")
      ->check(CLI::PositiveNumber)->group(d)->capture_default_str();
  app.add_option("--pair-timeout", o.pair_timeout_s, "One rank-to-rank connection")
      ->check(CLI::PositiveNumber)->group(d)->capture_default_str();
  app.add_option("--timeout", o.timeout_s, "The whole run")
      ->check(CLI::PositiveNumber)->group(d)->capture_default_str();
  auto* n = "Network";
  app.add_option("--store-bind", o.store_bind,
                 "Address rank 0's store listens on (default: every address, dual-stack)")
      ->group(n);
  app.add_option("--mesh-bind", o.mesh_bind,
                 "Address the mesh probe listens on (default: the address used to reach the store)")
      ->group(n);
  app.add_option("--mesh-port-range", o.mesh_port_range,
                 "Ports the mesh probe may listen on, e.g. 30000-30100 (default: ephemeral)")
      ->group(n);
  app.add_option("--mesh-threshold", o.mesh_threshold,
                 "Probe all pairs up to this many ranks; ring + random peers above")
      ->check(CLI::Range(std::size_t{2}, std::size_t{1} << 20))->group(n)->capture_default_str();
  app.add_option("--mesh-random-peers", o.mesh_random_peers,
                 "Random peers per rank above the threshold")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1024}))->group(n)->capture_default_str();
  auto* out = "Output";
  app.add_option("--out-dir", o.out_dir,
                 "Directory for verdict.rank<N>.json (every rank) and verdict.json (rank 0)")
      ->group(out)->capture_default_str();
  app.add_option("--json", o.json_path, "Path of rank 0's global verdict (default OUT_DIR/verdict.json)")
      ->group(out);
  app.add_flag("--quiet", o.quiet, "Print nothing but errors")->group(out);
  app.add_option("--hold-after-join", o.hold_after_join_s,
                 "Testing aid: pause this long after the join barrier")
      ->check(CLI::NonNegativeNumber)->group("");
}

std::vector<std::string> run_option_args(const RunOptions& o) {
  auto num = [](double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  std::vector<std::string> a{"--connect-timeout", num(o.connect_timeout_s),
                             "--join-timeout",    num(o.join_timeout_s),
                             "--mesh-timeout",    num(o.mesh_timeout_s),
                             "--pair-timeout",    num(o.pair_timeout_s),
                             "--timeout",         num(o.timeout_s),
                             "--mesh-threshold",  std::to_string(o.mesh_threshold),
                             "--mesh-random-peers", std::to_string(o.mesh_random_peers),
                             "--out-dir",         o.out_dir};
  auto opt = [&](const char* flag, const std::string& v) {
    if (!v.empty()) {
      a.push_back(flag);
      a.push_back(v);
    }
  };
  opt("--store-bind", o.store_bind);
  opt("--mesh-bind", o.mesh_bind);
  opt("--mesh-port-range", o.mesh_port_range);
  opt("--json", o.json_path);
  if (o.hold_after_join_s > 0) opt("--hold-after-join", num(o.hold_after_join_s));
  return a;
}

}  // namespace ncclsmoke::harness
