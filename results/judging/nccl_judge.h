#pragma once
// Expected vs observed for the NCCL transport: the decision half of transports/nccl/nccl_log.h
// (which only reports what NCCL's log says). Inputs are JSON so that results/ needs nothing from
// transports/: `expected` is NetExpectation::to_json() ({"network","policy"} or null) and
// `observed` is NcclObserved::to_json() (or null when no log was read at all).
//
// Rules (call after the NCCL transport ran its collectives; an init failure is already its own
// TRANSPORT_INIT_FAILED finding):
// - Nothing observed (no log, an empty log, or a log that names no network) -> RESULTS_MISSING
//   (warning, verdict inconclusive): what carried the bytes is unknown, so the run cannot vouch
//   for the network. Never a silent pass. RESULTS_MISSING is chosen over TRANSPORT_UNAVAILABLE
//   because NCCL did run: only its evidence is missing, and the hint (read the rank's log) fits.
// - No expectation -> nullopt (the observation is still reported in the verdict's identities).
// - Any network named in the log differs from the expected one -> SILENT_FALLBACK (error), in
//   policy observe (what training would get) and in policy pin (NCCL should have failed init
//   instead, so this is reported too, with the policy in the evidence).
// Names match case-insensitively; "Libfabric" == "AWS Libfabric" == "OFI" (aws-ofi-nccl renames
// itself to match NCCL_NET).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// Lower-cased, trimmed; the aws-ofi-nccl aliases become "libfabric".
std::string canonical_nccl_network(std::string_view name);
bool same_nccl_network(std::string_view a, std::string_view b);

// Every finding judge_nccl_network() makes has origin FindingOrigin::nccl_net_check (its evidence
// also says "source": kNcclNetCheckSource, for the reader of verdict.json): add_judged_findings
// (judge.h) folds them by that type, never by the shape of the evidence.
inline constexpr const char* kNcclNetCheckSource = "nccl_net_check";
bool is_nccl_net_check(const Finding& f);

// `rank` < 0 and an empty `host` leave the finding's ranks/hosts empty.
std::optional<Finding> judge_nccl_network(const nlohmann::json& expected,
                                          const nlohmann::json& observed, int rank,
                                          const std::string& host);

}  // namespace ncclsmoke::results
