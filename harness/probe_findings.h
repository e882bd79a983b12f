#pragma once
// Names what the rendezvous and mesh probes measured, as findings an operator can act on: the
// store error class becomes RENDEZVOUS_DNS / _REFUSED / _TIMEOUT / _UNREACHABLE / _LOST, the join
// roster RANKS_MISSING / WORLD_MISMATCH, the mesh's failed pairs MESH_BLOCKED with the suspect
// host (the one every failing pair shares), and silent ranks PEER_LOST.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/world.h"
#include "rendezvous/join.h"
#include "rendezvous/mesh.h"
#include "rendezvous/store_error.h"
#include "results/verdict.h"

namespace ncclsmoke::harness {

results::Finding config_finding(const ConfigFinding& c);

// A failure to reach the master's store (connect phase).
results::Finding connect_finding(const rendezvous::StoreError& e, const World& world,
                                 double waited_s);

// The store connection failed after it was made (rank 0 gone, reset ...).
results::Finding lost_finding(const rendezvous::StoreError& e, const World& world,
                              const std::string& during);

std::vector<results::Finding> join_findings(const rendezvous::JoinResult& join, const World& world,
                                            double join_timeout_s);

// `hosts` maps rank -> host for naming (from the join roster).
std::vector<results::Finding> mesh_findings(const rendezvous::MeshResult& mesh, const World& world,
                                            const std::map<int, std::string>& hosts);

// The rank(s) shared by every failed pair, most-involved first; empty when no rank is common.
std::vector<int> suspect_ranks(const std::vector<rendezvous::PairFailure>& failures);

}  // namespace ncclsmoke::harness
