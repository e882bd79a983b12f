#pragma once
// What the transports phase measured for one requested backend, as judging reads it
// (transport_rules.h judge_transports; the link stats also link_rules.h and judge.h): the
// transports' own types (facts/transport.h), under the names the rules use. Who judges them
// (TransportJudgeContext), and one pair of a pairwise round (PairSample). Judging links no
// transport code; a test builds them by hand.
//
// A leaf: the standard library, nlohmann's JSON and facts/ only.
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "facts/transport.h"

namespace ncclsmoke::results {

// What a ring backend saw on its two links (facts/transport.h, the type the backends return):
// written into the identity row's "link_stats" (transport_rules.h write_link_stats) and read back
// from any verdict (link_stats_of).
using LinkFacts = facts::LinkStats;

// The rest of a backend's outcome: its sweep rows, the network that carried the bytes, how it
// failed, and the whole outcome (facts/transport.h, the types the transports phase returns).
using SweepRowFacts = facts::SweepRow;
using TransportFailureKind = facts::ErrorKind;  // with its one spelling ("error_kind")
using facts::to_string;
using NetworkFacts = facts::NetworkReport;
using TransportFailureFacts = facts::TransportFailure;
using TransportFacts = facts::TransportOutcome;

// Who judges: this rank, and the hosts of the others (for the ranks a finding names).
struct TransportJudgeContext {
  int rank = 0;
  std::string host;
  std::map<int, std::string> hosts;  // rank -> host
  double run_timeout_s = 0;          // --timeout, for RUN_TIMEOUT's message
};

// One rank's pair in one pairwise round (what that rank measured of its link to `peer`).
struct PairSample {
  int round = -1;
  int peer = -1;
  std::string peer_host;
  std::int64_t bytes = 0;                               // per all-reduce
  int iters = 0;
  // The median of the timed all-reduces: one that waited out a retransmit timeout (a single
  // segment lost on a healthy, shared bridge costs >= 200 ms) does not make a healthy link look
  // slow, while a link slow on every all-reduce stays slow.
  double time_us = std::numeric_limits<double>::quiet_NaN();
  double busbw_gbps = std::numeric_limits<double>::quiet_NaN();
  std::int64_t retrans = -1;                            // TCP_INFO on this rank's side; -1: not TCP
  std::int64_t segs_out = -1;
  double rtt_us = std::numeric_limits<double>::quiet_NaN();
  std::string error;                                    // non-empty: the pair failed (timeout ...)
  // How it failed: the backend's error kind ("timeout", "peer_lost", "init_failed", "other",
  // "unavailable"), "store" or "wrong_data"; "" when it did not. An "unavailable" pair (the
  // backend cannot run on one of the two ranks: MPI failed there) says nothing of the link and is
  // left out of the link evidence.
  std::string error_kind;
  // The second pass (results/judging/pairwise_rules.h): the suspect host this pair was measured
  // for, met again by a partner the first rounds found healthy; "" in the first rounds.
  std::string suspect_host;
  // The second pass measured this pair again because the first rounds named its link
  // (SLOW_LINK): a link slow once and fine when measured again is not named.
  bool recheck = false;
};
inline constexpr const char* kPairUnavailable = "unavailable";

}  // namespace ncclsmoke::results
