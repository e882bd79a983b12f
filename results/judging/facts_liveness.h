#pragma once
// What the liveness watch saw, as plain facts judging reads (run_rules.h): a peer that died, one
// that went silent (or spoke again), and the wait chain from this rank to the one it blames (with
// every peer's wait state); who likely stopped the process, when a signal ended the run. The
// watch's own types (facts/liveness.h), so judging links no network code.
//
// A leaf: the standard library, nlohmann's JSON and facts/ only.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "facts/liveness.h"

namespace ncclsmoke::results {

// What the watch saw is facts/liveness.h's types, produced by rendezvous/peer_watch.h as they are.
using LostPeerFact = facts::LostPeer;
using SilentPeerFact = facts::SilentPeer;
using WaitChainFact = facts::WaitChain;

// The wait chain as the harness read it from the watch.
struct WaitChainEvidence {
  nlohmann::json wait_states = nlohmann::json::object();  // rank -> {phase, what, waiting_on, waited_s}
  WaitChainFact chain;
  bool reaches_stopped = false;  // the chain's root is a rank the watch saw frozen or dead
  std::string text;              // wait_chain_text(): "rank 3 (host-3) waits on rank 2 ..."
};

// Who most likely sent a stop signal, and which deadline to raise: the launcher's own words
// (harness/world/launchers.cpp, termination_of: activeDeadlineSeconds only on Kubernetes, --time under
// Slurm, mpirun's or torchrun's own). The default is a process with no known launcher.
struct TerminationCause {
  std::string sender = "whatever supervises the process (a scheduler's time limit, a shell's "
                       "Ctrl-C, kill)";
  std::string deadline_fix = "give the supervising deadline more than --timeout";
};

}  // namespace ncclsmoke::results
