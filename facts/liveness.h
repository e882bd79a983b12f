#pragma once
// What the liveness watch saw: a peer that died, one that went silent (or spoke again), and the
// wait chain to the rank to blame. Produced by rendezvous/peer_watch.h, read by
// results/judging/run_rules.h.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ncclsmoke::facts {

// A peer whose connection died (PEER_LOST).
struct LostPeer {
  int rank = -1;
  std::string host;     // from the watch's roster ("" when unknown)
  std::string how;      // "closed the connection (EOF)", "reset (ECONNRESET)",
                        // "reported lost by rank 0 (relayed by rank 1)", ...
  int seen_by = -1;     // the rank that saw the connection die: ours, or the relaying rank's source
  double after_s = 0;   // seconds since the watch started, when this rank learnt of it
};

// A peer that stopped answering (PEER_STALLED): frozen (SIGSTOP, a debugger, swap), hung, or
// overloaded; for a resume, how long it was silent.
struct SilentPeer {
  int rank = -1;
  std::string host;        // from the watch's roster ("" when unknown)
  double silent_for_s = 0; // nothing heard for this long (by seen_by) when reported; for a
                           // resume, how long it was silent in all
  int seen_by = -1;        // ours when our own connection went quiet, else the relay's witness
  std::string how;         // "sent nothing for 0.6 s (not even a heartbeat)",
                           // "reported silent by rank 1 (relayed by rank 2)", "speaks again"
  double after_s = 0;      // seconds since the watch started, when this rank learnt of it
  // Segments our own connection to it retransmitted since we last heard it (TCP_INFO), when we
  // judged it silent ourselves; -1 unknown. > 0: the path is losing packets and the process may
  // well be alive (a frozen process's kernel still acknowledges our heartbeats).
  std::int64_t retransmits = -1;
};

// The walk from this rank along "waits on" edges to the rank to blame.
struct WaitChain {
  std::vector<int> path;    // from_rank first, then each rank waited on, the root last
  std::optional<int> root;  // nullopt only for a cycle
  bool cycle = false;       // the walk came back to a rank on the path: a deadlock, no root
  std::string root_reason;  // "is silent or lost", "has no wait state", "waits on nobody",
                            // or for a cycle "a wait cycle (deadlock): no root"
};

}  // namespace ncclsmoke::facts
