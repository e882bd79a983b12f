#pragma once
// Resolve and connect under a deadline, the way c10d's SocketConnectOp does it, but with every
// attempt recorded and classified so the caller can say *why* a rank could not join:
//   dns          the name did not resolve (retried inside the deadline: headless-Service records
//                appear seconds after the pod starts)
//   refused      RST: the host is up and nothing listens (or a REJECT rule)
//   timed_out    no answer to the SYN before the deadline: a DROP rule (security group /
//                NetworkPolicy) or a dead host
//   unreachable  no route
// Every address the name resolves to (IPv4 and IPv6) is tried in each round; each attempt is a
// non-blocking connect bounded by the remaining deadline (and by 5 s, so a dropped SYN on one
// address does not starve the others), and rounds are separated by Backoff, never past the
// deadline. The name lookup runs on a helper thread so a slow resolver cannot outlive the deadline
// (a numeric address is converted in place: no resolver, no thread). A connect that succeeded is
// never timed_out: a server that then never answers is ErrorClass::stalled (TcpStore's handshake,
// the mesh hello), which is not a firewall.
//
// Failure class precedence (the StoreError thrown when no address connected):
//   dns > refused > timed_out > unreachable > reset > other
//   dns          only when no round ever resolved the name (no TCP attempt was made);
//   refused      any attempt was refused: some host on that name answered, so the listener (server
//                not up yet, wrong port, REJECT rule) is the thing to fix, whatever else was seen;
//   timed_out    no refusal, and some attempt went unanswered (poll ran out / ETIMEDOUT): a DROP;
//   unreachable  only no-route errors; reset / other are what is left.
// The message lists every distinct (address, error) once with its count, so a mix (e.g. IPv6
// refused, IPv4 dropped) is never hidden by the class.
// This is the connect half of the net layer (net.h has the addresses it formats and splits).
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

#include "rendezvous/deadline.h"
#include "rendezvous/net.h"
#include "rendezvous/store_error.h"

namespace ncclsmoke::rendezvous {

// Exponential backoff with jitter between connect rounds (c10d: 500 ms x 1.5 +- 50 %, cap 60 s;
// our default cap is shorter because our deadlines are seconds, not minutes).
struct Backoff {
  std::chrono::milliseconds initial{100};
  double multiplier = 1.5;
  double jitter = 0.5;  // +- fraction
  std::chrono::milliseconds max{2000};
};

struct ConnectAttempt {
  std::string address;  // "10.0.0.7:29500", "[::1]:29500", or the host name for a DNS failure
  ErrorClass error_class = ErrorClass::other;
  int sys_errno = 0;    // errno, or the getaddrinfo code for DNS failures
  std::string message;  // strerror / gai_strerror
  double at_s = 0;      // seconds since connect began
};

struct ConnectReport {
  std::string host;
  uint16_t port = 0;
  std::string peer_address;   // the address that answered
  std::string local_address;  // our side of the connection
  std::string local_interface;  // interface that owns local_address ("" if unknown)
  std::vector<ConnectAttempt> attempts;  // failed attempts (bounded: first ones + last ones)
  int rounds = 0;
  int dns_failures = 0;
  double elapsed_s = 0;
};

struct Connected {
  int fd = -1;  // connected, blocking, TCP_NODELAY; caller owns it
  ConnectReport report;
};

// The same connect without an exception, for callers outside the store (the socket transport,
// which maps the class to its TransportError): fd >= 0 on success; else fd is -1 and error_class
// and error are exactly what connect_tcp would throw (the report still lists the attempts).
// One engine, two faces, so the classified diagnostics are written once and no caller has to
// catch a StoreError only to re-wrap it.
struct ConnectOutcome {
  int fd = -1;  // connected, blocking, TCP_NODELAY; caller owns it
  ConnectReport report;
  ErrorClass error_class = ErrorClass::other;  // when fd < 0
  std::string error;                           // when fd < 0: the full sentence
  bool ok() const { return fd >= 0; }
};
// `max_segment_bytes` > 0: the TCP maximum segment size this end announces (TCP_MAXSEG, set
// before connect), so that neither end sends a segment larger than that; 0 leaves the route's.
ConnectOutcome try_connect_tcp(const std::string& host, uint16_t port, Deadline deadline,
                               const Backoff& backoff = {}, int max_segment_bytes = 0);

// Connects or throws StoreError whose class is the most telling failure seen (timed_out when
// every attempt was unanswered, refused when the host answered with RST, dns when the name never
// resolved ...) and whose message names host, port, each distinct error and the time waited.
Connected connect_tcp(const std::string& host, uint16_t port, Deadline deadline,
                      const Backoff& backoff = {}, int max_segment_bytes = 0);

// Class of a connect()/send()/recv() errno: ECONNREFUSED -> refused; ETIMEDOUT -> timed_out;
// EHOSTUNREACH, ENETUNREACH, EHOSTDOWN, ENETDOWN, EADDRNOTAVAIL, EAFNOSUPPORT -> unreachable;
// ECONNRESET, EPIPE, ECONNABORTED -> reset; anything else -> other.
ErrorClass classify_errno(int err);

// Sleep before connect round `round` + 1 (round 0 is the first retry): initial * multiplier^round,
// scaled by (1 + jitter * (2u - 1)) for u in [0, 1), then capped at backoff.max and at `remaining`.
Millis backoff_delay(const Backoff& backoff, int round, double u, Millis remaining);


}  // namespace ncclsmoke::rendezvous
