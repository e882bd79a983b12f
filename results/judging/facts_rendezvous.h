#pragma once
// What the rendezvous and the mesh probe saw, as judging reads it (probe_rules.h, mtu_rule.h,
// run_rules.h): a store failure and its class, the join's roster, the mesh's pairs and path MTUs,
// the store values that failed the job token (facts/: the types rendezvous/ returns); who is
// judging (ProbeContext), the roster's hosts, another job's store, a store that refused someone
// at a limit. A test builds them by hand.
//
// A leaf: the standard library, facts/ and the one spelling of a rank (rendezvous/rank_ref.h,
// header only).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "facts/join.h"
#include "facts/mesh.h"
#include "facts/store.h"
#include "rendezvous/rank_ref.h"

namespace ncclsmoke::results {

// The store's failures, the join, the mesh and the job token's refusals are facts/'s types,
// produced by rendezvous/ as they are (no copy): the names the rules use for them.
using StoreErrorClass = facts::ErrorClass;
using facts::to_string;
using facts::StoreFailure;
using facts::JoinFacts;
using PairFailureFact = facts::PairFailure;
using MtuPathFact = facts::MtuPath;
using facts::MeshFacts;
using TamperedValueFact = facts::TamperedValue;

// Who is judging: the few facts of this rank's world the rules name (harness::World carries
// more; harness/world/world.h probe_context builds this from it).
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
