#pragma once
// Forwarding only: the rules for configuration, rendezvous and the mesh probe live in
// results/judging/probe_rules.h (measurement never decides). These overloads take the harness's
// World, build the judge's ProbeContext from it, and call the rule, so the run session keeps one
// spelling for every phase.
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "harness/world.h"
#include "rendezvous/join.h"
#include "rendezvous/mesh.h"
#include "rendezvous/store_error.h"
#include "results/judging/probe_rules.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::harness {

using results::config_finding;
using results::MeshJudgement;
using results::suspect_ranks;

// The facts of `world` the probe rules name; pid is this process's.
inline results::ProbeContext probe_context(const World& world) {
  results::ProbeContext c;
  c.rank = world.rank;
  c.world_size = world.world_size;
  c.host = world.hostname;
  c.master_addr = world.master_addr;
  c.master_port = world.master_port;
  c.external_store = world.external_store;
  c.pid = ::getpid();
  return c;
}

inline results::Finding connect_finding(const rendezvous::StoreError& e, const World& world,
                                        double waited_s) {
  return results::connect_finding(e, probe_context(world), waited_s);
}

inline results::Finding lost_finding(const rendezvous::StoreError& e, const World& world,
                                     const std::string& during) {
  return results::lost_finding(e, probe_context(world), during);
}

inline std::vector<results::Finding> join_findings(const rendezvous::JoinResult& join,
                                                   const World& world, double join_timeout_s) {
  return results::join_findings(join, probe_context(world), join_timeout_s);
}

inline std::vector<results::Finding> mesh_findings(const rendezvous::MeshResult& mesh,
                                                   const World& world,
                                                   const std::map<int, std::string>& hosts) {
  return results::mesh_findings(mesh, probe_context(world), hosts);
}

inline MeshJudgement judge_mesh(const rendezvous::MeshResult& mesh, const World& world,
                                const std::map<int, std::string>& hosts) {
  return results::judge_mesh(mesh, probe_context(world), hosts);
}

}  // namespace ncclsmoke::harness
