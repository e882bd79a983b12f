#pragma once
// Ring all-reduce over TCP (reduce-scatter then all-gather), chunked and pipelined so sending,
// receiving and reducing overlap (the engine and its pipelining: ring.h). Options
// (TransportContext::options):
//   socket.ifname   NCCL_SOCKET_IFNAME syntax: prefix list, "^" excludes, "=" exact, "lo" and
//                   "docker*" only when named (ifname.h). Default: NCCL_SOCKET_IFNAME from the
//                   environment, else the address this rank reached the store from.
//   socket.nconn    connections per direction, chunks striped across them (1..16, default 1)
//   socket.chunk    pipeline chunk bytes (default 1 MiB)
//   socket.bufsize  SO_SNDBUF/SO_RCVBUF to ask for (default 0: the kernel's autotuning, which
//                   beat every fixed size from 256 KiB to 8 MiB on loopback)
// Every rank must use the same nconn and chunk; the handshake checks it.
//
// open(): listens on the chosen address (port 0), publishes "addr/<rank>" = "ip:port" in the
// store, dials rank+1 nconn times and accepts nconn connections from rank-1; each connection
// opens with a handshake (rank, world size, options, connection index) answered by the acceptor's
// rank, so accept order does not matter and a wrong peer fails init_failed on both ends.
//
// Failures: past the deadline -> timeout naming the rank waited on and the bytes moved; a peer
// that closes or resets mid-collective -> peer_lost naming it. A rank that fails leaves
// "abort/<rank>" (kind, peer, message) in the store before closing its connections, so a
// neighbour that only sees the close names the rank at the root of it, not the messenger. After
// an error the transport is closed and every later call repeats that error.
//
// identify(): {"interface", "address", "address_source", "ifname_rule" (the rule used or
// "default"), "matched_interfaces", "listen", "peers": {"send_to": {rank, host, address, local},
// "recv_from": {rank, host, address, remote}}, "nconn", "chunk_bytes", "socket_buffers",
// "link_stats": {"to_next": {rank, host, send_blocked_s, bytes}, "from_prev": {rank, host,
// recv_wait_s, bytes}, "collectives"}}. link_stats sum over the transport's life where this rank
// waited (ring.h, "Link accounting"): all ranks' collective times are alike in a ring, but the
// rank behind a slow egress has by far the largest send_blocked_s and its next neighbour a large
// recv_wait_s. In a world of one, link_stats holds only "collectives".
#include <memory>

#include "transports/transport.h"

namespace ncclsmoke::transports {

std::unique_ptr<Transport> make_socket_transport();

}  // namespace ncclsmoke::transports
