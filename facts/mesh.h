#pragma once
// The mesh probe's outcome: produced by rendezvous/mesh.h (MeshResult adds what only the probe
// uses) and rendezvous/mtu_probe.h, read by results/judging/probe_rules.h and mtu_rule.h.
// Unfinished is not failed: untested pairs and ranks still probing are neither passed nor blocked.
#include <cstddef>
#include <string>
#include <vector>

#include "facts/store.h"

namespace ncclsmoke::facts {

// One blocked rank-to-rank connection.
struct PairFailure {
  int from = -1;
  int to = -1;
  std::string to_address;
  ErrorClass error_class = ErrorClass::other;
  std::string message;
  double waited_s = 0;
};

// One path checked for its MTU. MTUs are IP packet sizes in bytes.
struct MtuPath {
  int from = -1;
  int to = -1;
  std::string to_address;  // the peer's mesh address (no port)
  std::string interface;   // the sender's interface that carries its mesh address ("" unknown)
  int local_mtu = 0;       // the sender's MTU towards the peer (its route / interface MTU)
  int peer_mtu = 0;        // the MTU of the peer's interface that answered (0: unknown)
  int probed_mtu = 0;      // what both ends believe the path carries: min(local, peer)
  int path_mtu = 0;        // the largest packet that crossed (0: unknown)
};

struct MeshFacts {
  std::vector<PairFailure> failures; // blocked pairs: ours, or (after mesh/done) everyone's
  std::vector<int> silent_ranks;     // lost: no address by the end, or no result and no handshake
  std::vector<int> unfinished_ranks; // no result by the end but the listener answers: still probing
  // Among silent_ranks (rank 0 only): those that said they left before their probe, on their own
  // error (rendezvous/mesh.h publish_left_mesh). They are alive, and their verdict will come.
  std::vector<int> left_ranks;
  std::size_t pairs_tested = 0;      // pairs with an answer (passed or blocked); ours or everyone's
  std::size_t pairs_untested = 0;    // not tried or cut short by the deadline (none lost)
  std::size_t pairs_lost = 0;        // not tested because one end was lost (PEER_LOST says so)
  bool summary_received = false;     // rank 0's mesh/done arrived (always true on rank 0)
  double budget_s = 0;               // the phase deadline, in seconds from the probe's start
  // The path-MTU check of the pairs whose hello passed (ours, or everyone's after mesh/done).
  // Pairs inside one host (the same address, loopback) are not checked and not counted.
  std::vector<MtuPath> mtu_black_holes;  // small packets cross, full-MTU ones vanish
  std::size_t mtu_black_holes_total = 0; // all of them (the list keeps at most 256 per rank)
  std::size_t mtu_paths_checked = 0;     // concluded: passed, black hole, or ICMP-learned PMTU
  std::size_t mtu_paths_unchecked = 0;   // no UDP answer at all, or cut by the deadline
  std::vector<int> mtu_values;           // the distinct MTUs both ends claimed on checked paths

  std::size_t pairs_planned() const { return pairs_tested + pairs_untested + pairs_lost; }
};

}  // namespace ncclsmoke::facts
