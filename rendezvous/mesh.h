#pragma once
// The mesh probe: every rank listens on a port, publishes it in the store, and connects to its
// peers — all pairs up to a threshold, ring neighbours plus k random peers beyond it — so a
// blocked rank-to-rank path is named before a collective hangs on it. Pairs are directed: a DROP
// rule on host H's INPUT blocks every x -> H connection while H -> x still works, which is how the
// suspect host is told apart.
//
// Keys (under the caller's PrefixStore):
//   mesh/addr/<r>     "ip:port" rank r listens on (published once it listens)
//   mesh/result/<r>   JSON of rank r's outcome: pairs tested, the peers not tested, failed pairs
//   mesh/done         JSON written by rank 0 once every result is in (or the deadline passed):
//                     every failed pair, the lost ranks and the unfinished ones; until it appears
//                     every rank keeps its listener open.
//
// Unfinished is not failed: a pair is *blocked* only when it failed on its own terms —
// refused, reset, unreachable, a wrong-rank handshake, or a timeout that ran the full pair
// timeout. A pair not tried before the phase deadline, or cut short by it, is *not tested*; so is
// a pair towards a rank that never published its address in time. A rank whose result is missing
// at the end is *lost* only when rank 0's liveness dial to its listener gets no handshake (the
// process is gone or stopped); a rank that still answers was merely still probing (unfinished).
// A rank that has not even published its address by deadline + done_grace / 4 never began: lost
// (a rank killed after the join must not hold the survivors back for the whole grace), unless
// other ranks began after the deadline: a world still starting gets the whole grace.
// Pairs from or to a lost rank are not tested (pairs_lost: PEER_LOST explains them; they are
// neither MESH_BLOCKED nor counted as left by the deadline).
//
// Path MTU: each pair whose hello passed is also probed with don't-fragment UDP
// datagrams at the MTU both ends' interfaces claim (rendezvous/mtu_probe.h; the listener answers
// them on its own address and port). A path that carries small packets but not full ones is a
// black hole: it goes into the rank's result and rank 0's mesh/done like a failed pair, and
// results/judging/mtu_rule.h makes it MTU_MISMATCH.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rendezvous/mtu_probe.h"
#include "rendezvous/net.h"  // split_host_port for the addresses ranks publish
#include "rendezvous/store.h"

namespace ncclsmoke::rendezvous {

struct MeshOptions {
  int rank = 0;
  std::vector<int> ranks;        // the ranks taking part (those that joined), including ours
  std::string bind_address;      // address to listen on; "" = every address
  std::string advertise_address; // address peers should dial (default: bind_address)
  uint16_t port_min = 0;         // 0/0 = an ephemeral port; otherwise the first free in range
  uint16_t port_max = 0;
  std::size_t full_mesh_threshold = 64;
  std::size_t random_peers = 4;
  Millis pair_timeout{3000};     // per connection attempt (a DROP is only seen as a timeout)
  Deadline deadline;             // for the whole probe, result exchange included
  Millis done_grace{2000};       // how long past the deadline others wait for rank 0's summary
  bool mtu_probe = true;         // probe each passed pair's path MTU (mtu_probe.h)
  // Optional: called once our address is published, before any dial (the run's test hook,
  // NCCLSMOKE_TEST_PAUSE_AT=mesh, stops the process here).
  std::function<void()> after_publish;
  // Optional, rank 0: whether the liveness watch holds a live connection to a rank (answering,
  // or silent behind a lossy path). Such a rank without a result whose hello went unanswered is
  // unfinished in the summary, never silent (lost): only the watch sees a death, and the summary
  // is what every other rank judges by. Called from the collecting thread only.
  std::function<bool(int)> seen_alive;
};

using facts::PairFailure;  // facts/mesh.h: judging reads the same types

// What judging reads (facts::MeshFacts), and what only the probe and its callers use.
struct MeshResult : facts::MeshFacts {
  std::string listen_address;        // "ip:port" we listened on
  std::vector<int> peers;            // peers this rank dialled
  bool deadline_hit = false;         // the phase deadline ended some probe or wait (any rank)
  double duration_s = 0;
};

// Which peers `rank` dials: every other rank when ranks.size() <= threshold; otherwise the ring
// neighbours plus `random_peers` others chosen deterministically from the rank (reproducible).
std::vector<int> mesh_peers(int rank, const std::vector<int>& ranks, std::size_t threshold,
                            std::size_t random_peers);
// The same for the rank at index `at` of `sorted` (ascending, no duplicates): for a caller that
// chooses the peers of many ranks (O(random_peers) each, where mesh_peers sorts the world).
std::vector<int> mesh_peers_at(const std::vector<int>& sorted, std::size_t at,
                               std::size_t threshold, std::size_t random_peers);

// Runs the probe. Throws StoreError when the store itself fails (RENDEZVOUS_LOST), or when it
// cannot listen at all. Returns by opt.deadline + done_grace (rank 0) / + 2 x done_grace (others)
// plus one store operation.
MeshResult run_mesh_probe(Store& store, const MeshOptions& options);

// A rank that joined but leaves before its probe (its own error: another world size, a rank
// taken twice) says so in the mesh's keys, so its peers do not wait for its address nor dial it,
// and rank 0 takes it as lost at once instead of at the deadline: its address is "!left: <why>"
// and its result {"left": "<why>"}. Its pairs are lost pairs (PEER_LOST, or the rank's own finding
// in the world's verdict, explains them), never MESH_BLOCKED. Best effort: a store error is the
// caller's to ignore.
void publish_left_mesh(Store& store, int rank, const std::string& why);

// What a failed dial measured (a fact, not a verdict): whether the network answered it. Refused,
// unreachable, reset, protocol and dns are answers whatever the clock says; a timeout is an answer
// (nothing came back in the pair's whole time) only when the pair had its full pair timeout, not
// when the phase deadline came first. The probe lists an answered failure in `failures` and an
// unanswered one as not tested (pairs_untested); what each means (MESH_BLOCKED, MESH_INCOMPLETE)
// is results/judging/probe_rules.h's judge_mesh. The probe's own retry reads it too: only a dial
// that got no answer is dialled again.
bool failure_is_an_answer(ErrorClass cls, bool cut_by_phase_deadline);

// Blame the root: pairs that failed because one end was frozen or dead are not a
// network verdict. Given the ranks the liveness watch (rendezvous/peer_watch.h) judges silent or
// lost, moves every failed pair from or to one of them into pairs_lost (no longer tested, not
// MESH_BLOCKED) and drops them from silent_ranks and unfinished_ranks (the watch's own
// PEER_STALLED / PEER_LOST names them, with the right cause); an MTU black hole from or to one
// of them is dropped too (a rank that froze between the small and the full datagram is not a
// path's MTU). Returns those it found involved.
std::vector<int> set_aside_stopped_ranks(MeshResult& m, const std::vector<int>& stopped);

}  // namespace ncclsmoke::rendezvous
