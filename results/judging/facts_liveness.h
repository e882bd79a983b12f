#pragma once
// What the liveness watch saw, as plain facts judging reads (run_rules.h): a peer that died, one
// that went silent (or spoke again), and the wait chain from this rank to the one it blames (with
// every peer's wait state); who likely stopped the process, when a signal ended the run. The
// harness builds them from the watch's own LostPeer, SilentPeer and WaitChain
// (rendezvous/peer_watch.h) in harness/observe.h, so judging links no network code.
//
// A leaf: the standard library and nlohmann's JSON only.
#include <cstdint>
#include <nlohmann/json.hpp>
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

// The wait chain as the harness read it from the watch.
struct WaitChainEvidence {
  nlohmann::json wait_states = nlohmann::json::object();  // rank -> {phase, what, waiting_on, waited_s}
  WaitChainFact chain;
  bool reaches_stopped = false;  // the chain's root is a rank the watch saw frozen or dead
  std::string text;              // wait_chain_text(): "rank 3 (host-3) waits on rank 2 ..."
};

// Who most likely sent a stop signal, and which deadline to raise: the launcher's own words
// (harness/launchers.cpp, termination_of: activeDeadlineSeconds only on Kubernetes, --time under
// Slurm, mpirun's or torchrun's own). The default is a process with no known launcher.
struct TerminationCause {
  std::string sender = "whatever supervises the process (a scheduler's time limit, a shell's "
                       "Ctrl-C, kill)";
  std::string deadline_fix = "give the supervising deadline more than --timeout";
};

}  // namespace ncclsmoke::results
