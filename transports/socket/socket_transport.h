#pragma once
// Ring all-reduce over TCP (reduce-scatter then all-gather), chunked and pipelined so sending,
// receiving and reducing overlap. Options (TransportContext::options):
//   socket.ifname   NCCL_SOCKET_IFNAME syntax: prefix list, "^" excludes, "=" exact
//                   (default: NCCL_SOCKET_IFNAME from the environment, else the interface that
//                   reaches the store)
//   socket.nconn    connections per peer (default 1)
//   socket.chunk    pipeline chunk bytes (default 512 KiB)
#include <memory>

#include "transports/transport.h"

namespace ncclsmoke::transports {

std::unique_ptr<Transport> make_socket_transport();

}  // namespace ncclsmoke::transports
