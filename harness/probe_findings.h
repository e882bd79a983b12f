#pragma once
// Names what the rendezvous and mesh probes measured, as findings an operator can act on: the
// store error class becomes RENDEZVOUS_DNS / _REFUSED / _TIMEOUT / _UNREACHABLE / _LOST, the join
// roster RANKS_MISSING / WORLD_MISMATCH, the mesh's failed pairs MESH_BLOCKED with the suspect
// host (the one every failing pair shares), and silent ranks PEER_LOST.
//
// A store that accepts the connection but never answers (ErrorClass::stalled: rank 0 SIGSTOPped,
// swapping, overloaded) is RENDEZVOUS_STALLED, without the firewall hint that RENDEZVOUS_TIMEOUT
// (a dropped SYN: connect() itself never completed) carries.
//
// Unfinished is not failed: mesh pairs the phase deadline cut short or never reached are "not
// tested" (MESH_INCOMPLETE, a warning that makes the phase inconclusive), never MESH_BLOCKED, and
// a rank still probing at the deadline is not PEER_LOST (rendezvous/mesh.h says which is which).
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

// What the mesh phase concluded: the findings (mesh_findings + MESH_INCOMPLETE when pairs were
// not tested), the phase status, and the phase detail line. status: "fail" when any finding is an
// error (MESH_BLOCKED, PEER_LOST, RENDEZVOUS_LOST); else "inconclusive" when pairs were left
// untested or ranks were still probing; else "pass".
struct MeshJudgement {
  std::vector<results::Finding> findings;
  std::string status;  // "pass" | "inconclusive" | "fail"
  std::string detail;  // "N pairs tested, F failed[, U not tested (the X s deadline ...)]"
};
MeshJudgement judge_mesh(const rendezvous::MeshResult& mesh, const World& world,
                         const std::map<int, std::string>& hosts);

// The rank(s) shared by every failed pair, most-involved first; empty when no rank is common.
std::vector<int> suspect_ranks(const std::vector<rendezvous::PairFailure>& failures);

}  // namespace ncclsmoke::harness
