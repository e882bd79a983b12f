#pragma once
// What the liveness watch saw, as plain facts judging reads (run_rules.h): a peer that died, one
// that went silent (or spoke again), and the wait chain from this rank to the one it blames. The
// harness builds them from the watch's own LostPeer, SilentPeer and WaitChain
// (rendezvous/peer_watch.h) in harness/observe.h, so judging links no network code.
//
// A leaf: the standard library only.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ncclsmoke::results {

// A peer whose connection died (PEER_LOST from the watch).
struct LostPeerFact {
  int rank = -1;
  std::string host;    // "" when unknown
  std::string how;     // "closed the connection (EOF)", "reported lost by rank 0 (relayed ...)"
  double after_s = 0;  // seconds since the watch started, when this rank learnt of it
};

// A peer that stopped answering (PEER_STALLED), or, for a resume, how long it was silent.
struct SilentPeerFact {
  int rank = -1;
  std::string host;         // "" when unknown
  double silent_for_s = 0;  // nothing heard for this long; for a resume, silent in all
  int seen_by = -1;         // the witness; -1: this rank
  std::string how;
  // Segments our connection to it retransmitted since we last heard it; -1 unknown. > 0: the
  // path loses packets and the process may well be alive (a warning, not a frozen rank).
  std::int64_t retransmits = -1;
};

// The walk from this rank along "waits on" edges to the rank to blame.
struct WaitChainFact {
  std::vector<int> path;    // this rank first, the root last
  std::optional<int> root;  // nullopt only for a cycle
  bool cycle = false;       // a deadlock: no root
  std::string root_reason;  // "is silent or lost", "has no wait state", ...
};

}  // namespace ncclsmoke::results
