#pragma once
// Socket helpers shared by the mesh probe and the liveness watch: a listener on a port range, and
// deadline-bound exact sends and receives for their handshakes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "rendezvous/deadline.h"
#include "rendezvous/net.h"  // join_host_port, split_host_port: the addresses these sockets use

namespace ncclsmoke::rendezvous {

struct Listening {
  int fd = -1;
  uint16_t port = 0;  // the port bound (read back, so 0/0 reports the ephemeral one)
};

// A non-blocking, CLOEXEC TCP listener on a numeric address (no resolver: the mesh and the peer
// watch listen on the address the rank already uses to reach the store), on the first free port of
// [port_min, port_max] (0/0: an ephemeral port). `who` prefixes error messages ("mesh: rank 3", "peer watch: rank 3"). Throws StoreError: invalid
// when the address is not numeric, other when no port of the range could be bound (the message
// names the address, the range and the last error).
Listening listen_in_range(const std::string& bind_address, uint16_t port_min, uint16_t port_max,
                          int backlog, const std::string& who);

// Sends all `len` bytes before `deadline`: a send first (MSG_DONTWAIT), poll only when the socket
// is full; EINTR and EAGAIN are retried. The one send loop of the store client, the dialect probe,
// the mesh and the watch. On `error`, *err is the errno.
enum class SendResult { ok, timeout, error };
SendResult send_bytes(int fd, const char* data, std::size_t len, Deadline deadline, int* err);

// send_bytes() of `data`; false on timeout or error.
bool send_all(int fd, const std::string& data, Deadline deadline);

// Receives exactly `n` bytes into `out` before `deadline`. "" on success, else why: "timed out",
// "the peer closed the connection", or the error.
std::string recv_exact(int fd, std::size_t n, std::string& out, Deadline deadline);

}  // namespace ncclsmoke::rendezvous
