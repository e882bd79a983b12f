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

}  // namespace ncclsmoke::results
