#pragma once
// The mesh probe: every rank listens on a port, publishes it in the store, and connects to its
// peers — all pairs up to a threshold, ring neighbours plus k random peers beyond it — so a
// blocked rank-to-rank path is named before a collective hangs on it. Pairs are directed: a DROP
// rule on host H's INPUT blocks every x -> H connection while H -> x still works, which is how the
// suspect host is told apart.
//
// Keys (under the caller's PrefixStore):
//   mesh/addr/<r>     "ip:port" rank r listens on (published once it listens)
//   mesh/result/<r>   JSON of rank r's failed pairs
//   mesh/done         JSON written by rank 0 once every result is in (or the deadline passed):
//                     all failed pairs and the ranks whose result never came; until it appears
//                     every rank keeps its listener open.
#include <cstdint>
#include <string>
#include <vector>

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
};

struct PairFailure {
  int from = -1;
  int to = -1;
  std::string to_address;
  ErrorClass error_class = ErrorClass::other;
  std::string message;
  double waited_s = 0;
};

struct MeshResult {
  std::string listen_address;        // "ip:port" we listened on
  std::vector<int> peers;            // peers this rank dialled
  std::vector<PairFailure> failures; // ours, or (after mesh/done) everyone's
  std::vector<int> silent_ranks;     // ranks that never published an address or a result
  std::size_t pairs_tested = 0;      // ours, or everyone's once the summary is in
  bool summary_received = false;     // rank 0's mesh/done arrived (always true on rank 0)
  double duration_s = 0;
};

// Which peers `rank` dials: every other rank when ranks.size() <= threshold; otherwise the ring
// neighbours plus `random_peers` others chosen deterministically from the rank (reproducible).
std::vector<int> mesh_peers(int rank, const std::vector<int>& ranks, std::size_t threshold,
                            std::size_t random_peers);

// Runs the probe. Throws StoreError when the store itself fails (RENDEZVOUS_LOST), or when it
// cannot listen at all.
MeshResult run_mesh_probe(Store& store, const MeshOptions& options);

// "1.2.3.4:5" / "[::1]:5" -> host, port. False when malformed.
bool split_host_port(const std::string& text, std::string& host, uint16_t& port);

}  // namespace ncclsmoke::rendezvous
