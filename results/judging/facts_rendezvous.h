#pragma once
// What the rendezvous and the mesh probe saw, as plain facts judging reads (probe_rules.h,
// mtu_rule.h, run_rules.h): a store failure and its class, the join's roster, the mesh's pairs
// and path MTUs, the store values that failed the job token; who is judging (ProbeContext), the
// roster's hosts, another job's store, a store that refused someone at a limit. The harness
// builds them from the rendezvous' own StoreError, JoinResult, MeshResult and TamperedValue
// (harness/observe.h), so judging links no network code; a test builds them by hand.
//
// A leaf: the standard library and the one spelling of a rank (rendezvous/rank_ref.h, header
// only) only. Each field is one the rules read; what it means is the
// rendezvous' (rendezvous/store_error.h, join.h, mesh.h, mtu_probe.h, signed_store.h).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/rank_ref.h"

namespace ncclsmoke::results {

// How a store operation or a mesh connection failed (rendezvous::ErrorClass, value for value:
// the rules branch on it and spell it in evidence).
enum class StoreErrorClass {
  dns,          // the name did not resolve
  refused,      // RST in answer to SYN: host up, nothing listening
  timed_out,    // no answer: SYN dropped, or the peer never replied
  stalled,      // accepted, but the process behind it never answered (stopped, swapping)
  unreachable,  // no route
  reset,        // reset or closed by the peer mid-operation
  protocol,     // bytes that do not follow the wire protocol
  limit,        // a configured limit was exceeded
  invalid,      // caller error
  not_found,    // a missing key on a store that does not wait
  other,
};
// The spelling in findings' messages and evidence ("error_class"); the same words as
// rendezvous' to_string(ErrorClass) (tests/harness/observe_test.cpp keeps the two equal).
inline const char* to_string(StoreErrorClass c) {
  switch (c) {
    case StoreErrorClass::dns: return "dns";
    case StoreErrorClass::refused: return "refused";
    case StoreErrorClass::timed_out: return "timed_out";
    case StoreErrorClass::stalled: return "stalled";
    case StoreErrorClass::unreachable: return "unreachable";
    case StoreErrorClass::reset: return "reset";
    case StoreErrorClass::protocol: return "protocol";
    case StoreErrorClass::limit: return "limit";
    case StoreErrorClass::invalid: return "invalid";
    case StoreErrorClass::not_found: return "not_found";
    case StoreErrorClass::other: return "other";
  }
  return "other";
}

// A store failure (rendezvous::StoreError): its class and its full message (the evidence's
// "detail").
struct StoreFailure {
  StoreErrorClass error_class = StoreErrorClass::other;
  std::string detail;
};

// The join barrier's outcome on this rank (rendezvous::JoinResult).
struct JoinFacts {
  std::vector<int> missing;                // ranks that never arrived before the deadline
  std::optional<int> master_world_size;    // rank 0's world size, when it differs from ours
  struct Claimant {
    std::string host;
    int pid = 0;
  };
  std::optional<Claimant> rank_taken_by;   // another process holds our rank
  double waited_s = 0;
  bool roster_received = false;            // false: rank 0 never published the roster

