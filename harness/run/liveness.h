#pragma once
// The run's bridge to the liveness watch (rendezvous/peer_watch.h): starts it, records what its
// callbacks report (through results/judging/run_rules.h, under RunRecord::mu), and answers the
// steps' questions about it: who stopped, is rank 0 (the store) gone, what is the wait chain.
//
// A rank that dies mid-run (kill -9, OOM) closes its sockets; the watch sees the EOF at once and
// the finding lands in this rank's verdict before anything else happens, so even a verdict written
// on the launcher's SIGTERM a second later (mpirun, a deleted pod) names the dead rank. A frozen
// rank (SIGSTOP, swap) keeps its sockets open: only the missing heartbeats show it.
//
// Locking: watch_mu_ guards watch_ (set by the run thread, stopped by the watchdog too). It may be
// taken with RunRecord::mu held, never the reverse: stop() joins the watch thread, whose
// callbacks take RunRecord::mu. So stop() is never called holding RunRecord::mu.
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "harness/run/run_context.h"
#include "rendezvous/join.h"
#include "rendezvous/mesh.h"
#include "rendezvous/peer_watch.h"
#include "rendezvous/store.h"

namespace ncclsmoke::harness {

class Liveness {
 public:
  explicit Liveness(RunContext& ctx) : ctx_(ctx) {}

  // Run thread. Without the watch (it cannot listen) a dead peer is still found by the
  // collectives, only later: a warning, not an error.
  void start(rendezvous::Store& store, const rendezvous::JoinResult& join,
             const std::string& local_address);
  bool started() const { return started_; }  // run thread only
  // A clean goodbye, so peers do not read this rank's exit as a death. Idempotent. Never call
  // holding RunRecord::mu.
  void stop();

  // The watch starts before the mesh only when transports will need it anyway (with
  // --transports none there is none: a rendezvous + mesh run at scale does not pay for one). It
  // needs its own port next to the mesh's: with a --mesh-port-range too small for two per rank on
  // this host it starts after the mesh instead.
  bool fits_before_mesh(const rendezvous::JoinResult& join) const;

  void set_wait_state(const rendezvous::WaitState& w);
  // "" unless rank 0 serves the store and the watch saw it die or freeze (then the reason).
  std::string store_unusable() const;
  bool rank0_stopped() const;

  // Ranks the watch saw die.
  std::set<int> lost_ranks() const;
  // Ranks the watch saw die or freeze: their verdicts will not come.
  std::vector<int> stopped_ranks() const;
  // Ranks the watch has connected and answering now (watched, neither lost nor silent): a verdict
  // of theirs that does not come is missing, not a death.
  std::set<int> alive_ranks() const;
  // Ranks the watch has connected and has not seen die: answering, or silent (frozen, or behind
  // a lossy path). A rank the mesh heard nothing from is dead only when the watch saw it die.
  std::set<int> not_lost_ranks() const;
  // Ranks the watch has connected that are neither dead nor frozen: answering, or silent while
  // our connection to them retransmits (a lossy path, SilentPeer::retransmits > 0).
  std::set<int> reachable_ranks() const;
  // Ranks the watch judges frozen or dead when the mesh ends. A pair that failed "accepted, no
  // handshake" (stalled) or a rank the mesh lost may be a frozen peer the watch has not judged
  // yet (it needs its silence timeout): then wait for it, at most 3.5 s and never past the run.
  std::vector<int> stopped_ranks_for_mesh(const rendezvous::MeshResult& m) const;

  // A ring fails within microseconds of a neighbour's own failure, sooner than the watch thread
  // reads the EOF of the rank that died first: after such a transport error, give the watch up to
  // 1 s to name a lost (or frozen) rank before the errors are judged. Nothing is waited when the
  // watch already knows one.
  // `outcomes`: a backend that failed waiting on a peer (it timed out, lost one, or could not
  // start) is such an error.
  void settle(const std::vector<results::TransportFacts>& outcomes) const;
  // Every peer's wait state and the chain they form, for the transports' judge
  // (results::attach_wait_chain); none when the watch has no wait state.
  std::optional<results::WaitChainEvidence> wait_chain(const std::map<int, std::string>& hosts) const;

 private:
  // The ranks the watch has connected less those it saw die, and of the silent ones: all kept,
  // all left out, or kept only behind a lossy path (SilentPeer::retransmits > 0).
  enum class SilentAre { kept, left_out, kept_if_lossy };
  std::set<int> watched_ranks(SilentAre silent) const;

  void on_lost(const rendezvous::LostPeer& lost);
  void on_silent(const rendezvous::SilentPeer& s);
  void on_resumed(const rendezvous::SilentPeer& s);

  RunContext& ctx_;
  mutable std::mutex watch_mu_;
  std::unique_ptr<rendezvous::PeerWatch> watch_;  // guarded by watch_mu_
  bool started_ = false;                          // run thread only
};

}  // namespace ncclsmoke::harness
