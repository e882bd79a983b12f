#pragma once
// The rules for what configuration, rendezvous and the mesh probe observed, as findings an
// operator can act on, made only through the finding table (results/verdict/finding_codes.h):
// - a ConfigProblem becomes CONFIG_MISSING / CONFIG_INVALID (a conflict between launchers is a
//   CONFIG_INVALID warning: the world was built anyway);
// - the store error class becomes RENDEZVOUS_DNS / _REFUSED / _TIMEOUT / _UNREACHABLE / _LOST;
// - the join roster RANKS_MISSING / WORLD_MISMATCH;
// - the mesh's failed pairs MESH_BLOCKED with the suspect host (the one every failing pair
//   shares), and silent ranks PEER_LOST; its path-MTU black holes MTU_MISMATCH (mtu_rule.h).
//
// A store that accepts the connection but never answers (StoreErrorClass::stalled: rank 0 SIGSTOPped,
// swapping, overloaded) is RENDEZVOUS_STALLED, without the firewall hint that RENDEZVOUS_TIMEOUT
// (a dropped SYN: connect() itself never completed) carries.
//
// Unfinished is not failed: mesh pairs the phase deadline cut short or never reached are "not
// tested" (MESH_INCOMPLETE, a warning that makes the phase inconclusive), never MESH_BLOCKED, and
// a rank still probing at the deadline is not PEER_LOST (MeshFacts, facts_rendezvous.h: the
// harness copies them from rendezvous/mesh.h's MeshResult, which says which is which).
//
// Each rule keeps the table's code, severity and layer; where it knows more than the table's
// generic hint (the external store, the suspect host, the deadline), its hint replaces it.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "results/judging/config_problem.h"
#include "results/judging/facts_rendezvous.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {


// CONFIG_MISSING (missing) or CONFIG_INVALID (invalid: error; conflict: warning), with the
// variable and value as evidence. CONFIG_INVALID's hint is the table's
// "Fix {variable} (value {value}): {fix}"; CONFIG_MISSING's is the problem's own fix (the table's
// is generic). No hosts: the caller adds the host it ran on.
Finding config_finding(const ConfigProblem& problem);

// A failure to reach the master's store (connect phase).
Finding connect_finding(const StoreFailure& e, const ProbeContext& ctx, double waited_s);

// The store connection failed after it was made (rank 0 gone, reset ...).
Finding lost_finding(const StoreFailure& e, const ProbeContext& ctx,
                     const std::string& during);

std::vector<Finding> join_findings(const JoinFacts& join, const ProbeContext& ctx,
                                   double join_timeout_s);

// `hosts` maps rank -> host for naming (from the join roster).
std::vector<Finding> mesh_findings(const MeshFacts& mesh, const ProbeContext& ctx,
                                   const std::map<int, std::string>& hosts);

// What the mesh phase concluded: the findings (mesh_findings + mtu_findings + MESH_INCOMPLETE
// when pairs were not tested), the phase status, and the phase detail line (with mtu_detail's
// MTUs). status: "fail" when any finding is an error (MESH_BLOCKED, MTU_MISMATCH, PEER_LOST,
// RENDEZVOUS_LOST); else "inconclusive" when pairs were left untested or ranks were still
// probing; else "pass".
struct MeshJudgement {
  std::vector<Finding> findings;
  PhaseStatus status = PhaseStatus::pass;  // pass | inconclusive | fail
  std::string detail;  // "N pairs tested, F failed[, U not tested (the X s deadline ...)]"
};
MeshJudgement judge_mesh(const MeshFacts& mesh, const ProbeContext& ctx,
                         const std::map<int, std::string>& hosts);

// The rank(s) shared by every failed pair, most-involved first; empty when no rank is common.
std::vector<int> suspect_ranks(const std::vector<PairFailureFact>& failures);

}  // namespace ncclsmoke::results
