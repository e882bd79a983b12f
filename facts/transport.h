#pragma once
// What the transports phase measured for one requested backend (TransportOutcome): its sweep, how
// it failed, its ring's link to the next rank, the network that carried the bytes. Produced by
// transports/ (the backends, transports/sweep.h, harness/run/transport_phase.h's measure_transports),
// read by results/judging/ (transport_rules.h, link_rules.h, pairwise_rules.h) as it is.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "facts/store.h"

namespace ncclsmoke::facts {

enum class ErrorKind {
  unavailable,  // cannot run here (no library, no device, no provider): the phase is skipped
  init_failed,  // should run here but failed to initialise (plugin, NIC, address exchange)
  timeout,      // a collective or the connection set-up exceeded its deadline
  peer_lost,    // a peer closed or reset the connection mid-collective
  other,
};

// The one spelling: in error messages, and in findings' evidence ("error_kind").
inline const char* to_string(ErrorKind k) {
  switch (k) {
    case ErrorKind::unavailable: return "unavailable";
    case ErrorKind::init_failed: return "init_failed";
    case ErrorKind::timeout: return "timeout";
    case ErrorKind::peer_lost: return "peer_lost";
    case ErrorKind::other: return "other";
  }
  return "other";
}

// One rank's view of its ring links over a sweep.
struct LinkStats {
  int next_rank = -1;           // the rank this one sends to
  double send_blocked_s = 0;    // time blocked sending to next_rank
  std::int64_t bytes_sent = 0;
  int prev_rank = -1;           // the rank this one receives from
  double recv_wait_s = 0;       // time waiting for prev_rank's bytes
  std::int64_t bytes_received = 0;
  // What the network says about the link to next_rank: retransmitted and sent segments, and
  // the smoothed round-trip time. A TCP backend reads the kernel's view (TCP_INFO summed over its
  // connections, rendezvous/tcp_info.h; the rtt the largest over them); the fabric backend the
  // device's (EFA retrans_pkts and tx_pkts, transports/fabric/efa_counters.h; no rtt) when the
  // rank has the device to itself. -1 / NaN: the backend cannot see it.
  std::int64_t tx_retrans = -1;
  std::int64_t tx_segs_out = -1;
  double tx_rtt_us = std::numeric_limits<double>::quiet_NaN();
};

enum class DType { float32, bfloat16 };
// The verdict row's spelling.
inline const char* to_string(DType d) { return d == DType::float32 ? "float32" : "bfloat16"; }

// One message size of a sweep: the world's figures (mean time over ranks, the wrong elements
// summed over ranks, -1 when not checked) and, by rank, each rank's own.
struct SweepRow {
  std::size_t bytes = 0;
  std::size_t count = 0;
  DType dtype = DType::float32;
  bool in_place = false;
  double time_us = 0;  // mean over ranks of each rank's mean iteration time
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::int64_t wrong = 0;  // wrong elements summed over ranks; -1 when not checked
  std::vector<double> rank_time_us;        // by rank
  std::vector<std::int64_t> rank_wrong;    // by rank
  std::vector<double> rank_algbw_gbps;     // by rank, from rank_time_us (NaN where no time)
  std::vector<double> rank_busbw_gbps;     // by rank
  bool gate = false;
};

struct SweepResult {
  std::vector<SweepRow> rows;
  bool complete = false;  // every rank's figures arrived
};

// The network the backend was asked to use (`expected`: {"network","policy"} or null when nothing
// was asked) and what its own evidence says carried the bytes (`observed`: the backend's log
// reading, e.g. NcclObserved::to_json(); null when none could be read). Judged by
// results::judge_nccl_network through judge_transports, whatever the backend.
struct NetworkReport {
  nlohmann::json expected;
  nlohmann::json observed;
};

// The last stage a backend entered.
enum class TransportStage { open, sweep, identify, done };
inline const char* to_string(TransportStage s) {
  switch (s) {
    case TransportStage::open: return "open";
    case TransportStage::sweep: return "sweep";
    case TransportStage::identify: return "identify";
    case TransportStage::done: return "done";
  }
  return "open";
}

struct TransportFailure {
  // The backend threw (kind says how), or the store failed under it (RENDEZVOUS_LOST).
  enum class Source { transport, store };
  Source source = Source::transport;
  ErrorKind kind = ErrorKind::other;                   // source == transport
  ErrorClass store_class = ErrorClass::other;          // source == store
  std::string message;
  int peer = -1;               // the rank involved, -1 when the backend does not say
  nlohmann::json evidence;     // the backend's evidence (null = none)
  double waited_s = 0;         // from the phase's start to the error
};

// What happened to one requested backend; no finding, no status. Exactly one of: not_built set
// (the backend could not even be made), not_started set (the run had no time left for it), error
// set (it threw), or stage == done (sweep and identify finished).
struct TransportOutcome {
  std::string name;
  std::optional<std::string> not_built;  // why: "no transport of that name" or why_missing
  TransportStage stage = TransportStage::open;  // the last stage entered
  double duration_s = 0;
  SweepResult sweep;                     // rows only when stage == done
  nlohmann::json identity;               // identify()'s object; null when not reached
  bool synthetic = false;                // identity's "synthetic": ranks share one device
  std::optional<LinkStats> links;        // Transport::link_stats()
  std::optional<NetworkReport> network;  // Transport::network_report()
  std::optional<TransportFailure> error;
  // The run's --timeout, not the transport's own, was the nearer deadline of this attempt: a
  // timeout then is the run's (RUN_TIMEOUT), not the transport's.
  bool run_deadline_bound = false;
  // Set when the run's deadline had passed before this backend was started (why: never opened).
  std::optional<std::string> not_started;
};

}  // namespace ncclsmoke::facts
