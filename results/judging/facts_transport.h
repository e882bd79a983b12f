#pragma once
// What the transports phase measured for one requested backend, as plain facts judging reads
// (transport_rules.h judge_transports; the link stats also link_rules.h and judge.h), who judges
// them (TransportJudgeContext), and one pair of a pairwise round (PairSample). The harness
// builds them from the transports' own TransportOutcome (harness/observe.h), so judging links no
// transport code; a test builds them by hand.
//
// A leaf: the standard library and nlohmann's JSON only. Each field is one the rules read; the
// meaning of each is the transports' (transports/sweep.h TransportOutcome, transports/transport.h
// LinkStats and NetworkReport), restated here where a rule depends on it.
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ncclsmoke::results {

// One message size of a sweep: the world's figures (mean time over ranks, the wrong elements
// summed over ranks, -1 when not checked) and, by rank, each rank's own.
struct SweepRowFacts {
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  std::string dtype;  // "float32", "bfloat16": the verdict row's spelling
  bool in_place = false;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::int64_t wrong = 0;
  std::vector<double> rank_time_us;
  std::vector<std::int64_t> rank_wrong;
  std::vector<double> rank_algbw_gbps;  // NaN where a rank has no time
  std::vector<double> rank_busbw_gbps;
  bool gate = false;
};

// What a ring backend saw on its two links: blocked sending to the next rank, waiting for the
// previous one's bytes, and the kernel's view of the link to the next (TCP_INFO; -1 / NaN when the
// backend cannot see it, i.e. it is not TCP). Written into the identity row's "link_stats"
// (transport_rules.h write_link_stats) and read back from any verdict (link_stats_of).
struct LinkFacts {
  int next_rank = -1;
  double send_blocked_s = 0;
  std::int64_t bytes_sent = 0;
  int prev_rank = -1;
  double recv_wait_s = 0;
  std::int64_t bytes_received = 0;
  std::int64_t tx_retrans = -1;
  std::int64_t tx_segs_out = -1;
  double tx_rtt_us = std::numeric_limits<double>::quiet_NaN();
};

// The network the backend was asked to use (null: nothing asked) and what its own evidence says
// carried the bytes (null: none read): judged by nccl_judge.h judge_nccl_network.
struct NetworkFacts {
  nlohmann::json expected;
  nlohmann::json observed;
};

// How a backend failed (transports::ErrorKind, judging's copy of the values it branches on).
enum class TransportFailureKind { unavailable, init_failed, timeout, peer_lost, other };
// The spelling in a finding's evidence ("error_kind"); the same words as transports'
// to_string(ErrorKind) (tests/harness/observe_test.cpp keeps the two equal).
inline const char* to_string(TransportFailureKind k) {
  switch (k) {
    case TransportFailureKind::unavailable: return "unavailable";
    case TransportFailureKind::init_failed: return "init_failed";
    case TransportFailureKind::timeout: return "timeout";
    case TransportFailureKind::peer_lost: return "peer_lost";
    case TransportFailureKind::other: return "other";
  }
  return "other";
}

struct TransportFailureFacts {
  // The backend threw (kind says how), or the store failed under it (RENDEZVOUS_LOST).
  enum class Source { transport, store };
  Source source = Source::transport;
  TransportFailureKind kind = TransportFailureKind::other;  // source == transport
  std::string message;
  int peer = -1;            // the rank involved, -1 when the backend does not say
  nlohmann::json evidence;  // the backend's evidence (null = none)
  double waited_s = 0;      // from the phase's start to the error
};

// One requested backend. Exactly one of: not_built (it could not even be made: why), not_started
// (the run's deadline had passed before it: why), error (it failed in `stage`), or measured
// (stage "done": rows, identity, links, network).
struct TransportFacts {
  std::string name;
  std::optional<std::string> not_built;
  std::optional<std::string> not_started;
  std::string stage = "open";  // the last stage entered: "open", "sweep", "identify", "done"
  double duration_s = 0;
  std::vector<SweepRowFacts> rows;  // only when measured
  bool sweep_complete = false;      // every rank's figures arrived
  nlohmann::json identity;          // identify()'s object; null when not reached
  bool synthetic = false;           // ranks share one device: never compared with baselines
  std::optional<LinkFacts> links;
  std::optional<NetworkFacts> network;
  std::optional<TransportFailureFacts> error;
  // The run's --timeout, not the transport's own, was the nearer deadline: a timeout then is the
  // run's (RUN_TIMEOUT), not the transport's.
  bool run_deadline_bound = false;
};

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
};
inline constexpr const char* kPairUnavailable = "unavailable";

}  // namespace ncclsmoke::results
