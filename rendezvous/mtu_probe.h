#pragma once
// The mesh's path-MTU check: a path that carries small packets but silently drops
// those as large as the interfaces' MTU (a switch port, bridge, tunnel or overlay with a smaller
// MTU that sends no ICMP "fragmentation needed") passes the mesh's TCP hello, then stalls every
// collective on its first full-size segment. The mesh names it before any transport runs.
//
// How: every mesh listener also answers UDP datagrams on its own address and TCP port
// (open_mtu_echo / answer_mtu_probes: a 24-byte ack naming the size received and the answering
// interface's MTU). For a pair whose TCP hello passed, the dialling rank (probe_path_mtu) sends
// don't-fragment datagrams (IP_PMTUDISC_DO) from its mesh address:
//   1. a small one (548 bytes of payload, a 576-byte packet) — no answer at all means UDP is
//      filtered or the peer has no echo: not checked, never a finding;
//   2. one that fills the smaller of the two ends' MTUs (this host's route MTU towards the peer,
//      IP_MTU; the peer's interface MTU from its ack) — answered: the path is fine;
//   3. when 1 passes and 2 never does, the largest size that crosses is searched (rounds of up to
//      15 sizes in flight at once, so a 1500-byte path takes 3 rounds and a 9001 one 4): that is
//      the path MTU, and the pair is a black hole.
// Each step retries a few times with a short per-try wait (8 round trips of the hello or the
// small probe, 100 to 500 ms): a healthy path costs two round trips, a black hole about nine
// waits (0.8 s on a LAN); everything ends by the caller's deadline (the mesh gives it one pair
// timeout). A send that fails with EMSGSIZE
// means the kernel learned a smaller path MTU from an ICMP answer: path-MTU discovery works there
// and TCP adapts, so that pair is not a black hole.
//
// Directional, like the mesh's pairs: rank A's probe of B checks A -> B only (B's ack is small).
#include <cstdint>
#include <string>

#include "facts/mesh.h"
#include "rendezvous/deadline.h"

namespace ncclsmoke::rendezvous {

// One black-holed (or checked) path, as the sender saw it. MTUs are IP packet sizes in bytes.
using facts::MtuPath;  // facts/mesh.h: judging reads the same type

enum class MtuOutcome {
  skipped,     // not probed: the peer is on our own address (no MTU hop), or no UDP socket
  passed,      // a packet of probed_mtu crossed
  black_hole,  // small packets cross, probed_mtu ones vanish without an ICMP answer
  learned,     // the kernel learned a smaller path MTU (ICMP answered): discovery works
  no_answer,   // not even the small datagram was answered (UDP filtered, no echo): not checked
  cut,         // the deadline ended the probe before it concluded: not checked
};
const char* to_string(MtuOutcome o);

struct MtuProbeResult {
  MtuOutcome outcome = MtuOutcome::skipped;
  MtuPath path;
  double duration_s = 0;
};

// The echo side: a UDP socket bound to `bind_ip` (numeric) and `port`, non-blocking. -1 when it
// cannot be opened (the address is not numeric, the UDP port is taken): the peers' probes then go
// unanswered, which they read as "not checked".
int open_mtu_echo(const std::string& bind_ip, uint16_t port);

// Answers every datagram waiting on `fd` (never blocks): a probe gets the ack with `rank` and
// `interface_mtu`; anything else is ignored. For tests, a faulty path: `answer_up_to` > 0 drops
// datagrams larger than that many bytes unanswered (a hop with a smaller MTU), and
// `drop_probability` drops that share of all datagrams at random (a lossy path).
void answer_mtu_probes(int fd, int rank, int interface_mtu, int answer_up_to = 0,
                       double drop_probability = 0);

// The MTU of the interface that owns numeric address `ip` (SIOCGIFMTU); 0 when unknown. `name`,
// when given, receives the interface's name.
int interface_mtu_of(const std::string& ip, std::string* name = nullptr);

// Whether a path from `local_ip` to `peer_ip` stays inside this host (the same address, or
// loopback): no MTU hop to check there.
bool same_host_path(const std::string& local_ip, const std::string& peer_ip);

// Probes the path from our mesh address `local_ip` to the peer's echo at `peer_ip`:`port` (the
// steps above), whatever the addresses (the mesh leaves out same_host_path pairs itself).
// `rtt_hint`: how long the pair's TCP hello took (sets the first per-try wait). Returns by
// `deadline` (plus one poll's rounding).
MtuProbeResult probe_path_mtu(int self, int peer, const std::string& local_ip,
                              const std::string& peer_ip, uint16_t port, Millis rtt_hint,
                              Deadline deadline);

}  // namespace ncclsmoke::rendezvous