  bool complete() const { return missing.empty() && !master_world_size && !rank_taken_by; }
};

// One blocked rank-to-rank connection of the mesh probe (rendezvous::PairFailure).
struct PairFailureFact {
  int from = -1;
  int to = -1;
  std::string to_address;
  StoreErrorClass error_class = StoreErrorClass::other;
  double waited_s = 0;
};

// One black-holed path (rendezvous::MtuPath). MTUs are IP packet sizes in bytes.
struct MtuPathFact {
  int from = -1;
  int to = -1;
  std::string to_address;  // the peer's mesh address (no port)
  std::string interface;   // the sender's interface ("" unknown)
  int local_mtu = 0;       // the sender's MTU towards the peer
  int peer_mtu = 0;        // the peer's interface MTU (0: unknown)
  int probed_mtu = 0;      // what both ends believe the path carries: min(local, peer)
  int path_mtu = 0;        // the largest packet that crossed (0: unknown)
};

// The mesh probe's outcome as the rules read it (rendezvous::MeshResult, after the harness set
// aside the ranks the liveness watch saw stop). Unfinished is not failed: untested pairs and
// ranks still probing are neither passed nor blocked.
struct MeshFacts {
  std::vector<PairFailureFact> failures;  // blocked pairs: ours, or (after mesh/done) everyone's
  std::vector<int> silent_ranks;          // lost: heard nothing from, and not alive
  std::vector<int> unfinished_ranks;      // still probing at the deadline
  std::size_t pairs_tested = 0;
  std::size_t pairs_untested = 0;         // not tried or cut short by the deadline
  std::size_t pairs_lost = 0;             // not tested because one end was lost
  bool summary_received = false;          // rank 0's mesh summary arrived (always on rank 0)
  double budget_s = 0;                    // the phase deadline, in seconds
  std::vector<MtuPathFact> mtu_black_holes;  // at most 256 per rank
  std::size_t mtu_black_holes_total = 0;
  std::size_t mtu_paths_checked = 0;
  std::size_t mtu_paths_unchecked = 0;    // no UDP answer, or cut by the deadline
  std::vector<int> mtu_values;            // the distinct MTUs both ends claimed on checked paths

  std::size_t pairs_planned() const { return pairs_tested + pairs_untested + pairs_lost; }
};

// A store value refused because it failed the job token's verification
// (rendezvous::TamperedValue): STORE_TAMPERED.
struct TamperedValueFact {
  std::string key;
  std::string why;  // "not signed", "signed with another token or under another key"
};

// Who is judging: the few facts of this rank's world the rules name (harness::World carries
// more; harness/probe_findings.h builds this from it).
struct ProbeContext {
  int rank = 0;
  int world_size = 1;
  std::string host;            // this process's host name
  std::string master_addr;     // host name or address; IPv6 without brackets
  std::uint16_t master_port = 0;
  bool external_store = false;  // the store is not rank 0's (torchrun's agent, --store)
  std::int64_t pid = 0;         // this process, for a rank claimed twice
};

// The roster's ranks (rank, host, node) that `list` names, by host or node.
struct RosterEntry {
  int rank = -1;
  std::string host;
  std::string node;
};

struct ForeignStore {
  rendezvous::RankRef self;
  std::string this_job;         // "" = none
  std::string job_id_source;    // where this job's id came from ("" = not said)
  std::string store;            // "host:port"
  int port = 0;
  double waited_s = 0;
  std::string other_job;        // "" = none
  int other_world_size = 0;
  std::string other_host;
  int other_pid = 0;
};

// The store rank 0 hosts refused someone because a store-wide limit was reached (the server's
// StoreFullHit, as data): the true cause behind a lost store or ranks refused at the door.
struct StoreFull {
  rendezvous::RankRef rank0;
  std::string limit;      // "max_stored_keys", "max_total_bytes", "max_connections"
  std::string flag;       // "--max-keys", "--max-total-bytes", "--max-connections"
  uint64_t value = 0;     // the limit
  uint64_t in_use = 0;    // keys / bytes / connections held when it refused
  uint64_t refusals = 0;
  // Of refusals, those of the job's own connections (ranks that had claimed); with none, and
  // every rank joined (job_unharmed), only strangers were refused, short of the job's reserve:
  // a warning (someone fills the store), not the run's failure.
  uint64_t job_refusals = 0;
  bool job_unharmed = false;
  std::string last_peer;  // "" = not known
  // Non-empty: the store is served apart (`store serve` at this address), and rank0 is the rank
  // that read the store's own account of the refusals.
  std::string external_store;
};

}  // namespace ncclsmoke::results
