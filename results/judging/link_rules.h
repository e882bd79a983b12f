#pragma once
// Per-link evidence and the rules that name a bad node or a bad link from it, with no baseline:
// each host's links are compared with the run's own links between other hosts, so this works in
// the first run on a new cluster; and with the interfaces' own speeds (the line rate, below).
// Pure: no I/O, no clock.
//
// Two sources of links, both read from a verdict's identity rows (one row per transport and rank):
// - the ring (observed["link_stats"], transport_rules.h): every rank's link to its next rank,
//   with where it waited (send_blocked_s) and, for TCP backends, the kernel's retransmits and
//   round-trip time (tx_retrans, tx_segs_out, tx_rtt_us);
// - pairwise rounds (observed["pairwise"], below): rounds of disjoint 2-rank all-reduces, each
//   rank's own pair per round with its time, so a link the ring never uses is measured too.
//
// A link is bad when it is far worse than its reference on one of: the pair's time (pairwise),
// retransmit rate, or (ring) time blocked sending on it (its round-trip time is evidence only).
// The reference leaves the suspect out: a host's links are compared with the lower third of the
// links that do not touch it, a link's with those of the links that touch neither of its ends. So
// a bad host cannot drag its own reference along, which on four hosts (a host in half of all
// pairs and half of the ring's links) hid it, and two bad hosts are both named. The floors, not
// the reference, keep a healthy network's noise from naming a link.
// A host is SLOW_HOST when its bad links are at least two and at least two thirds of its measured
// links, except where the pairwise second pass met it again with partners the first rounds found
// healthy and answered clearly: bad with every one of two or more partners, it is slow
// whatever its other links say; fine with every one, it is not (its bad links are the links' or
// the other ends'). Under random loss a bad host's first rounds can look fine with one partner,
// and a healthy host's bad with the bad one: the second pass asks the question directly;
// the second pass also measures a named link again, and a link it measured again is named only
// when it is bad again in the same way: slower or failed again, or losing packets again after it
// lost packets or failed the first time (one all-reduce that waited out a retransmit timeout is
// not a link); it also measures again a link that lost packets with no slowdown: lossy twice, it
// is named. A bad link whose ends are both fine elsewhere is SLOW_LINK, naming both ends, when it
// is slower (time, or failed), not on retransmits alone. A link with nothing to compare with (two
// hosts: every link touches both) is SLOW_LINK when it loses packets on its own account (>= 2%
// retransmits): either end or the path may be at fault, and SLOW_LINK sets neither aside.
// Links inside one host (loopback) are not judged.
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/verdict/verdict.h"
#include "results/judging/facts_transport.h"

