#pragma once
// Loss seen by the liveness watch, named as the host it points at. A PEER_STALLED "lossy path"
// warning (run_rules.h) says one rank's heartbeats to another went unanswered while its
// connection retransmitted: the path lost packets, the process may be fine. One witness cannot
// tell which end's path is bad; many can: when watches on at least two other hosts saw loss to
// the ranks of one host, and no other host is named by as many, that host is SLOW_HOST. This is
// what names a host whose loss is so heavy that the transports time out before the per-link
// figures (link_rules.h) are complete. Pure: reads only the merged verdict.
#include <vector>

#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// The witnesses a host needs (distinct hosts other than its own).
inline constexpr std::size_t kLossyHostMinWitnesses = 2;

// SLOW_HOST findings (subject item "lossy path", no transport: every transport's timeouts are
// consequences of it, link_rules.h explain_by_slow_hosts), with the witnesses and their
// retransmits as evidence. None for a host a SLOW_HOST in `v.findings` already names.
std::vector<Finding> judge_lossy_paths(const Verdict& v);

// A witness whose own path is suspect cannot accuse a peer on its word alone. A PEER_STALLED is
// the word of the watches that heard the peer go quiet (its reporters, evidence reported_by and
// seen_by). A witness host is suspect when another finding blames it (suspects.h: a SLOW_HOST,
// the mesh's suspect rank, a lost rank...), or when as many other hosts heard it quiet as heard
// the accused: under heavy loss the lossy host's own watch hears its
// healthy neighbours go quiet, while the lossy host is heard quiet by them. A PEER_STALLED whose
// every witness (on another host than the accused's) is suspect becomes info, says so, and
// blames no one: evidence "witnesses_suspect" lists them (results/verdict/suspects.h reads it).
// A lossy-path PEER_STALLED (origin lossy_path) heard from fewer than kLossyHostMinWitnesses
// hosts is unconfirmed the same way: one witness cannot tell which end of the path loses packets.
// So is any PEER_STALLED heard from one witness host whose watch saw another peer quiet behind
// retransmits (its connections lost packets in this run): a silence it saw without retransmits
// of its own may be the peer's packets lost on its path, retransmitted where it cannot see.
// Two hosts that only hear each other quiet are both left unblamed: a miss, never a healthy host
// set aside.
void discount_suspect_witnesses(Verdict& v);

}  // namespace ncclsmoke::results
