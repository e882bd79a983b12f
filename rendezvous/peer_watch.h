#pragma once
// Peer liveness watch: one TCP connection per watched pair, so a rank that is killed (kill -9,
// OOM killer, segfault) is named within milliseconds, and a rank that is FROZEN (SIGSTOP, a
// debugger, swapping, a hung host) is named within silence_timeout.
//
// Lost: the kernel closes a dead process's sockets, so its peers read EOF (FIN) or ECONNRESET
// (RST, when unread data was pending) at once. A rank that ends without stop() (exit without
// destructors, _exit, exec) IS reported lost.
// Silent: a stopped or hung process keeps its sockets open (its kernel even ACKs), so EOF never
// comes. Every rank's watch THREAD (never the application thread: a CPU-bound or blocked main
// thread still beats) sends a 1-byte heartbeat on each connection every heartbeat_interval; a
// peer from which nothing at all arrived for silence_timeout is reported once through
// on_silent, and through on_resumed if it speaks again (an overloaded rank, not a dead one).
// A rank that was itself frozen reads what piled up before it judges anyone, so resuming from
// SIGSTOP does not make it call every peer silent. This is what lets the survivors name a frozen
// rank 0 even though rank 0's store is frozen with it.
//
// Pairs: the same peer choice as the mesh probe (mesh_peers): all pairs up to full_threshold
// ranks, ring neighbours plus random_peers beyond it. Liveness is symmetric, so the watched edge
// set is the union of both directions (r watches s when s is in mesh_peers(r) or r in
// mesh_peers(s)); each edge is one connection, dialled by the lower rank. fds per rank: one
// listener, one eventfd, one socket per watched peer (N-1 in a full mesh; about
// 2 + 2 * random_peers beyond the threshold). Beyond the threshold only the dead rank's few
// neighbours see its EOF, so every loss is relayed once over every watched connection: each rank
// then learns of it within a few hops (LostPeer::seen_by names who saw it first-hand).
// Silence is relayed the same way ("rank s sees k silent"), but a relay never makes k silent at
// a rank that still hears k itself: k may be cut off from one peer only. Such a rank keeps the
// report as evidence (silence_witnesses()), which is how a one-sided cut shows. Only ranks with
// no live connection to k forward relays about it, so in a full mesh nothing is forwarded.
//
// Wait states: set_wait_state() says what this rank is blocked on ("mesh", "recv from rank 2");
// the watch thread sends the latest one to every watched peer when it changes (rate-limited to
// one send per wait_state_interval). peer_wait_states() holds the latest state of every peer
// heard DIRECTLY: every rank in a full mesh; beyond full_threshold only the watched peers (wait
// states are not relayed; a chain then ends, unknown, at the first unwatched rank).
// follow_wait_chain() walks "waits on" edges to the root to blame.
//
// Wire, on each connection: the dialler sends "NSPW" + uint32 rank, the acceptor answers the same
// with its own rank (a stale address reaching another process is not counted as watched). Then
// messages: 'B' (bye: a clean stop; the EOF that follows is not a loss), 'H' (heartbeat),
// 'L' + uint32 lost rank + uint32 rank that saw it (relay), 'S'/'R' + uint32 rank + uint32 rank
// that sees it + uint32 epoch + uint32 ms (silent / resumed relay; the epoch orders one
// witness's reports so a resume overtaking its silence on another path does not stick), and
// 'W' + uint16 length + wait state (int32 waiting_on, uint32 age ms, uint8 + phase,
// uint16 + what). A relay about a peer we still hold a live connection to never overrides it.
// Every message is queued per connection (at most 64 KiB; a peer that reads nothing for that
// long is frozen, and what does not fit is dropped whole, never cut mid-frame).
//
// Keys (under the caller's PrefixStore): watch/addr/<r>  "ip:port" rank r listens on.
//
// Threads: start() dials on short-lived helper threads; one background thread then serves the
// listener, the incoming handshakes and every connection with poll(): its timeout is the nearest
// of the next heartbeat, the next silence check and the next wait-state send (no busy loop),
// plus an eventfd to wake it for stop() and set_wait_state(). on_lost, on_silent and on_resumed
// run on that thread: keep them cheap, thread-safe, and never call stop() or destroy the
// PeerWatch from them. A callback that blocks (on a lock the application holds for long) stops
// this rank's heartbeats too, and its peers then call IT silent. The watch thread never blocks on
// anything the application holds at high rate: set_wait_state() has its own lock, which the
// watch thread only try_locks. The getters take the watch's main lock: fine per phase or per
// finding, not in a hot loop. Every socket and the eventfd are CLOEXEC (an exec'd child must not
// keep a dead parent's connections open; a fork without exec would).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "facts/liveness.h"
#include "rendezvous/deadline.h"
#include "rendezvous/store.h"