namespace ncclsmoke::results {


// The documented layout: observed["pairwise"] = [{"round", "peer", "peer_host", "bytes", "iters",
// "time_us", "busbw_gbps", "retrans", "segs_out", "rtt_us", "error", "error_kind", "suspect",
// "recheck"}...] (NaN / -1 / "" / false members are left out). Appends to what is there.
inline constexpr const char* kPairwiseKey = "pairwise";
void write_pair_samples(nlohmann::json& observed, const std::vector<PairSample>& samples);
std::vector<PairSample> pair_samples_of(const TransportIdentity& id);

// One directed link as the rules see it, from either source.
struct LinkEvidence {
  std::string transport;
  std::string source;  // "ring" | "pairwise"
  int from_rank = -1, to_rank = -1;
  std::string from_host, to_host;
  int round = -1;
  std::string suspect_host;  // pairwise second pass: the suspect this pair was measured for
  bool recheck = false;      // pairwise second pass: the link measured again (its two ends)
  double time_us = std::numeric_limits<double>::quiet_NaN();
  double send_blocked_s = std::numeric_limits<double>::quiet_NaN();
  double retrans_rate = std::numeric_limits<double>::quiet_NaN();  // retrans / segs_out
  double rtt_us = std::numeric_limits<double>::quiet_NaN();
  std::string error;
};
// Every link in the verdict's identity rows (both sources), hosts from v.ranks.
std::vector<LinkEvidence> link_evidence(const Verdict& v);
// One rank's pair samples of one transport as links: a peer's host from `host_of`, else the
// sample's peer_host; a pair the backend could not run at all (kPairUnavailable) is left out.
std::vector<LinkEvidence> pair_links(const std::string& transport, int rank,
                                     const std::string& host,
                                     const std::vector<PairSample>& samples,
                                     const std::map<int, std::string>& host_of);
// One rank's ring link to its next rank; nullopt when it has none (no next rank, or itself).
std::optional<LinkEvidence> ring_link(const std::string& transport, int rank,
                                      const std::string& host, const LinkFacts& stats,
                                      const std::string& next_host);

// SLOW_HOST / SLOW_LINK findings (subjects as data: hosts, the link's ends, the transport), with
// the per-link figures and the references they were compared with as evidence.
// `lossy_candidates`, when given, receives the host pairs whose first-round pairwise links lose
// packets far more than their reference while no slower (retransmits alone), not explained by a
// slow host and not measured again yet: the second pass measures them again, and a link that loses
// packets again, at 2% or more of what it sent, is named (SLOW_LINK, "lost packets again"); once
// is a busy path's noise, and so is less (healthy links sharing a busy bridge reach 1.5%).
using HostPair = std::pair<std::string, std::string>;  // sorted
std::vector<Finding> judge_links(const std::vector<LinkEvidence>& links,
                                 std::vector<HostPair>* lossy_candidates = nullptr);
inline std::vector<Finding> judge_links(const Verdict& v) { return judge_links(link_evidence(v)); }

// ---- the physical expectation: what the interfaces say they can carry ---------------------------
// A transport is BELOW_LINE_RATE when its best bus bandwidth over the world rows of its largest
// measured size (at least kLineRateMinBytes; synthetic rows left out) is under kLineRateFloor of
// the slowest interface's speed among the ranks (RankInfo::link_speed_mbps). Judged only when
// the world spans two hosts or more and every rank's speed is known: a rank whose speed is
// unknown may be the slow one. A bus bandwidth is what each link carries, so it compares with a
// link's speed directly. The floor: a healthy socket ring on 8 namespace hosts carries 20-40% of
// their veth's 10,000 Mb/s on this 2-core machine, and a TCP stream on a data-centre NIC more; a
// host limited to 200 Mbit/s gives 2%, and so does a fallback from a 400 Gb/s fabric to TCP.
inline constexpr double kLineRateFloor = 0.05;
inline constexpr std::int64_t kLineRateMinBytes = 1 << 20;
struct SlowestLine {
  int mbps = 0;
  std::string host, interface;  // interface: "eth0", or a device port "efa_0/1"
  bool device = false;          // a device port's rate (slowest_device)
  bool carried = true;          // device: its counters moved (false: the bytes went elsewhere)
  double gbps() const { return mbps / 8000.0; }  // Mb/s -> GB/s (10^9 bytes)
};
// The slowest interface of `ranks`; nullopt when the world is on one host or a speed is unknown.
std::optional<SlowestLine> slowest_line(const std::vector<RankInfo>& ranks);
// A transport whose backend reads its device's port rate (the fabric transport: its identity
// row's "port_rate_gbps", from <device>/ports/<port>/rate, the port that carried the bytes or, when
// none did, the fastest present) is held to the slowest of those instead: an EFA or InfiniBand
// port carries far more than the host's Ethernet interface says, and a fabric that fell back to
// TCP shows as a fraction of the port it did not use. Only when every rank of the transport has a
// rate; else the interfaces as above.
std::optional<SlowestLine> slowest_device(const std::string& transport,
                                          const std::vector<TransportIdentity>& identities,
                                          const std::vector<RankInfo>& ranks);
std::vector<Finding> judge_line_rate(const std::vector<TransportRow>& rows,
                                     const std::vector<RankInfo>& ranks,
                                     const std::vector<TransportIdentity>& identities = {});
inline std::vector<Finding> judge_line_rate(const Verdict& v) {
  return judge_line_rate(v.transports, v.ranks, v.identities);
}

// Loss is not death: once a SLOW_HOST is named, the TRANSPORT_TIMEOUTs of its transport, and the
// PEER_LOST / PEER_STALLED findings about ranks on that host (heartbeats late behind the same
// loss), are consequences pointing at it: info, "a consequence of host X's slow links", evidence
// consequence_of_host. A SLOW_HOST of no transport (the watch's, lossy_path_rule.h) explains the
// timeouts of every transport, and the TRANSPORT_INIT_FAILED and SLOW_LINK findings about it. A
// BELOW_LINE_RATE of its transport (of any, for the watch's) is a consequence too. A SLOW_HOST
// that explains an error becomes an error itself (the run failed because of it).
void explain_by_slow_hosts(std::vector<Finding>& findings);

}  // namespace ncclsmoke::results
