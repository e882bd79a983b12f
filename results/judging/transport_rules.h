#pragma once
// The rules of the transports phase: what each backend's measured outcome (TransportFacts,
// facts/transport.h's TransportOutcome, as harness/run/transport_phase.h's measure_transports returns
// it) means, as the phase's status, the verdict's rows and identities, and findings. Pure: no I/O, no clock,
// no branch on a backend's name or on its private JSON; every finding through the table.
//
// Per outcome, in the order given (phase "transport:<name>"):
// - not_built (no such backend, or not compiled here) -> "skipped", detail = why,
//   TRANSPORT_UNAVAILABLE naming this rank.
// - error from the backend (TransportFailureFacts, source transport): unavailable -> "skipped" + TRANSPORT_UNAVAILABLE;
//   init_failed and other -> "fail" + TRANSPORT_INIT_FAILED; timeout -> "fail" +
//   TRANSPORT_TIMEOUT; peer_lost -> "fail" + PEER_LOST naming the peer ("a peer (the transport
//   does not say which)" when it does not), with the table's layer ("run"). Detail
//   "<stage>: <message>"; evidence {error_kind, waited_s, detail: the backend's evidence}.
// - error from the store during the transport (source store) -> "fail" + RENDEZVOUS_LOST.
// - a timeout when the run's --timeout was the nearer deadline (run_deadline_bound) ->
//   "inconclusive" + RUN_TIMEOUT naming this phase: the run ran out, the transport did not fail.
// - not_started (the run's deadline had passed before it) -> "not_run", no finding (the
//   RUN_TIMEOUT of the phase it cut, or the watchdog's, says why).
// - measured (stage done): world rows (rank -1) and per-rank rows (the sweep's per-rank figures),
//   one identity row (observed = identify(), plus the typed link stats under "link_stats"; expected
//   = the network report's expectation); the network report, when the backend gave one, is judged
//   by judge_nccl_network (nccl_judge.h); any wrong element -> DATA_CORRUPTION and "fail"; a sweep
//   whose figures did not all arrive -> RESULTS_MISSING (warning); else "pass", detail
//   "<n> sizes/modes measured".
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/judging/facts_transport.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {


struct TransportJudgement {
  std::vector<Phase> phases;
  std::vector<TransportRow> rows;
  std::vector<TransportIdentity> identities;
  std::vector<Finding> findings;
};

TransportJudgement judge_transports(const std::vector<TransportFacts>& outcomes,
                                    const TransportJudgeContext& ctx);

// Link stats in a verdict's identity rows (the one documented layout, read by STRAGGLER in
// judge.h, written here): observed["link_stats"] = {"to_next": {"rank", "send_blocked_s",
// "bytes", and for TCP backends "retrans", "segs_out", "rtt_us"}, "from_prev": {"rank",
// "recv_wait_s", "bytes"}} (read by link_rules.h too; other members, e.g. a backend's
// "host" or "collectives", are kept). Verdicts written before the typed stats use this layout too.
inline constexpr const char* kLinkStatsKey = "link_stats";
// A number member of an object from a verdict (`obj[key]` as T), else `fallback`: absent, not a
// number, or `obj` not an object. The readers of the documented layouts here and in link_rules.h.
template <class T>
T number_or(const nlohmann::json& obj, const char* key, T fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<T>() : fallback;
}
void write_link_stats(nlohmann::json& observed, const LinkFacts& stats);
// nullopt unless to_next.send_blocked_s is a finite number; absent members read as the defaults
// (ranks -1, zeros). `link_stats`: the object under kLinkStatsKey (a rank's pairwise summary
// carries it alone).
std::optional<LinkFacts> link_stats_of(const TransportIdentity& id);
std::optional<LinkFacts> link_stats_from(const nlohmann::json& link_stats);

}  // namespace ncclsmoke::results
