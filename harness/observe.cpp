#include "harness/observe.h"

namespace ncclsmoke::harness {
namespace {

results::SweepRowFacts sweep_row_facts(const transports::SweepRow& r) {
  return {.bytes = static_cast<std::int64_t>(r.bytes),
          .count = static_cast<std::int64_t>(r.count),
          .dtype = transports::to_string(r.dtype),
          .in_place = r.in_place,
          .time_us = r.time_us,
          .algbw_gbps = r.algbw_gbps,
          .busbw_gbps = r.busbw_gbps,
          .wrong = r.wrong,
          .rank_time_us = r.rank_time_us,
          .rank_wrong = r.rank_wrong,
          .rank_algbw_gbps = r.rank_algbw_gbps,
          .rank_busbw_gbps = r.rank_busbw_gbps,
          .gate = r.gate};
}

results::TransportFailureFacts failure_facts(const transports::TransportFailure& e) {
  using Source = results::TransportFailureFacts::Source;
  return {.source = e.source == transports::TransportFailure::Source::store ? Source::store
                                                                            : Source::transport,
          .kind = failure_kind_fact(e.kind),
          .message = e.message,
          .peer = e.peer,
          .evidence = e.evidence,
          .waited_s = e.waited_s};
}

results::PairFailureFact pair_failure_fact(const rendezvous::PairFailure& f) {
  return {.from = f.from,
          .to = f.to,
          .to_address = f.to_address,
          .error_class = store_error_class_fact(f.error_class),
          .waited_s = f.waited_s};
}

results::MtuPathFact mtu_path_fact(const rendezvous::MtuPath& p) {
  return {.from = p.from,
          .to = p.to,
          .to_address = p.to_address,
          .interface = p.interface,
          .local_mtu = p.local_mtu,
          .peer_mtu = p.peer_mtu,
          .probed_mtu = p.probed_mtu,
          .path_mtu = p.path_mtu};
}

}  // namespace

// ---- the store, the join, the mesh -------------------------------------------------------------

results::StoreErrorClass store_error_class_fact(rendezvous::ErrorClass cls) {
  using C = results::StoreErrorClass;
  switch (cls) {
    case rendezvous::ErrorClass::dns: return C::dns;
    case rendezvous::ErrorClass::refused: return C::refused;
    case rendezvous::ErrorClass::timed_out: return C::timed_out;
    case rendezvous::ErrorClass::stalled: return C::stalled;
    case rendezvous::ErrorClass::unreachable: return C::unreachable;
    case rendezvous::ErrorClass::reset: return C::reset;
    case rendezvous::ErrorClass::protocol: return C::protocol;
    case rendezvous::ErrorClass::limit: return C::limit;
    case rendezvous::ErrorClass::invalid: return C::invalid;
    case rendezvous::ErrorClass::not_found: return C::not_found;
    case rendezvous::ErrorClass::other: return C::other;
  }
  return C::other;
}

results::StoreFailure store_failure(const rendezvous::StoreError& e) {
  return {store_error_class_fact(e.error_class()), e.what()};
}

results::JoinFacts join_facts(const rendezvous::JoinResult& j) {
  results::JoinFacts f;
  f.missing = j.missing;
  f.master_world_size = j.master_world_size;
  if (j.rank_taken_by) f.rank_taken_by = {j.rank_taken_by->host, j.rank_taken_by->pid};
  f.waited_s = j.waited_s;
  f.roster_received = j.roster_received;
  return f;
}

results::MeshFacts mesh_facts(const rendezvous::MeshResult& m) {
  results::MeshFacts f;
  for (const auto& p : m.failures) f.failures.push_back(pair_failure_fact(p));
  f.silent_ranks = m.silent_ranks;
  f.unfinished_ranks = m.unfinished_ranks;
  f.pairs_tested = m.pairs_tested;
  f.pairs_untested = m.pairs_untested;
  f.pairs_lost = m.pairs_lost;
  f.summary_received = m.summary_received;
  f.budget_s = m.budget_s;
  for (const auto& p : m.mtu_black_holes) f.mtu_black_holes.push_back(mtu_path_fact(p));
  f.mtu_black_holes_total = m.mtu_black_holes_total;
  f.mtu_paths_checked = m.mtu_paths_checked;
  f.mtu_paths_unchecked = m.mtu_paths_unchecked;
  f.mtu_values = m.mtu_values;
  return f;
}

std::vector<results::TamperedValueFact> tampered_facts(
    const std::vector<rendezvous::TamperedValue>& values) {
  std::vector<results::TamperedValueFact> out;
  out.reserve(values.size());
  for (const auto& v : values) out.push_back({v.key, v.why});
  return out;
}

// ---- the liveness watch ------------------------------------------------------------------------

results::LostPeerFact lost_peer_fact(const rendezvous::LostPeer& l) {
  return {.rank = l.rank, .host = l.host, .how = l.how, .after_s = l.after_s};
}

results::SilentPeerFact silent_peer_fact(const rendezvous::SilentPeer& s) {
  return {.rank = s.rank,
          .host = s.host,
          .silent_for_s = s.silent_for_s,
          .seen_by = s.seen_by,
          .how = s.how,
          .retransmits = s.retransmits};
}

results::WaitChainFact wait_chain_fact(const rendezvous::WaitChain& c) {
  return {.path = c.path, .root = c.root, .cycle = c.cycle, .root_reason = c.root_reason};
}

// ---- transports --------------------------------------------------------------------------------

results::TransportFailureKind failure_kind_fact(transports::ErrorKind kind) {
  using K = results::TransportFailureKind;
  switch (kind) {
    case transports::ErrorKind::unavailable: return K::unavailable;
    case transports::ErrorKind::init_failed: return K::init_failed;
    case transports::ErrorKind::timeout: return K::timeout;
    case transports::ErrorKind::peer_lost: return K::peer_lost;
    case transports::ErrorKind::other: return K::other;
  }
  return K::other;
}

results::LinkFacts link_facts(const transports::LinkStats& s) {
  return {.next_rank = s.next_rank,
          .send_blocked_s = s.send_blocked_s,
          .bytes_sent = s.bytes_sent,
          .prev_rank = s.prev_rank,
          .recv_wait_s = s.recv_wait_s,
          .bytes_received = s.bytes_received,
          .tx_retrans = s.tx_retrans,
          .tx_segs_out = s.tx_segs_out,
          .tx_rtt_us = s.tx_rtt_us};
}

results::TransportFacts transport_facts(const transports::TransportOutcome& o) {
  results::TransportFacts f;
  f.name = o.name;
  f.not_built = o.not_built;
  f.not_started = o.not_started;
  f.stage = transports::to_string(o.stage);
  f.duration_s = o.duration_s;
  for (const auto& r : o.sweep.rows) f.rows.push_back(sweep_row_facts(r));
  f.sweep_complete = o.sweep.complete;
  f.identity = o.identity;
  f.synthetic = o.synthetic;
  if (o.links) f.links = link_facts(*o.links);
  if (o.network) f.network = results::NetworkFacts{o.network->expected, o.network->observed};
  if (o.error) f.error = failure_facts(*o.error);
  f.run_deadline_bound = o.run_deadline_bound;
  return f;
}

std::vector<results::TransportFacts> transport_facts(
    const std::vector<transports::TransportOutcome>& outcomes) {
  std::vector<results::TransportFacts> out;
  out.reserve(outcomes.size());
  for (const auto& o : outcomes) out.push_back(transport_facts(o));
  return out;
}

}  // namespace ncclsmoke::harness
