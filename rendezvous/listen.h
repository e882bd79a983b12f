#pragma once
// A non-blocking, CLOEXEC TCP listener on a numeric address (no resolver: the mesh and the peer
// watch listen on the address the rank already uses to reach the store), on the first free port of
// [port_min, port_max] (0/0: an ephemeral port). Shared by the mesh probe and the liveness watch.
#include <cstdint>
#include <string>

namespace ncclsmoke::rendezvous {

struct Listening {
  int fd = -1;
  uint16_t port = 0;  // the port bound (read back, so 0/0 reports the ephemeral one)
};

// `who` prefixes error messages ("mesh: rank 3", "peer watch: rank 3"). Throws StoreError: invalid
// when the address is not numeric, other when no port of the range could be bound (the message
// names the address, the range and the last error).
Listening listen_in_range(const std::string& bind_address, uint16_t port_min, uint16_t port_max,
                          int backlog, const std::string& who);

}  // namespace ncclsmoke::rendezvous
