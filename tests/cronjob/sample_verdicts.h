#pragma once
// Verdicts shaped like real ones, shared by the cronjob tests.
#include <cmath>
#include <string>

#include "results/verdict/finding_codes.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::cronjob::testing {

inline results::TransportRow row(const std::string& transport, int rank, std::int64_t bytes,
                                 double busbw, bool gate) {
  results::TransportRow r;
  r.transport = transport;
  r.rank = rank;
  r.bytes = bytes;
  r.count = bytes / 4;
  r.time_us = 100;
  r.algbw_gbps = busbw / 1.5;
  r.busbw_gbps = busbw;
  r.wrong = 0;
  r.gate = gate;
  return r;
}

// A passing 4-rank run over socket with no profile.
inline results::Verdict passing() {
  results::Verdict v = results::new_verdict(0);
  v.tool.version = "0.1.0";
  v.run_id = "20261130T010000Z-00000001";
  v.started_at = "2026-11-30T01:00:00.000Z";
  v.duration_s = 4.5;
  v.scope = results::Scope::global;
  v.verdict = results::Outcome::pass;
  v.exit_code = 0;
  v.world = {4, "127.0.0.1", 29500, results::WorldSource::flags};
  for (int r = 0; r < 4; ++r)
    v.ranks.push_back({r, results::RankStatus::joined, "host-" + std::to_string(r), "", 100 + r, "127.0.0.1", "lo", ""});
  v.phases = {{"world", results::PhaseStatus::pass, 0.01, true, ""},
              {"rendezvous", results::PhaseStatus::pass, 0.2, true, ""},
              {"mesh", results::PhaseStatus::pass, 0.1, true, ""},
              {"transport:socket", results::PhaseStatus::pass, 3.1, true, ""}};
  v.transports = {row("socket", -1, 1 << 20, 1.25, false), row("socket", -1, 4 << 20, 2.5, true)};
  v.identities = {{"socket", -1, nullptr, {{"network", "Socket"}, {"interface", "lo"}}}};
  v.baseline = nullptr;
  return v;
}

// A failing run judged against profile `profile`: nccl fell back to Socket, bandwidth far below
// the baseline, a straggler, plus a transport whose gate number was not measured (NaN).
inline results::Verdict failing(const std::string& profile = "p5.48xlarge-efa") {
  results::Verdict v = passing();
  v.run_id = "20261130T013000Z-00000002";
  v.started_at = "2026-11-30T01:30:00.000Z";
  v.verdict = results::Outcome::fail;
  v.exit_code = 1;
  v.phases.push_back({"transport:nccl", results::PhaseStatus::fail, 2.0, true, ""});
  v.phases.push_back({"transport:fabric", results::PhaseStatus::skipped, 0, false, "no provider"});
  const std::int64_t gate = 256 << 20;
  v.transports.push_back(row("nccl", -1, gate, 1.2, true));
  auto unmeasured = row("fabric", -1, 8 << 20, std::nan(""), true);
  unmeasured.algbw_gbps = std::nan("");
  v.transports.push_back(unmeasured);
  v.identities.push_back({"nccl", -1, {{"network", "Libfabric"}}, {{"network", "Socket"}}});
  v.baseline = {{"profile", profile},
                {"transports",
                 {{{"transport", "nccl"},
                   {"band",
                    {{"busbw_gbps", 400.0},
                     {"gate_bytes", gate},
                     {"degraded_ratio", 0.9},
                     {"fail_ratio", 0.5}}}}}}};
  v.findings = {
      results::make_finding(results::Code::SILENT_FALLBACK, "nccl: expected Libfabric, observed Socket"),
      results::make_finding(results::Code::BANDWIDTH_REGRESSION, "nccl: 1.2 GB/s vs 400 GB/s"),
      results::make_finding(results::Code::BANDWIDTH_REGRESSION, "nccl: in-place also low"),
      results::make_finding(results::Code::STRAGGLER, "rank 2 slow", {2}, {"host-2"}),
  };
  v.findings[1].severity = results::Severity::error;
  v.findings[2].severity = results::Severity::error;
  return v;
}

}  // namespace ncclsmoke::cronjob::testing