namespace ncclsmoke::rendezvous {

// What the watch reports, as facts/liveness.h has them: judging reads the same types.
using facts::LostPeer;
using facts::SilentPeer;
using facts::WaitChain;

struct PeerWatchOptions {
  int rank = 0;
  std::vector<int> ranks;          // those taking part (those that joined), ours included
  std::string bind_address;        // like MeshOptions: the address used to reach the store; "" = every address
  std::string advertise_address;   // what peers dial (default: bind_address, else 127.0.0.1)
  uint16_t port_min = 0;           // 0/0 = an ephemeral port; otherwise the first free in range
  uint16_t port_max = 0;
  std::size_t full_threshold = 64; // <= this many ranks: watch every peer; beyond: ring + random
  std::size_t random_peers = 4;
  bool relay_lost = true;          // forward each loss to every watched peer (see above)
  Deadline deadline;               // for the setup: publish, wait for addresses, dial, accept
  std::map<int, std::string> hosts;  // rank -> host, for LostPeer and messages
  // Silence (see above). silence_timeout 0 turns silence detection off (heartbeats still go).
  // start() throws StoreError(invalid) unless heartbeat_interval > 0 and, when silence is on,
  // silence_timeout >= 2 * heartbeat_interval (one late heartbeat must not make a rank silent).
  Millis heartbeat_interval{500};
  Millis silence_timeout{3000};
  bool relay_silent = true;          // relay "I see k silent / hear k again" like losses
  Millis wait_state_interval{100};   // at most one wait-state send per this
  // Called once per rank that falls silent, and when it speaks again (SilentPeer::silent_for_s
  // then says how long it was silent). A rank that is lost afterwards gets on_lost, no resume.
  std::function<void(const SilentPeer&)> on_silent;
  std::function<void(const SilentPeer&)> on_resumed;
};

// What a rank is blocked on, for "blame the root": 3 waits on 2, 2 on 1, 1 on 0 -> rank 0.
struct WaitState {
  std::string phase;    // "transport:socket", "mesh", ... (at most 64 bytes are sent)
  std::string what;     // "allreduce 64 MiB iteration 3: recv from" (at most 256 bytes are sent)
  int waiting_on = -1;  // the rank it waits for; -1 = nobody (working, or done)
  Clock::time_point since{};  // when it began waiting (our clock; a peer's is converted on receipt)
};

// The walk from one rank along waiting_on edges.

// Follows waiting_on from from_rank to the first rank that is in silent_or_lost, has no wait
// state in `states`, or waits on nobody (-1 or itself): that rank is the root to blame (it may be
// from_rank itself). When the walk ends anywhere but at a silent or lost rank while some rank is
// (a live rank's state predating that rank's death by a heartbeat), the lowest such rank is
// appended as the root. Pure, no I/O; bounded by the number of states.
WaitChain follow_wait_chain(int from_rank, const std::map<int, WaitState>& states,
                            const std::set<int>& silent_or_lost);
std::optional<int> root_of_wait_chain(int from_rank, const std::map<int, WaitState>& states,
                                      const std::set<int>& silent_or_lost);
// "rank 3 (host-3) waits on rank 2 in mesh (recv from) for 4.1 s; ... rank 0 (host-0) is silent
// or lost", for a finding's message; `now` converts each `since` to a wait time.
std::string wait_chain_text(const WaitChain& chain, const std::map<int, WaitState>& states,
                            const std::map<int, std::string>& hosts,
                            Clock::time_point now = Clock::now());

class PeerWatch {
 public:
  // Listens, publishes watch/addr/<rank>, dials the chosen peers it is the lower rank of, and
  // waits until every expected incoming connection has said hello or `deadline` passed. Peers
  // that could not be connected by then are in unwatched() (not an error: the mesh probe reports
  // blocked pairs); one whose dial was already queued may still arrive later and move to
  // watched(). Throws StoreError when it cannot listen. A store that fails or freezes during the
  // setup (rank 0 stopped) does not: the peers not reached by then are unwatched (with the store's
  // error), the connections already made keep watching (they are what names a frozen rank 0).
  static std::unique_ptr<PeerWatch> start(Store& store, const PeerWatchOptions& options,
                                          std::function<void(const LostPeer&)> on_lost);

  virtual ~PeerWatch() = default;
  // Clean end: sends 'B' on every connection, then closes everything, so peers do NOT report
  // this rank as lost. No new report starts once it is called. Waits at most ~150 ms for the watch
  // thread: do not hold a lock that a callback takes while calling it (the byes would then be late,
  // sent when the destructor joins). Idempotent and thread-safe; the destructor calls it.
  // A rank that is being terminated (SIGTERM) should call it first, before its verdict: the
  // other ranks are being terminated too, and one that exits without it is reported lost.
  virtual void stop() = 0;

  virtual std::vector<int> watched() const = 0;    // peers with a live connection (or a lost one)
  virtual std::vector<int> unwatched() const = 0;  // expected peers never connected
  // For each unwatched peer, why: never published, refused, no handshake ... (with time waited).
  virtual std::map<int, std::string> unwatched_reasons() const = 0;
  virtual std::vector<LostPeer> lost() const = 0;  // so far, in the order learnt; each rank once
  virtual std::string listen_address() const = 0;  // "ip:port" published

  // Peers this rank now judges silent (each with how it learnt it), in the order learnt.
  virtual std::vector<SilentPeer> silent() const = 0;
  // Each resume so far (a peer that was silent and spoke again), in order.
  virtual std::vector<SilentPeer> resumed() const = 0;
  // rank -> the ranks that say it is silent right now: our own judgement (our rank) and every
  // relay we received, INCLUDING about peers we still hear ourselves (a one-sided cut).
  virtual std::map<int, std::set<int>> silence_witnesses() const = 0;

  // Thread-safe and cheap (a lock, a copy, at most one eventfd write per wait_state_interval):
  // call it at every blocking point worth naming, even per chunk. WaitState{} = not waiting.
  // A default `since` means "now": for one wait set again per chunk, pass the wait's start.
  virtual void set_wait_state(const WaitState& state) = 0;
  // The latest wait state of every peer heard directly, and ours (when set).
  virtual std::map<int, WaitState> peer_wait_states() const = 0;
};

// The edge set for `rank` (sorted): s such that s is in mesh_peers(rank) or rank in mesh_peers(s).
// Beyond the threshold this chooses every rank's mesh peers (mesh_peers_at: a few draws each),
// O(N) work a call, which start() spends once.
std::vector<int> watch_peers(int rank, const std::vector<int>& ranks, std::size_t threshold,
                             std::size_t random_peers);

}  // namespace ncclsmoke::rendezvous
