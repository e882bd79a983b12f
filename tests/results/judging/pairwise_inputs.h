#pragma once
// Inputs of the pairwise decision for tests (results/judging/pairwise_rules.h), shared by the
// judging tests and the harness's wire-form tests: a rank whose transports passed, ring link
// stats with TCP's counters, and four healthy hosts.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "results/judging/pairwise_rules.h"

namespace ncclsmoke::results::testing {

inline RankSummary healthy(int rank, const std::string& host,
                           std::vector<std::string> names = {"socket"}) {
  RankSummary s;
  s.rank = rank;
  s.host = host;
  for (const auto& n : names) {
    TransportSummary t;
    t.transport = n;
    t.status = PhaseStatus::pass;
    s.transports.push_back(t);
  }
  return s;
}

// Ring link stats of one rank to its next, with TCP's counters.
inline LinkFacts ring_stats(int next, std::int64_t retrans, std::int64_t segs) {
  LinkFacts s;
  s.next_rank = next;
  s.send_blocked_s = 0.0;
  s.bytes_sent = 1 << 20;
  s.tx_retrans = retrans;
  s.tx_segs_out = segs;
  s.tx_rtt_us = 200.0;
  return s;
}

inline PairwiseInputs four_hosts() {
  PairwiseInputs in;
  in.requested = {"socket"};
  in.world_size = 4;
  for (int r = 0; r < 4; ++r) {
    auto s = healthy(r, "host" + std::to_string(r));
    s.transports[0].link_stats = ring_stats((r + 1) % 4, 0, 5000);
    in.summaries.push_back(s);
  }
  return in;
}

}  // namespace ncclsmoke::results::testing
