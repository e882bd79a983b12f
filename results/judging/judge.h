#pragma once
// Judging: a verdict's measurements against a profile (profile.h), as findings. Pure: it reads
// rows, identities, phases, ranks and world size from the verdict and returns findings; the caller
// appends them and runs apply_verdict() (classify.h). Fail closed: a missing number, a skipped
// transport or an absent baseline gives BASELINE_MISSING (inconclusive), never silence.
//
// Rules, per transport T the profile names (band = by_world_size[world.size], else [0]):
// - Identity: each expected identity key is compared with observed[key] of every identity row of T
//   (case-insensitive; NCCL network aliases as in nccl_judge.h; "provider" compares the core
//   provider before ';', so "tcp;ofi_rxm" is "tcp"). Any differing value -> SILENT_FALLBACK
//   (error), one per transport, naming the ranks/hosts that differ. A key no row reports is "not
//   read", not a mismatch.
// - Gate busbw: the non-synthetic rows of T at band.gate_bytes; the world row (rank -1) if present,
//   else the lowest per-rank busbw (the conservative one). ratio = busbw / band.busbw_gbps:
//     ratio < 0.10 and some expected identity key not read -> SILENT_FALLBACK warning ("suspected":
//       the number sits in a slower transport class's band), alongside the regression below;
//     ratio < fail_ratio -> BANDWIDTH_REGRESSION error; < degraded_ratio -> warning (degraded).
//   When the identity mismatched, the numbers go into that SILENT_FALLBACK's evidence instead.
// - Fail closed (BASELINE_MISSING warning -> inconclusive): no band for (T, world size); T has no
//   non-synthetic rows (skipped/failed/not run: the phase's status and detail are quoted; not for a
//   transport marked `required: false`); no row
//   at the band's gate size; a NaN busbw; rows of a transport the profile does not name; and once
//   when profile == nullptr while non-synthetic rows exist.
// - Synthetic rows (ranks sharing one GPU) are never compared with baselines, and do not count
//   as stragglers either (sharing makes peers unequal by construction).
// STRAGGLER (peer-relative, every transport with rows, profile or not), warning:
// - gate rows (gate == true, rank >= 0): a rank whose time_us (max over its gate rows) is
//   > 1.5 x the median of the others' and more than 1 ms above it;
// - identities carrying link stats (any backend's typed link stats, LinkFacts, read through
//   link_stats_of() in transport_rules.h: observed.link_stats.to_next.send_blocked_s, the layout
//   older verdicts hold too): a rank whose value is > 3 x every other rank's and > 0.5 s is the
//   sender of the slow link to its next rank (to_next.rank; rank+1 when not given).
#include <nlohmann/json.hpp>
#include <vector>

#include "results/judging/profile.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

inline constexpr double kSuspectedFallbackRatio = 0.10;
inline constexpr double kStragglerTimeRatio = 1.5;
inline constexpr double kStragglerTimeFloorUs = 1000;
inline constexpr double kStragglerBlockedRatio = 3.0;
inline constexpr double kStragglerBlockedFloorS = 0.5;

std::vector<Finding> judge(const Verdict& v, const Profile* profile);

// Adds the judge's findings to a verdict's, folding duplicates: when the profile's identity rule
// reports SILENT_FALLBACK for nccl and the run's own --nccl-net check (nccl_judge.h) already
// reported SILENT_FALLBACK on some ranks (recognised by is_nccl_net_check()), the operator gets ONE finding — the profile's (it names
// every mismatched key) — carrying the per-rank log evidence under evidence.nccl_net_check, with
// ranks/hosts united. Everything else is appended as is.
void add_judged_findings(std::vector<Finding>& findings, std::vector<Finding> judged);

// For Verdict::baseline: the profile's name and, per transport, the identity and the band chosen
// for the verdict's world size (null when none). profile == nullptr -> {"profile": null, ...}.
nlohmann::json baseline_record(const Profile* profile, const Verdict& v);

// Identity value comparison used by the identity rule (exposed for tests).
bool identity_value_matches(const std::string& key, const nlohmann::json& expected,
                            const nlohmann::json& observed);

}  // namespace ncclsmoke::results
